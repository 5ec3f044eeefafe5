// Pass eliminate-identity.
#include "passes/graph/eliminate_identity.h"

#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

// Identity, or Dropout that is a no-op at inference: no training_mode input
// (or a constant false one) and no consumer of its mask.
bool IsNoOp(const ir::Graph& g, const ir::Node& n, const std::vector<int>& uses) {
  if (!n.domain.empty() || n.inputs.empty() || n.inputs[0] == ir::kNoValue ||
      n.outputs.empty() || n.outputs[0] == ir::kNoValue) {
    return false;
  }
  if (n.op == "Identity") return n.inputs.size() == 1 && n.outputs.size() == 1;
  if (n.op != "Dropout") return false;
  if (n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue &&
      (uses[n.outputs[1]] > 0 || IsGraphOutput(g, n.outputs[1]))) {
    return false;
  }
  if (n.has_input(2)) {  // training_mode
    const ir::Tensor* t = g.constant(n.inputs[2]);
    if (t == nullptr || t->num_elements() != 1 || t->GetAsInt64(0) != 0) return false;
  }
  // Before opset 7 Dropout had is_test; kiln imports opset >= 7 only.
  return true;
}

}  // namespace

absl::StatusOr<bool> EliminateIdentity::Run(ir::Graph* graph) {
  const absl::flat_hash_set<std::string> captured = CapturedNames(*graph);
  std::vector<int> uses = CountUses(*graph);
  // Producer node index of every value.
  std::vector<int> producer(graph->num_values(), -1);
  for (int i = 0; i < static_cast<int>(graph->nodes().size()); ++i) {
    for (ir::ValueId out : graph->nodes()[i].outputs) {
      if (out != ir::kNoValue) producer[out] = i;
    }
  }
  std::vector<bool> remove(graph->nodes().size(), false);
  bool changed = false;
  for (int i = 0; i < static_cast<int>(graph->nodes().size()); ++i) {
    const ir::Node& n = graph->nodes()[i];
    if (!IsNoOp(*graph, n, uses)) continue;
    const ir::ValueId in = n.inputs[0], out = n.outputs[0];
    if (captured.contains(graph->value(out).name)) continue;
    if (!IsGraphOutput(*graph, out)) {
      ReplaceAllUses(graph, out, in);
    } else {
      // Keep the output's value: make the input's producer write it.
      const int p = producer[in];
      if (p < 0 || IsGraphOutput(*graph, in) ||
          captured.contains(graph->value(in).name)) {
        continue;
      }
      ReplaceAllUses(graph, in, out);
      for (ir::ValueId& o : graph->mutable_nodes()[p].outputs) {
        if (o == in) o = out;
      }
      producer[out] = p;
      // Consumers between the producer and this node now read `out`, which
      // is still defined by the producer: order is preserved.
    }
    remove[i] = true;
    changed = true;
  }
  if (!changed) return false;
  EraseNodes(graph, remove);
  return true;
}

}  // namespace kiln::passes
