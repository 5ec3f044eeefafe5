// propagate-layout on small CNNs lowered from graph text, with a stand-in
// conv library oracle (block 8 or 4, or 16 with 8 as an alternative): which
// buffers become blocked and by which block (golden CHECK lines), results
// equal to the graph reference interpreter (odd channel counts, pooling,
// concat, a fused residual sum, global pooling) and refusals.
#include "ir/loop/module.h"
#include "passes/loop/propagate_layout.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/text.h"
#include "lowering/lowering_test_util.h"
#include "passes/loop/propagate_layout_test_util.h"
#include "interp/compare.h"
#include "testing/filecheck.h"
#include "interp/interpreter.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Tensor;
using ir::loop::LoopModule;

// Seeded constant literal with values in [-1, 1].
std::string Const(const ir::Shape& shape, uint32_t seed) {
  Tensor t = lowering::testing::RandomTensor(DType::kF32, shape, seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] /= 3.0f;
  return ir::PrintTensor(t, ir::PrintOptions::Full());
}

// Every conv wants `block` for src and dst, except convs whose src has
// fewer channels than the block (as oneDNN does for a 3-channel image).
ConvLayoutOracle Oracle(int64_t block) {
  return [block](const ir::loop::LoopModule& lp,
                 const ir::loop::Kernel& k) -> absl::StatusOr<ConvLayout> {
    const ir::loop::Buffer& src = lp.program.buffers[k.call.inputs[0]];
    return ConvLayout{src.shape[1] < block ? 0 : block, block};
  };
}

int BlockedBuffers(const ir::loop::LoopModule& lp, int64_t block) {
  int n = 0;
  for (const ir::loop::Buffer& b : lp.program.buffers) {
    n += b.shape.size() >= 4 && b.shape.back() == block &&
         b.kind == ir::loop::BufferKind::kIntermediate;
  }
  return n;
}

// Lowers `text`, runs the pass with `oracle`, checks the result against the
// graph reference interpreter; returns the transformed program.
ir::loop::LoopModule CheckPass(const std::string& text, const ConvLayoutOracle& oracle,
                         bool want_changed) {
  absl::StatusOr<ir::Graph> graph = ir::ParseGraph(text);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return {};
  absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(*graph);
  EXPECT_TRUE(lp.ok()) << lp.status();
  if (!lp.ok()) return {};
  PropagateLayout pass(oracle);
  absl::StatusOr<bool> changed = pass.Run(&*lp);
  EXPECT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed.value_or(!want_changed), want_changed)
      << ir::loop::PrintProgram(lp->program);
  std::vector<Tensor> inputs;
  uint32_t seed = 11;
  for (ir::ValueId v : graph->inputs()) {
    inputs.push_back(lowering::testing::RandomTensor(graph->value(v).dtype,
                                                     graph->value(v).shape, seed++));
  }
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(*graph, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<Tensor>> got = layout_testing::RunProgram(*lp, inputs);
  EXPECT_TRUE(got.ok()) << got.status() << "\n" << ir::loop::PrintProgram(lp->program);
  if (!want.ok() || !got.ok()) return *std::move(lp);
  EXPECT_EQ(got->size(), want->size());
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  for (size_t i = 0; i < want->size() && i < got->size(); ++i) {
    interp::CompareResult r = interp::CompareTensors((*got)[i], (*want)[i], tol);
    EXPECT_TRUE(r.ok) << "output " << i << ": " << r.message << "\n"
                      << ir::loop::PrintProgram(lp->program);
  }
  return *std::move(lp);
}

// conv(3->16)+relu, maxpool 3x3/2, conv(16->16), residual add + relu,
// conv(16->12) (odd for block 8), conv(12->16), global average pool, gemm.
std::string PoolResidualNet() {
  return absl::Substitute(R"(
graph main(%x: f32[2,3,10,10]) -> (%y) opset 17 {
  %w1 = constant $0
  %b1 = constant $1
  %w2 = constant $2
  %w3 = constant $3
  %w4 = constant $4
  %wg = constant $5
  %c1 = Conv(%x, %w1, %b1) {pads=[1, 1, 1, 1]} : f32[2,16,10,10]
  %r1 = Relu(%c1) : f32[2,16,10,10]
  %p = MaxPool(%r1) {kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]} : f32[2,16,5,5]
  %c2 = Conv(%p, %w2) {pads=[1, 1, 1, 1]} : f32[2,16,5,5]
  %s = Add(%c2, %p) : f32[2,16,5,5]
  %r2 = Relu(%s) : f32[2,16,5,5]
  %c3 = Conv(%r2, %w3) : f32[2,12,5,5]
  %c4 = Conv(%c3, %w4) {pads=[1, 1, 1, 1]} : f32[2,16,5,5]
  %g = GlobalAveragePool(%c4) : f32[2,16,1,1]
  %f = Flatten(%g) : f32[2,16]
  %y = Gemm(%f, %wg) {transB=1} : f32[2,7]
}
)",
                          Const({16, 3, 3, 3}, 1), Const({16}, 2), Const({16, 16, 3, 3}, 3),
                          Const({12, 16, 1, 1}, 4), Const({16, 12, 3, 3}, 5),
                          Const({7, 16}, 6));
}

