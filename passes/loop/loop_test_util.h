// File: passes/loop/loop_test_util.h — test helpers for loop passes:
// programs from loop IR text or from ONNX-level graph text (lowered), and
// numeric checks of a transformed program against the untransformed one
// (loop interpreter; externs on the reference) and against the graph
// reference interpreter.
#ifndef KILN_PASSES_LOOP_LOOP_TEST_UTIL_H_
#define KILN_PASSES_LOOP_LOOP_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"
#include "passes/loop/loop_pass.h"

namespace kiln::passes::loop_testing {

// Parsed and verified loop IR; inputs/outputs are the buffers of those
// kinds in order (constant buffers are refused: tests bind none).
absl::StatusOr<ir::loop::LoopModule> FromLoopText(absl::string_view text);
// ir::ParseGraph + lowering::LowerGraph.
absl::StatusOr<ir::loop::LoopModule> FromGraphText(absl::string_view text);

int CountLoopKernels(const ir::loop::LoopProgram& p);

struct Tol {
  double rtol = 1e-5;
  double atol = 1e-6;
  uint32_t seed = 1;
};

// Runs both programs on the same seeded random inputs (interface by
// position) and compares every output; OK or what differs, with both texts.
absl::Status CheckSameResults(const ir::loop::LoopModule& before,
                              const ir::loop::LoopModule& after,
                              const Tol& tol = {});

// Runs the graph on the reference interpreter and `after` on the loop
// interpreter with the same seeded random inputs; compares every output.
absl::Status CheckAgainstReference(absl::string_view graph_text,
                                   const ir::loop::LoopModule& after,
                                   const Tol& tol = {});

// Runs `pass` on a copy of `before`; the copy (InternalError if the pass
// failed).
absl::StatusOr<ir::loop::LoopModule> Apply(LoopPass& pass,
                                               const ir::loop::LoopModule& before,
                                               bool* changed = nullptr);

// Runs `pass` on the loop IR `text` and checks: it reports `want_changed`
// (and leaves the text as it was when it says unchanged), the result
// computes what the input did (`run`: CheckSameResults) and `checks` (CHECK
// lines) match the printed result. OK or what failed, with the output.
absl::Status CheckPass(LoopPass& pass, absl::string_view text, bool want_changed,
                       absl::string_view checks, bool run = true);

}  // namespace kiln::passes::loop_testing

#endif  // KILN_PASSES_LOOP_LOOP_TEST_UTIL_H_
