// kiln::Compiler and the executable model behind kiln::CompiledModel
// (runtime/kiln.h): the compile pipeline, the step list the model runs
// (JIT'ed loop kernels and library calls over one planned arena) and the
// context pool that makes Run thread-safe.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/cpp/emitter.h"
#include "backends/onednn/threads.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "isa/isa.h"
#include "interp/interpreter.h"
#include "interp/loop_module.h"
#include "lowering/lower_graph.h"
#include "lowering/ops_fallback.h"
#include "passes/graph/fuse_onednn_post_ops.h"
#include "passes/graph_pipeline.h"
#include "passes/loop/loop_pipeline.h"
#include "passes/loop/propagate_layout.h"
#include "runtime/executable.h"
#include "runtime/extern_step.h"
#include "compiler/jit/jit_compiler.h"
#include "runtime/kiln.h"
#include "runtime/memory_plan.h"

namespace kiln {
namespace internal {

// One JIT build for every model of the batch (same options); one result per
// model, in order.
std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> BuildBatch(
    const CompileOptions& options, std::vector<PreparedModel> batch);
// The executable of one prepared model: its loop kernels' entries in
// `library` (`emitted_of`: kernel index -> emitted kernel whose buffer
// arguments count from `buffer_base`), its library calls, its memory plan.
absl::StatusOr<std::unique_ptr<CompiledModel>> Finish(
    const CompileOptions& options, PreparedModel p,
    std::shared_ptr<jit::LoadedLibrary> library,
    const std::map<int, const backends::cpp::EmittedKernel*>& emitted_of, int32_t buffer_base);

}  // namespace internal
namespace {

using ir::loop::Buffer;
using ir::loop::BufferKind;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

double Ms(absl::Time since) { return absl::ToDoubleMilliseconds(absl::Now() - since); }

// The graph passes kiln's eager mode turns off: they fold or fuse ops.
constexpr const char* kEagerDisabledGraphPasses[] = {
    "fold-batch-norm", "fold-binary-into-weights", "fuse-onednn-post-ops"};

absl::Status WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create dump directory '", path, "': ", ec.message()));
  }
  return absl::OkStatus();
}

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
  backends::cpp::KernelFn fn = nullptr;
  std::vector<int32_t> args;  // loop kernels: buffers in argument order
  std::unique_ptr<runtime::ExternStep> library;
};

// Per-Run state: the arena, buffer pointers and argument scratch. Owned by
// one Run call at a time.
struct Context {
  std::unique_ptr<char[]> arena_storage;
  char* arena = nullptr;
  std::vector<void*> ptrs;  // per buffer
  std::vector<void*> args;  // scratch for one step's arguments
  // Values of data-dependent shape, one per such buffer; reference calls
  // assign them, Run empties them when it ends.
  std::vector<ir::Tensor> dynamic;
};

class Executable final : public CompiledModel {
 public:
  absl::StatusOr<std::vector<ir::Tensor>> Run(
      absl::Span<const ir::Tensor> inputs) const override {
    std::vector<ir::Tensor> outs = NewOutputs();
    std::vector<ir::Tensor*> ptrs;
    for (ir::Tensor& t : outs) ptrs.push_back(&t);
    KILN_RETURN_IF_ERROR(RunImpl(inputs, ptrs, nullptr, /*take_dynamic=*/true));
    return outs;
  }

  absl::StatusOr<std::vector<ir::Tensor>> RunNamed(
      const std::map<std::string, ir::Tensor>& inputs) const override {
    std::vector<ir::Tensor> ordered;
    for (const TensorInfo& in : inputs_) {
      auto it = inputs.find(in.name);
      if (it == inputs.end()) {
        return absl::InvalidArgumentError(absl::StrCat("missing input '", in.name, "'"));
      }
      ordered.push_back(it->second);
    }
    if (inputs.size() != inputs_.size()) {
      for (const auto& [name, t] : inputs) {
        if (std::none_of(inputs_.begin(), inputs_.end(),
                         [&](const TensorInfo& i) { return i.name == name; })) {
          return absl::InvalidArgumentError(
              absl::StrCat("the model has no input named '", name, "'"));
        }
      }
    }
    return Run(ordered);
  }

