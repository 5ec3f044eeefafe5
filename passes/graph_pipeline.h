// File: passes/graph_pipeline.h — runs graph passes in order with the
// verifier between them (debug builds, or when asked) and optional dumps of
// the IR after every pass; and the registry of every graph pass by name.
//
//   passes::PipelineOptions opts;
//   opts.dump_dir = "/tmp/dump";            // 00-input.txt, 01-<pass>.txt, ...
//   KILN_RETURN_IF_ERROR(passes::DefaultGraphPipeline().Run(&graph, opts));
#ifndef KILN_PASSES_GRAPH_PIPELINE_H_
#define KILN_PASSES_GRAPH_PIPELINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/graph_pass.h"

namespace kiln::passes {

struct PipelineOptions {
#ifdef NDEBUG
  bool verify = false;
#else
  bool verify = true;
#endif
  // Non-empty: write the graph's text form before the first pass and after
  // every pass ("(unchanged)" when a pass changed nothing).
  std::string dump_dir;
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
GraphPipeline DefaultGraphPipeline();

// The registry: every graph pass by name (its --pass= / --disable-pass=
// token), sorted. `kilnc opt --pass=NAME` runs them; DefaultGraphPipeline
// runs each of them (graph_pipeline_test keeps the two in step).
std::vector<std::string> GraphPassNames();
// A new instance of the graph pass `name`; InvalidArgument listing the
// names when there is none.
absl::StatusOr<std::unique_ptr<GraphPass>> CreateGraphPass(absl::string_view name);

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_PIPELINE_H_
