// File: backends/onednn/extern_kernel.h — runs one loop-IR extern kernel
// ("onnx.Conv/ConvTranspose/Gemm/MatMul", "kiln.Fused*" with their post-op
// chains) as a OneDnnCall: translates the kernel's attributes and buffers
// into a FusedCall once, then runs on raw buffer pointers. "onnx.LSTM/GRU/
// RNN" run as oneDNN RNN primitives (backends/onednn/rnn_kernel.h).
//
//   KILN_ASSIGN_OR_RETURN(auto k, OneDnnExternKernel::Create(
//                                     lp.program, kernel, lp.constants, {}));
//   KILN_RETURN_IF_ERROR(k->Run({x_ptr, w_ptr, b_ptr}, {y_ptr}));
//
// Unimplemented from Create means "keep the reference extern" (non-f32,
// ConvInteger, forms oneDNN cannot run); the caller decides.
#ifndef KILN_BACKENDS_ONEDNN_EXTERN_KERNEL_H_
#define KILN_BACKENDS_ONEDNN_EXTERN_KERNEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "backends/onednn/onednn_call.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"

namespace kiln::onednn {

// What an extern kernel became, for the compile report and `kilnc explain`.
struct ExternKernelInfo {
  std::string op;    // "conv", "conv_transpose", "matmul", "inner_product",
                     // "lstm", "gru", "rnn"
  std::string call;  // FusedCall::ToString()
  std::vector<std::string> post_ops;  // PostOp::ToString() of each, in order
  std::string weight_layout;          // OneDnnCall::weights_layout()
  std::string src_layout, dst_layout; // OneDnnCall::src_layout(), dst_layout()
  int64_t prepacked_bytes = 0;
  int reorders_per_call = 0;
  std::string impl;  // oneDNN's implementation name
  // "int8" for an integer call (u8/s8 operands, s32 accumulation), "bf16"
  // when the call computes in bf16 (OneDnnCallOptions::bf16 taken), else
  // "f32"; with bf16 asked for and refused, `bf16_refused` says why.
  std::string precision = "f32";
  std::string bf16_refused;
  // The activation form the call runs on when the kernel carries
  // ir::loop::kAttrCallForm ("nhwc", ...; empty: the rule's); with the form
  // refused on this CPU, `form_refused` says why and the rule's runs.
  std::string form;
  std::string form_refused;
};

// Why a class: the FusedCall translation, the oneDNN primitive and the
// prepacked weights are built once per kernel at load time; Run only swaps
// pointers (no allocation in the steady state). Run is not safe to call
// concurrently on one object.
class OneDnnExternKernel {
 public:
  // `kernel` is an extern kernel of `program`; `constants` holds the data of
  // constant buffers by buffer index (ir::loop::LoopModule::constants): weights
  // (and bias) found there are prepacked, a MatMul whose weights are not
  // constant takes them at Run. InvalidArgument for a malformed kernel,
  // Unimplemented (naming the kernel) for what oneDNN cannot run.
  static absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> Create(
      const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
      const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants,
      const OneDnnCallOptions& options = {});

  ~OneDnnExternKernel();
  OneDnnExternKernel(const OneDnnExternKernel&) = delete;
  OneDnnExternKernel& operator=(const OneDnnExternKernel&) = delete;

  // `inputs`: one pointer per kernel.call.inputs (the storage of that
  // buffer; may be nullptr where ReadsInput is false); `outputs`: one per
  // kernel.call.outputs.
  // A "sum" post-op accumulates into the output: when its operand is another
  // buffer, Run copies it into the output first.
  absl::Status Run(absl::Span<void* const> inputs,
                   absl::Span<void* const> outputs);

  // Whether Run reads the buffer of call input `input`: false for constant
  // weights and bias, which the call holds itself (prepacked, or a share of
  // the constant's bytes); Run then takes nullptr for it.
  bool ReadsInput(size_t input) const;

  const ExternKernelInfo& info() const;

 private:
  struct Impl;
  explicit OneDnnExternKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The activation layouts oneDNN would run extern kernel `kernel` on when
// its buffers are plain (OneDnnCall::PreferredActivationBlocks of the
// kernel's translation): how passes/loop/propagate_layout learns the
// channel block of this host's conv kernels at compile time. Errors as
// OneDnnExternKernel::Create (Unimplemented: not a oneDNN call).
absl::StatusOr<ActivationBlocks> PreferredActivationBlocks(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants,
    const OneDnnCallOptions& options = {});

// The index into kernel.call.inputs of the operand of the call's sum
// post-op when it may share its bytes with the call's output: a sum at
// scale 1 accumulates into dst in place, so once the operand is dead after
// this call the memory plan can give both buffers one place and the copy of
// the operand into dst goes away. Requires f32 buffers of one shape and
// layout, the operand read in no other role, dst not read. A call that
// runs the sum as a binary add instead copies the operand aside first.
std::optional<int> SumOperandInput(const ir::loop::LoopProgram& program,
                                   const ir::loop::Kernel& kernel);

// Whether oneDNN implementation `impl` (ExternKernelInfo::impl, a note in
// parentheses after the name allowed) gives the same bits at any thread
// count: the direct jit convolutions, whose threads split only the output
// ("jit:avx2", "jit_1x1:avx2", "jit_dw:avx2" and their sse41 forms; a
// deconvolution reports its backward-data kernel, "jit:avx2"), measured at
// 1 to 4 threads on oneDNN 2.6 (decision 0050). The gemm-based matmul and
// inner product ("gemm:jit", "x64:gemm:jit") split a long reduction between
// threads and are not; implementations not measured (AVX-512's, RNNs,
// "ref") are not taken to be.
bool ThreadCountInvariant(absl::string_view impl);

// The CPU ISA oneDNN's kernels use in this process (dnnl's
// get_effective_cpu_isa: the CPU's, capped by DNNL_MAX_CPU_ISA):
// "avx512_core_amx", "avx2", "sse41", ... What PreferredActivationBlocks
// answers depends on it.
std::string OneDnnCpuIsa();

// Whether oneDNN runs bf16 natively in this process: the effective ISA
// (capped by DNNL_MAX_CPU_ISA) has AVX512-BF16 or AMX. Without it oneDNN
// has no bf16 kernel (AVX2) or emulates bf16 slower than f32 (AVX-512).
bool NativeBf16();

// Whether oneDNN's bf16 convs and matmuls run faster than its f32 ones in
// this process: the effective ISA has AMX-BF16. With AVX512-BF16 alone,
// oneDNN 2.6's bf16 kernels run at about 0.65x the speed of its f32 ones
// (benchmarks/results/2026-12-02-bf16-avx512.md). Precision kAuto asks this
// (docs/decisions/0059).
bool FastBf16();

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_EXTERN_KERNEL_H_