  absl::Status RunInto(absl::Span<const ir::Tensor> inputs,
                       absl::Span<ir::Tensor* const> outputs) const override {
    return RunImpl(inputs, outputs, nullptr, /*take_dynamic=*/false);
  }

  absl::StatusOr<std::vector<ir::Tensor>> Profile(
      absl::Span<const ir::Tensor> inputs, std::vector<KernelTiming>* timings) const override {
    std::vector<ir::Tensor> outs = NewOutputs();
    std::vector<ir::Tensor*> ptrs;
    for (ir::Tensor& t : outs) ptrs.push_back(&t);
    timings->clear();
    timings->reserve(steps_.size());
    KILN_RETURN_IF_ERROR(RunImpl(inputs, ptrs, timings, /*take_dynamic=*/true));
    return outs;
  }

  const std::vector<TensorInfo>& inputs() const override { return inputs_; }
  const std::vector<TensorInfo>& outputs() const override { return outputs_; }
  const CompileReport& report() const override { return report_; }

  // Output tensors for Run: static outputs allocated, outputs of
  // data-dependent shape empty (Execute hands them over).
  std::vector<ir::Tensor> NewOutputs() const {
    std::vector<ir::Tensor> outs;
    outs.reserve(outputs_.size());
    for (size_t o = 0; o < outputs_.size(); ++o) {
      if (output_dynamic_[o]) {
        outs.emplace_back(outputs_[o].dtype, ir::Shape{0});
      } else {
        outs.emplace_back(outputs_[o].dtype, outputs_[o].shape);
      }
    }
    return outs;
  }

