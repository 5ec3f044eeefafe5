// OneDnnExternKernel against the reference interpreter: each ONNX (or
// kiln.Fused*) graph is lowered, its extern kernel built and run on oneDNN
// over seeded random data, and compared with interp::Run on the graph.
#include "backends/onednn/extern_kernel.h"

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/substitute.h"
#include "gtest/gtest.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/extern_attrs.h"
#include "lowering/lower_graph.h"
#include "interp/compare.h"
#include "interp/interpreter.h"

namespace kiln::onednn {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

Tensor Random(DType dtype, const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kF64) {
      t.data<double>()[i] = dist(gen);
    } else {
      t.data<float>()[i] = static_cast<float>(dist(gen));
    }
  }
  return t;
}

// A constant literal for graph text.
std::string C(const Shape& shape, uint32_t seed, DType dtype = DType::kF32) {
  return ir::PrintTensor(Random(dtype, shape, seed), ir::PrintOptions::Full());
}

struct Lowered {
  ir::Graph graph;
  ir::loop::LoopModule lp;
  const ir::loop::Kernel* ext = nullptr;
};

// Parses and lowers `text`; `ext` is its one extern kernel.
absl::StatusOr<Lowered> Lower(const std::string& text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  Lowered l;
  l.graph = std::move(*g);
  absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(l.graph);
  if (!lp.ok()) return lp.status();
  l.lp = std::move(*lp);
  for (const ir::loop::Kernel& k : l.lp.program.kernels) {
    if (k.kind != ir::loop::Kernel::Kind::kExtern) continue;
    if (l.ext != nullptr) return absl::InternalError("more than one extern kernel");
    l.ext = &k;
  }
  if (l.ext == nullptr) return absl::InternalError("no extern kernel");
  return l;
}

struct RunResult {
  ExternKernelInfo info;
};

// Lowers `text`, builds the extern kernel on oneDNN, runs it on random graph
// inputs (constants from the lowering) and compares its output with the
// reference interpreter's on the graph. The extern must read graph inputs
// and constants only and write the graph's one output.
void CheckAgainstReference(const std::string& text, RunResult* result = nullptr,
                           uint32_t seed = 1) {
  absl::StatusOr<Lowered> l = Lower(text);
  ASSERT_TRUE(l.ok()) << l.status() << "\n" << text;
  const ir::loop::Kernel& ext = *l->ext;
  std::vector<Tensor> inputs;
  std::map<int32_t, Tensor> storage;
  for (size_t i = 0; i < l->graph.inputs().size(); ++i) {
    const ir::Value& v = l->graph.value(l->graph.inputs()[i]);
    inputs.push_back(Random(v.dtype, v.shape, seed * 101 + i));
    storage.emplace(l->lp.inputs[i], inputs.back());
  }
  for (const auto& [b, data] : l->lp.constants) storage.emplace(b, *data);
  ASSERT_EQ(l->lp.outputs.size(), 1u);
  ASSERT_EQ(ext.call.outputs.size(), 1u);
  ASSERT_EQ(ext.call.outputs[0], l->lp.outputs[0]) << "extern writes the output";
  const ir::loop::Buffer& out = l->lp.program.buffers[l->lp.outputs[0]];
  storage.emplace(l->lp.outputs[0], Tensor(out.dtype, out.shape));

  absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> k =
      OneDnnExternKernel::Create(l->lp.program, ext, l->lp.constants, {});
  ASSERT_TRUE(k.ok()) << k.status() << "\n" << text;
  std::vector<void*> in_ptrs, out_ptrs;
  for (int32_t b : ext.call.inputs) {
    ASSERT_TRUE(storage.count(b)) << "extern reads a buffer computed by a loop kernel";
    in_ptrs.push_back(storage.at(b).raw_data());
  }
  out_ptrs.push_back(storage.at(ext.call.outputs[0]).raw_data());
  // Twice: the second run reuses everything built by the first.
  for (int rep = 0; rep < 2; ++rep) {
    absl::Status s = (*k)->Run(in_ptrs, out_ptrs);
    ASSERT_TRUE(s.ok()) << s;
  }

  absl::StatusOr<std::vector<Tensor>> want = interp::Run(l->graph, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  interp::CompareResult r =
      interp::CompareTensors(storage.at(l->lp.outputs[0]), (*want)[0], tol);
  EXPECT_TRUE(r.ok) << (*k)->info().call << ": " << r.message << "\n" << text;
  if (result != nullptr) result->info = (*k)->info();
}

absl::Status CreateStatus(const std::string& text) {
  absl::StatusOr<Lowered> l = Lower(text);
  if (!l.ok()) return l.status();
  return OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants, {})
      .status();
}

// ---- Conv.

