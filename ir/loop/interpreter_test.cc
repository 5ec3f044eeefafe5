// Tests of the loop IR interpreter against values computed here by direct
// loops: softmax (reductions + epilogue), transposes through strided buffers,
// argmax/welford, integer semantics and error paths.
#include "ir/loop/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/text.h"

namespace kiln::ir::loop {
namespace {

using ::testing::HasSubstr;

Tensor Iota(Shape shape, float scale, float offset) {
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data<float>()[i] = offset + scale * static_cast<float>((i * 7) % 11);
  }
  return t;
}

TEST(LoopInterpreter, SoftmaxMatchesDirectLoops) {
  constexpr int R = 3, C = 5;
  LoopProgram p;
  const int32_t x = p.AddBuffer("x", DType::kF32, {R, C}, BufferKind::kInput);
  const int32_t y = p.AddBuffer("y", DType::kF32, {R, C}, BufferKind::kOutput);
  KernelBuilder b(&p, "softmax", {R, C}, {C});
  const int32_t a = b.Load(x, b.i(0) * C + b.r(0));
  const int32_t mx = b.Reduce(ReduceKind::kMax, a);
  const int32_t s = b.Reduce(
      ReduceKind::kSum, b.Unary(OpCode::kExp, b.Binary(OpCode::kSub, a, mx)));
  const int32_t xi = b.Load(x, b.i(0) * C + b.i(1));
  const int32_t e = b.Unary(OpCode::kExp, b.Binary(OpCode::kSub, xi, mx));
  b.Store(y, b.i(0) * C + b.i(1), b.Binary(OpCode::kDiv, e, s));

  const Tensor in = Iota({R, C}, 0.75f, -2.0f);
  absl::StatusOr<std::map<std::string, Tensor>> out =
      RunLoopProgram(p, {{"x", in}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& got = out->at("y");
  ASSERT_EQ(got.shape(), (Shape{R, C}));
  for (int r = 0; r < R; ++r) {
    double m = -1e30, sum = 0;
    for (int c = 0; c < C; ++c) m = std::max(m, double(in.data<float>()[r * C + c]));
    for (int c = 0; c < C; ++c) sum += std::exp(in.data<float>()[r * C + c] - m);
    double row = 0;
    for (int c = 0; c < C; ++c) {
      const double want = std::exp(in.data<float>()[r * C + c] - m) / sum;
      EXPECT_NEAR(got.data<float>()[r * C + c], want, 1e-6) << r << "," << c;
      row += got.data<float>()[r * C + c];
    }
    EXPECT_NEAR(row, 1.0, 1e-5);
  }
}

TEST(LoopInterpreter, TransposeThroughIndexAndStrides) {
  // y[j, i] = x[i, j] written two ways: by index arithmetic into a row-major
  // buffer, and by a row-major index into a column-major buffer.
  constexpr char kText[] = R"(
    buffer %x: i32[2,3] input
    buffer %y: i32[3,2] output
    buffer %z: i32[3,2] strides=[1, 3] output
    kernel t over (i0: 3, i1: 2) {
      %0 = load %x[i1*3 + i0]
      store %y[i0*2 + i1], %0
    }
    kernel u over (i0: 6) {
      %0 = load %x[i0]
      store %z[i0], %0
    }
  )";
  absl::StatusOr<LoopProgram> p = ParseProgram(kText);
  ASSERT_TRUE(p.ok()) << p.status();
  Tensor x(DType::kI32, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<int32_t>()[i] = 10 * (i + 1);
  absl::StatusOr<std::map<std::string, Tensor>> out = RunLoopProgram(*p, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  for (const char* name : {"y", "z"}) {
    const Tensor& t = out->at(name);
    ASSERT_EQ(t.shape(), (Shape{3, 2}));
    for (int j = 0; j < 3; ++j) {
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(t.data<int32_t>()[j * 2 + i], x.data<int32_t>()[i * 3 + j])
            << name << " at " << j << "," << i;
      }
    }
  }
}

TEST(LoopInterpreter, ArgmaxWelfordAndTies) {
  constexpr char kText[] = R"(
    buffer %x: f32[2,4] input
    buffer %first: i64[2] output
    buffer %last: i64[2] output
    buffer %mean: f32[2] output
    buffer %var: f32[2] output
    kernel k over (i0: 2) reduce (r0: 4) {
      %0 = load %x[i0*4 + r0]
      %1 = reduce argmax %0
      %2 = reduce argmax_last %0
      %3 = reduce welford_mean %0
      %4 = reduce welford_var %0
      store %first[i0], %1
      store %last[i0], %2
      store %mean[i0], %3
      store %var[i0], %4
    }
  )";
  absl::StatusOr<LoopProgram> p = ParseProgram(kText);
  ASSERT_TRUE(p.ok()) << p.status();
  const Tensor x = Tensor::FromVector<float>({2, 4}, {1, 5, 5, 2, -1, -3, -2, -4});
  absl::StatusOr<std::map<std::string, Tensor>> out = RunLoopProgram(*p, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("first").data<int64_t>()[0], 1);
  EXPECT_EQ(out->at("last").data<int64_t>()[0], 2);
  EXPECT_EQ(out->at("first").data<int64_t>()[1], 0);
  EXPECT_EQ(out->at("last").data<int64_t>()[1], 0);
  // Row 0: mean 13/4, var = mean of squared deviations = 3.1875.
  EXPECT_NEAR(out->at("mean").data<float>()[0], 3.25, 1e-6);
  EXPECT_NEAR(out->at("var").data<float>()[0],
              (2.25 * 2.25 + 1.75 * 1.75 * 2 + 1.25 * 1.25) / 4, 1e-5);
  EXPECT_NEAR(out->at("mean").data<float>()[1], -2.5, 1e-6);
  EXPECT_NEAR(out->at("var").data<float>()[1], 1.25, 1e-6);
}

TEST(LoopInterpreter, IotaMasksCastsAndIntegerOps) {
  constexpr char kText[] = R"(
    buffer %y: i64[6] output
    buffer %f: f32[6] output
    buffer %b: bool[6] output
    kernel k over (i0: 6) {
      %0 = index [i0 - 2] : i64
      %1 = constant 3 : i64
      %2 = mod %0, %1
      %3 = div %0, %1
      %4 = mul %2, %1
      %5 = add %4, %3
      store %y[i0], %5
      %6 = constant 0 : i64
      %7 = lt %0, %6
      %8 = cast %0 : f32
      %9 = constant 0.5 : f32
      %10 = mul %8, %9
      %11 = round %10
      %12 = select %7, %9, %11
      store %f[i0], %12
      store %b[i0], %7
    }
  )";
  absl::StatusOr<LoopProgram> p = ParseProgram(kText);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::map<std::string, Tensor>> out = RunLoopProgram(*p, {});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 0; i < 6; ++i) {
    const int64_t v = i - 2;
    const int64_t floor_mod = ((v % 3) + 3) % 3;
    const int64_t trunc_div = v / 3;
    EXPECT_EQ(out->at("y").data<int64_t>()[i], floor_mod * 3 + trunc_div) << i;
    // round half to even: 0.5 -> 0, 1.0 -> 1, 1.5 -> 2.
    const float want = v < 0 ? 0.5f : std::nearbyint(v * 0.5f);
    EXPECT_EQ(out->at("f").data<float>()[i], want) << i;
    EXPECT_EQ(out->at("b").data<bool>()[i], v < 0) << i;
  }
}

