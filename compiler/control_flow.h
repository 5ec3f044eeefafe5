// File: compiler/control_flow.h — the branches of an If that lowering left
// as a reference call, as graphs of their own for compiler::Compile
// (decision 0041; the runtime's step is runtime/control_flow.h).
#ifndef KILN_COMPILER_CONTROL_FLOW_H_
#define KILN_COMPILER_CONTROL_FLOW_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "ir/loop/loop_ir.h"

namespace kiln::compiler {

struct IfBranch {
  // The branch with its captures as its inputs (in capture order), the
  // enclosing graph's opset.
  ir::Graph graph;
  // Per input of `graph`: the buffer of the enclosing program bound to it.
  std::vector<int32_t> buffers;
};
struct IfBranches {
  IfBranch then_branch, else_branch;
};

// The branches of extern kernel `kernel` of `program` when it is the
// reference call of an If (kiln.Reference with op If); Unimplemented for
// any other kernel or an If whose branches take inputs.
absl::StatusOr<IfBranches> ExtractIfBranches(const ir::loop::LoopProgram& program,
                                             const ir::loop::Kernel& kernel);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_CONTROL_FLOW_H_
