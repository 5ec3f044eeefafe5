// Tests for the graph IR text form: exact printing, hand-written parsing,
// round trips over every attribute type and dtype, and error handling.
#include "ir/graph/text.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::ir {
namespace {

using ::testing::HasSubstr;

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}
float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}
uint64_t Bits64(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof(b));
  return b;
}

template <typename T>
const T& AttrOf(const Node& node, const std::string& key) {
  return std::get<T>(node.attrs.at(key));
}

// A graph touching every printer feature; not meant to pass the verifier.
Graph KitchenSink() {
  Graph g("main");
  g.set_opset(17);
  const ValueId x = g.AddValue("x", DType::kF32, {1, 3, kDynamicDim});
  const ValueId weird =
      g.AddValue("we\"ird name\n\xC3\xA9\\", DType::kI64, {});
  const ValueId unk = g.AddUnshapedValue("unk", DType::kInvalid);
  g.AddInput(x);
  g.AddInput(weird);
  g.AddInput(unk);

  auto constant = [&](const std::string& name, Tensor t) {
    const ValueId id = g.AddValue(name, t.dtype(), t.shape());
    g.SetConstant(id, std::move(t));
    return id;
  };
  const ValueId cf32 = constant(
      "c_f32", Tensor::FromVector<float>(
                   {7}, {0.1f, -0.0f, FromBits(0x7fc00001u), INFINITY,
                         -INFINITY, FromBits(1), 3.4028235e38f}));
  constant("c_f16", Tensor::FromVector<Float16>(
                        {4}, {{0x3c00}, {0x7e01}, {0x0001}, {0xfc00}}));
  constant("c_f64", Tensor::FromVector<double>({3}, {0.1, -1e300, NAN}));
  constant("c_i64", Tensor::FromVector<int64_t>({2}, {INT64_MIN, INT64_MAX}));
  constant("c_i32", Tensor::Scalar<int32_t>(-7));
  constant("c_i8", Tensor::FromVector<int8_t>({3}, {-128, 0, 127}));
  constant("c_u8", Tensor::FromVector<uint8_t>({2}, {0, 255}));
  constant("c_bool", Tensor::FromVector<bool>({2, 1}, {true, false}));
  constant("c_empty", Tensor(DType::kF32, {0, 3}));
  constant("c_splat", Tensor::FromVector<float>({2, 2}, {0.5f, 0.5f, 0.5f,
                                                         0.5f}));
  const ValueId odd = constant("c_declared_unknown",
                               Tensor::FromVector<int64_t>({2}, {1, 2}));
  g.mutable_value(odd).shape_known = false;

  AttributeMap attrs;
  attrs["i"] = int64_t{-3};
  attrs["f"] = 1.5f;
  attrs["f_neg_zero"] = -0.0f;
  attrs["f_nan"] = FromBits(0xffc00002u);
  attrs["f_int_valued"] = 2.0f;
  attrs["s"] = std::string("he said \"hi\"\t\x01");
  attrs["ints"] = std::vector<int64_t>{1, -2};
  attrs["ints_empty"] = std::vector<int64_t>{};
  attrs["floats"] = std::vector<float>{0.1f, 1e-30f, -INFINITY};
  attrs["floats_empty"] = std::vector<float>{};
  attrs["strings"] = std::vector<std::string>{"a", "b c"};
  attrs["strings_empty"] = std::vector<std::string>{};
  attrs["tensor"] = Tensor::FromVector<int64_t>({2}, {4, -5});
  attrs["odd key"] = std::string("");
  const ValueId a = g.AddValue("a", DType::kF32, {1, 3, kDynamicDim});
  g.AddNode("Foo", {x, cf32}, {a}, attrs, "node \"0\"");

  const ValueId y = g.AddValue("y", DType::kF32, {1});
  const ValueId z = g.AddValue("z", DType::kF16, {});
  Node& fused =
      g.AddNode("Fused", {a, kNoValue, weird, kNoValue}, {y, kNoValue, z});
  fused.domain = "com.microsoft";
  const ValueId w = g.AddValue("w", DType::kBool, {kDynamicDim});
  Node& odd_op = g.AddNode("op.with dots", {y}, {w});
  odd_op.domain = "my domain";
  const ValueId u = g.AddValue("u", DType::kI8, {2});
  g.AddNode("_", {w}, {u});
  g.AddNode("Print", {u}, {});

  // If with subgraphs: then captures from main; else nests an If whose
  // branch captures from the grandparent.
  auto then_g = std::make_shared<Graph>("then");
  {
    const ValueId cx = then_g->AddValue("cx", DType::kF32, {1, 3, kDynamicDim});
    then_g->AddCapture(cx, "x");
    const ValueId cw = then_g->AddValue("cw", DType::kI64, {});
    then_g->AddCapture(cw, "we\"ird name\n\xC3\xA9\\");
    const ValueId r = then_g->AddValue("r", DType::kF32, {1, 3, kDynamicDim});
    then_g->AddNode("Relu", {cx}, {r});
    then_g->AddOutput(r);
    then_g->set_opset(17);
  }
  auto inner = std::make_shared<Graph>("inner branch");
  {
    const ValueId c = inner->AddValue("c", DType::kF32, {1});
    inner->AddCapture(c, "y");
    inner->AddOutput(c);
    inner->set_opset(11);  // differs from its parent: printed
  }
  auto else_g = std::make_shared<Graph>("else");
  {
    else_g->set_opset(17);
    const ValueId cond = else_g->AddValue("cond", DType::kBool, {});
    else_g->SetConstant(cond, Tensor::Scalar<bool>(true));
    const ValueId r = else_g->AddValue("r", DType::kF32, {1});
    AttributeMap inner_attrs;
    inner_attrs["then_branch"] = std::shared_ptr<const Graph>(inner);
    inner_attrs["else_branch"] = std::shared_ptr<const Graph>(inner);
    else_g->AddNode("If", {cond}, {r}, inner_attrs);
    else_g->AddOutput(r);
  }
  const ValueId cond = g.AddValue("cond", DType::kBool, {});
  g.SetConstant(cond, Tensor::Scalar<bool>(false));
  const ValueId out = g.AddValue("if out", DType::kF32, {1, 3, kDynamicDim});
  AttributeMap if_attrs;
  if_attrs["then_branch"] = std::shared_ptr<const Graph>(then_g);
  if_attrs["else_branch"] = std::shared_ptr<const Graph>(else_g);
  g.AddNode("If", {cond}, {out}, if_attrs, "if0");
  const ValueId n = g.AddValue("n", DType::kF32, {});
  AttributeMap null_attr;
  null_attr["body"] = std::shared_ptr<const Graph>();
  g.AddNode("Loop", {}, {n}, null_attr);
  g.AddOutput(y);
  g.AddOutput(z);
  g.AddOutput(out);
  return g;
}

