// Reference kernels for the reduction family (ONNX opsets 7-18): Reduce*,
// ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, the normalizations, CumSum and
// TopK (LRN lives in ops_nn.cc). Floating-point math is done in double.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
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
using Outputs = std::vector<Tensor>;

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16>;
template <typename T>
constexpr bool kIsFloat = kIsHalf<T> || std::is_floating_point_v<T>;
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
double ToDouble(T v) {
  if constexpr (kIsHalf<T>) {
    return ir::HalfToFloat(v);
  } else {
    return static_cast<double>(v);
  }
}

// Floats round; integers truncate toward zero as numpy's astype does, with
// NaN mapped to 0 and out-of-range values saturated (never UB).
template <typename T>
T FromDouble(double v) {
  if constexpr (kIsHalf<T>) {
    return ir::FloatToHalf(static_cast<float>(v));
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
    return ir::HalfToFloat(v);
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

Outputs One(Tensor t) {
  Outputs out;
  out.push_back(std::move(t));
  return out;
}

// A shape seen as [outer, n, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1;
  int64_t n = 1;
  int64_t inner = 1;
};
AxisSplit SplitAt(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < axis; ++i) s.outer *= shape[i];
  s.n = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

// Flat offsets (row-major in `shape`) of every point of the sub-grid spanned
// by the dims where `select[d]` is true, in odometer order.
std::vector<int64_t> GridOffsets(const Shape& shape,
                                 const std::vector<bool>& select) {
  const std::vector<int64_t> strides = ir::RowMajorStrides(shape);
  std::vector<int64_t> offsets = {0};
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!select[d]) continue;
    std::vector<int64_t> next;
    next.reserve(offsets.size() * shape[d]);
    for (int64_t base : offsets) {
      for (int64_t i = 0; i < shape[d]; ++i) next.push_back(base + i * strides[d]);
    }
    offsets = std::move(next);
  }
  return offsets;
}

// Input element (kept[o] + reduced[r]) contributes to output element o.
struct ReductionPlan {
  Shape out_shape;
  std::vector<int64_t> kept;
  std::vector<int64_t> reduced;
};
ReductionPlan PlanReduction(const Shape& shape, const std::vector<bool>& mask,
                            bool keepdims) {
  ReductionPlan plan;
  std::vector<bool> kept_mask(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    kept_mask[d] = !mask[d];
    if (!mask[d]) {
      plan.out_shape.push_back(shape[d]);
    } else if (keepdims) {
      plan.out_shape.push_back(1);
    }
  }
  plan.kept = GridOffsets(shape, kept_mask);
  plan.reduced = GridOffsets(shape, mask);
  return plan;
}

// Axes given as a list (attribute or tensor) -> a per-dim mask. Negative
// axes count from the end; out-of-range or repeated axes are errors.
absl::StatusOr<std::vector<bool>> AxesMask(const OpContext& ctx,
                                           absl::Span<const int64_t> axes,
                                           int64_t rank) {
  std::vector<bool> mask(rank, false);
  for (int64_t a : axes) {
    absl::StatusOr<int64_t> axis = NormalizeAxis(a, rank);
    if (!axis.ok()) return ctx.Error(axis.status().message());
    if (mask[*axis]) return ctx.Error("axis ", a, " is repeated in axes");
    mask[*axis] = true;
  }
  return mask;
}

// Reads an integer tensor input holding axes / k / axis values.
absl::StatusOr<std::vector<int64_t>> IntInput(const OpContext& ctx, int i,
                                              const char* what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (t->dtype() != DType::kI64 && t->dtype() != DType::kI32) {
    return ctx.Error(what, " must be an int64 tensor, got ", t->TypeString());
  }
  if (t->rank() > 1) {
    return ctx.Error(what, " must be a scalar or 1-D tensor, got ",
                     t->TypeString());
  }
  return t->ToInt64Vector();
}

