// Lowering tests: each op family lowered, run on the loop interpreter (plus
// the reference for externs) and compared with the graph reference
// interpreter on seeded random inputs with odd shapes and broadcasting;
// structural checks (views make no kernels) and error paths.
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "ir/loop/text.h"
#include "lowering/lowerer.h"
#include "lowering/lowering_test_util.h"

namespace kiln::lowering {
namespace {

using testing::CheckLowering;
using testing::CheckOptions;

// A one-node graph: `x` f32[3,5,7] (and `y` f32[5,1] when binary).
std::string Unary(const std::string& op, const std::string& attrs = "") {
  return absl::StrCat("graph g(%x: f32[3,5,7]) -> (%y) opset 18 {\n  %y = ",
                      op, "(%x) ", attrs, " : f32[3,5,7]\n}\n");
}

class UnaryOpTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UnaryOpTest, MatchesReference) {
  EXPECT_TRUE(CheckLowering(Unary(GetParam())).ok())
      << CheckLowering(Unary(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Elementwise, UnaryOpTest,
    ::testing::Values("Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt",
                      "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Round",
                      "Sign", "Sin", "Cos", "Softplus", "Softsign", "Elu",
                      "Selu", "Celu", "HardSigmoid", "HardSwish", "Mish",
                      "Identity", "ThresholdedRelu", "Shrink", "Atan",
                      "Asinh"));

TEST(LowerElementwise, ActivationsWithAttributes) {
  for (const char* attrs :
       {"{alpha=0.3}", "{alpha=0.25, beta=0.4}"}) {
    EXPECT_TRUE(CheckLowering(Unary("LeakyRelu", attrs)).ok());
    EXPECT_TRUE(CheckLowering(Unary("HardSigmoid", attrs)).ok());
    EXPECT_TRUE(CheckLowering(Unary("Elu", attrs)).ok());
  }
}

TEST(LowerElementwise, BroadcastingBinaryOps) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"}) {
    const std::string g = absl::StrCat(
        "graph g(%a: f32[3,5,7], %b: f32[5,1]) -> (%c) opset 18 {\n"
        "  %c = ", op, "(%a, %b) : f32[3,5,7]\n}\n");
    absl::Status s = CheckLowering(g);
    EXPECT_TRUE(s.ok()) << op << ": " << s;
  }
}

// Pow by a constant 2 (LayerNorm variances, power spectra) is a multiply,
// which vector lanes run, with the reference's bits: signed zeros,
// infinities, NaN, subnormals and squares that overflow or underflow f32, in
// f32 and f16, for a scalar exponent and one broadcasting from a larger
// shape. Other exponents keep pow.
TEST(LowerElementwise, PowByConstantTwoIsExactSquare) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> edges = {0.0f,   -0.0f,    inf,      -inf,  std::nanf(""),
                                    1e-20f, -1e-23f,  1.5e-40f, 3e19f, -2e19f,
                                    1.1f,   -0.3333f, 65504.0f, 1e-3f, 3.0f,
                                    -7.25f};
  CheckOptions opts;
  opts.rtol = 0;
  opts.atol = 0;
  opts.inputs[0] = ir::Tensor::FromVector<float>({16}, edges);
  const std::string text = R"(
graph g(%a: f32[16]) -> (%s, %t, %h, %c) opset 18 {
  %two = constant f32[] 2.0
  %twos = constant i64[2,16] splat(2)
  %three = constant f32[] 3.0
  %s = Pow(%a, %two) : f32[16]
  %t = Pow(%a, %twos) : f32[2,16]
  %ah = Cast(%a) {to=10} : f16[16]
  %h = Pow(%ah, %two) : f16[16]
  %c = Pow(%a, %three) : f32[16]
}
)";
  absl::Status s = CheckLowering(text, opts);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<ir::Graph> graph = ir::ParseGraph(text);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<ir::loop::LoopModule> lowered = LowerGraph(*graph, {});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string program = ir::loop::PrintProgram(lowered->program);
  // One pow left: the cube's.
  size_t pows = 0;
  for (size_t at = program.find("= pow "); at != std::string::npos;
       at = program.find("= pow ", at + 1)) {
    ++pows;
  }
  EXPECT_EQ(pows, 1u) << program;
}

