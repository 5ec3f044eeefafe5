// File: testing/fuzz/onnx_compile_fuzzer.cc — fuzz target: ONNX model bytes
// -> import -> the whole compile pipeline (compiler::Compile: verify, graph
// passes, lowering, loop passes, C++ emission for AVX-512), the subgraphs of
// Ifs, Loops and Scans compiled as programs of their own and emitted with
// the model's as one program, as the JIT and `kilnc aot` do. Nothing is
// built: no g++, no JIT, and no oneDNN primitive (propagate-layout asks
// oneDNN's primitive descriptors for conv layouts; the library-call oracle,
// which creates primitives, is left out, so every library call is kept).
//
// Each stage gives OK or an error that blames the model (Internal is a
// finding), and the generated C++ holds no model text but sanitized
// identifiers and numbers: CheckGeneratedCpp below.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "backends/cpp/emitter.h"
#include "backends/cpp/prelude.h"
#include "backends/onednn/layout_oracle.h"
#include "compiler/control_flow.h"
#include "compiler/pipeline.h"
#include "frontend/onnx/importer.h"
#include "ir/graph/graph.h"
#include "ir/loop/loop_ir.h"
#include "isa/isa.h"
#include "testing/fuzz/fuzz_checks.h"

namespace {

using absl::StatusCode;
using kiln::fuzz::CheckStatus;
using kiln::fuzz::Fail;

// Subgraphs inside subgraphs compiled at most this deep (the JIT goes to 8;
// deeper ones stay reference calls, which the pipeline already covers).
constexpr int kMaxSubgraphDepth = 3;

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_')) {
      return false;
    }
  }
  return true;
}

// A byte kiln's emitter never writes: controls but '\n', DEL, non-ASCII,
// and '$', '@', '`' (no C++ token uses them). A model string carrying one
// of these (the fuzzer's names almost always do; the seeds' names do) is
// caught wherever it lands: code, comment or string literal.
bool OutsideEmitterAlphabet(unsigned char c) {
  return (c < 0x20 && c != '\n') || c >= 0x7f || c == '$' || c == '@' || c == '`';
}

// The generated part of a unit: its text without the preludes, kiln's own
// helper code, which the emitter copies in verbatim (and whose comments use
// any punctuation).
std::string WithoutPreludes(std::string text) {
  for (absl::string_view prelude :
       {kiln::backends::cpp::ScalarPrelude(), kiln::backends::cpp::VectorPrelude(),
        kiln::backends::cpp::LowPrecisionScalarPrelude(),
        kiln::backends::cpp::LowPrecisionVectorPrelude()}) {
    if (prelude.empty()) continue;
    for (size_t pos = text.find(prelude.data(), 0, prelude.size()); pos != std::string::npos;
         pos = text.find(prelude.data(), pos, prelude.size())) {
      text.erase(pos, prelude.size());
    }
  }
  return text;
}

