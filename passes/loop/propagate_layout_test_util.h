// File: passes/loop/propagate_layout_test_util.h — runs a lowered program
// whose buffers may be channel-blocked (after propagate-layout) kernel by
// kernel: loop kernels on the loop interpreter over their raw storage,
// extern kernels on logical tensors through a pluggable runner (the graph
// reference interpreter by default, oneDNN in backends/onednn's tests).
#ifndef KILN_PASSES_LOOP_PROPAGATE_LAYOUT_TEST_UTIL_H_
#define KILN_PASSES_LOOP_PROPAGATE_LAYOUT_TEST_UTIL_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"

namespace kiln::passes::layout_testing {

// Runs one extern kernel of `program` (its raw input storage in `inputs`,
// one pointer per call input; writes one pointer per call output).
using ExternRunner = std::function<absl::Status(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
    absl::Span<void* const> inputs, absl::Span<void* const> outputs)>;

// The graph reference interpreter on the call's logical view.
absl::Status ReferenceExtern(const ir::loop::LoopProgram& program,
                             const ir::loop::Kernel& kernel,
                             absl::Span<void* const> inputs,
                             absl::Span<void* const> outputs);

// Graph inputs in order (row-major logical tensors); graph outputs in order.
absl::StatusOr<std::vector<ir::Tensor>> RunProgram(
    const ir::loop::LoopModule& lp, absl::Span<const ir::Tensor> inputs,
    const ExternRunner& run_extern = ReferenceExtern);

}  // namespace kiln::passes::layout_testing

#endif  // KILN_PASSES_LOOP_PROPAGATE_LAYOUT_TEST_UTIL_H_
