// Reference kernels for elementwise ops: activations, unary math, arithmetic
// and comparisons with numpy broadcasting, logic, Where, Cast, Identity, Dropout.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Float16;
using ir::Shape;
using Result = absl::StatusOr<std::vector<Tensor>>;

// ---- Which element types an op accepts.

enum TypeClass : unsigned { kFloat = 1, kSigned = 2, kUnsigned = 4, kBool = 8 };
constexpr unsigned kInt = kSigned | kUnsigned;
constexpr unsigned kNumeric = kFloat | kInt;
constexpr unsigned kAny = kNumeric | kBool;

template <typename T>
constexpr unsigned ClassOf() {
  if constexpr (std::is_same_v<T, bool>) {
    return kBool;
  } else if constexpr (std::is_same_v<T, Float16> ||
                       std::is_floating_point_v<T>) {
    return kFloat;
  } else if constexpr (std::is_signed_v<T>) {
    return kSigned;
  } else {
    return kUnsigned;
  }
}

template <unsigned kAllowed, typename T>
inline constexpr bool kAccepts = (ClassOf<T>() & kAllowed) != 0;

bool Accepts(unsigned allowed, DType dtype) {
  const unsigned cls = DispatchDType(dtype, [](auto tag) {
    return ClassOf<typename decltype(tag)::type>();
  });
  return (cls & allowed) != 0;
}

absl::Status WrongDType(const OpContext& ctx, DType dtype) {
  return ctx.Error("does not accept ", ir::DTypeName(dtype), " inputs");
}

absl::Status CheckAccepts(const OpContext& ctx, unsigned allowed, DType dtype) {
  return Accepts(allowed, dtype) ? absl::OkStatus() : WrongDType(ctx, dtype);
}

template <typename... Args>
absl::Status Unimplemented(const OpContext& ctx, const Args&... args) {
  return absl::UnimplementedError(
      absl::StrCat(ctx.node.Describe(), ": ", args...));
}

// ---- Element conversions. f16 is loaded as float, computed, stored back.

template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, Float16>, float, T>;

template <typename T>
Compute<T> Load(T v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return ir::HalfToFloat(v);
  } else {
    return v;
  }
}

template <typename T>
T Store(Compute<T> v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return ir::FloatToHalf(v);
  } else {
    return v;
  }
}

// Float to integer truncates toward zero; NaN gives 0 and out-of-range values
// saturate (ONNX leaves both undefined; C++ would make them UB).
template <typename To>
To FloatToInt(double v) {
  constexpr double kMax = static_cast<double>(std::numeric_limits<To>::max());
  constexpr double kLowest =
      static_cast<double>(std::numeric_limits<To>::lowest());
  if (std::isnan(v)) return 0;
  if (v >= kMax) return std::numeric_limits<To>::max();
  if (v <= kLowest) return std::numeric_limits<To>::lowest();
  return static_cast<To>(v);
}

// Cast semantics for one element between any two storage types.
template <typename To, typename From>
To Convert(From v) {
  if constexpr (std::is_same_v<From, Float16>) {
    return Convert<To>(ir::HalfToFloat(v));
  } else if constexpr (std::is_same_v<To, Float16>) {
    return ir::FloatToHalf(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> &&
                       std::is_integral_v<To>) {
    return FloatToInt<To>(static_cast<double>(v));
  } else {
    return static_cast<To>(v);
  }
}

// ---- Integer arithmetic wraps around (two's complement) instead of hitting
// signed-overflow UB; floats use plain arithmetic.

template <typename T>
T AddOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
T SubOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}

template <typename T>
T MulOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T>
T NegOf(T a) {
  if constexpr (std::is_integral_v<T>) {
    return SubOf<T>(T(0), a);
  } else {
    return -a;
  }
}

template <typename T>
bool IsNegative(T v) {
  if constexpr (std::is_signed_v<T>) {
    return v < T(0);
  } else {
    return false;
  }
}

// numpy's maximum/minimum: NaN in either operand gives NaN.
template <typename T>
T MaxOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a < b ? b : a;
}

