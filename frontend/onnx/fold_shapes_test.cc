// Tests for import-time shape folding (fold_shapes.h): shape-computing
// chains exporters emit come out static, the folded graph computes what the
// unfolded one computes on the reference interpreter (and what a closed form
// says), and the limits hold.
#include "frontend/onnx/fold_shapes.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/test_models.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/graph.h"
#include "onnx/onnx_pb.h"
#include "interp/interpreter.h"

namespace kiln::frontend {
namespace {

using ir::Graph;
using ir::Tensor;
using testing::AttrGraph;
using testing::AttrInt;
using testing::AttrInts;
using testing::AttrTensor;
using testing::FillInt64s;
using testing::ModelBuilder;
using TP = onnx::TensorProto;

void Int64Init(ModelBuilder& m, const std::string& name,
               const std::vector<int64_t>& dims,
               const std::vector<int64_t>& values) {
  FillInt64s(m.graph()->add_initializer(), name, dims, values);
}

// Unsqueeze to rank 1 (opset 13+: axes is an input).
void Unsqueeze0(ModelBuilder& m, const std::string& in,
                const std::string& out) {
  m.Node("Unsqueeze", {in, "axes0"}, {out}, "unsq_" + out);
}

ImportResult MustImport(const ModelBuilder& m, bool fold,
                        const ImportOptions& base = {}) {
  ImportOptions opts = base;
  opts.fold_shapes = fold;
  absl::StatusOr<ImportResult> r =
      ImportModelBytes(m.Bytes(), opts, "fold_test.onnx");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : ImportResult{};
}

bool IsStatic(const ir::Value& v) {
  return v.shape_known && std::find(v.shape.begin(), v.shape.end(),
                                    ir::kDynamicDim) == v.shape.end();
}

// Names of node outputs whose shapes are not static.
std::vector<std::string> NonStatic(const Graph& g) {
  std::vector<std::string> names;
  for (const ir::Node& n : g.nodes()) {
    for (ir::ValueId out : n.outputs) {
      if (out != ir::kNoValue && !IsStatic(g.value(out))) {
        names.push_back(g.value(out).name);
      }
    }
  }
  return names;
}

std::vector<std::string> Ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const ir::Node& n : g.nodes()) ops.push_back(n.op);
  return ops;
}

const ir::Value& ValueNamed(const Graph& g, const std::string& name) {
  std::optional<ir::ValueId> id = g.FindValue(name);
  EXPECT_TRUE(id.has_value()) << name;
  return g.value(id.value_or(0));
}

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

Tensor Iota(const ir::Shape& shape) {
  Tensor t(ir::DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data<float>()[i] = static_cast<float>(i) * 0.5f - 3.0f;
  }
  return t;
}

// Runs the folded and the unfolded import of `m` on the reference
// interpreter; both must succeed and agree exactly. Returns the outputs.
std::vector<Tensor> RunBothAndCompare(const ModelBuilder& m,
                                      const std::vector<Tensor>& inputs,
                                      const ImportOptions& opts = {}) {
  ImportResult folded = MustImport(m, true, opts);
  ImportResult unfolded = MustImport(m, false, opts);
  absl::StatusOr<std::vector<Tensor>> a = interp::Run(folded.graph, inputs);
  absl::StatusOr<std::vector<Tensor>> b =
      interp::Run(unfolded.graph, inputs);
  EXPECT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(b.ok()) << b.status();
  if (!a.ok() || !b.ok()) return {};
  EXPECT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size() && i < b->size(); ++i) {
    EXPECT_EQ((*a)[i].shape(), (*b)[i].shape()) << "output " << i;
    EXPECT_EQ(Floats((*a)[i]), Floats((*b)[i])) << "output " << i;
  }
  return *std::move(a);
}

// x[N,3,4] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)),
//                               Unsqueeze(Gather(Shape(x),1) * Gather(.., 2))))
ModelBuilder ShapeGatherConcatReshape() {
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {"N", 3, 4});
  Int64Init(m, "axes0", {1}, {0});
  Int64Init(m, "i0", {}, {0});
  Int64Init(m, "i1", {}, {1});
  Int64Init(m, "i2", {}, {2});
  m.Node("Shape", {"x"}, {"s"}, "shape");
  m.Node("Gather", {"s", "i0"}, {"n"}, "g0");
  m.Node("Gather", {"s", "i1"}, {"c"}, "g1");
  m.Node("Gather", {"s", "i2"}, {"w"}, "g2");
  m.Node("Mul", {"c", "w"}, {"cw"}, "mul");
  Unsqueeze0(m, "n", "n1");
  Unsqueeze0(m, "cw", "cw1");
  AttrInt(m.Node("Concat", {"n1", "cw1"}, {"target"}, "concat"), "axis", 0);
  m.Node("Reshape", {"x", "target"}, {"y"}, "reshape");
  m.Output("y", TP::FLOAT, {"N", "?"});
  return m;
}

TEST(FoldShapesTest, ShapeGatherConcatReshapeBecomesStatic) {
  ModelBuilder m = ShapeGatherConcatReshape();
  ImportOptions opts;
  opts.input_shapes["x"] = {2, 3, 4};
  ImportResult r = MustImport(m, true, opts);
  EXPECT_THAT(NonStatic(r.graph), ::testing::IsEmpty());
  EXPECT_THAT(Ops(r.graph), ::testing::ElementsAre("Reshape"));
  EXPECT_EQ(ValueNamed(r.graph, "y").shape, (ir::Shape{2, 12}));
  // Initializers only the folded chain read are gone.
  EXPECT_FALSE(r.graph.FindValue("i1").has_value());
  const ir::Value& target = ValueNamed(r.graph, "target");
  EXPECT_EQ(target.shape, (ir::Shape{2}));

  const Tensor x = Iota({2, 3, 4});
  std::vector<Tensor> out = RunBothAndCompare(m, {x}, opts);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (ir::Shape{2, 12}));
  EXPECT_EQ(Floats(out[0]), Floats(x));  // a reshape keeps row-major order
}

