// File: passes/loop/fuse_vertical.h — pass `fuse-vertical`: inlines a
// producer loop kernel into the loop kernels that read its result, so the
// intermediate buffer (and the producer) disappear: pointwise into
// pointwise, pointwise into a reduction's prologue, and a reduction into its
// pointwise consumer (the consumer becomes the reduction kernel with an
// epilogue, as lowering's Softmax kernel is).
//
// Inlining. The consumer's loads of the producer's buffer B are replaced by
// a copy of the producer's body (the cone of its stored value) in which each
// producer iteration variable is recovered from the load's offset
// (`(offset // stride) % extent` of the producer's dense store index,
// simplified, so a same-shape read collapses to the consumer's own
// variables) and each producer reduction variable becomes the consumer's.
// Loads at the same offset share one copy. Unknown ops are copied verbatim
// (their index substituted like any other).
//
// Legality (all must hold, else the producer stays):
//  1. The producer P is a loop kernel with exactly one store (and no
//     store_indirect: a scatter's buffer has two writers, the kernel that
//     copies `data` into it and the scatter, so neither is ever inlined), into an
//     intermediate buffer B that is not a graph input/output/constant, and P
//     is B's only writer; P does not read B; every extent of P is > 0.
//  2. P's store index is dense (a bijection of P's iteration space onto
//     B's whole storage [0, StorageSize)), so every offset a consumer reads
//     was written by exactly one point, recovered by the inverse.
//  3. If B is f16 or bf16, the stored value is a cast to B's dtype (already
//     rounded, so the store does not round it again: inlining keeps the
//     rounding); the stored value and every replaced load have B's dtype.
//  4. Every reader of B is a loop kernel after P that reads B only through
//     plain `load` ops (not through unknown ops such as data-dependent
//     loads), and does not write B or any buffer P reads.
//  5. No kernel between P and a consumer writes a buffer P reads (P's
//     computation moves to the consumer's position: no read moves past a
//     write of the same buffer).
//  6. Reductions: if both have reduction ranges they are equal (they share
//     reduction variables); and no Reduce op of P may depend on a producer
//     iteration variable whose recovered value uses a consumer reduction
//     variable (that would nest a reduction inside another, which the IR
//     cannot express). An earlier Reduce's result is a per-point invariant,
//     so a reduction may feed another reduction's prologue.
//  7. If P has an op that can fail (integer division, unknown ops), each
//     consumer reads all of B densely, so no failing element goes unchecked.
//  8. The fused kernel passes the loop verifier (bounds are re-proven).
//
// Profitability. P is recomputed per read: `amplification` = evaluations of
// the inlined copies (consumer iteration points up to its innermost
// variable the offset uses, times the reduction space if the offset uses a
// reduction variable, summed over distinct offsets) / P's points. A P with a
// Reduce is inlined only into a single consumer with amplification <= 1
// (the reduction is computed as often as before) and only when no Reduce
// that P computes outside its innermost loop would depend on the
// consumer's innermost variable (then it would be recomputed per element,
// e.g. LayerNorm statistics inlined into a window-partition copy). A
// pointwise P is inlined
// into any number of consumers when amplification <= 1 or its op count x
// amplification <= max_amplified_ops, and, with several consumers, when it
// has at most max_recompute_ops ops, and no consumer would then carry more
// than max_recompute_ops duplicated ops in all (copies compound along a
// chain). The consumer gets P's `ops`.
//
// Size. No fusion makes a kernel of more than max_kernel_ops ops: an
// inlining is refused when the consumer's ops plus P's cone, or the fused
// kernel, exceed it. Each inlining rebuilds the consumer, so unbounded
// kernels made the pass quadratic in a chain's length (and gave g++ one
// function of 40,000 statements); a chain of pointwise ops longer than the
// bound becomes several kernels of about max_kernel_ops ops each, which
// costs one store and one load per max_kernel_ops ops (Inductor bounds its
// fusions the same way: max_fusion_size).
#ifndef KILN_PASSES_LOOP_FUSE_VERTICAL_H_
#define KILN_PASSES_LOOP_FUSE_VERTICAL_H_

#include "ir/loop/module.h"
#include "passes/loop/loop_pass.h"

namespace kiln::passes {

class FuseVertical : public LoopPass {
 public:
  struct Options {
    int max_recompute_ops = 64;
    double max_amplified_ops = 32;
    int max_kernel_ops = 256;
  };
  FuseVertical() = default;
  explicit FuseVertical(Options options) : options_(options) {}

  absl::string_view name() const override { return "fuse-vertical"; }
  absl::StatusOr<bool> Run(ir::loop::LoopModule* program) override;

 private:
  Options options_;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_FUSE_VERTICAL_H_