TEST(PropagateLayout, PoolResidualNetMatchesReferenceBlock8) {
  ir::loop::LoopModule lp = CheckPass(PoolResidualNet(), Oracle(8), true);
  // relu1 out, pool out, add/relu out, conv3 out (C=12: conv to conv
  // only), conv4 out.
  EXPECT_GE(BlockedBuffers(lp, 8), 5) << ir::loop::PrintProgram(lp.program);
}

TEST(PropagateLayout, PoolResidualNetMatchesReferenceBlock4) {
  ir::loop::LoopModule lp = CheckPass(PoolResidualNet(), Oracle(4), true);
  EXPECT_GE(BlockedBuffers(lp, 4), 5) << ir::loop::PrintProgram(lp.program);
}

// Odd channel counts touched by loop kernels stay plain (their convs
// reorder inside the call); the result is unchanged either way.
TEST(PropagateLayout, OddChannelsBetweenLoopKernelsStayPlain) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,8,6,6]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %c1 = Conv(%x, %w1) {pads=[1, 1, 1, 1]} : f32[1,13,6,6]
  %r = Sigmoid(%c1) : f32[1,13,6,6]
  %y = Conv(%r, %w2) : f32[1,9,6,6]
}
)",
                                            Const({13, 8, 3, 3}, 7), Const({9, 13, 1, 1}, 8));
  ir::loop::LoopModule lp = CheckPass(text, Oracle(8), false);
  EXPECT_EQ(BlockedBuffers(lp, 8), 0);
}

// DenseNet-style: two convs concatenated along channels, batch-norm-like
// affine + relu, then a conv; also a 1-D-padded average pool.
TEST(PropagateLayout, ConcatBetweenConvsMatchesReference) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,8,7,7]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %sc = constant $3
  %a = Conv(%x, %w1) {pads=[1, 1, 1, 1]} : f32[1,8,7,7]
  %b = Conv(%a, %w2) : f32[1,16,7,7]
  %cat = Concat(%a, %b) {axis=1} : f32[1,24,7,7]
  %m = Mul(%cat, %sc) : f32[1,24,7,7]
  %r = Relu(%m) : f32[1,24,7,7]
  %p = AveragePool(%r) {kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1]} : f32[1,24,4,4]
  %y = Conv(%p, %w3) : f32[1,8,4,4]
}
)",
                                            Const({8, 8, 3, 3}, 9), Const({16, 8, 1, 1}, 10),
                                            Const({8, 24, 1, 1}, 11), Const({1, 24, 1, 1}, 12));
  ir::loop::LoopModule lp = CheckPass(text, Oracle(8), true);
  EXPECT_GE(BlockedBuffers(lp, 8), 4) << ir::loop::PrintProgram(lp.program);
}

