// File: frontend/onnx/tensor_proto.h — conversions between onnx.TensorProto
// and ir::Tensor (raw_data and typed fields, f16 bits, external data files),
// shared by the model importer and the test-data loader. Internal to
// frontend/onnx.
#ifndef KILN_FRONTEND_ONNX_TENSOR_PROTO_H_
#define KILN_FRONTEND_ONNX_TENSOR_PROTO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend::onnx_internal {

// "FLOAT", "BFLOAT16", ... for an onnx.TensorProto.DataType value.
std::string OnnxElemTypeName(int32_t elem_type);

// The kiln dtype of an ONNX element type. Unimplemented naming `what` and the
// type for types kiln does not support (string, bf16, u16, complex, ...),
// InvalidArgument for UNDEFINED or out-of-range values.
absl::StatusOr<ir::DType> DTypeFromOnnx(int32_t elem_type,
                                        absl::string_view what);
// The ONNX element type of a kiln dtype (0 for kInvalid).
int32_t OnnxElemTypeFromDType(ir::DType dtype);

// Bytes a tensor of `dims` and `dtype` occupies. InvalidArgument naming
// `what` for negative dims, a product that overflows, or more than
// `max_bytes`.
absl::StatusOr<int64_t> CheckedByteSize(absl::Span<const int64_t> dims,
                                        ir::DType dtype, int64_t max_bytes,
                                        absl::string_view what);

// Replaces `data_location: EXTERNAL` by the bytes it points at (read into
// raw_data). `location` must be a relative path inside `base_dir` (no '..',
// not absolute); offset/length are checked against the file and the shape.
// A tensor without external data is left alone.
absl::Status InlineExternalData(onnx::TensorProto* tensor,
                                absl::string_view base_dir, int64_t max_bytes,
                                absl::string_view what);

// InvalidArgument naming `what` unless the tensor's data holds exactly the
// elements its dims promise: raw_data's bytes (for element types of known
// size), the typed field's count, or nothing for an empty shape. Checks any
// element type, including those kiln does not run, so that nothing reading
// the proto by its dims (libonnx's shape inference reads shape inputs that
// way) reads past its data. External data must have been inlined.
absl::Status CheckTensorDataSize(const onnx::TensorProto& tensor,
                                 absl::string_view what);

// Converts a TensorProto (raw_data or typed fields; external data must have
// been inlined) into an ir::Tensor. The element count must match the shape
// exactly. Errors name `what` (e.g. "initializer 'w'").
absl::StatusOr<ir::Tensor> TensorFromProto(const onnx::TensorProto& tensor,
                                           int64_t max_bytes,
                                           absl::string_view what);

// Serializable TensorProto with raw_data (little-endian) and dims.
absl::StatusOr<onnx::TensorProto> TensorToProto(const ir::Tensor& tensor,
                                                absl::string_view name);

}  // namespace kiln::frontend::onnx_internal

#endif  // KILN_FRONTEND_ONNX_TENSOR_PROTO_H_
