// Tests of the reference elementwise kernels: one-node graphs run through
// interp::Run, expected values computed by hand or from ONNX's examples.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/dtype.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "interp/interpreter.h"

namespace kiln::interp {
namespace {

using ::testing::HasSubstr;
using ir::AttributeMap;
using ir::DType;
using ir::Shape;
using ir::Tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Builds a graph with one node whose inputs are graph inputs (or omitted) and
// runs it through the reference interpreter.
class OneNode {
 public:
  explicit OneNode(std::string op, int64_t opset = 18) : op_(std::move(op)) {
    graph_.set_opset(opset);
  }
  OneNode& In(Tensor t) {
    ir::ValueId id = graph_.AddValue(absl::StrCat("in", inputs_.size()),
                                     t.dtype(), t.shape());
    graph_.AddInput(id);
    node_inputs_.push_back(id);
    inputs_.push_back(std::move(t));
    return *this;
  }
  OneNode& Omit() {
    node_inputs_.push_back(ir::kNoValue);
    return *this;
  }
  OneNode& Attr(std::string key, ir::AttrValue v) {
    attrs_[std::move(key)] = std::move(v);
    return *this;
  }
  // Declares an output; kInvalid leaves its dtype undeclared.
  OneNode& Out(DType dtype = DType::kInvalid) {
    outputs_.push_back(graph_.AddUnshapedValue(
        absl::StrCat("out", outputs_.size()), dtype));
    return *this;
  }
  absl::StatusOr<std::vector<Tensor>> Run() {
    if (outputs_.empty()) Out();
    for (ir::ValueId id : outputs_) graph_.AddOutput(id);
    graph_.AddNode(op_, node_inputs_, outputs_, attrs_, "n0");
    return interp::Run(graph_, inputs_);
  }
  // The single output; fails the test on error.
  Tensor Run1() {
    absl::StatusOr<std::vector<Tensor>> outs = Run();
    EXPECT_TRUE(outs.ok()) << outs.status();
    if (!outs.ok() || outs->empty()) return Tensor();
    return (*outs)[0];
  }

