// File: backends/onednn/onednn_call.h — one fused Conv/ConvTranspose/MatMul/
// Linear call executed by a oneDNN primitive: built once from a FusedCall and
// its constant weights/bias (prepacked into oneDNN's preferred layout), then
// executed many times on caller-owned buffers.
//
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<OneDnnCall> call,
//                         OneDnnCall::Create(desc, &weights, &bias));
//   KILN_RETURN_IF_ERROR(call->Execute(x, {residual_or_operand}, y));
//
// oneDNN types stay behind this header: the wrapper and generated code that
// hold OneDnnCalls do not include dnnl.hpp.
#ifndef KILN_BACKENDS_ONEDNN_ONEDNN_CALL_H_
#define KILN_BACKENDS_ONEDNN_ONEDNN_CALL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "backends/onednn/fused_call.h"
#include "ir/graph/tensor.h"

namespace kiln::onednn {

struct OneDnnCallOptions {
  // Reorder the constant weights once, at creation, into the layout the
  // primitive prefers (format_tag::any). Off: the primitive runs on the plain
  // ONNX-layout weights (saves the packed copy; usually slower).
  bool prepack_weights = true;
  // Let the primitive choose src/dst layouts too (format_tag::any); when it
  // picks a blocked one, Execute reorders the caller's activations in and
  // out (counted in reorders_per_call()). For convs this is usually the
  // fastest choice (a direct JIT kernel on nChw8c/nChw16c). Off: the
  // primitive runs directly on the caller's layouts (NCHW, NHWC or any
  // strides the FusedCall gives), with oneDNN's gemm-based kernel for NCHW.
  bool any_activation_layout = true;
  // oneDNN falls back to its scalar reference implementation ("ref:any") for
  // combinations no optimized kernel supports (e.g. a sum post-op after an
  // eltwise one, a per-row matmul bias). That is correct but far slower than
  // running the op without the offending post-ops, so by default Create
  // returns Unimplemented instead and the rewriter fuses less.
  bool allow_reference_impl = false;
  // Run a linear layer (kMatMul with constant weights shared by all rows,
  // kInnerProduct) as the equivalent 1x1 convolution on the same buffers
  // (C = K, spatial = the M rows, OC = N; row-major [M, K] is nhwc): where
  // oneDNN 2.6 only has its gemm-based matmul (AVX2), its direct jit_1x1
  // conv kernel is faster (linear_forms_benchmark). kAuto: when the matmul
  // would run gemm-based ("gemm:jit", inner product "x64:gemm:jit") and
  // M >= kLinearAsConvMinRows; kAlways: whenever
  // an optimized conv kernel takes the call (tests); kNever: as matmul.
  enum class LinearAsConv { kAuto, kAlways, kNever };
  LinearAsConv linear_as_conv = LinearAsConv::kAuto;
  // Compute in bf16 with f32 accumulation: the constant weights are
  // prepacked in bf16, the f32 source is converted by the call's input
  // reorder, bias, post-op operands and the destination stay f32. Only for
  // f32 calls with constant weights and prepacking on; otherwise ignored (the
  // call runs in f32: OneDnnCall::bf16() says which).
  bool bf16 = false;
  // The activation layouts a Conv/ConvTranspose primitive runs on, chosen by
  // measurement at compile time (backends/onednn/call_tuner.h); kRule: the
  // preference order above. The others build exactly one primitive on src
  // and dst laid out so (reordered from and to the caller's layouts when they
  // differ) and are Unimplemented when only oneDNN's reference
  // implementation takes it: kCaller the caller's layouts, kAny oneDNN's
  // format_tag::any pick, kNhwc channels last, kBlocked8 / kBlocked16
  // nChw8c / nChw16c. Ignored for MatMul and inner products.
  enum class ActivationForm { kRule, kCaller, kAny, kNhwc, kBlocked8, kBlocked16 };
  ActivationForm activation_form = ActivationForm::kRule;
  // How an ONNX LSTM or GRU runs (backends/onednn/rnn_kernel.h): kAuto by
  // the rule of decisions 0065, 0069 (UseRnnSequence), kPrimitive as
  // oneDNN's RNN primitive, kSequence as an RnnSequence (one projection
  // matmul plus a Highway recurrence; Unimplemented where that does not
  // apply). Ignored for RNN.
  enum class RnnForm { kAuto, kPrimitive, kSequence };
  RnnForm rnn_form = RnnForm::kAuto;
  // The algorithm of an f32 Conv with prepacked weights: kRule takes
  // oneDNN's Winograd kernel for a 3x3 stride-1 undilated ungrouped conv with
  // at least kWinogradMinOutputPixels output pixels when oneDNN has one on
  // the activation layouts chosen above (AVX-512); where it has none, kiln's
  // own (winograd.h) within kKilnWinograd* bounds; else the direct kernel.
  // kDirect never Winograd; kWinograd Winograd for any such conv, or
  // Unimplemented. Ignored for other kinds (docs/decisions/0076, 0080).
  enum class ConvAlgorithm { kRule, kDirect, kWinograd };
  ConvAlgorithm conv_algorithm = ConvAlgorithm::kRule;
};

// Output pixels (H_out x W_out) and channels (in and out) from which kRule
// runs a 3x3 conv on oneDNN's Winograd kernel. In models, with 64 to 192
// channels at 28x28 and 56x56 it measured 1.5-2x faster than the direct
// kernel at 1 thread; at 14x14 as fast, at 7x7 slower (its weights are
// 16/9 the direct ones' bytes), and from 128 to 32 channels (densenet) 1.2x
// slower.
inline constexpr int64_t kWinogradMinOutputPixels = 28 * 28;
inline constexpr int64_t kWinogradMinChannels = 64;
// The same for kiln's own F(2x2, 3x3) conv (backends/onednn/winograd.h),
// which kRule takes on CPUs where oneDNN has no Winograd kernel (AVX2), on
// channels-last or 8/16-channel-blocked activations whose block divides
// both channel counts: 1.3-2.3x faster than oneDNN's direct jit:avx2 kernel
// at 1 thread from 48 channels at 52x52 to 512 at 7x7, 1.0-2x at 2
// (winograd_benchmark; docs/decisions/0080).
inline constexpr int64_t kKilnWinogradMinOutputPixels = 7 * 7;
inline constexpr int64_t kKilnWinogradMinChannels = 48;

// "rule", "caller", "any", "nhwc", "blocked8", "blocked16"; and back
// (InvalidArgument for anything else).
const char* ActivationFormName(OneDnnCallOptions::ActivationForm form);
absl::StatusOr<OneDnnCallOptions::ActivationForm> ParseActivationForm(
    absl::string_view name);

// Rows (M) from which kAuto runs a gemm-based linear layer as a 1x1 conv. At
// M = 1 the gemm's matrix-vector path is as fast; above, the conv is faster
// or on par where measured (linear_forms_benchmark; docs/decisions/0013).
inline constexpr int64_t kLinearAsConvMinRows = 2;

// Channel blocks of the activation layouts a primitive runs on: 8 for
// nChw8c, 0 for a plain (non-blocked) layout.
struct ActivationBlocks {
  // src / dst: each buffer channels-last ([N, 1, spatial..., C], NHWC),
  // blocked by its own channel count (integer convs).
  static constexpr int64_t kChannelsLast = -1;
  int64_t src = 0;
  int64_t dst = 0;
  // PreferredActivationBlocks: every other pair of blocks (dst blocked) an
  // optimized kernel also runs on, widest block first; `slower_isa` when
  // that kernel uses a narrower ISA than the preferred one (jit:avx2 on
  // nChw8c where avx512_core kernels take nChw16c).
  struct Alternative {
    int64_t src = 0;
    int64_t dst = 0;
    bool slower_isa = false;
  };
  std::vector<Alternative> also;
};

// Why a class: primitive descriptor, primitive, packed weights, scratchpad
// and reorder buffers are expensive to create and must live as long as the
// compiled model; Execute only swaps data pointers. Execute is not safe to
// call concurrently on one object (it reuses internal buffers).
class OneDnnCall {
 public:
  // `weights` must match call.weights (shape, dtype); nullptr only for
  // kMatMul, kConv and kConvTranspose, whose weights then come at Execute
  // time in their plain layout (activation x activation, e.g. attention; a conv whose
  // weights are computed). `bias` is required iff call.bias is set.
  // Returns InvalidArgument for an inconsistent description, Unimplemented
  // when oneDNN (or this backend) cannot run the combination — the caller
  // then keeps the op in the loop IR.
  static absl::StatusOr<std::unique_ptr<OneDnnCall>> Create(
      const FusedCall& call, const ir::Tensor* weights, const ir::Tensor* bias,
      const OneDnnCallOptions& options = {});

