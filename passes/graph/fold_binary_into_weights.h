// File: passes/graph/fold_binary_into_weights.h — pass
// `fold-binary-into-weights`: folds a Mul, Add, Sub or Div by a per-channel
// constant that follows a Conv, ConvTranspose, Gemm or MatMul with constant
// weights into those weights and bias ("binary folding").
#ifndef KILN_PASSES_GRAPH_FOLD_BINARY_INTO_WEIGHTS_H_
#define KILN_PASSES_GRAPH_FOLD_BINARY_INTO_WEIGHTS_H_

#include "passes/graph_pass.h"

namespace kiln::passes {

// Exported models often scale or shift a conv/linear output by constants
// (decomposed norms, folded quantization scales, `x * 0.5`). Each such
// elementwise op between a conv and its activation would break the oneDNN
// conv+post-op fusion, so it is folded away: Mul/Div by k scale W and b per
// output channel, Add/Sub of k shift b (creating a bias when there is none;
// MatMul has no bias, so only Mul/Div fold into it). The constant must
// broadcast per output channel (all dims 1 except the channel axis: [C,1,1],
// [1,C,1,1] or a scalar for a 2-D conv; [N] or a scalar for Gemm/MatMul) and
// must not enlarge the output; the intermediate must have no other reader
// and not be a graph output. Sub and Div fold only with the constant on the
// right, Div only by non-zero values.
class FoldBinaryIntoWeights : public GraphPass {
 public:
  absl::string_view name() const override { return "fold-binary-into-weights"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_FOLD_BINARY_INTO_WEIGHTS_H_
