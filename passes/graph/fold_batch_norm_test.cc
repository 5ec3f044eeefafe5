// Tests for pass fold-batch-norm. Besides the CHECK lines, RunPassAndCheck
// runs the reference interpreter on the graph before and after the pass, so
// every folded case is also checked numerically against the unfolded BN.
#include "passes/graph/fold_batch_norm.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "ir/graph/text.h"
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

// BN parameters for `c` channels: %scale, %shift, %mean, %var (positive).
std::string BnParams(int64_t c) {
  return absl::Substitute(R"(
  %scale = constant $0
  %shift = constant $1
  %mean = constant $2
  %var = constant $3
)",
                          F32({c}, 11, 0.5, 2.0), F32({c}, 12), F32({c}, 13),
                          F32({c}, 14, 0.1, 2.0));
}

absl::StatusOr<PassCheckResult> RunFold(const std::string& text) {
  FoldBatchNorm pass;
  return RunPassAndCheck(pass, text);
}

// 1x1 conv, epsilon 0: s = scale / sqrt(var) = [1/2, 2/0.5] = [0.5, 4];
// W' = [2 * 0.5, 3 * 4] = [1, 12];
// b' = (b - mean) * s + B = [(1 - 1) * 0.5 + 0.5, (-1 - 0) * 4 - 1] = [0.5, -5].
TEST(FoldBatchNorm, ConvWeightsAndBiasByHand) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[1,2,3,3]) -> (%y) opset 18 {
  %w = constant f32[2,1,1,1] [2.0, 3.0]
  %b = constant f32[2] [1.0, -1.0]
  %scale = constant f32[2] [1.0, 2.0]
  %shift = constant f32[2] [0.5, -1.0]
  %mean = constant f32[2] [1.0, 0.0]
  %var = constant f32[2] [4.0, 0.25]
  %c = Conv(%x, %w, %b) {group=2} : f32[1,2,3,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon=0.0} : f32[1,2,3,3]
  %y = Relu(%n) : f32[1,2,3,3]
}
// CHECK: %b.bn_folded = constant f32[2] [0.5, -5.0]
// CHECK: %w.bn_folded = constant f32[2,1,1,1] [1.0, 12.0]
// CHECK: %n = Conv(%x, %w.bn_folded, %b.bn_folded) {group=2}
// CHECK-NEXT: %y = Relu(%n)
// CHECK-NOT: BatchNormalization
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FoldBatchNorm, ConvWithBiasThenRelu) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,3,5,5]) -> (%y) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
  %b = constant $1
$2
  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) {epsilon=0.001} : f32[1,4,5,5]
  %y = Relu(%n) : f32[1,4,5,5]
}
// CHECK: %n = Conv(%x, %w.bn_folded, %b.bn_folded)
// CHECK-NEXT: %y = Relu(%n)
// CHECK-NOT: BatchNormalization
)",
                       F32({4, 3, 3, 3}, 1), F32({4}, 2), BnParams(4))));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FoldBatchNorm, GroupedConvWithoutBiasGetsOne) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,4,5,5]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) {group=2, pads=[1, 1, 1, 1]} : f32[1,6,5,5]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,6,5,5]
}
// CHECK: %w.bn_folded_bias = constant f32[6]
// CHECK: %w.bn_folded = constant f32[6,2,3,3]
// CHECK: %n = Conv(%x, %w.bn_folded, %w.bn_folded_bias) {group=2
// CHECK-NOT: BatchNormalization
)",
                       F32({6, 2, 3, 3}, 3), BnParams(6))));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FoldBatchNorm, DepthwiseConv) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[2,3,4,4]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
  %b = constant $1
$2
  %c = Conv(%x, %w, %b) {group=3, strides=[2, 2]} : f32[2,3,1,1]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[2,3,1,1]
}
// CHECK: %n = Conv(%x, %w.bn_folded, %b.bn_folded) {group=3
// CHECK-NOT: BatchNormalization
)",
                       F32({3, 1, 3, 3}, 4), F32({3}, 5), BnParams(3))));
  ASSERT_TRUE(r.ok()) << r.status();
}

// ConvTranspose weights are [C_in, C_out/group, k...]: with group 2 and
// C_in 4, input channels 0-1 feed outputs 0-2 and 2-3 feed outputs 3-5.
TEST(FoldBatchNorm, GroupedConvTranspose) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,4,3,3]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
  %b = constant $1
$2
  %c = ConvTranspose(%x, %w, %b) {group=2, strides=[2, 2]} : f32[1,6,6,6]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,6,6,6]
}
// CHECK: %n = ConvTranspose(%x, %w.bn_folded, %b.bn_folded) {group=2
// CHECK-NOT: BatchNormalization
)",
                       F32({4, 3, 2, 2}, 6), F32({6}, 7), BnParams(6))));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FoldBatchNorm, ConvTransposeWithoutBias) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,3]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = ConvTranspose(%x, %w) : f32[1,3,5]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,3,5]
}
// CHECK: %n = ConvTranspose(%x, %w.bn_folded, %w.bn_folded_bias)
// CHECK-NOT: BatchNormalization
)",
                       F32({2, 3, 3}, 8), BnParams(3))));
  ASSERT_TRUE(r.ok()) << r.status();
}

