// File: ir/graph/verifier.h — checks the structural invariants of a Graph:
// run between passes in debug builds, and on freshly imported graphs.
//
//   KILN_RETURN_IF_ERROR(ir::VerifyGraph(graph));  // after a pass
//   KILN_RETURN_IF_ERROR(ir::VerifyGraph(graph, ir::Blame::kModel));
//
// Checked, recursively through subgraphs: every ValueId is in range; values
// are assigned once (graph input, constant, capture or one node output);
// nodes are in topological order; subgraph captures name values visible in
// the enclosing scopes at their node; graph outputs are defined; constants
// match their value's dtype and shape; node outputs have a known dtype; op
// names are not empty; defined values have distinct names.
#ifndef KILN_IR_GRAPH_VERIFIER_H_
#define KILN_IR_GRAPH_VERIFIER_H_

#include "absl/status/status.h"
#include "ir/graph/graph.h"

namespace kiln::ir {

// Who broke the graph: a kiln pass (InternalError, "this is a kiln bug") or
// the model being imported (InvalidArgument).
enum class Blame { kKiln, kModel };

// The first broken invariant, naming the graph, the node (index, name, op)
// and the value.
absl::Status VerifyGraph(const Graph& graph, Blame blame = Blame::kKiln);

}  // namespace kiln::ir

#endif  // KILN_IR_GRAPH_VERIFIER_H_
