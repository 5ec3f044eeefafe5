// File: interp/loop_module.h — runs a loop module without generated code:
// loop kernels on ir/loop's interpreter, extern calls on the reference
// interpreter (a one-node ir::Graph per call). Tests and tools check whole
// lowered programs with it; the runtime runs its reference calls (library
// ops oneDNN cannot run, and "kiln.Reference" fallback calls) through
// ReferenceKernel.
//
//   KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule m, lowering::LowerGraph(graph));
//   KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, interp::RunLoopModule(m, ins));
#ifndef KILN_INTERP_LOOP_MODULE_H_
#define KILN_INTERP_LOOP_MODULE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"

namespace kiln::interp {

// Runs `lowered` on one tensor per graph input (in order); returns the graph
// outputs in order.
absl::StatusOr<std::vector<ir::Tensor>> RunLoopModule(
    const ir::loop::LoopModule& lowered, absl::Span<const ir::Tensor> inputs);

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

}  // namespace kiln::interp

#endif  // KILN_INTERP_LOOP_MODULE_H_
