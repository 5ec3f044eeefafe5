// File: passes/loop/eliminate_dead_buffers.h — pass `eliminate-dead-buffers`:
// removes stores into intermediate buffers nobody reads, loop kernels left
// without stores, extern kernels all of whose outputs nobody reads, the ops
// only they needed, and intermediate buffers no kernel references.
//
// Never removed: graph inputs, outputs and constants (they bind the
// program's interface), ops that can fail (integer division, unknown ops),
// and a kernel with such an op even when its stores are dead — removing
// them would hide an error the unfused program reports. A store_indirect
// counts as a read of its own buffer and is fallible (index range), so a
// scatter and the copy of `data` it updates stay.
#ifndef KILN_PASSES_LOOP_ELIMINATE_DEAD_BUFFERS_H_
#define KILN_PASSES_LOOP_ELIMINATE_DEAD_BUFFERS_H_

#include "ir/loop/module.h"
#include "passes/loop/loop_pass.h"

namespace kiln::passes {

class EliminateDeadBuffers : public LoopPass {
 public:
  absl::string_view name() const override { return "eliminate-dead-buffers"; }
  absl::StatusOr<bool> Run(ir::loop::LoopModule* program) override;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_ELIMINATE_DEAD_BUFFERS_H_