  // The activation layouts Create would choose for `call` when it may pick
  // them (any_activation_layout): what the fastest optimized kernel wants,
  // or plain when no optimized kernel takes oneDNN's own layouts. Builds
  // only a primitive descriptor (no JIT, no weights). Errors as Create.
  static absl::StatusOr<ActivationBlocks> PreferredActivationBlocks(
      const FusedCall& call, const OneDnnCallOptions& options = {});

  ~OneDnnCall();
  OneDnnCall(const OneDnnCall&) = delete;
  OneDnnCall& operator=(const OneDnnCall&) = delete;

  // Runs the call. `src` and `dst` are laid out as call().src / call().dst
  // say; `binary_operands` holds one pointer per binary post-op, in post-op
  // order (FusedCall::BinaryPostOpIndices()). With a sum post-op, `dst`
  // must hold the tensor to accumulate into (the residual) on entry.
  absl::Status Execute(const void* src,
                       absl::Span<const void* const> binary_operands, void* dst);
  // For a kMatMul created without constant weights.
  absl::Status Execute(const void* src, const void* weights,
                       absl::Span<const void* const> binary_operands, void* dst);

  // The src zero point of an integer call created with a run-time one
  // (IntegerCall::runtime_src_zero_point), read by the following Executes.
  // InvalidArgument for any other call.
  absl::Status SetSrcZeroPoint(int32_t zero_point);

  const FusedCall& call() const;
  // Whether the call computes in bf16 (OneDnnCallOptions::bf16 taken).
  bool bf16() const;
  // Bytes of the prepacked weights (0 when not prepacked).
  int64_t prepacked_bytes() const;
  // Bytes of the scratchpad the primitive owns.
  int64_t scratchpad_bytes() const;
  // Layouts the primitive runs on, in oneDNN's tag notation ("OIhw16i16o",
  // "nchw", "acdb", "BA16a64b"...; "opaque" for non-blocked formats).
  std::string weights_layout() const;
  std::string src_layout() const;
  std::string dst_layout() const;
  // Activation reorders Execute performs per call (0 when the primitive runs
  // on the caller's layouts).
  int reorders_per_call() const;
  // oneDNN's implementation name, e.g. "brg:avx512_core" or "jit:avx2".
  std::string impl_name() const;

 private:
  struct Impl;
  explicit OneDnnCall(std::unique_ptr<Impl> impl);
  absl::Status Run(const void* src, const void* weights,
                   absl::Span<const void* const> binary_operands, void* dst);

  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_ONEDNN_CALL_H_
