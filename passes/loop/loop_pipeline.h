// File: passes/loop/loop_pipeline.h — runs loop passes in order over a
// ir::loop::LoopModule, with the loop IR verifier after every pass that
// changed something (on by default: it is cheap next to the passes) and an
// optional observer of the IR after every pass (compiler/ writes its dumps
// with it);
// and the registry of every loop pass by name.
//
//   passes::LoopPipelineOptions opts;
//   opts.disabled.insert("fuse-horizontal");
//   KILN_RETURN_IF_ERROR(
//       passes::DefaultLoopPipeline(onednn::ConvLayoutOracle()).Run(&lowered, opts));
#ifndef KILN_PASSES_LOOP_LOOP_PIPELINE_H_
#define KILN_PASSES_LOOP_LOOP_PIPELINE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/loop/module.h"
#include "passes/loop/loop_pass.h"
#include "passes/loop/propagate_layout.h"

namespace kiln::passes {

struct LoopPipelineOptions {
  bool verify = true;
  // Called with the input module (index 0, pass nullptr, changed false)
  // and after every pass that ran (index: its place in the pipeline, from
  // 1; disabled passes keep their numbers). An error stops the pipeline.
  std::function<absl::Status(int index, const LoopPass* pass, bool changed,
                             const ir::loop::LoopModule& module)>
      observer;
  // Pass names to skip (every occurrence).
  absl::flat_hash_set<std::string> disabled;
};

class LoopPipeline {
 public:
  void Add(std::unique_ptr<LoopPass> pass) { passes_.push_back(std::move(pass)); }
  // In order; a pass that runs twice is listed twice.
  std::vector<std::string> PassNames() const;
  // InvalidArgument when `disabled` names a pass the pipeline lacks;
  // InternalError when the verifier rejects a pass's output.
  absl::Status Run(ir::loop::LoopModule* program,
                   const LoopPipelineOptions& options = {}) const;

 private:
  std::vector<std::unique_ptr<LoopPass>> passes_;
};

// kiln's loop pipeline, in order (passes/loop/loop_pipeline.cc says why).
// `conv_layout_oracle` is propagate-layout's: the conv library's preferred
// activation layouts (an empty function: every buffer stays plain).
// `bf16_activations`: the library calls run in bf16, so
// store-activations-in-bf16 stores their activations in bf16 (false: it
// changes nothing).
LoopPipeline DefaultLoopPipeline(ConvLayoutOracle conv_layout_oracle,
                                 bool bf16_activations = false);

// The registry: every loop pass by name (its --pass= / --disable-pass=
// token), sorted. `kilnc opt --pass=NAME` runs them; DefaultLoopPipeline
// runs each of them (loop_pipeline_test keeps the two in step).
std::vector<std::string> LoopPassNames();
// A new instance of the loop pass `name`; InvalidArgument listing the
// names when there is none. propagate-layout asks `conv_layout_oracle`
// which layouts the conv library wants (an empty one: every buffer stays
// plain).
absl::StatusOr<std::unique_ptr<LoopPass>> CreateLoopPass(
    absl::string_view name, const ConvLayoutOracle& conv_layout_oracle);

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_LOOP_PIPELINE_H_
