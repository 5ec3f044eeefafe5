// File: passes/graph/fold_dequantize_linear.h — pass `fold-dequantize-linear`:
// a DequantizeLinear of constants becomes the f32 constant it computes.
#ifndef KILN_PASSES_GRAPH_FOLD_DEQUANTIZE_LINEAR_H_
#define KILN_PASSES_GRAPH_FOLD_DEQUANTIZE_LINEAR_H_

#include "passes/graph_pass.h"

namespace kiln::passes {

// A quantized model's weights are DequantizeLinear nodes over constant 8-bit
// tensors. What fuse-qdq did not turn into an integer call computes in f32:
// folding the DequantizeLinear gives the Conv or MatMul constant f32
// weights, which the weight folds and oneDNN's prepacking need. Values are
// ONNX's (x - zero_point) * scale, rounded as the reference interpreter
// rounds them (float(x - zero_point) * float(scale)), per tensor or along
// `axis`. Only f32 outputs of u8/i8/i32 constants with f32 scales fold;
// other forms (and malformed ones, which lowering reports) stay nodes, and
// so do nodes writing a graph output or a captured value. The output value
// keeps its name.
class FoldDequantizeLinear : public GraphPass {
 public:
  absl::string_view name() const override { return "fold-dequantize-linear"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_FOLD_DEQUANTIZE_LINEAR_H_
