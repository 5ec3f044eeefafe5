// Tests of the loop IR verifier: a valid program passes, and each violation
// is reported with the kernel, op and reason.
#include "ir/loop/verifier.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/text.h"

namespace kiln::ir::loop {
namespace {

using ::testing::HasSubstr;

LoopProgram Parse(const std::string& text) {
  absl::StatusOr<LoopProgram> p = ParseProgram(text);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : LoopProgram();
}

void ExpectViolation(const LoopProgram& p, const std::string& message) {
  const absl::Status s = VerifyProgram(p);
  ASSERT_FALSE(s.ok()) << "expected: " << message << "\n" << PrintProgram(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(message));
}

constexpr char kHeader[] =
    "buffer %x: f32[4,8] input\n"
    "buffer %y: f32[4,8] output\n"
    "buffer %n: i64[4] output\n";

TEST(LoopVerifier, ValidProgramPasses) {
  const LoopProgram p = Parse(std::string(kHeader) + R"(
    kernel k over (i0: 4, i1: 8) reduce (r0: 8) {
      %0 = load %x[i0*8 + r0]
      %1 = reduce sum %0
      %2 = load %x[i0*8 + i1]
      %3 = div %2, %1
      store %y[i0*8 + i1], %3
    }
    kernel g over (i0: 32) {
      %0 = load %x[(i0 // 8)*8 + i0 % 8]
      store %y[i0], %0
    }
  )");
  EXPECT_TRUE(VerifyProgram(p).ok()) << VerifyProgram(p);
}

TEST(LoopVerifier, OperandDefinedLater) {
  LoopProgram p = Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n"
                        "  %0 = load %x[i0]\n  %1 = neg %0\n}");
  p.kernels[0].body[0].code = OpCode::kNeg;  // now %0 = neg %1
  p.kernels[0].body[0].args = {1};
  ExpectViolation(p, "kernel 0 'k' op #0 (neg): operand refers to op #1, "
                     "which is not defined before it");
}

TEST(LoopVerifier, OperandIsAStore) {
  LoopProgram p = Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0]\n"
                        "  store %y[i0], %0\n  %1 = neg %0\n}");
  p.kernels[0].body[2].args = {1};
  ExpectViolation(p, "operand refers to op #1, a store without a value");
}

TEST(LoopVerifier, MissingBuffer) {
  LoopProgram p = Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0]\n}");
  p.kernels[0].body[0].buffer = 7;
  ExpectViolation(p, "op #0 (load): buffer 7 does not exist");
}

TEST(LoopVerifier, StoreDTypeMismatch) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0]\n"
                        "  store %n[i0], %0\n}"),
                  "'store': stores f32 into i64 buffer 'n'");
}

TEST(LoopVerifier, OperandTypeError) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %n[i0]\n"
                        "  %1 = exp %0\n}"),
                  "'exp': needs a float operand, got i64");
}

TEST(LoopVerifier, RecordedDTypeDisagrees) {
  LoopProgram p = Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0]\n}");
  p.kernels[0].body[0].dtype = DType::kF64;
  ExpectViolation(p, "records dtype f64, the operands give f32");
}

TEST(LoopVerifier, WrongOperandCount) {
  LoopProgram p = Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0]\n"
                        "  %1 = neg %0\n}");
  p.kernels[0].body[1].args = {0, 0};
  ExpectViolation(p, "op #1 (neg): has 2 operands, needs 1");
}

TEST(LoopVerifier, ConstantOutOfRange) {
  ExpectViolation(Parse("kernel k over () {\n  %0 = constant 300 : u8\n}"),
                  "300 does not fit u8");
}

TEST(LoopVerifier, IndexUsesForeignVariable) {
  LoopProgram p = Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0]\n}");
  p.kernels[0].body[0].index = Var(0) + Var(3);
  ExpectViolation(p, "index uses variable 3, but the kernel has 1");
}

TEST(LoopVerifier, LoadOutOfBounds) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4, i1: 9) {\n"
                        "  %0 = load %x[i0*8 + i1]\n}"),
                  "index i0*8 + i1 ranges over [0, 32], outside buffer 'x' of "
                  "32 elements");
}

