// Tests for `kilnc opt` (tools/opt.h): argument parsing, running graph and
// loop passes and pipelines on text IR, "(unchanged)", --verify-results, the
// errors (unknown pass, bad IR, a graph pass on loop IR), the test-file
// runner (tools/opt_file_test.h), and the kilnc binary's subcommand end to
// end (exit codes, -o).
#include "tools/opt.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/filecheck.h"
#include "tools/opt_file_test.h"

namespace kiln::tools {
namespace {

constexpr char kLoop[] = R"(
# exp then neg: fuse-vertical inlines the exp.
buffer %x: f32[4,8] input
buffer %t: f32[4,8] intermediate
buffer %y: f32[4,8] output
kernel k0 over (i0: 4, i1: 8) {
  %0 = load %x[i0*8 + i1]
  %1 = exp %0
  store %t[i0*8 + i1], %1
}
kernel k1 over (i0: 4, i1: 8) {
  %0 = load %t[i0*8 + i1]
  %1 = neg %0
  store %y[i0*8 + i1], %1
}
)";

constexpr char kGraph[] = R"(
// Identity then exp and sum: softmax's numerator and denominator.
graph g(%x: f32[3,5]) -> (%y) opset 18 {
  %ax = constant i64[1] [1]
  %i = Identity(%x) : f32[3,5]
  %e = Exp(%i) : f32[3,5]
  %s = ReduceSum(%e, %ax) {keepdims=1} : f32[3,1]
  %y = Div(%e, %s) : f32[3,5]
}
)";

OptOptions Parse(const std::vector<std::string>& args) {
  absl::StatusOr<OptOptions> o = ParseOptArgs(args);
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : OptOptions();
}

std::string Opt(const std::vector<std::string>& args, absl::string_view text) {
  absl::StatusOr<OptResult> r = RunOpt(Parse(args), text, "in.txt");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->text : "";
}

void ExpectChecks(const std::string& out, const char* checks) {
  absl::Status s = kiln::testing::RunFileCheck(out, checks);
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

TEST(OptArgs, StepsInCommandLineOrderAndFlags) {
  OptOptions o = Parse({"opt", "--pass=fuse-vertical", "--pipeline=graph", "--lower",
                        "--pipeline=loop", "--pass=demote-index", "--ir=loop",
                        "--verify-results", "--seed=7", "--rtol=1e-4", "--atol=0",
                        "--int-range=0:2", "--conv-layout-oracle=onednn", "-o", "out.txt",
                        "in.txt"});
  ASSERT_EQ(o.steps.size(), 5u);
  EXPECT_EQ(o.steps[0].kind, OptStep::Kind::kPass);
  EXPECT_EQ(o.steps[0].pass, "fuse-vertical");
  EXPECT_EQ(o.steps[1].kind, OptStep::Kind::kGraphPipeline);
  EXPECT_EQ(o.steps[2].kind, OptStep::Kind::kLower);
  EXPECT_EQ(o.steps[3].kind, OptStep::Kind::kLoopPipeline);
  EXPECT_EQ(o.steps[4].pass, "demote-index");
  EXPECT_EQ(o.ir, OptIr::kLoop);
  EXPECT_TRUE(o.verify_results);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.rtol, 1e-4);
  EXPECT_EQ(o.atol, 0.0);
  EXPECT_EQ(o.int_low, 0);
  EXPECT_EQ(o.int_high, 2);
  EXPECT_EQ(o.conv_layout_oracle, OptConvLayoutOracle::kOneDnn);
  EXPECT_EQ(o.output, "out.txt");
  EXPECT_EQ(o.input, "in.txt");
}

TEST(OptArgs, BadFlagsAreUsageErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"opt", "--passes=fuse-vertical"},
           {"opt", "--pass"},
           {"opt", "--pipeline=all"},
           {"opt", "--ir=onnx"},
           {"opt", "--rtol=-1"},
           {"opt", "--int-range=3:3"},
           {"opt", "--conv-layout-oracle=mkl"},
           {"opt", "a.txt", "b.txt"},
           {"opt", "-o"}}) {
    absl::StatusOr<OptOptions> o = ParseOptArgs(args);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << args[1];
    EXPECT_NE(o.status().message().find("kilnc opt --help"), std::string::npos) << o.status();
  }
}

