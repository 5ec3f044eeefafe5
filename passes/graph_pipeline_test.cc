// Tests for the graph pipeline driver: order, dumps, disabling, verification.
#include "passes/graph_pipeline.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "ir/graph/text.h"

namespace kiln::passes {
namespace {

constexpr char kGraph[] = R"(
graph main(%x: f32[4]) -> (%y) opset 18 {
  %a = Identity(%x) : f32[4]
  %unused = Exp(%x) : f32[4]
  %y = Relu(%a) : f32[4]
}
)";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(GraphPipeline, DefaultOrder) {
  EXPECT_EQ(DefaultGraphPipeline().PassNames(),
            (std::vector<std::string>{"eliminate-identity", "eliminate-dead-code"}));
}

TEST(GraphPipeline, RunsAllPassesAndDumps) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(kGraph);
  ASSERT_TRUE(g.ok()) << g.status();
  PipelineOptions opts;
  opts.verify = true;
  opts.dump_dir = std::string(getenv("TEST_TMPDIR")) + "/dump";
  ASSERT_TRUE(DefaultGraphPipeline().Run(&*g, opts).ok());
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->nodes()[0].op, "Relu");
  EXPECT_NE(ReadFile(opts.dump_dir + "/00-input.txt").find("Identity"),
            std::string::npos);
  EXPECT_EQ(ReadFile(opts.dump_dir + "/01-eliminate-identity.txt").find("Identity"),
            std::string::npos);
  EXPECT_EQ(ReadFile(opts.dump_dir + "/02-eliminate-dead-code.txt").find("Exp"),
            std::string::npos);
}

TEST(GraphPipeline, UnchangedPassDumpsUnchanged) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(
      "graph main(%x: f32[4]) -> (%y) opset 18 { %y = Relu(%x) : f32[4] }");
  ASSERT_TRUE(g.ok()) << g.status();
  PipelineOptions opts;
  opts.dump_dir = std::string(getenv("TEST_TMPDIR")) + "/dump2";
  ASSERT_TRUE(DefaultGraphPipeline().Run(&*g, opts).ok());
  EXPECT_EQ(ReadFile(opts.dump_dir + "/01-eliminate-identity.txt"), "(unchanged)\n");
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

}  // namespace
}  // namespace kiln::passes
