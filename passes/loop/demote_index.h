// File: passes/loop/demote_index.h — pass `demote-index`: int64 index
// arithmetic whose values provably fit in int32 becomes int32, so the
// emitter can compute it in vector registers (Highway has no 64-bit integer
// lanes on every target, and an i64 lane holds half as many elements).
//
// Lowering computes index-derived values (pooling and padding masks, iota,
// Range, one-hot positions) as i64 because ONNX's index type is int64. An
// i64 op of a loop kernel is demoted when
//  - it is an `index`, an integer `constant`, or add/sub/mul/neg/abs/min/max
//    of demoted values, or a select between two demoted values;
//  - its value range — interval arithmetic from the index expressions over
//    the variables' extents (ir::loop::ValueRange) and the constants — and
//    every operand's lies in [INT32_MIN, INT32_MAX], so no step of the i32
//    computation can wrap where the i64 one would not; and
//  - every user takes the i32 value as it took the i64 one: another
//    demoted op, a comparison whose other operand is demoted too, a cast
//    (an integer converts to every dtype the same way whatever its width),
//    or the index operand of a load_indirect / store_indirect.
// A value stored, reduced, divided or otherwise used stays i64 (with the
// ops it needs): the pass never inserts casts. Results are unchanged; only
// dtypes change, so buffers, kernels and op numbering stay as they are.
//
// Runs last, after layout propagation, whose blocked indices are the ones
// the emitter sees.
#ifndef KILN_PASSES_LOOP_DEMOTE_INDEX_H_
#define KILN_PASSES_LOOP_DEMOTE_INDEX_H_

#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "passes/loop/loop_pass.h"

namespace kiln::passes {

class DemoteIndex : public LoopPass {
 public:
  absl::string_view name() const override { return "demote-index"; }
  absl::StatusOr<bool> Run(ir::loop::LoopModule* program) override;
};

// The ops of loop kernel `k` that demote-index turns from i64 into i32 (for
// tests and the pass itself).
std::vector<bool> DemotableOps(const ir::loop::Kernel& k);

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_DEMOTE_INDEX_H_