// A residual add fused as a sum post-op: the summed buffer takes the dst's
// layout; a graph-input residual keeps both plain.
TEST(PropagateLayout, FusedSumSharesTheDstLayout) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,8,6,6]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %b2 = constant $2
  %w3 = constant $3
  %a = kiln.FusedConv(%x, %w1) {pads=[1, 1, 1, 1], post_ops=["relu"], post_op_alphas=[0.0],
      post_op_betas=[0.0], post_op_inputs=[-1], fused_nodes=["c1", "r1"]} : f32[1,16,6,6]
  %s = kiln.FusedConv(%a, %w2, %b2, %a) {pads=[1, 1, 1, 1], post_ops=["sum", "relu"],
      post_op_alphas=[1.0, 0.0], post_op_betas=[0.0, 0.0], post_op_inputs=[3, -1],
      fused_nodes=["c2", "add", "r2"]} : f32[1,16,6,6]
  %t = kiln.FusedConv(%s, %w3, %x) {post_ops=["sum"], post_op_alphas=[1.0],
      post_op_betas=[0.0], post_op_inputs=[2], fused_nodes=["c3", "add2"]} : f32[1,8,6,6]
  %y = Relu(%t) : f32[1,8,6,6]
}
)",
                                            Const({16, 8, 3, 3}, 13), Const({16, 16, 3, 3}, 14),
                                            Const({16}, 15), Const({8, 16, 1, 1}, 16));
  ir::loop::LoopModule lp = CheckPass(text, Oracle(8), true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  // %a and %s blocked; %t (summed with the plain graph input) plain.
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %a: f32[1,2,6,6,8] intermediate
    CHECK: buffer %s: f32[1,2,6,6,8] intermediate
    CHECK: buffer %t: f32[1,8,6,6] intermediate
    CHECK: call "kiln.FusedConv"(%x, %w1) -> (%a)
    CHECK-SAME: kiln_blocked_inputs=[0, 0], kiln_blocked_outputs=[16], kiln_channel_block=8
    CHECK: call "kiln.FusedConv"(%a, %w2, %b2, %a) -> (%s)
    CHECK-SAME: kiln_blocked_inputs=[16, 0, 0, 16], kiln_blocked_outputs=[16]
    CHECK: call "kiln.FusedConv"(%s, %w3, %x) -> (%t)
    CHECK-SAME: kiln_blocked_inputs=[16, 0, 0], kiln_blocked_outputs=[0]
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

// A residual conv that writes a graph output (isnet's stage outputs, also
// read by the next stage): it writes a blocked copy, a loop kernel copies
// that into the plain output, and the next conv reads the copy, so the
// residual operand %a stays blocked too. Without the copy the output's
// plain layout would pull %a, and the conv's dst, plain.
TEST(PropagateLayout, ResidualConvIntoAGraphOutputWritesABlockedCopy) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,8,6,6]) -> (%s, %y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %a = kiln.FusedConv(%x, %w1) {pads=[1, 1, 1, 1], post_ops=["relu"], post_op_alphas=[0.0],
      post_op_betas=[0.0], post_op_inputs=[-1], fused_nodes=["c1", "r1"]} : f32[1,16,6,6]
  %s = kiln.FusedConv(%a, %w2, %a) {pads=[1, 1, 1, 1], post_ops=["relu", "sum"],
      post_op_alphas=[0.0, 1.0], post_op_betas=[0.0, 0.0], post_op_inputs=[-1, 2],
      fused_nodes=["c2", "r2", "add"]} : f32[1,16,6,6]
  %y = Conv(%s, %w3) {pads=[1, 1, 1, 1]} : f32[1,16,6,6]
}
)",
                                            Const({16, 8, 3, 3}, 21), Const({16, 16, 3, 3}, 22),
                                            Const({16, 16, 3, 3}, 23));
  ir::loop::LoopModule lp = CheckPass(text, Oracle(8), true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %a: f32[1,2,6,6,8] intermediate
    CHECK: buffer %s: f32[1,16,6,6] output
    CHECK: buffer %s_conv: f32[1,2,6,6,8] intermediate
    CHECK: call "kiln.FusedConv"(%a, %w2, %a) -> (%s_conv)
    CHECK-SAME: kiln_blocked_inputs=[16, 0, 16], kiln_blocked_outputs=[16]
    CHECK: kernel {{.*}}_output "copy to output [layout reorder]"
    CHECK: load %s_conv
    CHECK: store %s[
    CHECK: call "onnx.Conv"(%s_conv, %w3) -> (%y)
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

// The same program with nothing blocked (no conv wants a block): the copy
// is undone and the program is as lowering left it.
TEST(PropagateLayout, UnblockedResidualOutputKeepsNoCopy) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,8,6,6]) -> (%s) opset 17 {
  %w2 = constant $0
  %s = kiln.FusedConv(%x, %w2, %x) {pads=[1, 1, 1, 1], post_ops=["relu", "sum"],
      post_op_alphas=[0.0, 1.0], post_op_betas=[0.0, 0.0], post_op_inputs=[-1, 2],
      fused_nodes=["c2", "r2", "add"]} : f32[1,8,6,6]
}
)",
                                            Const({8, 8, 3, 3}, 24));
  ConvLayoutOracle plain = [](const ir::loop::LoopModule&,
                              const ir::loop::Kernel&) -> absl::StatusOr<ConvLayout> {
    return ConvLayout{0, 0};
  };
  ir::loop::LoopModule lp = CheckPass(text, plain, false);
  const std::string out = ir::loop::PrintProgram(lp.program);
  EXPECT_EQ(lp.program.kernels.size(), 1u) << out;
  EXPECT_EQ(out.find("_conv:"), std::string::npos) << out;
  // And with a block wanted but the graph input operand plain (so the
  // conv's dst must stay plain): the copy is undone too.
  ir::loop::LoopModule lp8 = CheckPass(text, Oracle(8), false);
  EXPECT_EQ(lp8.program.kernels.size(), 1u) << ir::loop::PrintProgram(lp8.program);
  EXPECT_EQ(lp8.program.buffers.size(), lp.program.buffers.size());
}

