// File: lowering/extern_attrs.h — how an extern kernel carries its graph
// node: op name prefix ("onnx." / "kiln."), the bookkeeping attributes
// lowering adds (opset, which node inputs/outputs the buffers are,
// string-list attributes), and the lowering entry for graphs that hold
// kiln's fused library-call nodes (the default graph pipeline's output).
#ifndef KILN_LOWERING_EXTERN_ATTRS_H_
#define KILN_LOWERING_EXTERN_ATTRS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"
#include "lowering/lower_graph.h"

namespace kiln::lowering {

// ExternCall::op is kExternOpPrefix + the ONNX op type ("onnx.Conv"), or
// kKilnOpPrefix + the op of a domain-"kiln" node ("kiln.FusedConv").
inline constexpr char kExternOpPrefix[] = "onnx.";
inline constexpr char kKilnOpPrefix[] = "kiln.";
inline constexpr char kKilnDomain[] = "kiln";
// int: the graph's default-domain opset.
inline constexpr char kAttrOpset[] = "kiln_opset";
// ints: the node input / output position of each call input / output
// (omitted optional ones are skipped).
inline constexpr char kAttrInputSlots[] = "kiln_input_slots";
inline constexpr char kAttrOutputSlots[] = "kiln_output_slots";
// string: names of attributes that were STRINGS, joined by kListSeparator
// (their values are joined the same way).
inline constexpr char kAttrStringLists[] = "kiln_string_lists";
inline constexpr char kListSeparator[] = ",";

// kiln's fused library-call ops (passes/graph/fuse_onednn_post_ops.h):
// "FusedConv", "FusedConvTranspose", "FusedMatMul", "FusedGemm".
bool IsKilnFusedOp(absl::string_view op);

// LowerGraph for a graph that may hold domain-"kiln" Fused* nodes (what the
// default graph pipeline produces): they become "kiln.Fused*" extern kernels
// carrying all their attributes. Any other non-ONNX domain is Unimplemented,
// as in LowerGraph.
absl::StatusOr<LoweredProgram> LowerGraphWithKilnOps(
    const ir::Graph& graph, const LoweringOptions& options = {});

}  // namespace kiln::lowering

#endif  // KILN_LOWERING_EXTERN_ATTRS_H_
