// Pass eliminate-dead-code: one backward sweep marks live values.
#include "passes/graph/eliminate_dead_code.h"

#include "passes/graph/rewrite_util.h"

namespace kiln::passes {

absl::StatusOr<bool> EliminateDeadCode::Run(ir::Graph* graph) {
  std::vector<bool> live(graph->num_values(), false);
  for (ir::ValueId out : graph->outputs()) live[out] = true;
  for (const std::string& name : CapturedNames(*graph)) {
    if (std::optional<ir::ValueId> id = graph->FindValue(name)) live[*id] = true;
  }
  std::vector<ir::Node>& nodes = graph->mutable_nodes();
  std::vector<bool> keep(nodes.size(), false);
  for (int i = static_cast<int>(nodes.size()) - 1; i >= 0; --i) {
    for (ir::ValueId out : nodes[i].outputs) {
      if (out != ir::kNoValue && live[out]) keep[i] = true;
    }
    if (!keep[i]) continue;
    for (ir::ValueId in : nodes[i].inputs) {
      if (in != ir::kNoValue) live[in] = true;
    }
  }
  bool changed = false;
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (keep[i]) {
      kept.push_back(std::move(nodes[i]));
    } else {
      changed = true;
    }
  }
  nodes = std::move(kept);
  std::vector<ir::ValueId> dead_constants;
  for (const auto& [id, tensor] : graph->constants()) {
    if (!live[id]) dead_constants.push_back(id);
  }
  for (ir::ValueId id : dead_constants) graph->RemoveConstant(id);
  return changed || !dead_constants.empty();
}

}  // namespace kiln::passes
