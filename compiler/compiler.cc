// kiln::Compiler (compiler/compiler.h): import, the pipeline per model, one
// JIT build per batch of models, then the runtime's executable per model.
#include "compiler/compiler.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/cpp/emitter.h"
#include "backends/onednn/layout_oracle.h"
#include "compiler/dump.h"
#include "compiler/jit/jit_compiler.h"
#include "compiler/pipeline.h"
#include "compiler/report.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/module.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "isa/isa.h"
#include "runtime/executable.h"
#include "runtime/reference_calls.h"

namespace kiln {
namespace {

using ir::loop::Buffer;
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
};

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
  target.conv_layout_oracle = onednn::ConvLayoutOracle();
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
  KILN_ASSIGN_OR_RETURN(const compiler::Target target, JitTarget(options));
  p.isa = target.isa;
  report.isa = target.isa->name;
  report.mode = ModeName(options.mode);
  report.threads = options.threads;
  compiler::ReportObserver fill_report(&report);
  std::optional<compiler::DumpObserver> dump;
  if (!options.dump_dir.empty()) dump.emplace(options.dump_dir);
  compiler::ObserverList observers({&fill_report, dump.has_value() ? &*dump : nullptr});
  // Each model is emitted on its own (cheap next to the C++ build), so one
  // that fails cannot fail a batch.
  KILN_ASSIGN_OR_RETURN(p.program,
                        compiler::Compile(std::move(graph), target,
                                          compiler::PipelineOptionsFor(options), &observers));
  p.report = std::move(report);
  return p;
}

// Every program of the batch in one LoopProgram: buffers and kernels
// renamed c<k>_..., buffer indices shifted. `kernel_base[k]` is where
// program k's kernels start.
LoopProgram MergePrograms(const std::vector<Prepared>& batch, std::vector<int>* kernel_base,
                          std::vector<int32_t>* buffer_bases) {
  LoopProgram merged;
  for (size_t c = 0; c < batch.size(); ++c) {
    const LoopProgram& p = batch[c].program.module.program;
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

// The executable of one prepared model: its loop kernels' entries in
// `library` (`emitted_of`: kernel index -> emitted kernel whose buffer
// arguments count from `buffer_base`), its library calls (the reference
// interpreter's too), its memory plan.
absl::StatusOr<std::unique_ptr<CompiledModel>> Finish(
    const CompileOptions& options, Prepared p, std::shared_ptr<jit::LoadedLibrary> library,
    const std::map<int, const backends::cpp::EmittedKernel*>& emitted_of, int32_t buffer_base) {
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
      &runtime::CreateReferenceStep);
}

// One JIT build for every model of the batch (same options); one result
// per model, in order.
std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> BuildBatch(
    const CompileOptions& options, std::vector<Prepared> batch) {
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> results;
  if (batch.empty()) return results;
  const isa::VecIsa* isa = batch[0].isa;
  // One model: the pipeline's C++ is the library's. Several: one merged
  // program in fewer, larger translation units (the Highway headers
  // dominate a unit's compile time).
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
    const LoopProgram merged = MergePrograms(batch, &kernel_base, &buffer_base);
    backends::cpp::EmitOptions eo = backends::cpp::EmitOptionsForIsa(*isa);
    eo.kernels_per_unit = 64;
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
    for (Prepared& p : batch) {
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
      p.report.translation_units = library->stats().translation_units;
    }
    std::map<int, const backends::cpp::EmittedKernel*> mine;
    for (size_t k = 0; k < p.program.module.program.kernels.size(); ++k) {
      auto it = emitted_of.find(kernel_base[c] + static_cast<int>(k));
      if (it != emitted_of.end()) mine[static_cast<int>(k)] = it->second;
    }
    results.push_back(Finish(options, std::move(p), library, mine, buffer_base[c]));
  }
  return results;
}

absl::StatusOr<std::unique_ptr<CompiledModel>> CompileOne(const CompileOptions& options,
                                                          ir::Graph graph,
                                                          CompileReport report) {
  KILN_ASSIGN_OR_RETURN(Prepared prepared, Prepare(options, std::move(graph), std::move(report)));
  std::vector<Prepared> batch;
  batch.push_back(std::move(prepared));
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> built =
      BuildBatch(options, std::move(batch));
  return std::move(built[0]);
}

// Errors leave the compiler with model text escaped and lines capped
// (ir/message.h); a JIT error quotes the C++ compiler's lines, so line
// breaks are kept.
absl::StatusOr<std::unique_ptr<CompiledModel>> Safe(
    absl::StatusOr<std::unique_ptr<CompiledModel>> r) {
  if (r.ok()) return r;
  return SanitizedStatus(r.status(), /*keep_line_breaks=*/true);
}

}  // namespace

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
  return Safe(CompileOne(options_, std::move(imported.graph), std::move(report)));
}

absl::StatusOr<std::unique_ptr<CompiledModel>> Compiler::CompileGraph(ir::Graph graph) const {
  CompileReport report;
  report.model = graph.name();
  return Safe(CompileOne(options_, std::move(graph), std::move(report)));
}

std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> Compiler::CompileGraphs(
    std::vector<ir::Graph> graphs) const {
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> results(graphs.size());
  std::vector<Prepared> batch;
  std::vector<size_t> where;
  for (size_t g = 0; g < graphs.size(); ++g) {
    CompileReport report;
    report.model = graphs[g].name();
    absl::StatusOr<Prepared> p = Prepare(options_, std::move(graphs[g]), std::move(report));
    if (!p.ok()) {
      results[g] = p.status();
      continue;
    }
    batch.push_back(*std::move(p));
    where.push_back(g);
  }
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> built =
      BuildBatch(options_, std::move(batch));
  for (size_t b = 0; b < built.size(); ++b) results[where[b]] = std::move(built[b]);
  for (auto& r : results) r = Safe(std::move(r));
  return results;
}

}  // namespace kiln
