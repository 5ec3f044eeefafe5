// File: frontend/onnx/guarded_schemas.h — the operator schemas kiln hands to
// libonnx's shape inference. Some inference functions of Debian's libonnx
// 1.12 trust what ONNX requires but nothing checked (its checker only warns
// on opsets newer than it knows): Conv, ConvInteger, QLinearConv and
// ConvTranspose take the kernel's rank from the weights and read the
// input's dims and the dilations at it (past both when the weights have
// another rank), the pools and convs divide by the strides (a zero stride is
// a SIGFPE), Concat dereferences its 'axis' attribute unchecked and Split
// divides by its number of outputs. GuardedSchemas() answers what libonnx's
// own registry does, with every inference function behind checks of the
// node's minimum arity and required attributes (and the Conv family's behind
// the rank and stride rules) that fail the node's inference with an error
// naming what is wrong instead. libonnx's non-strict inference drops such a
// node's error; GuardRefusals() tells the caller that one happened, and the
// error starts with kGuardRefusal, so a strict run can name the node.
// Internal to frontend/onnx.
#ifndef KILN_FRONTEND_ONNX_GUARDED_SCHEMAS_H_
#define KILN_FRONTEND_ONNX_GUARDED_SCHEMAS_H_

#include <cstdint>

#include "onnx/defs/schema.h"

namespace kiln::frontend::onnx_internal {

// The registry to pass to onnx::shape_inference::InferShapes. Immutable and
// safe to use from several threads.
const onnx::ISchemaRegistry* GuardedSchemas();

// How many times a guard refused a node on this thread so far.
int64_t GuardRefusals();

// The start of every guard's inference error.
inline constexpr char kGuardRefusal[] = "kiln refuses the node before libonnx's inference: ";

}  // namespace kiln::frontend::onnx_internal

#endif  // KILN_FRONTEND_ONNX_GUARDED_SCHEMAS_H_
