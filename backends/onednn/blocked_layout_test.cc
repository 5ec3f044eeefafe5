// oneDNN on channel-blocked activations: OneDnnCall with blocked src/dst
// specs (odd channel counts, a sum post-op) against the same call on plain
// buffers, and whole small CNNs after propagate-layout (the real oneDNN
// oracle) run on OneDnnExternKernel against the graph reference
// interpreter, with no per-call reorders left on interior convs.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/substitute.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/layout_oracle.h"
#include "backends/onednn/onednn_call.h"
#include "gtest/gtest.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "ir/loop/blocked_layout.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "lowering/lower_graph.h"
#include "passes/loop/propagate_layout.h"
#include "passes/loop/propagate_layout_test_util.h"
#include "interp/compare.h"
#include "interp/interpreter.h"

namespace kiln::onednn {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

Tensor Random(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

std::string C(const Shape& shape, uint32_t seed, float scale = 1.0f) {
  Tensor t = Random(shape, seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] *= scale;
  return ir::PrintTensor(t, ir::PrintOptions::Full());
}

void ExpectClose(const Tensor& got, const Tensor& want) {
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  interp::CompareResult r = interp::CompareTensors(got, want, tol);
  EXPECT_TRUE(r.ok) << r.message;
}

// The layout this host's conv kernels want for a 32 -> 32 3x3 conv (8 on
// AVX2, 16 or channels-last on AVX-512).
int64_t HostBlock() {
  FusedCall c;
  c.src = {DType::kF32, {1, 32, 8, 8}};
  c.weights = {DType::kF32, {32, 32, 3, 3}};
  c.dst = {DType::kF32, {1, 32, 8, 8}};
  c.conv.pads_begin = c.conv.pads_end = {1, 1};
  absl::StatusOr<ActivationBlocks> b = OneDnnCall::PreferredActivationBlocks(c);
  return b.ok() ? b->dst : 0;
}

TEST(PreferredActivationBlocks, ConvWantsOneBlockMatMulNone) {
  const int64_t block = HostBlock();
  EXPECT_TRUE(block == 8 || block == 16 || block == ActivationBlocks::kChannelsLast) << block;
  FusedCall m;
  m.kind = CallKind::kMatMul;
  m.src = {DType::kF32, {4, 8}};
  m.weights = {DType::kF32, {8, 3}};
  m.dst = {DType::kF32, {4, 3}};
  absl::StatusOr<ActivationBlocks> b = OneDnnCall::PreferredActivationBlocks(m);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->src, 0);
  EXPECT_EQ(b->dst, 0);
  FusedCall bad = m;
  bad.dst.shape = {4, 5};
  EXPECT_EQ(OneDnnCall::PreferredActivationBlocks(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The ISA part of an impl name ("avx512_core" of "jit_1x1:avx512_core").
std::string IsaOf(const std::string& impl) { return impl.substr(impl.rfind(':') + 1); }

// `spec` laid out as `block` says (0 plain, kChannelsLast NHWC in one block
// of its channel count), as OneDnnExternKernel describes propagate-layout's
// buffers.
TensorSpec LaidOut(TensorSpec spec, int64_t block) {
  spec.channels_last = block == ActivationBlocks::kChannelsLast;
  spec.channel_block = spec.channels_last ? spec.shape[1] : block;
  return spec;
}

// `t` in the layout of LaidOut(spec of t, block).
absl::StatusOr<Tensor> ToLayout(const Tensor& t, int64_t block) {
  if (block == 0) return t;
  return ir::loop::ToBlocked(t, block == ActivationBlocks::kChannelsLast ? t.shape()[1] : block);
}

// Every layout PreferredActivationBlocks reports (the preferred one and the
// alternatives) gets an optimized kernel with no reorder from Create (a conv
// that needs explicit padding pays its src copy: OneDnnCallConv.
// WidePaddingRunsOnADirectKernel), with
// the same result as the call on plain buffers; an alternative is marked
// slower exactly when its kernel's ISA differs from the preferred one's.
// A 1x1 conv, a grouped conv with 8 channels a group (RegNet) and a
// depthwise one.
TEST(PreferredActivationBlocks, EveryReportedLayoutRunsWithoutReorders) {
  struct Case {
    Shape w;
    int64_t groups;
    int64_t pad;
  };
  for (const Case& c : {Case{{32, 32, 1, 1}, 1, 0}, Case{{32, 8, 3, 3}, 4, 1},
                        Case{{32, 1, 3, 3}, 32, 1}}) {
    SCOPED_TRACE(c.groups);
    FusedCall plain;
    plain.src = {DType::kF32, {1, 32, 7, 7}};
    plain.weights = {DType::kF32, c.w};
    plain.bias = TensorSpec{DType::kF32, {32}};
    plain.dst = {DType::kF32, {1, 32, 7, 7}};
    plain.conv.groups = c.groups;
    plain.conv.pads_begin = plain.conv.pads_end = {c.pad, c.pad};
    plain.post_ops = {PostOp::Relu()};
    absl::StatusOr<ActivationBlocks> blocks = OneDnnCall::PreferredActivationBlocks(plain);
    ASSERT_TRUE(blocks.ok()) << blocks.status();
    ASSERT_NE(blocks->dst, 0);
    const Tensor w = Random(c.w, 5), bias = Random({32}, 6), x = Random({1, 32, 7, 7}, 7);
    auto p = OneDnnCall::Create(plain, &w, &bias);
    ASSERT_TRUE(p.ok()) << p.status();
    Tensor want(DType::kF32, plain.dst.shape);
    ASSERT_TRUE((*p)->Execute(x.raw_data(), {}, want.raw_data()).ok());

    std::vector<ActivationBlocks::Alternative> layouts = {{blocks->src, blocks->dst, false}};
    layouts.insert(layouts.end(), blocks->also.begin(), blocks->also.end());
    std::string preferred_isa;
    for (const ActivationBlocks::Alternative& l : layouts) {
      SCOPED_TRACE(l.src * 100 + l.dst);
      FusedCall blocked = plain;
      blocked.src = LaidOut(plain.src, l.src);
      blocked.dst = LaidOut(plain.dst, l.dst);
      auto b = OneDnnCall::Create(blocked, &w, &bias);
      ASSERT_TRUE(b.ok()) << b.status();
      const std::string impl = (*b)->impl_name();
      EXPECT_EQ((*b)->reorders_per_call(), 0) << impl;
      EXPECT_TRUE(impl.rfind("jit", 0) == 0 || impl.rfind("brg", 0) == 0 ||
                  impl.rfind("brdgmm", 0) == 0)
          << impl;
      if (preferred_isa.empty()) {
        preferred_isa = IsaOf(impl);
      } else {
        EXPECT_EQ(l.slower_isa, IsaOf(impl) != preferred_isa) << impl;
      }
      absl::StatusOr<Tensor> xb = ToLayout(x, l.src);
      absl::StatusOr<Tensor> yb = ToLayout(want, l.dst);
      ASSERT_TRUE(xb.ok() && yb.ok());
      ASSERT_TRUE((*b)->Execute(xb->raw_data(), {}, yb->raw_data()).ok());
      absl::StatusOr<Tensor> got = ir::loop::FromBlocked(*yb, 32);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectClose(*got, want);
    }
  }
}

// conv 13 -> 11 channels (neither a multiple of the block) + bias + sum +
// relu on blocked src/dst equals the same call on plain NCHW buffers.
TEST(OneDnnCallBlocked, OddChannelsWithSumMatchPlain) {
  FusedCall plain;
  plain.src = {DType::kF32, {2, 13, 6, 5}};
  plain.weights = {DType::kF32, {11, 13, 3, 3}};
  plain.bias = TensorSpec{DType::kF32, {11}};
  plain.dst = {DType::kF32, {2, 11, 6, 5}};
  plain.conv.pads_begin = plain.conv.pads_end = {1, 1};
  plain.post_ops = {PostOp::Sum(), PostOp::Relu()};
  // The layouts an optimized kernel takes for these odd channel counts (on
  // AVX2 nChw8c for both; on AVX-512 hosts a plain src and an nChw16c dst,
  // jit:avx512_core having no nChw16c kernel for 13 input channels; there
  // brgconv's NHWC may come first, the blocked pair as an alternative).
  absl::StatusOr<ActivationBlocks> want_blocks = OneDnnCall::PreferredActivationBlocks(plain);
  ASSERT_TRUE(want_blocks.ok()) << want_blocks.status();
  std::vector<ActivationBlocks::Alternative> layouts = {{want_blocks->src, want_blocks->dst}};
  layouts.insert(layouts.end(), want_blocks->also.begin(), want_blocks->also.end());
  auto first_blocked = std::find_if(layouts.begin(), layouts.end(),
                                    [](const auto& l) { return l.dst > 0; });
  ASSERT_NE(first_blocked, layouts.end());
  const int64_t block = first_blocked->dst;
  EXPECT_TRUE(first_blocked->src == 0 || first_blocked->src == block) << first_blocked->src;
  FusedCall blocked = plain;
  blocked.src.channel_block = first_blocked->src;
  blocked.dst.channel_block = block;
  const Tensor w = Random({11, 13, 3, 3}, 1), bias = Random({11}, 2);
  const Tensor x = Random(plain.src.shape, 3), residual = Random(plain.dst.shape, 4);

  auto p = OneDnnCall::Create(plain, &w, &bias);
  ASSERT_TRUE(p.ok()) << p.status();
  Tensor want = residual;
  ASSERT_TRUE((*p)->Execute(x.raw_data(), {}, want.raw_data()).ok());

  auto b = OneDnnCall::Create(blocked, &w, &bias);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->reorders_per_call(), 0) << (*b)->src_layout() << " " << (*b)->dst_layout()
                                          << " " << (*b)->impl_name() << " block " << block;
  absl::StatusOr<Tensor> xb =
      blocked.src.channel_block > 0 ? ir::loop::ToBlocked(x, block) : absl::StatusOr<Tensor>(x);
  absl::StatusOr<Tensor> yb = ir::loop::ToBlocked(residual, block);
  ASSERT_TRUE(xb.ok() && yb.ok());
  ASSERT_TRUE((*b)->Execute(xb->raw_data(), {}, yb->raw_data()).ok());
  absl::StatusOr<Tensor> got = ir::loop::FromBlocked(*yb, 11);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(*got, want);
  // oneDNN keeps the channel tail zero.
  const int64_t cb = (11 + block - 1) / block;
  for (int64_t i = 0; i < yb->num_elements(); ++i) {
    const int64_t channel = (i / block / 30) % cb * block + i % block;
    if (channel >= 11) {
      ASSERT_EQ(yb->data<float>()[i], 0.0f) << i;
    }
  }
  // A block oneDNN has no tag for is refused at creation.
  FusedCall odd = blocked;
  odd.src.channel_block = odd.dst.channel_block = 3;
  EXPECT_EQ(OneDnnCall::Create(odd, &w, &bias).status().code(),
            absl::StatusCode::kUnimplemented);
}

// Runs `text` after propagate-layout with every extern on oneDNN; returns
// the per-call reorders of each extern, in program order (and each one's
// oneDNN implementation in `impls`).
std::vector<int> CheckOnOneDnn(const std::string& text,
                               std::vector<std::string>* impls = nullptr) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(*g);
  EXPECT_TRUE(lp.ok()) << lp.status();
  passes::PropagateLayout pass(ConvLayoutOracle());
  absl::StatusOr<bool> changed = pass.Run(&*lp);
  EXPECT_TRUE(changed.ok() && *changed) << changed.status();
  std::vector<int> reorders;
  auto run = [&](const ir::loop::LoopProgram& p, const ir::loop::Kernel& k,
                 absl::Span<void* const> in, absl::Span<void* const> out) -> absl::Status {
    absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> call =
        OneDnnExternKernel::Create(p, k, lp->constants);
    if (!call.ok()) return call.status();
    reorders.push_back((*call)->info().reorders_per_call);
    if (impls != nullptr) impls->push_back((*call)->info().impl);
    return (*call)->Run(in, out);
  };
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < g->inputs().size(); ++i) {
    inputs.push_back(Random(g->value(g->inputs()[i]).shape, 20 + i));
  }
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(*g, inputs);
  absl::StatusOr<std::vector<Tensor>> got = passes::layout_testing::RunProgram(*lp, inputs, run);
  EXPECT_TRUE(want.ok()) << want.status();
  EXPECT_TRUE(got.ok()) << got.status() << "\n" << ir::loop::PrintProgram(lp->program);
  if (want.ok() && got.ok()) {
    for (size_t i = 0; i < want->size(); ++i) ExpectClose((*got)[i], (*want)[i]);
  }
  return reorders;
}

TEST(BlockedCnn, PoolResidualOddChannelsMatchReference) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,3,12,12]) -> (%y) opset 17 {
  %w1 = constant $0
  %b1 = constant $1
  %w2 = constant $2
  %w3 = constant $3
  %w4 = constant $4
  %c1 = Conv(%x, %w1, %b1) {pads=[1, 1, 1, 1]} : f32[1,32,12,12]
  %r1 = Relu(%c1) : f32[1,32,12,12]
  %p = MaxPool(%r1) {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]} : f32[1,32,6,6]
  %y2 = kiln.FusedConv(%p, %w2, %p) {pads=[1, 1, 1, 1], post_ops=["sum", "relu"],
      post_op_alphas=[1.0, 0.0], post_op_betas=[0.0, 0.0], post_op_inputs=[2, -1],
      fused_nodes=["c2", "add", "relu"]} : f32[1,32,6,6]
  %c3 = Conv(%y2, %w3) : f32[1,21,6,6]
  %c4 = Conv(%c3, %w4) {pads=[1, 1, 1, 1]} : f32[1,32,6,6]
  %y = GlobalAveragePool(%c4) : f32[1,32,1,1]
}
)",
                                            C({32, 3, 3, 3}, 1), C({32}, 2), C({32, 32, 3, 3}, 3),
                                            C({21, 32, 1, 1}, 4), C({32, 21, 3, 3}, 5));
  const std::vector<int> reorders = CheckOnOneDnn(text);
  ASSERT_EQ(reorders.size(), 4u);
  for (int r : reorders) EXPECT_EQ(r, 0);
}

