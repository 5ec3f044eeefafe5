// File: passes/graph/eliminate_identity.h — pass `eliminate-identity`:
// removes Identity nodes and inference-mode Dropout (no mask consumer, no
// training), rewiring consumers to the input.
#ifndef KILN_PASSES_GRAPH_ELIMINATE_IDENTITY_H_
#define KILN_PASSES_GRAPH_ELIMINATE_IDENTITY_H_

#include "passes/graph_pass.h"

namespace kiln::passes {

// A graph output keeps its value (its name is the user's): when the removed
// node writes a graph output, the producer of its input writes that output
// instead; when the input is itself a graph input, constant or output, the
// node stays (it is a real copy between two named interface values).
class EliminateIdentity : public GraphPass {
 public:
  absl::string_view name() const override { return "eliminate-identity"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_ELIMINATE_IDENTITY_H_
