// Tests of the emitted text (golden CHECK lines), identifier sanitization
// (no model string can inject code), unit splitting, metadata and errors.
#include "backends/cpp/emitter.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ir/loop/loop_ir.h"
#include "testing/filecheck.h"

namespace kiln::backends::cpp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ir::DType;
using ir::loop::BufferKind;
using ir::loop::KernelBuilder;
using ir::loop::LoopProgram;
using ir::loop::OpCode;

// y[i0, i1] = exp(x[i0, i1]) + b[i1]
LoopProgram AddExpProgram() {
  LoopProgram p;
  const int x = p.AddBuffer("x", DType::kF32, {4, 37}, BufferKind::kInput);
  const int b = p.AddBuffer("b", DType::kF32, {37}, BufferKind::kConstant);
  const int y = p.AddBuffer("y", DType::kF32, {4, 37}, BufferKind::kOutput);
  KernelBuilder k(&p, "exp_add", {4, 37});
  const auto at = k.i(0) * 37 + k.i(1);
  const int e = k.Unary(OpCode::kExp, k.Load(x, at));
  const int bias = k.Load(b, k.i(1));
  k.Store(y, at, k.Binary(OpCode::kAdd, e, bias));
  return p;
}

TEST(Emitter, GoldenPointwiseKernel) {
  absl::StatusOr<EmittedProgram> out = EmitCpp(AddExpProgram());
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->sources.size(), 1u);
  EXPECT_EQ(out->sources[0].name, "kiln_kernels_0");
  constexpr char kChecks[] = R"(
    CHECK: #include "hwy/highway.h"
    CHECK-NEXT: #include "hwy/contrib/math/math-inl.h"
    CHECK: HWY_BEFORE_NAMESPACE();
    CHECK-NEXT: namespace kiln_gen {
    CHECK-NEXT: namespace HWY_NAMESPACE {
    CHECK-NEXT: namespace hn = hwy::HWY_NAMESPACE;
    CHECK-NOT: hn::Vec<{{[^>]*}}> {{[a-z_]+}} =
    CHECK-LABEL: // kernel 0: vectorized
    CHECK-NEXT: static int k0_exp_add(const float* __restrict b0_x, const float* __restrict b1_b, float* __restrict b2_y) {
    CHECK: const hn::ScalableTag<float> df;
    CHECK: for (int64_t i0 = 0; i0 < 4LL; ++i0) {
    CHECK: const int64_t kiln_full_i1 = 37LL / kL * kL;
    CHECK-NEXT: for (int64_t i1 = 0; i1 < kiln_full_i1; i1 += kL) {
    CHECK: const auto v0 = hn::LoadU(df, b0_x + ((i0 * 37LL) + i1));
    CHECK-NEXT: const auto v1 = KilnExp(df, v0);
    CHECK-NEXT: const auto v2 = hn::LoadU(df, b1_b + i1);
    CHECK-NEXT: const auto v3 = hn::Add(v1, v2);
    CHECK-NEXT: hn::StoreU(v3, df, b2_y + ((i0 * 37LL) + i1));
    CHECK: if (kiln_full_i1 < 37LL) {
    CHECK: KilnLoadN(df, b0_x + ((i0 * 37LL) + i1), kiln_n);
    CHECK: KilnStoreN(v3, df, b2_y + ((i0 * 37LL) + i1), kiln_n);
    CHECK: return kiln_err;
    CHECK: }  // namespace HWY_NAMESPACE
    CHECK-NEXT: }  // namespace kiln_gen
    CHECK-NEXT: HWY_AFTER_NAMESPACE();
    CHECK: extern "C" int kiln_k0_exp_add(void* const* args) {
    CHECK: return kiln_gen::HWY_NAMESPACE::k0_exp_add(static_cast<const float*>(args[0]), static_cast<const float*>(args[1]), static_cast<float*>(args[2]));
    CHECK: extern "C" int kiln_run(void* const* buffers) {
    CHECK: void* const args[] = {buffers[0], buffers[1], buffers[2]};
  )";
  absl::Status st = testing::RunFileCheck(out->sources[0].text, kChecks);
  EXPECT_TRUE(st.ok()) << st;
  ASSERT_EQ(out->kernels.size(), 1u);
  const EmittedKernel& k = out->kernels[0];
  EXPECT_EQ(k.symbol, "kiln_k0_exp_add");
  EXPECT_EQ(k.buffer_args, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(k.buffer_names, (std::vector<std::string>{"x", "b", "y"}));
  EXPECT_EQ(k.vec.kind, ir::loop::VecStatus::Kind::kVectorized);
  EXPECT_EQ(k.vec.reason, "vectorized over i1");
  EXPECT_FALSE(k.parallel);
  EXPECT_EQ(out->run_symbol, "kiln_run");
}

TEST(Emitter, ScalarWhenVectorizationIsOff) {
  EmitOptions o;
  o.vectorize = false;
  absl::StatusOr<EmittedProgram> out = EmitCpp(AddExpProgram(), o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->kernels[0].vec.kind, ir::loop::VecStatus::Kind::kScalar);
  EXPECT_EQ(out->kernels[0].vec.reason, "vectorization disabled");
  constexpr char kChecks[] = R"(
    CHECK-NOT: math-inl.h
    CHECK: static int k0_exp_add(
    CHECK: for (int64_t i1 = 0; i1 < 37LL; ++i1) {
    CHECK-NEXT: const float s0 = b0_x[((i0 * 37LL) + i1)];
    CHECK: const float s1 = static_cast<float>(std::exp(static_cast<double>(s0)));
    CHECK-NOT: hn::
    CHECK: b2_y[((i0 * 37LL) + i1)] = s3;
  )";
  absl::Status st = testing::RunFileCheck(out->sources[0].text, kChecks);
  EXPECT_TRUE(st.ok()) << st;
}

// Model strings with quotes, newlines, comment ends and preprocessor lines
// reach the code only as sanitized identifiers.
TEST(Emitter, NamesCannotInjectCode) {
  const std::string evil_buffer = "x\"); system(\"rm -rf /\"); /*\n#include <evil.h>\n*/";
  const std::string evil_kernel = "k */ }\n#define float int\n\"";
  LoopProgram p;
  const int x = p.AddBuffer(evil_buffer, DType::kF32, {8}, BufferKind::kInput);
  const int y = p.AddBuffer("y\\\n#pragma", DType::kF32, {8}, BufferKind::kOutput);
  KernelBuilder k(&p, evil_kernel, {8});
  k.kernel().description = "*/ #include <evil.h> \"";
  k.kernel().ops = {"node\n#error boom"};
  k.Store(y, k.i(0), k.Unary(OpCode::kNeg, k.Load(x, k.i(0))));

  // The verifier rejects such names...
  absl::StatusOr<EmittedProgram> verified = EmitCpp(p);
  EXPECT_EQ(verified.status().code(), absl::StatusCode::kInvalidArgument);
  // ...and without it the emitter still sanitizes them.
  EmitOptions o;
  o.verify = false;
  o.symbol_prefix = "pre\"fix";
  o.unit_prefix = "../unit";
  absl::StatusOr<EmittedProgram> out = EmitCpp(p, o);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const ir::loop::SourceFile& f : out->sources) {
    EXPECT_THAT(f.name, Not(HasSubstr("/")));
    EXPECT_THAT(f.text, Not(HasSubstr("<evil.h>")));
    EXPECT_THAT(f.text, Not(HasSubstr("system(")));
    EXPECT_THAT(f.text, Not(HasSubstr("rm -rf")));
    EXPECT_THAT(f.text, Not(HasSubstr("#define float")));
    EXPECT_THAT(f.text, Not(HasSubstr("#error")));
    EXPECT_THAT(f.text, Not(HasSubstr("#pragma\n")));
    EXPECT_THAT(f.text, Not(HasSubstr("y\\\n")));
    // Every '"' in the text belongs to an #include or extern "C".
    for (size_t pos = f.text.find('"'); pos != std::string::npos;
         pos = f.text.find('"', pos + 1)) {
      const size_t line_start = f.text.rfind('\n', pos) + 1;
      const std::string line = f.text.substr(line_start, f.text.find('\n', pos) - line_start);
      EXPECT_TRUE(absl::StartsWith(line, "#include \"") || absl::StartsWith(line, "extern \"C\""))
          << line;
    }
    // Block comments never open (a '*/' could not close one early).
    EXPECT_THAT(f.text, Not(HasSubstr("/*")));
  }
  EXPECT_EQ(out->kernels[0].symbol, "pre_fixk0_k_______define_float_int__");
  EXPECT_EQ(out->sources[0].name, "___unit_0");
}

TEST(Emitter, SplitsKernelsOverUnitsAndSkipsExternCalls) {
  LoopProgram p;
  const int x = p.AddBuffer("x", DType::kF32, {5}, BufferKind::kInput);
  for (int i = 0; i < 5; ++i) {
    const int y = p.AddBuffer(absl::StrCat("y", i), DType::kF32, {5}, BufferKind::kOutput);
    KernelBuilder k(&p, absl::StrCat("k", i), {5});
    k.Store(y, k.i(0), k.Binary(OpCode::kMul, k.Load(x, k.i(0)), k.Constant(DType::kF32, i)));
  }
  EmitOptions o;
  o.kernels_per_unit = 2;
  absl::StatusOr<EmittedProgram> out = EmitCpp(p, o);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->sources.size(), 3u);
  EXPECT_EQ(out->kernels[4].unit, "kiln_kernels_2");
  EXPECT_THAT(out->sources[2].text, HasSubstr("static int k4_k4("));
  EXPECT_THAT(out->sources[0].text, HasSubstr("extern \"C\" int kiln_k4_k4(void* const* args);"));

  ir::loop::Kernel ext;
  ext.name = "conv";
  ext.kind = ir::loop::Kernel::Kind::kExtern;
  ext.call.op = "onednn.conv";
  ext.call.inputs = {x};
  ext.call.outputs = {p.FindBuffer("y0")};
  p.kernels.push_back(ext);
  out = EmitCpp(p, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->skipped_extern_kernels, (std::vector<int>{5}));
  EXPECT_TRUE(out->run_symbol.empty());
  EXPECT_EQ(out->kernels.size(), 5u);

  // `units` spreads the 5 loop kernels (the extern does not count) over at
  // most 2 units: 3 + 2.
  EmitOptions spread;
  spread.units = 2;
  out = EmitCpp(p, spread);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->sources.size(), 2u);
  EXPECT_EQ(out->kernels[2].unit, "kiln_kernels_0");
  EXPECT_EQ(out->kernels[3].unit, "kiln_kernels_1");
  spread.units = 8;  // more units than kernels: one kernel each
  out = EmitCpp(p, spread);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sources.size(), 5u);

  o.kernels_per_unit = 0;
  EXPECT_EQ(EmitCpp(p, o).status().code(), absl::StatusCode::kInvalidArgument);
  spread.units = -1;
  EXPECT_EQ(EmitCpp(p, spread).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Emitter, RejectsProgramsFailingVerification) {
  LoopProgram p;
  const int x = p.AddBuffer("x", DType::kF32, {4}, BufferKind::kInput);
  const int y = p.AddBuffer("y", DType::kF32, {4}, BufferKind::kOutput);
  KernelBuilder k(&p, "oob", {8});
  k.Store(y, k.i(0), k.Load(x, k.i(0)));  // reads past the end
  absl::StatusOr<EmittedProgram> out = EmitCpp(p);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("fails verification"));
}

}  // namespace
}  // namespace kiln::backends::cpp
