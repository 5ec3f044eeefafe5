// The dump-dir writer (compiler/dump.h).
#include "compiler/dump.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/graph/text.h"
#include "ir/loop/text.h"
#include "ir/status_macros.h"

namespace kiln::compiler {
namespace {

absl::Status MakeDir(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create dump directory '", path, "': ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

// <dir>/NN-<pass>.txt (NN 00: "input"): the IR's text, or "(unchanged)"
// after a pass that changed nothing.
absl::Status DumpPass(const std::string& dir, int index, absl::string_view pass, bool changed,
                      const std::function<std::string()>& text) {
  if (index == 0) KILN_RETURN_IF_ERROR(MakeDir(dir));
  return WriteFile(absl::StrFormat("%s/%02d-%s.txt", dir, index, pass),
                   index == 0 || changed ? text() : std::string("(unchanged)\n"));
}

}  // namespace

absl::Status DumpObserver::AfterGraphPass(int index, const passes::GraphPass* pass,
                                          bool changed, const ir::Graph& graph) {
  return DumpPass(absl::StrCat(dir_, "/graph"), index, pass == nullptr ? "input" : pass->name(),
                  changed, [&graph] { return ir::PrintGraph(graph); });
}

absl::Status DumpObserver::AfterLoopPass(int index, const passes::LoopPass* pass, bool changed,
                                         const ir::loop::LoopModule& module) {
  return DumpPass(absl::StrCat(dir_, "/loop"), index, pass == nullptr ? "input" : pass->name(),
                  changed, [&module] { return ir::loop::PrintProgram(module.program); });
}

absl::Status DumpObserver::AfterStage(Stage stage, absl::Duration elapsed,
                                      const CompiledProgram& program) {
  if (stage != Stage::kEmit || !program.cpp.has_value()) return absl::OkStatus();
  const std::string dir = absl::StrCat(dir_, "/cpp");
  KILN_RETURN_IF_ERROR(MakeDir(dir));
  for (const ir::loop::SourceFile& f : program.cpp->sources) {
    KILN_RETURN_IF_ERROR(WriteFile(
        absl::StrCat(dir, "/", f.name, absl::EndsWith(f.name, ".h") ? "" : ".cc"), f.text));
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler
