// Tests for the reference kernels of kiln's fused library-call ops
// (ops_fused.cc): values worked out by hand or from each post-op's closed
// form, and the errors a malformed fused node gets.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "interp/interpreter.h"

namespace kiln::interp {
namespace {

using ir::Tensor;
using ::testing::HasSubstr;

absl::StatusOr<std::vector<Tensor>> RunText(const std::string& text,
                                            std::vector<Tensor> inputs) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  return interp::Run(*g, inputs);
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

// 1x1 conv, 2 -> 2 channels: y[c] = w[c,0] x0 + w[c,1] x1 + b[c], then
// + t[c] (broadcast [1,2,1,1]) and relu.
TEST(FusedOps, ConvBiasAddRelu) {
  absl::StatusOr<std::vector<Tensor>> r = RunText(R"(
graph main(%x: f32[1,2,1,2]) -> (%y) opset 18 {
  %w = constant f32[2,2,1,1] [1.0, 2.0, -1.0, 0.5]
  %b = constant f32[2] [0.5, -1.0]
  %t = constant f32[1,2,1,1] [-3.0, 1.0]
  %y = kiln.FusedConv(%x, %w, %b, %t) {post_ops=["add", "relu"],
      post_op_alphas=[0.0, 0.0], post_op_betas=[0.0, 0.0],
      post_op_inputs=[3, -1], fused_nodes=["c", "a", "r"]} : f32[1,2,1,2]
}
)",
                                                  {Tensor::FromVector<float>(
                                                      {1, 2, 1, 2}, {1, 2, 3, -4})});
  ASSERT_TRUE(r.ok()) << r.status();
  // channel 0: [1+6+0.5-3, 2-8+0.5-3] = [4.5, -8.5] -> [4.5, 0]
  // channel 1: [-1+1.5-1+1, -2-2-1+1] = [0.5, -4] -> [0.5, 0]
  EXPECT_EQ(Values((*r)[0]), (std::vector<float>{4.5f, 0.0f, 0.5f, 0.0f}));
}

// MatMul [1,2]x[2,2], then sum (accumulate a residual, scale 2), then sub,
// then mul, each operand broadcasting differently.
TEST(FusedOps, MatMulSumSubMul) {
  absl::StatusOr<std::vector<Tensor>> r = RunText(R"(
graph main(%x: f32[1,2], %res: f32[1,2]) -> (%y) opset 18 {
  %w = constant f32[2,2] [1.0, 0.0, 0.0, 1.0]
  %s = constant f32[2] [1.0, 2.0]
  %m = constant f32[1] 3.0
  %y = kiln.FusedMatMul(%x, %w, %res, %s, %m) {post_ops=["sum", "sub", "mul"],
      post_op_alphas=[2.0, 0.0, 0.0], post_op_betas=[0.0, 0.0, 0.0],
      post_op_inputs=[2, 3, 4], fused_nodes=strings[]} : f32[1,2]
}
)",
                                                  {Tensor::FromVector<float>({1, 2}, {1, -1}),
                                                   Tensor::FromVector<float>({1, 2}, {0.5, 4})});
  ASSERT_TRUE(r.ok()) << r.status();
  // [1 + 1, -1 + 8] = [2, 7]; - [1, 2] = [1, 5]; * 3 = [3, 15]
  EXPECT_EQ(Values((*r)[0]), (std::vector<float>{3.0f, 15.0f}));
}

