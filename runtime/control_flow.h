// File: runtime/control_flow.h — compiled If, Loop and Scan: steps that run
// their subgraphs' executables on the outer buffers (decisions 0041, 0043).
// The JIT driver compiles the subgraphs and makes the steps.
#ifndef KILN_RUNTIME_CONTROL_FLOW_H_
#define KILN_RUNTIME_CONTROL_FLOW_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/loop/loop_ir.h"
#include "runtime/compiled_model.h"
#include "runtime/executable.h"
#include "runtime/extern_step.h"

namespace kiln::runtime {

// One branch: its executable (made by BuildExecutable) and the buffers of
// the enclosing program bound to its inputs, in order. Or, with no model, a
// branch left uncompiled because shape inference found that it cannot run
// with the program's input shapes: `unfit` says why.
struct CompiledBranch {
  std::shared_ptr<const CompiledModel> model;
  std::vector<int32_t> inputs;
  std::string unfit;
};

// The step for extern kernel `kernel` of `program`, an If whose condition
// is call input 0 and whose outputs are the call's outputs. Each branch
// reads its input buffers in place and writes the If's output buffers in
// place (an If output of data-dependent shape: into the ir::Tensor that
// holds it). Unimplemented (the caller keeps the reference call) unless the
// condition is one bool, every bound input buffer is row-major of static
// shape, and each branch's interface fits the buffers: a static If output
// takes a branch output of its shape, or one of data-dependent shape that
// has it on each run (InvalidArgument otherwise). Taking an unfit branch
// (no model) is InvalidArgument naming the If, the branch and `unfit`.
absl::StatusOr<std::unique_ptr<ExternStep>> CreateIfStep(const ir::loop::LoopProgram& program,
                                                         const ir::loop::Kernel& kernel,
                                                         CompiledBranch then_branch,
                                                         CompiledBranch else_branch);

// A Loop's operands, as buffers of the enclosing program (-1: absent).
// The body's executable takes (iteration i64, condition bool, carried...,
// captures...) and yields (condition bool, carried..., scan slices...).
struct LoopCall {
  int32_t trip_count = -1;  // M: one integer
  int32_t cond = -1;        // one bool
  std::vector<int32_t> carried;       // initial values
  std::vector<int32_t> captures;      // outer values the body reads
  std::vector<int32_t> final_values;  // per carried value: its final value
  std::vector<int32_t> scan_outputs;  // per scan output of the body
  // The body yields its condition input unchanged: only the trip count
  // ends the loop, so a trip count over the limit is refused before the
  // first iteration.
  bool cond_passed_through = false;
};

// The step for extern kernel `kernel` of `program`, a Loop. Iterates the
// body on the outer buffers: captures bound by pointer, carried values
// double-buffered (iteration 0 reads the initial values in place; the
// final value's buffer is one of the two slots), each scan slice written
// straight into the stacked output (an output of data-dependent shape: the
// ir::Tensor holding it, grown geometrically; a slice of data-dependent
// shape in the body is copied there, and must keep the first iteration's
// shape). No allocation per iteration of a static body. A run that would
// start iteration `max_iterations` is InvalidArgument naming the Loop and
// the limit (CompileOptions::max_loop_iterations). Unimplemented (the
// caller keeps the reference call) unless every input buffer is row-major
// of static shape and each carried value keeps its static shape and type
// through the body.
absl::StatusOr<std::unique_ptr<ExternStep>> CreateLoopStep(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel, LoopCall call,
    std::shared_ptr<const CompiledModel> body, int64_t max_iterations);

// A Scan's operands, as buffers of the enclosing program (-1: absent).
// The body's executable takes (states..., scan slices..., captures...) and
// yields (states..., scan output slices...).
struct ScanCall {
  std::vector<int32_t> states;        // initial values
  std::vector<int32_t> scan_inputs;
  std::vector<int32_t> captures;
  std::vector<int32_t> final_states;  // per state
  std::vector<int32_t> scan_outputs;  // per scan output of the body
  // Per scan input / output: the axis (normalized) and the direction
  // (true: reverse).
  std::vector<int64_t> input_axes, output_axes;
  std::vector<bool> input_reverse, output_reverse;
  // Scan-8: every operand has a leading batch dim; the body runs per batch
  // entry, scan axes are axis 1 of the operands.
  bool batched = false;
};

// The step for extern kernel `kernel`, a Scan: like the Loop step (states
// double-buffered, captures by pointer), slices along axis 0 read and
// written in place, along another axis gathered into / scattered from one
// scratch slice per operand. Unimplemented unless every operand is a
// row-major buffer of static shape and the body's interface is static and
// matches it.
absl::StatusOr<std::unique_ptr<ExternStep>> CreateScanStep(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel, ScanCall call,
    std::shared_ptr<const CompiledModel> body);

// One If, Loop or Scan of a program whose subgraphs are compiled programs:
// what the compiler found (compiler/control_flow.h's FindControlFlowSites)
// and what the JIT and an AOT library's description carry to make its step.
struct ControlFlowCall {
  enum class Op { kIf, kLoop, kScan };
  Op op = Op::kIf;
  int kernel = -1;  // index into the program's kernels
  // If: per branch (then, else), the buffers bound to its inputs and, for
  // a branch left uncompiled, why it cannot run (its model is then null).
  std::vector<int32_t> then_buffers, else_buffers;
  std::string unfit[2];
  LoopCall loop;
  ScanCall scan;
};

// "If", "Loop" or "Scan".
const char* ControlFlowOpName(ControlFlowCall::Op op);

// The step of `call` in `program`, with its report line (backend
// `compiled`, what each subgraph holds) and its subgraphs' reference calls
// counted. `models`: If: then, else (null: unfit); Loop, Scan: the body.
// Unimplemented when the step refuses the operands (the caller keeps the
// reference call and reports why).
absl::StatusOr<PrebuiltStep> CreateControlFlowStep(
    const CompileOptions& options, const ir::loop::LoopProgram& program,
    const ControlFlowCall& call, std::vector<std::shared_ptr<const CompiledModel>> models);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_CONTROL_FLOW_H_