TEST(LoopInterpreter, FloatToNarrowIntegersTruncatesAndSaturates) {
  constexpr char kText[] = R"(
    buffer %x: f32[12] input
    buffer %s: i8[12] output
    buffer %u: u8[12] output
    buffer %w: u8[12] output
    kernel k over (i0: 12) {
      %0 = load %x[i0]
      %1 = cast %0 : i8
      store %s[i0], %1
      %2 = cast %0 : u8
      store %u[i0], %2
      %3 = cast %0 : i32
      %4 = cast %3 : u8
      store %w[i0], %4
    }
  )";
  absl::StatusOr<LoopProgram> p = ParseProgram(kText);
  ASSERT_TRUE(p.ok()) << p.status();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::FromVector<float>(
      {12}, {127.9f, -128.9f, 128.0f, 255.5f, 256.0f, -1.5f, -0.5f, 300.7f, nan, inf, -inf, 1e20f});
  absl::StatusOr<std::map<std::string, Tensor>> out = RunLoopProgram(*p, {{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status();
  // Float to i8 / u8: truncated toward zero, NaN 0, saturated.
  const std::vector<int> want_s = {127, -128, 127, 127, 127, -1, 0, 127, 0, 127, -128, 127};
  const std::vector<int> want_u = {127, 0, 128, 255, 255, 0, 0, 255, 0, 255, 0, 255};
  // i32 to u8 wraps (two's complement): 256 -> 0, -1 -> 255, 300 -> 44.
  const std::vector<int> want_w = {127, 128, 128, 255, 0, 255, 0, 44, 0};
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(out->at("s").data<int8_t>()[i], want_s[i]) << i;
    EXPECT_EQ(out->at("u").data<uint8_t>()[i], want_u[i]) << i;
    if (i < 9) {
      EXPECT_EQ(out->at("w").data<uint8_t>()[i], want_w[i]) << i;
    }
  }
}

TEST(LoopInterpreter, EmptyReductionGivesIdentity) {
  constexpr char kText[] = R"(
    buffer %x: f32[2,0] input
    buffer %s: f32[2] output
    kernel k over (i0: 2) reduce (r0: 0) {
      %0 = load %x[i0*0 + r0]
      %1 = reduce sum %0
      store %s[i0], %1
    }
  )";
  absl::StatusOr<LoopProgram> p = ParseProgram(kText);
  ASSERT_TRUE(p.ok()) << p.status();
  Tensor s_init(DType::kF32, {2, 0});
  absl::StatusOr<std::map<std::string, Tensor>> out =
      RunLoopProgram(*p, {{"x", s_init}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("s").data<float>()[0], 0.0f);
  EXPECT_EQ(out->at("s").data<float>()[1], 0.0f);
}

TEST(LoopInterpreter, Errors) {
  constexpr char kDiv[] = R"(
    buffer %x: i64[2] input
    buffer %y: i64[2] output
    kernel k over (i0: 2) {
      %0 = load %x[i0]
      %1 = constant 0 : i64
      %2 = div %0, %1
      store %y[i0], %2
    }
  )";
  absl::StatusOr<LoopProgram> p = ParseProgram(kDiv);
  ASSERT_TRUE(p.ok()) << p.status();
  const Tensor x = Tensor::FromVector<int64_t>({2}, {1, 2});
  EXPECT_THAT(RunLoopProgram(*p, {{"x", x}}).status().message(),
              HasSubstr("kernel 'k' op #2 (div): integer division by zero"));
  EXPECT_THAT(RunLoopProgram(*p, {}).status().message(),
              HasSubstr("input buffer 'x' is not bound"));
  const Tensor wrong = Tensor::FromVector<int64_t>({3}, {1, 2, 3});
  EXPECT_THAT(RunLoopProgram(*p, {{"x", wrong}}).status().message(),
              HasSubstr("buffer 'x' is i64[2], bound to i64[3]"));

  absl::StatusOr<LoopProgram> ext = ParseProgram(
      "buffer %a: f32[1] input\nbuffer %b: f32[1] output\n"
      "extern e call \"onednn.matmul\"(%a) -> (%b)");
  ASSERT_TRUE(ext.ok()) << ext.status();
  EXPECT_EQ(RunLoopProgram(*ext, {{"a", Tensor(DType::kF32, {1})}})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);

  absl::StatusOr<LoopProgram> big =
      ParseProgram("buffer %a: f32[100000,100000] output");
  ASSERT_TRUE(big.ok());
  EXPECT_THAT(RunLoopProgram(*big, {}).status().message(),
              HasSubstr("more than the interpreter's limit"));

  absl::StatusOr<LoopProgram> oob = ParseProgram(
      "buffer %a: f32[4] output\nkernel k over (i0: 5) {\n"
      "  %0 = constant 1.0 : f32\n  store %a[i0], %0\n}");
  ASSERT_TRUE(oob.ok());
  EXPECT_THAT(RunLoopProgram(*oob, {}).status().message(),
              HasSubstr("outside buffer 'a'"));
}

