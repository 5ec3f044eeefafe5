// File: ir/loop/blocked_layout.h — the loop IR's channel-blocked activation
// layout (what passes/loop/propagate_layout writes, what library calls and
// reference calls read): a blocked buffer holding the logical N C spatial...
// tensor is a row-major buffer of shape [N, ceil(C/b), spatial..., b] whose
// channel tail is zero (oneDNN's nChw8c / nChw16c). Extern kernels say which
// of their buffers are blocked in extern_schema.h's kAttrBlockedInputs /
// kAttrBlockedOutputs / kAttrChannelBlock.
//
//   KILN_ASSIGN_OR_RETURN(std::vector<int64_t> c, BlockedChannels(kernel, false));
//   KILN_ASSIGN_OR_RETURN(ir::Tensor plain, FromBlocked(physical, c[0]));
#ifndef KILN_IR_LOOP_BLOCKED_LAYOUT_H_
#define KILN_IR_LOOP_BLOCKED_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"

namespace kiln::ir::loop {

// Appended to the description of a loop kernel that converts between a
// blocked and a plain activation.
inline constexpr char kReorderTag[] = " [layout reorder]";
// Appended to the tail kernel of such a kernel: the last, partial channel
// block it splits off (counted with the kernel, not on its own).
inline constexpr char kReorderTailTag[] = " [layout reorder tail]";

// Layout-converting loop kernels of `program` (kernels tagged kReorderTag).
int CountLayoutReorderKernels(const LoopProgram& program);

// Per call input (outputs: false) or output of an extern kernel: the
// logical channel count of a blocked buffer, 0 for a plain one. Empty
// attributes: all plain. InvalidArgument for malformed attributes.
absl::StatusOr<std::vector<int64_t>> BlockedChannels(const Kernel& kernel, bool outputs);

// The logical shape of blocked `physical` ([N, ceil(C/b), spatial..., b])
// with C = channels.
Shape LogicalShape(const Shape& physical, int64_t channels);
// A logical N C spatial... tensor blocked by `block` (zero channel tail),
// and back. InvalidArgument for ranks < 3 or shapes that do not match.
absl::StatusOr<Tensor> ToBlocked(const Tensor& logical, int64_t block);
absl::StatusOr<Tensor> FromBlocked(const Tensor& physical, int64_t channels);

// An extern kernel as a reference implementation must see it: `program`
// with each blocked buffer of the call given its logical shape (row-major),
// the kernel without its layout attributes.
struct ExternLogicalView {
  LoopProgram program;
  Kernel kernel;
};
absl::StatusOr<ExternLogicalView> LogicalViewForExtern(const LoopProgram& program,
                                                       const Kernel& kernel);

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_BLOCKED_LAYOUT_H_
