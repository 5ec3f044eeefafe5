// File: compiler/control_flow.h — the subgraphs of an If, a Loop or a Scan
// that lowering left as a reference call, as graphs of their own for
// compiler::Compile (decisions 0041, 0043; the runtime's steps are
// runtime/control_flow.h).
#ifndef KILN_COMPILER_CONTROL_FLOW_H_
#define KILN_COMPILER_CONTROL_FLOW_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "ir/loop/loop_ir.h"
#include "runtime/control_flow.h"

namespace kiln::compiler {

// The op of a reference call ("If", "Loop", ...); empty for another kernel.
std::string ReferenceCallOp(const ir::loop::Kernel& kernel);

// The data of the enclosing program's constant buffers (LoopModule's
// `constants`). A subgraph's capture of a constant buffer becomes a
// constant of the subgraph (the same shared tensor, not a copy), so its
// weights are constants to the subgraph's passes and library calls, as
// they are to the enclosing graph's; other captures become inputs.
using ConstantBuffers = std::map<int32_t, std::shared_ptr<const ir::Tensor>>;

struct IfBranch {
  // The branch with its captures of non-constant buffers as its inputs (in
  // capture order), the enclosing graph's opset.
  ir::Graph graph;
  // Per input of `graph`: the buffer of the enclosing program bound to it.
  std::vector<int32_t> buffers;
  // Why the branch cannot run with the model's input shapes, when the
  // importer found so (ir::kAttrUnfitBranchPrefix); empty otherwise. Such
  // a branch is not compiled.
  std::string unfit;
};
struct IfBranches {
  IfBranch then_branch, else_branch;
};

// The branches of extern kernel `kernel` of `program` when it is the
// reference call of an If (kiln.Reference with op If); Unimplemented for
// any other kernel or an If whose branches take inputs.
absl::StatusOr<IfBranches> ExtractIfBranches(const ir::loop::LoopProgram& program,
                                             const ConstantBuffers& constants,
                                             const ir::loop::Kernel& kernel);

// A Loop's body with its formal inputs (iteration number, condition,
// carried values) first and its captures after them, and the call's
// operands as buffers of the enclosing program. Formal inputs the model
// leaves untyped take the types of the Loop's operands.
struct LoopBody {
  ir::Graph graph;
  runtime::LoopCall call;
};
// The body of extern kernel `kernel` of `program` when it is the reference
// call of a Loop; Unimplemented for any other kernel.
absl::StatusOr<LoopBody> ExtractLoopBody(const ir::loop::LoopProgram& program,
                                         const ConstantBuffers& constants,
                                         const ir::loop::Kernel& kernel);

// A Scan's body (states, scan slices, then captures) and its operands.
// Unimplemented for any other kernel and a Scan-8 with sequence_lens.
struct ScanBody {
  ir::Graph graph;
  runtime::ScanCall call;
};
absl::StatusOr<ScanBody> ExtractScanBody(const ir::loop::LoopProgram& program,
                                         const ConstantBuffers& constants,
                                         const ir::loop::Kernel& kernel);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_CONTROL_FLOW_H_
