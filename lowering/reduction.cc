// File: lowering/reduction.cc — lowerings of ONNX's reduction family
// (onnx/defs/reduction): Reduce* (constant axes, and ReduceSum's axes given
// at run time) and ArgMax/ArgMin, one reduction kernel per node.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"
#include "lowering/kernel_util.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

absl::StatusOr<std::vector<int64_t>> NormalizeAxes(Lowerer& L,
                                                   std::vector<int64_t> axes,
                                                   size_t rank) {
  std::set<int64_t> seen;
  for (int64_t& a : axes) {
    std::optional<int64_t> n = NormalizeAxis(a, static_cast<int64_t>(rank));
    if (!n.has_value()) return L.Error("axis ", a, " out of range for rank ", rank);
    if (!seen.insert(*n).second) return L.Error("axis ", a, " repeated");
    a = *n;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare,
                      kLogSum, kLogSumExp };

// ReduceSum whose axes are a run-time input (static shapes): the axes
// follow from the input and output shapes when every reading of them
// reduces the same non-unit dims; the kernel checks the given axes agree.
absl::Status LowerReduceSumWithRunTimeAxes(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand axes, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, n.AttrOr<int64_t>("keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t noop, n.AttrOr<int64_t>("noop_with_empty_axes", 0));
  if (!ir::IsInteger(axes.dtype) || axes.shape.size() != 1) {
    return L.Error("axes must be a 1-D integer tensor");
  }
  if (x.dtype == DType::kBool) return L.Error("does not accept bool inputs");
  const int64_t rank = x.shape.size(), count = axes.shape[0];
  const ir::Value& out = L.OutputValue(0);
  // Every set of `count` dims whose reduction gives the output shape.
  std::vector<std::vector<int64_t>> candidates;
  if (count == 0) {
    if (noop != 0) return L.SetOutputSame(0, x);
    std::vector<int64_t> all;
    for (int64_t d = 0; d < rank; ++d) all.push_back(d);
    candidates.push_back(all);
  } else if (rank <= 16) {
    for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
      if (__builtin_popcount(mask) != count) continue;
      Shape s;
      std::vector<int64_t> set;
      for (int64_t d = 0; d < rank; ++d) {
        const bool red = (mask >> d) & 1;
        if (red) set.push_back(d);
        if (!red) s.push_back(x.shape[d]);
        if (red && keepdims != 0) s.push_back(1);
      }
      if (s == out.shape) candidates.push_back(set);
    }
  }
  if (candidates.empty()) {
    return L.Error("no ", count, " axes reduce ", ir::ShapeToString(x.shape),
                   " to ", ir::ShapeToString(out.shape));
  }
  // The dims of size > 1 a candidate reduces; all must agree.
  auto essential = [&](const std::vector<int64_t>& set) {
    std::vector<int64_t> e;
    for (int64_t d : set) {
      if (x.shape[d] != 1) e.push_back(d);
    }
    return e;
  };
  const std::vector<int64_t> must = essential(candidates[0]);
  for (const auto& c : candidates) {
    if (essential(c) != must) {
      return L.Unimplemented("axes given at run time are ambiguous for ",
                             ir::ShapeToString(x.shape), " -> ",
                             ir::ShapeToString(out.shape));
    }
  }
  const std::vector<int64_t>& chosen = candidates[0];
  std::vector<int64_t> red;
  for (int64_t d : must) red.push_back(x.shape[d]);
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel(out.shape, red);
  // The given axes (normalized) must be distinct, each a reduced dim or a
  // unit dim, and cover every reduced dim of size > 1.
  std::vector<int32_t> given;
  int32_t ok = k->Const(DType::kBool, 1);
  for (int64_t j = 0; j < count; ++j) {
    KILN_ASSIGN_OR_RETURN(int32_t a, k->Load(axes, {Const(j)}));
    if (k->DTypeOf(a) != DType::kI64) a = k->Cast(a, DType::kI64);
    a = k->Sel(k->Bin(OpCode::kLt, a, k->Const(DType::kI64, 0)),
               k->Bin(OpCode::kAdd, a, k->Const(DType::kI64, rank)), a);
    int32_t allowed = k->Const(DType::kBool, 0);
    for (int64_t d = 0; d < rank; ++d) {
      const bool may = x.shape[d] == 1 ||
                       std::find(must.begin(), must.end(), d) != must.end();
      if (!may) continue;
      allowed = k->Bin(OpCode::kOr, allowed,
                       k->Bin(OpCode::kEq, a, k->Const(DType::kI64, d)));
    }
    ok = k->Bin(OpCode::kAnd, ok, allowed);
    for (int32_t prev_axis : given) {
      ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kNe, a, prev_axis));
    }
    given.push_back(a);
  }
  for (int64_t d : must) {
    if (count == 0) break;  // no axes: every dim, nothing to check
    int32_t seen = k->Const(DType::kBool, 0);
    for (int32_t a : given) {
      seen = k->Bin(OpCode::kOr, seen, k->Bin(OpCode::kEq, a, k->Const(DType::kI64, d)));
    }
    ok = k->Bin(OpCode::kAnd, ok, seen);
  }
  Coords in(rank);
  int next_i = 0, next_r = 0;
  for (int64_t d = 0; d < rank; ++d) {
    const bool reduced = std::find(chosen.begin(), chosen.end(), d) != chosen.end();
    const bool is_must = std::find(must.begin(), must.end(), d) != must.end();
    if (reduced) {
      in[d] = is_must ? k->r(next_r++) : Const(0);
      if (keepdims != 0) ++next_i;
    } else {
      in[d] = k->i(next_i++);
    }
  }
  KILN_ASSIGN_OR_RETURN(int32_t v, LoadIfValid(L, *k, x, in, ok));
  k->Store(buffer, out.shape, k->IterCoords(), k->b().Reduce(ReduceKind::kSum, v));
  return absl::OkStatus();
}

