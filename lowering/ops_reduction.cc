// Lowerings of reductions and normalizations: Reduce*, ArgMax/ArgMin,
// Softmax/LogSoftmax/Hardmax, LayerNormalization, InstanceNormalization,
// BatchNormalization (inference: an affine elementwise op), global and
// windowed pools (padding handled by a mask and a clamped load).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "ir/status_macros.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

// Coordinates of the input of a reduction over `axes` (sorted): reduced dims
// read r0.., the others the kernel's iteration variables (in order, or at
// their own position when the output keeps the reduced dims).
Coords ReductionInputCoords(Emitter& k, size_t rank,
                            const std::vector<int64_t>& axes, bool keepdims) {
  Coords c(rank);
  int next_i = 0, next_r = 0;
  for (size_t d = 0; d < rank; ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(),
                                   static_cast<int64_t>(d)) != axes.end();
    if (reduced) {
      c[d] = k.r(next_r++);
      if (keepdims) ++next_i;
    } else {
      c[d] = k.i(next_i++);
    }
  }
  return c;
}

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

LowerFn MakeReduce(ReduceOp kind, int64_t axes_input_opset) {
  return [kind, axes_input_opset](Lowerer& L, const ir::Node& n) -> absl::Status {
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
          L.SetOutputView(0, x);
          return absl::OkStatus();
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

enum class SoftmaxOp { kSoftmax, kLogSoftmax, kHardmax };

LowerFn MakeSoftmax(SoftmaxOp kind) {
  return [kind](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    if (!ir::IsFloat(x.dtype)) return L.Error("needs a float input");
    const bool legacy = L.opset() < 13;
    KILN_ASSIGN_OR_RETURN(int64_t axis_attr,
                          n.AttrOr<int64_t>("axis", legacy ? 1 : -1));
    const size_t rank = x.shape.size();
    std::optional<int64_t> axis = NormalizeAxis(axis_attr, rank);
    if (!axis.has_value()) return L.Error("axis ", axis_attr, " out of range");
    std::vector<int64_t> axes = {*axis};
    if (legacy) {
      for (size_t d = *axis + 1; d < rank; ++d) axes.push_back(d);
    }
    std::vector<int64_t> red;
    for (int64_t a : axes) red.push_back(x.shape[a]);
    const DType dt = x.dtype;
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(x.shape, red);
    const Coords it = k->IterCoords();
    Coords rc = it;
    for (size_t j = 0; j < axes.size(); ++j) rc[axes[j]] = k->r(j);
    auto& b = k->b();
    int32_t result;
    if (kind == SoftmaxOp::kHardmax) {
      KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, rc));
      const int32_t arg = b.Reduce(ReduceKind::kArgMax, v);
      Shape red_shape(red.begin(), red.end());
      Coords mine;
      for (int64_t a : axes) mine.push_back(it[a]);
      const int32_t pos = b.Index(k->Simplify(LinearIndex(red_shape, mine)));
      result = k->Sel(k->Bin(OpCode::kEq, pos, arg), k->Const(dt, 1),
                      k->Const(dt, 0));
    } else {
      KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, rc));
      const int32_t m = b.Reduce(ReduceKind::kMax, v);
      KILN_ASSIGN_OR_RETURN(int32_t v2, k->Load(x, rc));
      const int32_t s = b.Reduce(
          ReduceKind::kSum, k->Un(OpCode::kExp, k->Bin(OpCode::kSub, v2, m)));
      KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
      const int32_t shifted = k->Bin(OpCode::kSub, xi, m);
      result = kind == SoftmaxOp::kSoftmax
                   ? k->Bin(OpCode::kDiv, k->Un(OpCode::kExp, shifted), s)
                   : k->Bin(OpCode::kSub, shifted, k->Un(OpCode::kLog, s));
    }
    k->Store(buffer, x.shape, it, result);
    return absl::OkStatus();
  };
}

// mean and 1/sqrt(var + eps) over the reduction space of `k`, reading x at
// `rc`.
absl::Status MeanInvStd(Emitter& k, const Operand& x, const Coords& rc,
                        float epsilon, int32_t* mean, int32_t* inv_std) {
  KILN_ASSIGN_OR_RETURN(int32_t v, k.Load(x, rc));
  *mean = k.b().Reduce(ReduceKind::kWelfordMean, v);
  KILN_ASSIGN_OR_RETURN(int32_t v2, k.Load(x, rc));
  const int32_t var = k.b().Reduce(ReduceKind::kWelfordVar, v2);
  *inv_std = k.Un(OpCode::kRsqrt,
                  k.Bin(OpCode::kAdd, var, k.Const(x.dtype, epsilon)));
  return absl::OkStatus();
}