 private:
  std::string op_;
  ir::Graph graph_;
  std::vector<Tensor> inputs_;
  std::vector<ir::ValueId> node_inputs_;
  std::vector<ir::ValueId> outputs_;
  AttributeMap attrs_;
};

Tensor F32(Shape shape, std::vector<float> v) {
  return Tensor::FromVector<float>(std::move(shape), v);
}
Tensor I64(Shape shape, std::vector<int64_t> v) {
  return Tensor::FromVector<int64_t>(std::move(shape), v);
}
Tensor I32(Shape shape, std::vector<int32_t> v) {
  return Tensor::FromVector<int32_t>(std::move(shape), v);
}
Tensor Bool(Shape shape, std::vector<bool> v) {
  Tensor t(DType::kBool, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}

// Compares dtype, shape and values (as doubles; NaN matches NaN).
void ExpectTensor(const Tensor& t, DType dtype, const Shape& shape,
                  const std::vector<double>& expected, double tol = 1e-5) {
  ASSERT_EQ(t.dtype(), dtype) << t.TypeString();
  ASSERT_EQ(t.shape(), shape) << t.TypeString();
  ASSERT_EQ(t.num_elements(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double got = t.GetAsDouble(i);
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i << ": " << got;
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(got, expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got, expected[i], tol * std::max(1.0, std::abs(expected[i])))
          << "element " << i;
    }
  }
}

void ExpectError(absl::StatusOr<std::vector<Tensor>> r, absl::StatusCode code,
                 const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'n0'"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(fragment));
}

// ---- Activations.

TEST(Activations, ReluFloatAndInt) {
  ExpectTensor(OneNode("Relu").In(F32({4}, {-1, 0, 2.5, kNaN})).Run1(),
               DType::kF32, {4}, {0, 0, 2.5, NAN});
  ExpectTensor(OneNode("Relu").In(I32({3}, {-7, 0, 7})).Run1(), DType::kI32,
               {3}, {0, 0, 7});
}

TEST(Activations, ReluRejectsBool) {
  ExpectError(OneNode("Relu").In(Bool({1}, {true})).Run(),
              absl::StatusCode::kInvalidArgument, "does not accept bool");
}

TEST(Activations, LeakyReluEluSeluCelu) {
  Tensor x = F32({3}, {-1, 0, 2});
  ExpectTensor(OneNode("LeakyRelu").In(x).Attr("alpha", 0.1f).Run1(),
               DType::kF32, {3}, {-0.1, 0, 2});
  ExpectTensor(OneNode("LeakyRelu").In(x).Run1(), DType::kF32, {3},
               {-0.01, 0, 2});
  // Elu: alpha * (e^x - 1) for x < 0.
  ExpectTensor(OneNode("Elu").In(x).Attr("alpha", 2.0f).Run1(), DType::kF32,
               {3}, {2 * (std::exp(-1.0) - 1), 0, 2});
  // Selu defaults (ONNX): alpha 1.6732632, gamma 1.0507010.
  const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
  ExpectTensor(OneNode("Selu").In(x).Run1(), DType::kF32, {3},
               {g * (a * std::exp(-1.0) - a), 0, 2 * g});
  // Celu: max(0,x) + min(0, alpha*(exp(x/alpha)-1)).
  ExpectTensor(OneNode("Celu").In(x).Attr("alpha", 2.0f).Run1(), DType::kF32,
               {3}, {2 * (std::exp(-0.5) - 1), 0, 2});
}

TEST(Activations, ThresholdedReluShrink) {
  Tensor x = F32({5}, {-2, -0.5, 0.5, 1, 2});
  ExpectTensor(OneNode("ThresholdedRelu").In(x).Run1(), DType::kF32, {5},
               {0, 0, 0, 0, 2});
  // Shrink (ONNX's soft example): lambd 1.5, bias 1.5 on [-2..2].
  ExpectTensor(OneNode("Shrink")
                   .In(F32({5}, {-2, -1, 0, 1, 2}))
                   .Attr("lambd", 1.5f)
                   .Attr("bias", 1.5f)
                   .Run1(),
               DType::kF32, {5}, {-0.5, 0, 0, 0, 0.5});
  ExpectTensor(OneNode("Shrink").In(F32({5}, {-2, -1, 0, 1, 2}))
                   .Attr("lambd", 1.5f).Run1(),
               DType::kF32, {5}, {-2, 0, 0, 0, 2});
}

// f32 Sigmoid is the correctly rounded value: equal to 1 / (1 + e^-x)
// evaluated in long double and rounded once, on a sweep of [-20, 20] and on
// the efficientnet_b0.qdq input where the f32 formula 1.0f / (1.0f +
// expf(-x)) is an ulp high (0.49887168 for 0.49887165).
TEST(Activations, SigmoidIsCorrectlyRoundedInF32) {
  std::vector<float> xs = {-0.0045133675f};
  for (int i = 0; i <= 40000; ++i) xs.push_back(-20.0f + 0.001f * static_cast<float>(i));
  Tensor x(DType::kF32, {static_cast<int64_t>(xs.size())});
  std::copy(xs.begin(), xs.end(), x.data<float>());
  const Tensor y = OneNode("Sigmoid").In(x).Run1();
  int64_t off = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const long double lx = xs[i];
    const float want = static_cast<float>(1.0L / (1.0L + std::exp(-lx)));
    off += y.data<float>()[i] != want;
    if (i == 0) EXPECT_EQ(y.data<float>()[0], want);
  }
  EXPECT_EQ(off, 0) << "of " << xs.size();
}

TEST(Activations, SigmoidFamily) {
  Tensor x = F32({4}, {-100, -1, 0, 3});
  ExpectTensor(OneNode("Sigmoid").In(x).Run1(), DType::kF32, {4},
               {0, 1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-3.0))});
  // HardSigmoid defaults alpha 0.2, beta 0.5: clamp(0.2x + 0.5, 0, 1).
  ExpectTensor(OneNode("HardSigmoid").In(x).Run1(), DType::kF32, {4},
               {0, 0.3, 0.5, 1});
  // HardSwish: x * clamp(x/6 + 0.5, 0, 1).
  ExpectTensor(OneNode("HardSwish").In(x).Run1(), DType::kF32, {4},
               {0, -1 * (1.0 / 3), 0, 3});
  // Softplus: ln(1 + e^x); large x must not overflow to inf.
  ExpectTensor(OneNode("Softplus").In(F32({3}, {-1, 0, 100})).Run1(),
               DType::kF32, {3}, {std::log1p(std::exp(-1.0)), std::log(2.0), 100});
  ExpectTensor(OneNode("Softsign").In(F32({3}, {-3, 0, 1})).Run1(),
               DType::kF32, {3}, {-0.75, 0, 0.5});
  // Mish: x * tanh(softplus(x)).
  ExpectTensor(OneNode("Mish").In(F32({2}, {1, -2})).Run1(), DType::kF32, {2},
               {std::tanh(std::log1p(std::exp(1.0))),
                -2 * std::tanh(std::log1p(std::exp(-2.0)))});
}

TEST(Activations, PReluBroadcastsSlopeToX) {
  // X [2,3], slope [3].
  ExpectTensor(OneNode("PRelu")
                   .In(F32({2, 3}, {-1, -2, -3, 1, 2, 3}))
                   .In(F32({3}, {0.1f, 0.2f, 0.3f}))
                   .Run1(),
               DType::kF32, {2, 3}, {-0.1, -0.4, -0.9, 1, 2, 3});
}

