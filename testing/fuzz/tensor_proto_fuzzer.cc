// File: testing/fuzz/tensor_proto_fuzzer.cc — fuzz target: bytes as a
// serialized onnx.TensorProto file through the readers of `kilnc run/check
// --input=NAME=FILE.pb` and of test_data_set_N folders
// (frontend::LoadTensorFile, with and without a declared bf16 type, and
// ParseTensorBytes). The file sits in a folder that also holds external data
// (data.bin, sub/data.bin), a symbolic link to a file outside it
// (escape.bin), a linked parent (up/) and a FIFO, so `data_location:
// EXTERNAL` paths reach real files.
//
// Each read gives OK or an error that blames the file (Internal is a
// finding). A tensor that loads agrees with the proto: its shape is the
// dims, its byte size the element count times the dtype's size, its dtype
// the proto's type; its bytes are the raw_data, the typed values, or the
// external file's bytes at the offset, from a regular file inside the
// folder. The three reads agree with each other.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "frontend/onnx/importer.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "onnx/onnx_pb.h"
#include "testing/fuzz/fuzz_checks.h"

namespace {

using absl::StatusCode;
using kiln::fuzz::CheckStatus;
using kiln::fuzz::Fail;
using TP = onnx::TensorProto;
namespace fs = std::filesystem;

constexpr int kDataBytes = 256;

// A folder, once per process: <root>/m holds the input file and the
// external data files; <root>/outside.bin is what no read may return.
struct Folder {
  std::string root, dir, input;
};

const Folder& TheFolder() {
  static const Folder* folder = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    if (tmp == nullptr) tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/kiln_fuzz_tensor_XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) Fail("mkdtemp failed", pattern);
    auto* f = new Folder{pattern, pattern + "/m", pattern + "/m/input.pb"};
    std::string data(kDataBytes, '\0');
    for (int i = 0; i < kDataBytes; ++i) data[i] = static_cast<char>(i);
    fs::create_directories(f->dir + "/sub");
    std::ofstream(f->dir + "/data.bin", std::ios::binary) << data;
    std::ofstream(f->dir + "/sub/data.bin", std::ios::binary) << data;
    std::ofstream(f->root + "/outside.bin", std::ios::binary) << std::string(kDataBytes, '\xa5');
    std::error_code ec;
    fs::create_symlink("../outside.bin", f->dir + "/escape.bin", ec);
    fs::create_directory_symlink("..", f->dir + "/up", ec);
    ::mkfifo((f->dir + "/fifo").c_str(), 0600);
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(TheFolder().root, ignored);
    });
    return f;
  }();
  return *folder;
}

// kiln's name of the dtype an ONNX element type loads as; nullopt for types
// kiln does not load.
std::optional<std::string> ExpectedDType(int32_t elem_type, bool declared_bf16) {
  static const std::map<int32_t, std::string> kNames = {
      {TP::FLOAT, "f32"},  {TP::UINT8, "u8"},    {TP::INT8, "i8"},
      {TP::INT32, "i32"},  {TP::INT64, "i64"},   {TP::BOOL, "bool"},
      {TP::FLOAT16, "f16"}, {TP::DOUBLE, "f64"}, {TP::BFLOAT16, "bf16"}};
  if (declared_bf16 && elem_type == TP::UINT16) return "bf16";
  auto it = kNames.find(elem_type);
  if (it == kNames.end()) return std::nullopt;
  return it->second;
}

// Where external data points, as kiln reads the entries (the last of each
// key counts).
struct External {
  std::string location;
  int64_t offset = 0;
};
External ExternalOf(const TP& proto) {
  External e;
  for (const onnx::StringStringEntryProto& kv : proto.external_data()) {
    if (kv.key() == "location") e.location = kv.value();
    if (kv.key() == "offset") (void)absl::SimpleAtoi(kv.value(), &e.offset);
  }
  return e;
}