// One Conv node: x f32`x_shape`, constant weights, optional constant bias.
std::string ConvGraph(const Shape& x, const Shape& w, const Shape& y,
                      const std::string& attrs, bool bias = true) {
  return absl::Substitute(R"(
graph main(%x: f32[$0]) -> (%y) opset 17 {
  %w = constant $1
  %b = constant $2
  %y = Conv(%x, %w$3) $4 : f32[$5]
}
)",
                          absl::StrJoin(x, ","), C(w, 2), C({w[0]}, 3),
                          bias ? ", %b" : "", attrs, absl::StrJoin(y, ","));
}

TEST(ExternKernelConv, OddChannelsWithBias) {
  RunResult r;
  CheckAgainstReference(ConvGraph({1, 3, 7, 7}, {5, 3, 3, 3}, {1, 5, 7, 7},
                                  "{pads=[1, 1, 1, 1]}"),
                        &r);
  EXPECT_EQ(r.info.op, "conv");
  EXPECT_EQ(r.info.call, "conv[3x3 s1 g1 p1]+bias");
  EXPECT_GT(r.info.prepacked_bytes, 0);
  EXPECT_FALSE(r.info.impl.empty());
  EXPECT_FALSE(r.info.weight_layout.empty());
}

TEST(ExternKernelConv, Groups) {
  CheckAgainstReference(ConvGraph({2, 4, 6, 5}, {6, 2, 3, 3}, {2, 6, 4, 3},
                                  "{group=2}"));
}

TEST(ExternKernelConv, Depthwise) {
  CheckAgainstReference(ConvGraph({1, 6, 9, 9}, {6, 1, 3, 3}, {1, 6, 9, 9},
                                  "{group=6, pads=[1, 1, 1, 1]}", false));
}

TEST(ExternKernelConv, StrideDilationAsymmetricPads) {
  CheckAgainstReference(ConvGraph({1, 3, 11, 10}, {4, 3, 3, 2}, {1, 4, 4, 10},
                                  "{strides=[2, 1], dilations=[2, 3], pads=[0, 2, 1, 1]}"));
}

TEST(ExternKernelConv, OneByOne) {
  CheckAgainstReference(ConvGraph({1, 8, 5, 5}, {3, 8, 1, 1}, {1, 3, 5, 5}, "", false));
}

TEST(ExternKernelConv, AutoPadSameUpperStride2) {
  CheckAgainstReference(ConvGraph({1, 3, 8, 7}, {4, 3, 3, 4}, {1, 4, 4, 4},
                                  "{auto_pad=\"SAME_UPPER\", strides=[2, 2]}"));
}

TEST(ExternKernelConv, AutoPadSameLowerAndValid) {
  CheckAgainstReference(ConvGraph({1, 2, 7, 7}, {3, 2, 2, 2}, {1, 3, 7, 7},
                                  "{auto_pad=\"SAME_LOWER\"}"));
  CheckAgainstReference(ConvGraph({1, 2, 7, 7}, {3, 2, 3, 3}, {1, 3, 5, 5},
                                  "{auto_pad=\"VALID\", pads=[1, 1, 1, 1]}"));
}

TEST(ExternKernelConv, Conv1D) {
  CheckAgainstReference(ConvGraph({2, 3, 12}, {4, 3, 3}, {2, 4, 6},
                                  "{strides=[2], pads=[1, 0]}"));
}

TEST(ExternKernelConv, RuntimeBiasIsABinaryAdd) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,3,5,5], %b: f32[4]) -> (%y) opset 17 {
  %w = constant $0
  %y = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,5,5]
}
)",
                                            C({4, 3, 3, 3}, 4));
  RunResult r;
  CheckAgainstReference(text, &r);
  EXPECT_EQ(r.info.call, "conv[3x3 s1 g1 p1]+add[4x1x1]");
}

// Weights computed at run time (Conv, ConvTranspose): read in their plain
// layout at each run.
TEST(ExternKernelConv, RuntimeWeights) {
  RunResult r;
  CheckAgainstReference(R"(
graph main(%x: f32[1,2,4,4], %w: f32[3,2,3,3]) -> (%y) opset 17 {
  %y = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,3,4,4]
}
)",
                        &r);
  EXPECT_EQ(r.info.prepacked_bytes, 0);
  EXPECT_FALSE(absl::StartsWith(r.info.impl, "ref")) << r.info.impl;
  CheckAgainstReference(absl::Substitute(R"(
graph main(%x: f32[2,4,5,5], %w: f32[4,2,2,2]) -> (%y) opset 17 {
  %b = constant $0
  %y = Conv(%x, %w, %b) {group=2, strides=[2, 2]} : f32[2,4,2,2]
}
)",
                                         C({4}, 21)));
  CheckAgainstReference(R"(
graph main(%x: f32[1,2,4,4], %w: f32[2,3,3,3]) -> (%y) opset 17 {
  %y = ConvTranspose(%x, %w) {strides=[2, 2]} : f32[1,3,9,9]
}
)");
}

