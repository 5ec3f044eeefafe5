// File: testing/conformance/runner.h — runs ONNX's own backend test data
// (Debian's libonnx-testdata: model.onnx + test_data_set_N/{input,output}_K.pb)
// through an executor (the reference interpreter, later the compiler) and
// classifies every case as pass, fail or unsupported, with the reason.
//
//   std::vector<Case> cases = DiscoverCases("/usr/share/libonnx-testdata/data");
//   for (const Case& c : cases) results.push_back(RunCase(c, ReferenceExecutor()));
//   std::cout << FormatReport(results);
#ifndef KILN_TESTING_CONFORMANCE_RUNNER_H_
#define KILN_TESTING_CONFORMANCE_RUNNER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/graph.h"
#include "interp/compare.h"

namespace kiln::conformance {

inline constexpr char kDefaultDataRoot[] = "/usr/share/libonnx-testdata/data";
// The categories that ship their models (data/real only has download URLs).
inline constexpr const char* kCategories[] = {"node", "pytorch-converted",
                                              "pytorch-operator", "simple"};

struct Case {
  std::string category;  // "node", "pytorch-converted", ...
  std::string name;      // "test_abs"
  std::string dir;       // folder holding model.onnx
  std::string id() const { return category + "/" + name; }
};

enum class Outcome { kPass, kFail, kUnsupported };
const char* OutcomeName(Outcome o);

struct CaseResult {
  Case test_case;
  Outcome outcome = Outcome::kFail;
  std::string reason;            // why it failed / is unsupported
  std::vector<std::string> ops;  // distinct ops of the model (sorted)
  double seconds = 0;
};

// Runs a graph on inputs; the reference interpreter or a compiled model.
using Executor = std::function<absl::StatusOr<std::vector<ir::Tensor>>(
    const ir::Graph&, absl::Span<const ir::Tensor>)>;
// The reference interpreter as an Executor.
Executor ReferenceExecutor();

// Every case under root/<category>/ for the categories above, sorted by id.
// Case ids containing `filter` only (empty: all).
std::vector<Case> DiscoverCases(const std::string& root,
                                const std::string& filter = "");

// Unimplemented statuses (unsupported dtype, op or feature) make a case
// unsupported; any other error or mismatch makes it fail.
CaseResult RunCase(const Case& test_case, const Executor& executor,
                   const interp::Tolerance& tol = {});

// Per-category and per-op tables, then the failing and unsupported cases;
// the last line is "N passed, N failed, N skipped" where skipped counts
// unsupported cases.
std::string FormatReport(absl::Span<const CaseResult> results,
                         bool list_unsupported);

// Known failures: '<category>/<case>  # reason' per line; blank lines and
// lines starting with '#' are ignored. id -> reason.
absl::StatusOr<std::map<std::string, std::string>> ReadExpectedFailures(
    const std::string& path);

// What is wrong with `results` given the known failures: a failure not
// listed, a listed case that passes (the list must stay true), a listed case
// that does not exist (only when `complete`: every case was run), fewer than
// `floor` passes. Empty when all is well.
std::vector<std::string> CheckExpectations(
    absl::Span<const CaseResult> results,
    const std::map<std::string, std::string>& expected, int floor,
    bool complete);

}  // namespace kiln::conformance

#endif  // KILN_TESTING_CONFORMANCE_RUNNER_H_
