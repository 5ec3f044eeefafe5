// compiler::Compile on the shipped tiny CNN: the stages in order and where
// it stops, the dump-dir layout the DumpObserver writes, the report
// observer's timings, the conv layout oracle passed in (oneDNN's blocks
// activations, none keeps them plain), eager mode and the refusals.
#include "compiler/pipeline.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/layout_oracle.h"
#include "compiler/dump.h"
#include "compiler/report.h"
#include "frontend/onnx/importer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/loop/blocked_layout.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "isa/isa.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ir::Graph TinyCnn() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  absl::StatusOr<frontend::ImportResult> imported = frontend::ImportModelFile(absl::StrCat(
      srcdir ? srcdir : ".", "/", ws ? ws : "kiln", "/models/tiny_cnn/model.onnx"));
  EXPECT_TRUE(imported.ok()) << imported.status();
  return imported.ok() ? std::move(imported->graph) : ir::Graph("empty");
}

Target ScalarTarget() { return Target{isa::FindIsa("scalar"), passes::ConvLayoutOracle()}; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Records the hooks' calls: "graph <index> <pass>", "loop ...", "stage <name>".
class Recorder final : public PipelineObserver {
 public:
  absl::Status AfterGraphPass(int index, const passes::GraphPass* pass, bool changed,
                              const ir::Graph& graph) override {
    calls.push_back(absl::StrCat("graph ", index, " ", pass ? pass->name() : "input"));
    return absl::OkStatus();
  }
  absl::Status AfterLoopPass(int index, const passes::LoopPass* pass, bool changed,
                             const ir::loop::LoopModule& module) override {
    calls.push_back(absl::StrCat("loop ", index, " ", pass ? pass->name() : "input"));
    return absl::OkStatus();
  }
  absl::Status AfterStage(Stage stage, absl::Duration elapsed,
                          const CompiledProgram& program) override {
    calls.push_back(absl::StrCat("stage ", StageName(stage)));
    return absl::OkStatus();
  }
  std::vector<std::string> calls;
};

std::vector<std::string> Stages(const std::vector<std::string>& calls) {
  std::vector<std::string> stages;
  for (const std::string& c : calls) {
    if (absl::StartsWith(c, "stage ")) stages.push_back(c.substr(6));
  }
  return stages;
}

bool AnyBlocked(const ir::loop::LoopProgram& p) {
  for (const ir::loop::Kernel& k : p.kernels) {
    if (k.call.attrs.count(ir::loop::kAttrBlockedInputs) > 0) return true;
  }
  return false;
}

TEST(Pipeline, RunsEveryStageInOrderAndEmits) {
  Recorder seen;
  absl::StatusOr<CompiledProgram> p = Compile(TinyCnn(), ScalarTarget(), {}, &seen);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Stages(seen.calls), (std::vector<std::string>{"verify", "graph-passes", "lowering",
                                                          "loop-passes", "emit"}));
  EXPECT_EQ(seen.calls[1], "graph 0 input");
  EXPECT_THAT(seen.calls, ::testing::Contains("loop 0 input"));
  ASSERT_TRUE(p->cpp.has_value());
  EXPECT_FALSE(p->cpp->kernels.empty());
  EXPECT_FALSE(p->module.program.kernels.empty());
  ASSERT_EQ(p->inputs.size(), 1u);
  EXPECT_EQ(p->inputs[0].name, "input");
  EXPECT_EQ(p->outputs.size(), 1u);
}

TEST(Pipeline, StopsAfterTheStageAsked) {
  PipelineOptions o;
  o.stop_after = Stage::kGraphPasses;
  Recorder seen;
  absl::StatusOr<CompiledProgram> g = Compile(TinyCnn(), Target{}, o, &seen);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Stages(seen.calls), (std::vector<std::string>{"verify", "graph-passes"}));
  EXPECT_TRUE(g->module.program.kernels.empty());
  EXPECT_FALSE(g->cpp.has_value());
  EXPECT_FALSE(g->graph.nodes().empty());
  EXPECT_EQ(g->inputs.size(), 1u);

  o.stop_after = Stage::kLoopPasses;
  absl::StatusOr<CompiledProgram> l = Compile(TinyCnn(), Target{}, o, nullptr);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_FALSE(l->module.program.kernels.empty());
  EXPECT_FALSE(l->cpp.has_value());
}

