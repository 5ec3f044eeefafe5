// File: compiler/report.h — the compile report's compiler half: the
// pipeline observer that fills a CompileReport's phase timings and post-op
// fusion notes, and the report line of an emitted loop kernel (the runtime
// fills the rest when it builds the steps).
//
//   CompileReport report;
//   compiler::ReportObserver observe(&report);
//   KILN_ASSIGN_OR_RETURN(auto p, compiler::Compile(graph, target, options, &observe));
#ifndef KILN_COMPILER_REPORT_H_
#define KILN_COMPILER_REPORT_H_

#include "backends/cpp/emitter.h"
#include "compiler/pipeline.h"
#include "ir/loop/loop_ir.h"
#include "runtime/compiled_model.h"

namespace kiln::compiler {

// Fills graph_passes_ms (verification included), lowering_ms,
// loop_passes_ms, emit_ms (added to what they hold) and, when
// fuse-onednn-post-ops runs, unfused_elementwise.
class ReportObserver final : public PipelineObserver {
 public:
  explicit ReportObserver(CompileReport* report) : report_(report) {}
  absl::Status AfterGraphPass(int index, const passes::GraphPass* pass, bool changed,
                              const ir::Graph& graph) override;
  absl::Status AfterStage(Stage stage, absl::Duration elapsed,
                          const CompiledProgram& program) override;

 private:
  CompileReport* report_;
};

// The compile report's line for an emitted loop kernel.
KernelReport LoopKernelReport(const ir::loop::Kernel& kernel,
                              const backends::cpp::EmittedKernel& emitted);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_REPORT_H_
