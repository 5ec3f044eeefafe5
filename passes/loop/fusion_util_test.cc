// Tests of the loop passes' helpers: substitution, dense store indices and
// their inverses (checked by evaluation over every point), dead and common
// op elimination.
#include "passes/loop/fusion_util.h"

#include <vector>

#include "gtest/gtest.h"
#include "ir/loop/index_expr.h"
#include "ir/loop/text.h"

namespace kiln::passes::loop_util {
namespace {

using ir::loop::Const;
using ir::loop::Var;

TEST(FusionUtil, SubstituteVarsReplacesEveryOccurrence) {
  const IndexExpr e = ir::loop::FloorDiv(Var(0) * 4 + Var(1), 3) + Var(0);
  const IndexExpr s = SubstituteVars(e, {Var(2), Const(5)});
  EXPECT_EQ(ir::loop::ToString(s), ir::loop::ToString(
      ir::loop::FloorDiv(Var(2) * 4 + Const(5), 3) + Var(2)));
  EXPECT_FALSE(s.UsesVar(0));
}

TEST(FusionUtil, DenseIndexOfRowMajorAndTransposedStores) {
  std::optional<DenseIndex> d = AnalyzeDenseIndex(Var(0) * 8 + Var(1), {4, 8});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->strides, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(d->size, 32);
  d = AnalyzeDenseIndex(Var(0) + Var(1) * 4 + Var(2), {4, 6, 1});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->strides, (std::vector<int64_t>{1, 4, 0}));
  EXPECT_EQ(d->size, 24);
}

TEST(FusionUtil, DenseIndexRefusesGapsOverlapsOffsetsAndNonAffine) {
  EXPECT_FALSE(AnalyzeDenseIndex(Var(0) * 9 + Var(1), {4, 8}).has_value());
  EXPECT_FALSE(AnalyzeDenseIndex(Var(0) * 4 + Var(1), {4, 8}).has_value());
  EXPECT_FALSE(AnalyzeDenseIndex(Var(0) * 8 + Var(1) + 1, {4, 8}).has_value());
  EXPECT_FALSE(AnalyzeDenseIndex(ir::loop::Mod(Var(0), 2), {4}).has_value());
  EXPECT_FALSE(AnalyzeDenseIndex(Var(0) + Var(1), {4, 0}).has_value());
  EXPECT_FALSE(AnalyzeDenseIndex(Var(0) + Var(2), {4, 2}).has_value());
}

TEST(FusionUtil, InverseRecoversEveryPoint) {
  // Store order (i0, i1, i2) with strides (1, 12, 3) over extents (3, 2, 4).
  const std::vector<int64_t> ext = {3, 2, 4};
  const IndexExpr store = Var(0) + Var(1) * 12 + Var(2) * 3;
  std::optional<DenseIndex> d = AnalyzeDenseIndex(store, ext);
  ASSERT_TRUE(d.has_value());
  // The consumer reads offset v0 over [0, 24).
  const std::vector<IndexExpr> inv = InvertDenseIndex(Var(0), *d, ext, {24});
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t c = 0; c < 4; ++c) {
        absl::StatusOr<int64_t> off = ir::loop::Evaluate(store, {a, b, c});
        ASSERT_TRUE(off.ok());
        const std::vector<int64_t> want = {a, b, c};
        for (int v = 0; v < 3; ++v) {
          absl::StatusOr<int64_t> got = ir::loop::Evaluate(inv[v], {*off});
          ASSERT_TRUE(got.ok());
          EXPECT_EQ(*got, want[v]) << "var " << v << " at offset " << *off;
        }
      }
    }
  }
}

TEST(FusionUtil, InverseOfASameShapeReadIsTheConsumersVariables) {
  std::optional<DenseIndex> d = AnalyzeDenseIndex(Var(0) * 10 + Var(1), {4, 10});
  ASSERT_TRUE(d.has_value());
  const std::vector<IndexExpr> inv =
      InvertDenseIndex(Var(0) * 10 + Var(2), *d, {4, 10}, {4, 1, 10});
  EXPECT_EQ(inv[0], Var(0));
  EXPECT_EQ(inv[1], Var(2));
}

TEST(FusionUtil, CommonOpsAndDeadOps) {
  absl::StatusOr<ir::loop::LoopProgram> p = ir::loop::ParseProgram(R"(
buffer %x: f32[4] input
buffer %y: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  %1 = load %x[i0]
  %2 = exp %0
  %3 = exp %1
  %4 = add %2, %3
  %5 = sqrt %4
  store %y[i0], %4
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  ir::loop::Kernel& k = p->kernels[0];
  EXPECT_TRUE(EliminateCommonOps(&k));
  EXPECT_EQ(ir::loop::PrintKernel(*p, k),
            "kernel k0 over (i0: 4) {\n"
            "  %0 = load %x[i0]\n"
            "  %1 = exp %0\n"
            "  %2 = add %1, %1\n"
            "  store %y[i0], %2\n"
            "}\n");
  EXPECT_FALSE(EliminateDeadOps(&k));
}

TEST(FusionUtil, LoadsOfABufferTheKernelWritesAreNotMerged) {
  absl::StatusOr<ir::loop::LoopProgram> p = ir::loop::ParseProgram(R"(
buffer %y: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %y[0]
  %1 = load %y[0]
  %2 = add %0, %1
  store %y[i0], %2
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(EliminateCommonOps(&p->kernels[0]));
}

TEST(FusionUtil, VerifyKernelAloneChecksTheKernelAgainstItsOwnBuffers) {
  // Buffers the kernel does not touch (before and between its own) play no
  // part; bounds, writability and buffer indices are still checked.
  absl::StatusOr<ir::loop::LoopProgram> p = ir::loop::ParseProgram(R"(
buffer %u: f32[2] input
buffer %x: f32[4] input
buffer %v: f32[3] output
buffer %y: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  store %y[i0], %0
}
kernel k1 over (i0: 4) {
  %0 = load %x[i0 + 1]
  store %y[i0], %0
}
kernel k2 over (i0: 4) {
  %0 = load %y[i0]
  store %x[i0], %0
}
)");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(VerifyKernelAlone(*p, p->kernels[0]).ok());
  EXPECT_FALSE(VerifyKernelAlone(*p, p->kernels[1]).ok());  // reads x[4]
  EXPECT_FALSE(VerifyKernelAlone(*p, p->kernels[2]).ok());  // writes an input
  ir::loop::Kernel bad = p->kernels[0];
  bad.body[0].buffer = 99;
  const absl::Status s = VerifyKernelAlone(*p, bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("99"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace kiln::passes::loop_util
