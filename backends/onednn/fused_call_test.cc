// Tests of FusedCall's shape rules, validation and printable form; expected
// shapes are worked out by hand from ONNX's Conv/ConvTranspose/MatMul rules.
#include "backends/onednn/fused_call.h"

#include "gtest/gtest.h"

namespace kiln::onednn {
namespace {

using ir::DType;
using ir::Shape;

TensorSpec Spec(Shape shape) { return TensorSpec{DType::kF32, std::move(shape), {}}; }

FusedCall Conv3x3() {
  FusedCall c;
  c.kind = CallKind::kConv;
  c.src = Spec({1, 64, 56, 56});
  c.weights = Spec({64, 64, 3, 3});
  c.bias = Spec({64});
  c.conv.pads_begin = {1, 1};
  c.conv.pads_end = {1, 1};
  c.dst = Spec({1, 64, 56, 56});
  return c;
}

TEST(FusedCall, ConvString) {
  FusedCall c = Conv3x3();
  c.post_ops = {PostOp::Sum(), PostOp::Relu()};
  EXPECT_EQ(c.ToString(), "conv[3x3 s1 g1 p1]+bias+sum+relu");
  c.conv.pads_begin = c.conv.pads_end = {};
  c.conv.strides = {2, 1};
  c.conv.dilations = {2, 2};
  c.conv.groups = 4;
  c.bias.reset();
  c.post_ops = {PostOp::LeakyRelu(0.1f), PostOp::Relu6(), PostOp::Clip(-1, 1),
                PostOp::HardSigmoid(0.2f, 0.5f), PostOp::Add(Spec({1, 64, 1, 1}))};
  EXPECT_EQ(c.ToString(),
            "conv[3x3 s2x1 g4 d2]+leaky_relu(0.1)+relu6+clip(-1,1)+"
            "hardsigmoid(0.2,0.5)+add[1x64x1x1]");
}

TEST(FusedCall, OtherKindsString) {
  FusedCall m;
  m.kind = CallKind::kMatMul;
  m.src = Spec({128, 768});
  m.weights = Spec({768, 3072});
  m.weights.strides = TransposedLastTwoStrides(m.weights.shape);
  m.dst = Spec({128, 3072});
  m.bias = Spec({3072});
  m.post_ops = {PostOp::GeluErf()};
  EXPECT_EQ(m.ToString(), "matmul[128x768x3072 tB]+bias+gelu_erf");
  FusedCall l;
  l.kind = CallKind::kInnerProduct;
  l.weights = Spec({10, 20});
  l.post_ops = {PostOp::Swish(), PostOp::Sum(0.5f), PostOp::Linear(2, 3)};
  EXPECT_EQ(l.ToString(), "linear[20->10]+swish+sum(0.5)+linear(2,3)");
}

TEST(FusedCall, Strides) {
  EXPECT_EQ(TransposedLastTwoStrides({2, 3, 4}), (std::vector<int64_t>{12, 1, 3}));
  EXPECT_EQ(ChannelsLastStrides({2, 3, 4, 5}), (std::vector<int64_t>{60, 1, 15, 3}));
  EXPECT_EQ(Spec({2, 3, 4}).EffectiveStrides(), (std::vector<int64_t>{12, 4, 1}));
}

TEST(FusedCall, ConvDstShape) {
  FusedCall c = Conv3x3();
  // (56 + 1 + 2 - ((3-1)*2+1)) / 2 + 1 = 54 / 2 + 1 = 28.
  c.conv.pads_end = {2, 2};
  c.conv.strides = {2, 2};
  c.conv.dilations = {2, 2};
  EXPECT_EQ(*ComputeDstShape(c), (Shape{1, 64, 28, 28}));
}

TEST(FusedCall, ConvTransposeDstShape) {
  FusedCall c;
  c.kind = CallKind::kConvTranspose;
  c.src = Spec({1, 8, 5, 5});
  c.weights = Spec({8, 3, 3, 3});  // [IC, OC/groups, k, k]
  c.conv.groups = 2;
  c.conv.strides = {2, 2};
  c.conv.pads_begin = {1, 1};
  c.conv.pads_end = {1, 0};
  c.conv.output_padding = {1, 0};
  // OC = 3 * 2; H = 2*(5-1) + 1 + 3 - 1 - 1 = 10; W = 2*4 + 0 + 3 - 1 - 0 = 10.
  EXPECT_EQ(*ComputeDstShape(c), (Shape{1, 6, 10, 10}));
}

TEST(FusedCall, MatMulDstShapeBroadcastsBatch) {
  FusedCall c;
  c.kind = CallKind::kMatMul;
  c.src = Spec({2, 1, 4, 5});
  c.weights = Spec({3, 5, 6});
  EXPECT_EQ(*ComputeDstShape(c), (Shape{2, 3, 4, 6}));
  c.weights = Spec({3, 4, 6});
  EXPECT_EQ(ComputeDstShape(c).status().code(), absl::StatusCode::kInvalidArgument);
  c.weights = Spec({6});
  EXPECT_EQ(ComputeDstShape(c).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FusedCall, ValidateAcceptsConsistentCall) {
  FusedCall c = Conv3x3();
  c.post_ops = {PostOp::Add(Spec({64, 1, 1})), PostOp::Mul(Spec({1, 64, 56, 56}))};
  EXPECT_TRUE(Validate(c).ok()) << Validate(c);
}

TEST(FusedCall, ValidateRejects) {
  auto code = [](const FusedCall& c) { return Validate(c).code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  FusedCall c = Conv3x3();
  c.dst.shape = {1, 64, 54, 54};
  EXPECT_EQ(code(c), kInvalid);
  c = Conv3x3();
  c.weights = Spec({64, 32, 3, 3});  // needs groups = 2
  EXPECT_EQ(code(c), kInvalid);
  c.conv.groups = 2;
  EXPECT_TRUE(Validate(c).ok());
  c = Conv3x3();
  c.bias = Spec({63});
  EXPECT_EQ(code(c), kInvalid);
  c = Conv3x3();
  c.post_ops = {PostOp::Add(Spec({1, 64, 2, 1}))};
  EXPECT_EQ(code(c), kInvalid);
  c.post_ops = {PostOp::Clip(1, 0)};
  EXPECT_EQ(code(c), kInvalid);
  c.post_ops = {PostOp::LeakyRelu(std::nanf(""))};
  EXPECT_EQ(code(c), kInvalid);
  c = Conv3x3();
  c.conv.strides = {0, 1};
  EXPECT_EQ(code(c), kInvalid);
  c = Conv3x3();
  c.conv.pads_begin = {1};
  EXPECT_EQ(code(c), kInvalid);
  c = Conv3x3();
  c.src.strides = {1, 2};
  EXPECT_EQ(code(c), kInvalid);
  c = Conv3x3();
  c.src.shape = {1, 64, 0, 56};
  EXPECT_EQ(code(c), kInvalid);
  c = Conv3x3();
  c.conv.pads_begin = c.conv.pads_end = {0, 0};
  c.src.shape = {1, 64, 2, 2};  // 3x3 window on 2x2
  EXPECT_EQ(code(c), kInvalid);
  c = Conv3x3();
  c.post_ops = {PostOp::Sum(), PostOp::Sum()};
  EXPECT_EQ(code(c), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln::onednn
