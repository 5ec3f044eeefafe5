// File: passes/graph/eliminate_dead_code.h — pass `eliminate-dead-code`:
// removes nodes none of whose outputs reach a graph output or a subgraph
// capture, and constants nothing reads. ONNX ops have no side effects.
#ifndef KILN_PASSES_GRAPH_ELIMINATE_DEAD_CODE_H_
#define KILN_PASSES_GRAPH_ELIMINATE_DEAD_CODE_H_

#include "passes/graph_pass.h"

namespace kiln::passes {

class EliminateDeadCode : public GraphPass {
 public:
  absl::string_view name() const override { return "eliminate-dead-code"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_ELIMINATE_DEAD_CODE_H_
