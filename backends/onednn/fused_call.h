// File: backends/onednn/fused_call.h — the description of one fused library
// call (conv / conv_transpose / matmul / linear plus a post-op chain), in
// kiln's own terms: no oneDNN type appears here, so the graph rewriter, the
// compile report and the wrapper emitter can use it without linking oneDNN.
//
//   FusedCall c;
//   c.kind = CallKind::kConv;
//   c.src = {DType::kF32, {1, 64, 56, 56}};
//   c.weights = {DType::kF32, {64, 64, 3, 3}};
//   c.bias = TensorSpec{DType::kF32, {64}};
//   c.conv.pads_begin = c.conv.pads_end = {1, 1};
//   c.dst = {DType::kF32, {1, 64, 56, 56}};
//   c.post_ops = {PostOp::Relu()};
//   c.ToString();  // "conv[3x3 s1 g1 p1]+bias+relu"
#ifndef KILN_BACKENDS_ONEDNN_FUSED_CALL_H_
#define KILN_BACKENDS_ONEDNN_FUSED_CALL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"

namespace kiln::onednn {

// The shape of a buffer the call reads or writes and how it is laid out in
// memory. `strides` (in elements, one per dim) is empty for a dense
// row-major buffer; otherwise it describes any strided view, e.g. a matmul
// operand stored transposed, or NHWC activations of a logical NCHW tensor.
struct TensorSpec {
  ir::DType dtype = ir::DType::kF32;
  ir::Shape shape;
  std::vector<int64_t> strides;
  // > 0: the logical N C spatial... tensor is stored in oneDNN's blocked
  // layout nC[spatial]<b>c with b = channel_block (nChw8c on AVX2): a
  // row-major [N, ceil(C/b), spatial..., b] buffer whose channel tail is
  // zero. `strides` must then be empty. Conv activations only.
  int64_t channel_block = 0;
  // With channel_block >= C: stored channels-last (NHWC), one block of its
  // own channel count (propagate-layout's kChannelsLast buffers). Integer
  // activations blocked so are channels-last without it; an f32 one needs
  // it, as nChw16c and NHWC of a 16-channel f32 tensor are the same bytes
  // but not the same oneDNN descriptor.
  bool channels_last = false;

  // Row-major strides when `strides` is empty (meaningless when blocked).
  std::vector<int64_t> EffectiveStrides() const;
};

// Strides of a logical [..., R, C] tensor whose buffer holds [..., C, R]
// row-major (an operand stored transposed).
std::vector<int64_t> TransposedLastTwoStrides(const ir::Shape& logical_shape);
// Strides of a logical N C spatial... tensor stored channels-last (NHWC).
std::vector<int64_t> ChannelsLastStrides(const ir::Shape& logical_shape);

enum class CallKind {
  kConv,           // ONNX Conv. weights [OC, IC/groups, k...]
  kConvTranspose,  // ONNX ConvTranspose. weights [IC, OC/groups, k...]
  kMatMul,         // ONNX MatMul, rank >= 2. src [..., M, K], weights [..., K, N]
  kInnerProduct,   // Gemm / Linear. src [N, IC], weights [OC, IC], bias [OC]
};

// Window parameters of kConv / kConvTranspose, one entry per spatial dim, in
// ONNX's conventions (a dilation of 1 is dense).
struct ConvParams {
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;
  std::vector<int64_t> output_padding;  // kConvTranspose only
  int64_t groups = 1;
};

enum class PostOpKind {
  // Elementwise on the running result x.
  kRelu,
  kLeakyRelu,    // alpha: slope for x < 0
  kElu,          // alpha * (exp(x) - 1) for x < 0
  kGeluErf,      // 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,     // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  kSwish,        // x * sigmoid(x) (SiLU)
  kSigmoid,
  kTanh,
  kHardSwish,    // x * clamp(x + 3, 0, 6) / 6
  kHardSigmoid,  // clamp(alpha x + beta, 0, 1)
  kClip,         // clamp(x, alpha, beta); relu6 and hardtanh are clips
  kLinear,       // alpha x + beta
  // Binary with a second tensor that broadcasts to dst.
  kAdd,
  kSub,  // x - operand
  kMul,
  // x + alpha * (what dst held before the call): a residual add accumulated
  // in place into the dst buffer.
  kSum,
};

struct PostOp {
  PostOpKind kind = PostOpKind::kRelu;
  float alpha = 0.0f;
  float beta = 0.0f;
  TensorSpec operand;  // binary post-ops only

