// File: interp/math.cc — reference kernels of ONNX's math family
// (onnx/defs/math): elementwise arithmetic and activations with numpy
// broadcasting, Softmax and friends, Gemm/MatMul/Einsum and their integer
// forms, CumSum, TopK, Det, the losses, and the signal ops (windows,
// MelWeightMatrix, DFT, STFT). Floating-point math is in double unless
// ONNX's definition rounds in f32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "interp/elementwise.h"
#include "interp/gemm.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "interp/quant_util.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;
using Outputs = std::vector<Tensor>;
using Result = absl::StatusOr<Outputs>;

constexpr double kPi = 3.14159265358979323846;

// ---- Elementwise arithmetic. Integer arithmetic wraps around (two's
// complement) instead of hitting signed-overflow UB; floats use plain
// arithmetic.

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

bool Accepts(unsigned allowed, DType dtype) {
  const unsigned cls = DispatchDType(dtype, [](auto tag) {
    return ClassOf<typename decltype(tag)::type>();
  });
  return (cls & allowed) != 0;
}

absl::Status CheckAccepts(const OpContext& ctx, unsigned allowed, DType dtype) {
  return Accepts(allowed, dtype) ? absl::OkStatus() : WrongDType(ctx, dtype);
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

// In double, rounded once to the tensor's type: the correctly rounded f32
// value (but for ~1e-16 relative). 1.0f / (1.0f + expf(-x)) rounds three
// times and can be an ulp off, enough to move a quantized sigmoid across a
// rounding tie (efficientnet_b0.qdq's squeeze-excitation input 87: the f32
// formula's 0.49887168 / scale is 226.50002, the correctly rounded 0.49887165
// / scale the tie 226.5, which rounds to even, as ONNX Runtime gives).
Result Sigmoid(OpContext& ctx) {
  return Unary<kFloat>(ctx, [](auto x) {
    return static_cast<decltype(x)>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
  });
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

// ---- Expand.

Result Expand(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                        IntValues(ctx, 1, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("negative dim ", d, " in shape");
  }
  absl::StatusOr<Shape> out = ir::BroadcastShapes(x->shape(), shape);
  if (!out.ok()) return ctx.Error(out.status().message());
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, *out));
  BroadcastMap map(x->shape(), *out);
  Tensor y = Remap(*x, *out, [&](int64_t i, const std::vector<int64_t>&) {
    return map(i);
  });
  return std::vector<Tensor>{std::move(y)};
}

// ---- Softmax, LogSoftmax, Hardmax.

// NaN ranks above every number (numpy's argmax/sort convention).
template <typename K>
bool Greater(K a, K b) {
  if (IsNan(a)) return !IsNan(b);
  if (IsNan(b)) return false;
  return a > b;
}

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

OpKernel MakeSoftmax(SoftmaxKind kind) {
  return [kind](OpContext& ctx) -> absl::StatusOr<Outputs> {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    const bool legacy = ctx.opset < 13;  // coerce to 2-D at axis
    KILN_ASSIGN_OR_RETURN(int64_t axis_attr,
                          ctx.node.AttrOr<int64_t>("axis", legacy ? 1 : -1));
    absl::StatusOr<int64_t> axis = NormalizeAxis(axis_attr, x->rank());
    if (!axis.ok()) return ctx.Error(axis.status().message());
    AxisSplit s = SplitAt(x->shape(), *axis);
    if (legacy) {
      s.n *= s.inner;
      s.inner = 1;
    }
    std::vector<double> buf(s.n);
    return DispatchDType(x->dtype(), [&](auto tag) -> absl::StatusOr<Outputs> {
      using T = typename decltype(tag)::type;
      if constexpr (!kIsFloat<T>) {
        return ctx.Error("input must be f16, f32 or f64, got ", x->TypeString());
      } else {
        Tensor out(x->dtype(), x->shape());
        const T* in = x->data<T>();
        T* y = out.data<T>();
        for (int64_t o = 0; o < s.outer; ++o) {
          for (int64_t i = 0; i < s.inner; ++i) {
            const int64_t base = o * s.n * s.inner + i;
            double m = -std::numeric_limits<double>::infinity();
            int64_t argmax = 0;
            for (int64_t j = 0; j < s.n; ++j) {
              buf[j] = ToDouble(in[base + j * s.inner]);
              if (Greater(buf[j], m)) {
                m = buf[j];
                argmax = j;
              }
            }
            if (kind == SoftmaxKind::kHardmax) {
              for (int64_t j = 0; j < s.n; ++j) {
                y[base + j * s.inner] = FromDouble<T>(j == argmax ? 1.0 : 0.0);
              }
              continue;
            }
            double sum = 0;
            for (int64_t j = 0; j < s.n; ++j) sum += std::exp(buf[j] - m);
            const double log_sum = std::log(sum);
            for (int64_t j = 0; j < s.n; ++j) {
              const double v = kind == SoftmaxKind::kSoftmax
                                   ? std::exp(buf[j] - m) / sum
                                   : buf[j] - m - log_sum;
              y[base + j * s.inner] = FromDouble<T>(v);
            }
          }
        }
        return One(std::move(out));
      }
    });
  };
}

// ---- Gemm, MatMul, MatMulInteger, QLinearMatMul, Einsum.