// The golden form of a small chain: buffers, the split channel loop (b
// lanes innermost) and physical indexing, the boundary kernel's tag.
TEST(PropagateLayout, GoldenText) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,8,4,4], %z: f32[1,16,4,4]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %c = Conv(%x, %w1) : f32[1,16,4,4]
  %r = Add(%c, %z) : f32[1,16,4,4]
  %y = Conv(%r, %w2) : f32[1,8,4,4]
}
)",
                                            Const({16, 8, 1, 1}, 17), Const({8, 16, 1, 1}, 18));
  ir::loop::LoopModule lp = CheckPass(text, Oracle(8), true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %c: f32[1,2,4,4,8] intermediate
    CHECK: buffer %r: f32[1,2,4,4,8] intermediate
    CHECK: extern {{.*}} call "onnx.Conv"(%x, %w1) -> (%c)
    CHECK-SAME: kiln_blocked_inputs=[0, 0], kiln_blocked_outputs=[16], kiln_channel_block=8
    CHECK: kernel {{.*}} "{{.*}} [layout reorder]" over (i0: 1, i1: 2, i2: 4, i3: 4, i4: 8)
    CHECK-NEXT: load %c[i1*128 + i2*32 + i3*8 + i4]
    CHECK-NEXT: load %z[i1*128 + i2*4 + i3 + i4*16]
    CHECK: store %r[i1*128 + i2*32 + i3*8 + i4]
    CHECK: call "onnx.Conv"(%r, %w2) -> (%y)
    CHECK-SAME: kiln_blocked_inputs=[16, 0], kiln_blocked_outputs=[0]
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
  EXPECT_EQ(ir::loop::CountLayoutReorderKernels(lp.program), 1);
}

// An AVX-512-like library: convs want 16 for src and dst and also run on 8,
// on a slower kernel when `eight_slower`.
ConvLayoutOracle WideOracle(bool eight_slower) {
  return [eight_slower](const ir::loop::LoopModule&,
                        const ir::loop::Kernel&) -> absl::StatusOr<ConvLayout> {
    ConvLayout w{16, 16, {}};
    w.also.push_back({8, 8, eight_slower});
    return w;
  };
}

// Two heavy 32-channel 3x3 convs, then a 24-channel activation a loop kernel
// touches (24 is no multiple of 16). Block 8 keeps it blocked too; block 16
// leaves it plain, i.e. a reorder around the conv that writes it.
std::string HeavyConvsThenNarrowTail() {
  return absl::Substitute(R"(
graph main(%x: f32[1,32,8,8]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %w4 = constant $3
  %c1 = Conv(%x, %w1) {pads=[1, 1, 1, 1]} : f32[1,32,8,8]
  %r1 = Relu(%c1) : f32[1,32,8,8]
  %c2 = Conv(%r1, %w2) {pads=[1, 1, 1, 1]} : f32[1,32,8,8]
  %c3 = Conv(%c2, %w3) : f32[1,24,8,8]
  %s = Sigmoid(%c3) : f32[1,24,8,8]
  %y = Conv(%s, %w4) : f32[1,8,8,8]
}
)",
                          Const({32, 32, 3, 3}, 21), Const({32, 32, 3, 3}, 22),
                          Const({24, 32, 1, 1}, 23), Const({8, 24, 1, 1}, 24));
}