// ---- ConvTranspose.

TEST(ExternKernelConvTranspose, StridePadsOutputPadding) {
  CheckAgainstReference(absl::Substitute(R"(
graph main(%x: f32[1,3,5,4]) -> (%y) opset 17 {
  %w = constant $0
  %b = constant $1
  %y = ConvTranspose(%x, %w, %b) {strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0]} : f32[1,4,10,8]
}
)",
                                         C({3, 4, 3, 3}, 5), C({4}, 6)));
}

TEST(ExternKernelConvTranspose, GroupsAndDilation) {
  RunResult r;
  CheckAgainstReference(absl::Substitute(R"(
graph main(%x: f32[2,4,5,5]) -> (%y) opset 17 {
  %w = constant $0
  %y = ConvTranspose(%x, %w) {group=2, dilations=[2, 1]} : f32[2,6,9,7]
}
)",
                                         C({4, 3, 3, 3}, 7)),
                        &r);
  EXPECT_EQ(r.info.op, "conv_transpose");
}

TEST(ExternKernelConvTranspose, AutoPadSameUpperAndOutputShape) {
  CheckAgainstReference(absl::Substitute(R"(
graph main(%x: f32[1,2,4,3]) -> (%y) opset 17 {
  %w = constant $0
  %y = ConvTranspose(%x, %w) {auto_pad="SAME_UPPER", strides=[2, 2]} : f32[1,3,8,6]
}
)",
                                         C({2, 3, 3, 3}, 8)));
  CheckAgainstReference(absl::Substitute(R"(
graph main(%x: f32[1,2,4,3]) -> (%y) opset 17 {
  %w = constant $0
  %y = ConvTranspose(%x, %w) {output_shape=[9, 7], strides=[2, 2]} : f32[1,3,9,7]
}
)",
                                         C({2, 3, 3, 3}, 9)));
}

// ---- Gemm.

std::string GemmGraph(bool trans_a, bool trans_b, const std::string& c_shape,
                      const std::string& attrs, bool b_constant = true,
                      bool c_constant = true) {
  const int64_t m = 5, k = 7, n = 6;
  const std::string a = trans_a ? absl::StrCat(k, ",", m) : absl::StrCat(m, ",", k);
  const Shape b_shape = trans_b ? Shape{n, k} : Shape{k, n};
  std::string inputs = absl::StrCat("%a: f32[", a, "]");
  std::string consts;
  if (b_constant) {
    absl::StrAppend(&consts, "  %b = constant ", C(b_shape, 10), "\n");
  } else {
    absl::StrAppend(&inputs, ", %b: f32[", absl::StrJoin(b_shape, ","), "]");
  }
  std::string c_arg;
  if (!c_shape.empty()) {
    c_arg = ", %c";
    Shape cs;
    for (absl::string_view d : absl::StrSplit(c_shape, ',', absl::SkipEmpty())) {
      int64_t v = 0;
      EXPECT_TRUE(absl::SimpleAtoi(d, &v));
      cs.push_back(v);
    }
    if (c_constant) {
      absl::StrAppend(&consts, "  %c = constant ", C(cs, 11), "\n");
    } else {
      absl::StrAppend(&inputs, ", %c: f32[", c_shape, "]");
    }
  }
  std::string all_attrs = attrs;
  auto add = [&](const std::string& a) {
    all_attrs = all_attrs.empty() ? a : absl::StrCat(all_attrs, ", ", a);
  };
  if (trans_a) add("transA=1");
  if (trans_b) add("transB=1");
  return absl::StrCat("graph main(", inputs, ") -> (%y) opset 17 {\n", consts,
                      "  %y = Gemm(%a, %b", c_arg, ") ",
                      all_attrs.empty() ? "" : absl::StrCat("{", all_attrs, "}"),
                      " : f32[5,6]\n}\n");
}

TEST(ExternKernelGemm, Transposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(absl::StrCat("transA=", ta, " transB=", tb));
      RunResult r;
      CheckAgainstReference(GemmGraph(ta, tb, "6", ""), &r);
      EXPECT_EQ(r.info.op, "inner_product");
      EXPECT_EQ(r.info.call, "linear[7->6]+bias");
    }
  }
}

TEST(ExternKernelGemm, AlphaBetaAndCShapes) {
  CheckAgainstReference(GemmGraph(false, true, "6", "alpha=0.5, beta=2.0"));
  CheckAgainstReference(GemmGraph(false, false, "1,6", "beta=0.25"));
  RunResult r;
  CheckAgainstReference(GemmGraph(true, false, "5,6", "alpha=1.5, beta=-0.75"), &r);
  EXPECT_EQ(r.info.call, "linear[7->6]+add[5x6]");
  CheckAgainstReference(GemmGraph(false, false, "5,1", ""));
  CheckAgainstReference(GemmGraph(false, false, "", "alpha=2.0"));
  CheckAgainstReference(GemmGraph(false, false, "5,6", "beta=0.0"));
}