template <typename Acc>
std::vector<Acc> ReadMatrix(const Tensor& t, bool transpose) {
  std::vector<Acc> v = ReadAll<Acc>(t);
  if (!transpose) return v;
  const int64_t rows = t.dim(0), cols = t.dim(1);
  std::vector<Acc> out(v.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = v[i * cols + j];
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> Gemm(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  if (a->rank() != 2 || b->rank() != 2) {
    return ctx.Error("A ", a->TypeString(), " and B ", b->TypeString(),
                     " must be 2-D");
  }
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, ctx.node.AttrOr<int64_t>("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, ctx.node.AttrOr<int64_t>("transB", 0));
  KILN_ASSIGN_OR_RETURN(float alpha, ctx.node.AttrOr<float>("alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(float beta, ctx.node.AttrOr<float>("beta", 1.0f));
  const int64_t m = trans_a ? a->dim(1) : a->dim(0);
  const int64_t k = trans_a ? a->dim(0) : a->dim(1);
  const int64_t kb = trans_b ? b->dim(1) : b->dim(0);
  const int64_t n = trans_b ? b->dim(0) : b->dim(1);
  if (k != kb) {
    return ctx.Error("inner dims differ: A ", ir::ShapeToString(a->shape()),
                     (trans_a ? " (transposed)" : ""), ", B ",
                     ir::ShapeToString(b->shape()),
                     (trans_b ? " (transposed)" : ""));
  }
  const Shape out_shape = {m, n};
  std::vector<double> cv;
  if (ctx.has_input(2)) {
    const Tensor& c = *ctx.inputs[2];
    bool ok = c.rank() <= 2;
    for (int64_t i = 0; ok && i < c.rank(); ++i) {
      const int64_t want = out_shape[2 - c.rank() + i];
      ok = c.dim(i) == want || c.dim(i) == 1;
    }
    if (!ok) {
      return ctx.Error("C ", ir::ShapeToString(c.shape()),
                       " does not broadcast to ", ir::ShapeToString(out_shape));
    }
    const std::vector<double> raw = ReadAll<double>(c);
    BroadcastMap map(c.shape(), out_shape);
    cv.resize(m * n);
    for (int64_t i = 0; i < m * n; ++i) cv[i] = raw[map(i)];
  }
  std::vector<double> result(m * n, 0.0);
  auto finish = [&](const auto& acc_vec) {
    for (int64_t i = 0; i < m * n; ++i) {
      result[i] = alpha * static_cast<double>(acc_vec[i]) +
                  (cv.empty() ? 0.0 : beta * cv[i]);
    }
  };
  if (ir::IsFloat(a->dtype())) {
    const std::vector<double> av = ReadMatrix<double>(*a, trans_a != 0);
    const std::vector<double> bv = ReadMatrix<double>(*b, trans_b != 0);
    std::vector<double> acc(m * n, 0.0);
    GemmAccumulate<double>(m, k, n, av.data(), bv.data(), acc.data());
    finish(acc);
  } else {
    const std::vector<int64_t> av = ReadMatrix<int64_t>(*a, trans_a != 0);
    const std::vector<int64_t> bv = ReadMatrix<int64_t>(*b, trans_b != 0);
    std::vector<int64_t> acc(m * n, 0);
    GemmAccumulate<int64_t>(m, k, n, av.data(), bv.data(), acc.data());
    finish(acc);
  }
  return std::vector<Tensor>{StoreAll(a->dtype(), out_shape, result)};
}

// Numpy matmul on already-converted operands; returns the output shape.
template <typename Acc>
absl::StatusOr<Shape> BatchedMatMul(const OpContext& ctx, Shape a_shape,
                                    const std::vector<Acc>& a, Shape b_shape,
                                    const std::vector<Acc>& b,
                                    std::vector<Acc>* out) {
  if (a_shape.empty() || b_shape.empty()) {
    return ctx.Error("MatMul operands must have rank >= 1");
  }
  const bool squeeze_m = a_shape.size() == 1;
  const bool squeeze_n = b_shape.size() == 1;
  if (squeeze_m) a_shape.insert(a_shape.begin(), 1);
  if (squeeze_n) b_shape.push_back(1);
  const int64_t m = a_shape[a_shape.size() - 2], k = a_shape.back();
  const int64_t kb = b_shape[b_shape.size() - 2], n = b_shape.back();
  if (k != kb) {
    return ctx.Error("inner dims differ: ", ir::ShapeToString(a_shape), " x ",
                     ir::ShapeToString(b_shape));
  }
  const Shape a_batch(a_shape.begin(), a_shape.end() - 2);
  const Shape b_batch(b_shape.begin(), b_shape.end() - 2);
  absl::StatusOr<Shape> batch = ir::BroadcastShapes(a_batch, b_batch);
  if (!batch.ok()) {
    return ctx.Error("batch dims do not broadcast: ", batch.status().message());
  }
  Shape out_shape = *batch;
  if (!squeeze_m) out_shape.push_back(m);
  if (!squeeze_n) out_shape.push_back(n);
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_shape));
  const int64_t num_batches = ir::NumElements(*batch);
  BroadcastMap amap(a_batch, *batch), bmap(b_batch, *batch);
  out->assign(num_batches * m * n, Acc{0});
  for (int64_t i = 0; i < num_batches; ++i) {
    GemmAccumulate<Acc>(m, k, n, a.data() + amap(i) * m * k,
                        b.data() + bmap(i) * k * n, out->data() + i * m * n);
  }
  return out_shape;
}

absl::StatusOr<std::vector<Tensor>> MatMul(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  if (ir::IsFloat(a->dtype())) {
    std::vector<double> out;
    KILN_ASSIGN_OR_RETURN(
        Shape shape, BatchedMatMul<double>(ctx, a->shape(), ReadAll<double>(*a),
                                           b->shape(), ReadAll<double>(*b), &out));
    return std::vector<Tensor>{StoreAll(a->dtype(), shape, out)};
  }
  std::vector<int64_t> out;
  KILN_ASSIGN_OR_RETURN(
      Shape shape, BatchedMatMul<int64_t>(ctx, a->shape(), ReadAll<int64_t>(*a),
                                          b->shape(), ReadAll<int64_t>(*b), &out));
  return std::vector<Tensor>{StoreAll(a->dtype(), shape, out)};
}

// Subtracts a zero point that is a scalar or one value per row (`per_row`,
// A's [M]) or per column (B's [N]) of the last two dims.
absl::Status SubtractMatMulZeroPoint(const OpContext& ctx, const Tensor* zp,
                               const Shape& shape, bool per_row,
                               std::vector<int64_t>* v) {
  if (zp == nullptr) return absl::OkStatus();
  const std::vector<int64_t> z = ReadAll<int64_t>(*zp);
  if (z.size() == 1) {
    for (int64_t& e : *v) e -= z[0];
    return absl::OkStatus();
  }
  const int64_t rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  const int64_t cols = shape.back();
  const int64_t want = per_row ? rows : cols;
  if (zp->rank() != 1 || zp->dim(0) != want || shape.size() < 2) {
    return absl::UnimplementedError(absl::StrCat(
        ctx.node.Describe(), ": zero point of shape ",
        ir::ShapeToString(zp->shape()), " (only scalar or 1-D per-",
        per_row ? "row" : "column", " zero points are supported)"));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const int64_t row = (i / cols) % rows, col = i % cols;
    (*v)[i] -= z[per_row ? row : col];
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> MatMulInteger(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  if (a->rank() == 0 || b->rank() == 0) {
    return ctx.Error("operands must have rank >= 1");
  }
  std::vector<int64_t> av = ReadAll<int64_t>(*a), bv = ReadAll<int64_t>(*b);
  KILN_RETURN_IF_ERROR(SubtractMatMulZeroPoint(
      ctx, ctx.has_input(2) ? ctx.inputs[2] : nullptr, a->shape(), true, &av));
  KILN_RETURN_IF_ERROR(SubtractMatMulZeroPoint(
      ctx, ctx.has_input(3) ? ctx.inputs[3] : nullptr, b->shape(), false, &bv));
  std::vector<int64_t> out;
  KILN_ASSIGN_OR_RETURN(Shape shape, BatchedMatMul<int64_t>(
                                         ctx, a->shape(), av, b->shape(), bv,
                                         &out));
  return std::vector<Tensor>{StoreAll(DType::kI32, shape, out)};
}

absl::StatusOr<Outputs> QLinearMatMul(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* as, ScalarParam(ctx, 1, "a_scale"));
  KILN_ASSIGN_OR_RETURN(const Tensor* az, ScalarParam(ctx, 2, "a_zero_point"));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(3));
  // B's scale and zero point: one value, or one per column of a B of rank
  // >= 2 (ONNX's per-column quantization).
  KILN_ASSIGN_OR_RETURN(const Tensor* bs, ctx.Input(4));
  KILN_ASSIGN_OR_RETURN(const Tensor* bz, ctx.Input(5));
  KILN_ASSIGN_OR_RETURN(const Tensor* ys, ScalarParam(ctx, 6, "y_scale"));
  KILN_ASSIGN_OR_RETURN(const Tensor* yz, ScalarParam(ctx, 7, "y_zero_point"));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *a, "a"));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *b, "b"));
  if (a->rank() == 0 || b->rank() == 0) {
    return ctx.Error("operands must have rank >= 1");
  }
  const int64_t columns = b->rank() >= 2 ? b->shape().back() : 0;
  for (const Tensor* p : {bs, bz}) {
    if (p->num_elements() != 1 && (p->rank() != 1 || p->dim(0) != columns)) {
      return ctx.Error(p == bs ? "b_scale" : "b_zero_point",
                       " must have one value or one per column of b, got ", p->TypeString(),
                       " for b ", b->TypeString());
    }
  }
  if (bz->dtype() != b->dtype()) {
    return ctx.Error("b_zero_point ", bz->TypeString(), " must have b's type");
  }
  std::vector<int64_t> av = a->ToInt64Vector(), bv = b->ToInt64Vector();
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(ctx, az, a->dtype(), 0, &av, "a"));
  KILN_RETURN_IF_ERROR(SubtractMatMulZeroPoint(ctx, bz, b->shape(), false, &bv));
  // numpy matmul: 1-D operands gain a unit dim that is dropped afterwards.
  Shape ash = a->shape(), bsh = b->shape();
  if (ash.size() == 1) ash.insert(ash.begin(), 1);
  if (bsh.size() == 1) bsh.push_back(1);
  const int64_t m = ash[ash.size() - 2], k = ash.back(), n = bsh.back();
  if (bsh[bsh.size() - 2] != k) {
    return ctx.Error("inner dimensions differ: ", a->TypeString(), " x ",
                     b->TypeString());
  }
  const Shape abatch(ash.begin(), ash.end() - 2), bbatch(bsh.begin(), bsh.end() - 2);
  absl::StatusOr<Shape> batch = ir::BroadcastShapes(abatch, bbatch);
  if (!batch.ok()) return ctx.Error(batch.status().message());
  Shape out = *batch;
  if (a->rank() > 1) out.push_back(m);
  if (b->rank() > 1) out.push_back(n);
  Shape full = *batch;
  full.push_back(m);
  full.push_back(n);
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, full));
  const int64_t nb = ir::NumElements(*batch);
  if (nb * m * n > 0 && k > kMaxOutputElements / (nb * m * n)) {
    return ctx.Error("matmul too large for the reference interpreter");
  }
  const BroadcastMap amap(abatch, *batch), bmap(bbatch, *batch);
  std::vector<int64_t> acc(nb * m * n, 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const int64_t* ap = av.data() + amap(bi) * m * k;
    const int64_t* bp = bv.data() + bmap(bi) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t s = 0;
        for (int64_t p = 0; p < k; ++p) s += ap[i * k + p] * bp[p * n + j];
        acc[(bi * m + i) * n + j] = s;
      }
    }
  }
  // Per column c: a_scale * b_scale[c] / y_scale (acc is [..., m, n]).
  std::vector<double> scale;
  for (int64_t c = 0; c < bs->num_elements(); ++c) {
    scale.push_back(as->GetAsDouble(0) * bs->GetAsDouble(c) / ys->GetAsDouble(0));
  }
  KILN_ASSIGN_OR_RETURN(Tensor y, Requantize(ctx, out, acc, scale, 1, yz));
  return Outputs{std::move(y)};
}