template <typename T, typename Field>
void ExpectValues(const kiln::ir::Tensor& t, const Field& field, absl::string_view what) {
  if (static_cast<int64_t>(field.size()) != t.num_elements()) {
    Fail(absl::StrCat(what, ": ", field.size(), " typed values for ", t.num_elements(),
                      " elements"),
         t.TypeString());
  }
  const T* got = t.data<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const T want = static_cast<T>(field.Get(static_cast<int>(i)));
    if (std::memcmp(&got[i], &want, sizeof(T)) != 0) {
      Fail(absl::StrCat(what, ": element ", i, " differs from the typed field"), t.TypeString());
    }
  }
}

// `t`, read from `proto`, agrees with it (the header's list).
void CheckTensor(const kiln::ir::Tensor& t, const TP& proto, bool declared_bf16,
                 absl::string_view what) {
  const std::optional<std::string> dtype = ExpectedDType(proto.data_type(), declared_bf16);
  if (!dtype.has_value() || kiln::ir::DTypeName(t.dtype()) != *dtype) {
    Fail(absl::StrCat(what, ": ONNX type ", proto.data_type(), " loaded as ",
                      kiln::ir::DTypeName(t.dtype())),
         t.TypeString());
  }
  if (t.rank() != proto.dims_size()) Fail(absl::StrCat(what, ": rank differs"), t.TypeString());
  int64_t n = 1;
  bool overflow = false;
  for (int i = 0; i < proto.dims_size(); ++i) {
    if (t.dim(i) != proto.dims(i) || proto.dims(i) < 0) {
      Fail(absl::StrCat(what, ": dim ", i, " differs or is negative"), t.TypeString());
    }
    overflow |= __builtin_mul_overflow(n, proto.dims(i), &n);
  }
  // Dims like [0, 2^62, 2^62] make an empty tensor whose running product
  // overflows; any other overflow means a tensor that cannot exist.
  for (int64_t d : proto.dims()) {
    if (d == 0) n = 0;
  }
  if (overflow && n != 0) Fail(absl::StrCat(what, ": dims overflow int64"), t.TypeString());
  if (t.num_elements() != n ||
      t.byte_size() != static_cast<size_t>(n) * kiln::ir::DTypeSize(t.dtype())) {
    Fail(absl::StrCat(what, ": element count or byte size disagrees with the dims"),
         t.TypeString());
  }
  const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
  if (proto.data_location() == TP::EXTERNAL) {
    const External e = ExternalOf(proto);
    const std::string path = absl::StrCat(TheFolder().dir, "/", e.location);
    std::error_code ec;
    const fs::path real = fs::canonical(path, ec);
    const fs::path base = fs::canonical(TheFolder().dir, ec);
    if (ec || !absl::StartsWith(real.string(), base.string() + "/") ||
        !fs::is_regular_file(real, ec)) {
      Fail(absl::StrCat(what, ": external data read from outside the folder or no regular file"),
           path);
    }
    std::ifstream in(real, std::ios::binary);
    std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (e.offset < 0 || static_cast<size_t>(e.offset) + t.byte_size() > file.size()) {
      Fail(absl::StrCat(what, ": external data past the file's end at offset ", e.offset), path);
    }
    // A bool is stored 0 or 1 whatever nonzero byte the file has, as from
    // raw_data below.
    for (size_t i = 0; i < t.byte_size(); ++i) {
      const unsigned char f = static_cast<unsigned char>(file[e.offset + i]);
      const unsigned char want = t.dtype() == kiln::ir::DType::kBool ? (f != 0) : f;
      if (bytes[i] != want) {
        Fail(absl::StrCat(what, ": byte ", i, " differs from the external file at offset ",
                          e.offset),
             path);
      }
    }
    return;
  }
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    if (raw.size() != t.byte_size()) Fail(absl::StrCat(what, ": raw_data size differs"), "");
    for (size_t i = 0; i < raw.size(); ++i) {
      const unsigned char want =
          t.dtype() == kiln::ir::DType::kBool ? (raw[i] != 0) : static_cast<unsigned char>(raw[i]);
      if (bytes[i] != want) Fail(absl::StrCat(what, ": byte ", i, " differs from raw_data"), "");
    }
    return;
  }
  if (n == 0) return;
  switch (t.dtype()) {
    case kiln::ir::DType::kF32: ExpectValues<float>(t, proto.float_data(), what); break;
    case kiln::ir::DType::kF64: ExpectValues<double>(t, proto.double_data(), what); break;
    case kiln::ir::DType::kI64: ExpectValues<int64_t>(t, proto.int64_data(), what); break;
    case kiln::ir::DType::kI32: ExpectValues<int32_t>(t, proto.int32_data(), what); break;
    default: break;  // narrower types packed in int32_data: converted, not compared
  }
}

