// Tests for pass fuse-onednn-post-ops (and the OneDnnMatcher behind it):
// one text-IR case per pattern and per reason to stop. RunPassAndCheck also
// runs the reference interpreter before and after the pass, so every fused
// node is checked numerically against the nodes it replaced.
#include "passes/graph/fuse_onednn_post_ops.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

// An f32 literal of `shape` with deterministic values spread over [lo, hi].
std::string F32(const std::vector<int64_t>& shape, int seed, double lo = -1.0,
                double hi = 1.0) {
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

// Conv weights [4,3,3,3], bias [4]: substituted as $0 and $1.
std::string ConvCase(const std::string& text) {
  return absl::Substitute(text, F32({4, 3, 3, 3}, 1, -0.5, 0.5), F32({4}, 2));
}

absl::StatusOr<PassCheckResult> Fuse(const std::string& text,
                                     OneDnnFusionStats* stats = nullptr) {
  FuseOneDnnPostOps pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, text);
  if (stats != nullptr) *stats = pass.stats();
  return r;
}

TEST(FuseOneDnnPostOps, ConvRelu) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5]) -> (%y) opset 18 {
  %w = constant $0
  %b = constant $1
  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} name="conv" : f32[1,4,5,5]
  %y = Relu(%c) name="relu" : f32[1,4,5,5]
}
// CHECK: %y = kiln.FusedConv(%x, %w, %b) {fused_nodes=["conv", "relu"], pads=[1, 1, 1, 1],
// CHECK-SAME: post_op_alphas=[0.0], post_op_betas=[0.0], post_op_inputs=[-1], post_ops=["relu"]}
// CHECK-SAME: name="conv" : f32[1,4,5,5]
// CHECK-NOT: Relu(
)"),
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  EXPECT_EQ(stats.anchors, 1);
  EXPECT_EQ(stats.fused, 1);
  EXPECT_EQ(stats.post_ops, (std::map<std::string, int>{{"relu", 1}}));
  EXPECT_EQ(stats.chain_ends, (std::map<std::string, int>{
                                  {"result is a graph output or captured", 1}}));
}

TEST(FuseOneDnnPostOps, ConvBroadcastBiasAddRelu) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,3,5,5]) -> (%y) opset 18 {
  %w = constant $0
  %t = constant $1
  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %a = Add(%t, %c) : f32[1,4,5,5]
  %y = Relu(%a) : f32[1,4,5,5]
}
// CHECK: %y = kiln.FusedConv(%x, %w, %t) {
// CHECK-SAME: post_op_inputs=[2, -1], post_ops=["add", "relu"]}
// CHECK-NOT: Add(
// CHECK-NOT: Relu(
)",
                                                            F32({4, 3, 3, 3}, 1, -0.5, 0.5),
                                                            F32({1, 4, 1, 1}, 3)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// A ResNet basic block: the second conv accumulates the block input in place
// (sum) and applies the block's ReLU.
TEST(FuseOneDnnPostOps, ResidualSumThenRelu) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,4,5,5]) -> (%y) opset 18 {
  %w1 = constant $0
  %w2 = constant $1
  %c1 = Conv(%x, %w1) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %r1 = Relu(%c1) : f32[1,4,5,5]
  %c2 = Conv(%r1, %w2) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %s = Add(%c2, %x) : f32[1,4,5,5]
  %y = Relu(%s) : f32[1,4,5,5]
}
// CHECK: %r1 = kiln.FusedConv(%x, %w1) {
// CHECK-SAME: post_ops=["relu"]}
// CHECK-NEXT: %y = kiln.FusedConv(%r1, %w2, %x) {
// CHECK-SAME: post_op_alphas=[1.0, 0.0], post_op_betas=[0.0, 0.0], post_op_inputs=[2, -1], post_ops=["sum", "relu"]}
)",
                                                            F32({4, 4, 3, 3}, 4, -0.4, 0.4),
                                                            F32({4, 4, 3, 3}, 5, -0.4, 0.4)),
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(stats.fused, 2);
  EXPECT_EQ(stats.post_ops, (std::map<std::string, int>{{"relu", 2}, {"sum", 1}}));
}

// A bottleneck with a downsample branch computed after the main conv: the
// fused node moves to the Add's place, after the branch it accumulates.
TEST(FuseOneDnnPostOps, ResidualFromALaterBranchKeepsOrder) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,3,5,5]) -> (%y) opset 18 {
  %w1 = constant $0
  %wd = constant $1
  %c1 = Conv(%x, %w1) {pads=[1, 1, 1, 1]} name="main" : f32[1,4,5,5]
  %d = Conv(%x, %wd) name="down" : f32[1,4,5,5]
  %s = Add(%c1, %d) : f32[1,4,5,5]
  %y = Relu(%s) : f32[1,4,5,5]
}
// CHECK: %d = Conv(%x, %wd) name="down"
// CHECK-NEXT: %y = kiln.FusedConv(%x, %w1, %d) {
// CHECK-SAME: post_ops=["sum", "relu"]} name="main"
)",
                                                            F32({4, 3, 3, 3}, 6),
                                                            F32({4, 3, 1, 1}, 7)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// GELU as PyTorch 1.13 exports nn.GELU() (BERT's intermediate layer):