// Einsum labels: 'A'-'Z' are 0-25, 'a'-'z' 26-51 (so sorting ids sorts
// letters as ASCII does), ellipsis dims 52 onwards.
constexpr int kNumLetters = 52;

struct EinsumTerm {
  std::vector<int> labels;  // letters; -1 marks where "..." stands
  bool has_ellipsis = false;
};

absl::StatusOr<EinsumTerm> ParseEinsumTerm(const OpContext& ctx,
                                           absl::string_view s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch >= 'A' && ch <= 'Z') {
      t.labels.push_back(ch - 'A');
    } else if (ch >= 'a' && ch <= 'z') {
      t.labels.push_back(26 + ch - 'a');
    } else if (ch == '.' && s.substr(i, 3) == "..." && !t.has_ellipsis) {
      t.has_ellipsis = true;
      t.labels.push_back(-1);
      i += 2;
    } else {
      return ctx.Error("bad einsum term '", s, "'");
    }
  }
  return t;
}

// Expands "..." into `count` ellipsis labels, right-aligned to `total`.
std::vector<int> ExpandEllipsis(const EinsumTerm& t, int count, int total) {
  std::vector<int> out;
  for (int l : t.labels) {
    if (l >= 0) {
      out.push_back(l);
      continue;
    }
    for (int j = 0; j < count; ++j) out.push_back(kNumLetters + total - count + j);
  }
  return out;
}

