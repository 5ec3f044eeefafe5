// File: passes/loop/fuse_horizontal.h — pass `fuse-horizontal`: merges a
// later loop kernel B into an earlier sibling A over the same iteration
// space when both read a common buffer, so the data is read in one sweep
// (e.g. ReduceMax and ReduceSum of the same input, or LayerNorm's Y, Mean
// and InvStdDev kernels). The merged kernel sits at A's position and runs
// A's body, then B's, at every point.
//
// Legality (all must hold):
//  1. A and B are loop kernels with equal iteration ranges; their reduction
//     ranges are equal or one of them has none (they share r0..).
//  2. They do not write a common buffer, and A reads nothing B writes.
//  3. B may read a buffer X that A writes only through plain loads whose
//     index equals A's (single) store index into X: such a load is replaced
//     by the value A stores there (same iteration point; a store index is
//     never reduction-varying, so an earlier Reduce's result is simply an
//     invariant for B's reductions — softmax's max feeding its sum). Any
//     other read of X refuses the merge (so does a buffer A updates with
//     store_indirect: it has no single store index to forward).
//  4. B moves up to A's position: no kernel between them writes a buffer B
//     reads, or reads or writes a buffer B writes.
//  5. The merged kernel passes the loop verifier.
// Profitability: A and B read at least one common buffer (that neither
// writes). The merged kernel keeps A's name and gets B's `ops` appended.
// Size: A and B have at most max_kernel_ops ops together. Each merge
// rebuilds A, so unbounded merges made the pass quadratic in the number of
// siblings (a model with 1,000 outputs computed from one input), and g++
// then compiled one huge function; fuse-vertical has the same bound.
#ifndef KILN_PASSES_LOOP_FUSE_HORIZONTAL_H_
#define KILN_PASSES_LOOP_FUSE_HORIZONTAL_H_

#include "ir/loop/module.h"
#include "passes/loop/loop_pass.h"

namespace kiln::passes {

class FuseHorizontal : public LoopPass {
 public:
  struct Options {
    int max_kernel_ops = 256;
  };
  FuseHorizontal() = default;
  explicit FuseHorizontal(Options options) : options_(options) {}

  absl::string_view name() const override { return "fuse-horizontal"; }
  absl::StatusOr<bool> Run(ir::loop::LoopModule* program) override;

 private:
  Options options_;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_FUSE_HORIZONTAL_H_
