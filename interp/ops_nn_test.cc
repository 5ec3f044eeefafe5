// Tests for the reference nn kernels (ops_nn.cc): small graphs whose expected
// outputs are worked out by hand or taken from ONNX's Operators.md examples.
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/graph.h"
#include "interp/interpreter.h"

namespace kiln::interp {
namespace {

using ir::AttributeMap;
using ir::DType;
using ir::Shape;
using ir::Tensor;
using ::testing::HasSubstr;

Tensor F(Shape shape, std::vector<float> v) {
  return Tensor::FromVector<float>(std::move(shape), v);
}
Tensor I64(Shape shape, std::vector<int64_t> v) {
  return Tensor::FromVector<int64_t>(std::move(shape), v);
}
std::vector<float> Iota(int n, float start = 1) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

// Runs one node `op` named "n0"; nullptr inputs are omitted optional inputs.
// Outputs are declared with `out_dtypes` (default: the first input's dtype).
absl::StatusOr<std::vector<Tensor>> RunOp(
    const std::string& op, const std::vector<const Tensor*>& inputs,
    AttributeMap attrs = {}, std::vector<DType> out_dtypes = {},
    int64_t opset = 18) {
  ir::Graph g;
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

// The single output of a node that must succeed.
Tensor RunOne(const std::string& op, const std::vector<const Tensor*>& inputs,
              AttributeMap attrs = {}, int64_t opset = 18) {
  absl::StatusOr<std::vector<Tensor>> r =
      RunOp(op, inputs, std::move(attrs), {}, opset);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || r->empty()) return Tensor();
  return (*r)[0];
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

// ---------------------------------------------------------------- Conv

TEST(ConvTest, TwoByTwoKernelOnThreeByThree) {
  Tensor x = F({1, 1, 3, 3}, Iota(9));
  Tensor w = F({1, 1, 2, 2}, {1, 0, 0, 1});  // x[i][j] + x[i+1][j+1]
  Tensor b = F({1}, {10});
  ExpectValues(RunOne("Conv", {&x, &w}), {1, 1, 2, 2}, {6, 8, 12, 14});
  ExpectValues(RunOne("Conv", {&x, &w, &b}), {1, 1, 2, 2}, {16, 18, 22, 24});
}

TEST(ConvTest, OnnxBasicConvWithPaddingAndStrides) {
  Tensor x = F({1, 1, 5, 5}, Iota(25, 0));
  Tensor w = F({1, 1, 3, 3}, std::vector<float>(9, 1));
  ExpectValues(RunOne("Conv", {&x, &w},
                      {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                       {"kernel_shape", std::vector<int64_t>{3, 3}}}),
               {1, 1, 5, 5},
               {12, 21,  27,  33,  24,  33, 54, 63,  72,  51,  63, 99,  108,
                117, 81, 93,  144, 153, 162, 111, 72, 111, 117, 123, 84});
  ExpectValues(RunOne("Conv", {&x, &w},
                      {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                       {"strides", std::vector<int64_t>{2, 2}}}),
               {1, 1, 3, 3}, {12, 27, 24, 63, 108, 81, 72, 117, 84});
  ExpectValues(RunOne("Conv", {&x, &w}), {1, 1, 3, 3},
               {54, 63, 72, 99, 108, 117, 144, 153, 162});
}

TEST(ConvTest, GroupsAndDepthwise) {
  Tensor x = F({1, 2, 2, 2}, Iota(8));
  Tensor w = F({2, 1, 1, 1}, {2, 3});
  ExpectValues(RunOne("Conv", {&x, &w}, {{"group", int64_t{2}}}), {1, 2, 2, 2},
               {2, 4, 6, 8, 15, 18, 21, 24});
  Tensor x4 = F({1, 4, 1, 1}, {1, 2, 3, 4});
  Tensor w2 = F({2, 2, 1, 1}, {1, 1, 1, -1});
  ExpectValues(RunOne("Conv", {&x4, &w2}, {{"group", int64_t{2}}}),
               {1, 2, 1, 1}, {3, -1});
}

TEST(ConvTest, SameUpperVersusSameLower) {
  Tensor x = F({1, 1, 4}, {1, 2, 3, 4});
  Tensor w = F({1, 1, 2}, {1, 1});
  ExpectValues(RunOne("Conv", {&x, &w}, {{"auto_pad", std::string("SAME_UPPER")}}),
               {1, 1, 4}, {3, 5, 7, 4});
  ExpectValues(RunOne("Conv", {&x, &w}, {{"auto_pad", std::string("SAME_LOWER")}}),
               {1, 1, 4}, {1, 3, 5, 7});
  ExpectValues(RunOne("Conv", {&x, &w}, {{"auto_pad", std::string("VALID")},
                                         {"pads", std::vector<int64_t>{5, 5}}}),
               {1, 1, 3}, {3, 5, 7});
}

TEST(ConvTest, DilationsAndThreeD) {
  Tensor x = F({1, 1, 5}, {1, 2, 3, 4, 5});
  Tensor w = F({1, 1, 2}, {1, 1});
  ExpectValues(RunOne("Conv", {&x, &w}, {{"dilations", std::vector<int64_t>{2}}}),
               {1, 1, 3}, {4, 6, 8});
  Tensor x3 = F({1, 1, 2, 2, 2}, Iota(8));
  Tensor w3 = F({2, 1, 2, 2, 2}, std::vector<float>(16, 1));
  ExpectValues(RunOne("Conv", {&x3, &w3}), {1, 2, 1, 1, 1}, {36, 36});
}

TEST(ConvTest, DoubleAndHalf) {
  Tensor x = Tensor::FromVector<double>({1, 1, 3}, {1, 2, 3});
  Tensor w = Tensor::FromVector<double>({1, 1, 2}, {1, -1});
  ExpectValues(RunOne("Conv", {&x, &w}), {1, 1, 2}, {-1, -1});
  Tensor xh(DType::kF16, {1, 1, 2});
  xh.data<ir::Float16>()[0] = ir::FloatToHalf(1.5f);
  xh.data<ir::Float16>()[1] = ir::FloatToHalf(2.0f);
  Tensor wh(DType::kF16, {1, 1, 1});
  wh.data<ir::Float16>()[0] = ir::FloatToHalf(2.0f);
  Tensor y = RunOne("Conv", {&xh, &wh});
  EXPECT_EQ(y.dtype(), DType::kF16);
  ExpectValues(y, {1, 1, 2}, {3, 4});
}

TEST(ConvTest, Errors) {
  Tensor x = F({1, 3, 3, 3}, Iota(27));
  Tensor w = F({1, 2, 2, 2}, Iota(8));
  ExpectError(RunOp("Conv", {&x, &w}), "Conv", "input channels per group");
  ExpectError(RunOp("Conv", {&x, &w}, {{"group", int64_t{2}}}), "Conv",
              "does not divide input channels");
  Tensor w3 = F({1, 3, 2, 2}, Iota(12));
  ExpectError(RunOp("Conv", {&x, &w3}, {{"kernel_shape", std::vector<int64_t>{3, 3}}}),
              "Conv", "kernel_shape");
  Tensor wbig = F({1, 3, 4, 4}, std::vector<float>(48, 1));
  ExpectError(RunOp("Conv", {&x, &wbig}), "Conv", "exceeds padded input");
  Tensor bad_bias = F({2}, {1, 2});
  ExpectError(RunOp("Conv", {&x, &w3, &bad_bias}), "Conv", "bias");
  ExpectError(RunOp("Conv", {&x, &w3}, {{"strides", std::vector<int64_t>{1}}}),
              "Conv", "strides");
}

// ------------------------------------------------------- ConvTranspose

TEST(ConvTransposeTest, StrideOutputPaddingPadsAndBias) {
  Tensor x = F({1, 1, 2}, {1, 2});
  Tensor w = F({1, 1, 3}, {1, 1, 1});
  const auto s2 = std::vector<int64_t>{2};
  ExpectValues(RunOne("ConvTranspose", {&x, &w}, {{"strides", s2}}), {1, 1, 5},
               {1, 1, 3, 2, 2});
  ExpectValues(RunOne("ConvTranspose", {&x, &w},
                      {{"strides", s2}, {"output_padding", std::vector<int64_t>{1}}}),
               {1, 1, 6}, {1, 1, 3, 2, 2, 0});
  ExpectValues(RunOne("ConvTranspose", {&x, &w},
                      {{"strides", s2}, {"pads", std::vector<int64_t>{1, 1}}}),
               {1, 1, 3}, {1, 3, 2});
  ExpectValues(RunOne("ConvTranspose", {&x, &w},
                      {{"strides", s2}, {"output_shape", std::vector<int64_t>{6}}}),
               {1, 1, 6}, {1, 1, 3, 2, 2, 0});
  ExpectValues(RunOne("ConvTranspose", {&x, &w},
                      {{"strides", s2}, {"auto_pad", std::string("SAME_UPPER")}}),
               {1, 1, 4}, {1, 1, 3, 2});
  ExpectValues(RunOne("ConvTranspose", {&x, &w},
                      {{"strides", s2}, {"auto_pad", std::string("SAME_LOWER")}}),
               {1, 1, 4}, {1, 3, 2, 2});
  Tensor b = F({1}, {1});
  ExpectValues(RunOne("ConvTranspose", {&x, &w, &b}, {{"strides", s2}}),
               {1, 1, 5}, {2, 2, 4, 3, 3});
}

TEST(ConvTransposeTest, OnnxExampleTwoOutputChannels) {
  Tensor x = F({1, 1, 3, 3}, Iota(9, 0));
  Tensor w = F({1, 2, 3, 3}, std::vector<float>(18, 1));
  const std::vector<double> plane = {0,  1,  3,  3,  2,  3,  8,  15, 12,
                                     7,  9,  21, 36, 27, 15, 9,  20, 33,
                                     24, 13, 6,  13, 21, 15, 8};
  std::vector<double> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  ExpectValues(RunOne("ConvTranspose", {&x, &w}), {1, 2, 5, 5}, want);
}

TEST(ConvTransposeTest, GroupsAndErrors) {
  Tensor x = F({1, 2, 1}, {1, 2});
  Tensor w = F({2, 1, 1}, {3, 4});
  ExpectValues(RunOne("ConvTranspose", {&x, &w}, {{"group", int64_t{2}}}),
               {1, 2, 1}, {3, 8});
  Tensor w_bad = F({3, 1, 1}, {1, 1, 1});
  ExpectError(RunOp("ConvTranspose", {&x, &w_bad}), "ConvTranspose",
              "input channels");
  ExpectError(RunOp("ConvTranspose", {&x, &w}, {{"group", int64_t{3}}}),
              "ConvTranspose", "does not divide");
}

// ------------------------------------------------- BatchNormalization

TEST(BatchNormTest, OnnxInferenceExample) {
  Tensor x = F({1, 2, 1, 3}, {-1, 0, 1, 2, 3, 4});
  Tensor s = F({2}, {1, 1.5});
  Tensor b = F({2}, {0, 1});
  Tensor mean = F({2}, {0, 3});
  Tensor var = F({2}, {1, 1.5});
  const double d0 = std::sqrt(1 + 1e-5), d1 = std::sqrt(1.5 + 1e-5);
  ExpectValues(RunOne("BatchNormalization", {&x, &s, &b, &mean, &var}),
               {1, 2, 1, 3},
               {-1 / d0, 0, 1 / d0, -1.5 / d1 + 1, 1, 1.5 / d1 + 1});
  const double e0 = std::sqrt(1 + 1e-2), e1 = std::sqrt(1.5 + 1e-2);
  ExpectValues(RunOne("BatchNormalization", {&x, &s, &b, &mean, &var},
                      {{"epsilon", 1e-2f}}),
               {1, 2, 1, 3},
               {-1 / e0, 0, 1 / e0, -1.5 / e1 + 1, 1, 1.5 / e1 + 1});
}

TEST(BatchNormTest, TrainingModeOutputs) {
  Tensor x = F({2, 1, 1}, {1, 3});  // batch mean 2, population variance 1
  Tensor s = F({1}, {1});
  Tensor b = F({1}, {0});
  Tensor mean = F({1}, {0});
  Tensor var = F({1}, {2});
  auto r = RunOp("BatchNormalization", {&x, &s, &b, &mean, &var},
                 {{"training_mode", int64_t{1}}},
                 {DType::kF32, DType::kF32, DType::kF32}, 15);
  ASSERT_TRUE(r.ok()) << r.status();
  const double d = std::sqrt(1 + 1e-5);
  ExpectValues((*r)[0], {2, 1, 1}, {-1 / d, 1 / d});
  ExpectValues((*r)[1], {1}, {0.2});        // 0 * 0.9 + 2 * 0.1
  ExpectValues((*r)[2], {1}, {1.9});        // 2 * 0.9 + 1 * 0.1
  auto old = RunOp("BatchNormalization", {&x, &s, &b, &mean, &var}, {},
                   {DType::kF32, DType::kF32}, 9);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(old.status().message()), HasSubstr("'n0'"));
}

TEST(BatchNormTest, SpatialZeroInOpset7AndErrors) {
  Tensor x = F({1, 2, 2}, {1, 2, 3, 4});
  Tensor s = F({2, 2}, {1, 2, 3, 4});
  Tensor b = F({2, 2}, {0, 0, 0, 1});
  Tensor mean = F({2, 2}, {0, 0, 0, 0});
  Tensor var = F({2, 2}, {1, 1, 1, 1});
  const double d = std::sqrt(1 + 1e-5);
  ExpectValues(RunOne("BatchNormalization", {&x, &s, &b, &mean, &var},
                      {{"spatial", int64_t{0}}}, 7),
               {1, 2, 2}, {1 / d, 4 / d, 9 / d, 16 / d + 1});
  ExpectError(RunOp("BatchNormalization", {&x, &s, &b, &mean, &var}),
              "BatchNormalization", "parameter input 1");
}

// ------------------------------------------------------------- LRN

TEST(LrnTest, HandComputed) {
  Tensor x = F({1, 3, 1, 1}, {1, 2, 3});
  // alpha / size = 1, beta = 1, bias = 1: y = x / (1 + sum of squares).
  ExpectValues(RunOne("LRN", {&x}, {{"size", int64_t{3}}, {"alpha", 3.0f},
                                    {"beta", 1.0f}, {"bias", 1.0f}}),
               {1, 3, 1, 1}, {1.0 / 6, 2.0 / 15, 3.0 / 14});
  ExpectError(RunOp("LRN", {&x}), "LRN", "size");
}

// ------------------------------------------------------- Gemm, MatMul

TEST(GemmTest, TransposesAlphaBetaAndBroadcastC) {
  Tensor a = F({2, 3}, Iota(6));
  Tensor b = F({3, 2}, Iota(6));
  ExpectValues(RunOne("Gemm", {&a, &b}), {2, 2}, {22, 28, 49, 64});
  Tensor at = F({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor bt = F({2, 3}, {1, 3, 5, 2, 4, 6});
  ExpectValues(RunOne("Gemm", {&at, &bt}, {{"transA", int64_t{1}},
                                           {"transB", int64_t{1}}}),
               {2, 2}, {22, 28, 49, 64});
  Tensor row = F({1, 2}, {1, 2});
  ExpectValues(RunOne("Gemm", {&a, &b, &row}, {{"alpha", 0.5f}, {"beta", 2.0f}}),
               {2, 2}, {13, 18, 26.5, 36});
  Tensor col = F({2, 1}, {1, 2});
  ExpectValues(RunOne("Gemm", {&a, &b, &col}), {2, 2}, {23, 29, 51, 66});
  Tensor scalar = F({}, {100});
  ExpectValues(RunOne("Gemm", {&a, &b, &scalar}), {2, 2}, {122, 128, 149, 164});
  Tensor bad_c = F({3}, {1, 2, 3});
  ExpectError(RunOp("Gemm", {&a, &b, &bad_c}), "Gemm", "does not broadcast");
  ExpectError(RunOp("Gemm", {&a, &a}), "Gemm", "inner dims");
}

TEST(MatMulTest, VectorOperands) {
  Tensor v = F({2}, {1, 2});
  Tensor m = F({2, 2}, {1, 2, 3, 4});
  ExpectValues(RunOne("MatMul", {&v, &m}), {2}, {7, 10});
  ExpectValues(RunOne("MatMul", {&m, &v}), {2}, {5, 11});
  Tensor u = F({3}, {1, 2, 3});
  Tensor w = F({3}, {4, 5, 6});
  ExpectValues(RunOne("MatMul", {&u, &w}), {}, {32});
}

TEST(MatMulTest, BroadcastBatchDims) {
  // A: [2,1,2,2] = {I, 2I}; B: [3,2,2] = {k * [[1,2],[3,4]]} for k = 1..3.
  Tensor a = F({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  std::vector<float> bv;
  for (int k = 1; k <= 3; ++k) {
    for (float e : {1, 2, 3, 4}) bv.push_back(k * e);
  }
  Tensor b = F({3, 2, 2}, bv);
  std::vector<double> want;
  for (int i = 1; i <= 2; ++i) {
    for (int k = 1; k <= 3; ++k) {
      for (double e : {1, 2, 3, 4}) want.push_back(i * k * e);
    }
  }
  ExpectValues(RunOne("MatMul", {&a, &b}), {2, 3, 2, 2}, want);
  Tensor bad = F({3, 1, 2, 2}, Iota(12));
  ExpectError(RunOp("MatMul", {&a, &bad}), "MatMul", "batch dims");
}

TEST(MatMulTest, IntegersAndInteger) {
  Tensor a = I64({2, 2}, {1, 2, 3, 4});
  Tensor b = I64({2, 1}, {5, 6});
  Tensor y = RunOne("MatMul", {&a, &b});
  EXPECT_EQ(y.dtype(), DType::kI64);
  ExpectValues(y, {2, 1}, {17, 39});

  Tensor qa = Tensor::FromVector<uint8_t>({1, 2}, {10, 20});
  Tensor qb = Tensor::FromVector<uint8_t>({2, 1}, {3, 4});
  Tensor za = Tensor::FromVector<uint8_t>({}, {2});
  auto r = RunOp("MatMulInteger", {&qa, &qb, &za}, {}, {DType::kI32});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 1}, {8 * 3 + 18 * 4});
}

// ------------------------------------------------------------- Einsum

Tensor Einsum(const std::string& eq, const std::vector<const Tensor*>& in) {
  return RunOne("Einsum", in, {{"equation", eq}});
}

TEST(EinsumTest, MatmulTransposeAndImplicit) {
  Tensor a = F({2, 3}, Iota(6));
  Tensor b = F({3, 2}, Iota(6));
  ExpectValues(Einsum("ij,jk->ik", {&a, &b}), {2, 2}, {22, 28, 49, 64});
  ExpectValues(Einsum("ij,jk", {&a, &b}), {2, 2}, {22, 28, 49, 64});
  ExpectValues(Einsum("ij->ji", {&a}), {3, 2}, {1, 4, 2, 5, 3, 6});
  ExpectValues(Einsum("ba", {&a}), {3, 2}, {1, 4, 2, 5, 3, 6});
  ExpectValues(Einsum("ij->i", {&a}), {2}, {6, 15});
  ExpectValues(Einsum("ij->", {&a}), {}, {21});
}

TEST(EinsumTest, DiagonalTraceAndInnerProduct) {
  Tensor m = F({3, 3}, Iota(9));
  ExpectValues(Einsum("ii->i", {&m}), {3}, {1, 5, 9});
  ExpectValues(Einsum("ii", {&m}), {}, {15});
  Tensor u = F({3}, {1, 2, 3});
  ExpectValues(Einsum("i,i", {&u, &u}), {}, {14});
  ExpectValues(Einsum("i,j->ij", {&u, &u}), {3, 3}, {1, 2, 3, 2, 4, 6, 3, 6, 9});
}

TEST(EinsumTest, BatchedAndAttentionScores) {
  // b=2 batches of [1x2] x [2x1].
  Tensor a = F({2, 1, 2}, {1, 2, 3, 4});
  Tensor b = F({2, 2, 1}, {5, 6, 7, 8});
  ExpectValues(Einsum("bij,bjk->bik", {&a, &b}), {2, 1, 1}, {17, 53});
  ExpectValues(Einsum("...ij,...jk->...ik", {&a, &b}), {2, 1, 1}, {17, 53});
  // q: [1,1,2,2] (2 queries), k: [1,1,3,2] (3 keys): scores = q . k.
  Tensor q = F({1, 1, 2, 2}, {1, 0, 0, 1});
  Tensor k = F({1, 1, 3, 2}, {1, 2, 3, 4, 5, 6});
  ExpectValues(Einsum("bhqd,bhkd->bhqk", {&q, &k}), {1, 1, 2, 3},
               {1, 3, 5, 2, 4, 6});
  // Ellipsis broadcast: [2,2] against [1,2,2] batch dims.
  Tensor e = F({2, 2}, {1, 0, 0, 1});
  ExpectValues(Einsum("...ij,...jk->...ik", {&e, &b}), {2, 2, 1},
               {5, 6, 7, 8});
}

TEST(EinsumTest, Errors) {
  Tensor a = F({2, 3}, Iota(6));
  ExpectError(RunOp("Einsum", {&a, &a}, {{"equation", std::string("ij,jk->ik")}}),
              "Einsum", "label sizes disagree");
  ExpectError(RunOp("Einsum", {&a}, {{"equation", std::string("ijk->i")}}),
              "Einsum", "does not match");
  ExpectError(RunOp("Einsum", {&a}, {{"equation", std::string("i$->i")}}),
              "Einsum", "bad einsum term");
  ExpectError(RunOp("Einsum", {&a}, {{"equation", std::string("ij->iz")}}),
              "Einsum", "output term");
}

// ------------------------------------------------------------- Pools

TEST(MaxPoolTest, CeilModeShapeAndIndices) {
  Tensor x = F({1, 1, 4, 4}, Iota(16));
  AttributeMap attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                        {"strides", std::vector<int64_t>{2, 2}}};
  ExpectValues(RunOne("MaxPool", {&x}, attrs), {1, 1, 1, 1}, {11});
  attrs["ceil_mode"] = int64_t{1};
  auto r = RunOp("MaxPool", {&x}, attrs, {DType::kF32, DType::kI64});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 1, 2, 2}, {11, 12, 15, 16});
  EXPECT_EQ((*r)[1].dtype(), DType::kI64);
  ExpectValues((*r)[1], {1, 1, 2, 2}, {10, 11, 14, 15});
  attrs["storage_order"] = int64_t{1};
  r = RunOp("MaxPool", {&x}, attrs, {DType::kF32, DType::kI64});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[1], {1, 1, 2, 2}, {10, 14, 11, 15});
}

