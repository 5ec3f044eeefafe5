// File: tools/vec_report_main.cc — vec_report: ONNX models through kiln's
// pipeline (compiler::Compile, oneDNN's layouts, the code kilnc ships) for
// one ISA, listing every loop kernel with its vectorization status and
// reason, plus totals per model and overall; --ops prints every kernel's
// vectorization plan instead (one line per op, backends/cpp/vec_checker.h).
//
//   bazel run //tools:vec_report -- [--isa=avx2] [--disable-pass=NAME]
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
#include "backends/onednn/layout_oracle.h"
#include "compiler/pipeline.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/loop_ir.h"
#include "ir/status_macros.h"
#include "isa/isa.h"

namespace kiln::tools {
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

absl::Status Report(const std::string& dir, const compiler::Target& target,
                    const compiler::PipelineOptions& options, bool scalar_only, bool ops,
                    Totals* all, std::map<std::string, int>* scalar_reasons) {
  const std::string path =
      absl::EndsWith(dir, ".onnx") ? dir : absl::StrCat(dir, "/model.onnx");
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported, frontend::ImportModelFile(path));
  KILN_ASSIGN_OR_RETURN(compiler::CompiledProgram p,
                        compiler::Compile(std::move(imported.graph), target, options, nullptr));
  const ir::loop::LoopProgram& program = p.module.program;
  const backends::cpp::EmittedProgram& emitted = *p.cpp;
  Totals t;
  std::printf("== %s (%s)\n", dir.c_str(), target.isa->name.c_str());
  for (const backends::cpp::EmittedKernel& ek : emitted.kernels) {
    const ir::loop::Kernel& k = program.kernels[ek.kernel_index];
    const bool vec = ek.vec.kind == ir::loop::VecStatus::Kind::kVectorized ||
                     ek.vec.kind == ir::loop::VecStatus::Kind::kTiled;
    ++t.kernels;
    t.vectorized += vec ? 1 : 0;
    t.tiled += ek.vec.kind == ir::loop::VecStatus::Kind::kTiled ? 1 : 0;
    if (!vec) ++(*scalar_reasons)[ReasonKey(ek.vec.reason)];
    if (scalar_only && vec) continue;
    if (ops) {
      backends::cpp::VecCheckOptions check;
      check.parallel_grain = backends::cpp::EmitOptionsForIsa(*target.isa).parallel_grain;
      std::printf("%s", backends::cpp::PrintVecPlan(
                            program, ek.kernel_index,
                            backends::cpp::CheckVectorization(program, ek.kernel_index, check))
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
  compiler::PipelineOptions options;
  std::string isa_name;
  bool scalar_only = false;
  bool ops = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--disable-pass=")) {
      options.disabled_passes.push_back(a.substr(15));
    } else if (absl::StartsWith(a, "--isa=")) {
      isa_name = a.substr(6);
    } else if (a == "--scalar-only") {
      scalar_only = true;
    } else if (a == "--ops") {
      ops = true;
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr,
                 "usage: vec_report [--isa=NAME] [--disable-pass=NAME] [--scalar-only] [--ops] "
                 "MODEL_DIR...\n");
    return 2;
  }
  // The report only reads the emitted code: any registered ISA will do; by
  // default the one kilnc would pick on this CPU.
  compiler::Target target;
  target.isa = isa_name.empty() ? isa::BestHostIsa() : isa::FindIsa(isa_name);
  if (target.isa == nullptr) {
    std::fprintf(stderr, "vec_report: unknown ISA '%s'\n", isa_name.c_str());
    return 2;
  }
  target.conv_layout_oracle = onednn::ConvLayoutOracle();
  target.library_call_oracle = onednn::LibraryCallOracle();
  Totals all;
  std::map<std::string, int> reasons;
  int failed = 0;
  for (const std::string& d : dirs) {
    absl::Status st = Report(d, target, options, scalar_only, ops, &all, &reasons);
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
}  // namespace kiln::tools

int main(int argc, char** argv) { return kiln::tools::Main(argc, argv); }
