// File: lowering/ops_fallback.h — reference fallback calls: a node lowering
// cannot compile becomes one "kiln.Reference" extern kernel that runs that
// node (attributes and subgraphs included) on the reference interpreter, and
// such kernels alone produce and read values whose shape is known only at
// run time.
//
//   LoweringOptions o;
//   o.reference_fallback = [](const ir::Graph& g) { return interp::UnsupportedOps(g).empty(); };
//   KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule lp, LowerGraph(graph, o));
//   std::vector<bool> dynamic = ir::loop::DynamicBuffers(lp.program);
#ifndef KILN_LOWERING_OPS_FALLBACK_H_
#define KILN_LOWERING_OPS_FALLBACK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ir/graph/graph.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"

namespace kiln::lowering {

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
