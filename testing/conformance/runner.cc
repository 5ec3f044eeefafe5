// The conformance runner: discovery, per-case execution and the report.
#include "testing/conformance/runner.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "frontend/onnx/importer.h"
#include "ir/status_macros.h"
#include "interp/interpreter.h"

namespace kiln::conformance {
namespace {

namespace fs = std::filesystem;

// input_0.pb, input_1.pb, ... in numeric order.
std::vector<std::string> NumberedFiles(const fs::path& dir,
                                       const std::string& prefix) {
  std::vector<std::string> files;
  for (int k = 0;; ++k) {
    fs::path p = dir / absl::StrCat(prefix, "_", k, ".pb");
    std::error_code ec;
    if (!fs::exists(p, ec)) break;
    files.push_back(p.string());
  }
  return files;
}

// The dtype the model declares for the k-th of `values` (its inputs or
// outputs), which says how to read a data file (frontend::LoadTensorFile);
// kInvalid past the end reads the file as it is.
ir::DType DeclaredDType(const ir::Graph& g, const std::vector<ir::ValueId>& values,
                        size_t k) {
  return k < values.size() ? g.value(values[k]).dtype : ir::DType::kInvalid;
}

void CollectOps(const ir::Graph& g, std::set<std::string>* ops) {
  for (const ir::Node& n : g.nodes()) {
    ops->insert(n.domain.empty() ? n.op : absl::StrCat(n.domain, ".", n.op));
    for (const auto& [key, attr] : n.attrs) {
      if (auto* sub = std::get_if<std::shared_ptr<const ir::Graph>>(&attr)) {
        CollectOps(**sub, ops);
      }
    }
  }
}

CaseResult Classify(CaseResult r, const absl::Status& s,
                    absl::string_view stage) {
  r.outcome = s.code() == absl::StatusCode::kUnimplemented ? Outcome::kUnsupported
                                                           : Outcome::kFail;
  r.reason = absl::StrCat(stage, ": ", s.message());
  return r;
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "FAIL";
    case Outcome::kUnsupported: return "unsupported";
  }
  return "?";
}

Executor ReferenceExecutor() {
  return [](const ir::Graph& g, absl::Span<const ir::Tensor> inputs) {
    return interp::Run(g, inputs);
  };
}

std::vector<Case> DiscoverCases(const std::string& root,
                                const std::string& filter) {
  std::vector<Case> cases;
  for (const char* category : kCategories) {
    fs::path dir = fs::path(root) / category;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (!fs::exists(e.path() / "model.onnx", ec)) continue;
      Case c{category, e.path().filename().string(), e.path().string()};
      if (filter.empty() || absl::StrContains(c.id(), filter)) {
        cases.push_back(std::move(c));
      }
    }
  }
  std::sort(cases.begin(), cases.end(),
            [](const Case& a, const Case& b) { return a.id() < b.id(); });
  return cases;
}

