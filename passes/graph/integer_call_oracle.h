// File: passes/graph/integer_call_oracle.h — the graph passes' question to the
// call library about an integer node (fuse-qdq, integer-calls-in-f32).
#ifndef KILN_PASSES_GRAPH_INTEGER_CALL_ORACLE_H_
#define KILN_PASSES_GRAPH_INTEGER_CALL_ORACLE_H_

#include <functional>

#include "absl/status/status.h"
#include "ir/graph/graph.h"

namespace kiln::passes {

// Whether the call library runs `node` of `graph` (its constant inputs as
// constants, the others as run-time inputs) as an integer library call on
// this CPU: OK, or why not (Unimplemented). compiler/pipeline.cc answers by
// lowering the node alone and asking lowering's LibraryCallOracle (oneDNN on
// the compiling CPU). Unset: the passes assume every integer call is taken.
using IntegerCallOracle =
    std::function<absl::Status(const ir::Graph& graph, const ir::Node& node)>;

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_INTEGER_CALL_ORACLE_H_