template <typename T>
T MinOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return b < a ? b : a;
}

template <typename T>
T Clamp01(T v) {
  return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
}

template <typename T>
T Softplus(T x) {
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// ---- Loops.

// out[i] = f(a[..], b[..]) over the broadcast output shape (storage types).
template <typename A, typename B, typename R, typename F>
void BroadcastLoop(const Tensor& a, const Tensor& b, Tensor* out, F f) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  R* po = out->data<R>();
  const int64_t n = out->num_elements();
  const Shape& shape = out->shape();
  if (a.shape() == shape && b.shape() == shape) {
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
  } else if (a.shape() == shape && b.num_elements() == 1) {
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[0]);
  } else {
    const BroadcastMap ma(a.shape(), shape);
    const BroadcastMap mb(b.shape(), shape);
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[ma(i)], pb[mb(i)]);
  }
}

absl::StatusOr<Shape> BroadcastShape(const OpContext& ctx, const Shape& a,
                                     const Shape& b) {
  absl::StatusOr<Shape> shape = ir::BroadcastShapes(a, b);
  if (!shape.ok()) return ctx.Error(shape.status().message());
  return shape;
}

absl::Status CheckSameDType(const OpContext& ctx, const Tensor& a,
                            const Tensor& b) {
  if (a.dtype() == b.dtype()) return absl::OkStatus();
  return ctx.Error("inputs have different dtypes ", ir::DTypeName(a.dtype()),
                   " and ", ir::DTypeName(b.dtype()));
}

// Applies f (on Compute<T>) to each element; the output keeps x's dtype.
template <unsigned kAllowed, typename F>
absl::StatusOr<Tensor> MapTensor(const OpContext& ctx, const Tensor& x, F f) {
  return DispatchDType(x.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
    using T = typename decltype(tag)::type;
    if constexpr (!kAccepts<kAllowed, T>) {
      return WrongDType(ctx, x.dtype());
    } else {
      Tensor out(x.dtype(), x.shape());
      const T* in = x.data<T>();
      T* o = out.data<T>();
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        o[i] = Store<T>(f(Load(in[i])));
      }
      return out;
    }
  });
}

template <unsigned kAllowed, typename F>
Result Unary(OpContext& ctx, F f) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(Tensor out, MapTensor<kAllowed>(ctx, *x, f));
  return std::vector<Tensor>{std::move(out)};
}

// Like Unary, but f is a predicate and the output is bool.
template <unsigned kAllowed, typename F>
Result UnaryPredicate(OpContext& ctx, F f) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  return DispatchDType(x->dtype(), [&](auto tag) -> Result {
    using T = typename decltype(tag)::type;
    if constexpr (!kAccepts<kAllowed, T>) {
      return WrongDType(ctx, x->dtype());
    } else {
      Tensor out(DType::kBool, x->shape());
      const T* in = x->data<T>();
      bool* o = out.data<bool>();
      for (int64_t i = 0; i < x->num_elements(); ++i) o[i] = f(Load(in[i]));
      return std::vector<Tensor>{std::move(out)};
    }
  });
}

// f(a, b) on Compute<T> of two same-dtype tensors with numpy broadcasting.
// The output has the inputs' dtype, or bool when kBoolOut.
template <unsigned kAllowed, bool kBoolOut, typename F>
absl::StatusOr<Tensor> BinaryTensor(const OpContext& ctx, const Tensor& a,
                                    const Tensor& b, F f) {
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, a, b));
  KILN_ASSIGN_OR_RETURN(Shape shape, BroadcastShape(ctx, a.shape(), b.shape()));
  return DispatchDType(a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
    using T = typename decltype(tag)::type;
    if constexpr (!kAccepts<kAllowed, T>) {
      return WrongDType(ctx, a.dtype());
    } else if constexpr (kBoolOut) {
      Tensor out(DType::kBool, shape);
      BroadcastLoop<T, T, bool>(a, b, &out,
                                [&](T x, T y) { return f(Load(x), Load(y)); });
      return out;
    } else {
      Tensor out(a.dtype(), shape);
      BroadcastLoop<T, T, T>(a, b, &out, [&](T x, T y) {
        return Store<T>(f(Load(x), Load(y)));
      });
      return out;
    }
  });
}

