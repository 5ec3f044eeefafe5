// Tests of the reference reduction-family kernels on one-node graphs. Every
// expected value is worked out by hand (or in closed form) in the comments.
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

constexpr double kInf = std::numeric_limits<double>::infinity();

// Runs one node `op` named "n0" on `inputs` (nullopt = omitted optional
// input); its outputs are declared with `out_dtypes`.
absl::StatusOr<std::vector<Tensor>> RunOp(
    const std::string& op, const std::vector<std::optional<Tensor>>& inputs,
    const std::vector<DType>& out_dtypes, AttributeMap attrs = {},
    int64_t opset = 18) {
  ir::Graph g;
  g.set_opset(opset);
  std::vector<ir::ValueId> ins, outs;
  std::vector<Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      ins.push_back(ir::kNoValue);
      continue;
    }
    ir::ValueId v = g.AddValue("in" + std::to_string(i), inputs[i]->dtype(),
                               inputs[i]->shape());
    g.AddInput(v);
    ins.push_back(v);
    feeds.push_back(*inputs[i]);
  }
  for (size_t i = 0; i < out_dtypes.size(); ++i) {
    ir::ValueId v = g.AddUnshapedValue("out" + std::to_string(i), out_dtypes[i]);
    g.AddOutput(v);
    outs.push_back(v);
  }
  g.AddNode(op, ins, outs, std::move(attrs), "n0");
  return Run(g, feeds);
}

Tensor F32(Shape shape, const std::vector<float>& v) {
  return Tensor::FromVector<float>(std::move(shape), v);
}
Tensor I64(Shape shape, const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(std::move(shape), v);
}
Tensor I32(Shape shape, const std::vector<int32_t>& v) {
  return Tensor::FromVector<int32_t>(std::move(shape), v);
}
Tensor Axes(const std::vector<int64_t>& v) {
  return I64({static_cast<int64_t>(v.size())}, v);
}

// x[i][j][k] = 12i + 4j + k + 1: the numbers 1..24 in a 2x3x4 tensor.
Tensor Iota234() {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = i + 1;
  return F32({2, 3, 4}, v);
}

void ExpectValues(const Tensor& t, const Shape& shape,
                  const std::vector<double>& expected, double tol = 1e-6) {
  ASSERT_EQ(t.shape(), shape) << t.TypeString();
  ASSERT_EQ(t.num_elements(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double got = t.GetAsDouble(i);
    if (std::isinf(expected[i])) {
      EXPECT_EQ(got, expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got, expected[i], tol) << "element " << i;
    }
  }
}

// ---- Reduce*.

TEST(ReduceSum, AxesInputKeepdims) {
  // Summing over j: (12i+k+1) + (12i+k+5) + (12i+k+9) = 36i + 3k + 15.
  auto r = RunOp("ReduceSum", {Iota234(), Axes({1})}, {DType::kF32},
                 {{"keepdims", int64_t{1}}}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 1, 4}, {15, 18, 21, 24, 51, 54, 57, 60});
}

TEST(ReduceSum, NegativeAxisAttributeBeforeOpset13NoKeepdims) {
  // Row (i,j) holds s..s+3 with s = 12i+4j+1, summing to 4s+6.
  auto r = RunOp("ReduceSum", {Iota234()}, {DType::kF32},
                 {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{0}}},
                 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 3}, {10, 26, 42, 58, 74, 90});
}

TEST(ReduceSum, NoAxesReducesAll) {
  auto r = RunOp("ReduceSum", {Iota234()}, {DType::kF32}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 1, 1}, {300});  // 24 * 25 / 2
}

TEST(ReduceSum, EmptyAxesWithNoopIsIdentity) {
  auto r = RunOp("ReduceSum", {Iota234(), Axes({})}, {DType::kF32},
                 {{"noop_with_empty_axes", int64_t{1}}}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<double> same(24);
  for (int i = 0; i < 24; ++i) same[i] = i + 1;
  ExpectValues((*r)[0], {2, 3, 4}, same);
}

TEST(ReduceSum, Int64AndF64) {
  auto r = RunOp("ReduceSum", {I64({2, 3}, {1, 2, 3, 4, 5, 6}), Axes({0})},
                 {DType::kI64}, {{"keepdims", int64_t{0}}}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {3}, {5, 7, 9});
  Tensor d = Tensor::FromVector<double>({2, 2}, {0.5, 0.25, 1, 2});
  r = RunOp("ReduceSum", {d, Axes({1})}, {DType::kF64}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 1}, {0.75, 3});
}

