// Lowerings of index-driven and small numeric ops to loop kernels: OneHot,
// GatherND and ReverseSequence (checked load_indirect), TopK (a rank count
// per row, then a select), QuantizeLinear / DequantizeLinear /
// DynamicQuantizeLinear / QLinearMatMul (u8/i8), the Hann/Hamming/Blackman windows,
// BitShift and TfIdfVectorizer (integer pools). Registers ops_signal.cc and ops_extended.cc too.
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <limits>
#include <string>
#include <vector>

#include "ir/status_macros.h"
#include "lowering/lowerer.h"
#include "lowering/ops_more_util.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

std::vector<int64_t> Extents(const Shape& s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

// ---------------------------------------------------------------------------
// OneHot: out[..., j, ...] = values[indices[...] (wrapped by depth) == j].

absl::Status LowerOneHot(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand ind, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand values, L.Input(2));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", -1));
  if (ir::NumElements(values.shape) != 2) {
    return L.Error("values must have two elements (off, on), got ",
                   ir::ShapeToString(values.shape));
  }
  if (ind.dtype == DType::kBool) return L.Error("indices must be numeric");
  const int64_t rank = static_cast<int64_t>(ind.shape.size()) + 1;
  std::optional<int64_t> axis = NormalizeAxis(axis_attr, rank);
  if (!axis.has_value()) return L.Error("axis ", axis_attr, " out of range");
  const ir::Value& out = L.OutputValue(0);
  if (static_cast<int64_t>(out.shape.size()) != rank || out.dtype != values.dtype) {
    return L.Error("output ", ir::DTypeName(out.dtype), ir::ShapeToString(out.shape),
                   " does not fit indices ", ir::ShapeToString(ind.shape));
  }
  const int64_t depth = out.shape[*axis];
  if (const ir::Tensor* d = L.ConstantInput(1)) {
    if (d->num_elements() != 1 || static_cast<int64_t>(d->GetAsDouble(0)) != depth) {
      return L.Error("depth ", d->TypeString(), " does not match the output's ",
                     depth);
    }
  }
  if (depth < 1) return L.Error("depth ", depth, " must be positive");
  const int32_t buffer = NewOutput(L, 0);
  auto k = L.NewKernel(out.shape);
  const Coords it = k->IterCoords();
  Coords ic = it;
  ic.erase(ic.begin() + *axis);
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(ind, ic));
  const int32_t j = k->b().Index(it[*axis]);
  int32_t hit;
  if (ir::IsFloat(ind.dtype)) {
    // Truncate toward zero in the float domain (no cast of NaN/inf).
    const DType dt = ind.dtype;
    const int32_t zero = k->Const(dt, 0);
    const int32_t t = k->Sel(k->Bin(OpCode::kLt, v, zero), k->Un(OpCode::kCeil, v),
                             k->Un(OpCode::kFloor, v));
    const int32_t w = k->Sel(k->Bin(OpCode::kLt, t, zero),
                             k->Bin(OpCode::kAdd, t, k->Const(dt, depth)), t);
    hit = k->Bin(OpCode::kEq, w, k->Cast(j, dt));
  } else {
    if (k->DTypeOf(v) != DType::kI64) v = k->Cast(v, DType::kI64);
    const int32_t w = k->Sel(k->Bin(OpCode::kLt, v, k->Const(DType::kI64, 0)),
                             k->Bin(OpCode::kAdd, v, k->Const(DType::kI64, depth)), v);
    hit = k->Bin(OpCode::kEq, w, j);
  }
  const Coords flat0 = Delinearize(values.shape, Const(0));
  const Coords flat1 = Delinearize(values.shape, Const(1));
  KILN_ASSIGN_OR_RETURN(int32_t off, k->Load(values, flat0));
  KILN_ASSIGN_OR_RETURN(int32_t on, k->Load(values, flat1));
  k->Store(buffer, out.shape, it, k->Sel(hit, on, off));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// GatherND: the last index dim addresses data dims [b, b+m) (b = batch_dims);
// those dims are contiguous in row-major storage, so one checked
// load_indirect over their flattened extent reads the slice element, with
// an index whose components are each range-checked first.

