// File: lowering/extern_executor.h — test-side execution of a lowered
// program: loop kernels run on ir/loop's interpreter, extern kernels through
// the graph reference interpreter (a one-node ir::Graph per call), so whole
// programs can be checked end to end before the oneDNN runtime exists. The
// runtime runs its reference library calls and reference fallback calls
// ("kiln.Reference", lowering/ops_fallback.h) through ReferenceKernel.
//
//   KILN_ASSIGN_OR_RETURN(LoweredProgram lp, LowerGraph(graph));
//   KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, RunLoweredProgram(lp, ins));
#ifndef KILN_LOWERING_EXTERN_EXECUTOR_H_
#define KILN_LOWERING_EXTERN_EXECUTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"
#include "lowering/lower_graph.h"

namespace kiln::lowering {

// Runs `lowered` on one tensor per graph input (in order); returns the graph
// outputs in order.
absl::StatusOr<std::vector<ir::Tensor>> RunLoweredProgram(
    const LoweredProgram& lowered, absl::Span<const ir::Tensor> inputs);

// Runs one extern kernel's node ("onnx.<Op>", "kiln.<Op>" in domain "kiln",
// or a reference fallback call) on the reference interpreter.
absl::StatusOr<std::vector<ir::Tensor>> RunExternKernel(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
    absl::Span<const ir::Tensor> inputs);

// One extern kernel made ready to run on the reference interpreter: its
// one-node graph is built (or, for a reference fallback call, parsed) once.
// Why a class: a compiled model runs the same call many times.
class ReferenceKernel {
 public:
  // InvalidArgument naming the kernel for an extern kernel that does not
  // describe a node (missing bookkeeping attributes, slot counts that
  // differ, an unparsable reference graph).
  static absl::StatusOr<std::unique_ptr<ReferenceKernel>> Create(
      const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel);

  // One tensor per call input, in order; returns one per call output, each
  // checked against its buffer: dtype, and the shape (for a value of
  // data-dependent shape, its rank and the dims known at compile time).
  // Safe to call from several threads at once.
  absl::StatusOr<std::vector<ir::Tensor>> Run(
      absl::Span<const ir::Tensor> inputs) const;

  const ir::Graph& graph() const { return graph_; }

 private:
  ReferenceKernel() = default;

  std::string kernel_name_;
  std::string op_;
  ir::Graph graph_;
  // Per call output: its buffer's dtype and shape, whether the shape is
  // data-dependent.
  std::vector<ir::DType> output_dtypes_;
  std::vector<ir::Shape> output_shapes_;
  std::vector<bool> dynamic_outputs_;
};

}  // namespace kiln::lowering

#endif  // KILN_LOWERING_EXTERN_EXECUTOR_H_
