// Tests of the reference shape and data-movement kernels (ops_shape.cc):
// hand-computed cases, ONNX Operators.md examples, opset forms and errors.
#include <cstdint>
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
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

template <typename T>
Tensor T_(Shape shape, std::vector<T> values) {
  return Tensor::FromVector<T>(std::move(shape), values);
}
Tensor F(Shape shape, std::vector<float> v) { return T_<float>(shape, v); }
Tensor I(Shape shape, std::vector<int64_t> v) { return T_<int64_t>(shape, v); }
Tensor I1(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return I({n}, std::move(v));
}

// Runs a one-node graph named "n0" at `opset`. A nullopt input is omitted;
// `outs` lists the declared output dtypes.
absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op,
                                          const std::vector<std::optional<Tensor>>& inputs,
                                          const std::vector<DType>& outs, AttributeMap attrs = {},
                                          int64_t opset = 18, const RunOptions& options = {}) {
  ir::Graph g;
  g.set_opset(opset);
  std::vector<ir::ValueId> in_ids;
  std::vector<Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].has_value()) {
      in_ids.push_back(ir::kNoValue);
      continue;
    }
    ir::ValueId id = g.AddValue("in" + std::to_string(i), inputs[i]->dtype(),
                                inputs[i]->shape());
    g.AddInput(id);
    feeds.push_back(*inputs[i]);
    in_ids.push_back(id);
  }
  std::vector<ir::ValueId> out_ids;
  for (size_t i = 0; i < outs.size(); ++i) {
    ir::ValueId id = g.AddUnshapedValue("out" + std::to_string(i), outs[i]);
    g.AddOutput(id);
    out_ids.push_back(id);
  }
  g.AddNode(op, in_ids, out_ids, std::move(attrs), "n0");
  return Run(g, feeds, options);
}

// The single output of a one-node graph; fails the test on error.
Tensor Run1(const std::string& op,
            const std::vector<std::optional<Tensor>>& inputs, DType out,
            AttributeMap attrs = {}, int64_t opset = 18) {
  absl::StatusOr<std::vector<Tensor>> r =
      RunOp(op, inputs, {out}, std::move(attrs), opset);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || r->size() != 1) return Tensor();
  return (*r)[0];
}

// The error of a one-node graph; checks it is InvalidArgument naming n0.
std::string RunError(const std::string& op,
                     const std::vector<std::optional<Tensor>>& inputs,
                     DType out, AttributeMap attrs = {}, int64_t opset = 18) {
  absl::StatusOr<std::vector<Tensor>> r =
      RunOp(op, inputs, {out}, std::move(attrs), opset);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
      << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'n0'"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(op));
  return std::string(r.status().message());
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), ir::DTypeOf<T>());
  if (t.dtype() != ir::DTypeOf<T>()) return {};
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

template <typename T>
void Expect(const Tensor& t, const Shape& shape, const std::vector<T>& v) {
  EXPECT_EQ(t.shape(), shape) << t.TypeString();
  EXPECT_THAT(Values<T>(t), ElementsAreArray(v));
}

// ---- Flatten, Reshape, Squeeze, Unsqueeze.

TEST(FlattenTest, AxesIncludingNegativeAndZero) {
  Tensor x = F({2, 3, 4}, {});
  for (int i = 0; i < 24; ++i) x.data<float>()[i] = i;
  Tensor y = Run1("Flatten", {x}, DType::kF32);
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(y.data<float>()[23], 23.0f);
  EXPECT_EQ(Run1("Flatten", {x}, DType::kF32, {{"axis", int64_t{0}}}).shape(),
            (Shape{1, 24}));
  EXPECT_EQ(Run1("Flatten", {x}, DType::kF32, {{"axis", int64_t{-1}}}).shape(),
            (Shape{6, 4}));
  EXPECT_EQ(Run1("Flatten", {x}, DType::kF32, {{"axis", int64_t{3}}}).shape(),
            (Shape{24, 1}));
  EXPECT_THAT(
      RunError("Flatten", {x}, DType::kF32, {{"axis", int64_t{4}}}),
      HasSubstr("out of range"));
}

TEST(ReshapeTest, InfersMinusOneAndCopiesZero) {
  Tensor x = F({2, 3, 4}, {});
  for (int i = 0; i < 24; ++i) x.data<float>()[i] = i;
  Tensor y = Run1("Reshape", {x, I1({4, -1})}, DType::kF32);
  EXPECT_EQ(y.shape(), (Shape{4, 6}));
  EXPECT_EQ(y.data<float>()[7], 7.0f);
  EXPECT_EQ(Run1("Reshape", {x, I1({0, -1})}, DType::kF32).shape(),
            (Shape{2, 12}));
  EXPECT_EQ(Run1("Reshape", {x, I1({0, 0, 2, 2})}, DType::kF32).shape(),
            (Shape{2, 3, 2, 2}));
  // Opset 1-4 form: shape attribute.
  EXPECT_EQ(Run1("Reshape", {x}, DType::kF32,
                 {{"shape", std::vector<int64_t>{24}}}, 4)
                .shape(),
            (Shape{24}));
}

TEST(ReshapeTest, AllowZeroKeepsZeroDims) {
  Tensor empty = F({0, 3}, {});
  EXPECT_EQ(Run1("Reshape", {empty, I1({3, 0})}, DType::kF32,
                 {{"allowzero", int64_t{1}}})
                .shape(),
            (Shape{3, 0}));
  // Without allowzero, 0 copies input dim 1 (3): [3, 3] has 9 elements.
  EXPECT_THAT(RunError("Reshape", {empty, I1({3, 0})}, DType::kF32),
              HasSubstr("cannot reshape"));
}