TEST(ExternKernelGemm, RuntimeOperands) {
  RunResult r;
  CheckAgainstReference(GemmGraph(true, true, "5,6", "alpha=0.5",
                                  /*b_constant=*/false, /*c_constant=*/false),
                        &r);
  EXPECT_EQ(r.info.op, "matmul");
  EXPECT_EQ(r.info.call, "matmul[5x7x6 tA tB]+linear(0.5,0)+add[5x6]");
  EXPECT_EQ(r.info.prepacked_bytes, 0);
  CheckAgainstReference(GemmGraph(false, false, "6", "", true, false));
  CheckAgainstReference(GemmGraph(false, true, "5,6", "beta=3.0", false, true));
}

// beta * C for a runtime C would take linear+add+linear, which oneDNN 2.6's
// gemm kernels get wrong.
TEST(ExternKernelGemm, RuntimeCWithBetaIsUnimplemented) {
  absl::Status s = CreateStatus(GemmGraph(false, false, "5,6", "beta=3.0",
                                          /*b_constant=*/false, /*c_constant=*/false));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

TEST(ExternKernelFused, AdjacentLinearPostOpsMerge) {
  const std::string text = absl::Substitute(R"(
graph main(%a: f32[4,6]) -> (%y) opset 17 {
  %w = constant $0
  %y = kiln.FusedMatMul(%a, %w) {post_ops=["linear", "linear"],
      post_op_alphas=[0.5, 3.0], post_op_betas=[0.0, 1.0],
      post_op_inputs=[-1, -1]} : f32[4,5]
}
)",
                                            C({6, 5}, 30));
  RunResult r;
  CheckAgainstReference(text, &r);
  EXPECT_EQ(r.info.post_ops, (std::vector<std::string>{"linear(1.5,1)"}));
}

// Two linear post-ops that cannot merge: refused on gemm-based kernels
// (which compute them wrongly), correct wherever accepted.
TEST(ExternKernelFused, SeparatedLinearPostOps) {
  const std::string text = absl::Substitute(R"(
graph main(%a: f32[4,6]) -> (%y) opset 17 {
  %w = constant $0
  %y = kiln.FusedMatMul(%a, %w) {post_ops=["linear", "tanh", "linear"],
      post_op_alphas=[0.3333333, 0.0, 3.0], post_op_betas=[0.0, 0.0, 0.0],
      post_op_inputs=[-1, -1, -1]} : f32[4,5]
}
)",
                                            C({6, 5}, 31));
  absl::Status s = CreateStatus(text);
  if (s.ok()) {
    CheckAgainstReference(text);
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "two linear post-ops")) << s;
  }
}

// ---- MatMul.

TEST(ExternKernelMatMul, TwoDConstantWeights) {
  RunResult r;
  CheckAgainstReference(absl::Substitute(R"(
graph main(%a: f32[9,13]) -> (%y) opset 17 {
  %b = constant $0
  %y = MatMul(%a, %b) : f32[9,11]
}
)",
                                         C({13, 11}, 12)),
                        &r);
  EXPECT_EQ(r.info.op, "matmul");
  EXPECT_GT(r.info.prepacked_bytes, 0);
}

TEST(ExternKernelMatMul, BatchedWithBroadcast) {
  CheckAgainstReference(absl::Substitute(R"(
graph main(%a: f32[2,3,4,5]) -> (%y) opset 17 {
  %b = constant $0
  %y = MatMul(%a, %b) : f32[2,3,4,6]
}
)",
                                         C({5, 6}, 13)));
  CheckAgainstReference(absl::Substitute(R"(
graph main(%a: f32[3,4,5]) -> (%y) opset 17 {
  %b = constant $0
  %y = MatMul(%a, %b) : f32[2,3,4,6]
}
)",
                                         C({2, 1, 5, 6}, 14)));
}

TEST(ExternKernelMatMul, ActivationTimesActivation) {
  RunResult r;
  CheckAgainstReference(R"(
graph main(%q: f32[2,3,4,8], %k: f32[2,1,8,4]) -> (%y) opset 17 {
  %y = MatMul(%q, %k) : f32[2,3,4,4]
}
)",
                        &r);
  EXPECT_EQ(r.info.prepacked_bytes, 0);
  CheckAgainstReference(R"(
graph main(%q: f32[7,5], %k: f32[5,3]) -> (%y) opset 17 {
  %y = MatMul(%q, %k) : f32[7,3]
}
)");
}