// An op that hands its input through (Identity, a Cast to the same dtype,
// Dropout) with an output typed another shape is refused, not lowered as a
// view read with the output's coordinates (an onnx_compile fuzz finding: a
// Scan body's Identity declared f32[91] over f32[4], past libonnx's
// inference because a body input was untyped).
TEST(LowerPassThrough, OutputOfAnotherShapeIsAnError) {
  for (const char* op : {"Identity(%x)", "Cast(%x) {to=1}", "Dropout(%x)"}) {
    const std::string text = absl::StrCat(R"(
graph g(%x: f32[4]) -> (%y) opset 13 {
  %y = )", op, R"( name="pass" : f32[91]
}
)");
    absl::StatusOr<ir::Graph> graph = ir::ParseGraph(text);
    ASSERT_TRUE(graph.ok()) << graph.status();
    absl::StatusOr<ir::loop::LoopModule> lowered = LowerGraph(*graph, {});
    ASSERT_FALSE(lowered.ok()) << op;
    EXPECT_EQ(lowered.status().code(), absl::StatusCode::kInvalidArgument) << lowered.status();
    EXPECT_THAT(std::string(lowered.status().message()),
                ::testing::HasSubstr("passes through its input of shape [4]"))
        << lowered.status();
  }
}

TEST(LowerElementwise, BothSidesBroadcast) {
  EXPECT_TRUE(CheckLowering(R"(
graph g(%a: f32[3,1,7], %b: f32[1,5,1]) -> (%c) opset 18 {
  %c = Mul(%a, %b) : f32[3,5,7]
}
)").ok());
}

TEST(LowerElementwise, IntegerArithmeticAndMod) {
  CheckOptions opts;
  opts.inputs[1] = ir::Tensor::FromVector<int64_t>({5}, {3, -2, 7, -4, 1});
  absl::Status s = CheckLowering(R"(
graph g(%a: i64[3,5], %b: i64[5]) -> (%c, %d, %e, %f) opset 18 {
  %c = Mod(%a, %b) : i64[3,5]
  %d = Mod(%a, %b) {fmod=1} : i64[3,5]
  %e = Div(%a, %b) : i64[3,5]
  %f = Sub(%a, %b) : i64[3,5]
}
)", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerElementwise, ComparisonsLogicWhereCast) {
  absl::Status s = CheckLowering(R"(
graph g(%a: f32[4,6], %b: f32[6], %p: bool[4,1]) -> (%w, %n, %x, %i, %e) opset 18 {
  %lt = Less(%a, %b) : bool[4,6]
  %ge = GreaterOrEqual(%a, %b) : bool[4,6]
  %and = And(%lt, %p) : bool[4,6]
  %x = Xor(%ge, %p) : bool[4,6]
  %n = Not(%and) : bool[4,6]
  %w = Where(%and, %a, %b) : f32[4,6]
  %i = Cast(%a) {to=7} : i64[4,6]
  %e = Equal(%i, %i) : bool[4,6]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerElementwise, CastFloatToNarrowIntegersSaturates) {
  // Truncation, out-of-range values, NaN and infinities from f32 and f16:
  // the lowered Cast (loop interpreter) agrees with the reference's.
  const std::vector<float> edges = {127.9f, -128.9f, 128.0f, 255.5f, 256.0f, -1.5f, -0.5f,
                                    300.7f, std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(), 1e20f};
  CheckOptions opts;
  opts.inputs[0] = ir::Tensor::FromVector<float>({12}, edges);
  absl::Status s = CheckLowering(R"(
graph g(%a: f32[12]) -> (%s, %u, %hs, %hu) opset 18 {
  %s = Cast(%a) {to=3} : i8[12]
  %u = Cast(%a) {to=2} : u8[12]
  %h = Cast(%a) {to=10} : f16[12]
  %hs = Cast(%h) {to=3} : i8[12]
  %hu = Cast(%h) {to=2} : u8[12]
}
)", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerElementwise, ClipPreluVariadic) {
  absl::Status s = CheckLowering(R"(
graph g(%a: f32[2,3,5], %s: f32[3,1], %b: f32[5], %c: f32[3,5]) -> (%y, %p, %m, %u, %v) opset 18 {
  %lo = constant f32[] -0.5
  %hi = constant f32[] 1.25
  %y = Clip(%a, %lo, %hi) : f32[2,3,5]
  %p = PRelu(%a, %s) : f32[2,3,5]
  %m = Max(%a, %b, %c) : f32[2,3,5]
  %u = Sum(%a, %b, %c) : f32[2,3,5]
  %v = Mean(%a, %b) : f32[2,3,5]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerElementwise, ClipBeforeOpset11UsesAttributes) {
  absl::Status s = CheckLowering(R"(
graph g(%a: f32[4,5]) -> (%y) opset 6 {
  %y = Clip(%a) {min=-1.0, max=0.5} : f32[4,5]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerReduction, AllReduceOpsWithAxesAndKeepdims) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                         "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSumExp"}) {
    const std::string g = absl::StrCat(
        "graph g(%x: f32[3,4,5]) -> (%a, %b, %c) opset 18 {\n"
        "  %ax = constant i64[2] [0, -1]\n"
        "  %a = ", op, "(%x, %ax) {keepdims=1} : f32[1,4,1]\n"
        "  %b = ", op, "(%x, %ax) {keepdims=0} : f32[4]\n"
        "  %c = ", op, "(%x) {keepdims=0} : f32[]\n}\n");
    absl::Status s = CheckLowering(g);
    EXPECT_TRUE(s.ok()) << op << ": " << s;
  }
}

TEST(LowerReduction, LogSumNeedsPositiveInput) {
  CheckOptions opts;
  opts.inputs[0] = ir::Tensor::FromVector<float>({2, 3}, {1, 2, 3, 0.5, 4, 9});
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[2,3]) -> (%y) opset 13 {
  %y = ReduceLogSum(%x) {axes=[1], keepdims=0} : f32[2]
}
)", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerReduction, AxesAttributeBeforeOpset18) {
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[3,4,5]) -> (%y) opset 13 {
  %y = ReduceMean(%x) {axes=[1], keepdims=1} : f32[3,1,5]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerReduction, ArgMaxArgMin) {
  CheckOptions opts;
  // Ties, so first/last index selection matters.
  opts.inputs[0] = ir::Tensor::FromVector<float>(
      {2, 4}, {1, 3, 3, 0, -1, -1, 2, -1});
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[2,4]) -> (%a, %b, %c, %d) opset 13 {
  %a = ArgMax(%x) {axis=1} : i64[2,1]
  %b = ArgMax(%x) {axis=1, select_last_index=1, keepdims=0} : i64[2]
  %c = ArgMin(%x) {axis=0} : i64[1,4]
  %d = ArgMin(%x) {axis=-1, select_last_index=1} : i64[2,1]
}
)", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerReduction, SoftmaxFamily) {
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[3,4,5]) -> (%a, %b, %c, %d) opset 13 {
  %a = Softmax(%x) {axis=1} : f32[3,4,5]
  %b = LogSoftmax(%x) : f32[3,4,5]
  %c = Hardmax(%x) {axis=2} : f32[3,4,5]
  %d = Softmax(%x) {axis=0} : f32[3,4,5]
}
)");
  EXPECT_TRUE(s.ok()) << s;
  // Before opset 13 the input is coerced to 2-D at the axis.
  s = CheckLowering(R"(
graph g(%x: f32[3,4,5]) -> (%a) opset 11 {
  %a = Softmax(%x) {axis=1} : f32[3,4,5]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerReduction, Normalizations) {
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[2,3,5,7], %s: f32[5,7], %b: f32[7], %c: f32[3], %d: f32[3]) -> (%ln, %m, %inv, %in) opset 18 {
  %ln, %m, %inv = LayerNormalization(%x, %s, %b) {axis=2, epsilon=0.001} : f32[2,3,5,7], f32[2,3,1,1], f32[2,3,1,1]
  %in = InstanceNormalization(%x, %c, %d) : f32[2,3,5,7]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerReduction, BatchNormInference) {
  CheckOptions opts;
  opts.inputs[4] = ir::Tensor::FromVector<float>({3}, {0.5, 1.5, 2.0});
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[2,3,4,5], %s: f32[3], %b: f32[3], %m: f32[3], %v: f32[3]) -> (%y) opset 15 {
  %y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon=0.01} : f32[2,3,4,5]
}
)", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerReduction, Pools) {
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[2,3,7,9]) -> (%a, %b, %c, %d, %e, %f) opset 18 {
  %a = GlobalAveragePool(%x) : f32[2,3,1,1]
  %b = GlobalMaxPool(%x) : f32[2,3,1,1]
  %c = MaxPool(%x) {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]} : f32[2,3,4,5]
  %d = AveragePool(%x) {kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 2]} : f32[2,3,4,5]
  %e = AveragePool(%x) {kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 2], count_include_pad=1} : f32[2,3,4,5]
  %f = MaxPool(%x) {kernel_shape=[2, 2], dilations=[2, 2], auto_pad="SAME_UPPER"} : f32[2,3,7,9]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

