// File: passes/graph/integer_calls_in_f32.h — pass `integer-calls-in-f32`:
// ConvInteger, MatMulInteger, QLinearConv and QLinearMatMul nodes the call
// library refuses as integer calls become f32 Conv/MatMul on integer-valued
// operands.
#ifndef KILN_PASSES_GRAPH_INTEGER_CALLS_IN_F32_H_
#define KILN_PASSES_GRAPH_INTEGER_CALLS_IN_F32_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "passes/graph/integer_call_oracle.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

// A node the oracle refuses (Unimplemented) is rewritten, when the rules
// below allow, into
//   x_f = Cast(x, f32) - x_zero_point        (loop kernel)
//   w_f = w - w_zero_point                    (f32 constant, folded here)
//   acc = Conv(x_f, w_f) / MatMul(x_f, w_f)   (f32 library call)
// Every operand is an integer of magnitude <= 255, so every product is exact
// in f32 (and in bf16, whose 8-bit significand holds it: bf16 mode changes
// nothing); only the f32 accumulation can round. For an output channel c,
// S_c = sum_k |w_k - w_zero_point_c| * max|x - x_zero_point| bounds every
// partial sum (max over x's type range and, for a runtime zero point, over
// its range too; runtime B of MatMulInteger: K * max|B - b_zero_point|).
//   - S_c < 2^24 for every c: every partial sum is an integer below 2^24,
//     so acc is exact and ConvInteger/MatMulInteger's i32 result is
//     Cast(acc, i32), bit-exact.
//   - Otherwise, when the only reader is a Cast to float, the Cast reads acc
//     directly. Each of the K-1 additions rounds by at most half an ulp of a
//     value <= S_c: |acc - exact| <= (K-1) * 2^-24 * S_c. The rewrite is
//     allowed when (K-1) * 2^-24 <= 2^-10 (K <= 16385): at most 2^-10 of the
//     largest value the channel can take, where the Cast itself rounds by
//     2^-24 of the value it gets.
//   - QLinearConv: y = QuantizeLinear((acc + B) * x_scale * w_scale_c / y_scale,
//     1, y_zero_point), one quantization step from the reference
//     (interp::Tolerance::integer_steps) when the accumulation error is at
//     most half a step: K * 2^-24 * (S_c + |B_c|) * x_scale * w_scale_c /
//     y_scale <= 1/2 where S_c + |B_c| >= 2^24. QLinearMatMul likewise, per
//     column of B (it replaces the scalar loop kernel lowering falls back
//     to).
// Runtime weights are shifted at run time like x (Cast, Sub), and their
// bound is K * max|w - w_zero_point| * max|x - x_zero_point| over the types'
// ranges; the f32 Conv reads them in their plain layout. Runtime QLinearConv
// scales are multiplied at run time, allowed only when every sum is exact
// (the half-step check needs their values).
// Otherwise — a per-row MatMulInteger A zero point, a runtime per-channel
// weight zero point, a runtime QLinearConv bias, a bound the rules reject —
// the node is kept (a reference call); kept() says why.
//
// Without an oracle the pass changes nothing (every integer call is taken).
// The weights are not scaled: the pass runs after the weight folds, so a
// later Mul is a post-op, not folded into w_f, and w_f stays integral.
class IntegerCallsInF32 : public GraphPass {
 public:
  explicit IntegerCallsInF32(IntegerCallOracle oracle = {}) : oracle_(std::move(oracle)) {}
  absl::string_view name() const override { return "integer-calls-in-f32"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;

  // After Run: nodes the oracle refused that stay integer nodes, each as
  // "<node>: <why>".
  const std::vector<std::string>& kept() const { return kept_; }
  // After Run: how many nodes were rewritten.
  int rewritten() const { return rewritten_; }

 private:
  IntegerCallOracle oracle_;
  std::vector<std::string> kept_;
  int rewritten_ = 0;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_INTEGER_CALLS_IN_F32_H_
