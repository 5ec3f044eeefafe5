// Golden tests of the lowered loop IR text (CHECK lines): broadcasting is a
// stride-0 index, a Transpose feeding a Relu is the Relu's load index (no
// copy kernel), Softmax is one kernel with max and sum reductions.
#include <string>

#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "lowering/lower_graph.h"
#include "testing/filecheck.h"

namespace kiln::lowering {
namespace {

std::string Lowered(const char* graph_text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(graph_text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return "";
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*g);
  EXPECT_TRUE(lp.ok()) << lp.status();
  if (!lp.ok()) return "";
  return ir::loop::PrintProgram(lp->program);
}

TEST(LowerGolden, BroadcastAddReadsWithStrideZero) {
  const std::string out = Lowered(R"(
graph g(%a: f32[4,3], %b: f32[3]) -> (%c) opset 18 {
  %c = Add(%a, %b) name="add0" : f32[4,3]
}
)");
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %a: f32[4,3] input
    CHECK: buffer %b: f32[3] input
    CHECK: buffer %c: f32[4,3] output
    CHECK: kernel k0_add "Add" over (i0: 4, i1: 3) ops=["add0"] {
    CHECK-NEXT:   %0 = load %a[i0*3 + i1]
    CHECK-NEXT:   %1 = load %b[i1]
    CHECK-NEXT:   %2 = add %0, %1
    CHECK-NEXT:   store %c[i0*3 + i1], %2
    CHECK-NEXT: }
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

TEST(LowerGolden, TransposeIsTheReluLoadIndex) {
  const std::string out = Lowered(R"(
graph g(%x: f32[2,3,5]) -> (%y) opset 18 {
  %t = Transpose(%x) {perm=[2, 0, 1]} name="tr" : f32[5,2,3]
  %y = Relu(%t) name="relu" : f32[5,2,3]
}
)");
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK-NOT: buffer %t
    CHECK: kernel k0_relu "Relu" over (i0: 5, i1: 2, i2: 3) ops=["relu"] {
    CHECK-NEXT:   %0 = load %x[i0 + i1*15 + i2*5]
    CHECK-NEXT:   %1 = constant 0.0 : f32
    CHECK-NEXT:   %2 = max %0, %1
    CHECK-NEXT:   store %y[i0*6 + i1*3 + i2], %2
    CHECK-NEXT: }
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

TEST(LowerGolden, SoftmaxIsOneKernelWithTwoReductions) {
  const std::string out = Lowered(R"(
graph g(%x: f32[4,10]) -> (%y) opset 13 {
  %y = Softmax(%x) {axis=1} name="sm" : f32[4,10]
}
)");
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: kernel k0_softmax "Softmax" over (i0: 4, i1: 10) reduce (r0: 10) ops=["sm"] {
    CHECK-NEXT:   %0 = load %x[i0*10 + r0]
    CHECK-NEXT:   %1 = reduce max %0
    CHECK-NEXT:   %2 = load %x[i0*10 + r0]
    CHECK-NEXT:   %3 = sub %2, %1
    CHECK-NEXT:   %4 = exp %3
    CHECK-NEXT:   %5 = reduce sum %4
    CHECK-NEXT:   %6 = load %x[i0*10 + i1]
    CHECK-NEXT:   %7 = sub %6, %1
    CHECK-NEXT:   %8 = exp %7
    CHECK-NEXT:   %9 = div %8, %5
    CHECK-NEXT:   store %y[i0*10 + i1], %9
    CHECK-NEXT: }
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

}  // namespace
}  // namespace kiln::lowering