absl::Status LowerGatherNd(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand data, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand ind, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t b, n.AttrOr<int64_t>("batch_dims", 0));
  if (!ir::IsInteger(ind.dtype)) return L.Error("indices must be integers");
  const int64_t r = data.shape.size(), q = ind.shape.size();
  if (q < 1 || r < 1) return L.Error("data and indices must have rank >= 1");
  const int64_t m = ind.shape[q - 1];
  if (b < 0 || b >= std::min(q, r) || m < 1 || b + m > r) {
    return L.Error("batch_dims ", b, " and index depth ", m,
                   " do not fit data ", ir::ShapeToString(data.shape),
                   " and indices ", ir::ShapeToString(ind.shape));
  }
  for (int64_t d = 0; d < b; ++d) {
    if (data.shape[d] != ind.shape[d]) return L.Error("batch dims differ");
  }
  const ir::Value& out = L.OutputValue(0);
  Shape want(ind.shape.begin(), ind.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + b + m, data.shape.end());
  if (out.shape != want) {
    return L.Error("output shape ", ir::ShapeToString(out.shape), ", expected ",
                   ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  int64_t block = 1;
  for (int64_t d = b; d < b + m; ++d) block *= data.shape[d];
  if (block == 0) return L.Error("gathers from an empty axis");
  int64_t inner = 1;
  for (int64_t d = b + m; d < r; ++d) inner *= data.shape[d];
  KILN_ASSIGN_OR_RETURN(int32_t src, L.Materialize(data));
  auto k = L.NewKernel(out.shape);
  const Coords it = k->IterCoords();
  Coords ic(it.begin(), it.begin() + (q - 1));
  ic.push_back(Const(0));
  int32_t offset = k->Const(DType::kI64, 0), bad = -1;
  for (int64_t j = 0; j < m; ++j) {
    ic[q - 1] = Const(j);
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(ind, ic));
    if (k->DTypeOf(v) != DType::kI64) v = k->Cast(v, DType::kI64);
    const int64_t dim = data.shape[b + j];
    const int32_t zero = k->Const(DType::kI64, 0);
    v = k->Sel(k->Bin(OpCode::kLt, v, zero),
               k->Bin(OpCode::kAdd, v, k->Const(DType::kI64, dim)), v);
    const int32_t out_of_range =
        k->Bin(OpCode::kOr, k->Bin(OpCode::kLt, v, zero),
               k->Bin(OpCode::kGe, v, k->Const(DType::kI64, dim)));
    bad = bad < 0 ? out_of_range : k->Bin(OpCode::kOr, bad, out_of_range);
    offset = k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, offset, k->Const(DType::kI64, dim)), v);
  }
  offset = k->Sel(bad, k->Const(DType::kI64, block), offset);
  Coords dc(it.begin(), it.begin() + b);
  for (int64_t d = b; d < b + m; ++d) dc.push_back(Const(0));
  dc.insert(dc.end(), it.begin() + (q - 1), it.end());
  const int32_t v = k->b().LoadIndirect(src, RowMajor(*k, data.shape, dc), offset,
                                        block, inner);
  k->Store(buffer, out.shape, it, v);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// ReverseSequence: out[t] = x[len - 1 - t] for t < len of its batch entry.

