// File: lowering/generator.cc — lowerings of ONNX's generator family
// (onnx/defs/generator): ConstantOfShape and constant Range fold at lowering
// time; Range with run-time bounds and EyeLike are loop kernels.
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

absl::Status LowerConstantOfShape(Lowerer& L, const ir::Node& n) {
  const ir::Value& out = L.OutputValue(0);
  double v = 0;
  if (n.HasAttr("value")) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, n.Attr<ir::Tensor>("value"));
    if (t.num_elements() != 1 || t.dtype() != out.dtype) {
      return L.Error("value must be one element of the output dtype");
    }
    v = t.GetAsDouble(0);
  } else if (out.dtype != DType::kF32) {
    return L.Error("output must be f32 without a value attribute");
  }
  Operand op;
  op.splat = v;
  L.SetOutputView(0, op);
  return absl::OkStatus();
}

absl::Status LowerRange(Lowerer& L, const ir::Node& n) {
  const ir::Value& out = L.OutputValue(0);
  const DType dt = out.dtype;
  if (dt == DType::kBool || out.shape.size() != 1) return L.Error("bad output type");
  const int64_t count = out.shape[0];
  const ir::Tensor* s = L.ConstantInput(0);
  const ir::Tensor* d = L.ConstantInput(2);
  if (s != nullptr && d != nullptr && L.ConstantInput(1) != nullptr) {
    ir::Tensor t(dt, out.shape);
    for (int64_t i = 0; i < count; ++i) {
      ir::Tensor one = ir::IsFloat(dt)
                           ? ir::Tensor::Scalar<double>(s->GetAsDouble(0) +
                                                        i * d->GetAsDouble(0))
                           : ir::Tensor::Scalar<int64_t>(
                                 static_cast<int64_t>(static_cast<uint64_t>(s->GetAsInt64(0)) +
                                                      static_cast<uint64_t>(i) *
                                                          static_cast<uint64_t>(d->GetAsInt64(0))));
      switch (dt) {
        case DType::kF32: t.data<float>()[i] = static_cast<float>(one.GetAsDouble(0)); break;
        case DType::kF64: t.data<double>()[i] = one.GetAsDouble(0); break;
        case DType::kI64: t.data<int64_t>()[i] = one.GetAsInt64(0); break;
        case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(one.GetAsInt64(0)); break;
        default: return L.Unimplemented("Range of ", ir::DTypeName(dt));
      }
    }
    L.SetOutputConstant(0, std::move(t));
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(Operand start, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand delta, L.Input(2));
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  const Coords c = k->IterCoords();
  const size_t sr = start.shape.size(), dr = delta.shape.size();
  KILN_ASSIGN_OR_RETURN(int32_t sv, k->Load(start, Coords(sr, Const(0))));
  KILN_ASSIGN_OR_RETURN(int32_t dv, k->Load(delta, Coords(dr, Const(0))));
  const DType cd = ir::IsFloat(dt) ? DType::kF64 : DType::kI64;
  const int32_t i = k->b().Index(c[0], cd);
  int32_t r = k->Bin(OpCode::kAdd, k->Cast(sv, cd),
                     k->Bin(OpCode::kMul, i, k->Cast(dv, cd)));
  k->Store(buffer, out.shape, c, k->Cast(r, dt));
  return absl::OkStatus();
}

absl::Status LowerEyeLike(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t diag, n.AttrOr<int64_t>("k", 0));
  if (x.shape.size() != 2) return L.Error("input must be 2-D");
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != x.shape) return L.Error("output shape differs from the input's");
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  const Coords it = k->IterCoords();
  const int32_t on = k->Bin(OpCode::kEq, k->b().Index(k->Simplify(it[1] - it[0])),
                            k->Const(DType::kI64, static_cast<double>(diag)));
  int32_t y = on;
  if (out.dtype != DType::kBool) {
    y = k->Sel(on, k->Const(out.dtype, 1), k->Const(out.dtype, 0));
  }
  k->Store(buffer, out.shape, it, y);
  return absl::OkStatus();
}

}  // namespace

void AddGeneratorLowerings(LowerTable& t) {
  t.Add("ConstantOfShape", LowerConstantOfShape);
  t.Add("Range", LowerRange);
  t.Add("EyeLike", LowerEyeLike);
}

}  // namespace kiln::lowering::internal
