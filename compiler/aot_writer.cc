// `kilnc aot`'s compiler half (compiler/aot_writer.h): one model through
// the pipeline per ISA, its loop kernels, the description and weights
// files, and the C++/assembler glue of a kiln_aot_library.
#include "compiler/aot_writer.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/cpp/emitter.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/layout_oracle.h"
#include "compiler/control_flow.h"
#include "compiler/pipeline.h"
#include "compiler/report.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/text.h"
#include "ir/status_macros.h"
#include "isa/isa.h"
#include "nlohmann/json.hpp"
#include "runtime/control_flow.h"

namespace kiln::aot {
namespace {

using nlohmann::json;

constexpr int64_t kWeightAlignment = 64;

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || s.size() > 100) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// A library name becomes a namespace: no keyword, no reserved identifier,
// no namespace the generated code or its includes already use.
bool IsUsableNamespace(absl::string_view s) {
  static const absl::flat_hash_set<absl::string_view>* const kTaken =
      new absl::flat_hash_set<absl::string_view>{
          "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool",
          "break", "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class",
          "compl", "concept", "const", "consteval", "constexpr", "constinit", "const_cast",
          "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
          "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern",
          "false", "float", "for", "friend", "goto", "if", "inline", "int", "long",
          "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator",
          "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
          "requires", "return", "short", "signed", "sizeof", "static", "static_assert",
          "static_cast", "struct", "switch", "template", "this", "thread_local", "throw",
          "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
          "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
          // Namespaces of the generated code and its headers.
          "std", "absl", "hwy", "kiln", "kiln_gen", "kiln_rt", "nlohmann", "dnnl"};
  if (absl::StartsWith(s, "__") ||
      (s.size() > 1 && s[0] == '_' && std::isupper(static_cast<unsigned char>(s[1])))) {
    return false;
  }
  return !kTaken->contains(s);
}

// Paths that go into a C++ #include or an assembler string as they are.
bool IsSafePath(absl::string_view s) {
  if (s.empty() || s.find("..") != absl::string_view::npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == '/';
  });
}

json TensorInfoJson(const TensorInfo& t, int32_t buffer) {
  return json{{"name", t.name},
              {"dtype", std::string(ir::DTypeName(t.dtype))},
              {"shape", t.shape},
              {"shape_known", t.shape_known},
              {"buffer", buffer}};
}

json KernelReportJson(const KernelReport& r) {
  json ops = json::array();
  for (const KernelReport::OpNote& n : r.unvectorized_ops) {
    ops.push_back({{"op", n.op}, {"opcode", n.opcode}, {"decision", n.decision},
                   {"reason", n.reason}});
  }
  return json{{"status", r.status},     {"vectorized", r.vectorized},
              {"reason", r.reason},     {"parallel", r.parallel},
              {"unvectorized_ops", ops}};
}

std::string SymbolPrefix(const WriterOptions& w, absl::string_view isa) {
  return absl::StrCat("kiln_aot_", w.name, "_", isa, "_");
}

std::string ShardName(const WriterOptions& w, absl::string_view isa, int s) {
  return absl::StrCat(w.name, "_", isa, "_", s, ".cc");
}

// Fails the C++ build when the copts Bazel used for this ISA's shards do
// not make Highway's static target the one the ISA's row names.
std::string TargetGuard(const isa::VecIsa& isa) {
  return absl::StrFormat(
      "\n#include \"hwy/highway.h\"\n"
      "#if HWY_STATIC_TARGET != %dLL\n"
      "#error \"kiln AOT: this unit must be compiled with the %s module's flags "
      "(tools/aot.bzl copts vs %s's row in isa/isas.bzl)\"\n"
      "#endif\n",
      isa.hwy_target, isa.name, isa.name);
}

