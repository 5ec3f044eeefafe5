// File: passes/graph_pipeline.h — runs graph passes in order with the
// verifier between them (debug builds, or when asked) and an optional
// observer of the IR after every pass (compiler/ writes its dumps with it);
// and the registry of every graph pass by name.
//
//   passes::PipelineOptions opts;
//   opts.disabled.insert("fold-batch-norm");
//   KILN_RETURN_IF_ERROR(passes::DefaultGraphPipeline().Run(&graph, opts));
#ifndef KILN_PASSES_GRAPH_PIPELINE_H_
#define KILN_PASSES_GRAPH_PIPELINE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/graph/integer_call_oracle.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

struct PipelineOptions {
#ifdef NDEBUG
  bool verify = false;
#else
  bool verify = true;
#endif
  // Called with the input graph (index 0, pass nullptr, changed false)
  // and after every pass that ran (index: its place in the pipeline, from
  // 1; disabled passes keep their numbers). An error stops the pipeline.
  std::function<absl::Status(int index, const GraphPass* pass, bool changed,
                             const ir::Graph& graph)>
      observer;
  // Pass names to skip (ablations: --disable-pass=NAME).
  absl::flat_hash_set<std::string> disabled;
};

class GraphPipeline {
 public:
  void Add(std::unique_ptr<GraphPass> pass) { passes_.push_back(std::move(pass)); }
  std::vector<std::string> PassNames() const;
  // The pass named `name` (to read its figures after Run), or nullptr.
  const GraphPass* Find(absl::string_view name) const;
  // InvalidArgument when `disabled` names a pass the pipeline lacks.
  absl::Status Run(ir::Graph* graph, const PipelineOptions& options = {}) const;

 private:
  std::vector<std::unique_ptr<GraphPass>> passes_;
};

// kiln's graph pipeline, in order (passes/graph_pipeline.cc says why).
// `integer_call_oracle`: the call library's answer for integer nodes
// (fuse-qdq rewrites only patterns it takes; integer-calls-in-f32 rewrites the
// calls it refuses). Unset: every integer call is taken.
GraphPipeline DefaultGraphPipeline(IntegerCallOracle integer_call_oracle = {});

// The registry: every graph pass by name (its --pass= / --disable-pass=
// token), sorted. `kilnc opt --pass=NAME` runs them; DefaultGraphPipeline
// runs each of them (graph_pipeline_test keeps the two in step).
std::vector<std::string> GraphPassNames();
// A new instance of the graph pass `name`; InvalidArgument listing the
// names when there is none.
absl::StatusOr<std::unique_ptr<GraphPass>> CreateGraphPass(absl::string_view name);

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_PIPELINE_H_
