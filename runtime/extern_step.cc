// Extern kernels of a compiled model: oneDNN primitives, else the reference
// interpreter's steps when the binary has them (runtime/extern_step.h).
#include "runtime/extern_step.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/threads.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/module.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "runtime/mutex.h"

namespace kiln::runtime {
namespace {

using ir::loop::Kernel;
using ir::loop::LoopProgram;

// A oneDNN primitive built once. oneDNN calls reuse internal buffers, so
// concurrent Runs of one model take turns on each call site.
class OneDnnStep final : public ExternStep {
 public:
  OneDnnStep(const Kernel& kernel, std::unique_ptr<onednn::OneDnnExternKernel> call)
      : inputs_(kernel.call.inputs), outputs_(kernel.call.outputs), call_(std::move(call)) {
    in_ptrs_.resize(inputs_.size());
    out_ptrs_.resize(outputs_.size());
  }

  // `one_thread`: the call was built on one thread and runs on one
  // (ExternStepOptions::deterministic).
  OneDnnStep(const Kernel& kernel, std::unique_ptr<onednn::OneDnnExternKernel> call,
             bool one_thread)
      : OneDnnStep(kernel, std::move(call)) {
    one_thread_ = one_thread;
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < inputs_.size(); ++i) in_ptrs_[i] = buffers[inputs_[i]];
    for (size_t o = 0; o < outputs_.size(); ++o) out_ptrs_[o] = buffers[outputs_[o]];
    if (!one_thread_) return call_->Run(in_ptrs_, out_ptrs_);
    const OneThread scope;
    return call_->Run(in_ptrs_, out_ptrs_);
  }

  bool ReadsInput(size_t input) const override {
    return call_->ReadsInput(input);  // fixed at creation: no lock needed
  }

  // oneDNN calls opened in its lifetime, from this thread, run on one thread.
  class OneThread {
   public:
    OneThread() : saved_(onednn::NumThreads()) { (void)onednn::SetNumThreads(1); }
    ~OneThread() { (void)onednn::SetNumThreads(saved_); }

   private:
    int saved_;
  };

 private:
  bool one_thread_ = false;
  std::vector<int32_t> inputs_, outputs_;
  mutable Mutex mu_;
  mutable std::vector<void*> in_ptrs_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<void*> out_ptrs_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<onednn::OneDnnExternKernel> call_ ABSL_PT_GUARDED_BY(mu_);
};

// The interpreter's step for `kernel`, or why this binary cannot run it.
absl::StatusOr<std::unique_ptr<ExternStep>> ReferenceStep(const LoopProgram& program,
                                                          const Kernel& kernel,
                                                          ReferenceStepFactory reference_steps,
                                                          const KernelReport& report) {
  if (reference_steps != nullptr) return reference_steps(program, kernel);
  return absl::FailedPreconditionError(
      absl::StrCat("extern kernel '", EscapeForMessage(kernel.name), "' (",
                   EscapeForMessage(report.call), ": ",
                   EscapeForMessage(absl::StrJoin(kernel.ops, ", ")),
                   ") needs kiln's reference interpreter at run time (",
                   EscapeForMessage(report.reason),
                   "), which this binary does not link (an AOT library built without "
                   "kiln_aot_library's reference_calls = True)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExternStep>> CreateExternStep(
    const LoopProgram& program, const Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants,
    const ExternStepOptions& options, ReferenceStepFactory reference_steps,
    KernelReport* report) {
  report->name = kernel.name;
  report->ops = kernel.ops;
  report->status = "library";
  report->call = kernel.call.op;
  report->backend = "reference";
  report->reason = options.use_onednn ? "no oneDNN mapping for this call yet"
                                      : "oneDNN disabled by option";
  for (int32_t b : kernel.call.inputs) {
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) {
      return InternalError("extern kernel '", EscapeForMessage(kernel.name), "' reads buffer ", b);
    }
  }
  for (int32_t b : kernel.call.outputs) {
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) {
      return InternalError("extern kernel '", EscapeForMessage(kernel.name), "' writes buffer ", b);
    }
  }
  if (ir::loop::IsReferenceCall(kernel)) {
    auto text = [&kernel](const char* attr) -> std::string {
      auto it = kernel.call.attrs.find(attr);
      const std::string* s =
          it == kernel.call.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
      return s != nullptr ? *s : std::string("?");
    };
    report->call = absl::StrCat(kernel.call.op, "(", text(ir::loop::kAttrReferenceOp), ")");
    report->reason = text(ir::loop::kAttrFallbackReason);
    return ReferenceStep(program, kernel, reference_steps, *report);
  }
  if (options.use_onednn) {
    onednn::OneDnnCallOptions oo;
    oo.prepack_weights = options.prepack_weights;
    oo.bf16 = options.bf16;
    oo.allow_reference_impl = options.allow_onednn_reference_impl;
    absl::StatusOr<std::unique_ptr<onednn::OneDnnExternKernel>> call =
        onednn::OneDnnExternKernel::Create(program, kernel, constants, oo);
    // Deterministic: an implementation whose threads may split a reduction
    // is built again on one thread (primitives fix their thread count when
    // created) and runs on one.
    bool one_thread = false;
    if (call.ok() && options.deterministic &&
        !onednn::ThreadCountInvariant((*call)->info().impl)) {
      one_thread = true;
      if (onednn::NumThreads() > 1) {
        const OneDnnStep::OneThread scope;
        call = onednn::OneDnnExternKernel::Create(program, kernel, constants, oo);
      }
    }
    if (call.ok()) {
      const onednn::ExternKernelInfo& info = (*call)->info();
      report->backend = "onednn";
      report->call = info.call;
      report->post_ops = info.post_ops;
      report->weight_layout = info.weight_layout;
      report->prepacked_bytes = info.prepacked_bytes;
      report->reorders_per_call = info.reorders_per_call;
      report->reason = info.impl.empty() ? "" : absl::StrCat("oneDNN ", info.impl);
      report->precision = info.precision;
      if (!info.bf16_refused.empty()) {
        absl::StrAppend(&report->reason, "; f32, not bf16: ", info.bf16_refused);
      }
      if (one_thread) {
        absl::StrAppend(&report->reason,
                        "; one thread (deterministic: this implementation's threads may split "
                        "its reduction)");
      }
      return std::unique_ptr<ExternStep>(
          std::make_unique<OneDnnStep>(kernel, *std::move(call), one_thread));
    }
    if (call.status().code() != absl::StatusCode::kUnimplemented) return call.status();
    report->reason = std::string(call.status().message());
  }
  return ReferenceStep(program, kernel, reference_steps, *report);
}

}  // namespace kiln::runtime
