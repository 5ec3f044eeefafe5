// Tests for the ONNX importer: models built in C++ (test_models.h), imported
// from bytes or files, checked value by value against hand-derived results.
#include "frontend/onnx/importer.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/test_models.h"
#include "ir/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ir::DType;
using ir::Graph;
using ir::ValueId;
using testing::AttrFloat;
using testing::AttrGraph;
using testing::AttrInt;
using testing::AttrInts;
using testing::AttrTensor;
using testing::ModelBuilder;
using TP = onnx::TensorProto;

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

absl::StatusOr<ImportResult> Import(const ModelBuilder& m,
                                    const ImportOptions& opts = {}) {
  return ImportModelBytes(m.Bytes(), opts, "test.onnx");
}

std::string Message(const absl::StatusOr<ImportResult>& r) {
  return std::string(r.status().message());
}

ValueId Find(const Graph& g, const std::string& name) {
  std::optional<ValueId> id = g.FindValue(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(0);
}

std::vector<std::string> Ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const ir::Node& n : g.nodes()) ops.push_back(n.op);
  return ops;
}

// x[1,3] -> Relu -> y.
ModelBuilder ReluModel(int64_t opset = 17, int64_t ir = 8) {
  ModelBuilder m(opset, ir);
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{3}});
  m.Node("Relu", {"x"}, {"y"}, "relu0");
  m.Output("y", TP::FLOAT, {int64_t{1}, int64_t{3}});
  return m;
}

TEST(ImporterTest, ImportsSimpleModel) {
  absl::StatusOr<ImportResult> r = Import(ReluModel());
  ASSERT_TRUE(r.ok()) << r.status();
  const Graph& g = r->graph;
  EXPECT_EQ(g.opset(), 17);
  ASSERT_EQ(g.inputs().size(), 1u);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.inputs()[0]).name, "x");
  EXPECT_EQ(g.value(g.inputs()[0]).dtype, DType::kF32);
  EXPECT_EQ(g.value(g.inputs()[0]).shape, (ir::Shape{1, 3}));
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, "Relu");
  EXPECT_EQ(g.nodes()[0].name, "relu0");
  EXPECT_EQ(g.nodes()[0].domain, "");
  EXPECT_EQ(g.nodes()[0].outputs[0], g.outputs()[0]);
  EXPECT_TRUE(r->warnings.empty()) << absl::StrJoin(r->warnings, "\n");
}

TEST(ImporterTest, SortsShuffledGraphStably) {
  // File order: c = Add(b, x); b = Relu(a); a = Neg(x); d = Abs(x);
  // e = Sigmoid(x). Dependencies force Neg, Relu before Add; the
  // independent Abs and Sigmoid keep their relative file order.
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Node("Add", {"b", "x"}, {"c"}, "add");
  m.Node("Relu", {"a"}, {"b"}, "relu");
  m.Node("Neg", {"x"}, {"a"}, "neg");
  m.Node("Abs", {"x"}, {"d"}, "abs");
  m.Node("Sigmoid", {"x"}, {"e"}, "sig");
  m.Output("c", TP::FLOAT, {int64_t{2}});
  m.Output("d", TP::FLOAT, {int64_t{2}});
  m.Output("e", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ops(r->graph), (std::vector<std::string>{"Neg", "Relu", "Add",
                                                     "Abs", "Sigmoid"}));
  // Inferred intermediate shapes.
  EXPECT_EQ(r->graph.value(Find(r->graph, "b")).shape, (ir::Shape{2}));
  EXPECT_EQ(r->graph.value(Find(r->graph, "b")).dtype, DType::kF32);
}

TEST(ImporterTest, CycleIsAnErrorNamingTheNodes) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Node("Add", {"x", "b"}, {"a"}, "first");
  m.Node("Relu", {"a"}, {"b"}, "second");
  m.Output("b", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"), HasSubstr("cycle"),
                                HasSubstr("node #0 'first' (Add)"),
                                HasSubstr("node #1 'second' (Relu)")));
}

TEST(ImporterTest, UndefinedInputIsAnErrorNamingTheNode) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Node("Relu", {"x"}, {"a"}, "ok");
  m.Node("Add", {"a", "ghost"}, {"y"}, "adder");
  m.Output("y", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"),
                                HasSubstr("node #1 'adder' (Add)"),
                                HasSubstr("'ghost'"),
                                HasSubstr("never defined")));
}

TEST(ImporterTest, FoldsConstantNodes) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}});
  TP* t = AttrTensor(m.Node("Constant", {}, {"c"}, "const_t"), "value");
  testing::FillFloats(t, "", {2}, {0.5f, -4.0f});
  AttrFloat(m.Node("Constant", {}, {"s"}, "const_f"), "value_float", 3.0f);
  AttrInts(m.Node("Constant", {}, {"shape"}, "const_i"), "value_ints", {2, 1});
  m.Node("Add", {"x", "c"}, {"a"}, "add");
  m.Node("Mul", {"a", "s"}, {"b"}, "mul");
  m.Node("Reshape", {"b", "shape"}, {"y"}, "reshape");
  m.Output("y", TP::FLOAT, {int64_t{2}, int64_t{1}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  const Graph& g = r->graph;
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"Add", "Mul", "Reshape"}));
  ASSERT_EQ(g.constants().size(), 3u);
  const ir::Tensor* c = g.constant(Find(g, "c"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->shape(), (ir::Shape{2}));
  EXPECT_EQ(c->data<float>()[1], -4.0f);
  const ir::Tensor* s = g.constant(Find(g, "s"));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->rank(), 0);
  EXPECT_EQ(s->data<float>()[0], 3.0f);
  const ir::Tensor* shape = g.constant(Find(g, "shape"));
  ASSERT_NE(shape, nullptr);
  EXPECT_EQ(shape->dtype(), DType::kI64);
  EXPECT_EQ(shape->ToInt64Vector(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(g.value(Find(g, "s")).dtype, DType::kF32);
  // Shape inference sees the constant shape through data propagation.
  EXPECT_EQ(g.value(Find(g, "y")).shape, (ir::Shape{2, 1}));
}

TEST(ImporterTest, StringConstantsAreUnimplemented) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}});
  testing::AttrString(m.Node("Constant", {}, {"c"}, "strs"), "value_string",
                      "hello");
  m.Node("Identity", {"x"}, {"y"}, "id");
  m.Output("y", TP::FLOAT, {int64_t{2}});
  m.Output("c", TP::STRING, {});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"),
                                HasSubstr("node #0 'strs' (Constant)"),
                                HasSubstr("value_string")));
}

