// Tests for onnx.TensorProto <-> ir::Tensor: raw and typed data, f16 bits,
// unsupported types, size checks, external data, and the public tensor-file
// API (ParseTensorBytes / SerializeTensor / LoadTensorFile).
#include "frontend/onnx/tensor_proto.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::frontend::onnx_internal {
namespace {

using ::testing::HasSubstr;
using ir::DType;
using TP = onnx::TensorProto;

constexpr int64_t kMax = int64_t{1} << 30;

template <typename T>
std::string RawBytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(T));
}

TP Proto(const std::string& name, int32_t type, std::vector<int64_t> dims) {
  TP t;
  t.set_name(name);
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

TEST(TensorFromProtoTest, F32RawData) {
  TP p = Proto("w", TP::FLOAT, {2, 2});
  p.set_raw_data(RawBytes<float>({1.5f, -2.0f, 3.25f, 0.0f}));
  absl::StatusOr<ir::Tensor> t = TensorFromProto(p, kMax, "w");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kF32);
  EXPECT_EQ(t->shape(), (ir::Shape{2, 2}));
  EXPECT_EQ(t->data<float>()[0], 1.5f);
  EXPECT_EQ(t->data<float>()[1], -2.0f);
  EXPECT_EQ(t->data<float>()[2], 3.25f);
}

TEST(TensorFromProtoTest, OddSizedRawDataCopiesExactlyAndPadsWithZeros) {
  // 3 x f16 = 6 bytes: the copy must not read or leave garbage past them.
  TP t;
  t.set_name("h");
  t.set_data_type(TP::FLOAT16);
  t.add_dims(3);
  const uint16_t bits[3] = {0x3c00, 0xc000, 0x7bff};
  t.set_raw_data(std::string(reinterpret_cast<const char*>(bits), 6));
  absl::StatusOr<ir::Tensor> r = TensorFromProto(t, 1 << 20, "h");
  ASSERT_TRUE(r.ok()) << r.status();
  const auto* bytes = static_cast<const uint8_t*>(r->raw_data());
  EXPECT_EQ(std::memcmp(bytes, bits, 6), 0);
  for (int i = 6; i < 64; ++i) EXPECT_EQ(bytes[i], 0) << i;
}