// YOLOv8's C2f bottleneck: a conv with swish and then the residual add of a
// Split output that a Concat also reads. oneDNN 2.6 takes an eltwise then a
// sum only in its reference kernel on AVX2, so the call runs the sum as a
// binary add; the layout oracle asks that form too, so the conv gets the
// blocked layout of its neighbours instead of the plain one, where only the
// gemm-based kernel (several times slower) takes it.
TEST(BlockedCnn, SwishThenResidualOfSplitRunsBlocked) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,16,20,20]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %w4 = constant $3
  %a = kiln.FusedConv(%x, %w1) {post_ops=["swish"], post_op_alphas=[1.0],
      post_op_betas=[0.0], post_op_inputs=[-1], fused_nodes=["a"]} : f32[1,32,20,20]
  %s0, %s1 = Split(%a) {axis=1} : f32[1,16,20,20], f32[1,16,20,20]
  %m = kiln.FusedConv(%s1, %w2) {pads=[1, 1, 1, 1], post_ops=["swish"],
      post_op_alphas=[1.0], post_op_betas=[0.0], post_op_inputs=[-1],
      fused_nodes=["m"]} : f32[1,16,20,20]
  %r = kiln.FusedConv(%m, %w3, %s1) {pads=[1, 1, 1, 1], post_ops=["swish", "sum"],
      post_op_alphas=[1.0, 1.0], post_op_betas=[0.0, 0.0], post_op_inputs=[-1, 2],
      fused_nodes=["r", "add"]} : f32[1,16,20,20]
  %cat = Concat(%s0, %s1, %r) {axis=1} : f32[1,48,20,20]
  %y = Conv(%cat, %w4) : f32[1,32,20,20]
}
)",
                                            C({32, 16, 1, 1}, 11, 0.25f),
                                            C({16, 16, 3, 3}, 12, 0.08f),
                                            C({16, 16, 3, 3}, 13, 0.08f),
                                            C({32, 48, 1, 1}, 14, 0.15f));
  // Matches the reference; the residual conv (the third call) runs on a
  // direct kernel with no reorder, so its dst is blocked like its operand.
  std::vector<std::string> impls;
  const std::vector<int> reorders = CheckOnOneDnn(text, &impls);
  ASSERT_EQ(reorders.size(), 4u);
  EXPECT_EQ(reorders[2], 0);
  EXPECT_FALSE(absl::StrContains(impls[2], "gemm") || absl::StartsWith(impls[2], "ref"))
      << impls[2];
}