TEST(TextPrint, ExactSmallGraph) {
  Graph g("main");
  const ValueId x = g.AddValue("x", DType::kF32, {1, 3, 8, 8});
  const ValueId m = g.AddValue("a mask", DType::kBool, {kDynamicDim});
  g.AddInput(x);
  g.AddInput(m);
  const ValueId w = g.AddValue("w", DType::kF32, {2});
  g.SetConstant(w, Tensor::FromVector<float>({2}, {0.1f, -2.0f}));
  const ValueId s = g.AddValue("s", DType::kI64, {});
  g.SetConstant(s, Tensor::Scalar<int64_t>(3));
  const ValueId y = g.AddValue("y", DType::kF32, {1, 3, 8, 8});
  const ValueId z = g.AddUnshapedValue("", DType::kInvalid);
  g.AddNode("Conv", {x, w, kNoValue}, {y, kNoValue, z},
            {{"pads", std::vector<int64_t>{1, 1}}, {"alpha", 1.0f}}, "conv0");
  g.AddOutput(y);
  EXPECT_EQ(PrintGraph(g),
            "graph main(%x: f32[1,3,8,8], %\"a mask\": bool[?]) -> (%y) "
            "opset 18 {\n"
            "  %w = constant f32[2] [0.1, -2.0]\n"
            "  %s = constant i64[] 3\n"
            "  %y, _, %v5 = Conv(%x, %w, _) {alpha=1.0, pads=[1, 1]} "
            "name=\"conv0\" : f32[1,3,8,8], ?[*]\n"
            "}\n");
}

TEST(TextPrint, SubgraphLayout) {
  auto body = std::make_shared<Graph>("then");
  const ValueId c = body->AddValue("c", DType::kF32, {2});
  body->AddCapture(c, "x");
  body->AddOutput(c);
  Graph g("main");
  const ValueId x = g.AddValue("x", DType::kF32, {2});
  const ValueId b = g.AddValue("b", DType::kBool, {});
  const ValueId y = g.AddValue("y", DType::kF32, {2});
  g.AddInput(x);
  g.AddInput(b);
  g.AddNode("If", {b}, {y},
            {{"then_branch", std::shared_ptr<const Graph>(body)},
             {"else_branch", std::shared_ptr<const Graph>(body)}});
  g.AddOutput(y);
  EXPECT_EQ(PrintGraph(g),
            "graph main(%x: f32[2], %b: bool[]) -> (%y) opset 18 {\n"
            "  %y = If(%b) {\n"
            "    else_branch=graph then() captures(%c: f32[2] = %x) -> (%c) {\n"
            "    },\n"
            "    then_branch=graph then() captures(%c: f32[2] = %x) -> (%c) {\n"
            "    }\n"
            "  } : f32[2]\n"
            "}\n");
}