// Which dims a Reduce* node reduces, or `identity` when it is a no-op.
struct ReduceAxes {
  bool identity = false;
  std::vector<bool> mask;
};
// `input_since`: the opset from which the op takes axes as input 1 (and has
// noop_with_empty_axes); before it, axes is an attribute.
absl::StatusOr<ReduceAxes> ResolveReduceAxes(const OpContext& ctx,
                                             int64_t rank,
                                             int64_t input_since) {
  std::vector<int64_t> axes;
  bool noop_with_empty_axes = false;
  if (ctx.opset >= input_since) {
    if (ctx.node.HasAttr("axes")) {
      return ctx.Error("from opset ", input_since,
                       " axes is an input, not an attribute (model opset ",
                       ctx.opset, ")");
    }
    if (ctx.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(axes, IntInput(ctx, 1, "axes"));
    }
    KILN_ASSIGN_OR_RETURN(int64_t noop,
                          ctx.node.AttrOr<int64_t>("noop_with_empty_axes", 0));
    noop_with_empty_axes = noop != 0;
  } else {
    if (ctx.has_input(1)) {
      return ctx.Error("before opset ", input_since,
                       " axes is an attribute, not an input (model opset ",
                       ctx.opset, ")");
    }
    KILN_ASSIGN_OR_RETURN(axes, ctx.node.AttrOr<std::vector<int64_t>>(
                                    "axes", std::vector<int64_t>{}));
  }
  ReduceAxes result;
  if (axes.empty()) {
    result.identity = noop_with_empty_axes;
    result.mask.assign(rank, true);
    return result;
  }
  KILN_ASSIGN_OR_RETURN(result.mask, AxesMask(ctx, axes, rank));
  return result;
}

enum class ReduceKind {
  kSum,
  kMean,
  kMax,
  kMin,
  kProd,
  kL1,
  kL2,
  kSumSquare,
  kLogSum,
  kLogSumExp
};

// Reduces x[offs[*]] in double. An empty set gives the identity of the
// reduction (ONNX's test_reduce_*_empty_set): 0 for sums and norms, 1 for
// the product, -inf for Max / LogSum / LogSumExp, +inf for Min; Mean is NaN.
template <typename T>
double ReduceInDouble(ReduceKind kind, const T* x,
                      absl::Span<const int64_t> offs) {
  double acc = 0;
  switch (kind) {
    case ReduceKind::kSum:
    case ReduceKind::kMean:
    case ReduceKind::kLogSum:
      for (int64_t o : offs) acc += ToDouble(x[o]);
      if (kind == ReduceKind::kMean) return acc / static_cast<double>(offs.size());
      if (kind == ReduceKind::kLogSum) return std::log(acc);
      return acc;
    case ReduceKind::kMax:
      acc = -std::numeric_limits<double>::infinity();
      for (int64_t o : offs) {
        const double v = ToDouble(x[o]);
        if (std::isnan(v)) return v;
        acc = std::max(acc, v);
      }
      return acc;
    case ReduceKind::kMin:
      acc = std::numeric_limits<double>::infinity();
      for (int64_t o : offs) {
        const double v = ToDouble(x[o]);
        if (std::isnan(v)) return v;
        acc = std::min(acc, v);
      }
      return acc;
    case ReduceKind::kProd:
      acc = 1;
      for (int64_t o : offs) acc *= ToDouble(x[o]);
      return acc;
    case ReduceKind::kL1:
      for (int64_t o : offs) acc += std::fabs(ToDouble(x[o]));
      return acc;
    case ReduceKind::kL2:
    case ReduceKind::kSumSquare:
      for (int64_t o : offs) {
        const double v = ToDouble(x[o]);
        acc += v * v;
      }
      return kind == ReduceKind::kL2 ? std::sqrt(acc) : acc;
    case ReduceKind::kLogSumExp: {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t o : offs) m = std::max(m, ToDouble(x[o]));
      if (std::isinf(m)) return m;  // empty, all -inf, or some +inf
      for (int64_t o : offs) acc += std::exp(ToDouble(x[o]) - m);
      return m + std::log(acc);
    }
  }
  return acc;
}

