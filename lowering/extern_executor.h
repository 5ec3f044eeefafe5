// File: lowering/extern_executor.h — test-side execution of a lowered
// program: loop kernels run on ir/loop's interpreter, extern kernels through
// the graph reference interpreter (a one-node ir::Graph per call), so whole
// programs can be checked end to end before the oneDNN runtime exists.
//
//   KILN_ASSIGN_OR_RETURN(LoweredProgram lp, LowerGraph(graph));
//   KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, RunLoweredProgram(lp, ins));
#ifndef KILN_LOWERING_EXTERN_EXECUTOR_H_
#define KILN_LOWERING_EXTERN_EXECUTOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/tensor.h"
#include "lowering/lower_graph.h"

namespace kiln::lowering {

// Runs `lowered` on one tensor per graph input (in order); returns the graph
// outputs in order.
absl::StatusOr<std::vector<ir::Tensor>> RunLoweredProgram(
    const LoweredProgram& lowered, absl::Span<const ir::Tensor> inputs);

// Runs one extern kernel's node ("onnx.<Op>", or "kiln.<Op>" in domain
// "kiln") on the reference interpreter.
absl::StatusOr<std::vector<ir::Tensor>> RunExternKernel(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
    absl::Span<const ir::Tensor> inputs);

}  // namespace kiln::lowering

#endif  // KILN_LOWERING_EXTERN_EXECUTOR_H_
