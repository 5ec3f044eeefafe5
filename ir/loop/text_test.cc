// Tests of the loop IR text form: exact golden output, hand-written input,
// round trips, errors with line:col, and robustness on prefixes/mutations.
#include "ir/loop/text.h"

#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/verifier.h"
#include "testing/filecheck.h"

namespace kiln::ir::loop {
namespace {

using ::testing::HasSubstr;

// Softmax over rows of a 4x8 input into a transposed (column-major) output,
// plus an elementwise kernel using most op forms and an extern call.
LoopProgram KitchenSink() {
  LoopProgram p;
  const int32_t x = p.AddBuffer("x", DType::kF32, {4, 8}, BufferKind::kInput);
  const int32_t y = p.AddBuffer("y", DType::kF32, {4, 8}, BufferKind::kOutput,
                                {1, 4});
  const int32_t w = p.AddBuffer("w", DType::kF32, {8, 2}, BufferKind::kConstant);
  const int32_t z = p.AddBuffer("z", DType::kF32, {4, 2}, BufferKind::kOutput);
  const int32_t m = p.AddBuffer("m", DType::kI64, {4}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "k0", {4, 8}, {8});
    b.kernel().description = "softmax";
    b.kernel().ops = {"/attn/Softmax"};
    b.kernel().vec = {VecStatus::Kind::kVectorized, ""};
    const int32_t a = b.Load(x, b.i(0) * 8 + b.r(0));
    const int32_t mx = b.Reduce(ReduceKind::kMax, a);
    const int32_t e = b.Unary(OpCode::kExp, b.Binary(OpCode::kSub, a, mx));
    const int32_t s = b.Reduce(ReduceKind::kSum, e);
    const int32_t xi = b.Load(x, b.i(0) * 8 + b.i(1));
    const int32_t num = b.Unary(OpCode::kExp, b.Binary(OpCode::kSub, xi, mx));
    b.Store(y, b.i(0) + b.i(1) * 4, b.Binary(OpCode::kDiv, num, s));
  }
  {
    KernelBuilder b(&p, "k1", {4}, {8});
    b.kernel().vec = {VecStatus::Kind::kScalar, "argmax \"needs\" a mask"};
    const int32_t a = b.Load(x, b.i(0) * 8 + b.r(0));
    const int32_t idx = b.Index(b.i(0) - 1, DType::kI64);
    const int32_t zero = b.Constant(DType::kI64, 0);
    const int32_t pos = b.Binary(OpCode::kGe, idx, zero);
    const int32_t half = b.Constant(DType::kF32, 0.5);
    const int32_t sel = b.Select(pos, a, half);
    const int32_t am = b.Reduce(ReduceKind::kArgMaxLast, sel);
    const int32_t c = b.Cast(b.Cast(am, DType::kF32), DType::kI64);
    b.Store(m, b.i(0), c);
  }
  Kernel ext;
  ext.name = "k2";
  ext.description = "matmul";
  ext.kind = Kernel::Kind::kExtern;
  ext.call.op = "onednn.matmul";
  ext.call.inputs = {x, w};
  ext.call.outputs = {z};
  ext.call.attrs["alpha"] = 1.5;
  ext.call.attrs["transpose_b"] = int64_t{0};
  ext.call.attrs["algo"] = std::string("brgemm");
  ext.call.attrs["dims"] = std::vector<int64_t>{4, 8, 2};
  ext.call.attrs["scales"] = std::vector<double>{};
  ext.call.attrs["odd key"] = std::vector<double>{-0.25, 1e-30};
  ext.ops = {"/MatMul", "/Add"};
  p.kernels.push_back(ext);
  return p;
}

constexpr char kGolden[] = R"(buffer %x: f32[4,8] input
buffer %y: f32[4,8] strides=[1, 4] output
buffer %w: f32[8,2] constant
buffer %z: f32[4,2] output
buffer %m: i64[4] output
kernel k0 "softmax" over (i0: 4, i1: 8) reduce (r0: 8) ops=["/attn/Softmax"] vec=vectorized {
  %0 = load %x[i0*8 + r0]
  %1 = reduce max %0
  %2 = sub %0, %1
  %3 = exp %2
  %4 = reduce sum %3
  %5 = load %x[i0*8 + i1]
  %6 = sub %5, %1
  %7 = exp %6
  %8 = div %7, %4
  store %y[i0 + i1*4], %8
}
kernel k1 over (i0: 4) reduce (r0: 8) vec=scalar("argmax \"needs\" a mask") {
  %0 = load %x[i0*8 + r0]
  %1 = index [i0 - 1] : i64
  %2 = constant 0 : i64
  %3 = ge %1, %2
  %4 = constant 0.5 : f32
  %5 = select %3, %0, %4
  %6 = reduce argmax_last %5
  %7 = cast %6 : f32
  %8 = cast %7 : i64
  store %m[i0], %8
}
extern k2 "matmul" call "onednn.matmul"(%x, %w) -> (%z) {algo="brgemm", alpha=1.5, dims=[4, 8, 2], "odd key"=floats[-0.25, 1e-30], scales=floats[], transpose_b=0} ops=["/MatMul", "/Add"]
)";