template <typename Acc>
std::vector<Acc> EinsumCompute(const std::vector<std::vector<Acc>>& data,
                               const std::vector<std::vector<int64_t>>& strides_o,
                               const std::vector<std::vector<int64_t>>& strides_s,
                               const Shape& out_dims, const Shape& sum_dims) {
  const size_t ops = data.size();
  const int64_t out_count = ir::NumElements(out_dims);
  const int64_t sum_count = ir::NumElements(sum_dims);
  std::vector<Acc> out(out_count, Acc{0});
  std::vector<int64_t> io(out_dims.size(), 0), is(sum_dims.size(), 0);
  std::vector<int64_t> base(ops), off(ops);
  for (int64_t p = 0; p < out_count; ++p) {
    for (size_t i = 0; i < ops; ++i) {
      base[i] = 0;
      for (size_t j = 0; j < out_dims.size(); ++j) base[i] += io[j] * strides_o[i][j];
      off[i] = base[i];
    }
    Acc acc{0};
    std::fill(is.begin(), is.end(), 0);
    for (int64_t q = 0; q < sum_count; ++q) {
      Acc prod{1};
      for (size_t i = 0; i < ops; ++i) prod *= data[i][off[i]];
      acc += prod;
      for (size_t j = sum_dims.size(); j-- > 0;) {
        if (++is[j] < sum_dims[j]) {
          for (size_t i = 0; i < ops; ++i) off[i] += strides_s[i][j];
          break;
        }
        for (size_t i = 0; i < ops; ++i) off[i] -= (sum_dims[j] - 1) * strides_s[i][j];
        is[j] = 0;
      }
    }
    out[p] = acc;
    for (size_t j = out_dims.size(); j-- > 0;) {
      if (++io[j] < out_dims[j]) break;
      io[j] = 0;
    }
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> Einsum(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::string eq, ctx.node.Attr<std::string>("equation"));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<EinsumTerm> terms;
  for (absl::string_view part : absl::StrSplit(lhs, ',')) {
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseEinsumTerm(ctx, part));
    terms.push_back(std::move(t));
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs()) {
    return ctx.Error("equation '", eq, "' has ", terms.size(),
                     " operands, node has ", ctx.num_inputs(), " inputs");
  }
  std::vector<const Tensor*> in(terms.size());
  int ellipsis_rank = 0;
  std::vector<int> ellipsis_count(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(in[i], ctx.Input(i));
    const int letters = static_cast<int>(terms[i].labels.size()) -
                        (terms[i].has_ellipsis ? 1 : 0);
    const int extra = static_cast<int>(in[i]->rank()) - letters;
    if (extra < 0 || (extra > 0 && !terms[i].has_ellipsis)) {
      return ctx.Error("operand ", i, " ", in[i]->TypeString(),
                       " does not match its einsum term");
    }
    ellipsis_count[i] = extra;
    ellipsis_rank = std::max(ellipsis_rank, extra);
  }
  const int num_labels = kNumLetters + ellipsis_rank;
  std::vector<int64_t> size(num_labels, -1);
  std::vector<int> occurrences(num_labels, 0);
  std::vector<std::vector<int>> op_labels(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    op_labels[i] = ExpandEllipsis(terms[i], ellipsis_count[i], ellipsis_rank);
    for (size_t d = 0; d < op_labels[i].size(); ++d) {
      const int l = op_labels[i][d];
      const int64_t dim = in[i]->dim(d);
      ++occurrences[l];
      if (size[l] == -1 || (l >= kNumLetters && size[l] == 1)) {
        size[l] = dim;
      } else if (dim != size[l] && !(l >= kNumLetters && dim == 1)) {
        return ctx.Error("einsum label sizes disagree (", size[l], " vs ", dim,
                         ") in operand ", i);
      }
    }
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseEinsumTerm(ctx, eq.substr(arrow + 2)));
    out_labels = ExpandEllipsis(t, ellipsis_rank, ellipsis_rank);
    std::vector<bool> seen(num_labels, false);
    for (int l : out_labels) {
      if (size[l] == -1 || seen[l]) {
        return ctx.Error("bad einsum output term in '", eq, "'");
      }
      seen[l] = true;
    }
  } else {
    for (int j = 0; j < ellipsis_rank; ++j) out_labels.push_back(kNumLetters + j);
    for (int l = 0; l < kNumLetters; ++l) {
      if (occurrences[l] == 1) out_labels.push_back(l);
    }
  }
  std::vector<int> sum_labels;
  for (int l = 0; l < num_labels; ++l) {
    if (size[l] != -1 &&
        std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) {
      sum_labels.push_back(l);
    }
  }
  // Stride of each label in each operand: repeated labels (diagonals) add up,
  // broadcast size-1 dims contribute nothing.
  std::vector<std::vector<int64_t>> label_stride(
      terms.size(), std::vector<int64_t>(num_labels, 0));
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::vector<int64_t> st = ir::RowMajorStrides(in[i]->shape());
    for (size_t d = 0; d < op_labels[i].size(); ++d) {
      if (in[i]->dim(d) != 1) label_stride[i][op_labels[i][d]] += st[d];
    }
  }
  Shape out_dims, sum_dims;
  std::vector<std::vector<int64_t>> so(terms.size()), ss(terms.size());
  for (int l : out_labels) out_dims.push_back(size[l]);
  for (int l : sum_labels) sum_dims.push_back(size[l]);
  for (size_t i = 0; i < terms.size(); ++i) {
    for (int l : out_labels) so[i].push_back(label_stride[i][l]);
    for (int l : sum_labels) ss[i].push_back(label_stride[i][l]);
  }
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_dims));
  const DType dtype = in[0]->dtype();
  if (ir::IsFloat(dtype)) {
    std::vector<std::vector<double>> data;
    for (const Tensor* t : in) data.push_back(ReadAll<double>(*t));
    return std::vector<Tensor>{StoreAll(
        dtype, out_dims, EinsumCompute<double>(data, so, ss, out_dims, sum_dims))};
  }
  std::vector<std::vector<int64_t>> data;
  for (const Tensor* t : in) data.push_back(ReadAll<int64_t>(*t));
  return std::vector<Tensor>{StoreAll(
      dtype, out_dims, EinsumCompute<int64_t>(data, so, ss, out_dims, sum_dims))};
}