// When the narrower block runs as fast, the pass takes it for the whole
// program: nothing is reordered (the vote alone would pick 16).
TEST(PropagateLayout, PicksTheBlockThatLeavesNothingToReorder) {
  ir::loop::LoopModule lp = CheckPass(HeavyConvsThenNarrowTail(), WideOracle(false), true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %c1: f32[1,4,8,8,8] intermediate
    CHECK: buffer %c2: f32[1,4,8,8,8] intermediate
    CHECK: buffer %c3: f32[1,3,8,8,8] intermediate
    CHECK: buffer %s: f32[1,3,8,8,8] intermediate
    CHECK: call "onnx.Conv"(%c2, %w3) -> (%c3)
    CHECK-SAME: kiln_blocked_inputs=[32, 0], kiln_blocked_outputs=[24], kiln_channel_block=8
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
  EXPECT_EQ(ir::loop::CountLayoutReorderKernels(lp.program), 0);
}

// When block 8 means a slower kernel for the heavy convs, their
// multiply-adds outweigh the small tail's reorder: block 16, tail plain.
TEST(PropagateLayout, KeepsTheFastBlockWhenTheOtherSlowsHeavyConvs) {
  ir::loop::LoopModule lp = CheckPass(HeavyConvsThenNarrowTail(), WideOracle(true), true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %c1: f32[1,2,8,8,16] intermediate
    CHECK: buffer %c2: f32[1,2,8,8,16] intermediate
    CHECK: buffer %c3: f32[1,24,8,8] intermediate
    CHECK: buffer %s: f32[1,24,8,8] intermediate
    CHECK: call "onnx.Conv"(%c2, %w3) -> (%c3)
    CHECK-SAME: kiln_blocked_inputs=[32, 0], kiln_blocked_outputs=[0], kiln_channel_block=16
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

// A conv with no kernel on the voted block (a grouped conv with 8 channels
// a group runs only on 8) is a reorder on 16: the pass takes 8.
TEST(PropagateLayout, ConvOnlyOnTheNarrowBlockDecides) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,16,6,6]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %c1 = Conv(%x, %w1) : f32[1,16,6,6]
  %r = Relu(%c1) : f32[1,16,6,6]
  %g = Conv(%r, %w2) {group=2, pads=[1, 1, 1, 1]} : f32[1,16,6,6]
  %s = Sigmoid(%g) : f32[1,16,6,6]
  %y = Conv(%s, %w3) : f32[1,16,6,6]
}
)",
                                            Const({16, 16, 1, 1}, 25), Const({16, 8, 3, 3}, 26),
                                            Const({16, 16, 1, 1}, 27));
  ConvLayoutOracle oracle = [](const ir::loop::LoopModule& lp,
                               const ir::loop::Kernel& k) -> absl::StatusOr<ConvLayout> {
    const ir::loop::Buffer& w = lp.program.buffers[k.call.inputs[1]];
    if (w.shape[1] == 8) return ConvLayout{8, 8, {}};  // the grouped conv
    ConvLayout l{16, 16, {}};
    l.also.push_back({8, 8, false});
    return l;
  };
  ir::loop::LoopModule lp = CheckPass(text, oracle, true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %r: f32[1,2,6,6,8] intermediate
    CHECK: buffer %g: f32[1,2,6,6,8] intermediate
    CHECK: call "onnx.Conv"(%r, %w2) -> (%g)
    CHECK-SAME: kiln_blocked_inputs=[16, 0], kiln_blocked_outputs=[16], kiln_channel_block=8
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
  EXPECT_EQ(ir::loop::CountLayoutReorderKernels(lp.program), 0);
}