TEST(TextPrint, ValueTypesAndNames) {
  EXPECT_EQ(PrintValueType(Value{"", DType::kF32, {1, kDynamicDim}, true}),
            "f32[1,?]");
  EXPECT_EQ(PrintValueType(Value{"", DType::kI64, {}, true}), "i64[]");
  EXPECT_EQ(PrintValueType(Value{"", DType::kF16, {}, false}), "f16[*]");
  EXPECT_EQ(PrintValueType(Value{"", DType::kInvalid, {0}, true}), "?[0]");
  EXPECT_EQ(PrintValueName("conv1.weight"), "%conv1.weight");
  EXPECT_EQ(PrintValueName("0"), "%0");
  EXPECT_EQ(PrintValueName("onnx::Conv_3"), "%\"onnx::Conv_3\"");
  EXPECT_EQ(PrintValueName("a\"b\\c\nd\x7f"), "%\"a\\\"b\\\\c\\nd\\x7f\"");
  EXPECT_EQ(PrintValueName(""), "%\"\"");
}

TEST(TextPrint, FloatsShortestAndExact) {
  auto f32 = [](float f) {
    return PrintTensor(Tensor::Scalar<float>(f), PrintOptions::Full());
  };
  EXPECT_EQ(f32(0.1f), "f32[] 0.1");
  EXPECT_EQ(f32(1.0f), "f32[] 1.0");
  EXPECT_EQ(f32(-0.0f), "f32[] -0.0");
  EXPECT_EQ(f32(1e20f), "f32[] 1e+20");
  EXPECT_EQ(f32(10.0f), "f32[] 10.0");
  EXPECT_EQ(f32(-300.0f), "f32[] -300.0");
  EXPECT_EQ(f32(1e-5f), "f32[] 1e-05");
  EXPECT_EQ(f32(16777216.0f), "f32[] 16777216.0");
  EXPECT_EQ(f32(INFINITY), "f32[] inf");
  EXPECT_EQ(f32(-INFINITY), "f32[] -inf");
  EXPECT_EQ(f32(FromBits(0x7fc00000u)), "f32[] nan");
  EXPECT_EQ(f32(FromBits(0x7f800001u)), "f32[] nan(0x7f800001)");
  EXPECT_EQ(f32(FromBits(1)), "f32[] 1e-45");
  EXPECT_EQ(PrintTensor(Tensor::Scalar<double>(0.1)), "f64[] 0.1");
  EXPECT_EQ(PrintTensor(Tensor::Scalar<Float16>({0x3555})),
            "f16[] 0.3333");  // 0.333251953125 is the nearest half
  EXPECT_EQ(PrintTensor(Tensor::Scalar<Float16>({0x7c01})),
            "f16[] nan(0x7c01)");
  EXPECT_EQ(PrintTensor(Tensor::Scalar<BFloat16>({0x4049})), "bf16[] 3.14");
  EXPECT_EQ(PrintTensor(Tensor::Scalar<BFloat16>({0x7fc1})), "bf16[] nan(0x7fc1)");
  EXPECT_EQ(PrintTensor(Tensor::Scalar<BFloat16>({0xff80})), "bf16[] -inf");
  EXPECT_EQ(PrintTensor(Tensor::Scalar<bool>(true)), "bool[] true");
  EXPECT_EQ(PrintTensor(Tensor(DType::kI8, {0})), "i8[0] []");
  EXPECT_EQ(PrintTensor(Tensor::FromVector<int32_t>({3}, {7, 7, 7})),
            "i32[3] splat(7)");
}

TEST(TextPrint, ElidesLargeConstants) {
  std::vector<float> v(20);
  for (int i = 0; i < 20; ++i) v[i] = static_cast<float>(i);
  const Tensor t = Tensor::FromVector<float>({4, 5}, v);
  EXPECT_EQ(PrintTensor(t), "f32[4,5] <elided>");
  PrintOptions three;
  three.max_constant_elements = 3;
  EXPECT_EQ(PrintTensor(Tensor::FromVector<int64_t>({3}, {1, 2, 3}), three),
            "i64[3] [1, 2, 3]");
  EXPECT_EQ(PrintTensor(Tensor::FromVector<int64_t>({4}, {1, 2, 3, 4}), three),
            "i64[4] <elided>");
  EXPECT_EQ(PrintTensor(t, PrintOptions::Full()),
            "f32[4,5] [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, "
            "10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0]");
}

