// File: frontend/onnx/importer.h — loads an ONNX model (file or bytes) with
// Debian's libonnx (checker, shape inference) and imports it into ir::Graph
// with static shapes.
//
//   frontend::ImportOptions opts;
//   opts.input_shapes["input"] = {1, 3, 224, 224};
//   KILN_ASSIGN_OR_RETURN(frontend::ImportResult r,
//                         frontend::ImportModelFile("model.onnx", opts));
//   for (const std::string& w : r.warnings) std::cerr << w << "\n";
//
// Every failure is an absl::Status naming the file, and where it applies the
// node (name and index) and op. Nothing from the model is trusted: truncated
// bytes, bad attributes, huge dims all give errors, never a crash.
#ifndef KILN_FRONTEND_ONNX_IMPORTER_H_
#define KILN_FRONTEND_ONNX_IMPORTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/onnx/limits.h"
#include "ir/graph/graph.h"

namespace kiln::frontend {

struct ImportOptions {
  // Binds graph inputs' dynamic dims: input name -> full static shape. Any
  // dynamic dim not bound here becomes 1 (listed in ImportResult::warnings).
  absl::flat_hash_map<std::string, ir::Shape> input_shapes;
  // Largest tensor (initializer, Constant, or inferred value) accepted.
  int64_t max_tensor_bytes = int64_t{16} << 30;
  // Folder that external data (`data_location: EXTERNAL`) resolves against;
  // ImportModelFile defaults it to the model file's folder.
  std::string base_dir;
  // Folds cheap constant subgraphs and Shape/Size of static values between
  // rounds of shape inference, so shapes computed from the input shapes come
  // out static (frontend/onnx/fold_shapes.h). Off: one round, nothing folded.
  bool fold_shapes = true;
  // Structural limits (node count, nesting, rank, dims, names), checked
  // before anything else reads the model (frontend/onnx/limits.h).
  ModelLimits limits;
};

// A graph input's shape as the model declares it, before ImportOptions
// binds it.
struct DeclaredInput {
  std::string name;
  // ir::kDynamicDim for a dim without a value; empty when `ranked` is false.
  ir::Shape shape;
  // Per dim: its symbol (ONNX dim_param), or "" (a value, or no symbol).
  std::vector<std::string> dim_params;
  bool ranked = true;  // false: the model declares no shape, not even a rank
};

struct ImportResult {
  ir::Graph graph;
  // Every graph input (initializers excluded) as declared, in order.
  std::vector<DeclaredInput> declared_inputs;
  // Human-readable notes: dims bound to 1, checker complaints tolerated, ...
  std::vector<std::string> warnings;
};

absl::StatusOr<ImportResult> ImportModelFile(const std::string& path,
                                             const ImportOptions& options = {});

// `source_name` names the bytes in error messages (a path, "<memory>").
absl::StatusOr<ImportResult> ImportModelBytes(
    absl::string_view bytes, const ImportOptions& options = {},
    absl::string_view source_name = "<memory>");

// Reads a serialized onnx.TensorProto file (test_data_set_N/input_K.pb).
absl::StatusOr<ir::Tensor> LoadTensorFile(const std::string& path);
// The same, for a value the model declares as `declared`. ONNX's test data
// stores bf16 tensors as UINT16 holding the bf16 bits (numpy has no bf16):
// such a file is read as bf16 when `declared` is bf16. Any other file is read
// as it says; comparing its type with the model's is the caller's job.
absl::StatusOr<ir::Tensor> LoadTensorFile(const std::string& path, ir::DType declared);
// Reads a serialized TensorProto from bytes.
absl::StatusOr<ir::Tensor> ParseTensorBytes(absl::string_view bytes,
                                            absl::string_view source_name);
// Serializes a tensor as an onnx.TensorProto (for `kilnc run --save`, tests).
absl::StatusOr<std::string> SerializeTensor(const ir::Tensor& tensor,
                                            absl::string_view name);

}  // namespace kiln::frontend

#endif  // KILN_FRONTEND_ONNX_IMPORTER_H_
