// File: interp/kernel_util.h — helpers shared by the reference kernels of
// several op families: dtype dispatch and element conversion, reading inputs
// and attributes, checking output shapes, and shapes seen around axes. Kept
// deliberately simple: the reference favours clarity.
#ifndef KILN_INTERP_KERNEL_UTIL_H_
#define KILN_INTERP_KERNEL_UTIL_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"

namespace kiln::interp {

// Largest output (elements) or loop trip count the reference agrees to
// materialize or run.
constexpr int64_t kMaxOutputElements = int64_t{1} << 31;
// Results of shape and data-movement ops larger than this are refused: their
// shapes come from model data (CheckResultShape).
constexpr int64_t kMaxResultElements = int64_t{1} << 34;

// ---- Dtype dispatch and element conversion.

// Maps a possibly negative axis into [0, rank); InvalidArgument otherwise.
inline absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// Maps a flat index of a broadcast output to the flat index of one input.
//   BroadcastMap m(a.shape(), out_shape);
//   for (i...) out[i] = f(a[m(i)], b[mb(i)]);
class BroadcastMap {
 public:
  BroadcastMap(const ir::Shape& in, const ir::Shape& out)
      : out_dims_(out), in_strides_(out.size(), 0) {
    std::vector<int64_t> strides = ir::RowMajorStrides(in);
    const size_t offset = out.size() - in.size();
    for (size_t i = 0; i < in.size(); ++i) {
      in_strides_[offset + i] = in[i] == 1 ? 0 : strides[i];
    }
  }
  int64_t operator()(int64_t out_index) const {
    int64_t in_index = 0;
    for (int i = static_cast<int>(out_dims_.size()) - 1; i >= 0; --i) {
      const int64_t d = out_dims_[i];
      in_index += (out_index % d) * in_strides_[i];
      out_index /= d;
    }
    return in_index;
  }

 private:
  ir::Shape out_dims_;
  std::vector<int64_t> in_strides_;
};

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with T the storage type of `dtype` and returns what
// it returns. f16 and bf16 dispatch as ir::Float16 / ir::BFloat16: kernels
// that compute convert with ir::ToFloat / ir::FromFloat<T>.
template <typename F>
auto DispatchDType(ir::DType dtype, F&& f) {
  switch (dtype) {
    case ir::DType::kF32: return f(TypeTag<float>{});
    case ir::DType::kF16: return f(TypeTag<ir::Float16>{});
    case ir::DType::kBF16: return f(TypeTag<ir::BFloat16>{});
    case ir::DType::kF64: return f(TypeTag<double>{});
    case ir::DType::kI64: return f(TypeTag<int64_t>{});
    case ir::DType::kI32: return f(TypeTag<int32_t>{});
    case ir::DType::kI8: return f(TypeTag<int8_t>{});
    case ir::DType::kU8: return f(TypeTag<uint8_t>{});
    case ir::DType::kBool: return f(TypeTag<bool>{});
    case ir::DType::kInvalid: break;
  }
  return f(TypeTag<float>{});
}

template <typename T>
constexpr bool kIsHalf = ir::kIsLowPrecision<T>;  // f16 or bf16
template <typename T>
constexpr bool kIsFloat = kIsHalf<T> || std::is_floating_point_v<T>;
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
double ToDouble(T v) {
  if constexpr (kIsHalf<T>) {
    return ir::ToFloat(v);
  } else {
    return static_cast<double>(v);
  }
}

// Floats round; integers truncate toward zero as numpy's astype does, with
// NaN mapped to 0 and out-of-range values saturated (never UB); bool is
// v != 0.
template <typename T>
T FromDouble(double v) {
  if constexpr (kIsHalf<T>) {
    return ir::FromFloat<T>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
      return std::numeric_limits<T>::lowest();
    }
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(v);
  }
}

