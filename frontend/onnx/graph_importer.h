// File: frontend/onnx/graph_importer.h — turns a checked, shape-inferred
// onnx.GraphProto into ir::Graph: sorts nodes topologically, folds Constant
// nodes and initializers into graph constants, converts attributes, imports
// GRAPH attributes (If/Loop/Scan bodies) recursively with captures of
// outer-scope values. Internal to frontend/onnx; errors carry no file name
// (the caller prefixes it).
#ifndef KILN_FRONTEND_ONNX_GRAPH_IMPORTER_H_
#define KILN_FRONTEND_ONNX_GRAPH_IMPORTER_H_

#include <cstdint>
#include <memory>
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

// Weights taken out of the top-level graph's initializers before libonnx's
// checker and shape inference walk the proto: initializer name -> data.
using DetachedTensors =
    absl::flat_hash_map<std::string, std::shared_ptr<const ir::Tensor>>;

// Converts each top-level floating-point initializer with at least
// `min_bytes` of raw_data into a tensor and leaves a one-byte placeholder
// raw_data in the proto (name, type and dims kept: libonnx's checker accepts
// it, and shape inference reads no float weights; the importer refuses a
// placeholder that was not resolved from the returned map). The proto's
// bytes are freed as each tensor is made, so memory peaks at the model's
// size, not twice that. An initializer that does not convert cleanly stays
// as it is and reports its error where it always did.
DetachedTensors DetachLargeInitializers(onnx::GraphProto* graph,
                                        int64_t max_tensor_bytes,
                                        int64_t min_bytes = int64_t{64} << 10);

struct GraphImportOptions {
  int64_t opset = 18;  // default-domain opset, copied to every (sub)graph
  int64_t max_tensor_bytes = int64_t{16} << 30;
  const NodeIndexMap* file_index = nullptr;  // optional
  // Optional: the top-level graph's detached initializers; each one used is
  // moved into the graph (the map loses it).
  DetachedTensors* detached = nullptr;
};

// Imports the top-level graph, whose nodes (and subgraphs' nodes) must be
// sorted already. Its inputs must have static shapes (the
// caller binds dynamic dims first); every other value gets the type the
// GraphProto's value_info/outputs declare (kDynamicDim / shape_known=false /
// DType::kInvalid where unknown).
absl::StatusOr<ir::Graph> ImportGraph(const onnx::GraphProto& graph,
                                      const GraphImportOptions& options);

// Checks that every input of the top-level graph that is not an initializer
// is a tensor of an element type kiln reads. Runs before libonnx's checker
// and shape inference see the model: libonnx 1.12 reads an untyped input's
// missing type while inferring (a crash, not an error).
absl::Status CheckTopLevelInputTypes(const onnx::GraphProto& graph);

// Names a subgraph reads from enclosing scopes: used (node inputs, graph
// outputs, nested subgraphs' outer names) but not defined in it.
std::vector<std::string> OuterScopeNames(const onnx::GraphProto& graph);

// Checks every If in `graph` and in its subgraphs, as ONNX Runtime does at
// load: each branch has as many outputs as the If, and a branch output's
// kind and element type agree with the other branch's and with the If's
// declared output. The branches' shapes, ranks included, may differ (the
// If's output is their union, as ONNX's If allows); where both branches
// have one rank, the If's declared rank must be it. A value's type is the one
// its graph (or an enclosing graph) declares; an undeclared type is not
// checked. A violation is InvalidArgument naming the If and the branch.
absl::Status VerifyIfBranches(const onnx::GraphProto& graph,
                              const NodeIndexMap* file_index);

// "node #3 'conv1' (Conv)", or "(com.foo.Op)" for a non-default domain.
std::string DescribeNode(const onnx::NodeProto& node, int index);

}  // namespace kiln::frontend::onnx_internal

#endif  // KILN_FRONTEND_ONNX_GRAPH_IMPORTER_H_
