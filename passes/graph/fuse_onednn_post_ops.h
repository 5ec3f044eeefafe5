// File: passes/graph/fuse_onednn_post_ops.h — pass `fuse-onednn-post-ops`:
// rewrites each Conv / ConvTranspose / Gemm / MatMul that oneDNN takes, with
// the chain of element-wise nodes it can absorb as post-ops, into one
// kiln.FusedConv / FusedConvTranspose / FusedGemm / FusedMatMul node.
#ifndef KILN_PASSES_GRAPH_FUSE_ONEDNN_POST_OPS_H_
#define KILN_PASSES_GRAPH_FUSE_ONEDNN_POST_OPS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

// What one run fused and why chains stopped, for the compile report.
struct OneDnnFusionStats {
  int anchors = 0;    // Conv/ConvTranspose/Gemm/MatMul nodes seen
  int supported = 0;  // of those, the ones oneDNN takes
  int fused = 0;      // rewritten into a fused node (at least one post-op)
  std::map<std::string, int> post_ops;     // post-op kind -> count
  std::map<std::string, int> unsupported;  // reason -> anchors refused
  std::map<std::string, int> chain_ends;   // reason -> chains that stopped so
  // Element-wise nodes reading a supported anchor's (or chain's) result that
  // stay out of the library call, each with why: they run as loop-IR
  // kernels (fused there with their neighbours where possible).
  struct Unfused {
    std::string node;    // the element-wise node's name
    std::string op;      // its ONNX op type
    std::string anchor;  // the Conv/Gemm/MatMul whose chain it follows
    std::string reason;
  };
  std::vector<Unfused> unfused_elementwise;
};

// oneDNN applies post-ops to the accumulator before it writes dst, so
// conv+bias+relu or matmul+bias+gelu costs one pass over memory instead of
// three. The node format is the contract with the oneDNN backend (passes do
// not depend on backends/): op "Fused<Anchor>", domain "kiln"; inputs are
// the anchor's, then one per binary post-op operand; attributes are the
// anchor's plus
//   post_ops        STRINGS  kinds (onednn::PostOpKind names), in order
//   post_op_alphas  FLOATS   one per post-op (leaky_relu/elu alpha, clip min,
//                            hardsigmoid alpha, linear scale, sum scale, ...)
//   post_op_betas   FLOATS   one per post-op (clip max, hardsigmoid beta,
//                            linear shift, ...)
//   post_op_inputs  INTS     operand index among the node's inputs for
//                            add/sub/mul/sum, -1 otherwise
//   fused_nodes     STRINGS  the names of the nodes folded in, anchor first.
// "sum" accumulates onto a full-size activation computed elsewhere (a
// residual), "add" takes a broadcast operand (bias, mask).
//
// Anchors are taken in graph order; each chain grows greedily while the
// running result is read only by the nodes the next match covers (a value
// another node reads, a graph output or a captured value ends it: work is
// never dropped). The fused node writes the chain's final value, keeping its
// name, at the position of the chain's last node. Anchors with no post-op
// stay as they are.
//
// First, nodes that only drop or add dims of extent 1 of an anchor's result
// (Squeeze, Unsqueeze, Reshape, Flatten; a Slice keeping every element)
// move below the element-wise nodes computed from it and constants: those
// then compute in the anchor's shape, their constants reshaped to broadcast
// alike, and each of their results read elsewhere is reshaped back. A 1-D
// conv stored as 2-D and squeezed before its bias and activation (jax2tf)
// so keeps them as post-ops.
class FuseOneDnnPostOps : public GraphPass {
 public:
  absl::string_view name() const override { return "fuse-onednn-post-ops"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;

  // Figures of the last Run.
  const OneDnnFusionStats& stats() const { return stats_; }

 private:
  OneDnnFusionStats stats_;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_FUSE_ONEDNN_POST_OPS_H_