TEST(ExternKernelMatMul, OneDimensionalOperands) {
  CheckAgainstReference(R"(
graph main(%a: f32[5], %b: f32[2,5,3]) -> (%y) opset 17 {
  %y = MatMul(%a, %b) : f32[2,3]
}
)");
  CheckAgainstReference(absl::Substitute(R"(
graph main(%a: f32[2,4,5]) -> (%y) opset 17 {
  %b = constant $0
  %y = MatMul(%a, %b) : f32[2,4]
}
)",
                                         C({5}, 15)));
}

// ---- kiln.Fused*.

TEST(ExternKernelFused, ConvBiasSumRelu) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,4,6,6], %r: f32[1,5,6,6]) -> (%y) opset 17 {
  %w = constant $0
  %b = constant $1
  %y = kiln.FusedConv(%x, %w, %b, %r) {pads=[1, 1, 1, 1], post_ops=["sum", "relu"],
      post_op_alphas=[1.0, 0.0], post_op_betas=[0.0, 0.0], post_op_inputs=[3, -1],
      fused_nodes=["conv", "add", "relu"]} : f32[1,5,6,6]
}
)",
                                            C({5, 4, 3, 3}, 16), C({5}, 17));
  RunResult r;
  CheckAgainstReference(text, &r);
  EXPECT_EQ(r.info.call, "conv[3x3 s1 g1 p1]+bias+sum+relu");
  EXPECT_EQ(r.info.post_ops, (std::vector<std::string>{"sum", "relu"}));
}

// The runtime may place the residual in the output buffer already (in-place
// sum): Run copies nothing, and applies a sum scale in place.
TEST(ExternKernelFused, InPlaceScaledSum) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,2,4,4], %r: f32[1,3,4,4]) -> (%y) opset 17 {
  %w = constant $0
  %y = kiln.FusedConv(%x, %w, %r) {pads=[1, 1, 1, 1], post_ops=["sum"],
      post_op_alphas=[0.5], post_op_betas=[0.0], post_op_inputs=[2]} : f32[1,3,4,4]
}
)",
                                            C({3, 2, 3, 3}, 18));
  absl::StatusOr<Lowered> l = Lower(text);
  ASSERT_TRUE(l.ok()) << l.status();
  auto k = OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants, {});
  ASSERT_TRUE(k.ok()) << k.status();
  Tensor x = Random(DType::kF32, {1, 2, 4, 4}, 19);
  Tensor r = Random(DType::kF32, {1, 3, 4, 4}, 20);
  Tensor y = r;
  Tensor w = *l->lp.constants.at(l->ext->call.inputs[1]);
  ASSERT_TRUE((*k)->Run({x.raw_data(), w.raw_data(), y.raw_data()}, {y.raw_data()}).ok());
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(l->graph, {x, r});
  ASSERT_TRUE(want.ok()) << want.status();
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  interp::CompareResult c = interp::CompareTensors(y, (*want)[0], tol);
  EXPECT_TRUE(c.ok) << c.message;
}

// A residual stored in another layout (channels-last strides): the sum
// copy follows both buffers' strides.
TEST(ExternKernelFused, StridedSumOperandIsCopiedByStrides) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,2,3,5], %r: f32[1,3,3,5]) -> (%y) opset 17 {
  %w = constant $0
  %y = kiln.FusedConv(%x, %w, %r) {pads=[1, 1, 1, 1], post_ops=["sum"],
      post_op_alphas=[1.0], post_op_betas=[0.0], post_op_inputs=[2]} : f32[1,3,3,5]
}
)",
                                            C({3, 2, 3, 3}, 21));
  absl::StatusOr<Lowered> l = Lower(text);
  ASSERT_TRUE(l.ok()) << l.status();
  ir::loop::LoopProgram program = l->lp.program;
  const int32_t rb = l->ext->call.inputs[2];
  program.buffers[rb].strides = {45, 1, 15, 3};  // NHWC storage of [1,3,3,5]
  auto k = OneDnnExternKernel::Create(program, *l->ext, l->lp.constants, {});
  ASSERT_TRUE(k.ok()) << k.status();
  Tensor x = Random(DType::kF32, {1, 2, 3, 5}, 22);
  Tensor r = Random(DType::kF32, {1, 3, 3, 5}, 23);
  Tensor r_nhwc(DType::kF32, {45});
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < 3; ++h) {
      for (int w = 0; w < 5; ++w) {
        r_nhwc.data<float>()[h * 15 + w * 3 + c] = r.data<float>()[c * 15 + h * 5 + w];
      }
    }
  }
  Tensor y(DType::kF32, {1, 3, 3, 5});
  Tensor w = *l->lp.constants.at(l->ext->call.inputs[1]);
  ASSERT_TRUE((*k)->Run({x.raw_data(), w.raw_data(), r_nhwc.raw_data()}, {y.raw_data()}).ok());
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(l->graph, {x, r});
  ASSERT_TRUE(want.ok()) << want.status();
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  interp::CompareResult c = interp::CompareTensors(y, (*want)[0], tol);
  EXPECT_TRUE(c.ok) << c.message;
}