// ShuffleNet's channel split: Slice(x, 0, C/2) and Slice(x, C/2, C) along
// axis 1, C from Shape(x); the divisor is a Constant node.
ModelBuilder ChannelSplit() {
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {1, 8, 2, 2});
  Int64Init(m, "axes0", {1}, {0});
  Int64Init(m, "axis1", {1}, {1});
  Int64Init(m, "zero", {1}, {0});
  Int64Init(m, "i1", {}, {1});
  FillInt64s(AttrTensor(m.Node("Constant", {}, {"two"}, "two"), "value"), "",
             {}, {2});
  m.Node("Shape", {"x"}, {"s"}, "shape");
  m.Node("Gather", {"s", "i1"}, {"c"}, "gather");
  m.Node("Div", {"c", "two"}, {"half"}, "div");
  Unsqueeze0(m, "half", "half1");
  Unsqueeze0(m, "c", "c1");
  m.Node("Slice", {"x", "zero", "half1", "axis1"}, {"a"}, "slice_a");
  m.Node("Slice", {"x", "half1", "c1", "axis1"}, {"b"}, "slice_b");
  m.Node("Relu", {"b"}, {"rb"}, "relu");
  m.Output("a", TP::FLOAT, {"?", "?", "?", "?"});
  m.Output("rb", TP::FLOAT, {"?", "?", "?", "?"});
  return m;
}

TEST(FoldShapesTest, ChannelSplitBecomesStatic) {
  ModelBuilder m = ChannelSplit();
  // Without folding, libonnx alone leaves the split's shape open.
  ImportResult unfolded = MustImport(m, false);
  EXPECT_THAT(NonStatic(unfolded.graph), ::testing::Contains("a"));

  ImportResult r = MustImport(m, true);
  EXPECT_THAT(NonStatic(r.graph), ::testing::IsEmpty());
  EXPECT_THAT(Ops(r.graph), ::testing::ElementsAre("Slice", "Slice", "Relu"));
  EXPECT_EQ(ValueNamed(r.graph, "a").shape, (ir::Shape{1, 4, 2, 2}));
  EXPECT_EQ(ValueNamed(r.graph, "rb").shape, (ir::Shape{1, 4, 2, 2}));

  const Tensor x = Iota({1, 8, 2, 2});
  std::vector<Tensor> out = RunBothAndCompare(m, {x});
  ASSERT_EQ(out.size(), 2u);
  const std::vector<float> xs = Floats(x);
  std::vector<float> want_a(xs.begin(), xs.begin() + 16);
  std::vector<float> want_b;
  for (size_t i = 16; i < 32; ++i) want_b.push_back(std::max(xs[i], 0.0f));
  EXPECT_EQ(Floats(out[0]), want_a);
  EXPECT_EQ(Floats(out[1]), want_b);
}

// ViT's class token: Expand(-c, Where(Equal(shape, -1), 1, shape)) with
// shape = [B, -1, -1] from Shape(x), then Concat with x along axis 1.
ModelBuilder ExpandComputedShape() {
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {"B", 5, 3});
  m.Input("c", TP::FLOAT, {1, 1, 3});
  Int64Init(m, "axes0", {1}, {0});
  Int64Init(m, "i0", {}, {0});
  Int64Init(m, "minus1", {1}, {-1});
  m.Node("Shape", {"x"}, {"s"}, "shape");
  m.Node("Gather", {"s", "i0"}, {"b"}, "gather");
  Unsqueeze0(m, "b", "b1");
  AttrInt(m.Node("Concat", {"b1", "minus1", "minus1"}, {"want"}, "concat"),
          "axis", 0);
  m.Node("Shape", {"want"}, {"want_shape"}, "shape_of_want");
  FillInt64s(AttrTensor(m.Node("ConstantOfShape", {"want_shape"}, {"ones"},
                               "ones"),
                        "value"),
             "", {1}, {1});
  m.Node("Equal", {"want", "minus1"}, {"is_any"}, "equal");
  m.Node("Where", {"is_any", "ones", "want"}, {"expand_to"}, "where");
  m.Node("Neg", {"c"}, {"cls"}, "neg");
  m.Node("Expand", {"cls", "expand_to"}, {"cls_b"}, "expand");
  AttrInt(m.Node("Concat", {"cls_b", "x"}, {"y"}, "concat_tokens"), "axis", 1);
  m.Output("y", TP::FLOAT, {"B", "?", 3});
  return m;
}

