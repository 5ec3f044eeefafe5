// File: lowering/ops_fallback.h — reference fallback calls: a node lowering
// cannot compile becomes one "kiln.Reference" extern kernel that runs that
// node (attributes and subgraphs included) on the reference interpreter, and
// such kernels alone produce and read values whose shape is known only at
// run time.
//
//   LoweringOptions o;
//   o.allow_reference_fallback = true;
//   KILN_ASSIGN_OR_RETURN(LoweredProgram lp, LowerGraph(graph, o));
//   std::vector<bool> dynamic = DynamicBuffers(lp.program);
#ifndef KILN_LOWERING_OPS_FALLBACK_H_
#define KILN_LOWERING_OPS_FALLBACK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ir/graph/graph.h"
#include "ir/loop/loop_ir.h"

namespace kiln::lowering {

// ExternCall::op of a reference fallback call.
inline constexpr char kReferenceCallOp[] = "kiln.Reference";
// string: the one-node graph the call runs, in the text form of
// ir/graph/text.h printed in full. Its inputs are the call's inputs in order
// (the node's present inputs, then the outer values its subgraphs capture,
// each once, under their model names); its outputs are the call's outputs.
inline constexpr char kAttrReferenceGraph[] = "kiln_reference_graph";
// string: the node's op type ("Det", "ai.onnx.ml.TreeEnsembleRegressor").
inline constexpr char kAttrReferenceOp[] = "kiln_reference_op";
// string: why lowering did not compile the node (its refusal message).
inline constexpr char kAttrFallbackReason[] = "kiln_fallback_reason";
// ints: positions in call.inputs / call.outputs whose buffers hold values
// of data-dependent shape. Such a buffer is a zero-size placeholder (its
// unknown dims, or its unknown rank, are 0); the value itself exists only
// at run time.
inline constexpr char kAttrDynamicInputs[] = "kiln_dynamic_inputs";
inline constexpr char kAttrDynamicOutputs[] = "kiln_dynamic_outputs";

bool IsReferenceCall(const ir::loop::Kernel& kernel);

// Per call input (`outputs` false) or output of `kernel`: whether it is a
// value of data-dependent shape. All false for other kernels.
std::vector<bool> DynamicOperands(const ir::loop::Kernel& kernel, bool outputs);

// Per buffer of `program`: whether it is the placeholder of a value of
// data-dependent shape (an input or output of some reference call).
std::vector<bool> DynamicBuffers(const ir::loop::LoopProgram& program);

// The placeholder shape of a value of data-dependent shape.
ir::Shape PlaceholderShape(const ir::Value& value);

// Whether every dim of `value` is known at compile time.
bool HasStaticShape(const ir::Value& value);

namespace internal {

class Lowerer;
struct Operand;

// What a reference call for `node` reads: its present inputs, then the
// values of `graph` its subgraphs capture (by name, at any depth), each once.
std::vector<ir::ValueId> ReferenceCallReads(const ir::Graph& graph,
                                            const ir::Node& node);

// Lowers the current node to a reference call reading `reads` (as
// ReferenceCallReads lists them) through `operands` (one per read).
// Returns `refusal` unchanged when the reference interpreter cannot run the
// node either; its message becomes the kernel's fallback reason.
absl::Status LowerReferenceCall(Lowerer& lowerer, const ir::Node& node,
                                absl::Span<const ir::ValueId> reads,
                                absl::Span<const Operand> operands,
                                const absl::Status& refusal);

}  // namespace internal
}  // namespace kiln::lowering

#endif  // KILN_LOWERING_OPS_FALLBACK_H_
