// Tests for the reference kernels in ops_extra.cc: small cases worked out by
// hand from each op's definition or taken from ONNX's Operators.md examples,
// plus the errors bad models must get.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/graph.h"
#include "interp/interpreter.h"

namespace kiln::interp {
namespace {

using ir::AttributeMap;
using ir::DType;
using ir::Graph;
using ir::Shape;
using ir::Tensor;
using ::testing::HasSubstr;

Tensor F(Shape shape, std::vector<float> v) {
  return Tensor::FromVector<float>(std::move(shape), v);
}
Tensor I64(Shape shape, std::vector<int64_t> v) {
  return Tensor::FromVector<int64_t>(std::move(shape), v);
}
Tensor U8(Shape shape, std::vector<uint8_t> v) {
  return Tensor::FromVector<uint8_t>(std::move(shape), v);
}
Tensor ScalarF(float v) { return Tensor::Scalar<float>(v); }

// Runs one node `op` named "n0"; nullptr inputs are omitted optional inputs.
// Outputs are declared with `out_dtypes` (default: the first input's dtype).
absl::StatusOr<std::vector<Tensor>> RunOp(
    const std::string& op, const std::vector<const Tensor*>& inputs,
    AttributeMap attrs = {}, std::vector<DType> out_dtypes = {},
    int64_t opset = 17) {
  Graph g;
  g.set_opset(opset);
  std::vector<ir::ValueId> ins;
  std::vector<Tensor> feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) {
      ins.push_back(ir::kNoValue);
      continue;
    }
    ir::ValueId id = g.AddValue(absl::StrCat("in", i), inputs[i]->dtype(),
                                inputs[i]->shape());
    g.AddInput(id);
    ins.push_back(id);
    feed.push_back(*inputs[i]);
  }
  if (out_dtypes.empty()) out_dtypes.push_back(inputs[0]->dtype());
  std::vector<ir::ValueId> outs;
  for (size_t i = 0; i < out_dtypes.size(); ++i) {
    ir::ValueId id = g.AddUnshapedValue(absl::StrCat("out", i), out_dtypes[i]);
    g.AddOutput(id);
    outs.push_back(id);
  }
  g.AddNode(op, ins, outs, std::move(attrs), "n0");
  return Run(g, feed);
}

// The outputs of a node that must succeed.
std::vector<Tensor> RunOk(const std::string& op,
                          const std::vector<const Tensor*>& inputs,
                          AttributeMap attrs = {},
                          std::vector<DType> out_dtypes = {},
                          int64_t opset = 17) {
  absl::StatusOr<std::vector<Tensor>> r =
      RunOp(op, inputs, std::move(attrs), std::move(out_dtypes), opset);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return *r;
}

Tensor RunOne(const std::string& op, const std::vector<const Tensor*>& inputs,
              AttributeMap attrs = {}, std::vector<DType> out_dtypes = {},
              int64_t opset = 17) {
  std::vector<Tensor> r =
      RunOk(op, inputs, std::move(attrs), std::move(out_dtypes), opset);
  return r.empty() ? Tensor() : r[0];
}

void ExpectValues(const Tensor& t, const Shape& shape,
                  const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.num_elements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(t.GetAsDouble(i), want[i], tol) << "at flat index " << i;
  }
}

void ExpectError(const absl::StatusOr<std::vector<Tensor>>& r,
                 const std::string& op, const std::string& text) {
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'n0'"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(op));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(text));
}

AttributeMap Str(const std::string& k, const std::string& v) {
  return {{k, v}};
}

// ------------------------------------------------------------------ losses

TEST(NllLoss, ReductionsWeightsAndIgnoreIndex) {
  Tensor x = F({2, 3}, {-1, -2, -3, -4, -5, -6});
  Tensor t = I64({2}, {2, 0});
  Tensor w = F({3}, {1, 2, 0.5});
  ExpectValues(RunOne("NegativeLogLikelihoodLoss", {&x, &t},
                      Str("reduction", "none")),
               {2}, {3, 4});
  ExpectValues(RunOne("NegativeLogLikelihoodLoss", {&x, &t},
                      Str("reduction", "sum")),
               {}, {7});
  ExpectValues(RunOne("NegativeLogLikelihoodLoss", {&x, &t}), {}, {3.5});
  ExpectValues(RunOne("NegativeLogLikelihoodLoss", {&x, &t, &w},
                      Str("reduction", "none")),
               {2}, {1.5, 4});
  // mean divides by the summed weights of the picked classes: 5.5 / 1.5.
  ExpectValues(RunOne("NegativeLogLikelihoodLoss", {&x, &t, &w}), {},
               {5.5 / 1.5});
  ExpectValues(RunOne("NegativeLogLikelihoodLoss", {&x, &t},
                      {{"ignore_index", int64_t{0}}}),
               {}, {3});
}

