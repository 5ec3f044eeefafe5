// File: tools/extern_kernel_smoke_main.cc — extern_kernel_smoke: for ONNX
// models in the test layout (model.onnx + test_data_set_0/), imports with
// the data's input shapes, runs kiln's pipeline up to lowering
// (compiler::Compile; no reference fallback calls, plain layouts) and builds
// a OneDnnExternKernel for every extern kernel; prints per model how many
// run on oneDNN and why the others are refused. With --check, each created
// kernel also runs once on seeded random inputs and is compared with the
// reference extern (max error within 1e-4 of the output's largest
// magnitude).
//
//   bazel run //tools:extern_kernel_smoke -- [--check] ~/.cache/kiln/zoo/*
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/onednn/extern_kernel.h"
#include "compiler/pipeline.h"
#include "frontend/onnx/importer.h"
#include "interp/compare.h"
#include "interp/loop_module.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"

namespace kiln::tools {

using onednn::OneDnnExternKernel;
namespace {

struct Totals {
  int externs = 0;
  int created = 0;
  int checked = 0;
  int mismatches = 0;
  std::map<std::string, int> refused;  // "<op>: <reason>" -> count
};

ir::Tensor RandomF32(const ir::Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  ir::Tensor t(ir::DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

// Runs `k` and the reference extern on random activations (constants as
// lowered); true when they agree.
absl::StatusOr<bool> CheckKernel(const ir::loop::LoopModule& lp,
                                 const ir::loop::Kernel& ext,
                                 OneDnnExternKernel& k, std::string* detail) {
  std::vector<ir::Tensor> inputs;
  std::vector<void*> in_ptrs, out_ptrs;
  for (size_t j = 0; j < ext.call.inputs.size(); ++j) {
    const int32_t b = ext.call.inputs[j];
    auto c = lp.constants.find(b);
    inputs.push_back(c != lp.constants.end()
                         ? *c->second
                         : RandomF32(lp.program.buffers[b].shape, 17 + j));
  }
  for (ir::Tensor& t : inputs) in_ptrs.push_back(t.raw_data());
  std::vector<ir::Tensor> got;  // one per output (LSTM/GRU/RNN have up to 3)
  for (int32_t b : ext.call.outputs) {
    got.emplace_back(lp.program.buffers[b].dtype, lp.program.buffers[b].shape);
  }
  for (ir::Tensor& t : got) out_ptrs.push_back(t.raw_data());
  KILN_RETURN_IF_ERROR(k.Run(in_ptrs, out_ptrs));
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> want,
                        interp::RunExternKernel(lp.program, ext, inputs));
  interp::Tolerance tol;
  tol.max_rel = 1e-4;
  for (size_t o = 0; o < got.size(); ++o) {
    const interp::CompareResult r = interp::CompareTensors(got[o], want[o], tol);
    if (!r.ok) {
      *detail = absl::StrCat("output ", o, ": ", r.message);
      return false;
    }
  }
  return true;
}

std::string ModelName(const std::string& dir) {
  return std::filesystem::path(dir + "/").lexically_normal().parent_path().filename().string();
}

absl::Status Smoke(const std::string& dir, bool check, Totals* all) {
  const std::string model = dir + "/model.onnx";
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult first, frontend::ImportModelFile(model));
  frontend::ImportOptions opts;  // bind dynamic dims to the data's shapes
  for (size_t k = 0; k < first.graph.inputs().size(); ++k) {
    const std::string path = absl::StrCat(dir, "/test_data_set_0/input_", k, ".pb");
    if (!std::filesystem::exists(path)) break;
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, frontend::LoadTensorFile(path));
    opts.input_shapes[first.graph.value(first.graph.inputs()[k]).name] = t.shape();
  }
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported,
                        frontend::ImportModelFile(model, opts));
  compiler::PipelineOptions to_loop_ir;
  to_loop_ir.reference_fallback = false;
  to_loop_ir.stop_after = compiler::Stage::kLowering;
  KILN_ASSIGN_OR_RETURN(compiler::CompiledProgram compiled,
                        compiler::Compile(std::move(imported.graph), compiler::Target{},
                                          to_loop_ir, nullptr));
  const ir::loop::LoopModule& lp = compiled.module;
  Totals t;
  std::map<std::string, int> kinds;  // info.op (+ "fused") -> count
  for (const ir::loop::Kernel& k : lp.program.kernels) {
    if (k.kind != ir::loop::Kernel::Kind::kExtern) continue;
    ++t.externs;
    absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> ek =
        OneDnnExternKernel::Create(lp.program, k, lp.constants, {});
    if (!ek.ok()) {
      std::string why(ek.status().message());
      // Drop the kernel name so equal reasons group.
      const size_t colon = why.find("): ");
      if (colon != std::string::npos) why = why.substr(colon + 3);
      ++t.refused[absl::StrCat(k.call.op, ": ", why)];
      continue;
    }
    ++t.created;
    ++kinds[(*ek)->info().op];
    if (check) {
      std::string detail;
      KILN_ASSIGN_OR_RETURN(bool ok, CheckKernel(lp, k, **ek, &detail));
      ++t.checked;
      if (!ok) {
        ++t.mismatches;
        std::printf("    MISMATCH %s %s: %s\n", k.name.c_str(),
                    (*ek)->info().call.c_str(), detail.c_str());
      }
    }
  }
  std::string kind_text;
  for (const auto& [op, n] : kinds) absl::StrAppend(&kind_text, " ", op, "=", n);
  std::printf("%-22s externs %4d  oneDNN %4d  refused %3d  [%s ]%s\n",
              ModelName(dir).c_str(), t.externs, t.created,
              t.externs - t.created, kind_text.c_str(),
              check ? absl::StrFormat("  checked %d, mismatches %d", t.checked,
                                      t.mismatches)
                          .c_str()
                    : "");
  for (const auto& [why, n] : t.refused) std::printf("    %3d x %s\n", n, why.c_str());
  all->externs += t.externs;
  all->created += t.created;
  all->checked += t.checked;
  all->mismatches += t.mismatches;
  for (const auto& [why, n] : t.refused) all->refused[why] += n;
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::tools

int main(int argc, char** argv) {
  bool check = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") {
      check = true;
    } else if (std::filesystem::exists(a + "/model.onnx")) {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "usage: extern_kernel_smoke [--check] MODEL_DIR...\n");
    return 2;
  }
  kiln::tools::Totals all;
  int failed = 0;
  for (const std::string& d : dirs) {
    absl::Status s = kiln::tools::Smoke(d, check, &all);
    if (!s.ok()) {
      ++failed;
      std::printf("%-22s ERROR %s\n", kiln::tools::ModelName(d).c_str(),
                  std::string(s.message()).c_str());
    }
  }
  std::printf("total: externs %d, on oneDNN %d, refused %d, models failed %d", all.externs,
              all.created, all.externs - all.created, failed);
  if (check) std::printf(", checked %d, mismatches %d", all.checked, all.mismatches);
  std::printf("\n");
  return failed == 0 && all.mismatches == 0 ? 0 : 1;
}