template <unsigned kAllowed, bool kBoolOut = false, typename F>
Result Binary(OpContext& ctx, F f) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(Tensor out,
                        (BinaryTensor<kAllowed, kBoolOut>(ctx, *a, *b, f)));
  return std::vector<Tensor>{std::move(out)};
}

// Folds f over all inputs left to right (Max, Min, Sum), broadcasting.
template <unsigned kAllowed, typename F>
absl::StatusOr<Tensor> Variadic(OpContext& ctx, F f) {
  if (ctx.num_inputs() == 0) return ctx.Error("needs at least one input");
  KILN_ASSIGN_OR_RETURN(const Tensor* first, ctx.Input(0));
  KILN_RETURN_IF_ERROR(CheckAccepts(ctx, kAllowed, first->dtype()));
  Tensor acc = *first;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* next, ctx.Input(i));
    KILN_ASSIGN_OR_RETURN(acc, (BinaryTensor<kAllowed, false>(ctx, acc, *next, f)));
  }
  return acc;
}

// ---- Activations.

Result Relu(OpContext& ctx) {
  return Unary<kFloat | kSigned>(
      ctx, [](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; });
}

Result LeakyRelu(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(float alpha, ctx.node.AttrOr<float>("alpha", 0.01f));
  return Unary<kFloat>(ctx, [=](auto x) { return x < 0 ? alpha * x : x; });
}

// PRelu: from opset 7 the slope broadcasts unidirectionally to X; before, a
// 1-D slope of X's channel count applies per channel (dim 1).
Result PRelu(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* slope, ctx.Input(1));
  Tensor channel_slope;
  if (ctx.opset < 7 && slope->rank() == 1 && x->rank() >= 2 &&
      slope->dim(0) == x->dim(1) && slope->dim(0) != 1) {
    Shape per_channel(x->rank() - 1, 1);
    per_channel[0] = slope->dim(0);
    KILN_ASSIGN_OR_RETURN(channel_slope, slope->Reshaped(per_channel));
    slope = &channel_slope;
  }
  absl::StatusOr<Shape> shape = ir::BroadcastShapes(x->shape(), slope->shape());
  if (!shape.ok() || *shape != x->shape()) {
    return ctx.Error("slope shape ", ir::ShapeToString(slope->shape()),
                     " does not broadcast to X shape ",
                     ir::ShapeToString(x->shape()));
  }
  KILN_ASSIGN_OR_RETURN(
      Tensor out,
      (BinaryTensor<kFloat | kSigned, false>(ctx, *x, *slope, [](auto v, auto s) {
        return v < decltype(v)(0) ? MulOf(s, v) : v;
      })));
  return std::vector<Tensor>{std::move(out)};
}

Result Elu(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(float alpha, ctx.node.AttrOr<float>("alpha", 1.0f));
  return Unary<kFloat>(
      ctx, [=](auto x) { return x < 0 ? alpha * std::expm1(x) : x; });
}

Result Selu(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(
      float alpha, ctx.node.AttrOr<float>("alpha", 1.67326319217681884765625f));
  KILN_ASSIGN_OR_RETURN(
      float gamma, ctx.node.AttrOr<float>("gamma", 1.05070102214813232421875f));
  return Unary<kFloat>(ctx, [=](auto x) {
    return x <= 0 ? gamma * (alpha * std::exp(x) - alpha) : gamma * x;
  });
}

Result Celu(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(float alpha, ctx.node.AttrOr<float>("alpha", 1.0f));
  if (alpha == 0) return ctx.Error("alpha must be non-zero");
  return Unary<kFloat>(
      ctx, [=](auto x) { return x > 0 ? x : alpha * std::expm1(x / alpha); });
}

Result ThresholdedRelu(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(float alpha, ctx.node.AttrOr<float>("alpha", 1.0f));
  return Unary<kFloat>(
      ctx, [=](auto x) { return x > alpha ? x : decltype(x)(0); });
}

