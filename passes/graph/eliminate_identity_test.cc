// Tests for pass eliminate-identity.
#include "passes/graph/eliminate_identity.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

TEST(EliminateIdentity, RewiresConsumersAndKeepsOutputNames) {
  EliminateIdentity pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[2,3]) -> (%z) opset 18 {
  %a = Identity(%x) : f32[2,3]
  %b = Relu(%a) : f32[2,3]
  %z = Identity(%b) : f32[2,3]
}
// CHECK: graph main(%x: f32[2,3]) -> (%z)
// CHECK-NEXT: %z = Relu(%x)
// CHECK-NOT: Identity
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(EliminateIdentity, InferenceDropoutGoesMaskedDropoutStays) {
  EliminateIdentity pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[4]) -> (%y, %mask) opset 18 {
  %a = Dropout(%x) : f32[4]
  %y = Sigmoid(%a) : f32[4]
  %f = constant bool[] false
  %c = Dropout(%x, _, %f) : f32[4]
  %d = Tanh(%c) : f32[4]
  %b, %mask = Dropout(%d) : f32[4], bool[4]
}
// CHECK: %y = Sigmoid(%x)
// CHECK-NEXT: %d = Tanh(%x)
// CHECK-NEXT: %b, %mask = Dropout(%d)
)");
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(EliminateIdentity, CopyBetweenInterfaceValuesStays) {
  EliminateIdentity pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[4]) -> (%y) opset 18 {
  %y = Identity(%x) : f32[4]
}
// CHECK: %y = Identity(%x)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

}  // namespace
}  // namespace kiln::passes