std::string HeaderText(const WriterOptions& w) {
  const std::string guard = absl::StrCat("KILN_AOT_GENERATED_", w.name, "_H_");
  return absl::StrCat(
      "// Generated by `kilnc aot` (tools/aot.bzl, kiln_aot_library). DO NOT EDIT.\n"
      "// A model compiled ahead of time for the ISAs ",
      absl::StrJoin(w.isas, ", "),
      "; Create picks the best one this CPU runs\n"
      "// (runtime/aot.h says which CompileOptions apply).\n"
      "#ifndef ", guard, "\n#define ", guard,
      "\n\n#include <memory>\n\n#include \"absl/status/statusor.h\"\n"
      "#include \"runtime/aot.h\"\n#include \"runtime/compiled_model.h\"\n\nnamespace ",
      w.name,
      " {\n\nabsl::StatusOr<std::unique_ptr<kiln::CompiledModel>> Create(\n"
      "    const kiln::CompileOptions& options = kiln::CompileOptions());\n\n"
      "// What Create loads (for kiln::aot::CreateModel with a detection override).\n"
      "const kiln::aot::Artifact& Artifact();\n\n}  // namespace ",
      w.name, "\n\n#endif  // ", guard, "\n");
}

// One .incbin'd file as a global, read-only symbol (and <sym>_end).
std::string IncbinAsm(const std::string& sym, const std::string& path) {
  return absl::StrCat("  .section .rodata.", sym, ",\"a\",@progbits\n  .balign 64\n",
                      "  .globl ", sym, "\n  .hidden ", sym, "\n  .type ", sym, ", @object\n",
                      sym, ":\n  .incbin \"", path, "\"\n", "  .globl ", sym, "_end\n  .hidden ",
                      sym, "_end\n", sym, "_end:\n", "  .byte 0\n");
}

constexpr absl::string_view kAsmBanner =
    "/* Generated by `kilnc aot`. DO NOT EDIT. Data of a kiln_aot_library, linked in\n"
    "   read-only (runtime/aot.h). */\n";
constexpr absl::string_view kAsmTrailer = "  .section .note.GNU-stack,\"\",@progbits\n";

// The weights, shared by every ISA's program.
std::string DataAsm(const WriterOptions& w) {
  return absl::StrCat(kAsmBanner,
                      IncbinAsm(absl::StrCat("kiln_aot_", w.name, "_weights"),
                                absl::StrCat(w.data_dir, "/", w.name, "_weights.inc")),
                      kAsmTrailer);
}

// One ISA's description.
std::string IsaDataAsm(const WriterOptions& w, absl::string_view isa) {
  return absl::StrCat(
      kAsmBanner,
      IncbinAsm(absl::StrCat("kiln_aot_", w.name, "_", isa, "_program"),
                absl::StrCat(w.data_dir, "/", w.name, "_", isa, "_program.inc")),
      kAsmTrailer);
}

// One ISA's kernel table (compiled with the baseline flags: it only takes
// the entries' addresses).
std::string IsaTableText(const WriterOptions& w, absl::string_view isa,
                         const backends::cpp::EmittedProgram& e) {
  const std::string table = absl::StrCat("kiln_aot_", w.name, "_", isa, "_kernels");
  std::string decls, entries;
  for (const backends::cpp::EmittedKernel& k : e.kernels) {
    absl::StrAppend(&decls, "int ", k.symbol, "(void* const* args);\n");
    absl::StrAppend(&entries, "    {", k.kernel_index, ", &", k.symbol, "},\n");
  }
  if (e.kernels.empty()) entries = "    {-1, nullptr},  // none (count 0)\n";
  return absl::StrCat(
      "// Generated by `kilnc aot` (tools/aot.bzl, kiln_aot_library). DO NOT EDIT.\n"
      "// The ", isa, " loop kernels' entries, by kernel index. Compiled with the\n"
      "// baseline flags; runtime/aot.cc calls them only on a CPU that runs ", isa,
      ".\n#include \"runtime/aot.h\"\n\nextern \"C\" {\n", decls, "\nextern const kiln::aot::KernelEntry ",
      table, "[] = {\n", entries, "};\nextern const int ", table, "_count = ",
      e.kernels.size(), ";\n}\n");
}

