// Tests for pass fold-binary-into-weights. RunPassAndCheck also compares the
// reference interpreter's outputs before and after the pass, so every folded
// case is checked numerically against the unfolded Mul/Add/Sub/Div.
#include "passes/graph/fold_binary_into_weights.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

// An f32 literal of `shape` with deterministic values spread over [lo, hi]
// (never all equal), so a wrongly indexed fold changes the numbers.
std::string F32(const std::vector<int64_t>& shape, int seed, double lo = -1.5,
                double hi = 1.5) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<std::string> values;
  for (int64_t i = 0; i < n; ++i) {
    const double r = std::sin(seed * 12.9898 + i * 78.233) * 43758.5453;
    values.push_back(absl::StrCat(lo + (hi - lo) * (r - std::floor(r))));
  }
  return absl::StrCat("f32[", absl::StrJoin(shape, ","), "] [",
                      absl::StrJoin(values, ", "), "]");
}

absl::StatusOr<PassCheckResult> RunFold(const std::string& text) {
  FoldBinaryIntoWeights pass;
  return RunPassAndCheck(pass, text);
}

// W = [2, 3], b = [1, -1]; * [0.5, 4] gives W' = [1, 12], b' = [0.5, -4];
// then + [0.25, 1] gives b'' = [0.75, -3].
TEST(FoldBinaryIntoWeights, ConvMulThenAddByHand) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[1,2,3,3]) -> (%y) opset 18 {
  %w = constant f32[2,1,1,1] [2.0, 3.0]
  %b = constant f32[2] [1.0, -1.0]
  %k = constant f32[2,1,1] [0.5, 4.0]
  %t = constant f32[1,2,1,1] [0.25, 1.0]
  %c = Conv(%x, %w, %b) {group=2} : f32[1,2,3,3]
  %m = Mul(%c, %k) : f32[1,2,3,3]
  %a = Add(%t, %m) : f32[1,2,3,3]
  %y = Relu(%a) : f32[1,2,3,3]
}
// CHECK: %b.mul_folded = constant f32[2] [0.5, -4.0]
// CHECK-NEXT: %w.mul_folded = constant f32[2,1,1,1] [1.0, 12.0]
// CHECK-NEXT: %b.mul_folded.add_folded = constant f32[2] [0.75, -3.0]
// CHECK: %a = Conv(%x, %w.mul_folded, %b.mul_folded.add_folded) {group=2}
// CHECK-NEXT: %y = Relu(%a)
// CHECK-NOT: Mul
// CHECK-NOT: Add
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FoldBinaryIntoWeights, ConvWithoutBiasAddCreatesBias) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::Substitute(R"(
graph main(%x: f32[1,3,4,4]) -> (%a) opset 18 {
  %w = constant $0
  %t = constant $1
  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,4,4,4]
  %a = Add(%c, %t) : f32[1,4,4,4]
}
// CHECK: %w.add_folded_bias = constant f32[4]
// CHECK: %a = Conv(%x, %w, %w.add_folded_bias)
// CHECK-NOT: Add(
)",
                                                           F32({4, 3, 3, 3}, 1),
                                                           F32({1, 4, 1, 1}, 2)));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FoldBinaryIntoWeights, ConvSubAndDivByScalar) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::Substitute(R"(
graph main(%x: f32[1,3,4,4]) -> (%d) opset 18 {
  %w = constant $0
  %b = constant $1
  %t = constant $2
  %k = constant f32[] -2.5
  %c = Conv(%x, %w, %b) : f32[1,2,2,2]
  %s = Sub(%c, %t) : f32[1,2,2,2]
  %d = Div(%s, %k) : f32[1,2,2,2]
}
// CHECK: %d = Conv(%x, %w.div_folded, %b.sub_folded.div_folded)
// CHECK-NOT: Sub(
// CHECK-NOT: Div(
)",
                                                           F32({2, 3, 3, 3}, 3),
                                                           F32({2}, 4),
                                                           F32({2, 1, 1}, 5)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// Conv without a bias followed by Mul only: no bias is created.