TEST(ReshapeTest, Errors) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(RunError("Reshape", {x, I1({4, -1})}, DType::kF32),
              HasSubstr("cannot reshape"));
  EXPECT_THAT(RunError("Reshape", {x, I1({5})}, DType::kF32),
              HasSubstr("cannot reshape"));
  EXPECT_THAT(RunError("Reshape", {x, I1({-1, -1})}, DType::kF32),
              HasSubstr("more than one -1"));
  EXPECT_THAT(RunError("Reshape", {x, I1({-2, 3})}, DType::kF32),
              HasSubstr("invalid dim"));
  EXPECT_THAT(RunError("Reshape", {x, I1({1, 2, 3, 0})}, DType::kF32),
              HasSubstr("copies dim"));
  RunError("Reshape", {x, I1({int64_t{1} << 40, int64_t{1} << 40})},
           DType::kF32);
}

TEST(SqueezeTest, AttributeBeforeOpset13InputFrom13) {
  Tensor x = F({1, 3, 1, 2}, {1, 2, 3, 4, 5, 6});
  Expect<float>(Run1("Squeeze", {x}, DType::kF32,
                     {{"axes", std::vector<int64_t>{0}}}, 11),
                {3, 1, 2}, {1, 2, 3, 4, 5, 6});
  Expect<float>(Run1("Squeeze", {x, I1({-2})}, DType::kF32, {}, 13),
                {1, 3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Run1("Squeeze", {x}, DType::kF32, {}, 13).shape(), (Shape{3, 2}));
  EXPECT_THAT(RunError("Squeeze", {x, I1({1})}, DType::kF32, {}, 13),
              HasSubstr("not 1"));
  EXPECT_THAT(RunError("Squeeze", {x, I1({4})}, DType::kF32, {}, 13),
              HasSubstr("out of range"));
}

TEST(UnsqueezeTest, AttributeAtOpset11InputAtOpset13) {
  Tensor x = F({3, 2}, {1, 2, 3, 4, 5, 6});
  Expect<float>(Run1("Unsqueeze", {x}, DType::kF32,
                     {{"axes", std::vector<int64_t>{0, 3}}}, 11),
                {1, 3, 2, 1}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Run1("Unsqueeze", {x, I1({-1})}, DType::kF32, {}, 13).shape(),
            (Shape{3, 2, 1}));
  // Unsorted axes refer to the output rank.
  EXPECT_EQ(Run1("Unsqueeze", {x, I1({4, 0, 2})}, DType::kF32, {}, 13).shape(),
            (Shape{1, 3, 1, 2, 1}));
  EXPECT_THAT(RunError("Unsqueeze", {x}, DType::kF32, {}, 13),
              HasSubstr("axes"));
  EXPECT_THAT(RunError("Unsqueeze", {x, I1({1, 1})}, DType::kF32, {}, 13),
              HasSubstr("repeated"));
  EXPECT_THAT(RunError("Unsqueeze", {x, I1({3})}, DType::kF32, {}, 13),
              HasSubstr("out of range"));
}

// ---- Transpose, Concat, Split.

TEST(TransposeTest, DefaultReversesAndPerm) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  Expect<float>(Run1("Transpose", {x}, DType::kF32), {3, 2},
                {1, 4, 2, 5, 3, 6});
  Tensor x3 = I({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  // out[a][b][c] = x[b][c][a] with perm (2, 0, 1): x index 4b + 2c + a.
  Expect<int64_t>(Run1("Transpose", {x3}, DType::kI64,
                       {{"perm", std::vector<int64_t>{2, 0, 1}}}),
                  {2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7});
  EXPECT_THAT(RunError("Transpose", {x}, DType::kF32,
                       {{"perm", std::vector<int64_t>{0, 0}}}),
              HasSubstr("permutation"));
  EXPECT_THAT(RunError("Transpose", {x}, DType::kF32,
                       {{"perm", std::vector<int64_t>{0}}}),
              HasSubstr("rank"));
}

TEST(TransposeTest, OtherDTypes) {
  Tensor b = T_<bool>({2, 2}, {true, false, false, false});
  Expect<bool>(Run1("Transpose", {b}, DType::kBool), {2, 2},
               {true, false, false, false});
  Tensor b2 = T_<bool>({1, 2}, {false, true});
  Expect<bool>(Run1("Transpose", {b2}, DType::kBool), {2, 1}, {false, true});
  Tensor i8 = T_<int8_t>({2, 2}, {1, -2, 3, -4});
  Expect<int8_t>(Run1("Transpose", {i8}, DType::kI8), {2, 2}, {1, 3, -2, -4});
  Tensor h(DType::kF16, {1, 2});
  h.data<ir::Float16>()[0] = ir::FloatToHalf(1.5f);
  h.data<ir::Float16>()[1] = ir::FloatToHalf(-2.0f);
  Tensor ht = Run1("Transpose", {h}, DType::kF16);
  ASSERT_EQ(ht.dtype(), DType::kF16);
  EXPECT_EQ(ht.shape(), (Shape{2, 1}));
  EXPECT_EQ(ir::HalfToFloat(ht.data<ir::Float16>()[1]), -2.0f);
}

TEST(ConcatTest, NegativeAxisAndZeroSizeInputs) {
  Tensor a = F({2, 2}, {1, 2, 3, 4});
  Tensor b = F({2, 1}, {5, 6});
  Tensor empty = F({2, 0}, {});
  Expect<float>(Run1("Concat", {a, empty, b}, DType::kF32,
                     {{"axis", int64_t{-1}}}),
                {2, 3}, {1, 2, 5, 3, 4, 6});
  Expect<float>(Run1("Concat", {a, a}, DType::kF32, {{"axis", int64_t{0}}}),
                {4, 2}, {1, 2, 3, 4, 1, 2, 3, 4});
  EXPECT_THAT(RunError("Concat", {a, b}, DType::kF32, {{"axis", int64_t{0}}}),
              HasSubstr("cannot be concatenated"));
  EXPECT_THAT(RunError("Concat", {a, b}, DType::kF32, {{"axis", int64_t{2}}}),
              HasSubstr("out of range"));
}

TEST(ConcatTest, Opset1DefaultsAxisTo1) {
  Tensor a = F({1, 2}, {1, 2});
  Expect<float>(Run1("Concat", {a, a}, DType::kF32, {}, 3), {1, 4},
                {1, 2, 1, 2});
  EXPECT_THAT(RunError("Concat", {a, a}, DType::kF32, {}, 4),
              HasSubstr("axis"));
}

TEST(SplitTest, AttributeBeforeOpset13InputFrom13) {
  Tensor x = F({6}, {1, 2, 3, 4, 5, 6});
  auto r = RunOp("Split", {x}, {DType::kF32, DType::kF32},
                 {{"split", std::vector<int64_t>{2, 4}}}, 11);
  ASSERT_TRUE(r.ok()) << r.status();
  Expect<float>((*r)[0], {2}, {1, 2});
  Expect<float>((*r)[1], {4}, {3, 4, 5, 6});
  r = RunOp("Split", {x, I1({5, 1})}, {DType::kF32, DType::kF32}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  Expect<float>((*r)[0], {5}, {1, 2, 3, 4, 5});
  Expect<float>((*r)[1], {1}, {6});
  r = RunOp("Split", {x}, {DType::kF32, DType::kF32, DType::kF32}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  Expect<float>((*r)[2], {2}, {5, 6});
}

TEST(SplitTest, AxisOneAndZeroSizedParts) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = RunOp("Split", {x, I1({0, 2, 1})},
                 {DType::kF32, DType::kF32, DType::kF32},
                 {{"axis", int64_t{-1}}}, 13);
  ASSERT_TRUE(r.ok()) << r.status();
  Expect<float>((*r)[0], {2, 0}, {});
  Expect<float>((*r)[1], {2, 2}, {1, 2, 4, 5});
  Expect<float>((*r)[2], {2, 1}, {3, 6});
}

TEST(SplitTest, Opset18NumOutputsUnevenLastChunk) {
  Tensor x = I1({1, 2, 3, 4, 5, 6, 7});
  auto r = RunOp("Split", {x}, {DType::kI64, DType::kI64, DType::kI64},
                 {{"num_outputs", int64_t{3}}}, 18);
  ASSERT_TRUE(r.ok()) << r.status();
  Expect<int64_t>((*r)[0], {3}, {1, 2, 3});
  Expect<int64_t>((*r)[1], {3}, {4, 5, 6});
  Expect<int64_t>((*r)[2], {1}, {7});
  // Before opset 18 an unlisted split must be even.
  auto bad = RunOp("Split", {x}, {DType::kI64, DType::kI64}, {}, 13);
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("evenly"));
  bad = RunOp("Split", {x, I1({3, 3})}, {DType::kI64, DType::kI64}, {}, 13);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("add up"));
  bad = RunOp("Split", {x}, {DType::kI64, DType::kI64},
              {{"num_outputs", int64_t{3}}}, 18);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("num_outputs"));
}