// Two regions the channel shuffle (Reshape, Transpose, Reshape: its
// channel index is no single loop variable) keeps apart, each taking its own
// block: the 24-channel one 8 (a loop kernel touches it and 24 is no
// multiple of 16), the heavy 3x3 conv after the shuffle 16 (8 is a slower
// kernel there). One block for the program would leave one of them plain.
TEST(PropagateLayout, RegionsSeparatedByAChannelShuffleTakeTheirOwnBlocks) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,16,6,6]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %w4 = constant $3
  %s5 = constant i64[5] [1, 2, 16, 6, 6]
  %s4 = constant i64[4] [1, 32, 6, 6]
  %c1 = Conv(%x, %w1) : f32[1,24,6,6]
  %s1 = Sigmoid(%c1) : f32[1,24,6,6]
  %c2 = Conv(%s1, %w2) : f32[1,32,6,6]
  %v = Reshape(%c2, %s5) : f32[1,2,16,6,6]
  %t = Transpose(%v) {perm=[0, 2, 1, 3, 4]} : f32[1,16,2,6,6]
  %sh = Reshape(%t, %s4) : f32[1,32,6,6]
  %c3 = Conv(%sh, %w3) {pads=[1, 1, 1, 1]} : f32[1,32,6,6]
  %r = Relu(%c3) : f32[1,32,6,6]
  %y = Conv(%r, %w4) : f32[1,32,6,6]
}
)",
                                            Const({24, 16, 1, 1}, 31), Const({32, 24, 1, 1}, 32),
                                            Const({32, 32, 3, 3}, 33), Const({32, 32, 1, 1}, 34));
  // An AVX-512-like library: 16 wanted, 8 on a slower kernel, a plain src
  // taken on either.
  ConvLayoutOracle oracle = [](const ir::loop::LoopModule&,
                               const ir::loop::Kernel&) -> absl::StatusOr<ConvLayout> {
    ConvLayout w{16, 16, {}};
    w.also.push_back({0, 16, false});
    w.also.push_back({8, 8, true});
    w.also.push_back({0, 8, true});
    return w;
  };
  ir::loop::LoopModule lp = CheckPass(text, oracle, true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %c1: f32[1,3,6,6,8] intermediate
    CHECK: buffer %s1: f32[1,3,6,6,8] intermediate
    CHECK: buffer %c2: f32[1,32,6,6] intermediate
    CHECK: buffer %c3: f32[1,2,6,6,16] intermediate
    CHECK: buffer %r: f32[1,2,6,6,16] intermediate
    CHECK: call "onnx.Conv"(%x, %w1) -> (%c1)
    CHECK-SAME: kiln_blocked_inputs=[0, 0], kiln_blocked_outputs=[24], kiln_channel_block=8
    CHECK: call "onnx.Conv"(%s1, %w2) -> (%c2)
    CHECK-SAME: kiln_blocked_inputs=[24, 0], kiln_blocked_outputs=[0], kiln_channel_block=8
    CHECK: call "onnx.Conv"({{.*}}, %w3) -> (%c3)
    CHECK-SAME: kiln_blocked_outputs=[32], kiln_channel_block=16
    CHECK: call "onnx.Conv"(%r, %w4) -> (%y)
    CHECK-SAME: kiln_blocked_inputs=[32, 0], kiln_blocked_outputs=[0], kiln_channel_block=16
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

// Loop kernels that only read a blocked buffer take channel counts that are
// no multiple of the block: the last, partial block of lanes runs in a tail
// kernel. Here the concat's copies read the 24-channel conv output (one
// whole block of 16 and a tail of 8) and the 12-channel one (a tail only)
// blocked, and write the plain graph output.
TEST(PropagateLayout, ReadersOfPartialBlocksGetATailKernel) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,8,5,7]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %c1 = Conv(%x, %w1) {pads=[1, 1, 1, 1]} : f32[1,24,5,7]
  %c2 = Conv(%x, %w2) : f32[1,12,5,7]
  %y = Concat(%c1, %x, %c2) {axis=1} : f32[1,44,5,7]
}
)",
                                            Const({24, 8, 3, 3}, 41), Const({12, 8, 1, 1}, 42));
  ConvLayoutOracle oracle = [](const ir::loop::LoopModule&,
                               const ir::loop::Kernel&) -> absl::StatusOr<ConvLayout> {
    ConvLayout w{16, 16, {}};
    w.also.push_back({0, 16, false});
    return w;
  };
  ir::loop::LoopModule lp = CheckPass(text, oracle, true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %c1: f32[1,2,5,7,16] intermediate
    CHECK: buffer %c2: f32[1,1,5,7,16] intermediate
    CHECK: kernel {{.*}} "{{.*}} [layout reorder]" over (i0: 1, i1: 1, i2: 5, i3: 7, i4: 16)
    CHECK-NEXT: load %c1[
    CHECK: kernel {{.*}}_tail "{{.*}} [layout reorder tail]" over (i0: 1, i1: 8, i2: 5, i3: 7)
    CHECK-NEXT: load %c1[
    CHECK: kernel {{.*}} "{{.*}} [layout reorder]" over (i0: 1, i1: 12, i2: 5, i3: 7)
    CHECK-NEXT: load %c2[
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
  EXPECT_EQ(ir::loop::CountLayoutReorderKernels(lp.program), 2);
}

// Seeded s8 weights literal in [-20, 20].
std::string S8Const(const ir::Shape& shape, uint32_t seed) {
  Tensor t = lowering::testing::RandomTensor(DType::kF32, shape, seed);
  Tensor w(DType::kI8, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    w.data<int8_t>()[i] = static_cast<int8_t>(t.data<float>()[i] * 20.0f);
  }
  return ir::PrintTensor(w, ir::PrintOptions::Full());
}

// Integer convs want channels-last (as oneDNN's int8 convs do); f32 convs
// nothing.
ConvLayoutOracle ChannelsLastOracle() {
  return [](const ir::loop::LoopModule&,
            const ir::loop::Kernel& k) -> absl::StatusOr<ConvLayout> {
    if (k.call.op != "onnx.QLinearConv") return ConvLayout{};
    return ConvLayout{ConvLayout::kChannelsLast, ConvLayout::kChannelsLast};
  };
}

// A quantized residual block: quantize, QLinearConv 3 -> 16, QLinearConv
// 16 -> 16, a dequantize-add-quantize residual, max pool on u8,
// QLinearConv 16 -> 8, dequantize. Under kChannelsLast every u8
// intermediate is stored [N, 1, H, W, C] (each by its own channel count),
// the integer convs are marked with block kChannelsLast, and the result is
// the reference interpreter's.
TEST(PropagateLayout, IntegerConvChainsGoChannelsLast) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,3,8,8]) -> (%y) opset 13 {
  %s = constant f32[] 0.05
  %z = constant u8[] 120
  %ws = constant f32[] 0.01
  %wz = constant i8[] 0
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %q = QuantizeLinear(%x, %s, %z) : u8[1,3,8,8]
  %a = QLinearConv(%q, %s, %z, %w1, %ws, %wz, %s, %z) {pads=[1, 1, 1, 1]} : u8[1,16,8,8]
  %b = QLinearConv(%a, %s, %z, %w2, %ws, %wz, %s, %z) {pads=[1, 1, 1, 1]} : u8[1,16,8,8]
  %da = DequantizeLinear(%a, %s, %z) : f32[1,16,8,8]
  %db = DequantizeLinear(%b, %s, %z) : f32[1,16,8,8]
  %sum = Add(%da, %db) : f32[1,16,8,8]
  %qs = QuantizeLinear(%sum, %s, %z) : u8[1,16,8,8]
  %p = MaxPool(%qs) {kernel_shape=[2, 2], strides=[2, 2]} : u8[1,16,4,4]
  %c = QLinearConv(%p, %s, %z, %w3, %ws, %wz, %s, %z) : u8[1,8,4,4]
  %y = DequantizeLinear(%c, %s, %z) : f32[1,8,4,4]
}
)",
                                            S8Const({16, 3, 3, 3}, 21),
                                            S8Const({16, 16, 3, 3}, 22),
                                            S8Const({8, 16, 1, 1}, 23));
  ir::loop::LoopModule lp = CheckPass(text, ChannelsLastOracle(), true);
  const std::string printed = ir::loop::PrintProgram(lp.program);
  int channels_last = 0;
  for (const ir::loop::Buffer& b : lp.program.buffers) {
    if (b.kind != ir::loop::BufferKind::kIntermediate || b.shape.size() != 5) continue;
    EXPECT_EQ(b.dtype, DType::kU8) << b.name;
    EXPECT_EQ(b.shape[1], 1) << b.name << "\n" << printed;
    ++channels_last;
  }
  // q (the first conv's src, written by the quantize kernel), a, b, qs, p.
  EXPECT_GE(channels_last, 4) << printed;
  int marked = 0;
  for (const ir::loop::Kernel& k : lp.program.kernels) {
    auto it = k.call.attrs.find(ir::loop::kAttrChannelBlock);
    if (it == k.call.attrs.end()) continue;
    EXPECT_EQ(std::get<int64_t>(it->second), ir::loop::kChannelsLastBlock) << k.name;
    ++marked;
  }
  EXPECT_GE(marked, 2) << printed;
}

