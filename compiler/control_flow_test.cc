// File: compiler/control_flow_test.cc — compiled Loop and Scan (decision
// 0043) against the reference interpreter: carried state, run-time trip
// counts and conditions, scan outputs, an If inside a Loop, the iteration
// limit, and the forms that stay reference calls with the report's reason;
// If branches typed from the outer scope's shapes (decision 0053).
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/onednn/layout_oracle.h"
#include "compiler/compiler.h"
#include "compiler/control_flow.h"
#include "compiler/pipeline.h"
#include "compiler/test_util.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/test_models.h"
#include "gtest/gtest.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "ir/graph/text.h"
#include "isa/isa.h"

namespace kiln {
namespace {

using compiler_testing::Options;
using compiler_testing::Parse;
using compiler_testing::Random;

template <typename T>
ir::Tensor Scalar(T v) {
  return ir::Tensor::Scalar<T>(v);
}

std::unique_ptr<CompiledModel> Compile(const char* text, CompileOptions o = Options()) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(o).CompileGraph(Parse(text));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// The model's compiled control-flow steps by call ("Loop", "Scan", "If").
std::vector<std::string> CompiledCalls(const CompiledModel& model) {
  std::vector<std::string> calls;
  for (const KernelReport& k : model.report().kernels) {
    if (k.backend == "compiled") calls.push_back(k.call);
  }
  return calls;
}

// Runs `model` and the reference on `inputs`; the outputs agree, shapes
// included.
void ExpectSameAsReference(const CompiledModel& model, const char* text,
                           const std::vector<ir::Tensor>& inputs) {
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(Parse(text), inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<ir::Tensor>> got = model.Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < got->size(); ++o) {
    EXPECT_EQ((*got)[o].shape(), (*want)[o].shape()) << "output " << o;
    interp::CompareResult r =
        interp::CompareTensors((*got)[o], (*want)[o], interp::Tolerance{1e-4, 1e-5, {}});
    EXPECT_TRUE(r.ok) << "output " << o << ": " << r.message << "\n" << model.report().ToText();
  }
}

// A constant trip count, no condition: the carried state h goes through a
// recurrence reading outer values (a graph input, a constant); the scan
// output stacks a reduction of each new state (its leading extent is left
// to run time, as ONNX's inference leaves it).
constexpr char kStaticTrips[] = R"(
graph g(%x: f32[4,8]) -> (%h, %s, %n) opset 13 {
  %m = constant i64[] 5
  %w = constant f32[8] <elided>
  %h0 = Relu(%x) name="relu" : f32[4,8]
  %h, %s, %n = Loop(%m, _, %h0, %x) {
    body=graph b(%i: i64[], %c: bool[], %hi: f32[4,8], %ni: f32[4,8]) captures(%x: f32[4,8] = %x, %w: f32[8] = %w) -> (%c, %ho, %no, %so) {
      %p = Mul(%hi, %w) : f32[4,8]
      %q = Add(%p, %x) : f32[4,8]
      %ho = Tanh(%q) : f32[4,8]
      %no = Neg(%ni) : f32[4,8]
      %so = ReduceMax(%ho) {axes=[1], keepdims=0} : f32[4]
    }
  } name="loop" : f32[4,8], f32[4,8], f32[?,4]
}
)";

TEST(CompiledLoop, ConstantTripCountCarriesStateAndStacksScanOutputs) {
  std::unique_ptr<CompiledModel> model = Compile(kStaticTrips);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"Loop"})
      << model->report().ToText();
  EXPECT_EQ(model->report().reference_calls, 0) << model->report().ToText();
  for (uint32_t seed : {1u, 2u}) ExpectSameAsReference(*model, kStaticTrips, {Random({4, 8}, seed)});
  absl::StatusOr<std::vector<ir::Tensor>> got = model->Run({Random({4, 8}, 3)});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[2].shape(), (ir::Shape{5, 4}));
}