TEST(MaxPoolTest, IndicesIncludeBatchAndChannel) {
  Tensor x = F({2, 1, 1, 2}, {5, 1, 2, 7});
  auto r = RunOp("MaxPool", {&x}, {{"kernel_shape", std::vector<int64_t>{1, 2}}},
                 {DType::kF32, DType::kI64});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 1, 1, 1}, {5, 7});
  ExpectValues((*r)[1], {2, 1, 1, 1}, {0, 3});
}

TEST(MaxPoolTest, PadsDilationsAndSame) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  ExpectValues(RunOne("MaxPool", {&x}, {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
               {1, 1, 3, 3}, {1, 2, 2, 3, 4, 4, 3, 4, 4});
  Tensor y = F({1, 1, 5}, {1, 5, 2, 4, 3});
  ExpectValues(RunOne("MaxPool", {&y}, {{"kernel_shape", std::vector<int64_t>{2}},
                                        {"dilations", std::vector<int64_t>{2}}}),
               {1, 1, 3}, {2, 5, 3});
  Tensor u8 = Tensor::FromVector<uint8_t>({1, 1, 3}, {7, 200, 3});
  Tensor r = RunOne("MaxPool", {&u8}, {{"kernel_shape", std::vector<int64_t>{2}}});
  EXPECT_EQ(r.dtype(), DType::kU8);
  ExpectValues(r, {1, 1, 2}, {200, 200});
  ExpectError(RunOp("MaxPool", {&x}), "MaxPool", "kernel_shape");
  ExpectError(RunOp("MaxPool", {&x}, {{"kernel_shape", std::vector<int64_t>{3, 3}}}),
              "MaxPool", "exceeds padded input");
  const int64_t huge = int64_t{1} << 40;
  ExpectError(RunOp("MaxPool", {&x}, {{"kernel_shape", std::vector<int64_t>{huge, 1}},
                                      {"pads", std::vector<int64_t>{huge, 0, huge, 0}}}),
              "MaxPool", "too large");
  ExpectError(RunOp("MaxPool", {&x}, {{"kernel_shape", std::vector<int64_t>{1, 1}},
                                      {"pads", std::vector<int64_t>{0, 0, int64_t{1} << 30, int64_t{1} << 30}}}),
              "MaxPool", "too large");
}

TEST(AveragePoolTest, CountIncludePadAndSamePadding) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  AttributeMap attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  ExpectValues(RunOne("AveragePool", {&x}, attrs), {1, 1, 3, 3},
               {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  attrs["count_include_pad"] = int64_t{1};
  ExpectValues(RunOne("AveragePool", {&x}, attrs), {1, 1, 3, 3},
               {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
  Tensor y = F({1, 1, 3}, {1, 2, 3});
  ExpectValues(RunOne("AveragePool", {&y}, {{"kernel_shape", std::vector<int64_t>{2}},
                                            {"auto_pad", std::string("SAME_UPPER")}}),
               {1, 1, 3}, {1.5, 2.5, 3});
  ExpectValues(RunOne("AveragePool", {&y}, {{"kernel_shape", std::vector<int64_t>{2}},
                                            {"auto_pad", std::string("SAME_LOWER")}}),
               {1, 1, 3}, {1, 1.5, 2.5});
}

TEST(PoolTest, GlobalAndLp) {
  Tensor x = F({1, 2, 2, 2}, Iota(8));
  ExpectValues(RunOne("GlobalAveragePool", {&x}), {1, 2, 1, 1}, {2.5, 6.5});
  ExpectValues(RunOne("GlobalMaxPool", {&x}), {1, 2, 1, 1}, {4, 8});
  Tensor y = F({1, 1, 2}, {3, 4});
  ExpectValues(RunOne("LpPool", {&y}, {{"kernel_shape", std::vector<int64_t>{2}}}),
               {1, 1, 1}, {5});
}

// ------------------------------------------------------------- Resize

TEST(ResizeTest, OnnxNearestUpsampleScales) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor scales = F({4}, {1, 1, 2, 3});
  ExpectValues(RunOne("Resize", {&x, nullptr, &scales}), {1, 1, 4, 6},
               {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  Tensor axes_scales = F({2}, {2, 3});
  ExpectValues(RunOne("Resize", {&x, nullptr, &axes_scales},
                      {{"axes", std::vector<int64_t>{2, 3}}}),
               {1, 1, 4, 6},
               {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
}

TEST(ResizeTest, OnnxLinearUpsampleHalfPixelAndAlignCorners) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor scales = F({4}, {1, 1, 2, 2});
  AttributeMap linear = {{"mode", std::string("linear")}};
  ExpectValues(RunOne("Resize", {&x, nullptr, &scales}, linear), {1, 1, 4, 4},
               {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5,
                2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  linear["coordinate_transformation_mode"] = std::string("align_corners");
  const double t = 1.0 / 3;
  ExpectValues(RunOne("Resize", {&x, nullptr, &scales}, linear), {1, 1, 4, 4},
               {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t,
                2 + t, 2 + 2 * t, 3, 3 + t, 3, 3 + t, 3 + 2 * t, 4});
}

TEST(ResizeTest, OnnxDownsampleNearestAndLinear) {
  Tensor x = F({1, 1, 2, 4}, Iota(8));
  Tensor scales = F({4}, {1, 1, 0.6f, 0.6f});
  ExpectValues(RunOne("Resize", {&x, nullptr, &scales}), {1, 1, 1, 2}, {1, 3});
  ExpectValues(RunOne("Resize", {&x, nullptr, &scales},
                      {{"mode", std::string("linear")}}),
               {1, 1, 1, 2}, {2.6666665, 4.3333331});
}

TEST(ResizeTest, NearestModesAndSizes) {
  Tensor x = F({1, 4}, {10, 20, 30, 40});
  Tensor sizes = I64({2}, {1, 8});
  // asymmetric: x_original = o / 2 = 0, 0.5, 1, 1.5, ...
  auto run = [&](const std::string& mode) {
    return RunOne("Resize", {&x, nullptr, nullptr, &sizes},
                  {{"coordinate_transformation_mode", std::string("asymmetric")},
                   {"nearest_mode", mode}});
  };
  ExpectValues(run("round_prefer_floor"), {1, 8}, {10, 10, 20, 20, 30, 30, 40, 40});
  ExpectValues(run("round_prefer_ceil"), {1, 8}, {10, 20, 20, 30, 30, 40, 40, 40});
  ExpectValues(run("floor"), {1, 8}, {10, 10, 20, 20, 30, 30, 40, 40});
  ExpectValues(run("ceil"), {1, 8}, {10, 20, 20, 30, 30, 40, 40, 40});
}

TEST(ResizeTest, KeepAspectRatioPolicies) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor sizes = I64({2}, {3, 4});
  AttributeMap attrs = {{"axes", std::vector<int64_t>{2, 3}},
                        {"keep_aspect_ratio_policy", std::string("not_larger")}};
  // scale = min(3/2, 4/2) = 1.5; half_pixel nearest picks rows/cols 0, 0, 1.
  ExpectValues(RunOne("Resize", {&x, nullptr, nullptr, &sizes}, attrs),
               {1, 1, 3, 3}, {1, 1, 2, 1, 1, 2, 3, 3, 4});
  attrs["keep_aspect_ratio_policy"] = std::string("not_smaller");
  ExpectValues(RunOne("Resize", {&x, nullptr, nullptr, &sizes}, attrs),
               {1, 1, 4, 4},
               {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST(ResizeTest, OnnxTfCropAndResize) {
  Tensor x = F({1, 1, 4, 4}, Iota(16));
  Tensor roi = F({8}, {0, 0, 0.4f, 0.6f, 1, 1, 0.6f, 0.8f});
  Tensor sizes = I64({4}, {1, 1, 3, 3});
  AttributeMap attrs = {
      {"mode", std::string("linear")},
      {"coordinate_transformation_mode", std::string("tf_crop_and_resize")}};
  ExpectValues(RunOne("Resize", {&x, &roi, nullptr, &sizes}, attrs),
               {1, 1, 3, 3},
               {7.6000004, 7.9, 8.2, 8.8, 9.1, 9.4, 10, 10.3, 10.6});
  Tensor roi2 = F({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f});
  attrs["extrapolation_value"] = 10.0f;
  ExpectValues(RunOne("Resize", {&x, &roi2, nullptr, &sizes}, attrs),
               {1, 1, 3, 3}, {7.6000004, 10, 10, 12.4, 10, 10, 10, 10, 10});
}

TEST(ResizeTest, CubicAsymmetricHandComputed) {
  // Keys kernel, a = -0.75, at ratio 0.5: weights -3/32, 19/32, 19/32, -3/32.
  Tensor x = F({1, 4}, {1, 2, 4, 8});
  Tensor scales = F({2}, {1, 2});
  Tensor y = RunOne("Resize", {&x, nullptr, &scales},
                    {{"mode", std::string("cubic")},
                     {"coordinate_transformation_mode", std::string("asymmetric")}});
  ASSERT_EQ(y.shape(), (Shape{1, 8}));
  EXPECT_NEAR(y.GetAsDouble(0), 1, 1e-6);
  EXPECT_NEAR(y.GetAsDouble(1), (-3 * 1 + 19 * 1 + 19 * 2 - 3 * 4) / 32.0, 1e-6);
  EXPECT_NEAR(y.GetAsDouble(2), 2, 1e-6);
  EXPECT_NEAR(y.GetAsDouble(3), (-3 * 1 + 19 * 2 + 19 * 4 - 3 * 8) / 32.0, 1e-6);
}

TEST(ResizeTest, LegacyUpsampleAndResize10) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  const std::vector<double> want = {1, 1, 2, 2, 1, 1, 2, 2,
                                    3, 3, 4, 4, 3, 3, 4, 4};
  ExpectValues(RunOne("Upsample", {&x},
                      {{"scales", std::vector<float>{1, 1, 2, 2}}}, 7),
               {1, 1, 4, 4}, want);
  Tensor scales = F({4}, {1, 1, 2, 2});
  ExpectValues(RunOne("Upsample", {&x, &scales}, {}, 9), {1, 1, 4, 4}, want);
  ExpectValues(RunOne("Resize", {&x, &scales}, {}, 10), {1, 1, 4, 4}, want);
  // Linear upsample: asymmetric coordinates, clamped at the far edge.
  Tensor row = F({1, 2}, {1, 3});
  Tensor s2 = F({2}, {1, 2});
  ExpectValues(RunOne("Upsample", {&row, &s2}, {{"mode", std::string("linear")}}, 9),
               {1, 4}, {1, 2, 3, 3});
}

TEST(ResizeTest, Errors) {
  Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor scales = F({4}, {1, 1, 2, 2});
  Tensor sizes = I64({4}, {1, 1, 4, 4});
  ExpectError(RunOp("Resize", {&x, nullptr, &scales, &sizes}), "Resize",
              "only one of scales and sizes");
  Tensor short_scales = F({2}, {2, 2});
  ExpectError(RunOp("Resize", {&x, nullptr, &short_scales}), "Resize",
              "expected 4");
  ExpectError(RunOp("Resize", {&x, nullptr, &scales},
                    {{"mode", std::string("bicubic")}}),
              "Resize", "unknown mode");
  Tensor huge = I64({4}, {1, 1, int64_t{1} << 40, int64_t{1} << 40});
  ExpectError(RunOp("Resize", {&x, nullptr, nullptr, &huge}), "Resize",
              "too large");
}

}  // namespace
}  // namespace kiln::interp

namespace kiln::interp {
namespace {

// A node may omit trailing optional outputs the kernel computes anyway:
// training-mode BatchNormalization declaring only Y.
TEST(InterpreterOutputs, TrailingOptionalOutputsMayBeOmitted) {
  ir::Graph g("bn");
  g.set_opset(15);
  ir::ValueId x = g.AddValue("x", ir::DType::kF32, {2, 1});
  ir::ValueId scale = g.AddValue("scale", ir::DType::kF32, {1});
  ir::ValueId bias = g.AddValue("bias", ir::DType::kF32, {1});
  ir::ValueId mean = g.AddValue("mean", ir::DType::kF32, {1});
  ir::ValueId var = g.AddValue("var", ir::DType::kF32, {1});
  g.SetConstant(scale, ir::Tensor::FromVector<float>({1}, {1.0f}));
  g.SetConstant(bias, ir::Tensor::FromVector<float>({1}, {0.0f}));
  g.SetConstant(mean, ir::Tensor::FromVector<float>({1}, {0.0f}));
  g.SetConstant(var, ir::Tensor::FromVector<float>({1}, {1.0f}));
  ir::ValueId y = g.AddValue("y", ir::DType::kF32, {2, 1});
  g.AddInput(x);
  g.AddNode("BatchNormalization", {x, scale, bias, mean, var}, {y},
            {{"training_mode", int64_t{1}}, {"epsilon", 0.0f}}, "bn0");
  g.AddOutput(y);
  // Batch statistics of [1, 3]: mean 2, variance 1 -> y = x - 2.
  absl::StatusOr<std::vector<ir::Tensor>> out =
      interp::Run(g, {ir::Tensor::FromVector<float>({2, 1}, {1.0f, 3.0f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], -1.0f);
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[1], 1.0f);
}

}  // namespace
}  // namespace kiln::interp