// The C++ a compile wrote keeps model text out. In its generated part (all
// but the preludes): every byte is in the emitter's alphabet; comments carry
// no '"' or backslash (the emitter's comments have none; '\\' could splice
// the next line into one); every string or character literal is an include
// path or "C" (letters, digits, '_', '.', '/', '-'), so model text cannot
// sit in one; there is no block comment. File names and exported symbols
// are identifiers.
void CheckGeneratedCpp(const kiln::backends::cpp::EmittedProgram& program) {
  for (const kiln::ir::loop::SourceFile& f : program.sources) {
    if (!IsIdentifier(f.name)) Fail("a translation unit name is no identifier", f.name);
    const std::string t = WithoutPreludes(f.text);
    auto fail_at = [&](absl::string_view what, size_t pos) {
      const size_t from = pos > 80 ? pos - 80 : 0;
      Fail(absl::StrCat(what, " in unit ", f.name, " at byte ", pos),
           absl::CEscape(absl::string_view(t).substr(from, 160)));
    };
    for (size_t i = 0; i < t.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(t[i]);
      if (OutsideEmitterAlphabet(c)) fail_at("a byte outside the emitter's alphabet", i);
      if (c == '/' && i + 1 < t.size() && t[i + 1] == '/') {
        const size_t end = t.find('\n', i);
        for (size_t j = i; j < (end == std::string::npos ? t.size() : end); ++j) {
          if (t[j] == '"' || t[j] == '\\') fail_at("a '\"' or '\\' in a comment", j);
          if (OutsideEmitterAlphabet(static_cast<unsigned char>(t[j]))) {
            fail_at("a byte outside the emitter's alphabet", j);
          }
        }
        if (end == std::string::npos) break;
        i = end;
      } else if (c == '/' && i + 1 < t.size() && t[i + 1] == '*') {
        fail_at("a block comment (the emitter writes none)", i);
      } else if (c == '"' || c == '\'') {
        size_t j = i + 1;
        for (; j < t.size() && t[j] != static_cast<char>(c); ++j) {
          const char d = t[j];
          if (!((d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || (d >= '0' && d <= '9') ||
                d == '_' || d == '.' || d == '/' || d == '-')) {
            fail_at("a literal that is no include path", j);
          }
        }
        if (j == t.size()) fail_at("an unterminated literal", i);
        i = j;
      }
    }
  }
  for (const kiln::backends::cpp::EmittedKernel& k : program.kernels) {
    if (!IsIdentifier(k.symbol)) Fail("a kernel symbol is no identifier", absl::CEscape(k.symbol));
  }
  if (!program.run_symbol.empty() && !IsIdentifier(program.run_symbol)) {
    Fail("the run symbol is no identifier", absl::CEscape(program.run_symbol));
  }
}

// What compiler::Compile may answer for a graph the importer took: the
// model's fault (a node lowering or the verifier refuses, an op kiln cannot
// compile or leave to the interpreter). Internal and every other code are
// findings.
const std::initializer_list<StatusCode> kCompileCodes = {StatusCode::kInvalidArgument,
                                                         StatusCode::kUnimplemented};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::frontend::ImportOptions io;
  // Small models compile in milliseconds; these caps keep every input so
  // (constant folding runs the interpreter on constants up to the tensor cap).
  io.max_tensor_bytes = int64_t{16} << 20;
  io.limits.max_nodes = 512;
  io.limits.max_graph_outputs = 64;
  io.limits.max_subgraph_depth = 4;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kiln::frontend::ImportResult> imported =
      kiln::frontend::ImportModelBytes(bytes, io, "fuzz.onnx");
  CheckStatus(imported.status(),
              {StatusCode::kInvalidArgument, StatusCode::kUnimplemented,
               StatusCode::kResourceExhausted, StatusCode::kNotFound, StatusCode::kDataLoss,
               StatusCode::kOutOfRange},
              "ImportModelBytes");
  if (!imported.ok()) return 0;

  // A fixed ISA (no host needs to run it), so a finding replays anywhere.
  static const kiln::isa::VecIsa* const kIsa = kiln::isa::FindIsa("avx512");
  if (kIsa == nullptr) Fail("no avx512 VecISA module", "");
  const kiln::compiler::Target target{kIsa, kiln::onednn::ConvLayoutOracle(), {}, {}};

  // The model and its subgraphs' programs (subgraphs first), as the JIT and
  // the AOT writer compile them: a subgraph stops after the loop passes and
  // is emitted with the model.
  std::vector<kiln::compiler::CompiledProgram> programs;
  std::function<absl::StatusOr<int>(kiln::ir::Graph, int)> compile_tree =
      [&](kiln::ir::Graph graph, int depth) -> absl::StatusOr<int> {
    kiln::compiler::PipelineOptions po;
    if (depth > 0) po.stop_after = kiln::compiler::Stage::kLoopPasses;
    absl::StatusOr<kiln::compiler::CompiledProgram> p =
        kiln::compiler::Compile(std::move(graph), target, po, nullptr);
    // A subgraph's error only leaves its node a reference call (a warning),
    // so it is checked here, where it is still a status.
    CheckStatus(p.status(), kCompileCodes, depth > 0 ? "Compile (subgraph)" : "Compile");
    if (!p.ok()) return p.status();
    if (depth < kMaxSubgraphDepth) {
      std::vector<std::string> warnings;
      kiln::compiler::FindControlFlowSites(
          p->module,
          [&](kiln::ir::Graph sub, const kiln::ir::loop::Kernel&, const char*) {
            return compile_tree(std::move(sub), depth + 1);
          },
          &warnings);
    }
    programs.push_back(*std::move(p));
    return static_cast<int>(programs.size()) - 1;
  };
  if (!compile_tree(std::move(imported->graph), 0).ok()) return 0;

  const kiln::compiler::CompiledProgram& model = programs.back();
  if (!model.cpp.has_value()) Fail("Compile stopped before emission", "");
  CheckGeneratedCpp(*model.cpp);
  if (programs.size() > 1) {
    // Every program compiled: merging and emitting them is kiln's job, so
    // any error here is a finding.
    std::vector<const kiln::ir::loop::LoopProgram*> all;
    for (const kiln::compiler::CompiledProgram& p : programs) all.push_back(&p.module.program);
    std::vector<int> kernel_base;
    std::vector<int32_t> buffer_base;
    const kiln::ir::loop::LoopProgram merged =
        kiln::compiler::MergePrograms(all, &kernel_base, &buffer_base);
    absl::StatusOr<kiln::backends::cpp::EmittedProgram> e =
        kiln::backends::cpp::EmitCpp(merged, kiln::backends::cpp::EmitOptionsForIsa(*kIsa));
    CheckStatus(e.status(), {}, "EmitCpp (merged programs)");
    CheckGeneratedCpp(*e);
  }
  return 0;
}