TEST(TextParse, HandWrittenGolden) {
  const char* text = R"(
// A hand-written graph; comments are allowed anywhere.
graph "my model"(%x: f32[1,3,?], %"input 2": i64[*]) -> (%y, %z, _) opset 13 {
  %w = constant f32[2,2] [0.5, -1, 1e-3, inf]
  %b = constant f32[3] splat(-0.25)
  %k = constant i64[] -9
  %big = constant u8[2,3] <elided> : u8[*]
  %h = constant f16[2] [1.5, nan(0x7e01)]
  %t = constant bool[3] [true, false, true]
  %y, _, %z = com.microsoft.FusedConv(%x, %w, _, %b) {
      alpha=2.0, axis=-1, pads=[0, 1], scales=[1, 2.5], empty=floats[],
      names=["a", "b\n"], ws=ints[], mode="nearest", value=tensor i32[2] [4, -4],
      nan_attr=-nan, tiny=1e-45} name="fc 1" : f32[1,3,?], f32[*]
  "weird op"(%y)
  %q = "my domain"."Op.X"(%z, %t) : ?[*]
}
)";
  ParseOptions options;
  options.allow_elided_constants = true;
  absl::StatusOr<Graph> parsed = ParseGraph(text, options);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Graph& g = *parsed;
  EXPECT_EQ(g.name(), "my model");
  EXPECT_EQ(g.opset(), 13);
  ASSERT_EQ(g.inputs().size(), 2u);
  const Value& x = g.value(g.inputs()[0]);
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DType::kF32);
  EXPECT_EQ(x.shape, (Shape{1, 3, kDynamicDim}));
  EXPECT_TRUE(x.shape_known);
  const Value& in2 = g.value(g.inputs()[1]);
  EXPECT_EQ(in2.name, "input 2");
  EXPECT_EQ(in2.dtype, DType::kI64);
  EXPECT_FALSE(in2.shape_known);

  const Tensor* w = g.constant(*g.FindValue("w"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape(), (Shape{2, 2}));
  EXPECT_EQ(w->data<float>()[0], 0.5f);
  EXPECT_EQ(w->data<float>()[1], -1.0f);
  EXPECT_EQ(w->data<float>()[2], 0.001f);
  EXPECT_EQ(w->data<float>()[3], INFINITY);
  const Tensor* b = g.constant(*g.FindValue("b"));
  ASSERT_NE(b, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b->data<float>()[i], -0.25f);
  const Tensor* k = g.constant(*g.FindValue("k"));
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->rank(), 0);
  EXPECT_EQ(k->data<int64_t>()[0], -9);
  const ValueId big_id = *g.FindValue("big");
  const Tensor* big = g.constant(big_id);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->dtype(), DType::kU8);
  EXPECT_EQ(big->shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(big->data<uint8_t>()[i], 0);
  EXPECT_FALSE(g.value(big_id).shape_known);  // the declared type wins
  const Tensor* h = g.constant(*g.FindValue("h"));
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->data<Float16>()[0].bits, 0x3e00);  // 1.5 = 1.1b x 2^0
  EXPECT_EQ(h->data<Float16>()[1].bits, 0x7e01);
  const Tensor* t = g.constant(*g.FindValue("t"));
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->data<bool>()[0]);
  EXPECT_FALSE(t->data<bool>()[1]);
  EXPECT_TRUE(t->data<bool>()[2]);

  ASSERT_EQ(g.nodes().size(), 3u);
  const Node& fc = g.nodes()[0];
  EXPECT_EQ(fc.domain, "com.microsoft");
  EXPECT_EQ(fc.op, "FusedConv");
  EXPECT_EQ(fc.name, "fc 1");
  ASSERT_EQ(fc.inputs.size(), 4u);
  EXPECT_EQ(fc.inputs[0], g.inputs()[0]);
  EXPECT_EQ(fc.inputs[1], *g.FindValue("w"));
  EXPECT_EQ(fc.inputs[2], kNoValue);
  EXPECT_EQ(fc.inputs[3], *g.FindValue("b"));
  ASSERT_EQ(fc.outputs.size(), 3u);
  EXPECT_EQ(fc.outputs[1], kNoValue);
  EXPECT_EQ(g.value(fc.outputs[0]).name, "y");
  EXPECT_EQ(g.value(fc.outputs[0]).shape, (Shape{1, 3, kDynamicDim}));
  EXPECT_FALSE(g.value(fc.outputs[2]).shape_known);
  EXPECT_EQ(g.value(fc.outputs[2]).dtype, DType::kF32);
  EXPECT_EQ(AttrOf<float>(fc, "alpha"), 2.0f);
  EXPECT_EQ(AttrOf<int64_t>(fc, "axis"), -1);
  EXPECT_EQ(AttrOf<std::vector<int64_t>>(fc, "pads"),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(AttrOf<std::vector<float>>(fc, "scales"),
            (std::vector<float>{1.0f, 2.5f}));
  EXPECT_TRUE(AttrOf<std::vector<float>>(fc, "empty").empty());
  EXPECT_TRUE(AttrOf<std::vector<int64_t>>(fc, "ws").empty());
  EXPECT_EQ(AttrOf<std::vector<std::string>>(fc, "names"),
            (std::vector<std::string>{"a", "b\n"}));
  EXPECT_EQ(AttrOf<std::string>(fc, "mode"), "nearest");
  const Tensor& value = AttrOf<Tensor>(fc, "value");
  EXPECT_EQ(value.dtype(), DType::kI32);
  EXPECT_EQ(value.data<int32_t>()[1], -4);
  EXPECT_EQ(Bits(AttrOf<float>(fc, "nan_attr")), 0xffc00000u);
  EXPECT_EQ(Bits(AttrOf<float>(fc, "tiny")), 1u);  // smallest denormal

  const Node& weird = g.nodes()[1];
  EXPECT_EQ(weird.op, "weird op");
  EXPECT_EQ(weird.domain, "");
  EXPECT_TRUE(weird.outputs.empty());
  const Node& q = g.nodes()[2];
  EXPECT_EQ(q.domain, "my domain");
  EXPECT_EQ(q.op, "Op.X");
  EXPECT_EQ(g.value(q.outputs[0]).dtype, DType::kInvalid);

  ASSERT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(g.outputs()[0], fc.outputs[0]);
  EXPECT_EQ(g.outputs()[1], fc.outputs[2]);
  EXPECT_EQ(g.outputs()[2], kNoValue);
}