TEST(Activations, PReluBeforeOpset7IsPerChannel) {
  // X [1,2,2], slope [2] over channels (dim 1), as PyTorch's old exports use.
  ExpectTensor(OneNode("PRelu", 6)
                   .In(F32({1, 2, 2}, {-1, -2, -3, 4}))
                   .In(F32({2}, {0.5f, 0.25f}))
                   .Run1(),
               DType::kF32, {1, 2, 2}, {-0.5, -1, -0.75, 4});
}

TEST(Activations, PReluSlopeMustNotGrowX) {
  ExpectError(
      OneNode("PRelu").In(F32({3}, {1, 2, 3})).In(F32({2, 3}, {})).Run(),
      absl::StatusCode::kInvalidArgument, "does not broadcast to X");
}

TEST(Activations, ClipAttributesBeforeOpset11) {
  ExpectTensor(OneNode("Clip", 6)
                   .In(F32({4}, {-5, 0, 5, kNaN}))
                   .Attr("min", -1.0f)
                   .Attr("max", 1.0f)
                   .Run1(),
               DType::kF32, {4}, {-1, 0, 1, NAN});
  ExpectTensor(OneNode("Clip", 6).In(F32({2}, {-5, 5})).Attr("max", 1.0f).Run1(),
               DType::kF32, {2}, {-5, 1});
}

TEST(Activations, ClipOptionalInputs) {
  ExpectTensor(OneNode("Clip")
                   .In(F32({3}, {-5, 0, 5}))
                   .In(Tensor::Scalar<float>(-1))
                   .In(Tensor::Scalar<float>(1))
                   .Run1(),
               DType::kF32, {3}, {-1, 0, 1});
  ExpectTensor(OneNode("Clip")
                   .In(I64({3}, {-5, 0, 5}))
                   .Omit()
                   .In(Tensor::Scalar<int64_t>(2))
                   .Run1(),
               DType::kI64, {3}, {-5, 0, 2});
  // Only min given, int8 (ONNX's default_int8_min case).
  Tensor x(DType::kI8, {3});
  x.data<int8_t>()[0] = -3;
  x.data<int8_t>()[2] = 4;
  Tensor lo(DType::kI8, {});
  ExpectTensor(OneNode("Clip").In(x).In(lo).Run1(), DType::kI8, {3},
               {0, 0, 4});
  ExpectError(OneNode("Clip")
                  .In(F32({1}, {0}))
                  .In(Tensor::Scalar<double>(0))
                  .Run(),
              absl::StatusCode::kInvalidArgument, "min has dtype f64");
}

// ---- Unary math.

TEST(UnaryMath, Transcendentals) {
  Tensor x = F32({2}, {0.25f, 0.5f});
  struct Case {
    const char* op;
    double (*f)(double);
  };
  const Case cases[] = {
      {"Tanh", std::tanh},   {"Erf", std::erf},     {"Exp", std::exp},
      {"Log", std::log},     {"Sqrt", std::sqrt},   {"Sin", std::sin},
      {"Cos", std::cos},     {"Tan", std::tan},     {"Asin", std::asin},
      {"Acos", std::acos},   {"Atan", std::atan},   {"Sinh", std::sinh},
      {"Cosh", std::cosh},   {"Asinh", std::asinh}, {"Atanh", std::atanh},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    ExpectTensor(OneNode(c.op).In(x).Run1(), DType::kF32, {2},
                 {c.f(0.25), c.f(0.5)});
  }
  ExpectTensor(OneNode("Acosh").In(F32({2}, {1, 2})).Run1(), DType::kF32, {2},
               {0, std::log(2 + std::sqrt(3.0))});
  ExpectTensor(OneNode("Reciprocal").In(F32({3}, {-4, 0.5f, 0})).Run1(),
               DType::kF32, {3}, {-0.25, 2, kInf});
}

TEST(UnaryMath, LogSqrtOutOfDomainGiveNaN) {
  ExpectTensor(OneNode("Log").In(F32({3}, {-1, 0, kInf})).Run1(), DType::kF32,
               {3}, {NAN, -kInf, kInf});
  ExpectTensor(OneNode("Sqrt").In(F32({2}, {-1, kNaN})).Run1(), DType::kF32,
               {2}, {NAN, NAN});
}

TEST(UnaryMath, FloorCeilRoundHalfToEven) {
  Tensor x = F32({7}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.6f});
  ExpectTensor(OneNode("Round").In(x).Run1(), DType::kF32, {7},
               {-2, -2, 0, 0, 2, 2, 3});
  ExpectTensor(OneNode("Floor").In(x).Run1(), DType::kF32, {7},
               {-3, -2, -1, 0, 1, 2, 2});
  ExpectTensor(OneNode("Ceil").In(x).Run1(), DType::kF32, {7},
               {-2, -1, 0, 1, 2, 3, 3});
}

