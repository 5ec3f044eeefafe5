// File: interp/interpreter.h — the oracle. A plain, readable
// scalar interpreter of ir::Graph: correctness of everything kiln compiles is
// defined by what this computes (and by ONNX's conformance data, which it is
// tested against).
//
//   KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
//                         interp::Run(graph, {input}));
#ifndef KILN_INTERP_INTERPRETER_H_
#define KILN_INTERP_INTERPRETER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/graph.h"

namespace kiln::interp {

// Runs `graph` on `inputs` (one per graph input, in order) and returns its
// outputs in order. Errors name the node (name, index, op).
absl::StatusOr<std::vector<ir::Tensor>> Run(const ir::Graph& graph,
                                            absl::Span<const ir::Tensor> inputs);

// Ops of `graph` (and its subgraphs) with no reference kernel, sorted and
// de-duplicated; empty when everything can run.
std::vector<std::string> UnsupportedOps(const ir::Graph& graph);

}  // namespace kiln::interp

#endif  // KILN_INTERP_INTERPRETER_H_
