// fuse-vertical on hand-written loop IR: what is inlined (golden CHECK
// lines) and that results are unchanged (loop interpreter before vs after),
// and every legality rule's refusal.
#include "ir/loop/module.h"
#include "passes/loop/fuse_vertical.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/loop/interpreter.h"
#include "passes/loop/eliminate_dead_buffers.h"
#include "passes/loop/fuse_horizontal.h"
#include "ir/loop/text.h"
#include "passes/loop/loop_test_util.h"
#include "absl/strings/str_cat.h"
#include "testing/filecheck.h"

namespace kiln::passes {
namespace {

// Runs fuse-vertical on `text`; expects `changed`, equal results and the
// CHECK lines on the result.
void Expect(const char* text, bool want_changed, const char* checks) {
  FuseVertical pass;
  absl::Status s = loop_testing::CheckPass(pass, text, want_changed, checks);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(FuseVertical, PointwiseIntoPointwise) {
  Expect(R"(
buffer %x: f32[4,8] input
buffer %t: f32[4,8] intermediate
buffer %y: f32[4,8] output
kernel k0 "Exp" over (i0: 4, i1: 8) ops=["exp"] {
  %0 = load %x[i0*8 + i1]
  %1 = exp %0
  store %t[i0*8 + i1], %1
}
kernel k1 "Neg" over (i0: 4, i1: 8) ops=["neg"] {
  %0 = load %t[i0*8 + i1]
  %1 = neg %0
  store %y[i0*8 + i1], %1
}
)", true, R"(
    CHECK-NOT: buffer %t
    CHECK: kernel k1 "Neg" over (i0: 4, i1: 8) ops=["neg", "exp"] {
    CHECK-NEXT:   %0 = load %x[i0*8 + i1]
    CHECK-NEXT:   %1 = exp %0
    CHECK-NEXT:   %2 = neg %1
    CHECK-NEXT:   store %y[i0*8 + i1], %2
    CHECK-NEXT: }
    CHECK-NOT: kernel
  )");
}

TEST(FuseVertical, TransposedStoreIsInvertedToTheConsumersVariables) {
  // k0 writes t column-major (a transpose); k1 reads it row-major.
  Expect(R"(
buffer %x: f32[4,6] input
buffer %t: f32[6,4] intermediate
buffer %y: f32[6,4] output
kernel k0 over (i0: 4, i1: 6) {
  %0 = load %x[i0*6 + i1]
  %1 = sigmoid %0
  store %t[i0 + i1*4], %1
}
kernel k1 over (i0: 6, i1: 4) {
  %0 = load %t[i0*4 + i1]
  %1 = constant 2.0 : f32
  %2 = mul %0, %1
  store %y[i0*4 + i1], %2
}
)", true, R"(
    CHECK: kernel k1 over (i0: 6, i1: 4) {
    CHECK-NEXT:   %0 = load %x[i0 + i1*6]
    CHECK-NEXT:   %1 = sigmoid %0
    CHECK-NOT: kernel
  )");
}

TEST(FuseVertical, ReshapedReadKeepsDivisionWhenItDoesNotCollapse) {
  Expect(R"(
buffer %x: f32[6,4] input
buffer %t: f32[6,4] intermediate
buffer %y: f32[4,6] output
kernel k0 over (i0: 6, i1: 4) {
  %0 = load %x[i0*4 + i1]
  %1 = abs %0
  store %t[i0*4 + i1], %1
}
kernel k1 over (i0: 4, i1: 6) {
  %0 = load %t[i1*4 + i0]
  %1 = neg %0
  store %y[i0*6 + i1], %1
}
)", true, R"(
    CHECK: kernel k1 over (i0: 4, i1: 6) {
    CHECK-NEXT:   %0 = load %x[i0 + i1*4]
    CHECK-NOT: kernel
  )");
}

TEST(FuseVertical, ReductionBecomesItsConsumersPrologueAndEpilogue) {
  // Row sums of exp(x), then exp(x) / sum: the sum kernel is inlined into
  // the division, which becomes a reduction kernel (softmax without max).
  Expect(R"(
buffer %x: f32[3,5] input
buffer %e: f32[3,5] intermediate
buffer %s: f32[3,1] intermediate
buffer %y: f32[3,5] output
kernel k0 over (i0: 3, i1: 5) ops=["exp"] {
  %0 = load %x[i0*5 + i1]
  %1 = exp %0
  store %e[i0*5 + i1], %1
}
kernel k1 over (i0: 3, i1: 1) reduce (r0: 5) ops=["sum"] {
  %0 = load %e[i0*5 + r0]
  %1 = reduce sum %0
  store %s[i0 + i1], %1
}
kernel k2 over (i0: 3, i1: 5) ops=["div"] {
  %0 = load %e[i0*5 + i1]
  %1 = load %s[i0]
  %2 = div %0, %1
  store %y[i0*5 + i1], %2
}
)", true, R"(
    CHECK-NOT: buffer %e
    CHECK-NOT: buffer %s
    CHECK: kernel k2 over (i0: 3, i1: 5) reduce (r0: 5) ops=["div", "sum", "exp"] {
    CHECK-NEXT:   %0 = load %x[i0*5 + i1]
    CHECK-NEXT:   %1 = exp %0
    CHECK-NEXT:   %2 = load %x[i0*5 + r0]
    CHECK-NEXT:   %3 = exp %2
    CHECK-NEXT:   %4 = reduce sum %3
    CHECK-NEXT:   %5 = div %1, %4
    CHECK-NEXT:   store %y[i0*5 + i1], %5
    CHECK-NEXT: }
    CHECK-NOT: kernel
  )");
}

TEST(FuseVertical, ReductionFeedsAnotherReductionsPrologue) {
  // mean, then the mean of squared deviations: the mean is an invariant of
  // the second reduction's loop.
  Expect(R"(
buffer %x: f32[4,6] input
buffer %m: f32[4] intermediate
buffer %v: f32[4] output
kernel k0 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = reduce sum %0
  %2 = constant 6.0 : f32
  %3 = div %1, %2
  store %m[i0], %3
}
kernel k1 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = load %m[i0]
  %2 = sub %0, %1
  %3 = mul %2, %2
  %4 = reduce sum %3
  store %v[i0], %4
}
)", true, R"(
    CHECK: kernel k1 over (i0: 4) reduce (r0: 6) {
    CHECK-NEXT:   %0 = load %x[i0*6 + r0]
    CHECK-NEXT:   %1 = reduce sum %0
    CHECK-NEXT:   %2 = constant 6.0 : f32
    CHECK-NEXT:   %3 = div %1, %2
    CHECK-NEXT:   %4 = sub %0, %3
    CHECK:        reduce sum
    CHECK-NOT: kernel
  )");
}

TEST(FuseVertical, CheapProducerIsRecomputedInEveryConsumer) {
  Expect(R"(
buffer %x: f32[8] input
buffer %t: f32[8] intermediate
buffer %y: f32[8] output
buffer %z: f32[8] output
kernel k0 over (i0: 8) {
  %0 = load %x[i0]
  %1 = tanh %0
  store %t[i0], %1
}
kernel k1 over (i0: 8) {
  %0 = load %t[i0]
  %1 = neg %0
  store %y[i0], %1
}
kernel k2 over (i0: 8) {
  %0 = load %t[i0]
  %1 = abs %0
  store %z[i0], %1
}
)", true, R"(
    CHECK-NOT: buffer %t
    CHECK: kernel k1
    CHECK-NEXT: load %x[i0]
    CHECK-NEXT: tanh
    CHECK: kernel k2
    CHECK-NEXT: load %x[i0]
    CHECK-NEXT: tanh
  )");
}

TEST(FuseVertical, LoadsAtOneOffsetShareOneCopy) {
  Expect(R"(
buffer %x: f32[8] input
buffer %t: f32[8] intermediate
buffer %y: f32[8] output
kernel k0 over (i0: 8) {
  %0 = load %x[i0]
  %1 = exp %0
  store %t[i0], %1
}
kernel k1 over (i0: 8) {
  %0 = load %t[i0]
  %1 = load %t[i0]
  %2 = mul %0, %1
  store %y[i0], %2
}
)", true, R"(
    CHECK: kernel k1 over (i0: 8) {
    CHECK-NEXT:   %0 = load %x[i0]
    CHECK-NEXT:   %1 = exp %0
    CHECK-NEXT:   %2 = mul %1, %1
  )");
}

// ---- Refusals.

TEST(FuseVertical, KeepsAGraphOutput) {
  Expect(R"(
buffer %x: f32[8] input
buffer %t: f32[8] output
buffer %y: f32[8] output
kernel k0 over (i0: 8) {
  %0 = load %x[i0]
  %1 = exp %0
  store %t[i0], %1
}
kernel k1 over (i0: 8) {
  %0 = load %t[i0]
  %1 = neg %0
  store %y[i0], %1
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseVertical, KeepsAProducerWhoseInputIsOverwrittenBeforeTheConsumer) {
  // k1 rewrites %o (which k0 read) before k2 reads k0's result: inlining k0
  // into k2 would read the new %o.
  Expect(R"(
buffer %x: f32[8] input
buffer %o: f32[8] output
buffer %t: f32[8] intermediate
buffer %y: f32[8] output
kernel kz over (i0: 8) {
  %0 = load %x[i0]
  store %o[i0], %0
}
kernel k0 over (i0: 8) {
  %0 = load %o[i0]
  %1 = exp %0
  store %t[i0], %1
}
kernel k1 over (i0: 8) {
  %0 = constant 1.0 : f32
  store %o[i0], %0
}
kernel k2 over (i0: 8) {
  %0 = load %t[i0]
  %1 = neg %0
  store %y[i0], %1
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1\nCHECK: kernel k2");
}

TEST(FuseVertical, KeepsAReductionReadByTwoKernels) {
  Expect(R"(
buffer %x: f32[4,6] input
buffer %s: f32[4] intermediate
buffer %y: f32[4,6] output
buffer %z: f32[4,6] output
kernel k0 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = reduce max %0
  store %s[i0], %1
}
kernel k1 over (i0: 4, i1: 6) {
  %0 = load %s[i0]
  store %y[i0*6 + i1], %0
}
kernel k2 over (i0: 4, i1: 6) {
  %0 = load %s[i0]
  %1 = neg %0
  store %z[i0*6 + i1], %1
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1\nCHECK: kernel k2");
}

TEST(FuseVertical, KeepsAReductionThatWouldBeRecomputedPerColumn) {
  // The consumer walks the result transposed: the row reduction would be
  // recomputed for every element instead of once per row.
  Expect(R"(
buffer %x: f32[4,6] input
buffer %s: f32[4] intermediate
buffer %y: f32[6,4] output
kernel k0 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = reduce sum %0
  store %s[i0], %1
}
kernel k1 over (i0: 6, i1: 4) {
  %0 = load %s[i1]
  store %y[i0*4 + i1], %0
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1");
}

// Rows normalized by their sum (a reduction with an epilogue, as a
// lowered LayerNorm), read by `consumer`.
std::string NormalizedRowsThen(const char* consumer) {
  return absl::StrCat(R"(
buffer %x: f32[4,6] input
buffer %n: f32[4,6] intermediate
buffer %y: f32[6,4] output
kernel k0 over (i0: 4, i1: 6) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = reduce sum %0
  %2 = load %x[i0*6 + i1]
  %3 = div %2, %1
  store %n[i0*6 + i1], %3
}
)",
                      consumer);
}

TEST(FuseVertical, KeepsARowReductionWhoseConsumerWalksRowsInnermost) {
  // The transposing consumer's innermost variable walks the rows: inlined,
  // the row sum (computed once per row in k0) would be recomputed for every
  // element, as Swin-T's LayerNorms inlined into its window partitions were.
  Expect(NormalizedRowsThen(R"(
kernel k1 over (i0: 6, i1: 4) {
  %0 = load %n[i1*6 + i0]
  store %y[i0*4 + i1], %0
}
)").c_str(),
         false, "CHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseVertical, InlinesARowReductionIntoARowMajorConsumer) {
  Expect(NormalizedRowsThen(R"(
kernel k1 over (i0: 4, i1: 6) {
  %0 = load %n[i0*6 + i1]
  %1 = exp %0
  store %y[i0*6 + i1], %1
}
)").c_str(),
         true, "CHECK-NOT: kernel k0\nCHECK: kernel k1 over (i0: 4, i1: 6) reduce (r0: 6)");
}

TEST(FuseVertical, NeverNestsAReductionInsideAnother) {
  // k0's sum depends on its i1, which k1 reads as its reduction variable.
  Expect(R"(
buffer %x: f32[4,4] input
buffer %t: f32[4,4] intermediate
buffer %y: f32[4] output
kernel k0 over (i0: 4, i1: 4) reduce (r0: 4) {
  %0 = load %x[i1*4 + r0]
  %1 = reduce sum %0
  %2 = load %x[i0*4 + i1]
  %3 = mul %1, %2
  store %t[i0*4 + i1], %3
}
kernel k1 over (i0: 4) reduce (r0: 4) {
  %0 = load %t[i0*4 + r0]
  %1 = reduce max %0
  store %y[i0], %1
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseVertical, KeepsAnF16Intermediate) {
  Expect(R"(
buffer %x: f16[8] input
buffer %t: f16[8] intermediate
buffer %y: f16[8] output
kernel k0 over (i0: 8) {
  %0 = load %x[i0]
  %1 = exp %0
  store %t[i0], %1
}
kernel k1 over (i0: 8) {
  %0 = load %t[i0]
  %1 = exp %0
  store %y[i0], %1
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseVertical, KeepsAnIntermediateWithTwoWriters) {
  Expect(R"(
buffer %x: f32[4] input
buffer %t: f32[8] intermediate
buffer %y: f32[8] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  store %t[i0], %0
}
kernel k1 over (i0: 4) {
  %0 = load %x[i0]
  %1 = neg %0
  store %t[i0 + 4], %1
}
kernel k2 over (i0: 8) {
  %0 = load %t[i0]
  %1 = exp %0
  store %y[i0], %1
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1\nCHECK: kernel k2");
}

TEST(FuseVertical, KeepsAProducerReadByAnExternKernel) {
  absl::StatusOr<ir::loop::LoopModule> before = loop_testing::FromLoopText(R"(
buffer %x: f32[8] input
buffer %t: f32[8] intermediate
buffer %y: f32[8] output
buffer %z: f32[8] output
kernel k0 over (i0: 8) {
  %0 = load %x[i0]
  %1 = exp %0
  store %t[i0], %1
}
kernel k1 over (i0: 8) {
  %0 = load %t[i0]
  store %y[i0], %0
}
extern k2 call "onnx.Relu"(%t) -> (%z)
)");
  ASSERT_TRUE(before.ok()) << before.status();
  FuseVertical pass;
  bool changed = true;
  absl::StatusOr<ir::loop::LoopModule> after =
      loop_testing::Apply(pass, *before, &changed);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(changed) << ir::loop::PrintProgram(after->program);
}

TEST(FuseVertical, IntegerDivisionIsInlinedOnlyWhereEveryElementIsRead) {
  // Partial read: inlining would skip elements whose division might fail.
  Expect(R"(
buffer %a: i64[8] input
buffer %b: i64[8] input
buffer %t: i64[8] intermediate
buffer %y: i64[4] output
kernel k0 over (i0: 8) {
  %0 = load %a[i0]
  %1 = load %b[i0]
  %2 = mul %1, %1
  %3 = constant 1 : i64
  %4 = add %2, %3
  %5 = div %0, %4
  store %t[i0], %5
}
kernel k1 over (i0: 4) {
  %0 = load %t[i0]
  store %y[i0], %0
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseVertical, IntegerDivisionReadDenselyIsInlined) {
  Expect(R"(
buffer %a: i64[2,4] input
buffer %b: i64[2,4] input
buffer %t: i64[2,4] intermediate
buffer %y: i64[4,2] output
kernel k0 over (i0: 2, i1: 4) {
  %0 = load %a[i0*4 + i1]
  %1 = constant 7 : i64
  %2 = add %0, %1
  %3 = load %b[i0*4 + i1]
  %4 = mul %3, %3
  %5 = add %4, %1
  %6 = mod %2, %5
  store %t[i0*4 + i1], %6
}
kernel k1 over (i0: 4, i1: 2) {
  %0 = load %t[i0 + i1*4]
  store %y[i0*2 + i1], %0
}
)", true, "CHECK-NOT: kernel k0\nCHECK: kernel k1\nCHECK: mod");
}

TEST(FuseVertical, NothingToDoOnAnEmptyProgram) {
  Expect("buffer %x: f32[2] input\n", false, "CHECK: buffer %x");
}

// A scatter: %s is written by a copy of exp(x) and then updated by
// store_indirect; %y and %z read the updated %s. The index is reduced mod 8
// in-kernel so random inputs stay in range.
constexpr char kScatter[] = R"(
buffer %x: f32[8] input
buffer %u: f32[4] input
buffer %n: i64[4] input
buffer %t: f32[8] intermediate
buffer %s: f32[8] intermediate
buffer %y: f32[8] output
buffer %z: f32[8] output
kernel k0 "Exp" over (i0: 8) {
  %0 = load %x[i0]
  %1 = exp %0
  store %t[i0], %1
}
kernel k1 "copy" over (i0: 8) {
  %0 = load %t[i0]
  store %s[i0], %0
}
kernel k2 "scatter" over (i0: 4) {
  %0 = load %u[i0]
  %1 = load %n[i0]
  %2 = constant 8 : i64
  %3 = mod %1, %2
  store_indirect %s[0], %3, stride 1, extent 8, combine add, %0
}
kernel k3 "Neg" over (i0: 8) {
  %0 = load %s[i0]
  %1 = neg %0
  store %y[i0], %1
}
kernel k4 "Abs" over (i0: 8) {
  %0 = load %s[i0]
  %1 = abs %0
  store %z[i0], %1
}
)";

TEST(FuseVertical, StoreIndirectIsNeverFusedAcross) {
  absl::StatusOr<ir::loop::LoopModule> before = loop_testing::FromLoopText(kScatter);
  ASSERT_TRUE(before.ok()) << before.status();
  ir::loop::LoopModule cur = *before;
  FuseVertical vertical;
  FuseHorizontal horizontal;
  EliminateDeadBuffers dead;
  for (LoopPass* pass : std::vector<LoopPass*>{&dead, &vertical, &horizontal, &vertical, &dead}) {
    bool changed = false;
    absl::StatusOr<ir::loop::LoopModule> next = loop_testing::Apply(*pass, cur, &changed);
    ASSERT_TRUE(next.ok()) << pass->name() << ": " << next.status();
    cur = *std::move(next);
  }
  const std::string out = ir::loop::PrintProgram(cur.program);
  // exp folds into the copy; the copy and the scatter stay, in order, and the
  // readers of %s (merged horizontally) still read the buffer after it.
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK-NOT: buffer %t
    CHECK: kernel k1 "copy"
    CHECK-NEXT:   %0 = load %x[i0]
    CHECK-NEXT:   %1 = exp %0
    CHECK-NEXT:   store %s[i0], %1
    CHECK: kernel k2 "scatter"
    CHECK: store_indirect %s[0], %3, stride 1, extent 8, combine add, %0
    CHECK: kernel k3
    CHECK: load %s[i0]
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
  absl::Status same = loop_testing::CheckSameResults(*before, cur);
  EXPECT_TRUE(same.ok()) << same;
  // Duplicate indices accumulate in both programs.
  ir::Tensor x(ir::DType::kF32, {8}), u(ir::DType::kF32, {4}), n(ir::DType::kI64, {4});
  for (int i = 0; i < 8; ++i) x.data<float>()[i] = 0.0f;
  for (int i = 0; i < 4; ++i) u.data<float>()[i] = static_cast<float>(i + 1);
  for (int i = 0; i < 4; ++i) n.data<int64_t>()[i] = i < 3 ? 5 : 2;
  absl::StatusOr<std::map<std::string, ir::Tensor>> r =
      ir::loop::RunLoopProgram(cur.program, {{"x", x}, {"u", u}, {"n", n}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->at("y").data<float>()[5], -(1.0f + 1 + 2 + 3));
  EXPECT_EQ(r->at("z").data<float>()[2], 1.0f + 4);
  EXPECT_EQ(r->at("y").data<float>()[0], -1.0f);
}

TEST(FuseVertical, ProducerWithStoreIndirectIsNotInlined) {
  // k0 stores %t and scatters into %s: inlining %t would drop the scatter.
  Expect(R"(
buffer %x: f32[8] input
buffer %n: i64[8] input
buffer %t: f32[8] intermediate
buffer %s: f32[8] output
buffer %y: f32[8] output
kernel kz over (i0: 8) {
  %0 = constant 0 : f32
  store %s[i0], %0
}
kernel k0 over (i0: 8) {
  %0 = load %x[i0]
  store %t[i0], %0
  %1 = load %n[i0]
  %2 = constant 8 : i64
  %3 = mod %1, %2
  store_indirect %s[0], %3, stride 1, extent 8, combine max, %0
}
kernel k1 over (i0: 8) {
  %0 = load %t[i0]
  %1 = neg %0
  store %y[i0], %1
}
)", false, "CHECK: store_indirect %s[0]");
}

}  // namespace
}  // namespace kiln::passes
