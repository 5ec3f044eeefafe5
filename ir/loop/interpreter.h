// File: ir/loop/interpreter.h — a scalar interpreter of the loop IR: plain
// loops over each kernel's iteration and reduction spaces, one op at a time
// (semantics in loop_ir.h). Lowering tests compare it with the graph
// reference interpreter; emitter tests compare generated code with it.
//
//   std::map<std::string, Tensor> in = {{"x", x_tensor}};
//   KILN_ASSIGN_OR_RETURN(auto out, RunLoopProgram(program, in));
//   const Tensor& y = out.at("y");
#ifndef KILN_IR_LOOP_INTERPRETER_H_
#define KILN_IR_LOOP_INTERPRETER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"

namespace kiln::ir::loop {

struct InterpreterOptions {
  // Largest buffer storage allocated, so a huge shape is an error rather
  // than an out-of-memory crash.
  int64_t max_buffer_elements = int64_t{1} << 28;
};

// Runs every kernel in order. `bindings` gives every input and constant
// buffer by name, as a row-major tensor of the buffer's dtype and shape (the
// interpreter lays it out with the buffer's strides). Returns every output
// buffer by name as a row-major tensor.
//
// Numerics: f32/f16 values are rounded to f32 after each op (f16 to half on
// store), f64 stays double; integers wrap to their width; reductions
// accumulate floats in double. Max/min propagate NaN, argmax/argmin treat NaN
// as the extreme. Integer division or modulo by zero and a load_indirect or
// store_indirect index outside [-extent, extent) are InvalidArgument errors naming the kernel, as is a program that fails the verifier. Extern kernels are
// Unimplemented (they call library code).
absl::StatusOr<std::map<std::string, Tensor>> RunLoopProgram(
    const LoopProgram& program, const std::map<std::string, Tensor>& bindings,
    const InterpreterOptions& options = {});

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_INTERPRETER_H_