TEST(TextParse, SubgraphsAndCaptures) {
  const char* text = R"(graph main(%c: bool[], %x: f32[2]) -> (%y) {
  %y = If(%c) {
    then_branch=graph t() captures(%in: f32[2] = %x) -> (%o) {
      %o = Neg(%in) : f32[2]
    },
    else_branch=graph e() -> (%k) opset 9 { %k = constant f32[2] [1.0, 2.0] },
    body=graph <null>
  } : f32[2]
})";
  absl::StatusOr<Graph> g = ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->opset(), 18);  // the default
  const Node& node = g->nodes()[0];
  const auto& then_g = AttrOf<std::shared_ptr<const Graph>>(node, "then_branch");
  ASSERT_NE(then_g, nullptr);
  EXPECT_EQ(then_g->name(), "t");
  EXPECT_EQ(then_g->opset(), 18);  // inherited
  ASSERT_EQ(then_g->captures().size(), 1u);
  EXPECT_EQ(then_g->captures()[0].outer_name, "x");
  EXPECT_EQ(then_g->value(then_g->captures()[0].inner).name, "in");
  EXPECT_EQ(then_g->nodes()[0].inputs[0], then_g->captures()[0].inner);
  const auto& else_g = AttrOf<std::shared_ptr<const Graph>>(node, "else_branch");
  ASSERT_NE(else_g, nullptr);
  EXPECT_EQ(else_g->opset(), 9);
  EXPECT_EQ(else_g->constant(else_g->outputs()[0])->data<float>()[1], 2.0f);
  EXPECT_EQ(AttrOf<std::shared_ptr<const Graph>>(node, "body"), nullptr);
}