std::string TableText(const WriterOptions& w) {
  const std::string w_sym = absl::StrCat("kiln_aot_", w.name, "_weights");
  std::string decls, isas;
  for (const std::string& isa : w.isas) {
    const std::string p = absl::StrCat("kiln_aot_", w.name, "_", isa, "_program");
    const std::string k = absl::StrCat("kiln_aot_", w.name, "_", isa, "_kernels");
    absl::StrAppend(&decls, "extern const unsigned char ", p, "[], ", p, "_end[];\n",
                    "extern const kiln::aot::KernelEntry ", k, "[];\nextern const int ", k,
                    "_count;\n");
    absl::StrAppend(&isas, "      {\"", isa, "\", ", k, ", ", k, "_count, ", p,
                    ", static_cast<size_t>(", p, "_end - ", p, ")},\n");
  }
  return absl::StrCat(
      "// Generated by `kilnc aot` (tools/aot.bzl, kiln_aot_library). DO NOT EDIT.\n"
      "#include \"",
      w.header_include, "\"\n\n#include \"runtime/aot.h\"\n",
      w.reference_calls ? "#include \"runtime/reference_calls.h\"\n" : "", "\nextern \"C\" {\n",
      "extern const unsigned char ", w_sym, "[], ", w_sym, "_end[];\n", decls, "}\n\nnamespace ",
      w.name, " {\n\n",
      "const kiln::aot::Artifact& Artifact() {\n",
      "  static const kiln::aot::IsaTable isas[] = {\n", isas, "  };\n",
      "  static const kiln::aot::Artifact artifact = {\n      \"", w.name, "\",\n      ", w_sym,
      ",\n      static_cast<size_t>(", w_sym, "_end - ", w_sym, "),\n      isas,\n      ",
      w.isas.size(), ",\n      ",
      w.reference_calls ? "&kiln::runtime::CreateReferenceStep" : "nullptr  // no reference_calls",
      ",\n  };\n  return artifact;\n}\n\n",
      "absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> Create(\n"
      "    const kiln::CompileOptions& options) {\n"
      "  return kiln::aot::CreateModel(Artifact(), options);\n}\n\n}  // namespace ",
      w.name, "\n");
}

absl::Status CheckWriterOptions(const WriterOptions& w) {
  if (!IsIdentifier(w.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AOT library name '", w.name, "' is not a C++ identifier ([A-Za-z_][A-Za-z0-9_]*)"));
  }
  if (!IsUsableNamespace(w.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AOT library name '", w.name,
        "' cannot be its namespace (a C++ keyword, a reserved identifier or a namespace "
        "kiln's generated code uses)"));
  }
  if (w.isas.empty()) return absl::InvalidArgumentError("no ISA to compile for");
  for (size_t i = 0; i < w.isas.size(); ++i) {
    const isa::VecIsa* isa = isa::FindIsa(w.isas[i]);
    if (isa == nullptr || !IsIdentifier(w.isas[i])) {
      std::vector<std::string> known;
      for (const isa::VecIsa* v : isa::AllIsas()) known.push_back(v->name);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown ISA '", w.isas[i], "' (known: ", absl::StrJoin(known, ", "), ")"));
    }
    if (!isa->emulator.empty() || isa->cxx != "g++") {
      return absl::InvalidArgumentError(absl::StrCat(
          "ISA '", w.isas[i], "' needs its own toolchain; an AOT library is built with "
          "the target's compiler"));
    }
    if (std::find(w.isas.begin(), w.isas.begin() + i, w.isas[i]) != w.isas.begin() + i) {
      return absl::InvalidArgumentError(absl::StrCat("ISA '", w.isas[i], "' listed twice"));
    }
  }
  if (w.shards < 1 || w.shards > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("shards must be in [1, 1024], got ", w.shards));
  }
  if (!IsSafePath(w.header_include)) {
    return absl::InvalidArgumentError(
        absl::StrCat("header include '", w.header_include, "' is not a plain relative path"));
  }
  if (!IsSafePath(w.data_dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data dir '", w.data_dir, "' is not a plain relative path"));
  }
  if (!w.part.empty() && w.part != "glue" &&
      std::find(w.isas.begin(), w.isas.end(), w.part) == w.isas.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "part '", w.part, "' is neither 'glue' nor one of the ISAs (",
        absl::StrJoin(w.isas, ", "), ")"));
  }
  return absl::OkStatus();
}

bool WritesGlue(const WriterOptions& w) { return w.part.empty() || w.part == "glue"; }
bool WritesIsa(const WriterOptions& w, absl::string_view isa) {
  return w.part.empty() || w.part == isa;
}

// One ISA's emission: the library's symbol and unit names, its kernels
// spread over `shards` units.
backends::cpp::EmitOptions AotEmitOptions(const WriterOptions& w, const isa::VecIsa& isa) {
  backends::cpp::EmitOptions eo = backends::cpp::EmitOptionsForIsa(isa);
  eo.symbol_prefix = SymbolPrefix(w, isa.name);
  eo.unit_prefix = absl::StrCat(w.name, "_", isa.name);
  eo.units = w.shards;
  return eo;
}