TEST(Pipeline, DumpObserverWritesGraphLoopAndCpp) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/pipeline_dump");
  fs::remove_all(dir);
  DumpObserver dump(dir);
  absl::StatusOr<CompiledProgram> p = Compile(TinyCnn(), ScalarTarget(), {}, &dump);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(ReadFile(dir + "/graph/00-input.txt"), HasSubstr("= BatchNormalization("));
  // fold-batch-norm changed the graph; fold-constant-transpose had nothing.
  EXPECT_EQ(ReadFile(dir + "/graph/07-fold-constant-transpose.txt"), "(unchanged)\n");
  EXPECT_THAT(ReadFile(dir + "/graph/08-fold-batch-norm.txt"),
              ::testing::Not(HasSubstr("= BatchNormalization(")));
  EXPECT_THAT(ReadFile(dir + "/loop/00-input.txt"), HasSubstr("kernel "));
  EXPECT_TRUE(fs::exists(dir + "/loop/06-propagate-layout.txt"));
  int cc = 0;
  for (const ir::loop::SourceFile& f : p->cpp->sources) {
    const std::string path =
        absl::StrCat(dir, "/cpp/", f.name, absl::EndsWith(f.name, ".h") ? "" : ".cc");
    EXPECT_EQ(ReadFile(path), f.text) << path;
    cc += absl::EndsWith(path, ".cc");
  }
  EXPECT_GT(cc, 0);
}

TEST(Pipeline, ReportObserverFillsPhaseTimings) {
  CompileReport report;
  ReportObserver fill(&report);
  ASSERT_TRUE(Compile(TinyCnn(), ScalarTarget(), {}, &fill).ok());
  EXPECT_GT(report.graph_passes_ms, 0);
  EXPECT_GT(report.lowering_ms, 0);
  EXPECT_GT(report.loop_passes_ms, 0);
  EXPECT_GT(report.emit_ms, 0);
}

TEST(Pipeline, TheOracleDecidesLayouts) {
  absl::StatusOr<CompiledProgram> plain = Compile(TinyCnn(), ScalarTarget(), {}, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(AnyBlocked(plain->module.program));
  EXPECT_EQ(ir::loop::CountLayoutReorderKernels(plain->module.program), 0);
  Target onednn = ScalarTarget();
  onednn.conv_layout_oracle = onednn::ConvLayoutOracle();
  absl::StatusOr<CompiledProgram> blocked = Compile(TinyCnn(), onednn, {}, nullptr);
  ASSERT_TRUE(blocked.ok()) << blocked.status();
  // oneDNN's x86 conv kernels want nChw8c or nChw16c for these convs.
  EXPECT_TRUE(AnyBlocked(blocked->module.program));
}

TEST(Pipeline, EagerRunsNoFusionAndNoLoopPass) {
  PipelineOptions o;
  o.eager = true;
  Recorder seen;
  absl::StatusOr<CompiledProgram> p = Compile(TinyCnn(), ScalarTarget(), o, &seen);
  ASSERT_TRUE(p.ok()) << p.status();
  for (const std::string& c : seen.calls) {
    EXPECT_FALSE(absl::StartsWith(c, "loop ") && c != "loop 0 input") << c;
    EXPECT_THAT(c, ::testing::Not(HasSubstr("fuse-onednn-post-ops")));
    EXPECT_THAT(c, ::testing::Not(HasSubstr("fold-batch-norm")));
  }
  EXPECT_THAT(seen.calls, ::testing::Contains("graph 3 eliminate-identity"));
}

// A QDQ Conv (7-bit weights, which oneDNN's int8 kernels run exactly on
// every CPU) becomes QLinearConv when the library-call oracle takes it; a
// refusal keeps the f32 Conv with constant weights, and the report says why.
constexpr const char* kQdqConv = R"(
graph main(%in: f32[1,2,4,4]) -> (%y) opset 13 {
  %xs = constant f32[] 0.02
  %xz = constant u8[] 128
  %wq = constant i8[2,2,1,1] [3, -64, 7, 64]
  %ws = constant f32[2] [0.01, 0.02]
  %ys = constant f32[] 0.03
  %yz = constant u8[] 128
  %x = QuantizeLinear(%in, %xs, %xz) : u8[1,2,4,4]
  %xd = DequantizeLinear(%x, %xs, %xz) : f32[1,2,4,4]
  %wd = DequantizeLinear(%wq, %ws) {axis=0} : f32[2,2,1,1]
  %c = Conv(%xd, %wd) : f32[1,2,4,4]
  %y = QuantizeLinear(%c, %ys, %yz) : u8[1,2,4,4]
}
)";