// BERT's projections: matmul + bias add + residual sum. The constant
// per-column add becomes the matmul's bias; where oneDNN has only its
// reference kernel for the sum form, the sum becomes a full-size binary add
// of the residual.
TEST(ExternKernelFused, MatMulBiasAddResidualSum) {
  const std::string text = absl::Substitute(R"(
graph main(%a: f32[1,9,12], %r: f32[1,9,8]) -> (%y) opset 17 {
  %w = constant $0
  %bias = constant $1
  %y = kiln.FusedMatMul(%a, %w, %bias, %r) {post_ops=["add", "sum"],
      post_op_alphas=[0.0, 1.0], post_op_betas=[0.0, 0.0],
      post_op_inputs=[2, 3]} : f32[1,9,8]
}
)",
                                            C({12, 8}, 32), C({8}, 33));
  RunResult r;
  CheckAgainstReference(text, &r);
  EXPECT_TRUE(r.info.call == "matmul[9x12x8]+bias+sum" ||
              r.info.call == "matmul[9x12x8]+bias+add[1x9x8]")
      << r.info.call;
}

// The memory plan may give the residual the output's bytes (decision
// 0073): whether the call keeps the sum or runs it as a binary add (which
// would read the operand after writing dst), the result is the reference's.
TEST(ExternKernelFused, MatMulResidualSumInTheOutputsBytes) {
  const std::string text = absl::Substitute(R"(
graph main(%a: f32[1,9,12], %r: f32[1,9,8]) -> (%y) opset 17 {
  %w = constant $0
  %bias = constant $1
  %y = kiln.FusedMatMul(%a, %w, %bias, %r) {post_ops=["add", "sum"],
      post_op_alphas=[0.0, 1.0], post_op_betas=[0.0, 0.0],
      post_op_inputs=[2, 3]} : f32[1,9,8]
}
)",
                                            C({12, 8}, 32), C({8}, 33));
  absl::StatusOr<Lowered> l = Lower(text);
  ASSERT_TRUE(l.ok()) << l.status();
  const std::optional<int> operand = SumOperandInput(l->lp.program, *l->ext);
  ASSERT_TRUE(operand.has_value());
  EXPECT_EQ(l->lp.program.buffers[l->ext->call.inputs[*operand]].name,
            l->lp.program.buffers[l->lp.inputs[1]].name);
  auto k = OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants, {});
  ASSERT_TRUE(k.ok()) << k.status();
  Tensor a = Random(DType::kF32, {1, 9, 12}, 36);
  Tensor r = Random(DType::kF32, {1, 9, 8}, 37);
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(l->graph, {a, r});
  ASSERT_TRUE(want.ok()) << want.status();
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  for (int run = 0; run < 2; ++run) {  // the second run reuses the first's pointers
    Tensor y = r;
    std::vector<void*> inputs(l->ext->call.inputs.size(), nullptr);
    for (size_t j = 0; j < inputs.size(); ++j) {
      auto c = l->lp.constants.find(l->ext->call.inputs[j]);
      if (c != l->lp.constants.end()) inputs[j] = const_cast<void*>(c->second->raw_data());
    }
    inputs[0] = a.raw_data();
    inputs[*operand] = y.raw_data();
    ASSERT_TRUE((*k)->Run(inputs, {y.raw_data()}).ok());
    interp::CompareResult c = interp::CompareTensors(y, (*want)[0], tol);
    EXPECT_TRUE(c.ok) << (*k)->info().call << ": " << c.message;
  }
}

// Only a sum at scale 1 between f32 buffers of one layout may share bytes.
TEST(ExternKernelFused, SumOperandInputNeedsScaleOneAndOneLayout) {
  const std::string conv = R"(
graph main(%x: f32[1,2,3,5], %r: f32[1,3,3,5]) -> (%y) opset 17 {
  %w = constant $0
  %y = kiln.FusedConv(%x, %w, %r) {pads=[1, 1, 1, 1], post_ops=["sum", "relu"],
      post_op_alphas=[$1, 0.0], post_op_betas=[0.0, 0.0], post_op_inputs=[2, -1]}
      : f32[1,3,3,5]
}
)";
  absl::StatusOr<Lowered> one = Lower(absl::Substitute(conv, C({3, 2, 3, 3}, 38), "1.0"));
  ASSERT_TRUE(one.ok()) << one.status();
  const std::optional<int> operand = SumOperandInput(one->lp.program, *one->ext);
  ASSERT_TRUE(operand.has_value());
  EXPECT_EQ(one->ext->call.inputs[*operand], one->lp.inputs[1]);
  ir::loop::LoopProgram strided = one->lp.program;
  strided.buffers[one->ext->call.inputs[*operand]].strides = {45, 1, 15, 3};
  EXPECT_FALSE(SumOperandInput(strided, *one->ext).has_value());
  absl::StatusOr<Lowered> half = Lower(absl::Substitute(conv, C({3, 2, 3, 3}, 38), "0.5"));
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_FALSE(SumOperandInput(half->lp.program, *half->ext).has_value());
  // Not a sum: no operand.
  absl::StatusOr<Lowered> plain = Lower(absl::Substitute(R"(
graph main(%x: f32[1,2,3,5]) -> (%y) opset 17 {
  %w = constant $0
  %y = kiln.FusedConv(%x, %w) {pads=[1, 1, 1, 1], post_ops=["relu"], post_op_alphas=[0.0],
      post_op_betas=[0.0], post_op_inputs=[-1]} : f32[1,3,3,5]
}
)",
                                                         C({3, 2, 3, 3}, 39)));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(SumOperandInput(plain->lp.program, *plain->ext).has_value());
}