// ir::Tensor's sharing forms (the frontend and oneDNN weights rely on them).
TEST(TensorShareTest, ShareAliasesAndCopyStaysDeep) {
  ir::Tensor t = ir::Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  ir::Tensor shared = t.Share();
  EXPECT_TRUE(shared.SharesBufferWith(t));
  EXPECT_EQ(shared.raw_data(), t.raw_data());
  EXPECT_EQ(shared.shape(), t.shape());
  ir::Tensor copy = shared;
  EXPECT_FALSE(copy.SharesBufferWith(t));
  t.data<float>()[0] = 10;
  EXPECT_EQ(shared.data<float>()[0], 10);
  EXPECT_EQ(copy.data<float>()[0], 1);
  absl::StatusOr<ir::Tensor> r = t.ShareReshaped({3, 2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->SharesBufferWith(t));
  EXPECT_EQ(r->shape(), (ir::Shape{3, 2}));
  EXPECT_EQ(r->data<float>()[5], 6);
  EXPECT_EQ(t.ShareReshaped({4}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorShareTest, SharedBytesOutliveTheOriginal) {
  ir::Tensor shared;
  {
    ir::Tensor t = ir::Tensor::FromBytes(DType::kI32, {3}, std::vector<int32_t>{7, 8, 9}.data());
    shared = t.Share();
  }
  EXPECT_EQ(shared.data<int32_t>()[0], 7);
  EXPECT_EQ(shared.data<int32_t>()[2], 9);
}

TEST(TensorFromProtoTest, F16RawDataKeepsBits) {
  // IEEE binary16: 0x3C00 = 1.0, 0xC000 = -2.0, 0x3800 = 0.5.
  TP p = Proto("h", TP::FLOAT16, {3});
  p.set_raw_data(RawBytes<uint16_t>({0x3C00, 0xC000, 0x3800}));
  absl::StatusOr<ir::Tensor> t = TensorFromProto(p, kMax, "h");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kF16);
  EXPECT_EQ(t->data<ir::Float16>()[0].bits, 0x3C00);
  EXPECT_EQ(t->data<ir::Float16>()[1].bits, 0xC000);
  EXPECT_EQ(t->GetAsDouble(2), 0.5);
}

TEST(TensorFromProtoTest, BF16RawDataAndInt32DataKeepBits) {
  // bfloat16: the upper half of an f32. 0x3F80 = 1.0, 0xC000 = -2.0,
  // 0x3F00 = 0.5, 0x7FC1 a NaN with payload, 0x0001 the smallest subnormal.
  TP p = Proto("b", TP::BFLOAT16, {5});
  p.set_raw_data(RawBytes<uint16_t>({0x3F80, 0xC000, 0x3F00, 0x7FC1, 0x0001}));
  absl::StatusOr<ir::Tensor> t = TensorFromProto(p, kMax, "b");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kBF16);
  EXPECT_EQ(t->data<ir::BFloat16>()[0].bits, 0x3F80);
  EXPECT_EQ(t->data<ir::BFloat16>()[3].bits, 0x7FC1);
  EXPECT_EQ(t->GetAsDouble(1), -2.0);
  EXPECT_EQ(t->GetAsDouble(2), 0.5);
  EXPECT_TRUE(std::isnan(t->GetAsDouble(3)));
  EXPECT_EQ(t->GetAsDouble(4), std::ldexp(1.0, -133));

  TP q = Proto("c", TP::BFLOAT16, {2});
  q.add_int32_data(0xC000);
  q.add_int32_data(0x7F80);  // +inf
  t = TensorFromProto(q, kMax, "c");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->GetAsDouble(0), -2.0);
  EXPECT_TRUE(std::isinf(t->GetAsDouble(1)));

  absl::StatusOr<std::string> bytes = SerializeTensor(*t, "c");
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<ir::Tensor> back = ParseTensorBytes(*bytes, "<bytes>");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype(), DType::kBF16);
  EXPECT_EQ(back->data<ir::BFloat16>()[0].bits, 0xC000);
  EXPECT_EQ(back->data<ir::BFloat16>()[1].bits, 0x7F80);
}

TEST(TensorFromProtoTest, Int32DataCarriesSmallTypes) {
  TP i8 = Proto("a", TP::INT8, {2});
  i8.add_int32_data(-3);
  i8.add_int32_data(127);
  TP u8 = Proto("b", TP::UINT8, {2});
  u8.add_int32_data(0);
  u8.add_int32_data(255);
  TP b = Proto("c", TP::BOOL, {3});
  b.add_int32_data(0);
  b.add_int32_data(1);
  b.add_int32_data(5);
  TP h = Proto("d", TP::FLOAT16, {1});
  h.add_int32_data(0xC000);
  TP i32 = Proto("e", TP::INT32, {1});
  i32.add_int32_data(-70000);

  absl::StatusOr<ir::Tensor> t = TensorFromProto(i8, kMax, "a");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kI8);
  EXPECT_EQ(t->data<int8_t>()[0], -3);
  EXPECT_EQ(t->data<int8_t>()[1], 127);
  t = TensorFromProto(u8, kMax, "b");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data<uint8_t>()[1], 255);
  t = TensorFromProto(b, kMax, "c");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->data<bool>()[0]);
  EXPECT_TRUE(t->data<bool>()[1]);
  EXPECT_TRUE(t->data<bool>()[2]);
  t = TensorFromProto(h, kMax, "d");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->GetAsDouble(0), -2.0);
  t = TensorFromProto(i32, kMax, "e");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data<int32_t>()[0], -70000);
}

TEST(TensorFromProtoTest, Int64AndDoubleData) {
  TP i = Proto("i", TP::INT64, {2});
  i.add_int64_data(int64_t{1} << 40);
  i.add_int64_data(-1);
  absl::StatusOr<ir::Tensor> t = TensorFromProto(i, kMax, "i");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data<int64_t>()[0], int64_t{1} << 40);
  TP d = Proto("d", TP::DOUBLE, {});
  d.add_double_data(0.125);
  t = TensorFromProto(d, kMax, "d");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->rank(), 0);
  EXPECT_EQ(t->data<double>()[0], 0.125);
}

