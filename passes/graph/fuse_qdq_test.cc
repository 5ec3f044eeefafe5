// Tests for pass fuse-qdq. RunPassAndCheck also runs the reference
// interpreter on the graph before (the f32 QDQ pattern) and after (the
// integer op) on seeded inputs: u8 outputs must agree within one
// quantization step (docs/quantization.md).
#include "passes/graph/fuse_qdq.h"

#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "interp/compare.h"
#include "ir/graph/text.h"
#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

using ::testing::HasSubstr;

interp::Tolerance OneStep() {
  interp::Tolerance t;
  t.integer_steps = 1;
  return t;
}

// `n` deterministic integers in [lo, hi], joined for a constant literal.
std::string Ints(int64_t n, int lo, int hi, int seed) {
  std::vector<std::string> v;
  for (int64_t i = 0; i < n; ++i) {
    const double r = std::sin(seed * 12.9898 + i * 78.233) * 43758.5453;
    v.push_back(absl::StrCat(lo + static_cast<int>((hi - lo + 1) * (r - std::floor(r)))));
  }
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

std::string F(float v) { return absl::StrFormat("%.9g", v); }

// Per-channel weight scales and the bias scales onnxruntime writes for them
// (x_scale * w_scale[c], in f32).
const float kXScale = 0.02f;
const std::vector<float> kWScales = {0.011f, 0.007f, 0.013f, 0.009f};
std::string BiasScales() {
  std::vector<std::string> v;
  for (float s : kWScales) v.push_back(F(kXScale * s));
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}
std::string WScales() {
  std::vector<std::string> v;
  for (float s : kWScales) v.push_back(F(s));
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

TEST(FuseQdq, ConvPerChannelWithI32BiasBecomesQLinearConv) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, absl::Substitute(R"(
graph main(%in: f32[1,3,6,6]) -> (%y) opset 13 {
  %xs = constant f32[] $0
  %xz = constant u8[] 128
  %wq = constant i8[4,3,3,3] $1
  %ws = constant f32[4] $2
  %wz = constant i8[4] [0, 0, 0, 0]
  %bq = constant i32[4] [300, -2000, 45, 0]
  %bs = constant f32[4] $3
  %ys = constant f32[] 0.05
  %yz = constant u8[] 120
  %x = QuantizeLinear(%in, %xs, %xz) : u8[1,3,6,6]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[1,3,6,6]
  %wd = DequantizeLinear(%wq, %ws, %wz) {axis=0} : f32[4,3,3,3]
  %bd = DequantizeLinear(%bq, %bs) {axis=0} : f32[4]
  %c = Conv(%xd, %wd, %bd) {pads=[1, 1, 1, 1], strides=[2, 2]} : f32[1,4,3,3]
  %y = QuantizeLinear(%c, %ys, %yz) : u8[1,4,3,3]
}
// CHECK: %y = QLinearConv(%x, %xs, %xz, %wq, %ws, %wz, %ys, %yz, %bq) {pads=[1, 1, 1, 1], strides=[2, 2]}
// CHECK-NOT: Conv(
)",
                                                                   F(kXScale), Ints(108, -60, 60, 1),
                                                                   WScales(), BiasScales()),
                                                  OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_EQ(pass.patterns()[0].op, "QLinearConv");
}