Result Sigmoid(OpContext& ctx) {
  return Unary<kFloat>(ctx, [](auto x) { return 1 / (1 + std::exp(-x)); });
}

Result HardSigmoid(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(float alpha, ctx.node.AttrOr<float>("alpha", 0.2f));
  KILN_ASSIGN_OR_RETURN(float beta, ctx.node.AttrOr<float>("beta", 0.5f));
  return Unary<kFloat>(ctx, [=](auto x) {
    return Clamp01<decltype(x)>(alpha * x + beta);
  });
}

Result HardSwish(OpContext& ctx) {
  return Unary<kFloat>(ctx, [](auto x) {
    using C = decltype(x);
    return x * Clamp01<C>(x / C(6) + C(0.5));
  });
}

Result SoftplusOp(OpContext& ctx) {
  return Unary<kFloat>(ctx, [](auto x) { return Softplus(x); });
}

Result Softsign(OpContext& ctx) {
  return Unary<kFloat>(ctx, [](auto x) { return x / (1 + std::abs(x)); });
}

Result Mish(OpContext& ctx) {
  return Unary<kFloat>(ctx, [](auto x) { return x * std::tanh(Softplus(x)); });
}

Result Shrink(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(float lambd, ctx.node.AttrOr<float>("lambd", 0.5f));
  KILN_ASSIGN_OR_RETURN(float bias, ctx.node.AttrOr<float>("bias", 0.0f));
  return Unary<kNumeric>(ctx, [=](auto x) {
    const double v = static_cast<double>(x);
    const double y = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
    return Convert<decltype(x)>(y);
  });
}

// Clip: bounds are attributes before opset 11, optional scalar inputs after.
Result Clip(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (ctx.opset < 11) {
    KILN_ASSIGN_OR_RETURN(
        float lo, ctx.node.AttrOr<float>("min", std::numeric_limits<float>::lowest()));
    KILN_ASSIGN_OR_RETURN(
        float hi, ctx.node.AttrOr<float>("max", std::numeric_limits<float>::max()));
    return Unary<kFloat>(ctx, [=](auto v) {
      using C = decltype(v);
      const C y = v < C(lo) ? C(lo) : v;
      return y > C(hi) ? C(hi) : y;
    });
  }
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.has_input(i)) continue;
    const Tensor& bound = *ctx.inputs[i];
    if (bound.dtype() != x->dtype()) {
      return ctx.Error(i == 1 ? "min" : "max", " has dtype ",
                       ir::DTypeName(bound.dtype()), ", input has ",
                       ir::DTypeName(x->dtype()));
    }
    if (bound.num_elements() != 1) {
      return ctx.Error(i == 1 ? "min" : "max", " must be a scalar, got shape ",
                       ir::ShapeToString(bound.shape()));
    }
  }
  return DispatchDType(x->dtype(), [&](auto tag) -> Result {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    if constexpr (!kAccepts<kNumeric, T>) {
      return WrongDType(ctx, x->dtype());
    } else {
      const C lo = ctx.has_input(1) ? Load(ctx.inputs[1]->data<T>()[0])
                                    : std::numeric_limits<C>::lowest();
      const C hi = ctx.has_input(2) ? Load(ctx.inputs[2]->data<T>()[0])
                                    : std::numeric_limits<C>::max();
      Tensor out(x->dtype(), x->shape());
      const T* in = x->data<T>();
      T* o = out.data<T>();
      for (int64_t i = 0; i < x->num_elements(); ++i) {
        const C v = Load(in[i]);
        const C y = v < lo ? lo : v;  // NaN stays NaN
        o[i] = Store<T>(y > hi ? hi : y);
      }
      return std::vector<Tensor>{std::move(out)};
    }
  });
}

// ---- Unary math.

template <typename F>
void RegisterFloatUnary(OpRegistry* r, const char* op, F f) {
  r->Register(op, [f](OpContext& ctx) { return Unary<kFloat>(ctx, f); });
}

Result Neg(OpContext& ctx) {
  return Unary<kFloat | kSigned>(ctx, [](auto x) { return NegOf(x); });
}

