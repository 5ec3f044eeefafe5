// File: tools/zoo_shapes_main.cc — zoo_shapes: per model in the ONNX test
// layout (<dir>/model.onnx), how long import takes, how many values stay
// non-static after import (with the first few named), and whether kiln's
// pipeline lowers the graph (compiler::Compile up to lowering, no reference
// fallback calls).
//
//   bazel run //tools:zoo_shapes -- [--repeat=N] [--no-fold] <model_dir>...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/pipeline.h"
#include "frontend/onnx/importer.h"
#include "ir/graph/graph.h"

namespace kiln::tools {

using frontend::ImportModelFile;
using frontend::ImportOptions;
using frontend::ImportResult;
namespace {

bool IsStatic(const ir::Value& v) {
  return v.shape_known && std::find(v.shape.begin(), v.shape.end(),
                                    ir::kDynamicDim) == v.shape.end();
}

int Report(const std::string& dir, int repeat, bool fold) {
  ImportOptions options;
  options.fold_shapes = fold;
  const std::string name = std::filesystem::path(dir).filename().string();
  double best = 1e30;
  absl::StatusOr<ImportResult> imported;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    imported = ImportModelFile(dir + "/model.onnx", options);
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  if (!imported.ok()) {
    std::printf("%-20s import FAILED: %s\n", name.c_str(),
                std::string(imported.status().message()).c_str());
    return 1;
  }
  const ir::Graph& g = imported->graph;
  std::vector<std::string> dynamic;
  int count = 0;
  for (const ir::Node& n : g.nodes()) {
    for (ir::ValueId out : n.outputs) {
      if (out == ir::kNoValue || IsStatic(g.value(out))) continue;
      ++count;
      if (dynamic.size() < 3) {
        const ir::Value& v = g.value(out);
        dynamic.push_back(absl::StrCat(
            v.name, v.shape_known ? ir::ShapeToString(v.shape) : "<rank?>"));
      }
    }
  }
  if (fold) {
    // Which op types folding removed, against an unfolded import.
    ImportOptions plain;
    plain.fold_shapes = false;
    absl::StatusOr<ImportResult> unfolded =
        ImportModelFile(dir + "/model.onnx", plain);
    if (unfolded.ok()) {
      std::map<std::string, int> removed;
      for (const ir::Node& n : unfolded->graph.nodes()) ++removed[n.op];
      for (const ir::Node& n : g.nodes()) --removed[n.op];
      std::vector<std::string> parts;
      for (const auto& [op, k] : removed) {
        if (k != 0) parts.push_back(absl::StrCat(op, ":", k));
      }
      std::printf("%-20s folded %s\n", name.c_str(),
                  absl::StrJoin(parts, " ").c_str());
    }
  }
  std::string lower = "lowers";
  compiler::PipelineOptions to_loop_ir;
  to_loop_ir.reference_fallback = false;
  to_loop_ir.stop_after = compiler::Stage::kLowering;
  absl::Status s = compiler::Compile(g, compiler::Target{}, to_loop_ir, nullptr).status();
  if (!s.ok()) lower = absl::StrCat("does NOT lower: ", s.message());
  std::printf("%-20s import %7.3fs  nodes %5zu  non-static %3d %s  %s\n",
              name.c_str(), best, g.nodes().size(), count,
              absl::StrJoin(dynamic, " ").c_str(), lower.substr(0, 200).c_str());
  std::fflush(stdout);
  return s.ok() && count == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kiln::tools

int main(int argc, char** argv) {
  int repeat = 1;
  bool fold = true;
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-fold") {
      fold = false;
      continue;
    }
    if (absl::StartsWith(arg, "--repeat=")) {
      if (!absl::SimpleAtoi(arg.substr(9), &repeat) || repeat < 1) {
        std::fprintf(stderr, "bad %s\n", arg.c_str());
        return 2;
      }
      continue;
    }
    failures += kiln::tools::Report(arg, repeat, fold);
  }
  return failures == 0 ? 0 : 1;
}