TEST(FoldBinaryIntoWeights, DepthwiseConvMulKeepsNoBias) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::Substitute(R"(
graph main(%x: f32[1,3,5,5]) -> (%m) opset 18 {
  %w = constant $0
  %k = constant $1
  %c = Conv(%x, %w) {group=3} : f32[1,3,3,3]
  %m = Mul(%k, %c) : f32[1,3,3,3]
}
// CHECK: %m = Conv(%x, %w.mul_folded) {group=3}
)",
                                                           F32({3, 1, 3, 3}, 6),
                                                           F32({3, 1, 1}, 7)));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FoldBinaryIntoWeights, GroupedConvTranspose) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::Substitute(R"(
graph main(%x: f32[1,4,3,3]) -> (%a) opset 18 {
  %w = constant $0
  %b = constant $1
  %k = constant $2
  %t = constant $3
  %c = ConvTranspose(%x, %w, %b) {group=2, strides=[2, 2]} : f32[1,6,6,6]
  %m = Mul(%c, %k) : f32[1,6,6,6]
  %a = Add(%m, %t) : f32[1,6,6,6]
}
// CHECK: %a = ConvTranspose(%x, %w.mul_folded, %b.mul_folded.add_folded) {group=2
// CHECK-NOT: Mul(
)",
                                                           F32({4, 3, 2, 2}, 8),
                                                           F32({6}, 9),
                                                           F32({6, 1, 1}, 10),
                                                           F32({6, 1, 1}, 11)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// Gemm with transB=1 and beta=0.5: C absorbs the scale and shift, beta = 1.
TEST(FoldBinaryIntoWeights, GemmTransBMulAdd) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::Substitute(R"(
graph main(%a: f32[2,4]) -> (%s) opset 18 {
  %w = constant $0
  %b = constant $1
  %k = constant $2
  %t = constant $3
  %c = Gemm(%a, %w, %b) {beta=0.5, transB=1} : f32[2,3]
  %m = Mul(%c, %k) : f32[2,3]
  %s = Add(%m, %t) : f32[2,3]
}
// CHECK: %s = Gemm(%a, %w.mul_folded, %b.mul_folded.add_folded) {beta=1.0, transB=1}
// CHECK-NOT: Mul(
)",
                                                           F32({3, 4}, 12),
                                                           F32({3}, 13),
                                                           F32({3}, 14),
                                                           F32({1, 3}, 15)));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FoldBinaryIntoWeights, GemmWithoutBiasAddCreatesBias) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::Substitute(R"(
graph main(%a: f32[2,4]) -> (%s) opset 18 {
  %w = constant $0
  %t = constant f32[] 0.75
  %c = Gemm(%a, %w) : f32[2,3]
  %s = Sub(%c, %t) : f32[2,3]
}
// CHECK: %w.sub_folded_bias = constant f32[3] splat(-0.75)
// CHECK: %s = Gemm(%a, %w, %w.sub_folded_bias)
)",
                                                           F32({4, 3}, 16)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// MatMul as a linear layer: Mul scales W's columns; Add stays (no bias).
TEST(FoldBinaryIntoWeights, MatMulMulFoldsAddStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::Substitute(R"(
graph main(%x: f32[2,3,4]) -> (%s) opset 18 {
  %w = constant $0
  %k = constant $1
  %t = constant $2
  %c = MatMul(%x, %w) : f32[2,3,5]
  %m = Mul(%c, %k) : f32[2,3,5]
  %s = Add(%m, %t) : f32[2,3,5]
}
// CHECK: %m = MatMul(%x, %w.mul_folded)
// CHECK-NEXT: %s = Add(%m, %t)
)",
                                                           F32({4, 5}, 17),
                                                           F32({5}, 18),
                                                           F32({5}, 19)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

// ---- Cases where the pattern must not fire.

void ExpectUnchanged(const std::string& text) {
  absl::StatusOr<PassCheckResult> r = RunFold(text);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed) << r->output;
}

TEST(FoldBinaryIntoWeights, BroadcastThatEnlargesTheOutputStays) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%x: f32[1,2,3,3]) -> (%m) opset 18 {
  %w = constant $0
  %k = constant $1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %m = Mul(%c, %k) : f32[2,2,3,3]
}
// CHECK: %m = Mul(%c, %k)
)",
                                   F32({2, 2, 1, 1}, 20), F32({2, 2, 1, 1}, 21)));
}