absl::Status LowerLayerNorm(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand scale, L.Input(1));
  if (!ir::IsFloat(x.dtype)) return L.Error("needs a float input");
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(float eps, n.AttrOr<float>("epsilon", 1e-5f));
  const size_t rank = x.shape.size();
  std::optional<int64_t> axis = NormalizeAxis(axis_attr, rank);
  if (!axis.has_value()) return L.Error("axis ", axis_attr, " out of range");
  const Shape norm_shape(x.shape.begin() + *axis, x.shape.end());
  std::vector<Operand> params = {scale};
  if (L.HasInput(2)) {
    KILN_ASSIGN_OR_RETURN(Operand bias, L.Input(2));
    params.push_back(bias);
  }
  for (const Operand& p : params) {
    absl::StatusOr<Shape> b = ir::BroadcastShapes(p.shape, norm_shape);
    if (!b.ok() || *b != norm_shape || p.dtype != x.dtype) {
      return L.Error("Scale/B of ", ir::DTypeName(p.dtype),
                     ir::ShapeToString(p.shape), " do not fit X ",
                     ir::ShapeToString(x.shape));
    }
  }
  std::vector<int64_t> red(norm_shape.begin(), norm_shape.end());
  Shape outer(x.shape.begin(), x.shape.begin() + *axis);
  {
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(x.shape, red);
    const Coords it = k->IterCoords();
    Coords rc = it;
    for (size_t d = *axis; d < rank; ++d) rc[d] = k->r(d - *axis);
    int32_t mean, inv;
    KILN_RETURN_IF_ERROR(MeanInvStd(*k, x, rc, eps, &mean, &inv));
    KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
    const Coords inner(it.begin() + *axis, it.end());
    KILN_ASSIGN_OR_RETURN(int32_t s, k->LoadBroadcast(scale, inner));
    int32_t y = k->Bin(OpCode::kMul,
                       k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, xi, mean), inv), s);
    if (params.size() > 1) {
      KILN_ASSIGN_OR_RETURN(int32_t bv, k->LoadBroadcast(params[1], inner));
      y = k->Bin(OpCode::kAdd, y, bv);
    }
    k->Store(buffer, x.shape, it, y);
  }
  for (int out = 1; out <= 2; ++out) {
    if (!L.HasOutput(out)) continue;
    const ir::Value& v = L.OutputValue(out);
    if (v.dtype != x.dtype) {
      return L.Unimplemented("statistics output of dtype ", ir::DTypeName(v.dtype));
    }
    const int32_t buffer = L.OutputBuffer(out);
    auto k = L.NewKernel(v.shape, red);
    const Coords it = k->IterCoords();
    Coords rc = it;
    for (size_t d = *axis; d < rank; ++d) rc[d] = k->r(d - *axis);
    int32_t mean, inv;
    KILN_RETURN_IF_ERROR(MeanInvStd(*k, x, rc, eps, &mean, &inv));
    k->Store(buffer, v.shape, it, out == 1 ? mean : inv);
  }
  return absl::OkStatus();
}

absl::Status LowerInstanceNorm(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand scale, L.Input(1));
  KILN_ASSIGN_OR_RETURN(Operand bias, L.Input(2));
  KILN_ASSIGN_OR_RETURN(float eps, n.AttrOr<float>("epsilon", 1e-5f));
  if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
    return L.Error("needs a float input of rank >= 2");
  }
  const int64_t c = x.shape[1];
  if (scale.shape != Shape{c} || bias.shape != Shape{c}) {
    return L.Error("scale and B must have shape [", c, "]");
  }
  std::vector<int64_t> red(x.shape.begin() + 2, x.shape.end());
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape, red);
  const Coords it = k->IterCoords();
  Coords rc = it;
  for (size_t d = 2; d < x.shape.size(); ++d) rc[d] = k->r(d - 2);
  int32_t mean, inv;
  KILN_RETURN_IF_ERROR(MeanInvStd(*k, x, rc, eps, &mean, &inv));
  KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
  KILN_ASSIGN_OR_RETURN(int32_t s, k->Load(scale, {it[1]}));
  KILN_ASSIGN_OR_RETURN(int32_t b, k->Load(bias, {it[1]}));
  const int32_t y = k->Bin(
      OpCode::kAdd,
      k->Bin(OpCode::kMul, k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, xi, mean), inv), s),
      b);
  k->Store(buffer, x.shape, it, y);
  return absl::OkStatus();
}