// ---- CumSum, TopK, Det.

absl::StatusOr<Outputs> CumSum(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, IntInput(ctx, 1, "axis"));
  if (axis_v.size() != 1) {
    return ctx.Error("axis must hold exactly one value, got ", axis_v.size());
  }
  KILN_ASSIGN_OR_RETURN(int64_t exclusive,
                        ctx.node.AttrOr<int64_t>("exclusive", 0));
  KILN_ASSIGN_OR_RETURN(int64_t reverse, ctx.node.AttrOr<int64_t>("reverse", 0));
  absl::StatusOr<int64_t> axis = NormalizeAxis(axis_v[0], x->rank());
  if (!axis.ok()) return ctx.Error(axis.status().message());
  const AxisSplit s = SplitAt(x->shape(), *axis);
  return DispatchDType(x->dtype(), [&](auto tag) -> absl::StatusOr<Outputs> {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T> && !std::is_same_v<T, int32_t> &&
                  !std::is_same_v<T, int64_t>) {
      return ctx.Error("input must be f16, f32, f64, i32 or i64, got ",
                       x->TypeString());
    } else {
      using Acc = std::conditional_t<kIsFloat<T>, double, uint64_t>;
      Tensor out(x->dtype(), x->shape());
      const T* in = x->data<T>();
      T* y = out.data<T>();
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const int64_t base = o * s.n * s.inner + i;
          Acc acc = 0;
          for (int64_t step = 0; step < s.n; ++step) {
            const int64_t j = reverse ? s.n - 1 - step : step;
            const int64_t at = base + j * s.inner;
            Acc v;
            if constexpr (kIsFloat<T>) {
              v = ToDouble(in[at]);
            } else {
              v = static_cast<uint64_t>(int64_t{in[at]});
            }
            if (!exclusive) acc += v;
            if constexpr (kIsFloat<T>) {
              y[at] = FromDouble<T>(acc);
            } else {
              y[at] = static_cast<T>(acc);
            }
            if (exclusive) acc += v;
          }
        }
      }
      return One(std::move(out));
    }
  });
}

absl::StatusOr<Outputs> TopK(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  int64_t k = 0;
  if (ctx.opset >= 10) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kv, IntInput(ctx, 1, "K"));
    if (kv.size() != 1) return ctx.Error("K must hold exactly one value");
    k = kv[0];
  } else {
    KILN_ASSIGN_OR_RETURN(k, ctx.node.Attr<int64_t>("k"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t largest, ctx.node.AttrOr<int64_t>("largest", 1));
  absl::StatusOr<int64_t> axis = NormalizeAxis(axis_attr, x->rank());
  if (!axis.ok()) return ctx.Error(axis.status().message());
  const AxisSplit s = SplitAt(x->shape(), *axis);
  if (k < 0 || k > s.n) {
    return ctx.Error("k = ", k, " is out of range for axis ", *axis,
                     " of size ", s.n);
  }
  Shape out_shape = x->shape();
  out_shape[*axis] = k;
  Tensor indices(DType::kI64, out_shape);
  int64_t* yi = indices.data<int64_t>();
  return DispatchDType(x->dtype(), [&](auto tag) -> absl::StatusOr<Outputs> {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return ctx.Error("bool input is not supported");
    } else {
      Tensor values(x->dtype(), out_shape);
      const T* in = x->data<T>();
      T* yv = values.data<T>();
      std::vector<KeyT<T>> keys(s.n);
      std::vector<int64_t> order(s.n);
      // Sorted best first; equal values keep the lower index first.
      auto before = [&](int64_t a, int64_t b) {
        if (largest ? Greater(keys[a], keys[b]) : Greater(keys[b], keys[a])) {
          return true;
        }
        if (Greater(keys[a], keys[b]) || Greater(keys[b], keys[a])) return false;
        return a < b;
      };
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const int64_t base = o * s.n * s.inner + i;
          for (int64_t j = 0; j < s.n; ++j) keys[j] = Key(in[base + j * s.inner]);
          std::iota(order.begin(), order.end(), 0);
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          const int64_t out_base = o * k * s.inner + i;
          for (int64_t j = 0; j < k; ++j) {
            yv[out_base + j * s.inner] = in[base + order[j] * s.inner];
            yi[out_base + j * s.inner] = order[j];
          }
        }
      }
      Outputs out;
      out.push_back(std::move(values));
      out.push_back(std::move(indices));
      return out;
    }
  });
}

