// File: runtime/control_flow.h — a compiled If: the step that reads the
// condition and runs the chosen branch's executable on the outer buffers
// (decision 0041). The JIT driver compiles the branches and makes the step.
#ifndef KILN_RUNTIME_CONTROL_FLOW_H_
#define KILN_RUNTIME_CONTROL_FLOW_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/loop/loop_ir.h"
#include "runtime/compiled_model.h"
#include "runtime/extern_step.h"

namespace kiln::runtime {

// One branch: its executable (made by BuildExecutable) and the buffers of
// the enclosing program bound to its inputs, in order.
struct CompiledBranch {
  std::shared_ptr<const CompiledModel> model;
  std::vector<int32_t> inputs;
};

// The step for extern kernel `kernel` of `program`, an If whose condition
// is call input 0 and whose outputs are the call's outputs. Each branch
// reads its input buffers in place and writes the If's output buffers in
// place (an If output of data-dependent shape: into the ir::Tensor that
// holds it). Unimplemented (the caller keeps the reference call) unless the
// condition is one bool, every bound input buffer is row-major of static
// shape, and each branch's interface fits the buffers: a static If output
// takes a branch output of its shape, or one of data-dependent shape that
// has it on each run (InvalidArgument otherwise).
absl::StatusOr<std::unique_ptr<ExternStep>> CreateIfStep(const ir::loop::LoopProgram& program,
                                                         const ir::loop::Kernel& kernel,
                                                         CompiledBranch then_branch,
                                                         CompiledBranch else_branch);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_CONTROL_FLOW_H_