// Integer reductions stay exact: sums and products wrap around like the
// fixed-width arithmetic of numpy / ONNX Runtime, Mean truncates.
template <typename T>
T ReduceInteger(ReduceKind kind, const T* x, absl::Span<const int64_t> offs) {
  uint64_t acc = 0;  // unsigned: wrap-around is defined
  switch (kind) {
    case ReduceKind::kSum:
    case ReduceKind::kMean:
      for (int64_t o : offs) acc += static_cast<uint64_t>(int64_t{x[o]});
      if (kind == ReduceKind::kMean) {
        if (offs.empty()) return T{0};
        return static_cast<T>(static_cast<int64_t>(acc) /
                              static_cast<int64_t>(offs.size()));
      }
      return static_cast<T>(acc);
    case ReduceKind::kMax: {
      T m = std::numeric_limits<T>::lowest();
      for (int64_t o : offs) m = std::max(m, x[o]);
      return m;
    }
    case ReduceKind::kMin: {
      T m = std::numeric_limits<T>::max();
      for (int64_t o : offs) m = std::min(m, x[o]);
      return m;
    }
    case ReduceKind::kProd:
      acc = 1;
      for (int64_t o : offs) acc *= static_cast<uint64_t>(int64_t{x[o]});
      return static_cast<T>(acc);
    case ReduceKind::kL1:
      for (int64_t o : offs) {
        const int64_t v = x[o];
        acc += static_cast<uint64_t>(v < 0 ? -static_cast<uint64_t>(v)
                                           : static_cast<uint64_t>(v));
      }
      return static_cast<T>(acc);
    case ReduceKind::kSumSquare:
      for (int64_t o : offs) {
        const uint64_t v = static_cast<uint64_t>(int64_t{x[o]});
        acc += v * v;
      }
      return static_cast<T>(acc);
    case ReduceKind::kL2:
    case ReduceKind::kLogSum:
    case ReduceKind::kLogSumExp:
      return FromDouble<T>(ReduceInDouble(kind, x, offs));
  }
  return T{0};
}

OpKernel MakeReduce(ReduceKind kind, int64_t axes_input_since) {
  return [kind, axes_input_since](OpContext& ctx) -> absl::StatusOr<Outputs> {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    KILN_ASSIGN_OR_RETURN(ReduceAxes axes,
                          ResolveReduceAxes(ctx, x->rank(), axes_input_since));
    if (axes.identity) return One(*x);
    KILN_ASSIGN_OR_RETURN(int64_t keepdims,
                          ctx.node.AttrOr<int64_t>("keepdims", 1));
    const ReductionPlan plan = PlanReduction(x->shape(), axes.mask, keepdims);
    return DispatchDType(x->dtype(), [&](auto tag) -> absl::StatusOr<Outputs> {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return ctx.Error("bool input is not supported");
      } else {
        Tensor out(x->dtype(), plan.out_shape);
        const T* in = x->data<T>();
        T* y = out.data<T>();
        for (size_t o = 0; o < plan.kept.size(); ++o) {
          if constexpr (kIsInt<T>) {
            y[o] = ReduceInteger(kind, in + plan.kept[o], plan.reduced);
          } else {
            y[o] = FromDouble<T>(
                ReduceInDouble(kind, in + plan.kept[o], plan.reduced));
          }
        }
        return One(std::move(out));
      }
    });
  };
}

// NaN ranks above every number (numpy's argmax/sort convention).
template <typename K>
bool Greater(K a, K b) {
  if (IsNan(a)) return !IsNan(b);
  if (IsNan(b)) return false;
  return a > b;
}

