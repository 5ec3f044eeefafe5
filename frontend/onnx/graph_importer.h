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

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend::onnx_internal {

// Where each node sat in the file before sorting, so errors name the index
// the user sees in the model.
using NodeIndexMap = absl::flat_hash_map<const onnx::NodeProto*, int>;

// Sorts the nodes of `graph` and of every subgraph topologically, in place
// and stably (a sorted graph keeps its order). A node's dependencies include
// the outer-scope values its subgraphs read. A cycle, or a value used but
// never defined, is InvalidArgument naming the node. Records file positions
// in `file_index`.
absl::Status SortGraphsTopologically(onnx::GraphProto* graph,
                                     NodeIndexMap* file_index);

struct GraphImportOptions {
  int64_t opset = 18;  // default-domain opset, copied to every (sub)graph
  int64_t max_tensor_bytes = int64_t{16} << 30;
  const NodeIndexMap* file_index = nullptr;  // optional
};

// Imports the top-level graph, whose nodes (and subgraphs' nodes) must be
// sorted already. Its inputs must have static shapes (the
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