TEST(UnaryMath, NegAbsSign) {
  ExpectTensor(OneNode("Neg").In(I64({3}, {-3, 0, 4})).Run1(), DType::kI64,
               {3}, {3, 0, -4});
  // INT32_MIN wraps instead of overflowing.
  ExpectTensor(OneNode("Neg").In(I32({1}, {INT32_MIN})).Run1(), DType::kI32,
               {1}, {static_cast<double>(INT32_MIN)});
  ExpectTensor(OneNode("Abs").In(F32({3}, {-3.5f, 0, 2})).Run1(), DType::kF32,
               {3}, {3.5, 0, 2});
  ExpectTensor(OneNode("Abs").In(I32({2}, {-7, 7})).Run1(), DType::kI32, {2},
               {7, 7});
  ExpectTensor(OneNode("Sign").In(F32({4}, {-2, 0, 3, kNaN})).Run1(),
               DType::kF32, {4}, {-1, 0, 1, NAN});
  ExpectTensor(OneNode("Sign").In(I64({3}, {-9, 0, 9})).Run1(), DType::kI64,
               {3}, {-1, 0, 1});
  Tensor u(DType::kU8, {2});
  u.data<uint8_t>()[1] = 200;
  ExpectTensor(OneNode("Abs").In(u).Run1(), DType::kU8, {2}, {0, 200});
  ExpectError(OneNode("Neg").In(u).Run(), absl::StatusCode::kInvalidArgument,
              "does not accept u8");
}

TEST(UnaryMath, FloatOnlyOpsRejectInts) {
  ExpectError(OneNode("Exp").In(I64({1}, {1})).Run(),
              absl::StatusCode::kInvalidArgument, "does not accept i64");
}

TEST(UnaryMath, F16ComputesInFloat) {
  Tensor x(DType::kF16, {2});
  x.data<ir::Float16>()[0] = ir::FloatToHalf(0.0f);
  x.data<ir::Float16>()[1] = ir::FloatToHalf(1.0f);
  ExpectTensor(OneNode("Exp").In(x).Run1(), DType::kF16, {2},
               {1, 2.71875},  // e rounded to f16 (10-bit mantissa)
               1e-6);
}

TEST(UnaryMath, IsNaNIsInf) {
  Tensor x = F32({4}, {kNaN, kInf, -kInf, 1});
  ExpectTensor(OneNode("IsNaN").In(x).Run1(), DType::kBool, {4}, {1, 0, 0, 0});
  ExpectTensor(OneNode("IsInf").In(x).Run1(), DType::kBool, {4}, {0, 1, 1, 0});
  ExpectTensor(OneNode("IsInf").In(x).Attr("detect_negative", int64_t{0}).Run1(),
               DType::kBool, {4}, {0, 1, 0, 0});
  ExpectTensor(OneNode("IsInf").In(x).Attr("detect_positive", int64_t{0}).Run1(),
               DType::kBool, {4}, {0, 0, 1, 0});
}

// ---- Binary arithmetic and broadcasting.

TEST(Binary, BroadcastRowVector) {
  Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = F32({3}, {10, 20, 30});
  ExpectTensor(OneNode("Add").In(a).In(b).Run1(), DType::kF32, {2, 3},
               {11, 22, 33, 14, 25, 36});
  ExpectTensor(OneNode("Sub").In(a).In(b).Run1(), DType::kF32, {2, 3},
               {-9, -18, -27, -6, -15, -24});
  ExpectTensor(OneNode("Mul").In(a).In(b).Run1(), DType::kF32, {2, 3},
               {10, 40, 90, 40, 100, 180});
  ExpectTensor(OneNode("Div").In(b).In(a).Run1(), DType::kF32, {2, 3},
               {10, 10, 10, 2.5, 4, 5});
}

TEST(Binary, BroadcastScalarAndBothSides) {
  Tensor s = Tensor::Scalar<float>(2);
  Tensor x = F32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  ExpectTensor(OneNode("Mul").In(s).In(x).Run1(), DType::kF32, {2, 1, 3},
               {2, 4, 6, 8, 10, 12});
  // [2,1] with [1,3] -> [2,3].
  ExpectTensor(OneNode("Add").In(F32({2, 1}, {10, 20})).In(F32({1, 3}, {1, 2, 3})).Run1(),
               DType::kF32, {2, 3}, {11, 12, 13, 21, 22, 23});
}

TEST(Binary, NonBroadcastableShapesNameTheNode) {
  ExpectError(OneNode("Add").In(F32({2, 3}, {})).In(F32({4}, {})).Run(),
              absl::StatusCode::kInvalidArgument, "do not broadcast");
}

