// Test helpers for loop passes (see loop_test_util.h).
#include "passes/loop/loop_test_util.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "interp/loop_module.h"
#include "ir/graph/text.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "ir/loop/verifier.h"
#include "ir/status_macros.h"
#include "lowering/lowering_test_util.h"
#include "testing/filecheck.h"

namespace kiln::passes::loop_testing {

using ir::loop::BufferKind;
using ir::loop::Kernel;

absl::StatusOr<ir::loop::LoopModule> FromLoopText(absl::string_view text) {
  ir::loop::LoopModule lp;
  KILN_ASSIGN_OR_RETURN(lp.program, ir::loop::ParseProgram(text));
  KILN_RETURN_IF_ERROR(ir::loop::VerifyProgram(lp.program));
  for (size_t b = 0; b < lp.program.buffers.size(); ++b) {
    const BufferKind kind = lp.program.buffers[b].kind;
    if (kind == BufferKind::kInput) lp.inputs.push_back(static_cast<int32_t>(b));
    if (kind == BufferKind::kOutput) lp.outputs.push_back(static_cast<int32_t>(b));
    if (kind == BufferKind::kConstant) {
      return absl::InvalidArgumentError("test programs bind no constants");
    }
  }
  return lp;
}

absl::StatusOr<ir::loop::LoopModule> FromGraphText(absl::string_view text) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, ir::ParseGraph(text));
  return lowering::LowerGraph(g);
}

int CountLoopKernels(const ir::loop::LoopProgram& p) {
  int n = 0;
  for (const Kernel& k : p.kernels) n += k.kind == Kernel::Kind::kLoop;
  return n;
}

namespace {

std::vector<ir::Tensor> RandomInputs(const ir::loop::LoopModule& lp,
                                     uint32_t seed) {
  std::vector<ir::Tensor> in;
  for (size_t i = 0; i < lp.inputs.size(); ++i) {
    const ir::loop::Buffer& b = lp.program.buffers[lp.inputs[i]];
    in.push_back(lowering::testing::RandomTensor(b.dtype, b.shape,
                                                 seed * 7919 + i));
  }
  return in;
}

absl::Status Compare(const std::vector<ir::Tensor>& got,
                     const std::vector<ir::Tensor>& want, const Tol& tol,
                     const std::string& context) {
  if (got.size() != want.size()) {
    return absl::InternalError(absl::StrCat("output counts differ: ", got.size(),
                                            " vs ", want.size(), "\n", context));
  }
  interp::Tolerance t;
  t.rtol = tol.rtol;
  t.atol = tol.atol;
  for (size_t i = 0; i < want.size(); ++i) {
    interp::CompareResult r = interp::CompareTensors(got[i], want[i], t);
    if (!r.ok) {
      return absl::InternalError(
          absl::StrCat("output ", i, ": ", r.message, "\n", context));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSameResults(const ir::loop::LoopModule& before,
                              const ir::loop::LoopModule& after,
                              const Tol& tol) {
  const std::vector<ir::Tensor> in = RandomInputs(before, tol.seed);
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> want,
                        interp::RunLoopModule(before, in));
  const std::string context =
      absl::StrCat("before:\n", ir::loop::PrintProgram(before.program),
                   "after:\n", ir::loop::PrintProgram(after.program));
  absl::StatusOr<std::vector<ir::Tensor>> got = interp::RunLoopModule(after, in);
  if (!got.ok()) {
    return absl::Status(got.status().code(),
                        absl::StrCat(got.status().message(), "\n", context));
  }
  return Compare(*got, want, tol, context);
}

absl::Status CheckAgainstReference(absl::string_view graph_text,
                                   const ir::loop::LoopModule& after,
                                   const Tol& tol) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, ir::ParseGraph(graph_text));
  const std::vector<ir::Tensor> in = RandomInputs(after, tol.seed);
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> want, interp::Run(g, in));
  const std::string context = ir::loop::PrintProgram(after.program);
  absl::StatusOr<std::vector<ir::Tensor>> got = interp::RunLoopModule(after, in);
  if (!got.ok()) {
    return absl::Status(got.status().code(),
                        absl::StrCat(got.status().message(), "\n", context));
  }
  return Compare(*got, want, tol, context);
}

absl::StatusOr<ir::loop::LoopModule> Apply(
    LoopPass& pass, const ir::loop::LoopModule& before, bool* changed) {
  ir::loop::LoopModule after = before;
  absl::StatusOr<bool> c = pass.Run(&after);
  if (!c.ok()) return c.status();
  if (changed != nullptr) *changed = *c;
  KILN_RETURN_IF_ERROR(ir::loop::VerifyProgram(after.program));
  return after;
}

absl::Status CheckPass(LoopPass& pass, absl::string_view text, bool want_changed,
                       absl::string_view checks, bool run) {
  KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule before, FromLoopText(text));
  bool changed = false;
  KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule after, Apply(pass, before, &changed));
  const std::string out = ir::loop::PrintProgram(after.program);
  if (changed != want_changed) {
    return absl::InternalError(absl::StrCat(pass.name(), " reported changed=", changed,
                                            ", expected ", want_changed, ":\n", out));
  }
  if (!changed && out != ir::loop::PrintProgram(before.program)) {
    return absl::InternalError(absl::StrCat(pass.name(), " changed the program but said not:\n", out));
  }
  if (run) KILN_RETURN_IF_ERROR(CheckSameResults(before, after));
  absl::Status s = kiln::testing::RunFileCheck(out, checks);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), "\n", out));
  return absl::OkStatus();
}

}  // namespace kiln::passes::loop_testing