// A run-time trip count and condition: the body stops when the running sum
// passes a bound; the scan output's extent is the iterations run.
constexpr char kRunTimeTrips[] = R"(
graph g(%m: i64[], %c: bool[], %x: f32[3]) -> (%acc, %k, %s) opset 13 {
  %a0 = constant f32[3] [0.0, 0.0, 0.0]
  %k0 = constant i64[] 0
  %acc, %k, %s = Loop(%m, %c, %a0, %k0) {
    body=graph b(%i: i64[], %ci: bool[], %a: f32[3], %kk: i64[]) captures(%x: f32[3] = %x) -> (%co, %ao, %ko, %so) {
      %e = Exp(%x) : f32[3]
      %ao = Add(%a, %e) : f32[3]
      %ko = Add(%kk, %i) : i64[]
      %mx = ReduceMax(%ao) {keepdims=0} : f32[]
      %bound = constant f32[] 10.0
      %co = Less(%mx, %bound) : bool[]
      %so = Mul(%ao, %e) : f32[3]
    }
  } name="loop" : f32[3], i64[], f32[?,3]
}
)";

TEST(CompiledLoop, RunTimeTripCountAndCondition) {
  std::unique_ptr<CompiledModel> model = Compile(kRunTimeTrips);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"Loop"})
      << model->report().ToText();
  EXPECT_EQ(model->report().reference_calls, 0) << model->report().ToText();
  // The trip count ends it, the condition ends it, it never starts.
  for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000}}) {
    for (bool c : {true, false}) {
      SCOPED_TRACE(absl::StrCat("M=", m, " cond=", c));
      ExpectSameAsReference(*model, kRunTimeTrips, {Scalar<int64_t>(m), Scalar<bool>(c),
                                                    Random({3}, 10 + m)});
    }
  }
  // Into caller tensors: the scan output takes each run's extent.
  const ir::Graph g = Parse(kRunTimeTrips);
  std::vector<ir::Tensor> outs = {ir::Tensor(ir::DType::kF32, {3}),
                                  ir::Tensor(ir::DType::kI64, {}),
                                  ir::Tensor(ir::DType::kF32, {0, 3})};
  std::vector<ir::Tensor*> ptrs = {&outs[0], &outs[1], &outs[2]};
  for (int64_t m : {int64_t{2}, int64_t{0}, int64_t{4}}) {
    const std::vector<ir::Tensor> in = {Scalar<int64_t>(m), Scalar<bool>(true),
                                        Random({3}, 7)};
    absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, in);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(model->RunInto(in, ptrs).ok());
    for (size_t o = 0; o < outs.size(); ++o) {
      EXPECT_EQ(outs[o].shape(), (*want)[o].shape()) << "output " << o;
      EXPECT_TRUE(interp::CompareTensors(outs[o], (*want)[o]).ok) << "output " << o;
    }
  }
}

// An If on the iteration number inside the body: the If runs compiled
// branches inside the compiled body.
constexpr char kIfInLoop[] = R"(
graph g(%m: i64[], %x: f32[4,8]) -> (%h, %s) opset 13 {
  %h0 = Sigmoid(%x) name="sig" : f32[4,8]
  %t = constant bool[] true
  %h, %s = Loop(%m, %t, %h0) {
    body=graph b(%i: i64[], %c: bool[], %hi: f32[4,8]) captures(%x: f32[4,8] = %x) -> (%c, %ho, %so) {
      %two = constant i64[] 2
      %zero = constant i64[] 0
      %r = Mod(%i, %two) : i64[]
      %even = Equal(%r, %zero) : bool[]
      %ho = If(%even) {
        then_branch=graph t() captures(%hi: f32[4,8] = %hi, %x: f32[4,8] = %x) -> (%ta) {
          %ta = Add(%hi, %x) : f32[4,8]
        },
        else_branch=graph f() captures(%hi: f32[4,8] = %hi) -> (%fb) {
          %fb = Mul(%hi, %hi) : f32[4,8]
        }
      } name="pick" : f32[4,8]
      %so = ReduceMax(%ho) {axes=[0, 1], keepdims=0} : f32[]
    }
  } name="loop" : f32[4,8], f32[?]
}
)";