TEST(ImporterTest, InitializersAreConstantsNotInputs) {
  // IR 3 style: the weight is listed as a graph input too.
  ModelBuilder m(/*opset=*/9, /*ir_version=*/3);
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Input("w", TP::FLOAT, {int64_t{2}});
  TP* w = m.graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(TP::FLOAT);
  w->add_dims(2);
  const float vals[2] = {1.25f, 2.5f};
  w->set_raw_data(std::string(reinterpret_cast<const char*>(vals), 8));
  m.Node("Add", {"x", "w"}, {"y"}, "add");
  m.Output("y", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  const Graph& g = r->graph;
  EXPECT_EQ(g.opset(), 9);
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.value(g.inputs()[0]).name, "x");
  const ir::Tensor* t = g.constant(Find(g, "w"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->data<float>()[1], 2.5f);
}

TEST(ImporterTest, InitializerShapeMustMatchDeclaredInput) {
  ModelBuilder m(/*opset=*/9, /*ir_version=*/3);
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Input("w", TP::FLOAT, {int64_t{3}});
  m.Initializer("w", {2}, {1, 2});
  m.Node("Add", {"x", "w"}, {"y"}, "add");
  m.Output("y", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"),
                                HasSubstr("initializer 'w'"),
                                HasSubstr("[2]"), HasSubstr("[3]")));
}

TEST(ImporterTest, ExternalDataResolvesAgainstModelFolder) {
  const std::string dir = TmpDir() + "/ext_model";
  ASSERT_EQ(std::system(("mkdir -p " + dir + "/weights").c_str()), 0);
  const float vals[3] = {7.0f, 8.0f, 9.0f};
  WriteFile(dir + "/weights/w.bin",
            std::string("pad!") +
                std::string(reinterpret_cast<const char*>(vals), 12));
  auto build = [](const std::string& location, const std::string& offset) {
    ModelBuilder m;
    m.Input("x", TP::FLOAT, {int64_t{3}});
    TP* w = m.graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(TP::FLOAT);
    w->add_dims(3);
    w->set_data_location(TP::EXTERNAL);
    auto* e = w->add_external_data();
    e->set_key("location");
    e->set_value(location);
    e = w->add_external_data();
    e->set_key("offset");
    e->set_value(offset);
    m.Node("Add", {"x", "w"}, {"y"}, "add");
    m.Output("y", TP::FLOAT, {int64_t{3}});
    return m;
  };
  WriteFile(dir + "/model.onnx", build("weights/w.bin", "4").Bytes());
  absl::StatusOr<ImportResult> r = ImportModelFile(dir + "/model.onnx");
  ASSERT_TRUE(r.ok()) << r.status();
  const ir::Tensor* w = r->graph.constant(Find(r->graph, "w"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data<float>()[0], 7.0f);
  EXPECT_EQ(w->data<float>()[2], 9.0f);

  WriteFile(dir + "/escape.onnx", build("../ext_model/weights/w.bin", "4").Bytes());
  r = ImportModelFile(dir + "/escape.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("escape.onnx"),
                                HasSubstr("initializer 'w'"),
                                HasSubstr("'..'")));

  WriteFile(dir + "/absolute.onnx",
            build(dir + "/weights/w.bin", "4").Bytes());
  r = ImportModelFile(dir + "/absolute.onnx");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);

  WriteFile(dir + "/short.onnx", build("weights/w.bin", "8").Bytes());
  r = ImportModelFile(dir + "/short.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r), AllOf(HasSubstr("short.onnx"), HasSubstr("too short")));

  // From bytes, base_dir says where the data lives.
  ImportOptions opts;
  opts.base_dir = dir;
  r = ImportModelBytes(build("weights/w.bin", "4").Bytes(), opts, "mem");
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(ImporterTest, BindsDynamicDimsToOneWithOneWarning) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {std::string("batch"), int64_t{3}, std::string("?")});
  m.Input("z", TP::FLOAT, {std::string("batch")});
  m.Node("Relu", {"x"}, {"y"}, "relu");
  m.Node("Neg", {"z"}, {"w"}, "neg");
  m.Output("y", TP::FLOAT, {std::string("batch"), int64_t{3}, std::string("?")});
  m.Output("w", TP::FLOAT, {std::string("batch")});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->warnings.size(), 1u) << absl::StrJoin(r->warnings, "\n");
  EXPECT_THAT(r->warnings[0],
              AllOf(HasSubstr("input 'x' dim 0 ('batch') -> 1"),
                    HasSubstr("input 'x' dim 2 -> 1"),
                    HasSubstr("input 'z' dim 0 ('batch') -> 1")));
  const Graph& g = r->graph;
  EXPECT_EQ(g.value(Find(g, "x")).shape, (ir::Shape{1, 3, 1}));
  EXPECT_EQ(g.value(Find(g, "y")).shape, (ir::Shape{1, 3, 1}));
  EXPECT_EQ(g.value(Find(g, "w")).shape, (ir::Shape{1}));
}

// Paddle writes unknown dims as dim_value -1; ONNX Runtime accepts them.
TEST(ImporterTest, MinusOneDimIsDynamicOtherNegativesAreRefused) {
  auto build = [](int64_t dim) {
    ModelBuilder m;
    m.Input("x", TP::FLOAT, {dim, int64_t{3}});
    m.Node("Relu", {"x"}, {"y"}, "relu");
    m.Output("y", TP::FLOAT, {dim, int64_t{3}});
    return m;
  };
  absl::StatusOr<ImportResult> r = Import(build(-1));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->warnings.size(), 2u) << absl::StrJoin(r->warnings, "\n");
  EXPECT_THAT(r->warnings[0], HasSubstr("declared as -1 read as dynamic: input 'x' dim 0"));
  EXPECT_THAT(r->warnings[1], HasSubstr("input 'x' dim 0 -> 1"));
  EXPECT_EQ(r->graph.value(Find(r->graph, "y")).shape, (ir::Shape{1, 3}));

  ImportOptions opts;
  opts.input_shapes["x"] = {5, 3};
  r = Import(build(-1), opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.value(Find(r->graph, "y")).shape, (ir::Shape{5, 3}));

  r = Import(build(-2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("'x' dim 0"), HasSubstr("negative (-2)")));
}

TEST(ImporterTest, InputShapesOptionBindsDims) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {std::string("N"), int64_t{3}});
  m.Node("Relu", {"x"}, {"y"}, "relu");
  m.Node("Shape", {"y"}, {"s"}, "shape");
  m.Output("s", TP::INT64, {int64_t{2}});
  ImportOptions opts;
  opts.input_shapes["x"] = {8, 3};
  absl::StatusOr<ImportResult> r = Import(m, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->warnings.empty()) << absl::StrJoin(r->warnings, "\n");
  EXPECT_EQ(r->graph.value(Find(r->graph, "y")).shape, (ir::Shape{8, 3}));
  EXPECT_EQ(r->graph.value(Find(r->graph, "s")).dtype, DType::kI64);

  opts.input_shapes["x"] = {8, 4};
  r = Import(m, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"), HasSubstr("'x'"),
                                HasSubstr("dim 1")));

  opts.input_shapes.clear();
  opts.input_shapes["x"] = {8};
  EXPECT_EQ(Import(m, opts).status().code(),
            absl::StatusCode::kInvalidArgument);

  opts.input_shapes.clear();
  opts.input_shapes["nope"] = {1};
  r = Import(m, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r), HasSubstr("'nope'"));
}