  // `take_dynamic`: outputs of data-dependent shape replace the tensors in
  // `outputs` (Run); else they are copied into them, which must have their
  // run-time shapes (RunInto).
  absl::Status RunImpl(absl::Span<const ir::Tensor> inputs,
                       absl::Span<ir::Tensor* const> outputs,
                       std::vector<KernelTiming>* timings, bool take_dynamic) const {
    KILN_RETURN_IF_ERROR(CheckInterface(inputs, outputs));
    std::unique_ptr<Context> ctx = AcquireContext();
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
            "input ", i, " '", inputs_[i].name, "': expected ",
            ir::Tensor(inputs_[i].dtype, inputs_[i].shape).TypeString(), ", got ",
            inputs[i].TypeString()));
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
            "output ", i, " '", outputs_[i].name, "': expected a tensor of type ",
            ir::Tensor(outputs_[i].dtype, outputs_[i].shape).TypeString()));
      }
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Context> AcquireContext() const {
    {
      absl::MutexLock lock(&pool_mu_);
      if (!pool_.empty()) {
        std::unique_ptr<Context> ctx = std::move(pool_.back());
        pool_.pop_back();
        return ctx;
      }
    }
    auto ctx = std::make_unique<Context>();
    ctx->arena_storage.reset(new char[arena_bytes_ + runtime::kArenaAlignment]);
    const uintptr_t base = reinterpret_cast<uintptr_t>(ctx->arena_storage.get());
    ctx->arena = reinterpret_cast<char*>((base + runtime::kArenaAlignment - 1) /
                                         runtime::kArenaAlignment * runtime::kArenaAlignment);
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
    absl::MutexLock lock(&pool_mu_);
    pool_.push_back(std::move(ctx));
  }

  absl::Status Execute(Context& ctx, absl::Span<const ir::Tensor> inputs,
                       absl::Span<ir::Tensor* const> outputs,
                       std::vector<KernelTiming>* timings, bool take_dynamic) const {
    const absl::Time run_start = timings != nullptr ? absl::Now() : absl::InfinitePast();
    if (threads_ > 0) KILN_RETURN_IF_ERROR(onednn::SetNumThreads(threads_));
    for (size_t i = 0; i < inputs.size(); ++i) {
      ctx.ptrs[input_buffers_[i]] = const_cast<void*>(inputs[i].raw_data());
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (output_in_place_[o]) ctx.ptrs[output_buffers_[o]] = outputs[o]->raw_data();
    }
    for (size_t s = 0; s < steps_.size(); ++s) {
      const Step& step = steps_[s];
      const absl::Time t0 = timings != nullptr ? absl::Now() : absl::InfinitePast();
      if (step.fn != nullptr) {
        for (size_t a = 0; a < step.args.size(); ++a) ctx.args[a] = ctx.ptrs[step.args[a]];
        const int rc = step.fn(ctx.args.data());
        if (rc != 0) return KernelError(step, rc);
      } else {
        KILN_RETURN_IF_ERROR(step.library->Run(ctx.ptrs));
      }
      if (timings != nullptr) {
        const absl::Time t1 = absl::Now();
        timings->push_back({static_cast<int>(s),
                            absl::ToDoubleMicroseconds(t0 - run_start),
                            absl::ToDoubleMicroseconds(t1 - t0)});
      }
    }
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
        if (outputs[o]->shape() != t.shape()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "output ", o, " '", outputs_[o].name,
              "' has a data-dependent shape: this run produced ", t.TypeString(),
              ", the caller's tensor is ", outputs[o]->TypeString(),
              " (Run returns such outputs with their run-time shapes)"));
        }
        std::memcpy(outputs[o]->raw_data(), t.raw_data(), t.byte_size());
        continue;
      }
      if (output_in_place_[o]) continue;
      const Buffer& b = program_.buffers[output_buffers_[o]];
      CopyStrided(b, static_cast<const char*>(ctx.ptrs[output_buffers_[o]]),
                  static_cast<char*>(outputs[o]->raw_data()), /*to_strided=*/false);
    }
    return absl::OkStatus();
  }

  absl::Status KernelError(const Step& step, int rc) const {
    const Kernel& k = program_.kernels[step.kernel];
    const char* what = rc == backends::cpp::kErrorIntegerDivByZero
                           ? "integer division or modulo by zero"
                       : rc == backends::cpp::kErrorIndexOutOfRange
                           ? "an index (Gather-like) is out of range"
                           : "runtime error";
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel '", k.name, "' (", absl::StrJoin(k.ops, ", "), "): ", what, " (code ", rc,
        ")"));
  }

  // Filled by internal::BuildExecutable.
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
  std::shared_ptr<const void> keep_alive_;  // what the loop entries live in
  std::vector<Step> steps_;
  CompileReport report_;

  mutable absl::Mutex pool_mu_;
  mutable std::vector<std::unique_ptr<Context>> pool_ ABSL_GUARDED_BY(pool_mu_);
};

KernelReport LoopKernelReportImpl(const Kernel& k, const backends::cpp::EmittedKernel& e) {
  KernelReport r;
  r.name = k.name;
  r.backend = "loop";
  r.ops = k.ops;
  r.status = std::string(ir::loop::VecKindName(e.vec.kind));
  r.vectorized = e.vec.kind == ir::loop::VecStatus::Kind::kVectorized ||
                 e.vec.kind == ir::loop::VecStatus::Kind::kTiled;
  r.reason = e.vec.reason;
  r.parallel = e.parallel;
  for (size_t i = 0; i < e.ops.size() && i < k.body.size(); ++i) {
    const backends::cpp::OpDecision& d = e.ops[i];
    if (d.kind != backends::cpp::OpVec::kPerLane && d.kind != backends::cpp::OpVec::kScalar) {
      continue;
    }
    r.unvectorized_ops.push_back({static_cast<int>(i),
                                  std::string(ir::loop::OpCodeName(k.body[i].code)),
                                  std::string(backends::cpp::OpVecName(d.kind)), d.reason});
  }
  return r;
}

}  // namespace

const char* ModeName(CompileOptions::Mode mode) {
  return mode == CompileOptions::Mode::kEager ? "eager" : "compiled";
}

absl::StatusOr<CompileOptions::Mode> ParseMode(absl::string_view name) {
  if (name == "compiled") return CompileOptions::Mode::kCompiled;
  if (name == "eager") return CompileOptions::Mode::kEager;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", name, "' (expected compiled or eager)"));
}