// x / 1.4142135, Erf, + 1, x * that, * 0.5.
TEST(FuseOneDnnPostOps, GemmGeluErfAsExported) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[2,6]) -> (%y) opset 17 {
  %w = constant $0
  %b = constant $1
  %sqrt2 = constant f32[] 1.4142135
  %one = constant f32[] 1.0
  %half = constant f32[] 0.5
  %g = Gemm(%x, %w, %b) {transB=1} name="fc" : f32[2,4]
  %d = Div(%g, %sqrt2) name="act/Div" : f32[2,4]
  %e = Erf(%d) name="act/Erf" : f32[2,4]
  %a = Add(%e, %one) name="act/Add" : f32[2,4]
  %m = Mul(%g, %a) name="act/Mul" : f32[2,4]
  %y = Mul(%m, %half) name="act/Mul_1" : f32[2,4]
}
// CHECK: %y = kiln.FusedGemm(%x, %w, %b) {fused_nodes=["fc", "act/Div", "act/Erf", "act/Add", "act/Mul", "act/Mul_1"],
// CHECK-SAME: post_op_inputs=[-1], post_ops=["gelu_erf"]
// CHECK-SAME: transB=1}
// CHECK-NOT: Erf(
)",
                                                            F32({4, 6}, 8), F32({4}, 9)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// The other usual GELU-erf forms: * 0.70710677 instead of / sqrt 2, and the
// 0.5 applied to x first or to (1 + erf) first, with operands commuted.
TEST(FuseOneDnnPostOps, GeluErfVariants) {
  const char* kForms[] = {
      // (x * 0.5) * (1 + erf(x * 0.70710677))
      R"(%h = Mul(%half, %g) : f32[2,4]
  %d = Mul(%g, %isqrt2) : f32[2,4]
  %e = Erf(%d) : f32[2,4]
  %a = Add(%one, %e) : f32[2,4]
  %y = Mul(%a, %h) : f32[2,4])",
      // x * ((1 + erf(x / sqrt 2)) * 0.5)
      R"(%d = Div(%g, %sqrt2) : f32[2,4]
  %e = Erf(%d) : f32[2,4]
  %a = Add(%e, %one) : f32[2,4]
  %a2 = Mul(%a, %half) : f32[2,4]
  %y = Mul(%g, %a2) : f32[2,4])",
      // (x * (1 + erf(x * 0.70710677))) / 2
      R"(%d = Mul(%isqrt2, %g) : f32[2,4]
  %e = Erf(%d) : f32[2,4]
  %a = Add(%e, %one) : f32[2,4]
  %m = Mul(%a, %g) : f32[2,4]
  %y = Div(%m, %two) : f32[2,4])",
  };
  for (const char* form : kForms) {
    absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[2,6]) -> (%y) opset 17 {
  %w = constant $0
  %sqrt2 = constant f32[] 1.4142135
  %isqrt2 = constant f32[] 0.70710677
  %one = constant f32[] 1.0
  %half = constant f32[] 0.5
  %two = constant f32[] 2.0
  %g = MatMul(%x, %w) : f32[2,4]
  $1
}
// CHECK: %y = kiln.FusedMatMul(%x, %w) {
// CHECK-SAME: post_ops=["gelu_erf"]}
// CHECK-NOT: Erf(
)",
                                                              F32({6, 4}, 10), form));
    ASSERT_TRUE(r.ok()) << form << "\n" << r.status();
  }
}

// GPT-2's MLP as exported: MatMul, bias Add (bias first), then
// 0.5 * x * (1 + tanh(0.7978846 * (x + 0.044715 * x * (x * x)))).
TEST(FuseOneDnnPostOps, MatMulBiasGeluTanhAsGpt2Exports) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,3,6]) -> (%y) opset 17 {
  %w = constant $0
  %bias = constant $1
  %c0 = constant f32[] 0.044715
  %c1 = constant f32[] 0.7978846
  %one = constant f32[] 1.0
  %half = constant f32[] 0.5
  %mm = MatMul(%x, %w) name="ff1/MatMul" : f32[1,3,4]
  %h = Add(%bias, %mm) name="ff1/Add" : f32[1,3,4]
  %sq = Mul(%h, %h) : f32[1,3,4]
  %cube = Mul(%h, %sq) : f32[1,3,4]
  %k = Mul(%c0, %cube) : f32[1,3,4]
  %inner = Add(%h, %k) : f32[1,3,4]
  %arg = Mul(%c1, %inner) : f32[1,3,4]
  %t = Tanh(%arg) : f32[1,3,4]
  %g = Add(%one, %t) : f32[1,3,4]
  %m = Mul(%h, %g) : f32[1,3,4]
  %y = Mul(%half, %m) : f32[1,3,4]
}
// CHECK: %y = kiln.FusedMatMul(%x, %w, %bias) {fused_nodes=["ff1/MatMul", "ff1/Add",
// CHECK-SAME: post_op_inputs=[2, -1], post_ops=["add", "gelu_tanh"]}
// CHECK-NOT: Tanh(
)",
                                                            F32({6, 4}, 11), F32({4}, 12)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// HuggingFace's form: Pow(x, 3).
