// File: passes/graph/fold_batch_norm.h — pass `fold-batch-norm`: folds an
// inference BatchNormalization into the constant weights and bias of the
// Conv, ConvTranspose or Gemm that feeds it, and the per-output-channel affine
// fold underneath it (shared with fold-binary-into-weights).
#ifndef KILN_PASSES_GRAPH_FOLD_BATCH_NORM_H_
#define KILN_PASSES_GRAPH_FOLD_BATCH_NORM_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

// kiln's hybrid strategy runs Conv/GEMM as oneDNN primitives with fused
// post-ops: a BatchNormalization left between a conv and its ReLU would split
// conv+bn+relu into two kernels. Folding it into the weights
// (W' = W * s per output channel, b' = (b - mean) * s + B with
// s = scale / sqrt(var + eps)) removes it. Only inference BN (no
// training_mode, no running-stat outputs) whose parameters are constants is
// folded, and only when the producer's output feeds nothing else. A BN with
// no foldable producer stays (lowering turns it into an affine elementwise).
// New weight and bias constants are created ("<w>.bn_folded"); constants
// other nodes read are never changed.
class FoldBatchNorm : public GraphPass {
 public:
  absl::string_view name() const override { return "fold-batch-norm"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;
};

// y[..., c, ...] * scale[c] + shift[c] along a producer's output channels.
struct ChannelAffine {
  std::vector<double> scale;
  std::vector<double> shift;
};

// The number of output channels of `node` when it is a Conv, ConvTranspose,
// Gemm or MatMul (x @ W) whose weights (and bias, if any) are f32/f64
// constants that can absorb a ChannelAffine; nullopt otherwise. MatMul has no
// bias, so it qualifies only when `with_shift` is false.
std::optional<int64_t> AffineFoldableChannels(const ir::Graph& graph,
                                              const ir::Node& node,
                                              bool with_shift);

// The axis of the producer's output that holds its output channels: 1 for
// Conv, ConvTranspose and Gemm, the last for MatMul.
int64_t OutputChannelAxis(const ir::Node& node, int64_t output_rank);

// Rewrites node `node_index` so its output becomes `output * scale + shift`
// per output channel: new weight and bias constants named
// "<old name>.<tag>" replace the old ones (which stay, unchanged, for any
// other reader); weights are kept when every scale is 1, and a missing bias
// is created ("<weights>.<tag>_bias") only when some shift is not 0. Precondition: AffineFoldableChannels() returned
// affine.scale.size() (InternalError otherwise).
absl::Status FoldChannelAffine(ir::Graph* graph, int node_index,
                               const ChannelAffine& affine,
                               absl::string_view tag);

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_FOLD_BATCH_NORM_H_