TEST(NllLoss, SpatialDims) {
  Tensor x = F({1, 2, 2}, {-1, -2, -3, -4});  // x[0, c, d]
  Tensor t = I64({1, 2}, {1, 0});
  ExpectValues(RunOne("NegativeLogLikelihoodLoss", {&x, &t},
                      Str("reduction", "none")),
               {1, 2}, {3, 2});
}

TEST(NllLoss, RejectsBadTargets) {
  Tensor x = F({2, 3}, {-1, -2, -3, -4, -5, -6});
  Tensor out_of_range = I64({2}, {3, 0});
  ExpectError(RunOp("NegativeLogLikelihoodLoss", {&x, &out_of_range}),
              "NegativeLogLikelihoodLoss", "outside [0, 3)");
  Tensor wrong_shape = I64({3}, {0, 0, 0});
  ExpectError(RunOp("NegativeLogLikelihoodLoss", {&x, &wrong_shape}),
              "NegativeLogLikelihoodLoss", "expected [2]");
  Tensor t = I64({2}, {0, 0});
  Tensor w = F({2}, {1, 1});
  ExpectError(RunOp("NegativeLogLikelihoodLoss", {&x, &t, &w}),
              "NegativeLogLikelihoodLoss", "weight");
}

TEST(SoftmaxCrossEntropyLoss, LossAndLogProb) {
  Tensor x = F({2, 2}, {0, 0, 0, std::log(3.0f)});
  Tensor y = I64({2}, {1, 0});
  std::vector<Tensor> r = RunOk("SoftmaxCrossEntropyLoss", {&x, &y},
                                Str("reduction", "none"),
                                {DType::kF32, DType::kF32});
  ASSERT_EQ(r.size(), 2u);
  // Row 0: softmax [1/2, 1/2]; row 1: [1/4, 3/4].
  ExpectValues(r[0], {2}, {std::log(2.0), std::log(4.0)});
  ExpectValues(r[1], {2, 2},
               {-std::log(2.0), -std::log(2.0), -std::log(4.0),
                std::log(0.75)});
  ExpectValues(RunOne("SoftmaxCrossEntropyLoss", {&x, &y}), {},
               {(std::log(2.0) + std::log(4.0)) / 2});
  Tensor bad = I64({2}, {1, -1});
  ExpectError(RunOp("SoftmaxCrossEntropyLoss", {&x, &bad}),
              "SoftmaxCrossEntropyLoss", "outside [0, 2)");
  ExpectValues(RunOne("SoftmaxCrossEntropyLoss", {&x, &bad},
                      {{"ignore_index", int64_t{-1}}}),
               {}, {std::log(2.0)});
}

// ------------------------------------------------------------ quantization

TEST(QuantizeLinear, OnnxExampleRoundsHalfToEvenAndSaturates) {
  Tensor x = F({8}, {0, 2, 3, 1000, -254, -1000, 5, 7});
  Tensor s = ScalarF(2);
  Tensor z = Tensor::Scalar<uint8_t>(128);
  ExpectValues(RunOne("QuantizeLinear", {&x, &s, &z}, {}, {DType::kU8}), {8},
               {128, 129, 130, 255, 1, 0, 130, 132});
  Tensor zi8 = Tensor::Scalar<int8_t>(0);
  Tensor x2 = F({3}, {-300, 1, 127.6f});
  Tensor one = ScalarF(1);
  Tensor q = RunOne("QuantizeLinear", {&x2, &one, &zi8}, {}, {DType::kI8});
  EXPECT_EQ(q.dtype(), DType::kI8);
  ExpectValues(q, {3}, {-128, 1, 127});
  // Without a zero point the output is u8 with zero point 0.
  ExpectValues(RunOne("QuantizeLinear", {&x2, &one}, {}, {DType::kU8}), {3},
               {0, 1, 128});
}

TEST(QuantizeLinear, PerAxis) {
  Tensor x = F({1, 2, 2}, {1, 2, 30, 40});
  Tensor s = F({2}, {1, 10});
  Tensor z = U8({2}, {0, 5});
  ExpectValues(RunOne("QuantizeLinear", {&x, &s, &z}, {}, {DType::kU8}),
               {1, 2, 2}, {1, 2, 8, 9});
  Tensor s3 = F({3}, {1, 1, 1});
  ExpectError(RunOp("QuantizeLinear", {&x, &s3}, {}, {DType::kU8}),
              "QuantizeLinear", "scale has 3 values");
  ExpectError(RunOp("QuantizeLinear", {&x, &s, &z}, {}, {DType::kU8}, 10),
              "QuantizeLinear", "opset >= 13");
}