TEST(TextRoundTrip, KitchenSinkPrintsIdentically) {
  const Graph g = KitchenSink();
  const std::string first = PrintGraph(g, PrintOptions::Full());
  absl::StatusOr<Graph> parsed = ParseGraph(first);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << first;
  EXPECT_EQ(PrintGraph(*parsed, PrintOptions::Full()), first);

  // Spot checks that the round trip kept bits and names, not only text.
  const Graph& p = *parsed;
  EXPECT_EQ(p.opset(), 17);
  EXPECT_EQ(p.value(p.inputs()[1]).name, "we\"ird name\n\xC3\xA9\\");
  EXPECT_EQ(p.value(p.inputs()[2]).dtype, DType::kInvalid);
  const Tensor* cf32 = p.constant(*p.FindValue("c_f32"));
  ASSERT_NE(cf32, nullptr);
  EXPECT_EQ(Bits(cf32->data<float>()[0]), Bits(0.1f));
  EXPECT_EQ(Bits(cf32->data<float>()[1]), 0x80000000u);
  EXPECT_EQ(Bits(cf32->data<float>()[2]), 0x7fc00001u);
  EXPECT_EQ(Bits(cf32->data<float>()[5]), 1u);
  EXPECT_EQ(Bits(cf32->data<float>()[6]), 0x7f7fffffu);  // FLT_MAX
  const Tensor* cf64 = p.constant(*p.FindValue("c_f64"));
  EXPECT_EQ(Bits64(cf64->data<double>()[0]), Bits64(0.1));
  EXPECT_EQ(Bits64(cf64->data<double>()[1]), Bits64(-1e300));
  const Tensor* ci64 = p.constant(*p.FindValue("c_i64"));
  EXPECT_EQ(ci64->data<int64_t>()[0], INT64_MIN);
  EXPECT_EQ(p.constant(*p.FindValue("c_f16"))->data<Float16>()[1].bits,
            0x7e01);
  EXPECT_FALSE(p.value(*p.FindValue("c_declared_unknown")).shape_known);

  const Node& foo = p.nodes()[0];
  EXPECT_EQ(foo.name, "node \"0\"");
  EXPECT_EQ(Bits(AttrOf<float>(foo, "f_neg_zero")), 0x80000000u);
  EXPECT_EQ(Bits(AttrOf<float>(foo, "f_nan")), 0xffc00002u);
  EXPECT_EQ(AttrOf<float>(foo, "f_int_valued"), 2.0f);
  EXPECT_EQ(AttrOf<std::string>(foo, "s"), "he said \"hi\"\t\x01");
  EXPECT_TRUE(AttrOf<std::vector<int64_t>>(foo, "ints_empty").empty());
  EXPECT_TRUE(AttrOf<std::vector<float>>(foo, "floats_empty").empty());
  EXPECT_TRUE(AttrOf<std::vector<std::string>>(foo, "strings_empty").empty());
  EXPECT_EQ(Bits(AttrOf<std::vector<float>>(foo, "floats")[1]), Bits(1e-30f));
  EXPECT_EQ(AttrOf<std::string>(foo, "odd key"), "");
  const Node& fused = p.nodes()[1];
  EXPECT_EQ(fused.domain, "com.microsoft");
  EXPECT_EQ(fused.inputs, (std::vector<ValueId>{foo.outputs[0], kNoValue,
                                                p.inputs()[1], kNoValue}));
  EXPECT_EQ(fused.outputs[1], kNoValue);
  EXPECT_EQ(p.nodes()[2].domain, "my domain");
  EXPECT_EQ(p.nodes()[2].op, "op.with dots");
  EXPECT_EQ(p.nodes()[3].op, "_");
  EXPECT_TRUE(p.nodes()[4].outputs.empty());
  const auto& else_g =
      AttrOf<std::shared_ptr<const Graph>>(p.nodes()[5], "else_branch");
  const auto& inner =
      AttrOf<std::shared_ptr<const Graph>>(else_g->nodes()[0], "then_branch");
  EXPECT_EQ(inner->name(), "inner branch");
  EXPECT_EQ(inner->opset(), 11);
  EXPECT_EQ(inner->captures()[0].outer_name, "y");
}

TEST(TextRoundTrip, EveryFloat16AndSampledFloat32) {
  Tensor halves(DType::kF16, {65536});
  for (uint32_t b = 0; b < 65536; ++b) {
    halves.data<Float16>()[b].bits = static_cast<uint16_t>(b);
  }
  Tensor floats(DType::kF32, {20000});
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) floats.data<float>()[i] = FromBits(rng());
  Graph g("main");
  const ValueId h = g.AddValue("h", DType::kF16, {65536});
  g.SetConstant(h, halves);
  const ValueId f = g.AddValue("f", DType::kF32, {20000});
  g.SetConstant(f, floats);
  absl::StatusOr<Graph> p = ParseGraph(PrintGraph(g, PrintOptions::Full()));
  ASSERT_TRUE(p.ok()) << p.status();
  const Tensor* ph = p->constant(*p->FindValue("h"));
  const Tensor* pf = p->constant(*p->FindValue("f"));
  ASSERT_NE(ph, nullptr);
  ASSERT_NE(pf, nullptr);
  EXPECT_EQ(std::memcmp(ph->raw_data(), halves.raw_data(), 2 * 65536), 0);
  EXPECT_EQ(std::memcmp(pf->raw_data(), floats.raw_data(), 4 * 20000), 0);
}

TEST(TextRoundTrip, DuplicateAndEmptyNamesGetFreshNames) {
  Graph g("main");
  const ValueId a = g.AddValue("x", DType::kF32, {});
  const ValueId b = g.AddValue("x", DType::kF32, {});
  const ValueId c = g.AddValue("", DType::kF32, {});
  g.AddInput(a);
  g.AddInput(b);
  g.AddNode("Add", {a, b}, {c});
  g.AddOutput(c);
  const std::string text = PrintGraph(g);
  EXPECT_EQ(text,
            "graph main(%x: f32[], %x.1: f32[]) -> (%v2) opset 18 {\n"
            "  %v2 = Add(%x, %x.1) : f32[]\n"
            "}\n");
  absl::StatusOr<Graph> p = ParseGraph(text);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(PrintGraph(*p), text);
}

TEST(TextRoundTrip, ElidedConstantsNeedTheOption) {
  Graph g("main");
  const ValueId w = g.AddValue("w", DType::kF32, {64, 3, 7, 7});
  Tensor t(DType::kF32, {64, 3, 7, 7});
  t.data<float>()[5] = 1.0f;
  g.SetConstant(w, t);
  g.AddOutput(w);
  const std::string text = PrintGraph(g);
  EXPECT_THAT(text, HasSubstr("%w = constant f32[64,3,7,7] <elided>\n"));
  absl::StatusOr<Graph> strict = ParseGraph(text);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(strict.status().message(), HasSubstr("2:17: the data of constant "
                                                   "f32[64,3,7,7] is elided"));
  ParseOptions options;
  options.allow_elided_constants = true;
  absl::StatusOr<Graph> zeros = ParseGraph(text, options);
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  const Tensor* z = zeros->constant(zeros->outputs()[0]);
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->num_elements(), 64 * 3 * 7 * 7);
  EXPECT_EQ(z->data<float>()[5], 0.0f);
  EXPECT_THAT(PrintGraph(*zeros), HasSubstr("splat(0.0)"));
}

