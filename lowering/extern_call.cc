// File: lowering/extern_call.cc — lowering of library ops (the family files
// add Conv, Gemm, MatMul, the RNN ops and kiln's fused Conv/GEMM nodes with
// LowerTable::AddExternCall) to extern kernels: the op and its attributes,
// inputs materialized as row-major buffers. The runtime dispatches them to
// oneDNN; tests run them on the reference interpreter (interp/loop_module.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"
#include "lowering/extern_attrs.h"
#include "lowering/lowerer.h"

namespace kiln::lowering {

bool IsExternOp(const ir::Node& node) {
  const bool kiln = node.domain == ir::loop::kKilnDomain;
  if (!kiln && !node.domain.empty() && node.domain != "ai.onnx") return false;
  // kiln's fused ops exist in domain "kiln" only (LowerExternCall refuses
  // them elsewhere), ONNX's ops in the default domain only.
  return IsKilnFusedOp(node.op) == kiln &&
         internal::OpLowerings().IsExternCall(node.op);
}

namespace internal {
namespace {

constexpr char kFusedNodesAttr[] = "fused_nodes";

// Integer library calls (and kiln.FusedLSTM, whose 8-bit R is packed with its
// scales and zero points) read their scales, zero points and weights when the
// call is built (the weights minus their zero point, requantization scales):
// every constant input, splats included, is passed as its constant buffer.
// Other calls keep splat constants as the fill kernels lowering gives them.
bool ReadsConstantBuffers(const ir::Node& n) {
  if (n.domain == ir::loop::kKilnDomain) return n.op == "FusedLSTM";  // its 8-bit R
  return n.domain.empty() && (n.op == "ConvInteger" || n.op == "QLinearConv" ||
                              n.op == "MatMulInteger" || n.op == "QLinearMatMul");
}

}  // namespace

absl::Status LowerExternCall(Lowerer& L, const ir::Node& n) {
  const bool kiln = n.domain == ir::loop::kKilnDomain;
  if (IsKilnFusedOp(n.op) != kiln) {
    return L.Unimplemented("no lowering for op ", n.op, " in this domain");
  }
  ir::loop::ExternCall call;
  call.op = absl::StrCat(kiln ? ir::loop::kKilnOpPrefix : ir::loop::kOnnxOpPrefix, n.op);
  std::vector<int64_t> input_slots, output_slots;
  for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
    if (!L.HasInput(i)) continue;
    int32_t b = -1;
    if (ReadsConstantBuffers(n) && L.ConstantInput(i) != nullptr) {
      KILN_ASSIGN_OR_RETURN(b, L.BufferOf(n.inputs[i]));
    } else {
      KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
      KILN_ASSIGN_OR_RETURN(b, L.Materialize(op));
    }
    call.inputs.push_back(b);
    input_slots.push_back(i);
  }
  for (int i = 0; i < static_cast<int>(n.outputs.size()); ++i) {
    if (!L.HasOutput(i)) continue;
    call.outputs.push_back(L.OutputBuffer(i));
    output_slots.push_back(i);
  }
  std::vector<std::string> lists;
  std::vector<std::string> computes;
  for (const auto& [name, value] : n.attrs) {
    if (name == kFusedNodesAttr && kiln) {
      // Node names, for reports only: a separator inside one is replaced.
      if (const auto* v = std::get_if<std::vector<std::string>>(&value)) {
        for (const std::string& s : *v) {
          computes.push_back(absl::StrReplaceAll(s, {{ir::loop::kListSeparator, "_"}}));
        }
        call.attrs[name] = absl::StrJoin(computes, ir::loop::kListSeparator);
        lists.push_back(name);
        continue;
      }
    }
    if (const auto* v = std::get_if<int64_t>(&value)) {
      call.attrs[name] = *v;
    } else if (const auto* v = std::get_if<float>(&value)) {
      call.attrs[name] = static_cast<double>(*v);
    } else if (const auto* v = std::get_if<std::string>(&value)) {
      call.attrs[name] = *v;
    } else if (const auto* v = std::get_if<std::vector<int64_t>>(&value)) {
      call.attrs[name] = *v;
    } else if (const auto* v = std::get_if<std::vector<float>>(&value)) {
      call.attrs[name] = std::vector<double>(v->begin(), v->end());
    } else if (const auto* v = std::get_if<std::vector<std::string>>(&value)) {
      for (const std::string& s : *v) {
        if (s.find(ir::loop::kListSeparator) != std::string::npos) {
          return L.Error("attribute '", name, "' holds a '", ir::loop::kListSeparator, "'");
        }
      }
      call.attrs[name] = absl::StrJoin(*v, ir::loop::kListSeparator);
      lists.push_back(name);
    } else {
      return L.Unimplemented("attribute '", name,
                             "' (tensor or graph) on an extern op");
    }
  }
  call.attrs[ir::loop::kAttrOpset] = L.opset();
  call.attrs[ir::loop::kAttrInputSlots] = input_slots;
  call.attrs[ir::loop::kAttrOutputSlots] = output_slots;
  if (!lists.empty()) call.attrs[ir::loop::kAttrStringLists] = absl::StrJoin(lists, ir::loop::kListSeparator);

  ir::loop::Kernel k;
  k.name = L.NewKernelName(n.op);
  k.description = n.op;
  k.kind = ir::loop::Kernel::Kind::kExtern;
  k.call = std::move(call);
  computes.erase(std::remove(computes.begin(), computes.end(), std::string()),
                 computes.end());
  if (computes.empty()) computes.push_back(L.NodeLabel());
  k.ops = std::move(computes);
  L.program().kernels.push_back(std::move(k));
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace kiln::lowering