// Gemm with transB=1 (B is [N, K]) and beta != 1: beta is folded into C.
TEST(FoldBatchNorm, GemmTransB) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%a: f32[2,4]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
  %b = constant $1
$2
  %c = Gemm(%a, %w, %b) {alpha=0.5, beta=2.0, transB=1} : f32[2,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[2,3]
}
// CHECK: %b.bn_folded = constant f32[3]
// CHECK: %n = Gemm(%a, %w.bn_folded, %b.bn_folded) {alpha=0.5, beta=1.0, transB=1}
// CHECK-NOT: BatchNormalization
)",
                       F32({3, 4}, 9), F32({3}, 10), BnParams(3))));
  ASSERT_TRUE(r.ok()) << r.status();
}

// C of shape [M, 1] varies along M: the folded C is a full [M, N].
TEST(FoldBatchNorm, GemmWithPerRowBias) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%a: f32[2,4]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
  %b = constant $1
$2
  %c = Gemm(%a, %w, %b) {transA=0} : f32[2,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[2,3]
}
// CHECK: %b.bn_folded = constant f32[2,3]
// CHECK: %n = Gemm(%a, %w.bn_folded, %b.bn_folded)
)",
                       F32({4, 3}, 15), F32({2, 1}, 16), BnParams(3))));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FoldBatchNorm, GemmWithoutBias) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%a: f32[2,4]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Gemm(%a, %w) {beta=3.0} : f32[2,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[2,3]
}
// CHECK: %n = Gemm(%a, %w.bn_folded, %w.bn_folded_bias) {beta=1.0}
)",
                       F32({4, 3}, 17), BnParams(3))));
  ASSERT_TRUE(r.ok()) << r.status();
}

// Another conv reads %w too: it keeps reading the unchanged constant.
TEST(FoldBatchNorm, SharedWeightsAreNotMutated) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,4,4]) -> (%n, %d) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[1,3,2,2]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,3,2,2]
  %d = Conv(%x, %w) : f32[1,3,2,2]
}
// CHECK: %w = constant f32[3,2,3,3]
// CHECK: %n = Conv(%x, %w.bn_folded, %w.bn_folded_bias)
// CHECK-NEXT: %d = Conv(%x, %w)
)",
                       F32({3, 2, 3, 3}, 18), BnParams(3))));
  ASSERT_TRUE(r.ok()) << r.status();
}

// conv -> BN -> BN: the second BN folds into the already folded conv.
TEST(FoldBatchNorm, TwoBatchNormsInARow) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,3,3]) -> (%n2) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,2,3,3]
  %n2 = BatchNormalization(%n, %shift, %scale, %var, %scale) : f32[1,2,3,3]
}
// CHECK: %n2 = Conv(%x, %w.bn_folded.bn_folded, %w.bn_folded_bias.bn_folded)
// CHECK-NOT: BatchNormalization
)",
                       F32({2, 2, 1, 1}, 19), BnParams(2))));
  ASSERT_TRUE(r.ok()) << r.status();
}

// ---- Cases where the pattern must not fire.

TEST(FoldBatchNorm, ConvOutputWithAnotherConsumerStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,3,3]) -> (%n, %r) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,2,3,3]
  %r = Relu(%c) : f32[1,2,3,3]
}
// CHECK: %c = Conv(%x, %w)
// CHECK-NEXT: %n = BatchNormalization(%c,
)",
                       F32({2, 2, 1, 1}, 20), BnParams(2))));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

TEST(FoldBatchNorm, ConvOutputThatIsAGraphOutputStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,3,3]) -> (%n, %c) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,2,3,3]
}
// CHECK: %n = BatchNormalization(%c,
)",
                       F32({2, 2, 1, 1}, 21), BnParams(2))));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

TEST(FoldBatchNorm, NonConstantScaleStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,3,3], %s: f32[2]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %n = BatchNormalization(%c, %s, %shift, %mean, %var) : f32[1,2,3,3]
}
// CHECK: %n = BatchNormalization(%c, %s,
)",
                       F32({2, 2, 1, 1}, 22), BnParams(2))));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

TEST(FoldBatchNorm, NonConstantWeightsStay) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,3,3], %w: f32[2,2,1,1]) -> (%n) opset 18 {\n",
      BnParams(2), R"(
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,2,3,3]
}
// CHECK: %n = BatchNormalization(%c,
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

TEST(FoldBatchNorm, TrainingModeStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[2,2,3,3]) -> (%n, %rm, %rv) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[2,2,3,3]
  %n, %rm, %rv = BatchNormalization(%c, %scale, %shift, %mean, %var) {training_mode=1} : f32[2,2,3,3], f32[2], f32[2]
}
// CHECK: %n, %rm, %rv = BatchNormalization(%c,
)",
                       F32({2, 2, 1, 1}, 23), BnParams(2))));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