TEST(ExternKernelFused, MatMulAddGeluErf) {
  const std::string text = absl::Substitute(R"(
graph main(%a: f32[2,5,8], %mask: f32[2,1,6]) -> (%y) opset 17 {
  %w = constant $0
  %bias = constant $1
  %y = kiln.FusedMatMul(%a, %w, %bias, %mask) {post_ops=["add", "gelu_erf", "add"],
      post_op_alphas=[0.0, 0.0, 0.0], post_op_betas=[0.0, 0.0, 0.0],
      post_op_inputs=[2, -1, 3]} : f32[2,5,6]
}
)",
                                            C({8, 6}, 24), C({6}, 25));
  RunResult r;
  CheckAgainstReference(text, &r);
  EXPECT_EQ(r.info.call, "matmul[2*5x8x6]+bias+gelu_erf+add[2x1x6]");
}

// A leading add folds into the bias only for a constant per-channel
// operand; others stay binary post-ops.
TEST(ExternKernelFused, LeadingAddFoldsIntoBiasOnlyPerChannel) {
  RunResult r;
  CheckAgainstReference(absl::Substitute(R"(
graph main(%x: f32[1,3,5,5]) -> (%y) opset 17 {
  %w = constant $0
  %t = constant $1
  %y = kiln.FusedConv(%x, %w, %t) {pads=[1, 1, 1, 1], post_ops=["add", "relu"],
      post_op_alphas=[0.0, 0.0], post_op_betas=[0.0, 0.0],
      post_op_inputs=[2, -1]} : f32[1,4,5,5]
}
)",
                                         C({4, 3, 3, 3}, 34), C({1, 4, 1, 1}, 35)),
                        &r);
  EXPECT_EQ(r.info.call, "conv[3x3 s1 g1 p1]+bias+relu");
  CheckAgainstReference(absl::Substitute(R"(
graph main(%x: f32[1,3,5,5]) -> (%y) opset 17 {
  %w = constant $0
  %t = constant $1
  %y = kiln.FusedConv(%x, %w, %t) {pads=[1, 1, 1, 1], post_ops=["add", "relu"],
      post_op_alphas=[0.0, 0.0], post_op_betas=[0.0, 0.0],
      post_op_inputs=[2, -1]} : f32[1,4,5,5]
}
)",
                                         C({4, 3, 3, 3}, 36), C({5, 1}, 37)),
                        &r);
  EXPECT_EQ(r.info.call, "conv[3x3 s1 g1 p1]+add[5x1]+relu");
  CheckAgainstReference(absl::Substitute(R"(
graph main(%a: f32[4,6], %t: f32[5]) -> (%y) opset 17 {
  %w = constant $0
  %y = kiln.FusedMatMul(%a, %w, %t) {post_ops=["add"], post_op_alphas=[0.0],
      post_op_betas=[0.0], post_op_inputs=[2]} : f32[4,5]
}
)",
                                         C({6, 5}, 38)),
                        &r);
  EXPECT_EQ(r.info.call, "matmul[4x6x5]+add[5]") << "a runtime operand stays";
}

TEST(ExternKernelFused, GemmWithPostOps) {
  const std::string text = absl::Substitute(R"(
graph main(%a: f32[3,8]) -> (%y) opset 17 {
  %w = constant $0
  %b = constant $1
  %y = kiln.FusedGemm(%a, %w, %b) {transB=1, post_ops=["gelu_tanh", "clip", "linear"],
      post_op_alphas=[0.0, -0.5, 2.0], post_op_betas=[0.0, 0.5, 0.25],
      post_op_inputs=[-1, -1, -1]} : f32[3,4]
}
)",
                                            C({4, 8}, 26), C({4}, 27));
  RunResult r;
  CheckAgainstReference(text, &r);
  EXPECT_EQ(r.info.op, "inner_product");
  EXPECT_EQ(r.info.post_ops,
            (std::vector<std::string>{"gelu_tanh", "clip(-0.5,0.5)", "linear(2,0.25)"}));
}

// ---- Errors.