// Long sums (decision 0050) against sums worked out here. 2^24 + 2 ones:
// a plain f32 accumulator stops at 2^24. Random values in [0, 1): the
// expected sum in long double. f64: 1 then 2^20 terms of 2^-53 sum to
// exactly 1 + 2^-33, but a running double sum never leaves 1 (each term
// is half an ulp of 1 and rounds away); pairwise sums keep all but the
// terms of the first run of 128.
TEST(ReduceSum, LongSumsStayAccurate) {
  const int64_t n = (int64_t{1} << 24) + 2;
  Tensor ones = F32({n}, std::vector<float>(n, 1.0f));
  for (const char* op : {"ReduceSum", "ReduceSumSquare", "ReduceL1"}) {
    auto r = RunOp(op, {ones}, {DType::kF32}, {{"keepdims", int64_t{0}}});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].GetAsDouble(0), static_cast<double>(n)) << op;  // exact in f32
  }
  auto mean = RunOp("ReduceMean", {ones}, {DType::kF32}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->at(0).GetAsDouble(0), 1.0);

  std::vector<float> v(n);
  uint64_t state = 0x9e3779b97f4a7c15u;
  long double exact = 0;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    v[i] = static_cast<float>(state >> 40) * 0x1p-24f;  // [0, 1)
    exact += v[i];
  }
  auto sum = RunOp("ReduceSum", {F32({n}, v)}, {DType::kF32}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(sum.ok()) << sum.status();
  // The output is the f32 nearest the sum: within half an f32 ulp.
  const double want = static_cast<double>(exact);
  EXPECT_NEAR(sum->at(0).GetAsDouble(0), want, want * 0x1p-24);

  const int64_t m = (int64_t{1} << 20) + 1;
  std::vector<double> d(m, 0x1p-53);
  d[0] = 1;
  auto dsum = RunOp("ReduceSum", {Tensor::FromVector<double>({m}, d)}, {DType::kF64},
                    {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(dsum.ok()) << dsum.status();
  EXPECT_NEAR(dsum->at(0).GetAsDouble(0), 1 + 0x1p-33, 0x1p-40);
}

TEST(ReduceMean, AttributeAtOpset13AxesInputAtOpset18) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = RunOp("ReduceMean", {x}, {DType::kF32},
                 {{"axes", std::vector<int64_t>{1}}}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 1}, {2, 5});
  r = RunOp("ReduceMean", {x, Axes({0})}, {DType::kF32},
            {{"keepdims", int64_t{0}}}, 18);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {3}, {2.5, 3.5, 4.5});
}

TEST(ReduceMean, AxesInOldPlaceIsAnError) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = RunOp("ReduceMean", {x}, {DType::kF32},
                 {{"axes", std::vector<int64_t>{1}}}, 18);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("axes is an input"));
  r = RunOp("ReduceMean", {x, Axes({1})}, {DType::kF32}, {}, 13);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("axes is an attribute"));
}

TEST(ReduceMean, Int32Truncates) {
  // Row means 3/2 = 1.5 -> 1 and 8/2 = 4.
  auto r = RunOp("ReduceMean", {I32({2, 2}, {1, 2, 3, 5}), Axes({1})},
                 {DType::kI32}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {1, 4});
}

TEST(ReduceMaxMin, FloatAndInt) {
  Tensor x = F32({2, 3}, {1, 5, 3, 4, 2, 6});
  auto r = RunOp("ReduceMax", {x, Axes({0})}, {DType::kF32});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 3}, {4, 5, 6});
  r = RunOp("ReduceMin", {x, Axes({-1})}, {DType::kF32},
            {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {1, 2});
  r = RunOp("ReduceMin", {I32({2, 3}, {1, 5, 3, 4, 2, 6}), Axes({0})},
            {DType::kI32}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {3}, {1, 2, 3});
}