Compiler::Compiler(CompileOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::CompileFile(
    const std::string& path) const {
  CompileReport report;
  report.model = path;
  const absl::Time start = absl::Now();
  frontend::ImportOptions io;
  for (const auto& [name, shape] : options_.input_shapes) io.input_shapes[name] = shape;
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported, frontend::ImportModelFile(path, io));
  report.import_ms = Ms(start);
  report.warnings = std::move(imported.warnings);
  return Compile(std::move(imported.graph), std::move(report));
}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::CompileGraph(ir::Graph graph) const {
  CompileReport report;
  report.model = graph.name();
  return Compile(std::move(graph), std::move(report));
}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::Compile(ir::Graph graph,
                                                                 CompileReport report) const {
  std::vector<internal::PreparedModel> batch;
  KILN_ASSIGN_OR_RETURN(internal::PreparedModel prepared,
                        internal::Prepare(options_, std::move(graph), std::move(report)));
  batch.push_back(std::move(prepared));
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> built =
      internal::BuildBatch(options_, std::move(batch));
  return std::move(built[0]);
}

std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> Compiler::CompileGraphs(
    std::vector<ir::Graph> graphs) const {
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> results(graphs.size());
  std::vector<internal::PreparedModel> batch;
  std::vector<size_t> where;
  for (size_t g = 0; g < graphs.size(); ++g) {
    CompileReport report;
    report.model = graphs[g].name();
    absl::StatusOr<internal::PreparedModel> p =
        internal::Prepare(options_, std::move(graphs[g]), std::move(report));
    if (!p.ok()) {
      results[g] = p.status();
      continue;
    }
    batch.push_back(*std::move(p));
    where.push_back(g);
  }
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> built =
      internal::BuildBatch(options_, std::move(batch));
  for (size_t b = 0; b < built.size(); ++b) results[where[b]] = std::move(built[b]);
  return results;
}