TEST(ExternKernelErrors, NonF32IsUnimplemented) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f64[1,2,4,4]) -> (%y) opset 17 {
  %w = constant $0
  %y = Conv(%x, %w) : f64[1,3,2,2]
}
)",
                                            C({3, 2, 3, 3}, 28, DType::kF64));
  absl::Status s = CreateStatus(text);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "onnx.Conv")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "f64")) << s;
}

TEST(ExternKernelErrors, OpsWithoutAMappingAreUnimplemented) {
  absl::Status s = CreateStatus(R"(
graph main(%x: u8[2,3], %w: u8[3,4]) -> (%y) opset 17 {
  %y = MatMulInteger(%x, %w) : i32[2,4]
}
)");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  absl::StatusOr<Lowered> l = Lower(ConvGraph({1, 3, 5, 5}, {4, 3, 3, 3}, {1, 4, 3, 3}, ""));
  ASSERT_TRUE(l.ok()) << l.status();
  for (const char* op : {"onnx.LRN", "kiln.FusedSoftmax", "onednn.conv"}) {
    ir::loop::Kernel k = *l->ext;
    k.call.op = op;
    s = OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), op)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "k0_conv")) << s;
  }
}

TEST(ExternKernelErrors, MalformedKernels) {
  absl::StatusOr<Lowered> l = Lower(ConvGraph({1, 3, 5, 5}, {4, 3, 3, 3}, {1, 4, 3, 3}, ""));
  ASSERT_TRUE(l.ok()) << l.status();
  ir::loop::Kernel k = *l->ext;
  k.kind = ir::loop::Kernel::Kind::kLoop;
  EXPECT_EQ(OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status().code(),
            absl::StatusCode::kInvalidArgument);
  k = *l->ext;
  k.call.attrs.erase(ir::loop::kAttrInputSlots);
  EXPECT_EQ(OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status().code(),
            absl::StatusCode::kInvalidArgument);
  k = *l->ext;
  k.call.attrs["pads"] = std::vector<int64_t>{1, 1};
  EXPECT_EQ(OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status().code(),
            absl::StatusCode::kInvalidArgument);
  k = *l->ext;
  k.call.attrs["kernel_shape"] = std::vector<int64_t>{5, 5};
  EXPECT_EQ(OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExternKernelErrors, BadPostOpAttributes) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[2,3]) -> (%y) opset 17 {
  %w = constant $0
  %y = kiln.FusedMatMul(%x, %w) {post_ops=["relu"], post_op_alphas=[0.0],
      post_op_betas=[0.0], post_op_inputs=[-1]} : f32[2,4]
}
)",
                                            C({3, 4}, 29));
  absl::StatusOr<Lowered> l = Lower(text);
  ASSERT_TRUE(l.ok()) << l.status();
  ir::loop::Kernel k = *l->ext;
  k.call.attrs["post_ops"] = std::string("frobnicate");
  absl::Status s = OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  k = *l->ext;
  k.call.attrs["post_op_inputs"] = std::vector<int64_t>{-1, -1};
  s = OneDnnExternKernel::Create(l->lp.program, k, l->lp.constants).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(ExternKernelErrors, RunChecksPointers) {
  absl::StatusOr<Lowered> l = Lower(R"(
graph main(%q: f32[4,5], %k: f32[5,3]) -> (%y) opset 17 {
  %y = MatMul(%q, %k) : f32[4,3]
}
)");
  ASSERT_TRUE(l.ok()) << l.status();
  auto k = OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants);
  ASSERT_TRUE(k.ok()) << k.status();
  Tensor a(DType::kF32, {4, 5}), b(DType::kF32, {5, 3}), y(DType::kF32, {4, 3});
  EXPECT_EQ((*k)->Run({a.raw_data()}, {y.raw_data()}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*k)->Run({a.raw_data(), nullptr}, {y.raw_data()}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*k)->Run({a.raw_data(), b.raw_data()}, {y.raw_data()}).ok());
}

// The implementations measured to give the same bits at any thread count
// (decision 0050): direct jit convolutions, also behind a linear layer run
// as a 1x1 conv; not the gemm-based ones, nor what was never measured.
TEST(ThreadCountInvariant, OnlyMeasuredImplementations) {
  for (const char* impl : {"jit:avx2", "jit_1x1:avx2", "jit_dw:avx2", "jit:sse41",
                           "jit_1x1:avx2 (as 1x1 conv)"}) {
    EXPECT_TRUE(ThreadCountInvariant(impl)) << impl;
  }
  for (const char* impl : {"gemm:jit", "x64:gemm:jit", "ref", "ref:any", "brg:avx512_core",
                           "jit:avx512_core", "", "jit:avx2x"}) {
    EXPECT_FALSE(ThreadCountInvariant(impl)) << impl;
  }
}

}  // namespace
}  // namespace kiln::onednn
