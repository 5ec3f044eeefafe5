// onnx.TensorProto <-> ir::Tensor, including external data files.
#include "frontend/onnx/tensor_proto.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ir/status_macros.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "ONNX raw_data is little-endian; kiln reads it as host order");

namespace kiln::frontend::onnx_internal {
namespace {

using ir::DType;
using TP = onnx::TensorProto;

absl::Status TooBig(absl::string_view what, absl::string_view detail,
                    int64_t max_bytes) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": ", detail, " exceeds the limit of ", max_bytes,
                   " bytes (ImportOptions::max_tensor_bytes)"));
}

std::string DimsString(const TP& t) {
  ir::Shape s(t.dims().begin(), t.dims().end());
  return ir::ShapeToString(s);
}

// Which typed repeated field carries the data, or nullptr if none does.
// Exactly one may be non-empty.
absl::StatusOr<const char*> TypedField(const TP& t, absl::string_view what) {
  const char* field = nullptr;
  int count = 0;
  auto note = [&](int size, const char* name) {
    if (size > 0) {
      ++count;
      field = name;
    }
  };
  note(t.float_data_size(), "float_data");
  note(t.int32_data_size(), "int32_data");
  note(t.int64_data_size(), "int64_data");
  note(t.double_data_size(), "double_data");
  note(t.uint64_data_size(), "uint64_data");
  note(t.string_data_size(), "string_data");
  if (count > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": data is spread over several typed fields"));
  }
  if (count == 1 && t.has_raw_data()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": has both raw_data and ", field, "; exactly one is allowed"));
  }
  return field;
}

// Where a dtype's elements live when not in raw_data.
const char* ExpectedField(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float_data";
    case DType::kF64: return "double_data";
    case DType::kI64: return "int64_data";
    case DType::kI32:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
    case DType::kF16:
    case DType::kBF16: return "int32_data";
    case DType::kInvalid: break;
  }
  return "";
}

template <typename T, typename Src>
void CopyCast(const Src& src, ir::Tensor* t) {
  T* dst = t->data<T>();
  for (int i = 0; i < src.size(); ++i) dst[i] = static_cast<T>(src.Get(i));
}

bool IsSafeRelativePath(absl::string_view path) {
  if (path.empty() || path.front() == '/' || path.front() == '\\') return false;
  if (path.find('\0') != absl::string_view::npos) return false;
  if (path.size() > 1 && path[1] == ':') return false;  // "C:..."
  for (absl::string_view part : absl::StrSplit(path, absl::ByAnyChar("/\\"))) {
    if (part == "..") return false;
  }
  return true;
}

// The canonical absolute path of `path` (symlinks, '.' and '..' resolved),
// or nullopt when it does not exist.
std::optional<std::string> RealPath(const std::string& path) {
  std::unique_ptr<char, void (*)(void*)> resolved(::realpath(path.c_str(), nullptr),
                                                  &std::free);
  if (resolved == nullptr) return std::nullopt;
  return std::string(resolved.get());
}

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string OnnxElemTypeName(int32_t elem_type) {
  if (!TP::DataType_IsValid(elem_type)) {
    return absl::StrCat("unknown element type ", elem_type);
  }
  return TP::DataType_Name(static_cast<TP::DataType>(elem_type));
}

absl::StatusOr<DType> DTypeFromOnnx(int32_t elem_type, absl::string_view what) {
  switch (elem_type) {
    case TP::FLOAT: return DType::kF32;
    case TP::FLOAT16: return DType::kF16;
    case TP::BFLOAT16: return DType::kBF16;
    case TP::DOUBLE: return DType::kF64;
    case TP::INT64: return DType::kI64;
    case TP::INT32: return DType::kI32;
    case TP::INT8: return DType::kI8;
    case TP::UINT8: return DType::kU8;
    case TP::BOOL: return DType::kBool;
    case TP::UNDEFINED:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": element type is UNDEFINED"));
    default: break;
  }
  if (!TP::DataType_IsValid(elem_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", OnnxElemTypeName(elem_type)));
  }
  return absl::UnimplementedError(absl::StrCat(
      what, ": element type ", OnnxElemTypeName(elem_type),
      " is not supported by kiln (f32, f16, bf16, f64, i64, i32, i8, u8, bool)"));
}