TEST(LoopText, GoldenPrint) {
  const LoopProgram p = KitchenSink();
  ASSERT_TRUE(VerifyProgram(p).ok()) << VerifyProgram(p);
  EXPECT_EQ(PrintProgram(p), kGolden);
}

TEST(LoopText, RoundTripPrintsIdentically) {
  absl::StatusOr<LoopProgram> p = ParseProgram(kGolden);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
  EXPECT_EQ(PrintProgram(*p), kGolden);
  // Spot-check the parsed structure, not just the text.
  ASSERT_EQ(p->kernels.size(), 3u);
  const Kernel& k0 = p->kernels[0];
  EXPECT_EQ(k0.ranges, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(k0.reduction_ranges, (std::vector<int64_t>{8}));
  EXPECT_EQ(k0.body[0].index, Var(0) * 8 + Var(2));
  EXPECT_EQ(k0.body[1].reduce, ReduceKind::kMax);
  EXPECT_EQ(k0.body[8].dtype, DType::kF32);
  EXPECT_EQ(p->kernels[1].body[6].dtype, DType::kI64);
  EXPECT_EQ(p->kernels[1].body[4].fvalue, 0.5);
  EXPECT_EQ(p->buffers[1].strides, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(std::get<double>(p->kernels[2].call.attrs.at("alpha")), 1.5);
}

TEST(LoopText, LoadIndirectRoundTrips) {
  constexpr char kText[] = R"(buffer %w: f32[5,3] constant
buffer %n: i32[4] input
buffer %y: f32[4,3] output
kernel g over (i0: 4, i1: 3) {
  %0 = load %n[i0]
  %1 = load_indirect %w[i1], %0, stride 3, extent 5
  store %y[i0*3 + i1], %1
}
)";
  absl::StatusOr<LoopProgram> p = ParseProgram(kText);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
  EXPECT_EQ(PrintProgram(*p), kText);
  const Op& op = p->kernels[0].body[1];
  EXPECT_EQ(op.code, OpCode::kLoadIndirect);
  EXPECT_EQ(op.args, (std::vector<int32_t>{0}));
  EXPECT_EQ(op.stride, 3);
  EXPECT_EQ(op.extent, 5);
  EXPECT_EQ(op.dtype, DType::kF32);
  absl::StatusOr<LoopProgram> bad = ParseProgram(
      "buffer %w: f32[5] input\nkernel g over (i0: 4) {\n"
      "  %0 = index [i0] : i64\n"
      "  %1 = load_indirect %w[0], %0, extent 5\n}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("4:33: expected 'stride'"));
}

TEST(LoopText, StoreIndirectRoundTripsWithGoldenText) {
  constexpr char kText[] = R"(
    buffer %u: f32[4,3] input
    buffer %n: i64[4] input
    buffer %y: f32[5,3] output
    kernel scatter over (i0: 4, i1: 3) {
      %upd = load %u[i0*3 + i1]
      %row = load %n[i0]
      store_indirect %y[i1], %row, stride 3, extent 5, combine add, %upd
    }
  )";
  absl::StatusOr<LoopProgram> p = ParseProgram(kText);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
  const std::string printed = PrintProgram(*p);
  EXPECT_TRUE(testing::RunFileCheck(printed, R"(
CHECK: kernel scatter over (i0: 4, i1: 3) {
CHECK-NEXT:   %0 = load %u[i0*3 + i1]
CHECK-NEXT:   %1 = load %n[i0]
CHECK-NEXT:   store_indirect %y[i1], %1, stride 3, extent 5, combine add, %0
CHECK-NEXT: }
)").ok()) << printed;
  const Op& op = p->kernels[0].body[2];
  EXPECT_EQ(op.code, OpCode::kStoreIndirect);
  EXPECT_EQ(op.args, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(op.combine, StoreCombine::kAdd);
  EXPECT_FALSE(op.has_result());
  absl::StatusOr<LoopProgram> again = ParseProgram(printed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(PrintProgram(*again), printed);
  for (const char* mode : {"none", "mul", "max", "min"}) {
    std::string t = printed;
    t.replace(t.find("combine add"), 11, std::string("combine ") + mode);
    absl::StatusOr<LoopProgram> q = ParseProgram(t);
    ASSERT_TRUE(q.ok()) << mode << ": " << q.status();
    EXPECT_EQ(PrintProgram(*q), t);
  }
  absl::StatusOr<LoopProgram> bad = ParseProgram(
      "buffer %y: f32[5] output\nkernel g over (i0: 4) {\n"
      "  %0 = index [i0] : i64\n"
      "  %1 = constant 1 : f32\n"
      "  store_indirect %y[0], %0, stride 1, extent 5, combine sum, %1\n}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("expected a combine mode"));
  absl::StatusOr<LoopProgram> with_result = ParseProgram(
      "buffer %y: f32[5] output\nkernel g over (i0: 4) {\n"
      "  %0 = index [i0] : i64\n"
      "  %1 = constant 1 : f32\n"
      "  %2 = store_indirect %y[0], %0, stride 1, extent 5, combine add, %1\n}\n");
  ASSERT_FALSE(with_result.ok());
  EXPECT_THAT(with_result.status().message(), HasSubstr("has no result"));
}

TEST(LoopText, HandWrittenNamesAreRenumbered) {
  constexpr char kText[] = R"(
    # Comments and free names are fine.
    buffer %in: f16[2,3] input
    buffer %out: f16[3,2] output
    kernel transpose "t" over (row: 3, col: 2) {
      %v = load %in[col*3 + row]
      %w = neg %v
      %c = constant -inf : f16
      %big = max %w, %c
      store %out[row*2 + col], %big
    }
  )";
  absl::StatusOr<LoopProgram> p = ParseProgram(kText);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(VerifyProgram(*p).ok()) << VerifyProgram(*p);
  const std::string printed = PrintProgram(*p);
  EXPECT_TRUE(testing::RunFileCheck(printed, R"(
    CHECK: buffer %in: f16[2,3] input
    CHECK: kernel transpose "t" over (i0: 3, i1: 2) {
    CHECK-NEXT: %0 = load %in[i1*3 + i0]
    CHECK-NEXT: %1 = neg %0
    CHECK-NEXT: %2 = constant -inf : f16
    CHECK-NEXT: %3 = max %1, %2
    CHECK-NEXT: store %out[i0*2 + i1], %3
    CHECK-NEXT: }
  )").ok()) << printed;
}

TEST(LoopText, FloatConstantsRoundTripBitExactly) {
  for (double v : {0.1, -2.5e-300, 1e300, 3.0, 1.0 / 3.0, 0.0, -0.0, 123456789.0}) {
    LoopProgram p;
    KernelBuilder b(&p, "k", {});
    b.Constant(DType::kF64, v);
    absl::StatusOr<LoopProgram> back = ParseProgram(PrintProgram(p));
    ASSERT_TRUE(back.ok()) << back.status();
    const double got = back->kernels[0].body[0].fvalue;
    EXPECT_EQ(std::signbit(got), std::signbit(v));
    EXPECT_EQ(got, v) << PrintProgram(p);
  }
  LoopProgram p;
  KernelBuilder b(&p, "k", {});
  b.Constant(DType::kF32, std::nan(""));
  absl::StatusOr<LoopProgram> back = ParseProgram(PrintProgram(p));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isnan(back->kernels[0].body[0].fvalue));
}

TEST(LoopText, ErrorsNameLineColumnAndExpectation) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"buffr %x: f32[1] input", "1:1: expected 'buffer', 'kernel' or 'extern'"},
      {"buffer %x: f33[1] input", "1:12: expected a dtype"},
      {"buffer %x: f32[1] inptu", "1:19: expected a buffer kind"},
      {"buffer %x: f32[1] input\nbuffer %x: f32[1] input",
       "2:8: buffer '%x' is already defined"},
      {"buffer %a.b: f32[1] input", "buffer name '%a.b' is not an identifier"},
      {"buffer %x: f32[-1] input", "negative or too large shape"},
      {"buffer %x: f32[9223372036854775807,4] input", "too large shape"},
      {"kernel k over (i0: 4) {\n  %0 = load %nope[i0]\n}",
       "2:13: unknown buffer '%nope'"},
      {"buffer %x: f32[4] input\nkernel k over (i0: 4) {\n  %0 = load %x[j0]\n}",
       "3:16: unknown loop variable 'j0'"},
      {"kernel k over (i0: 4) {\n  %0 = exp %1\n}",
       "2:12: value '%1' is not defined before this use"},
      {"kernel k over (i0: 4) {\n  %0 = constant 1 : f32\n  %0 = neg %0\n}",
       "3:3: value '%0' is already defined"},
      {"kernel k over (i0: 4) {\n  %0 = frobnicate %1\n}",
       "2:8: unknown op 'frobnicate'"},
      {"kernel k over (i0: 4) {\n  exp\n}", "needs a result"},
      {"kernel k over (i0: 4) {\n  %0 = constant 1.5 : i64\n}",
       "a i64 constant must be an integer"},
      {"kernel k over (i0: 4, i0: 2) {}", "loop variable 'i0' is already defined"},
      {"kernel k over (min: 4) {}", "cannot name loop variables"},
      {"kernel k over (i0: 4) {}\nkernel k over (i0: 4) {}",
       "2:8: kernel 'k' is already defined"},
      {"kernel k over (i0: 4) vec=fast {}", "expected unchecked, vectorized"},
      {"kernel k over (i0: 4) {\n  %0 = constant 1 : f32\n  %1 = reduce mean %0\n}",
       "3:15: expected a reduction"},
      {"kernel k over (i0: 4) {\n  %0 = constant 1 : f32\n  %1 = add %0 %0\n}",
       "3:15: expected ',' between operands"},
      {"extern e call \"f\"(%a) -> ()", "unknown buffer '%a'"},
      {"extern e call \"f\"() -> () {a=1, a=2}", "attribute 'a' is repeated"},
      {"kernel k over (i0: 99999999999999999999) {}", "integer out of range"},
      {"kernel k over (i0: 4) {\n  %0 = constant 1 : f32\n", "3:1: expected"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LoopProgram> p = ParseProgram(c.text);
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(p.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(LoopText, EveryPrefixParsesOrFailsCleanly) {
  const std::string text = kGolden;
  int parsed = 0;
  for (size_t n = 0; n <= text.size(); ++n) {
    absl::StatusOr<LoopProgram> p = ParseProgram(text.substr(0, n));
    if (!p.ok()) {
      ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    // Complete leading declarations may parse; they print stably.
    ++parsed;
    const std::string printed = PrintProgram(*p);
    absl::StatusOr<LoopProgram> again = ParseProgram(printed);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
    EXPECT_EQ(PrintProgram(*again), printed);
  }
  EXPECT_GT(parsed, 5);
}

TEST(LoopText, RandomMutationsNeverCrash) {
  const std::string text = kGolden;
  const std::string alphabet = "%\"\\()[]{},=:<>*+-/#.0123456789aefinrx \n\x80";
  std::mt19937 rng(4321);
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = text;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s.erase(at, 1 + rng() % 4); break;
        case 1: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 2: s[at] = alphabet[rng() % alphabet.size()]; break;
        case 3: s.insert(at, s.substr(rng() % s.size(), rng() % 16)); break;
      }
      if (s.empty()) s = "x";
    }
    absl::StatusOr<LoopProgram> p = ParseProgram(s);
    if (!p.ok()) {
      ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ++parsed;
    (void)VerifyProgram(*p);  // must not crash either
    const std::string printed = PrintProgram(*p);
    absl::StatusOr<LoopProgram> again = ParseProgram(printed);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
    EXPECT_EQ(PrintProgram(*again), printed);
  }
  EXPECT_GT(parsed, 0);
}

// A fuzzer's finding: an error quoted a 1,000-byte token whole.
TEST(LoopText, ErrorsCutLongTokensAndEscapeControlBytes) {
  absl::StatusOr<LoopProgram> p =
      ParseProgram("buffer %x f32[1] input  # " + std::string(1000, 'c') + "\n" +
                   "buffer %y: f32[1] " + std::string(1000, 'k') + "\n");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("1:11: expected ':'"));
  absl::StatusOr<LoopProgram> q = ParseProgram("buffer %" + std::string(1000, 'g') + " f32[1]");
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.status().message(), HasSubstr("got 'f32'"));
  absl::StatusOr<LoopProgram> r = ParseProgram("buffer %x: f32[1] " + std::string(1000, 'k'));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'" + std::string(40, 'k') + "...'"));
  EXPECT_LT(r.status().message().size(), 200u);
  absl::StatusOr<LoopProgram> bel = ParseProgram("buffer %x: f32[1] \x07\x1b[31m");
  ASSERT_FALSE(bel.ok());
  EXPECT_EQ(bel.status().message().find('\x1b'), absl::string_view::npos) << bel.status();
  EXPECT_EQ(bel.status().message().find('\x07'), absl::string_view::npos) << bel.status();
}

}  // namespace
}  // namespace kiln::ir::loop