Result Abs(OpContext& ctx) {
  return Unary<kNumeric>(
      ctx, [](auto x) { return IsNegative(x) ? NegOf(x) : x; });
}

Result Sign(OpContext& ctx) {
  return Unary<kNumeric>(ctx, [](auto x) {
    using C = decltype(x);
    if (x > C(0)) return C(1);
    return IsNegative(x) ? NegOf(C(1)) : x;  // keeps 0 and NaN
  });
}

Result IsNaN(OpContext& ctx) {
  return UnaryPredicate<kFloat>(ctx, [](auto x) { return std::isnan(x); });
}

Result IsInf(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t pos, ctx.node.AttrOr<int64_t>("detect_positive", 1));
  KILN_ASSIGN_OR_RETURN(int64_t neg, ctx.node.AttrOr<int64_t>("detect_negative", 1));
  return UnaryPredicate<kFloat>(ctx, [=](auto x) {
    return std::isinf(x) && (x > 0 ? pos != 0 : neg != 0);
  });
}

// ---- Binary arithmetic.

Result Add(OpContext& ctx) {
  return Binary<kNumeric>(ctx, [](auto a, auto b) { return AddOf(a, b); });
}

Result Sub(OpContext& ctx) {
  return Binary<kNumeric>(ctx, [](auto a, auto b) { return SubOf(a, b); });
}

Result Mul(OpContext& ctx) {
  return Binary<kNumeric>(ctx, [](auto a, auto b) { return MulOf(a, b); });
}

// Integer division truncates toward zero, as C and ONNX's reference do.
Result Div(OpContext& ctx) {
  bool divided_by_zero = false;
  KILN_ASSIGN_OR_RETURN(
      std::vector<Tensor> out, Binary<kNumeric>(ctx, [&](auto a, auto b) {
        using C = decltype(a);
        if constexpr (std::is_floating_point_v<C>) {
          return a / b;
        } else {
          if (b == C(0)) {
            divided_by_zero = true;
            return C(0);
          }
          if constexpr (std::is_signed_v<C>) {
            if (b == C(-1)) return NegOf(a);  // INT_MIN / -1 would trap
          }
          return static_cast<C>(a / b);
        }
      }));
  if (divided_by_zero) return ctx.Error("integer division by zero");
  return out;
}

// fmod=0: integer remainder takes the divisor's sign (Python %).
// fmod=1: remainder takes the dividend's sign (C fmod); required for floats.
Result Mod(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t c_fmod, ctx.node.AttrOr<int64_t>("fmod", 0));
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  if (c_fmod == 0 && ir::IsFloat(a->dtype())) {
    return ctx.Error("fmod must be 1 for floating-point inputs");
  }
  bool divided_by_zero = false;
  KILN_ASSIGN_OR_RETURN(
      std::vector<Tensor> out, Binary<kNumeric>(ctx, [&](auto x, auto y) {
        using C = decltype(x);
        if constexpr (std::is_floating_point_v<C>) {
          return std::fmod(x, y);
        } else {
          if (y == C(0)) {
            divided_by_zero = true;
            return C(0);
          }
          if constexpr (std::is_signed_v<C>) {
            if (y == C(-1)) return C(0);  // INT_MIN % -1 would trap
          }
          C r = static_cast<C>(x % y);
          if (c_fmod == 0 && r != C(0) && IsNegative(r) != IsNegative(y)) {
            r = AddOf(r, y);
          }
          return r;
        }
      }));
  if (divided_by_zero) return ctx.Error("integer modulo by zero");
  return out;
}

// Integer power with wrap-around, for exponents >= 0.
template <typename T>
T IntPow(T base, uint64_t e) {
  uint64_t result = 1;
  uint64_t b = static_cast<uint64_t>(static_cast<int64_t>(base));
  while (e != 0) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(result);
}