// Gemm with transB and bias, then linear(2, 1) and clip(0, 6).
TEST(FusedOps, GemmLinearClip) {
  absl::StatusOr<std::vector<Tensor>> r = RunText(R"(
graph main(%x: f32[1,3]) -> (%y) opset 18 {
  %w = constant f32[3,3] [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
  %b = constant f32[3] [0.0, 1.0, -1.0]
  %y = kiln.FusedGemm(%x, %w, %b) {transB=1, post_ops=["linear", "clip"],
      post_op_alphas=[2.0, 0.0], post_op_betas=[1.0, 6.0],
      post_op_inputs=[-1, -1], fused_nodes=["g"]} : f32[1,3]
}
)",
                                                  {Tensor::FromVector<float>({1, 3}, {1, 2, -3})});
  ASSERT_TRUE(r.ok()) << r.status();
  // gemm: [1, 3, -4]; 2x+1: [3, 7, -7]; clip: [3, 6, 0]
  EXPECT_EQ(Values((*r)[0]), (std::vector<float>{3.0f, 6.0f, 0.0f}));
}

// Every unary post-op on an identity MatMul against its closed form.
TEST(FusedOps, UnaryPostOpsMatchTheirDefinitions) {
  const std::vector<float> xs = {-2.5f, -0.5f, 0.0f, 0.75f, 3.5f};
  struct Case {
    std::string kind;
    float alpha, beta;
    std::function<double(double x, double a, double b)> f;
  };
  const double s2 = std::sqrt(2.0), k = std::sqrt(2.0 / M_PI);
  const std::vector<Case> cases = {
      {"relu", 0, 0, [](double x, double, double) { return x < 0 ? 0.0 : x; }},
      {"leaky_relu", 0.1f, 0, [](double x, double a, double) { return x < 0 ? a * x : x; }},
      {"elu", 0.5f, 0, [](double x, double a, double) { return x < 0 ? a * std::expm1(x) : x; }},
      {"gelu_erf", 0, 0,
       [s2](double x, double, double) { return x * 0.5 * std::erfc(-x / s2); }},
      {"gelu_tanh", 0, 0,
       [k](double x, double, double) {
         return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * std::pow(x, 3))));
       }},
      {"swish", 1.0f, 0, [](double x, double, double) { return x / (1 + std::exp(-x)); }},
      {"sigmoid", 0, 0, [](double x, double, double) { return 1 / (1 + std::exp(-x)); }},
      {"tanh", 0, 0, [](double x, double, double) { return std::tanh(x); }},
      {"hardswish", 0, 0,
       [](double x, double, double) {
         return x <= -3 ? 0.0 : x >= 3 ? x : x * (x + 3) / 6;
       }},
      {"hardsigmoid", 0.2f, 0.5f,
       [](double x, double a, double b) { return std::fmin(1.0, std::fmax(0.0, a * x + b)); }},
      {"clip", -1.0f, 2.0f,
       [](double x, double a, double b) { return x < a ? a : x > b ? b : x; }},
      {"linear", -2.0f, 0.25f, [](double x, double a, double b) { return a * x + b; }},
  };
  for (const Case& c : cases) {
    // Floats with an exponent so the parser never reads them as ints.
    const std::string text = absl::Substitute(R"(
graph main(%x: f32[5,1]) -> (%y) opset 18 {
  %w = constant f32[1,1] 1.0
  %y = kiln.FusedMatMul(%x, %w) {post_ops=["$0"], post_op_alphas=[$1e0],
      post_op_betas=[$2e0], post_op_inputs=[-1], fused_nodes=strings[]} : f32[5,1]
}
)",
                                              c.kind, c.alpha, c.beta);
    absl::StatusOr<std::vector<Tensor>> r =
        RunText(text, {Tensor::FromVector<float>({5, 1}, xs)});
    ASSERT_TRUE(r.ok()) << c.kind << ": " << r.status();
    const std::vector<float> got = Values((*r)[0]);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = c.f(xs[i], c.alpha, c.beta);
      EXPECT_NEAR(got[i], want, 1e-6 * (1 + std::abs(want)))
          << c.kind << " at x=" << xs[i];
    }
  }
}

constexpr char kBadTemplate[] = R"(
graph main(%x: f32[1,2], %o: $0) -> (%y) opset 18 {
  %w = constant f32[2,2] [1.0, 0.0, 0.0, 1.0]
  %y = kiln.FusedMatMul(%x, %w, %o) {$1} : f32[1,2]
}
)";

