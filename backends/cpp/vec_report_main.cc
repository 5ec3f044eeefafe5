// vec_report: imports ONNX models, runs the default graph pipeline, lowers
// and emits them for AVX2, and lists every loop kernel with its
// vectorization status and reason, plus totals per model and overall;
// --ops prints every kernel's vectorization plan instead (one line per op,
// vec_checker.h).
//
//   bazel run //backends/cpp:vec_report -- [--disable-pass=NAME]
//       [--scalar-only] [--ops] ~/.cache/kiln/zoo/resnet50 ...
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpp/emitter.h"
#include "backends/cpp/vec_checker.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "isa/isa.h"
#include "lowering/lower_graph.h"
#include "passes/graph_pipeline.h"

namespace kiln::backends::cpp {
namespace {

struct Totals {
  int kernels = 0;
  int vectorized = 0;  // vectorized or tiled
  int tiled = 0;
};

// The reason with kernel-specific detail (op numbers, buffer names) kept: a
// grouping key strips it to the first clause.
std::string ReasonKey(const std::string& reason) {
  std::string key = reason;
  const size_t semi = key.find(';');
  if (semi != std::string::npos) key.resize(semi);
  return key;
}

absl::Status Report(const std::string& dir, const passes::PipelineOptions& popts,
                    bool scalar_only, bool ops, Totals* all,
                    std::map<std::string, int>* scalar_reasons) {
  const std::string path =
      absl::EndsWith(dir, ".onnx") ? dir : absl::StrCat(dir, "/model.onnx");
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported, frontend::ImportModelFile(path));
  KILN_RETURN_IF_ERROR(passes::DefaultGraphPipeline().Run(&imported.graph, popts));
  KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule lowered,
                        lowering::LowerGraph(imported.graph));
  const isa::VecIsa* avx2 = isa::FindIsa("avx2");
  if (avx2 == nullptr) return absl::InternalError("no avx2 ISA module registered");
  EmitOptions opts = EmitOptionsForIsa(*avx2);
  KILN_ASSIGN_OR_RETURN(EmittedProgram emitted, EmitCpp(lowered.program, opts));
  Totals t;
  std::printf("== %s\n", dir.c_str());
  for (const EmittedKernel& ek : emitted.kernels) {
    const ir::loop::Kernel& k = lowered.program.kernels[ek.kernel_index];
    const bool vec = ek.vec.kind == ir::loop::VecStatus::Kind::kVectorized ||
                     ek.vec.kind == ir::loop::VecStatus::Kind::kTiled;
    ++t.kernels;
    t.vectorized += vec ? 1 : 0;
    t.tiled += ek.vec.kind == ir::loop::VecStatus::Kind::kTiled ? 1 : 0;
    if (!vec) ++(*scalar_reasons)[ReasonKey(ek.vec.reason)];
    if (scalar_only && vec) continue;
    if (ops) {
      VecCheckOptions check;
      check.parallel_grain = opts.parallel_grain;
      std::printf("%s", PrintVecPlan(lowered.program, ek.kernel_index,
                                     CheckVectorization(lowered.program, ek.kernel_index, check))
                            .c_str());
      continue;
    }
    std::printf("  %-28s %-28s %-16s %-10s %s\n", ek.name.c_str(),
                absl::StrJoin(k.ops, ",").substr(0, 28).c_str(),
                absl::StrCat("(", absl::StrJoin(k.ranges, ","), ")").c_str(),
                std::string(ir::loop::VecKindName(ek.vec.kind)).c_str(), ek.vec.reason.c_str());
  }
  std::printf("  total: %d/%d vectorized (%d tiled), %zu extern kernels\n", t.vectorized,
              t.kernels, t.tiled, emitted.skipped_extern_kernels.size());
  all->kernels += t.kernels;
  all->vectorized += t.vectorized;
  all->tiled += t.tiled;
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  passes::PipelineOptions popts;
  bool scalar_only = false;
  bool ops = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--disable-pass=")) {
      popts.disabled.insert(a.substr(15));
    } else if (a == "--scalar-only") {
      scalar_only = true;
    } else if (a == "--ops") {
      ops = true;
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "usage: vec_report [--disable-pass=NAME] [--scalar-only] [--ops] MODEL_DIR...\n");
    return 2;
  }
  Totals all;
  std::map<std::string, int> reasons;
  int failed = 0;
  for (const std::string& d : dirs) {
    absl::Status st = Report(d, popts, scalar_only, ops, &all, &reasons);
    if (!st.ok()) {
      ++failed;
      std::printf("== %s\n  FAILED: %s\n", d.c_str(), std::string(st.message()).c_str());
    }
  }
  std::printf("\nall models: %d/%d kernels vectorized (%.1f%%, %d tiled), %d model(s) failed\n",
              all.vectorized, all.kernels,
              all.kernels == 0 ? 0.0 : 100.0 * all.vectorized / all.kernels, all.tiled, failed);
  std::printf("scalar kernels by reason:\n");
  for (const auto& [reason, count] : reasons) std::printf("  %5d  %s\n", count, reason.c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kiln::backends::cpp

int main(int argc, char** argv) { return kiln::backends::cpp::Main(argc, argv); }