TEST(CompiledLoop, IfInsideTheBody) {
  std::unique_ptr<CompiledModel> model = Compile(kIfInLoop);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"Loop"})
      << model->report().ToText();
  EXPECT_EQ(model->report().reference_calls, 0) << model->report().ToText();
  for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{4}, int64_t{5}}) {
    SCOPED_TRACE(absl::StrCat("M=", m));
    ExpectSameAsReference(*model, kIfInLoop, {Scalar<int64_t>(m), Random({4, 8}, 20)});
  }
}

TEST(CompiledLoop, IterationLimitIsAClearError) {
  CompileOptions o = Options();
  o.max_loop_iterations = 8;
  // Only the trip count ends the Loop: refused before the first iteration.
  std::unique_ptr<CompiledModel> model = Compile(kIfInLoop, o);
  ASSERT_NE(model, nullptr);
  ExpectSameAsReference(*model, kIfInLoop, {Scalar<int64_t>(8), Random({4, 8}, 21)});
  absl::StatusOr<std::vector<ir::Tensor>> r =
      model->Run({Scalar<int64_t>(int64_t{1} << 62), Random({4, 8}, 21)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "Loop 'loop' would run more than 8 iterations (trip count 4611686018427387904), "
            "the limit CompileOptions::max_loop_iterations sets");
  // A condition that could end it: the error comes when the limit is hit.
  model = Compile(kRunTimeTrips, o);
  ASSERT_NE(model, nullptr);
  ir::Tensor tiny(ir::DType::kF32, {3});  // exp(-20) per step: the bound is never passed
  for (int i = 0; i < 3; ++i) tiny.data<float>()[i] = -20.0f;
  r = model->Run({Scalar<int64_t>(100), Scalar<bool>(true), tiny});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "would run more than 8 iterations"))
      << r.status();
}

// A Loop inside a Loop body, each with carried state and a scan output,
// the inner one reading a value captured through both bodies. The inner
// scan output is declared with its extent (a constant trip count), so the
// reduction over it compiles.
constexpr char kNestedLoops[] = R"(
graph g(%m: i64[], %x: f32[2,3]) -> (%h, %z) opset 13 {
  %n = constant i64[] 3
  %h, %z = Loop(%m, _, %x) {
    body=graph b(%i: i64[], %c: bool[], %hi: f32[2,3]) captures(%n: i64[] = %n, %x: f32[2,3] = %x) -> (%c, %ho, %so) {
      %inner, %rows = Loop(%n, _, %hi) {
        body=graph ib(%j: i64[], %ic: bool[], %gi: f32[2,3]) captures(%x: f32[2,3] = %x) -> (%ic, %go, %ro) {
          %p = Mul(%gi, %x) : f32[2,3]
          %go = Sin(%p) : f32[2,3]
          %ro = ReduceMax(%go) {axes=[0], keepdims=0} : f32[3]
        }
      } name="inner" : f32[2,3], f32[3,3]
      %ho = Add(%inner, %hi) : f32[2,3]
      %so = ReduceMin(%rows) {axes=[0], keepdims=0} : f32[3]
    }
  } name="outer" : f32[2,3], f32[?,3]
}
)";

TEST(CompiledLoop, LoopInsideALoopBody) {
  std::unique_ptr<CompiledModel> model = Compile(kNestedLoops);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"Loop"})
      << model->report().ToText();
  EXPECT_EQ(model->report().reference_calls, 0) << model->report().ToText();
  for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{3}}) {
    SCOPED_TRACE(absl::StrCat("M=", m));
    ExpectSameAsReference(*model, kNestedLoops, {Scalar<int64_t>(m), Random({2, 3}, 60)});
  }
}

// The Loop's node names fewer outputs than the body yields: the absent
// scan output is computed into scratch and dropped.
constexpr char kAbsentOutputs[] = R"(
graph g(%x: f32[5]) -> (%h) opset 13 {
  %m = constant i64[] 4
  %h = Loop(%m, _, %x) {
    body=graph b(%i: i64[], %c: bool[], %hi: f32[5]) -> (%c, %ho, %so) {
      %ho = Cos(%hi) : f32[5]
      %so = Neg(%ho) : f32[5]
    }
  } name="loop" : f32[5]
}
)";