// Rows of a [5, 3] table picked by i64 indices in [-5, 5): negative ones
// wrap once, as ONNX Gather.
LoopProgram GatherRows() {
  LoopProgram p;
  const int32_t w = p.AddBuffer("w", DType::kF32, {5, 3}, BufferKind::kInput);
  const int32_t n = p.AddBuffer("n", DType::kI64, {4}, BufferKind::kInput);
  const int32_t y = p.AddBuffer("y", DType::kF32, {4, 3}, BufferKind::kOutput);
  KernelBuilder b(&p, "gather", {4, 3});
  const int32_t idx = b.Load(n, b.i(0));
  b.Store(y, b.i(0) * 3 + b.i(1), b.LoadIndirect(w, b.i(1), idx, 5, 3));
  return p;
}

Tensor I64(std::vector<int64_t> v) {
  Tensor t(DType::kI64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

TEST(LoopInterpreter, LoadIndirectWrapsNegativeIndices) {
  const Tensor w = Iota({5, 3}, 1.0f, 0.0f);
  const std::vector<int64_t> idx = {4, -1, 0, -5};
  absl::StatusOr<std::map<std::string, Tensor>> out =
      RunLoopProgram(GatherRows(), {{"w", w}, {"n", I64(idx)}});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int r = 0; r < 4; ++r) {
    const int64_t row = idx[r] < 0 ? idx[r] + 5 : idx[r];
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(out->at("y").data<float>()[r * 3 + c], w.data<float>()[row * 3 + c])
          << r << "," << c;
    }
  }
}

