// File: testing/conformance/conformance_main.cc — the conformance runner as a
// binary and as a Bazel test. Runs every ONNX backend test case through the
// reference interpreter, prints the per-category and per-op tables, and exits
// non-zero when a case fails that is not listed in --expected_failures, when
// a listed case passes (the list must stay true), or when fewer than --floor
// cases pass.
//
//   bazel run //testing/conformance:conformance_main -- --filter=conv
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "testing/conformance/runner.h"

ABSL_FLAG(std::string, data_root, kiln::conformance::kDefaultDataRoot,
          "Folder holding node/, pytorch-converted/, pytorch-operator/, simple/.");
ABSL_FLAG(std::string, filter, "", "Run only cases whose id contains this.");
ABSL_FLAG(std::string, expected_failures, "",
          "File listing '<category>/<case>  # reason' lines of known failures.");
ABSL_FLAG(int, floor, 0, "Fail when fewer cases than this pass.");
ABSL_FLAG(bool, list_unsupported, false, "List every unsupported case too.");
ABSL_FLAG(bool, verbose, false, "Print each case as it runs.");

namespace kiln::conformance {
namespace {


int Main() {
  const std::string root = absl::GetFlag(FLAGS_data_root);
  std::vector<Case> cases = DiscoverCases(root, absl::GetFlag(FLAGS_filter));
  if (cases.empty()) {
    std::cerr << "no conformance cases under " << root
              << " (is libonnx-testdata installed? run tools/bootstrap.sh)\n";
    return 2;
  }
  std::map<std::string, std::string> expected;
  const std::string expected_path = absl::GetFlag(FLAGS_expected_failures);
  if (!expected_path.empty()) {
    absl::StatusOr<std::map<std::string, std::string>> read =
        conformance::ReadExpectedFailures(expected_path);
    if (!read.ok()) {
      std::cerr << read.status().message() << "\n";
      return 2;
    }
    expected = *std::move(read);
  }

  std::vector<CaseResult> results;
  const Executor executor = ReferenceExecutor();
  for (const Case& c : cases) {
    if (absl::GetFlag(FLAGS_verbose)) std::cerr << c.id() << " ... " << std::flush;
    results.push_back(RunCase(c, executor));
    if (absl::GetFlag(FLAGS_verbose)) {
      std::cerr << OutcomeName(results.back().outcome) << " ("
                << results.back().seconds << " s)\n";
    }
  }
  std::cout << FormatReport(results, absl::GetFlag(FLAGS_list_unsupported));

  const std::vector<std::string> problems = conformance::CheckExpectations(
      results, expected, absl::GetFlag(FLAGS_floor),
      /*complete=*/absl::GetFlag(FLAGS_filter).empty());
  for (const std::string& p : problems) std::cout << "PROBLEM: " << p << "\n";
  if (!expected_path.empty() || absl::GetFlag(FLAGS_floor) > 0) {
    std::cout << (problems.empty() ? "conformance: OK\n" : "conformance: FAILED\n");
  }
  return problems.empty() ? 0 : 1;
}

}  // namespace
}  // namespace kiln::conformance

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs ONNX's backend test data through kiln's reference interpreter.");
  absl::ParseCommandLine(argc, argv);
  return kiln::conformance::Main();
}
