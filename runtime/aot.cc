// Loads an ahead-of-time compiled model (runtime/aot.h): picks the ISA,
// rebuilds the lowered program and its constants from the linked-in
// description and weights, and hands the chosen ISA's kernel table to the
// step-list builder the JIT path uses (runtime/executable.h).
#include "runtime/aot.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "backends/onednn/extern_kernel.h"
#include "ir/graph/dtype.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "ir/loop/verifier.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "isa/isa.h"
#include "nlohmann/json.hpp"
#include "runtime/control_flow.h"
#include "runtime/executable.h"

namespace kiln::aot {
namespace {

using nlohmann::json;

bool RegistrySupports(absl::string_view name) {
  const isa::VecIsa* isa = isa::FindIsa(name);
  return isa != nullptr && isa->emulator.empty() && isa->host_supports != nullptr &&
         isa->host_supports();
}

int IsaRank(absl::string_view name) {
  const isa::VecIsa* isa = isa::FindIsa(name);
  return isa != nullptr ? isa->rank : -1;
}

// The table of the ISA `options` asks for, or of the best one this CPU runs.
absl::StatusOr<const IsaTable*> ChooseIsa(const Artifact& a, absl::string_view wanted,
                                          const HostSupports& supports) {
  std::vector<std::string> built;
  for (int i = 0; i < a.num_isas; ++i) built.push_back(a.isas[i].isa);
  if (!wanted.empty()) {
    for (int i = 0; i < a.num_isas; ++i) {
      if (a.isas[i].isa != wanted) continue;
      if (!supports(wanted)) {
        return absl::InvalidArgumentError(
            absl::StrCat("ISA '", wanted, "' is not supported by this CPU; AOT library '",
                         EscapeForMessage(a.name), "' also has ", absl::StrJoin(built, ", "),
                         " (leave CompileOptions::isa empty to use the best this CPU runs)"));
      }
      return &a.isas[i];
    }
    return absl::InvalidArgumentError(absl::StrCat("ISA '", wanted,
                                                   "' is not compiled into AOT library '",
                                                   a.name, "' (it has ",
                                                   absl::StrJoin(built, ", "), ")"));
  }
  const IsaTable* best = nullptr;
  for (int i = 0; i < a.num_isas; ++i) {
    if (!supports(a.isas[i].isa)) continue;
    if (best == nullptr || IsaRank(a.isas[i].isa) > IsaRank(best->isa)) best = &a.isas[i];
  }
  if (best == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("this CPU runs none of the ISAs compiled into AOT library '",
                     EscapeForMessage(a.name), "' (", absl::StrJoin(built, ", "), ")"));
  }
  return best;
}

absl::StatusOr<ir::DType> ParseDType(const json& j) {
  std::optional<ir::DType> d = ir::DTypeFromName(j.get<std::string>());
  if (!d.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dtype '", EscapeForMessage(j.get<std::string>()), "'"));
  }
  return *d;
}

absl::StatusOr<TensorInfo> ParseTensorInfo(const json& j, int32_t* buffer) {
  TensorInfo t;
  t.name = j.at("name").get<std::string>();
  KILN_ASSIGN_OR_RETURN(t.dtype, ParseDType(j.at("dtype")));
  t.shape = j.at("shape").get<ir::Shape>();
  t.shape_known = j.at("shape_known").get<bool>();
  *buffer = j.at("buffer").get<int32_t>();
  return t;
}

// oneDNN ISAs that pick the same activation layouts: "avx512*", "avx2*",
// the rest.
std::string LayoutClass(absl::string_view onednn_isa) {
  if (absl::StartsWith(onednn_isa, "avx512")) return "avx512";
  if (absl::StartsWith(onednn_isa, "avx2")) return "avx2";
  return "sse41";
}

KernelReport ParseKernelReport(const json& j, const ir::loop::Kernel& k) {
  KernelReport r;
  r.name = k.name;
  r.backend = "loop";
  r.ops = k.ops;
  r.status = j.at("status").get<std::string>();
  r.vectorized = j.at("vectorized").get<bool>();
  r.reason = j.at("reason").get<std::string>();
  r.parallel = j.at("parallel").get<bool>();
  for (const json& n : j.at("unvectorized_ops")) {
    r.unvectorized_ops.push_back({n.at("op").get<int>(), n.at("opcode").get<std::string>(),
                                  n.at("decision").get<std::string>(),
                                  n.at("reason").get<std::string>()});
  }
  return r;
}

std::vector<int32_t> Ints(const json& j) { return j.get<std::vector<int32_t>>(); }

// A compiled If's, Loop's or Scan's call as the description carries it
// (compiler/aot_writer.cc), with `models` its subgraphs' programs
// (indices of earlier subprograms; -1: an If branch left uncompiled).
absl::StatusOr<runtime::ControlFlowCall> ParseCall(const json& j,
                                                   const ir::loop::LoopProgram& program,
                                                   size_t num_models, std::vector<int>* models) {
  using Op = runtime::ControlFlowCall::Op;
  runtime::ControlFlowCall c;
  const std::string op = j.at("op").get<std::string>();
  c.op = op == "If" ? Op::kIf : op == "Loop" ? Op::kLoop : Op::kScan;
  if (op != "If" && op != "Loop" && op != "Scan") {
    return InternalError("unknown control-flow op '", EscapeForMessage(op), "'");
  }
  c.kernel = j.at("kernel").get<int>();
  *models = j.at("models").get<std::vector<int>>();
  std::vector<int32_t> buffers;
  auto add = [&](const std::vector<int32_t>& v) {
    buffers.insert(buffers.end(), v.begin(), v.end());
    return v;
  };
  if (c.op == Op::kIf) {
    c.then_buffers = add(Ints(j.at("then_buffers")));
    c.else_buffers = add(Ints(j.at("else_buffers")));
    const std::vector<std::string> unfit = j.at("unfit").get<std::vector<std::string>>();
    if (unfit.size() != 2) return InternalError("an If call has ", unfit.size(), " branch notes");
    c.unfit[0] = unfit[0];
    c.unfit[1] = unfit[1];
  } else if (c.op == Op::kLoop) {
    const json& l = j.at("loop");
    c.loop.trip_count = add({l.at("trip_count").get<int32_t>()})[0];
    c.loop.cond = add({l.at("cond").get<int32_t>()})[0];
    c.loop.carried = add(Ints(l.at("carried")));
    c.loop.captures = add(Ints(l.at("captures")));
    c.loop.final_values = add(Ints(l.at("final_values")));
    c.loop.scan_outputs = add(Ints(l.at("scan_outputs")));
    c.loop.cond_passed_through = l.at("cond_passed_through").get<bool>();
  } else {
    const json& sc = j.at("scan");
    c.scan.states = add(Ints(sc.at("states")));
    c.scan.scan_inputs = add(Ints(sc.at("scan_inputs")));
    c.scan.captures = add(Ints(sc.at("captures")));
    c.scan.final_states = add(Ints(sc.at("final_states")));
    c.scan.scan_outputs = add(Ints(sc.at("scan_outputs")));
    c.scan.input_axes = sc.at("input_axes").get<std::vector<int64_t>>();
    c.scan.output_axes = sc.at("output_axes").get<std::vector<int64_t>>();
    c.scan.input_reverse = sc.at("input_reverse").get<std::vector<bool>>();
    c.scan.output_reverse = sc.at("output_reverse").get<std::vector<bool>>();
    c.scan.batched = sc.at("batched").get<bool>();
    if (c.scan.input_axes.size() != c.scan.scan_inputs.size() ||
        c.scan.input_reverse.size() != c.scan.scan_inputs.size() ||
        c.scan.output_axes.size() != c.scan.scan_outputs.size() ||
        c.scan.output_reverse.size() != c.scan.scan_outputs.size()) {
      return InternalError("a Scan call's axes do not fit its operands");
    }
  }
  for (int32_t b : buffers) {
    if (b < -1 || b >= static_cast<int64_t>(program.buffers.size())) {
      return InternalError("a control-flow call's buffer ", b, " lies outside its program");
    }
  }
  if (c.kernel < 0 || static_cast<size_t>(c.kernel) >= program.kernels.size() ||
      models->size() != (c.op == Op::kIf ? 2u : 1u)) {
    return InternalError("a control-flow call does not fit its program");
  }
  for (size_t m = 0; m < models->size(); ++m) {
    const int i = (*models)[m];
    const bool unfit = c.op == Op::kIf && !c.unfit[m].empty();
    if (unfit ? i != -1 : (i < 0 || static_cast<size_t>(i) >= num_models)) {
      return InternalError("a control-flow call names subprogram ", i, " (of ", num_models, ")");
    }
  }
  return c;
}

// One program of the library (the model's or a subgraph's, `desc` its
// part of the description) as an executable; `subprograms` are the
// subgraphs' executables built so far, which its Ifs, Loops and Scans take.
absl::StatusOr<std::unique_ptr<CompiledModel>> BuildProgram(
    const Artifact& a, const json& desc, const CompileOptions& options, const IsaTable& table,
    const std::map<int, ir::loop::KernelFn>& fn_of,
    std::vector<std::shared_ptr<const CompiledModel>>* subprograms, CompileReport report,
    absl::Time start) {
  ir::loop::LoopModule lowered;
  KILN_ASSIGN_OR_RETURN(lowered.program,
                        ir::loop::ParseProgram(desc.at("program").get<std::string>()));
  KILN_RETURN_IF_ERROR(ir::loop::VerifyProgram(lowered.program));
  const ir::loop::LoopProgram& program = lowered.program;
  auto valid_buffer = [&](int32_t b) {
    return b >= 0 && static_cast<size_t>(b) < program.buffers.size();
  };

  std::vector<TensorInfo> inputs, outputs;
  for (const json& j : desc.at("inputs")) {
    int32_t b = -1;
    KILN_ASSIGN_OR_RETURN(TensorInfo t, ParseTensorInfo(j, &b));
    if (!valid_buffer(b))
      return InternalError("input '", EscapeForMessage(t.name), "' has no buffer");
    inputs.push_back(std::move(t));
    lowered.inputs.push_back(b);
  }
  for (const json& j : desc.at("outputs")) {
    int32_t b = -1;
    KILN_ASSIGN_OR_RETURN(TensorInfo t, ParseTensorInfo(j, &b));
    if (!valid_buffer(b))
      return InternalError("output '", EscapeForMessage(t.name), "' has no buffer");
    outputs.push_back(std::move(t));
    lowered.outputs.push_back(b);
  }

  // Constants: copies out of the linked-in weights.
  for (const json& c : desc.at("constants")) {
    const int32_t b = c.at("buffer").get<int32_t>();
    KILN_ASSIGN_OR_RETURN(ir::DType dtype, ParseDType(c.at("dtype")));
    const ir::Shape shape = c.at("shape").get<ir::Shape>();
    const size_t offset = c.at("offset").get<size_t>();
    const size_t bytes = c.at("bytes").get<size_t>();
    int64_t elements = 1;
    for (int64_t d : shape) {
      if (d < 0) return InternalError("constant of buffer ", b, " has a negative dim");
      elements *= d;
    }
    if (!valid_buffer(b) || bytes != static_cast<size_t>(elements) * ir::DTypeSize(dtype) ||
        offset > a.weights_size || bytes > a.weights_size - offset) {
      return InternalError("AOT library '", EscapeForMessage(a.name), "': constant of buffer ", b,
                           " lies outside the weights or disagrees with its shape");
    }
    lowered.constants[b] =
        std::make_shared<const ir::Tensor>(ir::Tensor::FromBytes(dtype, shape, a.weights + offset));
  }

  // The chosen ISA's loop kernels: entries from the table (by the
  // emission's index, `entry`), arguments and report lines from the
  // description.
  std::map<int, const json*> kernel_desc;
  for (const json& k : desc.at("kernels")) kernel_desc[k.at("kernel").get<int>()] = &k;
  runtime::LoopEntryFn entry_of = [&](int k,
                                       const ir::loop::Kernel& kernel) -> absl::StatusOr<runtime::LoopEntry> {
    auto d = kernel_desc.find(k);
    auto f = d == kernel_desc.end()
                 ? fn_of.end()
                 : fn_of.find(d->second->value("entry", d->second->at("kernel").get<int>()));
    if (f == fn_of.end()) {
      return InternalError("AOT library '", EscapeForMessage(a.name), "' has no ", table.isa,
                           " entry for loop kernel '", EscapeForMessage(kernel.name), "'");
    }
    runtime::LoopEntry e;
    e.fn = f->second;
    e.args = d->second->at("args").get<std::vector<int32_t>>();
    e.report = ParseKernelReport(d->second->at("report"), kernel);
    return e;
  };

  report.model = desc.at("model").get<std::string>();
  report.isa = table.isa;
  report.mode = ModeName(options.mode);
  report.threads = options.threads;
  std::vector<std::string> warnings = desc.at("warnings").get<std::vector<std::string>>();
  report.warnings.insert(report.warnings.begin(), warnings.begin(), warnings.end());
  for (const json& u : desc.at("unfused_elementwise")) {
    report.unfused_elementwise.push_back(
        {u.at("node").get<std::string>(), u.at("op").get<std::string>(),
         u.at("after").get<std::string>(), u.at("reason").get<std::string>()});
  }
  if (desc.contains("qdq_patterns")) {
    for (const json& q : desc.at("qdq_patterns")) {
      report.qdq_patterns.push_back(
          {q.at("node").get<std::string>(), q.at("anchor").get<std::string>(),
           q.at("op").get<std::string>(), q.at("reason").get<std::string>()});
    }
  }

  // Ifs, Loops and Scans whose subgraphs are programs of the library: their
  // steps replace the reference calls. One the step refuses stays a
  // reference call (which needs reference_calls = True).
  std::map<int, runtime::PrebuiltStep> prebuilt;
  if (desc.contains("control_flow")) {
    for (const json& j : desc.at("control_flow")) {
      std::vector<int> models;
      KILN_ASSIGN_OR_RETURN(runtime::ControlFlowCall call,
                            ParseCall(j, program, subprograms->size(), &models));
      std::vector<std::shared_ptr<const CompiledModel>> subs;
      for (int m : models) subs.push_back(m < 0 ? nullptr : (*subprograms)[m]);
      absl::StatusOr<runtime::PrebuiltStep> step =
          runtime::CreateControlFlowStep(options, program, call, std::move(subs));
      if (!step.ok()) {
        if (step.status().code() != absl::StatusCode::kUnimplemented) return step.status();
        report.warnings.push_back(std::string(step.status().message()));
        continue;
      }
      prebuilt.emplace(call.kernel, *std::move(step));
    }
  }
  return runtime::BuildExecutable(options, std::move(lowered), std::move(inputs),
                                  std::move(outputs), std::move(report), start,
                                  /*keep_alive=*/nullptr, entry_of, a.reference_steps,
                                  std::move(prebuilt));
}

// The description is kiln's own JSON (compiler/aot_writer.cc) and holds no
// number but integers. nlohmann's get<int32_t>() and get<size_t>() convert
// any number without a check (a float out of an integer's range is
// undefined behaviour), so every number is bounded here before Create reads
// one: byte counts and offsets ("offset", "bytes", "weights_bytes") lie in
// [0, 2^63), dims ("shape") in int64, everything else in int32. Walks
// without recursion: a description may nest deeply.
absl::Status CheckNumbers(const Artifact& a, const json& desc) {
  struct Item {
    const json* value;
    std::string key;  // the member it is (or whose array it is in)
  };
  std::vector<Item> stack = {{&desc, ""}};
  while (!stack.empty()) {
    Item item = std::move(stack.back());
    stack.pop_back();
    const json& v = *item.value;
    if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) stack.push_back({&it.value(), it.key()});
      continue;
    }
    if (v.is_array()) {
      for (const json& e : v) stack.push_back({&e, item.key});
      continue;
    }
    if (!v.is_number()) continue;
    const bool size = item.key == "offset" || item.key == "bytes" || item.key == "weights_bytes";
    const bool dim = item.key == "shape";
    bool fits = false;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      fits = u <= static_cast<uint64_t>(size || dim ? std::numeric_limits<int64_t>::max()
                                                    : std::numeric_limits<int32_t>::max());
    } else if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      fits = dim || (!size && i >= std::numeric_limits<int32_t>::min() &&
                     i <= std::numeric_limits<int32_t>::max());
    }
    if (!fits) {
      return InternalError("AOT library '", EscapeForMessage(a.name), "': the description's '",
                           EscapeForMessage(item.key), "' holds ", EscapeForMessage(v.dump()),
                           ", which is not an integer in its field's range");
    }
  }
  return absl::OkStatus();
}

