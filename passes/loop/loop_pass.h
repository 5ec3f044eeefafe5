// File: passes/loop/loop_pass.h — the contract every loop pass implements
// (after XLA's HloPassInterface, like passes/graph_pass.h): a kebab-case
// name that is also the disable token, the dump tag and the test name, and
// Run returning whether the program changed.
#ifndef KILN_PASSES_LOOP_LOOP_PASS_H_
#define KILN_PASSES_LOOP_LOOP_PASS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/loop/module.h"

namespace kiln::passes {

// Loop passes see the whole ir::loop::LoopModule, not just the LoopProgram: which
// buffers are graph inputs, outputs and constants decides what they may
// remove, and they keep those indices valid when they renumber buffers.
class LoopPass {
 public:
  virtual ~LoopPass() = default;
  virtual absl::string_view name() const = 0;
  // True when the program changed. Errors: InternalError for a broken kiln
  // invariant (the pipeline's verifier catches what a pass breaks).
  virtual absl::StatusOr<bool> Run(ir::loop::LoopModule* program) = 0;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_LOOP_PASS_H_