TEST(FuseOneDnnPostOps, GeluTanhWithPow) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[3,6]) -> (%y) opset 17 {
  %w = constant $0
  %three = constant f32[] 3.0
  %c0 = constant f32[] 0.044715
  %c1 = constant f32[] 0.7978845608
  %one = constant f32[] 1.0
  %half = constant f32[] 0.5
  %h = MatMul(%x, %w) : f32[3,4]
  %cube = Pow(%h, %three) : f32[3,4]
  %k = Mul(%cube, %c0) : f32[3,4]
  %inner = Add(%k, %h) : f32[3,4]
  %arg = Mul(%inner, %c1) : f32[3,4]
  %t = Tanh(%arg) : f32[3,4]
  %g = Add(%t, %one) : f32[3,4]
  %hh = Mul(%h, %half) : f32[3,4]
  %y = Mul(%hh, %g) : f32[3,4]
}
// CHECK: %y = kiln.FusedMatMul(%x, %w) {
// CHECK-SAME: post_ops=["gelu_tanh"]}
)",
                                                            F32({6, 4}, 13)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// JAX's gelu(approximate=True) through jax2tf: the cube as
// x * (x * (0.044715 * x)), constants first, the 1 as a [1,1,1] constant.
TEST(FuseOneDnnPostOps, GeluTanhAsJaxExports) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,3,6]) -> (%y) opset 17 {
  %w = constant $0
  %bias = constant $1
  %c0 = constant f32[] 0.044715
  %c1 = constant f32[] 0.7978846
  %one = constant f32[1,1,1] 1.0
  %half = constant f32[] 0.5
  %mm = MatMul(%x, %w) : f32[1,3,4]
  %h = Add(%mm, %bias) : f32[1,3,4]
  %k1 = Mul(%c0, %h) : f32[1,3,4]
  %k2 = Mul(%h, %k1) : f32[1,3,4]
  %k3 = Mul(%h, %k2) : f32[1,3,4]
  %inner = Add(%h, %k3) : f32[1,3,4]
  %arg = Mul(%c1, %inner) : f32[1,3,4]
  %t = Tanh(%arg) : f32[1,3,4]
  %g = Add(%one, %t) : f32[1,3,4]
  %gh = Mul(%half, %g) : f32[1,3,4]
  %y = Mul(%h, %gh) : f32[1,3,4]
}
// CHECK: %y = kiln.FusedMatMul(%x, %w, %bias) {
// CHECK-SAME: post_ops=["add", "gelu_tanh"]}
// CHECK-NOT: Tanh(
)",
                                                            F32({6, 4}, 14), F32({4}, 15)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// The same shape with x * (x * (0.044715 * y)) for another value y is not
// GELU: nothing but the bias joins the MatMul.
TEST(FuseOneDnnPostOps, ScaledCubeOfAnotherValueIsNotGelu) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[3,6], %z: f32[3,4]) -> (%y) opset 17 {
  %w = constant $0
  %c0 = constant f32[] 0.044715
  %c1 = constant f32[] 0.7978846
  %one = constant f32[] 1.0
  %half = constant f32[] 0.5
  %h = MatMul(%x, %w) : f32[3,4]
  %k1 = Mul(%c0, %z) : f32[3,4]
  %k2 = Mul(%h, %k1) : f32[3,4]
  %k3 = Mul(%h, %k2) : f32[3,4]
  %inner = Add(%h, %k3) : f32[3,4]
  %arg = Mul(%c1, %inner) : f32[3,4]
  %t = Tanh(%arg) : f32[3,4]
  %g = Add(%one, %t) : f32[3,4]
  %gh = Mul(%half, %g) : f32[3,4]
  %y = Mul(%h, %gh) : f32[3,4]
}
// CHECK: %h = MatMul(%x, %w)
// CHECK: Tanh(
)",
                                                            F32({6, 4}, 16)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// A 1-D conv stored as 2-D with width 1, as jax2tf exports it: a whole
