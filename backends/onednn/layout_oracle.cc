// oneDNN's answers to propagate-layout and lowering
// (backends/onednn/layout_oracle.h).
#include "backends/onednn/layout_oracle.h"

#include "backends/onednn/extern_kernel.h"
#include "ir/status_macros.h"

namespace kiln::onednn {

static_assert(ActivationBlocks::kChannelsLast == passes::ConvLayout::kChannelsLast,
              "one value for channels-last in the oracle and the pass");

passes::ConvLayoutOracle ConvLayoutOracle(bool bf16) {
  return [bf16](const ir::loop::LoopModule& lp,
                const ir::loop::Kernel& kernel) -> absl::StatusOr<passes::ConvLayout> {
    OneDnnCallOptions options;
    options.bf16 = bf16;
    KILN_ASSIGN_OR_RETURN(ActivationBlocks blocks,
                          PreferredActivationBlocks(lp.program, kernel, lp.constants, options));
    passes::ConvLayout layout{blocks.src, blocks.dst, {}};
    for (const auto& a : blocks.also) layout.also.push_back({a.src, a.dst, a.slower_isa});
    return layout;
  };
}

std::function<absl::Status(const ir::loop::LoopModule&, const ir::loop::Kernel&)>
LibraryCallOracle() {
  return [](const ir::loop::LoopModule& lp, const ir::loop::Kernel& kernel) -> absl::Status {
    return OneDnnExternKernel::Create(lp.program, kernel, lp.constants).status();
  };
}

}  // namespace kiln::onednn
