// File: passes/graph/fuse_dequantize_lstm.h — pass `fuse-dequantize-lstm`:
// an LSTM whose recurrent weights R are a DequantizeLinear of 8-bit
// constants becomes kiln.FusedLSTM, which the library runs with the weights
// kept 8-bit (decision 0074), when one direction's f32 R would not stay in
// L2 and the call library takes it.
#ifndef KILN_PASSES_GRAPH_FUSE_DEQUANTIZE_LSTM_H_
#define KILN_PASSES_GRAPH_FUSE_DEQUANTIZE_LSTM_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "passes/graph/fuse_qdq.h"
#include "passes/graph/integer_call_oracle.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

// Bytes of one direction's f32 R (4H x H floats) above which its 8-bit form
// pays: measured with rnn_int8_benchmark at hidden 128-512
// (benchmarks/results/2026-12-03-rnn-int8-weights.md): at 1 MiB (hidden 256)
// and below, widening the 8-bit weights costs more than the bytes saved.
inline constexpr int64_t kMinF32RecurrenceBytes = int64_t{1} << 20;

// The importer writes a DynamicQuantizeLSTM's R as ONNX's
// DequantizeLinear(q [D, 4H, H], scale, zero_point) -> LSTM.R (per tensor,
// per direction on axis 0, per column of one direction on axis 1), or below
// opset 13, for two directions, as Concat(axis 0) of one per-tensor
// DequantizeLinear per direction over q [1, 4H, H]. Both are matched on a
// default-domain LSTM (u8 or i8 constants, f32 constant scales, zero points
// of q's type and the scale's count, or none). When one direction's f32 R
// exceeds `min_f32_r_bytes` and `oracle` takes the node (unset: taken), the
// LSTM becomes
//   kiln.FusedLSTM(X, W, q, B, sequence_lens, initial_h, initial_c, P,
//                  R_scale, R_zero_point)
// with the LSTM's attributes, name and outputs, R_scale [D] (per tensor or
// per direction) or [D, 4H] (per column) and R_zero_point of that shape (or
// absent); the DequantizeLinear and Concat nodes stay for their other
// readers (eliminate-dead-code removes unused ones). Otherwise R stays
// f32: fold-dequantize-linear folds the one-node form; the Concat form,
// which no later pass folds, becomes its f32 constant here (float(q - zp) *
// scale, the reference's rounding). Every pattern found is listed in
// patterns() (`op` "FusedLSTM" when rewritten, else the reason).
class FuseDequantizeLstm : public GraphPass {
 public:
  explicit FuseDequantizeLstm(IntegerCallOracle oracle = {},
                              int64_t min_f32_r_bytes = kMinF32RecurrenceBytes)
      : oracle_(std::move(oracle)), min_f32_r_bytes_(min_f32_r_bytes) {}
  absl::string_view name() const override { return "fuse-dequantize-lstm"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;

  // The patterns of the last Run, in graph order.
  const std::vector<QdqPattern>& patterns() const { return patterns_; }

 private:
  IntegerCallOracle oracle_;
  int64_t min_f32_r_bytes_;
  std::vector<QdqPattern> patterns_;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_FUSE_DEQUANTIZE_LSTM_H_
