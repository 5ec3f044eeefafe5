// kiln::Compiler (compiler/compiler.h): import, the pipeline per model, one
// JIT build per batch of models, then the runtime's executable per model.
#include "compiler/compiler.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/cpp/emitter.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/layout_oracle.h"
#include "compiler/call_tuning.h"
#include "compiler/control_flow.h"
#include "compiler/dump.h"
#include "compiler/jit/jit_compiler.h"
#include "compiler/pipeline.h"
#include "compiler/report.h"
#include "compiler/specializing_model.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/module.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "isa/isa.h"
#include "runtime/control_flow.h"
#include "runtime/executable.h"
#include "runtime/reference_calls.h"

namespace kiln {
namespace {

using ir::loop::Kernel;
using ir::loop::LoopProgram;

double Ms(absl::Time since) { return absl::ToDoubleMilliseconds(absl::Now() - since); }

// A model through the pipeline (its C++ emitted), waiting for its code to
// be built, alone or in a batch with others.
struct Prepared {
  compiler::CompiledProgram program;
  CompileReport report;
  const isa::VecIsa* isa = nullptr;
  absl::Time start;
  // Ifs, Loops and Scans of this program whose subgraphs are prepared
  // models of the same batch (earlier entries): their steps replace the
  // reference calls.
  std::vector<compiler::ControlFlowSite> sites;
};

// The JIT runs where it compiles: activations in bf16 where the library
// calls run in bf16, natively (without native bf16 they run in f32, or
// emulated, and the activations keep f32). An AOT library keeps f32
// activations: its precision is chosen at Create.
bool Bf16Activations(const CompileOptions& options) {
  switch (options.precision) {
    case CompileOptions::Precision::kF32: return false;
    case CompileOptions::Precision::kBF16: return onednn::NativeBf16();
    case CompileOptions::Precision::kAuto: return onednn::FastBf16();
  }
  return false;
}

// The JIT's target: an ISA this CPU executes (the best one when
// options.isa is empty), oneDNN's conv layouts.
absl::StatusOr<compiler::Target> JitTarget(const CompileOptions& options) {
  compiler::Target target;
  KILN_ASSIGN_OR_RETURN(target.isa, isa::SelectIsa(options.isa));
  if (!target.isa->emulator.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ISA '", target.isa->name, "' runs only under an emulator (", target.isa->emulator,
        ") on this host; a compiled model needs an ISA this CPU executes"));
  }
  target.conv_layout_oracle = onednn::ConvLayoutOracle(Bf16Activations(options));
  target.library_call_oracle = onednn::LibraryCallOracle();
  return target;
}

absl::StatusOr<Prepared> Prepare(const CompileOptions& options, ir::Graph graph,
                                 CompileReport report) {
  Prepared p;
  p.start = absl::Now();
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 0, got ", options.threads));
  }
  if (options.deterministic && options.call_tuning != CompileOptions::CallTuning::kOff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "deterministic needs call tuning off, not '", CallTuningName(options.call_tuning),
        "': a layout chosen by timing (or cached per thread count) can change the results "
        "between runs and thread counts"));
  }
  KILN_ASSIGN_OR_RETURN(const compiler::Target target, JitTarget(options));
  p.isa = target.isa;
  report.isa = target.isa->name;
  report.mode = ModeName(options.mode);
  report.threads = options.threads;
  compiler::Target tuned_target = target;
  tuned_target.library_call_tuner = compiler::CallTuner(options, &report.tuned_calls);
  compiler::ReportObserver fill_report(&report);
  std::optional<compiler::DumpObserver> dump;
  if (!options.dump_dir.empty()) dump.emplace(options.dump_dir);
  compiler::ObserverList observers({&fill_report, dump.has_value() ? &*dump : nullptr});
  // Each model is emitted on its own (cheap next to the C++ build), so one
  // that fails cannot fail a batch.
  compiler::PipelineOptions pipeline = compiler::PipelineOptionsFor(options);
  pipeline.bf16_activations = Bf16Activations(options);
  KILN_ASSIGN_OR_RETURN(p.program, compiler::Compile(std::move(graph), tuned_target,
                                                     pipeline, &observers));
  p.report = std::move(report);
  return p;
}

// Subgraphs of Ifs, Loops and Scans nest at most this deep; deeper ones
// stay reference calls.
constexpr int kMaxIfDepth = 8;

