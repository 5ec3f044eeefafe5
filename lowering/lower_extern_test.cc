// Lowering of kiln's fused library-call nodes (kiln.FusedConv / FusedMatMul
// ...) to "kiln.*" extern kernels: graphs after the default graph pipeline
// lower, run (loop interpreter + reference externs) and match the reference
// interpreter on the original, unfused graph.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "gtest/gtest.h"
#include "ir/graph/graph.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/extern_attrs.h"
#include "interp/loop_module.h"
#include "lowering/lower_graph.h"
#include "lowering/lowering_test_util.h"
#include "passes/graph_pipeline.h"
#include "interp/compare.h"
#include "interp/interpreter.h"

namespace kiln::lowering {
namespace {

using ir::DType;
using ir::Tensor;

// A constant literal with seeded values in [-1, 1] (scaled from [-3, 3]).
std::string Const(const ir::Shape& shape, uint32_t seed) {
  Tensor t = testing::RandomTensor(DType::kF32, shape, seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] /= 3.0f;
  return ir::PrintTensor(t, ir::PrintOptions::Full());
}

std::vector<Tensor> RandomInputs(const ir::Graph& g, uint32_t seed) {
  std::vector<Tensor> inputs;
  for (ir::ValueId v : g.inputs()) {
    inputs.push_back(testing::RandomTensor(g.value(v).dtype, g.value(v).shape,
                                           seed++));
  }
  return inputs;
}

const ir::loop::Kernel* FindExtern(const ir::loop::LoopModule& lp,
                                   const std::string& op) {
  for (const ir::loop::Kernel& k : lp.program.kernels) {
    if (k.kind == ir::loop::Kernel::Kind::kExtern && k.call.op == op) return &k;
  }
  return nullptr;
}

void ExpectClose(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-5;
  for (size_t i = 0; i < want.size(); ++i) {
    interp::CompareResult r = interp::CompareTensors(got[i], want[i], tol);
    EXPECT_TRUE(r.ok) << "output " << i << ": " << r.message;
  }
}

// A conv block with a residual (bias + relu, then sum + relu) and a
// transformer MLP (matmul + GELU-erf, then a bias add): after the default
// pipeline these are kiln.FusedConv / kiln.FusedMatMul nodes.
std::string PipelineInput() {
  return absl::Substitute(R"(
graph main(%x: f32[1,3,7,7], %t: f32[2,5,6]) -> (%y, %z) opset 17 {
  %w1 = constant $0
  %b1 = constant $1
  %w2 = constant $2
  %b2 = constant $3
  %wm = constant $4
  %bm = constant $5
  %sqrt2 = constant f32[] 1.4142135
  %one = constant f32[] 1.0
  %half = constant f32[] 0.5
  %c1 = Conv(%x, %w1, %b1) {pads=[1, 1, 1, 1]} name="conv1" : f32[1,3,7,7]
  %r1 = Relu(%c1) name="relu1" : f32[1,3,7,7]
  %c2 = Conv(%r1, %w2, %b2) {pads=[1, 1, 1, 1]} name="conv2" : f32[1,3,7,7]
  %s = Add(%c2, %x) name="add" : f32[1,3,7,7]
  %y = Relu(%s) name="relu2" : f32[1,3,7,7]
  %m = MatMul(%t, %wm) name="mm" : f32[2,5,4]
  %d = Div(%m, %sqrt2) name="gelu/Div" : f32[2,5,4]
  %e = Erf(%d) name="gelu/Erf" : f32[2,5,4]
  %a = Add(%e, %one) name="gelu/Add" : f32[2,5,4]
  %g1 = Mul(%m, %a) name="gelu/Mul" : f32[2,5,4]
  %g = Mul(%g1, %half) name="gelu/Mul_1" : f32[2,5,4]
  %z = Add(%g, %bm) name="bias" : f32[2,5,4]
}
)",
                          Const({3, 3, 3, 3}, 1), Const({3}, 2),
                          Const({3, 3, 3, 3}, 3), Const({3}, 4),
                          Const({6, 4}, 5), Const({4}, 6));
}

TEST(LowerKilnOps, PipelineGraphMatchesReferenceOnOriginal) {
  absl::StatusOr<ir::Graph> original = ir::ParseGraph(PipelineInput());
  ASSERT_TRUE(original.ok()) << original.status();
  ir::Graph graph = *original;
  ASSERT_TRUE(passes::DefaultGraphPipeline().Run(&graph).ok());
  int fused = 0;
  for (const ir::Node& n : graph.nodes()) fused += n.domain == ir::loop::kKilnDomain;
  ASSERT_EQ(fused, 3) << ir::PrintGraph(graph);

  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(graph);
  ASSERT_TRUE(lp.ok()) << lp.status();
  int externs = 0;
  for (const ir::loop::Kernel& k : lp->program.kernels) {
    externs += k.kind == ir::loop::Kernel::Kind::kExtern;
  }
  EXPECT_EQ(externs, 3);
  const ir::loop::Kernel* conv = FindExtern(*lp, "kiln.FusedConv");
  ASSERT_NE(conv, nullptr);
  const ir::loop::Kernel* mm = FindExtern(*lp, "kiln.FusedMatMul");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(std::get<std::string>(mm->call.attrs.at("post_ops")), "gelu_erf,add");
  EXPECT_EQ(mm->ops, (std::vector<std::string>{"mm", "gelu/Div", "gelu/Erf", "gelu/Add",
                                               "gelu/Mul", "gelu/Mul_1", "bias"}))
      << "the kernel lists the nodes it computes";

  const std::vector<Tensor> inputs = RandomInputs(*original, 11);
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(*original, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<Tensor>> got = interp::RunLoopModule(*lp, inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(*got, *want);
}

// The fused nodes written directly: bias + relu + sum on a conv whose
// residual is a graph input, and a batched matmul + gelu_erf + add.
TEST(LowerKilnOps, FusedNodesMatchReference) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,4,6,6], %r: f32[1,5,6,6], %t: f32[3,2,5], %bm: f32[7]) -> (%y, %z) opset 17 {
  %w = constant $0
  %b = constant $1
  %wm = constant $2
  %y = kiln.FusedConv(%x, %w, %b, %r) {pads=[1, 1, 1, 1], post_ops=["relu", "sum"],
      post_op_alphas=[0.0, 1.0], post_op_betas=[0.0, 0.0], post_op_inputs=[-1, 3],
      fused_nodes=["conv", "relu", "add,with,commas"]} : f32[1,5,6,6]
  %z = kiln.FusedMatMul(%t, %wm, %bm) {post_ops=["gelu_erf", "add"],
      post_op_alphas=[0.0, 0.0], post_op_betas=[0.0, 0.0], post_op_inputs=[-1, 2],
      fused_nodes=["mm", "gelu", "add"]} : f32[3,2,7]
}
)",
                                            Const({5, 4, 3, 3}, 7), Const({5}, 8),
                                            Const({5, 7}, 9));
  absl::StatusOr<ir::Graph> graph = ir::ParseGraph(text);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*graph);
  ASSERT_TRUE(lp.ok()) << lp.status();
  const ir::loop::Kernel* conv = FindExtern(*lp, "kiln.FusedConv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->call.inputs.size(), 4u);
  EXPECT_EQ(std::get<std::vector<int64_t>>(conv->call.attrs.at(ir::loop::kAttrInputSlots)),
            (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::get<std::vector<double>>(conv->call.attrs.at("post_op_alphas")),
            (std::vector<double>{0.0, 1.0}));
  EXPECT_EQ(conv->ops,
            (std::vector<std::string>{"conv", "relu", "add_with_commas"}));

  const std::vector<Tensor> inputs = RandomInputs(*graph, 21);
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(*graph, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::vector<Tensor>> got = interp::RunLoopModule(*lp, inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(*got, *want);
}

TEST(LowerKilnOps, PlainOnnxExternsKeepTheirPrefix) {
  absl::StatusOr<ir::Graph> graph = ir::ParseGraph(R"(
graph main(%a: f32[2,3], %b: f32[3,4]) -> (%c) opset 17 {
  %c = MatMul(%a, %b) : f32[2,4]
}
)");
  ASSERT_TRUE(graph.ok());
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*graph);
  ASSERT_TRUE(lp.ok()) << lp.status();
  EXPECT_NE(FindExtern(*lp, "onnx.MatMul"), nullptr);
  EXPECT_TRUE(IsExternOp(graph->nodes()[0]));
}

TEST(LowerKilnOps, IsExternOpKnowsKilnNodes) {
  ir::Node n;
  n.op = "FusedGemm";
  n.domain = "kiln";
  EXPECT_TRUE(IsExternOp(n));
  n.op = "FusedSoftmax";
  EXPECT_FALSE(IsExternOp(n));
  n.op = "FusedGemm";
  n.domain = "";
  EXPECT_FALSE(IsExternOp(n)) << "a default-domain FusedGemm is no kiln op";
}

TEST(LowerKilnOps, IsExternOpFollowsTheOpTable) {
  ir::Node n;
  for (const char* op : {"Conv", "ConvTranspose", "ConvInteger", "Gemm",
                         "MatMul", "MatMulInteger", "LSTM", "GRU", "RNN"}) {
    n.op = op;
    EXPECT_TRUE(IsExternOp(n)) << op;
  }
  // Lowered to loop kernels.
  for (const char* op : {"LRN", "Einsum", "Relu", "If"}) {
    n.op = op;
    EXPECT_FALSE(IsExternOp(n)) << op;
  }
  n.op = "Conv";
  n.domain = "com.example";
  EXPECT_FALSE(IsExternOp(n));
}

TEST(LowerKilnOps, RefusesOtherDomainsAndDefaultDomainFusedOps) {
  absl::StatusOr<ir::Graph> other = ir::ParseGraph(R"(
graph main(%a: f32[2,3]) -> (%c) opset 17 {
  %c = kiln.FusedSoftmax(%a) : f32[2,3]
}
)");
  ASSERT_TRUE(other.ok());
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*other);
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kUnimplemented) << lp.status();

  absl::StatusOr<ir::Graph> fake = ir::ParseGraph(R"(
graph main(%a: f32[2,3], %b: f32[3,4]) -> (%c) opset 17 {
  %c = FusedMatMul(%a, %b) {post_ops=["relu"], post_op_alphas=[0.0],
      post_op_betas=[0.0], post_op_inputs=[-1]} : f32[2,4]
}
)");
  ASSERT_TRUE(fake.ok());
  lp = LowerGraph(*fake);
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kUnimplemented) << lp.status();
  EXPECT_NE(lp.status().message().find("FusedMatMul"), std::string::npos);
}

TEST(LowerKilnOps, ExecutorRefusesUnknownCallPrefix) {
  ir::loop::LoopProgram p;
  ir::loop::Kernel k;
  k.name = "k0";
  k.kind = ir::loop::Kernel::Kind::kExtern;
  k.call.op = "onednn.conv";
  absl::StatusOr<std::vector<Tensor>> r = interp::RunExternKernel(p, k, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln::lowering