// Window counts are closed forms of the output position: windows entirely
// in the padding (the output is 0), dilation with padding, the padded count
// with dilation, ceil_mode's partial last window, 1-D and 3-D.
TEST(LowerReduction, PoolWindowCounts) {
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[2,3,7,9], %z: f32[1,2,8], %w: f32[1,1,5,4,6]) -> (%a, %b, %c, %d, %e, %f) opset 19 {
  %a = MaxPool(%x) {kernel_shape=[2, 2], pads=[3, 3, 3, 3], strides=[2, 2]} : f32[2,3,6,7]
  %b = AveragePool(%x) {kernel_shape=[2, 2], pads=[3, 3, 3, 3], strides=[2, 2]} : f32[2,3,6,7]
  %c = AveragePool(%x) {kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 1, 2, 3], count_include_pad=1} : f32[2,3,7,9]
  %d = AveragePool(%x) {kernel_shape=[3, 3], dilations=[2, 3], pads=[2, 4, 2, 1]} : f32[2,3,7,8]
  %e = AveragePool(%z) {kernel_shape=[3], strides=[2], ceil_mode=1} : f32[1,2,4]
  %f = MaxPool(%w) {kernel_shape=[2, 3, 2], pads=[1, 0, 1, 1, 2, 1], strides=[2, 1, 3]} : f32[1,1,3,4,3]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerReduction, IntegerMaxPool) {
  absl::Status s = CheckLowering(R"(
graph g(%x: i32[1,2,5,5], %y: u8[1,1,4,4]) -> (%a, %b) opset 18 {
  %a = MaxPool(%x) {kernel_shape=[2, 2], pads=[1, 1, 0, 0]} : i32[1,2,5,5]
  %b = MaxPool(%y) {kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]} : u8[1,1,4,4]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

// Max pools whose every window holds an input element load clamped taps
// without masks (%a, %b, and %d with ceil_mode's partial last window); a
// window wholly in the padding keeps the masks (%c's last column).
TEST(LowerReduction, MaxPoolClampedAndMaskedWindows) {
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[1,2,6,7]) -> (%a, %b, %c, %d) opset 18 {
  %a = MaxPool(%x) {kernel_shape=[3, 2], pads=[2, 0, 0, 1], strides=[1, 2]} : f32[1,2,6,4]
  %b = MaxPool(%x) {kernel_shape=[2, 3], pads=[1, 2, 1, 2], strides=[3, 3]} : f32[1,2,3,3]
  %c = MaxPool(%x) {kernel_shape=[2, 2], pads=[0, 0, 0, 3], strides=[2, 2]} : f32[1,2,3,5]
  %d = MaxPool(%x) {kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1} : f32[1,2,3,3]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerMovement, ViewsComposeWithoutKernels) {
  const char* text = R"(
graph g(%x: f32[2,3,4]) -> (%y) opset 18 {
  %t = Transpose(%x) {perm=[2, 0, 1]} : f32[4,2,3]
  %shape = constant i64[2] [8, 3]
  %r = Reshape(%t, %shape) : f32[8,3]
  %st = constant i64[1] [1]
  %en = constant i64[1] [7]
  %ax = constant i64[1] [0]
  %sp = constant i64[1] [2]
  %s = Slice(%r, %st, %en, %ax, %sp) : f32[3,3]
  %y = Relu(%s) : f32[3,3]
}
)";
  EXPECT_TRUE(CheckLowering(text).ok()) << CheckLowering(text);
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*ir::ParseGraph(text));
  ASSERT_TRUE(lp.ok()) << lp.status();
  EXPECT_EQ(lp->program.kernels.size(), 1u) << ir::loop::PrintProgram(lp->program);
}