TEST(ImporterTest, UnknownOpsAreListedTogether) {
  ModelBuilder m;
  m.Opset("com.acme", 1);
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Node("Frobnicate", {"x"}, {"a"}, "f1");
  m.Node("Relu", {"a"}, {"b"}, "fine");
  m.Node("Twiddle", {"b"}, {"c"}, "t1");
  m.Node("Custom", {"c"}, {"y"}, "c1")->set_domain("com.acme");
  m.Output("y", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"), HasSubstr("3 unknown"),
                                HasSubstr("node #0 'f1' (Frobnicate)"),
                                HasSubstr("node #2 't1' (Twiddle)"),
                                HasSubstr("node #3 'c1' (com.acme.Custom)")));
  EXPECT_THAT(Message(r), ::testing::Not(HasSubstr("Relu")));
}

TEST(ImporterTest, OpNewerThanTheOpsetIsUnknown) {
  // LayerNormalization exists only from opset 17.
  ModelBuilder m(/*opset=*/16);
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Node("LayerNormalization", {"x"}, {"y"}, "ln");
  m.Output("y", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r), HasSubstr("node #0 'ln' (LayerNormalization)"));
}

TEST(ImporterTest, Opset7Model) {
  ModelBuilder m(/*opset=*/7, /*ir_version=*/3);
  m.Input("x", TP::FLOAT, {int64_t{2}, int64_t{3}});
  m.Input("b", TP::FLOAT, {int64_t{3}});
  m.Node("Add", {"x", "b"}, {"s"}, "add");
  m.Node("Relu", {"s"}, {"y"}, "relu");
  m.Output("y", TP::FLOAT, {int64_t{2}, int64_t{3}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.opset(), 7);
  EXPECT_EQ(r->graph.inputs().size(), 2u);
  EXPECT_EQ(r->graph.value(Find(r->graph, "s")).shape, (ir::Shape{2, 3}));
}

TEST(ImporterTest, Opset18ModelLoadsDespiteTheOlderChecker) {
  // ReduceMean takes axes as an input from opset 18; libonnx 1.12's checker
  // only knows the opset-13 form and objects.
  ModelBuilder m(/*opset=*/18);
  m.Input("x", TP::FLOAT, {int64_t{2}, int64_t{3}});
  m.graph()->add_initializer();
  testing::FillInt64s(m.graph()->mutable_initializer(0), "axes", {1}, {1});
  AttrInt(m.Node("ReduceMean", {"x", "axes"}, {"y"}, "mean"), "keepdims", 1);
  m.Output("y", TP::FLOAT, {int64_t{2}, int64_t{1}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.opset(), 18);
  ASSERT_EQ(r->graph.nodes().size(), 1u);
  EXPECT_EQ(r->graph.nodes()[0].inputs.size(), 2u);
  EXPECT_THAT(absl::StrJoin(r->warnings, "\n"), HasSubstr("checker"));
}

TEST(ImporterTest, IrVersion10Accepted) {
  absl::StatusOr<ImportResult> r = Import(ReluModel(/*opset=*/18, /*ir=*/10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.opset(), 18);
  EXPECT_THAT(absl::StrJoin(r->warnings, "\n"), HasSubstr("IR version 10"));
}

TEST(ImporterTest, UnsupportedVersionsAreUnimplemented) {
  absl::StatusOr<ImportResult> r = Import(ReluModel(/*opset=*/19, /*ir=*/8));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(r), HasSubstr("opset 19"));
  r = Import(ReluModel(/*opset=*/17, /*ir=*/11));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(r), HasSubstr("IR version 11"));
}

TEST(ImporterTest, OpsetsBefore7LoadWithAWarning) {
  // ONNX's own conformance data still has opset 1 and 6 models.
  absl::StatusOr<ImportResult> r = Import(ReluModel(/*opset=*/6, /*ir=*/3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.opset(), 6);
  EXPECT_THAT(absl::StrJoin(r->warnings, "\n"), HasSubstr("opset 6 is older"));
}

TEST(ImporterTest, AiOnnxDomainIsTheDefaultDomain) {
  ModelBuilder m(/*opset=*/13);
  m.model().mutable_opset_import(0)->set_domain("ai.onnx");
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Node("Relu", {"x"}, {"y"}, "r")->set_domain("ai.onnx");
  m.Output("y", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.opset(), 13);
  EXPECT_EQ(r->graph.nodes()[0].domain, "");
}

TEST(ImporterTest, UnusedOpsetImportIsAWarning) {
  ModelBuilder m = ReluModel();
  m.Opset("com.unused", 3);
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(absl::StrJoin(r->warnings, "\n"), HasSubstr("'com.unused'"));
}

// Builds: cond (bool scalar), x [2]; If(cond) then: x + one (a Constant
// inside the branch), else: Neg(x).
ModelBuilder IfModel() {
  ModelBuilder m(/*opset=*/13);
  m.Input("cond", TP::BOOL, {});
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Node("Relu", {"x"}, {"rx"}, "relu");
  onnx::NodeProto* node = m.Node("If", {"cond"}, {"y"}, "branch");
  onnx::GraphProto* then_g = AttrGraph(node, "then_branch");
  then_g->set_name("then_body");
  TP* one = AttrTensor(testing::AddNode(then_g, "Constant", {}, {"one"}, "c1"),
                       "value");
  testing::FillFloats(one, "", {1}, {1.0f});
  testing::AddNode(then_g, "Add", {"rx", "one"}, {"t_out"}, "then_add");
  testing::AddValueInfo(then_g->mutable_output(), "t_out", TP::FLOAT,
                        {int64_t{2}});
  onnx::GraphProto* else_g = AttrGraph(node, "else_branch");
  else_g->set_name("else_body");
  testing::AddNode(else_g, "Neg", {"x"}, {"e_out"}, "else_neg");
  testing::AddValueInfo(else_g->mutable_output(), "e_out", TP::FLOAT,
                        {int64_t{2}});
  m.Output("y", TP::FLOAT, {int64_t{2}});
  return m;
}

TEST(ImporterTest, IfBranchesCaptureOuterValues) {
  absl::StatusOr<ImportResult> r = Import(IfModel());
  ASSERT_TRUE(r.ok()) << r.status();
  const Graph& g = r->graph;
  ASSERT_EQ(Ops(g), (std::vector<std::string>{"Relu", "If"}));
  const ir::Node& if_node = g.nodes()[1];
  absl::StatusOr<std::shared_ptr<const Graph>> then_g =
      if_node.Attr<std::shared_ptr<const Graph>>("then_branch");
  ASSERT_TRUE(then_g.ok()) << then_g.status();
  const Graph& t = **then_g;
  EXPECT_EQ(t.name(), "then_body");
  EXPECT_EQ(t.opset(), 13);
  EXPECT_TRUE(t.inputs().empty());
  ASSERT_EQ(t.captures().size(), 1u);
  EXPECT_EQ(t.captures()[0].outer_name, "rx");
  EXPECT_EQ(t.value(t.captures()[0].inner).name, "rx");
  EXPECT_EQ(t.value(t.captures()[0].inner).shape, (ir::Shape{2}));
  EXPECT_EQ(Ops(t), (std::vector<std::string>{"Add"}));
  const ir::Tensor* one = t.constant(Find(t, "one"));
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->data<float>()[0], 1.0f);
  ASSERT_EQ(t.outputs().size(), 1u);
  EXPECT_EQ(t.value(t.outputs()[0]).name, "t_out");

  const Graph& e =
      **if_node.Attr<std::shared_ptr<const Graph>>("else_branch");
  ASSERT_EQ(e.captures().size(), 1u);
  EXPECT_EQ(e.captures()[0].outer_name, "x");
  EXPECT_EQ(Ops(e), (std::vector<std::string>{"Neg"}));
}

// An If whose branches disagree is refused at import, whichever branch the
// condition would take (ONNX Runtime refuses such a model at load).
onnx::GraphProto* Branch(ModelBuilder& m, const char* name) {
  for (onnx::NodeProto& n : *m.graph()->mutable_node()) {
    if (n.op_type() != "If") continue;
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.name() == name) return a.mutable_g();
    }
  }
  return nullptr;
}

