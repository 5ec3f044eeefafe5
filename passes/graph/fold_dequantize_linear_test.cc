// Tests for pass fold-dequantize-linear; RunPassAndCheck also compares the
// reference interpreter's outputs before (the node) and after (the folded
// constant), exactly.
#include "passes/graph/fold_dequantize_linear.h"

#include <string>

#include <gtest/gtest.h>

#include "interp/compare.h"
#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

interp::Tolerance Exact() { return {0, 0, std::nullopt}; }

TEST(FoldDequantizeLinear, PerAxisWeightsBecomeAnF32Constant) {
  FoldDequantizeLinear pass;
  // (q - zp[c]) * scale[c] along axis 1: [1-1, 2-0, -3+2; 4-1, -5-0, 6+2]
  // * [0.5, 0.25, 2] = [0, 0.5, -2; 1.5, -1.25, 16].
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[2,2]) -> (%y) opset 13 {
  %wq = constant i8[2,3] [1, 2, -3, 4, -5, 6]
  %s = constant f32[3] [0.5, 0.25, 2.0]
  %z = constant i8[3] [1, 0, -2]
  %w = DequantizeLinear(%wq, %s, %z) {axis=1} : f32[2,3]
  %y = MatMul(%x, %w) : f32[2,3]
}
// CHECK: %w = constant f32[2,3] [0.0, 0.5, -2.0, 1.5, -1.25, 16.0]
// CHECK-NOT: DequantizeLinear
)",
                                                      Exact());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FoldDequantizeLinear, I32BiasPerTensor) {
  FoldDequantizeLinear pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[2]) -> (%y) opset 13 {
  %bq = constant i32[2] [300, -7]
  %s = constant f32[] 0.125
  %b = DequantizeLinear(%bq, %s) : f32[2]
  %y = Add(%x, %b) : f32[2]
}
// CHECK: %b = constant f32[2] [37.5, -0.875]
)",
                                                      Exact());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FoldDequantizeLinear, RuntimeInputsAndGraphOutputsStay) {
  FoldDequantizeLinear pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[2]) -> (%y, %w) opset 13 {
  %s = constant f32[] 0.5
  %wq = constant u8[2] [3, 4]
  %q = QuantizeLinear(%x, %s) : u8[2]
  %y = DequantizeLinear(%q, %s) : f32[2]
  %w = DequantizeLinear(%wq, %s) : f32[2]
}
// CHECK: %y = DequantizeLinear(%q, %s)
// CHECK: %w = DequantizeLinear(%wq, %s)
)",
                                                      Exact());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

}  // namespace
}  // namespace kiln::passes
