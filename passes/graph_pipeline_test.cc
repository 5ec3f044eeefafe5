// Tests for the graph pipeline driver (order, observer, disabling,
// verification), the pass registry, and for the default pipeline on whole graphs: the shipped
// tiny CNN keeps matching its ONNX test data with every BatchNorm folded.
#include "passes/graph_pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "ir/graph/text.h"
#include "interp/compare.h"
#include "interp/interpreter.h"

namespace kiln::passes {
namespace {

constexpr char kGraph[] = R"(
graph main(%x: f32[4]) -> (%y) opset 18 {
  %a = Identity(%x) : f32[4]
  %unused = Exp(%x) : f32[4]
  %y = Relu(%a) : f32[4]
}
)";

// What the observer saw: "<index> <pass or input> <changed>" and the graph
// text after each call.
struct Seen {
  std::vector<std::string> calls;
  std::vector<std::string> texts;
};

PipelineOptions Observing(Seen* seen) {
  PipelineOptions opts;
  opts.observer = [seen](int index, const GraphPass* pass, bool changed,
                         const ir::Graph& graph) {
    seen->calls.push_back(absl::StrCat(index, " ", pass == nullptr ? "input" : pass->name(),
                                       " ", changed));
    seen->texts.push_back(ir::PrintGraph(graph));
    return absl::OkStatus();
  };
  return opts;
}

TEST(GraphPipeline, DefaultOrder) {
  EXPECT_EQ(DefaultGraphPipeline().PassNames(),
            (std::vector<std::string>{
                "compute-f16-in-f32", "fold-cast-chains", "eliminate-identity",
                "fuse-qdq", "fuse-dequantize-lstm", "fold-dequantize-linear",
                "fold-constant-transpose", "fold-batch-norm", "fold-binary-into-weights",
                "integer-calls-in-f32", "fuse-onednn-post-ops", "eliminate-dead-code"}));
}

// The registry and the default pipeline name the same passes.
TEST(GraphPipeline, RegistryHoldsEveryPipelinePass) {
  std::vector<std::string> in_pipeline = DefaultGraphPipeline().PassNames();
  std::sort(in_pipeline.begin(), in_pipeline.end());
  in_pipeline.erase(std::unique(in_pipeline.begin(), in_pipeline.end()), in_pipeline.end());
  EXPECT_EQ(GraphPassNames(), in_pipeline);
  for (const std::string& name : GraphPassNames()) {
    absl::StatusOr<std::unique_ptr<GraphPass>> pass = CreateGraphPass(name);
    ASSERT_TRUE(pass.ok()) << pass.status();
    EXPECT_EQ((*pass)->name(), name);
  }
}

TEST(GraphPipeline, UnknownPassNameListsTheRegistry) {
  absl::StatusOr<std::unique_ptr<GraphPass>> pass = CreateGraphPass("fold-everything");
  EXPECT_EQ(pass.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pass.status().message().find("'fold-everything'"), std::string::npos);
  EXPECT_NE(pass.status().message().find("fold-batch-norm, fold-binary-into-weights"),
            std::string::npos)
      << pass.status();
}

TEST(GraphPipeline, RunsAllPassesAndObservesEach) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(kGraph);
  ASSERT_TRUE(g.ok()) << g.status();
  Seen seen;
  PipelineOptions opts = Observing(&seen);
  opts.verify = true;
  ASSERT_TRUE(DefaultGraphPipeline().Run(&*g, opts).ok());
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->nodes()[0].op, "Relu");
  EXPECT_EQ(seen.calls, (std::vector<std::string>{
                            "0 input 0", "1 compute-f16-in-f32 0", "2 fold-cast-chains 0",
                            "3 eliminate-identity 1", "4 fuse-qdq 0",
                            "5 fuse-dequantize-lstm 0", "6 fold-dequantize-linear 0",
                            "7 fold-constant-transpose 0", "8 fold-batch-norm 0",
                            "9 fold-binary-into-weights 0", "10 integer-calls-in-f32 0",
                            "11 fuse-onednn-post-ops 0", "12 eliminate-dead-code 1"}));
  EXPECT_NE(seen.texts[0].find("Identity"), std::string::npos);
  EXPECT_EQ(seen.texts[3].find("Identity"), std::string::npos);
  EXPECT_NE(seen.texts[11].find("Exp"), std::string::npos);
  EXPECT_EQ(seen.texts[12].find("Exp"), std::string::npos);
}