TEST(FoldShapesTest, ExpandWithComputedShapeBecomesStatic) {
  ModelBuilder m = ExpandComputedShape();
  ImportOptions opts;
  opts.input_shapes["x"] = {2, 5, 3};
  ImportResult unfolded = MustImport(m, false, opts);
  EXPECT_THAT(NonStatic(unfolded.graph), ::testing::Contains("cls_b"));

  ImportResult r = MustImport(m, true, opts);
  EXPECT_THAT(NonStatic(r.graph), ::testing::IsEmpty());
  EXPECT_THAT(Ops(r.graph),
              ::testing::ElementsAre("Neg", "Expand", "Concat"));
  EXPECT_EQ(ValueNamed(r.graph, "cls_b").shape, (ir::Shape{2, 1, 3}));
  EXPECT_EQ(ValueNamed(r.graph, "y").shape, (ir::Shape{2, 6, 3}));

  const Tensor x = Iota({2, 5, 3});
  const Tensor c = Tensor::FromVector<float>({1, 1, 3}, {10, 20, 30});
  std::vector<Tensor> out = RunBothAndCompare(m, {x, c}, opts);
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> xs = Floats(x);
  std::vector<float> want;
  for (int b = 0; b < 2; ++b) {
    want.insert(want.end(), {-10, -20, -30});
    want.insert(want.end(), xs.begin() + b * 15, xs.begin() + (b + 1) * 15);
  }
  EXPECT_EQ(Floats(out[0]), want);
}

// ConstantOfShape(shape) + x, for a constant `shape`.
ModelBuilder FilledPlusX(const std::vector<int64_t>& shape) {
  ModelBuilder m(17);
  const int64_t rank = static_cast<int64_t>(shape.size());
  m.Input("x", TP::FLOAT, std::vector<testing::Dim>(shape.begin(), shape.end()));
  Int64Init(m, "shape", {rank}, shape);
  FillInt64s(
      AttrTensor(m.Node("ConstantOfShape", {"shape"}, {"filled"}, "fill"),
                 "value"),
      "", {1}, {0});
  m.graph()->mutable_node(0)->mutable_attribute(0)->mutable_t()->set_data_type(
      TP::FLOAT);
  m.graph()->mutable_node(0)->mutable_attribute(0)->mutable_t()
      ->clear_int64_data();
  m.graph()->mutable_node(0)->mutable_attribute(0)->mutable_t()->add_float_data(
      1.5f);
  m.Node("Add", {"x", "filled"}, {"y"}, "add");
  m.Output("y", TP::FLOAT, std::vector<testing::Dim>(shape.begin(), shape.end()));
  return m;
}

TEST(FoldShapesTest, SmallConstantsFoldBigOnesStayNodes) {
  // 100x100 f32 = 40 KB: under the 64 KB growth allowance, folded.
  ImportResult small = MustImport(FilledPlusX({100, 100}), true);
  EXPECT_THAT(Ops(small.graph), ::testing::ElementsAre("Add"));
  const ir::Tensor* filled =
      small.graph.constant(*small.graph.FindValue("filled"));
  ASSERT_NE(filled, nullptr);
  EXPECT_EQ(filled->data<float>()[9999], 1.5f);

  // 200x200 f32 = 160 KB from a 16-byte input: growth, not folded (and its
  // shape is static anyway).
  ImportResult grown = MustImport(FilledPlusX({200, 200}), true);
  EXPECT_THAT(Ops(grown.graph), ::testing::ElementsAre("ConstantOfShape", "Add"));
  EXPECT_THAT(NonStatic(grown.graph), ::testing::IsEmpty());

  // Over the element limit whatever the growth rule says.
  ModelBuilder big = FilledPlusX({1200, 1000});
  ImportResult r = MustImport(big, true);
  EXPECT_THAT(Ops(r.graph), ::testing::ElementsAre("ConstantOfShape", "Add"));
}

TEST(FoldShapesTest, DequantizeLinearOfConstantsIsLeftForTheGraphPasses) {
  // A quantized model's weights: DequantizeLinear of a small s8 constant.
  // It stays a node: fuse-qdq reads the QDQ pattern it belongs to, and
  // fold-dequantize-linear folds what stays f32 (passes/graph).
  ModelBuilder m(13);
  m.Input("x", TP::FLOAT, {2, 3});
  onnx::TensorProto* w = m.graph()->add_initializer();
  w->set_name("wq");
  w->set_data_type(TP::INT8);
  w->add_dims(3);
  w->add_dims(4);
  w->set_raw_data(std::string("\x01\x02\x03\x04\xff\xfe\xfd\xfc\x05\x06\x07\x08", 12));
  onnx::TensorProto* scale = m.graph()->add_initializer();
  scale->set_name("scale");
  scale->set_data_type(TP::FLOAT);
  scale->add_float_data(0.5f);
  m.Node("DequantizeLinear", {"wq", "scale"}, {"w"}, "dq");
  m.Node("MatMul", {"x", "w"}, {"y"}, "mm");
  m.Output("y", TP::FLOAT, {2, 4});
  ImportResult r = MustImport(m, true);
  EXPECT_THAT(Ops(r.graph), ::testing::ElementsAre("DequantizeLinear", "MatMul"));
}

// A fuzzer's finding: a ConstantOfShape whose inferred output has about
// 2^61 elements overflowed the folder's byte count (undefined behaviour, seen
// under UBSan) before the size limit refused it. The node is not folded and
// the import ends with a clean status.
TEST(FoldShapesTest, AnOutputOfAbout2To61ElementsIsNotFolded) {
  ModelBuilder m(13);
  m.Input("x", TP::FLOAT, {1, 3});
  testing::FillInt64s(m.graph()->add_initializer(), "dims", {2},
                      {int64_t{68398419307134978}, 36});
  onnx::NodeProto* cos = m.Node("ConstantOfShape", {"dims"}, {"z"}, "cos");
  testing::FillFloats(testing::AttrTensor(cos, "value"), "", {1}, {1.5f});
  m.Node("Mul", {"z", "x"}, {"y"}, "mul");
  m.Output("y", TP::FLOAT, {2, 3});
  for (bool fold : {true, false}) {
    ImportOptions opts;
    opts.fold_shapes = fold;
    absl::StatusOr<ImportResult> r = ImportModelBytes(m.Bytes(), opts, "fold_test.onnx");
    if (r.ok()) {
      EXPECT_THAT(Ops(r->graph), ::testing::Contains("ConstantOfShape"));
    } else {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    }
  }
}