void ExpectInvalidIf(const ModelBuilder& m, const std::string& what) {
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok()) << "an invalid If imported (" << what << ")";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("'branch' (If)")) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(what)) << r.status();
}

TEST(ImporterTest, IfBranchWithTooManyOutputsIsRefused) {
  ModelBuilder m = IfModel();
  onnx::GraphProto* e = Branch(m, "else_branch");
  testing::AddNode(e, "Abs", {"x"}, {"e_abs"}, "else_abs");
  testing::AddValueInfo(e->mutable_output(), "e_abs", TP::FLOAT, {int64_t{2}});
  ExpectInvalidIf(m, "else_branch has 2 output(s), the If has 1");
}

TEST(ImporterTest, IfBranchWithTooFewOutputsIsRefused) {
  ModelBuilder m = IfModel();
  Branch(m, "then_branch")->clear_output();
  ExpectInvalidIf(m, "then_branch has 0 output(s), the If has 1");
}

TEST(ImporterTest, IfBranchWithAnotherDTypeIsRefused) {
  ModelBuilder m = IfModel();
  onnx::GraphProto* e = Branch(m, "else_branch");
  e->clear_output();
  onnx::NodeProto* cast = testing::AddNode(e, "Cast", {"e_out"}, {"e_int"}, "else_cast");
  onnx::AttributeProto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(TP::INT64);
  testing::AddValueInfo(e->mutable_output(), "e_int", TP::INT64, {int64_t{2}});
  ExpectInvalidIf(m, "output 0 of else_branch ('e_int', tensor(INT64, rank 1))");
}

// The branch declares no type for its output: the one inference gives it
// (INT64, from the Cast) contradicts the If's declared FLOAT output.
TEST(ImporterTest, IfBranchWithAnInferredOtherDTypeIsRefused) {
  ModelBuilder m = IfModel();
  onnx::GraphProto* e = Branch(m, "else_branch");
  e->clear_output();
  onnx::NodeProto* cast = testing::AddNode(e, "Cast", {"e_out"}, {"e_int"}, "else_cast");
  onnx::AttributeProto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(TP::INT64);
  e->add_output()->set_name("e_int");
  ExpectInvalidIf(m, "else_branch ('e_int', tensor(INT64");
}

// The If declares y of rank 1: branches both of rank 2 contradict it.
TEST(ImporterTest, IfBranchesOfAnotherRankThanTheIfAreRefused) {
  ModelBuilder m = IfModel();
  for (const char* name : {"then_branch", "else_branch"}) {
    onnx::GraphProto* b = Branch(m, name);
    const std::string out = b->output(0).name();
    b->clear_output();
    testing::AddValueInfo(b->mutable_output(), out, TP::FLOAT,
                          {int64_t{1}, int64_t{2}});
  }
  ExpectInvalidIf(m, "then_branch ('t_out', tensor(FLOAT, rank 2)) does not "
                     "match the If's output 'y' (tensor(FLOAT, rank 1))");
}

// libonnx 1.12's shape inference of the Conv family reads the input's dims
// at the weights' spatial rank: a Conv whose weights have another rank than
// its input read past both (a fuzz finding). Declared, or derived by
// inference mid-graph (the Reshape), the mismatch is the model's error.
void ExpectConvRankRefused(const ModelBuilder& m) {
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok()) << "a conv whose weights' rank differs from its input's imported";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("node 'conv' (")) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("the same rank, at least 3")) << r.status();
}

TEST(ImporterTest, ConvWeightsOfAnotherRankThanTheInputAreRefused) {
  for (const char* op : {"Conv", "ConvTranspose"}) {
    SCOPED_TRACE(op);
    ModelBuilder m;
    m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{1}});
    m.Initializer("w", {2, 1, 3, 3}, std::vector<float>(18, 1.0f));
    m.Node(op, {"x", "w"}, {"y"}, "conv");
    m.Output("y", TP::FLOAT, {});
    ExpectConvRankRefused(m);
  }
  ModelBuilder wide;
  wide.Input("x", TP::FLOAT, {int64_t{1}, int64_t{1}, int64_t{4}, int64_t{4}});
  wide.Initializer("w", {1, 1, 3, 3, 1}, std::vector<float>(9, 1.0f));
  wide.Node("Conv", {"x", "w"}, {"y"}, "conv");
  wide.Output("y", TP::FLOAT, {});
  ExpectConvRankRefused(wide);
}

TEST(ImporterTest, ConvInputOfAnInferredOtherRankIsRefused) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{1}, int64_t{4}, int64_t{4}});
  onnx::TensorProto* shape = m.graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(TP::INT64);
  shape->add_dims(2);
  shape->add_int64_data(1);
  shape->add_int64_data(16);
  m.Node("Reshape", {"x", "shape"}, {"flat"}, "flatten");
  m.Initializer("w", {2, 1, 3, 3}, std::vector<float>(18, 1.0f));
  m.Node("Conv", {"flat", "w"}, {"y"}, "conv");
  m.Output("y", TP::FLOAT, {});
  ExpectConvRankRefused(m);
}

// libonnx 1.12's conv and pool inference divides by the strides: a zero
// stride was a SIGFPE (a fuzz finding). Strides, dilations and kernel
// sizes below 1 are the model's error.
TEST(ImporterTest, ConvAndPoolAttributesBelowOneAreRefused) {
  for (const char* op : {"Conv", "MaxPool", "AveragePool"}) {
    for (const char* attr : {"strides", "dilations"}) {
      if (std::string(op) == "AveragePool" && std::string(attr) == "dilations") continue;
      SCOPED_TRACE(absl::StrCat(op, " ", attr));
      ModelBuilder m;
      m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{1}, int64_t{4}, int64_t{4}});
      std::vector<std::string> inputs = {"x"};
      if (std::string(op) == "Conv") {
        m.Initializer("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
        inputs.push_back("w");
      }
      onnx::NodeProto* n = m.Node(op, inputs, {"y"}, "conv");
      if (std::string(op) != "Conv") AttrInts(n, "kernel_shape", {2, 2});
      AttrInts(n, attr, {0, 1});
      m.Output("y", TP::FLOAT, {});
      absl::StatusOr<ImportResult> r = Import(m);
      ASSERT_FALSE(r.ok()) << "a zero in '" << attr << "' imported";
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
      EXPECT_THAT(r.status().message(), HasSubstr("node 'conv' (")) << r.status();
      EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("'", attr, "' has 0")))
          << r.status();
    }
  }
}

