// kiln's compile pipeline (compiler/pipeline.h). Compile reads top to
// bottom: one line per stage, each ordering constraint with its reason.
#include "compiler/pipeline.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "interp/interpreter.h"
#include "ir/graph/verifier.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"
#include "lowering/lower_graph.h"
#include "passes/graph_pipeline.h"
#include "passes/loop/loop_pipeline.h"

namespace kiln::compiler {
namespace {

// The graph passes kiln's eager mode turns off: they fold or fuse ops.
constexpr const char* kEagerDisabledGraphPasses[] = {
    "fuse-qdq", "fuse-dequantize-lstm", "fold-batch-norm", "fold-binary-into-weights",
    "fuse-onednn-post-ops"};

// Each pipeline's options: the passes to skip and the observer's hooks.
struct PassOptions {
  passes::PipelineOptions graph;
  passes::LoopPipelineOptions loop;
};

absl::StatusOr<PassOptions> SelectPasses(const PipelineOptions& options,
                                         const passes::GraphPipeline& graph_pipeline,
                                         const passes::LoopPipeline& loop_pipeline,
                                         PipelineObserver& watch) {
  PassOptions p;
  const std::vector<std::string> graph_names = graph_pipeline.PassNames();
  const std::vector<std::string> loop_names = loop_pipeline.PassNames();
  auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const std::string& name : options.disabled_passes) {
    if (has(graph_names, name)) {
      p.graph.disabled.insert(name);
    } else if (has(loop_names, name)) {
      p.loop.disabled.insert(name);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown pass '", name, "' (graph passes: ", absl::StrJoin(graph_names, ", "),
          "; loop passes: ", absl::StrJoin(loop_names, ", "), ")"));
    }
  }
  if (options.eager) {
    for (const char* name : kEagerDisabledGraphPasses) p.graph.disabled.insert(name);
    for (const std::string& name : loop_names) p.loop.disabled.insert(name);
  }
  p.graph.observer = [&watch](int index, const passes::GraphPass* pass, bool changed,
                              const ir::Graph& graph) {
    return watch.AfterGraphPass(index, pass, changed, graph);
  };
  p.loop.observer = [&watch](int index, const passes::LoopPass* pass, bool changed,
                             const ir::loop::LoopModule& module) {
    return watch.AfterLoopPass(index, pass, changed, module);
  };
  return p;
}

void GraphInterface(const ir::Graph& graph, std::vector<TensorInfo>* inputs,
                    std::vector<TensorInfo>* outputs) {
  inputs->clear();
  outputs->clear();
  for (ir::ValueId id : graph.inputs()) {
    const ir::Value& v = graph.value(id);
    inputs->push_back({v.name, v.dtype, v.shape});
  }
  for (ir::ValueId id : graph.outputs()) {
    const ir::Value& v = graph.value(id);
    outputs->push_back({v.name, v.dtype, v.shape, v.shape_known});
  }
}

// fuse-qdq's and integer-calls-in-f32's question, answered by lowering's
// library-call oracle: the node alone in a graph (its constant inputs kept constant, the
// others graph inputs) is lowered, and the oracle asked about its extern
// kernel. Empty when there is no library-call oracle.
passes::IntegerCallOracle IntegerCallOracleFor(const lowering::LibraryCallOracle& library) {
  if (!library) return {};
  return [library](const ir::Graph& graph, const ir::Node& node) -> absl::Status {
    ir::Graph one("call");
    one.set_opset(graph.opset());
    ir::Node copy = node;
    std::map<ir::ValueId, ir::ValueId> inner;
    auto add = [&](ir::ValueId v) {
      const ir::Value& info = graph.value(v);
      return one.AddValue(info.name, info.dtype, info.shape);
    };
    for (ir::ValueId& v : copy.inputs) {
      if (v == ir::kNoValue) continue;
      const ir::ValueId outer = v;
      if (auto seen = inner.find(outer); seen != inner.end()) {
        v = seen->second;
        continue;
      }
      v = inner[outer] = add(outer);
      if (graph.IsConstant(outer)) {
        one.SetConstant(v, graph.shared_constant(outer));
      } else {
        one.AddInput(v);
      }
    }
    for (ir::ValueId& v : copy.outputs) {
      if (v == ir::kNoValue) continue;
      v = add(v);
      one.AddOutput(v);
    }
    one.mutable_nodes().push_back(std::move(copy));
    KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule module, lowering::LowerGraph(one, {}));
    for (const ir::loop::Kernel& k : module.program.kernels) {
      if (k.kind == ir::loop::Kernel::Kind::kExtern) return library(module, k);
    }
    return absl::UnimplementedError(absl::StrCat(node.Describe(), ": not a library call"));
  };
}

absl::StatusOr<ir::loop::LoopModule> Lower(const ir::Graph& graph, const PipelineOptions& options,
                                           const lowering::LibraryCallOracle& library_call) {
  const bool reference_fallback = options.reference_fallback;
  lowering::LoweringOptions lowering_options;
  lowering_options.library_call = library_call;
  lowering_options.conv_transpose_loop_max_channels = options.conv_transpose_loop_max_channels;
  if (reference_fallback) {
    lowering_options.reference_fallback = [](const ir::Graph& node_graph) {
      return interp::UnsupportedOps(node_graph).empty();
    };
  }
  return lowering::LowerGraph(graph, lowering_options);
}

}  // namespace

absl::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kVerify:
      return "verify";
    case Stage::kGraphPasses:
      return "graph-passes";
    case Stage::kLowering:
      return "lowering";
    case Stage::kLoopPasses:
      return "loop-passes";
    case Stage::kEmit:
      return "emit";
  }
  return "?";
}

