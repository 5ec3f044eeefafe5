// File: interp/interpreter.h — the oracle. A plain, readable
// scalar interpreter of ir::Graph: correctness of everything kiln compiles is
// defined by what this computes (and by ONNX's conformance data, which it is
// tested against).
//
//   KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
//                         interp::Run(graph, {input}));
#ifndef KILN_INTERP_INTERPRETER_H_
#define KILN_INTERP_INTERPRETER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/graph.h"

namespace kiln::interp {

// Limits of one run beyond the interpreter's own.
struct RunOptions {
  // A node whose result would have more elements than this fails with
  // ResourceExhausted before it allocates anything (0: no limit beyond the
  // interpreter's own, 2^34). Constant folding sets it, so a small model
  // cannot make it materialize a huge value.
  int64_t max_result_elements = 0;
};

// Runs `graph` on `inputs` (one per graph input, in order) and returns its
// outputs in order. Errors name the node (name, index, op).
absl::StatusOr<std::vector<ir::Tensor>> Run(const ir::Graph& graph,
                                            absl::Span<const ir::Tensor> inputs,
                                            const RunOptions& options = {});

// Ops of `graph` (and its subgraphs) with no reference kernel, sorted and
// de-duplicated; empty when everything can run.
std::vector<std::string> UnsupportedOps(const ir::Graph& graph);

}  // namespace kiln::interp

#endif  // KILN_INTERP_INTERPRETER_H_
