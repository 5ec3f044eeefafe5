// File: frontend/onnx/fold_shapes.h — import-time shape inference to a
// fixpoint: libonnx's shape inference (with data propagation), then folding
// of cheap constant nodes (and Shape/Size of statically shaped values) into
// initializers with kiln's reference interpreter and of Ifs with constant
// conditions into their branch, repeated until nothing folds, so every value whose shape follows from the static input shapes is
// static when the graph is imported. Internal to frontend/onnx.
//
// Within one sweep, nodes after a fold get libonnx's own per-node inference
// function run on the sweep's types, so a Shape of a Reshape whose target
// was just folded folds in the same sweep: a model needs about two full
// inference runs, not one per dependent stage.
//
// Why on the GraphProto, before import: libonnx's shape inference is the
// only shape inference kiln has. Folding in the proto and re-running it
// propagates each newly known shape to every downstream value (subgraphs
// included), and the importer then types the whole graph in one pass. A
// graph pass after import would need kiln's own per-op shape inference.
#ifndef KILN_FRONTEND_ONNX_FOLD_SHAPES_H_
#define KILN_FRONTEND_ONNX_FOLD_SHAPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontend/onnx/graph_importer.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend::onnx_internal {

struct FoldShapesOptions {
  int64_t opset = 18;  // default-domain opset of the model
  int64_t max_tensor_bytes = int64_t{16} << 30;
  // A folded node produces at most this many elements in all...
  int64_t max_output_elements = int64_t{1} << 20;
  // ...and at most max(its inputs' bytes, this) bytes: folding never turns a
  // small computation (ConstantOfShape, Expand, Tile, Range) into big data.
  int64_t max_growth_bytes = int64_t{64} << 10;
  // Constant inputs a folded node may read, in elements (all inputs).
  int64_t max_input_elements = int64_t{1} << 22;
  // The same for compute-heavy ops (MatMul, Conv, ...).
  int64_t max_heavy_input_elements = int64_t{1} << 16;
  // Shape inference runs at most this many times.
  int max_rounds = 32;
  // libonnx's data propagation during inference.
  bool data_propagation = true;
  // Optional: entries of removed nodes are erased.
  NodeIndexMap* file_index = nullptr;
  // Optional: data of initializers DetachLargeInitializers took out.
  const DetachedTensors* detached = nullptr;
};

struct FoldShapesStats {
  int inference_runs = 0;
  int folded_nodes = 0;  // If nodes inlined included
  int inlined_ifs = 0;
  // libonnx's error when shape inference failed (then the loop stopped).
  std::string inference_error;
};

// Runs libonnx's shape inference on `model` (data propagation on), folds
// what it can in the top-level graph, and repeats until a round folds
// nothing. A folded node is removed and its still-used outputs become
// initializers; initializers only folded nodes read are dropped. Never
// folds: non-default-domain ops, ops with subgraphs, random or sequence ops,
// nodes producing a graph output, nodes over the size limits above, and
// nodes the reference interpreter cannot evaluate (those stay as they are and
// report their errors later, as without folding). An If of the top-level
// graph whose condition is constant (an initializer, a Constant, or folded
// from shapes) is replaced by the branch it selects, its values renamed
// where names would clash, and inference then types what follows from
// that branch alone. The branch of an If that stays is folded as a model of
// its own (the outer values it reads as typed inputs, small outer constants
// with their data), at any depth, so its values and outputs get static
// types and its own constant Ifs fold; a branch that shape inference
// refuses for the bound outer shapes is marked with the If attribute
// ir::kAttrUnfitBranchPrefix + its name, saying why (decision 0053). A shape-inference failure
// becomes a warning and stops the loop (values it did not reach keep their
// declared shapes), as the importer always did.
absl::StatusOr<FoldShapesStats> InferShapesToFixpoint(
    onnx::ModelProto* model, const FoldShapesOptions& options,
    std::vector<std::string>* warnings);

}  // namespace kiln::frontend::onnx_internal

#endif  // KILN_FRONTEND_ONNX_FOLD_SHAPES_H_
