// File: lowering/quantization.cc — lowerings of ONNX's quantization family
// (onnx/defs/quantization): QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear (u8/i8, per tensor or per axis).
#include <cstdint>
#include <optional>

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

struct QuantParams {
  Operand scale;
  std::optional<Operand> zero_point;
  int64_t axis = -1;  // -1: per tensor
};

absl::StatusOr<QuantParams> ReadQuantParams(Lowerer& L, const ir::Node& n,
                                            const Shape& x_shape) {
  QuantParams p;
  KILN_ASSIGN_OR_RETURN(p.scale, L.Input(1));
  if (!ir::IsFloat(p.scale.dtype)) {
    return L.Error("scale is ", ir::DTypeName(p.scale.dtype), ", expected a float type");
  }
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
    return L.Error("zero point is ", ir::DTypeName(p.zero_point->dtype), " but y is ",
                   ir::DTypeName(qt), " (ONNX requires one type)");
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
  if (p.zero_point.has_value() && p.zero_point->dtype != x.dtype) {
    return L.Error("zero point is ", ir::DTypeName(p.zero_point->dtype), " but x is ",
                   ir::DTypeName(x.dtype), " (ONNX requires one type)");
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
  // x - zp is exact in i32 for 8-bit x (within [-255, 255]; i32 lanes
  // vectorize) and in i64 for i32 x, then one rounding.
  const DType exact = x.dtype == DType::kI32 ? DType::kI64 : DType::kI32;
  v = k->Cast(v, exact);
  if (p.zero_point.has_value()) {
    KILN_ASSIGN_OR_RETURN(int32_t zp, LoadParam(*k, *p.zero_point, p.axis, it));
    v = k->Bin(OpCode::kSub, v, k->Cast(zp, exact));
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

}  // namespace

void AddQuantizationLowerings(LowerTable& t) {
  t.Add("QuantizeLinear", LowerQuantizeLinear);
  t.Add("DequantizeLinear", LowerDequantizeLinear);
  t.Add("DynamicQuantizeLinear", LowerDynamicQuantizeLinear);
}

}  // namespace kiln::lowering::internal