TEST(FoldShapesTest, RandomOpsAndGraphOutputsAreNotFolded) {
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {2, 3});
  m.Initializer("c", {2}, {1, 2});
  m.Node("RandomUniformLike", {"c"}, {"r"}, "random");
  m.Node("Shape", {"x"}, {"s"}, "shape");  // a graph output: stays
  m.Node("Neg", {"c"}, {"nc"}, "neg");      // a graph output: stays
  m.Output("r", TP::FLOAT, {2});
  m.Output("s", TP::INT64, {2});
  m.Output("nc", TP::FLOAT, {2});
  ImportResult r = MustImport(m, true);
  EXPECT_THAT(Ops(r.graph),
              ::testing::ElementsAre("RandomUniformLike", "Shape", "Neg"));
}

TEST(FoldShapesTest, NodeTheReferenceRejectsIsLeftForRunTime) {
  // dim / 0 in a shape computation: not folded, and the error comes when
  // the graph runs, as without folding.
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {2, 3, 4});
  Int64Init(m, "axes0", {1}, {0});
  Int64Init(m, "i1", {}, {1});
  Int64Init(m, "zero", {}, {0});
  m.Node("Shape", {"x"}, {"s"}, "shape");
  m.Node("Gather", {"s", "i1"}, {"d"}, "gather");
  m.Node("Div", {"d", "zero"}, {"q"}, "bad_div");
  Unsqueeze0(m, "q", "q1");
  m.Node("Reshape", {"x", "q1"}, {"y"}, "reshape");
  m.Output("y", TP::FLOAT, {"?"});
  ImportResult r = MustImport(m, true);
  EXPECT_THAT(Ops(r.graph), ::testing::ElementsAre("Div", "Unsqueeze", "Reshape"));
  absl::StatusOr<std::vector<Tensor>> out =
      interp::Run(r.graph, {Iota({2, 3, 4})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::AllOf(::testing::HasSubstr("bad_div"),
                               ::testing::HasSubstr("division by zero")));
}

TEST(FoldShapesTest, ShapeInferenceFailureIsAWarningAndStopsFolding) {
  // libonnx throws on an out-of-range Gather of a shape; import goes on with
  // what inference reached, as it did before folding.
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {2, 3, 4});
  Int64Init(m, "axes0", {1}, {0});
  Int64Init(m, "i7", {}, {7});
  m.Node("Shape", {"x"}, {"s"}, "shape");
  m.Node("Gather", {"s", "i7"}, {"d"}, "bad_gather");
  Unsqueeze0(m, "d", "d1");
  m.Node("Reshape", {"x", "d1"}, {"y"}, "reshape");
  m.Output("y", TP::FLOAT, {"?"});
  absl::StatusOr<ImportResult> r =
      ImportModelBytes(m.Bytes(), {}, "fold_test.onnx");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->warnings,
              ::testing::Contains(::testing::HasSubstr(
                  "ONNX shape inference failed")));
  EXPECT_THAT(Ops(r->graph),
              ::testing::ElementsAre("Shape", "Gather", "Unsqueeze", "Reshape"));
}

// Dropout(x, ratio, training_mode = true) as torchvision's Swin exports it.
ModelBuilder TrainingDropout(float ratio) {
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {2, 3});
  AttrTensor(m.Node("Constant", {}, {"ratio"}, "ratio"), "value")
      ->set_data_type(TP::FLOAT);
  m.graph()->mutable_node(0)->mutable_attribute(0)->mutable_t()->add_float_data(
      ratio);
  auto* training = AttrTensor(m.Node("Constant", {}, {"training"}, "training"),
                              "value");
  training->set_data_type(TP::BOOL);
  training->add_int32_data(1);
  m.Node("Dropout", {"x", "ratio", "training"}, {"y"}, "dropout");
  m.Output("y", TP::FLOAT, {2, 3});
  return m;
}

TEST(FoldShapesTest, DropoutWithRatioZeroLosesItsTrainingMode) {
  ImportResult r = MustImport(TrainingDropout(0.0f), true);
  ASSERT_EQ(r.graph.nodes().size(), 1u);
  EXPECT_EQ(r.graph.nodes()[0].op, "Dropout");
  EXPECT_EQ(r.graph.nodes()[0].inputs.size(), 2u);
  const Tensor x = Iota({2, 3});
  std::vector<Tensor> out = RunBothAndCompare(TrainingDropout(0.0f), {x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Floats(out[0]), Floats(x));

  // A real (random) training-mode Dropout keeps its inputs.
  ImportResult random = MustImport(TrainingDropout(0.5f), true);
  ASSERT_EQ(random.graph.nodes().size(), 1u);
  EXPECT_EQ(random.graph.nodes()[0].inputs.size(), 3u);
}

TEST(FoldShapesTest, InferenceRunsOnceWhenNothingFolds) {
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {2, 3});
  m.Node("Relu", {"x"}, {"y"}, "relu");
  m.Output("y", TP::FLOAT, {2, 3});
  onnx::ModelProto model = m.model();
  std::vector<std::string> warnings;
  absl::StatusOr<onnx_internal::FoldShapesStats> stats =
      onnx_internal::InferShapesToFixpoint(&model, {}, &warnings);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->inference_runs, 1);
  EXPECT_EQ(stats->folded_nodes, 0);
  EXPECT_THAT(warnings, ::testing::IsEmpty());
}