// One program of the library: the model's, or a subgraph's (an If branch,
// a Loop or Scan body) that runs compiled; `sites` are its Ifs, Loops and
// Scans whose subgraphs are programs of the library (their indices).
struct AotProgram {
  compiler::CompiledProgram program;
  CompileReport report;
  std::vector<compiler::ControlFlowSite> sites;
};

// Subgraphs nest at most this deep (as in the JIT); deeper ones stay
// reference calls.
constexpr int kMaxSubgraphDepth = 8;

// Reference fallback calls run on the interpreter, which a library links
// only when asked: refused here, at build time, naming the nodes.
// Every program of the library counts (a subgraph's too), but not the
// Ifs, Loops and Scans whose subgraphs are compiled programs.
absl::Status CheckReferenceCalls(const std::string& model,
                                 const std::vector<AotProgram>& programs,
                                 const WriterOptions& w) {
  if (w.reference_calls) return absl::OkStatus();
  std::vector<std::string> calls;
  for (const AotProgram& p : programs) {
    std::set<int> compiled;
    for (const compiler::ControlFlowSite& site : p.sites) compiled.insert(site.call.kernel);
    const ir::loop::LoopProgram& program = p.program.module.program;
    for (size_t i = 0; i < program.kernels.size(); ++i) {
      const ir::loop::Kernel& k = program.kernels[i];
      if (!ir::loop::IsReferenceCall(k) || compiled.count(static_cast<int>(i))) continue;
      auto text = [&k](const char* attr) -> std::string {
        auto it = k.call.attrs.find(attr);
        const std::string* s =
            it == k.call.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
        return s != nullptr ? *s : std::string("?");
      };
      calls.push_back(absl::StrCat("'", absl::StrJoin(k.ops, ", "), "' (",
                                   text(ir::loop::kAttrReferenceOp), ": ",
                                   text(ir::loop::kAttrFallbackReason), ")"));
    }
  }
  if (calls.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "model '", model, "' has ", calls.size(),
      " node(s) that lowering cannot compile and that would run on kiln's reference "
      "interpreter: ",
      absl::StrJoin(calls, "; "),
      ". An AOT library links the interpreter only when asked: kiln_aot_library(..., "
      "reference_calls = True) (kilnc aot --reference-calls); --no-reference-fallback shows "
      "lowering's error instead"));
}

// The weights file being built: each constant's bytes once (tensors shared
// between programs once), 64-byte aligned.
struct Weights {
  std::string bytes;
  std::map<const ir::Tensor*, int64_t> offset_of;
};

json CallJson(const runtime::ControlFlowCall& c, const std::vector<int>& models) {
  json j{{"op", runtime::ControlFlowOpName(c.op)}, {"kernel", c.kernel}, {"models", models}};
  if (c.op == runtime::ControlFlowCall::Op::kIf) {
    j["then_buffers"] = c.then_buffers;
    j["else_buffers"] = c.else_buffers;
    j["unfit"] = {c.unfit[0], c.unfit[1]};
  } else if (c.op == runtime::ControlFlowCall::Op::kLoop) {
    const runtime::LoopCall& l = c.loop;
    j["loop"] = {{"trip_count", l.trip_count},     {"cond", l.cond},
                 {"carried", l.carried},           {"captures", l.captures},
                 {"final_values", l.final_values}, {"scan_outputs", l.scan_outputs},
                 {"cond_passed_through", l.cond_passed_through}};
  } else {
    const runtime::ScanCall& sc = c.scan;
    j["scan"] = {{"states", sc.states},
                 {"scan_inputs", sc.scan_inputs},
                 {"captures", sc.captures},
                 {"final_states", sc.final_states},
                 {"scan_outputs", sc.scan_outputs},
                 {"input_axes", sc.input_axes},
                 {"output_axes", sc.output_axes},
                 {"input_reverse", sc.input_reverse},
                 {"output_reverse", sc.output_reverse},
                 {"batched", sc.batched}};
  }
  return j;
}