OpKernel MakeArgReduce(bool is_max) {
  return [is_max](OpContext& ctx) -> absl::StatusOr<Outputs> {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
    KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.AttrOr<int64_t>("axis", 0));
    KILN_ASSIGN_OR_RETURN(int64_t keepdims,
                          ctx.node.AttrOr<int64_t>("keepdims", 1));
    KILN_ASSIGN_OR_RETURN(int64_t last,
                          ctx.node.AttrOr<int64_t>("select_last_index", 0));
    absl::StatusOr<int64_t> axis = NormalizeAxis(axis_attr, x->rank());
    if (!axis.ok()) return ctx.Error(axis.status().message());
    const AxisSplit s = SplitAt(x->shape(), *axis);
    if (s.n == 0) return ctx.Error("cannot take the arg-extremum of an empty axis");
    Shape out_shape = x->shape();
    if (keepdims) {
      out_shape[*axis] = 1;
    } else {
      out_shape.erase(out_shape.begin() + *axis);
    }
    Tensor out(DType::kI64, out_shape);
    int64_t* y = out.data<int64_t>();
    return DispatchDType(x->dtype(), [&](auto tag) -> absl::StatusOr<Outputs> {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return ctx.Error("bool input is not supported");
      } else {
        const T* in = x->data<T>();
        for (int64_t o = 0; o < s.outer; ++o) {
          for (int64_t i = 0; i < s.inner; ++i) {
            const T* p = in + o * s.n * s.inner + i;
            int64_t best = 0;
            KeyT<T> best_key = Key(p[0]);
            for (int64_t j = 1; j < s.n; ++j) {
              const KeyT<T> k = Key(p[j * s.inner]);
              // NaN wins (numpy's argmax/argmin); the first one is kept.
              const bool better =
                  !IsNan(best_key) &&
                  (IsNan(k) || (is_max ? k > best_key : k < best_key));
              if (better || (last && k == best_key)) {
                best = j;
                best_key = k;
              }
            }
            y[o * s.inner + i] = best;
          }
        }
        return One(std::move(out));
      }
    });
  };
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

// Copies a float tensor into doubles (the reference's compute type).
absl::StatusOr<std::vector<double>> FloatValues(const OpContext& ctx,
                                                const Tensor& t,
                                                const char* what) {
  if (!ir::IsFloat(t.dtype())) {
    return ctx.Error(what, " must be f16, f32 or f64, got ", t.TypeString());
  }
  std::vector<double> v(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = t.GetAsDouble(i);
  return v;
}

// Writes doubles into a new tensor of a float dtype.
Tensor FloatTensor(DType dtype, Shape shape, absl::Span<const double> v) {
  Tensor t(dtype, std::move(shape));
  DispatchDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>) {
      T* p = t.data<T>();
      for (size_t i = 0; i < v.size(); ++i) p[i] = FromDouble<T>(v[i]);
    }
    return 0;
  });
  return t;
}

// `param` (Scale or B) unidirectionally broadcast to `target`, flattened.
absl::StatusOr<std::vector<double>> BroadcastParam(const OpContext& ctx,
                                                   const Tensor& param,
                                                   const Shape& target,
                                                   const char* what) {
  KILN_ASSIGN_OR_RETURN(std::vector<double> v, FloatValues(ctx, param, what));
  absl::StatusOr<Shape> b = ir::BroadcastShapes(param.shape(), target);
  if (!b.ok() || *b != target) {
    return ctx.Error(what, " of shape ", ir::ShapeToString(param.shape()),
                     " does not broadcast to ", ir::ShapeToString(target));
  }
  const int64_t n = ir::NumElements(target);
  std::vector<double> out(n);
  BroadcastMap map(param.shape(), target);
  for (int64_t i = 0; i < n; ++i) out[i] = v[map(i)];
  return out;
}

// The dtype of optional output `i`: as declared, else `fallback`.
DType DeclaredOr(const OpContext& ctx, int i, DType fallback) {
  if (i < ctx.num_outputs() && ctx.node.outputs[i] != ir::kNoValue) {
    const DType d = ctx.graph.value(ctx.node.outputs[i]).dtype;
    if (ir::IsFloat(d)) return d;
  }
  return fallback;
}