// Pow: the result has the base's dtype; the exponent may have another dtype
// from opset 12.
Result Pow(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* base, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* exponent, ctx.Input(1));
  const DType bd = base->dtype();
  if (!ir::IsFloat(bd) && bd != DType::kI32 && bd != DType::kI64) {
    return WrongDType(ctx, bd);
  }
  if (exponent->dtype() == DType::kBool) return WrongDType(ctx, DType::kBool);
  if (ctx.opset < 12) KILN_RETURN_IF_ERROR(CheckSameDType(ctx, *base, *exponent));
  KILN_ASSIGN_OR_RETURN(Shape shape,
                        BroadcastShape(ctx, base->shape(), exponent->shape()));
  Tensor out(bd, shape);
  DispatchDType(bd, [&](auto base_tag) {
    using B = typename decltype(base_tag)::type;
    DispatchDType(exponent->dtype(), [&](auto exp_tag) {
      using E = typename decltype(exp_tag)::type;
      if constexpr (!std::is_same_v<B, bool> && !std::is_same_v<E, bool>) {
        BroadcastLoop<B, E, B>(*base, *exponent, &out, [](B b, E e) {
          const auto x = Load(b);
          const auto y = Load(e);
          if constexpr (std::is_integral_v<decltype(x)> &&
                        std::is_integral_v<decltype(y)>) {
            if (!IsNegative(y)) return IntPow(x, static_cast<uint64_t>(y));
          }
          const double r =
              std::pow(static_cast<double>(x), static_cast<double>(y));
          return Store<B>(Convert<Compute<B>>(r));
        });
      }
    });
  });
  return std::vector<Tensor>{std::move(out)};
}

// ---- Variadic.

Result Max(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(
      Tensor out, Variadic<kNumeric>(ctx, [](auto a, auto b) { return MaxOf(a, b); }));
  return std::vector<Tensor>{std::move(out)};
}

Result Min(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(
      Tensor out, Variadic<kNumeric>(ctx, [](auto a, auto b) { return MinOf(a, b); }));
  return std::vector<Tensor>{std::move(out)};
}

Result Sum(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(
      Tensor out, Variadic<kFloat>(ctx, [](auto a, auto b) { return a + b; }));
  return std::vector<Tensor>{std::move(out)};
}

Result Mean(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(
      Tensor sum, Variadic<kFloat>(ctx, [](auto a, auto b) { return a + b; }));
  const int n = ctx.num_inputs();
  KILN_ASSIGN_OR_RETURN(
      Tensor out, MapTensor<kFloat>(ctx, sum, [n](auto x) {
        return x / static_cast<decltype(x)>(n);
      }));
  return std::vector<Tensor>{std::move(out)};
}

// ---- Comparison and logic.

template <typename F>
void RegisterCompare(OpRegistry* r, const char* op, F f) {
  r->Register(op, [f](OpContext& ctx) {
    return Binary<kNumeric, /*kBoolOut=*/true>(ctx, f);
  });
}

template <typename F>
void RegisterLogic(OpRegistry* r, const char* op, F f) {
  r->Register(op, [f](OpContext& ctx) {
    return Binary<kBool, /*kBoolOut=*/true>(ctx, f);
  });
}

Result Equal(OpContext& ctx) {
  return Binary<kAny, /*kBoolOut=*/true>(ctx,
                                         [](auto a, auto b) { return a == b; });
}

Result Not(OpContext& ctx) {
  return Unary<kBool>(ctx, [](bool x) { return !x; });
}

Result BitShift(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::string direction,
                        ctx.node.Attr<std::string>("direction"));
  if (direction != "LEFT" && direction != "RIGHT") {
    return ctx.Error("direction must be LEFT or RIGHT, got '", direction, "'");
  }
  const bool left = direction == "LEFT";
  return Binary<kUnsigned>(ctx, [left](auto a, auto b) {
    using C = decltype(a);
    constexpr int kBits = 8 * sizeof(C);
    if (b >= C(kBits)) return C(0);
    return static_cast<C>(left ? a << b : a >> b);
  });
}