std::string RunBad(const std::string& operand_type, const std::string& attrs,
                   const Tensor& operand) {
  absl::StatusOr<std::vector<Tensor>> r =
      RunText(absl::Substitute(kBadTemplate, operand_type, attrs),
              {Tensor::FromVector<float>({1, 2}, {1, 2}), operand});
  EXPECT_FALSE(r.ok());
  return std::string(r.status().message());
}

TEST(FusedOps, MalformedNodesAreErrors) {
  const Tensor o2 = Tensor::FromVector<float>({1, 2}, {1, 2});
  const Tensor o3 = Tensor::FromVector<float>({3}, {1, 2, 3});
  EXPECT_THAT(RunBad("f32[1,2]",
                     "post_ops=[\"relu\"], post_op_alphas=floats[], "
                     "post_op_betas=[0.0], post_op_inputs=[-1]",
                     o2),
              HasSubstr("post_ops has 1 entries"));
  EXPECT_THAT(RunBad("f32[1,2]",
                     "post_ops=[\"softmax\"], post_op_alphas=[0.0], "
                     "post_op_betas=[0.0], post_op_inputs=[-1]",
                     o2),
              HasSubstr("unknown post-op 'softmax'"));
  EXPECT_THAT(RunBad("f32[1,2]",
                     "post_ops=[\"add\"], post_op_alphas=[0.0], "
                     "post_op_betas=[0.0], post_op_inputs=[-1]",
                     o2),
              HasSubstr("needs an operand input"));
  EXPECT_THAT(RunBad("f32[1,2]",
                     "post_ops=[\"add\"], post_op_alphas=[0.0], "
                     "post_op_betas=[0.0], post_op_inputs=[7]",
                     o2),
              HasSubstr("reads input 7"));
  EXPECT_THAT(RunBad("f32[3]",
                     "post_ops=[\"mul\"], post_op_alphas=[0.0], "
                     "post_op_betas=[0.0], post_op_inputs=[2]",
                     o3),
              HasSubstr("does not broadcast"));
  EXPECT_THAT(RunBad("f32[3]",
                     "post_ops=[\"sum\"], post_op_alphas=[1.0], "
                     "post_op_betas=[0.0], post_op_inputs=[2]",
                     o3),
              HasSubstr("does not have the output's shape"));
  EXPECT_THAT(RunBad("f32[1,2]",
                     "post_ops=[\"add\"], post_op_alphas=[0.0], "
                     "post_op_betas=[0.0], post_op_inputs=[1]",
                     o2),
              HasSubstr("needs the MatMul's inputs"));
  EXPECT_THAT(RunBad("f32[1,2]", "post_op_alphas=[0.0]", o2),
              HasSubstr("missing required attribute 'post_ops'"));
}

// Only domain "kiln" reaches kiln's kernels; a default-domain op spelled
// "kiln.FusedMatMul" is unknown.
TEST(FusedOps, OnlyTheKilnDomainFindsFusedKernels) {
  ir::Graph g;
  const ir::ValueId x = g.AddValue("x", ir::DType::kF32, {1, 1});
  const ir::ValueId y = g.AddValue("y", ir::DType::kF32, {1, 1});
  g.AddInput(x);
  g.AddOutput(y);
  g.AddNode("kiln.FusedMatMul", {x, x}, {y});
  absl::StatusOr<std::vector<Tensor>> r =
      interp::Run(g, {Tensor::FromVector<float>({1, 1}, {1})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(UnsupportedOps(g), (std::vector<std::string>{"kiln.FusedMatMul"}));
  g.mutable_nodes()[0].op = "FusedMatMul";
  g.mutable_nodes()[0].domain = "kiln";
  EXPECT_TRUE(UnsupportedOps(g).empty());
}

}  // namespace
}  // namespace kiln::interp
