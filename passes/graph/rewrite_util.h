// File: passes/graph/rewrite_util.h — small graph-rewriting helpers shared by
// the graph passes: use counts, replacing uses, names subgraphs capture.
#ifndef KILN_PASSES_GRAPH_REWRITE_UTIL_H_
#define KILN_PASSES_GRAPH_REWRITE_UTIL_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "ir/graph/graph.h"

namespace kiln::passes {

// Number of node inputs reading each value (graph outputs not counted).
std::vector<int> CountUses(const ir::Graph& graph);
bool IsGraphOutput(const ir::Graph& graph, ir::ValueId id);
bool IsGraphInput(const ir::Graph& graph, ir::ValueId id);
// Every node input and graph output reading `from` reads `to` instead.
void ReplaceAllUses(ir::Graph* graph, ir::ValueId from, ir::ValueId to);
// Removes the nodes whose `remove` flag is set, keeping the others' order.
void EraseNodes(ir::Graph* graph, const std::vector<bool>& remove);
// `base`, or `base.1`, `base.2`, ...: the first name no value of `graph` has.
std::string UniqueName(const ir::Graph& graph, const std::string& base);
// Outer-scope names that subgraphs (at any depth) of `graph` capture. Values
// with these names must keep them: captures bind by name.
absl::flat_hash_set<std::string> CapturedNames(const ir::Graph& graph);

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_REWRITE_UTIL_H_