TEST(LowerMovement, ViewOpsMatchReference) {
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[2,8,3,5], %v: f32[3,1]) -> (%a, %b, %c, %d, %e, %f, %g, %h, %i) opset 13 {
  %a = DepthToSpace(%x) {blocksize=2} : f32[2,2,6,10]
  %b = DepthToSpace(%x) {blocksize=2, mode="CRD"} : f32[2,2,6,10]
  %f0 = Flatten(%x) {axis=2} : f32[16,15]
  %c = Neg(%f0) : f32[16,15]
  %ax = constant i64[2] [0, 3]
  %u = Unsqueeze(%x, %ax) : f32[1,2,8,1,3,5]
  %d = Squeeze(%u, %ax) : f32[2,8,3,5]
  %es = constant i64[3] [2, 3, 4]
  %e = Expand(%v, %es) : f32[2,3,4]
  %reps = constant i64[2] [2, 3]
  %f = Tile(%v, %reps) : f32[6,3]
  %g, %h = Split(%x) {axis=1} : f32[2,4,3,5], f32[2,4,3,5]
  %st = constant i64[2] [-1, 4]
  %en = constant i64[2] [-100, 0]
  %sa = constant i64[2] [3, 1]
  %ss = constant i64[2] [-2, -1]
  %i = Slice(%x, %st, %en, %sa, %ss) : f32[2,4,3,3]
}
)");
  EXPECT_TRUE(s.ok()) << s;
  s = CheckLowering(R"(
graph g(%x: f32[1,3,4,6]) -> (%y) opset 13 {
  %y = SpaceToDepth(%x) {blocksize=2} : f32[1,12,2,3]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerMovement, ConcatAndPad) {
  absl::Status s = CheckLowering(R"(
graph g(%a: f32[2,3,5], %b: f32[2,1,5], %c: f32[2,4,5]) -> (%y, %p, %q, %r, %w) opset 18 {
  %t = Transpose(%c) {perm=[0, 1, 2]} : f32[2,4,5]
  %y = Concat(%a, %b, %t) {axis=-2} : f32[2,8,5]
  %pads = constant i64[6] [0, 1, 2, 1, 0, 3]
  %cv = constant f32[] 0.75
  %p = Pad(%a, %pads, %cv) : f32[3,4,10]
  %q = Pad(%a, %pads) {mode="edge"} : f32[3,4,10]
  %rp = constant i64[6] [0, 2, 1, 1, 0, 3]
  %r = Pad(%a, %rp) {mode="reflect"} : f32[3,5,9]
  %crop = constant i64[6] [0, -1, 1, 0, 0, -2]
  %w = Pad(%a, %crop) : f32[2,2,4]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerMovement, GatherConstantAndRuntimeIndices) {
  CheckOptions opts;
  opts.inputs[1] = ir::Tensor::FromVector<int64_t>({2, 2}, {3, -1, 0, 2});
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[3,5,2], %i: i64[2,2]) -> (%a, %b, %c, %d) opset 13 {
  %a = Gather(%x, %i) {axis=1} : f32[3,2,2,2]
  %ci = constant i64[3] [4, 2, 0]
  %b = Gather(%x, %ci) {axis=1} : f32[3,3,2]
  %k = constant i64[] -1
  %c = Gather(%x, %k) {axis=0} : f32[5,2]
  %nc = constant i64[3] [1, 0, 1]
  %d = Gather(%x, %nc) {axis=-1} : f32[3,5,3]
}
)", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerMovement, ShapeOpsFoldToConstants) {
  const char* text = R"(
graph g(%x: f32[2,3,4]) -> (%y, %z) opset 15 {
  %s = Shape(%x) {start=1} : i64[2]
  %n = Size(%x) : i64[]
  %c = ConstantOfShape(%s) {value=tensor f32[1] [2.5]} : f32[3,4]
  %y = Add(%x, %c) : f32[2,3,4]
  %st = constant i64[] 1
  %d = constant i64[] 3
  %r = Range(%st, %n, %d) : i64[8]
  %z = Mul(%r, %r) : i64[8]
}
)";
  absl::Status s = CheckLowering(text);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*ir::ParseGraph(text));
  ASSERT_TRUE(lp.ok()) << lp.status();
  EXPECT_EQ(lp->program.kernels.size(), 2u) << ir::loop::PrintProgram(lp->program);
}