TEST(BlockedCnn, ConcatBetweenConvsMatchesReference) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,16,7,7]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %a = Conv(%x, %w1) {pads=[1, 1, 1, 1]} : f32[1,32,7,7]
  %b = Conv(%a, %w2) : f32[1,16,7,7]
  %cat = Concat(%a, %b) {axis=1} : f32[1,48,7,7]
  %r = Relu(%cat) : f32[1,48,7,7]
  %y = Conv(%r, %w3) : f32[1,16,7,7]
}
)",
                                            C({32, 16, 3, 3}, 6), C({16, 32, 1, 1}, 7),
                                            C({16, 48, 1, 1}, 8));
  const std::vector<int> reorders = CheckOnOneDnn(text);
  ASSERT_EQ(reorders.size(), 3u);
  EXPECT_EQ(reorders[1], 0);
}

// Whether oneDNN on this host runs an f32 32 -> 32 3x3 conv optimized on
// NHWC activations (brgconv on AVX-512; PreferredActivationBlocks offers
// kChannelsLast, preferred or as an alternative).
bool HostOffersChannelsLast() {
  FusedCall c;
  c.src = {DType::kF32, {1, 32, 8, 8}};
  c.weights = {DType::kF32, {32, 32, 3, 3}};
  c.dst = {DType::kF32, {1, 32, 8, 8}};
  c.conv.pads_begin = c.conv.pads_end = {1, 1};
  absl::StatusOr<ActivationBlocks> b = OneDnnCall::PreferredActivationBlocks(c);
  if (!b.ok()) return false;
  if (b->dst == ActivationBlocks::kChannelsLast) return true;
  for (const ActivationBlocks::Alternative& a : b->also) {
    if (a.dst == ActivationBlocks::kChannelsLast) return true;
  }
  return false;
}