TEST(FuseQdq, F32BiasIsRoundedOnceAndReluImpliedBySaturationGoes) {
  // Output zero point 0 (u8): Q(relu(v)) == Q(v), so the Relu is dropped.
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, absl::Substitute(R"(
graph main(%in: f32[1,3,5,5]) -> (%y) opset 13 {
  %xs = constant f32[] $0
  %xz = constant u8[] 100
  %wq = constant i8[4,3,3,3] $1
  %ws = constant f32[4] $2
  %b = constant f32[4] [0.3, -0.25, 0.01, 1.5]
  %ys = constant f32[] 0.04
  %yz = constant u8[] 0
  %x = QuantizeLinear(%in, %xs, %xz) : u8[1,3,5,5]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[1,3,5,5]
  %wd = DequantizeLinear(%wq, %ws) {axis=0} : f32[4,3,3,3]
  %c = Conv(%xd, %wd, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
  %r = Relu(%c) : f32[1,4,5,5]
  %y = QuantizeLinear(%r, %ys, %yz) : u8[1,4,5,5]
}
// CHECK: %b.quantized = constant i32[4]
// CHECK: %y = QLinearConv(%x, %xs, %xz, %wq, %ws, %wq.zero_point, %ys, %yz, %b.quantized)
// CHECK-NOT: Relu
)",
                                                                   F(kXScale), Ints(108, -64, 64, 2),
                                                                   WScales()),
                                                  OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FuseQdq, Relu6ClipWithinTheOutputRangeIsDroppedOtherwiseKept) {
  // y_scale 6/255, zero point 0: Q(0) = 0 and Q(6) = 255 are the u8 range's
  // ends, so Q(clip(v, 0, 6)) == Q(v). Clip(0, 4) is not implied.
  const std::string graph = R"(
graph main(%in: f32[1,3,4,4]) -> (%y) opset 13 {
  %xs = constant f32[] 0.02
  %xz = constant u8[] 100
  %wq = constant i8[4,3,1,1] $0
  %ws = constant f32[] 0.05
  %lo = constant f32[] 0.0
  %hi = constant f32[] $1
  %ys = constant f32[] $2
  %yz = constant u8[] 0
  %x = QuantizeLinear(%in, %xs, %xz) : u8[1,3,4,4]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[1,3,4,4]
  %wd = DequantizeLinear(%wq, %ws) : f32[4,3,1,1]
  %c = Conv(%xd, %wd) : f32[1,4,4,4]
  %r = Clip(%c, %lo, %hi) : f32[1,4,4,4]
  %y = QuantizeLinear(%r, %ys, %yz) : u8[1,4,4,4]
}
$3
)";
  FuseQdq dropped;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(
      dropped,
      absl::Substitute(graph, Ints(12, -64, 64, 7), "6.0", F(6.0f / 255), "// CHECK: QLinearConv(\n// CHECK-NOT: Clip"),
      OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  FuseQdq kept;
  r = RunPassAndCheck(
      kept, absl::Substitute(graph, Ints(12, -64, 64, 7), "4.0", F(6.0f / 255), "// CHECK: Clip("),
      OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  ASSERT_EQ(kept.patterns().size(), 1u);
  EXPECT_THAT(kept.patterns()[0].reason, HasSubstr("Clip bounds inside"));
}

TEST(FuseQdq, ReluNotImpliedBySaturationKeepsTheF32Pattern) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, absl::Substitute(R"(
graph main(%in: f32[1,3,4,4]) -> (%y) opset 13 {
  %xs = constant f32[] 0.02
  %xz = constant u8[] 100
  %wq = constant i8[4,3,1,1] $0
  %ws = constant f32[] 0.01
  %ys = constant f32[] 0.04
  %yz = constant u8[] 10
  %x = QuantizeLinear(%in, %xs, %xz) : u8[1,3,4,4]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[1,3,4,4]
  %wd = DequantizeLinear(%wq, %ws) : f32[4,3,1,1]
  %c = Conv(%xd, %wd) : f32[1,4,4,4]
  %r = Relu(%c) : f32[1,4,4,4]
  %y = QuantizeLinear(%r, %ys, %yz) : u8[1,4,4,4]
}
// CHECK: %c = Conv(%xd, %wd)
// CHECK-NEXT: %r = Relu(%c)
// CHECK-NEXT: %y = QuantizeLinear(%r, %ys, %yz)
)",
                                                                   Ints(12, -64, 64, 3)),
                                                  OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_EQ(pass.patterns()[0].op, "");
  EXPECT_THAT(pass.patterns()[0].reason, HasSubstr("not exact to drop"));
}