TEST(CompiledLoop, AbsentScanOutput) {
  std::unique_ptr<CompiledModel> model = Compile(kAbsentOutputs);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"Loop"})
      << model->report().ToText();
  ExpectSameAsReference(*model, kAbsentOutputs, {Random({5}, 70)});
}

// Slices and a condition the body computes on the reference, of
// data-dependent shape: each arrives as a tensor, all slices must agree.
constexpr char kDynamicSlices[] = R"(
graph g(%m: i64[], %x: f32[4]) -> (%h, %s) opset 13 {
  %t = constant bool[] true
  %h, %s = Loop(%m, %t, %x) {
    body=graph b(%i: i64[], %c: bool[], %hi: f32[4]) -> (%co, %ho, %so) {
      %zero = constant f32[] 0.0
      %lim = constant i64[] 100
      %ho = Neg(%hi) : f32[4]
      %mask = Greater(%ho, %zero) : bool[4]
      %so = Compress(%ho, %mask) : f32[?]
      %co = Less(%i, %lim) : bool[*]
    }
  } name="loop" : f32[4], f32[?,?]
}
)";

TEST(CompiledLoop, SlicesAndConditionOfDataDependentShape) {
  std::unique_ptr<CompiledModel> model = Compile(kDynamicSlices);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"Loop"})
      << model->report().ToText();
  // Compress and the Less typed bool[*] run on the reference in the body.
  EXPECT_EQ(model->report().reference_calls, 2) << model->report().ToText();
  const ir::Tensor steady = ir::Tensor::FromVector<float>({4}, {1, -2, 3, -4});
  for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{4}}) {
    SCOPED_TRACE(absl::StrCat("M=", m));
    ExpectSameAsReference(*model, kDynamicSlices, {Scalar<int64_t>(m), steady});
  }
  // One positive, then three: the slices change shape, an error on both.
  const std::vector<ir::Tensor> changing = {Scalar<int64_t>(3),
                                            ir::Tensor::FromVector<float>({4}, {1, 2, 3, -4})};
  EXPECT_FALSE(interp::Run(Parse(kDynamicSlices), changing).ok());
  absl::StatusOr<std::vector<ir::Tensor>> r = model->Run(changing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "Loop 'loop' scan output 0 changes from f32[1] to f32[3] across iterations");
}

// A carried value that grows every iteration has no static form: the Loop
// stays a reference call, still right, and the report says why.
constexpr char kGrowingState[] = R"(
graph g(%x: f32[2]) -> (%v) opset 13 {
  %m = constant i64[] 3
  %v = Loop(%m, _, %x) {
    body=graph b(%i: i64[], %c: bool[], %vi: f32[?]) -> (%c, %vo) {
      %vo = Concat(%vi, %vi) {axis=0} : f32[?]
    }
  } name="grow" : f32[?]
}
)";

TEST(CompiledLoop, StateThatChangesShapeStaysAReferenceCall) {
  std::unique_ptr<CompiledModel> model = Compile(kGrowingState);
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(CompiledCalls(*model).empty()) << model->report().ToText();
  EXPECT_EQ(model->report().reference_calls, 1);
  const std::string warnings = absl::StrJoin(model->report().warnings, "\n");
  EXPECT_TRUE(absl::StrContains(warnings,
                                "Loop 'grow' stays a reference call: loop-carried value 0 ('vi') "
                                "enters the body as f32[2] and leaves it as f32[?]"))
      << warnings;
  EXPECT_TRUE(absl::StrContains(model->report().ToText(), "stays a reference call"));
  ExpectSameAsReference(*model, kGrowingState, {Random({2}, 30)});
}

// Scan-9 over axis 1, reversed, with a second scan input over axis 0, a
// state, a captured constant, and outputs stacked along axis 0 and 1.
constexpr char kScan[] = R"(
graph g(%s0: f32[3], %x: f32[3,5], %y: f32[5,3]) -> (%s, %o1, %o2) opset 13 {
  %w = constant f32[3] <elided>
  %s, %o1, %o2 = Scan(%s0, %x, %y) {
    num_scan_inputs=2, scan_input_axes=[1, 0], scan_input_directions=[1, 0],
    scan_output_axes=[0, 1], scan_output_directions=[0, 1],
    body=graph b(%si: f32[3], %xi: f32[3], %yi: f32[3]) captures(%w: f32[3] = %w) -> (%so, %a, %b) {
      %p = Mul(%xi, %w) : f32[3]
      %q = Add(%si, %p) : f32[3]
      %so = Add(%q, %yi) : f32[3]
      %a = Tanh(%so) : f32[3]
      %b = Sub(%xi, %yi) : f32[3]
    }
  } name="scan" : f32[3], f32[5,3], f32[3,5]
}
)";

TEST(CompiledScan, AxesAndDirectionsMatchReference) {
  std::unique_ptr<CompiledModel> model = Compile(kScan);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"Scan"})
      << model->report().ToText();
  EXPECT_EQ(model->report().reference_calls, 0) << model->report().ToText();
  for (uint32_t seed : {40u, 41u}) {
    ExpectSameAsReference(*model, kScan,
                          {Random({3}, seed), Random({3, 5}, seed + 1), Random({5, 3}, seed + 2)});
  }
}

// Scan-8: a leading batch dim on every operand.
constexpr char kScan8[] = R"(
graph g(%s0: f32[2,4], %x: f32[2,3,4]) -> (%s, %o) opset 8 {
  %s, %o = Scan(_, %s0, %x) {
    num_scan_inputs=1, directions=[1],
    body=graph b(%si: f32[4], %xi: f32[4]) -> (%so, %a) {
      %so = Add(%si, %xi) : f32[4]
      %a = Mul(%so, %xi) : f32[4]
    }
  } name="scan8" : f32[2,4], f32[2,3,4]
}
)";

TEST(CompiledScan, BatchedScan8MatchesReference) {
  std::unique_ptr<CompiledModel> model = Compile(kScan8);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"Scan"})
      << model->report().ToText();
  ExpectSameAsReference(*model, kScan8, {Random({2, 4}, 50), Random({2, 3, 4}, 51)});
}