// On AVX-512 (oneDNN's brgconv takes NHWC) the oracle offers channels-last
// for f32 convs, and an f32 conv runs on it optimized, without reorders
// (EveryReportedLayoutRunsWithoutReorders checks the numbers).
TEST(PreferredActivationBlocks, F32ConvOffersChannelsLastOnAvx512) {
  const std::string isa = OneDnnCpuIsa();
  if (isa.find("avx512") == std::string::npos) {
    GTEST_SKIP() << "oneDNN's brgconv needs AVX-512; this host: " << isa;
  }
  EXPECT_TRUE(HostOffersChannelsLast());
}

// A YOLO-style f32 block (C2f: conv, split along channels at 20, conv,
// concat of three 20-channel parts, swish as loop kernels, conv): neither
// block 16 nor 8 keeps the split and the concat blocked. With oneDNN's
// oracle on a host whose convs run on NHWC, the whole chain goes
// channels-last: every conv runs without a per-call reorder, and the output
// is the reference interpreter's.
TEST(BlockedCnn, F32SplitConcatChainRunsChannelsLastWithoutReorders) {
  if (!HostOffersChannelsLast()) {
    GTEST_SKIP() << "oneDNN has no optimized f32 NHWC conv on " << OneDnnCpuIsa();
  }
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,16,12,12]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %xr = Relu(%x) : f32[1,16,12,12]
  %a = Conv(%xr, %w1) {pads=[1, 1, 1, 1]} : f32[1,40,12,12]
  %s1, %s2 = Split(%a) {axis=1} : f32[1,20,12,12], f32[1,20,12,12]
  %b = Conv(%s2, %w2) {pads=[1, 1, 1, 1]} : f32[1,20,12,12]
  %cat = Concat(%s1, %s2, %b) {axis=1} : f32[1,60,12,12]
  %sg = Sigmoid(%cat) : f32[1,60,12,12]
  %sw = Mul(%cat, %sg) : f32[1,60,12,12]
  %c = Conv(%sw, %w3) : f32[1,16,12,12]
  %y = Relu(%c) : f32[1,16,12,12]
}
)",
                                            C({40, 16, 3, 3}, 41, 0.1f),
                                            C({20, 20, 3, 3}, 42, 0.1f),
                                            C({16, 60, 1, 1}, 43, 0.1f));
  const std::vector<int> reorders = CheckOnOneDnn(text);
  ASSERT_EQ(reorders.size(), 3u);
  for (int r : reorders) EXPECT_EQ(r, 0);
}

