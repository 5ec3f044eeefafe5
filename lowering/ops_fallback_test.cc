// Tests of reference fallback calls (lowering/ops_fallback.h): nodes lowering
// cannot compile (no lowering, a refused form, data-dependent shapes, If with
// captures) become "kiln.Reference" kernels among ordinary loop kernels; the
// lowered program, run by the loop interpreter plus the reference for
// externs, must give what the reference interpreter gives on the whole graph.
#include "ir/loop/extern_schema.h"
#include "ir/loop/module.h"
#include "lowering/ops_fallback.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "interp/loop_module.h"
#include "lowering/lower_graph.h"
#include "interp/compare.h"
#include "interp/interpreter.h"

namespace kiln::lowering {
namespace {

using ir::loop::Kernel;

ir::Graph Parse(const char* text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : ir::Graph("invalid");
}

LoweringOptions WithFallback() {
  LoweringOptions o;
  o.reference_fallback = [](const ir::Graph& g) { return interp::UnsupportedOps(g).empty(); };
  return o;
}

std::vector<const Kernel*> ReferenceCalls(const ir::loop::LoopModule& lp) {
  std::vector<const Kernel*> calls;
  for (const Kernel& k : lp.program.kernels) {
    if (ir::loop::IsReferenceCall(k)) calls.push_back(&k);
  }
  return calls;
}

std::string Attr(const Kernel& k, const char* name) {
  auto it = k.call.attrs.find(name);
  if (it == k.call.attrs.end()) return "";
  const std::string* s = std::get_if<std::string>(&it->second);
  return s != nullptr ? *s : "";
}

// Lowers `g` with fallback, runs it and the reference on `inputs`, compares.
void ExpectMatchesReference(const ir::Graph& g, const std::vector<ir::Tensor>& inputs,
                            ir::loop::LoopModule* lowered = nullptr) {
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(g, WithFallback());
  ASSERT_TRUE(lp.ok()) << lp.status();
  absl::StatusOr<std::vector<ir::Tensor>> got = interp::RunLoopModule(*lp, inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < got->size(); ++o) {
    EXPECT_EQ((*got)[o].shape(), (*want)[o].shape()) << "output " << o;
    interp::CompareResult r = interp::CompareTensors((*got)[o], (*want)[o]);
    EXPECT_TRUE(r.ok) << "output " << o << ": " << r.message;
  }
  if (lowered != nullptr) *lowered = *std::move(lp);
}

ir::Tensor F32(const ir::Shape& shape, std::vector<float> v) {
  ir::Tensor t(ir::DType::kF32, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

constexpr char kDetBetweenLoops[] = R"(graph g(%x: f32[2,3,3]) -> (%y) opset 13 {
  %r = Relu(%x) : f32[2,3,3]
  %t = Transpose(%r) {perm=[0, 2, 1]} : f32[2,3,3]
  %d = Det(%t) name="det" : f32[2]
  %y = Mul(%d, %d) : f32[2]
})";

TEST(ReferenceFallback, OffByDefault) {
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(Parse(kDetBetweenLoops));
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(lp.status().message(), "no lowering for op Det"))
      << lp.status();
}

TEST(ReferenceFallback, NodeWithoutLoweringAmongLoopKernels) {
  ir::Graph g = Parse(kDetBetweenLoops);
  ir::loop::LoopModule lp;
  ExpectMatchesReference(
      g, {F32({2, 3, 3}, {2, 1, 0, 1, 3, 1, 0, 1, 4, 1, 2, 3, 0, 1, 4, 5, 6, 0.5})}, &lp);
  const std::vector<const Kernel*> calls = ReferenceCalls(lp);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(Attr(*calls[0], ir::loop::kAttrReferenceOp), "Det");
  EXPECT_EQ(Attr(*calls[0], ir::loop::kAttrFallbackReason), "node 'det' (Det): no lowering for op Det");
  EXPECT_EQ(calls[0]->ops, std::vector<std::string>{"det"});
  int loop_kernels = 0;
  for (const Kernel& k : lp.program.kernels) loop_kernels += k.kind == Kernel::Kind::kLoop;
  EXPECT_GE(loop_kernels, 2);  // Relu(+Transpose copy into the call) and Mul
}

TEST(ReferenceFallback, IfWithCapturedValues) {
  // Both branches capture values computed by loop kernels.
  ir::Graph g = Parse(R"(graph g(%c: bool[], %x: f32[4]) -> (%y) opset 13 {
  %a = Exp(%x) : f32[4]
  %b = Neg(%x) : f32[4]
  %i = If(%c) {
    then_branch=graph t() captures(%p: f32[4] = %a, %q: f32[4] = %b) -> (%o) {
      %o = Add(%p, %q) : f32[4]
    },
    else_branch=graph e() captures(%p: f32[4] = %b) -> (%o) {
      %o = Mul(%p, %p) : f32[4]
    }
  } : f32[4]
  %y = Sigmoid(%i) : f32[4]
})");
  const ir::Tensor x = F32({4}, {0.5f, -1.0f, 2.0f, 0.0f});
  for (bool cond : {true, false}) {
    ir::Tensor c(ir::DType::kBool, {});
    c.data<bool>()[0] = cond;
    ir::loop::LoopModule lp;
    ExpectMatchesReference(g, {c, x}, &lp);
    const std::vector<const Kernel*> calls = ReferenceCalls(lp);
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0]->call.inputs.size(), 3u);  // cond, then a and b
  }
}