// Two reads of one file agree: both OK with the same tensor, or the same
// error code.
void CheckSame(const absl::StatusOr<kiln::ir::Tensor>& a, const absl::StatusOr<kiln::ir::Tensor>& b,
               absl::string_view what) {
  if (a.ok() != b.ok() || (!a.ok() && a.status().code() != b.status().code())) {
    Fail(absl::StrCat(what, ": the reads disagree"),
         absl::StrCat(a.status().ToString(), " / ", b.status().ToString()));
  }
  if (!a.ok()) return;
  if (a->shape() != b->shape() || a->byte_size() != b->byte_size() ||
      (a->byte_size() > 0 && std::memcmp(a->raw_data(), b->raw_data(), a->byte_size()) != 0)) {
    Fail(absl::StrCat(what, ": the reads give different tensors"),
         absl::StrCat(a->TypeString(), " / ", b->TypeString()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Folder& folder = TheFolder();
  {
    std::ofstream out(folder.input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) Fail("cannot write the input file", folder.input);
  }
  const std::initializer_list<StatusCode> kCodes = {
      StatusCode::kInvalidArgument, StatusCode::kUnimplemented, StatusCode::kNotFound,
      StatusCode::kResourceExhausted};
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<kiln::ir::Tensor> from_file = kiln::frontend::LoadTensorFile(folder.input);
  CheckStatus(from_file.status(), kCodes, "LoadTensorFile");
  const absl::StatusOr<kiln::ir::Tensor> as_bf16 =
      kiln::frontend::LoadTensorFile(folder.input, kiln::ir::DType::kBF16);
  CheckStatus(as_bf16.status(), kCodes, "LoadTensorFile (declared bf16)");
  const absl::StatusOr<kiln::ir::Tensor> from_bytes =
      kiln::frontend::ParseTensorBytes(bytes, "fuzz.pb");
  CheckStatus(from_bytes.status(), kCodes, "ParseTensorBytes");

  TP proto;
  const bool parsed = proto.ParseFromArray(data, static_cast<int>(size));
  if (!parsed) {
    if (from_file.ok() || as_bf16.ok() || from_bytes.ok()) {
      Fail("a file protobuf refuses was read as a tensor", "");
    }
    return 0;
  }
  if (from_file.ok()) CheckTensor(*from_file, proto, false, "LoadTensorFile");
  if (as_bf16.ok()) CheckTensor(*as_bf16, proto, true, "LoadTensorFile (declared bf16)");
  if (from_bytes.ok()) CheckTensor(*from_bytes, proto, false, "ParseTensorBytes");
  // Without a folder, external data is refused; otherwise the bytes alone
  // decide. The declared type changes only a UINT16 file.
  if (proto.data_location() == TP::EXTERNAL) {
    if (from_bytes.ok()) Fail("ParseTensorBytes read external data without a folder", "");
  } else {
    CheckSame(from_file, from_bytes, "LoadTensorFile and ParseTensorBytes");
  }
  if (proto.data_type() != TP::UINT16) {
    CheckSame(from_file, as_bf16, "LoadTensorFile with and without a declared bf16 type");
  }
  return 0;
}