TEST(Opt, RunsALoopPass) {
  ExpectChecks(Opt({"opt", "--pass=fuse-vertical", "--verify-results"}, kLoop), R"(
    CHECK-NOT: buffer %t
    CHECK: kernel k1 over (i0: 4, i1: 8) {
    CHECK-NEXT:   %0 = load %x[i0*8 + i1]
    CHECK-NEXT:   %1 = exp %0
    CHECK-NEXT:   %2 = neg %1
    CHECK-NOT: kernel
  )");
}

TEST(Opt, UnchangedWhenNoPassChangesAnything) {
  absl::StatusOr<OptResult> r =
      RunOpt(Parse({"opt", "--pass=eliminate-dead-buffers", "--pass=demote-index"}), kLoop,
             "in.txt");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "(unchanged)\n");
  EXPECT_FALSE(r->changed);
  // No steps at all: unchanged too.
  EXPECT_EQ(Opt({"opt"}, kLoop), "(unchanged)\n");
}

TEST(Opt, RunsGraphPassesThenLowersForLoopPasses) {
  ExpectChecks(Opt({"opt", "--pass=eliminate-identity"}, kGraph), R"(
    CHECK: graph g(%x: f32[3,5])
    CHECK-NOT: Identity
    CHECK: %e = Exp(%x)
  )");
  ExpectChecks(Opt({"opt", "--pass=eliminate-identity", "--lower", "--verify-results"}, kGraph),
               R"(
    CHECK: buffer %x: f32[3,5] input
    CHECK: kernel
  )");
  // A loop pass lowers the graph first; the result computes the graph's.
  ExpectChecks(Opt({"opt", "--pass=fuse-vertical", "--pass=fuse-horizontal",
                    "--pass=fuse-vertical", "--pass=eliminate-dead-buffers",
                    "--verify-results"},
                   kGraph),
               R"(
    CHECK: kernel {{.*}} over (i0: 3, i1: 5) reduce (r0: 5)
    CHECK: reduce sum
    CHECK-NOT: kernel
  )");
}

TEST(Opt, PipelinesRunEveryPassInOrder) {
  ExpectChecks(Opt({"opt", "--pipeline=graph", "--pipeline=loop", "--verify-results"}, kGraph),
               R"(
    CHECK: buffer %x: f32[3,5] input
    CHECK-NEXT: buffer %y: f32[3,5] output
    CHECK-NEXT: kernel {{.*}} reduce (r0: 5)
    CHECK-NOT: kernel
  )");
  EXPECT_EQ(Opt({"opt", "--pipeline=loop"}, "buffer %x: f32[2] input\n"), "(unchanged)\n");
}