// One program's part of the description: its text, interface, constants
// (their places in `weights`, appended there), report notes and compiled
// Ifs, Loops and Scans.
absl::StatusOr<json> DescribeProgram(const AotProgram& p, Weights* weights) {
  const compiler::CompiledProgram& program = p.program;
  const CompileReport& report = p.report;
  json desc;
  // The description carries the program as text: it must read back as the
  // program the kernels were emitted from.
  const std::string program_text = ir::loop::PrintProgram(program.module.program);
  KILN_ASSIGN_OR_RETURN(ir::loop::LoopProgram reparsed, ir::loop::ParseProgram(program_text));
  if (ir::loop::PrintProgram(reparsed) != program_text) {
    return InternalError("the loop program's text form does not round-trip");
  }
  desc["model"] = report.model;
  desc["program"] = program_text;
  desc["inputs"] = json::array();
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    desc["inputs"].push_back(TensorInfoJson(program.inputs[i], program.module.inputs.at(i)));
  }
  desc["outputs"] = json::array();
  for (size_t o = 0; o < program.outputs.size(); ++o) {
    desc["outputs"].push_back(TensorInfoJson(program.outputs[o], program.module.outputs.at(o)));
  }
  json unfused = json::array();
  for (const auto& u : report.unfused_elementwise) {
    unfused.push_back({{"node", u.node}, {"op", u.op}, {"after", u.after}, {"reason", u.reason}});
  }
  desc["unfused_elementwise"] = unfused;
  json qdq = json::array();
  for (const auto& q : report.qdq_patterns) {
    qdq.push_back({{"node", q.node}, {"anchor", q.anchor}, {"op", q.op}, {"reason", q.reason}});
  }
  desc["qdq_patterns"] = qdq;
  desc["warnings"] = report.warnings;
  desc["constants"] = json::array();
  for (const auto& [buffer, tensor] : program.module.constants) {
    auto [it, inserted] = weights->offset_of.emplace(tensor.get(), 0);
    if (inserted) {
      std::string& w = weights->bytes;
      w.resize((w.size() + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment);
      it->second = static_cast<int64_t>(w.size());
      w.append(static_cast<const char*>(tensor->raw_data()), tensor->byte_size());
    }
    desc["constants"].push_back({{"buffer", buffer},
                                 {"dtype", std::string(ir::DTypeName(tensor->dtype()))},
                                 {"shape", tensor->shape()},
                                 {"offset", it->second},
                                 {"bytes", tensor->byte_size()}});
  }
  json sites = json::array();
  for (const compiler::ControlFlowSite& site : p.sites) {
    sites.push_back(CallJson(site.call, site.models));
  }
  desc["control_flow"] = sites;
  return desc;
}

// The library's programs as described, with the weights file's bytes:
// the model's program last, its subgraphs' before it (`subprograms`, each
// before the programs whose Ifs, Loops and Scans use it).
struct Described {
  std::vector<AotProgram> programs;
  json description;
  std::string weights;
};

absl::StatusOr<Described> Describe(std::vector<AotProgram> programs, const CompileOptions& options,
                                   const WriterOptions& writer) {
  Described d;
  Weights weights;
  json subprograms = json::array();
  for (size_t c = 0; c + 1 < programs.size(); ++c) {
    KILN_ASSIGN_OR_RETURN(json sub, DescribeProgram(programs[c], &weights));
    subprograms.push_back(std::move(sub));
  }
  KILN_ASSIGN_OR_RETURN(d.description, DescribeProgram(programs.back(), &weights));
  json& desc = d.description;
  desc["format"] = "kiln-aot-2";
  desc["name"] = writer.name;
  // propagate-layout asked this process's oneDNN for its channel blocks.
  desc["onednn_isa"] = onednn::OneDnnCpuIsa();
  json compile;
  compile["reference_fallback"] = options.reference_fallback;
  compile["disabled_passes"] = options.disabled_passes;
  json shapes = json::object();
  for (const auto& [name, shape] : options.input_shapes) shapes[name] = shape;
  compile["input_shapes"] = shapes;
  desc["compile"] = compile;
  desc["subprograms"] = std::move(subprograms);
  desc["weights_bytes"] = weights.bytes.size();
  d.weights = std::move(weights.bytes);
  d.programs = std::move(programs);
  return d;
}

}  // namespace

std::vector<std::string> AotFileNames(const WriterOptions& w) {
  std::vector<std::string> names;
  if (WritesGlue(w)) {
    for (const char* suffix : {".h", "_table.cc", "_data.S", "_weights.inc"}) {
      names.push_back(absl::StrCat(w.name, suffix));
    }
  }
  for (const std::string& isa : w.isas) {
    if (!WritesIsa(w, isa)) continue;
    for (const char* suffix : {"_table.cc", "_data.S", "_program.inc"}) {
      names.push_back(absl::StrCat(w.name, "_", isa, suffix));
    }
    for (int s = 0; s < w.shards; ++s) names.push_back(ShardName(w, isa, s));
  }
  return names;
}

