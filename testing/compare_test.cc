// Tests for testing/compare.h.
#include "testing/compare.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kiln::testing {
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
  EXPECT_NEAR(r.max_rel_error, 0.002 / 100.0, 1e-8);
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
  CompareResult dtype = CompareTensors(Tensor::FromVector<int32_t>({2}, {5, 7}), e);
  EXPECT_FALSE(dtype.ok);
  EXPECT_NE(dtype.message.find("dtype i32"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