  static PostOp Relu() { return Make(PostOpKind::kRelu); }
  static PostOp LeakyRelu(float alpha) { return Make(PostOpKind::kLeakyRelu, alpha); }
  static PostOp Elu(float alpha) { return Make(PostOpKind::kElu, alpha); }
  static PostOp GeluErf() { return Make(PostOpKind::kGeluErf); }
  static PostOp GeluTanh() { return Make(PostOpKind::kGeluTanh); }
  static PostOp Swish() { return Make(PostOpKind::kSwish, 1.0f); }
  static PostOp Sigmoid() { return Make(PostOpKind::kSigmoid); }
  static PostOp Tanh() { return Make(PostOpKind::kTanh); }
  static PostOp HardSwish() { return Make(PostOpKind::kHardSwish); }
  static PostOp HardSigmoid(float alpha, float beta) {
    return Make(PostOpKind::kHardSigmoid, alpha, beta);
  }
  static PostOp Clip(float min, float max) { return Make(PostOpKind::kClip, min, max); }
  static PostOp Relu6() { return Clip(0.0f, 6.0f); }
  static PostOp Linear(float scale, float shift) {
    return Make(PostOpKind::kLinear, scale, shift);
  }
  static PostOp Add(TensorSpec operand) { return Binary(PostOpKind::kAdd, operand); }
  static PostOp Sub(TensorSpec operand) { return Binary(PostOpKind::kSub, operand); }
  static PostOp Mul(TensorSpec operand) { return Binary(PostOpKind::kMul, operand); }
  static PostOp Sum(float scale = 1.0f) { return Make(PostOpKind::kSum, scale); }

  bool is_binary() const;
  // "relu", "leaky_relu(0.1)", "clip(0,6)", "add[1x64x1x1]", "sum".
  std::string ToString() const;

 private:
  static PostOp Binary(PostOpKind kind, TensorSpec operand) {
    PostOp p = Make(kind);
    p.operand = std::move(operand);
    return p;
  }
  static PostOp Make(PostOpKind kind, float alpha = 0.0f, float beta = 0.0f) {
    PostOp p;
    p.kind = kind;
    p.alpha = alpha;
    p.beta = beta;
    return p;
  }
};

// The integer form of a call (ConvInteger, MatMulInteger, QLinearConv,
// QLinearMatMul and the QDQ patterns rewritten into them): src u8/s8,
// weights s8 (a weight zero point is subtracted from constant weights
// before the call; runtime weights, a matmul's activation B, keep theirs in
// weights_zero_point), bias s32 or f32, dst s32 / u8 / s8 / f32. The call
// computes, with acc the exact s32 accumulation
// sum (src - src_zero_point) * (weights - weights_zero_point),
//   dst = saturate(round_half_even(post_ops(scale * (acc + bias))) + dst_zero_point)
// in f32 (oneDNN's output scales, post-ops and zero points, applied in that
// order). An 8-bit dst with a zero point gets a round post-op last, so the
// zero point is added to an integer, as ONNX and ONNX Runtime add it
// (oneDNN alone rounds scale * acc + zero point, whose f32 sum can round).
struct IntegerCall {
  int32_t src_zero_point = 0;
  // The src zero point is a run-time value (oneDNN's DNNL_RUNTIME_S32_VAL,
  // given to OneDnnCall::SetSrcZeroPoint before each Execute; src_zero_point
  // is then unused): what DynamicQuantizeLinear computes.
  bool runtime_src_zero_point = false;
  // Nonzero only for runtime weights (oneDNN's common weights zero point).
  int32_t weights_zero_point = 0;
  // Empty: scale 1 (an s32 dst). One value: per tensor. dst channels (C of a
  // conv, N of a matmul / linear) values: per output channel.
  std::vector<float> scales;
  int32_t dst_zero_point = 0;
};

// One library call: dst = post_ops(op(src, weights) + bias).
struct FusedCall {
  CallKind kind = CallKind::kConv;
  TensorSpec src;
  TensorSpec weights;
  std::optional<TensorSpec> bias;
  TensorSpec dst;
  ConvParams conv;  // kConv / kConvTranspose
  std::vector<PostOp> post_ops;
  // Set for an integer call (src and weights u8/s8); unset: every tensor f32.
  std::optional<IntegerCall> integer;

  // "conv[3x3 s1 g1 p1]+bias+sum+relu", "matmul[128x768x3072]+bias+gelu_erf";
  // an integer call names its types: "conv[3x3 s1 g1 p0 u8s8->u8]+bias".
  std::string ToString() const;
  // Indices into post_ops of the binary post-ops, in order: the order of
  // Execute's operand pointers.
  std::vector<int> BinaryPostOpIndices() const;
  bool has_sum() const;
};

// ConvParams with the defaults ONNX gives for `spatial_rank` dims (stride 1,
// dilation 1, no padding) where a vector is empty. InvalidArgument when a
// given vector has the wrong length.
absl::StatusOr<ConvParams> NormalizeConvParams(const ConvParams& params,
                                               int spatial_rank);

// The dst shape the op produces from src, weights and the conv params.
// InvalidArgument (naming the call) for inconsistent shapes.
absl::StatusOr<ir::Shape> ComputeDstShape(const FusedCall& call);

// Checks the whole description: ranks, channel counts, groups, dst shape,
// bias shape, strides, post-op operands (each must broadcast to dst) and
// post-op parameters. InvalidArgument naming the call on failure.
absl::Status Validate(const FusedCall& call);

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_FUSED_CALL_H_
