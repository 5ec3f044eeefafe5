// The default loop pipeline on the fusion targets: each lowered graph's
// fused program is checked as text (CHECK lines: kernel counts and shapes)
// and numerically against the graph reference interpreter. Plus the
// pipeline's controls: disabling, the observer, unknown pass names.
#include "ir/loop/module.h"
#include "passes/loop/loop_pipeline.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/loop/text.h"
#include "passes/loop/loop_test_util.h"
#include "testing/filecheck.h"

namespace kiln::passes {
namespace {

using loop_testing::CheckAgainstReference;
using loop_testing::CountLoopKernels;
using loop_testing::FromGraphText;

struct Fused {
  std::string text;
  int before = 0;
  int after = 0;
};

// Lowers, runs the default pipeline, checks the result against the
// reference interpreter, returns the fused text and kernel counts.
Fused RunPipeline(const char* graph_text, double rtol = 1e-5) {
  Fused f;
  absl::StatusOr<ir::loop::LoopModule> lp = FromGraphText(graph_text);
  EXPECT_TRUE(lp.ok()) << lp.status();
  if (!lp.ok()) return f;
  f.before = CountLoopKernels(lp->program);
  absl::Status s = DefaultLoopPipeline(ConvLayoutOracle()).Run(&*lp);
  EXPECT_TRUE(s.ok()) << s;
  f.after = CountLoopKernels(lp->program);
  f.text = ir::loop::PrintProgram(lp->program);
  loop_testing::Tol tol;
  tol.rtol = rtol;
  for (uint32_t seed : {1u, 2u}) {
    tol.seed = seed;
    absl::Status n = CheckAgainstReference(graph_text, *lp, tol);
    EXPECT_TRUE(n.ok()) << n;
  }
  return f;
}

TEST(LoopPipeline, SoftmaxOpIsOneKernel) {
  Fused f = RunPipeline(R"(
graph g(%x: f32[4,10]) -> (%y) opset 13 {
  %y = Softmax(%x) {axis=-1} name="sm" : f32[4,10]
}
)");
  EXPECT_LE(f.after, 2);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK: kernel k0_softmax "Softmax" over (i0: 4, i1: 10) reduce (r0: 10) ops=["sm"] {
    CHECK: reduce max
    CHECK: reduce sum
    CHECK: store %y[i0*10 + i1]
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

constexpr char kDecomposedSoftmax[] = R"(
graph g(%x: f32[4,10]) -> (%y) opset 18 {
  %ax = constant i64[1] [1]
  %m = ReduceMax(%x, %ax) {keepdims=1} name="max" : f32[4,1]
  %d = Sub(%x, %m) name="sub" : f32[4,10]
  %e = Exp(%d) name="exp" : f32[4,10]
  %s = ReduceSum(%e, %ax) {keepdims=1} name="sum" : f32[4,1]
  %y = Div(%e, %s) name="div" : f32[4,10]
}
)";

TEST(LoopPipeline, DecomposedSoftmaxIsOneKernel) {
  Fused f = RunPipeline(kDecomposedSoftmax);
  EXPECT_EQ(f.before, 5);
  EXPECT_LE(f.after, 2);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK-NOT: buffer %m
    CHECK-NOT: buffer %e
    CHECK: kernel {{k[0-9]+}}_div "Div" over (i0: 4, i1: 10) reduce (r0: 10) ops=["div", {{.*}}"max"{{.*}}] {
    CHECK: reduce max
    CHECK: reduce sum
    CHECK: store %y[i0*10 + i1]
    CHECK-NEXT: }
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

TEST(LoopPipeline, ExpSumDivSoftmaxIsOneKernel) {
  Fused f = RunPipeline(R"(
graph g(%x: f32[3,2,8]) -> (%y) opset 18 {
  %ax = constant i64[1] [-1]
  %e = Exp(%x) name="exp" : f32[3,2,8]
  %s = ReduceSum(%e, %ax) {keepdims=1} name="sum" : f32[3,2,1]
  %y = Div(%e, %s) name="div" : f32[3,2,8]
}
)");
  EXPECT_EQ(f.before, 3);
  EXPECT_EQ(f.after, 1);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK: kernel {{.*}} over (i0: 3, i1: 2, i2: 8) reduce (r0: 8)
    CHECK-NEXT: load %x[i0*16 + i1*8 + i2]
    CHECK-NEXT: exp
    CHECK-NEXT: load %x[i0*16 + i1*8 + r0]
    CHECK-NEXT: exp
    CHECK-NEXT: reduce sum
    CHECK-NEXT: div
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

TEST(LoopPipeline, LayerNormalizationOpIsOneKernel) {
  Fused f = RunPipeline(R"(
graph g(%x: f32[6,16], %w: f32[16], %b: f32[16]) -> (%y) opset 17 {
  %y = LayerNormalization(%x, %w, %b) {axis=-1, epsilon=0.00001} name="ln" : f32[6,16]
}
)", 1e-4);
  EXPECT_LE(f.after, 2);
  EXPECT_EQ(f.after, 1);
}

constexpr char kDecomposedLayerNorm[] = R"(
graph g(%x: f32[2,5,16]) -> (%y) opset 17 {
  %ax = constant i64[1] [-1]
  %two = constant f32[] [2]
  %eps = constant f32[] [0.00001]
  %w = constant f32[16] [1, 2, 3, 4, 5, 6, 7, 8, 0.5, 0.25, 1, 1, 2, 2, 3, 3]
  %bias = constant f32[16] [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]
  %m = ReduceMean(%x) {axes=[-1], keepdims=1} name="mean" : f32[2,5,1]
  %d = Sub(%x, %m) name="sub" : f32[2,5,16]
  %p = Pow(%d, %two) name="pow" : f32[2,5,16]
  %v = ReduceMean(%p) {axes=[-1], keepdims=1} name="var" : f32[2,5,1]
  %ve = Add(%v, %eps) name="add_eps" : f32[2,5,1]
  %sd = Sqrt(%ve) name="sqrt" : f32[2,5,1]
  %n = Div(%d, %sd) name="div" : f32[2,5,16]
  %sc = Mul(%n, %w) name="mul" : f32[2,5,16]
  %y = Add(%sc, %bias) name="add" : f32[2,5,16]
}
)";

TEST(LoopPipeline, DecomposedLayerNormIsAtMostTwoKernels) {
  Fused f = RunPipeline(kDecomposedLayerNorm, 1e-4);
  EXPECT_EQ(f.before, 9);
  EXPECT_EQ(f.after, 1);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK-NOT: buffer %m
    CHECK-NOT: buffer %d
    CHECK-NOT: buffer %v
    CHECK: kernel {{.*}} over (i0: 2, i1: 5, i2: 16) reduce (r0: 16)
    CHECK-SAME: "var"
    CHECK-SAME: "mean"
    CHECK: reduce sum
    CHECK: reduce sum
    CHECK: sqrt
    CHECK: store %y[i0*80 + i1*16 + i2]
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

constexpr char kGeluErf[] = R"(
graph g(%x: f32[3,7]) -> (%y) opset 17 {
  %sqrt2 = constant f32[] [1.4142135]
  %one = constant f32[] [1]
  %half = constant f32[] [0.5]
  %a = Div(%x, %sqrt2) name="div" : f32[3,7]
  %b = Erf(%a) name="erf" : f32[3,7]
  %c = Add(%b, %one) name="add" : f32[3,7]
  %d = Mul(%x, %c) name="mul" : f32[3,7]
  %y = Mul(%d, %half) name="mul2" : f32[3,7]
}
)";

TEST(LoopPipeline, GeluErfIsOneKernel) {
  Fused f = RunPipeline(kGeluErf);
  EXPECT_EQ(f.before, 5);
  EXPECT_EQ(f.after, 1);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK: buffer %x: f32[3,7] input
    CHECK-NEXT: buffer %y: f32[3,7] output
    CHECK-NEXT: kernel {{.*}} over (i0: 3, i1: 7) ops=["mul2", "mul", "add", "erf", "div"] {
    CHECK: load %x[i0*7 + i1]
    CHECK: erf
    CHECK: store %y[i0*7 + i1]
    CHECK-NEXT: }
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

TEST(LoopPipeline, BiasAddGeluIsOneKernel) {
  Fused f = RunPipeline(R"(
graph g(%x: f32[4,6], %bias: f32[6]) -> (%y) opset 17 {
  %sqrt2 = constant f32[] [1.4142135]
  %one = constant f32[] [1]
  %half = constant f32[] [0.5]
  %h = Add(%x, %bias) name="bias" : f32[4,6]
  %a = Div(%h, %sqrt2) name="div" : f32[4,6]
  %b = Erf(%a) name="erf" : f32[4,6]
  %c = Add(%b, %one) name="add" : f32[4,6]
  %d = Mul(%h, %c) name="mul" : f32[4,6]
  %y = Mul(%d, %half) name="mul2" : f32[4,6]
}
)");
  EXPECT_EQ(f.before, 6);
  EXPECT_EQ(f.after, 1);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK-NOT: buffer %h
    CHECK: kernel {{.*}} over (i0: 4, i1: 6)
    CHECK-SAME: "bias"
    CHECK: load %x[i0*6 + i1]
    CHECK-NEXT: load %bias[i1]
    CHECK: erf
    CHECK-NOT: load %x
    CHECK: store %y[i0*6 + i1]
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

TEST(LoopPipeline, MatMulBiasGeluIsOneLoopKernelAfterTheExtern) {
  Fused f = RunPipeline(R"(
graph g(%x: f32[4,5]) -> (%y) opset 17 {
  %w = constant f32[5,3] [1, -2, 0.5, 0.25, 1, -1, 2, 0, 1, -0.5, 1, 1, 0.75, -1, 2]
  %bias = constant f32[3] [0.1, -0.2, 0.3]
  %sqrt2 = constant f32[] [1.4142135]
  %one = constant f32[] [1]
  %half = constant f32[] [0.5]
  %m = MatMul(%x, %w) name="mm" : f32[4,3]
  %h = Add(%m, %bias) name="bias" : f32[4,3]
  %a = Div(%h, %sqrt2) name="div" : f32[4,3]
  %b = Erf(%a) name="erf" : f32[4,3]
  %c = Add(%b, %one) name="add" : f32[4,3]
  %d = Mul(%h, %c) name="mul" : f32[4,3]
  %y = Mul(%d, %half) name="mul2" : f32[4,3]
}
)", 1e-4);
  EXPECT_EQ(f.after, 1);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK: extern {{.*}} call "onnx.MatMul"
    CHECK: kernel {{.*}} over (i0: 4, i1: 3)
    CHECK-SAME: "bias"
    CHECK: load %m[i0*3 + i1]
    CHECK: erf
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

TEST(LoopPipeline, LayerNormStatisticsShareOneKernel) {
  // Y, Mean and InvStdDev lower to three kernels; Mean and InvStdDev run
  // over the same rows and read the same input, so they merge.
  Fused f = RunPipeline(R"(
graph g(%x: f32[6,16], %w: f32[16]) -> (%y, %mean, %inv) opset 17 {
  %y, %mean, %inv = LayerNormalization(%x, %w) {axis=-1} name="ln" : f32[6,16], f32[6,1], f32[6,1]
}
)", 1e-4);
  EXPECT_EQ(f.before, 3);
  EXPECT_EQ(f.after, 2);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK: kernel {{.*}} over (i0: 6, i1: 16) reduce (r0: 16)
    CHECK: store %y
    CHECK: kernel {{.*}} over (i0: 6, i1: 1) reduce (r0: 16)
    CHECK: store %mean
    CHECK: store %inv
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

TEST(LoopPipeline, ViewChainNeverMaterializes) {
  Fused f = RunPipeline(R"(
graph g(%x: f32[2,3,4]) -> (%y) opset 17 {
  %shape = constant i64[2] [6, 4]
  %shape2 = constant i64[3] [4, 3, 2]
  %r = Relu(%x) name="relu" : f32[2,3,4]
  %v = Reshape(%r, %shape) name="reshape" : f32[6,4]
  %t = Transpose(%v) {perm=[1, 0]} name="transpose" : f32[4,6]
  %s = Sigmoid(%t) name="sigmoid" : f32[4,6]
  %y = Reshape(%s, %shape2) name="reshape2" : f32[4,3,2]
}
)");
  EXPECT_EQ(f.after, 1);
  absl::Status s = kiln::testing::RunFileCheck(f.text, R"(
    CHECK: buffer %x: f32[2,3,4] input
    CHECK-NEXT: buffer %y: f32[4,3,2] output
    CHECK-NEXT: kernel
    CHECK: load %x[
    CHECK: max
    CHECK: sigmoid
    CHECK: store %y[
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << f.text;
}

TEST(LoopPipeline, DisabledPassesLeaveTheProgramAlone) {
  absl::StatusOr<ir::loop::LoopModule> lp = FromGraphText(kGeluErf);
  ASSERT_TRUE(lp.ok()) << lp.status();
  const std::string before = ir::loop::PrintProgram(lp->program);
  LoopPipelineOptions opts;
  for (const std::string& n : DefaultLoopPipeline(ConvLayoutOracle()).PassNames()) opts.disabled.insert(n);
  ASSERT_TRUE(DefaultLoopPipeline(ConvLayoutOracle()).Run(&*lp, opts).ok());
  EXPECT_EQ(ir::loop::PrintProgram(lp->program), before);
}

TEST(LoopPipeline, UnknownDisabledPassIsAnError) {
  absl::StatusOr<ir::loop::LoopModule> lp = FromGraphText(kGeluErf);
  ASSERT_TRUE(lp.ok()) << lp.status();
  LoopPipelineOptions opts;
  opts.disabled.insert("fuse-everything");
  absl::Status s = DefaultLoopPipeline(ConvLayoutOracle()).Run(&*lp, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("fuse-everything"), std::string::npos) << s;
}

TEST(LoopPipeline, PassOrder) {
  const std::vector<std::string> want = {
      "eliminate-dead-buffers", "fuse-vertical", "fuse-horizontal",
      "fuse-vertical", "eliminate-dead-buffers", "propagate-layout", "demote-index"};
  EXPECT_EQ(DefaultLoopPipeline(ConvLayoutOracle()).PassNames(), want);
}

TEST(LoopPipeline, ObservesTheInputAndEveryPassThatRan) {
  absl::StatusOr<ir::loop::LoopModule> lp = FromGraphText(kGeluErf);
  ASSERT_TRUE(lp.ok()) << lp.status();
  std::vector<std::string> calls, texts;
  LoopPipelineOptions opts;
  opts.observer = [&](int index, const LoopPass* pass, bool changed,
                      const ir::loop::LoopModule& module) {
    calls.push_back(absl::StrCat(index, " ", pass == nullptr ? "input" : pass->name(), " ",
                                 changed));
    texts.push_back(ir::loop::PrintProgram(module.program));
    return absl::OkStatus();
  };
  opts.disabled.insert("fuse-horizontal");
  ASSERT_TRUE(DefaultLoopPipeline(ConvLayoutOracle()).Run(&*lp, opts).ok());
  // No oracle: propagate-layout changes nothing.
  EXPECT_EQ(calls, (std::vector<std::string>{
                       "0 input 0", "1 eliminate-dead-buffers 0", "2 fuse-vertical 1",
                       "4 fuse-vertical 0", "5 eliminate-dead-buffers 0",
                       "6 propagate-layout 0", "7 demote-index 0"}));
  absl::Status s = kiln::testing::RunFileCheck(texts[0], "CHECK: kernel k4_mul");
  EXPECT_TRUE(s.ok()) << s;
  s = kiln::testing::RunFileCheck(texts[2], R"(
    CHECK: kernel k4_mul
    CHECK-NOT: kernel
  )");
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace kiln::passes