int32_t OnnxElemTypeFromDType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return TP::FLOAT;
    case DType::kF16: return TP::FLOAT16;
    case DType::kBF16: return TP::BFLOAT16;
    case DType::kF64: return TP::DOUBLE;
    case DType::kI64: return TP::INT64;
    case DType::kI32: return TP::INT32;
    case DType::kI8: return TP::INT8;
    case DType::kU8: return TP::UINT8;
    case DType::kBool: return TP::BOOL;
    case DType::kInvalid: break;
  }
  return TP::UNDEFINED;
}

absl::StatusOr<int64_t> CheckedByteSize(absl::Span<const int64_t> dims,
                                        DType dtype, int64_t max_bytes,
                                        absl::string_view what) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": dim ", i, " is negative (", dims[i], ")"));
    }
  }
  const int64_t n = ir::NumElements(dims);
  const int64_t elem = static_cast<int64_t>(ir::DTypeSize(dtype));
  if (n < 0 || (elem > 0 && n > INT64_MAX / elem)) {
    return TooBig(what, absl::StrCat("shape ", ir::ShapeToString(dims),
                                     " (element count overflows int64)"),
                  max_bytes);
  }
  const int64_t bytes = n * elem;
  if (bytes > max_bytes) {
    return TooBig(what,
                  absl::StrCat(DTypeName(dtype), ir::ShapeToString(dims),
                               " is ", bytes, " bytes, which"),
                  max_bytes);
  }
  return bytes;
}