TEST(LoopVerifier, LoadIndirectInBounds) {
  // Rows of x gathered by %n: i0*0 + i1 + [0, 4) * 8 spans [0, 31].
  const LoopProgram p = Parse(std::string(kHeader) + R"(
    kernel k over (i0: 4, i1: 8) {
      %0 = load %n[i0]
      %1 = load_indirect %x[i1], %0, stride 8, extent 4
      store %y[i0*8 + i1], %1
    })");
  EXPECT_TRUE(VerifyProgram(p).ok()) << VerifyProgram(p);
}

TEST(LoopVerifier, LoadIndirectOutOfBounds) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4, i1: 8) {\n"
                        "  %0 = load %n[i0]\n"
                        "  %1 = load_indirect %x[i1], %0, stride 8, extent 5\n}"),
                  "index i1 + [0, 5) * 8 ranges over [0, 39], outside buffer "
                  "'x' of 32 elements");
}

constexpr char kScatterHeader[] =
    "buffer %u: f32[4] input\n"
    "buffer %n: i64[4] input\n"
    "buffer %b: bool[8] output\n"
    "buffer %y: f32[8] output\n";

std::string ScatterKernel(const std::string& store) {
  return std::string(kScatterHeader) +
         "kernel k over (i0: 4) {\n  %0 = load %u[i0]\n  %1 = load %n[i0]\n"
         "  %2 = cast %1 : f32\n  %3 = constant 1 : bool\n  " +
         store + "\n}\n";
}

TEST(LoopVerifier, StoreIndirectChecks) {
  EXPECT_TRUE(VerifyProgram(Parse(ScatterKernel(
                  "store_indirect %y[0], %1, stride 1, extent 8, combine max, %0")))
                  .ok());
  ExpectViolation(Parse(ScatterKernel(
                      "store_indirect %y[1], %1, stride 1, extent 8, combine none, %0")),
                  "index 1 + [0, 8) * 1 ranges over [1, 8], outside buffer 'y'");
  ExpectViolation(Parse(ScatterKernel(
                      "store_indirect %y[0], %1, stride 1, extent 0, combine none, %0")),
                  "extent 0 is not positive");
  ExpectViolation(Parse(ScatterKernel(
                      "store_indirect %y[0], %2, stride 1, extent 8, combine none, %0")),
                  "index operand is f32, not an integer");
  ExpectViolation(Parse(ScatterKernel(
                      "store_indirect %y[0], %1, stride 1, extent 8, combine none, %3")),
                  "stores bool into f32 buffer 'y'");
  ExpectViolation(Parse(ScatterKernel(
                      "store_indirect %b[0], %1, stride 1, extent 8, combine add, %3")),
                  "combine add of bool");
  EXPECT_TRUE(VerifyProgram(Parse(ScatterKernel(
                  "store_indirect %b[0], %1, stride 1, extent 8, combine none, %3")))
                  .ok());
  ExpectViolation(Parse(ScatterKernel(
                      "store_indirect %u[0], %1, stride 1, extent 4, combine none, %0")),
                  "stores into input buffer 'u'");
}

TEST(LoopVerifier, StoreIndirectIsNeverReductionVarying) {
  ExpectViolation(
      Parse(std::string(kScatterHeader) +
            "kernel k over (i0: 1) reduce (r0: 4) {\n  %0 = load %u[r0]\n"
            "  %1 = load %n[r0]\n"
            "  store_indirect %y[0], %1, stride 1, extent 8, combine add, %0\n}\n"),
      "store depends on a reduction variable");
}

TEST(LoopVerifier, LoadIndirectNeedsPositiveExtentAndIntegerIndex) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n"
                        "  %0 = load %n[i0]\n"
                        "  %1 = load_indirect %x[i0], %0, stride 8, extent 0\n}"),
                  "extent 0 is not positive");
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n"
                        "  %0 = load %x[i0]\n"
                        "  %1 = load_indirect %x[i0], %0, stride 8, extent 4\n}"),
                  "index operand is f32, not an integer");
}