absl::Status LowerReverseSequence(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand lens, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t batch_axis, n.AttrOr<int64_t>("batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t time_axis, n.AttrOr<int64_t>("time_axis", 0));
  if (x.shape.size() < 2) return L.Error("input must have rank >= 2");
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return L.Error("batch_axis and time_axis must be 0 and 1 in some order, got ",
                   batch_axis, " and ", time_axis);
  }
  if (!ir::IsInteger(lens.dtype) || lens.shape != Shape{x.shape[batch_axis]}) {
    return L.Error("sequence_lens must be integers of shape [",
                   x.shape[batch_axis], "]");
  }
  const int64_t nt = x.shape[time_axis];
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(x.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t len, k->Load(lens, {it[batch_axis]}));
  if (k->DTypeOf(len) != DType::kI64) len = k->Cast(len, DType::kI64);
  const int32_t t = k->b().Index(it[time_axis]);
  const int32_t bad_len =
      k->Bin(OpCode::kOr, k->Bin(OpCode::kLt, len, k->Const(DType::kI64, 0)),
             k->Bin(OpCode::kGt, len, k->Const(DType::kI64, nt)));
  const int32_t reversed = k->Bin(
      OpCode::kSub, k->Bin(OpCode::kSub, len, k->Const(DType::kI64, 1)), t);
  int32_t src = k->Sel(k->Bin(OpCode::kLt, t, len), reversed, t);
  src = k->Sel(bad_len, k->Const(DType::kI64, nt), src);
  KILN_ASSIGN_OR_RETURN(int32_t v, LoadIndirectAlong(L, *k, x, it, time_axis,
                                                     Extents(x.shape), src));
  k->Store(buffer, x.shape, it, v);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// TopK. The loop IR has no sort, so each element's position in the sorted
// row is counted (a reduction over the row: O(n^2) per row, fine for the
// small rows models use TopK on, scalar because the count compares every
// pair), then output j selects the element whose rank is j. Order: best
// first, NaN above every number, ties by lower index (the reference's).

// a ranks above b (NaN greatest).
int32_t Greater(Emitter& k, int32_t a, int32_t b, bool is_float) {
  const int32_t gt = k.Bin(OpCode::kGt, a, b);
  if (!is_float) return gt;
  return k.Bin(OpCode::kOr, gt,
               k.Bin(OpCode::kAnd, k.Un(OpCode::kIsNan, a),
                     k.Un(OpCode::kNot, k.Un(OpCode::kIsNan, b))));
}

absl::Status LowerTopK(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t largest, n.AttrOr<int64_t>("largest", 1));
  if (x.dtype == DType::kBool) return L.Error("bool input is not supported");
  std::optional<int64_t> axis_opt = NormalizeAxis(axis_attr, x.shape.size());
  if (!axis_opt.has_value()) return L.Error("axis ", axis_attr, " out of range");
  const int64_t axis = *axis_opt, len = x.shape[axis];
  const ir::Value& values = L.OutputValue(0);
  const int64_t kk = values.shape.size() == x.shape.size() ? values.shape[axis] : -1;
  int64_t k_given = kk;
  std::optional<Operand> runtime_k;  // K given at run time: checked in the kernel
  if (L.opset() >= 10 && L.HasInput(1) && L.ConstantInput(1) == nullptr) {
    KILN_ASSIGN_OR_RETURN(Operand kop, L.Input(1));
    if (!ir::IsInteger(kop.dtype) || ir::NumElements(kop.shape) != 1) {
      return L.Error("K must be one integer");
    }
    runtime_k = kop;
  } else if (L.opset() >= 10) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kv, L.ConstantInts(1, "K"));
    if (kv.size() != 1) return L.Error("K must hold exactly one value");
    k_given = kv[0];
  } else {
    KILN_ASSIGN_OR_RETURN(k_given, n.Attr<int64_t>("k"));
  }
  Shape want = x.shape;
  if (k_given < 0 || k_given > len) {
    return L.Error("k = ", k_given, " is out of range for an axis of size ", len);
  }
  want[axis] = k_given;
  if (values.shape != want || (L.HasOutput(1) && L.OutputValue(1).shape != want)) {
    return L.Error("outputs must have shape ", ir::ShapeToString(want));
  }
  const bool fl = ir::IsFloat(x.dtype);
  const int32_t vbuf = NewOutput(L, 0);
  const int32_t ibuf = L.HasOutput(1) ? NewOutput(L, 1) : -1;
  if (ir::NumElements(want) == 0) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(int32_t ranks, ScratchBuffer(L, DType::kI64, x.shape));
  {
    auto k = L.NewKernel(x.shape, {len});
    const Coords it = k->IterCoords();
    Coords rc = it;
    rc[axis] = k->r(0);
    KILN_ASSIGN_OR_RETURN(int32_t mine, k->Load(x, it));
    KILN_ASSIGN_OR_RETURN(int32_t other, k->Load(x, rc));
    const int32_t better = largest != 0 ? Greater(*k, other, mine, fl)
                                        : Greater(*k, mine, other, fl);
    const int32_t worse = largest != 0 ? Greater(*k, mine, other, fl)
                                       : Greater(*k, other, mine, fl);
    const int32_t tie_before = k->Bin(
        OpCode::kAnd, k->Un(OpCode::kNot, worse),
        k->Bin(OpCode::kLt, k->b().Index(k->r(0)), k->b().Index(it[axis])));
    const int32_t before = k->Bin(OpCode::kOr, better, tie_before);
    const int32_t rank = k->b().Reduce(
        ReduceKind::kSum,
        k->Sel(before, k->Const(DType::kI64, 1), k->Const(DType::kI64, 0)));
    k->Store(ranks, x.shape, it, rank);
  }
  auto k = L.NewKernel(want, {len});
  const Coords it = k->IterCoords();
  Coords rc = it;
  rc[axis] = k->r(0);
  const int32_t rank = k->b().Load(ranks, RowMajor(*k, x.shape, rc));
  int32_t j = k->b().Index(it[axis]);
  if (runtime_k.has_value()) {
    const Coords zero(runtime_k->shape.size(), Const(0));
    KILN_ASSIGN_OR_RETURN(int32_t given, k->Load(*runtime_k, zero));
    if (k->DTypeOf(given) != DType::kI64) given = k->Cast(given, DType::kI64);
    const int32_t ok = k->Bin(OpCode::kEq, given, k->Const(DType::kI64, k_given));
    KILN_ASSIGN_OR_RETURN(int32_t checked, LoadIfValid(L, *k, *runtime_k, zero, ok));
    // j + (checked - k): j itself once K is confirmed.
    if (k->DTypeOf(checked) != DType::kI64) checked = k->Cast(checked, DType::kI64);
    j = k->Bin(OpCode::kAdd, j, k->Bin(OpCode::kSub, checked, k->Const(DType::kI64, k_given)));
  }
  const int32_t hit = k->Bin(OpCode::kEq, rank, j);
  const int32_t pos = k->b().Reduce(
      ReduceKind::kSum,
      k->Sel(hit, k->b().Index(k->r(0)), k->Const(DType::kI64, 0)));
  std::vector<int64_t> extents = Extents(want);
  extents.push_back(len);
  KILN_ASSIGN_OR_RETURN(int32_t v, LoadIndirectAlong(L, *k, x, it, axis, extents, pos));
  k->Store(vbuf, want, it, v);
  if (ibuf >= 0) k->Store(ibuf, want, it, pos);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Quantization (u8 / i8). Rounding is half to even (kRound), saturating.

struct QuantParams {
  Operand scale;
  std::optional<Operand> zero_point;
  int64_t axis = -1;  // -1: per tensor
};