TEST(Binary, MixedDTypesAreAnError) {
  ExpectError(OneNode("Add").In(F32({1}, {1})).In(I64({1}, {1})).Run(),
              absl::StatusCode::kInvalidArgument, "different dtypes");
}

TEST(Binary, IntegerDivTruncatesTowardZero) {
  ExpectTensor(OneNode("Div")
                   .In(I32({4}, {7, -7, 7, -7}))
                   .In(I32({4}, {2, 2, -2, -2}))
                   .Run1(),
               DType::kI32, {4}, {3, -3, -3, 3});
  ExpectTensor(OneNode("Div")
                   .In(I64({1}, {INT64_MIN}))
                   .In(I64({1}, {-1}))
                   .Run1(),
               DType::kI64, {1}, {static_cast<double>(INT64_MIN)});
  ExpectError(OneNode("Div").In(I32({1}, {1})).In(I32({1}, {0})).Run(),
              absl::StatusCode::kInvalidArgument, "division by zero");
}

TEST(Binary, FloatDivByZeroGivesInf) {
  ExpectTensor(OneNode("Div").In(F32({3}, {1, -1, 0})).In(F32({3}, {0, 0, 0})).Run1(),
               DType::kF32, {3}, {kInf, -kInf, NAN});
}

TEST(Binary, IntegerAddWraps) {
  Tensor a(DType::kU8, {1}), b(DType::kU8, {1});
  a.data<uint8_t>()[0] = 200;
  b.data<uint8_t>()[0] = 100;
  ExpectTensor(OneNode("Add").In(a).In(b).Run1(), DType::kU8, {1}, {44});
  ExpectTensor(OneNode("Sub").In(b).In(a).Run1(), DType::kU8, {1}, {156});
}

TEST(Binary, ModSignRulesFromOnnxExamples) {
  Tensor a = I32({6}, {-4, 7, 5, 4, -7, 8});
  Tensor b = I32({6}, {2, -3, 8, -2, 3, 5});
  // fmod=0: sign of the divisor (ONNX test_mod_mixed_sign_int32).
  ExpectTensor(OneNode("Mod").In(a).In(b).Run1(), DType::kI32, {6},
               {0, -2, 5, 0, 2, 3});
  // fmod=1: sign of the dividend (ONNX test_mod_int64_fmod).
  ExpectTensor(OneNode("Mod").In(a).In(b).Attr("fmod", int64_t{1}).Run1(),
               DType::kI32, {6}, {0, 1, 5, 0, -1, 3});
  // Floats (ONNX test_mod_mixed_sign_float32).
  ExpectTensor(OneNode("Mod")
                   .In(F32({6}, {-4.3f, 7.2f, 5, 4.3f, -7.2f, 8}))
                   .In(F32({6}, {2.1f, -3.4f, 8, -2.1f, 3.4f, 5}))
                   .Attr("fmod", int64_t{1})
                   .Run1(),
               DType::kF32, {6}, {-0.1, 0.4, 5, 0.1, -0.4, 3}, 1e-5);
  ExpectError(OneNode("Mod").In(F32({1}, {1})).In(F32({1}, {1})).Run(),
              absl::StatusCode::kInvalidArgument, "fmod must be 1");
  ExpectError(OneNode("Mod").In(I32({1}, {1})).In(I32({1}, {0})).Run(),
              absl::StatusCode::kInvalidArgument, "modulo by zero");
}

TEST(Binary, PowMixedDTypes) {
  ExpectTensor(OneNode("Pow").In(F32({3}, {1, 2, 3})).In(F32({3}, {4, 5, 6})).Run1(),
               DType::kF32, {3}, {1, 32, 729});
  // int32 base, float exponent: result int32 (ONNX test_pow_types_int32_float32).
  ExpectTensor(OneNode("Pow").In(I32({3}, {1, 2, 3})).In(F32({3}, {4, 5, 6})).Run1(),
               DType::kI32, {3}, {1, 32, 729});
  ExpectTensor(OneNode("Pow").In(F32({2}, {4, 9})).In(I64({1}, {2})).Run1(),
               DType::kF32, {2}, {16, 81});
  ExpectTensor(OneNode("Pow").In(F32({2}, {4, -8})).In(Tensor::Scalar<float>(0.5f)).Run1(),
               DType::kF32, {2}, {2, NAN});
  ExpectTensor(OneNode("Pow").In(I64({2}, {3, -3})).In(I64({2}, {3, 3})).Run1(),
               DType::kI64, {2}, {27, -27});
  ExpectError(OneNode("Pow", 11).In(F32({1}, {2})).In(I64({1}, {2})).Run(),
              absl::StatusCode::kInvalidArgument, "different dtypes");
}

TEST(Variadic, MaxMinSumMean) {
  // ONNX's max/min/sum/mean examples: three inputs.
  Tensor a = F32({3}, {3, 2, 1});
  Tensor b = F32({3}, {1, 4, 4});
  Tensor c = F32({3}, {2, 5, 0});
  ExpectTensor(OneNode("Max").In(a).In(b).In(c).Run1(), DType::kF32, {3},
               {3, 5, 4});
  ExpectTensor(OneNode("Min").In(a).In(b).In(c).Run1(), DType::kF32, {3},
               {1, 2, 0});
  ExpectTensor(OneNode("Sum").In(a).In(b).In(c).Run1(), DType::kF32, {3},
               {6, 11, 5});
  ExpectTensor(OneNode("Mean").In(a).In(b).In(c).Run1(), DType::kF32, {3},
               {2, 11.0 / 3, 5.0 / 3});
  ExpectTensor(OneNode("Max").In(a).Run1(), DType::kF32, {3}, {3, 2, 1});
}

TEST(Variadic, BroadcastAndNaN) {
  ExpectTensor(OneNode("Max")
                   .In(F32({2, 1}, {1, kNaN}))
                   .In(F32({3}, {0, 2, kNaN}))
                   .Run1(),
               DType::kF32, {2, 3}, {1, 2, NAN, NAN, NAN, NAN});
  ExpectTensor(OneNode("Min").In(I64({2}, {5, -5})).In(Tensor::Scalar<int64_t>(0)).Run1(),
               DType::kI64, {2}, {0, -5});
  ExpectError(OneNode("Sum").In(I64({1}, {1})).Run(),
              absl::StatusCode::kInvalidArgument, "does not accept i64");
}

// ---- Comparison and logic.

TEST(Compare, BoolOutputsWithBroadcast) {
  Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = F32({3}, {2, 2, 7});
  ExpectTensor(OneNode("Equal").In(a).In(b).Run1(), DType::kBool, {2, 3},
               {0, 1, 0, 0, 0, 0});
  ExpectTensor(OneNode("Greater").In(a).In(b).Run1(), DType::kBool, {2, 3},
               {0, 0, 0, 1, 1, 0});
  ExpectTensor(OneNode("Less").In(a).In(b).Run1(), DType::kBool, {2, 3},
               {1, 0, 1, 0, 0, 1});
  ExpectTensor(OneNode("GreaterOrEqual").In(a).In(b).Run1(), DType::kBool,
               {2, 3}, {0, 1, 0, 1, 1, 0});
  ExpectTensor(OneNode("LessOrEqual").In(a).In(b).Run1(), DType::kBool, {2, 3},
               {1, 1, 1, 0, 0, 1});
  ExpectTensor(OneNode("Equal").In(F32({1}, {kNaN})).In(F32({1}, {kNaN})).Run1(),
               DType::kBool, {1}, {0});
  ExpectTensor(OneNode("Equal").In(Bool({2}, {true, false})).In(Bool({1}, {false})).Run1(),
               DType::kBool, {2}, {0, 1});
  ExpectError(OneNode("Less").In(Bool({1}, {true})).In(Bool({1}, {true})).Run(),
              absl::StatusCode::kInvalidArgument, "does not accept bool");
}

TEST(Logic, AndOrXorNot) {
  Tensor a = Bool({2, 2}, {false, false, true, true});
  Tensor b = Bool({2}, {false, true});
  ExpectTensor(OneNode("And").In(a).In(b).Run1(), DType::kBool, {2, 2},
               {0, 0, 0, 1});
  ExpectTensor(OneNode("Or").In(a).In(b).Run1(), DType::kBool, {2, 2},
               {0, 1, 1, 1});
  ExpectTensor(OneNode("Xor").In(a).In(b).Run1(), DType::kBool, {2, 2},
               {0, 1, 1, 0});
  ExpectTensor(OneNode("Not").In(a).Run1(), DType::kBool, {2, 2}, {1, 1, 0, 0});
  ExpectError(OneNode("And").In(I32({1}, {1})).In(I32({1}, {1})).Run(),
              absl::StatusCode::kInvalidArgument, "does not accept i32");
}

TEST(Logic, BitShift) {
  Tensor x(DType::kU8, {3}), s(DType::kU8, {3});
  const uint8_t xv[] = {16, 4, 255}, sv[] = {1, 2, 9};
  for (int i = 0; i < 3; ++i) {
    x.data<uint8_t>()[i] = xv[i];
    s.data<uint8_t>()[i] = sv[i];
  }
  ExpectTensor(OneNode("BitShift").In(x).In(s).Attr("direction", std::string("LEFT")).Run1(),
               DType::kU8, {3}, {32, 16, 0});
  ExpectTensor(OneNode("BitShift").In(x).In(s).Attr("direction", std::string("RIGHT")).Run1(),
               DType::kU8, {3}, {8, 1, 0});
  ExpectError(OneNode("BitShift").In(x).In(s).Attr("direction", std::string("UP")).Run(),
              absl::StatusCode::kInvalidArgument, "LEFT or RIGHT");
  ExpectError(OneNode("BitShift").In(I32({1}, {1})).In(I32({1}, {1}))
                  .Attr("direction", std::string("LEFT")).Run(),
              absl::StatusCode::kInvalidArgument, "does not accept i32");
}