TEST(LowerExtern, ConvGemmMatMulRunThroughExecutor) {
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[1,3,6,6], %w: f32[4,3,3,3], %m: f32[5,7], %n: f32[7,2]) -> (%y, %g, %mm) opset 13 {
  %t = Transpose(%x) {perm=[0, 1, 3, 2]} : f32[1,3,6,6]
  %c = Conv(%t, %w) {kernel_shape=[3, 3], pads=[1, 1, 1, 1]} : f32[1,4,6,6]
  %y = Relu(%c) : f32[1,4,6,6]
  %g = Gemm(%m, %n) {alpha=0.5} : f32[5,2]
  %mm = MatMul(%m, %n) : f32[5,2]
}
)");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerExtern, ExternKernelRecordsCall) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph g(%m: f32[5,7], %n: f32[2,7]) -> (%y) opset 13 {
  %y = Gemm(%m, %n) {transB=1, alpha=0.5} name="fc" : f32[5,2]
}
)");
  ASSERT_TRUE(g.ok());
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*g);
  ASSERT_TRUE(lp.ok()) << lp.status();
  ASSERT_EQ(lp->program.kernels.size(), 1u);
  const ir::loop::Kernel& k = lp->program.kernels[0];
  EXPECT_EQ(k.kind, ir::loop::Kernel::Kind::kExtern);
  EXPECT_EQ(k.call.op, "onnx.Gemm");
  EXPECT_EQ(k.ops, std::vector<std::string>{"fc"});
  EXPECT_EQ(std::get<int64_t>(k.call.attrs.at("transB")), 1);
  EXPECT_EQ(std::get<double>(k.call.attrs.at("alpha")), 0.5);
  EXPECT_EQ(k.call.inputs, (std::vector<int32_t>{lp->inputs[0], lp->inputs[1]}));
  EXPECT_EQ(k.call.outputs, std::vector<int32_t>{lp->outputs[0]});
}