absl::Status LowerBatchNorm(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(int64_t training, n.AttrOr<int64_t>("training_mode", 0));
  if (training != 0) return L.Unimplemented("training_mode=1");
  for (int o = 1; o < static_cast<int>(n.outputs.size()); ++o) {
    if (L.HasOutput(o)) return L.Unimplemented("training outputs (mean/var)");
  }
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
    return L.Error("needs a float input of rank >= 2");
  }
  KILN_ASSIGN_OR_RETURN(float eps, n.AttrOr<float>("epsilon", 1e-5f));
  const int64_t c = x.shape[1];
  std::vector<Operand> p;
  for (int i = 1; i <= 4; ++i) {
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    if (op.shape != Shape{c}) {
      return L.Error("input ", i, " must have shape [", c, "], got ",
                     ir::ShapeToString(op.shape));
    }
    if (op.dtype != x.dtype) {
      return L.Unimplemented("parameters of another dtype than X");
    }
    p.push_back(op);
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
  std::vector<int32_t> v;
  for (const Operand& op : p) {
    KILN_ASSIGN_OR_RETURN(int32_t val, k->Load(op, {it[1]}));
    v.push_back(val);
  }
  // (x - mean) / sqrt(var + eps) * scale + B
  const int32_t inv = k->Un(
      OpCode::kRsqrt, k->Bin(OpCode::kAdd, v[3], k->Const(x.dtype, eps)));
  const int32_t y = k->Bin(
      OpCode::kAdd,
      k->Bin(OpCode::kMul, k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, xi, v[2]), inv),
             v[0]),
      v[1]);
  k->Store(buffer, x.shape, it, y);
  return absl::OkStatus();
}

LowerFn MakeGlobalPool(bool is_max) {
  return [is_max](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
      return L.Error("needs a float input of rank >= 2");
    }
    std::vector<int64_t> red(x.shape.begin() + 2, x.shape.end());
    std::vector<int64_t> axes;
    int64_t count = 1;
    for (size_t d = 2; d < x.shape.size(); ++d) {
      axes.push_back(d);
      count *= x.shape[d];
    }
    const ir::Value& out = L.OutputValue(0);
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(out.shape, red);
    const Coords in = ReductionInputCoords(*k, x.shape.size(), axes, true);
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
    int32_t r;
    if (is_max) {
      r = k->b().Reduce(ReduceKind::kMax, v);
    } else {
      r = k->Bin(OpCode::kDiv, k->b().Reduce(ReduceKind::kSum, v),
                 k->Const(x.dtype, static_cast<double>(count)));
    }
    k->Store(buffer, out.shape, k->IterCoords(), r);
    return absl::OkStatus();
  };
}

absl::StatusOr<std::vector<int64_t>> IntsOr(Lowerer& L, const ir::Node& n,
                                            const char* name, size_t count,
                                            int64_t fallback) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                        n.AttrOr<std::vector<int64_t>>(name, {}));
  if (v.empty()) v.assign(count, fallback);
  if (v.size() != count) {
    return L.Error("attribute '", name, "' has ", v.size(), " values, expected ",
                   count);
  }
  return v;
}

// The smallest value of `dt` (-inf for floats) as a constant op.
int32_t Lowest(Emitter& k, DType dt) {
  if (ir::IsFloat(dt)) return k.Const(dt, -std::numeric_limits<double>::infinity());
  const int32_t c = k.Const(dt, 0);
  int64_t v = 0;
  switch (dt) {
    case DType::kI64: v = std::numeric_limits<int64_t>::min(); break;
    case DType::kI32: v = std::numeric_limits<int32_t>::min(); break;
    case DType::kI8: v = std::numeric_limits<int8_t>::min(); break;
    default: break;
  }
  k.b().kernel().body[c].ivalue = v;
  return c;
}