TEST(TextParse, PrintNodeForDebugging) {
  absl::StatusOr<Graph> g = ParseGraph(
      "graph g(%a: f32[2]) -> (%b) { %b = Relu(%a) name=\"r\" : f32[2] }");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(PrintNode(*g, g->nodes()[0]),
            "%b = Relu(%a) name=\"r\" : f32[2]");
}

struct ErrorCase {
  const char* text;
  const char* message;
};

TEST(TextParse, ErrorsNameLineColumnAndExpectation) {
  const ErrorCase cases[] = {
      {"", "1:1: expected 'graph', got end of input"},
      {"graph g(%x f32[1]) -> () {}",
       "1:12: expected ':' before the input's type, got 'f32'"},
      {"graph g() -> (%y) {}", "1:15: graph output %y is never defined"},
      {"graph g() -> () {\n  %a = Relu(%b) : f32[1]\n}",
       "2:13: value %b is used but never defined"},
      {"graph g() -> () {\n  %a = constant f32[1] [1.0]\n  %a = Neg(%a)\n}",
       "3:3: value %a is defined twice (first at 2:3)"},
      {"graph g() -> () { %a = constant f32[2] [1.0] }",
       "1:33: f32[2] has 2 elements, the literal 1"},
      {"graph g() -> () { %a = constant f32[1] [1.0, 2.0] }",
       "1:46: too many elements for f32[1] (it has 1)"},
      {"graph g() -> () { %a = constant i8[1] [300] }",
       "1:40: integer 300 is out of range [-128, 127] for an i8 element"},
      {"graph g() -> () { %a = constant f32[] 1e39 }",
       "1:39: '1e39' is out of range for f32"},
      {"graph g() -> () { %a = constant f32[?] [] }",
       "1:33: constant shape f32[?] must be static"},
      {"graph g() -> () { %a = constant f32[2] 1.0 }",
       "1:40: a bare element needs a one-element type, f32[2] has 2"},
      {"graph g() -> () { %a = constant bool[] 1 }",
       "1:40: expected true or false, got '1'"},
      {"graph g() -> () { %a = F() {x=[]} }",
       "1:31: an empty list needs its type: write ints[], floats[] or "
       "strings[]"},
      {"graph g() -> () { %a = F() {x=[1, \"a\"]} }",
       "1:31: a list mixes strings and numbers"},
      {"graph g() -> () { %a = F() {x=1, x=2} }",
       "1:34: attribute \"x\" given twice"},
      {"graph g() -> () { %a = F() {x=} }",
       "1:31: expected an attribute value"},
      {"graph g() -> () { %a = F() : f32[1], f32[2] }",
       "1:28: more types than the node's 1 outputs"},
      {"graph g() -> () { %a = F() : f32[q] }",
       "1:34: expected a dimension or '?', got 'q'"},
      {"graph g() -> () { %a = F() : f33[1] }", "1:30: expected a dtype"},
      {"graph g() -> () { %a = F(%\"unterminated) }",
       "1:27: unterminated string"},
      {"graph g() -> () { %a = F(%\"bad \\q\") }",
       "1:33: unknown escape in string"},
      {"graph g() -> () { %a = F() {f=nan(0x1234)} }",
       "1:31: nan(0x1234) is not a f32 NaN bit pattern"},
      {"graph g() -> () { %a = F(%) }",
       "1:26: expected a value name after '%'"},
      {"graph g() -> () { %a = F() {x=12abc} }",
       "1:31: malformed number starting '12'"},
      {"graph g() -> () { %a = F() } trailing",
       "1:30: expected end of input, got 'trailing'"},
      {"graph g() -> () { $ }", "1:19: unexpected character \"$\""},
      {"graph g() -> () { %a = constant f32[1000000000000] <elided> }",
       "1:33: constant f32[1000000000000] is over the 1073741824-byte limit"},
      {"graph g() -> () { %a, %b = constant f32[] 1.0 }",
       "1:19: a constant defines exactly one %value"},
  };
  for (const ErrorCase& c : cases) {
    absl::StatusOr<Graph> g = ParseGraph(c.text);
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(g.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(TextParse, DeepNestingIsAnError) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "graph g() -> () { %a = If() {b=";
  absl::StatusOr<Graph> g = ParseGraph(text);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("graphs nest deeper than 64"));
}

TEST(TextParse, EveryPrefixOfAGraphIsAnErrorNotACrash) {
  const std::string text = PrintGraph(KitchenSink(), PrintOptions::Full());
  ParseOptions options;
  options.max_constant_bytes = 1 << 20;
  for (size_t n = 0; n + 1 < text.size(); ++n) {
    // The text minus its final newline and closing brace never parses.
    absl::StatusOr<Graph> g = ParseGraph(text.substr(0, n), options);
    ASSERT_FALSE(g.ok()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  }
  for (const char* garbage :
       {"\xff\xfe\x00", "graph", "graph g(", "}}}}", "graph g() -> ( {",
        "graph g() -> () { %a = constant f32[-1] [] }",
        "graph g() -> () { %a = constant f32[9223372036854775807,2] [] }",
        "graph g() -> () { %a = F() {t=tensor ?[1] [1]} }",
        "graph g() -> () { %a = F() {f=nan(0xffffffffffffffffff)} }",
        "graph g() -> () { %a = F() : f32[99999999999999999999] }",
        "%%%%", "\"\\x", "graph g() -> () { %a = F() {g=graph <nul} }"}) {
    EXPECT_FALSE(ParseGraph(std::string(garbage),
                            options)
                     .ok())
        << garbage;
  }
}

// Random edits of a printed graph: parsing must return a Status, and whatever
// parses must print in a form that parses back to the same text.
TEST(TextParse, RandomMutationsNeverCrash) {
  const std::string text = PrintGraph(KitchenSink(), PrintOptions::Full());
  const std::string alphabet = "%\"\\()[]{},=:<>?*._-+0123456789aefinx \n\x80";
  ParseOptions options;
  options.max_constant_bytes = 1 << 16;
  options.allow_elided_constants = true;
  std::mt19937 rng(12345);
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = text;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s.erase(at, 1 + rng() % 4); break;
        case 1: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 2: s[at] = alphabet[rng() % alphabet.size()]; break;
        case 3: {
          const size_t from = rng() % s.size();
          s.insert(at, s.substr(from, rng() % 16));
          break;
        }
      }
      if (s.empty()) s = "x";
    }
    absl::StatusOr<Graph> g = ParseGraph(s, options);
    if (!g.ok()) {
      EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ++parsed;
    const std::string printed = PrintGraph(*g, PrintOptions::Full());
    absl::StatusOr<Graph> again = ParseGraph(printed, options);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
    EXPECT_EQ(PrintGraph(*again, PrintOptions::Full()), printed);
  }
  EXPECT_GT(parsed, 0);  // some mutations (e.g. inside names) stay valid
}