// Slice and a Squeeze of the width stand between the conv and its bias add
// and activation. They move below the element-wise nodes (the bias
// reshaped from [4,1] to [1,4,1,1]), which then join the conv.
TEST(FuseOneDnnPostOps, UnitDimRelabelsMoveBelowTheChain) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,3,6,1]) -> (%y) opset 17 {
  %w = constant $0
  %bias = constant $1
  %starts = constant i64[4] [0, 0, 0, 0]
  %ends = constant i64[4] [2147483647, 2147483647, 2147483647, 1]
  %axes = constant i64[1] [3]
  %c = Conv(%x, %w) {kernel_shape=[3, 1]} name="conv" : f32[1,4,4,1]
  %s = Slice(%c, %starts, %ends) : f32[1,4,4,1]
  %q = Squeeze(%s, %axes) : f32[1,4,4]
  %h = Add(%q, %bias) name="bias" : f32[1,4,4]
  %y = Relu(%h) name="relu" : f32[1,4,4]
}
// CHECK: = kiln.FusedConv(%x, %w, %bias.relabelled) {fused_nodes=["conv", "bias", "relu"],
// CHECK-SAME: post_ops=["add", "relu"]}
// CHECK-SAME: : f32[1,4,4,1]
// CHECK: %y = Reshape(
// CHECK-SAME: : f32[1,4,4]
// CHECK-NOT: Squeeze(
)",
                                                            F32({4, 3, 3, 1}, 21),
                                                            F32({4, 1}, 22)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// A result inside the moved region that another node reads (here a graph
// output and a ReduceSum) is relabelled back for those readers.
TEST(FuseOneDnnPostOps, RelabelledResultsReadElsewhereKeepTheirShape) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,3,6,1]) -> (%h, %y, %t) opset 17 {
  %w = constant $0
  %bias = constant $1
  %axes = constant i64[1] [3]
  %c = Conv(%x, %w) {kernel_shape=[3, 1]} name="conv" : f32[1,4,4,1]
  %q = Squeeze(%c, %axes) : f32[1,4,4]
  %h = Add(%bias, %q) name="bias" : f32[1,4,4]
  %y = Sigmoid(%h) name="sigmoid" : f32[1,4,4]
  %t = ReduceSum(%h) {keepdims=0} : f32[]
}
// CHECK: %h.unrelabelled = kiln.FusedConv(%x, %w, %bias.relabelled)
// CHECK-SAME: post_ops=["add"]}
// CHECK: %h = Reshape(%h.unrelabelled,
// CHECK: Sigmoid(%h.unrelabelled)
// CHECK-SAME: : f32[1,4,4,1]
)",
                                                            F32({4, 3, 3, 1}, 23),
                                                            F32({4, 1}, 24)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// A relabelled value another kind of node reads stays where it is.
TEST(FuseOneDnnPostOps, RelabelReadByANonElementwiseNodeStays) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,3,6,1]) -> (%y, %t) opset 17 {
  %w = constant $0
  %bias = constant $1
  %axes = constant i64[1] [3]
  %c = Conv(%x, %w) {kernel_shape=[3, 1]} name="conv" : f32[1,4,4,1]
  %q = Squeeze(%c, %axes) : f32[1,4,4]
  %h = Add(%q, %bias) : f32[1,4,4]
  %y = Relu(%h) : f32[1,4,4]
  %t = ReduceSum(%q) {keepdims=0} : f32[]
}
// CHECK: %c = Conv(%x, %w)
// CHECK: %q = Squeeze(%c, %axes)
// CHECK: %h = Add(%q, %bias)
)",
                                                            F32({4, 3, 3, 1}, 25),
                                                            F32({4, 1}, 26)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

// Attention scores: Q K^T (both activations), a scale and the mask add;
// Softmax ends the chain.
TEST(FuseOneDnnPostOps, AttentionScaleAndMask) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(R"(
graph main(%q: f32[1,2,4,3], %k: f32[1,2,3,4], %mask: f32[1,1,1,4]) -> (%p) opset 17 {
  %scale = constant f32[] 0.125
  %s = MatMul(%q, %k) : f32[1,2,4,4]
  %d = Mul(%s, %scale) : f32[1,2,4,4]
  %a = Add(%d, %mask) : f32[1,2,4,4]
  %p = Softmax(%a) {axis=-1} : f32[1,2,4,4]
}
// CHECK: %a = kiln.FusedMatMul(%q, %k, %mask) {
// CHECK-SAME: post_op_alphas=[0.125, 0.0], post_op_betas=[0.0, 0.0], post_op_inputs=[-1, 2], post_ops=["linear", "add"]}
// CHECK-NEXT: %p = Softmax(%a)
)",
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(stats.chain_ends,
            (std::map<std::string, int>{{"Softmax is not a oneDNN post-op", 1}}));
}