TEST(FoldShapesTest, ShapeOfAReshapeFoldsInTheSameSweep) {
  // Shape(Reshape(x, 6 / Shape(x)[0:1] * Shape(x)[0:1])): libonnx cannot
  // size the Reshape (no data propagation through Div), so the outer Shape
  // folds only after the Reshape is inferred again: per-node inference
  // within the sweep does that, so one sweep and one re-check suffice.
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {2, 3});
  Int64Init(m, "six", {1}, {6});
  m.Node("Shape", {"x"}, {"s"}, "shape");
  auto* slice = m.Node("Shape", {"x"}, {"s0"}, "shape_slice");
  AttrInt(slice, "end", 1);
  m.Node("Div", {"six", "s0"}, {"three"}, "div");
  m.Node("Mul", {"three", "s0"}, {"flat"}, "mul");
  m.Node("Reshape", {"x", "flat"}, {"v"}, "reshape");
  m.Node("Shape", {"v"}, {"vs"}, "shape_v");
  m.Node("Reshape", {"x", "vs"}, {"y"}, "reshape2");
  m.Output("y", TP::FLOAT, {"?"});
  onnx::ModelProto model = m.model();
  std::vector<std::string> warnings;
  absl::StatusOr<onnx_internal::FoldShapesStats> stats =
      onnx_internal::InferShapesToFixpoint(&model, {}, &warnings);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->inference_runs, 2);
  EXPECT_EQ(stats->folded_nodes, 5);  // the three Shapes, Div, Mul
  ImportResult r = MustImport(m, true);
  EXPECT_THAT(NonStatic(r.graph), ::testing::IsEmpty());
  EXPECT_EQ(ValueNamed(r.graph, "y").shape, (ir::Shape{6}));
  const Tensor x = Iota({2, 3});
  std::vector<Tensor> out = RunBothAndCompare(m, {x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Floats(out[0]), Floats(x));
}

// cond = (Gather(Shape(x), 1) == cols), known once x's dims are; sel =
// If(cond) then ReduceMax(Neg(x), axis 1, keepdims 0) [N], else x itself (an
// outer value as the branch output) [N,3]: the ranks differ, so sel has no
// shape until the If folds. y = Relu(sel), z = a * a with a = Abs(x).
// With `second_if`, a second such If's branches define the same names (as
// siblings may): inlining the first renames its values.
ModelBuilder ShapeConditionIf(bool second_if, int64_t cols) {
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {"N", 3});
  Int64Init(m, "i1", {}, {1});
  Int64Init(m, "cols", {}, {cols});
  m.Node("Abs", {"x"}, {"a"}, "abs");
  m.Node("Shape", {"x"}, {"s"}, "shape");
  m.Node("Gather", {"s", "i1"}, {"c"}, "gather");
  m.Node("Equal", {"c", "cols"}, {"cond"}, "equal");
  auto add_if = [&](const std::string& name, const std::string& out) {
    onnx::NodeProto* node = m.Node("If", {"cond"}, {out}, name);
    onnx::GraphProto* then_g = AttrGraph(node, "then_branch");
    then_g->set_name(name + "_then");
    testing::AddNode(then_g, "Neg", {"x"}, {"v"}, name + "_neg");
    onnx::NodeProto* max = testing::AddNode(then_g, "ReduceMax", {"v"}, {"r"}, name + "_max");
    AttrInts(max, "axes", {1});
    AttrInt(max, "keepdims", 0);
    testing::AddValueInfo(then_g->mutable_output(), "r", TP::FLOAT, {"N"});
    onnx::GraphProto* else_g = AttrGraph(node, "else_branch");
    else_g->set_name(name + "_else");
    testing::AddValueInfo(else_g->mutable_output(), "x", TP::FLOAT, {"N", 3});
  };
  add_if("if", "sel");
  m.Node("Relu", {"sel"}, {"y"}, "relu");
  m.Node("Mul", {"a", "a"}, {"z"}, "square");
  if (cols == 3) {
    m.Output("y", TP::FLOAT, {"?"});
  } else {
    m.Output("y", TP::FLOAT, {"?", "?"});
  }
  m.Output("z", TP::FLOAT, {"N", 3});
  if (second_if) {
    add_if("if2", "sel2");
    m.Output("sel2", TP::FLOAT, {"?"});
  }
  return m;
}

TEST(FoldShapesTest, IfWithAShapeConditionBecomesItsBranch) {
  ImportOptions opts;
  opts.input_shapes["x"] = {2, 3};
  const Tensor x = Iota({2, 3});  // rows -3 -2.5 -2, -1.5 -1 -0.5
  for (bool second_if : {false, true}) {
    ModelBuilder m = ShapeConditionIf(second_if, 3);
    ImportResult r = MustImport(m, true, opts);
    for (const ir::Node& n : r.graph.nodes()) EXPECT_NE(n.op, "If");
    EXPECT_THAT(NonStatic(r.graph), ::testing::IsEmpty());
    EXPECT_EQ(ValueNamed(r.graph, "y").shape, (ir::Shape{2}));
    // A name the rest of the model uses is renamed, another kept.
    EXPECT_TRUE(r.graph.FindValue("v").has_value());
    EXPECT_EQ(r.graph.FindValue("v_1").has_value(), second_if);
    if (second_if) EXPECT_EQ(ValueNamed(r.graph, "sel2").shape, (ir::Shape{2}));
    std::vector<Tensor> out = RunBothAndCompare(m, {x}, opts);
    ASSERT_GE(out.size(), 2u);
    // Row maxima of -x are 3 and 1.5; z = x * x.
    EXPECT_EQ(Floats(out[0]), (std::vector<float>{3.0f, 1.5f}));
    EXPECT_EQ(Floats(out[1]), (std::vector<float>{9, 6.25f, 4, 2.25f, 1, 0.25f}));
  }
  // The condition false: sel is x itself, copied by an Identity.
  ModelBuilder m = ShapeConditionIf(false, 2);
  ImportResult r = MustImport(m, true, opts);
  EXPECT_THAT(Ops(r.graph), ::testing::ElementsAre("Abs", "Identity", "Relu", "Mul"));
  EXPECT_EQ(ValueNamed(r.graph, "y").shape, (ir::Shape{2, 3}));
  std::vector<Tensor> out = RunBothAndCompare(m, {x}, opts);
  ASSERT_GE(out.size(), 1u);
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{0, 0, 0, 0, 0, 0}));  // Relu(x), x < 0
}