absl::StatusOr<int> PrepareWithBranches(const CompileOptions& options, ir::Graph graph,
                                        CompileReport report, int depth,
                                        std::vector<Prepared>* batch);

// `graph`, the subgraph `what` ("then", "body") of kernel `kernel`,
// prepared into `batch`; its index there.
absl::StatusOr<int> PrepareSubgraph(const CompileOptions& options, const std::string& model,
                                    const Kernel& kernel, const char* what, ir::Graph graph,
                                    int depth, std::vector<Prepared>* batch) {
  CompileReport r;
  r.model = absl::StrCat(model, "/", kernel.name, "/", what);
  // A subgraph's dumps go to a folder of their own under the model's.
  CompileOptions sub_options = options;
  if (!options.dump_dir.empty()) {
    sub_options.dump_dir = absl::StrCat(options.dump_dir, "/", kernel.name, "_", what);
  }
  return PrepareWithBranches(sub_options, std::move(graph), std::move(r), depth + 1, batch);
}

// `graph` prepared, preceded in `batch` by the subgraphs of its Ifs, Loops
// and Scans that prepare (recursively); returns its index in `batch`. A
// subgraph that does not prepare leaves its node a reference call.
absl::StatusOr<int> PrepareWithBranches(const CompileOptions& options, ir::Graph graph,
                                        CompileReport report, int depth,
                                        std::vector<Prepared>* batch) {
  const std::string model = report.model;
  KILN_ASSIGN_OR_RETURN(Prepared p, Prepare(options, std::move(graph), std::move(report)));
  if (depth < kMaxIfDepth) {
    p.sites = compiler::FindControlFlowSites(
        p.program.module,
        [&](ir::Graph sub, const Kernel& kernel, const char* what) {
          return PrepareSubgraph(options, model, kernel, what, std::move(sub), depth, batch);
        },
        &p.report.warnings);
  }
  batch->push_back(std::move(p));
  return static_cast<int>(batch->size()) - 1;
}

// The executable of one prepared model: its loop kernels' entries in
// `library` (`emitted_of`: kernel index -> emitted kernel whose buffer
// arguments count from `buffer_base`), its library calls (the reference
// interpreter's too), its memory plan.
absl::StatusOr<std::unique_ptr<CompiledModel>> Finish(
    const CompileOptions& options, Prepared p, std::shared_ptr<jit::LoadedLibrary> library,
    const std::map<int, const backends::cpp::EmittedKernel*>& emitted_of, int32_t buffer_base,
    std::map<int, runtime::PrebuiltStep> prebuilt) {
  jit::LoadedLibrary* lib = library.get();
  runtime::LoopEntryFn entry_of = [&](int k,
                                      const Kernel& kernel) -> absl::StatusOr<runtime::LoopEntry> {
    auto it = emitted_of.find(k);
    if (it == emitted_of.end() || lib == nullptr) {
      return InternalError("loop kernel '", kernel.name, "' was not emitted");
    }
    runtime::LoopEntry entry;
    KILN_ASSIGN_OR_RETURN(void* sym, lib->Symbol(it->second->symbol));
    entry.fn = reinterpret_cast<ir::loop::KernelFn>(sym);
    entry.args = it->second->buffer_args;
    if (entry.args.size() != it->second->buffer_names.size()) {
      return InternalError("kernel '", kernel.name, "' argument lists disagree");
    }
    // Arguments of a merged program: back to this program's buffers.
    for (int32_t& a : entry.args) a -= buffer_base;
    entry.report = compiler::LoopKernelReport(kernel, *it->second);
    return entry;
  };
  return runtime::BuildExecutable(
      options, std::move(p.program.module), std::move(p.program.inputs),
      std::move(p.program.outputs), std::move(p.report), p.start, std::move(library), entry_of,
      &runtime::CreateReferenceStep, std::move(prebuilt));
}