TEST(DequantizeLinear, PerTensorAndPerAxis) {
  Tensor x = U8({4}, {0, 3, 128, 255});
  Tensor s = ScalarF(2);
  Tensor z = Tensor::Scalar<uint8_t>(128);
  ExpectValues(RunOne("DequantizeLinear", {&x, &s, &z}, {}, {DType::kF32}),
               {4}, {-256, -250, 0, 254});
  Tensor xa = U8({1, 2, 2}, {3, 89, 5, 24});
  Tensor sa = F({2}, {2, 4});
  Tensor za = U8({2}, {84, 24});
  ExpectValues(RunOne("DequantizeLinear", {&xa, &sa, &za}, {}, {DType::kF32}),
               {1, 2, 2}, {-162, 10, -76, 0});
  Tensor zi8 = Tensor::Scalar<int8_t>(0);
  ExpectError(RunOp("DequantizeLinear", {&x, &s, &zi8}, {}, {DType::kF32}),
              "DequantizeLinear", "zero point");
}

TEST(DynamicQuantizeLinear, OnnxExample) {
  Tensor x = F({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f});
  std::vector<Tensor> r = RunOk("DynamicQuantizeLinear", {&x}, {},
                                {DType::kU8, DType::kF32, DType::kU8});
  ASSERT_EQ(r.size(), 3u);
  ExpectValues(r[0], {6}, {153, 255, 0, 26, 221, 179});
  ExpectValues(r[1], {}, {5.0 / 255}, 1e-7);
  ExpectValues(r[2], {}, {153});
  // All-positive input: the range still includes 0, so the zero point is 0.
  Tensor pos = F({2}, {0, 255});
  r = RunOk("DynamicQuantizeLinear", {&pos}, {},
            {DType::kU8, DType::kF32, DType::kU8});
  ExpectValues(r[0], {2}, {0, 255});
  ExpectValues(r[1], {}, {1});
  ExpectValues(r[2], {}, {0});
}

TEST(ConvInteger, OnnxExamplesWithZeroPoint) {
  Tensor x = U8({1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10});
  Tensor w = U8({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor z = Tensor::Scalar<uint8_t>(1);
  Tensor y = RunOne("ConvInteger", {&x, &w, &z}, {}, {DType::kI32});
  EXPECT_EQ(y.dtype(), DType::kI32);
  ExpectValues(y, {1, 1, 2, 2}, {12, 16, 24, 28});
  ExpectValues(RunOne("ConvInteger", {&x, &w, &z},
                      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                      {DType::kI32}),
               {1, 1, 4, 4},
               {1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9});
  Tensor bad_w = U8({1, 2, 2, 2}, std::vector<uint8_t>(8, 1));
  ExpectError(RunOp("ConvInteger", {&x, &bad_w}, {}, {DType::kI32}),
              "ConvInteger", "group");
}

TEST(QLinearConv, RequantizesWithBias) {
  Tensor x = U8({1, 1, 2, 2}, {10, 20, 30, 40});
  Tensor xs = ScalarF(0.5f), xz = Tensor::Scalar<uint8_t>(10);
  Tensor w = U8({1, 1, 1, 1}, {3});
  Tensor ws = F({1}, {2}), wz = U8({1}, {1});
  Tensor ys = ScalarF(1), yz = Tensor::Scalar<uint8_t>(0);
  Tensor b = Tensor::FromVector<int32_t>({1}, {5});
  // (x - 10) * (3 - 1) * 0.5 * 2 / 1 (+ 5 with the bias).
  ExpectValues(RunOne("QLinearConv", {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz},
                      {}, {DType::kU8}),
               {1, 1, 2, 2}, {0, 20, 40, 60});
  ExpectValues(RunOne("QLinearConv",
                      {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &b}, {},
                      {DType::kU8}),
               {1, 1, 2, 2}, {5, 25, 45, 65});
  Tensor ws2 = F({2}, {1, 2});
  ExpectError(RunOp("QLinearConv", {&x, &xs, &xz, &w, &ws2, &wz, &ys, &yz},
                    {}, {DType::kU8}),
              "QLinearConv", "w_scale");
}

TEST(QLinearMatMul, RequantizesAndSaturates) {
  Tensor a = U8({1, 2}, {3, 5});
  Tensor as = ScalarF(0.5f), az = Tensor::Scalar<uint8_t>(1);
  Tensor b = U8({2, 1}, {2, 4});
  Tensor bs = ScalarF(1), bz = Tensor::Scalar<uint8_t>(0);
  Tensor ys = ScalarF(0.25f), yz = Tensor::Scalar<uint8_t>(10);
  // acc = 2*2 + 4*4 = 20; 20 * 0.5 / 0.25 + 10 = 50.
  ExpectValues(RunOne("QLinearMatMul", {&a, &as, &az, &b, &bs, &bz, &ys, &yz},
                      {}, {DType::kU8}),
               {1, 1}, {50});
  Tensor tiny = ScalarF(0.01f);
  ExpectValues(RunOne("QLinearMatMul",
                      {&a, &as, &az, &b, &bs, &bz, &tiny, &yz}, {},
                      {DType::kU8}),
               {1, 1}, {255});
  Tensor b3 = U8({3, 1}, {1, 1, 1});
  ExpectError(RunOp("QLinearMatMul", {&a, &as, &az, &b3, &bs, &bz, &ys, &yz},
                    {}, {DType::kU8}),
              "QLinearMatMul", "inner dimensions");
}

TEST(QLinearMatMul, PerColumnScaleAndZeroPointOfB) {
  Tensor a = U8({1, 2}, {3, 5});
  Tensor as = ScalarF(0.5f), az = Tensor::Scalar<uint8_t>(1);
  Tensor b = U8({2, 2}, {2, 4, 1, 3});
  Tensor bs = F({2}, {1, 0.5f}), bz = U8({2}, {0, 1});
  Tensor ys = ScalarF(0.25f), yz = Tensor::Scalar<uint8_t>(10);
  // a - 1 = [2, 4]; b minus its column zero points = [[2, 3], [1, 2]];
  // acc = [2*2 + 4*1, 2*3 + 4*2] = [8, 14]; scales 0.5 * [1, 0.5] / 0.25 =
  // [2, 1]: y = [8*2 + 10, 14*1 + 10] = [26, 24].
  ExpectValues(RunOne("QLinearMatMul", {&a, &as, &az, &b, &bs, &bz, &ys, &yz},
                      {}, {DType::kU8}),
               {1, 2}, {26, 24});
  Tensor bs3 = F({3}, {1, 1, 1});
  ExpectError(RunOp("QLinearMatMul", {&a, &as, &az, &b, &bs3, &bz, &ys, &yz},
                    {}, {DType::kU8}),
              "QLinearMatMul", "b_scale");
}

// ------------------------------------------------- MaxUnpool and friends

TEST(MaxUnpool, OnnxExamplesWithAndWithoutOutputShape) {
  Tensor x = F({1, 1, 2, 2}, {5, 6, 7, 8});
  Tensor i = I64({1, 1, 2, 2}, {5, 7, 13, 15});
  AttributeMap attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}},
                        {"strides", std::vector<int64_t>{2, 2}}};
  std::vector<double> want4(16, 0);
  want4[5] = 5;
  want4[7] = 6;
  want4[13] = 7;
  want4[15] = 8;
  ExpectValues(RunOne("MaxUnpool", {&x, &i}, attrs), {1, 1, 4, 4}, want4);
  Tensor shape = I64({4}, {1, 1, 5, 5});
  std::vector<double> want5(25, 0);
  want5[6] = 5;
  want5[8] = 6;
  want5[16] = 7;
  want5[18] = 8;
  ExpectValues(RunOne("MaxUnpool", {&x, &i, &shape}, attrs), {1, 1, 5, 5},
               want5);
  Tensor bad = I64({1, 1, 2, 2}, {5, 7, 13, 16});
  ExpectError(RunOp("MaxUnpool", {&x, &bad}, attrs), "MaxUnpool",
              "index 16");
  Tensor small = I64({4}, {1, 1, 3, 3});
  ExpectError(RunOp("MaxUnpool", {&x, &i, &small}, attrs), "MaxUnpool",
              "output_shape");
}

