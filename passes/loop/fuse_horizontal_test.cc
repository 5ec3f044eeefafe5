// fuse-horizontal on hand-written loop IR: sibling merges (golden CHECK
// lines), results unchanged (loop interpreter before vs after), refusals.
#include "passes/loop/fuse_horizontal.h"

#include <string>

#include "gtest/gtest.h"
#include "ir/loop/text.h"
#include "passes/loop/loop_test_util.h"
#include "testing/filecheck.h"

namespace kiln::passes {
namespace {

void Expect(const char* text, bool want_changed, const char* checks) {
  FuseHorizontal pass;
  absl::Status s = loop_testing::CheckPass(pass, text, want_changed, checks);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(FuseHorizontal, MaxAndSumOfOneInputBecomeOneKernel) {
  Expect(R"(
buffer %x: f32[4,6] input
buffer %m: f32[4] output
buffer %s: f32[4] output
kernel k0 over (i0: 4) reduce (r0: 6) ops=["max"] {
  %0 = load %x[i0*6 + r0]
  %1 = reduce max %0
  store %m[i0], %1
}
kernel k1 over (i0: 4) reduce (r0: 6) ops=["sum"] {
  %0 = load %x[i0*6 + r0]
  %1 = reduce sum %0
  store %s[i0], %1
}
)", true, R"(
    CHECK: kernel k0 over (i0: 4) reduce (r0: 6) ops=["max", "sum"] {
    CHECK-NEXT:   %0 = load %x[i0*6 + r0]
    CHECK-NEXT:   %1 = reduce max %0
    CHECK-NEXT:   store %m[i0], %1
    CHECK-NEXT:   %2 = reduce sum %0
    CHECK-NEXT:   store %s[i0], %2
    CHECK-NEXT: }
    CHECK-NOT: kernel
  )");
}

TEST(FuseHorizontal, LaterReductionReadsTheEarlierOnesResultPerRow) {
  // The max is an output and also feeds the sum of exp(x - max): merged,
  // the sum uses the max's value directly.
  Expect(R"(
buffer %x: f32[4,6] input
buffer %m: f32[4] output
buffer %s: f32[4] output
kernel k0 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = reduce max %0
  store %m[i0], %1
}
kernel k1 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = load %m[i0]
  %2 = sub %0, %1
  %3 = exp %2
  %4 = reduce sum %3
  store %s[i0], %4
}
)", true, R"(
    CHECK: kernel k0 over (i0: 4) reduce (r0: 6) {
    CHECK-NEXT:   %0 = load %x[i0*6 + r0]
    CHECK-NEXT:   %1 = reduce max %0
    CHECK-NEXT:   store %m[i0], %1
    CHECK-NEXT:   %2 = sub %0, %1
    CHECK-NOT: load %m
    CHECK: store %s[i0]
    CHECK-NOT: kernel
  )");
}

TEST(FuseHorizontal, PointwiseKernelJoinsAReductionOverTheSameSpace) {
  Expect(R"(
buffer %x: f32[3,5] input
buffer %y: f32[3,5] output
buffer %z: f32[3,5] output
kernel k0 over (i0: 3, i1: 5) reduce (r0: 5) {
  %0 = load %x[i0*5 + r0]
  %1 = reduce sum %0
  %2 = load %x[i0*5 + i1]
  %3 = div %2, %1
  store %y[i0*5 + i1], %3
}
kernel k1 over (i0: 3, i1: 5) {
  %0 = load %x[i0*5 + i1]
  %1 = neg %0
  store %z[i0*5 + i1], %1
}
)", true, "CHECK: kernel k0\nCHECK: neg\nCHECK-NOT: kernel");
}

TEST(FuseHorizontal, KeepsKernelsOverDifferentSpaces) {
  Expect(R"(
buffer %x: f32[4,6] input
buffer %m: f32[4] output
buffer %s: f32[2] output
kernel k0 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = reduce max %0
  store %m[i0], %1
}
kernel k1 over (i0: 2) reduce (r0: 12) {
  %0 = load %x[i0*12 + r0]
  %1 = reduce sum %0
  store %s[i0], %1
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseHorizontal, KeepsAReadOfTheSiblingsResultAtAnotherPoint) {
  Expect(R"(
buffer %x: f32[4,6] input
buffer %m: f32[4] output
buffer %s: f32[4] output
kernel k0 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = reduce max %0
  store %m[i0], %1
}
kernel k1 over (i0: 4) reduce (r0: 6) {
  %0 = load %x[i0*6 + r0]
  %1 = load %m[3 - i0]
  %2 = sub %0, %1
  %3 = reduce sum %2
  store %s[i0], %3
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseHorizontal, KeepsASiblingWhoseInputIsWrittenInBetween) {
  Expect(R"(
buffer %x: f32[4] input
buffer %w: f32[4] input
buffer %o: f32[4] output
buffer %a: f32[4] output
buffer %b: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  %1 = exp %0
  store %a[i0], %1
}
kernel k1 over (i0: 4) {
  %0 = load %w[i0]
  store %o[i0], %0
}
kernel k2 over (i0: 4) {
  %0 = load %x[i0]
  %1 = load %o[i0]
  %2 = add %0, %1
  store %b[i0], %2
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1\nCHECK: kernel k2");
}

TEST(FuseHorizontal, KeepsASiblingThatOverwritesWhatTheFirstReads) {
  // k1 writes %o, which k0 reads at another point: merged, k1's writes
  // would land before k0's later reads.
  Expect(R"(
buffer %x: f32[4] input
buffer %o: f32[4] output
buffer %a: f32[4] output
kernel kz over (i0: 4) {
  %0 = load %x[i0]
  store %o[i0], %0
}
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  %1 = load %o[3 - i0]
  %2 = add %0, %1
  store %a[i0], %2
}
kernel k1 over (i0: 4) {
  %0 = load %x[i0]
  %1 = neg %0
  store %o[i0], %1
}
)", false, "CHECK: kernel kz\nCHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseHorizontal, KeepsSiblingsWithoutACommonInput) {
  Expect(R"(
buffer %x: f32[4] input
buffer %w: f32[4] input
buffer %a: f32[4] output
buffer %b: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  store %a[i0], %0
}
kernel k1 over (i0: 4) {
  %0 = load %w[i0]
  store %b[i0], %0
}
)", false, "CHECK: kernel k0\nCHECK: kernel k1");
}

TEST(FuseHorizontal, ASiblingOfAMergedKernelsNewInputJoinsToo) {
  // k1 brings w into k0; k2 shares only w with k0, so it is a sibling only
  // after that merge.
  Expect(R"(
buffer %x: f32[4] input
buffer %w: f32[4] input
buffer %a: f32[4] output
buffer %b: f32[4] output
buffer %c: f32[4] output
kernel k0 over (i0: 4) ops=["a"] {
  %0 = load %x[i0]
  %1 = neg %0
  store %a[i0], %1
}
kernel k1 over (i0: 4) ops=["b"] {
  %0 = load %x[i0]
  %1 = load %w[i0]
  %2 = add %0, %1
  store %b[i0], %2
}
kernel k2 over (i0: 4) ops=["c"] {
  %0 = load %w[i0]
  %1 = neg %0
  store %c[i0], %1
}
)", true, R"(
    CHECK: kernel k0 over (i0: 4) ops=["a", "b", "c"] {
    CHECK: store %a[i0]
    CHECK: store %b[i0]
    CHECK: store %c[i0]
    CHECK-NEXT: }
    CHECK-NOT: kernel
  )");
}

}  // namespace
}  // namespace kiln::passes
