// Tests for interp/compare.h.
#include "interp/compare.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kiln::interp {
namespace {

using ir::Tensor;

TEST(CompareTensors, WithinAndOutsideTolerance) {
  Tensor e = Tensor::FromVector<float>({3}, {1.0f, -2.0f, 100.0f});
  Tensor a = Tensor::FromVector<float>({3}, {1.0005f, -2.0f, 100.05f});
  CompareResult r = CompareTensors(a, e);  // rtol 1e-3: 1e-3 and 0.1 allowed
  EXPECT_TRUE(r.ok) << r.message;
  Tensor b = Tensor::FromVector<float>({3}, {1.002f, -2.0f, 100.0f});
  r = CompareTensors(b, e);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 1);
  EXPECT_EQ(r.first_mismatch, 0);
  EXPECT_NEAR(r.max_abs_error, 0.002, 1e-6);
  EXPECT_NEAR(r.rel_to_max, 0.002 / 100.0, 1e-8);
}

// Logits-like output (max|ref| 500): an error of 6e-4 near zero is 1.2e-6
// of the output's scale. The plain rule (atol 1e-5) fails it; atol scaled
// by max(1, max|ref|) = 500 allows 5e-3 there. A unit-scale output keeps
// the plain rule.
TEST(CompareTensors, AtolScaledByOutputMagnitude) {
  Tolerance plain;
  plain.rtol = 1e-3;
  plain.atol = 1e-5;
  Tolerance scaled = plain;
  scaled.atol_scaled = true;
  Tensor e = Tensor::FromVector<float>({4}, {500.0f, 0.001f, -300.0f, 0.0f});
  Tensor a = Tensor::FromVector<float>({4}, {500.0f, 0.0016f, -300.0f, -0.0002f});
  CompareResult r = CompareTensors(a, e, plain);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 2);
  EXPECT_EQ(r.first_mismatch, 1);
  EXPECT_EQ(r.worst_mismatch, 1);  // 6e-4 / 1.1e-5 beats 2e-4 / 1e-5
  EXPECT_DOUBLE_EQ(r.atol_used, 1e-5);
  r = CompareTensors(a, e, scaled);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_DOUBLE_EQ(r.atol_used, 1e-5 * 500.0);
  // 0.01 near zero is 2e-5 of the scale: outside 5e-3 + 1e-3 * 0.
  Tensor far = Tensor::FromVector<float>({4}, {500.0f, 0.001f, -300.0f, 0.01f});
  r = CompareTensors(far, e, scaled);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst_mismatch, 3);
  // Probabilities: max|ref| < 1, so atol stays 1e-5.
  Tensor pe = Tensor::FromVector<float>({2}, {0.5f, 0.001f});
  Tensor pa = Tensor::FromVector<float>({2}, {0.5f, 0.0011f});
  EXPECT_FALSE(CompareTensors(pa, pe, scaled).ok);
  EXPECT_DOUBLE_EQ(CompareTensors(pa, pe, scaled).atol_used, 1e-5);
}

TEST(CompareTensors, NanAndInf) {
  Tensor e = Tensor::FromVector<float>({2}, {NAN, INFINITY});
  EXPECT_TRUE(CompareTensors(Tensor::FromVector<float>({2}, {NAN, INFINITY}), e).ok);
  EXPECT_FALSE(CompareTensors(Tensor::FromVector<float>({2}, {0.0f, INFINITY}), e).ok);
  EXPECT_FALSE(CompareTensors(Tensor::FromVector<float>({2}, {NAN, -INFINITY}), e).ok);
}

TEST(CompareTensors, IntegersExactAndMetadata) {
  Tensor e = Tensor::FromVector<int64_t>({2}, {5, 7});
  EXPECT_TRUE(CompareTensors(Tensor::FromVector<int64_t>({2}, {5, 7}), e).ok);
  EXPECT_FALSE(CompareTensors(Tensor::FromVector<int64_t>({2}, {5, 8}), e).ok);
  CompareResult shape = CompareTensors(Tensor::FromVector<int64_t>({1, 2}, {5, 7}), e);
  EXPECT_FALSE(shape.ok);
  EXPECT_NE(shape.message.find("shape [1,2], expected [2]"), std::string::npos);
  EXPECT_FALSE(shape.shape_match);
  CompareResult dtype = CompareTensors(Tensor::FromVector<int32_t>({2}, {5, 7}), e);
  EXPECT_FALSE(dtype.ok);
  EXPECT_NE(dtype.message.find("dtype i32"), std::string::npos);
}

TEST(CompareTensors, NormWiseMode) {
  // Errors of 0.01 and 0.012 on values near zero fail per element but are
  // about 1% of the output's scale (max |ref| = 1).
  Tensor e = Tensor::FromVector<float>({3}, {1.0f, 0.0f, 1e-4f});
  Tensor a = Tensor::FromVector<float>({3}, {1.0f, 0.01f, 0.0121f});
  EXPECT_FALSE(CompareTensors(a, e).ok);
  Tolerance norm;
  norm.max_rel = 0.02;
  CompareResult r = CompareTensors(a, e, norm);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_NEAR(r.rel_to_max, 0.012, 1e-6);
  EXPECT_EQ(r.max_abs_index, 2);
  norm.max_rel = 0.005;
  EXPECT_FALSE(CompareTensors(a, e, norm).ok);
  EXPECT_EQ(DescribeTolerance(norm), "max|got-ref| <= 0.005 * max|ref| per output");
  EXPECT_EQ(DescribeTolerance(Tolerance{}), "|got-ref| <= 1e-07 + 0.001*|ref| per element");
}

}  // namespace
}  // namespace kiln::interp