namespace internal {

KernelReport LoopKernelReport(const Kernel& k, const backends::cpp::EmittedKernel& e) {
  return LoopKernelReportImpl(k, e);
}

void GraphInterface(const ir::Graph& graph, std::vector<TensorInfo>* inputs,
                    std::vector<TensorInfo>* outputs) {
  for (ir::ValueId id : graph.inputs()) {
    const ir::Value& v = graph.value(id);
    inputs->push_back({v.name, v.dtype, v.shape});
  }
  for (ir::ValueId id : graph.outputs()) {
    const ir::Value& v = graph.value(id);
    outputs->push_back({v.name, v.dtype, v.shape, v.shape_known});
  }
}

absl::StatusOr<PreparedModel> Prepare(const CompileOptions& options, ir::Graph graph,
                                      CompileReport report, bool require_host_isa) {
  PreparedModel p;
  p.start = absl::Now();
  const bool eager = options.mode == CompileOptions::Mode::kEager;
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 0, got ", options.threads));
  }
  if (require_host_isa) {
    KILN_ASSIGN_OR_RETURN(p.isa, isa::SelectIsa(options.isa));
  } else {
    p.isa = options.isa.empty() ? isa::BestHostIsa() : isa::FindIsa(options.isa);
    if (p.isa == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown ISA '", options.isa, "'"));
    }
  }
  if (require_host_isa && !p.isa->emulator.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ISA '", p.isa->name, "' runs only under an emulator (", p.isa->emulator,
        ") on this host; a compiled model needs an ISA this CPU executes"));
  }
  report.isa = p.isa->name;
  report.mode = ModeName(options.mode);
  report.threads = options.threads;
  if (!options.dump_dir.empty()) KILN_RETURN_IF_ERROR(MakeDir(options.dump_dir));

  // Graph passes.
  absl::Time t = absl::Now();
  passes::GraphPipeline graph_pipeline = passes::DefaultGraphPipeline();
  passes::LoopPipeline loop_pipeline = passes::DefaultLoopPipeline();
  passes::PipelineOptions po;
  passes::LoopPipelineOptions lo;
  const std::vector<std::string> graph_pass_names = graph_pipeline.PassNames();
  const std::vector<std::string> loop_pass_names = loop_pipeline.PassNames();
  auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const std::string& name : options.disabled_passes) {
    if (has(graph_pass_names, name)) {
      po.disabled.insert(name);
    } else if (has(loop_pass_names, name)) {
      lo.disabled.insert(name);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown pass '", name, "' (graph passes: ", absl::StrJoin(graph_pass_names, ", "),
          "; loop passes: ", absl::StrJoin(loop_pass_names, ", "), ")"));
    }
  }
  if (eager) {
    for (const char* name : kEagerDisabledGraphPasses) po.disabled.insert(name);
  }
  if (!options.dump_dir.empty()) {
    po.dump_dir = absl::StrCat(options.dump_dir, "/graph");
    KILN_RETURN_IF_ERROR(MakeDir(po.dump_dir));
  }
  KILN_RETURN_IF_ERROR(graph_pipeline.Run(&graph, po));
  report.graph_passes_ms = Ms(t);
  if (!po.disabled.contains("fuse-onednn-post-ops")) {
    if (const auto* fuse = dynamic_cast<const passes::FuseOneDnnPostOps*>(
            graph_pipeline.Find("fuse-onednn-post-ops"))) {
      for (const auto& u : fuse->stats().unfused_elementwise) {
        report.unfused_elementwise.push_back({u.node, u.op, u.anchor, u.reason});
      }
    }
  }

  // Lowering.
  t = absl::Now();
  lowering::LoweringOptions lowering_options;
  if (options.reference_fallback) {
    lowering_options.reference_fallback = [](const ir::Graph& g) {
      return interp::UnsupportedOps(g).empty();
    };
  }
  KILN_ASSIGN_OR_RETURN(p.lowered, lowering::LowerGraph(graph, lowering_options));
  report.lowering_ms = Ms(t);

  // Loop passes (fusion). Eager mode keeps one kernel per op.
  t = absl::Now();
  if (eager) {
    for (const std::string& name : loop_pass_names) lo.disabled.insert(name);
  }
  if (!options.dump_dir.empty()) {
    lo.dump_dir = absl::StrCat(options.dump_dir, "/loop");
    KILN_RETURN_IF_ERROR(MakeDir(lo.dump_dir));
  }
  KILN_RETURN_IF_ERROR(loop_pipeline.Run(&p.lowered, lo));
  report.loop_passes_ms = Ms(t);

  // Each program must emit on its own (cheap: no C++ compile), so one bad
  // model cannot fail a batch.
  t = absl::Now();
  KILN_ASSIGN_OR_RETURN(backends::cpp::EmittedProgram alone,
                        backends::cpp::EmitCpp(p.lowered.program,
                                               backends::cpp::EmitOptionsForIsa(*p.isa)));
  report.emit_ms = Ms(t);
  if (!options.dump_dir.empty()) {
    KILN_RETURN_IF_ERROR(MakeDir(absl::StrCat(options.dump_dir, "/cpp")));
    for (const ir::loop::SourceFile& f : alone.sources) {
      KILN_RETURN_IF_ERROR(
          WriteFile(absl::StrCat(options.dump_dir, "/cpp/", f.name,
                                 absl::EndsWith(f.name, ".h") ? "" : ".cc"),
                    f.text));
    }
  }
  p.graph = std::move(graph);
  p.report = std::move(report);
  return p;
}

