// Tests for the core graph IR: dtypes, tensors, shapes, graph construction.
#include "ir/graph/graph.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace kiln::ir {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64,
                  DType::kI32, DType::kI8, DType::kU8, DType::kBool}) {
    EXPECT_EQ(DTypeFromName(DTypeName(d)), d);
  }
  EXPECT_FALSE(DTypeFromName("f128").has_value());
}

TEST(DType, HalfConversion) {
  // Exact values from the IEEE 754 binary16 definition.
  EXPECT_EQ(FloatToHalf(1.0f).bits, 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f).bits, 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f).bits, 0x7bff);
  EXPECT_EQ(FloatToHalf(1e6f).bits, 0x7c00);                 // overflow
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)).bits, 0x0001);  // min subnormal
  EXPECT_EQ(HalfToFloat(Float16{0x3555}), 0.333251953125f);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  // Every finite half survives a round trip through float.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    Float16 h{static_cast<uint16_t>(b)};
    if (((b >> 10) & 0x1f) == 0x1f) continue;
    EXPECT_EQ(FloatToHalf(HalfToFloat(h)).bits, h.bits) << b;
  }
}

// The nearest bf16 to f by a different route: the two bf16 neighbours of f
// (truncated and one ulp up) compared in double, ties to the even one.
uint16_t NearestBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint16_t lo = static_cast<uint16_t>(bits >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);  // next magnitude up
  const double a = std::fabs(static_cast<double>(BFloat16ToFloat(BFloat16{lo})));
  // Above the largest bf16 the next step up would be 2^128 (rounds to inf).
  const double b = (hi & 0x7f80) == 0x7f80
                       ? std::ldexp(1.0, 128)
                       : std::fabs(static_cast<double>(BFloat16ToFloat(BFloat16{hi})));
  const double x = std::fabs(static_cast<double>(f));
  if (x - a < b - x) return lo;
  if (x - a > b - x) return hi;
  return (lo & 1) == 0 ? lo : hi;
}

TEST(DType, BFloat16Conversion) {
  EXPECT_EQ(FloatToBFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-2.0f).bits, 0xc000);
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f).bits, 0x3f80);      // tie: down to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * 0x1p-8f).bits, 0x3f82);  // tie: up to even
  EXPECT_EQ(FloatToBFloat16(3.4028235e38f).bits, 0x7f80);       // f32 max: inf
  EXPECT_EQ(FloatToBFloat16(-INFINITY).bits, 0xff80);
  EXPECT_EQ(FloatToBFloat16(1e-40f).bits, 0x0001);  // subnormal (0x000116c2)
  EXPECT_EQ(BFloat16ToFloat(BFloat16{0x4049}), 3.140625f);
  // NaN stays NaN: quieted, sign and top payload bits kept.
  uint32_t snan = 0x7f800001u;
  float f;
  std::memcpy(&f, &snan, sizeof(f));
  EXPECT_EQ(FloatToBFloat16(f).bits, 0x7fc0);
  EXPECT_EQ(FloatToBFloat16(-NAN).bits & 0xffc0, 0xffc0);
  // Every bf16 survives a round trip through float (NaNs as NaNs).
  for (uint32_t b = 0; b < 0x10000; ++b) {
    BFloat16 h{static_cast<uint16_t>(b)};
    const float v = BFloat16ToFloat(h);
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(v)))) << b;
    } else {
      EXPECT_EQ(FloatToBFloat16(v).bits, h.bits) << b;
    }
  }
  // Finite floats round to the nearest bf16, ties to even: every 4099th
  // bit pattern (all exponents, mantissa bits below and above the cut).
  int mismatches = 0;
  for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
    const uint32_t bits = static_cast<uint32_t>(u);
    std::memcpy(&f, &bits, sizeof(f));
    if (!std::isfinite(f)) continue;
    if (FloatToBFloat16(f).bits != NearestBf16(f)) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Shape, Broadcast) {
  EXPECT_EQ(*BroadcastShapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(*BroadcastShapes({}, {5}), (Shape{5}));
  EXPECT_FALSE(BroadcastShapes({2, 3}, {4}).ok());
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, kDynamicDim}), -1);
  EXPECT_EQ(ShapeToString({1, kDynamicDim}), "[1,?]");
  EXPECT_EQ(RowMajorStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  // No elements: where the suffix product overflows, the strides are 0.
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(RowMajorStrides({2, 0, big, big}),
            (std::vector<int64_t>{0, 0, big, 1}));
  EXPECT_EQ(RowMajorStrides({3, 0, 5}), (std::vector<int64_t>{0, 5, 1}));
}

TEST(Tensor, StorageAndCopy) {
  Tensor t(DType::kF32, {2, 3});
  EXPECT_EQ(t.num_elements(), 6);
  EXPECT_EQ(t.byte_size(), 24u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  EXPECT_EQ(t.data<float>()[5], 0.0f);
  t.data<float>()[5] = 2.5f;
  Tensor c = t;
  c.data<float>()[5] = 1.0f;
  EXPECT_EQ(t.data<float>()[5], 2.5f);
  EXPECT_EQ(t.TypeString(), "f32[2,3]");
  auto r = t.Reshaped({3, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->GetAsDouble(5), 2.5);
  EXPECT_FALSE(t.Reshaped({4}).ok());
  EXPECT_EQ(Tensor::Scalar<int64_t>(-3).GetAsInt64(0), -3);
  Tensor empty(DType::kI64, {0, 4});
  EXPECT_EQ(empty.num_elements(), 0);
  EXPECT_NE(empty.raw_data(), nullptr);
}

TEST(Tensor, BorrowAliasesTheCallersBytes) {
  std::vector<float> storage = {1, 2, 3, 4, 5, 6};
  Tensor b = Tensor::Borrow(DType::kF32, {2, 3}, storage.data());
  EXPECT_EQ(b.raw_data(), storage.data());
  EXPECT_EQ(b.num_elements(), 6);
  EXPECT_EQ(b.TypeString(), "f32[2,3]");
  storage[4] = 9;
  EXPECT_EQ(b.data<float>()[4], 9.0f);
  // Copies are deep: the copy owns its bytes.
  Tensor c = b;
  EXPECT_NE(c.raw_data(), storage.data());
  EXPECT_EQ(c.data<float>()[4], 9.0f);
  storage[0] = 7;
  EXPECT_EQ(c.data<float>()[0], 1.0f);
}

TEST(Graph, BuildAndFind) {
  Graph g("m");
  ValueId x = g.AddValue("x", DType::kF32, {1, 8});
  ValueId w = g.AddValue("w", DType::kF32, {8});
  g.SetConstant(w, Tensor(DType::kF32, {8}));
  ValueId y = g.AddValue("y", DType::kF32, {1, 8});
  g.AddInput(x);
  Node& n = g.AddNode("Add", {x, w}, {y}, {{"alpha", 1.5f}}, "add0");
  g.AddOutput(y);
  EXPECT_EQ(*g.FindValue("w"), w);
  EXPECT_FALSE(g.FindValue("nope").has_value());
  EXPECT_TRUE(g.IsConstant(w));
  EXPECT_FALSE(g.IsConstant(x));
  EXPECT_EQ(*n.Attr<float>("alpha"), 1.5f);
  EXPECT_FALSE(n.Attr<int64_t>("alpha").ok());
  EXPECT_EQ(*n.AttrOr<int64_t>("axis", 3), 3);
  absl::Status missing = n.Attr<int64_t>("axis").status();
  EXPECT_NE(missing.message().find("node 'add0' (Add)"), std::string::npos);
}

}  // namespace
}  // namespace kiln::ir
