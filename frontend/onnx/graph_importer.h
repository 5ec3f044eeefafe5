// File: frontend/onnx/graph_importer.h — turns a checked, shape-inferred
// onnx.GraphProto into ir::Graph: sorts nodes topologically, folds Constant
// nodes and initializers into graph constants, converts attributes, imports
// GRAPH attributes (If/Loop/Scan bodies) recursively with captures of
// outer-scope values. Internal to frontend/onnx; errors carry no file name
// (the caller prefixes it).
#ifndef KILN_FRONTEND_ONNX_GRAPH_IMPORTER_H_
#define KILN_FRONTEND_ONNX_GRAPH_IMPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend::onnx_internal {

struct GraphImportOptions {
  int64_t opset = 18;  // default-domain opset, copied to every (sub)graph
  int64_t max_tensor_bytes = int64_t{16} << 30;
};

// Imports the top-level graph. Its inputs must have static shapes (the
// caller binds dynamic dims first); every other value gets the type the
// GraphProto's value_info/outputs declare (kDynamicDim / shape_known=false /
// DType::kInvalid where unknown).
absl::StatusOr<ir::Graph> ImportGraph(const onnx::GraphProto& graph,
                                      const GraphImportOptions& options);

// Names a subgraph reads from enclosing scopes: used (node inputs, graph
// outputs, nested subgraphs' outer names) but not defined in it.
std::vector<std::string> OuterScopeNames(const onnx::GraphProto& graph);

// "node #3 'conv1' (Conv)", or "(com.foo.Op)" for a non-default domain.
std::string DescribeNode(const onnx::NodeProto& node, int index);

}  // namespace kiln::frontend::onnx_internal

#endif  // KILN_FRONTEND_ONNX_GRAPH_IMPORTER_H_