// The steps of `p`'s compiled Ifs, Loops and Scans, their subgraphs taken
// out of `results` (built before `p`). One whose subgraph did not build,
// or whose step refuses it, stays a reference call (the report's warnings
// say why).
std::map<int, runtime::PrebuiltStep> ControlFlowSteps(
    const CompileOptions& options, Prepared& p,
    std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>>* results) {
  using Op = runtime::ControlFlowCall::Op;
  std::map<int, runtime::PrebuiltStep> steps;
  const LoopProgram& program = p.program.module.program;
  for (compiler::ControlFlowSite& site : p.sites) {
    const Kernel& kernel = program.kernels[site.call.kernel];
    const char* op = runtime::ControlFlowOpName(site.call.op);
    bool built = true;
    for (int m : site.models) {
      if (m < 0) continue;  // an unfit branch
      absl::StatusOr<std::unique_ptr<CompiledModel>>& r = (*results)[m];
      if (!r.ok() || *r == nullptr) {
        p.report.warnings.push_back(absl::StrCat(
            op, " '", kernel.name, "' runs on the reference: ",
            site.call.op == Op::kIf ? "a branch" : "its body", " did not build: ",
            r.ok() ? "no model" : r.status().message()));
        built = false;
        break;
      }
    }
    if (!built) continue;
    std::vector<std::shared_ptr<const CompiledModel>> models;
    for (int m : site.models) {
      if (m < 0) {
        models.emplace_back(nullptr);
        continue;
      }
      models.emplace_back(std::move(*(*results)[m]));
      (*results)[m] = InternalError("model taken as a subgraph");
    }
    absl::StatusOr<runtime::PrebuiltStep> step =
        runtime::CreateControlFlowStep(options, program, site.call, std::move(models));
    if (!step.ok()) {
      p.report.warnings.push_back(std::string(step.status().message()));
      continue;
    }
    steps.emplace(site.call.kernel, *std::move(step));
  }
  return steps;
}

// One JIT build for every model of the batch (same options); one result
// per model, in order.
std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> BuildBatch(
    const CompileOptions& options, std::vector<Prepared> batch) {
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> results;
  if (batch.empty()) return results;
  const isa::VecIsa* isa = batch[0].isa;
  // One model: the pipeline's C++ is the library's. Several: one merged
  // program. A unit costs its Highway headers' load (small against the
  // precompiled header) and gives the build one more unit to compile in
  // parallel: a batch spreads its loop kernels over at least 4 units of 16
  // or more (an If's branches build on several cores), and over units of
  // at most 64 (a conformance batch of a thousand tiny programs).
  const absl::Time t_emit = absl::Now();
  std::vector<int> kernel_base;
  std::vector<int32_t> buffer_base;
  absl::StatusOr<backends::cpp::EmittedProgram> emitted;
  double emit_ms = 0;
  if (batch.size() == 1) {
    kernel_base = {0};
    buffer_base = {0};
    emitted = std::move(*batch[0].program.cpp);
  } else {
    std::vector<const LoopProgram*> programs;
    for (const Prepared& p : batch) programs.push_back(&p.program.module.program);
    const LoopProgram merged = compiler::MergePrograms(programs, &kernel_base, &buffer_base);
    backends::cpp::EmitOptions eo = backends::cpp::EmitOptionsForIsa(*isa);
    const int loop_kernels = static_cast<int>(
        std::count_if(merged.kernels.begin(), merged.kernels.end(),
                      [](const Kernel& k) { return k.kind == Kernel::Kind::kLoop; }));
    eo.kernels_per_unit = std::clamp((loop_kernels + 3) / 4, 16, 64);
    emitted = backends::cpp::EmitCpp(merged, eo);
    emit_ms = Ms(t_emit);
  }
  std::shared_ptr<jit::LoadedLibrary> library;
  absl::Status build_status = emitted.status();
  const absl::Time t_jit = absl::Now();
  if (build_status.ok() && !emitted->kernels.empty()) {
    jit::JitOptions jo;
    jo.isa = isa;
    jo.cache_dir = options.cache_dir;
    jo.precompiled_header_dir = options.precompiled_header_dir;
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
    // Find the culprit: build each model on its own (Ifs, Loops and Scans
    // stay reference calls then).
    for (Prepared& p : batch) {
      p.sites.clear();
      std::vector<Prepared> one;
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
    Prepared& p = batch[c];
    p.report.emit_ms += emit_ms / batch.size();
    p.report.jit_ms = jit_ms / batch.size();
    if (library != nullptr) {
      p.report.jit_cache_hit = library->stats().cache_hit;
      if (!library->stats().cache_note.empty()) {
        p.report.warnings.push_back(library->stats().cache_note);
      }
      p.report.translation_units = library->stats().translation_units;
      // One-off costs of the toolchain, not shares of the batch's build.
      p.report.jit_precompiled_header_ms =
          absl::ToDoubleMilliseconds(library->stats().precompiled_header_time);
      p.report.jit_header_scan_ms =
          absl::ToDoubleMilliseconds(library->stats().header_scan_time);
    }
    std::map<int, const backends::cpp::EmittedKernel*> mine;
    for (size_t k = 0; k < p.program.module.program.kernels.size(); ++k) {
      auto it = emitted_of.find(kernel_base[c] + static_cast<int>(k));
      if (it != emitted_of.end()) mine[static_cast<int>(k)] = it->second;
    }
    std::map<int, runtime::PrebuiltStep> steps = ControlFlowSteps(options, p, &results);
    results.push_back(
        Finish(options, std::move(p), library, mine, buffer_base[c], std::move(steps)));
  }
  return results;
}

absl::StatusOr<std::unique_ptr<CompiledModel>> CompileOne(const CompileOptions& options,
                                                          ir::Graph graph,
                                                          CompileReport report) {
  std::vector<Prepared> batch;
  KILN_ASSIGN_OR_RETURN(int root, PrepareWithBranches(options, std::move(graph),
                                                      std::move(report), 0, &batch));
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> built =
      BuildBatch(options, std::move(batch));
  return std::move(built[root]);
}

// Errors leave the compiler with model text escaped and lines capped
// (ir/message.h); a JIT error quotes the C++ compiler's lines, so line
// breaks are kept.
absl::StatusOr<std::unique_ptr<CompiledModel>> Safe(
    absl::StatusOr<std::unique_ptr<CompiledModel>> r) {
  if (r.ok()) return r;
  return SanitizedStatus(r.status(), /*keep_line_breaks=*/true);
}

// The last resort of the public entry points: an allocation nobody checked
// (std::bad_alloc: the constants, a folded value) becomes
// ResourceExhausted naming the model, never an abort.
template <typename Fn>
auto CatchOutOfMemory(absl::string_view model, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return SanitizedStatus(
        absl::ResourceExhaustedError(absl::StrCat("out of memory compiling '", model, "'")),
        /*keep_line_breaks=*/false);
  }
}