absl::StatusOr<QuantParams> ReadQuantParams(Lowerer& L, const ir::Node& n,
                                            const Shape& x_shape) {
  QuantParams p;
  KILN_ASSIGN_OR_RETURN(p.scale, L.Input(1));
  if (L.HasInput(2)) {
    KILN_ASSIGN_OR_RETURN(Operand z, L.Input(2));
    p.zero_point = z;
  }
  if (n.HasAttr("block_size")) {
    KILN_ASSIGN_OR_RETURN(int64_t bs, n.Attr<int64_t>("block_size"));
    if (bs != 0) return L.Unimplemented("blocked quantization");
  }
  const int64_t count = ir::NumElements(p.scale.shape);
  if (p.scale.shape.size() > 1) return L.Error("scale must be a scalar or 1-D");
  if (p.zero_point.has_value() &&
      ir::NumElements(p.zero_point->shape) != count) {
    return L.Error("zero point and scale have different sizes");
  }
  if (p.scale.shape.size() == 1 && !(count == 1 && x_shape.empty())) {
    KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", 1));
    std::optional<int64_t> axis = NormalizeAxis(axis_attr, x_shape.size());
    if (!axis.has_value()) return L.Error("axis ", axis_attr, " out of range");
    if (x_shape[*axis] != count) {
      if (count != 1) {
        return L.Error("scale has ", count, " values, expected 1 or ",
                       x_shape[*axis]);
      }
    } else {
      p.axis = *axis;
    }
  }
  return p;
}

// The per-tensor or per-axis parameter `op` at input coordinates `it`.
absl::StatusOr<int32_t> LoadParam(Emitter& k, const Operand& op, int64_t axis,
                                  const Coords& it) {
  if (op.shape.empty()) return k.Load(op, {});
  return k.Load(op, {axis >= 0 ? it[axis] : Const(0)});
}

std::pair<double, double> QuantRange(DType dt) {
  if (dt == DType::kI8) return {-128, 127};
  return {0, 255};
}

// round(v / scale) + zero point, saturated, cast to `qt` (v, scale, zp f32).
int32_t Quantize(Emitter& k, int32_t v, int32_t scale, int32_t zp, DType qt) {
  const auto [lo, hi] = QuantRange(qt);
  int32_t y = k.Bin(OpCode::kAdd, k.Un(OpCode::kRound, k.Bin(OpCode::kDiv, v, scale)), zp);
  y = k.Bin(OpCode::kMin, k.Bin(OpCode::kMax, y, k.Const(DType::kF32, lo)),
            k.Const(DType::kF32, hi));
  return k.Cast(y, qt);
}

absl::Status LowerQuantizeLinear(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(QuantParams p, ReadQuantParams(L, n, x.shape));
  const ir::Value& out = L.OutputValue(0);
  const DType qt = out.dtype;
  if (qt != DType::kU8 && qt != DType::kI8) {
    return L.Unimplemented("quantizing to ", ir::DTypeName(qt));
  }
  if (p.zero_point.has_value() && p.zero_point->dtype != qt) {
    return L.Error("zero point dtype differs from the output's");
  }
  if (!ir::IsFloat(x.dtype) && x.dtype != DType::kI32) {
    return L.Error("input must be float or int32");
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(x.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, it));
  KILN_ASSIGN_OR_RETURN(int32_t s, LoadParam(*k, p.scale, p.axis, it));
  int32_t zp = k->Const(DType::kF32, 0);
  if (p.zero_point.has_value()) {
    KILN_ASSIGN_OR_RETURN(zp, LoadParam(*k, *p.zero_point, p.axis, it));
    zp = k->Cast(zp, DType::kF32);
  }
  if (k->DTypeOf(v) != DType::kF32) v = k->Cast(v, DType::kF32);
  if (k->DTypeOf(s) != DType::kF32) s = k->Cast(s, DType::kF32);
  k->Store(buffer, x.shape, it, Quantize(*k, v, s, zp, qt));
  return absl::OkStatus();
}

absl::Status LowerDequantizeLinear(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(QuantParams p, ReadQuantParams(L, n, x.shape));
  if (x.dtype != DType::kU8 && x.dtype != DType::kI8 && x.dtype != DType::kI32) {
    return L.Unimplemented("dequantizing ", ir::DTypeName(x.dtype));
  }
  const ir::Value& out = L.OutputValue(0);
  if (!ir::IsFloat(out.dtype) || out.dtype != p.scale.dtype) {
    return L.Error("output must have the scale's float dtype");
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(x.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, it));
  KILN_ASSIGN_OR_RETURN(int32_t s, LoadParam(*k, p.scale, p.axis, it));
  // x - zp is exact in i64 (also for int32 inputs), then one rounding.
  v = k->Cast(v, DType::kI64);
  if (p.zero_point.has_value()) {
    KILN_ASSIGN_OR_RETURN(int32_t zp, LoadParam(*k, *p.zero_point, p.axis, it));
    v = k->Bin(OpCode::kSub, v, k->Cast(zp, DType::kI64));
  }
  k->Store(buffer, x.shape, it, k->Bin(OpCode::kMul, k->Cast(v, out.dtype), s));
  return absl::OkStatus();
}

