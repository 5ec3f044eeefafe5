// File: passes/loop/fusion_size_test.cc — fuse-vertical and fuse-horizontal
// on programs of thousands of kernels (a chain of Adds, many siblings): no
// fused kernel exceeds max_kernel_ops, the bound is where the kernels split,
// and the outputs equal the arithmetic's (evaluated by the loop interpreter).
// Speed is measured by //compiler:compile_scaling_benchmark, not here.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph/tensor.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "ir/loop/verifier.h"
#include "passes/loop/fuse_horizontal.h"
#include "passes/loop/fuse_vertical.h"

namespace kiln::passes {
namespace {

constexpr int kWidth = 16;

// t_0 = x + x, t_k = t_{k-1} + x; the last one is the output y = (n+1) x.
ir::loop::LoopModule AddChain(int n) {
  std::string text = absl::StrCat("buffer %x: f32[", kWidth, "] input\n");
  for (int k = 0; k + 1 < n; ++k) {
    absl::StrAppend(&text, "buffer %t", k, ": f32[", kWidth, "] intermediate\n");
  }
  absl::StrAppend(&text, "buffer %y: f32[", kWidth, "] output\n");
  for (int k = 0; k < n; ++k) {
    const std::string in = k == 0 ? "x" : absl::StrCat("t", k - 1);
    const std::string out = k + 1 == n ? "y" : absl::StrCat("t", k);
    absl::StrAppend(&text, "kernel k", k, " over (i0: ", kWidth, ") ops=[\"add", k, "\"] {\n",
                    "  %0 = load %", in, "[i0]\n", "  %1 = load %x[i0]\n",
                    "  %2 = add %0, %1\n", "  store %", out, "[i0], %2\n}\n");
  }
  absl::StatusOr<ir::loop::LoopProgram> p = ir::loop::ParseProgram(text);
  EXPECT_TRUE(p.ok()) << p.status();
  ir::loop::LoopModule m;
  if (p.ok()) m.program = *std::move(p);
  m.inputs = {0};
  m.outputs = {static_cast<int32_t>(m.program.buffers.size()) - 1};
  return m;
}

// o_k = x * (k+1) for k < n: n kernels that read only x.
ir::loop::LoopModule Siblings(int n) {
  std::string text = absl::StrCat("buffer %x: f32[", kWidth, "] input\n");
  for (int k = 0; k < n; ++k) {
    absl::StrAppend(&text, "buffer %o", k, ": f32[", kWidth, "] output\n");
  }
  for (int k = 0; k < n; ++k) {
    absl::StrAppend(&text, "kernel k", k, " over (i0: ", kWidth, ") {\n",
                    "  %0 = load %x[i0]\n", "  %1 = constant ", k + 1, ".0 : f32\n",
                    "  %2 = mul %0, %1\n", "  store %o", k, "[i0], %2\n}\n");
  }
  absl::StatusOr<ir::loop::LoopProgram> p = ir::loop::ParseProgram(text);
  EXPECT_TRUE(p.ok()) << p.status();
  ir::loop::LoopModule m;
  if (p.ok()) m.program = *std::move(p);
  m.inputs = {0};
  for (int k = 0; k < n; ++k) m.outputs.push_back(k + 1);
  return m;
}

// x = 1, 2, ..., 16: small integers, so every sum and product is exact.
std::map<std::string, ir::Tensor> Inputs() {
  ir::Tensor x(ir::DType::kF32, {kWidth});
  for (int i = 0; i < kWidth; ++i) x.data<float>()[i] = static_cast<float>(i + 1);
  return {{"x", std::move(x)}};
}

size_t LargestKernel(const ir::loop::LoopProgram& p) {
  size_t largest = 0;
  for (const ir::loop::Kernel& k : p.kernels) largest = std::max(largest, k.body.size());
  return largest;
}

TEST(FusionSize, LongChainSplitsAtTheBoundAndComputesTheSum) {
  constexpr int kN = 3000;
  ir::loop::LoopModule m = AddChain(kN);
  FuseVertical fuse;
  absl::StatusOr<bool> changed = fuse.Run(&m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(ir::loop::VerifyProgram(m.program).ok());
  const int bound = FuseVertical::Options().max_kernel_ops;
  EXPECT_LE(LargestKernel(m.program), static_cast<size_t>(bound));
  // An inlined Add costs one op (its add: its load of x is the consumer's),
  // so a kernel holds about bound - 3 Adds. The last producers are inlined
  // first: every kernel but the first (the rest of the chain) is full.
  EXPECT_GE(m.program.kernels.size(), static_cast<size_t>(kN / bound));
  EXPECT_LE(m.program.kernels.size(), static_cast<size_t>(kN / (bound - 8) + 1));
  for (size_t k = 1; k < m.program.kernels.size(); ++k) {
    EXPECT_GE(m.program.kernels[k].body.size(), static_cast<size_t>(bound) - 4) << k;
  }
  absl::StatusOr<std::map<std::string, ir::Tensor>> out =
      ir::loop::RunLoopProgram(m.program, Inputs());
  ASSERT_TRUE(out.ok()) << out.status();
  const ir::Tensor& y = out->at("y");
  for (int i = 0; i < kWidth; ++i) {
    EXPECT_EQ(y.data<float>()[i], static_cast<float>((kN + 1) * (i + 1))) << i;
  }
}

TEST(FusionSize, BoundIsAnOption) {
  ir::loop::LoopModule m = AddChain(40);
  FuseVertical::Options options;
  options.max_kernel_ops = 10;
  FuseVertical fuse(options);
  ASSERT_TRUE(fuse.Run(&m).ok());
  EXPECT_LE(LargestKernel(m.program), 10u);
  EXPECT_GE(m.program.kernels.size(), 5u);  // 40 adds, at most 7 per kernel
  absl::StatusOr<std::map<std::string, ir::Tensor>> out =
      ir::loop::RunLoopProgram(m.program, Inputs());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").data<float>()[2], 41.0f * 3.0f);
}

TEST(FusionSize, ManySiblingsMergeUpToTheBoundAndKeepEveryOutput) {
  constexpr int kN = 3000;
  ir::loop::LoopModule m = Siblings(kN);
  FuseHorizontal fuse;
  absl::StatusOr<bool> changed = fuse.Run(&m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(ir::loop::VerifyProgram(m.program).ok());
  const int bound = FuseHorizontal::Options().max_kernel_ops;
  EXPECT_LE(LargestKernel(m.program), static_cast<size_t>(bound));
  // A sibling adds three ops (constant, mul, store; the load of x is
  // shared): at least 3n / bound kernels, and far fewer than n.
  EXPECT_GE(m.program.kernels.size(), static_cast<size_t>(3 * kN / bound));
  EXPECT_LE(m.program.kernels.size(), static_cast<size_t>(3 * kN / (bound - 8) + 1));
  absl::StatusOr<std::map<std::string, ir::Tensor>> out =
      ir::loop::RunLoopProgram(m.program, Inputs());
  ASSERT_TRUE(out.ok()) << out.status();
  for (int k = 0; k < kN; k += 97) {
    const ir::Tensor& o = out->at(absl::StrCat("o", k));
    for (int i = 0; i < kWidth; ++i) {
      ASSERT_EQ(o.data<float>()[i], static_cast<float>((k + 1) * (i + 1))) << k << " " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::passes
