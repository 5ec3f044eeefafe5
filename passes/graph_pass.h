// File: passes/graph_pass.h — the contract every graph pass implements (after
// XLA's HloPassInterface): a kebab-case name that is also the --passes= /
// --disable-pass= token, the dump tag and the test name, and Run returning
// whether the graph changed.
#ifndef KILN_PASSES_GRAPH_PASS_H_
#define KILN_PASSES_GRAPH_PASS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"

namespace kiln::passes {

class GraphPass {
 public:
  virtual ~GraphPass() = default;
  virtual absl::string_view name() const = 0;
  // True when the graph changed. Errors: InvalidArgument for a model the
  // pass finds malformed, InternalError for a broken kiln invariant.
  virtual absl::StatusOr<bool> Run(ir::Graph* graph) = 0;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_PASS_H_