// Seeded s8 weights literal over the whole s8 range.
std::string S8(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(-128, 127);
  Tensor t(DType::kI8, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data<int8_t>()[i] = static_cast<int8_t>(dist(gen));
  }
  return ir::PrintTensor(t, ir::PrintOptions::Full());
}

// A quantized residual CNN (what fuse-qdq makes of a QDQ model): int8 convs
// with u8 activations and the dequantize-add-quantize and u8 max-pool loop
// kernels between them. After propagate-layout with oneDNN's oracle, the
// u8 activations are channels-last, the interior convs run optimized with
// no per-call reorder, and the u8 output is the reference interpreter's
// within one quantization step (docs/quantization.md). Skipped (visibly)
// without VNNI, where oneDNN refuses the full-range s8 weights.
TEST(BlockedCnn, IntegerConvsRunChannelsLastWithoutReorders) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,3,12,12]) -> (%y) opset 13 {
  %s = constant f32[] 0.05
  %z = constant u8[] 120
  %ws = constant f32[] 0.0004
  %wz = constant i8[] 0
  %bias = constant i32[16] [$3]
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %q = QuantizeLinear(%x, %s, %z) : u8[1,3,12,12]
  %a = QLinearConv(%q, %s, %z, %w1, %ws, %wz, %s, %z, %bias) {pads=[1, 1, 1, 1]} : u8[1,16,12,12]
  %b = QLinearConv(%a, %s, %z, %w2, %ws, %wz, %s, %z) {pads=[1, 1, 1, 1]} : u8[1,16,12,12]
  %da = DequantizeLinear(%a, %s, %z) : f32[1,16,12,12]
  %db = DequantizeLinear(%b, %s, %z) : f32[1,16,12,12]
  %sum = Add(%da, %db) : f32[1,16,12,12]
  %qs = QuantizeLinear(%sum, %s, %z) : u8[1,16,12,12]
  %p = MaxPool(%qs) {kernel_shape=[2, 2], strides=[2, 2]} : u8[1,16,6,6]
  %y = QLinearConv(%p, %s, %z, %w3, %ws, %wz, %s, %z) : u8[1,24,6,6]
}
)",
                                            S8({16, 3, 3, 3}, 31), S8({16, 16, 3, 3}, 32),
                                            S8({24, 16, 1, 1}, 33),
                                            "-300, 0, 5, 7, 100, -1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11");
  const std::string isa = OneDnnCpuIsa();
  if (isa.find("vnni") == std::string::npos && isa.find("amx") == std::string::npos &&
      isa.find("bf16") == std::string::npos) {
    GTEST_SKIP() << "oneDNN's int8 kernels on " << isa
                 << " have no VNNI: full-range s8 weights are refused";
  }
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(*g);
  ASSERT_TRUE(lp.ok()) << lp.status();
  passes::PropagateLayout pass(ConvLayoutOracle());
  absl::StatusOr<bool> changed = pass.Run(&*lp);
  ASSERT_TRUE(changed.ok()) << changed.status();
  ASSERT_TRUE(*changed) << "no channels-last int8 convs on " << isa;
  std::vector<int> reorders;
  std::vector<std::string> impls;
  auto run = [&](const ir::loop::LoopProgram& p, const ir::loop::Kernel& k,
                 absl::Span<void* const> in, absl::Span<void* const> out) -> absl::Status {
    absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> call =
        OneDnnExternKernel::Create(p, k, lp->constants);
    if (!call.ok()) return call.status();
    reorders.push_back((*call)->info().reorders_per_call);
    impls.push_back((*call)->info().impl);
    return (*call)->Run(in, out);
  };
  const std::vector<Tensor> inputs = {Random({1, 3, 12, 12}, 40)};
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(*g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<Tensor>> got = passes::layout_testing::RunProgram(*lp, inputs, run);
  ASSERT_TRUE(got.ok()) << got.status() << "\n" << ir::loop::PrintProgram(lp->program);
  interp::Tolerance tol;
  tol.integer_steps = 1;
  interp::CompareResult r = interp::CompareTensors((*got)[0], (*want)[0], tol);
  EXPECT_TRUE(r.ok) << r.message;
  int64_t off = 0;
  for (int64_t i = 0; i < (*got)[0].num_elements(); ++i) {
    off += (*got)[0].GetAsInt64(i) != (*want)[0].GetAsInt64(i);
  }
  EXPECT_LE(off * 20, (*got)[0].num_elements()) << off << " differ by a step";
  ASSERT_EQ(reorders.size(), 3u);
  // The last conv writes the plain graph output: at most that one reorder.
  EXPECT_LE(reorders[2], 1) << impls[2];
  for (size_t i = 0; i < reorders.size(); ++i) {
    if (i < 2) {
      EXPECT_EQ(reorders[i], 0) << impls[i];
    }
    EXPECT_TRUE(impls[i].rfind("jit", 0) == 0 || impls[i].rfind("brg", 0) == 0) << impls[i];
  }
}

}  // namespace
}  // namespace kiln::onednn
