// kiln's loop pass pipeline. Read top to bottom: each pass is added in
// order, each ordering constraint says why.
#include "passes/loop/loop_pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/loop/module.h"
#include "ir/loop/verifier.h"
#include "ir/status_macros.h"
#include "passes/loop/demote_index.h"
#include "passes/loop/eliminate_dead_buffers.h"
#include "passes/loop/fuse_horizontal.h"
#include "passes/loop/fuse_vertical.h"
#include "passes/loop/propagate_layout.h"
#include "passes/loop/store_activations_in_bf16.h"
#include "passes/loop/tabulate_8bit_functions.h"

namespace kiln::passes {
namespace {

template <typename Pass>
std::unique_ptr<LoopPass> Create(const ConvLayoutOracle&) {
  return std::make_unique<Pass>();
}

std::unique_ptr<LoopPass> CreatePropagateLayout(const ConvLayoutOracle& oracle) {
  return std::make_unique<PropagateLayout>(oracle);
}

// Every loop pass, one row each (names come from the passes themselves).
constexpr std::unique_ptr<LoopPass> (*kLoopPasses[])(const ConvLayoutOracle&) = {
    Create<DemoteIndex>,  Create<EliminateDeadBuffers>, Create<FuseHorizontal>,
    Create<FuseVertical>, CreatePropagateLayout,  Create<StoreActivationsInBf16>,
    Create<Tabulate8BitFunctions>,
};

}  // namespace

std::vector<std::string> LoopPipeline::PassNames() const {
  std::vector<std::string> names;
  for (const auto& p : passes_) names.emplace_back(p->name());
  return names;
}

absl::Status LoopPipeline::Run(ir::loop::LoopModule* program,
                               const LoopPipelineOptions& options) const {
  for (const std::string& d : options.disabled) {
    bool known = false;
    for (const auto& p : passes_) known |= p->name() == d;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown loop pass '", d, "' to disable; passes: ",
                       absl::StrJoin(PassNames(), ", ")));
    }
  }
  if (options.observer) KILN_RETURN_IF_ERROR(options.observer(0, nullptr, false, *program));
  int index = 0;
  for (const auto& pass : passes_) {
    ++index;
    if (options.disabled.contains(pass->name())) continue;
    absl::StatusOr<bool> changed = pass->Run(program);
    if (!changed.ok()) {
      return absl::Status(changed.status().code(),
                          absl::StrCat("loop pass ", pass->name(), ": ",
                                       changed.status().message()));
    }
    if (options.verify && *changed) {
      absl::Status v = ir::loop::VerifyProgram(program->program);
      if (!v.ok()) {
        return kiln::InternalError("loop program invalid after pass ",
                                   pass->name(), ": ", v.message());
      }
    }
    if (options.observer) {
      KILN_RETURN_IF_ERROR(options.observer(index, pass.get(), *changed, *program));
    }
  }
  return absl::OkStatus();
}

LoopPipeline DefaultLoopPipeline(ConvLayoutOracle conv_layout_oracle, bool bf16_activations) {
  LoopPipeline p;
  // Dead buffers first: a kernel nobody reads (an unused Split output, a
  // LayerNorm statistic) still counts as a reader of its inputs, which
  // would keep their producers from being inlined.
  p.Add(std::make_unique<EliminateDeadBuffers>());
  // Vertical before horizontal: inlining pointwise chains into their
  // consumers makes the siblings that read the same input visible (and
  // leaves fewer, larger kernels to pair up).
  p.Add(std::make_unique<FuseVertical>());
  // Horizontal merges kernels over the same space that share an input.
  p.Add(std::make_unique<FuseHorizontal>());
  // Vertical again: a merge can leave a reduction with a single consumer
  // (two consumers became one kernel), which can now be its epilogue.
  p.Add(std::make_unique<FuseVertical>());
  // Dead buffers last: stores whose only readers were fused away.
  p.Add(std::make_unique<EliminateDeadBuffers>());
  // Layouts after fusion: it decides per buffer from every kernel that
  // touches it, and fusion must not see physical (blocked) indexing.
  p.Add(std::make_unique<PropagateLayout>(std::move(conv_layout_oracle)));
  // bf16 storage after layouts: the layout oracle asks the library about
  // f32 calls, and the dtype of a buffer does not change its layout. A
  // no-op unless the library calls run in bf16.
  p.Add(std::make_unique<StoreActivationsInBf16>(bf16_activations));
  // Tables after fusion, which puts each DQ -> f -> Q chain (and the chains
  // it feeds) into one kernel, and after layouts, which need not know the
  // table buffers; they only change what a kernel computes per point.
  p.Add(std::make_unique<Tabulate8BitFunctions>());
  // Index demotion last: value ranges come from the final (blocked)
  // indices, and no later pass may widen what it proved fits int32.
  p.Add(std::make_unique<DemoteIndex>());
  return p;
}

std::vector<std::string> LoopPassNames() {
  std::vector<std::string> names;
  for (auto create : kLoopPasses) names.emplace_back(create(ConvLayoutOracle())->name());
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::unique_ptr<LoopPass>> CreateLoopPass(
    absl::string_view name, const ConvLayoutOracle& conv_layout_oracle) {
  for (auto create : kLoopPasses) {
    std::unique_ptr<LoopPass> pass = create(conv_layout_oracle);
    if (pass->name() == name) return pass;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown loop pass '", name, "'; loop passes: ", absl::StrJoin(LoopPassNames(), ", ")));
}

}  // namespace kiln::passes
