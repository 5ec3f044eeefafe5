// File: compiler/control_flow.h — the subgraphs of an If, a Loop or a Scan
// that lowering left as a reference call, as graphs of their own for
// compiler::Compile (decisions 0041, 0043; the runtime's steps are
// runtime/control_flow.h).
#ifndef KILN_COMPILER_CONTROL_FLOW_H_
#define KILN_COMPILER_CONTROL_FLOW_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
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

// Whether a branch the importer found unfit for the input shapes (`why`)
// fails on the reference interpreter too, the judge of what runs: on zeros
// of its inputs' static types. Returns `why` with the interpreter's error,
// or empty when the interpreter runs it (libonnx refused a node the
// interpreter takes): then the branch is compiled. libonnx's inference
// never sees the inputs' values, so its refusal holds for any data; the
// run on zeros only guards against its being stricter than the
// interpreter.
std::string ConfirmUnfit(const ir::Graph& branch, const std::string& why);

// An If, Loop or Scan whose subgraphs a caller compiles as programs of
// their own: the call, and the caller's indices of those programs (If:
// then, else, -1 for a branch left uncompiled as unfit; Loop, Scan: the
// body).
struct ControlFlowSite {
  runtime::ControlFlowCall call;
  std::vector<int> models;
};

// Compiles subgraph `what` ("then", "else", "body") of `kernel`; returns
// the caller's index of its program.
using CompileSubgraphFn = std::function<absl::StatusOr<int>(
    ir::Graph graph, const ir::loop::Kernel& kernel, const char* what)>;

// The Ifs, Loops and Scans of `module` that lowering left as reference
// calls, each subgraph handed to `compile` (in kernel order; then before
// else). One whose subgraph cannot be extracted or does not compile stays
// a reference call, and `warnings` says why; an If whose branches are both
// unfit stays one too.
std::vector<ControlFlowSite> FindControlFlowSites(const ir::loop::LoopModule& module,
                                                  const CompileSubgraphFn& compile,
                                                  std::vector<std::string>* warnings);

// Several programs (a model and its subgraphs' programs) as one
// LoopProgram for one emission: buffers and kernels renamed c<k>_...,
// buffer indices shifted. `kernel_base[k]` is where program k's kernels
// start, `buffer_base[k]` its buffers.
ir::loop::LoopProgram MergePrograms(const std::vector<const ir::loop::LoopProgram*>& programs,
                                    std::vector<int>* kernel_base,
                                    std::vector<int32_t>* buffer_base);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_CONTROL_FLOW_H_