// y_scale = (max(0, max x) - min(0, min x)) / 255, zero point
// round(-min / scale) saturated, y quantized with them (u8).
absl::Status LowerDynamicQuantizeLinear(Lowerer& L, const ir::Node&) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (x.dtype != DType::kF32) return L.Error("input must be f32");
  for (int o = 0; o < 3; ++o) {
    if (!L.HasOutput(o)) return L.Unimplemented("omitted output ", o);
  }
  if (L.OutputValue(0).dtype != DType::kU8 || L.OutputValue(2).dtype != DType::kU8 ||
      L.OutputValue(1).dtype != DType::kF32 || !L.OutputValue(1).shape.empty() ||
      !L.OutputValue(2).shape.empty()) {
    return L.Error("outputs must be u8 y, f32[] scale and u8[] zero point");
  }
  const int32_t ybuf = NewOutput(L, 0);
  const int32_t sbuf = NewOutput(L, 1);
  const int32_t zbuf = NewOutput(L, 2);
  {
    auto k = L.NewKernel({}, Extents(x.shape));
    Coords rc;
    for (size_t d = 0; d < x.shape.size(); ++d) rc.push_back(k->r(d));
    KILN_ASSIGN_OR_RETURN(int32_t a, k->Load(x, rc));
    KILN_ASSIGN_OR_RETURN(int32_t c, k->Load(x, rc));
    const int32_t zero = k->Const(DType::kF32, 0);
    const int32_t lo = k->Bin(OpCode::kMin, k->b().Reduce(ReduceKind::kMin, a), zero);
    const int32_t hi = k->Bin(OpCode::kMax, k->b().Reduce(ReduceKind::kMax, c), zero);
    const int32_t scale =
        k->Bin(OpCode::kDiv, k->Bin(OpCode::kSub, hi, lo), k->Const(DType::kF32, 255));
    const int32_t positive = k->Bin(OpCode::kGt, scale, zero);
    int32_t zp = k->Bin(
        OpCode::kMin,
        k->Bin(OpCode::kMax,
               k->Un(OpCode::kRound, k->Bin(OpCode::kDiv, k->Un(OpCode::kNeg, lo), scale)),
               zero),
        k->Const(DType::kF32, 255));
    zp = k->Sel(positive, zp, zero);
    k->Store(sbuf, {}, {}, scale);
    k->Store(zbuf, {}, {}, k->Cast(zp, DType::kU8));
  }
  if (ir::NumElements(x.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, it));
  const int32_t s = k->b().Load(sbuf, Const(0));
  const int32_t zp_u8 = k->b().Load(zbuf, Const(0));
  const int32_t zp = k->Cast(zp_u8, DType::kF32);
  // A zero scale (all of x is 0) quantizes everything to the zero point.
  const int32_t positive = k->Bin(OpCode::kGt, s, k->Const(DType::kF32, 0));
  const int32_t safe = k->Sel(positive, s, k->Const(DType::kF32, 1));
  k->Store(ybuf, x.shape, it,
           k->Sel(positive, Quantize(*k, v, safe, zp, DType::kU8), zp_u8));
  return absl::OkStatus();
}

