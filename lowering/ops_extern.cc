// Lowering of library ops (Conv, GEMM, RNN families) to extern kernels: the
// ONNX op and its attributes, inputs materialized as row-major buffers.
// The runtime dispatches them to oneDNN; tests run them through the
// reference interpreter (lowering/extern_executor.h).
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "lowering/extern_attrs.h"
#include "lowering/lowerer.h"

namespace kiln::lowering {

bool IsExternOp(const ir::Node& node) {
  static const char* const kOps[] = {
      "Conv",  "ConvTranspose", "ConvInteger", "Gemm", "MatMul",
      "MatMulInteger", "Einsum", "LSTM", "GRU", "RNN", "LRN"};
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  for (const char* op : kOps) {
    if (node.op == op) return true;
  }
  return false;
}

namespace internal {
namespace {

absl::Status LowerExtern(Lowerer& L, const ir::Node& n) {
  ir::loop::ExternCall call;
  call.op = absl::StrCat(kExternOpPrefix, n.op);
  std::vector<int64_t> input_slots, output_slots;
  for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
    if (!L.HasInput(i)) continue;
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    KILN_ASSIGN_OR_RETURN(int32_t b, L.Materialize(op));
    call.inputs.push_back(b);
    input_slots.push_back(i);
  }
  for (int i = 0; i < static_cast<int>(n.outputs.size()); ++i) {
    if (!L.HasOutput(i)) continue;
    call.outputs.push_back(L.OutputBuffer(i));
    output_slots.push_back(i);
  }
  std::vector<std::string> lists;
  for (const auto& [name, value] : n.attrs) {
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
        if (s.find(kListSeparator) != std::string::npos) {
          return L.Error("attribute '", name, "' holds a '", kListSeparator, "'");
        }
      }
      call.attrs[name] = absl::StrJoin(*v, kListSeparator);
      lists.push_back(name);
    } else {
      return L.Unimplemented("attribute '", name,
                             "' (tensor or graph) on an extern op");
    }
  }
  call.attrs[kAttrOpset] = L.opset();
  call.attrs[kAttrInputSlots] = input_slots;
  call.attrs[kAttrOutputSlots] = output_slots;
  if (!lists.empty()) call.attrs[kAttrStringLists] = absl::StrJoin(lists, kListSeparator);

  ir::loop::Kernel k;
  k.name = L.NewKernelName(n.op);
  k.description = n.op;
  k.kind = ir::loop::Kernel::Kind::kExtern;
  k.call = std::move(call);
  k.ops.push_back(L.NodeLabel());
  L.program().kernels.push_back(std::move(k));
  return absl::OkStatus();
}

}  // namespace

void AddExternLowerings(LowerTable& t) {
  for (const char* op : {"Conv", "ConvTranspose", "ConvInteger", "Gemm", "MatMul",
                         "MatMulInteger", "Einsum", "LSTM", "GRU", "RNN", "LRN"}) {
    t[op] = LowerExtern;
  }
}

}  // namespace internal
}  // namespace kiln::lowering