// An If with an initializer condition whose then branch holds an If with a
// shape condition reading a value of the outer branch: both fold.
TEST(FoldShapesTest, NestedIfsFold) {
  ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {"N", 4});
  m.Input("p", TP::FLOAT, {"N", 4});
  onnx::TensorProto* on = m.graph()->add_initializer();
  on->set_name("on");
  on->set_data_type(TP::BOOL);
  on->add_int32_data(1);
  onnx::NodeProto* outer = m.Node("If", {"on"}, {"y"}, "outer");
  onnx::GraphProto* then_g = AttrGraph(outer, "then_branch");
  then_g->set_name("outer_then");
  testing::AddNode(then_g, "Mul", {"x", "p"}, {"xp"}, "mul");
  testing::AddNode(then_g, "Size", {"xp"}, {"n"}, "size");
  onnx::TensorProto* eight = then_g->add_initializer();
  FillInt64s(eight, "eight", {}, {8});
  testing::AddNode(then_g, "Equal", {"n", "eight"}, {"inner_cond"}, "eq");
  onnx::NodeProto* inner = testing::AddNode(then_g, "If", {"inner_cond"}, {"in_y"}, "inner");
  onnx::GraphProto* it = AttrGraph(inner, "then_branch");
  it->set_name("inner_then");
  testing::AddNode(it, "Sigmoid", {"xp"}, {"sg"}, "sig");
  testing::AddValueInfo(it->mutable_output(), "sg", TP::FLOAT, {"N", 4});
  onnx::GraphProto* ie = AttrGraph(inner, "else_branch");
  ie->set_name("inner_else");
  testing::AddNode(ie, "Tanh", {"p"}, {"th"}, "tanh");
  testing::AddValueInfo(ie->mutable_output(), "th", TP::FLOAT, {"N", 4});
  testing::AddValueInfo(then_g->mutable_output(), "in_y", TP::FLOAT, {"N", 4});
  onnx::GraphProto* else_g = AttrGraph(outer, "else_branch");
  else_g->set_name("outer_else");
  testing::AddNode(else_g, "Neg", {"x"}, {"nx"}, "neg");
  testing::AddValueInfo(else_g->mutable_output(), "nx", TP::FLOAT, {"N", 4});
  m.Output("y", TP::FLOAT, {"N", 4});

  for (int64_t n : {2, 3}) {  // 2x4 = 8 elements: Sigmoid; 3x4: Tanh
    ImportOptions opts;
    opts.input_shapes["x"] = {n, 4};
    opts.input_shapes["p"] = {n, 4};
    ImportResult r = MustImport(m, true, opts);
    // Mul stays when only Tanh reads p (dead code goes in a graph pass).
    EXPECT_THAT(Ops(r.graph), ::testing::ElementsAre("Mul", n == 2 ? "Sigmoid" : "Tanh")) << n;
    RunBothAndCompare(m, {Iota({n, 4}), Iota({n, 4})}, opts);
  }
}

TEST(FoldShapesTest, IfWithARunTimeConditionStays) {
  ModelBuilder m(17);
  m.Input("c", TP::BOOL, {});
  m.Input("x", TP::FLOAT, {2});
  onnx::NodeProto* node = m.Node("If", {"c"}, {"y"}, "if");
  onnx::GraphProto* t = AttrGraph(node, "then_branch");
  t->set_name("then");
  testing::AddNode(t, "Neg", {"x"}, {"a"}, "neg");
  testing::AddValueInfo(t->mutable_output(), "a", TP::FLOAT, {int64_t{2}});
  onnx::GraphProto* e = AttrGraph(node, "else_branch");
  e->set_name("else");
  testing::AddNode(e, "Abs", {"x"}, {"b"}, "abs");
  testing::AddValueInfo(e->mutable_output(), "b", TP::FLOAT, {int64_t{2}});
  m.Output("y", TP::FLOAT, {int64_t{2}});
  ImportResult r = MustImport(m, true);
  EXPECT_THAT(Ops(r.graph), ::testing::ElementsAre("If"));
}