TEST(Opt, IrFlagOverridesTheFirstKeyword) {
  absl::StatusOr<OptResult> r = RunOpt(Parse({"opt", "--ir=graph"}), kLoop, "in.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Opt, UnknownPassListsEveryPass) {
  absl::StatusOr<OptResult> r = RunOpt(Parse({"opt", "--pass=fuse-everything"}), kLoop, "in.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(r.status().message());
  EXPECT_NE(m.find("unknown pass 'fuse-everything'"), std::string::npos) << m;
  EXPECT_NE(m.find("graph passes: compute-f16-in-f32, eliminate-dead-code,"), std::string::npos) << m;
  EXPECT_NE(m.find("loop passes: demote-index,"), std::string::npos) << m;
}

TEST(Opt, ParseErrorsNameTheFileAndLine) {
  absl::StatusOr<OptResult> r =
      RunOpt(Parse({"opt", "--pass=fuse-vertical"}), "buffer %x: f32[4] input\nkernel k0 {\n",
             "bad.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("bad.txt:2:", 0), 0u) << r.status();
  r = RunOpt(Parse({"opt"}), "graph g(%x: f32[2]) -> (%y) {\n  %y = Relu(%z)\n}\n", "bad.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("bad.txt:2:", 0), 0u) << r.status();
}

TEST(Opt, GraphPassOnLoopIrIsAnError) {
  absl::StatusOr<OptResult> r = RunOpt(Parse({"opt", "--pass=fold-batch-norm"}), kLoop, "in.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("graph pass fold-batch-norm cannot run on loop IR"),
            std::string::npos)
      << r.status();
  r = RunOpt(Parse({"opt", "--lower", "--pass=eliminate-identity"}), kGraph, "in.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// Loop text's constant buffers carry no data: they are bound to seeded data,
// and the passes see them as constants (fuse-vertical keeps them).
TEST(Opt, ConstantBuffersGetSeededData) {
  ExpectChecks(Opt({"opt", "--pass=fuse-vertical", "--verify-results"}, R"(
buffer %x: f32[4] input
buffer %w: f32[4] constant
buffer %t: f32[4] intermediate
buffer %y: f32[4] output
kernel k0 over (i0: 4) {
  %0 = load %x[i0]
  %1 = load %w[i0]
  %2 = mul %0, %1
  store %t[i0], %2
}
kernel k1 over (i0: 4) {
  %0 = load %t[i0]
  %1 = exp %0
  store %y[i0], %1
}
)"),
               R"(
    CHECK: buffer %w: f32[4] constant
    CHECK: kernel k1
    CHECK-NEXT: load %x[i0]
    CHECK-NEXT: load %w[i0]
  )");
}

// With oneDNN as the oracle, the activation between two convs is blocked;
// the blocked program cannot be checked on the interpreters.
TEST(Opt, PropagateLayoutAsksOneDnnWhenTold) {
  constexpr char kConvs[] = R"(
graph g(%x: f32[1,16,6,6]) -> (%y) opset 17 {
  %w1 = constant f32[16,16,1,1] splat(0.5)
  %w2 = constant f32[16,16,1,1] splat(0.25)
  %c = Conv(%x, %w1) : f32[1,16,6,6]
  %r = Relu(%c) : f32[1,16,6,6]
  %y = Conv(%r, %w2) : f32[1,16,6,6]
}
)";
  EXPECT_EQ(Opt({"opt", "--lower"}, kConvs),
            Opt({"opt", "--lower", "--pass=propagate-layout"}, kConvs));
  ExpectChecks(Opt({"opt", "--pass=propagate-layout", "--conv-layout-oracle=onednn"}, kConvs),
               R"(
    CHECK: buffer %r: f32[1,{{[0-9]+}},6,6,{{8|16}}] intermediate
    CHECK: call "onnx.Conv"(%x, %w1)
    CHECK-SAME: kiln_channel_block=
  )");
  absl::StatusOr<OptResult> r =
      RunOpt(Parse({"opt", "--pass=propagate-layout", "--conv-layout-oracle=onednn",
                    "--verify-results"}),
             kConvs, "in.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
}

// ------------------------------------------------------------- test files

// Three cases: the second runs the first's RUN line, the third has two RUN
// lines, one checking the LOWERED: lines.
constexpr char kTestFile[] = R"(# RUN: --pass=fuse-vertical --verify-results
# exp into neg.
# CHECK: kernel k1
# CHECK-NEXT: load %x[i0]
# CHECK-NEXT: exp
buffer %x: f32[8] input
buffer %t: f32[8] intermediate
buffer %y: f32[8] output
kernel k0 over (i0: 8) {
  %0 = load %x[i0]
  %1 = exp %0
  store %t[i0], %1
}
kernel k1 over (i0: 8) {
  %0 = load %t[i0]
  %1 = neg %0
  store %y[i0], %1
}
# -----
# A graph output stays.
# CHECK: (unchanged)
buffer %x: f32[8] input
buffer %t: f32[8] output
kernel k0 over (i0: 8) {
  %0 = load %x[i0]
  store %t[i0], %0
}
// -----
// RUN: --pipeline=loop --verify-results
// RUN: --lower --check-prefix=LOWERED
// Exp then Neg: two kernels lowered, one after the pipeline.
// LOWERED: kernel
// LOWERED: kernel
// LOWERED-NOT: kernel
// CHECK: kernel
// CHECK-NOT: kernel
graph g(%x: f32[8]) -> (%y) opset 18 {
  %e = Exp(%x) : f32[8]
  %y = Neg(%e) : f32[8]
}
)";

TEST(OptTestFile, RunsEveryCase) {
  absl::StatusOr<int> cases = RunOptTestFile(kTestFile, "t.txt");
  ASSERT_TRUE(cases.ok()) << cases.status();
  EXPECT_EQ(*cases, 3);
}

TEST(OptTestFile, ReportsEachFailingCaseWithItsLine) {
  std::string text = kTestFile;
  // Case 2 (line 20) now expects a change; case 3 (line 29) a third kernel.
  text.replace(text.find("# CHECK: (unchanged)"), 20, "# CHECK: kernel k1  ");
  text.replace(text.find("// LOWERED-NOT: kernel"), 22, "// LOWERED: kernel    ");
  absl::StatusOr<int> cases = RunOptTestFile(text, "t.txt");
  EXPECT_EQ(cases.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string m(cases.status().message());
  EXPECT_EQ(m.find("t.txt:1:"), std::string::npos) << m;
  ExpectChecks(m, R"(
    CHECK: t.txt:20: case 'A graph output stays.' failed
    CHECK-NEXT: RUN: --pass=fuse-vertical --verify-results
    CHECK-NEXT: check line 21 (kernel k1): no match
    CHECK: --- kilnc opt output ---
    CHECK-NEXT: (unchanged)
    CHECK: t.txt:29: case 'Exp then Neg: two kernels lowered, one after the pipeline.' failed
    CHECK-NEXT: RUN: --lower --check-prefix=LOWERED
    CHECK-NEXT: check line 34 (kernel): no match
  )");
}

TEST(OptTestFile, ErrorsOfOptNameTheFileLine) {
  absl::StatusOr<int> cases = RunOptTestFile(
      "# RUN: --pass=fuse-vertical\n# -----\n# CHECK: kernel\nbuffer %x: f32[8] input\n"
      "kernel k0 over (i0: 8) {\n  %0 = frobnicate\n}\n",
      "t.txt");
  EXPECT_EQ(cases.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(cases.status().message().find("t.txt:6:"), std::string::npos) << cases.status();
}

TEST(OptTestFile, MalformedFiles) {
  EXPECT_EQ(RunOptTestFile("# just a comment\n", "t.txt").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOptTestFile("# CHECK: x\nbuffer %x: f32[2] input\n", "t.txt").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOptTestFile("# RUN: --pass=demote-index\n# CHECK: x\n# -----\n"
                           "# CHECK: (unchanged)\nbuffer %x: f32[2] input\n",
                           "t.txt")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // RUN lines name no file, and take only opt's flags.
  for (const char* run : {"--pass=demote-index in.txt", "-o out.txt", "--passes=x"}) {
    absl::StatusOr<int> cases = RunOptTestFile(
        absl::StrCat("# RUN: ", run, "\n# CHECK: (unchanged)\nbuffer %x: f32[2] input\n"),
        "t.txt");
    EXPECT_EQ(cases.status().code(), absl::StatusCode::kFailedPrecondition) << run;
  }
}

// ------------------------------------------------------------- the binary

std::string TmpPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp ? tmp : "/tmp", "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Result {
  int exit_code = -1;
  std::string out, err;
};

Result Kilnc(const std::string& args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  const std::string kilnc =
      absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kiln", "/tools/kilnc");
  const std::string err_file = TmpPath("kilnc_opt_stderr.txt");
  Result r;
  FILE* p = popen(absl::StrCat(kilnc, " ", args, " 2>", err_file).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.err = ReadFile(err_file);
  return r;
}

TEST(KilncOpt, SubcommandEndToEnd) {
  const std::string in = TmpPath("in.txt");
  std::ofstream(in) << kLoop;
  Result r = Kilnc("opt --pass=fuse-vertical " + in);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectChecks(r.out, "CHECK: kernel k1\nCHECK: exp\nCHECK-NOT: kernel");

  const std::string out = TmpPath("out.txt");
  r = Kilnc(absl::StrCat("opt --pass=fuse-vertical -o ", out, " ", in));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  ExpectChecks(ReadFile(out), "CHECK: kernel k1\nCHECK: exp\nCHECK-NOT: kernel");

  r = Kilnc("opt --pass=fuse-everything " + in);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("kilnc opt: unknown pass 'fuse-everything'; graph passes: "),
            std::string::npos)
      << r.err;

  r = Kilnc("opt --pass=fuse-vertical " + TmpPath("missing.txt"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r.err;

  r = Kilnc("opt --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("usage: kilnc opt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Loop passes: demote-index, eliminate-dead-buffers"), std::string::npos)
      << r.out;

  r = Kilnc("--help");
  EXPECT_NE(r.out.find("opt FILE"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kiln::tools
