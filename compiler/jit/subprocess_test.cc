// Tests for RunProcess: argv reaches the program verbatim (no shell), output
// and exit status are captured, timeouts kill, missing programs are errors.
#include "compiler/jit/subprocess.h"

#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::jit {
namespace {

using ::testing::HasSubstr;

TEST(RunProcess, PassesArgumentsVerbatimWithoutAShell) {
  absl::StatusOr<ProcessResult> r =
      RunProcess({"printf", "[%s][%s]", "a b; echo injected", "$(id) `id` *"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text, "[a b; echo injected][$(id) `id` *]");
}

TEST(RunProcess, CapturesStreamsAndExitCode) {
  absl::StatusOr<ProcessResult> r = RunProcess({"sh", "-c", "echo out; echo err >&2; exit 7"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");

  ProcessOptions merged;
  merged.merge_stderr = true;
  r = RunProcess({"sh", "-c", "echo out; echo err >&2"}, merged);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "out\nerr\n");
  EXPECT_EQ(r->stderr_text, "");
}

TEST(RunProcess, LargeOutputOnBothStreamsDoesNotDeadlock) {
  absl::StatusOr<ProcessResult> r = RunProcess(
      {"sh", "-c", "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text.size(), 300000u);
  EXPECT_EQ(r->stderr_text.size(), 300000u);

  ProcessOptions capped;
  capped.max_output_bytes = 1000;
  r = RunProcess({"sh", "-c", "head -c 5000 /dev/zero"}, capped);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text.size(), 1000u);
}

TEST(RunProcess, RunsInTheWorkingDirectory) {
  ProcessOptions opts;
  opts.working_dir = "/usr";
  absl::StatusOr<ProcessResult> r = RunProcess({"pwd"}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "/usr\n");
}

TEST(RunProcess, TimeoutKillsTheProcessGroup) {
  ProcessOptions opts;
  opts.timeout = absl::Milliseconds(200);
  const absl::Time start = absl::Now();
  absl::StatusOr<ProcessResult> r = RunProcess({"sh", "-c", "sleep 30 & sleep 30"}, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + 9);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(RunProcess, MissingProgramIsAnError) {
  absl::StatusOr<ProcessResult> r = RunProcess({"kiln-no-such-program-xyz"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("kiln-no-such-program-xyz"));
  EXPECT_EQ(RunProcess({"/nonexistent/prog"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(RunProcess({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FindProgram, SearchesPath) {
  absl::StatusOr<std::string> sh = FindProgram("sh");
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_EQ((*sh)[0], '/');
  EXPECT_THAT(*sh, testing::EndsWith("/sh"));
}

}  // namespace
}  // namespace kiln::jit
