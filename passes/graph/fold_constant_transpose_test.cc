// Tests for pass fold-constant-transpose. Expected tensors are transposed by
// hand; RunPassAndCheck also compares the reference interpreter's outputs
// before and after the pass.
#include "passes/graph/fold_constant_transpose.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

absl::StatusOr<PassCheckResult> RunFold(const std::string& text) {
  FoldConstantTranspose pass;
  return RunPassAndCheck(pass, text);
}

// W = [[1, 2], [3, 4], [5, 6]] (default perm reverses the axes):
// W^T = [[1, 3, 5], [2, 4, 6]].
TEST(FoldConstantTranspose, MatMulReadsTheTransposedConstant) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[4,2]) -> (%y) opset 18 {
  %w = constant f32[3,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %wt = Transpose(%w) : f32[2,3]
  %y = MatMul(%x, %wt) : f32[4,3]
}
// CHECK: %w = constant f32[3,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
// CHECK-NEXT: %wt = constant f32[2,3] [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
// CHECK-NEXT: %y = MatMul(%x, %wt)
// CHECK-NOT: Transpose
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

// perm [1, 2, 0] on in[c][a][b] = 6c + 2a + b (shape [2,3,2]):
// out[a][b][c] = in[c][a][b], shape [3,2,2], row-major
// a=0: (0, 6), (1, 7); a=1: (2, 8), (3, 9); a=2: (4, 10), (5, 11).
TEST(FoldConstantTranspose, ExplicitPermOnIntegers) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[3,2,2]) -> (%y) opset 18 {
  %c = constant i64[2,3,2] [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
  %t = Transpose(%c) {perm=[1, 2, 0]} : i64[3,2,2]
  %f = Cast(%t) {to=1} : f32[3,2,2]
  %y = Add(%x, %f) : f32[3,2,2]
}
// CHECK: %t = constant i64[3,2,2] [0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11]
// CHECK-NEXT: %f = Cast(%t)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

// The source constant is still read by another node: it stays as it is.
TEST(FoldConstantTranspose, SharedSourceStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[2,2]) -> (%y, %z) opset 18 {
  %w = constant f32[2,2] [1.0, -2.0, 0.5, 3.0]
  %wt = Transpose(%w) {perm=[1, 0]} : f32[2,2]
  %y = MatMul(%x, %wt) : f32[2,2]
  %z = MatMul(%x, %w) : f32[2,2]
}
// CHECK: %w = constant f32[2,2] [1.0, -2.0, 0.5, 3.0]
// CHECK-NEXT: %wt = constant f32[2,2] [1.0, 0.5, -2.0, 3.0]
// CHECK-NEXT: %y = MatMul(%x, %wt)
// CHECK-NEXT: %z = MatMul(%x, %w)
)");
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(FoldConstantTranspose, NonConstantInputStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[2,3]) -> (%y) opset 18 {
  %t = Transpose(%x) : f32[3,2]
  %y = Relu(%t) : f32[3,2]
}
// CHECK: %t = Transpose(%x)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

TEST(FoldConstantTranspose, GraphOutputStays) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[2]) -> (%y, %t) opset 18 {
  %w = constant f32[2,1] [1.5, -0.5]
  %t = Transpose(%w) : f32[1,2]
  %y = Add(%x, %t) : f32[1,2]
}
// CHECK: %t = Transpose(%w)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

TEST(FoldConstantTranspose, BadPermIsAnError) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[2,2]) -> (%y) opset 18 {
  %w = constant f32[2,2] [1.0, 2.0, 3.0, 4.0]
  %t = Transpose(%w) {perm=[0, 0]} name="tr" : f32[2,2]
  %y = Add(%x, %t) : f32[2,2]
}
// CHECK: Transpose
)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("node 'tr' (Transpose)"), std::string::npos)
      << r.status();
}

TEST(FoldConstantTranspose, DeclaredShapeMismatchIsAnError) {
  absl::StatusOr<PassCheckResult> r = RunFold(R"(
graph main(%x: f32[3,2]) -> (%y) opset 18 {
  %w = constant f32[3,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  %t = Transpose(%w) name="tr" : f32[3,2]
  %y = Add(%x, %t) : f32[3,2]
}
// CHECK: Transpose
)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("node 'tr' (Transpose)"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace kiln::passes