// Whether a declared input has a dynamic dim `io` leaves unbound.
bool HasUnboundDynamicDims(const frontend::ImportResult& imported,
                           const frontend::ImportOptions& io) {
  for (const frontend::DeclaredInput& d : imported.declared_inputs) {
    if (d.ranked && !io.input_shapes.count(d.name) &&
        std::count(d.shape.begin(), d.shape.end(), ir::kDynamicDim) > 0) {
      return true;
    }
  }
  return false;
}

// The model `import` reads (again = false; true when a specialization
// reads it with its shapes bound), compiled; when its inputs have dynamic
// dims the options leave unbound, wrapped to compile a specialization per
// new input shape (decision 0044).
using ImportFn = std::function<absl::StatusOr<frontend::ImportResult>(
    const frontend::ImportOptions& options, bool again)>;

absl::StatusOr<std::unique_ptr<CompiledModel>> CompileImported(const CompileOptions& options,
                                                               const std::string& name,
                                                               const ImportFn& import) {
  if (options.max_shape_specializations < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_shape_specializations must be >= 0, got ", options.max_shape_specializations));
  }
  CompileReport report;
  report.model = name;
  const absl::Time start = absl::Now();
  frontend::ImportOptions io;
  for (const auto& [input, shape] : options.input_shapes) io.input_shapes[input] = shape;
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported, import(io, /*again=*/false));
  report.import_ms = Ms(start);
  report.warnings = std::move(imported.warnings);
  // Inputs with dynamic dims the options leave unbound take any size at Run.
  const bool dynamic =
      HasUnboundDynamicDims(imported, io) && options.max_shape_specializations > 0;
  if (dynamic) {
    report.warnings.push_back(
        "inputs with dynamic dims take any size at Run: each new shape compiles a "
        "specialization on first use (CompileOptions::max_shape_specializations)");
  }
  std::vector<frontend::DeclaredInput> declared = std::move(imported.declared_inputs);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> first,
                        Safe(CompileOne(options, std::move(imported.graph), std::move(report))));
  if (!dynamic) return first;
  auto count = std::make_shared<std::atomic<int>>(0);
  compiler::SpecializeFn specialize =
      [options, name, import, count](const std::map<std::string, ir::Shape>& shapes)
      -> absl::StatusOr<std::unique_ptr<CompiledModel>> {
    CompileOptions bound = options;
    bound.input_shapes = shapes;
    const int n = ++*count;
    if (!options.dump_dir.empty()) bound.dump_dir = absl::StrCat(options.dump_dir, "/shape_", n);
    return CatchOutOfMemory(name, [&]() -> absl::StatusOr<std::unique_ptr<CompiledModel>> {
      CompileReport report;
      report.model = name;
      const absl::Time start = absl::Now();
      frontend::ImportOptions io;
      for (const auto& [input, shape] : bound.input_shapes) io.input_shapes[input] = shape;
      KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported, import(io, /*again=*/true));
      report.import_ms = Ms(start);
      report.warnings = std::move(imported.warnings);
      return Safe(CompileOne(bound, std::move(imported.graph), std::move(report)));
    });
  };
  // Inputs the options bound take only that shape.
  for (frontend::DeclaredInput& d : declared) {
    if (options.input_shapes.count(d.name)) d.shape = options.input_shapes.at(d.name);
  }
  return compiler::SpecializingModel::Create(std::move(declared), std::move(first),
                                             Ms(start), options.max_shape_specializations,
                                             std::move(specialize));
}

}  // namespace