TEST(TensorFromProtoTest, BoolRawBytesAreNormalized) {
  TP p = Proto("b", TP::BOOL, {2});
  p.set_raw_data(std::string("\x00\x02", 2));
  absl::StatusOr<ir::Tensor> t = TensorFromProto(p, kMax, "b");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->GetAsInt64(0), 0);
  EXPECT_EQ(t->GetAsInt64(1), 1);
}

TEST(TensorFromProtoTest, EmptyTensorNeedsNoData) {
  TP p = Proto("e", TP::FLOAT, {0, 3});
  absl::StatusOr<ir::Tensor> t = TensorFromProto(p, kMax, "e");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_elements(), 0);
}

TEST(TensorFromProtoTest, ElementCountMustMatch) {
  TP raw = Proto("w", TP::FLOAT, {2, 2});
  raw.set_raw_data(RawBytes<float>({1, 2, 3}));
  absl::Status s = TensorFromProto(raw, kMax, "initializer 'w'").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("initializer 'w'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("12 bytes"));

  TP typed = Proto("w", TP::FLOAT, {2, 2});
  typed.add_float_data(1);
  s = TensorFromProto(typed, kMax, "w").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("1 elements"));

  TP none = Proto("w", TP::FLOAT, {2});
  s = TensorFromProto(none, kMax, "w").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorFromProtoTest, DataInTheWrongFieldIsRejected) {
  TP p = Proto("w", TP::FLOAT, {1});
  p.add_int64_data(1);
  absl::Status s = TensorFromProto(p, kMax, "w").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("int64_data"));

  TP both = Proto("w", TP::FLOAT, {1});
  both.add_float_data(1);
  both.set_raw_data(RawBytes<float>({1}));
  EXPECT_EQ(TensorFromProto(both, kMax, "w").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorFromProtoTest, UnsupportedTypesAreUnimplemented) {
  for (int32_t type : {TP::STRING, TP::UINT16, TP::COMPLEX64,
                       TP::UINT64}) {
    TP p = Proto("odd", type, {});
    absl::Status s = TensorFromProto(p, kMax, "tensor 'odd'").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << type;
    EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'odd'"));
    EXPECT_THAT(std::string(s.message()), HasSubstr(OnnxElemTypeName(type)));
  }
  TP undefined = Proto("u", TP::UNDEFINED, {});
  EXPECT_EQ(TensorFromProto(undefined, kMax, "u").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorFromProtoTest, SizeLimitsAndBadDims) {
  TP neg = Proto("n", TP::FLOAT, {2, -1});
  EXPECT_THAT(std::string(TensorFromProto(neg, kMax, "n").status().message()),
              HasSubstr("negative"));
  TP huge = Proto("h", TP::FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  absl::Status s = TensorFromProto(huge, kMax, "h").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("overflow"));
  TP big = Proto("b", TP::FLOAT, {1024});
  big.set_raw_data(std::string(4096, '\0'));
  s = TensorFromProto(big, /*max_bytes=*/4095, "b").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_tensor_bytes"));
  EXPECT_TRUE(TensorFromProto(big, 4096, "b").ok());
}

TEST(ExternalDataTest, ReadsAtOffset) {
  const std::string dir = TmpDir();
  WriteFile(dir + "/ext.bin",
            std::string(8, 'x') + RawBytes<float>({4.0f, -1.0f, 0.5f}));
  TP p = Proto("w", TP::FLOAT, {3});
  p.set_data_location(TP::EXTERNAL);
  auto add = [&](const std::string& k, const std::string& v) {
    auto* e = p.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", "ext.bin");
  add("offset", "8");
  add("length", "12");
  ASSERT_TRUE(InlineExternalData(&p, dir, kMax, "w").ok());
  absl::StatusOr<ir::Tensor> t = TensorFromProto(p, kMax, "w");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data<float>()[0], 4.0f);
  EXPECT_EQ(t->data<float>()[2], 0.5f);
}

TEST(ExternalDataTest, RejectsEscapesAndShortFiles) {
  const std::string dir = TmpDir();
  WriteFile(dir + "/short.bin", RawBytes<float>({1.0f}));
  auto make = [](const std::string& location, const std::string& length) {
    TP p = Proto("w", TP::FLOAT, {2});
    p.set_data_location(TP::EXTERNAL);
    auto* e = p.add_external_data();
    e->set_key("location");
    e->set_value(location);
    if (!length.empty()) {
      e = p.add_external_data();
      e->set_key("length");
      e->set_value(length);
    }
    return p;
  };
  for (const std::string& bad : {std::string("../short.bin"),
                                  std::string("a/../../etc/passwd"),
                                  std::string("/etc/passwd")}) {
    TP p = make(bad, "");
    absl::Status s = InlineExternalData(&p, dir, kMax, "initializer 'w'");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr(bad));
  }
  TP shorter = make("short.bin", "");
  absl::Status s = InlineExternalData(&shorter, dir, kMax, "w");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("too short"));
  TP wrong_length = make("short.bin", "4");
  s = InlineExternalData(&wrong_length, dir, kMax, "w");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("length 4"));
  TP missing = make("nope.bin", "");
  EXPECT_EQ(InlineExternalData(&missing, dir, kMax, "w").code(),
            absl::StatusCode::kNotFound);
  TP no_dir = make("short.bin", "");
  EXPECT_EQ(InlineExternalData(&no_dir, "", kMax, "w").code(),
            absl::StatusCode::kInvalidArgument);
}