TEST(GraphPipeline, DisabledPassIsNotObservedAndObserverErrorStops) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(kGraph);
  ASSERT_TRUE(g.ok()) << g.status();
  Seen seen;
  PipelineOptions opts = Observing(&seen);
  opts.disabled = {"fold-batch-norm", "eliminate-dead-code"};
  ASSERT_TRUE(DefaultGraphPipeline().Run(&*g, opts).ok());
  EXPECT_EQ(seen.calls, (std::vector<std::string>{
                            "0 input 0", "1 compute-f16-in-f32 0", "2 fold-cast-chains 0",
                            "3 eliminate-identity 1", "4 fuse-qdq 0",
                            "5 fuse-dequantize-lstm 0", "6 fold-dequantize-linear 0",
                            "7 fold-constant-transpose 0", "9 fold-binary-into-weights 0",
                            "10 integer-calls-in-f32 0", "11 fuse-onednn-post-ops 0"}));
  opts.observer = [](int index, const GraphPass*, bool, const ir::Graph&) {
    return index == 2 ? absl::InternalError("stop") : absl::OkStatus();
  };
  g = ir::ParseGraph(kGraph);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(DefaultGraphPipeline().Run(&*g, opts).message(), "stop");
}

TEST(GraphPipeline, DisabledPassIsSkippedAndUnknownIsAnError) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(kGraph);
  ASSERT_TRUE(g.ok());
  PipelineOptions opts;
  opts.disabled = {"eliminate-dead-code"};
  ASSERT_TRUE(DefaultGraphPipeline().Run(&*g, opts).ok());
  EXPECT_EQ(g->nodes().size(), 2u);  // Exp survives
  opts.disabled = {"no-such-pass"};
  absl::Status s = DefaultGraphPipeline().Run(&*g, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("eliminate-identity"), std::string::npos);
}

// A pass that breaks the graph is caught by the verifier between passes.
class BreakGraph : public GraphPass {
 public:
  absl::string_view name() const override { return "break-graph"; }
  absl::StatusOr<bool> Run(ir::Graph* g) override {
    std::swap(g->mutable_nodes()[0], g->mutable_nodes()[2]);  // Relu before its input
    return true;
  }
};

TEST(GraphPipeline, VerifierCatchesABrokenPass) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(kGraph);
  ASSERT_TRUE(g.ok());
  GraphPipeline p;
  p.Add(std::make_unique<BreakGraph>());
  PipelineOptions opts;
  opts.verify = true;
  absl::Status s = p.Run(&*g, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("after pass break-graph"), std::string::npos) << s;
}

// Each fold only fires once the pass before it has run: the Identity hides
// the conv from the BN, the BN hides it from the Mul, the Transpose hides the
// MatMul's weights from the Mul.
constexpr char kFoldingGraph[] = R"(
graph main(%x: f32[1,2,3,3], %v: f32[2,3]) -> (%y, %z) opset 18 {
  %w = constant f32[2,2,1,1] [0.5, -1.25, 2.0, 0.75]
  %scale = constant f32[2] [1.5, 0.5]
  %shift = constant f32[2] [-0.25, 1.0]
  %mean = constant f32[2] [0.125, -0.5]
  %var = constant f32[2] [0.8, 2.5]
  %k = constant f32[2,1,1] [2.0, -3.0]
  %u = constant f32[4,3] [1.0, -2.0, 0.5, 3.0, 0.25, -1.0, 1.5, 2.5, -0.75, 0.125, 2.0, -1.5]
  %s = constant f32[4] [0.5, 2.0, -1.0, 3.0]
  %c = Conv(%x, %w) : f32[1,2,3,3]
  %i = Identity(%c) : f32[1,2,3,3]
  %n = BatchNormalization(%i, %scale, %shift, %mean, %var) : f32[1,2,3,3]
  %m = Mul(%n, %k) : f32[1,2,3,3]
  %y = Relu(%m) : f32[1,2,3,3]
  %ut = Transpose(%u) : f32[3,4]
  %mm = MatMul(%v, %ut) : f32[2,4]
  %z = Mul(%mm, %s) : f32[2,4]
}
)";