Compiler::Compiler(CompileOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::CompileFile(
    const std::string& path) const {
  return CatchOutOfMemory(path, [&] { return CompileFileImpl(path); });
}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::CompileFileImpl(
    const std::string& path) const {
  std::error_code ec;
  const auto stamp = std::filesystem::last_write_time(path, ec);
  return CompileImported(options_, path, [path, stamp](const frontend::ImportOptions& io,
                                             bool again) -> absl::StatusOr<frontend::ImportResult> {
    std::error_code ec;
    if (again && (std::filesystem::last_write_time(path, ec) != stamp || ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the model file '", path, "' changed or went away since it was compiled"));
    }
    return frontend::ImportModelFile(path, io);
  });
}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::CompileBytes(
    absl::string_view bytes, const std::string& name) const {
  return CatchOutOfMemory(name, [&] { return CompileBytesImpl(bytes, name); });
}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::CompileBytesImpl(
    absl::string_view bytes, const std::string& name) const {
  // `bytes` is read during this call only (again = false). A copy is kept,
  // for the specializations to import again, only when the model's inputs
  // have dynamic dims the options leave unbound.
  auto kept = std::make_shared<std::string>();
  return CompileImported(
      options_, name,
      [bytes, name, kept](const frontend::ImportOptions& io,
                          bool again) -> absl::StatusOr<frontend::ImportResult> {
        if (!again) {
          absl::StatusOr<frontend::ImportResult> r = frontend::ImportModelBytes(bytes, io, name);
          if (r.ok() && HasUnboundDynamicDims(*r, io)) kept->assign(bytes.data(), bytes.size());
          return r;
        }
        return frontend::ImportModelBytes(*kept, io, name);
      });
}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::CompileGraph(ir::Graph graph) const {
  const std::string name = graph.name();
  return CatchOutOfMemory(name, [&] {
    CompileReport report;
    report.model = name;
    return Safe(CompileOne(options_, std::move(graph), std::move(report)));
  });
}

std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> Compiler::CompileGraphs(
    std::vector<ir::Graph> graphs) const {
  const size_t n = graphs.size();
  try {
    return CompileGraphsImpl(std::move(graphs));
  } catch (const std::bad_alloc&) {
    std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> results;
    for (size_t g = 0; g < n; ++g) {
      results.push_back(absl::ResourceExhaustedError("out of memory compiling a batch of models"));
    }
    return results;
  }
}

std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> Compiler::CompileGraphsImpl(
    std::vector<ir::Graph> graphs) const {
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> results(graphs.size());
  std::vector<Prepared> batch;
  std::vector<std::pair<size_t, int>> where;  // graph, its index in the batch
  for (size_t g = 0; g < graphs.size(); ++g) {
    CompileReport report;
    report.model = graphs[g].name();
    absl::StatusOr<int> root =
        PrepareWithBranches(options_, std::move(graphs[g]), std::move(report), 0, &batch);
    if (!root.ok()) {
      results[g] = root.status();
      continue;
    }
    where.emplace_back(g, *root);
  }
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> built =
      BuildBatch(options_, std::move(batch));
  for (const auto& [g, root] : where) results[g] = std::move(built[root]);
  for (auto& r : results) r = Safe(std::move(r));
  return results;
}

}  // namespace kiln
