// File: frontend/onnx/limits.h — the sizes kiln accepts in an ONNX model's
// structure, checked right after parsing, before the checker, shape
// inference or folding spend time on it (README, "Limits").
#ifndef KILN_FRONTEND_ONNX_LIMITS_H_
#define KILN_FRONTEND_ONNX_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {

struct ModelLimits {
  // Nodes in the model, subgraphs' nodes included.
  int64_t max_nodes = int64_t{1} << 20;
  // Outputs of the top-level graph.
  int64_t max_graph_outputs = int64_t{1} << 16;
  // Subgraphs inside subgraphs (If/Loop/Scan bodies): the top-level graph is
  // depth 0, its nodes' subgraphs depth 1.
  int max_subgraph_depth = 16;
  // Rank of a declared type or an initializer.
  int max_rank = 64;
  // A declared dim or an initializer's dim (a tensor's bytes are capped
  // separately, ImportOptions::max_tensor_bytes).
  int64_t max_dim = int64_t{1} << 34;
  // Bytes of a name: graph, node, value, op type, domain, attribute.
  int64_t max_name_bytes = 16384;
};

// OK, or InvalidArgument naming the limit, its value and where in the model
// it is exceeded (model text escaped and capped).
absl::Status CheckModelLimits(const onnx::ModelProto& model, const ModelLimits& limits);

}  // namespace kiln::frontend

#endif  // KILN_FRONTEND_ONNX_LIMITS_H_