CaseResult RunCase(const Case& test_case, const Executor& executor,
                   const interp::Tolerance& tol) {
  const auto start = std::chrono::steady_clock::now();
  CaseResult r;
  r.test_case = test_case;
  auto finish = [&](CaseResult res) {
    res.seconds = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    return res;
  };

  absl::StatusOr<frontend::ImportResult> imported = frontend::ImportModelFile(
      (fs::path(test_case.dir) / "model.onnx").string());
  if (!imported.ok()) return finish(Classify(r, imported.status(), "import"));
  const ir::Graph& graph = imported->graph;
  std::set<std::string> ops;
  CollectOps(graph, &ops);
  r.ops.assign(ops.begin(), ops.end());

  std::vector<std::string> missing = interp::UnsupportedOps(graph);
  if (!missing.empty()) {
    r.outcome = Outcome::kUnsupported;
    r.reason = absl::StrCat("no kernel for ", absl::StrJoin(missing, ", "));
    return finish(r);
  }

  std::vector<fs::path> sets;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(test_case.dir, ec)) {
    if (e.is_directory() &&
        absl::StartsWith(e.path().filename().string(), "test_data_set_")) {
      sets.push_back(e.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    r.outcome = Outcome::kFail;
    r.reason = "no test_data_set_* folder";
    return finish(r);
  }

  for (const fs::path& set : sets) {
    const std::string set_name = set.filename().string();
    std::vector<ir::Tensor> inputs;
    for (const std::string& f : NumberedFiles(set, "input")) {
      absl::StatusOr<ir::Tensor> t =
          frontend::LoadTensorFile(f, DeclaredDType(graph, graph.inputs(), inputs.size()));
      if (!t.ok()) return finish(Classify(r, t.status(), set_name + " input"));
      inputs.push_back(*std::move(t));
    }
    std::vector<ir::Tensor> expected;
    for (const std::string& f : NumberedFiles(set, "output")) {
      absl::StatusOr<ir::Tensor> t =
          frontend::LoadTensorFile(f, DeclaredDType(graph, graph.outputs(), expected.size()));
      if (!t.ok()) return finish(Classify(r, t.status(), set_name + " output"));
      expected.push_back(*std::move(t));
    }
    absl::StatusOr<std::vector<ir::Tensor>> actual = executor(graph, inputs);
    if (!actual.ok()) return finish(Classify(r, actual.status(), set_name + " run"));
    if (actual->size() != expected.size()) {
      r.outcome = Outcome::kFail;
      r.reason = absl::StrCat(set_name, ": ", actual->size(), " outputs, expected ",
                              expected.size());
      return finish(r);
    }
    for (size_t k = 0; k < expected.size(); ++k) {
      interp::CompareResult c = interp::CompareTensors((*actual)[k], expected[k], tol);
      if (!c.ok) {
        r.outcome = Outcome::kFail;
        r.reason = absl::StrCat(set_name, " output ", k, " ('",
                                graph.value(graph.outputs()[k]).name,
                                "'): ", c.message);
        return finish(r);
      }
    }
  }
  r.outcome = Outcome::kPass;
  return finish(r);
}

std::string FormatReport(absl::Span<const CaseResult> results,
                         bool list_unsupported) {
  struct Counts {
    int pass = 0, fail = 0, unsupported = 0;
    void Add(Outcome o) {
      (o == Outcome::kPass ? pass : o == Outcome::kFail ? fail : unsupported)++;
    }
  };
  std::map<std::string, Counts> by_category, by_op;
  Counts total;
  for (const CaseResult& r : results) {
    total.Add(r.outcome);
    by_category[r.test_case.category].Add(r.outcome);
    for (const std::string& op : r.ops) by_op[op].Add(r.outcome);
  }
  std::string out;
  auto table = [&](const char* title, const std::map<std::string, Counts>& m) {
    absl::StrAppendFormat(&out, "%-32s %6s %6s %12s\n", title, "pass", "fail",
                          "unsupported");
    for (const auto& [key, c] : m) {
      absl::StrAppendFormat(&out, "%-32s %6d %6d %12d\n", key, c.pass, c.fail,
                            c.unsupported);
    }
    out += "\n";
  };
  table("category", by_category);
  table("op (cases using it)", by_op);
  for (const CaseResult& r : results) {
    if (r.outcome == Outcome::kFail ||
        (list_unsupported && r.outcome == Outcome::kUnsupported)) {
      absl::StrAppend(&out, OutcomeName(r.outcome), " ", r.test_case.id(),
                      ": ", r.reason, "\n");
    }
  }
  absl::StrAppend(&out, "\n", total.pass, " passed, ", total.fail, " failed, ",
                  total.unsupported, " skipped\n");
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ReadExpectedFailures(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read expected-failures file ", path));
  }
  std::map<std::string, std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#') continue;
    std::pair<std::string, std::string> parts =
        absl::StrSplit(l, absl::MaxSplits('#', 1));
    out[std::string(absl::StripAsciiWhitespace(parts.first))] =
        std::string(absl::StripAsciiWhitespace(parts.second));
  }
  return out;
}

std::vector<std::string> CheckExpectations(
    absl::Span<const CaseResult> results,
    const std::map<std::string, std::string>& expected, int floor,
    bool complete) {
  int passed = 0;
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const CaseResult& r : results) {
    const std::string id = r.test_case.id();
    seen.insert(id);
    const bool listed = expected.count(id) > 0;
    if (r.outcome == Outcome::kPass) {
      ++passed;
      if (listed) {
        problems.push_back(
            absl::StrCat(id, " passes now: remove it from the expected failures"));
      }
    } else if (r.outcome == Outcome::kFail && !listed) {
      problems.push_back(absl::StrCat(id, " fails unexpectedly: ", r.reason));
    }
  }
  if (complete) {
    for (const auto& [id, reason] : expected) {
      if (!seen.count(id)) {
        problems.push_back(
            absl::StrCat(id, " is listed as an expected failure but does not exist"));
      }
    }
  }
  if (passed < floor) {
    problems.push_back(
        absl::StrCat(passed, " cases pass, below the floor of ", floor));
  }
  return problems;
}

}  // namespace kiln::conformance
