// File: frontend/onnx/model_metadata.cc — ModelProto's descriptive fields
// without its graph (a field-by-field walk with protobuf's wire format).
#include "frontend/onnx/model_metadata.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;
using google::protobuf::io::ZeroCopyInputStream;
using google::protobuf::internal::WireFormatLite;

constexpr int kModelGraph = 7;        // ModelProto.graph
constexpr int kGraphName = 2;         // GraphProto.name
constexpr int kGraphDocString = 10;   // GraphProto.doc_string

absl::Status NotAModel() {
  return absl::InvalidArgumentError(
      "not a valid ONNX model (protobuf parsing failed: truncated or not an ONNX file)");
}

bool LengthDelimited(uint32_t tag) {
  return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
}

// GraphProto's name and doc_string; every other field is skipped.
bool ReadGraphFields(CodedInputStream* in, ModelMetadata* m) {
  uint32_t length = 0;
  if (!in->ReadVarint32(&length)) return false;
  const CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(length));
  while (const uint32_t tag = in->ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if (field == kGraphName && LengthDelimited(tag)) {
      if (!WireFormatLite::ReadString(in, &m->graph_name)) return false;
    } else if (field == kGraphDocString && LengthDelimited(tag)) {
      if (!WireFormatLite::ReadString(in, &m->graph_description)) return false;
    } else if (!WireFormatLite::SkipField(in, tag)) {
      return false;
    }
  }
  // A tag of 0 also ends the stream early: the graph must fill its length.
  if (!in->ConsumedEntireMessage() || in->BytesUntilLimit() != 0) return false;
  in->PopLimit(limit);
  return true;
}

absl::StatusOr<ModelMetadata> Read(ZeroCopyInputStream* stream) {
  CodedInputStream in(stream);
  in.SetTotalBytesLimit(INT_MAX);
  ModelMetadata m;
  std::string rest;  // the ModelProto's other fields, re-serialized
  {
    StringOutputStream rest_stream(&rest);
    CodedOutputStream out(&rest_stream);
    while (const uint32_t tag = in.ReadTag()) {
      if (WireFormatLite::GetTagFieldNumber(tag) == kModelGraph && LengthDelimited(tag)) {
        if (!ReadGraphFields(&in, &m)) return NotAModel();
      } else if (!WireFormatLite::SkipField(&in, tag, &out)) {
        return NotAModel();
      }
    }
    if (!in.ConsumedEntireMessage()) return NotAModel();
  }
  onnx::ModelProto top;
  if (!top.ParseFromString(rest)) return NotAModel();
  m.producer_name = top.producer_name();
  m.producer_version = top.producer_version();
  m.domain = top.domain();
  m.description = top.doc_string();
  m.version = top.model_version();
  for (const onnx::StringStringEntryProto& e : top.metadata_props()) {
    m.custom_metadata.emplace_back(e.key(), e.value());
  }
  return m;
}

}  // namespace

absl::StatusOr<ModelMetadata> ReadModelMetadata(absl::string_view model_bytes) {
  if (model_bytes.size() > static_cast<size_t>(INT_MAX)) return NotAModel();
  google::protobuf::io::ArrayInputStream stream(model_bytes.data(),
                                                static_cast<int>(model_bytes.size()));
  return Read(&stream);
}

absl::StatusOr<ModelMetadata> ReadModelMetadataFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  google::protobuf::io::FileInputStream stream(fd);
  stream.SetCloseOnDelete(true);
  absl::StatusOr<ModelMetadata> m = Read(&stream);
  if (!m.ok()) {
    return absl::Status(m.status().code(), absl::StrCat("'", path, "': ", m.status().message()));
  }
  return m;
}

}  // namespace kiln::frontend
