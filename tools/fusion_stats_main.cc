// File: tools/fusion_stats_main.cc — fusion_stats: what the loop passes do
// to whole models in the ONNX test layout (<dir>/model.onnx +
// test_data_set_0/), through kiln's pipeline (compiler::Compile up to the
// loop passes): loop-kernel counts before and after, each fused kernel's
// ONNX ops, and with --check whether the fused program (loop interpreter,
// externs on the reference) still matches test_data_set_0 and the unfused
// program.
//
//   fusion_stats [--check] [--ops] [--dump_dir=D] <model_dir>...
//
// The graph passes run without fuse-onednn-post-ops, so bias and activation
// ops stay loop kernels for loop fusion to see; no conv layout oracle, so
// activations stay plain (the loop interpreter runs externs on plain
// buffers). --dump_dir=D writes D/<model>/graph/ and loop/ as kilnc
// compile --dump-dir does.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "compiler/dump.h"
#include "compiler/pipeline.h"
#include "frontend/onnx/importer.h"
#include "interp/compare.h"
#include "interp/loop_module.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"

namespace kiln::tools {
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

// Keeps the module as lowering made it and times the loop passes.
class Unfused final : public compiler::PipelineObserver {
 public:
  absl::Status AfterLoopPass(int index, const passes::LoopPass* pass, bool changed,
                             const ir::loop::LoopModule& module) override {
    if (index == 0) lowered = module;
    return absl::OkStatus();
  }
  absl::Status AfterStage(compiler::Stage stage, absl::Duration elapsed,
                          const compiler::CompiledProgram& program) override {
    if (stage == compiler::Stage::kLoopPasses) loop_passes = elapsed;
    return absl::OkStatus();
  }
  ir::loop::LoopModule lowered;
  absl::Duration loop_passes;
};

absl::Status Report(const std::string& dir, const Flags& flags) {
  const std::string name = std::filesystem::path(dir).filename().string();
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported,
                        frontend::ImportModelFile(dir + "/model.onnx"));
  compiler::PipelineOptions options;
  options.disabled_passes = {"fuse-onednn-post-ops"};
  options.reference_fallback = false;
  options.stop_after = compiler::Stage::kLoopPasses;
  Unfused unfused;
  std::optional<compiler::DumpObserver> dump;
  if (!flags.dump_dir.empty()) dump.emplace(flags.dump_dir + "/" + name);
  compiler::ObserverList observers({&unfused, dump.has_value() ? &*dump : nullptr});
  KILN_ASSIGN_OR_RETURN(
      compiler::CompiledProgram compiled,
      compiler::Compile(std::move(imported.graph), compiler::Target{}, options, &observers));
  const ir::loop::LoopModule& lp = compiled.module;
  const ir::loop::LoopProgram& before = unfused.lowered.program;
  std::printf(
      "%s: loop kernels %d -> %d (reduction kernels %d -> %d), extern "
      "kernels %d, buffers %zu -> %zu, loop pipeline %.2fs\n",
      name.c_str(), CountLoop(before), CountLoop(lp.program), CountReductions(before),
      CountReductions(lp.program), static_cast<int>(before.kernels.size()) - CountLoop(before),
      before.buffers.size(), lp.program.buffers.size(),
      absl::ToDoubleSeconds(unfused.loop_passes));
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
  const absl::Time t1 = absl::Now();
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> got, interp::RunLoopModule(lp, inputs));
  const double fused_s = absl::ToDoubleSeconds(absl::Now() - t1);
  bool ok = false;
  std::string text = compare(got, want, &ok);
  std::printf("%s: fused program vs test_data_set_0 (%s, %.1fs):%s %s\n",
              name.c_str(), interp::DescribeTolerance(tol).c_str(), fused_s,
              text.c_str(), ok ? "MATCH" : "DIFFERS");
  const absl::Time t2 = absl::Now();
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> base,
                        interp::RunLoopModule(unfused.lowered, inputs));
  const double unfused_s = absl::ToDoubleSeconds(absl::Now() - t2);
  text = compare(base, want, &ok);
  std::printf("%s: unfused program vs test_data_set_0 (%.1fs):%s %s\n",
              name.c_str(), unfused_s, text.c_str(), ok ? "MATCH" : "DIFFERS");
  text = compare(got, base, &ok);
  std::printf("%s: fused vs unfused program:%s %s\n", name.c_str(), text.c_str(),
              ok ? "MATCH" : "DIFFERS");
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::tools

int main(int argc, char** argv) {
  kiln::tools::Flags flags;
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
    absl::Status s = kiln::tools::Report(d, flags);
    if (!s.ok()) {
      std::printf("%s: ERROR %s\n", d.c_str(), std::string(s.message()).c_str());
      ++failures;
    }
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}