absl::StatusOr<Outputs> Det(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  if (x->rank() < 2 || x->dim(x->rank() - 1) != x->dim(x->rank() - 2)) {
    return ctx.Error("X must be [..., M, M], got ", x->TypeString());
  }
  const int64_t m = x->dim(x->rank() - 1);
  const Shape out(x->shape().begin(), x->shape().end() - 2);
  const int64_t count = ir::NumElements(out);
  const std::vector<double> v = ReadDoubles(*x);
  std::vector<double> dets(count);
  std::vector<double> a(m * m);
  for (int64_t b = 0; b < count; ++b) {
    std::copy(v.begin() + b * m * m, v.begin() + (b + 1) * m * m, a.begin());
    double det = 1;
    for (int64_t col = 0; col < m && det != 0; ++col) {
      int64_t pivot = col;
      for (int64_t r = col + 1; r < m; ++r) {
        if (std::abs(a[r * m + col]) > std::abs(a[pivot * m + col])) pivot = r;
      }
      if (a[pivot * m + col] == 0) {
        det = 0;
        break;
      }
      if (pivot != col) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[col * m + j], a[pivot * m + j]);
        det = -det;
      }
      det *= a[col * m + col];
      for (int64_t r = col + 1; r < m; ++r) {
        const double f = a[r * m + col] / a[col * m + col];
        for (int64_t j = col; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
      }
    }
    dets[b] = det;
  }
  return Outputs{MakeTensor(x->dtype(), out, dets)};
}

// ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.

// loss[n, d...] = -logp[n, target[n, d...], d...] * weight[target], with
// ignored targets contributing 0 to the loss and to the mean's denominator.
absl::StatusOr<Tensor> NllLoss(const OpContext& ctx, const Shape& shape,
                               const std::vector<double>& logp,
                               const Tensor& target, const Tensor* weight,
                               DType out_dtype) {
  if (shape.size() < 2) {
    return ctx.Error("input must have rank >= 2 (N, C, ...), got ",
                     ir::ShapeToString(shape));
  }
  KILN_RETURN_IF_ERROR(RequireInteger(ctx, target, "target"));
  Shape want = shape;
  want.erase(want.begin() + 1);
  if (target.shape() != want) {
    return ctx.Error("target has shape ", ir::ShapeToString(target.shape()),
                     ", expected ", ir::ShapeToString(want));
  }
  const int64_t n = shape[0], c = shape[1];
  const int64_t inner = n == 0 ? 0 : ir::NumElements(want) / n;
  std::vector<double> w;
  if (weight != nullptr) {
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, *weight, "weight"));
    if (weight->rank() != 1 || weight->dim(0) != c) {
      return ctx.Error("weight has shape ",
                       ir::ShapeToString(weight->shape()), ", expected [", c,
                       "]");
    }
    w = ReadDoubles(*weight);
  }
  KILN_ASSIGN_OR_RETURN(std::string reduction,
                        ctx.node.AttrOr<std::string>("reduction", "mean"));
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return ctx.Error("unknown reduction '", reduction, "'");
  }
  const bool has_ignore = ctx.node.HasAttr("ignore_index");
  KILN_ASSIGN_OR_RETURN(int64_t ignore,
                        ctx.node.AttrOr<int64_t>("ignore_index", 0));

  std::vector<double> loss(target.num_elements());
  double loss_sum = 0, weight_sum = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t i = b * inner + j;
      const int64_t t = target.GetAsInt64(i);
      if (has_ignore && t == ignore) {
        loss[i] = 0;
        continue;
      }
      if (t < 0 || t >= c) {
        return ctx.Error("target value ", t, " at flat index ", i,
                         " is outside [0, ", c, ")");
      }
      const double wt = w.empty() ? 1.0 : w[t];
      loss[i] = -logp[(b * c + t) * inner + j] * wt;
      loss_sum += loss[i];
      weight_sum += wt;
    }
  }
  if (reduction == "none") return MakeTensor(out_dtype, target.shape(), loss);
  const double v = reduction == "sum" ? loss_sum : loss_sum / weight_sum;
  return MakeTensor(out_dtype, {}, {v});
}

absl::StatusOr<Outputs> NegativeLogLikelihoodLoss(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* target, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "input"));
  KILN_ASSIGN_OR_RETURN(
      Tensor loss,
      NllLoss(ctx, x->shape(), ReadDoubles(*x), *target,
              ctx.has_input(2) ? ctx.inputs[2] : nullptr,
              DeclaredDType(ctx, 0, x->dtype())));
  Outputs out;
  out.push_back(std::move(loss));
  return out;
}

absl::StatusOr<Outputs> SoftmaxCrossEntropyLoss(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* labels, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "scores"));
  if (x->rank() < 2) {
    return ctx.Error("scores must have rank >= 2 (N, C, ...), got ",
                     x->TypeString());
  }
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t inner = n * c == 0 ? 0 : x->num_elements() / (n * c);
  std::vector<double> logp = ReadDoubles(*x);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t j = 0; j < inner; ++j) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < c; ++k) {
        mx = std::max(mx, logp[(b * c + k) * inner + j]);
      }
      double sum = 0;
      for (int64_t k = 0; k < c; ++k) {
        sum += std::exp(logp[(b * c + k) * inner + j] - mx);
      }
      const double lse = mx + std::log(sum);
      for (int64_t k = 0; k < c; ++k) logp[(b * c + k) * inner + j] -= lse;
    }
  }
  KILN_ASSIGN_OR_RETURN(
      Tensor loss, NllLoss(ctx, x->shape(), logp, *labels,
                           ctx.has_input(2) ? ctx.inputs[2] : nullptr,
                           DeclaredDType(ctx, 0, x->dtype())));
  Outputs out;
  out.push_back(std::move(loss));
  if (ctx.num_outputs() > 1) {
    out.push_back(MakeTensor(DeclaredDType(ctx, 1, x->dtype()), x->shape(),
                             logp));
  }
  return out;
}

