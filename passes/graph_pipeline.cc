// kiln's graph pass pipeline. Read top to bottom: each pass is added in
// order, each ordering constraint says why.
#include "passes/graph_pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/graph/verifier.h"
#include "ir/status_macros.h"
#include "passes/graph/compute_f16_in_f32.h"
#include "passes/graph/eliminate_dead_code.h"
#include "passes/graph/eliminate_identity.h"
#include "passes/graph/fold_batch_norm.h"
#include "passes/graph/fold_binary_into_weights.h"
#include "passes/graph/fold_cast_chains.h"
#include "passes/graph/fold_constant_transpose.h"
#include "passes/graph/fold_dequantize_linear.h"
#include "passes/graph/fuse_dequantize_lstm.h"
#include "passes/graph/fuse_qdq.h"
#include "passes/graph/fuse_onednn_post_ops.h"
#include "passes/graph/integer_calls_in_f32.h"

namespace kiln::passes {
namespace {

template <typename Pass>
std::unique_ptr<GraphPass> Create() {
  return std::make_unique<Pass>();
}

// Every graph pass, one row each (names come from the passes themselves).
constexpr std::unique_ptr<GraphPass> (*kGraphPasses[])() = {
    Create<ComputeF16InF32>,        Create<EliminateDeadCode>,
    Create<EliminateIdentity>,
    Create<FoldBatchNorm>,          Create<FoldBinaryIntoWeights>,
    Create<FoldCastChains>,         Create<FoldConstantTranspose>,
    Create<FoldDequantizeLinear>,   Create<FuseDequantizeLstm>,
    Create<FuseOneDnnPostOps>,      Create<FuseQdq>,
    Create<IntegerCallsInF32>,
};

}  // namespace

const GraphPass* GraphPipeline::Find(absl::string_view name) const {
  for (const auto& pass : passes_) {
    if (pass->name() == name) return pass.get();
  }
  return nullptr;
}

std::vector<std::string> GraphPipeline::PassNames() const {
  std::vector<std::string> names;
  for (const auto& p : passes_) names.emplace_back(p->name());
  return names;
}

absl::Status GraphPipeline::Run(ir::Graph* graph,
                                const PipelineOptions& options) const {
  for (const std::string& d : options.disabled) {
    bool known = false;
    for (const auto& p : passes_) known |= p->name() == d;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown pass '", d, "' to disable; passes: ",
                       absl::StrJoin(PassNames(), ", ")));
    }
  }
  if (options.observer) KILN_RETURN_IF_ERROR(options.observer(0, nullptr, false, *graph));
  int index = 0;
  for (const auto& pass : passes_) {
    ++index;
    if (options.disabled.contains(pass->name())) continue;
    absl::StatusOr<bool> changed = pass->Run(graph);
    if (!changed.ok()) {
      return absl::Status(changed.status().code(),
                          absl::StrCat("pass ", pass->name(), ": ",
                                       changed.status().message()));
    }
    if (options.verify && *changed) {
      absl::Status v = ir::VerifyGraph(*graph);
      if (!v.ok()) {
        return kiln::InternalError("graph invalid after pass ", pass->name(),
                                   ": ", v.message());
      }
    }
    if (options.observer) {
      KILN_RETURN_IF_ERROR(options.observer(index, pass.get(), *changed, *graph));
    }
  }
  return absl::OkStatus();
}

GraphPipeline DefaultGraphPipeline(IntegerCallOracle integer_call_oracle) {
  GraphPipeline p;
  // f16 to f32 first: the weight folds then fold f32 constants, and the
  // oneDNN matcher sees f32 ops (oneDNN 2.6 has no f16 primitive).
  p.Add(std::make_unique<ComputeF16InF32>());
  // Cast chains next: the casts to a value's own type it exposes (an f16
  // model's f16 -> f32 casts, now f32 -> f32; f16 -> f32 -> f16 round trips)
  // become Identity nodes, which eliminate-identity removes next.
  p.Add(std::make_unique<FoldCastChains>());
  // Identity/Dropout removal next: later pattern matchers (BatchNorm
  // folding, oneDNN post-op fusion) then see producers next to consumers.
  p.Add(std::make_unique<EliminateIdentity>());
  // QDQ patterns before any weight fold: they need the weights still as
  // DequantizeLinear of 8-bit constants (and the Identity nodes exporters put
  // between a bias and its Conv gone). The call library decides which
  // patterns become integer calls.
  p.Add(std::make_unique<FuseQdq>(integer_call_oracle));
  // An LSTM's R as DequantizeLinear of 8-bit constants likewise, before the
  // fold makes it f32: the library keeps big ones 8-bit (decision 0074).
  p.Add(std::make_unique<FuseDequantizeLstm>(integer_call_oracle));
  // Right after: what fuse-qdq and fuse-dequantize-lstm left in f32 gets
  // constant f32 weights, which the folds below and oneDNN's prepacking need.
  p.Add(std::make_unique<FoldDequantizeLinear>());
  // Before the weight folds: MatMul(x, Transpose(W)) must read a plain
  // constant for its W to be foldable (and prepackable later).
  p.Add(std::make_unique<FoldConstantTranspose>());
  // BN folding must run before post-op fusion so conv+bn+relu becomes one
  // primitive; before binary folding so a Mul/Add after the BN folds too.
  p.Add(std::make_unique<FoldBatchNorm>());
  // After BN folding: the constant Mul/Add chains it exposes (and exporters'
  // own scales and shifts) fold into the same weights and bias.
  p.Add(std::make_unique<FoldBinaryIntoWeights>());
  // After the weight folds: integer calls the library refuses become f32
  // calls on integer-valued weights, which must stay integers (a later
  // constant Mul is then a post-op, not folded in), so that bf16 mode holds
  // them exactly. Before post-op fusion: the new Conv/MatMul fuse like any.
  p.Add(std::make_unique<IntegerCallsInF32>(std::move(integer_call_oracle)));
  // After every weight fold: BN and constant scales must be in the weights
  // first, so conv+bn+relu becomes one oneDNN primitive with a relu post-op.
  p.Add(std::make_unique<FuseOneDnnPostOps>());
  // Dead code last: every rewrite above may leave unused nodes behind, and
  // the weight folds leave the unfolded constants.
  p.Add(std::make_unique<EliminateDeadCode>());
  return p;
}

std::vector<std::string> GraphPassNames() {
  std::vector<std::string> names;
  for (auto create : kGraphPasses) names.emplace_back(create()->name());
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::unique_ptr<GraphPass>> CreateGraphPass(absl::string_view name) {
  for (auto create : kGraphPasses) {
    std::unique_ptr<GraphPass> pass = create();
    if (pass->name() == name) return pass;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown graph pass '", name, "'; graph passes: ", absl::StrJoin(GraphPassNames(), ", ")));
}

}  // namespace kiln::passes
