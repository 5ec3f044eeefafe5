// eliminate-dead-buffers on hand-written loop IR: dead stores, kernels,
// extern calls and buffers go; interface buffers and fallible ops stay;
// results unchanged (loop interpreter before vs after).
#include "passes/loop/eliminate_dead_buffers.h"

#include <string>

#include "gtest/gtest.h"
#include "ir/loop/text.h"
#include "passes/loop/loop_test_util.h"
#include "testing/filecheck.h"

namespace kiln::passes {
namespace {

void Expect(const char* text, bool want_changed, const char* checks,
            bool run = true) {
  EliminateDeadBuffers pass;
  absl::Status s = loop_testing::CheckPass(pass, text, want_changed, checks, run);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(EliminateDeadBuffers, RemovesAnUnreadKernelAndItsBuffer) {
  Expect(R"(
buffer %x: f32[4] input
buffer %t: f32[4] intermediate
buffer %u: f32[4] intermediate
buffer %y: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  store %t[i0], %0
}
kernel k1 over (i0: 4) {
  %0 = load %t[i0]
  %1 = exp %0
  store %u[i0], %1
}
kernel k2 over (i0: 4) {
  %0 = load %x[i0]
  %1 = neg %0
  store %y[i0], %1
}
)", true, R"(
    CHECK: buffer %x: f32[4] input
    CHECK-NEXT: buffer %y: f32[4] output
    CHECK-NEXT: kernel k2
    CHECK-NOT: kernel
  )");
}

TEST(EliminateDeadBuffers, RemovesOnlyTheDeadStoreOfAKernel) {
  Expect(R"(
buffer %x: f32[4] input
buffer %t: f32[4] intermediate
buffer %y: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  %1 = exp %0
  store %t[i0], %1
  %3 = neg %0
  store %y[i0], %3
}
)", true, R"(
    CHECK: kernel k0 over (i0: 4) {
    CHECK-NEXT:   %0 = load %x[i0]
    CHECK-NEXT:   %1 = neg %0
    CHECK-NEXT:   store %y[i0], %1
    CHECK-NEXT: }
  )");
}

TEST(EliminateDeadBuffers, RemovesAnExternKernelNobodyReads) {
  Expect(R"(
buffer %x: f32[4] input
buffer %t: f32[4] intermediate
buffer %y: f32[4] output
extern k0 call "onnx.Relu"(%x) -> (%t)
kernel k1 over (i0: 4) {
  %0 = load %x[i0]
  store %y[i0], %0
}
)", true, "CHECK-NOT: extern\nCHECK: kernel k1", /*run=*/false);
}

TEST(EliminateDeadBuffers, KeepsInterfaceBuffersAndOutputs) {
  Expect(R"(
buffer %x: f32[4] input
buffer %unused: f32[4] input
buffer %y: f32[4] output
buffer %z: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  store %y[i0], %0
}
kernel k1 over (i0: 4) {
  %0 = load %y[i0]
  store %z[i0], %0
}
)", false, R"(
    CHECK: buffer %unused: f32[4] input
    CHECK: kernel k0
    CHECK: kernel k1
  )");
}

TEST(EliminateDeadBuffers, KeepsAnIntegerDivisionThatMayFail) {
  Expect(R"(
buffer %a: i64[4] input
buffer %t: i64[4] intermediate
buffer %y: i64[4] output
kernel k0 over (i0: 4) {
  %0 = load %a[i0]
  %1 = constant 3 : i64
  %2 = div %0, %1
  store %t[i0], %2
}
kernel k1 over (i0: 4) {
  %0 = load %a[i0]
  store %y[i0], %0
}
)", true, R"(
    CHECK-NOT: buffer %t
    CHECK: kernel k0 over (i0: 4) {
    CHECK-NEXT:   %0 = load %a[i0]
    CHECK-NEXT:   %1 = constant 3 : i64
    CHECK-NEXT:   %2 = div %0, %1
    CHECK-NEXT: }
  )");
}

}  // namespace
}  // namespace kiln::passes