LowerFn MakeReduce(ReduceOp kind, int64_t axes_input_opset) {
  return [kind, axes_input_opset](Lowerer& L, const ir::Node& n) -> absl::Status {
    if (kind == ReduceOp::kSum && L.opset() >= axes_input_opset && L.HasInput(1) &&
        L.ConstantInput(1) == nullptr) {
      return LowerReduceSumWithRunTimeAxes(L, n);
    }
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    KILN_ASSIGN_OR_RETURN(int64_t keepdims, n.AttrOr<int64_t>("keepdims", 1));
    KILN_ASSIGN_OR_RETURN(int64_t noop,
                          n.AttrOr<int64_t>("noop_with_empty_axes", 0));
    std::vector<int64_t> axes;
    if (L.opset() >= axes_input_opset) {
      if (L.HasInput(1)) {
        KILN_ASSIGN_OR_RETURN(axes, L.ConstantInts(1, "axes"));
      }
    } else {
      KILN_ASSIGN_OR_RETURN(axes, n.AttrOr<std::vector<int64_t>>("axes", {}));
    }
    const size_t rank = x.shape.size();
    if (axes.empty()) {
      if (noop != 0) {
        if (kind == ReduceOp::kSum || kind == ReduceOp::kMean ||
            kind == ReduceOp::kMax || kind == ReduceOp::kMin ||
            kind == ReduceOp::kProd) {
          return L.SetOutputSame(0, x);
        }
        return L.Unimplemented("noop_with_empty_axes for this reduction");
      }
      for (size_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    KILN_ASSIGN_OR_RETURN(axes, NormalizeAxes(L, axes, rank));
    const DType dt = x.dtype;
    if (dt == DType::kBool) return L.Error("does not accept bool inputs");
    const bool fl = ir::IsFloat(dt);
    if (!fl && (kind == ReduceOp::kLogSum || kind == ReduceOp::kLogSumExp ||
                kind == ReduceOp::kL2)) {
      return L.Unimplemented("integer input for this reduction");
    }
    std::vector<int64_t> red;
    int64_t count = 1;
    for (int64_t a : axes) {
      red.push_back(x.shape[a]);
      count *= x.shape[a];
    }
    const ir::Value& out = L.OutputValue(0);
    if (static_cast<size_t>(ir::NumElements(out.shape)) * count !=
        static_cast<size_t>(ir::NumElements(x.shape))) {
      return L.Error("output shape ", ir::ShapeToString(out.shape),
                     " does not match the reduction of ",
                     ir::ShapeToString(x.shape));
    }
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(out.shape, red);
    const Coords in = ReductionInputCoords(*k, rank, axes, keepdims != 0);
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
    auto& b = k->b();
    int32_t r = -1;
    switch (kind) {
      case ReduceOp::kSum: r = b.Reduce(ReduceKind::kSum, v); break;
      case ReduceOp::kMean:
        r = k->Bin(OpCode::kDiv, b.Reduce(ReduceKind::kSum, v),
                   k->Const(dt, static_cast<double>(count)));
        break;
      case ReduceOp::kMax: r = b.Reduce(ReduceKind::kMax, v); break;
      case ReduceOp::kMin: r = b.Reduce(ReduceKind::kMin, v); break;
      case ReduceOp::kProd: r = b.Reduce(ReduceKind::kProd, v); break;
      case ReduceOp::kL1:
        r = b.Reduce(ReduceKind::kSum, k->Un(OpCode::kAbs, v));
        break;
      case ReduceOp::kL2:
        r = k->Un(OpCode::kSqrt,
                  b.Reduce(ReduceKind::kSum, k->Bin(OpCode::kMul, v, v)));
        break;
      case ReduceOp::kSumSquare:
        r = b.Reduce(ReduceKind::kSum, k->Bin(OpCode::kMul, v, v));
        break;
      case ReduceOp::kLogSum:
        r = k->Un(OpCode::kLog, b.Reduce(ReduceKind::kSum, v));
        break;
      case ReduceOp::kLogSumExp: {
        const int32_t m = b.Reduce(ReduceKind::kMax, v);
        KILN_ASSIGN_OR_RETURN(int32_t v2, k->Load(x, in));
        const int32_t s = b.Reduce(
            ReduceKind::kSum, k->Un(OpCode::kExp, k->Bin(OpCode::kSub, v2, m)));
        // An all -inf row (or empty) has max -inf: log(sum) alone is right.
        const int32_t finite = k->Bin(
            OpCode::kEq, k->Bin(OpCode::kSub, m, m), k->Const(dt, 0));
        r = k->Sel(finite, k->Bin(OpCode::kAdd, m, k->Un(OpCode::kLog, s)), m);
        break;
      }
    }
    k->Store(buffer, out.shape, k->IterCoords(), r);
    return absl::OkStatus();
  };
}

LowerFn MakeArg(bool is_max) {
  return [is_max](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", 0));
    KILN_ASSIGN_OR_RETURN(int64_t keepdims, n.AttrOr<int64_t>("keepdims", 1));
    KILN_ASSIGN_OR_RETURN(int64_t last, n.AttrOr<int64_t>("select_last_index", 0));
    std::optional<int64_t> axis = NormalizeAxis(axis_attr, x.shape.size());
    if (!axis.has_value()) return L.Error("axis ", axis_attr, " out of range");
    if (x.dtype == DType::kBool) return L.Error("does not accept bool inputs");
    if (x.shape[*axis] == 0) return L.Error("reduces an empty axis");
    const ir::Value& out = L.OutputValue(0);
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(out.shape, {x.shape[*axis]});
    const Coords in = ReductionInputCoords(*k, x.shape.size(), {*axis}, keepdims != 0);
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
    const ReduceKind kind =
        is_max ? (last ? ReduceKind::kArgMaxLast : ReduceKind::kArgMax)
               : (last ? ReduceKind::kArgMinLast : ReduceKind::kArgMin);
    k->Store(buffer, out.shape, k->IterCoords(), k->b().Reduce(kind, v));
    return absl::OkStatus();
  };
}

}  // namespace

void AddReductionLowerings(LowerTable& t) {
  t.Add("ReduceSum", MakeReduce(ReduceOp::kSum, 13));
  t.Add("ReduceMean", MakeReduce(ReduceOp::kMean, 18));
  t.Add("ReduceMax", MakeReduce(ReduceOp::kMax, 18));
  t.Add("ReduceMin", MakeReduce(ReduceOp::kMin, 18));
  t.Add("ReduceProd", MakeReduce(ReduceOp::kProd, 18));
  t.Add("ReduceL1", MakeReduce(ReduceOp::kL1, 18));
  t.Add("ReduceL2", MakeReduce(ReduceOp::kL2, 18));
  t.Add("ReduceSumSquare", MakeReduce(ReduceOp::kSumSquare, 18));
  t.Add("ReduceLogSum", MakeReduce(ReduceOp::kLogSum, 18));
  t.Add("ReduceLogSumExp", MakeReduce(ReduceOp::kLogSumExp, 18));
  t.Add("ArgMax", MakeArg(true));
  t.Add("ArgMin", MakeArg(false));
}

}  // namespace kiln::lowering::internal