// A graph output declared with another shape than its node computes (an
// onnx_compile fuzz finding; real exports do it too) takes the computed
// shape, with a warning naming both, as ONNX Runtime does: lowering into a
// buffer of the declared size wrote past it.
TEST(ImporterTest, GraphOutputDeclaredWithAnotherShapeTakesTheComputedOne) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}, int64_t{48}, int64_t{4}});
  onnx::TensorProto* shape = m.graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(TP::INT64);
  shape->add_dims(2);
  shape->add_int64_data(0);
  shape->add_int64_data(-1);
  m.Node("Reshape", {"x", "shape"}, {"r"}, "reshape");
  m.Node("Softmax", {"r"}, {"y"}, "softmax");
  m.Output("y", TP::FLOAT, {int64_t{2}, int64_t{12}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.value(Find(r->graph, "y")).shape, (ir::Shape{2, 192}));
  EXPECT_THAT(absl::StrJoin(r->warnings, "\n"),
              HasSubstr("graph output 'y' is declared [2,12] but computes [2,192]"));
}

// The same for a subgraph's output (an onnx_compile fuzz finding): a Scan
// body's `o = Identity(s2)` declared f32[] while it computes f32[4] made
// libonnx drop the Scan's inference and lowering read a rank-1 operand with
// rank-0 coordinates. The body output takes the computed shape.
TEST(ImporterTest, SubgraphOutputDeclaredWithAnotherShapeTakesTheComputedOne) {
  ModelBuilder m(/*opset=*/13);
  m.Input("s0", TP::FLOAT, {int64_t{4}});
  m.Input("x", TP::FLOAT, {int64_t{3}, int64_t{4}});
  onnx::NodeProto* scan = m.Node("Scan", {"s0", "x"}, {"sn", "ys"}, "scan");
  AttrInt(scan, "num_scan_inputs", 1);
  onnx::GraphProto* body = AttrGraph(scan, "body");
  body->set_name("scan_body");
  testing::AddValueInfo(body->mutable_input(), "s", TP::FLOAT, {int64_t{4}});
  testing::AddValueInfo(body->mutable_input(), "xi", TP::FLOAT, {int64_t{4}});
  testing::AddNode(body, "Add", {"s", "xi"}, {"s2"}, "scan_add");
  testing::AddNode(body, "Identity", {"s2"}, {"o"}, "scan_id");
  body->add_output()->set_name("s2");  // untyped, as in the finding
  testing::AddValueInfo(body->mutable_output(), "o", TP::FLOAT, {});
  m.Output("sn", TP::FLOAT, {int64_t{4}});
  m.Output("ys", TP::FLOAT, {int64_t{3}, int64_t{4}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::shared_ptr<const Graph>> b =
      r->graph.nodes()[0].Attr<std::shared_ptr<const Graph>>("body");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->value(Find(**b, "o")).shape, (ir::Shape{4}));
  EXPECT_EQ(r->graph.value(Find(r->graph, "ys")).shape, (ir::Shape{3, 4}));
  EXPECT_THAT(absl::StrJoin(r->warnings, "\n"),
              HasSubstr("subgraph output 'o' is declared [] but computes [4]"));
}

// A graph output declared with another element type than its node computes
// is refused, as ONNX Runtime refuses it at load (an onnx_compile fuzz
// finding: the f32 GlobalAveragePool result was lowered into an i8 buffer).
TEST(ImporterTest, GraphOutputDeclaredWithAnotherElementTypeIsRefused) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{4}});
  m.Node("GlobalAveragePool", {"x"}, {"y"}, "pool");
  m.Output("y", TP::INT8, {int64_t{1}, int64_t{3}, int64_t{1}, int64_t{1}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr("graph output 'y' is declared INT8 but computes FLOAT"));
}

// A top-level input without a type is refused before libonnx sees the model
// (an onnx_import fuzz finding: past the checker, which only warns at opset
// 18, libonnx 1.12's shape inference read the missing type and crashed).
TEST(ImporterTest, UntypedGraphInputIsRefusedBeforeInference) {
  for (int64_t opset : {int64_t{17}, int64_t{18}}) {
    ModelBuilder m(opset);
    m.graph()->add_input()->set_name("x");
    m.Node("Shape", {"x"}, {"s"}, "shape");
    m.Output("s", TP::INT64, {int64_t{2}});
    absl::StatusOr<ImportResult> r = Import(m);
    ASSERT_FALSE(r.ok()) << "opset " << opset;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("graph input 'x' has no type"))
        << r.status();
  }
}

// Past the checker, which only warns at opset 18, libonnx 1.12's inference
// dereferenced a Concat's missing 'axis' and divided by a Split's number of
// outputs, and its Shape propagator dereferenced the missing type of the
// Concat's result (onnx_compile fuzz findings): a node without a required
// attribute or with fewer inputs or outputs than its operator takes is
// refused, named.
TEST(ImporterTest, NodesBreakingTheirSchemaAreRefusedBeforeInference) {
  struct Case {
    const char* op;
    std::vector<std::string> inputs;
    std::vector<std::string> outputs;
    const char* error;
  };
  const Case cases[] = {
      {"Concat", {"x", "x"}, {"y"}, "(Concat): required attribute 'axis' is missing"},
      {"Split", {"x"}, {}, "(Split): it has 0 outputs; the operator gives at least 1"},
      {"Add", {"x"}, {"y"}, "(Add): it has 1 inputs; the operator takes at least 2"},
  };
  for (int64_t opset : {int64_t{17}, int64_t{18}}) {
    for (const Case& c : cases) {
      ModelBuilder m(opset);
      m.Input("x", TP::FLOAT, {int64_t{2}, int64_t{6}});
      m.Node(c.op, c.inputs, c.outputs, "bad");
      // libonnx's Shape propagator read the untyped result and crashed.
      if (!c.outputs.empty()) m.Node("Shape", {"y"}, {"s"}, "shape");
      m.Node("Relu", {"x"}, {"r"}, "relu");
      m.Output("r", TP::FLOAT, {int64_t{2}, int64_t{6}});
      absl::StatusOr<ImportResult> r = Import(m);
      ASSERT_FALSE(r.ok()) << c.op << " at opset " << opset;
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
      if (opset == 18) {
        EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << r.status();
      }
    }
  }
}