// Everything but the ISA choice; `desc` is the parsed description.
absl::StatusOr<std::unique_ptr<CompiledModel>> Create(const Artifact& a, const json& desc,
                                                      const CompileOptions& options,
                                                      const IsaTable& table,
                                                      absl::Time start) {
  if (desc.at("format").get<std::string>() != "kiln-aot-2" ||
      desc.at("isa").get<std::string>() != table.isa) {
    return InternalError("AOT library '", EscapeForMessage(a.name), "': the ", table.isa,
                         " description has an unknown format or is another ISA's");
  }
  // What was fixed when the library was built.
  const json& built = desc.at("compile");
  if (options.mode != CompileOptions::Mode::kCompiled) {
    return absl::InvalidArgumentError(absl::StrCat("AOT library '", EscapeForMessage(a.name),
                                                   "' is compiled mode; eager is JIT only"));
  }
  if (!options.input_shapes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AOT library '", EscapeForMessage(a.name),
        "' has its input shapes fixed at build time (kiln_aot_library's input_shapes); "
        "CompileOptions::input_shapes must be empty"));
  }
  if (options.disabled_passes != built.at("disabled_passes").get<std::vector<std::string>>() ||
      options.reference_fallback != built.at("reference_fallback").get<bool>()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AOT library '", EscapeForMessage(a.name),
        "': disabled_passes and reference_fallback are fixed at build time and differ"));
  }
  if (desc.at("weights_bytes").get<size_t>() != a.weights_size) {
    return InternalError("AOT library '", EscapeForMessage(a.name), "': the weights are ",
                         a.weights_size, " bytes, the description expects ",
                         desc.at("weights_bytes").get<size_t>());
  }
  std::map<int, ir::loop::KernelFn> fn_of;
  for (int i = 0; i < table.num_entries; ++i) fn_of[table.entries[i].kernel] = table.entries[i].fn;

  // The subgraphs' programs first (each before the programs that run it).
  std::vector<std::shared_ptr<const CompiledModel>> subprograms;
  if (desc.contains("subprograms")) {
    for (const json& sub : desc.at("subprograms")) {
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> m,
                            BuildProgram(a, sub, options, table, fn_of, &subprograms,
                                         CompileReport(), absl::Now()));
      subprograms.push_back(std::move(m));
    }
  }

  CompileReport report;
  const std::string built_onednn = desc.at("onednn_isa").get<std::string>();
  const std::string here_onednn = onednn::OneDnnCpuIsa();
  if (options.use_onednn && LayoutClass(built_onednn) != LayoutClass(here_onednn)) {
    report.warnings.push_back(absl::StrCat(
        "activation layouts were chosen at build time for oneDNN on ", built_onednn,
        "; oneDNN here runs ", here_onednn,
        ": convolutions may reorder activations inside the call (correct, slower); "
        "build the library with isas matching this CPU"));
  }
  return BuildProgram(a, desc, options, table, fn_of, &subprograms, std::move(report), start);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompiledModel>> CreateModel(const Artifact& artifact,
                                                           const CompileOptions& options,
                                                           const HostSupports& host_supports) {
  const absl::Time start = absl::Now();
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 0, got ", options.threads));
  }
  const HostSupports supports = host_supports ? host_supports : HostSupports(RegistrySupports);
  KILN_ASSIGN_OR_RETURN(const IsaTable* table, ChooseIsa(artifact, options.isa, supports));
  const json desc = json::parse(table->description,
                                table->description + table->description_size,
                                /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (desc.is_discarded() || !desc.is_object()) {
    return InternalError("AOT library '", EscapeForMessage(artifact.name), "': the ", table->isa,
                         " description is not JSON");
  }
  KILN_RETURN_IF_ERROR(CheckNumbers(artifact, desc));
  try {
    return Create(artifact, desc, options, *table, start);
  } catch (const json::exception& e) {
    return InternalError("AOT library '", EscapeForMessage(artifact.name),
                         "': malformed description: ", e.what());
  }
}

}  // namespace kiln::aot
