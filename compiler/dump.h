// File: compiler/dump.h — the pipeline observer behind `--dump-dir` /
// CompileOptions::dump_dir: the graph before and after every graph pass
// (graph/NN-<pass>.txt, 00-input.txt first), the loop IR after lowering and
// every loop pass (loop/NN-<pass>.txt) — "(unchanged)" after a pass that
// changed nothing — and the generated C++ (cpp/<unit>.cc, cpp/<name>.h).
//
//   compiler::DumpObserver dump("/tmp/d");
//   KILN_ASSIGN_OR_RETURN(auto p, compiler::Compile(graph, target, {}, &dump));
#ifndef KILN_COMPILER_DUMP_H_
#define KILN_COMPILER_DUMP_H_

#include <string>

#include "compiler/pipeline.h"

namespace kiln::compiler {

class DumpObserver final : public PipelineObserver {
 public:
  // Folders are created when first written; InvalidArgument when that
  // fails, InternalError when a file cannot be written.
  explicit DumpObserver(std::string dir) : dir_(std::move(dir)) {}

  absl::Status AfterGraphPass(int index, const passes::GraphPass* pass, bool changed,
                              const ir::Graph& graph) override;
  absl::Status AfterLoopPass(int index, const passes::LoopPass* pass, bool changed,
                             const ir::loop::LoopModule& module) override;
  absl::Status AfterStage(Stage stage, absl::Duration elapsed,
                          const CompiledProgram& program) override;

 private:
  std::string dir_;
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_DUMP_H_