// An If on a run-time condition whose branches compute shapes from outer
// values' shapes, as exported streaming models do (silero VAD's LSTM
// state): then: y = Reshape(x * w, Concat(Slice(Shape(h), 1, 2), [-1])),
// hn = Concat(Unsqueeze(Tanh(h[1])), Unsqueeze(h[0])); else: y = x - w,
// hn = Concat(Unsqueeze(ConstantOfShape(Concat(Shape(x)[:1], [3]))),
// Unsqueeze(Sigmoid(h[1]))). Each branch declares its outputs with the
// exporter's symbolic dim ("batch"), which only the outer shapes fix.
std::string ShapeFromOuterScopeIf() {
  namespace ft = frontend::testing;
  using TP = onnx::TensorProto;
  ft::ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {std::string("N"), int64_t{4}});
  m.Input("h", TP::FLOAT, {int64_t{2}, std::string("N"), int64_t{3}});
  m.Input("c", TP::BOOL, {});
  m.Initializer("w", {4}, {0.5f, -1.0f, 2.0f, 0.25f});
  ft::FillInt64s(m.graph()->add_initializer(), "i0", {}, {0});
  ft::FillInt64s(m.graph()->add_initializer(), "i1", {}, {1});
  ft::FillInt64s(m.graph()->add_initializer(), "ax0", {1}, {0});
  ft::FillInt64s(m.graph()->add_initializer(), "one", {1}, {1});
  ft::FillInt64s(m.graph()->add_initializer(), "two", {1}, {2});
  ft::FillInt64s(m.graph()->add_initializer(), "three", {1}, {3});
  ft::FillInt64s(m.graph()->add_initializer(), "minus1", {1}, {-1});
  onnx::NodeProto* node = m.Node("If", {"c"}, {"y", "hn"}, "if");
  onnx::GraphProto* t = ft::AttrGraph(node, "then_branch");
  t->set_name("then");
  ft::AddNode(t, "Mul", {"x", "w"}, {"t_xw"}, "t_mul");
  ft::AddNode(t, "Shape", {"h"}, {"t_sh"}, "t_shape");
  ft::AddNode(t, "Slice", {"t_sh", "one", "two"}, {"t_n"}, "t_slice");
  ft::AttrInt(ft::AddNode(t, "Concat", {"t_n", "minus1"}, {"t_target"}, "t_target"), "axis", 0);
  ft::AddNode(t, "Reshape", {"t_xw", "t_target"}, {"t_y"}, "t_reshape");
  ft::AddNode(t, "Gather", {"h", "i0"}, {"t_h0"}, "t_g0");
  ft::AddNode(t, "Gather", {"h", "i1"}, {"t_h1"}, "t_g1");
  ft::AddNode(t, "Tanh", {"t_h1"}, {"t_a"}, "t_tanh");
  ft::AddNode(t, "Unsqueeze", {"t_a", "ax0"}, {"t_u0"}, "t_u0");
  ft::AddNode(t, "Unsqueeze", {"t_h0", "ax0"}, {"t_u1"}, "t_u1");
  ft::AttrInt(ft::AddNode(t, "Concat", {"t_u0", "t_u1"}, {"t_hn"}, "t_concat"), "axis", 0);
  ft::AddValueInfo(t->mutable_output(), "t_y", TP::FLOAT, {std::string("batch"), int64_t{4}});
  ft::AddValueInfo(t->mutable_output(), "t_hn", TP::FLOAT,
                   {int64_t{2}, std::string("batch"), int64_t{3}});
  onnx::GraphProto* e = ft::AttrGraph(node, "else_branch");
  e->set_name("else");
  ft::AddNode(e, "Sub", {"x", "w"}, {"e_y"}, "e_sub");
  ft::AddNode(e, "Shape", {"x"}, {"e_sh"}, "e_shape");
  ft::AddNode(e, "Slice", {"e_sh", "ax0", "one"}, {"e_n"}, "e_slice");
  ft::AttrInt(ft::AddNode(e, "Concat", {"e_n", "three"}, {"e_zs"}, "e_zs"), "axis", 0);
  ft::AddNode(e, "ConstantOfShape", {"e_zs"}, {"e_z"}, "e_zeros");
  ft::AddNode(e, "Gather", {"h", "i1"}, {"e_h1"}, "e_g1");
  ft::AddNode(e, "Sigmoid", {"e_h1"}, {"e_s"}, "e_sigmoid");
  ft::AddNode(e, "Unsqueeze", {"e_z", "ax0"}, {"e_u0"}, "e_u0");
  ft::AddNode(e, "Unsqueeze", {"e_s", "ax0"}, {"e_u1"}, "e_u1");
  ft::AttrInt(ft::AddNode(e, "Concat", {"e_u0", "e_u1"}, {"e_hn"}, "e_concat"), "axis", 0);
  ft::AddValueInfo(e->mutable_output(), "e_y", TP::FLOAT, {std::string("batch"), int64_t{4}});
  ft::AddValueInfo(e->mutable_output(), "e_hn", TP::FLOAT,
                   {int64_t{2}, std::string("batch"), int64_t{3}});
  m.Node("Relu", {"y"}, {"out"}, "relu");
  m.Output("out", TP::FLOAT, {std::string("N"), int64_t{4}});
  m.Output("hn", TP::FLOAT, {int64_t{2}, std::string("N"), int64_t{3}});
  return m.Bytes();
}

TEST(CompiledIf, BranchShapesFollowFromOuterShapes) {
  const std::string bytes = ShapeFromOuterScopeIf();
  for (int64_t n : {int64_t{1}, int64_t{3}}) {
    SCOPED_TRACE(absl::StrCat("N=", n));
    CompileOptions o = Options();
    o.input_shapes["x"] = {n, 4};
    o.input_shapes["h"] = {2, n, 3};
    absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(o).CompileBytes(bytes);
    ASSERT_TRUE(model.ok()) << model.status();
    const CompileReport& report = (*model)->report();
    EXPECT_EQ(CompiledCalls(**model), std::vector<std::string>{"If"}) << report.ToText();
    // Both branches and what follows the If are static: no reference call.
    EXPECT_EQ(report.reference_calls, 0) << report.ToText();
    // The oracle: the reference interpreter on the model imported without
    // shape folding (its branches as the model wrote them).
    frontend::ImportOptions io;
    io.fold_shapes = false;
    io.input_shapes["x"] = {n, 4};
    io.input_shapes["h"] = {2, n, 3};
    absl::StatusOr<frontend::ImportResult> plain = frontend::ImportModelBytes(bytes, io);
    ASSERT_TRUE(plain.ok()) << plain.status();
    for (bool c : {true, false}) {
      SCOPED_TRACE(absl::StrCat("c=", c));
      const std::vector<ir::Tensor> in = {Random({n, 4}, 60 + n), Random({2, n, 3}, 70 + n),
                                          Scalar<bool>(c)};
      absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(plain->graph, in);
      ASSERT_TRUE(want.ok()) << want.status();
      absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(in);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), 2u);
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_EQ((*got)[k].shape(), (*want)[k].shape()) << "output " << k;
        interp::CompareResult r =
            interp::CompareTensors((*got)[k], (*want)[k], interp::Tolerance{1e-5, 1e-6, {}});
        EXPECT_TRUE(r.ok) << "output " << k << ": " << r.message;
      }
    }
  }
}