// QLinearMatMul (per-tensor parameters): an i64 dot product over K of the
// zero-point-shifted operands in one reduction kernel, requantized in f64
// as the reference does. A loop-IR GEMM: right for the small matrices
// quantized models feed it outside oneDNN, not fast.
absl::Status LowerQLinearMatMul(Lowerer& L, const ir::Node&) {
  std::vector<Operand> in;
  for (int i = 0; i < 8; ++i) {
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    in.push_back(op);
  }
  const Operand &a = in[0], &b = in[3];
  for (int i : {1, 2, 4, 5, 6, 7}) {
    if (ir::NumElements(in[i].shape) != 1) {
      return L.Unimplemented("per-axis parameter (input ", i, ")");
    }
  }
  for (const Operand* q : {&a, &b}) {
    if (q->dtype != DType::kU8 && q->dtype != DType::kI8) return L.Error("operands must be u8/i8");
  }
  if (in[2].dtype != a.dtype || in[5].dtype != b.dtype) {
    return L.Error("zero points must have their operand's dtype");
  }
  if (a.shape.empty() || b.shape.empty()) return L.Error("operands must have rank >= 1");
  Shape ash = a.shape, bsh = b.shape;
  if (ash.size() == 1) ash.insert(ash.begin(), 1);
  if (bsh.size() == 1) bsh.push_back(1);
  const int64_t m = ash[ash.size() - 2], kk = ash.back(), nn = bsh.back();
  if (bsh[bsh.size() - 2] != kk) return L.Error("inner dimensions differ");
  const Shape abatch(ash.begin(), ash.end() - 2), bbatch(bsh.begin(), bsh.end() - 2);
  absl::StatusOr<Shape> batch = ir::BroadcastShapes(abatch, bbatch);
  if (!batch.ok()) return L.Error(batch.status().message());
  Shape full = *batch;
  full.push_back(m);
  full.push_back(nn);
  Shape want = *batch;
  if (a.shape.size() > 1) want.push_back(m);
  if (b.shape.size() > 1) want.push_back(nn);
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != want || out.dtype != in[7].dtype) {
    return L.Error("output must be ", ir::DTypeName(in[7].dtype), ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(full) == 0) return absl::OkStatus();
  auto k = L.NewKernel(full, {kk});
  const Coords it = k->IterCoords();
  const size_t nb = batch->size();
  const Coords bc(it.begin(), it.begin() + nb);
  // A 1-D operand is the K vector itself.
  Coords ac = {k->r(0)}, bcs = {k->r(0)};
  if (a.shape.size() > 1) {
    ac = BroadcastCoords(abatch, bc);
    ac.push_back(it[nb]);
    ac.push_back(k->r(0));
  }
  if (b.shape.size() > 1) {
    bcs = BroadcastCoords(bbatch, bc);
    bcs.push_back(k->r(0));
    bcs.push_back(it[nb + 1]);
  }
  auto scalar = [&](const Operand& op) {
    return k->Load(op, Coords(op.shape.size(), Const(0)));
  };
  KILN_ASSIGN_OR_RETURN(int32_t av, k->Load(a, ac));
  KILN_ASSIGN_OR_RETURN(int32_t bv, k->Load(b, bcs));
  KILN_ASSIGN_OR_RETURN(int32_t az, scalar(in[2]));
  KILN_ASSIGN_OR_RETURN(int32_t bz, scalar(in[5]));
  auto wide = [&](int32_t v) { return k->Cast(v, DType::kI64); };
  const int32_t prod = k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, wide(av), wide(az)),
                              k->Bin(OpCode::kSub, wide(bv), wide(bz)));
  const int32_t acc = k->b().Reduce(ReduceKind::kSum, prod);
  auto f64 = [&](int32_t v) { return k->Cast(v, DType::kF64); };
  KILN_ASSIGN_OR_RETURN(int32_t as, scalar(in[1]));
  KILN_ASSIGN_OR_RETURN(int32_t bs, scalar(in[4]));
  KILN_ASSIGN_OR_RETURN(int32_t ys, scalar(in[6]));
  KILN_ASSIGN_OR_RETURN(int32_t yz, scalar(in[7]));
  const int32_t scale = k->Bin(OpCode::kDiv, k->Bin(OpCode::kMul, f64(as), f64(bs)), f64(ys));
  const auto [lo, hi] = QuantRange(out.dtype);
  int32_t y = k->Un(OpCode::kRound,
                    k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, f64(acc), scale), f64(yz)));
  y = k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, y, k->Const(DType::kF64, lo)),
             k->Const(DType::kF64, hi));
  k->Store(buffer, full, it, k->Cast(y, out.dtype));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Windows: w[n] = sum_j a_j cos(2 pi j n / N'), N' = size (periodic) or
// size - 1 (symmetric). The length is the output's static shape; a size
// given at run time must equal it (checked in the kernel).

LowerFn MakeWindow(std::vector<double> coeffs) {
  return [coeffs](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand size_op, L.Input(0));
    KILN_ASSIGN_OR_RETURN(int64_t periodic, n.AttrOr<int64_t>("periodic", 1));
    const ir::Value& out = L.OutputValue(0);
    if (out.shape.size() != 1 || ir::NumElements(size_op.shape) != 1 ||
        !ir::IsInteger(size_op.dtype) || !ir::IsFloat(out.dtype)) {
      return L.Error("needs one integer size and a 1-D float output, got ",
                     ir::DTypeName(out.dtype), ir::ShapeToString(out.shape));
    }
    const int64_t size = out.shape[0];
    if (const ir::Tensor* t = L.ConstantInput(0)) {
      if (t->GetAsInt64(0) != size) {
        return L.Error("size ", t->GetAsInt64(0), " does not match the output ",
                       ir::ShapeToString(out.shape));
      }
    }
    const DType dt = out.dtype;
    const int32_t buffer = NewOutput(L, 0);
    if (size == 0) return absl::OkStatus();
    const double denom = periodic != 0 ? size : size - 1;
    auto k = L.NewKernel(out.shape);
    const Coords zero(size_op.shape.size(), Const(0));
    int32_t idx = k->Cast(k->b().Index(k->i(0)), DType::kF64);
    if (L.ConstantInput(0) == nullptr) {
      KILN_ASSIGN_OR_RETURN(int32_t given, k->Load(size_op, zero));
      if (k->DTypeOf(given) != DType::kI64) given = k->Cast(given, DType::kI64);
      const int32_t ok = k->Bin(OpCode::kEq, given, k->Const(DType::kI64, size));
      KILN_ASSIGN_OR_RETURN(int32_t checked, LoadIfValid(L, *k, size_op, zero, ok));
      // idx * (checked / size): idx itself when the check passes.
      idx = k->Bin(OpCode::kMul, idx,
                   k->Bin(OpCode::kDiv, k->Cast(checked, DType::kF64),
                          k->Const(DType::kF64, static_cast<double>(size))));
    }
    // Computed in f64 (the reference's precision), then cast.
    int32_t w = k->Const(DType::kF64, coeffs[0]);
    for (size_t j = 1; j < coeffs.size(); ++j) {
      if (denom == 0) {  // size 1, symmetric: every cosine is 1
        w = k->Bin(OpCode::kAdd, w, k->Const(DType::kF64, coeffs[j]));
        continue;
      }
      const double f = 2 * M_PI * static_cast<double>(j) / denom;
      const int32_t c = k->Un(OpCode::kCos, k->Bin(OpCode::kMul, idx, k->Const(DType::kF64, f)));
      w = k->Bin(OpCode::kAdd, w, k->Bin(OpCode::kMul, c, k->Const(DType::kF64, coeffs[j])));
    }
    if (dt != DType::kF64) w = k->Cast(w, dt);
    k->Store(buffer, out.shape, {k->i(0)}, w);
    return absl::OkStatus();
  };
}