Result Where(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* cond, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* y, ctx.Input(2));
  if (cond->dtype() != DType::kBool) {
    return ctx.Error("condition must be bool, got ",
                     ir::DTypeName(cond->dtype()));
  }
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, *x, *y));
  KILN_ASSIGN_OR_RETURN(Shape xy, BroadcastShape(ctx, x->shape(), y->shape()));
  KILN_ASSIGN_OR_RETURN(Shape shape, BroadcastShape(ctx, cond->shape(), xy));
  Tensor out(x->dtype(), shape);
  DispatchDType(x->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* c = cond->data<bool>();
    const T* px = x->data<T>();
    const T* py = y->data<T>();
    T* po = out.data<T>();
    const int64_t n = out.num_elements();
    if (cond->shape() == shape && x->shape() == shape && y->shape() == shape) {
      for (int64_t i = 0; i < n; ++i) po[i] = c[i] ? px[i] : py[i];
      return;
    }
    const BroadcastMap mc(cond->shape(), shape);
    const BroadcastMap mx(x->shape(), shape);
    const BroadcastMap my(y->shape(), shape);
    for (int64_t i = 0; i < n; ++i) po[i] = c[mc(i)] ? px[mx(i)] : py[my(i)];
  });
  return std::vector<Tensor>{std::move(out)};
}

// ---- Cast and friends.

// kiln's dtype for an ONNX TensorProto.DataType number.
std::optional<DType> DTypeFromOnnx(int64_t onnx_type) {
  switch (onnx_type) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    default: return std::nullopt;
  }
}

Tensor CastTensor(const Tensor& x, DType to) {
  Tensor out(to, x.shape());
  DispatchDType(x.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    DispatchDType(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* in = x.data<From>();
      To* o = out.data<To>();
      for (int64_t i = 0; i < x.num_elements(); ++i) o[i] = Convert<To>(in[i]);
    });
  });
  return out;
}

Result Cast(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t to, ctx.node.Attr<int64_t>("to"));
  std::optional<DType> dtype = DTypeFromOnnx(to);
  if (!dtype) {
    return Unimplemented(ctx, "cast to ONNX data type ", to,
                         " (kiln supports f32, f16, f64, i64, i32, i8, u8, bool)");
  }
  return std::vector<Tensor>{CastTensor(*x, *dtype)};
}

Result CastLike(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* like, ctx.Input(1));
  return std::vector<Tensor>{CastTensor(*x, like->dtype())};
}

Result Identity(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  return std::vector<Tensor>{*x};
}

// Inference-mode Dropout is the identity; its optional mask is all ones.
// Training mode is random, so only ratio 0 (again the identity) is supported.
Result Dropout(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (ctx.has_input(2)) {
    const Tensor& training = *ctx.inputs[2];
    if (training.dtype() != DType::kBool || training.num_elements() != 1) {
      return ctx.Error("training_mode must be a bool scalar");
    }
    double ratio = 0.5;
    if (ctx.has_input(1)) {
      const Tensor& r = *ctx.inputs[1];
      if (!ir::IsFloat(r.dtype()) || r.num_elements() != 1) {
        return ctx.Error("ratio must be a float scalar");
      }
      ratio = r.GetAsDouble(0);
    }
    if (training.data<bool>()[0] && ratio != 0) {
      return Unimplemented(ctx, "training mode with ratio ", ratio,
                           " is random and not supported");
    }
  }
  std::vector<Tensor> outs = {*x};
  if (ctx.num_outputs() >= 2 && ctx.node.outputs[1] != ir::kNoValue) {
    DType mask_dtype = ctx.graph.value(ctx.node.outputs[1]).dtype;
    if (mask_dtype == DType::kInvalid) {
      mask_dtype = ctx.opset >= 10 ? DType::kBool : x->dtype();
    }
    Tensor mask(mask_dtype, x->shape());
    DispatchDType(mask_dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* m = mask.data<T>();
      for (int64_t i = 0; i < mask.num_elements(); ++i) m[i] = Convert<T>(true);
    });
    outs.push_back(std::move(mask));
  }
  return outs;
}

}  // namespace