TEST(ReduceProd, FloatAndInt64) {
  auto r = RunOp("ReduceProd", {F32({2, 3}, {1, 2, 3, 4, 5, 6})},
                 {DType::kF32}, {{"axes", std::vector<int64_t>{1}}}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 1}, {6, 120});
  r = RunOp("ReduceProd", {I64({2, 3}, {1, 2, 3, 4, 5, 6})}, {DType::kI64},
            {{"keepdims", int64_t{0}}}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {}, {720});
}

TEST(ReduceNorms, L1L2SumSquare) {
  auto r = RunOp("ReduceL1", {F32({2, 3}, {1, -2, 3, -4, 5, -6}), Axes({1})},
                 {DType::kF32});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 1}, {6, 15});
  r = RunOp("ReduceL2", {F32({2, 2}, {3, 4, 5, 12}), Axes({1})}, {DType::kF32},
            {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {5, 13});
  r = RunOp("ReduceSumSquare", {F32({2, 2}, {1, 2, 3, 4}), Axes({-1})},
            {DType::kF32}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {5, 25});
}

TEST(ReduceLogs, LogSumAndStableLogSumExp) {
  auto r = RunOp("ReduceLogSum", {F32({2, 2}, {1, 2, 3, 4}), Axes({1})},
                 {DType::kF32}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {std::log(3.0), std::log(7.0)});
  // log(e^0 + e^ln3) = log 4; log(2 e^1000) = 1000 + log 2 without overflow.
  r = RunOp("ReduceLogSumExp",
            {F32({2, 2}, {0, static_cast<float>(std::log(3.0)), 1000, 1000}),
             Axes({1})},
            {DType::kF32}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {std::log(4.0), 1000 + std::log(2.0)}, 1e-4);
}

// ONNX's test_reduce_*_empty_set: reducing a zero-size dim gives each
// reduction's identity.
TEST(Reduce, EmptySetGivesIdentity) {
  const Tensor x(DType::kF32, {2, 0, 4});
  const std::vector<std::pair<std::string, double>> cases = {
      {"ReduceSum", 0},        {"ReduceProd", 1},     {"ReduceMax", -kInf},
      {"ReduceMin", kInf},     {"ReduceL1", 0},       {"ReduceL2", 0},
      {"ReduceSumSquare", 0},  {"ReduceLogSum", -kInf},
      {"ReduceLogSumExp", -kInf}};
  for (const auto& [op, identity] : cases) {
    SCOPED_TRACE(op);
    auto r = RunOp(op, {x, Axes({1})}, {DType::kF32},
                   {{"keepdims", int64_t{1}}}, 18);
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectValues((*r)[0], {2, 1, 4}, std::vector<double>(8, identity));
  }
}

// A zero-size tensor may have dims whose product overflows int64 (it has no
// elements): reducing it all gives the identity without overflowing its
// strides.
TEST(Reduce, EmptySetWithHugeDims) {
  const Tensor x(DType::kF32, {2, 0, int64_t{1} << 40, int64_t{1} << 40});
  auto r = RunOp("ReduceMax", {x}, {DType::kF32}, {{"keepdims", int64_t{1}}}, 18);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 1, 1, 1}, {-kInf});
}

TEST(Reduce, BadAxesNameTheNode) {
  auto r = RunOp("ReduceSum", {Iota234(), Axes({3})}, {DType::kF32}, {}, 13);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'n0'"));
  EXPECT_THAT(r.status().message(), HasSubstr("ReduceSum"));
  EXPECT_THAT(r.status().message(), HasSubstr("axis 3 is out of range"));
  r = RunOp("ReduceMax", {Iota234(), Axes({1, -2})}, {DType::kF32});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("repeated"));
}

// ---- ArgMax / ArgMin.