std::vector<ir::Tensor> Inputs() {
  ir::Tensor x = ir::Tensor::FromVector<float>(
      {1, 2, 3, 3}, {0.1f, -0.4f, 1.2f, 0.7f, -1.1f, 0.3f, 0.9f, -0.2f, 0.5f,
                     -0.8f, 0.6f, 1.4f, -0.3f, 0.2f, -1.5f, 1.1f, 0.4f, -0.6f});
  ir::Tensor v = ir::Tensor::FromVector<float>(
      {2, 3}, {0.3f, -1.2f, 0.8f, 1.5f, 0.25f, -0.7f});
  return {x, v};
}

TEST(GraphPipeline, DefaultPipelineFoldsWeightsAndKeepsResults) {
  absl::StatusOr<ir::Graph> before = ir::ParseGraph(kFoldingGraph);
  ASSERT_TRUE(before.ok()) << before.status();
  ir::Graph after = *before;
  PipelineOptions opts;
  opts.verify = true;
  ASSERT_TRUE(DefaultGraphPipeline().Run(&after, opts).ok());
  std::vector<std::string> ops;
  for (const ir::Node& n : after.nodes()) ops.push_back(n.op);
  // Conv+Relu is one oneDNN call; the MatMul has no post-op left to fuse.
  EXPECT_EQ(ops, (std::vector<std::string>{"FusedConv", "MatMul"}))
      << ir::PrintGraph(after);
  // Only the folded weights and bias are left.
  EXPECT_EQ(after.constants().size(), 3u) << ir::PrintGraph(after);

  absl::StatusOr<std::vector<ir::Tensor>> want =
      interp::Run(*before, Inputs());
  absl::StatusOr<std::vector<ir::Tensor>> got = interp::Run(after, Inputs());
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  interp::Tolerance tol;
  tol.rtol = 1e-5;
  tol.atol = 1e-6;
  for (size_t i = 0; i < 2; ++i) {
    interp::CompareResult c = interp::CompareTensors((*got)[i], (*want)[i], tol);
    EXPECT_TRUE(c.ok) << "output " << i << ": " << c.message;
  }
}

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kiln", "/", path);
}

TEST(GraphPipeline, TinyCnnFoldsEveryBatchNormAndMatchesItsTestData) {
  const std::string dir = Runfile("models/tiny_cnn");
  absl::StatusOr<frontend::ImportResult> imported =
      frontend::ImportModelFile(dir + "/model.onnx");
  ASSERT_TRUE(imported.ok()) << imported.status();
  ir::Graph& g = imported->graph;
  int batch_norms = 0;
  for (const ir::Node& n : g.nodes()) batch_norms += n.op == "BatchNormalization";
  ASSERT_EQ(batch_norms, 4);  // the test is pointless without them

  PipelineOptions opts;
  opts.verify = true;
  absl::Status s = DefaultGraphPipeline().Run(&g, opts);
  ASSERT_TRUE(s.ok()) << s;
  for (const ir::Node& n : g.nodes()) {
    EXPECT_NE(n.op, "BatchNormalization") << ir::PrintGraph(g);
  }
  int fused = 0;
  for (const ir::Node& n : g.nodes()) fused += n.domain == "kiln";
  EXPECT_GT(fused, 0) << ir::PrintGraph(g);  // conv+relu as oneDNN calls

  absl::StatusOr<ir::Tensor> input =
      frontend::LoadTensorFile(dir + "/test_data_set_0/input_0.pb");
  absl::StatusOr<ir::Tensor> expected =
      frontend::LoadTensorFile(dir + "/test_data_set_0/output_0.pb");
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_TRUE(expected.ok()) << expected.status();
  absl::StatusOr<std::vector<ir::Tensor>> out = interp::Run(g, {*input});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  interp::CompareResult c = interp::CompareTensors((*out)[0], *expected);
  EXPECT_TRUE(c.ok) << c.message;
}

}  // namespace
}  // namespace kiln::passes
