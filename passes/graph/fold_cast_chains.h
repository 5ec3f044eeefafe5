// File: passes/graph/fold_cast_chains.h — pass `fold-cast-chains`: a Cast
// that reads a lossless Cast reads the first cast's input instead, and a
// Cast to its input's own type becomes an Identity.
#ifndef KILN_PASSES_GRAPH_FOLD_CAST_CHAINS_H_
#define KILN_PASSES_GRAPH_FOLD_CAST_CHAINS_H_

#include "ir/graph/dtype.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

// Which chains are exact. Cast(Cast(x: A) -> B) -> C equals Cast(x: A) -> C
// exactly when A -> B is lossless, i.e. every value of A is a value of B:
// the second cast then sees x's own value, and a cast's result depends only
// on the value and the target type. Lossless (IsLosslessCast):
//   f16 -> f32, f64;  bf16 -> f32, f64;  f32 -> f64;
//   i8 -> i32, i64, f16, bf16, f32, f64;  u8 -> the same;
//   i32 -> i64, f64;  bool -> every type;  any T -> T.
// So f16 -> f32 -> f16 is x itself and u8 -> i32 -> f32 is u8 -> f32, while
// f32 -> f16 -> f32 (rounds), f16 -> bf16 (neither holds the other),
// i32 -> f32 (rounds above 2^24) and i32 -> i8 (wraps) are kept. NaN
// payloads are not preserved by every cast, so folding may change a NaN's
// payload bits, never whether a value is NaN.
//
// A Cast whose input then has its own target type becomes an Identity node
// (eliminate-identity removes it with its rules for graph outputs); first
// casts left without readers go to eliminate-dead-code.
class FoldCastChains : public GraphPass {
 public:
  absl::string_view name() const override { return "fold-cast-chains"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;
};

// Whether every value of `from` is exactly a value of `to`.
bool IsLosslessCast(ir::DType from, ir::DType to);

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_FOLD_CAST_CHAINS_H_
