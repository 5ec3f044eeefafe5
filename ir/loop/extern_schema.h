// File: ir/loop/extern_schema.h — the schema of extern calls (loop kernels
// that call a library): the op names lowering gives them, the bookkeeping
// attributes it writes (which node inputs/outputs the call's buffers are,
// the opset, string lists), the layout attributes propagate-layout writes,
// and the reference fallback call's attributes. Lowering and passes write
// these; backends and the runtime read them. Nothing else declares them.
//
//   if (IsReferenceCall(kernel)) { ... DynamicOperands(kernel, true) ... }
//   kernel.call.attrs[kAttrInputSlots] = std::vector<int64_t>{0, 1};
#ifndef KILN_IR_LOOP_EXTERN_SCHEMA_H_
#define KILN_IR_LOOP_EXTERN_SCHEMA_H_

#include <cstdint>
#include <vector>

#include "ir/loop/loop_ir.h"

namespace kiln::ir::loop {

// ExternCall::op is kOnnxOpPrefix + the ONNX op type ("onnx.Conv"), or
// kKilnOpPrefix + the op of a domain-"kiln" node ("kiln.FusedConv").
inline constexpr char kOnnxOpPrefix[] = "onnx.";
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

// Activation layouts chosen by passes/loop/propagate_layout: one int per
// call input / output, the logical channel count C when that buffer holds
// N C spatial... blocked by kAttrChannelBlock channels ([N, ceil(C/b),
// spatial..., b] row-major, zero channel tail), else 0.
inline constexpr char kAttrBlockedInputs[] = "kiln_blocked_inputs";
inline constexpr char kAttrBlockedOutputs[] = "kiln_blocked_outputs";
// int: the channel block b of the blocked operands; kChannelsLastBlock:
// each blocked operand blocked by its own channel count C ([N, 1,
// spatial..., C], i.e. channels-last / NHWC).
inline constexpr char kAttrChannelBlock[] = "kiln_channel_block";
inline constexpr int64_t kChannelsLastBlock = -1;

// string: the activation layouts a library conv runs on, chosen by timing
// the candidates at compile time (backends/onednn/call_tuner.h): "caller",
// "any", "nhwc", "blocked8" or "blocked16" (OneDnnCallOptions::
// ActivationForm). Absent: the library's rule. Only written when tuning is on
// and the measured choice differs from the rule's.
inline constexpr char kAttrCallForm[] = "kiln_call_form";

// A reference fallback call: a node lowering cannot compile, run on the
// reference interpreter (interp/) as one extern kernel.
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

bool IsReferenceCall(const Kernel& kernel);
// Per call input (`outputs` false) or output of `kernel`: whether it is a
// value of data-dependent shape. All false for other kernels.
std::vector<bool> DynamicOperands(const Kernel& kernel, bool outputs);
// Per buffer of `program`: whether it is the placeholder of a value of
// data-dependent shape (an input or output of some reference call).
std::vector<bool> DynamicBuffers(const LoopProgram& program);

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_EXTERN_SCHEMA_H_