// ---------------------------------------------------------------------------
// BitShift on unsigned integers: a multiply or floor division by 2^s (the
// loop IR has no shift op); shifts of the full width or more give 0.

absl::Status LowerBitShift(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand s, L.Input(1));
  KILN_ASSIGN_OR_RETURN(std::string dir, n.Attr<std::string>("direction"));
  if (dir != "LEFT" && dir != "RIGHT") return L.Error("unknown direction '", dir, "'");
  if (x.dtype != DType::kU8 || s.dtype != DType::kU8) {
    return L.Unimplemented("BitShift on ", ir::DTypeName(x.dtype),
                           " (u8 only; the loop IR has no wider unsigned types)");
  }
  const ir::Value& out = L.OutputValue(0);
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel(out.shape);
  const Coords it = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t xv, k->LoadBroadcast(x, it));
  KILN_ASSIGN_OR_RETURN(int32_t sv, k->LoadBroadcast(s, it));
  // 2^min(s, 8) as an exact i64 (powers of two are exact in f32).
  const int32_t sf = k->Bin(OpCode::kMin, k->Cast(sv, DType::kF32), k->Const(DType::kF32, 8));
  const int32_t pow2 =
      k->Cast(k->Bin(OpCode::kPow, k->Const(DType::kF32, 2), sf), DType::kI64);
  const int32_t wide = k->Cast(xv, DType::kI64);
  int32_t y = dir == "LEFT"
                  ? k->Bin(OpCode::kMod, k->Bin(OpCode::kMul, wide, pow2),
                           k->Const(DType::kI64, 256))
                  : k->Bin(OpCode::kDiv, wide, pow2);
  k->Store(buffer, out.shape, it, k->Cast(y, DType::kU8));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// TfIdfVectorizer over integer pools: the pool is known at lowering time, so
// each n-gram's count is one reduction over start positions (per skip),
// unrolled in one kernel per row; each output column is stored directly.

