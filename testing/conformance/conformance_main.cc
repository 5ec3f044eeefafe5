// File: testing/conformance/conformance_main.cc — the conformance runner as a
// binary and as a Bazel test. Runs every ONNX backend test case through the
// reference interpreter or kiln's compiler (--engine=compiled|eager, built in
// batches of --batch models per JIT build), prints the per-category and
// per-op tables, and exits
// non-zero when a case fails that is not listed in --expected_failures, when
// a listed case passes (the list must stay true), or when fewer than --floor
// cases pass.
//
//   bazel run //testing/conformance:conformance_main -- --filter=conv
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "frontend/onnx/importer.h"
#include "isa/isa.h"
#include "compiler/compiler.h"
#include "testing/conformance/runner.h"

ABSL_FLAG(std::string, data_root, kiln::conformance::kDefaultDataRoot,
          "Folder holding node/, pytorch-converted/, pytorch-operator/, simple/.");
ABSL_FLAG(std::string, filter, "", "Run only cases whose id contains this.");
ABSL_FLAG(std::string, expected_failures, "",
          "File listing '<category>/<case>  # reason' lines of known failures.");
ABSL_FLAG(int, floor, 0, "Fail when fewer cases than this pass.");
ABSL_FLAG(bool, list_unsupported, false, "List every unsupported case too.");
ABSL_FLAG(bool, verbose, false, "Print each case as it runs.");
ABSL_FLAG(std::string, engine, "reference",
          "reference (the interpreter), compiled or eager (kiln::Compiler modes).");
ABSL_FLAG(std::string, kiln_isa, "",
          "VecISA for the compiled engines (empty: the best this CPU runs). An ISA "
          "this host cannot run makes the run print SKIPPED and exit 0.");
ABSL_FLAG(int, batch, 48, "Models per JIT build in the compiled engines.");
ABSL_FLAG(std::string, cache_dir, "",
          "JIT cache of the compiled engines (empty: $TEST_TMPDIR/kiln_cache under "
          "Bazel, else kiln's default).");

namespace kiln::conformance {
namespace {

// OK when code for `isa` can run in this process; the reason otherwise.
absl::Status CheckIsaRuns(const std::string& name) {
  absl::StatusOr<const isa::VecIsa*> isa = isa::SelectIsa(name);
  if (!isa.ok()) return isa.status();
  if (!(*isa)->emulator.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ISA '", name, "' runs only under ", (*isa)->emulator,
        " here; the compiled engine loads its code into this process"));
  }
  return absl::OkStatus();
}

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
  Executor executor = ReferenceExecutor();
  const std::string engine = absl::GetFlag(FLAGS_engine);
  // Compiled engines: every case's model compiled up front, in batches; the
  // executor then runs the current case's model.
  std::map<std::string, absl::StatusOr<std::unique_ptr<CompiledModel>>> compiled;
  std::string current;
  if (engine != "reference") {
    absl::StatusOr<CompileOptions::Mode> mode = ParseMode(engine);
    if (!mode.ok()) {
      std::cerr << "--engine: " << mode.status().message() << "\n";
      return 2;
    }
    CompileOptions options;
    options.mode = *mode;
    options.isa = absl::GetFlag(FLAGS_kiln_isa);
    options.cache_dir = absl::GetFlag(FLAGS_cache_dir);
    if (options.cache_dir.empty() && std::getenv("TEST_TMPDIR") != nullptr) {
      options.cache_dir = std::string(std::getenv("TEST_TMPDIR")) + "/kiln_cache";
    }
    if (!options.isa.empty() && isa::FindIsa(options.isa) == nullptr) {
      std::cerr << "--kiln_isa: unknown ISA '" << options.isa << "'\n";
      return 2;
    }
    if (absl::Status s = CheckIsaRuns(options.isa); !s.ok()) {
      std::cout << "SKIPPED: " << s.message() << "\n";
      return 0;
    }
    const Compiler compiler(options);
    const int batch = std::max(1, absl::GetFlag(FLAGS_batch));
    for (size_t begin = 0; begin < cases.size(); begin += batch) {
      const size_t end = std::min(cases.size(), begin + batch);
      std::vector<ir::Graph> graphs;
      std::vector<std::string> ids;
      for (size_t c = begin; c < end; ++c) {
        absl::StatusOr<frontend::ImportResult> imported =
            frontend::ImportModelFile(cases[c].dir + "/model.onnx");
        if (!imported.ok()) continue;  // RunCase reports it
        graphs.push_back(std::move(imported->graph));
        ids.push_back(cases[c].id());
      }
      if (absl::GetFlag(FLAGS_verbose)) {
        std::cerr << "compiling cases " << begin << ".." << end << " ...\n";
      }
      std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> models =
          compiler.CompileGraphs(std::move(graphs));
      for (size_t m = 0; m < models.size(); ++m) compiled.emplace(ids[m], std::move(models[m]));
    }
    executor = [&](const ir::Graph&, absl::Span<const ir::Tensor> inputs)
        -> absl::StatusOr<std::vector<ir::Tensor>> {
      auto it = compiled.find(current);
      if (it == compiled.end()) return absl::InternalError("the case was not compiled");
      if (!it->second.ok()) {
        // What the reference runs, the compiler must compile: a refusal is
        // a failure here, never "unsupported".
        return absl::InternalError(
            absl::StrCat("compile: ", it->second.status().ToString()));
      }
      return (*it->second)->Run(inputs);
    };
  }
  for (const Case& c : cases) {
    current = c.id();
    if (absl::GetFlag(FLAGS_verbose)) std::cerr << c.id() << " ... " << std::flush;
    results.push_back(RunCase(c, executor));
    if (absl::GetFlag(FLAGS_verbose)) {
      std::cerr << OutcomeName(results.back().outcome) << " ("
                << results.back().seconds << " s)\n";
    }
  }
  std::cout << FormatReport(results, absl::GetFlag(FLAGS_list_unsupported));
  if (engine != "reference") {
    // Cases that need the reference interpreter for some node lowering
    // could not compile (CompileOptions::reference_fallback).
    int passed = 0, with_fallback = 0;
    std::map<std::string, int> fallback_ops;
    for (const CaseResult& r : results) {
      if (r.outcome != Outcome::kPass) continue;
      ++passed;
      auto it = compiled.find(r.test_case.id());
      if (it == compiled.end() || !it->second.ok()) continue;
      const CompileReport& report = (*it->second)->report();
      if (report.fallback_calls == 0) continue;
      ++with_fallback;
      for (const KernelReport& k : report.kernels) {
        if (absl::StartsWith(k.call, "kiln.Reference(")) ++fallback_ops[k.call];
      }
    }
    std::cout << "reference fallback calls: " << with_fallback << " of " << passed
              << " passing cases use at least one\n";
    for (const auto& [call, n] : fallback_ops) std::cout << "  " << call << " x" << n << "\n";
  }

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
      "Runs ONNX's backend test data through kiln's reference interpreter or compiler.");
  absl::ParseCommandLine(argc, argv);
  return kiln::conformance::Main();
}
