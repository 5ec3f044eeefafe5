// File: lowering/extern_attrs.h — how an extern kernel carries its ONNX
// node: op name prefix and the bookkeeping attributes lowering adds (opset,
// which node inputs/outputs the buffers are, string-list attributes).
#ifndef KILN_LOWERING_EXTERN_ATTRS_H_
#define KILN_LOWERING_EXTERN_ATTRS_H_

namespace kiln::lowering {

// ExternCall::op is kExternOpPrefix + the ONNX op type ("onnx.Conv").
inline constexpr char kExternOpPrefix[] = "onnx.";
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

}  // namespace kiln::lowering

#endif  // KILN_LOWERING_EXTERN_ATTRS_H_