TEST(FuseOneDnnPostOps, SiluHardSwishClip) {
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5]) -> (%y1, %y2, %y3) opset 18 {
  %w = constant $0
  %b = constant $1
  %zero = constant f32[] 0.0
  %six = constant f32[] 6.0
  %c1 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %s = Sigmoid(%c1) : f32[1,4,5,5]
  %y1 = Mul(%c1, %s) : f32[1,4,5,5]
  %c2 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y2 = HardSwish(%c2) : f32[1,4,5,5]
  %c3 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y3 = Clip(%c3, %zero, %six) : f32[1,4,5,5]
}
// CHECK: %y1 = kiln.FusedConv(%x, %w, %b) {
// CHECK-SAME: post_op_alphas=[1.0], post_op_betas=[0.0], post_op_inputs=[-1], post_ops=["swish"]}
// CHECK: %y2 = kiln.FusedConv(%x, %w, %b) {
// CHECK-SAME: post_ops=["hardswish"]}
// CHECK: %y3 = kiln.FusedConv(%x, %w, %b) {
// CHECK-SAME: post_op_alphas=[0.0], post_op_betas=[6.0], post_op_inputs=[-1], post_ops=["clip"]}
)"));
  ASSERT_TRUE(r.ok()) << r.status();
}

// Clip before opset 11 has min/max attributes; x * HardSigmoid(x) with
// PyTorch's 1/6, 1/2 is a hardswish; a missing Clip max is FLT_MAX.
TEST(FuseOneDnnPostOps, OldClipAndHardSigmoidTimesX) {
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5]) -> (%y1, %y2, %y3) opset 10 {
  %w = constant $0
  %b = constant $1
  %c1 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y1 = Clip(%c1) {max=6.0, min=0.0} : f32[1,4,5,5]
  %c2 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %hs = HardSigmoid(%c2) {alpha=0.16666667, beta=0.5} : f32[1,4,5,5]
  %y2 = Mul(%hs, %c2) : f32[1,4,5,5]
  %c3 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y3 = Clip(%c3) {min=-0.25} : f32[1,4,5,5]
}
// CHECK: %y1 = kiln.FusedConv(
// CHECK-SAME: post_op_alphas=[0.0], post_op_betas=[6.0], post_op_inputs=[-1], post_ops=["clip"]}
// CHECK: %y2 = kiln.FusedConv(
// CHECK-SAME: post_ops=["hardswish"]}
// CHECK: %y3 = kiln.FusedConv(
// CHECK-SAME: post_op_alphas=[-0.25], post_op_betas=[3.4028235e+38], post_op_inputs=[-1], post_ops=["clip"]}
)"));
  ASSERT_TRUE(r.ok()) << r.status();
}

// Max / Min of the result and a scalar constant (TF exports: a floor after
// LeakyRelu, a ceiling) become clips, after the chain's other post-ops; the
// constant may sit first or be broadcast from [1,1,1,1]. A tensor operand
// or a non-finite bound ends the chain.
TEST(FuseOneDnnPostOps, MaxAndMinWithAScalarConstantClip) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5], %t: f32[1,4,5,5]) -> (%y1, %y2, %y3, %y4) opset 13 {
  %w = constant $0
  %b = constant $1
  %floor = constant f32[1,1,1,1] [-0.125]
  %ceil = constant f32[] 0.25
  %inf = constant f32[] inf
  %c1 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %l1 = LeakyRelu(%c1) {alpha=0.2} : f32[1,4,5,5]
  %y1 = Max(%l1, %floor) : f32[1,4,5,5]
  %c2 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y2 = Min(%ceil, %c2) : f32[1,4,5,5]
  %c3 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y3 = Max(%c3, %t) : f32[1,4,5,5]
  %c4 = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y4 = Min(%c4, %inf) : f32[1,4,5,5]
}
// CHECK: %y1 = kiln.FusedConv(%x, %w, %b) {
// CHECK-SAME: post_op_alphas=[0.2, -0.125], post_op_betas=[0.0, 3.4028235e+38], post_op_inputs=[-1, -1], post_ops=["leaky_relu", "clip"]}
// CHECK: %y2 = kiln.FusedConv(%x, %w, %b) {
// CHECK-SAME: post_op_alphas=[-3.4028235e+38], post_op_betas=[0.25], post_op_inputs=[-1], post_ops=["clip"]}
// CHECK: %c3 = Conv(
// CHECK: %y3 = Max(%c3, %t)
// CHECK: %c4 = Conv(
// CHECK: %y4 = Min(%c4, %inf)
)"), &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(stats.chain_ends.at("Max of the result and anything but one finite scalar constant"),
            1);
  EXPECT_EQ(stats.chain_ends.at("Min of the result and anything but one finite scalar constant"),
            1);
}

// Three post-ops in one chain, and Sub with the result second (on a
// MatMul: a conv takes no full-size add after its binary mul).
TEST(FuseOneDnnPostOps, ChainOfThreeAndReversedSub) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[5,3], %o: f32[5,4]) -> (%y) opset 18 {
  %w = constant $0
  %k = constant $1
  %c = MatMul(%x, %w) : f32[5,4]
  %m = Mul(%c, %k) : f32[5,4]
  %l = LeakyRelu(%m) {alpha=0.1} : f32[5,4]
  %y = Sub(%o, %l) : f32[5,4]
}
// CHECK: %y = kiln.FusedMatMul(%x, %w, %k, %o) {
// CHECK-SAME: post_op_alphas=[0.0, 0.1, -1.0, 0.0], post_op_betas=[0.0, 0.0, 0.0, 0.0],
// CHECK-SAME: post_op_inputs=[2, -1, -1, 3], post_ops=["mul", "leaky_relu", "linear", "add"]}
)",
                                                            F32({3, 4}, 1, -0.5, 0.5),
                                                            F32({1, 4}, 14)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// Only one in-place sum per call: a second full-size Add is a binary add.