void RegisterElementwiseOps(OpRegistry* r) {
  r->Register("Relu", Relu);
  r->Register("LeakyRelu", LeakyRelu);
  r->Register("PRelu", PRelu);
  r->Register("Elu", Elu);
  r->Register("Selu", Selu);
  r->Register("Celu", Celu);
  r->Register("ThresholdedRelu", ThresholdedRelu);
  r->Register("Clip", Clip);
  r->Register("Sigmoid", Sigmoid);
  r->Register("HardSigmoid", HardSigmoid);
  r->Register("HardSwish", HardSwish);
  r->Register("Softplus", SoftplusOp);
  r->Register("Softsign", Softsign);
  r->Register("Mish", Mish);
  r->Register("Shrink", Shrink);

  RegisterFloatUnary(r, "Tanh", [](auto x) { return std::tanh(x); });
  RegisterFloatUnary(r, "Erf", [](auto x) { return std::erf(x); });
  RegisterFloatUnary(r, "Exp", [](auto x) { return std::exp(x); });
  RegisterFloatUnary(r, "Log", [](auto x) { return std::log(x); });
  RegisterFloatUnary(r, "Sqrt", [](auto x) { return std::sqrt(x); });
  RegisterFloatUnary(r, "Reciprocal", [](auto x) { return 1 / x; });
  RegisterFloatUnary(r, "Floor", [](auto x) { return std::floor(x); });
  RegisterFloatUnary(r, "Ceil", [](auto x) { return std::ceil(x); });
  // nearbyint in the default rounding mode rounds half to even.
  RegisterFloatUnary(r, "Round", [](auto x) { return std::nearbyint(x); });
  RegisterFloatUnary(r, "Sin", [](auto x) { return std::sin(x); });
  RegisterFloatUnary(r, "Cos", [](auto x) { return std::cos(x); });
  RegisterFloatUnary(r, "Tan", [](auto x) { return std::tan(x); });
  RegisterFloatUnary(r, "Asin", [](auto x) { return std::asin(x); });
  RegisterFloatUnary(r, "Acos", [](auto x) { return std::acos(x); });
  RegisterFloatUnary(r, "Atan", [](auto x) { return std::atan(x); });
  RegisterFloatUnary(r, "Sinh", [](auto x) { return std::sinh(x); });
  RegisterFloatUnary(r, "Cosh", [](auto x) { return std::cosh(x); });
  RegisterFloatUnary(r, "Asinh", [](auto x) { return std::asinh(x); });
  RegisterFloatUnary(r, "Acosh", [](auto x) { return std::acosh(x); });
  RegisterFloatUnary(r, "Atanh", [](auto x) { return std::atanh(x); });
  r->Register("Neg", Neg);
  r->Register("Abs", Abs);
  r->Register("Sign", Sign);
  r->Register("IsNaN", IsNaN);
  r->Register("IsInf", IsInf);

  r->Register("Add", Add);
  r->Register("Sub", Sub);
  r->Register("Mul", Mul);
  r->Register("Div", Div);
  r->Register("Mod", Mod);
  r->Register("Pow", Pow);
  r->Register("Max", Max);
  r->Register("Min", Min);
  r->Register("Sum", Sum);
  r->Register("Mean", Mean);

  r->Register("Equal", Equal);
  RegisterCompare(r, "Greater", [](auto a, auto b) { return a > b; });
  RegisterCompare(r, "Less", [](auto a, auto b) { return a < b; });
  RegisterCompare(r, "GreaterOrEqual", [](auto a, auto b) { return a >= b; });
  RegisterCompare(r, "LessOrEqual", [](auto a, auto b) { return a <= b; });
  r->Register("Not", Not);
  RegisterLogic(r, "And", [](bool a, bool b) { return a && b; });
  RegisterLogic(r, "Or", [](bool a, bool b) { return a || b; });
  RegisterLogic(r, "Xor", [](bool a, bool b) { return a != b; });
  r->Register("BitShift", BitShift);
  r->Register("Where", Where);

  r->Register("Cast", Cast);
  r->Register("CastLike", CastLike);
  r->Register("Identity", Identity);
  r->Register("Dropout", Dropout);
}

}  // namespace kiln::interp