TEST(LowerGraphApi, BufferNamesAreSanitizedAndUnique) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph g(%"in put;": f32[2], %"in.put_": f32[2]) -> (%"out/0") opset 18 {
  %"out/0" = Add(%"in put;", %"in.put_") : f32[2]
}
)");
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*g);
  ASSERT_TRUE(lp.ok()) << lp.status();
  const auto& bufs = lp->program.buffers;
  EXPECT_EQ(bufs[lp->inputs[0]].name, "in_put_");
  EXPECT_EQ(bufs[lp->inputs[1]].name, "in_put__1");
  EXPECT_EQ(bufs[lp->outputs[0]].name, "out_0");
  EXPECT_EQ(lp->value_names.at("in_put__1"), "in.put_");
  EXPECT_EQ(lp->value_names.at("out_0"), "out/0");
}

TEST(LowerGraphApi, OutputThatIsAViewOrInputIsCopied) {
  const char* text = R"(
graph g(%x: f32[2,3]) -> (%t, %x, %t) opset 18 {
  %t = Transpose(%x) : f32[3,2]
}
)";
  absl::Status s = CheckLowering(text);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*ir::ParseGraph(text));
  ASSERT_TRUE(lp.ok());
  EXPECT_EQ(lp->program.kernels.size(), 3u);
  EXPECT_NE(lp->outputs[0], lp->outputs[2]);
}

