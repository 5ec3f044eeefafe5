// File: passes/graph/fold_constant_transpose.h — pass
// `fold-constant-transpose`: a Transpose of a constant becomes a constant
// holding the permuted tensor.
#ifndef KILN_PASSES_GRAPH_FOLD_CONSTANT_TRANSPOSE_H_
#define KILN_PASSES_GRAPH_FOLD_CONSTANT_TRANSPOSE_H_

#include "passes/graph_pass.h"

namespace kiln::passes {

// Exporters write linear layers as MatMul(x, Transpose(W)): folding the
// Transpose lets MatMul read constant weights directly, so weight folding
// and oneDNN's prepacking see a plain constant instead of a runtime copy.
// The Transpose's output value becomes the constant (its name is kept);
// the input constant stays for any other reader. Transposes writing a graph
// output or a value a subgraph captures are left alone.
class FoldConstantTranspose : public GraphPass {
 public:
  absl::string_view name() const override { return "fold-constant-transpose"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_FOLD_CONSTANT_TRANSPOSE_H_