// A symbolic link inside the model's folder must not make kiln read a file
// outside it: not a linked file (`w.bin -> /outside/secret`), not a file in a
// linked directory (`linked/secret`). Links that stay inside are followed;
// a directory or FIFO is not data.
TEST(ExternalDataTest, SymlinksMayNotLeaveTheModelFolder) {
  const std::string root = TmpDir() + "/symlinks";
  const std::string model = root + "/model";
  const std::string outside = root + "/outside";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(model + "/sub");
  std::filesystem::create_directories(outside);
  WriteFile(outside + "/secret", RawBytes<float>({6.0f, 7.0f}));
  WriteFile(model + "/sub/inside.bin", RawBytes<float>({1.0f, 2.0f}));
  std::filesystem::create_symlink(outside + "/secret", model + "/w.bin");
  std::filesystem::create_symlink(outside, model + "/linked");
  std::filesystem::create_symlink("../../outside/secret", model + "/sub/rel.bin");
  std::filesystem::create_symlink("sub/inside.bin", model + "/ok.bin");
  ASSERT_EQ(::mkfifo((model + "/fifo").c_str(), 0600), 0);
  auto make = [](const std::string& location) {
    TP p = Proto("w", TP::FLOAT, {2});
    p.set_data_location(TP::EXTERNAL);
    auto* e = p.add_external_data();
    e->set_key("location");
    e->set_value(location);
    return p;
  };
  for (const char* escape : {"w.bin", "linked/secret", "sub/rel.bin"}) {
    TP p = make(escape);
    absl::Status s = InlineExternalData(&p, model, kMax, "initializer 'w'");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << escape << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("outside the model's folder")) << escape;
    EXPECT_TRUE(p.raw_data().empty()) << escape;
  }
  for (const char* not_data : {"sub", "fifo"}) {
    TP p = make(not_data);
    absl::Status s = InlineExternalData(&p, model, kMax, "w");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << not_data << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("not a regular file")) << not_data;
  }
  TP ok = make("ok.bin");
  ASSERT_TRUE(InlineExternalData(&ok, model, kMax, "w").ok());
  absl::StatusOr<ir::Tensor> t = TensorFromProto(ok, kMax, "w");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->data<float>()[1], 2.0f);
  // The model's folder itself may be reached through a link.
  std::filesystem::create_symlink(model, root + "/model_link");
  TP via_link = make("sub/inside.bin");
  EXPECT_TRUE(InlineExternalData(&via_link, root + "/model_link", kMax, "w").ok());
}

