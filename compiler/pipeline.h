// File: compiler/pipeline.h — kiln's compile pipeline as one function: a
// graph through verification, the graph passes, lowering, the loop passes
// and C++ emission for one target. kiln::Compiler (JIT), the AOT writer,
// kilnc and every report tool call it; dumps, phase timings and the compile
// report watch it through a PipelineObserver.
//
//   compiler::Target target{*isa::SelectIsa(""), onednn::ConvLayoutOracle(),
//                           onednn::LibraryCallOracle()};
//   KILN_ASSIGN_OR_RETURN(compiler::CompiledProgram p,
//                         compiler::Compile(std::move(graph), target, {}, &observer));
//   p.module;        // the loop IR after the loop passes
//   p.cpp->sources;  // the generated C++ (Stage::kEmit reached)
#ifndef KILN_COMPILER_PIPELINE_H_
#define KILN_COMPILER_PIPELINE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/cpp/emitter.h"
#include "ir/graph/graph.h"
#include "ir/loop/module.h"
#include "isa/isa.h"
#include "lowering/lower_graph.h"
#include "passes/graph_pass.h"
#include "passes/loop/loop_pass.h"
#include "passes/loop/propagate_layout.h"
#include "runtime/compiled_model.h"

namespace kiln::compiler {

// What a compile is for.
struct Target {
  // The VecISA module the C++ is emitted for (flags, tuning); this host need
  // not run it. Required when the pipeline emits (Stage::kEmit).
  const isa::VecIsa* isa = nullptr;
  // propagate-layout's conv layout oracle (backends/onednn/layout_oracle.h:
  // oneDNN's). Empty: every activation keeps its plain layout.
  passes::ConvLayoutOracle conv_layout_oracle;
  // Lowering's question to the call library: does it run this extern
  // kernel (backends/onednn/layout_oracle.h: oneDNN on this CPU)? Empty:
  // every library call is kept (refused ones become reference calls at
  // load).
  lowering::LibraryCallOracle library_call_oracle;
  // Chooses the activation form of a library call by measurement (the JIT's:
  // backends/onednn/call_tuner.h behind a cache, CompileOptions::
  // call_tuning): the form to write into the extern kernel's
  // ir::loop::kAttrCallForm, or "" to keep the library's rule. Asked about
  // every extern kernel after the loop passes. Empty: no tuning, and the
  // module is what the rule gives.
  std::function<absl::StatusOr<std::string>(const ir::loop::LoopModule& module,
                                            const ir::loop::Kernel& kernel)>
      library_call_tuner;
};

// The pipeline's stages, in order.
enum class Stage { kVerify, kGraphPasses, kLowering, kLoopPasses, kEmit };
// "verify", "graph-passes", "lowering", "loop-passes", "emit".
absl::string_view StageName(Stage stage);

struct PipelineOptions {
  // kiln's eager baseline (one kernel per op, as PyTorch eager runs them):
  // no folding or fusion graph pass, no loop pass.
  bool eager = false;
  // Graph or loop pass names to skip (ablations); a name neither pipeline
  // has is InvalidArgument listing both.
  std::vector<std::string> disabled_passes;
  // Nodes lowering cannot compile become reference fallback calls (run by
  // the interpreter at run time) when the interpreter runs them; false:
  // such models are refused with lowering's error.
  bool reference_fallback = true;
  // lowering::LoweringOptions::conv_transpose_loop_max_channels: narrow
  // non-overlapping ConvTransposes as loop kernels (with call tuning on).
  int64_t conv_transpose_loop_max_channels = 0;
  // The library calls run in bf16 (CompileOptions::precision resolved for
  // this CPU): store-activations-in-bf16 stores the activations they read
  // and write in bf16 (docs/decisions/0055). False: the f32 program.
  bool bf16_activations = false;
  // The last stage to run (tools that stop at the graph or the loop IR).
  Stage stop_after = Stage::kEmit;
  // Emission options; empty: EmitOptionsForIsa(*target.isa).
  std::optional<backends::cpp::EmitOptions> emit;
};

// The pipeline options CompileOptions ask for (mode, disabled passes,
// reference fallback).
PipelineOptions PipelineOptionsFor(const CompileOptions& options);

// What the pipeline produced, up to the stage it stopped after.
struct CompiledProgram {
  ir::Graph graph{"compiled"};  // after the graph passes
  // The model's interface (names, dtypes, shapes), from `graph`.
  std::vector<TensorInfo> inputs, outputs;
  ir::loop::LoopModule module;  // after lowering and the loop passes
  std::optional<backends::cpp::EmittedProgram> cpp;  // after emission
};

// Watches a compile: the dump-dir writer (compiler/dump.h) and the report
// filler (compiler/report.h) are observers. An error from a hook stops the
// compile with that error.
class PipelineObserver {
 public:
  virtual ~PipelineObserver() = default;
  // The graph before the first graph pass (index 0, pass nullptr) and after
  // every graph pass that ran (index: its place in the pipeline, from 1).
  virtual absl::Status AfterGraphPass(int index, const passes::GraphPass* pass, bool changed,
                                      const ir::Graph& graph) {
    return absl::OkStatus();
  }
  // The module after lowering (index 0, pass nullptr) and after every loop
  // pass that ran.
  virtual absl::Status AfterLoopPass(int index, const passes::LoopPass* pass, bool changed,
                                     const ir::loop::LoopModule& module) {
    return absl::OkStatus();
  }
  // `stage` finished after `elapsed` (its pass hooks included); `program`
  // holds what the stages so far produced.
  virtual absl::Status AfterStage(Stage stage, absl::Duration elapsed,
                                  const CompiledProgram& program) {
    return absl::OkStatus();
  }
};

// Several observers, called in order.
class ObserverList final : public PipelineObserver {
 public:
  explicit ObserverList(std::vector<PipelineObserver*> observers)
      : observers_(std::move(observers)) {}
  absl::Status AfterGraphPass(int index, const passes::GraphPass* pass, bool changed,
                              const ir::Graph& graph) override;
  absl::Status AfterLoopPass(int index, const passes::LoopPass* pass, bool changed,
                             const ir::loop::LoopModule& module) override;
  absl::Status AfterStage(Stage stage, absl::Duration elapsed,
                          const CompiledProgram& program) override;

 private:
  std::vector<PipelineObserver*> observers_;  // not owned; null entries skipped
};

// Compiles `graph` (static shapes; dynamic dims bound at import) for
// `target`. InvalidArgument for a malformed graph (naming the node), an
// unknown pass name or a missing target ISA; Unimplemented naming the node
// for what lowering cannot compile (and may not leave to the interpreter);
// InternalError for a kiln bug. `observer` may be null.
absl::StatusOr<CompiledProgram> Compile(ir::Graph graph, const Target& target,
                                        const PipelineOptions& options,
                                        PipelineObserver* observer);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PIPELINE_H_