// ---- Slice.

TEST(SliceTest, OperatorsMdExamples) {
  Tensor x = F({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  Expect<float>(Run1("Slice", {x, I1({1, 0}), I1({2, 3}), I1({0, 1}),
                               I1({1, 2})},
                     DType::kF32),
                {1, 2}, {5, 7});
  Expect<float>(Run1("Slice", {x, I1({0, 1}), I1({-1, 1000})}, DType::kF32),
                {1, 3}, {2, 3, 4});
}

TEST(SliceTest, NegativeStepsAndExtremeEnds) {
  Tensor x = I1({0, 1, 2, 3, 4, 5});
  Expect<int64_t>(Run1("Slice", {x, I1({-1}), I1({kI64Min}), std::nullopt,
                                 I1({-1})},
                       DType::kI64),
                  {6}, {5, 4, 3, 2, 1, 0});
  Expect<int64_t>(Run1("Slice", {x, I1({3}), I1({0}), I1({0}), I1({-2})},
                       DType::kI64),
                  {2}, {3, 1});
  Expect<int64_t>(Run1("Slice", {x, I1({100}), I1({-100}), I1({0}), I1({-3})},
                       DType::kI64),
                  {2}, {5, 2});
  Expect<int64_t>(Run1("Slice", {x, I1({2}), I1({kI64Max})}, DType::kI64),
                  {4}, {2, 3, 4, 5});
  Expect<int64_t>(Run1("Slice", {x, I1({10}), I1({20})}, DType::kI64), {0},
                  {});
  Expect<int64_t>(Run1("Slice", {x, I1({-100}), I1({2})}, DType::kI64), {2},
                  {0, 1});
}

TEST(SliceTest, Int32IndicesAndNegativeAxes) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor starts = T_<int32_t>({1}, {1});
  Tensor ends = T_<int32_t>({1}, {3});
  Tensor axes = T_<int32_t>({1}, {-1});
  Expect<float>(Run1("Slice", {x, starts, ends, axes}, DType::kF32), {2, 2},
                {2, 3, 5, 6});
}

TEST(SliceTest, AttributesBeforeOpset10) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  Expect<float>(Run1("Slice", {x}, DType::kF32,
                     {{"starts", std::vector<int64_t>{1}},
                      {"ends", std::vector<int64_t>{kI64Max}},
                      {"axes", std::vector<int64_t>{1}}},
                     9),
                {2, 2}, {2, 3, 5, 6});
}

