// Tests for the core graph IR: dtypes, tensors, shapes, graph construction.
#include "ir/graph/graph.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kiln::ir {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::kF32, DType::kF16, DType::kF64, DType::kI64,
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

TEST(Shape, Broadcast) {
  EXPECT_EQ(*BroadcastShapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(*BroadcastShapes({}, {5}), (Shape{5}));
  EXPECT_FALSE(BroadcastShapes({2, 3}, {4}).ok());
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, kDynamicDim}), -1);
  EXPECT_EQ(ShapeToString({1, kDynamicDim}), "[1,?]");
  EXPECT_EQ(RowMajorStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
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