TEST(FoldBinaryIntoWeights, RankThatEnlargesTheOutputStays) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%a: f32[2,4]) -> (%m) opset 18 {
  %w = constant $0
  %k = constant $1
  %c = Gemm(%a, %w) : f32[2,3]
  %m = Mul(%c, %k) : f32[1,2,3]
}
// CHECK: %m = Mul(%c, %k)
)",
                                   F32({4, 3}, 22), F32({1, 1, 3}, 23)));
}

TEST(FoldBinaryIntoWeights, ConstantVaryingAlongASpatialAxisStays) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%x: f32[1,2,3,3]) -> (%m) opset 18 {
  %w = constant $0
  %k = constant $1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %m = Mul(%c, %k) : f32[1,2,3,3]
}
// CHECK: %m = Mul(%c, %k)
)",
                                   F32({2, 2, 1, 1}, 24), F32({3}, 25)));
}

TEST(FoldBinaryIntoWeights, PerRowConstantOnGemmStays) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%a: f32[2,4]) -> (%m) opset 18 {
  %w = constant $0
  %k = constant $1
  %c = Gemm(%a, %w) : f32[2,3]
  %m = Mul(%c, %k) : f32[2,3]
}
// CHECK: %m = Mul(%c, %k)
)",
                                   F32({4, 3}, 26), F32({2, 1}, 27)));
}

TEST(FoldBinaryIntoWeights, MultipleConsumersStay) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%x: f32[1,2,3,3]) -> (%m, %r) opset 18 {
  %w = constant $0
  %k = constant $1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %m = Mul(%c, %k) : f32[1,2,3,3]
  %r = Relu(%c) : f32[1,2,3,3]
}
// CHECK: %m = Mul(%c, %k)
)",
                                   F32({2, 2, 1, 1}, 28), F32({2, 1, 1}, 29)));
}

TEST(FoldBinaryIntoWeights, IntermediateGraphOutputStays) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%x: f32[1,2,3,3]) -> (%m, %c) opset 18 {
  %w = constant $0
  %k = constant $1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %m = Mul(%c, %k) : f32[1,2,3,3]
}
// CHECK: %m = Mul(%c, %k)
)",
                                   F32({2, 2, 1, 1}, 30), F32({2, 1, 1}, 31)));
}

TEST(FoldBinaryIntoWeights, NonConstantOperandStays) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%x: f32[1,2,3,3], %k: f32[2,1,1]) -> (%m) opset 18 {
  %w = constant $0
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %m = Mul(%c, %k) : f32[1,2,3,3]
}
// CHECK: %m = Mul(%c, %k)
)",
                                   F32({2, 2, 1, 1}, 32)));
}

TEST(FoldBinaryIntoWeights, ConstantMinusConvAndDivByZeroStay) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%x: f32[1,2,3,3]) -> (%s, %d) opset 18 {
  %w = constant $0
  %v = constant $1
  %t = constant $2
  %z = constant f32[2,1,1] [0.5, 0.0]
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %s = Sub(%t, %c) : f32[1,2,3,3]
  %e = Conv(%x, %v) : f32[1,2,3,3]
  %d = Div(%e, %z) : f32[1,2,3,3]
}
// CHECK: %s = Sub(%t, %c)
// CHECK: %d = Div(%e, %z)
)",
                                   F32({2, 2, 1, 1}, 33), F32({2, 2, 1, 1}, 34),
                                   F32({2, 1, 1}, 35)));
}

TEST(FoldBinaryIntoWeights, NonConstantWeightsStay) {
  ExpectUnchanged(absl::Substitute(R"(
graph main(%x: f32[2,3], %w: f32[3,4]) -> (%m) opset 18 {
  %k = constant $0
  %c = MatMul(%x, %w) : f32[2,4]
  %m = Mul(%c, %k) : f32[2,4]
}
// CHECK: %m = Mul(%c, %k)
)",
                                   F32({4}, 36)));
}

}  // namespace
}  // namespace kiln::passes