absl::StatusOr<Outputs> LayerNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(float epsilon, ctx.node.AttrOr<float>("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(int64_t stash_type,
                        ctx.node.AttrOr<int64_t>("stash_type", 1));
  absl::StatusOr<int64_t> axis = NormalizeAxis(axis_attr, x->rank());
  if (!axis.ok()) return ctx.Error(axis.status().message());
  DType stash;
  switch (stash_type) {
    case 1: stash = DType::kF32; break;
    case 10: stash = DType::kF16; break;
    case 11: stash = DType::kF64; break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          ctx.node.Describe(), ": stash_type ", stash_type, " is not supported"));
  }
  const Shape norm_shape(x->shape().begin() + *axis, x->shape().end());
  const int64_t d = ir::NumElements(norm_shape);
  int64_t rows = 1;
  for (int64_t i = 0; i < *axis; ++i) rows *= x->dim(i);

  KILN_ASSIGN_OR_RETURN(std::vector<double> xv, FloatValues(ctx, *x, "X"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> sv,
                        BroadcastParam(ctx, *scale, norm_shape, "Scale"));
  std::vector<double> bv(d, 0.0);
  if (ctx.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(bv, BroadcastParam(ctx, *ctx.inputs[2], norm_shape, "B"));
  }
  std::vector<double> y(xv.size()), mean(rows), inv_std(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = xv.data() + r * d;
    double sum = 0;
    for (int64_t j = 0; j < d; ++j) sum += row[j];
    const double mu = sum / d;
    double sq = 0;
    for (int64_t j = 0; j < d; ++j) sq += (row[j] - mu) * (row[j] - mu);
    const double inv = 1.0 / std::sqrt(sq / d + epsilon);
    for (int64_t j = 0; j < d; ++j) {
      y[r * d + j] = (row[j] - mu) * inv * sv[j] + bv[j];
    }
    mean[r] = mu;
    inv_std[r] = inv;
  }
  Shape stat_shape = x->shape();
  for (size_t i = *axis; i < stat_shape.size(); ++i) stat_shape[i] = 1;
  Outputs out;
  out.push_back(FloatTensor(x->dtype(), x->shape(), y));
  if (ctx.num_outputs() > 1) {
    out.push_back(FloatTensor(DeclaredOr(ctx, 1, stash), stat_shape, mean));
  }
  if (ctx.num_outputs() > 2) {
    out.push_back(FloatTensor(DeclaredOr(ctx, 2, stash), stat_shape, inv_std));
  }
  return out;
}

absl::StatusOr<Outputs> InstanceNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* bias, ctx.Input(2));
  KILN_ASSIGN_OR_RETURN(float epsilon, ctx.node.AttrOr<float>("epsilon", 1e-5f));
  if (x->rank() < 2) {
    return ctx.Error("input must have rank >= 2 (N, C, ...), got ",
                     x->TypeString());
  }
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t spatial = c == 0 || n == 0 ? 0 : x->num_elements() / (n * c);
  if (scale->shape() != Shape{c} || bias->shape() != Shape{c}) {
    return ctx.Error("scale and B must have shape [", c, "], got ",
                     scale->TypeString(), " and ", bias->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<double> xv, FloatValues(ctx, *x, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> sv, FloatValues(ctx, *scale, "scale"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> bv, FloatValues(ctx, *bias, "B"));
  std::vector<double> y(xv.size());
  for (int64_t nc = 0; nc < n * c; ++nc) {
    const double* p = xv.data() + nc * spatial;
    double sum = 0;
    for (int64_t j = 0; j < spatial; ++j) sum += p[j];
    const double mu = sum / spatial;
    double sq = 0;
    for (int64_t j = 0; j < spatial; ++j) sq += (p[j] - mu) * (p[j] - mu);
    const double inv = 1.0 / std::sqrt(sq / spatial + epsilon);
    const int64_t ch = nc % c;
    for (int64_t j = 0; j < spatial; ++j) {
      y[nc * spatial + j] = (p[j] - mu) * inv * sv[ch] + bv[ch];
    }
  }
  return One(FloatTensor(x->dtype(), x->shape(), y));
}

absl::StatusOr<Outputs> LpNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t p, ctx.node.AttrOr<int64_t>("p", 2));
  if (p != 1 && p != 2) return ctx.Error("p must be 1 or 2, got ", p);
  absl::StatusOr<int64_t> axis = NormalizeAxis(axis_attr, x->rank());
  if (!axis.ok()) return ctx.Error(axis.status().message());
  const AxisSplit s = SplitAt(x->shape(), *axis);
  KILN_ASSIGN_OR_RETURN(std::vector<double> xv, FloatValues(ctx, *x, "input"));
  std::vector<double> y(xv.size());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.n * s.inner + i;
      double norm = 0;
      for (int64_t j = 0; j < s.n; ++j) {
        const double v = xv[base + j * s.inner];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      for (int64_t j = 0; j < s.n; ++j) {
        y[base + j * s.inner] = xv[base + j * s.inner] / norm;
      }
    }
  }
  return One(FloatTensor(x->dtype(), x->shape(), y));
}

