// File: runtime/executable.h — the executable behind a kiln::CompiledModel:
// one step per kernel of a loop module over one arena planned from buffer
// liveness. The JIT (compiler/compiler.cc) and the AOT loader
// (runtime/aot.cc) build it alike; only where the loop kernels' entries
// come from differs (`LoopEntryFn`: a loaded library, a linked-in table).
#ifndef KILN_RUNTIME_EXECUTABLE_H_
#define KILN_RUNTIME_EXECUTABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ir/loop/kernel_abi.h"
#include "ir/loop/module.h"
#include "runtime/compiled_model.h"
#include "runtime/extern_step.h"

namespace kiln::runtime {

// One loop kernel's compiled entry, wherever it comes from.
struct LoopEntry {
  ir::loop::KernelFn fn = nullptr;
  std::vector<int32_t> args;  // buffers of the program, argument order
  KernelReport report;        // the kernel's line of the compile report
};
// (kernel index into LoopProgram::kernels, the kernel) -> its entry.
using LoopEntryFn =
    std::function<absl::StatusOr<LoopEntry>(int index, const ir::loop::Kernel& kernel)>;

// The executable over `module`: a step per kernel (loop entries from
// `entry_of`; library calls created here: oneDNN primitives built and
// weights prepacked under options.threads, reference calls from
// `reference_steps`, which may be null: see CreateExternStep), the memory
// plan, the interface. `keep_alive` owns whatever the entries point into
// (a loaded library). Fills the report's kernel lines, counts, memory and
// total_ms (from `start`). Of `options`, reads threads, prepack_weights,
// use_onednn and mode (eager: no prepacking, no arena sharing).
//
// `prebuilt` holds steps made elsewhere for some kernels (by kernel index):
// the JIT's compiled Ifs (runtime/control_flow.h), which replace those
// kernels' reference calls; their report lines and the reference calls of
// their branches count in the report.
struct PrebuiltStep {
  std::unique_ptr<ExternStep> step;
  KernelReport report;
  int reference_calls = 0;
  int fallback_calls = 0;
};
absl::StatusOr<std::unique_ptr<CompiledModel>> BuildExecutable(
    const CompileOptions& options, ir::loop::LoopModule module,
    std::vector<TensorInfo> inputs, std::vector<TensorInfo> outputs, CompileReport report,
    absl::Time start, std::shared_ptr<const void> keep_alive, const LoopEntryFn& entry_of,
    ReferenceStepFactory reference_steps, std::map<int, PrebuiltStep> prebuilt = {});

// Runs `model`, an executable BuildExecutable made, on raw storage:
// inputs[i] holds input i and outputs[o] receives output o, both row-major
// with the interface's shapes; outputs a kernel computes are written there
// directly. No tensors, no copies in. Where `output_shapes[o]` is a shape,
// outputs[o] is storage of that shape: an output of data-dependent shape is
// copied there when this run gives it that shape, else InvalidArgument
// naming both. Where it is nullopt, outputs[o] is an ir::Tensor* that takes
// the output with its run-time shape (an enclosing value of data-dependent
// shape). InternalError for another model.
absl::Status RunOnBuffers(const CompiledModel& model, absl::Span<const void* const> inputs,
                          absl::Span<void* const> outputs,
                          absl::Span<const std::optional<ir::Shape>> output_shapes);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_EXECUTABLE_H_
