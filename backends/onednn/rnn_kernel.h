// File: backends/onednn/rnn_kernel.h — runs an ONNX recurrent extern kernel
// ("onnx.LSTM", "onnx.GRU", "onnx.RNN") as one oneDNN RNN primitive
// (lstm_forward, gru_forward / lbr_gru_forward, vanilla_rnn_forward): the
// primitive is built and the weights are put into oneDNN's gate order and
// layout once, at load time; Run only swaps pointers.
//
//   KILN_ASSIGN_OR_RETURN(auto k, OneDnnRnnKernel::Create(
//                                     lp.program, kernel, lp.constants, {}));
//   KILN_RETURN_IF_ERROR(k->Run(inputs, outputs));
//
// OneDnnExternKernel::Create dispatches here; callers normally use that.
// A small-batch LSTM or GRU runs instead as an RnnSequence
// (backends/onednn/rnn_sequence.h), by UseRnnSequence below.
// Unimplemented means "keep the reference extern": every form oneDNN would
// compute differently from ONNX (sequence_lens shorter than the sequence,
// clip, input_forget, non-default activations, layout=1, non-f32) is
// refused, never approximated.
#ifndef KILN_BACKENDS_ONEDNN_RNN_KERNEL_H_
#define KILN_BACKENDS_ONEDNN_RNN_KERNEL_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/onednn_call.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"

namespace kiln::onednn {

// Batch sizes up to which an f32 LSTM or GRU with constant weights runs as
// an RnnSequence (one projection matmul plus kiln's Highway recurrence)
// rather than oneDNN's RNN primitive: measured with rnn_forms_benchmark at
// hidden 128 and 512, 1 and 2 threads (decisions 0065, 0069).
inline constexpr int64_t kRnnSequenceMaxBatch = 2;

// The rule OneDnnCallOptions::RnnForm::kAuto applies to an LSTM or GRU that
// both forms can run.
bool UseRnnSequence(int64_t batch);

// Why a class: the primitive, the weights in oneDNN's gate order (prepacked
// when constant) and the scratch states are built once per kernel. Run is
// not safe to call concurrently on one object (it reuses those buffers).
class OneDnnRnnKernel {
 public:
  // True for the extern ops this class runs ("onnx.LSTM/GRU/RNN").
  static bool Handles(absl::string_view call_op);

  // As OneDnnExternKernel::Create: `constants` holds the data of constant
  // buffers by buffer index. Weights (W, R, B, P) that are not constant are
  // reordered at every Run instead of once. InvalidArgument for a malformed
  // kernel, Unimplemented (naming the kernel) for forms kept on the
  // reference.
  static absl::StatusOr<std::unique_ptr<OneDnnRnnKernel>> Create(
      const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
      const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants,
      const OneDnnCallOptions& options = {});

  ~OneDnnRnnKernel();
  OneDnnRnnKernel(const OneDnnRnnKernel&) = delete;
  OneDnnRnnKernel& operator=(const OneDnnRnnKernel&) = delete;

  // One pointer per kernel.call.inputs / kernel.call.outputs (row-major
  // storage of that buffer). Writes Y, Y_h, Y_c in ONNX's layouts.
  absl::Status Run(absl::Span<void* const> inputs,
                   absl::Span<void* const> outputs);

  // op "lstm" / "gru" / "rnn"; call e.g. "lstm[seq 16 batch 1 input 64
  // hidden 128 forward]+bias"; weight_layout of weights_layer.
  const ExternKernelInfo& info() const;

 private:
  struct Impl;
  explicit OneDnnRnnKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_RNN_KERNEL_H_
