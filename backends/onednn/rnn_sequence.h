// File: backends/onednn/rnn_sequence.h — an ONNX LSTM or GRU (layout 0,
// default activations) as one oneDNN matmul for the input projection of
// every step plus a Highway kernel for the recurrence, the way ONNX Runtime
// runs them: XW[T*N, G*H] = X[T*N, I] x W^T + bias in one GEMM, then per
// step h[N, H] x R^T with the gate math (sigmoid, tanh, peepholes, the cell
// or GRU update) fused into the matrix-vector product's epilogue. At small
// batch this beats oneDNN 2.6's RNN primitive (decisions 0065, 0069).
//
//   RnnSequenceShape shape;  // cell, seq, batch, input, hidden, dirs
//   KILN_ASSIGN_OR_RETURN(auto seq, RnnSequence::Create(shape, w, r, b, p,
//                                                        true, "node 'x'"));
//   KILN_RETURN_IF_ERROR(seq->Run(x, h0, c0, y, y_h, y_c));
#ifndef KILN_BACKENDS_ONEDNN_RNN_SEQUENCE_H_
#define KILN_BACKENDS_ONEDNN_RNN_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::onednn {

// kGru applies the reset gate to h before the product with Rh (ONNX
// linear_before_reset=0); kLbrGru to the product (linear_before_reset=1).
enum class SequenceCell { kLstm, kGru, kLbrGru };

struct RnnSequenceShape {
  SequenceCell cell = SequenceCell::kLstm;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int64_t dirs = 1;      // 2: bidirectional (forward, then reverse)
  bool reverse = false;  // dirs == 1: the one direction runs backwards
};

// An LSTM's recurrent weights as 8-bit integers, the meaning of
// DequantizeLinear: R[d, j, k] = (q[d, j, k] - zero_point) * scale, with
// one scale (and zero point) per direction or per column j (gate g of
// hidden unit j % H). q is in ONNX's R layout [D, 4*H, H].
struct QuantizedRecurrence {
  const void* q = nullptr;
  bool is_uint8 = false;               // uint8, else int8
  const float* scale = nullptr;        // [D] or [D, 4*H]
  const void* zero_point = nullptr;    // q's type, scale's shape; nullptr: 0
  bool per_column = false;             // scale [D, 4*H]
};

// Why a class: the projection primitive, the weights packed for it and for
// the recurrence, and the per-step scratch are built once; Run allocates
// nothing. Run is not safe to call concurrently on one object.
class RnnSequence {
 public:
  // Weights in ONNX's layouts and gate orders, G = 4 (LSTM i, o, f, c) or
  // 3 (GRU z, r, h): w [D, G*H, I], r [D, G*H, H], b [D, 2*G*H] (Wb then
  // Rb; nullptr: zeros), p [D, 3H] (LSTM peepholes i, o, f; nullptr: none;
  // must be nullptr for a GRU). They are copied, so they need not outlive
  // Create. `prepack` lets oneDNN choose the projection weights' layout.
  // `where` names the kernel in errors.
  static absl::StatusOr<std::unique_ptr<RnnSequence>> Create(
      const RnnSequenceShape& shape, const float* w, const float* r, const float* b,
      const float* p, bool prepack, absl::string_view where);
  // The same for an LSTM whose recurrent weights stay 8-bit: the
  // recurrence widens them to f32 in registers, accumulates
  // sum_k h[k] * (q[j, k] - zp[j]) in f32 and multiplies it by scale[j]
  // once per column (a quarter of the bytes streamed per step; the input
  // projection stays an f32 matmul over w).
  static absl::StatusOr<std::unique_ptr<RnnSequence>> Create(
      const RnnSequenceShape& shape, const float* w, const QuantizedRecurrence& r,
      const float* b, const float* p, bool prepack, absl::string_view where);

  ~RnnSequence();
  RnnSequence(const RnnSequence&) = delete;
  RnnSequence& operator=(const RnnSequence&) = delete;

  // x [T, N, I]; h0, c0 [D, N, H] (nullptr: zeros); y [T, D, N, H], y_h,
  // y_c [D, N, H] (nullptr: not written). A GRU has no c0 / y_c (ignored).
  absl::Status Run(const float* x, const float* h0, const float* c0, float* y,
                   float* y_h, float* y_c);

  // "kiln:lstm_steps(AVX3)+matmul(brg:avx512_core)" ("gru_steps" for a
  // GRU, "lstm_steps_s8r" for 8-bit recurrent weights): the Highway target
  // of the recurrence and oneDNN's implementation of the projection.
  const std::string& impl() const;
  // The projection weights' layout as oneDNN reports it ("ab", "BA16a64b").
  const std::string& weights_layout() const;
  // Bytes of packed weights and bias held.
  int64_t packed_bytes() const;

 private:
  struct Impl;
  explicit RnnSequence(std::unique_ptr<Impl> impl);
  static absl::StatusOr<std::unique_ptr<RnnSequence>> CreateImpl(
      const RnnSequenceShape& shape, const float* w, const float* r,
      const QuantizedRecurrence* rq, const float* b, const float* p, bool prepack,
      absl::string_view where);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_RNN_SEQUENCE_H_