// ---- Signal processing: windows, MelWeightMatrix, DFT, STFT.

absl::StatusOr<DType> OutputDataType(const OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t code,
                        ctx.node.AttrOr<int64_t>("output_datatype", 1));
  const DType attr = DTypeFromOnnx(code).value_or(DType::kInvalid);
  if (attr == DType::kInvalid) {
    return ctx.Error("output_datatype ", code, " is not supported");
  }
  return DeclaredDType(ctx, 0, attr);
}

// Generalized cosine window sum_k a_k cos(2 pi k n / D), D = N if periodic
// else N - 1.
absl::StatusOr<Outputs> CosineWindow(OpContext& ctx,
                                     const std::vector<double>& a) {
  KILN_ASSIGN_OR_RETURN(int64_t size, ScalarInt(ctx, 0, "size"));
  if (size < 0 || size > kMaxOutputElements) {
    return ctx.Error("window size ", size, " is out of range");
  }
  KILN_ASSIGN_OR_RETURN(int64_t periodic, ctx.node.AttrOr<int64_t>("periodic", 1));
  KILN_ASSIGN_OR_RETURN(DType dtype, OutputDataType(ctx));
  const double denom = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(size);
  for (int64_t i = 0; i < size; ++i) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      v += a[k] * (denom == 0 ? 1.0 : std::cos(2 * kPi * k * i / denom));
    }
    w[i] = v;
  }
  return Outputs{MakeTensor(dtype, {size}, w)};
}

absl::StatusOr<Outputs> HannWindow(OpContext& ctx) {
  return CosineWindow(ctx, {0.5, -0.5});
}
absl::StatusOr<Outputs> HammingWindow(OpContext& ctx) {
  return CosineWindow(ctx, {25.0 / 46.0, -21.0 / 46.0});
}
absl::StatusOr<Outputs> BlackmanWindow(OpContext& ctx) {
  return CosineWindow(ctx, {0.42, -0.5, 0.08});
}

// Triangular mel filters over the dft_length / 2 + 1 spectrogram bins, with
// band edges at integer bins as ONNX's definition computes them.
absl::StatusOr<Outputs> MelWeightMatrix(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t num_mel, ScalarInt(ctx, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(int64_t dft_length, ScalarInt(ctx, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(int64_t sample_rate, ScalarInt(ctx, 2, "sample_rate"));
  KILN_ASSIGN_OR_RETURN(double lower, ScalarFloat(ctx, 3, "lower_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(double upper, ScalarFloat(ctx, 4, "upper_edge_hertz"));
  if (num_mel <= 0 || dft_length <= 0 || sample_rate <= 0 ||
      num_mel > kMaxOutputElements || dft_length > kMaxOutputElements) {
    return ctx.Error("num_mel_bins, dft_length and sample_rate must be positive");
  }
  if (!(lower >= 0 && upper > lower)) {
    return ctx.Error("need 0 <= lower_edge_hertz < upper_edge_hertz, got ",
                     lower, " and ", upper);
  }
  const int64_t num_bins = dft_length / 2 + 1;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, {num_bins, num_mel}));
  KILN_ASSIGN_OR_RETURN(DType dtype, OutputDataType(ctx));
  const double low_mel = 2595 * std::log10(1 + lower / 700);
  const double high_mel = 2595 * std::log10(1 + upper / 700);
  const double step = (high_mel - low_mel) / static_cast<double>(num_mel + 2);
  std::vector<int64_t> edges(num_mel + 2);
  for (int64_t i = 0; i < num_mel + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (i * step + low_mel) / 2595) - 1);
    edges[i] = static_cast<int64_t>(
        std::floor((dft_length + 1) * hz / static_cast<double>(sample_rate)));
    if (edges[i] < 0 || edges[i] >= num_bins) {
      return ctx.Error("mel band edge ", i, " falls on bin ", edges[i],
                       ", outside the ", num_bins, " spectrogram bins");
    }
  }
  std::vector<double> w(num_bins * num_mel, 0.0);
  for (int64_t i = 0; i < num_mel; ++i) {
    const int64_t lo = edges[i], mid = edges[i + 1], hi = edges[i + 2];
    if (mid == lo) {
      w[mid * num_mel + i] = 1;
    } else {
      for (int64_t j = lo; j <= mid; ++j) {
        w[j * num_mel + i] = static_cast<double>(j - lo) / (mid - lo);
      }
    }
    for (int64_t j = mid; j < hi; ++j) {
      w[j * num_mel + i] = static_cast<double>(hi - j) / (hi - mid);
    }
  }
  return Outputs{MakeTensor(dtype, {num_bins, num_mel}, w)};
}

// X[k] = sum_t x[t] e^(-+2 pi i k t / n) over the first n (zero-padded)
// samples of one line; the inverse divides by n.
void DftLine(const double* re, const double* im, int64_t stride,
             int64_t n_in, int64_t n, int64_t n_out, bool inverse,
             double* out_re, double* out_im, int64_t out_stride) {
  const double sign = inverse ? 1.0 : -1.0;
  const int64_t used = std::min(n_in, n);
  for (int64_t k = 0; k < n_out; ++k) {
    double sr = 0, si = 0;
    for (int64_t t = 0; t < used; ++t) {
      const double ang = sign * 2 * kPi * static_cast<double>((k * t) % n) / n;
      const double c = std::cos(ang), s = std::sin(ang);
      const double xr = re[t * stride], xi = im[t * stride];
      sr += xr * c - xi * s;
      si += xr * s + xi * c;
    }
    if (inverse) {
      sr /= n;
      si /= n;
    }
    out_re[k * out_stride] = sr;
    out_im[k * out_stride] = si;
  }
}

absl::StatusOr<Outputs> Dft(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "input"));
  const int64_t r = x->rank();
  if (r < 2 || (x->dim(r - 1) != 1 && x->dim(r - 1) != 2)) {
    return ctx.Error("input must be [..., 1] (real) or [..., 2] (complex), got ",
                     x->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, ctx.node.AttrOr<int64_t>("axis", 1));
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) {
    return ctx.Error("axis must be a signal dimension (not the last), got ",
                     axis);
  }
  KILN_ASSIGN_OR_RETURN(int64_t inverse, ctx.node.AttrOr<int64_t>("inverse", 0));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, ctx.node.AttrOr<int64_t>("onesided", 0));
  const int64_t n_in = x->dim(axis);
  int64_t n = n_in;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(n, ScalarInt(ctx, 1, "dft_length"));
    if (n <= 0) return ctx.Error("dft_length must be positive, got ", n);
  }
  const int64_t n_out = onesided ? n / 2 + 1 : n;
  Shape out = x->shape();
  out[axis] = n_out;
  out[r - 1] = 2;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x->dim(d);
  for (int64_t d = axis + 1; d < r - 1; ++d) inner *= x->dim(d);
  if (outer * inner > 0 && n_out * std::min(n, n_in) > kMaxOutputElements / (outer * inner)) {
    return ctx.Error("DFT too large for the reference interpreter");
  }
  const int64_t comps = x->dim(r - 1);
  const std::vector<double> v = ReadDoubles(*x);
  std::vector<double> re(outer * n_in * inner), im(re.size(), 0.0);
  for (size_t i = 0; i < re.size(); ++i) {
    re[i] = v[i * comps];
    if (comps == 2) im[i] = v[i * comps + 1];
  }
  std::vector<double> ore(outer * n_out * inner), oim(ore.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      DftLine(&re[o * n_in * inner + j], &im[o * n_in * inner + j], inner, n_in,
              n, n_out, inverse != 0, &ore[o * n_out * inner + j],
              &oim[o * n_out * inner + j], inner);
    }
  }
  std::vector<double> y(ore.size() * 2);
  for (size_t i = 0; i < ore.size(); ++i) {
    y[2 * i] = ore[i];
    y[2 * i + 1] = oim[i];
  }
  return Outputs{MakeTensor(x->dtype(), out, y)};
}