TEST(ArgMax, KeepdimsAndSelectLastIndex) {
  // ONNX's example: [[2, 2], [3, 10]].
  Tensor x = F32({2, 2}, {2, 2, 3, 10});
  auto r = RunOp("ArgMax", {x}, {DType::kI64}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 1}, {0, 1});
  r = RunOp("ArgMax", {x}, {DType::kI64},
            {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 1}, {1, 1});
  // Default axis 0, no keepdims: column maxima are in row 1.
  r = RunOp("ArgMax", {x}, {DType::kI64}, {{"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {1, 1});
}

TEST(ArgMin, NegativeAxisAndLastIndexOnInts) {
  Tensor x = I32({4}, {5, 1, 7, 1});
  auto r = RunOp("ArgMin", {x}, {DType::kI64},
                 {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {}, {1});
  r = RunOp("ArgMin", {x}, {DType::kI64}, {{"select_last_index", int64_t{1}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1}, {3});
}

TEST(ArgMax, AxisOutOfRangeNamesTheNode) {
  auto r = RunOp("ArgMax", {Iota234()}, {DType::kI64}, {{"axis", int64_t{3}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'n0' (ArgMax)"));
}

// ---- Softmax family.

// x = [[[0, ln 3], [ln 2, ln 2]]], shape [1, 2, 2]: e^x = [[[1, 3], [2, 2]]].
Tensor SoftmaxInput() {
  const float ln2 = std::log(2.0), ln3 = std::log(3.0);
  return F32({1, 2, 2}, {0, ln3, ln2, ln2});
}

TEST(Softmax, Opset13NormalizesAlongOneAxis) {
  // Default axis -1: [1, 3] / 4 and [2, 2] / 4.
  auto r = RunOp("Softmax", {SoftmaxInput()}, {DType::kF32}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2}, {0.25, 0.75, 0.5, 0.5});
  // axis 1: per column, [1, 2] / 3 and [3, 2] / 5.
  r = RunOp("Softmax", {SoftmaxInput()}, {DType::kF32}, {{"axis", int64_t{1}}},
            13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2}, {1.0 / 3, 0.6, 2.0 / 3, 0.4});
}

TEST(Softmax, Opset11CoercesTo2D) {
  // Default axis 1 flattens [1, 2, 2] to [1, 4]: [1, 3, 2, 2] / 8.
  auto r = RunOp("Softmax", {SoftmaxInput()}, {DType::kF32}, {}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2}, {0.125, 0.375, 0.25, 0.25});
  // axis 2 is the last dim: same as opset 13's default.
  r = RunOp("Softmax", {SoftmaxInput()}, {DType::kF32}, {{"axis", int64_t{2}}},
            11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2}, {0.25, 0.75, 0.5, 0.5});
}

TEST(Softmax, LargeValuesAndF16) {
  auto r = RunOp("Softmax", {F32({2}, {1000, 1000})}, {DType::kF32});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {0.5, 0.5});
  Tensor h(DType::kF16, {2});
  h.data<ir::Float16>()[0] = ir::FloatToHalf(0);
  h.data<ir::Float16>()[1] = ir::FloatToHalf(std::log(3.0f));
  r = RunOp("Softmax", {h}, {DType::kF16});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {0.25, 0.75}, 1e-3);
}

TEST(LogSoftmax, Opset13And11) {
  auto r = RunOp("LogSoftmax", {SoftmaxInput()}, {DType::kF32}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2},
               {std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)});
  r = RunOp("LogSoftmax", {SoftmaxInput()}, {DType::kF32}, {}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2},
               {std::log(0.125), std::log(0.375), std::log(0.25),
                std::log(0.25)});
}

TEST(Hardmax, FirstMaximumWinsOpset13And11) {
  // Rows [0, ln3] and [ln2, ln2] (a tie: the first wins).
  auto r = RunOp("Hardmax", {SoftmaxInput()}, {DType::kF32}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2}, {0, 1, 1, 0});
  // Opset 11 flattens to one row of 4: ln 3 is the maximum.
  r = RunOp("Hardmax", {SoftmaxInput()}, {DType::kF32}, {}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2}, {0, 1, 0, 0});
}

