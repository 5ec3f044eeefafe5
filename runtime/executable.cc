// The executable behind a kiln::CompiledModel (runtime/executable.h): the
// step list (loop kernel entries and library calls), the arena plan, and
// the context pool that makes Run thread-safe.
#include "runtime/executable.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/threads.h"
#include "ir/loop/blocked_layout.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/kernel_abi.h"
#include "ir/loop/module.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "runtime/extern_step.h"
#include "runtime/memory_plan.h"
#include "runtime/mutex.h"

namespace kiln::runtime {
namespace {

using ir::loop::Buffer;
using ir::loop::BufferKind;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

double Ms(absl::Time since) { return absl::ToDoubleMilliseconds(absl::Now() - since); }

int64_t ByteSize(const Buffer& b) {
  return b.StorageSize().value_or(0) * static_cast<int64_t>(ir::DTypeSize(b.dtype));
}

// Copies a strided buffer into row-major `dst` (or back with `to_strided`).
void CopyStrided(const Buffer& b, const char* src, char* dst, bool to_strided) {
  const size_t esize = ir::DTypeSize(b.dtype);
  const int rank = static_cast<int>(b.shape.size());
  int64_t n = 1;
  for (int64_t d : b.shape) n *= d;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += idx[d] * b.strides[d];
    if (to_strided) {
      std::memcpy(dst + off * esize, src + flat * esize, esize);
    } else {
      std::memcpy(dst + flat * esize, src + off * esize, esize);
    }
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < b.shape[d]) break;
      idx[d] = 0;
    }
  }
}

// One entry of the run: a JIT'ed loop kernel or a library call.
struct Step {
  int kernel = -1;  // into LoopProgram::kernels
  ir::loop::KernelFn fn = nullptr;
  std::vector<int32_t> args;  // loop kernels: buffers in argument order
  std::unique_ptr<ExternStep> library;
};

// Per-Run state: the arena, buffer pointers and argument scratch. Owned by
// one Run call at a time.
struct Context {
  std::unique_ptr<char[]> arena_storage;
  char* arena = nullptr;
  std::vector<void*> ptrs;  // per buffer
  std::vector<void*> args;  // scratch for one step's arguments
  // Scratch of RunOnBuffers: per output, its storage (kept, so that a
  // Loop's body run once per iteration allocates nothing).
  std::vector<void*> output_storage;
  // Values of data-dependent shape, one per such buffer; reference calls
  // assign them, Run empties them when it ends.
  std::vector<ir::Tensor> dynamic;
};

