// File: interp/elementwise.h — building blocks of the elementwise reference
// kernels (math, logical, tensor and nn families): which element types an op
// accepts, element conversions (f16 computed as float, Cast semantics), and
// unary / broadcasting binary loops.
//
//   return Unary<kFloat>(ctx, [](auto x) { return x < 0 ? -x : x; });
#ifndef KILN_INTERP_ELEMENTWISE_H_
#define KILN_INTERP_ELEMENTWISE_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {

// ---- Which element types an op accepts.

enum TypeClass : unsigned { kFloat = 1, kSigned = 2, kUnsigned = 4, kBool = 8 };
constexpr unsigned kInt = kSigned | kUnsigned;
constexpr unsigned kNumeric = kFloat | kInt;
constexpr unsigned kAny = kNumeric | kBool;

template <typename T>
constexpr unsigned ClassOf() {
  if constexpr (std::is_same_v<T, bool>) {
    return kBool;
  } else if constexpr (ir::kIsLowPrecision<T> ||
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

inline absl::Status WrongDType(const OpContext& ctx, ir::DType dtype) {
  return ctx.Error("does not accept ", ir::DTypeName(dtype), " inputs");
}

// ---- Element conversions. f16 and bf16 are loaded as float, computed,
// stored back.

template <typename T>
using Compute = std::conditional_t<ir::kIsLowPrecision<T>, float, T>;

template <typename T>
Compute<T> Load(T v) {
  if constexpr (ir::kIsLowPrecision<T>) {
    return ir::ToFloat(v);
  } else {
    return v;
  }
}

template <typename T>
T Store(Compute<T> v) {
  if constexpr (ir::kIsLowPrecision<T>) {
    return ir::FromFloat<T>(v);
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
  if constexpr (ir::kIsLowPrecision<From>) {
    return Convert<To>(ir::ToFloat(v));
  } else if constexpr (ir::kIsLowPrecision<To>) {
    return ir::FromFloat<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> &&
                       std::is_integral_v<To>) {
    return FloatToInt<To>(static_cast<double>(v));
  } else {
    return static_cast<To>(v);
  }
}

// ---- Loops.

// out[i] = f(a[..], b[..]) over the broadcast output shape (storage types).
template <typename A, typename B, typename R, typename F>
void BroadcastLoop(const Tensor& a, const Tensor& b, Tensor* out, F f) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  R* po = out->data<R>();
  const int64_t n = out->num_elements();
  const ir::Shape& shape = out->shape();
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

inline absl::StatusOr<ir::Shape> BroadcastShape(const OpContext& ctx, const ir::Shape& a,
                                     const ir::Shape& b) {
  absl::StatusOr<ir::Shape> shape = ir::BroadcastShapes(a, b);
  if (!shape.ok()) return ctx.Error(shape.status().message());
  return shape;
}

inline absl::Status CheckSameDType(const OpContext& ctx, const Tensor& a,
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
absl::StatusOr<std::vector<Tensor>> Unary(OpContext& ctx, F f) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(Tensor out, MapTensor<kAllowed>(ctx, *x, f));
  return std::vector<Tensor>{std::move(out)};
}

// f(a, b) on Compute<T> of two same-dtype tensors with numpy broadcasting.
// The output has the inputs' dtype, or bool when kBoolOut.
template <unsigned kAllowed, bool kBoolOut, typename F>
absl::StatusOr<Tensor> BinaryTensor(const OpContext& ctx, const Tensor& a,
                                    const Tensor& b, F f) {
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, a, b));
  KILN_ASSIGN_OR_RETURN(ir::Shape shape, BroadcastShape(ctx, a.shape(), b.shape()));
  return DispatchDType(a.dtype(), [&](auto tag) -> absl::StatusOr<Tensor> {
    using T = typename decltype(tag)::type;
    if constexpr (!kAccepts<kAllowed, T>) {
      return WrongDType(ctx, a.dtype());
    } else if constexpr (kBoolOut) {
      Tensor out(ir::DType::kBool, shape);
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
absl::StatusOr<std::vector<Tensor>> Binary(OpContext& ctx, F f) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(Tensor out,
                        (BinaryTensor<kAllowed, kBoolOut>(ctx, *a, *b, f)));
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace kiln::interp

#endif  // KILN_INTERP_ELEMENTWISE_H_