// Scalar Add/Sub/Div constants become linear post-ops; Elu and Tanh too.
TEST(FuseOneDnnPostOps, OneSumAndScalarLinears) {
  absl::StatusOr<PassCheckResult> r = Fuse(R"(
graph main(%x: f32[2,3], %r1: f32[2,4], %r2: f32[2,4]) -> (%y) opset 18 {
  %w = constant f32[3,4] [0.5, -1.0, 0.25, 2.0, 1.5, 0.75, -0.5, 1.0, -2.0, 0.125, 1.0, -0.25]
  %two = constant f32[1] 2.0
  %q = constant f32[] 0.5
  %m = MatMul(%x, %w) : f32[2,4]
  %a1 = Add(%r1, %m) : f32[2,4]
  %a2 = Add(%a1, %r2) : f32[2,4]
  %d = Div(%a2, %two) : f32[2,4]
  %s = Sub(%q, %d) : f32[2,4]
  %e = Elu(%s) : f32[2,4]
  %y = Tanh(%e) : f32[2,4]
}
// CHECK: %y = kiln.FusedMatMul(%x, %w, %r1, %r2) {
// CHECK-SAME: post_op_alphas=[1.0, 0.0, 0.5, -1.0, 1.0, 0.0], post_op_betas=[0.0, 0.0, 0.0, 0.5, 0.0, 0.0],
// CHECK-SAME: post_op_inputs=[2, 3, -1, -1, -1, -1], post_ops=["sum", "add", "linear", "linear", "elu", "tanh"]}
)");
  ASSERT_TRUE(r.ok()) << r.status();
}

// ---- What must not fuse.

// A conv takes no full-size add after a binary post-op: oneDNN's jit convs
// refuse it there and its gemm-based conv applies it element by element. The
// residual Add and the Relu stay loop ops (the dynamic-quantization pattern:
// conv, runtime scale, bias, residual).
TEST(FuseOneDnnPostOps, NoFullSizeAddAfterABinaryPostOpOnAConv) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,3,5,5], %s: f32[], %res: f32[1,4,5,5]) -> (%y) opset 18 {
  %w = constant $0
  %b = constant $1
  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %m = Mul(%c, %s) : f32[1,4,5,5]
  %a = Add(%m, %b) : f32[1,4,5,5]
  %t = Add(%a, %res) : f32[1,4,5,5]
  %y = Relu(%t) : f32[1,4,5,5]
}
// CHECK: kiln.FusedConv(%x, %w, %s, %b)
// CHECK-SAME: post_ops=["mul", "add"]
// CHECK: Add(
// CHECK: Relu(
)",
                                                            F32({4, 3, 3, 3}, 1, -0.5, 0.5),
                                                            F32({1, 4, 1, 1}, 14)));
  ASSERT_TRUE(r.ok()) << r.status();
}

// Nor any full-size binary operand (rivagan's gated conv: conv, tanh, times
// an activation): no direct conv of oneDNN takes it, so the Mul stays a loop
// op. A MatMul takes it.
TEST(FuseOneDnnPostOps, NoFullSizeBinaryOperandOnAConv) {
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5], %g: f32[1,4,5,5]) -> (%y) opset 18 {
  %w = constant $0
  %b = constant $1
  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %t = Tanh(%c) : f32[1,4,5,5]
  %y = Mul(%t, %g) : f32[1,4,5,5]
}
// CHECK: kiln.FusedConv(%x, %w, %b)
// CHECK-SAME: post_ops=["tanh"]
// CHECK: %y = Mul(
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  r = Fuse(absl::Substitute(R"(
graph main(%x: f32[5,3], %g: f32[5,4]) -> (%y) opset 18 {
  %w = constant $0
  %c = MatMul(%x, %w) : f32[5,4]
  %y = Mul(%c, %g) : f32[5,4]
}
// CHECK: %y = kiln.FusedMatMul(%x, %w, %g)
// CHECK-SAME: post_ops=["mul"]
)",
                            F32({3, 4}, 1, -0.5, 0.5)));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FuseOneDnnPostOps, IntermediateWithTwoReadersEndsTheChain) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5]) -> (%y, %z) opset 18 {
  %w = constant $0
  %b = constant $1
  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %r = Relu(%c) : f32[1,4,5,5]
  %y = Sigmoid(%r) : f32[1,4,5,5]
  %z = Tanh(%r) : f32[1,4,5,5]
}
// CHECK: %r = kiln.FusedConv(%x, %w, %b) {
// CHECK-SAME: post_ops=["relu"]}
// CHECK-NEXT: %y = Sigmoid(%r)
// CHECK-NEXT: %z = Tanh(%r)
)"),
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(stats.chain_ends,
            (std::map<std::string, int>{{"result read by 2 nodes (Sigmoid, Tanh)", 1}}));
}