// ONNX's function body: (X - E[X]) / (sqrt(Var[X]) + 1e-9) over `axes`.
absl::StatusOr<Outputs> MeanVarianceNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        ctx.node.AttrOr<std::vector<int64_t>>(
                            "axes", std::vector<int64_t>{0, 2, 3}));
  KILN_ASSIGN_OR_RETURN(std::vector<bool> mask, AxesMask(ctx, axes, x->rank()));
  const ReductionPlan plan = PlanReduction(x->shape(), mask, true);
  KILN_ASSIGN_OR_RETURN(std::vector<double> xv, FloatValues(ctx, *x, "input"));
  std::vector<double> y(xv.size());
  const double count = static_cast<double>(plan.reduced.size());
  for (int64_t base : plan.kept) {
    double sum = 0;
    for (int64_t r : plan.reduced) sum += xv[base + r];
    const double mu = sum / count;
    double sq = 0;
    for (int64_t r : plan.reduced) sq += (xv[base + r] - mu) * (xv[base + r] - mu);
    const double denom = std::sqrt(sq / count) + 1e-9;
    for (int64_t r : plan.reduced) y[base + r] = (xv[base + r] - mu) / denom;
  }
  return One(FloatTensor(x->dtype(), x->shape(), y));
}

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

}  // namespace

void RegisterReductionOps(OpRegistry* registry) {
  registry->Register("ReduceSum", MakeReduce(ReduceKind::kSum, 13));
  registry->Register("ReduceMean", MakeReduce(ReduceKind::kMean, 18));
  registry->Register("ReduceMax", MakeReduce(ReduceKind::kMax, 18));
  registry->Register("ReduceMin", MakeReduce(ReduceKind::kMin, 18));
  registry->Register("ReduceProd", MakeReduce(ReduceKind::kProd, 18));
  registry->Register("ReduceL1", MakeReduce(ReduceKind::kL1, 18));
  registry->Register("ReduceL2", MakeReduce(ReduceKind::kL2, 18));
  registry->Register("ReduceSumSquare", MakeReduce(ReduceKind::kSumSquare, 18));
  registry->Register("ReduceLogSum", MakeReduce(ReduceKind::kLogSum, 18));
  registry->Register("ReduceLogSumExp", MakeReduce(ReduceKind::kLogSumExp, 18));
  registry->Register("ArgMax", MakeArgReduce(/*is_max=*/true));
  registry->Register("ArgMin", MakeArgReduce(/*is_max=*/false));
  registry->Register("Softmax", MakeSoftmax(SoftmaxKind::kSoftmax));
  registry->Register("LogSoftmax", MakeSoftmax(SoftmaxKind::kLogSoftmax));
  registry->Register("Hardmax", MakeSoftmax(SoftmaxKind::kHardmax));
  registry->Register("LayerNormalization", LayerNormalization);
  registry->Register("InstanceNormalization", InstanceNormalization);
  registry->Register("LpNormalization", LpNormalization);
  registry->Register("MeanVarianceNormalization", MeanVarianceNormalization);
  registry->Register("CumSum", CumSum);
  registry->Register("TopK", TopK);
}

}  // namespace kiln::interp