TEST(ReferenceFallback, RefusedFormIsUndone) {
  // ReduceSum with axes known only at run time: the lowering refuses after
  // starting; nothing it added may remain.
  ir::Graph g = Parse(R"(graph g(%x: f32[3,2,2], %axes: i64[1]) -> (%y) opset 13 {
  %e = Exp(%x) : f32[3,2,2]
  %s = ReduceSum(%e, %axes) {keepdims=0} : f32[3,2]
  %y = Neg(%s) : f32[3,2]
})");
  ir::Tensor axes(ir::DType::kI64, {1});
  axes.data<int64_t>()[0] = 1;
  ir::Tensor x(ir::DType::kF32, {3, 2, 2});
  for (int i = 0; i < 12; ++i) x.data<float>()[i] = 0.1f * i - 0.5f;
  ir::loop::LoopModule lp;
  ExpectMatchesReference(g, {x, axes}, &lp);
  ASSERT_EQ(ReferenceCalls(lp).size(), 1u);
  EXPECT_TRUE(absl::StrContains(Attr(*ReferenceCalls(lp)[0], ir::loop::kAttrFallbackReason), "axes"));
  // Exp, the reference call, Neg: no kernel or buffer of the refused try.
  EXPECT_EQ(lp.program.kernels.size(), 3u);
  EXPECT_EQ(lp.program.buffers.size(), 5u);  // x, axes, e, s, y
}

constexpr char kNonZero[] = R"(graph g(%x: f32[2,3]) -> (%n, %t, %z) opset 13 {
  %n = NonZero(%x) name="nz" : i64[2,?]
  %t = Transpose(%n) : i64[?,2]
  %z = Relu(%x) : f32[2,3]
})";

TEST(ReferenceFallback, DataDependentShapes) {
  ir::Graph g = Parse(kNonZero);
  ir::loop::LoopModule lp;
  ExpectMatchesReference(g, {F32({2, 3}, {0, 1, 0, 2, 0, 3})}, &lp);
  // NonZero and the Transpose reading its result are reference calls; the
  // Relu stays a loop kernel.
  const std::vector<const Kernel*> calls = ReferenceCalls(lp);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(Attr(*calls[1], ir::loop::kAttrReferenceOp), "Transpose");
  EXPECT_TRUE(absl::StrContains(Attr(*calls[1], ir::loop::kAttrFallbackReason),
                                "value 'n' (produced by node 'nz' (NonZero)) has dynamic shape"))
      << Attr(*calls[1], ir::loop::kAttrFallbackReason);
  const std::vector<bool> dynamic = ir::loop::DynamicBuffers(lp.program);
  EXPECT_TRUE(dynamic[lp.outputs[0]]);
  EXPECT_TRUE(dynamic[lp.outputs[1]]);
  EXPECT_FALSE(dynamic[lp.outputs[2]]);
  EXPECT_EQ(lp.program.buffers[lp.outputs[0]].shape, (ir::Shape{2, 0}));
  EXPECT_EQ(lp.program.buffers[lp.outputs[0]].StorageSize(), 0);
  // Different data, different shape, same program.
  absl::StatusOr<std::vector<ir::Tensor>> got =
      interp::RunLoopModule(lp, {F32({2, 3}, {1, 1, 1, 1, 0, 1})});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].shape(), (ir::Shape{2, 5}));
  EXPECT_EQ((*got)[1].shape(), (ir::Shape{5, 2}));
}

TEST(ReferenceFallback, WithoutFallbackDataDependentShapesAreRefused) {
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(Parse(kNonZero));
  ASSERT_FALSE(lp.status().ok());
  EXPECT_EQ(lp.status().message(),
            "value 'n' (produced by node 'nz' (NonZero)) has dynamic shape [2,?]; "
            "lowering needs static shapes");
}

TEST(ReferenceFallback, DynamicGraphInputStaysRefused) {
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(Parse(R"(graph g(%x: f32[?]) -> (%y) {
  %y = Relu(%x) : f32[?]
})"),
                                                 WithFallback());
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().message(),
            "value 'x' (a graph input) has dynamic shape [?]; lowering needs static shapes");
}

TEST(ReferenceFallback, OpTheReferenceCannotRunStaysRefused) {
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(Parse(R"(graph g(%x: f32[2]) -> (%y) {
  %y = com.example.Frob(%x) : f32[2]
})"),
                                                 WithFallback());
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(lp.status().message(), "op domain 'com.example'"))
      << lp.status();
}

TEST(ReferenceFallback, CorruptCallIsAnError) {
  ir::Graph g = Parse(kDetBetweenLoops);
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(g, WithFallback());
  ASSERT_TRUE(lp.ok()) << lp.status();
  for (Kernel& k : lp->program.kernels) {
    if (ir::loop::IsReferenceCall(k)) k.call.attrs[ir::loop::kAttrReferenceGraph] = std::string("graph {");
  }
  absl::StatusOr<std::vector<ir::Tensor>> got =
      interp::RunLoopModule(*lp, {F32({2, 3, 3}, std::vector<float>(18, 1.0f))});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "does not parse")) << got.status();
}

TEST(ReferenceFallback, WrongDeclaredShapeIsAnError) {
  // Shape inference (here: the text) claims 3 rows; NonZero gives 2.
  ir::Graph g = Parse(R"(graph g(%x: f32[2,3]) -> (%n) opset 13 {
  %n = NonZero(%x) : i64[3,?]
})");
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(g, WithFallback());
  ASSERT_TRUE(lp.ok()) << lp.status();
  absl::StatusOr<std::vector<ir::Tensor>> got =
      interp::RunLoopModule(*lp, {F32({2, 3}, {0, 1, 0, 2, 0, 3})});
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(absl::StrContains(got.status().message(),
                                "is i64[2,3] at run time, but the model declares i64[3,?]"))
      << got.status();
}

}  // namespace
}  // namespace kiln::lowering
