// The loop pipeline's controls: disabling, the observer, unknown pass names, the
// order, and the pass registry. What the default pipeline fuses is
// testdata/loop_pipeline_fusion.txt (kilnc opt --pipeline=loop).
#include "ir/loop/module.h"
#include "passes/loop/loop_pipeline.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "ir/loop/text.h"
#include "ir/status_macros.h"
#include "lowering/lower_graph.h"
#include "testing/filecheck.h"

namespace kiln::passes {
namespace {

absl::StatusOr<ir::loop::LoopModule> FromGraphText(absl::string_view text) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, ir::ParseGraph(text));
  return lowering::LowerGraph(g);
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

// The registry and the default pipeline name the same passes.
TEST(LoopPipeline, RegistryHoldsEveryPipelinePass) {
  std::vector<std::string> in_pipeline = DefaultLoopPipeline(ConvLayoutOracle()).PassNames();
  std::sort(in_pipeline.begin(), in_pipeline.end());
  in_pipeline.erase(std::unique(in_pipeline.begin(), in_pipeline.end()), in_pipeline.end());
  EXPECT_EQ(LoopPassNames(), in_pipeline);
  for (const std::string& name : LoopPassNames()) {
    absl::StatusOr<std::unique_ptr<LoopPass>> pass = CreateLoopPass(name, ConvLayoutOracle());
    ASSERT_TRUE(pass.ok()) << pass.status();
    EXPECT_EQ((*pass)->name(), name);
  }
}

TEST(LoopPipeline, UnknownPassNameListsTheRegistry) {
  absl::StatusOr<std::unique_ptr<LoopPass>> pass =
      CreateLoopPass("fuse-everything", ConvLayoutOracle());
  EXPECT_EQ(pass.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pass.status().message().find("'fuse-everything'"), std::string::npos);
  EXPECT_NE(pass.status().message().find("demote-index, eliminate-dead-buffers"),
            std::string::npos)
      << pass.status();
}

// The registry's propagate-layout asks the oracle it was given.
TEST(LoopPipeline, RegistryPassesTheOracleToPropagateLayout) {
  absl::StatusOr<ir::loop::LoopModule> lp = FromGraphText(R"(
graph g(%x: f32[1,8,4,4]) -> (%y) opset 17 {
  %w1 = constant f32[8,8,1,1] splat(0.5)
  %w2 = constant f32[8,8,1,1] splat(0.25)
  %c = Conv(%x, %w1) : f32[1,8,4,4]
  %r = Relu(%c) : f32[1,8,4,4]
  %y = Conv(%r, %w2) : f32[1,8,4,4]
}
)");
  ASSERT_TRUE(lp.ok()) << lp.status();
  int asked = 0;
  ConvLayoutOracle oracle = [&asked](const ir::loop::LoopModule&,
                                     const ir::loop::Kernel&) -> absl::StatusOr<ConvLayout> {
    ++asked;
    return ConvLayout{8, 8, {}};
  };
  absl::StatusOr<std::unique_ptr<LoopPass>> pass = CreateLoopPass("propagate-layout", oracle);
  ASSERT_TRUE(pass.ok()) << pass.status();
  absl::StatusOr<bool> changed = (*pass)->Run(&*lp);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_GT(asked, 0);
  absl::Status s = kiln::testing::RunFileCheck(ir::loop::PrintProgram(lp->program),
                                               "CHECK: buffer %r: f32[1,1,4,4,8] intermediate");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LoopPipeline, PassOrder) {
  const std::vector<std::string> want = {
      "eliminate-dead-buffers", "fuse-vertical", "fuse-horizontal",
      "fuse-vertical", "eliminate-dead-buffers", "propagate-layout",
      "store-activations-in-bf16", "tabulate-8bit-functions", "demote-index"};
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
  // No oracle: propagate-layout changes nothing; f32 calls: nor does
  // store-activations-in-bf16; no 8-bit values: nor does
  // tabulate-8bit-functions.
  EXPECT_EQ(calls, (std::vector<std::string>{
                       "0 input 0", "1 eliminate-dead-buffers 0", "2 fuse-vertical 1",
                       "4 fuse-vertical 0", "5 eliminate-dead-buffers 0",
                       "6 propagate-layout 0", "7 store-activations-in-bf16 0",
                       "8 tabulate-8bit-functions 0", "9 demote-index 0"}));
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
