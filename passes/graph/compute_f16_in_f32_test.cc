// Tests for pass compute-f16-in-f32. The numeric check compares the pass's
// graph against the original on the reference interpreter, which rounds
// every f16 op's result to f16: the two differ by that intermediate
// rounding only, a few f16 ulps (2^-11 relative each) over these graphs.
#include "passes/graph/compute_f16_in_f32.h"

#include <gtest/gtest.h>

#include "ir/graph/text.h"
#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

// Up to ~8 f16 ulps relative, and 1e-3 absolute for results near zero.
const interp::Tolerance kF16Rounding{4e-3, 1e-3, std::nullopt};

TEST(ComputeF16InF32, ConvModelComputesInF32BetweenInterfaceCasts) {
  ComputeF16InF32 pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f16[1,2,3,3]) -> (%y) opset 18 {
  %w = constant f16[2,2,1,1] [0.5, -1.25, 2, 0.125]
  %b = constant f16[2] [0.25, -0.5]
  %c = Conv(%x, %w, %b) : f16[1,2,3,3]
  %s = Sigmoid(%c) : f16[1,2,3,3]
  %y = Mul(%c, %s) : f16[1,2,3,3]
}
// CHECK: graph main(%x: f16[1,2,3,3]) -> (%y)
// CHECK: %w = constant f32[2,2,1,1] [0.5, -1.25, 2.0, 0.125]
// CHECK: %b = constant f32[2] [0.25, -0.5]
// CHECK: %x.f32 = Cast(%x) {to=1} : f32[1,2,3,3]
// CHECK-NEXT: %c = Conv(%x.f32, %w, %b) : f32[1,2,3,3]
// CHECK-NEXT: %s = Sigmoid(%c) : f32[1,2,3,3]
// CHECK-NEXT: %y.f32 = Mul(%c, %s) : f32[1,2,3,3]
// CHECK-NEXT: %y = Cast(%y.f32) {to=10} : f16[1,2,3,3]
)", kF16Rounding);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
}

TEST(ComputeF16InF32, CastToF16KeepsItsRounding) {
  // An f32 model that rounds through f16 on purpose keeps the rounding, so
  // the results are equal, not merely close.
  ComputeF16InF32 pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[8]) -> (%y) opset 18 {
  %h = Cast(%x) {to=10} : f16[8]
  %e = Exp(%h) : f16[8]
  %y = CastLike(%e, %x) : f32[8]
}
// CHECK: %h.f16 = Cast(%x) {to=10} : f16[8]
// CHECK-NEXT: %h = Cast(%h.f16) {to=1} : f32[8]
// CHECK-NEXT: %e = Exp(%h) : f32[8]
// CHECK-NEXT: %y = CastLike(%e, %x) : f32[8]
)", kF16Rounding);
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(ComputeF16InF32, CastLikeToF16Rounds) {
  ComputeF16InF32 pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[4], %like: f16[4]) -> (%y) opset 18 {
  %c = CastLike(%x, %like) : f16[4]
  %y = Add(%c, %like) : f16[4]
}
// CHECK: %like.f32 = Cast(%like) {to=1} : f32[4]
// CHECK-NEXT: %c.f16 = Cast(%x) {to=10} : f16[4]
// CHECK-NEXT: %c = Cast(%c.f16) {to=1} : f32[4]
// CHECK-NEXT: %y.f32 = Add(%c, %like.f32) : f32[4]
// CHECK-NEXT: %y = Cast(%y.f32) {to=10} : f16[4]
)", kF16Rounding);
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(ComputeF16InF32, OutputAlsoReadInsideAndPassThroughInput) {
  ComputeF16InF32 pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f16[4]) -> (%a, %b, %x) opset 18 {
  %a = Relu(%x) : f16[4]
  %b = Neg(%a) : f16[4]
}
// CHECK: graph main(%x: f16[4]) -> (%a, %b, %x)
// CHECK: %x.f32 = Cast(%x) {to=1} : f32[4]
// CHECK-NEXT: %a.f32 = Relu(%x.f32) : f32[4]
// CHECK-NEXT: %b.f32 = Neg(%a.f32) : f32[4]
// CHECK-NEXT: %a = Cast(%a.f32) {to=10} : f16[4]
// CHECK-NEXT: %b = Cast(%b.f32) {to=10} : f16[4]
)", kF16Rounding);
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(ComputeF16InF32, DTypeAndTensorAttributesNameF32) {
  ComputeF16InF32 pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f16[3,3]) -> (%y) opset 18 {
  %s = constant i64[2] [3, 3]
  %c = ConstantOfShape(%s) {value=tensor f16[1] [1.5]} : f16[3,3]
  %e = EyeLike(%x) {dtype=10} : f16[3,3]
  %a = Add(%c, %e) : f16[3,3]
  %y = Mul(%a, %x) : f16[3,3]
}
// CHECK: %c = ConstantOfShape(%s) {value=tensor f32[1] [1.5]} : f32[3,3]
// CHECK-NEXT: %e = EyeLike(%x.f32) {dtype=1} : f32[3,3]
)", kF16Rounding);
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(ComputeF16InF32, F32ModelAndModelWithSubgraphsStayAsTheyAre) {
  ComputeF16InF32 pass;
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, R"(
graph main(%x: f32[4]) -> (%y) opset 18 {
  %y = Relu(%x) : f32[4]
}
// CHECK: %y = Relu(%x) : f32[4]
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph main(%x: f16[4], %c: bool[]) -> (%y) opset 18 {
  %y = If(%c) {
    then_branch=graph t() captures(%in: f16[4] = %x) -> (%o) {
      %o = Neg(%in) : f16[4]
    },
    else_branch=graph e() captures(%in: f16[4] = %x) -> (%o) {
      %o = Relu(%in) : f16[4]
    }
  } : f16[4]
}
)");
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string before = ir::PrintGraph(*g);
  absl::StatusOr<bool> changed = pass.Run(&*g);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(ir::PrintGraph(*g), before);
}

}  // namespace
}  // namespace kiln::passes