absl::Status LowerTfIdf(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if ((x.dtype != DType::kI32 && x.dtype != DType::kI64) ||
      (x.shape.size() != 1 && x.shape.size() != 2)) {
    return L.Error("X must be i32/i64 [C] or [N, C]");
  }
  if (n.HasAttr("pool_strings")) return L.Unimplemented("string pools");
  KILN_ASSIGN_OR_RETURN(int64_t min_n, n.Attr<int64_t>("min_gram_length"));
  KILN_ASSIGN_OR_RETURN(int64_t max_n, n.Attr<int64_t>("max_gram_length"));
  KILN_ASSIGN_OR_RETURN(int64_t max_skip, n.Attr<int64_t>("max_skip_count"));
  KILN_ASSIGN_OR_RETURN(std::string mode, n.Attr<std::string>("mode"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> counts,
                        n.Attr<std::vector<int64_t>>("ngram_counts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> indexes,
                        n.Attr<std::vector<int64_t>>("ngram_indexes"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pool,
                        n.Attr<std::vector<int64_t>>("pool_int64s"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> weights,
                        n.AttrOr<std::vector<float>>("weights", {}));
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") {
    return L.Error("unknown mode '", mode, "'");
  }
  if (min_n < 1 || max_n < min_n || max_n > static_cast<int64_t>(counts.size()) ||
      max_skip < 0 || max_skip > 64) {
    return L.Error("invalid gram lengths ", min_n, "..", max_n,
                   " or max_skip_count ", max_skip);
  }
  struct Gram {
    std::vector<int64_t> tokens;
    int64_t column;
    double weight;
  };
  std::vector<Gram> grams;
  for (size_t len = 1; len <= counts.size(); ++len) {
    const int64_t start = counts[len - 1];
    const int64_t end = len < counts.size() ? counts[len] : static_cast<int64_t>(pool.size());
    if (start < 0 || end < start || end > static_cast<int64_t>(pool.size()) ||
        (end - start) % static_cast<int64_t>(len) != 0) {
      return L.Error("ngram_counts do not split pool_int64s into n-grams");
    }
    for (int64_t p = start; p < end; p += len) {
      const size_t g = grams.size();
      if (g >= indexes.size()) return L.Error("ngram_indexes is too short");
      grams.push_back({std::vector<int64_t>(pool.begin() + p, pool.begin() + p + len),
                       indexes[g], weights.empty() ? 1.0 : weights[g]});
    }
  }
  if (grams.size() != indexes.size() || (!weights.empty() && weights.size() != indexes.size())) {
    return L.Error("ngram_indexes / weights do not match the pool's ", grams.size(), " n-grams");
  }
  const ir::Value& out = L.OutputValue(0);
  const bool batched = x.shape.size() == 2;
  const int64_t rows = batched ? x.shape[0] : 1, cols = x.shape.back();
  const int64_t num_out = out.shape.empty() ? 0 : out.shape.back();
  if (!ir::IsFloat(out.dtype) ||
      out.shape != (batched ? Shape{rows, num_out} : Shape{num_out})) {
    return L.Error("output must be float [", batched ? "N, " : "", "num_out]");
  }
  for (const Gram& g : grams) {
    if (g.column < 0 || g.column >= num_out) {
      return L.Error("ngram index ", g.column, " outside the output's ", num_out, " columns");
    }
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel({rows}, {std::max<int64_t>(cols, 1)});
  const DType dt = out.dtype;
  const int32_t zero = k->Const(dt, 0), one = k->Const(dt, 1);
  std::vector<int32_t> column(num_out, zero);
  const int32_t start = k->b().Index(k->r(0));
  // Every match first, then the reductions (the C++ emitter expects a
  // kernel's reduction-varying ops ahead of its independent reductions).
  std::vector<std::vector<int32_t>> matches(grams.size());
  for (size_t gi = 0; gi < grams.size(); ++gi) {
    const Gram& g = grams[gi];
    const int64_t len = g.tokens.size();
    if (len < min_n || len > max_n || cols == 0) continue;
    const int64_t skips = len == 1 ? 0 : max_skip;
    for (int64_t skip = 0; skip <= skips; ++skip) {
      const int64_t span = (len - 1) * (skip + 1);
      if (span >= cols) break;
      int32_t match = k->Bin(OpCode::kLt, start, k->Const(DType::kI64, cols - span));
      for (int64_t j = 0; j < len; ++j) {
        Coords c;
        if (batched) c.push_back(k->i(0));
        c.push_back(ir::loop::Min(k->r(0) + j * (skip + 1), cols - 1));
        KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, c));
        match = k->Bin(OpCode::kAnd, match,
                       k->Bin(OpCode::kEq, v, k->Const(x.dtype, static_cast<double>(g.tokens[j]))));
      }
      matches[gi].push_back(k->Sel(match, one, zero));
    }
  }
  for (size_t gi = 0; gi < grams.size(); ++gi) {
    if (matches[gi].empty()) continue;
    const Gram& g = grams[gi];
    int32_t count = zero;
    for (int32_t m : matches[gi]) {
      count = k->Bin(OpCode::kAdd, count, k->b().Reduce(ReduceKind::kSum, m));
    }
    int32_t value = count;
    if (mode == "IDF") value = k->Const(dt, g.weight);
    if (mode == "TFIDF") value = k->Bin(OpCode::kMul, count, k->Const(dt, g.weight));
    column[g.column] = k->Sel(k->Bin(OpCode::kGt, count, zero), value, column[g.column]);
  }
  for (int64_t o = 0; o < num_out; ++o) {
    Coords c;
    if (batched) c.push_back(k->i(0));
    c.push_back(Const(o));
    k->Store(buffer, out.shape, c, column[o]);
  }
  return absl::OkStatus();
}

}  // namespace

void AddMiscLowerings(LowerTable& t) {
  t["OneHot"] = LowerOneHot;
  t["GatherND"] = LowerGatherNd;
  t["ReverseSequence"] = LowerReverseSequence;
  t["TopK"] = LowerTopK;
  t["QuantizeLinear"] = LowerQuantizeLinear;
  t["DequantizeLinear"] = LowerDequantizeLinear;
  t["DynamicQuantizeLinear"] = LowerDynamicQuantizeLinear;
  t["QLinearMatMul"] = LowerQLinearMatMul;
  t["HannWindow"] = MakeWindow({0.5, -0.5});
  t["HammingWindow"] = MakeWindow({25.0 / 46.0, -21.0 / 46.0});
  t["BlackmanWindow"] = MakeWindow({0.42, -0.5, 0.08});
  t["BitShift"] = LowerBitShift;
  t["TfIdfVectorizer"] = LowerTfIdf;
  AddSignalLowerings(t);
  // Last: extends lowerings registered before it.
  AddExtendedLowerings(t);
}

}  // namespace kiln::lowering::internal
