// File: lowering/extern_attrs.h — how an extern kernel carries its graph
// node: op name prefix ("onnx." / "kiln."), the bookkeeping attributes
// lowering adds (opset, which node inputs/outputs the buffers are,
// string-list attributes), and which kiln ops lower to extern kernels.
#ifndef KILN_LOWERING_EXTERN_ATTRS_H_
#define KILN_LOWERING_EXTERN_ATTRS_H_

#include "absl/strings/string_view.h"

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
// "FusedConv", "FusedConvTranspose", "FusedMatMul", "FusedGemm". LowerGraph
// lowers domain-"kiln" nodes of these ops to "kiln.Fused*" extern kernels
// carrying all their attributes.
bool IsKilnFusedOp(absl::string_view op);

}  // namespace kiln::lowering

#endif  // KILN_LOWERING_EXTERN_ATTRS_H_