LowerFn MakePool(bool is_max) {
  return [is_max](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    if ((is_max ? x.dtype == DType::kBool : !ir::IsFloat(x.dtype)) ||
        x.shape.size() < 3) {
      return L.Error("needs a ", is_max ? "numeric" : "float",
                     " input of rank >= 3");
    }
    if (L.HasOutput(1)) return L.Unimplemented("the Indices output");
    const size_t nsp = x.shape.size() - 2;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          n.Attr<std::vector<int64_t>>("kernel_shape"));
    if (kernel.size() != nsp) return L.Error("kernel_shape has the wrong rank");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, IntsOr(L, n, "strides", nsp, 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dil, IntsOr(L, n, "dilations", nsp, 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsOr(L, n, "pads", 2 * nsp, 0));
    KILN_ASSIGN_OR_RETURN(std::string auto_pad,
                          n.AttrOr<std::string>("auto_pad", "NOTSET"));
    KILN_ASSIGN_OR_RETURN(int64_t include_pad,
                          n.AttrOr<int64_t>("count_include_pad", 0));
    const ir::Value& out = L.OutputValue(0);
    if (out.shape.size() != x.shape.size()) return L.Error("output rank differs");
    std::vector<int64_t> pad_begin(nsp), pad_end(nsp);
    for (size_t d = 0; d < nsp; ++d) {
      if (kernel[d] <= 0 || strides[d] <= 0 || dil[d] <= 0) {
        return L.Error("kernel, strides and dilations must be positive");
      }
      const int64_t in = x.shape[d + 2], o = out.shape[d + 2];
      const int64_t ek = (kernel[d] - 1) * dil[d] + 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        const int64_t total = std::max<int64_t>(0, (o - 1) * strides[d] + ek - in);
        pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pad_end[d] = total - pad_begin[d];
      } else if (auto_pad == "VALID") {
        pad_begin[d] = pad_end[d] = 0;
      } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
        pad_begin[d] = pads[d];
        pad_end[d] = pads[nsp + d];
      } else {
        return L.Error("unknown auto_pad '", auto_pad, "'");
      }
      if (pad_begin[d] < 0 || pad_end[d] < 0) return L.Error("negative pads");
    }
    // A max pool whose every window holds an input element (dilation 1, so
    // a window is a contiguous run) needs no validity masks: a tap in the
    // padding, clamped to the border, reads an element of its own window,
    // which cannot change the max. The masks are i64 index arithmetic per
    // tap that keeps the kernel partly scalar (ResNet's stem maxpool).
    bool clamped_max = is_max;
    for (size_t d = 0; d < nsp && clamped_max; ++d) {
      clamped_max = dil[d] == 1;
      for (int64_t o = 0; o < out.shape[d + 2] && clamped_max; ++o) {
        const int64_t first = o * strides[d] - pad_begin[d];
        clamped_max = first + kernel[d] - 1 >= 0 && first <= x.shape[d + 2] - 1;
      }
    }
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(out.shape, kernel);
    auto& b = k->b();
    const Coords it = k->IterCoords();
    const DType dt = x.dtype;
    Coords in = {it[0], it[1]};
    if (clamped_max) {
      for (size_t d = 0; d < nsp; ++d) {
        const IndexExpr h = k->Simplify(it[d + 2] * strides[d] - pad_begin[d] + k->r(d));
        in.push_back(ir::loop::Min(ir::loop::Max(h, 0), x.shape[d + 2] - 1));
      }
      KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
      k->Store(buffer, out.shape, it, b.Reduce(ReduceKind::kMax, v));
      return absl::OkStatus();
    }
    int32_t valid = -1;
    auto conj = [&](int32_t acc, int32_t c) {
      return acc < 0 ? c : k->Bin(OpCode::kAnd, acc, c);
    };
    for (size_t d = 0; d < nsp; ++d) {
      const int64_t size = x.shape[d + 2];
      const IndexExpr h = k->Simplify(it[d + 2] * strides[d] - pad_begin[d] +
                                      k->r(d) * dil[d]);
      in.push_back(ir::loop::Min(ir::loop::Max(h, 0), size - 1));
      const int32_t hv = b.Index(h);
      valid = conj(valid, k->Bin(OpCode::kAnd,
                                 k->Bin(OpCode::kGe, hv, k->Const(DType::kI64, 0)),
                                 k->Bin(OpCode::kLt, hv, k->Const(DType::kI64, size))));
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
    // How many window positions fall inside the input (and, for
    // count_include_pad, inside input + end padding) is a closed form of
    // the output position, not a reduction: per spatial dim, the taps j in
    // [0, K) with 0 <= o*s - pb + j*dil < limit are those from
    // max(0, ceil((pb - o*s) / dil)) to min(K - 1, floor((limit - 1 + pb -
    // o*s) / dil)); the count is the product over dims. It depends on the
    // output position only, so the emitter computes it once per row.
    auto window_count = [&](bool include_pad) {
      IndexExpr total = ir::loop::Const(1);
      for (size_t d = 0; d < nsp; ++d) {
        const int64_t limit = x.shape[d + 2] + (include_pad ? pad_end[d] : 0);
        const IndexExpr start = it[d + 2] * strides[d] - pad_begin[d];  // tap 0
        const IndexExpr first =
            include_pad ? ir::loop::Const(0)
                        : ir::loop::Max(ir::loop::FloorDiv(ir::loop::Const(dil[d] - 1) - start, dil[d]), 0);
        const IndexExpr last = ir::loop::Min(
            ir::loop::FloorDiv(ir::loop::Const(limit - 1) - start, dil[d]), kernel[d] - 1);
        total = total * ir::loop::Max(last - first + 1, 0);
      }
      return k->Simplify(total);
    };
    const int32_t zero = k->Const(dt, 0);
    const IndexExpr count = window_count(false);
    const bool always_valid = ir::loop::ValueRange(count, b.kernel().VarExtents()).lo >= 1;
    int32_t r;
    if (is_max) {
      r = b.Reduce(ReduceKind::kMax, k->Sel(valid, v, Lowest(*k, dt)));
      // A window entirely in the padding gives 0.
      if (!always_valid) {
        r = k->Sel(k->Bin(OpCode::kGt, b.Index(count), k->Const(DType::kI64, 0)), r, zero);
      }
    } else {
      const int32_t s = b.Reduce(ReduceKind::kSum, k->Sel(valid, v, zero));
      const IndexExpr div = include_pad != 0 ? window_count(true) : count;
      const int32_t divv = b.Index(div, dt);
      r = k->Bin(OpCode::kDiv, s, divv);
      if (ir::loop::ValueRange(div, b.kernel().VarExtents()).lo < 1) {
        r = k->Sel(k->Bin(OpCode::kGt, divv, zero), r, zero);
      }
    }
    k->Store(buffer, out.shape, it, r);
    return absl::OkStatus();
  };
}

}  // namespace