absl::Status InlineExternalData(TP* tensor, absl::string_view base_dir,
                                int64_t max_bytes, absl::string_view what) {
  if (tensor->data_location() != TP::EXTERNAL) return absl::OkStatus();
  std::string location;
  bool has_location = false;
  int64_t offset = 0;
  int64_t length = -1;
  for (const onnx::StringStringEntryProto& e : tensor->external_data()) {
    if (e.key() == "location") {
      location = e.value();
      has_location = true;
    } else if (e.key() == "offset" || e.key() == "length") {
      int64_t v = 0;
      if (!absl::SimpleAtoi(e.value(), &v) || v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": external data ", e.key(), " '", e.value(),
                         "' is not a non-negative integer"));
      }
      (e.key() == "offset" ? offset : length) = v;
    }
  }
  if (!has_location) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": external data has no 'location'"));
  }
  if (!IsSafeRelativePath(location)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data location '", location,
        "' must be a relative path inside the model's folder (no '..', not "
        "absolute)"));
  }
  if (base_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": uses external data ('", location,
        "') but no base folder is known (set ImportOptions::base_dir)"));
  }
  KILN_ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(tensor->data_type(), what));
  ir::Shape dims(tensor->dims().begin(), tensor->dims().end());
  KILN_ASSIGN_OR_RETURN(int64_t expected,
                        CheckedByteSize(dims, dtype, max_bytes, what));
  if (length >= 0 && length != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data length ", length, " but ", DTypeName(dtype),
        ir::ShapeToString(dims), " needs ", expected, " bytes"));
  }
  // The text of `location` stays inside the folder (above); its target must
  // too. A symlink inside the folder may point anywhere (`w.bin ->
  // /etc/passwd`, a linked directory), so the real path is checked, and the
  // file is opened by that path without following a last-moment symlink
  // (and without blocking on a FIFO: it is refused as not a regular file).
  const std::string path = absl::StrCat(base_dir, "/", location);
  const std::optional<std::string> real_base = RealPath(std::string(base_dir));
  const std::optional<std::string> real = RealPath(path);
  if (!real_base.has_value() || !real.has_value()) {
    return absl::NotFoundError(absl::StrCat(
        what, ": external data file '", path, "' does not exist"));
  }
  if (!absl::StartsWith(*real, absl::StrCat(*real_base == "/" ? "" : *real_base, "/"))) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data location '", location,
        "' resolves (through a symbolic link) to a file outside the model's folder"));
  }
  Fd file{::open(real->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
  struct stat st;
  if (file.fd < 0 || ::fstat(file.fd, &st) != 0) {
    return absl::NotFoundError(absl::StrCat(
        what, ": cannot open external data file '", path, "'"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data file '", location, "' is not a regular file"));
  }
  const int64_t file_size = static_cast<int64_t>(st.st_size);
  if (offset > file_size || expected > file_size - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data file '", location, "' is ", file_size,
        " bytes, too short for bytes [", offset, ", ", offset + expected,
        ")"));
  }
  std::string* raw = tensor->mutable_raw_data();
  raw->resize(static_cast<size_t>(expected));
  int64_t done = 0;
  while (done < expected) {
    const ssize_t n = ::pread(file.fd, raw->data() + done,
                              static_cast<size_t>(expected - done), offset + done);
    if (n <= 0) {
      return absl::DataLossError(absl::StrCat(
          what, ": could not read ", expected, " bytes at offset ", offset,
          " from '", path, "'"));
    }
    done += n;
  }
  tensor->clear_external_data();
  tensor->set_data_location(TP::DEFAULT);
  return absl::OkStatus();
}

namespace {

// Bytes per element of an ONNX element type in raw_data, and how many typed
// field entries one element takes; {0, 0} for types whose size kiln does not
// know (STRING has no raw_data form).
struct OnnxElemLayout {
  int64_t raw_bytes = 0;
  int64_t typed_entries = 0;
};

OnnxElemLayout ElemLayout(int32_t elem_type) {
  switch (elem_type) {
    case TP::UINT8:
    case TP::INT8:
    case TP::BOOL: return {1, 1};
    case TP::UINT16:
    case TP::INT16:
    case TP::FLOAT16:
    case TP::BFLOAT16: return {2, 1};
    case TP::FLOAT:
    case TP::INT32:
    case TP::UINT32: return {4, 1};
    case TP::INT64:
    case TP::UINT64:
    case TP::DOUBLE: return {8, 1};
    case TP::COMPLEX64: return {8, 2};
    case TP::COMPLEX128: return {16, 2};
    case TP::STRING: return {0, 1};
    default: return {};
  }
}

}  // namespace

absl::Status CheckTensorDataSize(const TP& t, absl::string_view what) {
  if (t.data_location() == TP::EXTERNAL) {
    return kiln::InternalError(
        absl::StrCat(what, ": external data is checked after it is inlined"));
  }
  for (int i = 0; i < t.dims_size(); ++i) {
    if (t.dims(i) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": dim ", i, " is negative (", t.dims(i), ")"));
    }
  }
  const int64_t n = ir::NumElements(ir::Shape(t.dims().begin(), t.dims().end()));
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": shape ", DimsString(t), " has more elements than int64 counts"));
  }
  const OnnxElemLayout layout = ElemLayout(t.data_type());
  KILN_ASSIGN_OR_RETURN(const char* field, TypedField(t, what));
  if (t.has_raw_data()) {
    if (layout.raw_bytes == 0) {
      if (t.data_type() == TP::STRING) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": STRING data cannot be in raw_data"));
      }
      return absl::OkStatus();  // a type kiln refuses wherever it is used
    }
    const int64_t have = static_cast<int64_t>(t.raw_data().size());
    if (n > INT64_MAX / layout.raw_bytes || have != n * layout.raw_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": raw_data has ", have, " bytes but ",
          OnnxElemTypeName(t.data_type()), DimsString(t), " needs ", n, " x ",
          layout.raw_bytes));
    }
    return absl::OkStatus();
  }
  if (field == nullptr) {
    if (n != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": shape ", DimsString(t), " has ", n,
          " elements but the tensor carries no data"));
    }
    return absl::OkStatus();
  }
  if (layout.typed_entries == 0) return absl::OkStatus();
  const int64_t have = std::max({t.float_data_size(), t.int32_data_size(),
                                 t.int64_data_size(), t.double_data_size(),
                                 t.uint64_data_size(), t.string_data_size()});
  if (n > INT64_MAX / layout.typed_entries || have != n * layout.typed_entries) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", field, " has ", have, " entries but ",
                     OnnxElemTypeName(t.data_type()), DimsString(t), " needs ", n,
                     layout.typed_entries == 1 ? "" : " x 2"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::Tensor> TensorFromProto(const TP& t, int64_t max_bytes,
                                           absl::string_view what) {
  KILN_ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(t.data_type(), what));
  if (t.has_segment()) {
    return absl::UnimplementedError(
        absl::StrCat(what, ": segmented tensors are not supported"));
  }
  if (t.data_location() == TP::EXTERNAL) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": external data is not supported here (no model folder)"));
  }
  ir::Shape dims(t.dims().begin(), t.dims().end());
  KILN_ASSIGN_OR_RETURN(int64_t bytes,
                        CheckedByteSize(dims, dtype, max_bytes, what));
  const int64_t n = ir::NumElements(dims);
  KILN_ASSIGN_OR_RETURN(const char* field, TypedField(t, what));

  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": raw_data has ", t.raw_data().size(), " bytes but ",
          DTypeName(dtype), DimsString(t), " needs ", bytes));
    }
    if (dtype != DType::kBool) {
      return ir::Tensor::FromBytes(dtype, std::move(dims), t.raw_data().data());
    }
    ir::Tensor out(dtype, std::move(dims));
    bool* dst = out.data<bool>();
    for (int64_t i = 0; i < n; ++i) dst[i] = t.raw_data()[i] != 0;
    return out;
  }

  if (field == nullptr) {
    if (n != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": shape ", DimsString(t), " has ", n,
          " elements but the tensor carries no data"));
    }
    return ir::Tensor(dtype, std::move(dims));
  }
  if (std::strcmp(field, ExpectedField(dtype)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", OnnxElemTypeName(t.data_type()),
                     " data must be in raw_data or ", ExpectedField(dtype),
                     ", not ", field));
  }
  int64_t have = 0;
  switch (dtype) {
    case DType::kF32: have = t.float_data_size(); break;
    case DType::kF64: have = t.double_data_size(); break;
    case DType::kI64: have = t.int64_data_size(); break;
    default: have = t.int32_data_size(); break;
  }
  if (have != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", field, " has ", have, " elements but shape ",
                     DimsString(t), " needs ", n));
  }
  ir::Tensor out(dtype, std::move(dims));
  switch (dtype) {
    case DType::kF32: CopyCast<float>(t.float_data(), &out); break;
    case DType::kF64: CopyCast<double>(t.double_data(), &out); break;
    case DType::kI64: CopyCast<int64_t>(t.int64_data(), &out); break;
    case DType::kI32: CopyCast<int32_t>(t.int32_data(), &out); break;
    case DType::kI8: CopyCast<int8_t>(t.int32_data(), &out); break;
    case DType::kU8: CopyCast<uint8_t>(t.int32_data(), &out); break;
    case DType::kBool: {
      bool* dst = out.data<bool>();
      for (int64_t i = 0; i < n; ++i) dst[i] = t.int32_data(i) != 0;
      break;
    }
    case DType::kF16: {
      ir::Float16* dst = out.data<ir::Float16>();
      for (int64_t i = 0; i < n; ++i) {
        dst[i].bits = static_cast<uint16_t>(t.int32_data(i) & 0xffff);
      }
      break;
    }
    case DType::kBF16: {  // the bits in the low 16 bits of int32_data
      ir::BFloat16* dst = out.data<ir::BFloat16>();
      for (int64_t i = 0; i < n; ++i) {
        dst[i].bits = static_cast<uint16_t>(t.int32_data(i) & 0xffff);
      }
      break;
    }
    case DType::kInvalid:
      return kiln::InternalError("invalid dtype after DTypeFromOnnx");
  }
  return out;
}

absl::StatusOr<TP> TensorToProto(const ir::Tensor& tensor,
                                 absl::string_view name) {
  const int32_t elem = OnnxElemTypeFromDType(tensor.dtype());
  if (elem == TP::UNDEFINED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' has an invalid dtype and cannot be serialized"));
  }
  TP proto;
  proto.set_name(std::string(name));
  proto.set_data_type(elem);
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  proto.set_raw_data(static_cast<const char*>(tensor.raw_data()),
                     tensor.byte_size());
  return proto;
}

}  // namespace kiln::frontend::onnx_internal