// libonnx's inference reads a shape input by its dims, whatever the data
// holds: a shape tensor with less data than its dims promise (in an
// initializer, or in a node's tensor attribute) is refused first.
TEST(ImporterTest, TensorsWithLessDataThanTheirDimsAreRefusedBeforeInference) {
  enum class Where { kInitializer, kConstantAttribute };
  for (Where where : {Where::kInitializer, Where::kConstantAttribute}) {
    for (bool typed : {false, true}) {
      ModelBuilder m(18);
      TP* dims = nullptr;
      if (where == Where::kInitializer) {
        dims = m.graph()->add_initializer();
      } else {
        onnx::NodeProto* c = m.Node("Constant", {}, {"dims"}, "const");
        onnx::AttributeProto* value = c->add_attribute();
        value->set_name("value");
        value->set_type(onnx::AttributeProto::TENSOR);
        dims = value->mutable_t();
      }
      dims->set_name("dims");
      dims->set_data_type(TP::INT64);
      dims->add_dims(2);
      dims->add_dims(120);
      if (typed) {
        dims->add_int64_data(2);
      } else {
        dims->set_raw_data(std::string(18, '\x01'));
      }
      m.Node("ConstantOfShape", {"dims"}, {"z"}, "fill");
      m.Node("Expand", {"z", "dims"}, {"y"}, "expand");
      m.Output("y", TP::FLOAT, {});
      absl::StatusOr<ImportResult> r = Import(m);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
      EXPECT_THAT(Message(r),
                  HasSubstr(typed ? "int64_data has 1 entries but INT64[2,120] needs 240"
                                  : "raw_data has 18 bytes but INT64[2,120] needs 240 x 8"));
      EXPECT_THAT(Message(r), HasSubstr(where == Where::kInitializer
                                            ? "initializer 'dims'"
                                            : "attribute 'value' of"));
    }
  }
}

// A declared shape inference cannot reach (a dynamic Reshape target) stays.
TEST(ImporterTest, GraphOutputKeepsItsDeclaredShapeWhereInferenceGivesNone) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}, int64_t{6}});
  m.Input("shape", TP::INT64, {int64_t{2}});
  m.Node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  m.Output("y", TP::FLOAT, {int64_t{3}, int64_t{4}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.value(Find(r->graph, "y")).shape, (ir::Shape{3, 4}));
}

// A constant condition folds the If to the branch it takes; the other one
// is still checked.
TEST(ImporterTest, UntakenInvalidBranchOfAConstantIfIsRefused) {
  ModelBuilder m = IfModel();
  m.graph()->mutable_input()->erase(m.graph()->mutable_input()->begin());
  onnx::TensorProto* cond = m.graph()->add_initializer();
  cond->set_name("cond");
  cond->set_data_type(TP::BOOL);
  cond->add_int32_data(1);
  onnx::GraphProto* e = Branch(m, "else_branch");
  testing::AddNode(e, "Abs", {"x"}, {"e_abs"}, "else_abs");
  testing::AddValueInfo(e->mutable_output(), "e_abs", TP::FLOAT, {int64_t{2}});
  ExpectInvalidIf(m, "else_branch has 2 output(s), the If has 1");
}

// Branch outputs may differ in shape (an If's output may be data-dependent)
// as long as their element types agree.
TEST(ImporterTest, IfBranchesMayDifferInShape) {
  ModelBuilder m = IfModel();
  onnx::GraphProto* e = Branch(m, "else_branch");
  e->clear_output();
  testing::AddNode(e, "Concat", {"e_out", "x"}, {"e_cat"}, "else_cat")
      ->add_attribute()
      ->CopyFrom([] {
        onnx::AttributeProto a;
        a.set_name("axis");
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(0);
        return a;
      }());
  testing::AddValueInfo(e->mutable_output(), "e_cat", TP::FLOAT, {int64_t{4}});
  m.graph()->clear_output();
  m.Output("y", TP::FLOAT, {"M"});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ops(r->graph), (std::vector<std::string>{"Relu", "If"}));
}

// ... and in rank, when the If declares no rank for the output (ONNX's If:
// the output's shape is then the union of the branches', none).
TEST(ImporterTest, IfBranchesMayDifferInRankUnderAnUnrankedOutput) {
  ModelBuilder m = IfModel();
  onnx::GraphProto* e = Branch(m, "else_branch");
  e->clear_output();
  testing::AddNode(e, "Unsqueeze", {"e_out", "axes"}, {"e_2d"}, "else_unsqueeze");
  onnx::TensorProto* axes = e->add_initializer();
  axes->set_name("axes");
  axes->set_data_type(TP::INT64);
  axes->add_dims(1);
  axes->add_int64_data(0);
  testing::AddValueInfo(e->mutable_output(), "e_2d", TP::FLOAT,
                        {int64_t{1}, int64_t{2}});
  // y, of no known rank, is not a graph output (those need a shape): its
  // size is.
  m.graph()->mutable_node(1)->set_output(0, "y_any");
  m.graph()->clear_output();
  m.Node("Size", {"y_any"}, {"y"}, "size");
  m.Output("y", TP::INT64, {});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ops(r->graph), (std::vector<std::string>{"Relu", "If", "Size"}));
}

TEST(ImporterTest, SubgraphDependencyOrdersTheOuterGraph) {
  // The If comes first in the file but its branch reads 'rx', produced by
  // the Relu after it: the sort must put Relu first.
  ModelBuilder m = IfModel();
  auto* nodes = m.graph()->mutable_node();
  nodes->SwapElements(0, 1);
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Ops(r->graph), (std::vector<std::string>{"Relu", "If"}));
}

TEST(ImporterTest, AttributesAreConverted) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{1}, int64_t{7}, int64_t{5}});
  m.Input("w", TP::FLOAT, {int64_t{1}, int64_t{1}, int64_t{3}, int64_t{3}});
  onnx::NodeProto* conv = m.Node("Conv", {"x", "w"}, {"y"}, "conv");
  AttrInts(conv, "kernel_shape", {3, 3});
  AttrInts(conv, "pads", {1, 1, 1, 1});
  AttrInts(conv, "strides", {2, 2});
  testing::AttrString(conv, "auto_pad", "NOTSET");
  m.Output("y", TP::FLOAT, {std::string("?"), std::string("?"),
                            std::string("?"), std::string("?")});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  const ir::Node& n = r->graph.nodes()[0];
  EXPECT_EQ(*n.Attr<std::vector<int64_t>>("strides"),
            (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(*n.Attr<std::string>("auto_pad"), "NOTSET");
  // floor((7 + 2 - 3) / 2) + 1 = 4, floor((5 + 2 - 3) / 2) + 1 = 3.
  EXPECT_EQ(r->graph.value(Find(r->graph, "y")).shape,
            (ir::Shape{1, 1, 4, 3}));
}

TEST(ImporterTest, AttributeTypeMismatchIsAnError) {
  // Checked by libonnx's checker for opsets it knows ...
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}});
  onnx::NodeProto* n = m.Node("Concat", {"x", "x"}, {"y"}, "cat");
  AttrInt(n, "axis", 0);
  n->mutable_attribute(0)->set_type(onnx::AttributeProto::FLOAT);
  m.Output("y", TP::FLOAT, {int64_t{4}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"), HasSubstr("axis"),
                                HasSubstr("cat"), HasSubstr("Concat")));
  // ... and by kiln itself where the checker's objections are tolerated.
  m.model().mutable_opset_import(0)->set_version(18);
  r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"),
                                HasSubstr("attribute 'axis'"),
                                HasSubstr("node #0 'cat' (Concat)"),
                                HasSubstr("declared FLOAT"),
                                HasSubstr("INT")));
}