// training_mode=1 alone (running statistics not read) still means batch
// statistics: not foldable.
TEST(FoldBatchNorm, TrainingModeWithoutStatisticsOutputsStays) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(absl::StrCat(
      "graph main(%x: f32[2,2,3,3]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[2,2,3,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) {training_mode=1} : f32[2,2,3,3]
}
)",
                       F32({2, 2, 1, 1}, 23), BnParams(2))));
  ASSERT_TRUE(g.ok()) << g.status();
  FoldBatchNorm pass;
  absl::StatusOr<bool> changed = pass.Run(&*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
}

// Standalone BN (no foldable producer) and BN after an op with no weights
// stay: lowering turns them into an affine elementwise.
TEST(FoldBatchNorm, StandaloneBatchNormStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,3,3]) -> (%n, %m) opset 18 {\n", BnParams(2), R"(
  %n = BatchNormalization(%x, %scale, %shift, %mean, %var) : f32[1,2,3,3]
  %e = Exp(%x) : f32[1,2,3,3]
  %m = BatchNormalization(%e, %scale, %shift, %mean, %var) : f32[1,2,3,3]
}
// CHECK: %n = BatchNormalization(%x,
// CHECK: %m = BatchNormalization(%e,
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

// BN parameters whose channel count does not match the conv's: not folded
// (the interpreter and lowering report the model's error).
TEST(FoldBatchNorm, MismatchedChannelCountStays) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(absl::StrCat(
      "graph main(%x: f32[1,2,3,3]) -> (%n) opset 18 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,2,3,3]
}
)",
                       F32({2, 2, 1, 1}, 24), BnParams(3))));
  ASSERT_TRUE(g.ok()) << g.status();
  FoldBatchNorm pass;
  absl::StatusOr<bool> changed = pass.Run(&*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(g->nodes().size(), 2u);
}

// Before opset 14 there is no training_mode: one output means inference.
TEST(FoldBatchNorm, Opset12SingleOutputFolds) {
  absl::StatusOr<PassCheckResult> r = RunFold(absl::StrCat(
      "graph main(%x: f32[1,2,3,3]) -> (%n) opset 12 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) : f32[1,2,3,3]
}
// CHECK: %n = Conv(%x, %w.bn_folded, %w.bn_folded_bias)
)",
                       F32({2, 2, 1, 1}, 25), BnParams(2))));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

// Opset 7-8 spatial=0 normalizes per (channel, position): not a per-channel
// affine.
TEST(FoldBatchNorm, Opset8NonSpatialStays) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(absl::StrCat(
      "graph main(%x: f32[1,2,1,1]) -> (%n) opset 8 {\n",
      absl::Substitute(R"(
  %w = constant $0
$1
  %c = Conv(%x, %w) : f32[1,2,1,1]
  %n = BatchNormalization(%c, %scale, %shift, %mean, %var) {spatial=0} : f32[1,2,1,1]
}
)",
                       F32({2, 2, 1, 1}, 26), BnParams(2))));
  ASSERT_TRUE(g.ok()) << g.status();
  FoldBatchNorm pass;
  absl::StatusOr<bool> changed = pass.Run(&*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
}

// ---- The shared per-channel affine fold.

TEST(FoldChannelAffine, FoldableChannelsPerProducer) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph main(%x: f32[1,4,3,3], %a: f32[2,4], %v: f32[2,4]) -> (%c, %t, %m, %r, %d) opset 18 {
  %w = constant f32[6,2,1,1] splat(0.5)
  %wt = constant f32[4,3,1,1] splat(0.5)
  %b = constant f32[4,5] splat(0.5)
  %c = Conv(%x, %w) {group=2} : f32[1,6,3,3]
  %t = ConvTranspose(%x, %wt) {group=2} : f32[1,6,3,3]
  %m = MatMul(%a, %b) : f32[2,5]
  %r = Relu(%x) : f32[1,4,3,3]
  %d = MatMul(%a, %v) : f32[2,2]
}
)");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<ir::Node>& n = g->nodes();
  EXPECT_EQ(AffineFoldableChannels(*g, n[0], true), 6);
  EXPECT_EQ(AffineFoldableChannels(*g, n[1], true), 6);
  EXPECT_EQ(AffineFoldableChannels(*g, n[2], false), 5);
  EXPECT_EQ(AffineFoldableChannels(*g, n[2], true), std::nullopt);  // no bias
  EXPECT_EQ(AffineFoldableChannels(*g, n[3], false), std::nullopt);
  EXPECT_EQ(AffineFoldableChannels(*g, n[4], false), std::nullopt);  // W input
  EXPECT_EQ(OutputChannelAxis(n[0], 4), 1);
  EXPECT_EQ(OutputChannelAxis(n[2], 3), 2);
}

TEST(FoldChannelAffine, UnfoldableNodeIsAnInternalError) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph main(%x: f32[2]) -> (%y) opset 18 {
  %y = Relu(%x) : f32[2]
}
)");
  ASSERT_TRUE(g.ok()) << g.status();
  ChannelAffine a{{1.0, 2.0}, {0.0, 0.0}};
  EXPECT_EQ(FoldChannelAffine(&*g, 0, a, "t").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(FoldChannelAffine(&*g, 5, a, "t").code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace kiln::passes