absl::StatusOr<std::vector<GeneratedFile>> WriteAotLibrary(const std::string& model_path,
                                                           const CompileOptions& options,
                                                           const WriterOptions& writer) {
  KILN_RETURN_IF_ERROR(CheckWriterOptions(writer));
  if (options.mode != CompileOptions::Mode::kCompiled) {
    return absl::InvalidArgumentError("an AOT library is built in compiled mode");
  }
  frontend::ImportOptions io;
  for (const auto& [name, shape] : options.input_shapes) io.input_shapes[name] = shape;
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported, frontend::ImportModelFile(model_path, io));
  // The pipeline's targets: the layouts this process's oneDNN wants (capped
  // per ISA by tools/aot.bzl), the kernels for one ISA at a time. An If's
  // branches and a Loop's or Scan's body are programs of their own
  // (compiler/control_flow.h, as in the JIT), compiled recursively before
  // the program that runs them.
  using CompileTreeFn = std::function<absl::StatusOr<int>(
      ir::Graph graph, const std::string& model, std::vector<std::string> warnings, int depth,
      std::vector<AotProgram>* programs)>;
  const isa::VecIsa* current_isa = nullptr;
  CompileTreeFn compile_tree = [&](ir::Graph graph, const std::string& model,
                                   std::vector<std::string> warnings, int depth,
                                   std::vector<AotProgram>* programs) -> absl::StatusOr<int> {
    compiler::Target target{current_isa, onednn::ConvLayoutOracle(),
                            onednn::LibraryCallOracle()};
    compiler::PipelineOptions po = compiler::PipelineOptionsFor(options);
    if (current_isa == nullptr || depth > 0) {
      // The glue needs no kernels; a subgraph's are emitted with the
      // model's (one program for all of them).
      po.stop_after = compiler::Stage::kLoopPasses;
    } else {
      po.emit = AotEmitOptions(writer, *current_isa);
    }
    AotProgram p;
    p.report.model = model;
    p.report.warnings = std::move(warnings);
    compiler::ReportObserver fill_report(&p.report);
    KILN_ASSIGN_OR_RETURN(p.program,
                          compiler::Compile(std::move(graph), target, po, &fill_report));
    if (depth < kMaxSubgraphDepth) {
      p.sites = compiler::FindControlFlowSites(
          p.program.module,
          [&](ir::Graph sub, const ir::loop::Kernel& kernel, const char* what) {
            return compile_tree(std::move(sub), absl::StrCat(model, "/", kernel.name, "/", what),
                                {}, depth + 1, programs);
          },
          &p.report.warnings);
    }
    programs->push_back(std::move(p));
    return static_cast<int>(programs->size()) - 1;
  };
  auto compile = [&](const isa::VecIsa* isa) -> absl::StatusOr<Described> {
    current_isa = isa;
    std::vector<AotProgram> programs;
    KILN_RETURN_IF_ERROR(
        compile_tree(imported.graph, model_path, imported.warnings, 0, &programs).status());
    KILN_RETURN_IF_ERROR(CheckReferenceCalls(model_path, programs, writer));
    return Describe(std::move(programs), options, writer);
  };

  std::vector<GeneratedFile> files;
  // Every program's constants must be the same bytes (they come from the
  // graph passes, before anything ISA-dependent): the descriptions' offsets
  // point into one weights file.
  std::optional<std::string> weights;
  if (!WritesGlue(writer) && !writer.weights_file.empty()) {
    std::ifstream in(writer.weights_file, std::ios::binary);
    std::string shared((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return absl::NotFoundError(
          absl::StrCat("cannot read weights file '", writer.weights_file, "'"));
    }
    weights = std::move(shared);
  }
  auto same_weights = [&](const Described& d, absl::string_view part) -> absl::Status {
    if (!weights.has_value()) {
      weights = d.weights;
      return absl::OkStatus();
    }
    if (*weights == d.weights) return absl::OkStatus();
    return InternalError("the constants of the ", part, " program differ from the shared weights",
                         writer.weights_file.empty()
                             ? std::string()
                             : absl::StrCat(" file '", writer.weights_file, "'"));
  };

  // Per ISA: its program, its loop kernels in `shards` units, its description.
  for (const std::string& name : writer.isas) {
    if (!WritesIsa(writer, name)) continue;
    const isa::VecIsa& isa = *isa::FindIsa(name);
    KILN_ASSIGN_OR_RETURN(Described d, compile(&isa));
    KILN_RETURN_IF_ERROR(same_weights(d, name));
    // One program: the pipeline's emission. With subgraphs: every program
    // in one emission (compiler::MergePrograms), kernel and buffer indices
    // offset per program.
    std::vector<int> kernel_base = {0};
    std::vector<int32_t> buffer_base = {0};
    backends::cpp::EmittedProgram e;
    if (d.programs.size() == 1) {
      e = *std::move(d.programs[0].program.cpp);
    } else {
      std::vector<const ir::loop::LoopProgram*> all;
      for (const AotProgram& p : d.programs) all.push_back(&p.program.module.program);
      kernel_base.clear();
      buffer_base.clear();
      const ir::loop::LoopProgram merged = compiler::MergePrograms(all, &kernel_base, &buffer_base);
      KILN_ASSIGN_OR_RETURN(e, backends::cpp::EmitCpp(merged, AotEmitOptions(writer, isa)));
    }
    const std::string unit_prefix = AotEmitOptions(writer, isa).unit_prefix;
    std::map<std::string, std::string> unit_text;
    for (const ir::loop::SourceFile& f : e.sources) unit_text[f.name] = f.text;
    for (int s = 0; s < writer.shards; ++s) {
      const std::string unit = absl::StrCat(unit_prefix, "_", s);
      auto it = unit_text.find(unit);
      std::string text = it != unit_text.end()
                             ? std::move(it->second)
                             : "// Generated by `kilnc aot`. DO NOT EDIT. (no kernels)\n";
      unit_text.erase(unit);
      absl::StrAppend(&text, TargetGuard(isa));
      files.push_back({ShardName(writer, name, s), std::move(text)});
    }
    if (!unit_text.empty()) {
      return InternalError("the emitter wrote unit '", unit_text.begin()->first, "' beyond ",
                           writer.shards, " shards");
    }
    // Per program, its loop kernels: the index in its program, the table
    // entry (the emission's index) and the arguments, in its own buffers.
    std::vector<json> kernels(d.programs.size(), json::array());
    for (const backends::cpp::EmittedKernel& k : e.kernels) {
      const size_t c = static_cast<size_t>(
          std::upper_bound(kernel_base.begin(), kernel_base.end(), k.kernel_index) -
          kernel_base.begin() - 1);
      const int local = k.kernel_index - kernel_base[c];
      std::vector<int32_t> args = k.buffer_args;
      for (int32_t& a : args) a -= buffer_base[c];
      kernels[c].push_back(
          {{"kernel", local},
           {"entry", k.kernel_index},
           {"args", args},
           {"report", KernelReportJson(compiler::LoopKernelReport(
                          d.programs[c].program.module.program.kernels[local], k))}});
    }
    json isa_desc = d.description;
    isa_desc["kernels"] = kernels.back();
    for (size_t c = 0; c + 1 < d.programs.size(); ++c) {
      isa_desc["subprograms"][c]["kernels"] = kernels[c];
    }
    isa_desc["isa"] = name;
    const std::string stem = absl::StrCat(writer.name, "_", name);
    files.push_back({stem + "_program.inc", isa_desc.dump(1)});
    files.push_back({stem + "_table.cc", IsaTableText(writer, name, e)});
    files.push_back({stem + "_data.S", IsaDataAsm(writer, name)});
  }

  if (WritesGlue(writer)) {
    if (!weights.has_value()) {
      KILN_ASSIGN_OR_RETURN(Described d, compile(nullptr));
      weights = std::move(d.weights);
    }
    files.push_back({absl::StrCat(writer.name, ".h"), HeaderText(writer)});
    files.push_back({absl::StrCat(writer.name, "_table.cc"), TableText(writer)});
    files.push_back({absl::StrCat(writer.name, "_data.S"), DataAsm(writer)});
    files.push_back({absl::StrCat(writer.name, "_weights.inc"), *std::move(weights)});
  }
  return files;
}

}  // namespace kiln::aot