TEST(LoopInterpreter, LoadIndirectOutOfRangeIsAnErrorNamingTheKernel) {
  const Tensor w = Iota({5, 3}, 1.0f, 0.0f);
  for (int64_t bad : {int64_t{5}, int64_t{-6}, int64_t{1} << 40}) {
    absl::StatusOr<std::map<std::string, Tensor>> out =
        RunLoopProgram(GatherRows(), {{"w", w}, {"n", I64({0, bad, 1, 2})}});
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("kernel 'gather'"));
    EXPECT_THAT(out.status().message(), HasSubstr("out of range [-5, 5)"));
  }
}

// y starts as a copy of `data`, then every (row n[i0], column i1) combines
// u[i0, i1] in iteration order.
LoopProgram ScatterRows(const std::string& combine, const std::string& dtype) {
  absl::StatusOr<LoopProgram> p = ParseProgram(absl::StrCat(
      "buffer %d: ", dtype, "[5,3] input\n"
      "buffer %u: ", dtype, "[4,3] input\n"
      "buffer %n: i64[4] input\n"
      "buffer %y: ", dtype, "[5,3] output\n"
      "kernel copy over (i0: 5, i1: 3) {\n"
      "  %0 = load %d[i0*3 + i1]\n  store %y[i0*3 + i1], %0\n}\n"
      "kernel scatter over (i0: 4, i1: 3) {\n"
      "  %0 = load %u[i0*3 + i1]\n  %1 = load %n[i0]\n"
      "  store_indirect %y[i1], %1, stride 3, extent 5, combine ", combine,
      ", %0\n}\n"));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : LoopProgram();
}

TEST(LoopInterpreter, StoreIndirectCombinesInIterationOrder) {
  const Tensor d = Iota({5, 3}, 1.0f, -3.0f);
  const Tensor u = Iota({4, 3}, 0.5f, -1.0f);
  const std::vector<int64_t> idx = {1, -4, 4, 0};  // -4 wraps to 1: a duplicate
  for (const char* combine : {"none", "add", "mul", "max", "min"}) {
    absl::StatusOr<std::map<std::string, Tensor>> out = RunLoopProgram(
        ScatterRows(combine, "f32"), {{"d", d}, {"u", u}, {"n", I64(idx)}});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> want(d.data<float>(), d.data<float>() + 15);
    for (int r = 0; r < 4; ++r) {
      const int64_t row = idx[r] < 0 ? idx[r] + 5 : idx[r];
      for (int c = 0; c < 3; ++c) {
        float& e = want[row * 3 + c];
        const float v = u.data<float>()[r * 3 + c];
        const std::string m = combine;
        e = m == "none" ? v : m == "add" ? e + v : m == "mul" ? e * v
            : m == "max" ? std::max(e, v) : std::min(e, v);
      }
    }
    for (int i = 0; i < 15; ++i) {
      EXPECT_EQ(out->at("y").data<float>()[i], want[i]) << combine << " " << i;
    }
  }
}

TEST(LoopInterpreter, StoreIndirectIntegersWrap) {
  Tensor d(DType::kI32, {5, 3}), u(DType::kI32, {4, 3});
  for (int i = 0; i < 15; ++i) d.data<int32_t>()[i] = 2147483647 - i;
  for (int i = 0; i < 12; ++i) u.data<int32_t>()[i] = i + 1;
  absl::StatusOr<std::map<std::string, Tensor>> out = RunLoopProgram(
      ScatterRows("add", "i32"), {{"d", d}, {"u", u}, {"n", I64({0, 0, 2, 2})}});
  ASSERT_TRUE(out.ok()) << out.status();
  // Row 0 gets u rows 0 and 1 added: 2147483647 + 1 + 4 wraps.
  EXPECT_EQ(out->at("y").data<int32_t>()[0],
            static_cast<int32_t>(static_cast<uint32_t>(2147483647u + 5u)));
  EXPECT_EQ(out->at("y").data<int32_t>()[3], 2147483647 - 3);
}

TEST(LoopInterpreter, StoreIndirectOutOfRangeIsAnErrorNamingTheKernel) {
  const Tensor d = Iota({5, 3}, 1.0f, 0.0f);
  const Tensor u = Iota({4, 3}, 1.0f, 0.0f);
  for (int64_t bad : {int64_t{5}, int64_t{-6}, int64_t{1} << 40}) {
    absl::StatusOr<std::map<std::string, Tensor>> out = RunLoopProgram(
        ScatterRows("none", "f32"), {{"d", d}, {"u", u}, {"n", I64({0, 1, bad, 2})}});
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("kernel 'scatter'"));
    EXPECT_THAT(out.status().message(), HasSubstr("out of range [-5, 5)"));
  }
}

}  // namespace
}  // namespace kiln::ir::loop