TEST(Where, ThreeWayBroadcast) {
  // cond [2,1], x [3], y scalar -> [2,3].
  ExpectTensor(OneNode("Where")
                   .In(Bool({2, 1}, {true, false}))
                   .In(I64({3}, {1, 2, 3}))
                   .In(Tensor::Scalar<int64_t>(-1))
                   .Run1(),
               DType::kI64, {2, 3}, {1, 2, 3, -1, -1, -1});
  ExpectTensor(OneNode("Where")
                   .In(Bool({3}, {false, true, false}))
                   .In(F32({3}, {1, 2, 3}))
                   .In(F32({3}, {4, 5, 6}))
                   .Run1(),
               DType::kF32, {3}, {4, 2, 6});
  ExpectError(OneNode("Where").In(F32({1}, {1})).In(F32({1}, {1})).In(F32({1}, {1})).Run(),
              absl::StatusCode::kInvalidArgument, "condition must be bool");
  ExpectError(OneNode("Where").In(Bool({2}, {})).In(F32({3}, {})).In(F32({1}, {})).Run(),
              absl::StatusCode::kInvalidArgument, "do not broadcast");
}

// ---- Cast, CastLike, Identity, Dropout.

constexpr int64_t kOnnxFloat = 1, kOnnxUint8 = 2, kOnnxInt8 = 3,
                  kOnnxString = 8, kOnnxInt32 = 6, kOnnxInt64 = 7,
                  kOnnxBool = 9, kOnnxFloat16 = 10, kOnnxDouble = 11,
                  kOnnxBFloat16 = 16;

TEST(Cast, FloatToIntTruncatesTowardZero) {
  Tensor x = F32({5}, {-2.7f, -0.5f, 0.5f, 2.7f, 100});
  ExpectTensor(OneNode("Cast").In(x).Attr("to", kOnnxInt32).Out(DType::kI32).Run1(),
               DType::kI32, {5}, {-2, 0, 0, 2, 100});
  ExpectTensor(OneNode("Cast").In(x).Attr("to", kOnnxInt64).Run1(), DType::kI64,
               {5}, {-2, 0, 0, 2, 100});
  ExpectTensor(OneNode("Cast").In(x).Attr("to", kOnnxBool).Run1(), DType::kBool,
               {5}, {1, 1, 1, 1, 1});
  ExpectTensor(OneNode("Cast").In(F32({3}, {0, -0.0f, kNaN})).Attr("to", kOnnxBool).Run1(),
               DType::kBool, {3}, {0, 0, 1});
}

TEST(Cast, NaNAndHugeToIntDoNotCrash) {
  Tensor r = OneNode("Cast").In(F32({3}, {kNaN, 1e30f, -1e30f}))
                 .Attr("to", kOnnxInt32).Run1();
  EXPECT_EQ(r.dtype(), DType::kI32);
  EXPECT_EQ(r.num_elements(), 3);
}

TEST(Cast, RoundTripsThroughEveryDType) {
  // Small non-negative integers survive a round trip through every dtype.
  Tensor x = F32({3}, {0, 1, 100});
  for (int64_t to : {kOnnxFloat, kOnnxUint8, kOnnxInt8, kOnnxInt32, kOnnxInt64,
                     kOnnxFloat16, kOnnxDouble, kOnnxBFloat16}) {
    SCOPED_TRACE(to);
    Tensor mid = OneNode("Cast").In(x).Attr("to", to).Run1();
    ExpectTensor(OneNode("Cast").In(mid).Attr("to", kOnnxFloat).Run1(),
                 DType::kF32, {3}, {0, 1, 100});
  }
  // Narrowing ints wraps: 300 -> u8 44, i64 -> i8 -1 for 255.
  ExpectTensor(OneNode("Cast").In(I64({2}, {300, 255})).Attr("to", kOnnxUint8).Run1(),
               DType::kU8, {2}, {44, 255});
  ExpectTensor(OneNode("Cast").In(I64({2}, {300, 255})).Attr("to", kOnnxInt8).Run1(),
               DType::kI8, {2}, {44, -1});
  ExpectTensor(OneNode("Cast").In(Bool({2}, {true, false})).Attr("to", kOnnxDouble).Run1(),
               DType::kF64, {2}, {1, 0});
  // f16 rounds to nearest even: 1 + 2^-11 is a tie between 1 and 1 + 2^-10.
  Tensor h = OneNode("Cast").In(F32({3}, {1.0f + 1.0f / 2048, 65504, 1e6f}))
                 .Attr("to", kOnnxFloat16).Run1();
  ExpectTensor(h, DType::kF16, {3}, {1, 65504, kInf}, 0);
  // bf16 too (ulp 2^-7 at 1): ties to even both ways, f32's max overflows.
  Tensor b = OneNode("Cast")
                 .In(F32({4}, {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 3.4028235e38f, kNaN}))
                 .Attr("to", kOnnxBFloat16)
                 .Run1();
  ASSERT_EQ(b.dtype(), DType::kBF16);
  EXPECT_EQ(b.data<ir::BFloat16>()[0].bits, 0x3f80);
  EXPECT_EQ(b.data<ir::BFloat16>()[1].bits, 0x3f82);
  EXPECT_EQ(b.data<ir::BFloat16>()[2].bits, 0x7f80);
  EXPECT_TRUE(std::isnan(b.GetAsDouble(3)));
  // bf16 arithmetic computes in f32 and rounds the result: 1 + 2^-8 ties
  // back to 1.
  Tensor one = OneNode("Cast").In(F32({1}, {1.0f})).Attr("to", kOnnxBFloat16).Run1();
  Tensor eps = OneNode("Cast").In(F32({1}, {1.0f / 256})).Attr("to", kOnnxBFloat16).Run1();
  Tensor sum = OneNode("Add").In(one).In(eps).Run1();
  ASSERT_EQ(sum.dtype(), DType::kBF16);
  EXPECT_EQ(sum.data<ir::BFloat16>()[0].bits, 0x3f80);
}

