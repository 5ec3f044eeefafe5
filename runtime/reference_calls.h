// File: runtime/reference_calls.h — library calls on kiln's reference
// interpreter (interp/): reference fallback calls (nodes lowering left to
// the interpreter, kiln.Reference) and library ops oneDNN cannot run. A
// separate target (//runtime:reference_calls) because it links the
// interpreter: the JIT always passes CreateReferenceStep to the executable;
// an AOT library only when built with kiln_aot_library(..., reference_calls
// = True).
//
//   runtime::BuildExecutable(..., &runtime::CreateReferenceStep);
#ifndef KILN_RUNTIME_REFERENCE_CALLS_H_
#define KILN_RUNTIME_REFERENCE_CALLS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "ir/loop/loop_ir.h"
#include "runtime/extern_step.h"

namespace kiln::runtime {

// A runtime::ReferenceStepFactory: the step that runs extern kernel `kernel`
// of `program` (its ONNX node, or the one-node graph of a reference call)
// on the interpreter, copying operands to tensors and results back into the
// buffers; channel-blocked operands (ir/loop/blocked_layout.h) are
// converted to and from plain tensors around the call. Values of
// data-dependent shape are passed as the ir::Tensor objects holding them.
// An error for a kernel the interpreter cannot run.
absl::StatusOr<std::unique_ptr<ExternStep>> CreateReferenceStep(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_REFERENCE_CALLS_H_
