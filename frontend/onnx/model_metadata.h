// File: frontend/onnx/model_metadata.h — an ONNX model's descriptive fields
// (producer, domain, version, doc strings, metadata_props), read without
// parsing its graph: what ONNX Runtime's get_modelmeta() reports.
#ifndef KILN_FRONTEND_ONNX_MODEL_METADATA_H_
#define KILN_FRONTEND_ONNX_MODEL_METADATA_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::frontend {

struct ModelMetadata {
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  std::string description;  // ModelProto.doc_string
  int64_t version = 0;      // ModelProto.model_version
  std::string graph_name;
  std::string graph_description;  // GraphProto.doc_string
  // ModelProto.metadata_props in file order (keys may repeat).
  std::vector<std::pair<std::string, std::string>> custom_metadata;
};

// The metadata of a serialized ModelProto. The graph is skipped field by
// field (only its name and doc_string are read), so this costs little even
// for a model with large initializers. InvalidArgument when the bytes are
// not a ModelProto.
absl::StatusOr<ModelMetadata> ReadModelMetadata(absl::string_view model_bytes);

// The same, streamed from a model file (skipped fields are seeked over, not
// read). NotFound when the file cannot be opened.
absl::StatusOr<ModelMetadata> ReadModelMetadataFile(const std::string& path);

}  // namespace kiln::frontend

#endif  // KILN_FRONTEND_ONNX_MODEL_METADATA_H_