TEST(LowerGraphApi, ConstantsBecomeConstantBuffers) {
  const char* text = R"(
graph g(%x: f32[2,3]) -> (%y) opset 18 {
  %w = constant f32[3] [1.0, 2.0, 3.0]
  %y = Mul(%x, %w) : f32[2,3]
}
)";
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*ir::ParseGraph(text));
  ASSERT_TRUE(lp.ok());
  ASSERT_EQ(lp->constants.size(), 1u);
  const int32_t b = lp->constants.begin()->first;
  EXPECT_EQ(lp->program.buffers[b].kind, ir::loop::BufferKind::kConstant);
  EXPECT_EQ(lp->program.buffers[b].name, "w");
  EXPECT_EQ(lp->constants.begin()->second->GetAsDouble(2), 3.0);
  EXPECT_TRUE(CheckLowering(text).ok());
}

TEST(LowerGraphErrors, DynamicShapeNamesValueAndProducer) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph g(%x: f32[2,3]) -> (%y) opset 18 {
  %y = Relu(%x) name="r0" : f32[?,3]
}
)");
  ASSERT_TRUE(g.ok());
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*g);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(lp.status().message().find("'y'"), std::string::npos) << lp.status();
  EXPECT_NE(lp.status().message().find("r0"), std::string::npos) << lp.status();
}

TEST(LowerGraphErrors, UnsupportedOpIsUnimplementedNamingTheNode) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph g(%b: f32[1,4,4], %s: f32[1,1,4]) -> (%y) opset 18 {
  %y = NonMaxSuppression(%b, %s) name="nms" : i64[3,3]
}
)");
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*g);
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(lp.status().message().find("nms"), std::string::npos);
  EXPECT_NE(lp.status().message().find("NonMaxSuppression"), std::string::npos);
}

absl::Status NoKernels(internal::Lowerer&, const ir::Node&) {
  return absl::OkStatus();
}

TEST(LowerTable, RefusesASecondLoweringOfAnOp) {
  internal::LowerTable table;
  table.Add("Relu", NoKernels);
  table.AddExternCall("Conv");
  EXPECT_TRUE(table.status().ok()) << table.status();
  table.Add("Relu", NoKernels);
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(table.status().message().find("op Relu has two lowerings"),
            std::string::npos)
      << table.status();

  internal::LowerTable externs;
  externs.AddExternCall("Conv");
  externs.Add("Conv", NoKernels);
  EXPECT_EQ(externs.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(externs.IsExternCall("Conv"));
}

TEST(LowerTable, EveryOpHasOneLowering) {
  const internal::LowerTable& table = internal::OpLowerings();
  EXPECT_TRUE(table.status().ok()) << table.status();
  // One lowering covers every form of these ops (run-time pads, axes or
  // training_mode, MaxPool's Indices, BatchNormalization in training mode);
  // LRN and Einsum are loop kernels, not extern calls.
  for (const char* op : {"MaxPool", "Pad", "ReduceSum", "Dropout",
                         "BatchNormalization", "LRN", "Einsum"}) {
    EXPECT_NE(table.Find(op), nullptr) << op;
  }
  EXPECT_FALSE(table.IsExternCall("LRN"));
  EXPECT_FALSE(table.IsExternCall("Einsum"));
  EXPECT_TRUE(table.IsExternCall("Conv"));
  EXPECT_EQ(table.Find("If"), nullptr);
}

TEST(LowerGraphErrors, BadModelDataIsInvalidArgument) {
  for (const char* text : {
           // Out-of-range constant gather index.
           R"(graph g(%x: f32[4]) -> (%y) opset 18 {
  %i = constant i64[1] [4]
  %y = Gather(%x, %i) : f32[1]
})",
           // Non-broadcastable shapes.
           R"(graph g(%a: f32[3], %b: f32[4]) -> (%y) opset 18 {
  %y = Add(%a, %b) : f32[4]
})",
           // Bad transpose permutation.
           R"(graph g(%x: f32[2,3]) -> (%y) opset 18 {
  %y = Transpose(%x) {perm=[0, 0]} : f32[2,2]
})",
       }) {
    absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(LowerGraph(*g).status().code(), absl::StatusCode::kInvalidArgument)
        << text << "\n" << LowerGraph(*g).status();
  }
}

}  // namespace
}  // namespace kiln::lowering
