// File: lowering/lower_conformance_main.cc — ONNX's backend test cases run
// through kiln's pipeline up to lowering (compiler::Compile: graph passes,
// lowering, no reference fallback calls) and the loop interpreter, externs
// on the reference, reported as pass / fail / unsupported per case,
// category and op.
//
//   bazel run //lowering:lower_conformance_main -- --filter=node/test_softmax
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
#include "compiler/pipeline.h"
#include "interp/loop_module.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "testing/conformance/runner.h"

ABSL_FLAG(std::string, data_root, kiln::conformance::kDefaultDataRoot,
          "Folder holding node/, pytorch-converted/, pytorch-operator/, simple/.");
ABSL_FLAG(std::string, filter, "", "Run only cases whose id contains this.");
ABSL_FLAG(std::string, expected_failures, "",
          "File listing '<category>/<case>  # reason' lines of known failures.");
ABSL_FLAG(int, floor, 0, "Fail when fewer cases than this pass.");
ABSL_FLAG(bool, no_externs, false,
          "Count cases that need an extern kernel as unsupported (measures "
          "what the loop IR computes by itself).");
ABSL_FLAG(bool, list_unsupported, false, "List every unsupported case too.");
ABSL_FLAG(bool, verbose, false, "Print each case as it runs.");

namespace kiln::lowering {
namespace {

using conformance::CaseResult;
using conformance::Outcome;

conformance::Executor LoweringExecutor(bool no_externs) {
  return [no_externs](const ir::Graph& graph, absl::Span<const ir::Tensor> inputs)
             -> absl::StatusOr<std::vector<ir::Tensor>> {
    compiler::PipelineOptions to_loop_ir;
    to_loop_ir.reference_fallback = false;
    to_loop_ir.stop_after = compiler::Stage::kLowering;
    KILN_ASSIGN_OR_RETURN(compiler::CompiledProgram compiled,
                          compiler::Compile(graph, compiler::Target{}, to_loop_ir, nullptr));
    const ir::loop::LoopModule& lp = compiled.module;
    if (no_externs) {
      for (const ir::loop::Kernel& k : lp.program.kernels) {
        if (k.kind == ir::loop::Kernel::Kind::kExtern) {
          return absl::UnimplementedError(
              absl::StrCat("extern kernel ", k.call.op, " (--no_externs)"));
        }
      }
    }
    return interp::RunLoopModule(lp, inputs);
  };
}


int Main() {
  const std::string root = absl::GetFlag(FLAGS_data_root);
  std::vector<conformance::Case> cases =
      conformance::DiscoverCases(root, absl::GetFlag(FLAGS_filter));
  if (cases.empty()) {
    std::cerr << "no conformance cases under " << root << "\n";
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
  const conformance::Executor executor =
      LoweringExecutor(absl::GetFlag(FLAGS_no_externs));
  std::vector<CaseResult> results;
  for (const conformance::Case& c : cases) {
    if (absl::GetFlag(FLAGS_verbose)) std::cerr << c.id() << " ... " << std::flush;
    results.push_back(conformance::RunCase(c, executor));
    if (absl::GetFlag(FLAGS_verbose)) {
      std::cerr << conformance::OutcomeName(results.back().outcome) << "\n";
    }
  }
  std::cout << conformance::FormatReport(results,
                                         absl::GetFlag(FLAGS_list_unsupported));
  const std::vector<std::string> problems = conformance::CheckExpectations(
      results, expected, absl::GetFlag(FLAGS_floor),
      /*complete=*/absl::GetFlag(FLAGS_filter).empty());
  const bool checking = !expected_path.empty() || absl::GetFlag(FLAGS_floor) > 0;
  if (checking) {
    for (const std::string& p : problems) std::cout << "PROBLEM: " << p << "\n";
    std::cout << (problems.empty() ? "lowering conformance: OK\n"
                                   : "lowering conformance: FAILED\n");
    return problems.empty() ? 0 : 1;
  }
  return 0;
}

}  // namespace
}  // namespace kiln::lowering

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs ONNX's backend test data through kiln's pipeline up to lowering + the loop "
      "interpreter.");
  absl::ParseCommandLine(argc, argv);
  return kiln::lowering::Main();
}