TEST(ImporterTest, TruncatedAndForeignBytesAreErrors) {
  std::string bytes = ReluModel().Bytes();
  absl::StatusOr<ImportResult> r =
      ImportModelBytes(bytes.substr(0, bytes.size() / 2), {}, "cut.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r), HasSubstr("cut.onnx"));
  r = ImportModelBytes("GIF89a not a model at all", {}, "pic.gif");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r), HasSubstr("pic.gif"));
  r = ImportModelBytes("", {}, "empty.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r), HasSubstr("empty.onnx"));
  r = ImportModelFile("/nonexistent/model.onnx");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(r), HasSubstr("/nonexistent/model.onnx"));
}

TEST(ImporterTest, TensorSizeLimits) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{4}});
  m.Initializer("w", {4}, {1, 2, 3, 4});
  m.Node("Add", {"x", "w"}, {"y"}, "add");
  m.Output("y", TP::FLOAT, {int64_t{4}});
  ImportOptions opts;
  opts.max_tensor_bytes = 15;
  absl::StatusOr<ImportResult> r = Import(m, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"), HasSubstr("'w'"),
                                HasSubstr("max_tensor_bytes")));
  opts.max_tensor_bytes = 16;
  EXPECT_TRUE(Import(m, opts).ok());

  // Input dims whose product overflows int64.
  ModelBuilder huge;
  huge.Input("x", TP::FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  huge.Node("Relu", {"x"}, {"y"}, "relu");
  huge.Output("y", TP::FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  // Past ModelLimits::max_dim (limits_test); raised here to reach the
  // overflow check behind it.
  ImportOptions no_dim_limit;
  no_dim_limit.limits.max_dim = std::numeric_limits<int64_t>::max();
  r = Import(huge, no_dim_limit);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("'x'"), HasSubstr("overflow")));
}

TEST(ImporterTest, UnsupportedValueTypesNameTheValue) {
  ModelBuilder m;
  m.Input("x", TP::INT16, {int64_t{2}});
  m.Node("Relu", {"x"}, {"y"}, "relu");
  m.Output("y", TP::INT16, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"), HasSubstr("'x'"),
                                HasSubstr("INT16")));

  ModelBuilder w;
  w.Input("x", TP::FLOAT, {int64_t{2}});
  TP* init = w.graph()->add_initializer();
  init->set_name("s");
  init->set_data_type(TP::UINT16);
  init->add_dims(2);
  init->add_int32_data(1);
  init->add_int32_data(2);
  w.Node("Relu", {"x"}, {"y"}, "relu");
  w.Output("y", TP::FLOAT, {int64_t{2}});
  r = Import(w);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("initializer 's'"),
                                HasSubstr("UINT16")));
}

TEST(ImporterTest, InitializerElementCountMustMatch) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{3}});
  m.Initializer("w", {3}, {1, 2});
  m.Node("Add", {"x", "w"}, {"y"}, "add");
  m.Output("y", TP::FLOAT, {int64_t{3}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"),
                                HasSubstr("initializer 'w'")));
}

// A float initializer large enough to be detached from the proto before the
// checker and shape inference (ImportModelFile's big-weights path).
TP* BigInitializer(ModelBuilder* m, const std::string& name, int64_t rows,
                   int64_t cols, std::vector<float>* values) {
  values->resize(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < values->size(); ++i) {
    (*values)[i] = 0.25f * static_cast<float>(i % 1009) - 7.0f;
  }
  TP* w = m->graph()->add_initializer();
  w->set_name(name);
  w->set_data_type(TP::FLOAT);
  w->add_dims(rows);
  w->add_dims(cols);
  w->set_raw_data(std::string(reinterpret_cast<const char*>(values->data()),
                              values->size() * sizeof(float)));
  return w;
}

TEST(ImporterTest, LargeInitializersKeepTheirDataAndOrder) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{256}});
  std::vector<float> w_vals, v_vals;
  BigInitializer(&m, "w", 256, 128, &w_vals);  // 128 KiB: detached
  m.Initializer("b", {128}, std::vector<float>(128, 0.5f));
  BigInitializer(&m, "v", 128, 256, &v_vals);
  m.Node("MatMul", {"x", "w"}, {"h"}, "mm0");
  m.Node("Add", {"h", "b"}, {"hb"}, "add0");
  m.Node("MatMul", {"hb", "v"}, {"y"}, "mm1");
  m.Output("y", TP::FLOAT, {int64_t{1}, int64_t{256}});
  const std::string path = absl::StrCat(TmpDir(), "/big_weights.onnx");
  WriteFile(path, m.Bytes());
  for (bool from_file : {true, false}) {
    absl::StatusOr<ImportResult> r =
        from_file ? ImportModelFile(path) : Import(m);
    ASSERT_TRUE(r.ok()) << r.status();
    const Graph& g = r->graph;
    const ir::Tensor* w = g.constant(Find(g, "w"));
    const ir::Tensor* v = g.constant(Find(g, "v"));
    ASSERT_NE(w, nullptr);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(w->shape(), (ir::Shape{256, 128}));
    EXPECT_EQ(v->shape(), (ir::Shape{128, 256}));
    for (size_t i = 0; i < w_vals.size(); ++i) {
      ASSERT_EQ(w->data<float>()[i], w_vals[i]) << i;
    }
    for (size_t i = 0; i < v_vals.size(); ++i) {
      ASSERT_EQ(v->data<float>()[i], v_vals[i]) << i;
    }
    // Initializers become values in file order, detached or not.
    EXPECT_LT(Find(g, "w"), Find(g, "b"));
    EXPECT_LT(Find(g, "b"), Find(g, "v"));
    EXPECT_EQ(g.value(Find(g, "y")).shape, (ir::Shape{1, 256}));
  }
}

TEST(ImporterTest, LargeInitializerFoldsThroughTranspose) {
  // Transpose of a detached weight folds at import (fold_shapes reads the
  // detached data); the folded constant is the transpose of the data.
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{64}});
  std::vector<float> w_vals;
  BigInitializer(&m, "w", 256, 64, &w_vals);
  m.Node("Transpose", {"w"}, {"wt"}, "t0");
  m.Node("MatMul", {"x", "wt"}, {"y"}, "mm0");
  m.Output("y", TP::FLOAT, {int64_t{1}, int64_t{256}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  const Graph& g = r->graph;
  EXPECT_EQ(Ops(g), std::vector<std::string>{"MatMul"});
  EXPECT_FALSE(g.FindValue("w").has_value());
  const ir::Tensor* wt = g.constant(Find(g, "wt"));
  ASSERT_NE(wt, nullptr);
  ASSERT_EQ(wt->shape(), (ir::Shape{64, 256}));
  for (int64_t i = 0; i < 64; ++i) {
    for (int64_t j = 0; j < 256; ++j) {
      ASSERT_EQ(wt->data<float>()[i * 256 + j], w_vals[j * 64 + i]);
    }
  }
}

TEST(ImporterTest, LargeInitializerWithWrongByteCountIsAnError) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{256}});
  std::vector<float> w_vals;
  TP* w = BigInitializer(&m, "w", 256, 128, &w_vals);
  w->mutable_raw_data()->resize(w->raw_data().size() - 4);
  m.Node("MatMul", {"x", "w"}, {"y"}, "mm0");
  m.Output("y", TP::FLOAT, {int64_t{1}, int64_t{128}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("initializer 'w'"),
                                HasSubstr("raw_data has 131068 bytes")));
}