// y = If(c) then x * w (w f32[4]: x must be [N,4]) else x @ W (W f32[8,4]:
// x must be [N,8]). For either binding of x, one branch cannot run.
std::string OneBranchPerWidthIf() {
  namespace ft = frontend::testing;
  using TP = onnx::TensorProto;
  ft::ModelBuilder m(17);
  m.Input("x", TP::FLOAT, {std::string("N"), std::string("K")});
  m.Input("c", TP::BOOL, {});
  m.Initializer("w", {4}, {0.5f, -1.0f, 2.0f, 0.25f});
  std::vector<float> big(32);
  for (size_t i = 0; i < big.size(); ++i) big[i] = 0.125f * static_cast<float>(i % 7) - 0.3f;
  m.Initializer("W", {8, 4}, big);
  onnx::NodeProto* node = m.Node("If", {"c"}, {"y"}, "if");
  onnx::GraphProto* t = ft::AttrGraph(node, "then_branch");
  t->set_name("then");
  ft::AddNode(t, "Mul", {"x", "w"}, {"t_y"}, "t_mul");
  ft::AddValueInfo(t->mutable_output(), "t_y", TP::FLOAT, {std::string("N"), int64_t{4}});
  onnx::GraphProto* e = ft::AttrGraph(node, "else_branch");
  e->set_name("else");
  ft::AddNode(e, "MatMul", {"x", "W"}, {"e_y"}, "e_matmul");
  ft::AddValueInfo(e->mutable_output(), "e_y", TP::FLOAT, {std::string("N"), int64_t{4}});
  m.Node("Neg", {"y"}, {"out"}, "neg");
  m.Output("out", TP::FLOAT, {std::string("N"), int64_t{4}});
  return m.Bytes();
}

// The branch shape inference refuses for the bound shapes is not compiled:
// taking it is InvalidArgument naming the If, the branch and the node, as
// ONNX Runtime fails there too; the other branch runs compiled, with no
// reference call, and what follows the If is typed from it.
TEST(CompiledIf, BranchThatCannotRunWithTheBoundShapesIsNotCompiled) {
  const std::string bytes = OneBranchPerWidthIf();
  for (int64_t k : {int64_t{4}, int64_t{8}}) {
    SCOPED_TRACE(absl::StrCat("K=", k));
    CompileOptions o = Options();
    o.input_shapes["x"] = {2, k};
    absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(o).CompileBytes(bytes);
    ASSERT_TRUE(model.ok()) << model.status();
    const CompileReport& report = (*model)->report();
    EXPECT_EQ(CompiledCalls(**model), std::vector<std::string>{"If"}) << report.ToText();
    EXPECT_EQ(report.reference_calls, 0) << report.ToText();
    const bool fit = k == 4;  // the then branch's width
    const std::string unfit = fit ? "else branch" : "then branch";
    bool warned = false;
    for (const std::string& w : report.warnings) warned = warned || absl::StrContains(w, unfit);
    EXPECT_TRUE(warned) << report.ToText();
    frontend::ImportOptions io;
    io.fold_shapes = false;
    io.input_shapes["x"] = {2, k};
    absl::StatusOr<frontend::ImportResult> plain = frontend::ImportModelBytes(bytes, io);
    ASSERT_TRUE(plain.ok()) << plain.status();
    const std::vector<ir::Tensor> good = {Random({2, k}, 90), Scalar<bool>(fit)};
    absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(plain->graph, good);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(good);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].shape(), (ir::Shape{2, 4}));
    interp::CompareResult r =
        interp::CompareTensors((*got)[0], (*want)[0], interp::Tolerance{1e-5, 1e-6, {}});
    EXPECT_TRUE(r.ok) << r.message;
    // The other branch: the reference fails too, and so does the model.
    const std::vector<ir::Tensor> bad = {Random({2, k}, 91), Scalar<bool>(!fit)};
    EXPECT_FALSE(interp::Run(plain->graph, bad).ok());
    absl::StatusOr<std::vector<ir::Tensor>> failed = (*model)->Run(bad);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(failed.status().message(),
                                  absl::StrCat("If 'if': its ", unfit, " cannot run")))
        << failed.status();
    EXPECT_TRUE(absl::StrContains(failed.status().message(), fit ? "MatMul" : "Mul"))
        << failed.status();
  }
}

