// File: passes/pass_test_util.h — runs one graph pass on a text-IR test case
// and checks the result with the CHECK lines embedded in the same text:
//
//   RunPassAndCheck(EliminateIdentity(), R"(
//     graph main(%x: f32[4]) -> (%y) { %y = Identity(%x) : f32[4] }
//     // CHECK-NOT: Identity
//   )");
#ifndef KILN_PASSES_PASS_TEST_UTIL_H_
#define KILN_PASSES_PASS_TEST_UTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "interp/compare.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

struct PassCheckResult {
  bool changed = false;
  std::string output;  // the graph's text after the pass
};

// Parses `test_text`, runs `pass`, verifies the graph, matches the CHECK
// lines of `test_text` against the printed result, and checks the reference
// interpreter computes the same outputs before and after the pass, within
// `tolerance`, on seeded random inputs (graphs with only f32 or f16 inputs).
absl::StatusOr<PassCheckResult> RunPassAndCheck(
    GraphPass& pass, const std::string& test_text,
    const interp::Tolerance& tolerance = {1e-5, 1e-6, std::nullopt});

}  // namespace kiln::passes

#endif  // KILN_PASSES_PASS_TEST_UTIL_H_