namespace {

// Every program of the batch in one LoopProgram: buffers and kernels
// renamed c<k>_..., buffer indices shifted. `kernel_base[k]` is where
// program k's kernels start.
ir::loop::LoopProgram MergePrograms(const std::vector<PreparedModel>& batch,
                                    std::vector<int>* kernel_base,
                                    std::vector<int32_t>* buffer_bases) {
  if (batch.size() == 1) {
    kernel_base->assign(1, 0);
    buffer_bases->assign(1, 0);
    return batch[0].lowered.program;
  }
  ir::loop::LoopProgram merged;
  for (size_t c = 0; c < batch.size(); ++c) {
    const LoopProgram& p = batch[c].lowered.program;
    const int32_t buffer_base = static_cast<int32_t>(merged.buffers.size());
    kernel_base->push_back(static_cast<int>(merged.kernels.size()));
    buffer_bases->push_back(buffer_base);
    for (Buffer b : p.buffers) {
      b.name = absl::StrCat("c", c, "_", b.name);
      merged.buffers.push_back(std::move(b));
    }
    for (Kernel k : p.kernels) {
      k.name = absl::StrCat("c", c, "_", k.name);
      for (ir::loop::Op& op : k.body) {
        if (op.buffer >= 0) op.buffer += buffer_base;
      }
      for (int32_t& b : k.call.inputs) b += buffer_base;
      for (int32_t& b : k.call.outputs) b += buffer_base;
      merged.kernels.push_back(std::move(k));
    }
  }
  return merged;
}

}  // namespace

std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> BuildBatch(
    const CompileOptions& options, std::vector<PreparedModel> batch) {
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> results;
  if (batch.empty()) return results;
  const isa::VecIsa* isa = batch[0].isa;
  const absl::Time t_emit = absl::Now();
  std::vector<int> kernel_base;
  std::vector<int32_t> buffer_base;
  const LoopProgram merged = MergePrograms(batch, &kernel_base, &buffer_base);
  backends::cpp::EmitOptions eo = backends::cpp::EmitOptionsForIsa(*isa);
  // A batch of small programs: fewer, larger translation units (the
  // Highway headers dominate a unit's compile time).
  if (batch.size() > 1) eo.kernels_per_unit = 64;
  absl::StatusOr<backends::cpp::EmittedProgram> emitted = backends::cpp::EmitCpp(merged, eo);
  const double emit_ms = Ms(t_emit);
  std::shared_ptr<jit::LoadedLibrary> library;
  absl::Status build_status = emitted.status();
  const absl::Time t_jit = absl::Now();
  if (build_status.ok() && !emitted->kernels.empty()) {
    jit::JitOptions jo;
    jo.isa = isa;
    jo.cache_dir = options.cache_dir;
    jit::JitCompiler jit(jo);
    absl::StatusOr<std::shared_ptr<jit::LoadedLibrary>> lib = jit.Compile(emitted->sources);
    if (lib.ok()) {
      library = *std::move(lib);
    } else {
      build_status = lib.status();
    }
  }
  const double jit_ms = Ms(t_jit);
  if (!build_status.ok()) {
    if (batch.size() == 1) {
      results.push_back(build_status);
      return results;
    }
    // Find the culprit: build each model on its own.
    for (PreparedModel& p : batch) {
      std::vector<PreparedModel> one;
      one.push_back(std::move(p));
      auto r = BuildBatch(options, std::move(one));
      results.push_back(std::move(r[0]));
    }
    return results;
  }
  std::map<int, const backends::cpp::EmittedKernel*> emitted_of;
  for (const backends::cpp::EmittedKernel& e : emitted->kernels) {
    emitted_of[e.kernel_index] = &e;
  }
  for (size_t c = 0; c < batch.size(); ++c) {
    PreparedModel& p = batch[c];
    p.report.emit_ms += emit_ms / batch.size();
    p.report.jit_ms = jit_ms / batch.size();
    if (library != nullptr) {
      p.report.jit_cache_hit = library->stats().cache_hit;
      p.report.translation_units = library->stats().translation_units;
    }
    std::map<int, const backends::cpp::EmittedKernel*> mine;
    for (size_t k = 0; k < p.lowered.program.kernels.size(); ++k) {
      auto it = emitted_of.find(kernel_base[c] + static_cast<int>(k));
      if (it != emitted_of.end()) mine[static_cast<int>(k)] = it->second;
    }
    results.push_back(Finish(options, std::move(p), library, mine, buffer_base[c]));
  }
  return results;
}

