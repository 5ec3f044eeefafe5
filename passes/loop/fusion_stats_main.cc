// fusion_stats: what the loop pipeline does to whole models in the ONNX test
// layout (<dir>/model.onnx + test_data_set_0/): loop-kernel counts before
// and after, each fused kernel's ONNX ops, and with --check whether the
// fused program (loop interpreter, externs on the reference) still matches
// test_data_set_0 and the unfused program.
//
//   fusion_stats [--check] [--ops] [--dump_dir=D] <model_dir>...
//
// The graph pipeline runs without fuse-onednn-post-ops: lowering of its
// kiln.Fused* nodes is not part of LowerGraph yet, so bias/activation ops
// stay loop kernels here (which is also what loop fusion sees without it).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "interp/loop_module.h"
#include "lowering/lower_graph.h"
#include "passes/graph_pipeline.h"
#include "passes/loop/loop_pipeline.h"
#include "interp/compare.h"

namespace kiln::passes {
namespace {

using ir::loop::Kernel;

struct Flags {
  bool check = false;
  bool ops = false;
  std::string dump_dir;
};

int CountLoop(const ir::loop::LoopProgram& p) {
  int n = 0;
  for (const Kernel& k : p.kernels) n += k.kind == Kernel::Kind::kLoop;
  return n;
}

int CountReductions(const ir::loop::LoopProgram& p) {
  int n = 0;
  for (const Kernel& k : p.kernels) {
    n += k.kind == Kernel::Kind::kLoop && !k.reduction_ranges.empty();
  }
  return n;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

absl::Status Report(const std::string& dir, const Flags& flags) {
  const std::string name = std::filesystem::path(dir).filename().string();
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported,
                        frontend::ImportModelFile(dir + "/model.onnx"));
  ir::Graph& g = imported.graph;
  PipelineOptions gopts;
  gopts.disabled.insert("fuse-onednn-post-ops");
  KILN_RETURN_IF_ERROR(DefaultGraphPipeline().Run(&g, gopts));
  KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule lp, lowering::LowerGraph(g));
  const int before = CountLoop(lp.program);
  const int before_red = CountReductions(lp.program);
  const int externs = static_cast<int>(lp.program.kernels.size()) - before;
  const int buffers_before = static_cast<int>(lp.program.buffers.size());
  const ir::loop::LoopModule unfused = lp;
  LoopPipelineOptions lopts;
  if (!flags.dump_dir.empty()) lopts.dump_dir = flags.dump_dir + "/" + name;
  const auto t0 = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(DefaultLoopPipeline().Run(&lp, lopts));
  const double pass_s = Seconds(t0);
  const int after = CountLoop(lp.program);
  std::printf(
      "%s: loop kernels %d -> %d (reduction kernels %d -> %d), extern "
      "kernels %d, buffers %d -> %zu, loop pipeline %.2fs\n",
      name.c_str(), before, after, before_red, CountReductions(lp.program),
      externs, buffers_before, lp.program.buffers.size(), pass_s);
  if (flags.ops) {
    for (const Kernel& k : lp.program.kernels) {
      if (k.kind != Kernel::Kind::kLoop) continue;
      std::printf("  %s (%zu ops%s): %s\n", k.name.c_str(), k.body.size(),
                  k.reduction_ranges.empty() ? "" : ", reduction",
                  absl::StrJoin(k.ops, " ").c_str());
    }
  }
  if (!flags.check) return absl::OkStatus();
  const std::string data = dir + "/test_data_set_0";
  std::vector<ir::Tensor> inputs, want;
  for (size_t k = 0; k < lp.inputs.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, frontend::LoadTensorFile(
                                            absl::StrCat(data, "/input_", k, ".pb")));
    inputs.push_back(std::move(t));
  }
  for (int k = 0;; ++k) {
    const std::string path = absl::StrCat(data, "/output_", k, ".pb");
    if (!std::filesystem::exists(path)) break;
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, frontend::LoadTensorFile(path));
    want.push_back(std::move(t));
  }
  // Per element with a small atol: exported expectations carry float
  // accumulation-order noise near zero that ONNX's atol 1e-7 would flag.
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  auto compare = [&](const std::vector<ir::Tensor>& got,
                     const std::vector<ir::Tensor>& ref, bool* ok) {
    std::string text;
    *ok = got.size() == ref.size();
    for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
      const interp::CompareResult c = interp::CompareTensors(got[i], ref[i], tol);
      *ok = *ok && c.ok;
      absl::StrAppendFormat(&text, " out%d: max_abs %.3g rel_to_max %.3g %s;", i,
                            c.max_abs_error, c.rel_to_max, c.ok ? "ok" : "MISMATCH");
    }
    return text;
  };
  const auto t1 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> got,
                        interp::RunLoopModule(lp, inputs));
  const double fused_s = Seconds(t1);
  bool ok = false;
  std::string text = compare(got, want, &ok);
  std::printf("%s: fused program vs test_data_set_0 (%s, %.1fs):%s %s\n",
              name.c_str(), interp::DescribeTolerance(tol).c_str(), fused_s,
              text.c_str(), ok ? "MATCH" : "DIFFERS");
  const auto t2 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> base,
                        interp::RunLoopModule(unfused, inputs));
  const double unfused_s = Seconds(t2);
  text = compare(base, want, &ok);
  std::printf("%s: unfused program vs test_data_set_0 (%.1fs):%s %s\n",
              name.c_str(), unfused_s, text.c_str(), ok ? "MATCH" : "DIFFERS");
  text = compare(got, base, &ok);
  std::printf("%s: fused vs unfused program:%s %s\n", name.c_str(), text.c_str(),
              ok ? "MATCH" : "DIFFERS");
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::passes

int main(int argc, char** argv) {
  kiln::passes::Flags flags;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") {
      flags.check = true;
    } else if (a == "--ops") {
      flags.ops = true;
    } else if (absl::StartsWith(a, "--dump_dir=")) {
      flags.dump_dir = a.substr(11);
    } else if (absl::StartsWith(a, "--")) {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr,
                 "usage: fusion_stats [--check] [--ops] [--dump_dir=D] <model_dir>...\n");
    return 2;
  }
  int failures = 0;
  for (const std::string& d : dirs) {
    absl::Status s = kiln::passes::Report(d, flags);
    if (!s.ok()) {
      std::printf("%s: ERROR %s\n", d.c_str(), std::string(s.message()).c_str());
      ++failures;
    }
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}