TEST(FuseOneDnnPostOps, AnchorOutputWithTwoReadersIsNotFused) {
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5]) -> (%y, %z) opset 18 {
  %w = constant $0
  %b = constant $1
  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y = Relu(%c) : f32[1,4,5,5]
  %z = Add(%c, %y) : f32[1,4,5,5]
}
// CHECK: %c = Conv(%x, %w, %b)
// CHECK-NEXT: %y = Relu(%c)
// CHECK-NOT: kiln.
)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

TEST(FuseOneDnnPostOps, GraphOutputInTheMiddleEndsTheChain) {
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5]) -> (%r, %y) opset 18 {
  %w = constant $0
  %b = constant $1
  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %r = Relu(%c) : f32[1,4,5,5]
  %y = Sigmoid(%r) : f32[1,4,5,5]
}
// CHECK: %r = kiln.FusedConv(%x, %w, %b) {
// CHECK-SAME: post_ops=["relu"]}
// CHECK-NEXT: %y = Sigmoid(%r)
)"));
  ASSERT_TRUE(r.ok()) << r.status();
}

// A GELU whose Erf result is read elsewhere cannot be absorbed (the Erf
// would be lost); the bias add before it still fuses.
TEST(FuseOneDnnPostOps, CompositeWithAnOutsideReaderIsNotAbsorbed) {
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[2,6]) -> (%y, %e) opset 17 {
  %w = constant $0
  %bias = constant $1
  %sqrt2 = constant f32[] 1.4142135
  %one = constant f32[] 1.0
  %half = constant f32[] 0.5
  %mm = MatMul(%x, %w) : f32[2,4]
  %g = Add(%mm, %bias) : f32[2,4]
  %d = Div(%g, %sqrt2) : f32[2,4]
  %e = Erf(%d) : f32[2,4]
  %a = Add(%e, %one) : f32[2,4]
  %m = Mul(%g, %a) : f32[2,4]
  %y = Mul(%m, %half) : f32[2,4]
}
// CHECK: %g = kiln.FusedMatMul(%x, %w, %bias) {
// CHECK-SAME: post_ops=["add"]}
// CHECK-NEXT: %d = Div(%g, %sqrt2)
// CHECK-NEXT: %e = Erf(%d)
)",
                                                            F32({6, 4}, 15), F32({4}, 16)));
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FuseOneDnnPostOps, NonF32AnchorIsNotFused) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(R"(
graph main(%x: f64[1,1,3,3]) -> (%y) opset 18 {
  %w = constant f64[1,1,1,1] [2.0]
  %c = Conv(%x, %w) : f64[1,1,3,3]
  %y = Relu(%c) : f64[1,1,3,3]
}
// CHECK: %c = Conv(%x, %w)
// CHECK-NEXT: %y = Relu(%c)
)",
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  EXPECT_EQ(stats.unsupported,
            (std::map<std::string, int>{
                {"'x' is f64[1,1,3,3]: only static-shaped f32 is supported", 1}}));
}

TEST(FuseOneDnnPostOps, NonConstantConvWeightsAreNotFused) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(R"(
graph main(%x: f32[1,2,3,3], %w: f32[2,2,1,1]) -> (%y) opset 18 {
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %y = Relu(%c) : f32[1,2,3,3]
}
// CHECK: %c = Conv(%x, %w)
// CHECK-NEXT: %y = Relu(%c)
)",
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  EXPECT_EQ(stats.unsupported,
            (std::map<std::string, int>{{"weights are not constant", 1}}));
}

// Post-ops oneDNN lacks, or that would change the result's shape, stay.
TEST(FuseOneDnnPostOps, UnsupportedFollowersStay) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(R"(
graph main(%x: f32[2,3], %v: f32[2,4], %big: f32[5,2,4]) -> (%y1, %y2, %y3, %y4) opset 18 {
  %w = constant f32[3,4] [0.5, -1.0, 0.25, 2.0, 1.5, 0.75, -0.5, 1.0, -2.0, 0.125, 1.0, -0.25]
  %m1 = MatMul(%x, %w) : f32[2,4]
  %y1 = Div(%m1, %v) : f32[2,4]
  %m2 = MatMul(%x, %w) : f32[2,4]
  %y2 = Add(%m2, %big) : f32[5,2,4]
  %m3 = MatMul(%x, %w) : f32[2,4]
  %y3 = Exp(%m3) : f32[2,4]
  %m4 = MatMul(%x, %w) : f32[2,4]
  %y4 = Add(%m4, %m4) : f32[2,4]
}
// CHECK-NOT: kiln.
)",
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  EXPECT_EQ(stats.supported, 4);
  EXPECT_EQ(stats.chain_ends,
            (std::map<std::string, int>{
                {"Add changes the shape or dtype (broadcasts the result)", 1},
                {"Add of the result with itself", 1},
                {"Div by a tensor (oneDNN has no div post-op)", 1},
                {"Exp is not a oneDNN post-op", 1}}));
  // Each refused element-wise follower is listed with its anchor and why.
  std::vector<std::string> unfused;
  for (const OneDnnFusionStats::Unfused& u : stats.unfused_elementwise) {
    unfused.push_back(absl::StrCat(u.node, " ", u.op, " after ", u.anchor, ": ", u.reason));
  }
  EXPECT_THAT(unfused,
              ::testing::ElementsAre(
                  "y1 Div after m1: Div by a tensor (oneDNN has no div post-op)",
                  "y2 Add after m2: Add changes the shape or dtype (broadcasts the result)",
                  "y3 Exp after m3: Exp is not a oneDNN post-op",
                  "y4 Add after m4: Add of the result with itself"));
}

