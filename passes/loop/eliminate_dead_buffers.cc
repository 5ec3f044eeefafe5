// eliminate-dead-buffers: dead stores, kernels and buffers removed until
// nothing changes (rules in eliminate_dead_buffers.h).
#include "passes/loop/eliminate_dead_buffers.h"

#include <vector>

#include "ir/loop/module.h"
#include "passes/loop/fusion_util.h"

namespace kiln::passes {

using ir::loop::Kernel;
using ir::loop::Op;
using ir::loop::OpCode;

absl::StatusOr<bool> EliminateDeadBuffers::Run(ir::loop::LoopModule* lp) {
  ir::loop::LoopProgram& p = lp->program;
  std::vector<bool> alive(p.kernels.size(), true);
  bool changed = false;
  for (bool progress = true; progress;) {
    progress = false;
    const loop_util::BufferUses uses = loop_util::ComputeBufferUses(p, alive);
    auto dead = [&](int32_t b) {
      return uses.readers[b].empty() && !loop_util::IsProtectedBuffer(*lp, b);
    };
    for (size_t k = 0; k < p.kernels.size(); ++k) {
      if (!alive[k]) continue;
      Kernel& kernel = p.kernels[k];
      if (kernel.kind == Kernel::Kind::kExtern) {
        bool all_dead = !kernel.call.outputs.empty();
        for (int32_t b : kernel.call.outputs) all_dead = all_dead && dead(b);
        if (all_dead) alive[k] = false;
        progress = progress || all_dead;
        continue;
      }
      bool removed = false;
      for (Op& op : kernel.body) {
        if (op.code == OpCode::kStore && dead(op.buffer)) {
          // Keep the slot so operand numbers stay valid: a store of a dead
          // value becomes a no-op constant, then dead-op elimination drops it.
          op = Op();
          op.code = OpCode::kConstant;
          op.dtype = ir::DType::kBool;
          removed = true;
        }
      }
      if (!removed) continue;
      progress = true;
      loop_util::EliminateDeadOps(&kernel);
      if (kernel.body.empty()) alive[k] = false;
    }
    changed = changed || progress;
  }
  if (changed) loop_util::CompactKernels(&p, alive);
  changed = loop_util::RemoveUnreferencedBuffers(lp) || changed;
  return changed;
}

}  // namespace kiln::passes