TEST(ImporterTest, MissingAndTruncatedModelFilesAreErrors) {
  absl::StatusOr<ImportResult> missing =
      ImportModelFile(absl::StrCat(TmpDir(), "/no_such_model.onnx"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  const std::string bytes = ReluModel().Bytes();
  const std::string path = absl::StrCat(TmpDir(), "/truncated.onnx");
  WriteFile(path, bytes.substr(0, bytes.size() / 2));
  absl::StatusOr<ImportResult> r = ImportModelFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r), AllOf(HasSubstr("truncated.onnx"),
                                HasSubstr("not a valid ONNX model")));
}

TEST(ImporterTest, ValueDefinedTwiceIsAnError) {
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{2}});
  m.Node("Relu", {"x"}, {"y"}, "first");
  m.Node("Neg", {"x"}, {"y"}, "second");
  m.Output("y", TP::FLOAT, {int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r), AllOf(HasSubstr("test.onnx"), HasSubstr("'y'")));
}

TEST(ImporterTest, NonDefaultDomainOpsKeepTheirDomain) {
  ModelBuilder m;
  m.Opset("ai.onnx.ml", 3);
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{2}});
  onnx::NodeProto* n = m.Node("Normalizer", {"x"}, {"y"}, "norm");
  n->set_domain("ai.onnx.ml");
  testing::AttrString(n, "norm", "MAX");
  m.Output("y", TP::FLOAT, {int64_t{1}, int64_t{2}});
  absl::StatusOr<ImportResult> r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.nodes()[0].domain, "ai.onnx.ml");
}

// Real files from ONNX's own test data, when the package is installed.
class RealModelTest : public ::testing::Test {
 protected:
  static constexpr const char* kRoot = "/usr/share/libonnx-testdata/data/node";
  void SetUp() override {
    std::ifstream probe(std::string(kRoot) + "/test_if/model.onnx");
    if (!probe) GTEST_SKIP() << "libonnx-testdata is not installed: " << kRoot;
  }
};

// Every model of ONNX's conformance data imports or fails with a clean
// Status naming the file; only unsupported features may fail.
TEST_F(RealModelTest, AllConformanceModelsImportOrFailCleanly) {
  int ok = 0;
  int failed = 0;
  for (const char* sub :
       {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    const std::string root =
        std::string("/usr/share/libonnx-testdata/data/") + sub;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
      const std::string path = entry.path().string() + "/model.onnx";
      if (!std::filesystem::exists(path)) continue;
      absl::StatusOr<ImportResult> r = ImportModelFile(path);
      if (r.ok()) {
        ++ok;
        continue;
      }
      ++failed;
      EXPECT_EQ(std::string(r.status().message()).rfind(path + ": ", 0), 0u)
          << r.status();
      // Every conformance model is valid ONNX: what kiln cannot import is
      // unsupported (dtype, training domain op), never a model error.
      EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented)
          << r.status();
    }
  }
  std::cout << ok << " models imported, " << failed
            << " rejected as unsupported\n";
  EXPECT_GT(ok, 900);
}

TEST_F(RealModelTest, ConvWithStridesPadding) {
  absl::StatusOr<ImportResult> r = ImportModelFile(
      std::string(kRoot) + "/test_conv_with_strides_padding/model.onnx");
  ASSERT_TRUE(r.ok()) << r.status();
  const Graph& g = r->graph;
  EXPECT_EQ(g.opset(), 11);
  ASSERT_EQ(g.inputs().size(), 2u);
  EXPECT_EQ(g.value(g.inputs()[1]).shape, (ir::Shape{1, 1, 3, 3}));
  ASSERT_EQ(Ops(g), (std::vector<std::string>{"Conv"}));
  EXPECT_EQ(g.value(g.outputs()[0]).shape, (ir::Shape{1, 1, 4, 3}));
}

TEST_F(RealModelTest, If) {
  absl::StatusOr<ImportResult> r =
      ImportModelFile(std::string(kRoot) + "/test_if/model.onnx");
  ASSERT_TRUE(r.ok()) << r.status();
  const Graph& g = r->graph;
  ASSERT_EQ(Ops(g), (std::vector<std::string>{"If"}));
  EXPECT_EQ(g.value(g.inputs()[0]).dtype, DType::kBool);
  const Graph& then_g =
      **g.nodes()[0].Attr<std::shared_ptr<const Graph>>("then_branch");
  // The branch is a single Constant [1, 2, 3, 4, 5], folded away.
  EXPECT_TRUE(then_g.nodes().empty());
  const ir::Tensor* c = then_g.constant(then_g.outputs()[0]);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ToInt64Vector(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

// Names come from strangers: control bytes in them reach no message
// unescaped, a newline does not split a message, and a 1 MB name does not
// make a 1 MB line.
TEST(ImporterTest, HostileNamesAreEscapedAndCappedInErrors) {
  const std::string terminal = "\x1b]0;pwned\x07\x1b[2J";
  const std::string huge(1 << 20, 'n');
  ModelBuilder m;
  m.Input("x", TP::FLOAT, {int64_t{1}, int64_t{3}});
  m.Node("Relu", {"x"}, {"a"}, terminal + "relu");
  m.Node("Add", {"a", huge + "\nline two"}, {"y"}, "add");
  m.Output("y", TP::FLOAT, {int64_t{1}, int64_t{3}});
  // The 1 MB name is past ModelLimits::max_name_bytes (limits_test); the
  // limit is raised here so the message that quotes it is the one checked.
  ImportOptions no_name_limit;
  no_name_limit.limits.max_name_bytes = int64_t{1} << 30;
  absl::StatusOr<ImportResult> r = Import(m, no_name_limit);
  ASSERT_FALSE(r.ok());
  const std::string message = Message(r);
  EXPECT_THAT(message, HasSubstr("never defined"));
  EXPECT_THAT(message, HasSubstr("bytes left out]"));
  EXPECT_LE(message.size(), kMaxMessageLineBytes + 100);
  for (char c : message) {
    EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        << "control byte " << static_cast<int>(c) << " in: " << message.substr(0, 200);
  }

  ModelBuilder unknown;
  unknown.Input("x", TP::FLOAT, {int64_t{1}});
  unknown.Node("NoSuchOp", {"x"}, {"y"}, terminal);
  unknown.Output("y", TP::FLOAT, {int64_t{1}});
  r = Import(unknown);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Message(r), HasSubstr("\\x1b]0;pwned\\x07"));
  EXPECT_EQ(Message(r).find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace kiln::frontend