TEST(FuseQdq, GemmBecomesQLinearConv1x1BetweenReshapes) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, absl::Substitute(R"(
graph main(%in: f32[2,8]) -> (%y) opset 13 {
  %xs = constant f32[] 0.02
  %xz = constant u8[] 128
  %wq = constant i8[4,8] $0
  %ws = constant f32[4] $1
  %wz = constant i8[4] [0, 0, 0, 0]
  %b = constant f32[4] [0.1, -0.2, 0.3, 0.05]
  %ys = constant f32[] 0.03
  %yz = constant u8[] 128
  %x = QuantizeLinear(%in, %xs, %xz) : u8[2,8]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[2,8]
  %wd = DequantizeLinear(%wq, %ws, %wz) {axis=0} : f32[4,8]
  %g = Gemm(%xd, %wd, %b) {transB=1} : f32[2,4]
  %y = QuantizeLinear(%g, %ys, %yz) : u8[2,4]
}
// CHECK: %x.as_1x1 = Reshape(%x, %x.as_1x1.shape) : u8[2,8,1,1]
// CHECK-NEXT: %y.1x1 = QLinearConv(%x.as_1x1, %xs, %xz, %wq.as_1x1, %ws, %wz, %ys, %yz, %b.quantized) name="g" : u8[2,4,1,1]
// CHECK-NEXT: %y = Reshape(%y.1x1, %y.shape) : u8[2,4]
// CHECK-NOT: Gemm
)",
                                                                   Ints(32, -64, 64, 4), WScales()),
                                                  OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FuseQdq, GemmWithoutTransBTransposesTheWeights) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, absl::Substitute(R"(
graph main(%in: f32[3,8]) -> (%y) opset 13 {
  %xs = constant f32[] 0.02
  %xz = constant u8[] 128
  %wq = constant i8[8,4] $0
  %ws = constant f32[4] $1
  %ys = constant f32[] 0.03
  %yz = constant u8[] 128
  %x = QuantizeLinear(%in, %xs, %xz) : u8[3,8]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[3,8]
  %wd = DequantizeLinear(%wq, %ws) {axis=1} : f32[8,4]
  %g = Gemm(%xd, %wd) : f32[3,4]
  %y = QuantizeLinear(%g, %ys, %yz) : u8[3,4]
}
// CHECK: QLinearConv(
// CHECK-NOT: Gemm
)",
                                                                   Ints(32, -64, 64, 5), WScales()),
                                                  OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FuseQdq, MatMulPerColumnBecomesQLinearMatMul) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, absl::Substitute(R"(
graph main(%in: f32[2,3,8]) -> (%y) opset 13 {
  %xs = constant f32[] 0.02
  %xz = constant u8[] 128
  %wq = constant i8[8,4] $0
  %ws = constant f32[4] $1
  %wz = constant i8[4] [0, 0, 0, 0]
  %ys = constant f32[] 0.03
  %yz = constant u8[] 128
  %x = QuantizeLinear(%in, %xs, %xz) : u8[2,3,8]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[2,3,8]
  %wd = DequantizeLinear(%wq, %ws, %wz) {axis=1} : f32[8,4]
  %m = MatMul(%xd, %wd) : f32[2,3,4]
  %y = QuantizeLinear(%m, %ys, %yz) : u8[2,3,4]
}
// CHECK: %y = QLinearMatMul(%x, %xs, %xz, %wq, %ws, %wz, %ys, %yz)
// CHECK-NOT: MatMul(
)",
                                                                   Ints(32, -64, 64, 6), WScales()),
                                                  OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

// The weights' and input's DequantizeLinear outputs stay for their other
// readers; a Conv result with another reader keeps the f32 pattern.
constexpr const char* kSharedGraph = R"(
graph main(%in: f32[1,2,4,4]) -> (%y, %z) opset 13 {
  %xs = constant f32[] 0.02
  %xz = constant u8[] 128
  %wq = constant i8[2,2,1,1] [3, -5, 7, 11]
  %ws = constant f32[] 0.01
  %ys = constant f32[] 0.03
  %yz = constant u8[] 128
  %x = QuantizeLinear(%in, %xs, %xz) : u8[1,2,4,4]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[1,2,4,4]
  %wd = DequantizeLinear(%wq, %ws) : f32[2,2,1,1]
  %c = Conv(%xd, %wd) : f32[1,2,4,4]
  %y = QuantizeLinear(%c, %ys, %yz) : u8[1,2,4,4]
  %z = Add(%xd, %$0) : f32[1,2,4,4]
}
$1
)";

TEST(FuseQdq, DequantizedValuesWithOtherReadersStay) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(
      pass, absl::Substitute(kSharedGraph, "xd",
                             "// CHECK: %xd = DequantizeLinear\n"
                             "// CHECK: %y = QLinearConv(%x, %xs, %xz, %wq, %ws, %wq.zero_point, %ys, %yz)\n"
                             "// CHECK: %z = Add(%xd, %xd)"),
      OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FuseQdq, ConvResultWithAnotherReaderStaysF32) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r =
      RunPassAndCheck(pass, absl::Substitute(kSharedGraph, "c", "// CHECK: %c = Conv(%xd, %wd)"), OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_THAT(pass.patterns()[0].reason, HasSubstr("readers besides the QuantizeLinear"));
}