TEST(FuseOneDnnPostOps, BroadcastPatternsOnlyOneDnnsReferenceTakesStayOut) {
  // Attention scores [2,3,4,4]: a per-head bias shared by the batch
  // ([1,3,4,4], as Swin's relative position bias) has no optimized oneDNN
  // kernel; a per-batch mask ([2,1,4,4]) and a per-key one ([1,1,1,4]) do.
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%q: f32[2,3,4,5], %k: f32[2,3,5,4]) -> (%y1, %y2, %y3) opset 18 {
  %hb = constant $0
  %bm = constant $1
  %km = constant $2
  %s1 = MatMul(%q, %k) : f32[2,3,4,4]
  %y1 = Add(%s1, %hb) : f32[2,3,4,4]
  %s2 = MatMul(%q, %k) : f32[2,3,4,4]
  %y2 = Add(%s2, %bm) : f32[2,3,4,4]
  %s3 = MatMul(%q, %k) : f32[2,3,4,4]
  %y3 = Add(%s3, %km) : f32[2,3,4,4]
}
// CHECK: %s1 = MatMul(%q, %k)
// CHECK-NEXT: %y1 = Add(%s1, %hb)
// CHECK-NEXT: %y2 = kiln.FusedMatMul(%q, %k, %bm)
// CHECK-NEXT: %y3 = kiln.FusedMatMul(%q, %k, %km)
)",
                                                            F32({1, 3, 4, 4}, 3),
                                                            F32({2, 1, 4, 4}, 4),
                                                            F32({1, 1, 1, 4}, 5)),
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(stats.unfused_elementwise.size(), 1u);
  EXPECT_EQ(stats.unfused_elementwise[0].node, "y1");
  EXPECT_EQ(stats.unfused_elementwise[0].reason,
            "Add operand [1,3,4,4] broadcasts over the result in a pattern only oneDNN's "
            "reference kernel takes");
}

TEST(FuseOneDnnPostOps, AResidualAddTakenByALaterChainIsNotListed) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(absl::Substitute(R"(
graph main(%x: f32[1,4,5,5]) -> (%y) opset 18 {
  %w = constant $0
  %b = constant $1
  %a = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %ra = Relu(%a) : f32[1,4,5,5]
  %c = Conv(%ra, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %s = Add(%c, %ra) : f32[1,4,5,5]
  %y = Relu(%s) : f32[1,4,5,5]
}
// CHECK: %ra = kiln.FusedConv(%x, %w, %b)
// CHECK: %y = kiln.FusedConv(%ra, %w, %b, %ra)
// CHECK-SAME: post_ops=["sum", "relu"]
)",
                                                            F32({4, 4, 3, 3}, 1, -0.5, 0.5),
                                                            F32({4}, 2)),
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(stats.unfused_elementwise.empty());
}

TEST(FuseOneDnnPostOps, TwoReadersAreBothListedAsUnfused) {
  OneDnnFusionStats stats;
  absl::StatusOr<PassCheckResult> r = Fuse(ConvCase(R"(
graph main(%x: f32[1,3,5,5]) -> (%y, %z, %s) opset 18 {
  %w = constant $0
  %b = constant $1
  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %y = Sigmoid(%c) : f32[1,4,5,5]
  %z = Tanh(%c) : f32[1,4,5,5]
  %s = Shape(%c) : i64[4]
}
// CHECK: %c = Conv(%x, %w, %b)
)"),
                                           &stats);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(stats.unfused_elementwise.size(), 2u);  // Shape is no element-wise op
  EXPECT_EQ(stats.unfused_elementwise[0].op, "Sigmoid");
  EXPECT_EQ(stats.unfused_elementwise[1].op, "Tanh");
  EXPECT_EQ(stats.unfused_elementwise[0].reason,
            "result read by 3 nodes (Sigmoid, Tanh, Shape)");
}

}  // namespace
}  // namespace kiln::passes