void AddReductionLowerings(LowerTable& t) {
  t["ReduceSum"] = MakeReduce(ReduceOp::kSum, 13);
  t["ReduceMean"] = MakeReduce(ReduceOp::kMean, 18);
  t["ReduceMax"] = MakeReduce(ReduceOp::kMax, 18);
  t["ReduceMin"] = MakeReduce(ReduceOp::kMin, 18);
  t["ReduceProd"] = MakeReduce(ReduceOp::kProd, 18);
  t["ReduceL1"] = MakeReduce(ReduceOp::kL1, 18);
  t["ReduceL2"] = MakeReduce(ReduceOp::kL2, 18);
  t["ReduceSumSquare"] = MakeReduce(ReduceOp::kSumSquare, 18);
  t["ReduceLogSum"] = MakeReduce(ReduceOp::kLogSum, 18);
  t["ReduceLogSumExp"] = MakeReduce(ReduceOp::kLogSumExp, 18);
  t["ArgMax"] = MakeArg(true);
  t["ArgMin"] = MakeArg(false);
  t["Softmax"] = MakeSoftmax(SoftmaxOp::kSoftmax);
  t["LogSoftmax"] = MakeSoftmax(SoftmaxOp::kLogSoftmax);
  t["Hardmax"] = MakeSoftmax(SoftmaxOp::kHardmax);
  t["LayerNormalization"] = LowerLayerNorm;
  t["InstanceNormalization"] = LowerInstanceNorm;
  t["BatchNormalization"] = LowerBatchNorm;
  t["GlobalAveragePool"] = MakeGlobalPool(false);
  t["GlobalMaxPool"] = MakeGlobalPool(true);
  t["MaxPool"] = MakePool(true);
  t["AveragePool"] = MakePool(false);
}

}  // namespace kiln::lowering::internal