absl::StatusOr<std::unique_ptr<CompiledModel>> Finish(
    const CompileOptions& options, PreparedModel p,
    std::shared_ptr<jit::LoadedLibrary> library,
    const std::map<int, const backends::cpp::EmittedKernel*>& emitted_of, int32_t buffer_base) {
  jit::LoadedLibrary* lib = library.get();
  LoopEntryFn entry_of = [&](int k, const Kernel& kernel) -> absl::StatusOr<LoopEntry> {
    auto it = emitted_of.find(k);
    if (it == emitted_of.end() || lib == nullptr) {
      return InternalError("loop kernel '", kernel.name, "' was not emitted");
    }
    LoopEntry entry;
    KILN_ASSIGN_OR_RETURN(void* sym, lib->Symbol(it->second->symbol));
    entry.fn = reinterpret_cast<backends::cpp::KernelFn>(sym);
    entry.args = it->second->buffer_args;
    if (entry.args.size() != it->second->buffer_names.size()) {
      return InternalError("kernel '", kernel.name, "' argument lists disagree");
    }
    // Arguments of a merged program: back to this program's buffers.
    for (int32_t& a : entry.args) a -= buffer_base;
    entry.report = LoopKernelReport(kernel, *it->second);
    return entry;
  };
  std::vector<TensorInfo> inputs, outputs;
  GraphInterface(p.graph, &inputs, &outputs);
  return BuildExecutable(options, std::move(p.lowered), std::move(inputs), std::move(outputs),
                         std::move(p.report), p.start, std::move(library), entry_of);
}

absl::StatusOr<std::unique_ptr<CompiledModel>> BuildExecutable(
    const CompileOptions& options, ir::loop::LoopModule lowered,
    std::vector<TensorInfo> inputs, std::vector<TensorInfo> outputs, CompileReport report,
    absl::Time start, std::shared_ptr<const void> keep_alive, const LoopEntryFn& entry_of) {
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
  runtime::ExternStepOptions xo;
  xo.prepack_weights = options.prepack_weights && !eager;
  xo.use_onednn = options.use_onednn;
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
        return InternalError("kernel '", kernel.name, "' touches buffer '",
                             program.buffers[b].name,
                             "' of data-dependent shape; only reference calls may");
      }
    }
  }
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
      report.kernels.push_back(std::move(entry.report));
      ++report.loop_kernels;
      if (report.kernels.back().vectorized) ++report.vectorized_kernels;
    } else {
      KernelReport kr;
      KILN_ASSIGN_OR_RETURN(step.library,
                            runtime::CreateExternStep(program, kernel, lowered.constants, xo,
                                                      &kr));
      report.kernels.push_back(std::move(kr));
      ++report.library_calls;
      if (report.kernels.back().backend == "reference") ++report.reference_calls;
      if (ir::loop::IsReferenceCall(kernel)) ++report.fallback_calls;
      report.prepacked_bytes += report.kernels.back().prepacked_bytes;
      report.reorders += report.kernels.back().reorders_per_call;
    }
    exe->steps_.push_back(std::move(step));
  }
  // Loop kernels that convert between the plain and the channel-blocked
  // layout (propagate-layout's boundaries) are reorders too.
  report.reorders += passes::CountLayoutReorderKernels(program);
  report.library_ms = Ms(t);

  // Memory.
  runtime::MemoryPlanOptions mo;
  mo.share = !eager;
  KILN_ASSIGN_OR_RETURN(runtime::MemoryPlan plan, runtime::PlanMemory(program, mo));
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
      exe->arena_bytes_ += (ByteSize(buf) + runtime::kArenaAlignment - 1) /
                           runtime::kArenaAlignment * runtime::kArenaAlignment;
    }
  }
  exe->inputs_ = std::move(inputs);
  exe->outputs_ = std::move(outputs);
  exe->program_ = std::move(lowered.program);
  exe->constants_ = std::move(lowered.constants);
  exe->threads_ = options.threads;
  report.total_ms = Ms(start) + report.import_ms;
  exe->report_ = std::move(report);
  return std::unique_ptr<CompiledModel>(std::move(exe));
}

}  // namespace internal
}  // namespace kiln