// A branch reads an outer constant (a weight) and an outer input.
constexpr char kIfReadingAConstant[] = R"(
graph g(%x: f32[3,4], %c: bool[]) -> (%y) opset 13 {
  %w = constant f32[4,4] <elided>
  %y = If(%c) {
    then_branch=graph t() captures(%x: f32[3,4] = %x, %w: f32[4,4] = %w) -> (%a) {
      %a = MatMul(%x, %w) : f32[3,4]
    },
    else_branch=graph e() captures(%x: f32[3,4] = %x) -> (%b) {
      %b = Neg(%x) : f32[3,4]
    }
  } name="if" : f32[3,4]
}
)";

// The branch takes the outer constant as a constant of its own (its
// weights are weights to its passes and library calls), the outer input
// as its input.
TEST(CompiledIf, ConstantCapturesBecomeBranchConstants) {
  compiler::Target target;
  target.isa = isa::FindIsa("scalar");
  target.conv_layout_oracle = onednn::ConvLayoutOracle();
  target.library_call_oracle = onednn::LibraryCallOracle();
  absl::StatusOr<compiler::CompiledProgram> p =
      compiler::Compile(Parse(kIfReadingAConstant), target, {}, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  const ir::loop::LoopProgram& program = p->module.program;
  int found = 0;
  for (const ir::loop::Kernel& k : program.kernels) {
    if (compiler::ReferenceCallOp(k) != "If") continue;
    ++found;
    absl::StatusOr<compiler::IfBranches> b =
        compiler::ExtractIfBranches(program, p->module.constants, k);
    ASSERT_TRUE(b.ok()) << b.status();
    const ir::Graph& then_graph = b->then_branch.graph;
    ASSERT_EQ(then_graph.inputs().size(), 1u);
    EXPECT_EQ(then_graph.value(then_graph.inputs()[0]).name, "x");
    EXPECT_EQ(b->then_branch.buffers.size(), 1u);
    std::optional<ir::ValueId> w = then_graph.FindValue("w");
    ASSERT_TRUE(w.has_value());
    ASSERT_TRUE(then_graph.IsConstant(*w));
    // The outer constant's own data, not a copy.
    EXPECT_EQ(then_graph.constant(*w)->shape(), (ir::Shape{4, 4}));
    bool shared = false;
    for (const auto& [buffer, data] : p->module.constants) {
      shared = shared || data.get() == then_graph.shared_constant(*w).get();
    }
    EXPECT_TRUE(shared);
    EXPECT_EQ(b->else_branch.graph.inputs().size(), 1u);
  }
  EXPECT_EQ(found, 1);
  std::unique_ptr<CompiledModel> model = Compile(kIfReadingAConstant);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(CompiledCalls(*model), std::vector<std::string>{"If"}) << model->report().ToText();
  for (bool c : {true, false}) {
    ExpectSameAsReference(*model, kIfReadingAConstant, {Random({3, 4}, 80), Scalar<bool>(c)});
  }
}

}  // namespace
}  // namespace kiln