TEST(FuseQdq, OracleRefusalKeepsTheF32PatternWithItsReason) {
  std::vector<std::string> asked;
  FuseQdq pass([&](const ir::Graph&, const ir::Node& node) {
    asked.push_back(node.op);
    return absl::UnimplementedError("weights outside [-64, 64] and no VNNI");
  });
  absl::StatusOr<PassCheckResult> r =
      RunPassAndCheck(pass, absl::Substitute(kSharedGraph, "xd", "// CHECK: %c = Conv(%xd, %wd)"), OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  EXPECT_THAT(asked, ::testing::ElementsAre("QLinearConv"));
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_EQ(pass.patterns()[0].node, "c");
  EXPECT_EQ(pass.patterns()[0].reason, "weights outside [-64, 64] and no VNNI");
}

// Attention's Q x K^T in a QDQ model: both operands u8 activations, batched
// 4-D, nonzero zero points. b is a QuantizeLinear's result, so its s8 form
// b - 128 is a second QuantizeLinear of the same input (zero point 125 - 128).
TEST(FuseQdq, ActivationTimesActivationBecomesQLinearMatMulWithS8B) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%qin: f32[1,2,4,16], %kin: f32[1,2,16,5]) -> (%y) opset 13 {
  %as = constant f32[] 0.021
  %az = constant u8[] 129
  %bs = constant f32[] 0.02
  %bz = constant u8[] 125
  %ys = constant f32[] 0.11
  %yz = constant u8[] 127
  %a = QuantizeLinear(%qin, %as, %az) : u8[1,2,4,16]
  %b = QuantizeLinear(%kin, %bs, %bz) : u8[1,2,16,5]
  %ad = DequantizeLinear(%a, %as, %az) : f32[1,2,4,16]
  %bd = DequantizeLinear(%b, %bs, %bz) : f32[1,2,16,5]
  %c = MatMul(%ad, %bd) : f32[1,2,4,5]
  %y = QuantizeLinear(%c, %ys, %yz) : u8[1,2,4,5]
}
// CHECK: %b.s8.zero_point = constant i8[] -3
// CHECK: %b.s8.zero_point.1 = constant i8[] -3
// CHECK: %b.s8 = QuantizeLinear(%kin, %bs, %b.s8.zero_point) : i8[1,2,16,5]
// CHECK: %y = QLinearMatMul(%a, %as, %az, %b.s8, %bs, %b.s8.zero_point.1, %ys, %yz) name="c"
// CHECK-NOT: MatMul(
)", OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_EQ(pass.patterns()[0].op, "QLinearMatMul");
}

// softmax x V with a u8 b that is not a QuantizeLinear's result (a
// Transpose of one): b - 128 is computed as Q(DQ(b, 1, 128), 1, 0). a's
// zero point is 0 (a softmax's), b broadcasts over a's batch.
TEST(FuseQdq, ActivationBNotFromAQuantizeIsShiftedExactly) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%p: f32[2,3,4,6], %vin: f32[1,1,5,6]) -> (%y) opset 13 {
  %as = constant f32[] 0.003921569
  %az = constant u8[] 0
  %bs = constant f32[] 0.0222
  %bz = constant u8[] 131
  %ys = constant f32[] 0.009
  %yz = constant u8[] 130
  %a = QuantizeLinear(%p, %as, %az) : u8[2,3,4,6]
  %v = QuantizeLinear(%vin, %bs, %bz) : u8[1,1,5,6]
  %b = Transpose(%v) {perm=[0, 1, 3, 2]} : u8[1,1,6,5]
  %ad = DequantizeLinear(%a, %as, %az) : f32[2,3,4,6]
  %bd = DequantizeLinear(%b, %bs, %bz) : f32[1,1,6,5]
  %c = MatMul(%ad, %bd) : f32[2,3,4,5]
  %y = QuantizeLinear(%c, %ys, %yz) : u8[2,3,4,5]
}
// CHECK: %b.s8.f32 = DequantizeLinear(%b, %b.s8.one, %b.s8.u8_zero_point) : f32[1,1,6,5]
// CHECK: %b.s8 = QuantizeLinear(%b.s8.f32, %b.s8.one, %b.s8.zero_point) : i8[1,1,6,5]
// CHECK: %y = QLinearMatMul(%a, %as, %az, %b.s8, %bs, %b.s8.zero_point.1, %ys, %yz) name="c"
)", OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