// An If on a run-time condition stays, but an If inside its branch whose
// condition follows from an outer value's shape folds there.
TEST(FoldShapesTest, IfsInsideBranchesFold) {
  ModelBuilder m(17);
  m.Input("c", TP::BOOL, {});
  m.Input("x", TP::FLOAT, {"N", 4});
  onnx::NodeProto* outer = m.Node("If", {"c"}, {"y"}, "outer");
  for (bool then : {true, false}) {
    onnx::GraphProto* b = AttrGraph(outer, then ? "then_branch" : "else_branch");
    const std::string p = then ? "t_" : "e_";
    b->set_name(p + "body");
    testing::AddNode(b, "Size", {"x"}, {p + "n"}, p + "size");
    FillInt64s(b->add_initializer(), p + "eight", {}, {8});
    testing::AddNode(b, "Equal", {p + "n", p + "eight"}, {p + "cond"}, p + "eq");
    onnx::NodeProto* inner = testing::AddNode(b, "If", {p + "cond"}, {p + "y"}, p + "inner");
    onnx::GraphProto* it = AttrGraph(inner, "then_branch");
    it->set_name(p + "inner_then");
    testing::AddNode(it, then ? "Sigmoid" : "Neg", {"x"}, {p + "a"}, p + "a");
    testing::AddValueInfo(it->mutable_output(), p + "a", TP::FLOAT, {"N", 4});
    onnx::GraphProto* ie = AttrGraph(inner, "else_branch");
    ie->set_name(p + "inner_else");
    testing::AddNode(ie, "Tanh", {"x"}, {p + "b"}, p + "b");
    testing::AddValueInfo(ie->mutable_output(), p + "b", TP::FLOAT, {"N", 4});
    testing::AddValueInfo(b->mutable_output(), p + "y", TP::FLOAT, {"N", 4});
  }
  m.Output("y", TP::FLOAT, {"N", 4});
  ImportOptions opts;
  opts.input_shapes["x"] = {2, 4};
  ImportResult r = MustImport(m, true, opts);
  ASSERT_THAT(Ops(r.graph), ::testing::ElementsAre("If"));
  for (const char* branch : {"then_branch", "else_branch"}) {
    const Graph& b = **r.graph.nodes()[0].Attr<std::shared_ptr<const Graph>>(branch);
    EXPECT_THAT(Ops(b), ::testing::ElementsAre(branch[0] == 't' ? "Sigmoid" : "Neg"));
  }
  for (bool c : {true, false}) {
    Tensor cond(ir::DType::kBool, {});
    cond.data<bool>()[0] = c;
    RunBothAndCompare(m, {cond, Iota({2, 4})}, opts);
  }
}

// An If on a run-time condition whose branches declare their output with a
// symbolic dim: then Mul(x, w) (w f32[4]), else MatMul(x, W) (W f32[8,4]).
ModelBuilder WidthIf() {
  ModelBuilder m(17);
  m.Input("c", TP::BOOL, {});
  m.Input("x", TP::FLOAT, {"N", "K"});
  m.Initializer("w", {4}, {1, 2, 3, 4});
  m.Initializer("W", {8, 4}, std::vector<float>(32, 0.5f));
  onnx::NodeProto* node = m.Node("If", {"c"}, {"y"}, "if");
  onnx::GraphProto* t = AttrGraph(node, "then_branch");
  t->set_name("then");
  testing::AddNode(t, "Mul", {"x", "w"}, {"a"}, "mul");
  testing::AddValueInfo(t->mutable_output(), "a", TP::FLOAT, {"batch", 4});
  onnx::GraphProto* e = AttrGraph(node, "else_branch");
  e->set_name("else");
  testing::AddNode(e, "MatMul", {"x", "W"}, {"b"}, "matmul");
  testing::AddValueInfo(e->mutable_output(), "b", TP::FLOAT, {"batch", 4});
  m.Node("Relu", {"y"}, {"z"}, "relu");
  m.Output("z", TP::FLOAT, {"N", 4});
  return m;
}

// With x [3,4] only the then branch can run. Its output takes its static type, the unfit else branch is marked with
// libonnx's reason and takes the same output type, so the If and what
// follows it are static.
TEST(FoldShapesTest, BranchOutputsTakeStaticTypesAndUnfitBranchesAreMarked) {
  ModelBuilder m = WidthIf();
  ImportOptions opts;
  opts.input_shapes["x"] = {3, 4};
  ImportResult r = MustImport(m, true, opts);
  ASSERT_THAT(Ops(r.graph), ::testing::ElementsAre("If", "Relu"));
  EXPECT_THAT(NonStatic(r.graph), ::testing::IsEmpty());
  EXPECT_EQ(ValueNamed(r.graph, "y").shape, (ir::Shape{3, 4}));
  const ir::Node& node = r.graph.nodes()[0];
  for (const char* branch : {"then_branch", "else_branch"}) {
    const Graph& b = **node.Attr<std::shared_ptr<const Graph>>(branch);
    EXPECT_EQ(b.value(b.outputs()[0]).shape, (ir::Shape{3, 4})) << branch;
  }
  EXPECT_FALSE(node.HasAttr("kiln_unfit_then_branch"));
  absl::StatusOr<std::string> why = node.Attr<std::string>("kiln_unfit_else_branch");
  ASSERT_TRUE(why.ok()) << why.status();
  EXPECT_THAT(*why, ::testing::HasSubstr("MatMul"));
  // x [3,8]: the else branch fits, the then branch does not.
  opts.input_shapes["x"] = {3, 8};
  ImportResult r8 = MustImport(m, true, opts);
  EXPECT_TRUE(r8.graph.nodes()[0].HasAttr("kiln_unfit_then_branch"));
  EXPECT_FALSE(r8.graph.nodes()[0].HasAttr("kiln_unfit_else_branch"));
  EXPECT_THAT(NonStatic(r8.graph), ::testing::IsEmpty());
}

