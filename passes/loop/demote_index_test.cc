// demote-index on hand-written loop IR: i64 index arithmetic whose range
// fits int32 becomes i32; values that might not fit, or that are stored,
// reduced or divided, stay i64; results unchanged (loop interpreter before
// vs after).
#include "passes/loop/demote_index.h"

#include <string>

#include "gtest/gtest.h"
#include "ir/loop/text.h"
#include "passes/loop/loop_test_util.h"
#include "testing/filecheck.h"

namespace kiln::passes {
namespace {

void Expect(const char* text, bool want_changed, const char* checks) {
  DemoteIndex pass;
  absl::Status s = loop_testing::CheckPass(pass, text, want_changed, checks);
  EXPECT_TRUE(s.ok()) << s;
}

// MaxPool's padding mask as lowering writes it: the index and the bounds
// it is compared with become i32; the f32 data path is untouched.
TEST(DemoteIndex, PoolingPaddingMask) {
  Expect(R"(
buffer %x: f32[7] input
buffer %y: f32[4] output
kernel k0 over (i0: 4) reduce (r0: 3) {
  %0 = index [i0*2 + r0 - 1] : i64
  %1 = constant 7 : i64
  %2 = lt %0, %1
  %3 = constant 0 : i64
  %4 = ge %0, %3
  %5 = and %4, %2
  %6 = load %x[max(0, min(6, i0*2 + r0 - 1))]
  %7 = constant -inf : f32
  %8 = select %5, %6, %7
  %9 = reduce max %8
  store %y[i0], %9
}
)", true, R"(
    CHECK: %0 = index [i0*2 + r0 - 1] : i32
    CHECK-NEXT: %1 = constant 7 : i32
    CHECK-NEXT: %2 = lt %0, %1
    CHECK-NEXT: %3 = constant 0 : i32
    CHECK: %7 = constant -inf : f32
  )");
}

// Arithmetic on demoted values stays demoted when every intermediate fits;
// a cast to f32 reads the i32 value as it read the i64 one.
TEST(DemoteIndex, ArithmeticAndCast) {
  Expect(R"(
buffer %y: f32[5, 6] output
kernel k0 over (i0: 5, i1: 6) {
  %0 = index [i0] : i64
  %1 = index [i1] : i64
  %2 = constant 1000 : i64
  %3 = mul %0, %2
  %4 = sub %3, %1
  %5 = neg %4
  %6 = abs %5
  %7 = max %6, %1
  %8 = cast %7 : f32
  store %y[i0*6 + i1], %8
}
)", true, R"(
    CHECK: %0 = index [i0] : i32
    CHECK-NEXT: %1 = index [i1] : i32
    CHECK-NEXT: %2 = constant 1000 : i32
    CHECK-NEXT: %3 = mul %0, %2
    CHECK-NEXT: %4 = sub %3, %1
    CHECK-NEXT: %5 = neg %4
    CHECK-NEXT: %6 = abs %5
    CHECK-NEXT: %7 = max %6, %1
    CHECK-NEXT: %8 = cast %7 : f32
  )");
}

// 4 * 1e9 does not fit int32: the product, and everything feeding it, stay
// i64 (an i32 multiply would wrap where the i64 one does not).
TEST(DemoteIndex, ProductBeyondInt32StaysI64) {
  Expect(R"(
buffer %y: f32[5] output
kernel k0 over (i0: 5) {
  %0 = index [i0] : i64
  %1 = constant 1000000000 : i64
  %2 = mul %0, %1
  %3 = cast %2 : f32
  store %y[i0], %3
}
)", false, R"(
    CHECK: %0 = index [i0] : i64
    CHECK-NEXT: %1 = constant 1000000000 : i64
  )");
}

// An index whose own range exceeds int32 stays i64.
TEST(DemoteIndex, IndexBeyondInt32StaysI64) {
  Expect(R"(
buffer %y: f32[4] output
kernel k0 over (i0: 4) {
  %0 = index [i0*1000000000] : i64
  %1 = cast %0 : f32
  store %y[i0], %1
}
)", false, R"(
    CHECK: %0 = index [i0*1000000000] : i64
  )");
}

// A value stored into an i64 buffer (Range's output) keeps its width, and
// so does the comparison partner of a value that cannot be demoted.
TEST(DemoteIndex, StoredOrComparedWithI64LoadStaysI64) {
  Expect(R"(
buffer %n: i64[4] input
buffer %r: i64[4] output
buffer %m: bool[4] output
kernel k0 over (i0: 4) {
  %0 = index [i0] : i64
  store %r[i0], %0
}
kernel k1 over (i0: 4) {
  %0 = index [i0] : i64
  %1 = load %n[i0]
  %2 = lt %0, %1
  store %m[i0], %2
}
)", false, R"(
    CHECK: kernel k0
    CHECK-NEXT: %0 = index [i0] : i64
    CHECK: kernel k1
    CHECK-NEXT: %0 = index [i0] : i64
  )");
}

// One user that needs i64 (the store) keeps the value i64 for all of them,
// and with it the constant it is compared with, and every other value
// compared with that constant; a sibling comparison with its own constant
// is still demoted.
TEST(DemoteIndex, MixedUsers) {
  Expect(R"(
buffer %r: i64[4] output
buffer %m: bool[4] output
kernel k0 over (i0: 4) {
  %0 = index [i0] : i64
  %1 = constant 2 : i64
  %2 = lt %0, %1
  store %r[i0], %0
  %3 = index [i0 + 1] : i64
  %4 = ge %3, %1
  %5 = and %2, %4
  %6 = index [i0 + 2] : i64
  %7 = constant 3 : i64
  %8 = ne %6, %7
  %9 = and %5, %8
  store %m[i0], %9
}
)", true, R"(
    CHECK: %0 = index [i0] : i64
    CHECK-NEXT: %1 = constant 2 : i64
    CHECK: %3 = index [i0 + 1] : i64
    CHECK: %6 = index [i0 + 2] : i32
    CHECK-NEXT: %7 = constant 3 : i32
  )");
}

// A gather position computed from the loop index (a Range feeding a
// Gather) is a demoted load_indirect operand; a select between two demoted
// values is demoted.
TEST(DemoteIndex, GatherIndexAndSelect) {
  Expect(R"(
buffer %x: f32[6, 3] input
buffer %y: f32[4, 3] output
kernel k0 over (i0: 4, i1: 3) {
  %0 = index [i0] : i64
  %1 = index [5 - i0] : i64
  %2 = constant 2 : i64
  %3 = lt %0, %2
  %4 = select %3, %0, %1
  %5 = load_indirect %x[i1], %4, stride 3, extent 6
  store %y[i0*3 + i1], %5
}
)", true, R"(
    CHECK: %0 = index [i0] : i32
    CHECK-NEXT: %1 = index [5 - i0] : i32
    CHECK-NEXT: %2 = constant 2 : i32
    CHECK-NEXT: %3 = lt %0, %2
    CHECK-NEXT: %4 = select %3, %0, %1
  )");
}

// A reduction of index values (an i64 sum could exceed int32 even when
// every term fits) keeps its operand i64.
TEST(DemoteIndex, ReducedValueStaysI64) {
  Expect(R"(
buffer %y: i64[2] output
kernel k0 over (i0: 2) reduce (r0: 8) {
  %0 = index [r0] : i64
  %1 = reduce sum %0
  store %y[i0], %1
}
)", false, R"(
    CHECK: %0 = index [r0] : i64
  )");
}

}  // namespace
}  // namespace kiln::passes
