// Pass fold-cast-chains.
#include "passes/graph/fold_cast_chains.h"

#include <vector>

#include "passes/graph/rewrite_util.h"

namespace kiln::passes {

bool IsLosslessCast(ir::DType from, ir::DType to) {
  using ir::DType;
  if (from == DType::kInvalid || to == DType::kInvalid) return false;
  if (from == to || from == DType::kBool) return true;
  switch (from) {
    case DType::kF16:
    case DType::kBF16: return to == DType::kF32 || to == DType::kF64;
    case DType::kF32: return to == DType::kF64;
    case DType::kI8:
    case DType::kU8:
      return to == DType::kI32 || to == DType::kI64 || ir::IsFloat(to);
    case DType::kI32: return to == DType::kI64 || to == DType::kF64;
    default: return false;
  }
}

namespace {

bool IsCast(const ir::Node& n) {
  return n.op == "Cast" && n.domain.empty() && n.inputs.size() == 1 && n.outputs.size() == 1 &&
         n.inputs[0] != ir::kNoValue && n.outputs[0] != ir::kNoValue;
}

}  // namespace

absl::StatusOr<bool> FoldCastChains::Run(ir::Graph* graph) {
  // The Cast node producing each value, or -1.
  std::vector<int> cast_of(graph->num_values(), -1);
  bool changed = false;
  std::vector<ir::Node>& nodes = graph->mutable_nodes();
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    ir::Node& n = nodes[i];
    if (!IsCast(n)) continue;
    const ir::DType to = graph->value(n.outputs[0]).dtype;
    // Skip every lossless cast in front of this one (nodes are in order:
    // producers were visited, and rewired, first).
    for (int p = cast_of[n.inputs[0]]; p >= 0; p = cast_of[n.inputs[0]]) {
      const ir::ValueId first_in = nodes[p].inputs[0];
      if (!IsLosslessCast(graph->value(first_in).dtype, graph->value(n.inputs[0]).dtype)) break;
      n.inputs[0] = first_in;
      changed = true;
    }
    if (to != ir::DType::kInvalid && graph->value(n.inputs[0]).dtype == to) {
      n.op = "Identity";
      n.attrs.clear();
      changed = true;
      continue;
    }
    cast_of[n.outputs[0]] = i;
  }
  return changed;
}

}  // namespace kiln::passes