// A Loop whose body leaves its carried input untyped (as ONNX's function
// expansions do): body = `op`(prev, delta), the scan output stacks prev.
ModelBuilder LoopWithUntypedState(const std::string& op) {
  ModelBuilder m(17);
  m.Input("m", TP::INT64, {});
  m.Input("c", TP::BOOL, {});
  m.Input("start", TP::FLOAT, {int64_t{3}});
  m.Input("delta", TP::FLOAT, {int64_t{3}});
  onnx::NodeProto* loop = m.Node("Loop", {"m", "c", "start"}, {"y", "s"}, "loop");
  onnx::GraphProto* b = AttrGraph(loop, "body");
  b->set_name("body");
  testing::AddValueInfo(b->mutable_input(), "i", TP::INT64, {});
  testing::AddValueInfo(b->mutable_input(), "cond", TP::BOOL, {});
  b->add_input()->set_name("prev");
  testing::AddNode(b, "Identity", {"cond"}, {"cond_out"}, "keep");
  onnx::NodeProto* step = testing::AddNode(b, op, {"prev", "delta"}, {"cur"}, "step");
  if (op == "Concat") AttrInt(step, "axis", 0);
  testing::AddNode(b, "Identity", {"prev"}, {"row"}, "row");
  for (const char* o : {"cond_out", "cur", "row"}) b->add_output()->set_name(o);
  m.Node("Neg", {"y"}, {"z"}, "neg");
  m.Output("z", TP::FLOAT, {int64_t{3}});
  m.Output("s", TP::FLOAT, {"?", int64_t{3}});
  return m;
}

TEST(FoldShapesTest, UntypedLoopBodyKeepingItsStateTypeIsTyped) {
  ModelBuilder m = LoopWithUntypedState("Add");
  ImportResult r = MustImport(m, true);
  ASSERT_THAT(Ops(r.graph), ::testing::ElementsAre("Loop", "Neg"));
  const Graph& body = **r.graph.nodes()[0].Attr<std::shared_ptr<const Graph>>("body");
  EXPECT_EQ(ValueNamed(body, "prev").shape, (ir::Shape{3}));
  EXPECT_TRUE(NonStatic(body).empty()) << absl::StrJoin(NonStatic(body), ", ");
  // The Loop's final value has the carried value's type.
  EXPECT_TRUE(IsStatic(ValueNamed(r.graph, "y")));
  EXPECT_EQ(ValueNamed(r.graph, "y").shape, (ir::Shape{3}));
  for (int64_t trips : {1, 4}) {
    Tensor c(ir::DType::kBool, {});
    c.data<bool>()[0] = true;
    RunBothAndCompare(m, {Tensor::Scalar<int64_t>(trips), c, Iota({3}), Iota({3})});
  }
}

TEST(FoldShapesTest, UntypedLoopBodyWhoseStateGrowsStaysUntyped) {
  ImportResult r = MustImport(LoopWithUntypedState("Concat"), true);
  const Graph& body = **r.graph.nodes()[0].Attr<std::shared_ptr<const Graph>>("body");
  EXPECT_FALSE(IsStatic(ValueNamed(body, "prev")));
  EXPECT_FALSE(IsStatic(ValueNamed(body, "cur")));
}

TEST(FoldShapesTest, FoldedNodesKeepFileIndicesOfOthersInErrors) {
  // After folding, an error still names the failing node by its index in
  // the file
  // (Opset 18: libonnx's checker only warns, so the importer's own check
  // speaks.)
  ModelBuilder m = ChannelSplit();
  m.model().mutable_opset_import(0)->set_version(18);
  auto* bad = m.Node("Relu", {"a"}, {"r2"}, "bad_relu");
  AttrInt(bad, "k", 1);
  AttrInt(bad, "k", 2);
  absl::StatusOr<ImportResult> r =
      ImportModelBytes(m.Bytes(), {}, "fold_test.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("node #9 'bad_relu' (Relu): attribute 'k' "
                                   "is given twice"));
}

// Squeeze before opset 13 without `axes` drops every dim of extent 1;
// libonnx 1.12 shapes it only with the attribute. x[batch,1,2] with batch
// bound to 1 -> Squeeze -> Sigmoid: [2], though the output is declared
// [batch] (as aecmos's exporter wrote it; ONNX Runtime computes [2] too).
ModelBuilder SqueezeWithoutAxes(int64_t opset) {
  ModelBuilder m(opset);
  m.Input("x", TP::FLOAT, {"batch", 1, 2});
  m.Node("Squeeze", {"x"}, {"s"}, "squeeze");
  m.Node("Sigmoid", {"s"}, {"y"}, "sigmoid");
  m.Output("y", TP::FLOAT, {"batch"});
  return m;
}

TEST(FoldShapesTest, SqueezeWithoutAxesIsShapedBeforeOpset13) {
  for (int64_t opset : {9, 11, 13}) {
    SCOPED_TRACE(opset);
    const ModelBuilder m = SqueezeWithoutAxes(opset);
    ImportResult r = MustImport(m, /*fold=*/true);
    EXPECT_THAT(NonStatic(r.graph), ::testing::IsEmpty());
    EXPECT_EQ(ValueNamed(r.graph, "y").shape, (ir::Shape{2}));
    EXPECT_THAT(r.warnings, ::testing::Contains(::testing::HasSubstr(
                                "'y' is declared [1] but computes [2]")));
    // The spelled-out Squeeze computes what the bare one does.
    const std::vector<Tensor> out = RunBothAndCompare(m, {Iota({1, 1, 2})});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape(), (ir::Shape{2}));
  }
}

}  // namespace
}  // namespace kiln::frontend