PipelineOptions PipelineOptionsFor(const CompileOptions& options) {
  PipelineOptions p;
  p.eager = options.mode == CompileOptions::Mode::kEager;
  p.disabled_passes = options.disabled_passes;
  p.reference_fallback = options.reference_fallback;
  // Narrow non-overlapping ConvTransposes, which oneDNN runs on padded
  // blocks, its gemm-based kernel or a slow jit deconvolution, are loop
  // kernels (0045, by rule: no tuning needed). Not in eager mode: its
  // baseline runs each op as PyTorch eager would.
  if (!p.eager) p.conv_transpose_loop_max_channels = 32;
  return p;
}

absl::Status ObserverList::AfterGraphPass(int index, const passes::GraphPass* pass,
                                          bool changed, const ir::Graph& graph) {
  for (PipelineObserver* o : observers_) {
    if (o != nullptr) KILN_RETURN_IF_ERROR(o->AfterGraphPass(index, pass, changed, graph));
  }
  return absl::OkStatus();
}

absl::Status ObserverList::AfterLoopPass(int index, const passes::LoopPass* pass, bool changed,
                                         const ir::loop::LoopModule& module) {
  for (PipelineObserver* o : observers_) {
    if (o != nullptr) KILN_RETURN_IF_ERROR(o->AfterLoopPass(index, pass, changed, module));
  }
  return absl::OkStatus();
}

absl::Status ObserverList::AfterStage(Stage stage, absl::Duration elapsed,
                                      const CompiledProgram& program) {
  for (PipelineObserver* o : observers_) {
    if (o != nullptr) KILN_RETURN_IF_ERROR(o->AfterStage(stage, elapsed, program));
  }
  return absl::OkStatus();
}


absl::StatusOr<CompiledProgram> Compile(ir::Graph graph, const Target& target,
                                        const PipelineOptions& options,
                                        PipelineObserver* observer) {
  PipelineObserver no_observer;
  PipelineObserver& watch = observer != nullptr ? *observer : no_observer;
  const passes::GraphPipeline graph_passes =
      passes::DefaultGraphPipeline(IntegerCallOracleFor(target.library_call_oracle));
  const passes::LoopPipeline loop_passes =
      passes::DefaultLoopPipeline(target.conv_layout_oracle, options.bf16_activations);
  KILN_ASSIGN_OR_RETURN(const PassOptions pass_options,
                        SelectPasses(options, graph_passes, loop_passes, watch));
  if (options.stop_after == Stage::kEmit && target.isa == nullptr) {
    return absl::InvalidArgumentError("no target ISA to emit C++ for");
  }
  CompiledProgram out;
  out.graph = std::move(graph);
  // Runs one stage (none after options.stop_after), timed, then tells the
  // observer.
  auto run = [&](Stage stage, const std::function<absl::Status()>& body) -> absl::Status {
    if (stage > options.stop_after) return absl::OkStatus();
    const absl::Time start = absl::Now();
    KILN_RETURN_IF_ERROR(body());
    return watch.AfterStage(stage, absl::Now() - start, out);
  };

  // Verify first: a malformed graph is the caller's error (named as such)
  // before any pass can trip over it.
  KILN_RETURN_IF_ERROR(run(Stage::kVerify, [&] {
    return ir::VerifyGraph(out.graph, ir::Blame::kModel);
  }));
  // Graph passes before lowering: folding and oneDNN post-op fusion rewrite
  // nodes (conv+bn+relu becomes one kiln.FusedConv, one library call); the
  // interface is read after them (eliminate-identity may rename an output).
  KILN_RETURN_IF_ERROR(run(Stage::kGraphPasses, [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(graph_passes.Run(&out.graph, pass_options.graph));
    GraphInterface(out.graph, &out.inputs, &out.outputs);
    return absl::OkStatus();
  }));
  // Lowering: one kernel per node; what it cannot compile becomes a
  // reference call only when allowed and the interpreter runs the node.
  KILN_RETURN_IF_ERROR(run(Stage::kLowering, [&]() -> absl::Status {
    KILN_ASSIGN_OR_RETURN(out.module, Lower(out.graph, options, target.library_call_oracle));
    return absl::OkStatus();
  }));
  // Loop passes: fusion, then layouts (the target's conv oracle), then index
  // demotion (passes/loop/loop_pipeline.cc orders them). Then the target's
  // tuner times the forms of doubtful library calls: after propagate-layout,
  // so each call is timed between the layouts its neighbours really use.
  KILN_RETURN_IF_ERROR(run(Stage::kLoopPasses, [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(loop_passes.Run(&out.module, pass_options.loop));
    if (!target.library_call_tuner || options.eager) return absl::OkStatus();
    for (ir::loop::Kernel& kernel : out.module.program.kernels) {
      if (kernel.kind != ir::loop::Kernel::Kind::kExtern) continue;
      KILN_ASSIGN_OR_RETURN(const std::string form,
                            target.library_call_tuner(out.module, kernel));
      if (!form.empty()) kernel.call.attrs[ir::loop::kAttrCallForm] = form;
    }
    return absl::OkStatus();
  }));
  // Emission last: it reads the final layouts and index types, and decides
  // each kernel's vectorization for the target ISA.
  KILN_RETURN_IF_ERROR(run(Stage::kEmit, [&]() -> absl::Status {
    KILN_ASSIGN_OR_RETURN(
        out.cpp, backends::cpp::EmitCpp(out.module.program,
                                        options.emit.value_or(
                                            backends::cpp::EmitOptionsForIsa(*target.isa))));
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace kiln::compiler
