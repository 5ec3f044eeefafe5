// File: runtime/extern_step.h — how a compiled model runs one extern kernel
// of its loop program (Conv/ConvTranspose/Gemm/MatMul, fused or plain, and
// the other library ops): on a oneDNN primitive built once when the model
// is created, or, for what oneDNN cannot run and for reference fallback
// calls, on kiln's reference interpreter (correct, slow, and named as such
// in the compile report) — when the binary links it: the interpreter is a
// separate target (runtime/reference_calls.h) passed in as a factory.
#ifndef KILN_RUNTIME_EXTERN_STEP_H_
#define KILN_RUNTIME_EXTERN_STEP_H_

#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/tensor.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/loop_ir.h"
#include "runtime/compiled_model.h"

namespace kiln::runtime {

struct ExternStepOptions {
  bool prepack_weights = true;
  bool use_onednn = true;
  bool bf16 = false;  // library calls in bf16 (CompileOptions::precision resolved)
  bool allow_onednn_reference_impl = false;
  // CompileOptions::deterministic: a oneDNN call whose implementation is not
  // onednn::ThreadCountInvariant is built and run on one thread.
  bool deterministic = false;
};

// Why an interface: the executable holds a list of steps and does not care
// which library runs one. Run may be called from several threads at once.
class ExternStep {
 public:
  virtual ~ExternStep() = default;
  // `buffers[b]` is the storage of program buffer b (laid out with its
  // strides); reads the call's inputs, writes its outputs. For a buffer of
  // data-dependent shape (ir::loop::DynamicBuffers; only reference calls
  // touch those) it points to the ir::Tensor holding the value in this run,
  // which the producing call assigns.
  virtual absl::Status Run(absl::Span<void* const> buffers) const = 0;
  // Whether Run reads the buffer of kernel.call.inputs[input]. A step that
  // holds a constant input's data itself (prepacked weights) says false,
  // and the model need not keep that constant.
  virtual bool ReadsInput(size_t input) const { return true; }
};

// Makes the step that runs extern kernel `kernel` of `program` on the
// reference interpreter (runtime/reference_calls.h's CreateReferenceStep).
using ReferenceStepFactory = absl::StatusOr<std::unique_ptr<ExternStep>> (*)(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel);

// Builds the step for extern kernel `kernel` of `program` and fills
// `report` (backend, call, post-ops, weight layout, prepacked bytes; the
// reason when it runs on the reference interpreter). `constants` holds the
// data of constant buffers by buffer index. A step that needs the
// interpreter (a reference fallback call, a call oneDNN refuses or
// use_onednn false) comes from `reference_steps`; without one it is
// FailedPrecondition naming the kernel and why it needs the interpreter.
absl::StatusOr<std::unique_ptr<ExternStep>> CreateExternStep(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants,
    const ExternStepOptions& options, ReferenceStepFactory reference_steps,
    KernelReport* report);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_EXTERN_STEP_H_
