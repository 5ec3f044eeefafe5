// Tests for the conformance runner's expectation checks.
#include "testing/conformance/runner.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kiln::conformance {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CaseResult Result(const std::string& name, Outcome o) {
  CaseResult r;
  r.test_case = Case{"node", name, ""};
  r.outcome = o;
  r.reason = "because";
  return r;
}

TEST(ReadExpectedFailures, ParsesIdsAndReasons) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/expected.txt";
  std::ofstream(path) << "# header\n\nnode/test_a   # too slow\nnode/test_b\n";
  absl::StatusOr<std::map<std::string, std::string>> e = ReadExpectedFailures(path);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->size(), 2u);
  EXPECT_EQ(e->at("node/test_a"), "too slow");
  EXPECT_EQ(e->at("node/test_b"), "");
  EXPECT_FALSE(ReadExpectedFailures("/nonexistent/file").ok());
}

TEST(CheckExpectations, EachRule) {
  std::vector<CaseResult> results = {
      Result("test_pass", Outcome::kPass),
      Result("test_listed_fail", Outcome::kFail),
      Result("test_new_fail", Outcome::kFail),
      Result("test_listed_pass", Outcome::kPass),
      Result("test_unsupported", Outcome::kUnsupported),
  };
  std::map<std::string, std::string> expected = {
      {"node/test_listed_fail", "known"},
      {"node/test_listed_pass", "known"},
      {"node/test_gone", "known"},
  };
  std::vector<std::string> p = CheckExpectations(results, expected, 3, true);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_THAT(p[0], HasSubstr("node/test_new_fail fails unexpectedly: because"));
  EXPECT_THAT(p[1], HasSubstr("node/test_listed_pass passes now"));
  EXPECT_THAT(p[2], HasSubstr("node/test_gone is listed"));
  EXPECT_THAT(p[3], HasSubstr("2 cases pass, below the floor of 3"));
  // A filtered run does not know about cases it did not run.
  EXPECT_EQ(CheckExpectations(results, expected, 0, false).size(), 2u);
  // All well.
  EXPECT_THAT(CheckExpectations({Result("test_pass", Outcome::kPass)}, {}, 1, true),
              ElementsAre());
}

}  // namespace
}  // namespace kiln::conformance