TEST(LoopVerifier, NegativeIndex) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0 - 1]\n}"),
                  "ranges over [-1, 2]");
}

TEST(LoopVerifier, StridedBufferBoundsUseStorageSize) {
  // A column-major [4,8] buffer spans 32 elements; offset 32 is outside.
  ExpectViolation(Parse("buffer %t: f32[4,8] strides=[1, 4] output\n"
                        "kernel k over (i0: 33) {\n"
                        "  %0 = constant 1.0 : f32\n  store %t[i0], %0\n}"),
                  "outside buffer 't' of 32 elements");
}

TEST(LoopVerifier, DivisorMayBeZero) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4, i1: 4) {\n"
                        "  %0 = load %x[i0 // i1]\n}"),
                  "divisor of 'i0 // i1' may be non-positive");
}

TEST(LoopVerifier, ReduceWithoutReductionRanges) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0]\n"
                        "  %1 = reduce sum %0\n}"),
                  "op #1 (reduce): reduction in a kernel without reduction "
                  "ranges");
}

TEST(LoopVerifier, StoreInsideReduction) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) reduce (r0: 8) {\n"
                        "  %0 = load %x[i0*8 + r0]\n  store %y[i0], %0\n}"),
                  "store depends on a reduction variable");
}

TEST(LoopVerifier, StoreIntoInput) {
  ExpectViolation(Parse(std::string(kHeader) +
                        "kernel k over (i0: 4) {\n  %0 = load %x[i0]\n"
                        "  store %x[i0], %0\n}"),
                  "stores into input buffer 'x'");
}

TEST(LoopVerifier, BadBufferName) {
  LoopProgram p;
  p.AddBuffer("a-b", DType::kF32, {2}, BufferKind::kInput);
  ExpectViolation(p, "buffer 0 'a-b': name is not an identifier");
  EXPECT_EQ(SanitizeIdentifier("a-b"), "a_b");
  EXPECT_EQ(SanitizeIdentifier("0x"), "_0x");
  EXPECT_EQ(SanitizeIdentifier(""), "_");
  EXPECT_EQ(SanitizeIdentifier("/attn/Softmax:0"), "_attn_Softmax_0");
}

TEST(LoopVerifier, DuplicateBufferName) {
  LoopProgram p;
  p.AddBuffer("a", DType::kF32, {2}, BufferKind::kInput);
  p.AddBuffer("a", DType::kF32, {2}, BufferKind::kOutput);
  ExpectViolation(p, "buffer 1 'a': duplicate name");
}

TEST(LoopVerifier, StridesDoNotMatchRank) {
  LoopProgram p;
  p.AddBuffer("a", DType::kF32, {2, 3}, BufferKind::kInput, {1});
  ExpectViolation(p, "has 1 strides for rank 2");
}

TEST(LoopVerifier, DynamicDim) {
  LoopProgram p;
  p.AddBuffer("a", DType::kF32, {kDynamicDim}, BufferKind::kInput, {1});
  ExpectViolation(p, "has a negative or dynamic dim");
}

TEST(LoopVerifier, DuplicateKernelName) {
  LoopProgram p;
  KernelBuilder(&p, "k", {1});
  KernelBuilder(&p, "k", {1});
  ExpectViolation(p, "kernel 1 'k': duplicate name");
}

TEST(LoopVerifier, ExternWritesInput) {
  ExpectViolation(Parse("buffer %a: f32[1] input\n"
                        "extern e call \"onednn.conv\"(%a) -> (%a)"),
                  "kernel 0 'e': writes input buffer 'a'");
}

TEST(LoopVerifier, ExternWithMissingBuffer) {
  LoopProgram p = Parse("buffer %a: f32[1] input\nbuffer %b: f32[1] output\n"
                        "extern e call \"onednn.conv\"(%a) -> (%b)");
  p.kernels[0].call.inputs = {4};
  ExpectViolation(p, "input buffer 4 does not exist");
}

}  // namespace
}  // namespace kiln::ir::loop