// f32 convs as oneDNN's on an AVX-512 host: nChw16c preferred (plain src
// below 16 channels), and channels-last (brgconv's NHWC) as an alternative
// on the same ISA.
ConvLayoutOracle BlockedOrChannelsLastOracle() {
  return [](const ir::loop::LoopModule& lp,
            const ir::loop::Kernel& k) -> absl::StatusOr<ConvLayout> {
    const ir::loop::Buffer& src = lp.program.buffers[k.call.inputs[0]];
    ConvLayout w{src.shape[1] < 16 ? 0 : 16, 16, {}};
    w.also.push_back({ConvLayout::kChannelsLast, ConvLayout::kChannelsLast, false});
    w.also.push_back({0, ConvLayout::kChannelsLast, false});
    if (w.src_block != 0) w.also.push_back({0, 16, false});
    return w;
  };
}

// A YOLO-style block (C2f): conv 16 -> 40, split along channels into 20 +
// 20 (a channel offset that is no multiple of any block), conv on the
// second half, concat of the three 20-channel parts, swish as loop kernels,
// conv 60 -> 16. Blocked by 16 (or 8) the split, the concat and the swish
// would keep their buffers plain; channels-last (each buffer blocked by
// its own channel count) keeps every one of them, so the pass takes it
// although the convs prefer 16, and the loop kernels index several channel
// counts at channel offsets. The result is the reference interpreter's.
TEST(PropagateLayout, F32ChainWithSplitAndConcatGoesChannelsLast) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,16,6,6]) -> (%y) opset 17 {
  %w1 = constant $0
  %w2 = constant $1
  %w3 = constant $2
  %xr = Relu(%x) : f32[1,16,6,6]
  %a = Conv(%xr, %w1) {pads=[1, 1, 1, 1]} : f32[1,40,6,6]
  %s1, %s2 = Split(%a) {axis=1} : f32[1,20,6,6], f32[1,20,6,6]
  %b = Conv(%s2, %w2) {pads=[1, 1, 1, 1]} : f32[1,20,6,6]
  %cat = Concat(%s1, %s2, %b) {axis=1} : f32[1,60,6,6]
  %sg = Sigmoid(%cat) : f32[1,60,6,6]
  %sw = Mul(%cat, %sg) : f32[1,60,6,6]
  %c = Conv(%sw, %w3) : f32[1,16,6,6]
  %y = Relu(%c) : f32[1,16,6,6]
}
)",
                                            Const({40, 16, 3, 3}, 31), Const({20, 20, 3, 3}, 32),
                                            Const({16, 60, 1, 1}, 33));
  ir::loop::LoopModule lp = CheckPass(text, BlockedOrChannelsLastOracle(), true);
  const std::string out = ir::loop::PrintProgram(lp.program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: buffer %a: f32[1,1,6,6,40] intermediate
    CHECK: buffer %b: f32[1,1,6,6,20] intermediate
    CHECK: call "onnx.Conv"(%xr, %w1) -> (%a)
    CHECK-SAME: kiln_blocked_inputs=[16, 0], kiln_blocked_outputs=[40], kiln_channel_block=-1
    CHECK: call "onnx.Conv"(%sw, %w3) -> (%c)
    CHECK-SAME: kiln_blocked_inputs=[60, 0], kiln_blocked_outputs=[16], kiln_channel_block=-1
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
  // Only the edges convert: the graph input's Relu and the output's.
  EXPECT_EQ(ir::loop::CountLayoutReorderKernels(lp.program), 2) << out;
}

