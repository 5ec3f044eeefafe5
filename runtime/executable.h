// File: runtime/executable.h — runtime-internal: the pieces the JIT path
// (compiled_model.cc) and the ahead-of-time path (aot.cc, aot_writer.cc)
// share. A model is prepared once (graph passes, lowering, loop passes); its
// executable is one step list over one planned arena, whether the loop
// kernels' entries come from a JIT'ed library or a table linked into the
// binary (`LoopEntryFn`).
#ifndef KILN_RUNTIME_EXECUTABLE_H_
#define KILN_RUNTIME_EXECUTABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/cpp/emitter.h"
#include "ir/graph/graph.h"
#include "ir/loop/module.h"
#include "isa/isa.h"
#include "lowering/lower_graph.h"
#include "runtime/kiln.h"

namespace kiln::internal {

// A model through the graph passes and lowering, waiting for its code to be
// built (alone or in a batch with others).
struct PreparedModel {
  ir::Graph graph{"prepared"};
  ir::loop::LoopModule lowered;
  CompileReport report;
  const isa::VecIsa* isa = nullptr;
  absl::Time start;
};

// Import is the caller's; this runs the graph passes, lowering and loop
// passes. `isa` is the ISA the JIT will build for; `require_host_isa` false
// (the AOT writer) accepts any registered ISA, also one this CPU lacks.
absl::StatusOr<PreparedModel> Prepare(const CompileOptions& options, ir::Graph graph,
                                      CompileReport report, bool require_host_isa = true);

// The model's interface (names, dtypes, shapes) from its graph.
void GraphInterface(const ir::Graph& graph, std::vector<TensorInfo>* inputs,
                    std::vector<TensorInfo>* outputs);

// One loop kernel's compiled entry, wherever it comes from.
struct LoopEntry {
  backends::cpp::KernelFn fn = nullptr;
  std::vector<int32_t> args;  // buffers of the program, argument order
  KernelReport report;        // the kernel's line of the compile report
};
// (kernel index into LoopProgram::kernels, the kernel) -> its entry.
using LoopEntryFn =
    std::function<absl::StatusOr<LoopEntry>(int index, const ir::loop::Kernel& kernel)>;

// The executable over `lowered`: a step per kernel (loop entries from
// `entry_of`, library calls created here: oneDNN primitives built and
// weights prepacked under options.threads), the memory plan, the interface.
// `keep_alive` owns whatever the entries point into (a loaded library).
// Fills the report's kernel lines, counts, memory and total_ms (from
// `start`).
absl::StatusOr<std::unique_ptr<CompiledModel>> BuildExecutable(
    const CompileOptions& options, ir::loop::LoopModule lowered,
    std::vector<TensorInfo> inputs, std::vector<TensorInfo> outputs, CompileReport report,
    absl::Time start, std::shared_ptr<const void> keep_alive, const LoopEntryFn& entry_of);

// The compile report's line for an emitted loop kernel.
KernelReport LoopKernelReport(const ir::loop::Kernel& k, const backends::cpp::EmittedKernel& e);

}  // namespace kiln::internal

#endif  // KILN_RUNTIME_EXECUTABLE_H_