TEST(TextParse, BFloat16ConstantsRoundTripBitExactly) {
  const char* text = R"(graph main(%x: bf16[4]) -> (%y) opset 18 {
  %c = constant bf16[6] [1.5, -0.0, 3.141, nan(0x7fc1), -inf, 9.184e-41]
  %y = Add(%x, %c) : bf16[4]
}
)";
  absl::StatusOr<Graph> g = ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  const Tensor* c = g->constant(*g->FindValue("c"));
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->dtype(), DType::kBF16);
  const uint16_t want[] = {0x3fc0, 0x8000, 0x4049, 0x7fc1, 0xff80, 0x0001};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c->data<BFloat16>()[i].bits, want[i]) << i;
  absl::StatusOr<Graph> again = ParseGraph(PrintGraph(*g));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(PrintGraph(*again), PrintGraph(*g));
  // A literal beyond bf16's range and a NaN pattern that is not a NaN fail.
  EXPECT_FALSE(ParseGraph("graph m() -> () opset 18 {\n  %c = constant bf16[] 4e38\n}\n").ok());
  EXPECT_FALSE(
      ParseGraph("graph m() -> () opset 18 {\n  %c = constant bf16[] nan(0x7f80)\n}\n").ok());
}

// A fuzzer's finding: an error quoted a 1,000-byte token whole.
TEST(TextParse, ErrorsCutLongTokensAndEscapeControlBytes) {
  const std::string long_name = "%" + std::string(1000, 'g');
  absl::StatusOr<Graph> g = ParseGraph("graph m" + long_name + "() -> () opset 18 {}\n");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(),
              HasSubstr("1:8: expected '(' to start the graph inputs, got %" +
                        std::string(40, 'g') + "..."));
  EXPECT_LT(g.status().message().size(), 200u);
  absl::StatusOr<Graph> bel = ParseGraph("graph m \x07\x1b[31m");
  ASSERT_FALSE(bel.ok());
  EXPECT_EQ(bel.status().message().find('\x1b'), absl::string_view::npos) << bel.status();
  EXPECT_EQ(bel.status().message().find('\x07'), absl::string_view::npos) << bel.status();
}

}  // namespace
}  // namespace kiln::ir