class Executable final : public CompiledModel {
 public:
  absl::StatusOr<std::vector<ir::Tensor>> Run(
      absl::Span<const ir::Tensor> inputs) const override {
    return CatchOutOfMemory([&]() -> absl::StatusOr<std::vector<ir::Tensor>> {
      KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> outs, NewOutputs());
      std::vector<ir::Tensor*> ptrs;
      for (ir::Tensor& t : outs) ptrs.push_back(&t);
      KILN_RETURN_IF_ERROR(RunImpl(inputs, ptrs, nullptr, /*take_dynamic=*/true));
      return outs;
    });
  }

  absl::StatusOr<std::vector<ir::Tensor>> RunNamed(
      const std::map<std::string, ir::Tensor>& inputs) const override {
    return CatchOutOfMemory([&] { return RunNamedImpl(inputs); });
  }

  absl::StatusOr<std::vector<ir::Tensor>> RunNamedImpl(
      const std::map<std::string, ir::Tensor>& inputs) const {
    std::vector<ir::Tensor> ordered;
    for (const TensorInfo& in : inputs_) {
      auto it = inputs.find(in.name);
      if (it == inputs.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("missing input '", EscapeForMessage(in.name), "'"));
      }
      ordered.push_back(it->second);
    }
    if (inputs.size() != inputs_.size()) {
      for (const auto& named : inputs) {
        const std::string& name = named.first;  // a lambda cannot capture a binding in C++17
        if (std::none_of(inputs_.begin(), inputs_.end(),
                         [&](const TensorInfo& i) { return i.name == name; })) {
          return absl::InvalidArgumentError(
              absl::StrCat("the model has no input named '", EscapeForMessage(name), "'"));
        }
      }
    }
    return Run(ordered);
  }

  absl::Status RunInto(absl::Span<const ir::Tensor> inputs,
                       absl::Span<ir::Tensor* const> outputs) const override {
    return CatchOutOfMemory(
        [&] { return RunImpl(inputs, outputs, nullptr, /*take_dynamic=*/false); });
  }

  absl::StatusOr<std::vector<ir::Tensor>> Profile(
      absl::Span<const ir::Tensor> inputs, std::vector<KernelTiming>* timings) const override {
    return CatchOutOfMemory([&]() -> absl::StatusOr<std::vector<ir::Tensor>> {
      KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> outs, NewOutputs());
      std::vector<ir::Tensor*> ptrs;
      for (ir::Tensor& t : outs) ptrs.push_back(&t);
      timings->clear();
      timings->reserve(steps_.size());
      KILN_RETURN_IF_ERROR(RunImpl(inputs, ptrs, timings, /*take_dynamic=*/true));
      return outs;
    });
  }

  // The last resort of the public entry points: an allocation nobody
  // checked (std::bad_alloc) becomes ResourceExhausted, never an abort; an
  // error leaves with model text escaped and lines capped (ir/message.h),
  // whichever step or reference call built it.
  template <typename Fn>
  auto CatchOutOfMemory(Fn fn) const -> decltype(fn()) {
    decltype(fn()) result = [&]() -> decltype(fn()) {
      try {
        return fn();
      } catch (const std::bad_alloc&) {
        return absl::ResourceExhaustedError(
            absl::StrCat("out of memory running model '", EscapeForMessage(report_.model), "'"));
      }
    }();
    if (result.ok()) return result;
    return SanitizedStatus(StatusOf(result), /*keep_line_breaks=*/false);
  }
  static const absl::Status& StatusOf(const absl::Status& s) { return s; }
  template <typename T>
  static const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
    return s.status();
  }

  const std::vector<TensorInfo>& inputs() const override { return inputs_; }
  const std::vector<TensorInfo>& outputs() const override { return outputs_; }
  const CompileReport& report() const override { return report_; }

  // Output tensors for Run: static outputs allocated, outputs of
  // data-dependent shape empty (Execute hands them over).
  absl::StatusOr<std::vector<ir::Tensor>> NewOutputs() const {
    std::vector<ir::Tensor> outs;
    outs.reserve(outputs_.size());
    for (size_t o = 0; o < outputs_.size(); ++o) {
      if (output_dynamic_[o]) {
        outs.emplace_back(outputs_[o].dtype, ir::Shape{0});
      } else {
        KILN_ASSIGN_OR_RETURN(
            ir::Tensor t,
            ir::Tensor::Create(outputs_[o].dtype, outputs_[o].shape,
                               absl::StrCat("output '", EscapeForMessage(outputs_[o].name), "'")));
        outs.push_back(std::move(t));
      }
    }
    return outs;
  }

  // `take_dynamic`: outputs of data-dependent shape replace the tensors in
  // `outputs` (Run); else they are copied into them where the shapes agree,
  // and replace them where not (RunInto).
  absl::Status RunImpl(absl::Span<const ir::Tensor> inputs,
                       absl::Span<ir::Tensor* const> outputs,
                       std::vector<KernelTiming>* timings, bool take_dynamic) const {
    KILN_RETURN_IF_ERROR(CheckInterface(inputs, outputs));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, AcquireContext());
    absl::Status status = Execute(*ctx, inputs, outputs, timings, take_dynamic);
    for (ir::Tensor& t : ctx->dynamic) t = ir::Tensor();
    ReleaseContext(std::move(ctx));
    return status;
  }

  absl::Status CheckInterface(absl::Span<const ir::Tensor> inputs,
                              absl::Span<ir::Tensor* const> outputs) const {
    if (inputs.size() != inputs_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model takes ", inputs_.size(), " inputs, got ", inputs.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].dtype() != inputs_[i].dtype || inputs[i].shape() != inputs_[i].shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input ", i, " '", EscapeForMessage(inputs_[i].name), "': expected ",
            ir::TypeString(inputs_[i].dtype, inputs_[i].shape), ", got ", inputs[i].TypeString()));
      }
    }
    if (outputs.size() != outputs_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model has ", outputs_.size(), " outputs, got ", outputs.size(), " tensors"));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i] == nullptr || outputs[i]->dtype() != outputs_[i].dtype ||
          (!output_dynamic_[i] && outputs[i]->shape() != outputs_[i].shape)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output ", i, " '", EscapeForMessage(outputs_[i].name), "': expected a tensor of type ",
            ir::TypeString(outputs_[i].dtype, outputs_[i].shape)));
      }
    }
    return absl::OkStatus();
  }

  // A pooled context, else a new one; ResourceExhausted when its arena
  // cannot be allocated.
  absl::StatusOr<std::unique_ptr<Context>> AcquireContext() const {
    {
      MutexLock lock(&pool_mu_);
      if (!pool_.empty()) {
        std::unique_ptr<Context> ctx = std::move(pool_.back());
        pool_.pop_back();
        return ctx;
      }
    }
    auto ctx = std::make_unique<Context>();
    ctx->arena_storage.reset(new (std::nothrow) char[arena_bytes_ + kArenaAlignment]);
    if (ctx->arena_storage == nullptr) {
      return ir::OutOfMemoryError(
          absl::StrCat("the arena of model '", report_.model, "'"),
          arena_bytes_ + kArenaAlignment);
    }
    const uintptr_t base = reinterpret_cast<uintptr_t>(ctx->arena_storage.get());
    ctx->arena = reinterpret_cast<char*>((base + kArenaAlignment - 1) /
                                         kArenaAlignment * kArenaAlignment);
    ctx->ptrs.assign(program_.buffers.size(), nullptr);
    for (size_t b = 0; b < program_.buffers.size(); ++b) {
      if (offsets_[b] >= 0) ctx->ptrs[b] = ctx->arena + offsets_[b];
    }
    for (const auto& [b, t] : constants_) ctx->ptrs[b] = const_cast<void*>(t->raw_data());
    ctx->dynamic.resize(dynamic_buffers_.size());
    for (size_t k = 0; k < dynamic_buffers_.size(); ++k) {
      ctx->ptrs[dynamic_buffers_[k]] = &ctx->dynamic[k];
    }
    ctx->args.resize(max_args_);
    return ctx;
  }

  void ReleaseContext(std::unique_ptr<Context> ctx) const {
    MutexLock lock(&pool_mu_);
    pool_.push_back(std::move(ctx));
  }

  absl::Status Execute(Context& ctx, absl::Span<const ir::Tensor> inputs,
                       absl::Span<ir::Tensor* const> outputs,
                       std::vector<KernelTiming>* timings, bool take_dynamic) const {
    const absl::Time run_start = timings != nullptr ? absl::Now() : absl::InfinitePast();
    if (threads_ > 0) KILN_RETURN_IF_ERROR(onednn::SetNumThreads(threads_));
    const onednn::ScopedFlushDenormals flush(flush_denormals_);
    for (size_t i = 0; i < inputs.size(); ++i) {
      ctx.ptrs[input_buffers_[i]] = const_cast<void*>(inputs[i].raw_data());
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (output_in_place_[o]) ctx.ptrs[output_buffers_[o]] = outputs[o]->raw_data();
    }
    KILN_RETURN_IF_ERROR(RunSteps(ctx, timings, run_start));
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (output_dynamic_[o]) {
        ir::Tensor& t = *static_cast<ir::Tensor*>(ctx.ptrs[output_buffers_[o]]);
        if (take_dynamic) {
          const bool read_again =
              std::find(output_buffers_.begin() + o + 1, output_buffers_.end(),
                        output_buffers_[o]) != output_buffers_.end();
          *outputs[o] = read_again ? t : std::move(t);
          continue;
        }
        if (outputs[o]->shape() == t.shape()) {
          std::memcpy(outputs[o]->raw_data(), t.raw_data(), t.byte_size());
        } else {
          // The caller's tensor takes this run's shape (its storage is
          // replaced); a later run of the same shape writes into it.
          *outputs[o] = t;
        }
        continue;
      }
      if (output_in_place_[o]) continue;
      const Buffer& b = program_.buffers[output_buffers_[o]];
      CopyStrided(b, static_cast<const char*>(ctx.ptrs[output_buffers_[o]]),
                  static_cast<char*>(outputs[o]->raw_data()), /*to_strided=*/false);
    }
    return absl::OkStatus();
  }

  absl::Status RunSteps(Context& ctx, std::vector<KernelTiming>* timings,
                        absl::Time run_start) const {
    for (size_t s = 0; s < steps_.size(); ++s) {
      const Step& step = steps_[s];
      const absl::Time t0 = timings != nullptr ? absl::Now() : absl::InfinitePast();
      if (step.fn != nullptr) {
        for (size_t a = 0; a < step.args.size(); ++a) ctx.args[a] = ctx.ptrs[step.args[a]];
        const int rc = step.fn(ctx.args.data());
        if (rc != 0) return KernelError(step, rc);
      } else {
        KILN_RETURN_IF_ERROR(RunLibraryChecked(step, ctx));
      }
      if (timings != nullptr) {
        const absl::Time t1 = absl::Now();
        timings->push_back({static_cast<int>(s),
                            absl::ToDoubleMicroseconds(t0 - run_start),
                            absl::ToDoubleMicroseconds(t1 - t0)});
      }
    }
    return absl::OkStatus();
  }

  // RunOnBuffers (runtime/executable.h).
  absl::Status RunBuffers(absl::Span<const void* const> inputs, absl::Span<void* const> outputs,
                          absl::Span<const std::optional<ir::Shape>> output_shapes) const {
    if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size() ||
        output_shapes.size() != outputs_.size()) {
      return InternalError("RunOnBuffers: ", inputs.size(), " inputs and ", outputs.size(),
                           " outputs for a model of ", inputs_.size(), " and ",
                           outputs_.size());
    }
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, AcquireContext());
    absl::Status status = [&]() -> absl::Status {
      if (threads_ > 0) KILN_RETURN_IF_ERROR(onednn::SetNumThreads(threads_));
      const onednn::ScopedFlushDenormals flush(flush_denormals_);
      for (size_t i = 0; i < inputs.size(); ++i) {
        ctx->ptrs[input_buffers_[i]] = const_cast<void*>(inputs[i]);
      }
      // Storage for each output: the caller's, or that of the tensor an
      // enclosing value of data-dependent shape gets.
      std::vector<void*>& storage = ctx->output_storage;
      storage.assign(outputs.begin(), outputs.end());
      for (size_t o = 0; o < outputs.size(); ++o) {
        if (!output_shapes[o].has_value() && !output_dynamic_[o]) {
          ir::Tensor& target = *static_cast<ir::Tensor*>(outputs[o]);
          if (target.dtype() != outputs_[o].dtype || target.shape() != outputs_[o].shape) {
            KILN_ASSIGN_OR_RETURN(
                target, ir::Tensor::Create(
                            outputs_[o].dtype, outputs_[o].shape,
                            absl::StrCat("output '", EscapeForMessage(outputs_[o].name), "'")));
          }
          storage[o] = target.raw_data();
        }
        if (output_in_place_[o]) ctx->ptrs[output_buffers_[o]] = storage[o];
      }
      KILN_RETURN_IF_ERROR(RunSteps(*ctx, nullptr, absl::InfinitePast()));
      for (size_t o = 0; o < outputs.size(); ++o) {
        if (output_in_place_[o]) continue;
        if (output_dynamic_[o]) {
          const ir::Tensor& t = *static_cast<const ir::Tensor*>(ctx->ptrs[output_buffers_[o]]);
          if (!output_shapes[o].has_value()) {
            *static_cast<ir::Tensor*>(outputs[o]) = t;
            continue;
          }
          if (t.shape() != *output_shapes[o]) {
            return absl::InvalidArgumentError(absl::StrCat(
                "model '", report_.model, "' output ", o, " '", outputs_[o].name, "' is ",
                t.TypeString(), " in this run, where ",
                ir::TypeString(outputs_[o].dtype, *output_shapes[o]), " is expected"));
          }
          std::memcpy(storage[o], t.raw_data(), t.byte_size());
          continue;
        }
        CopyStrided(program_.buffers[output_buffers_[o]],
                    static_cast<const char*>(ctx->ptrs[output_buffers_[o]]),
                    static_cast<char*>(storage[o]), /*to_strided=*/false);
      }
      return absl::OkStatus();
    }();
    for (ir::Tensor& t : ctx->dynamic) t = ir::Tensor();
    ReleaseContext(std::move(ctx));
    return status;
  }

  // A library call; an allocation failing inside it (the reference
  // interpreter's tensors, a value of data-dependent shape) becomes
  // ResourceExhausted naming the kernel and its ops.
  absl::Status RunLibraryChecked(const Step& step, Context& ctx) const {
    try {
      return step.library->Run(ctx.ptrs);
    } catch (const std::bad_alloc&) {
      const Kernel& k = program_.kernels[step.kernel];
      return absl::ResourceExhaustedError(absl::StrCat(
          "out of memory in kernel '", k.name, "' (", absl::StrJoin(k.ops, ", "), ")"));
    }
  }

  absl::Status KernelError(const Step& step, int rc) const {
    const Kernel& k = program_.kernels[step.kernel];
    const char* what = rc == ir::loop::kErrorIntegerDivByZero
                           ? "integer division or modulo by zero"
                       : rc == ir::loop::kErrorIndexOutOfRange
                           ? "an index (Gather-like) is out of range"
                           : "runtime error";
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel '", EscapeForMessage(k.name), "' (",
        absl::StrJoin(
            k.ops, ", ",
            [](std::string* out, const std::string& op) { out->append(EscapeForMessage(op, 64)); }),
        "): ", what, " (code ", rc, ")"));
  }

  // Filled by BuildExecutable.
  LoopProgram program_;
  std::map<int32_t, std::shared_ptr<const ir::Tensor>> constants_;
  std::vector<int32_t> input_buffers_, output_buffers_;
  // Output o is computed straight into the caller's tensor (a row-major
  // output buffer written by a kernel and listed once); else copied.
  std::vector<bool> output_in_place_;
  // Output o has a data-dependent shape (its buffer is in dynamic_buffers_).
  std::vector<bool> output_dynamic_;
  // Buffers of data-dependent shape: per run, an ir::Tensor in the context.
  std::vector<int32_t> dynamic_buffers_;
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<int64_t> offsets_;
  int64_t arena_bytes_ = 0;
  size_t max_args_ = 0;
  int threads_ = 0;
  bool flush_denormals_ = true;  // CompileOptions::denormals
  std::shared_ptr<const void> keep_alive_;  // what the loop entries live in
  std::vector<Step> steps_;
  CompileReport report_;

  mutable Mutex pool_mu_;
  mutable std::vector<std::unique_ptr<Context>> pool_ ABSL_GUARDED_BY(pool_mu_);
};