TEST(Cast, UnsupportedTargetIsUnimplemented) {
  ExpectError(OneNode("Cast").In(F32({1}, {1})).Attr("to", kOnnxString).Run(),
              absl::StatusCode::kUnimplemented, "ONNX data type 8");
  ExpectError(OneNode("Cast").In(F32({1}, {1})).Run(),
              absl::StatusCode::kInvalidArgument, "'to'");
}

TEST(Cast, CastLikeTakesTheSecondInputsDType) {
  ExpectTensor(OneNode("CastLike").In(F32({2}, {1.9f, -1.9f})).In(I64({0}, {})).Run1(),
               DType::kI64, {2}, {1, -1});
}

TEST(Cast, DeclaredOutputDTypeIsChecked) {
  absl::StatusOr<std::vector<Tensor>> r =
      OneNode("Cast").In(F32({1}, {1})).Attr("to", kOnnxInt64).Out(DType::kI32).Run();
  EXPECT_FALSE(r.ok());
}

TEST(Identity, CopiesAnyDType) {
  ExpectTensor(OneNode("Identity").In(Bool({2}, {true, false})).Run1(),
               DType::kBool, {2}, {1, 0});
}

TEST(Dropout, InferenceIsIdentityWithAllTrueMask) {
  absl::StatusOr<std::vector<Tensor>> r =
      OneNode("Dropout").In(F32({2}, {1, -2})).Out().Out(DType::kBool).Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectTensor((*r)[0], DType::kF32, {2}, {1, -2});
  ExpectTensor((*r)[1], DType::kBool, {2}, {1, 1});
}

TEST(Dropout, TrainingModeNeedsZeroRatio) {
  ExpectTensor(OneNode("Dropout")
                   .In(F32({2}, {1, -2}))
                   .In(Tensor::Scalar<float>(0))
                   .In(Tensor::Scalar<bool>(true))
                   .Run1(),
               DType::kF32, {2}, {1, -2});
  ExpectError(OneNode("Dropout")
                  .In(F32({2}, {1, -2}))
                  .Omit()
                  .In(Tensor::Scalar<bool>(true))
                  .Run(),
              absl::StatusCode::kUnimplemented, "training mode");
  ExpectTensor(OneNode("Dropout")
                   .In(F32({1}, {3}))
                   .In(Tensor::Scalar<float>(0.5f))
                   .In(Tensor::Scalar<bool>(false))
                   .Run1(),
               DType::kF32, {1}, {3});
}

TEST(Registry, AllElementwiseOpsAreRegistered) {
  for (const char* op :
       {"Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "ThresholdedRelu",
        "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
        "Mish", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Pow", "Neg", "Abs",
        "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Tan",
        "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
        "IsNaN", "IsInf", "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min",
        "Mean", "Sum", "Equal", "Greater", "Less", "GreaterOrEqual",
        "LessOrEqual", "Not", "And", "Or", "Xor", "BitShift", "Where", "Cast",
        "CastLike", "Identity", "Dropout", "Shrink"}) {
    ir::Graph g;
    ir::ValueId x = g.AddValue("x", DType::kF32, {1});
    g.AddNode(op, {x}, {x});
    EXPECT_TRUE(UnsupportedOps(g).empty()) << op;
  }
}

}  // namespace
}  // namespace kiln::interp