TEST(Softmax, Errors) {
  auto r = RunOp("Softmax", {SoftmaxInput()}, {DType::kF32},
                 {{"axis", int64_t{3}}}, 13);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'n0' (Softmax)"));
  r = RunOp("Softmax", {I32({2}, {1, 2})}, {DType::kI32});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Normalizations.

TEST(LayerNormalization, LastAxisWithStats) {
  // Row [1,2,3]: mean 2, var 2/3; row [2,4,6]: mean 4, var 8/3. Both
  // normalize to [-1, 0, 1] * sqrt(3/2); y = xhat * [1, 1, 2] + [0, 1, 0].
  const double s = std::sqrt(1.5);
  auto r = RunOp("LayerNormalization",
                 {F32({2, 3}, {1, 2, 3, 2, 4, 6}), F32({3}, {1, 1, 2}),
                  F32({3}, {0, 1, 0})},
                 {DType::kF32, DType::kF32, DType::kF32},
                 {{"epsilon", 0.0f}}, 17);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 3}, {-s, 1, 2 * s, -s, 1, 2 * s});
  ExpectValues((*r)[1], {2, 1}, {2, 4});
  ExpectValues((*r)[2], {2, 1}, {std::sqrt(1.5), std::sqrt(3.0 / 8)});
}

TEST(LayerNormalization, EpsilonAndAxis0WithoutBias) {
  // epsilon 1 on [1,2,3]: 1/sqrt(2/3 + 1) = sqrt(3/5).
  auto r = RunOp("LayerNormalization", {F32({1, 3}, {1, 2, 3}), F32({3}, {1, 1, 1})},
                 {DType::kF32}, {{"epsilon", 1.0f}}, 17);
  ASSERT_TRUE(r.ok()) << r.status();
  const double k = std::sqrt(0.6);
  ExpectValues((*r)[0], {1, 3}, {-k, 0, k});
  // axis 0 over [[1,2,3],[2,4,6]]: mean 3, deviations -2,-1,0,-1,1,3, var
  // 16/6, inv std sqrt(3/8).
  const double inv = std::sqrt(3.0 / 8);
  r = RunOp("LayerNormalization",
            {F32({2, 3}, {1, 2, 3, 2, 4, 6}), F32({2, 3}, {1, 1, 1, 1, 1, 1})},
            {DType::kF32, DType::kF32}, {{"axis", int64_t{0}}, {"epsilon", 0.0f}},
            17);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 3},
               {-2 * inv, -inv, 0, -inv, inv, 3 * inv});
  ExpectValues((*r)[1], {1, 1}, {3});
}

TEST(LayerNormalization, Errors) {
  auto r = RunOp("LayerNormalization", {F32({2, 3}, {}), F32({2}, {1, 1})},
                 {DType::kF32}, {}, 17);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("does not broadcast"));
  r = RunOp("LayerNormalization", {F32({2, 3}, {}), F32({3}, {1, 1, 1})},
            {DType::kF32}, {{"axis", int64_t{-3}}}, 17);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'n0' (LayerNormalization)"));
}

