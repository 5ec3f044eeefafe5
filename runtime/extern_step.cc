// Extern kernels of a compiled model: oneDNN primitives, else the reference
// interpreter (runtime/extern_step.h).
#include "runtime/extern_step.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "backends/onednn/extern_kernel.h"
#include "ir/status_macros.h"
#include "lowering/extern_executor.h"

namespace kiln::runtime {
namespace {

using ir::loop::Buffer;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

// Element offset of row-major position `flat` in a strided buffer.
int64_t StridedOffset(const Buffer& b, int64_t flat) {
  int64_t off = 0;
  for (int d = static_cast<int>(b.shape.size()) - 1; d >= 0; --d) {
    const int64_t extent = b.shape[d] == 0 ? 1 : b.shape[d];
    off += (flat % extent) * b.strides[d];
    flat /= extent;
  }
  return off;
}

// Runs the kernel's ONNX node on the reference interpreter, copying its
// operands to tensors and its results back into the buffers.
class ReferenceStep final : public ExternStep {
 public:
  ReferenceStep(const LoopProgram& program, const Kernel& kernel) : kernel_(kernel) {
    program_.buffers = program.buffers;
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    std::vector<ir::Tensor> inputs;
    for (int32_t b : kernel_.call.inputs) {
      const Buffer& buf = program_.buffers[b];
      ir::Tensor t(buf.dtype, buf.shape);
      const size_t esize = ir::DTypeSize(buf.dtype);
      const char* src = static_cast<const char*>(buffers[b]);
      char* dst = static_cast<char*>(t.raw_data());
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        std::memcpy(dst + i * esize, src + StridedOffset(buf, i) * esize, esize);
      }
      inputs.push_back(std::move(t));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> outputs,
                          lowering::RunExternKernel(program_, kernel_, inputs));
    if (outputs.size() != kernel_.call.outputs.size()) {
      return InternalError("extern kernel '", kernel_.name, "' returned ", outputs.size(),
                           " outputs, expected ", kernel_.call.outputs.size());
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Buffer& buf = program_.buffers[kernel_.call.outputs[o]];
      if (outputs[o].dtype() != buf.dtype || outputs[o].shape() != buf.shape) {
        return InternalError("extern kernel '", kernel_.name, "' output ", o, " is ",
                             outputs[o].TypeString(), ", its buffer another type");
      }
      const size_t esize = ir::DTypeSize(buf.dtype);
      const char* src = static_cast<const char*>(outputs[o].raw_data());
      char* dst = static_cast<char*>(buffers[kernel_.call.outputs[o]]);
      for (int64_t i = 0; i < outputs[o].num_elements(); ++i) {
        std::memcpy(dst + StridedOffset(buf, i) * esize, src + i * esize, esize);
      }
    }
    return absl::OkStatus();
  }

 private:
  LoopProgram program_;  // buffers only
  Kernel kernel_;
};

// A oneDNN primitive built once. oneDNN calls reuse internal buffers, so
// concurrent Runs of one model take turns on each call site.
class OneDnnStep final : public ExternStep {
 public:
  OneDnnStep(const Kernel& kernel, std::unique_ptr<onednn::OneDnnExternKernel> call)
      : inputs_(kernel.call.inputs), outputs_(kernel.call.outputs), call_(std::move(call)) {
    in_ptrs_.resize(inputs_.size());
    out_ptrs_.resize(outputs_.size());
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < inputs_.size(); ++i) in_ptrs_[i] = buffers[inputs_[i]];
    for (size_t o = 0; o < outputs_.size(); ++o) out_ptrs_[o] = buffers[outputs_[o]];
    return call_->Run(in_ptrs_, out_ptrs_);
  }

 private:
  std::vector<int32_t> inputs_, outputs_;
  mutable absl::Mutex mu_;
  mutable std::vector<void*> in_ptrs_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<void*> out_ptrs_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<onednn::OneDnnExternKernel> call_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<ExternStep>> CreateExternStep(
    const LoopProgram& program, const Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants,
    const ExternStepOptions& options, KernelReport* report) {
  report->name = kernel.name;
  report->ops = kernel.ops;
  report->status = "library";
  report->call = kernel.call.op;
  report->backend = "reference";
  report->reason = options.use_onednn ? "no oneDNN mapping for this call yet"
                                      : "oneDNN disabled by option";
  for (int32_t b : kernel.call.inputs) {
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) {
      return InternalError("extern kernel '", kernel.name, "' reads buffer ", b);
    }
  }
  for (int32_t b : kernel.call.outputs) {
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) {
      return InternalError("extern kernel '", kernel.name, "' writes buffer ", b);
    }
  }
  if (options.use_onednn) {
    onednn::OneDnnCallOptions oo;
    oo.prepack_weights = options.prepack_weights;
    absl::StatusOr<std::unique_ptr<onednn::OneDnnExternKernel>> call =
        onednn::OneDnnExternKernel::Create(program, kernel, constants, oo);
    if (call.ok()) {
      const onednn::ExternKernelInfo& info = (*call)->info();
      report->backend = "onednn";
      report->call = info.call;
      report->post_ops = info.post_ops;
      report->weight_layout = info.weight_layout;
      report->prepacked_bytes = info.prepacked_bytes;
      report->reorders_per_call = info.reorders_per_call;
      report->reason = info.impl.empty() ? "" : absl::StrCat("oneDNN ", info.impl);
      return std::unique_ptr<ExternStep>(std::make_unique<OneDnnStep>(kernel, *std::move(call)));
    }
    if (call.status().code() != absl::StatusCode::kUnimplemented) return call.status();
    report->reason = std::string(call.status().message());
  }
  return std::unique_ptr<ExternStep>(std::make_unique<ReferenceStep>(program, kernel));
}

}  // namespace kiln::runtime
