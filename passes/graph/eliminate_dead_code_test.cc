// Tests for pass eliminate-dead-code.
#include "passes/graph/eliminate_dead_code.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

TEST(EliminateDeadCode, RemovesUnusedNodesAndConstants) {
  EliminateDeadCode pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[3]) -> (%y) opset 18 {
  %w = constant f32[3] [1.0, 2.0, 3.0]
  %unused_w = constant f32[3] [4.0, 5.0, 6.0]
  %dead = Mul(%x, %unused_w) : f32[3]
  %dead2 = Exp(%dead) : f32[3]
  %y = Add(%x, %w) : f32[3]
}
// CHECK: %w = constant
// CHECK-NOT: unused_w
// CHECK-NOT: Mul
// CHECK-NOT: Exp
// CHECK: %y = Add(%x, %w)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(EliminateDeadCode, KeepsMultiOutputNodeWhenOneOutputIsUsed) {
  EliminateDeadCode pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[4]) -> (%b) opset 18 {
  %s = constant i64[2] [2, 2]
  %a, %b = Split(%x, %s) {axis=0} : f32[2], f32[2]
}
// CHECK: %a, %b = Split(%x, %s)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

}  // namespace
}  // namespace kiln::passes