TEST(TensorFilesTest, SerializeRoundTrip) {
  ir::Tensor i = ir::Tensor::FromVector<int64_t>({3}, {1, -2, 3});
  absl::StatusOr<std::string> bytes = SerializeTensor(i, "ints");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  TP proto;
  ASSERT_TRUE(proto.ParseFromString(*bytes));
  EXPECT_EQ(proto.name(), "ints");
  EXPECT_EQ(proto.data_type(), TP::INT64);
  absl::StatusOr<ir::Tensor> back = ParseTensorBytes(*bytes, "<bytes>");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToInt64Vector(), (std::vector<int64_t>{1, -2, 3}));

  ir::Tensor h(DType::kF16, {2});
  h.data<ir::Float16>()[0].bits = 0x3C00;
  h.data<ir::Float16>()[1].bits = 0x7C00;  // +inf
  bytes = SerializeTensor(h, "h");
  ASSERT_TRUE(bytes.ok());
  back = ParseTensorBytes(*bytes, "<bytes>");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype(), DType::kF16);
  EXPECT_EQ(back->GetAsDouble(0), 1.0);
  EXPECT_TRUE(std::isinf(back->GetAsDouble(1)));
}

TEST(TensorFilesTest, GarbageBytesNameTheSource) {
  absl::Status s = ParseTensorBytes("\xff\xff\xff\xff", "input_0.pb").status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("input_0.pb"));
  s = LoadTensorFile("/nonexistent/x.pb").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("/nonexistent/x.pb"));
}

TEST(TensorFilesTest, LoadsOnnxConformanceData) {
  const std::string dir =
      "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0";
  std::ifstream probe(dir + "/input_0.pb");
  if (!probe) GTEST_SKIP() << "libonnx-testdata not installed: " << dir;
  absl::StatusOr<ir::Tensor> in = LoadTensorFile(dir + "/input_0.pb");
  absl::StatusOr<ir::Tensor> out = LoadTensorFile(dir + "/output_0.pb");
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(in->dtype(), DType::kF32);
  EXPECT_EQ(in->shape(), (ir::Shape{3, 4, 5}));
  ASSERT_EQ(out->shape(), in->shape());
  for (int64_t i = 0; i < in->num_elements(); ++i) {
    EXPECT_EQ(out->data<float>()[i], std::fabs(in->data<float>()[i]));
  }
}

// ONNX's test data stores bf16 tensors as UINT16 holding the bits; read for a
// bf16 value, the file is bf16, and its values are the f32 input's within one
// bf16 ulp (2^-7 relative: this data truncates, see the conformance lists).
// Read without a declared type it stays refused.
TEST(TensorFilesTest, Uint16DataOfABf16ValueReadsAsBf16) {
  const std::string dir =
      "/usr/share/libonnx-testdata/data/node/test_cast_FLOAT_to_BFLOAT16/test_data_set_0";
  std::ifstream probe(dir + "/output_0.pb");
  if (!probe) GTEST_SKIP() << "libonnx-testdata not installed: " << dir;
  EXPECT_EQ(LoadTensorFile(dir + "/output_0.pb").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(LoadTensorFile(dir + "/output_0.pb", DType::kF32).status().code(),
            absl::StatusCode::kUnimplemented);
  absl::StatusOr<ir::Tensor> in = LoadTensorFile(dir + "/input_0.pb", DType::kF32);
  absl::StatusOr<ir::Tensor> out = LoadTensorFile(dir + "/output_0.pb", DType::kBF16);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->dtype(), DType::kBF16);
  ASSERT_EQ(out->shape(), in->shape());
  for (int64_t i = 0; i < in->num_elements(); ++i) {
    const double x = in->GetAsDouble(i), y = out->GetAsDouble(i);
    if (std::isnan(x) || std::isinf(x)) {
      EXPECT_EQ(std::isnan(y), std::isnan(x)) << i;
      continue;
    }
    EXPECT_LE(std::fabs(y - x), std::ldexp(std::fabs(x), -7)) << i << ": " << x << " -> " << y;
  }
}

}  // namespace
}  // namespace kiln::frontend::onnx_internal