// f32 convs whose library wants channels-last for src and dst (brgconv on
// AVX-512) and nothing else: a plain conv chain with a residual add and a
// pool between convs goes channels-last, as integer chains do.
TEST(PropagateLayout, F32ConvsThatWantChannelsLastGetIt) {
  ir::loop::LoopModule lp = CheckPass(
      PoolResidualNet(),
      [](const ir::loop::LoopModule& lp,
         const ir::loop::Kernel& k) -> absl::StatusOr<ConvLayout> {
        const ir::loop::Buffer& src = lp.program.buffers[k.call.inputs[0]];
        ConvLayout w{src.shape[1] < 8 ? 0 : ConvLayout::kChannelsLast,
                     ConvLayout::kChannelsLast, {}};
        return w;
      },
      true);
  int channels_last = 0;
  for (const ir::loop::Buffer& b : lp.program.buffers) {
    if (b.kind != ir::loop::BufferKind::kIntermediate || b.shape.size() != 5) continue;
    EXPECT_EQ(b.shape[1], 1) << b.name;
    ++channels_last;
  }
  // relu1 out, pool out, add/relu out, conv3 out (12 channels), conv4 out.
  EXPECT_GE(channels_last, 5) << ir::loop::PrintProgram(lp.program);
}

TEST(PropagateLayout, NoOracleOrRefusingOracleChangesNothing) {
  CheckPass(PoolResidualNet(), ConvLayoutOracle(), false);
  CheckPass(PoolResidualNet(),
            [](const ir::loop::LoopModule&, const ir::loop::Kernel&) -> absl::StatusOr<ConvLayout> {
              return absl::UnimplementedError("no library");
            },
            false);
  CheckPass(PoolResidualNet(), Oracle(0), false);
}

}  // namespace
}  // namespace kiln::passes