// s8 x s8 -> s8 (ONNX allows every u8/s8 combination of a, b and y): b is
// read as it is.
TEST(FuseQdq, S8ActivationsTakeBAsItIs) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%qin: f32[3,4,16], %kin: f32[3,16,7]) -> (%y) opset 13 {
  %as = constant f32[] 0.02
  %az = constant i8[] -5
  %bs = constant f32[] 0.015
  %bz = constant i8[] 3
  %ys = constant f32[] 0.08
  %yz = constant i8[] -2
  %a = QuantizeLinear(%qin, %as, %az) : i8[3,4,16]
  %b = QuantizeLinear(%kin, %bs, %bz) : i8[3,16,7]
  %ad = DequantizeLinear(%a, %as, %az) : f32[3,4,16]
  %bd = DequantizeLinear(%b, %bs, %bz) : f32[3,16,7]
  %c = MatMul(%ad, %bd) : f32[3,4,7]
  %y = QuantizeLinear(%c, %ys, %yz) : i8[3,4,7]
}
// CHECK: %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) name="c"
// CHECK-NOT: .s8
)", OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(FuseQdq, ActivationBWithPerAxisScaleStaysF32) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%qin: f32[4,6], %kin: f32[6,3]) -> (%y) opset 13 {
  %as = constant f32[] 0.02
  %az = constant u8[] 128
  %bs = constant f32[3] [0.01, 0.02, 0.03]
  %bz = constant u8[3] [120, 128, 130]
  %ys = constant f32[] 0.08
  %yz = constant u8[] 128
  %a = QuantizeLinear(%qin, %as, %az) : u8[4,6]
  %b = QuantizeLinear(%kin, %bs, %bz) {axis=1} : u8[6,3]
  %ad = DequantizeLinear(%a, %as, %az) : f32[4,6]
  %bd = DequantizeLinear(%b, %bs, %bz) {axis=1} : f32[6,3]
  %c = MatMul(%ad, %bd) : f32[4,3]
  %y = QuantizeLinear(%c, %ys, %yz) : u8[4,3]
}
// CHECK: %c = MatMul(%ad, %bd)
)", OneStep());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_THAT(pass.patterns()[0].reason, HasSubstr("per-axis scale of an activation B"));
}

// ONNX: a (De)QuantizeLinear's zero point has its tensor's type and its
// scale's shape. Either broken is InvalidArgument naming the node.
TEST(FuseQdq, InconsistentZeroPointsNameTheNode) {
  const std::string graph = R"(
graph main(%a: u8[2,4,6], %b: u8[2,6,3]) -> (%y) opset 13 {
  %as = constant f32[] 0.02
  %az = constant u8[] 128
  %bs = constant f32[] 0.015
  %bz = constant $0
  %ys = constant f32[] 0.08
  %yz = constant u8[] 128
  %ad = DequantizeLinear(%a, %as, %az) : f32[2,4,6]
  %bd = DequantizeLinear(%b, %bs, %bz) : f32[2,6,3]
  %c = MatMul(%ad, %bd) : f32[2,4,3]
  %y = QuantizeLinear(%c, %ys, %yz) : u8[2,4,3]
}
)";
  for (const char* bad : {"i8[] 3", "u8[2] [1, 2]"}) {
    absl::StatusOr<ir::Graph> g = ir::ParseGraph(absl::Substitute(graph, bad));
    ASSERT_TRUE(g.ok()) << g.status();
    FuseQdq pass;
    absl::StatusOr<bool> r = pass.Run(&*g);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("node 'bd' (DequantizeLinear)")) << r.status();
  }
}

// DQ(a) x DQ(b) -> MatMul whose f32 result no QuantizeLinear reads: the
// exact integer product, converted and scaled once (ONNX Runtime's
// MatMulIntegerToFloat); b u8, read as s8.
TEST(FuseQdq, ActivationMatMulWithF32ResultBecomesMatMulIntegerTimesScale) {
  FuseQdq pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%qin: f32[2,3,16], %kin: f32[2,16,5]) -> (%c) opset 13 {
  %as = constant f32[] 0.021
  %az = constant u8[] 129
  %bs = constant f32[] 0.02
  %bz = constant u8[] 125
  %a = QuantizeLinear(%qin, %as, %az) : u8[2,3,16]
  %b = QuantizeLinear(%kin, %bs, %bz) : u8[2,16,5]
  %ad = DequantizeLinear(%a, %as, %az) : f32[2,3,16]
  %bd = DequantizeLinear(%b, %bs, %bz) : f32[2,16,5]
  %c = MatMul(%ad, %bd) : f32[2,3,5]
}
// CHECK: %c.scale = constant f32[] 0.00042
// CHECK: %b.s8 = QuantizeLinear(%kin, %bs, %b.s8.zero_point)
// CHECK: %c.i32 = MatMulInteger(%a, %b.s8, %az, %b.s8.zero_point.1) name="c" : i32[2,3,5]
// CHECK: %c.f32 = Cast(%c.i32) {to=1}
// CHECK: %c = Mul(%c.f32, %c.scale)
// CHECK-NOT: MatMul(
)", {1e-5, 1e-6, std::nullopt});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_EQ(pass.patterns()[0].op, "MatMulInteger");
}

}  // namespace
}  // namespace kiln::passes
