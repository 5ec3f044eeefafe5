// File: passes/graph/fuse_qdq.h — pass `fuse-qdq`: the QDQ patterns of
// statically quantized models (DequantizeLinear -> Conv/Gemm/MatMul ->
// QuantizeLinear) become QLinearConv / QLinearMatMul, which run as integer
// library calls, when the call library runs the result.
#ifndef KILN_PASSES_GRAPH_FUSE_QDQ_H_
#define KILN_PASSES_GRAPH_FUSE_QDQ_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/graph/graph.h"
#include "passes/graph/integer_call_oracle.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

// One QDQ pattern the pass found: rewritten (`op` names the integer op), or
// left in f32 with the reason.
struct QdqPattern {
  std::string node;  // the Conv / Gemm / MatMul (its name, or its result's)
  std::string anchor;  // its op
  std::string op;      // "QLinearConv" / "QLinearMatMul" / "MatMulInteger", empty when left f32
  std::string reason;  // why it stayed f32
};

// A statically quantized model (onnxruntime's quantize_static, QDQ format)
// computes each Conv / Gemm / MatMul in f32 between DequantizeLinear of its
// u8/i8 input and its constant weights, and a QuantizeLinear of the result.
// The integer op computes the same thing on the integers with one
// requantization: the pattern
//   DQ(x) , DQ(W const) [, bias] -> Conv [-> Relu | Clip] -> Q   => QLinearConv
//   DQ(x [M,K]) , DQ(W const) [, C] -> Gemm [-> Relu | Clip] -> Q
//       => Reshape -> QLinearConv (1x1, with bias) -> Reshape
//   DQ(x) , DQ(B const 2-D) -> MatMul [-> Relu | Clip] -> Q   => QLinearMatMul
//   DQ(a) , DQ(b) -> MatMul [-> Relu | Clip] -> Q               => QLinearMatMul
// where x's and the output's scale and zero point are one constant each and
// the weights' one or one per output channel. In the last form b is an
// activation (attention's Q x K^T, softmax x V), batched like a, with one
// constant scale and zero point; a u8 b is read as the s8 value b - 128
// with zero point - 128 (the call library takes s8 B only), written by a
// QuantizeLinear of b's own input with the shifted zero point when b is a
// QuantizeLinear's result (so it is computed where b is), else by
// QuantizeLinear(DequantizeLinear(b, 1, 128), 1, 0). A zero point whose type
// is not its tensor's, or whose count is not its scale's, is
// InvalidArgument naming the node (ONNX forbids both). A MatMul of two
// dequantized activations whose f32 result no QuantizeLinear reads becomes
//   MatMulInteger(a, b [as s8], a_zp, b_zp) -> Cast(f32) -> Mul(a_scale * b_scale)
// (ONNX Runtime's MatMulIntegerToFloat), listed with op "MatMulInteger". The bias (a DequantizeLinear
// of i32 or an f32 constant) becomes i32 in units of x_scale * w_scale[c]:
// as it is when its scale is that product (onnxruntime's), else rounded once
// (at most half a unit of the accumulator, within the one-step rule of
// docs/quantization.md). A Relu or Clip between the op and the Q is dropped
// only when the Q's saturation already implies it (Relu: output zero point
// at the type's minimum; Clip: quantized bounds outside the type's range);
// otherwise the pattern stays f32.
//
// Only the Q node is replaced (its output keeps its value and name); the op
// (and activation) are removed only when the Q is their result's one
// reader; the DequantizeLinear nodes stay for their other readers
// (eliminate-dead-code removes unused ones). A pattern is rewritten only
// when `oracle` takes the integer node; an unset oracle takes every node.
// Every pattern found is listed in patterns() with its outcome, and the
// compile report shows why one stayed f32.
class FuseQdq : public GraphPass {
 public:
  explicit FuseQdq(IntegerCallOracle oracle = {}) : oracle_(std::move(oracle)) {}
  absl::string_view name() const override { return "fuse-qdq"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;

  // The patterns of the last Run, in graph order.
  const std::vector<QdqPattern>& patterns() const { return patterns_; }

 private:
  IntegerCallOracle oracle_;
  std::vector<QdqPattern> patterns_;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_FUSE_QDQ_H_
