// Graph-rewriting helpers for passes.
#include "passes/graph/rewrite_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::passes {

std::vector<int> CountUses(const ir::Graph& graph) {
  std::vector<int> uses(graph.num_values(), 0);
  for (const ir::Node& n : graph.nodes()) {
    for (ir::ValueId in : n.inputs) {
      if (in != ir::kNoValue) ++uses[in];
    }
  }
  return uses;
}

bool IsGraphOutput(const ir::Graph& graph, ir::ValueId id) {
  return std::find(graph.outputs().begin(), graph.outputs().end(), id) !=
         graph.outputs().end();
}

bool IsGraphInput(const ir::Graph& graph, ir::ValueId id) {
  return std::find(graph.inputs().begin(), graph.inputs().end(), id) !=
         graph.inputs().end();
}

void ReplaceAllUses(ir::Graph* graph, ir::ValueId from, ir::ValueId to) {
  for (ir::Node& n : graph->mutable_nodes()) {
    std::replace(n.inputs.begin(), n.inputs.end(), from, to);
  }
  std::replace(graph->mutable_outputs().begin(), graph->mutable_outputs().end(),
               from, to);
}

void EraseNodes(ir::Graph* graph, const std::vector<bool>& remove) {
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < graph->nodes().size(); ++i) {
    if (!remove[i]) kept.push_back(std::move(graph->mutable_nodes()[i]));
  }
  graph->mutable_nodes() = std::move(kept);
}

std::string UniqueName(const ir::Graph& graph, const std::string& base) {
  std::string name = base;
  for (int k = 1; graph.FindValue(name).has_value(); ++k) {
    name = absl::StrCat(base, ".", k);
  }
  return name;
}

namespace {
void Collect(const ir::Graph& graph, absl::flat_hash_set<std::string>* out) {
  for (const ir::Node& n : graph.nodes()) {
    for (const auto& [key, attr] : n.attrs) {
      if (auto* sub = std::get_if<std::shared_ptr<const ir::Graph>>(&attr)) {
        for (const ir::Graph::Capture& c : (*sub)->captures()) {
          out->insert(c.outer_name);
        }
        Collect(**sub, out);
      }
    }
  }
}
}  // namespace

absl::flat_hash_set<std::string> CapturedNames(const ir::Graph& graph) {
  absl::flat_hash_set<std::string> names;
  Collect(graph, &names);
  return names;
}

}  // namespace kiln::passes