// The dtypes of the buffers `kernel` loads and stores, sorted by name.
std::vector<std::string> StorageDTypes(const ir::loop::LoopProgram& program,
                                       const ir::loop::Kernel& kernel) {
  std::set<std::string> names;
  for (const ir::loop::Op& op : kernel.body) {
    if ((op.is_load() || op.is_store()) && op.buffer >= 0 &&
        static_cast<size_t>(op.buffer) < program.buffers.size()) {
      names.insert(std::string(ir::DTypeName(program.buffers[op.buffer].dtype)));
    }
  }
  return {names.begin(), names.end()};
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompiledModel>> BuildExecutable(
    const CompileOptions& options, ir::loop::LoopModule lowered,
    std::vector<TensorInfo> inputs, std::vector<TensorInfo> outputs, CompileReport report,
    absl::Time start, std::shared_ptr<const void> keep_alive, const LoopEntryFn& entry_of,
    ReferenceStepFactory reference_steps, std::map<int, PrebuiltStep> prebuilt) {
  const bool eager = options.mode == CompileOptions::Mode::kEager;
  auto exe = std::make_unique<Executable>();
  exe->keep_alive_ = std::move(keep_alive);
  const LoopProgram& program = lowered.program;
  if (inputs.size() != lowered.inputs.size() || outputs.size() != lowered.outputs.size()) {
    return InternalError("the interface has ", inputs.size(), " inputs and ", outputs.size(),
                         " outputs, the program ", lowered.inputs.size(), " and ",
                         lowered.outputs.size());
  }

  // Steps, in program order. oneDNN primitives fix their thread count when
  // they are created, so create them under the team size Run will use.
  absl::Time t = absl::Now();
  const int saved_threads = onednn::NumThreads();
  if (options.threads > 0) KILN_RETURN_IF_ERROR(onednn::SetNumThreads(options.threads));
  struct RestoreThreads {
    int n;
    ~RestoreThreads() { (void)onednn::SetNumThreads(n); }
  } restore{saved_threads};
  ExternStepOptions xo;
  xo.prepack_weights = options.prepack_weights && !eager;
  xo.use_onednn = options.use_onednn;
  xo.allow_onednn_reference_impl = options.allow_onednn_reference_impl;
  xo.deterministic = options.deterministic;
  // bf16 where asked for, or (auto) where oneDNN's bf16 kernels are the
  // faster ones here (AMX).
  xo.bf16 = options.precision == CompileOptions::Precision::kBF16 ||
            (options.precision == CompileOptions::Precision::kAuto && onednn::FastBf16());
  report.precision = xo.bf16 ? "bf16" : "f32";
  if (options.precision == CompileOptions::Precision::kBF16 && !onednn::NativeBf16()) {
    report.warnings.push_back(absl::StrCat(
        "bf16 asked for, but oneDNN here runs ", onednn::OneDnnCpuIsa(),
        ", without native bf16: calls without an optimized bf16 kernel run in f32, "
        "the others in emulated bf16 (slower than f32)"));
  }
  // Only reference calls read or write values of data-dependent shape.
  const std::vector<bool> dynamic = ir::loop::DynamicBuffers(program);
  for (size_t b = 0; b < dynamic.size(); ++b) {
    if (dynamic[b]) exe->dynamic_buffers_.push_back(static_cast<int32_t>(b));
  }
  for (const Kernel& kernel : program.kernels) {
    if (ir::loop::IsReferenceCall(kernel)) continue;
    std::vector<int32_t> touched = kernel.call.inputs;
    touched.insert(touched.end(), kernel.call.outputs.begin(), kernel.call.outputs.end());
    for (const ir::loop::Op& op : kernel.body) {
      if (op.buffer >= 0) touched.push_back(op.buffer);
    }
    for (int32_t b : touched) {
      if (b >= 0 && static_cast<size_t>(b) < dynamic.size() && dynamic[b]) {
        return InternalError("kernel '", EscapeForMessage(kernel.name), "' touches buffer '",
                             EscapeForMessage(program.buffers[b].name),
                             "' of data-dependent shape; only reference calls may");
      }
    }
  }
  // Memory.
  MemoryPlanOptions mo;
  mo.share = !eager;
  // A oneDNN call's sum post-op accumulates into its operand's bytes when the
  // operand dies there (decision 0073): no copy of it into dst per run. A
  // step the interpreter runs reads all its inputs before writing, so the
  // shared place is right whichever backend the call ends up on.
  if (mo.share && xo.use_onednn) {
    for (size_t k = 0; k < program.kernels.size(); ++k) {
      const Kernel& kernel = program.kernels[k];
      if (kernel.kind != Kernel::Kind::kExtern || ir::loop::IsReferenceCall(kernel)) continue;
      if (std::optional<int> i = onednn::SumOperandInput(program, kernel)) {
        mo.in_place.push_back(
            {static_cast<int>(k), kernel.call.inputs[*i], kernel.call.outputs[0]});
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(program, mo));
  exe->offsets_ = plan.offsets;
  exe->arena_bytes_ = plan.arena_bytes;
  report.arena_bytes = plan.arena_bytes;
  report.intermediate_bytes = plan.intermediate_bytes;
  for (const auto& [b, tensor] : lowered.constants) {
    report.constant_bytes += static_cast<int64_t>(tensor->byte_size());
  }

  // Interface.
  absl::flat_hash_set<int32_t> seen_outputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int32_t b = lowered.inputs[i];
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size() ||
        !program.buffers[b].IsRowMajor()) {
      return InternalError("input ", i, " has no row-major buffer");
    }
    exe->input_buffers_.push_back(b);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const int32_t b = lowered.outputs[o];
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) {
      return InternalError("output ", o, " has no buffer");
    }
    const Buffer& buf = program.buffers[b];
    exe->output_buffers_.push_back(b);
    const bool is_dynamic = dynamic[b];
    exe->output_dynamic_.push_back(is_dynamic);
    const bool in_place = !is_dynamic && buf.kind == BufferKind::kOutput &&
                          buf.IsRowMajor() && seen_outputs.insert(b).second;
    exe->output_in_place_.push_back(in_place);
    if (!is_dynamic && !in_place && buf.kind == BufferKind::kOutput) {
      // Computed into the arena, copied out after the run.
      exe->offsets_[b] = exe->arena_bytes_;
      exe->arena_bytes_ += (ByteSize(buf) + kArenaAlignment - 1) /
                           kArenaAlignment * kArenaAlignment;
    }
  }
  // The budget before any weight is prepacked: the arena and the constants
  // are known now, so a model over the limit is refused before its weights
  // are copied into library layouts.
  MemoryFootprint before_prepacking;
  before_prepacking.arena_bytes = exe->arena_bytes_;
  before_prepacking.constant_bytes = report.constant_bytes;
  before_prepacking.prepacked_known = false;
  KILN_RETURN_IF_ERROR(
      CheckMemoryBudget(report.model, before_prepacking, options.memory_limit_bytes));

  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel& kernel = program.kernels[k];
    Step step;
    step.kernel = static_cast<int>(k);
    if (kernel.kind == Kernel::Kind::kLoop) {
      KILN_ASSIGN_OR_RETURN(LoopEntry entry, entry_of(static_cast<int>(k), kernel));
      if (entry.fn == nullptr) return InternalError("loop kernel '", kernel.name, "' has no entry");
      step.fn = entry.fn;
      step.args = std::move(entry.args);
      for (int32_t a : step.args) {
        if (a < 0 || static_cast<size_t>(a) >= program.buffers.size()) {
          return InternalError("kernel '", kernel.name, "' argument out of its program");
        }
      }
      exe->max_args_ = std::max(exe->max_args_, step.args.size());
      entry.report.storage = StorageDTypes(program, kernel);
      report.kernels.push_back(std::move(entry.report));
      ++report.loop_kernels;
      if (report.kernels.back().vectorized) ++report.vectorized_kernels;
    } else if (auto it = prebuilt.find(static_cast<int>(k)); it != prebuilt.end()) {
      if (it->second.step == nullptr) {
        return InternalError("prebuilt step of kernel '", kernel.name, "' is empty");
      }
      step.library = std::move(it->second.step);
      report.kernels.push_back(std::move(it->second.report));
      ++report.library_calls;
      report.reference_calls += it->second.reference_calls;
      report.fallback_calls += it->second.fallback_calls;
    } else {
      KernelReport kr;
      KILN_ASSIGN_OR_RETURN(step.library,
                            CreateExternStep(program, kernel, lowered.constants, xo,
                                              reference_steps, &kr));
      report.kernels.push_back(std::move(kr));
      ++report.library_calls;
      if (report.kernels.back().backend == "reference") ++report.reference_calls;
      if (ir::loop::IsReferenceCall(kernel)) ++report.fallback_calls;
      report.prepacked_bytes += report.kernels.back().prepacked_bytes;
      report.reorders += report.kernels.back().reorders_per_call;
    }
    exe->steps_.push_back(std::move(step));
  }
  // Constants no step reads at run time (weights a library call holds
  // prepacked, or shares) are released: the model keeps one copy of its
  // weights, not two. Not with control flow, whose steps bind outer
  // buffers for their subprograms.
  if (prebuilt.empty()) {
    absl::flat_hash_set<int32_t> read;
    read.insert(exe->output_buffers_.begin(), exe->output_buffers_.end());
    for (const Step& step : exe->steps_) {
      const Kernel& kernel = program.kernels[step.kernel];
      if (step.library == nullptr) {
        read.insert(step.args.begin(), step.args.end());
        continue;
      }
      for (size_t i = 0; i < kernel.call.inputs.size(); ++i) {
        if (step.library->ReadsInput(i)) read.insert(kernel.call.inputs[i]);
      }
    }
    for (auto it = lowered.constants.begin(); it != lowered.constants.end();) {
      if (read.count(it->first) == 0) {
        report.released_constant_bytes += static_cast<int64_t>(it->second->byte_size());
        it = lowered.constants.erase(it);
      } else {
        ++it;
      }
    }
    report.constant_bytes -= report.released_constant_bytes;
  }
  for (const ir::loop::Buffer& b : program.buffers) {
    if (b.kind != ir::loop::BufferKind::kIntermediate || b.dtype != ir::DType::kBF16) continue;
    ++report.bf16_activation_buffers;
    report.bf16_activation_bytes += b.StorageSize().value_or(0) * ir::DTypeSize(b.dtype);
  }
  // Loop kernels that convert between the plain and the channel-blocked
  // layout (propagate-layout's boundaries) are reorders too.
  report.reorders += ir::loop::CountLayoutReorderKernels(program);
  report.library_ms = Ms(t);

  MemoryFootprint footprint;
  footprint.arena_bytes = exe->arena_bytes_;
  // The peak while loading: released weights were held until their calls
  // had prepacked them.
  footprint.constant_bytes = report.constant_bytes + report.released_constant_bytes;
  footprint.prepacked_bytes = report.prepacked_bytes;
  KILN_RETURN_IF_ERROR(CheckMemoryBudget(report.model, footprint, options.memory_limit_bytes));
  exe->inputs_ = std::move(inputs);
  exe->outputs_ = std::move(outputs);
  exe->program_ = std::move(lowered.program);
  exe->constants_ = std::move(lowered.constants);
  exe->threads_ = options.threads;
  exe->flush_denormals_ = options.denormals == CompileOptions::Denormals::kFlush;
  report.total_ms = Ms(start) + report.import_ms;
  exe->report_ = std::move(report);
  return std::unique_ptr<CompiledModel>(std::move(exe));
}

absl::Status RunOnBuffers(const CompiledModel& model, absl::Span<const void* const> inputs,
                          absl::Span<void* const> outputs,
                          absl::Span<const std::optional<ir::Shape>> output_shapes) {
  const auto* exe = dynamic_cast<const Executable*>(&model);
  if (exe == nullptr) return InternalError("RunOnBuffers: not a runtime executable");
  return exe->CatchOutOfMemory(
      [&] { return exe->RunBuffers(inputs, outputs, output_shapes); });
}

}  // namespace kiln::runtime