// Comparison key: f16 compares as float, everything else as itself.
template <typename T>
using KeyT = std::conditional_t<kIsHalf<T>, float, T>;
template <typename T>
KeyT<T> Key(T v) {
  if constexpr (kIsHalf<T>) {
    return ir::ToFloat(v);
  } else {
    return v;
  }
}
template <typename K>
bool IsNan(K v) {
  if constexpr (std::is_floating_point_v<K>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Kernels that compute in an accumulator type (double for floats, int64 for
// integers) load and store through these: plain casts, f16 via float.
template <typename Acc, typename T>
Acc LoadAs(T v) {
  if constexpr (kIsHalf<T>) {
    return static_cast<Acc>(ir::ToFloat(v));
  } else {
    return static_cast<Acc>(v);
  }
}

template <typename T, typename Acc>
T StoreAs(Acc v) {
  if constexpr (kIsHalf<T>) {
    return ir::FromFloat<T>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

template <typename Acc>
std::vector<Acc> ReadAll(const Tensor& t) {
  std::vector<Acc> out(t.num_elements());
  DispatchDType(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = LoadAs<Acc>(p[i]);
  });
  return out;
}

template <typename Acc>
Tensor StoreAll(ir::DType dtype, ir::Shape shape,
                const std::vector<Acc>& values) {
  Tensor t(dtype, std::move(shape));
  DispatchDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = StoreAs<T>(values[i]);
  });
  return t;
}

// Every element of `t` as a double.
std::vector<double> ReadDoubles(const Tensor& t);

// A tensor of `dtype` holding `v` converted with FromDouble.
Tensor MakeTensor(ir::DType dtype, ir::Shape shape, const std::vector<double>& v);

// kiln's dtype for an ONNX TensorProto.DataType number.
std::optional<ir::DType> DTypeFromOnnx(int64_t onnx_type);

// ---- Inputs, attributes and outputs.

// An Unimplemented error prefixed with the node's description.
template <typename... Args>
absl::Status Unimplemented(const OpContext& ctx, const Args&... args) {
  return absl::UnimplementedError(
      absl::StrCat(ctx.node.Describe(), ": ", kiln::MessageArg(args)...));
}

// The single-tensor result of a kernel.
inline std::vector<Tensor> One(Tensor t) {
  std::vector<Tensor> out;
  out.push_back(std::move(t));
  return out;
}

// The dtype the node declares for output i; `fallback` when it is unknown.
ir::DType DeclaredDType(const OpContext& ctx, int i, ir::DType fallback);

absl::Status RequireFloat(const OpContext& ctx, const Tensor& t,
                          absl::string_view what);
absl::Status RequireInteger(const OpContext& ctx, const Tensor& t,
                            absl::string_view what);

// Input i as a single integer (a scalar or a one-element tensor).
absl::StatusOr<int64_t> ScalarInt(const OpContext& ctx, int i,
                                  absl::string_view what);
// Input i as a single float (a scalar or a one-element tensor).
absl::StatusOr<double> ScalarFloat(const OpContext& ctx, int i,
                                   absl::string_view what);

// A shape-like or index input as int64 values; InvalidArgument unless it has
// an integer dtype.
absl::StatusOr<std::vector<int64_t>> IntValues(const OpContext& ctx, int i,
                                               absl::string_view what);

// Reads an integer tensor input holding axes / k / axis values.
absl::StatusOr<std::vector<int64_t>> IntInput(const OpContext& ctx, int i,
                                              const char* what);

// Integer-list attribute `name`, `n` copies of `fallback` when absent;
// InvalidArgument unless it has n values.
absl::StatusOr<std::vector<int64_t>> IntsOr(const OpContext& ctx,
                                            const char* name, size_t n,
                                            int64_t fallback);

// OK when a result of `elements` elements (of `shape`, if known) is within
// the run's RunOptions::max_result_elements; ResourceExhausted otherwise.
absl::Status CheckRunLimit(const OpContext& ctx, int64_t elements, const ir::Shape& shape);

// OK when a computed output shape has no negative dims, at most
// kMaxOutputElements elements and is within the run's limit (CheckRunLimit).
absl::Status CheckOutputSize(const OpContext& ctx, const ir::Shape& shape);

// OK when `shape` is a valid result shape: no negative dims, at most
// kMaxResultElements elements (no overflow while multiplying) and within the
// run's limit (CheckRunLimit).
absl::Status CheckResultShape(const OpContext& ctx, const ir::Shape& shape);

// ---- Shapes seen around axes.

// Product of dims [begin, end) of `s` (dims past its rank count as 1).
int64_t Product(const ir::Shape& s, size_t begin, size_t end);

// A shape seen as [outer, n, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};
AxisSplit SplitAt(const ir::Shape& shape, int64_t axis);

// Flat offsets (row-major in `shape`) of every point of the sub-grid spanned
// by the dims where `select[d]` is true, in odometer order.
std::vector<int64_t> GridOffsets(const ir::Shape& shape,
                                 const std::vector<bool>& select);

// Input element (kept[o] + reduced[r]) contributes to output element o.
struct ReductionPlan {
  ir::Shape out_shape;
  std::vector<int64_t> kept;
  std::vector<int64_t> reduced;
};
ReductionPlan PlanReduction(const ir::Shape& shape,
                            const std::vector<bool>& mask, bool keepdims);

// Axes given as a list (attribute or tensor) -> a per-dim mask. Negative
// axes count from the end; out-of-range or repeated axes are errors.
absl::StatusOr<std::vector<bool>> AxesMask(const OpContext& ctx,
                                           absl::Span<const int64_t> axes,
                                           int64_t rank);

// Walks the multi-indices of a shape in row-major order.
class MultiIndex {
 public:
  explicit MultiIndex(const ir::Shape& shape)
      : shape_(shape), index_(shape.size(), 0) {}
  const std::vector<int64_t>& index() const { return index_; }
  void Next() {
    for (int i = static_cast<int>(shape_.size()) - 1; i >= 0; --i) {
      if (++index_[i] < shape_[i]) return;
      index_[i] = 0;
    }
  }

 private:
  const ir::Shape& shape_;
  std::vector<int64_t> index_;
};

// A tensor of `shape` whose element at (flat i, multi-index idx) is
// in[src(i, idx)], or `fill` (element 0; zero when null) when src returns a
// negative value. src must return indices valid for `in`.
template <typename SrcFn>
Tensor Remap(const Tensor& in, const ir::Shape& shape, SrcFn src,
             const Tensor* fill = nullptr) {
  return DispatchDType(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor out(in.dtype(), shape);
    const T* x = in.data<T>();
    T* y = out.data<T>();
    const T f = fill != nullptr ? fill->data<T>()[0] : T{};
    MultiIndex mi(out.shape());
    for (int64_t i = 0; i < out.num_elements(); ++i, mi.Next()) {
      const int64_t s = src(i, mi.index());
      y[i] = s < 0 ? f : x[s];
    }
    return out;
  });
}

}  // namespace kiln::interp

#endif  // KILN_INTERP_KERNEL_UTIL_H_