TEST(ReverseSequence, OnnxTimeMajorExample) {
  Tensor x = F({4, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  Tensor lens = I64({4}, {4, 3, 2, 1});
  AttributeMap attrs = {{"batch_axis", int64_t{1}}, {"time_axis", int64_t{0}}};
  ExpectValues(RunOne("ReverseSequence", {&x, &lens}, attrs), {4, 4},
               {12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15});
  AttributeMap batch_major = {{"batch_axis", int64_t{0}},
                              {"time_axis", int64_t{1}}};
  Tensor lens2 = I64({4}, {1, 2, 3, 4});
  ExpectValues(RunOne("ReverseSequence", {&x, &lens2}, batch_major), {4, 4},
               {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12});
  Tensor too_long = I64({4}, {5, 1, 1, 1});
  ExpectError(RunOp("ReverseSequence", {&x, &too_long}, attrs),
              "ReverseSequence", "outside [0, 4]");
}

TEST(Det, TwoByTwoBatchAndPivoting) {
  Tensor a = F({2, 2}, {1, 2, 3, 4});
  ExpectValues(RunOne("Det", {&a}), {}, {-2});
  Tensor b = F({2, 2, 2}, {1, 2, 3, 4, 2, 0, 0, 3});
  ExpectValues(RunOne("Det", {&b}), {2}, {-2, 6});
  Tensor c = F({3, 3}, {0, 1, 2, 1, 0, 3, 4, -3, 8});
  ExpectValues(RunOne("Det", {&c}), {}, {-2});
  Tensor sing = F({2, 2}, {1, 2, 2, 4});
  ExpectValues(RunOne("Det", {&sing}), {}, {0});
  Tensor rect = F({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectError(RunOp("Det", {&rect}), "Det", "[..., M, M]");
}

// --------------------------------------------------------------- signals

TEST(Windows, PeriodicAndSymmetric) {
  Tensor n = Tensor::Scalar<int64_t>(4);
  ExpectValues(RunOne("HannWindow", {&n}, {}, {DType::kF32}), {4},
               {0, 0.5, 1, 0.5});
  ExpectValues(RunOne("HannWindow", {&n}, {{"periodic", int64_t{0}}},
                      {DType::kF32}),
               {4}, {0, 0.75, 0.75, 0});
  ExpectValues(RunOne("HammingWindow", {&n}, {}, {DType::kF32}), {4},
               {4.0 / 46, 25.0 / 46, 1, 25.0 / 46});
  Tensor bw = RunOne("BlackmanWindow", {&n}, {{"output_datatype", int64_t{11}}},
                     {DType::kF64});
  EXPECT_EQ(bw.dtype(), DType::kF64);
  ExpectValues(bw, {4}, {0, 0.34, 1, 0.34}, 1e-12);
  Tensor neg = Tensor::Scalar<int64_t>(-1);
  ExpectError(RunOp("HannWindow", {&neg}, {}, {DType::kF32}), "HannWindow",
              "window size");
}

TEST(MelWeightMatrix, OnnxExample) {
  Tensor bins = Tensor::Scalar<int32_t>(8);
  Tensor dft = Tensor::Scalar<int32_t>(16);
  Tensor rate = Tensor::Scalar<int32_t>(8192);
  Tensor lo = ScalarF(0), hi = ScalarF(4096);
  std::vector<double> want(9 * 8, 0);
  const int ones[][2] = {{0, 0}, {0, 1}, {1, 2}, {1, 3},
                         {2, 4}, {3, 5}, {4, 6}, {5, 7}};
  for (const auto& rc : ones) want[rc[0] * 8 + rc[1]] = 1;
  ExpectValues(RunOne("MelWeightMatrix", {&bins, &dft, &rate, &lo, &hi}, {},
                      {DType::kF32}),
               {9, 8}, want);
  ExpectError(RunOp("MelWeightMatrix", {&bins, &dft, &rate, &hi, &lo}, {},
                    {DType::kF32}),
              "MelWeightMatrix", "lower_edge_hertz");
}

TEST(Dft, ForwardOnesidedInverseAndLength) {
  Tensor x = F({1, 4, 1}, {1, 2, 3, 4});
  // X[k] = sum x[t] e^{-2 pi i k t / 4} = 10, -2+2i, -2, -2-2i.
  ExpectValues(RunOne("DFT", {&x}), {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
  ExpectValues(RunOne("DFT", {&x}, {{"onesided", int64_t{1}}}), {1, 3, 2},
               {10, 0, -2, 2, -2, 0});
  Tensor spec = F({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
  ExpectValues(RunOne("DFT", {&spec}, {{"inverse", int64_t{1}}}), {1, 4, 2},
               {1, 0, 2, 0, 3, 0, 4, 0});
  Tensor len = Tensor::Scalar<int64_t>(2);
  ExpectValues(RunOne("DFT", {&x, &len}), {1, 2, 2}, {3, 0, -1, 0});
  Tensor x2 = F({1, 2, 2, 1}, {1, 2, 3, 4});  // DFT along axis 2
  ExpectValues(RunOne("DFT", {&x2}, {{"axis", int64_t{2}}}), {1, 2, 2, 2},
               {3, 0, -1, 0, 7, 0, -1, 0});
  ExpectError(RunOp("DFT", {&x}, {{"axis", int64_t{2}}}), "DFT", "axis");
}

TEST(Stft, FramesWithAndWithoutWindow) {
  Tensor x = F({1, 4, 1}, {1, 2, 3, 4});
  Tensor step = Tensor::Scalar<int64_t>(2);
  Tensor len = Tensor::Scalar<int64_t>(2);
  ExpectValues(RunOne("STFT", {&x, &step, nullptr, &len}), {1, 2, 2, 2},
               {3, 0, -1, 0, 7, 0, -1, 0});
  Tensor window = F({2}, {1, 0});
  ExpectValues(RunOne("STFT", {&x, &step, &window}), {1, 2, 2, 2},
               {1, 0, 1, 0, 3, 0, 3, 0});
  Tensor len3 = Tensor::Scalar<int64_t>(3);
  ExpectError(RunOp("STFT", {&x, &step, &window, &len3}), "STFT",
              "differs from the window length");
  ExpectError(RunOp("STFT", {&x, &step}), "STFT", "frame_length");
}

// ------------------------------------------------------ resampling ops

TEST(GridSample, BilinearAlignCorners) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor grid = F({1, 1, 4, 2}, {-1, -1, 1, 1, 0, 0, 1, -1});
  ExpectValues(RunOne("GridSample", {&x, &grid},
                      {{"align_corners", int64_t{1}}}),
               {1, 1, 1, 4}, {1, 4, 2.5, 2});
}

TEST(GridSample, PaddingModesOutsideTheImage) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  // (x=2, y=-1) without align_corners lands at column 2.5, row -0.5.
  Tensor grid = F({1, 1, 1, 2}, {2, -1});
  ExpectValues(RunOne("GridSample", {&x, &grid}), {1, 1, 1, 1}, {0});
  ExpectValues(RunOne("GridSample", {&x, &grid},
                      Str("padding_mode", "border")),
               {1, 1, 1, 1}, {2});
  // Reflection about [-0.5, 1.5] maps column 2.5 to 0.5: mean of row 0.
  ExpectValues(RunOne("GridSample", {&x, &grid},
                      Str("padding_mode", "reflection")),
               {1, 1, 1, 1}, {1.5});
}

TEST(GridSample, NearestRoundsHalfToEvenAndBicubicKeepsConstants) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor center = F({1, 1, 1, 2}, {0, 0});  // pixel coords (0.5, 0.5)
  ExpectValues(RunOne("GridSample", {&x, &center}, Str("mode", "nearest")),
               {1, 1, 1, 1}, {1});
  Tensor flat = F({1, 1, 3, 3}, std::vector<float>(9, 7));
  Tensor g = F({1, 1, 2, 2}, {0.1f, -0.2f, 0.9f, 0.7f});
  AttributeMap cubic = {{"mode", std::string("bicubic")},
                        {"padding_mode", std::string("border")}};
  ExpectValues(RunOne("GridSample", {&flat, &g}, cubic), {1, 1, 1, 2},
               {7, 7});
  ExpectError(RunOp("GridSample", {&x, &g}, Str("mode", "area")),
              "GridSample", "unknown mode");
  Tensor bad_grid = F({1, 1, 1, 3}, {0, 0, 0});
  ExpectError(RunOp("GridSample", {&x, &bad_grid}), "GridSample", "grid");
}

TEST(RoiAlign, AverageAndMaxOfOneSample) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor rois = F({1, 4}, {0, 0, 1, 1});
  Tensor bi = I64({1}, {0});
  AttributeMap attrs = {
      {"sampling_ratio", int64_t{1}},
      {"coordinate_transformation_mode", std::string("output_half_pixel")}};
  // One sample at (0.5, 0.5): a quarter of each pixel.
  ExpectValues(RunOne("RoiAlign", {&x, &rois, &bi}, attrs), {1, 1, 1, 1},
               {2.5});
  attrs["mode"] = std::string("max");
  ExpectValues(RunOne("RoiAlign", {&x, &rois, &bi}, attrs), {1, 1, 1, 1},
               {1.0});
  Tensor shifted = F({1, 4}, {0.5f, 0.5f, 1.5f, 1.5f});
  ExpectValues(RunOne("RoiAlign", {&x, &shifted, &bi},
                      {{"sampling_ratio", int64_t{1}}}),
               {1, 1, 1, 1}, {2.5});
  Tensor bad = I64({1}, {1});
  ExpectError(RunOp("RoiAlign", {&x, &rois, &bad}), "RoiAlign",
              "batch index 1");
}

// ------------------------------------------------------------ selection

TEST(NonMaxSuppression, CornerAndCenterFormatsPerClass) {
  // Box 1 overlaps box 0 with IoU 0.9 / 1.1; box 2 is disjoint.
  Tensor boxes = F({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3});
  Tensor scores = F({1, 1, 3}, {0.9f, 0.8f, 0.7f});
  Tensor max_out = I64({1}, {3});
  Tensor iou = F({1}, {0.5f});
  Tensor thr = F({1}, {0.75f});
  ExpectValues(RunOne("NonMaxSuppression", {&boxes, &scores, &max_out, &iou},
                      {}, {DType::kI64}),
               {2, 3}, {0, 0, 0, 0, 0, 2});
  ExpectValues(RunOne("NonMaxSuppression",
                      {&boxes, &scores, &max_out, &iou, &thr}, {},
                      {DType::kI64}),
               {1, 3}, {0, 0, 0});
  Tensor one = I64({1}, {1});
  ExpectValues(RunOne("NonMaxSuppression", {&boxes, &scores, &one, &iou}, {},
                      {DType::kI64}),
               {1, 3}, {0, 0, 0});
  Tensor centers =
      F({1, 3, 4}, {0.5f, 0.5f, 1, 1, 0.6f, 0.5f, 1, 1, 2.5f, 0.5f, 1, 1});
  ExpectValues(RunOne("NonMaxSuppression", {&centers, &scores, &max_out, &iou},
                      {{"center_point_box", int64_t{1}}}, {DType::kI64}),
               {2, 3}, {0, 0, 0, 0, 0, 2});
  Tensor two = F({1, 2, 3}, {0.9f, 0.8f, 0.7f, 0.7f, 0.8f, 0.9f});
  ExpectValues(RunOne("NonMaxSuppression", {&boxes, &two, &max_out, &iou}, {},
                      {DType::kI64}),
               {4, 3}, {0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1});
  Tensor bad_scores = F({1, 1, 2}, {0.9f, 0.8f});
  ExpectError(RunOp("NonMaxSuppression", {&boxes, &bad_scores}, {},
                    {DType::kI64}),
              "NonMaxSuppression", "scores");
}

TEST(Unique, OnnxExamplesSortedUnsortedAndAxis) {
  Tensor x = F({6}, {2, 1, 1, 3, 4, 3});
  const std::vector<DType> outs = {DType::kF32, DType::kI64, DType::kI64,
                                   DType::kI64};
  std::vector<Tensor> r = RunOk("Unique", {&x}, {}, outs);
  ASSERT_EQ(r.size(), 4u);
  ExpectValues(r[0], {4}, {1, 2, 3, 4});
  ExpectValues(r[1], {4}, {1, 0, 3, 4});
  ExpectValues(r[2], {6}, {1, 0, 0, 2, 3, 2});
  ExpectValues(r[3], {4}, {2, 1, 2, 1});
  r = RunOk("Unique", {&x}, {{"sorted", int64_t{0}}}, outs);
  ASSERT_EQ(r.size(), 4u);
  ExpectValues(r[0], {4}, {2, 1, 3, 4});
  ExpectValues(r[1], {4}, {0, 1, 3, 4});
  ExpectValues(r[2], {6}, {0, 1, 1, 2, 3, 2});
  ExpectValues(r[3], {4}, {1, 2, 2, 1});
  Tensor m = F({3, 3}, {2, 3, 4, 1, 0, 0, 1, 0, 0});
  r = RunOk("Unique", {&m}, {{"axis", int64_t{0}}}, outs);
  ASSERT_EQ(r.size(), 4u);
  ExpectValues(r[0], {2, 3}, {1, 0, 0, 2, 3, 4});
  ExpectValues(r[1], {2}, {1, 0});
  ExpectValues(r[2], {3}, {1, 0, 0});
  ExpectValues(r[3], {2}, {2, 1});
  // Columns along axis -1: [2,1,1], [3,0,0], [4,0,0] are all distinct.
  r = RunOk("Unique", {&m}, {{"axis", int64_t{-1}}}, outs);
  ExpectValues(r[0], {3, 3}, {2, 3, 4, 1, 0, 0, 1, 0, 0});
  ExpectError(RunOp("Unique", {&m}, {{"axis", int64_t{2}}}, outs), "Unique",
              "out of range");
}

// ------------------------------------------------------------------ Scan

// body(s, x) = (s + x, s + x) over f32[2] slices.
std::shared_ptr<const Graph> SumBody() {
  auto body = std::make_shared<Graph>("body");
  ir::ValueId s = body->AddValue("s", DType::kF32, {2});
  ir::ValueId x = body->AddValue("x", DType::kF32, {2});
  ir::ValueId s2 = body->AddValue("s2", DType::kF32, {2});
  ir::ValueId y = body->AddValue("y", DType::kF32, {2});
  body->AddInput(s);
  body->AddInput(x);
  body->AddNode("Add", {s, x}, {s2});
  body->AddNode("Identity", {s2}, {y});
  body->AddOutput(s2);
  body->AddOutput(y);
  return body;
}

absl::StatusOr<std::vector<Tensor>> RunScan(const Tensor* seq_lens,
                                            const Tensor& init,
                                            const Tensor& xs,
                                            AttributeMap extra,
                                            int64_t opset) {
  AttributeMap attrs = {{"body", SumBody()},
                        {"num_scan_inputs", int64_t{1}}};
  for (auto& [k, v] : extra) attrs[k] = v;
  std::vector<const Tensor*> inputs;
  if (opset < 9) inputs.push_back(seq_lens);
  inputs.push_back(&init);
  inputs.push_back(&xs);
  return RunOp("Scan", inputs, attrs, {DType::kF32, DType::kF32}, opset);
}

TEST(Scan, RunningSumForwardReversedAndAlongAxisOne) {
  Tensor init = F({2}, {0, 0});
  Tensor xs = F({3, 2}, {1, 2, 3, 4, 5, 6});
  absl::StatusOr<std::vector<Tensor>> r = RunScan(nullptr, init, xs, {}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {9, 12});
  ExpectValues((*r)[1], {3, 2}, {1, 2, 4, 6, 9, 12});

  r = RunScan(nullptr, init, xs,
              {{"scan_input_directions", std::vector<int64_t>{1}}}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[1], {3, 2}, {5, 6, 8, 10, 9, 12});

  r = RunScan(nullptr, init, xs,
              {{"scan_output_directions", std::vector<int64_t>{1}}}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[1], {3, 2}, {9, 12, 4, 6, 1, 2});

  Tensor xt = F({2, 3}, {1, 3, 5, 2, 4, 6});
  r = RunScan(nullptr, init, xt,
              {{"scan_input_axes", std::vector<int64_t>{1}},
               {"scan_output_axes", std::vector<int64_t>{1}}},
              11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {9, 12});
  ExpectValues((*r)[1], {2, 3}, {1, 4, 9, 2, 6, 12});
}

TEST(Scan, Opset8BatchMajor) {
  Tensor init = F({1, 2}, {0, 0});
  Tensor xs = F({1, 3, 2}, {1, 2, 3, 4, 5, 6});
  absl::StatusOr<std::vector<Tensor>> r = RunScan(nullptr, init, xs, {}, 8);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2}, {9, 12});
  ExpectValues((*r)[1], {1, 3, 2}, {1, 2, 4, 6, 9, 12});
}

TEST(Scan, Errors) {
  Tensor init = F({2}, {0, 0});
  Tensor xs = F({3, 2}, {1, 2, 3, 4, 5, 6});
  ExpectError(RunScan(nullptr, init, xs, {{"num_scan_inputs", int64_t{0}}}, 11),
              "Scan", "num_scan_inputs");
  ExpectError(RunScan(nullptr, init, xs,
                      {{"scan_input_axes", std::vector<int64_t>{2}}}, 11),
              "Scan", "out of range");
  Tensor wide = F({3, 3}, std::vector<float>(9, 1));
  ExpectError(RunScan(nullptr, init, wide, {}, 11), "Scan", "in body");
}

// -------------------------------------------------------- TfIdfVectorizer

AttributeMap TfIdfAttrs(int64_t min_n, int64_t max_n, int64_t skip,
                        const std::string& mode) {
  // Pool: unigrams {1}, {3}; bigram {1, 2}.
  return {{"min_gram_length", min_n},
          {"max_gram_length", max_n},
          {"max_skip_count", skip},
          {"mode", mode},
          {"ngram_counts", std::vector<int64_t>{0, 2}},
          {"ngram_indexes", std::vector<int64_t>{0, 1, 2}},
          {"pool_int64s", std::vector<int64_t>{1, 3, 1, 2}}};
}

TEST(TfIdfVectorizer, CountsSkipGramsAndWeights) {
  Tensor x = I64({5}, {1, 2, 3, 1, 2});
  const std::vector<DType> f32 = {DType::kF32};
  ExpectValues(RunOne("TfIdfVectorizer", {&x}, TfIdfAttrs(1, 2, 0, "TF"), f32),
               {3}, {2, 1, 2});
  ExpectValues(RunOne("TfIdfVectorizer", {&x}, TfIdfAttrs(2, 2, 0, "TF"), f32),
               {3}, {0, 0, 2});
  Tensor skip = I64({2, 5}, {1, 5, 2, 1, 2, 1, 2, 3, 3, 3});
  // Row 0: (1,2) adjacent once and once with one token skipped.
  ExpectValues(RunOne("TfIdfVectorizer", {&skip}, TfIdfAttrs(2, 2, 1, "TF"),
                      f32),
               {2, 3}, {0, 0, 2, 0, 0, 1});
  ExpectValues(RunOne("TfIdfVectorizer", {&skip}, TfIdfAttrs(2, 2, 0, "TF"),
                      f32),
               {2, 3}, {0, 0, 1, 0, 0, 1});
  AttributeMap idf = TfIdfAttrs(1, 2, 0, "IDF");
  idf["weights"] = std::vector<float>{0.5f, 2, 3};
  ExpectValues(RunOne("TfIdfVectorizer", {&x}, idf, f32), {3}, {0.5, 2, 3});
  idf["mode"] = std::string("TFIDF");
  ExpectValues(RunOne("TfIdfVectorizer", {&x}, idf, f32), {3}, {1, 2, 6});
  AttributeMap bad = TfIdfAttrs(1, 2, 0, "TF");
  bad["ngram_counts"] = std::vector<int64_t>{0, 3};
  ExpectError(RunOp("TfIdfVectorizer", {&x}, bad, f32), "TfIdfVectorizer",
              "ngram_counts");
}

}  // namespace
}  // namespace kiln::interp