absl::StatusOr<Outputs> Stft(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "signal"));
  if (x->rank() != 3 || (x->dim(2) != 1 && x->dim(2) != 2)) {
    return ctx.Error("signal must be [batch, length, 1 or 2], got ",
                     x->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(int64_t step, ScalarInt(ctx, 1, "frame_step"));
  if (step <= 0) return ctx.Error("frame_step must be positive, got ", step);
  std::vector<double> window;
  int64_t length = -1;
  if (ctx.has_input(2)) {
    const Tensor& w = *ctx.inputs[2];
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, w, "window"));
    if (w.rank() != 1) return ctx.Error("window must be 1-D, got ", w.TypeString());
    window = ReadDoubles(w);
    length = w.dim(0);
  }
  if (ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(int64_t fl, ScalarInt(ctx, 3, "frame_length"));
    if (length >= 0 && fl != length) {
      return ctx.Error("frame_length ", fl, " differs from the window length ",
                       length);
    }
    length = fl;
  }
  if (length < 0) return ctx.Error("needs a window or a frame_length");
  if (length <= 0 || length > x->dim(1)) {
    return ctx.Error("frame length ", length, " must be in [1, ", x->dim(1), "]");
  }
  if (window.empty()) window.assign(length, 1.0);
  KILN_ASSIGN_OR_RETURN(int64_t onesided, ctx.node.AttrOr<int64_t>("onesided", 1));
  const int64_t batch = x->dim(0), sig_len = x->dim(1), comps = x->dim(2);
  const int64_t frames = (sig_len - length) / step + 1;
  const int64_t bins = onesided ? length / 2 + 1 : length;
  const Shape out = {batch, frames, bins, 2};
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  if (batch * frames > 0 && bins * length > kMaxOutputElements / (batch * frames)) {
    return ctx.Error("STFT too large for the reference interpreter");
  }
  const std::vector<double> v = ReadDoubles(*x);
  std::vector<double> re(length), im(length), ore(bins), oim(bins);
  std::vector<double> y(ir::NumElements(out));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < length; ++t) {
        const int64_t i = (b * sig_len + f * step + t) * comps;
        re[t] = v[i] * window[t];
        im[t] = comps == 2 ? v[i + 1] * window[t] : 0.0;
      }
      DftLine(re.data(), im.data(), 1, length, length, bins, false, ore.data(),
              oim.data(), 1);
      for (int64_t k = 0; k < bins; ++k) {
        y[((b * frames + f) * bins + k) * 2] = ore[k];
        y[((b * frames + f) * bins + k) * 2 + 1] = oim[k];
      }
    }
  }
  return Outputs{MakeTensor(x->dtype(), out, y)};
}

}  // namespace

void RegisterMathOps(OpRegistry* r) {
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
  r->Register("Expand", Expand);

  r->Register("Softmax", MakeSoftmax(SoftmaxKind::kSoftmax));
  r->Register("LogSoftmax", MakeSoftmax(SoftmaxKind::kLogSoftmax));
  r->Register("Hardmax", MakeSoftmax(SoftmaxKind::kHardmax));

  r->Register("Gemm", Gemm);
  r->Register("MatMul", MatMul);
  r->Register("MatMulInteger", MatMulInteger);
  r->Register("QLinearMatMul", QLinearMatMul);
  r->Register("Einsum", Einsum);

  r->Register("CumSum", CumSum);
  r->Register("TopK", TopK);
  r->Register("Det", Det);

  r->Register("NegativeLogLikelihoodLoss", NegativeLogLikelihoodLoss);
  r->Register("SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLoss);

  r->Register("HannWindow", HannWindow);
  r->Register("HammingWindow", HammingWindow);
  r->Register("BlackmanWindow", BlackmanWindow);
  r->Register("MelWeightMatrix", MelWeightMatrix);
  r->Register("DFT", Dft);
  r->Register("STFT", Stft);
}

}  // namespace kiln::interp
