// File: ir/loop/extern_schema.cc — queries over the extern-call schema.
#include "ir/loop/extern_schema.h"

#include <cstdint>
#include <variant>
#include <vector>

namespace kiln::ir::loop {

bool IsReferenceCall(const Kernel& kernel) {
  return kernel.kind == Kernel::Kind::kExtern && kernel.call.op == kReferenceCallOp;
}

std::vector<bool> DynamicOperands(const Kernel& kernel, bool outputs) {
  const std::vector<int32_t>& buffers = outputs ? kernel.call.outputs : kernel.call.inputs;
  std::vector<bool> dynamic(buffers.size(), false);
  if (!IsReferenceCall(kernel)) return dynamic;
  auto it = kernel.call.attrs.find(outputs ? kAttrDynamicOutputs : kAttrDynamicInputs);
  if (it == kernel.call.attrs.end()) return dynamic;
  if (const auto* positions = std::get_if<std::vector<int64_t>>(&it->second)) {
    for (int64_t p : *positions) {
      if (p >= 0 && p < static_cast<int64_t>(dynamic.size())) dynamic[p] = true;
    }
  }
  return dynamic;
}

std::vector<bool> DynamicBuffers(const LoopProgram& program) {
  std::vector<bool> dynamic(program.buffers.size(), false);
  for (const Kernel& k : program.kernels) {
    for (bool outputs : {false, true}) {
      const std::vector<int32_t>& buffers = outputs ? k.call.outputs : k.call.inputs;
      const std::vector<bool> d = DynamicOperands(k, outputs);
      for (size_t j = 0; j < d.size(); ++j) {
        const int32_t b = buffers[j];
        if (d[j] && b >= 0 && static_cast<size_t>(b) < dynamic.size()) dynamic[b] = true;
      }
    }
  }
  return dynamic;
}

}  // namespace kiln::ir::loop