TEST(SliceTest, Errors) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(RunError("Slice", {x, I1({0}), I1({1}), I1({0}), I1({0})},
                       DType::kF32),
              HasSubstr("step is 0"));
  EXPECT_THAT(RunError("Slice", {x, I1({0}), I1({1}), I1({2})}, DType::kF32),
              HasSubstr("out of range"));
  EXPECT_THAT(RunError("Slice", {x, I1({0, 0}), I1({1})}, DType::kF32),
              HasSubstr("differ in length"));
}

// ---- Gather family.

TEST(GatherTest, OperatorsMdExamples) {
  Tensor data = F({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  Expect<float>(Run1("Gather", {data, I({2, 2}, {0, 1, 1, 2})}, DType::kF32),
                {2, 2, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f});
  Tensor data3 =
      F({3, 3}, {1.0f, 1.2f, 1.9f, 2.3f, 3.4f, 3.9f, 4.5f, 5.7f, 5.9f});
  Expect<float>(Run1("Gather", {data3, I({1, 2}, {0, 2})}, DType::kF32,
                     {{"axis", int64_t{1}}}),
                {3, 1, 2}, {1.0f, 1.9f, 2.3f, 3.9f, 4.5f, 5.9f});
}

TEST(GatherTest, NegativeAndScalarIndices) {
  Tensor data = I1({10, 20, 30});
  Expect<int64_t>(Run1("Gather", {data, T_<int32_t>({2}, {-1, -3})},
                       DType::kI64),
                  {2}, {30, 10});
  Expect<int64_t>(Run1("Gather", {data, Tensor::Scalar<int64_t>(1)},
                       DType::kI64),
                  {}, {20});
}

TEST(GatherTest, OutOfRangeIndexIsAnError) {
  Tensor data = I1({10, 20, 30});
  EXPECT_THAT(RunError("Gather", {data, I1({3})}, DType::kI64),
              HasSubstr("out of range"));
  EXPECT_THAT(RunError("Gather", {data, I1({-4})}, DType::kI64),
              HasSubstr("out of range"));
  EXPECT_THAT(RunError("Gather", {data, I1({0})}, DType::kI64,
                       {{"axis", int64_t{1}}}),
              HasSubstr("axis 1"));
}

TEST(GatherElementsTest, OperatorsMdExamples) {
  Expect<float>(Run1("GatherElements",
                     {F({2, 2}, {1, 2, 3, 4}), I({2, 2}, {0, 0, 1, 0})},
                     DType::kF32, {{"axis", int64_t{1}}}),
                {2, 2}, {1, 1, 4, 3});
  Expect<float>(Run1("GatherElements",
                     {F({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                      I({2, 3}, {1, 2, 0, 2, 0, 0})},
                     DType::kF32, {{"axis", int64_t{0}}}),
                {2, 3}, {4, 8, 3, 7, 2, 3});
  Expect<float>(Run1("GatherElements",
                     {F({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                      I({2, 3}, {-1, -2, 0, -2, 0, 0})},
                     DType::kF32),
                {2, 3}, {7, 5, 3, 4, 2, 3});
}

TEST(GatherElementsTest, Errors) {
  Tensor data = F({2, 2}, {1, 2, 3, 4});
  EXPECT_THAT(RunError("GatherElements", {data, I({1, 2}, {0, 2})},
                       DType::kF32, {{"axis", int64_t{1}}}),
              HasSubstr("out of range"));
  EXPECT_THAT(RunError("GatherElements", {data, I({3, 1}, {0, 0, 0})},
                       DType::kF32, {{"axis", int64_t{1}}}),
              HasSubstr("exceed"));
  EXPECT_THAT(RunError("GatherElements", {data, I1({0})}, DType::kF32),
              HasSubstr("rank"));
}

TEST(GatherNDTest, OperatorsMdExamples) {
  Tensor d2 = I({2, 2}, {0, 1, 2, 3});
  Expect<int64_t>(Run1("GatherND", {d2, I({2, 2}, {0, 0, 1, 1})}, DType::kI64),
                  {2}, {0, 3});
  Expect<int64_t>(Run1("GatherND", {d2, I({2, 1}, {1, 0})}, DType::kI64),
                  {2, 2}, {2, 3, 0, 1});
  Tensor d3 = I({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Expect<int64_t>(Run1("GatherND", {d3, I({2, 2}, {0, 1, 1, 0})}, DType::kI64),
                  {2, 2}, {2, 3, 4, 5});
  Expect<int64_t>(Run1("GatherND", {d3, I({2, 1, 2}, {0, 1, 1, 0})},
                       DType::kI64),
                  {2, 1, 2}, {2, 3, 4, 5});
  Expect<int64_t>(Run1("GatherND", {d3, I({2, 1}, {1, 0})}, DType::kI64,
                       {{"batch_dims", int64_t{1}}}),
                  {2, 2}, {2, 3, 4, 5});
}

TEST(GatherNDTest, Errors) {
  Tensor d2 = I({2, 2}, {0, 1, 2, 3});
  EXPECT_THAT(RunError("GatherND", {d2, I({1, 2}, {0, 2})}, DType::kI64),
              HasSubstr("out of range"));
  EXPECT_THAT(RunError("GatherND", {d2, I({1, 3}, {0, 0, 0})}, DType::kI64),
              HasSubstr("do not fit"));
  EXPECT_THAT(RunError("GatherND", {d2, I({3, 1}, {0, 0, 0})}, DType::kI64,
                       {{"batch_dims", int64_t{1}}}),
              HasSubstr("batch dim"));
}

// ---- Scatter family.

TEST(ScatterNDTest, OperatorsMdExample1AndReductions) {
  Tensor data = F({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor ind = I({4, 1}, {4, 3, 1, 7});
  Tensor upd = F({4}, {9, 10, 11, 12});
  Expect<float>(Run1("ScatterND", {data, ind, upd}, DType::kF32), {8},
                {1, 11, 3, 10, 9, 6, 7, 12});
  Tensor dup = I({2, 1}, {1, 1});
  Tensor u2 = F({2}, {10, 3});
  auto with = [&](const char* red) {
    return Run1("ScatterND", {data, dup, u2}, DType::kF32,
                {{"reduction", std::string(red)}});
  };
  Expect<float>(with("add"), {8}, {1, 15, 3, 4, 5, 6, 7, 8});
  Expect<float>(with("mul"), {8}, {1, 60, 3, 4, 5, 6, 7, 8});
  Expect<float>(with("max"), {8}, {1, 10, 3, 4, 5, 6, 7, 8});
  Expect<float>(with("min"), {8}, {1, 2, 3, 4, 5, 6, 7, 8});
}

TEST(ScatterNDTest, SliceUpdates) {
  // Operators.md example 2 shrunk to 3x2x2: rows 0 and 2 are replaced.
  Tensor data = I({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor ind = I({2, 1}, {0, 2});
  Tensor upd = I({2, 2, 2}, {-1, -2, -3, -4, -5, -6, -7, -8});
  Expect<int64_t>(Run1("ScatterND", {data, ind, upd}, DType::kI64), {3, 2, 2},
                  {-1, -2, -3, -4, 5, 6, 7, 8, -5, -6, -7, -8});
  Tensor ind2 = I({1, 2}, {1, -1});
  Expect<int64_t>(Run1("ScatterND", {data, ind2, I({1, 2}, {0, 0})},
                       DType::kI64),
                  {3, 2, 2}, {1, 2, 3, 4, 5, 6, 0, 0, 9, 10, 11, 12});
}

TEST(ScatterNDTest, Errors) {
  Tensor data = F({4}, {1, 2, 3, 4});
  EXPECT_THAT(RunError("ScatterND", {data, I({1, 1}, {4}), F({1}, {0})},
                       DType::kF32),
              HasSubstr("out of range"));
  EXPECT_THAT(RunError("ScatterND", {data, I({1, 1}, {0}), F({2}, {0, 0})},
                       DType::kF32),
              HasSubstr("updates"));
  EXPECT_THAT(RunError("ScatterND", {data, I({1, 1}, {0}), F({1}, {0})},
                       DType::kF32, {{"reduction", std::string("avg")}}),
              HasSubstr("reduction"));
}

TEST(ScatterElementsTest, OperatorsMdExamples) {
  Tensor data = F({3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0});
  Tensor ind = I({2, 3}, {1, 0, 2, 0, 2, 1});
  Tensor upd = F({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  Expect<float>(Run1("ScatterElements", {data, ind, upd}, DType::kF32), {3, 3},
                {2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f});
  Tensor d1 = F({1, 5}, {1, 2, 3, 4, 5});
  Expect<float>(Run1("ScatterElements",
                     {d1, I({1, 2}, {1, 3}), F({1, 2}, {1.1f, 2.1f})},
                     DType::kF32, {{"axis", int64_t{1}}}),
                {1, 5}, {1.0f, 1.1f, 3.0f, 2.1f, 5.0f});
  Expect<float>(Run1("ScatterElements",
                     {d1, I({1, 2}, {1, -4}), F({1, 2}, {1.1f, 2.1f})},
                     DType::kF32,
                     {{"axis", int64_t{1}}, {"reduction", std::string("add")}}),
                {1, 5}, {1.0f, 5.2f, 3.0f, 4.0f, 5.0f});
}

TEST(ScatterElementsTest, DeprecatedScatterAtOpset9) {
  Tensor d1 = I({1, 5}, {1, 2, 3, 4, 5});
  Expect<int64_t>(Run1("Scatter", {d1, I({1, 2}, {4, 0}), I({1, 2}, {9, 8})},
                       DType::kI64, {{"axis", int64_t{1}}}, 9),
                  {1, 5}, {8, 2, 3, 4, 9});
}

TEST(ScatterElementsTest, OutOfRangeIndexIsAnError) {
  Tensor d1 = F({1, 5}, {1, 2, 3, 4, 5});
  EXPECT_THAT(RunError("ScatterElements",
                       {d1, I({1, 1}, {5}), F({1, 1}, {0})}, DType::kF32,
                       {{"axis", int64_t{1}}}),
              HasSubstr("out of range"));
  EXPECT_THAT(RunError("ScatterElements",
                       {d1, I({2, 1}, {0, 0}), F({2, 1}, {0, 0})},
                       DType::kF32, {{"axis", int64_t{1}}}),
              HasSubstr("exceed"));
}

// ---- Expand, Tile, Pad.

TEST(ExpandTest, BidirectionalBroadcast) {
  Tensor x = F({3, 1}, {1, 2, 3});
  Expect<float>(Run1("Expand", {x, I1({2, 1, 2})}, DType::kF32), {2, 3, 2},
                {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  // A shape smaller than the input keeps the input's dims.
  Expect<float>(Run1("Expand", {x, I1({1})}, DType::kF32), {3, 1}, {1, 2, 3});
  EXPECT_THAT(RunError("Expand", {x, I1({2, 2})}, DType::kF32),
              HasSubstr("broadcast"));
  EXPECT_THAT(RunError("Expand", {x, I1({-1, 1})}, DType::kF32),
              HasSubstr("negative"));
  EXPECT_THAT(RunError("Expand", {x, I1({int64_t{1} << 20, int64_t{1} << 20,
                                         3, 1})},
                       DType::kF32),
              HasSubstr("2^34"));
}

TEST(TileTest, RepeatsAndErrors) {
  Tensor x = I({2, 2}, {1, 2, 3, 4});
  Expect<int64_t>(Run1("Tile", {x, I1({1, 2})}, DType::kI64), {2, 4},
                  {1, 2, 1, 2, 3, 4, 3, 4});
  Expect<int64_t>(Run1("Tile", {x, I1({2, 1})}, DType::kI64), {4, 2},
                  {1, 2, 3, 4, 1, 2, 3, 4});
  Expect<int64_t>(Run1("Tile", {x, I1({0, 1})}, DType::kI64), {0, 2}, {});
  EXPECT_THAT(RunError("Tile", {x, I1({-1, 1})}, DType::kI64),
              HasSubstr("negative"));
  EXPECT_THAT(RunError("Tile", {x, I1({2})}, DType::kI64), HasSubstr("rank"));
  RunError("Tile", {x, I1({kI64Max, 1})}, DType::kI64);
  RunError("Tile", {x, I1({int64_t{1} << 20, int64_t{1} << 20})},
           DType::kI64);
}

TEST(PadTest, OperatorsMdConstantReflectEdge) {
  Tensor x = F({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  Tensor pads = I1({0, 2, 0, 0});
  Expect<float>(Run1("Pad", {x, pads, Tensor::Scalar<float>(0.0f)},
                     DType::kF32, {{"mode", std::string("constant")}}),
                {3, 4},
                {0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f});
  Expect<float>(Run1("Pad", {x, pads}, DType::kF32,
                     {{"mode", std::string("reflect")}}),
                {3, 4},
                {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f,
                 4.5f, 5.7f});
  Expect<float>(Run1("Pad", {x, pads}, DType::kF32,
                     {{"mode", std::string("edge")}}),
                {3, 4},
                {1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f,
                 4.5f, 5.7f});
}

TEST(PadTest, ValueWrapCropAndAxes) {
  Tensor x = I1({1, 2, 3});
  Expect<int64_t>(Run1("Pad", {x, I1({1, 2}), Tensor::Scalar<int64_t>(9)},
                       DType::kI64),
                  {6}, {9, 1, 2, 3, 9, 9});
  Expect<int64_t>(Run1("Pad", {x, I1({2, 2})}, DType::kI64,
                       {{"mode", std::string("wrap")}}),
                  {7}, {2, 3, 1, 2, 3, 1, 2});
  Expect<int64_t>(Run1("Pad", {x, I1({3, 0})}, DType::kI64,
                       {{"mode", std::string("reflect")}}),
                  {6}, {2, 3, 2, 1, 2, 3});
  Expect<int64_t>(Run1("Pad", {x, I1({-1, 1})}, DType::kI64), {3}, {2, 3, 0});
  Tensor m = I({2, 2}, {1, 2, 3, 4});
  Expect<int64_t>(Run1("Pad", {m, I1({1, 0}), std::nullopt, I1({-1})},
                       DType::kI64),
                  {2, 3}, {0, 1, 2, 0, 3, 4});
  EXPECT_THAT(RunError("Pad", {x, I1({-2, -2})}, DType::kI64),
              HasSubstr("crop"));
  EXPECT_THAT(RunError("Pad", {x, I1({1})}, DType::kI64), HasSubstr("pads"));
  EXPECT_THAT(RunError("Pad", {x, I1({1, 1})}, DType::kI64,
                       {{"mode", std::string("mirror")}}),
              HasSubstr("mode"));
}

TEST(PadTest, AttributesBeforeOpset11) {
  Tensor x = F({1, 2}, {1, 2});
  Expect<float>(Run1("Pad", {x}, DType::kF32,
                     {{"pads", std::vector<int64_t>{1, 0, 0, 1}},
                      {"value", 1.5f}},
                     2),
                {2, 3}, {1.5f, 1.5f, 1.5f, 1, 2, 1.5f});
}

TEST(PadTest, Opset1PaddingsAttribute) {
  Tensor x = F({2}, {1, 2});
  Expect<float>(Run1("Pad", {x}, DType::kF32,
                     {{"paddings", std::vector<int64_t>{0, 1}},
                      {"mode", std::string("edge")}},
                     1),
                {3}, {1, 2, 2});
}

// ---- DepthToSpace, SpaceToDepth.

// Operators.md's DepthToSpace input: [1, 8, 2, 3] with x[c][h][w] = 9c+3h+w.
Tensor DepthToSpaceInput() {
  Tensor x(DType::kF32, {1, 8, 2, 3});
  for (int c = 0; c < 8; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w) x.data<float>()[c * 6 + h * 3 + w] =
          9 * c + 3 * h + w;
  return x;
}

TEST(DepthToSpaceTest, DcrAndCrdOperatorsMdExamples) {
  Tensor x = DepthToSpaceInput();
  Expect<float>(
      Run1("DepthToSpace", {x}, DType::kF32, {{"blocksize", int64_t{2}}}),
      {1, 2, 4, 6},
      {0,  18, 1,  19, 2,  20, 36, 54, 37, 55, 38, 56, 3,  21, 4,  22,
       5,  23, 39, 57, 40, 58, 41, 59, 9,  27, 10, 28, 11, 29, 45, 63,
       46, 64, 47, 65, 12, 30, 13, 31, 14, 32, 48, 66, 49, 67, 50, 68});
  Expect<float>(
      Run1("DepthToSpace", {x}, DType::kF32,
           {{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}),
      {1, 2, 4, 6},
      {0,  9,  1,  10, 2,  11, 18, 27, 19, 28, 20, 29, 3,  12, 4,  13,
       5,  14, 21, 30, 22, 31, 23, 32, 36, 45, 37, 46, 38, 47, 54, 63,
       55, 64, 56, 65, 39, 48, 40, 49, 41, 50, 57, 66, 58, 67, 59, 68});
  EXPECT_THAT(RunError("DepthToSpace", {x}, DType::kF32,
                       {{"blocksize", int64_t{3}}}),
              HasSubstr("divisible"));
}

TEST(SpaceToDepthTest, InvertsDcr) {
  // SpaceToDepth of a 2x2 image with blocksize 2: channel k = 2*dy + dx.
  Tensor x = F({1, 1, 2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  Expect<float>(Run1("SpaceToDepth", {x}, DType::kF32,
                     {{"blocksize", int64_t{2}}}),
                {1, 4, 1, 2}, {0, 2, 1, 3, 4, 6, 5, 7});
  Tensor y = Run1("SpaceToDepth",
                  {Run1("DepthToSpace", {DepthToSpaceInput()}, DType::kF32,
                        {{"blocksize", int64_t{2}}})},
                  DType::kF32, {{"blocksize", int64_t{2}}});
  Tensor x0 = DepthToSpaceInput();
  EXPECT_EQ(y.shape(), x0.shape());
  EXPECT_THAT(Values<float>(y), ElementsAreArray(Values<float>(x0)));
  EXPECT_THAT(RunError("SpaceToDepth", {F({1, 1, 3, 4}, {})}, DType::kF32,
                       {{"blocksize", int64_t{2}}}),
              HasSubstr("divisible"));
}

// ---- Shape, Size, producers.

TEST(ShapeTest, StartEndFromOpset15) {
  Tensor x = F({2, 3, 4, 5}, {});
  Expect<int64_t>(Run1("Shape", {x}, DType::kI64, {}, 13), {4}, {2, 3, 4, 5});
  Expect<int64_t>(Run1("Shape", {x}, DType::kI64,
                       {{"start", int64_t{1}}, {"end", int64_t{-1}}}, 15),
                  {2}, {3, 4});
  Expect<int64_t>(Run1("Shape", {x}, DType::kI64,
                       {{"start", int64_t{-10}}, {"end", int64_t{10}}}, 15),
                  {4}, {2, 3, 4, 5});
  Expect<int64_t>(Run1("Shape", {x}, DType::kI64, {{"start", int64_t{3}},
                                                   {"end", int64_t{1}}},
                       15),
                  {0}, {});
  Expect<int64_t>(Run1("Size", {x}, DType::kI64), {}, {120});
}

// RunOptions::max_result_elements (what constant folding sets): a result
// sized by input values past the limit is refused before it is allocated.
TEST(RunOptionsTest, ResultLimitRefusesValueSizedResults) {
  RunOptions limit;
  limit.max_result_elements = int64_t{1} << 20;
  absl::StatusOr<std::vector<Tensor>> r =
      RunOp("ConstantOfShape", {I1({6225922, 36})}, {DType::kF32}, {}, 18, limit);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("[6225922,36] has 224133192 elements, over this run's limit of 1048576"));
  r = RunOp("Expand", {F({1, 1}, {1}), I1({2048, 1024})}, {DType::kF32}, {}, 18, limit);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  r = RunOp("Tile", {F({2}, {1, 2}), I1({1 << 20})}, {DType::kF32}, {}, 18, limit);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  r = RunOp("Range", {I({}, {0}), I({}, {(1 << 20) + 1}), I({}, {1})}, {DType::kI64}, {}, 18,
            limit);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // At the limit it runs; without a limit the same node runs.
  r = RunOp("ConstantOfShape", {I1({1024, 1024})}, {DType::kF32}, {}, 18, limit);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].num_elements(), int64_t{1} << 20);
  r = RunOp("Range", {I({}, {0}), I({}, {(1 << 20) + 1}), I({}, {1})}, {DType::kI64});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].num_elements(), (1 << 20) + 1);
}

TEST(ConstantOfShapeTest, DefaultAndValue) {
  Expect<float>(Run1("ConstantOfShape", {I1({2, 2})}, DType::kF32), {2, 2},
                {0, 0, 0, 0});
  Expect<int32_t>(Run1("ConstantOfShape", {I1({3})}, DType::kI32,
                       {{"value", T_<int32_t>({1}, {7})}}),
                  {3}, {7, 7, 7});
  Expect<float>(Run1("ConstantOfShape", {I1({})}, DType::kF32,
                     {{"value", F({1}, {2.5f})}}),
                {}, {2.5f});
  Expect<float>(Run1("ConstantOfShape", {I1({0, 5})}, DType::kF32), {0, 5},
                {});
  EXPECT_THAT(RunError("ConstantOfShape", {I1({2, -1})}, DType::kF32),
              HasSubstr("negative"));
  EXPECT_THAT(RunError("ConstantOfShape", {I1({kI64Max, kI64Max})},
                       DType::kF32),
              HasSubstr("2^34"));
}

TEST(RangeTest, IntAndFloat) {
  Expect<int32_t>(Run1("Range",
                       {Tensor::Scalar<int32_t>(10), Tensor::Scalar<int32_t>(6),
                        Tensor::Scalar<int32_t>(-3)},
                       DType::kI32),
                  {2}, {10, 7});
  Expect<float>(Run1("Range",
                     {Tensor::Scalar<float>(1), Tensor::Scalar<float>(2),
                      Tensor::Scalar<float>(0.25f)},
                     DType::kF32),
                {4}, {1, 1.25f, 1.5f, 1.75f});
  Expect<int64_t>(Run1("Range",
                       {Tensor::Scalar<int64_t>(5), Tensor::Scalar<int64_t>(1),
                        Tensor::Scalar<int64_t>(1)},
                       DType::kI64),
                  {0}, {});
  EXPECT_THAT(RunError("Range",
                       {Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(5),
                        Tensor::Scalar<int64_t>(0)},
                       DType::kI64),
              HasSubstr("delta"));
  EXPECT_THAT(RunError("Range",
                       {Tensor::Scalar<int64_t>(kI64Min),
                        Tensor::Scalar<int64_t>(kI64Max),
                        Tensor::Scalar<int64_t>(1)},
                       DType::kI64),
              HasSubstr("2^34"));
  EXPECT_THAT(RunError("Range",
                       {Tensor::Scalar<float>(0), Tensor::Scalar<float>(1e30f),
                        Tensor::Scalar<float>(1)},
                       DType::kF32),
              HasSubstr("2^34"));
}

TEST(ConstantTest, ValueForms) {
  Expect<float>(Run1("Constant", {}, DType::kF32,
                     {{"value", F({2}, {1.5f, 2.5f})}}),
                {2}, {1.5f, 2.5f});
  Expect<float>(Run1("Constant", {}, DType::kF32, {{"value_float", 3.0f}}), {},
                {3.0f});
  Expect<float>(Run1("Constant", {}, DType::kF32,
                     {{"value_floats", std::vector<float>{1, 2}}}),
                {2}, {1, 2});
  Expect<int64_t>(Run1("Constant", {}, DType::kI64,
                       {{"value_int", int64_t{4}}}),
                  {}, {4});
  Expect<int64_t>(Run1("Constant", {}, DType::kI64,
                       {{"value_ints", std::vector<int64_t>{4, 5, 6}}}),
                  {3}, {4, 5, 6});
  RunError("Constant", {}, DType::kF32);
}

TEST(NonZeroTest, OperatorsMdExample) {
  Expect<int64_t>(Run1("NonZero", {T_<bool>({2, 2}, {true, false, true, true})},
                       DType::kI64),
                  {2, 3}, {0, 1, 1, 0, 0, 1});
  Expect<int64_t>(Run1("NonZero", {F({3}, {0, 0, 0})}, DType::kI64), {1, 0},
                  {});
}

TEST(OneHotTest, AxesAndNegativeIndices) {
  Tensor values = F({2}, {0, 5});
  Tensor depth = Tensor::Scalar<int64_t>(3);
  Expect<float>(Run1("OneHot", {I1({0, 2, -1, 7}), depth, values},
                     DType::kF32),
                {4, 3}, {5, 0, 0, 0, 0, 5, 0, 0, 5, 0, 0, 0});
  Expect<float>(Run1("OneHot", {I1({0, 2}), depth, values}, DType::kF32,
                     {{"axis", int64_t{0}}}),
                {3, 2}, {5, 0, 0, 0, 0, 5});
  EXPECT_THAT(RunError("OneHot", {I1({0}), Tensor::Scalar<int64_t>(0), values},
                       DType::kF32),
              HasSubstr("depth"));
  EXPECT_THAT(RunError("OneHot", {I1({0}), depth, values}, DType::kF32,
                       {{"axis", int64_t{2}}}),
              HasSubstr("out of range"));
}

TEST(TriluTest, UpperAndLowerWithK) {
  Tensor x = I({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Expect<int64_t>(Run1("Trilu", {x}, DType::kI64), {3, 3},
                  {1, 2, 3, 0, 5, 6, 0, 0, 9});
  Expect<int64_t>(Run1("Trilu", {x, Tensor::Scalar<int64_t>(1)}, DType::kI64),
                  {3, 3}, {0, 2, 3, 0, 0, 6, 0, 0, 0});
  Expect<int64_t>(Run1("Trilu", {x, Tensor::Scalar<int64_t>(-1)}, DType::kI64,
                       {{"upper", int64_t{0}}}),
                  {3, 3}, {0, 0, 0, 4, 0, 0, 7, 8, 0});
  RunError("Trilu", {I1({1, 2})}, DType::kI64);
}

TEST(EyeLikeTest, DTypeAndK) {
  Expect<float>(Run1("EyeLike", {I({2, 3}, {})}, DType::kF32,
                     {{"dtype", int64_t{1}}, {"k", int64_t{1}}}),
                {2, 3}, {0, 1, 0, 0, 0, 1});
  Expect<int64_t>(Run1("EyeLike", {I({2, 2}, {})}, DType::kI64,
                       {{"k", int64_t{-1}}}),
                  {2, 2}, {0, 0, 1, 0});
  Expect<int64_t>(Run1("EyeLike", {I({2, 2}, {})}, DType::kI64,
                       {{"k", kI64Min}}),
                  {2, 2}, {0, 0, 0, 0});
}

TEST(CompressTest, AxisAndFlattened) {
  Tensor x = F({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor cond = T_<bool>({3}, {false, true, true});
  Expect<float>(Run1("Compress", {x, cond}, DType::kF32,
                     {{"axis", int64_t{0}}}),
                {2, 2}, {3, 4, 5, 6});
  Expect<float>(Run1("Compress", {x, cond}, DType::kF32), {2}, {2, 3});
  EXPECT_THAT(RunError("Compress", {x, T_<bool>({3}, {0, 0, 1})}, DType::kF32,
                       {{"axis", int64_t{1}}}),
              HasSubstr("beyond"));
}

TEST(OutputTypeTest, DeclaredDTypeMismatchIsReported) {
  auto r = RunOp("Shape", {F({2}, {1, 2})}, {DType::kI32});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("declared"));
}

}  // namespace
}  // namespace kiln::interp