TEST(Pipeline, QdqPatternsAskTheLibraryAndTheReportSaysWhy) {
  PipelineOptions o;
  o.stop_after = Stage::kGraphPasses;
  {
    absl::StatusOr<ir::Graph> g = ir::ParseGraph(kQdqConv);
    ASSERT_TRUE(g.ok()) << g.status();
    Target t = ScalarTarget();
    t.library_call_oracle = onednn::LibraryCallOracle();
    CompileReport report;
    ReportObserver observe(&report);
    absl::StatusOr<CompiledProgram> p = Compile(*std::move(g), t, o, &observe);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_THAT(ir::PrintGraph(p->graph), HasSubstr("= QLinearConv("));
    ASSERT_EQ(report.qdq_patterns.size(), 1u);
    EXPECT_EQ(report.qdq_patterns[0].op, "QLinearConv");
  }
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(kQdqConv);
  ASSERT_TRUE(g.ok()) << g.status();
  Target t = ScalarTarget();
  t.library_call_oracle = [](const ir::loop::LoopModule&, const ir::loop::Kernel& k) {
    return absl::UnimplementedError(absl::StrCat("refused ", k.call.op));
  };
  CompileReport report;
  ReportObserver observe(&report);
  absl::StatusOr<CompiledProgram> p = Compile(*std::move(g), t, o, &observe);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string text = ir::PrintGraph(p->graph);
  EXPECT_THAT(text, HasSubstr("= Conv(%xd, %wd)"));
  EXPECT_THAT(text, HasSubstr("%wd = constant f32[2,2,1,1]"));
  ASSERT_EQ(report.qdq_patterns.size(), 1u);
  EXPECT_EQ(report.qdq_patterns[0].op, "");
  EXPECT_THAT(report.qdq_patterns[0].reason, HasSubstr("refused"));
  EXPECT_THAT(report.ToText(), HasSubstr("QDQ patterns: 1, 0 as integer calls; in f32: 1x Conv: refused"));
}

// Attention's Q x K^T in a QDQ model (u8 x u8 activations, 4-D): the
// oracle, asked with K as a run-time input, takes the int8 call where
// oneDNN has VNNI; K is then written as s8 by a shifted QuantizeLinear.
TEST(Pipeline, QdqActivationMatMulAsksTheLibraryWithARuntimeB) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph main(%qin: f32[1,2,8,16], %kin: f32[1,2,16,8]) -> (%y) opset 13 {
  %as = constant f32[] 0.021
  %az = constant u8[] 129
  %bs = constant f32[] 0.02
  %bz = constant u8[] 125
  %ys = constant f32[] 0.11
  %yz = constant u8[] 127
  %a = QuantizeLinear(%qin, %as, %az) : u8[1,2,8,16]
  %b = QuantizeLinear(%kin, %bs, %bz) : u8[1,2,16,8]
  %ad = DequantizeLinear(%a, %as, %az) : f32[1,2,8,16]
  %bd = DequantizeLinear(%b, %bs, %bz) : f32[1,2,16,8]
  %c = MatMul(%ad, %bd) : f32[1,2,8,8]
  %y = QuantizeLinear(%c, %ys, %yz) : u8[1,2,8,8]
}
)");
  ASSERT_TRUE(g.ok()) << g.status();
  PipelineOptions o;
  o.stop_after = Stage::kGraphPasses;
  Target t = ScalarTarget();
  t.library_call_oracle = onednn::LibraryCallOracle();
  CompileReport report;
  ReportObserver observe(&report);
  absl::StatusOr<CompiledProgram> p = Compile(*std::move(g), t, o, &observe);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(report.qdq_patterns.size(), 1u);
  const std::string text = ir::PrintGraph(p->graph);
  const std::string isa = onednn::OneDnnCpuIsa();
  if (!absl::StrContains(isa, "vnni") && !absl::StrContains(isa, "amx") &&
      !absl::StrContains(isa, "bf16")) {
    EXPECT_THAT(report.qdq_patterns[0].reason, HasSubstr("no VNNI"));
    GTEST_SKIP() << "a run-time B is refused without VNNI (" << isa << ")";
  }
  EXPECT_EQ(report.qdq_patterns[0].op, "QLinearMatMul") << report.qdq_patterns[0].reason;
  EXPECT_THAT(text, HasSubstr("%b.s8 = QuantizeLinear(%kin, %bs, %b.s8.zero_point) : i8[1,2,16,8]"));
  EXPECT_THAT(text, HasSubstr("= QLinearMatMul(%a, %as, %az, %b.s8, %bs,"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("MatMul(%ad")));
}

TEST(Pipeline, Refusals) {
  PipelineOptions o;
  o.disabled_passes = {"no-such-pass"};
  absl::StatusOr<CompiledProgram> p = Compile(TinyCnn(), ScalarTarget(), o, nullptr);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              HasSubstr("graph passes: compute-f16-in-f32, fold-cast-chains, eliminate-identity"));
  EXPECT_THAT(p.status().message(), HasSubstr("loop passes: eliminate-dead-buffers"));

  p = Compile(TinyCnn(), Target{}, {}, nullptr);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("no target ISA"));

  // An observer's error stops the compile.
  class Failing final : public PipelineObserver {
    absl::Status AfterStage(Stage stage, absl::Duration, const CompiledProgram&) override {
      return stage == Stage::kLowering ? absl::CancelledError("enough") : absl::OkStatus();
    }
  } failing;
  p = Compile(TinyCnn(), ScalarTarget(), {}, &failing);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace kiln::compiler
