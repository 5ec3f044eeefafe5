// File: lowering/logical.cc — lowerings of ONNX's logical family
// (onnx/defs/logical): comparisons, And/Or/Xor/Not and BitShift, one
// elementwise loop kernel per node.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"
#include "lowering/elementwise.h"
#include "lowering/kernel_util.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

absl::Status LowerComparison(Lowerer& L, const ir::Node& n, OpCode code) {
  KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
  if (ins.size() != 2) return L.Error("needs two inputs");
  KILN_RETURN_IF_ERROR(RequireSame(L, ins));
  if (ins[0].dtype == DType::kBool && code != OpCode::kEq) {
    return L.Error("does not accept bool inputs");
  }
  return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    if (ins[0].dtype == DType::kBool) {
      return k.Un(OpCode::kNot, k.Bin(OpCode::kXor, v[0], v[1]));
    }
    return k.Bin(code, v[0], v[1]);
  });
}

absl::Status LowerLogic(Lowerer& L, const ir::Node& n, OpCode code) {
  KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
  for (const Operand& op : ins) {
    if (op.dtype != DType::kBool) return L.Error("needs bool inputs");
  }
  return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    return v.size() == 1 ? k.Un(code, v[0]) : k.Bin(code, v[0], v[1]);
  });
}

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

}  // namespace

void AddLogicalLowerings(LowerTable& t) {
  t.Add("Equal", [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kEq); });
  t.Add("Less", [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kLt); });
  t.Add("LessOrEqual", [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kLe); });
  t.Add("Greater", [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kGt); });
  t.Add("GreaterOrEqual", [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kGe); });
  t.Add("Not", [](Lowerer& L, const ir::Node& n) { return LowerLogic(L, n, OpCode::kNot); });
  t.Add("And", [](Lowerer& L, const ir::Node& n) { return LowerLogic(L, n, OpCode::kAnd); });
  t.Add("Or", [](Lowerer& L, const ir::Node& n) { return LowerLogic(L, n, OpCode::kOr); });
  t.Add("Xor", [](Lowerer& L, const ir::Node& n) { return LowerLogic(L, n, OpCode::kXor); });
  t.Add("BitShift", LowerBitShift);
}

}  // namespace kiln::lowering::internal
