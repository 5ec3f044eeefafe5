// File: interp/reduction.cc — reference kernels of ONNX's reduction family
// (onnx/defs/reduction): Reduce* and ArgMax/ArgMin. Floating-point math is in
// double, sums pairwise (as numpy's); integer sums and products wrap around.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;
using Outputs = std::vector<Tensor>;

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

// The sum of term(o) over `offs` by pairwise summation, as numpy's sum:
// runs of at most 128 terms in order, halves added recursively. Its error
// grows with log2(n), not n, so a sum over billions of elements stays
// within a few ulp of double (decision 0050).
template <typename F>
double PairwiseSum(absl::Span<const int64_t> offs, const F& term) {
  constexpr size_t kRun = 128;
  if (offs.size() <= kRun) {
    double acc = 0;
    for (int64_t o : offs) acc += term(o);
    return acc;
  }
  const size_t half = offs.size() / 2;
  return PairwiseSum(offs.subspan(0, half), term) + PairwiseSum(offs.subspan(half), term);
}

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
      acc = PairwiseSum(offs, [x](int64_t o) { return ToDouble(x[o]); });
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
      return PairwiseSum(offs, [x](int64_t o) { return std::fabs(ToDouble(x[o])); });
    case ReduceKind::kL2:
    case ReduceKind::kSumSquare:
      acc = PairwiseSum(offs, [x](int64_t o) {
        const double v = ToDouble(x[o]);
        return v * v;
      });
      return kind == ReduceKind::kL2 ? std::sqrt(acc) : acc;
    case ReduceKind::kLogSumExp: {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t o : offs) m = std::max(m, ToDouble(x[o]));
      if (std::isinf(m)) return m;  // empty, all -inf, or some +inf
      acc = PairwiseSum(offs, [x, m](int64_t o) { return std::exp(ToDouble(x[o]) - m); });
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

}  // namespace

void RegisterReductionOps(OpRegistry* r) {
  r->Register("ReduceSum", MakeReduce(ReduceKind::kSum, 13));
  r->Register("ReduceMean", MakeReduce(ReduceKind::kMean, 18));
  r->Register("ReduceMax", MakeReduce(ReduceKind::kMax, 18));
  r->Register("ReduceMin", MakeReduce(ReduceKind::kMin, 18));
  r->Register("ReduceProd", MakeReduce(ReduceKind::kProd, 18));
  r->Register("ReduceL1", MakeReduce(ReduceKind::kL1, 18));
  r->Register("ReduceL2", MakeReduce(ReduceKind::kL2, 18));
  r->Register("ReduceSumSquare", MakeReduce(ReduceKind::kSumSquare, 18));
  r->Register("ReduceLogSum", MakeReduce(ReduceKind::kLogSum, 18));
  r->Register("ReduceLogSumExp", MakeReduce(ReduceKind::kLogSumExp, 18));
  r->Register("ArgMax", MakeArgReduce(/*is_max=*/true));
  r->Register("ArgMin", MakeArgReduce(/*is_max=*/false));
}

}  // namespace kiln::interp