TEST(InstanceNormalization, PerChannel) {
  // Channel 0 [1, 3]: mean 2, var 1 -> [-1, 1] * 2 + 0.5. Channel 1 [0, 4]:
  // mean 2, var 4 -> [-1, 1].
  auto r = RunOp("InstanceNormalization",
                 {F32({1, 2, 2}, {1, 3, 0, 4}), F32({2}, {2, 1}),
                  F32({2}, {0.5, 0})},
                 {DType::kF32}, {{"epsilon", 0.0f}}, 6);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1, 2, 2}, {-1.5, 2.5, -1, 1});
  r = RunOp("InstanceNormalization",
            {F32({1, 2, 2}, {}), F32({3}, {}), F32({2}, {})}, {DType::kF32});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LpNormalization, P2AndP1) {
  auto r = RunOp("LpNormalization", {F32({2, 2}, {3, 4, 6, 8})}, {DType::kF32});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 2}, {0.6, 0.8, 0.6, 0.8});
  // p=1 along axis 0: columns [3, 6] and [4, 8] both become [1/3, 2/3].
  r = RunOp("LpNormalization", {F32({2, 2}, {3, 4, 6, 8})}, {DType::kF32},
            {{"axis", int64_t{0}}, {"p", int64_t{1}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 2}, {1.0 / 3, 1.0 / 3, 2.0 / 3, 2.0 / 3});
  r = RunOp("LpNormalization", {F32({2}, {1, 2})}, {DType::kF32},
            {{"p", int64_t{3}}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MeanVarianceNormalization, DefaultAxesPerChannel) {
  // Channel 0 [1,3,5,7]: mean 4, var 5. Channel 1 [0,0,2,2]: mean 1, var 1.
  auto r = RunOp("MeanVarianceNormalization",
                 {F32({1, 2, 2, 2}, {1, 3, 5, 7, 0, 0, 2, 2})}, {DType::kF32},
                 {}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  const double s5 = std::sqrt(5.0);
  ExpectValues((*r)[0], {1, 2, 2, 2},
               {-3 / s5, -1 / s5, 1 / s5, 3 / s5, -1, -1, 1, 1});
}

// ---- CumSum and TopK.

TEST(CumSum, ExclusiveAndReverse) {
  Tensor x = F32({5}, {1, 2, 3, 4, 5});
  Tensor axis = Tensor::Scalar<int64_t>(0);
  auto r = RunOp("CumSum", {x, axis}, {DType::kF32}, {}, 14);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {5}, {1, 3, 6, 10, 15});
  r = RunOp("CumSum", {x, axis}, {DType::kF32}, {{"exclusive", int64_t{1}}}, 14);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {5}, {0, 1, 3, 6, 10});
  r = RunOp("CumSum", {x, axis}, {DType::kF32}, {{"reverse", int64_t{1}}}, 14);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {5}, {15, 14, 12, 9, 5});
  r = RunOp("CumSum", {x, axis}, {DType::kF32},
            {{"reverse", int64_t{1}}, {"exclusive", int64_t{1}}}, 14);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {5}, {14, 12, 9, 5, 0});
}

TEST(CumSum, IntegersAlongAxes) {
  auto r = RunOp("CumSum", {I32({2, 3}, {1, 2, 3, 4, 5, 6}), I32({}, {-1})},
                 {DType::kI32}, {}, 14);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 3}, {1, 3, 6, 4, 9, 15});
  r = RunOp("CumSum", {I64({2, 3}, {1, 2, 3, 4, 5, 6}), I64({1}, {0})},
            {DType::kI64}, {}, 14);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 3}, {1, 2, 3, 5, 7, 9});
  r = RunOp("CumSum", {I64({2, 3}, {}), I64({1}, {2})}, {DType::kI64}, {}, 14);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'n0' (CumSum)"));
}

TEST(TopK, TiesKeepLowerIndexFirst) {
  Tensor x = F32({5}, {3, 1, 3, 2, 3});
  auto r = RunOp("TopK", {x, I64({1}, {2})}, {DType::kF32, DType::kI64}, {}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2}, {3, 3});
  ExpectValues((*r)[1], {2}, {0, 2});
  r = RunOp("TopK", {x, I64({1}, {3})}, {DType::kF32, DType::kI64},
            {{"largest", int64_t{0}}}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {3}, {1, 2, 3});
  ExpectValues((*r)[1], {3}, {1, 3, 0});
}

TEST(TopK, AxisZeroIntsAndOpset9Attribute) {
  // Columns [4, 1, 3] and [2, 5, 2]; top 2 along axis 0.
  auto r = RunOp("TopK", {I32({3, 2}, {4, 2, 1, 5, 3, 2}), I64({1}, {2})},
                 {DType::kI32, DType::kI64}, {{"axis", int64_t{0}}}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {2, 2}, {4, 5, 3, 2});
  ExpectValues((*r)[1], {2, 2}, {0, 1, 2, 0});
  r = RunOp("TopK", {F32({4}, {1, 4, 2, 3})}, {DType::kF32, DType::kI64},
            {{"k", int64_t{1}}}, 9);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValues((*r)[0], {1}, {4});
  ExpectValues((*r)[1], {1}, {1});
}

TEST(TopK, KOutOfRange) {
  auto r = RunOp("TopK", {F32({3}, {1, 2, 3}), I64({1}, {4})},
                 {DType::kF32, DType::kI64}, {}, 11);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'n0' (TopK)"));
}

}  // namespace
}  // namespace kiln::interp
