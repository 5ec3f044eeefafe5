// File: ir/loop/verifier.h — checks the invariants of a LoopProgram that
// passes and the emitter rely on; run between loop passes and after parsing.
//
//   KILN_RETURN_IF_ERROR(VerifyProgram(program));
//
// Checked: buffer names are unique identifiers with static shapes and
// non-negative strides of the right rank; kernel names are unique
// identifiers; extents are non-negative; every op has the right operand
// count, operands defined earlier in the same body (SSA) that produce values,
// the dtype InferResultDType gives; loads/stores name existing buffers and
// never store into inputs or constants; index expressions use only the
// kernel's variables, divide only by provably positive numbers, and stay in
// bounds of the buffer's storage for every point of the loop ranges (by value
// range analysis; for load_indirect and store_indirect with every index
// value in [0, extent)
// — the value itself is checked at run time); reductions appear only in kernels with reduction ranges;
// stores are not reduction-varying; extern calls name existing buffers and
// write no input or constant.
#ifndef KILN_IR_LOOP_VERIFIER_H_
#define KILN_IR_LOOP_VERIFIER_H_

#include "absl/status/status.h"
#include "ir/loop/loop_ir.h"

namespace kiln::ir::loop {

// OK, or an error naming the kernel, the op (as printed) and the violation.
// A program built by kiln that fails is a kiln bug, so callers in the
// compiler report it as an internal error; the verifier itself returns
// InvalidArgument so it can also judge hand-written text.
absl::Status VerifyProgram(const LoopProgram& program);

// The checks of VerifyProgram that concern kernel `k` alone, against
// `program`'s buffers: its name, its body or call, and the buffers it
// references (not their names' uniqueness, nor the other kernels). `k` need
// not be in `program`: the fusion passes check a candidate before they
// commit to it.
absl::Status VerifyKernel(const LoopProgram& program, const Kernel& k);

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_VERIFIER_H_
