// ONNX conformance through generated C++ on the shard's ISA: every case the
// reference interpreter runs goes through kiln's pipeline up to the loop
// passes (compiler/pipeline.h), and its program is run (neon: cross-built,
// under qemu) and judged against ONNX's own outputs. Extern kernels (Conv, Gemm, MatMul, LSTM, ...; oneDNN
// on x86, which has no aarch64 build here) run on the host's reference
// between the program's loop segments (RunLoweredCases), so every loop
// kernel still runs as generated code for the shard's ISA. The in-process
// engine (conformance_main --engine=compiled) covers the ISAs this CPU
// executes; this covers neon.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpp/emitter.h"
#include "backends/cpp/test_util.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "compiler/jit/isa_test_util.h"
#include "compiler/pipeline.h"
#include "interp/compare.h"
#include "testing/conformance/runner.h"
#include "interp/interpreter.h"

namespace kiln::backends::cpp {
namespace {

namespace fs = std::filesystem;

// ONNX's backend-test tolerance (numpy assert_allclose defaults there).
constexpr interp::Tolerance kOnnxTolerance{1e-3, 1e-7, {}};
constexpr size_t kCasesPerBatch = 100;
// Cases that must pass as generated code on every shard: 861 measured on
// neon and on scalar (860 loop-only, 1 with an extern kernel on the host).
constexpr int kPassFloor = 861;

// Known failures, identical on every shard (not ISA bugs); the test fails
// when one of them starts to pass, so the list stays true.
constexpr std::pair<const char*, const char*> kExpectedFailures[] = {
    {"node/test_training_dropout", "training Dropout with ratio > 0 refused at run time (rc 2)"},
    {"node/test_training_dropout_default", "as above"},
    {"node/test_training_dropout_default_mask", "as above"},
    {"node/test_training_dropout_mask", "as above"},
    // The data's, not kiln's: see testing/conformance/compiled_expected_failures.txt.
    {"node/test_cast_FLOAT_to_BFLOAT16",
     "the expected data truncates to bf16; kiln rounds to nearest even (ONNX >= 1.14, ORT)"},
    {"node/test_castlike_FLOAT_to_BFLOAT16", "as above"},
    {"node/test_castlike_FLOAT_to_BFLOAT16_expanded", "as above"},
};

bool IsExpectedFailure(const std::string& id) {
  for (const auto& [known, reason] : kExpectedFailures) {
    if (id == known) return true;
  }
  return false;
}

// One test_data_set_* of a case.
struct DataSet {
  std::string name;
  std::vector<ir::Tensor> inputs;
  std::vector<ir::Tensor> expected;
};

// A case that reached the runnable stage: its lowered program and data.
struct Runnable {
  std::string id;
  std::string extern_ops;  // "onnx.Conv, onnx.Gemm"; empty for loop-only
  ir::loop::LoopModule lowered;
  std::vector<DataSet> sets;
};

// What happened to every discovered case.
struct Tally {
  // Import failed, no reference kernel, or data kiln cannot read.
  std::vector<std::string> reference_skipped;
  std::vector<std::string> refused;            // lowering refused: id + reason
  std::vector<std::string> extern_cases;       // passed, id + extern ops run on the host
  std::vector<std::string> extern_only;        // passed, but no loop kernel ran on the ISA
  std::vector<std::string> errors;             // a kiln or harness failure
  std::vector<std::string> mismatches;         // wrong numbers or a nonzero rc
  std::vector<std::string> expected_failures;  // listed in kExpectedFailures
  std::vector<std::string> unexpected_passes;  // listed, but passed
  std::vector<std::string> passed;
};

std::vector<std::string> NumberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> files;
  for (int k = 0;; ++k) {
    fs::path p = dir / absl::StrCat(prefix, "_", k, ".pb");
    std::error_code ec;
    if (!fs::exists(p, ec)) break;
    files.push_back(p.string());
  }
  return files;
}

// Reads every test_data_set_* of a case; a file's declared dtype is the
// graph's (ONNX stores bf16 data as UINT16, frontend::LoadTensorFile).
absl::StatusOr<std::vector<DataSet>> LoadDataSets(const std::string& case_dir,
                                                  const ir::Graph& graph) {
  auto declared = [&](const std::vector<ir::ValueId>& values, size_t k) {
    return k < values.size() ? graph.value(values[k]).dtype : ir::DType::kInvalid;
  };
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(case_dir, ec)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
      dirs.push_back(e.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) return absl::NotFoundError("no test_data_set_* folder");
  std::vector<DataSet> sets;
  for (const fs::path& dir : dirs) {
    DataSet s{dir.filename().string(), {}, {}};
    for (const std::string& f : NumberedFiles(dir, "input")) {
      KILN_ASSIGN_OR_RETURN(ir::Tensor t,
                            frontend::LoadTensorFile(f, declared(graph.inputs(), s.inputs.size())));
      s.inputs.push_back(std::move(t));
    }
    for (const std::string& f : NumberedFiles(dir, "output")) {
      KILN_ASSIGN_OR_RETURN(
          ir::Tensor t, frontend::LoadTensorFile(f, declared(graph.outputs(), s.expected.size())));
      s.expected.push_back(std::move(t));
    }
    sets.push_back(std::move(s));
  }
  return sets;
}

// The extern ops of a lowered program ("onnx.Conv, onnx.Gemm"); empty when
// it is loop-only.
std::string ExternOps(const ir::loop::LoopProgram& p) {
  std::set<std::string> ops;
  for (const ir::loop::Kernel& k : p.kernels) {
    if (k.kind == ir::loop::Kernel::Kind::kExtern) ops.insert(k.call.op);
  }
  return absl::StrJoin(ops, ", ");
}

// The last pipeline stage that finished (which one failed is the next).
class LastStage final : public compiler::PipelineObserver {
 public:
  absl::Status AfterStage(compiler::Stage stage, absl::Duration,
                          const compiler::CompiledProgram&) override {
    done = stage;
    return absl::OkStatus();
  }
  std::optional<compiler::Stage> done;
};

// Sorts one discovered case into `tally`, or returns it ready to run: its
// program through kiln's pipeline up to the loop passes (compiled mode, no
// reference fallback calls, no conv layout oracle: externs run on the
// host's reference on plain layouts).
std::optional<Runnable> PrepareCase(const conformance::Case& c, Tally* tally) {
  absl::StatusOr<frontend::ImportResult> imported =
      frontend::ImportModelFile(c.dir + "/model.onnx");
  if (!imported.ok()) {
    tally->reference_skipped.push_back(absl::StrCat(c.id(), ": import: ", imported.status().message()));
    return std::nullopt;
  }
  ir::Graph graph = std::move(imported->graph);
  if (std::vector<std::string> missing = interp::UnsupportedOps(graph); !missing.empty()) {
    tally->reference_skipped.push_back(
        absl::StrCat(c.id(), ": no reference kernel for ", absl::StrJoin(missing, ", ")));
    return std::nullopt;
  }
  absl::StatusOr<std::vector<DataSet>> sets = LoadDataSets(c.dir, graph);
  if (!sets.ok()) {
    // Data of a type kiln does not support is skipped, as the conformance
    // runner skips it; anything else is an error.
    (absl::IsUnimplemented(sets.status()) ? tally->reference_skipped : tally->errors)
        .push_back(absl::StrCat(c.id(), ": data: ", sets.status().message()));
    return std::nullopt;
  }
  compiler::PipelineOptions options;
  options.reference_fallback = false;
  options.stop_after = compiler::Stage::kLoopPasses;
  LastStage last;
  absl::StatusOr<compiler::CompiledProgram> compiled =
      compiler::Compile(std::move(graph), compiler::Target{}, options, &last);
  if (!compiled.ok()) {
    const bool lowering = last.done == compiler::Stage::kGraphPasses;
    const bool refusal = lowering && (absl::IsUnimplemented(compiled.status()) ||
                                      absl::IsInvalidArgument(compiled.status()));
    const compiler::Stage failed =
        last.done.has_value() ? static_cast<compiler::Stage>(static_cast<int>(*last.done) + 1)
                              : compiler::Stage::kVerify;
    (refusal ? tally->refused : tally->errors)
        .push_back(absl::StrCat(c.id(), ": ", compiler::StageName(failed), ": ",
                                compiled.status().ToString()));
    return std::nullopt;
  }
  ir::loop::LoopModule* lowered = &compiled->module;
  for (const DataSet& s : *sets) {
    if (s.inputs.size() != lowered->inputs.size() ||
        s.expected.size() != lowered->outputs.size()) {
      tally->errors.push_back(absl::StrCat(
          c.id(), ": ", s.name, " has ", s.inputs.size(), " inputs and ", s.expected.size(),
          " outputs, the program ", lowered->inputs.size(), " and ", lowered->outputs.size()));
      return std::nullopt;
    }
  }
  std::string ops = ExternOps(lowered->program);
  return Runnable{c.id(), std::move(ops), std::move(*lowered), *std::move(sets)};
}

// Judges one data set's run against ONNX's outputs; empty when it passes.
std::string Judge(const DataSet& set, const LoweredResult& result) {
  if (!result.error.empty()) return absl::StrCat(set.name, ": ", result.error);
  if (result.rc != 0) return absl::StrCat(set.name, ": the program returned ", result.rc);
  for (size_t k = 0; k < set.expected.size(); ++k) {
    interp::CompareResult cmp =
        interp::CompareTensors(result.outputs[k], set.expected[k], kOnnxTolerance);
    if (!cmp.ok) return absl::StrCat(set.name, " output ", k, ": ", cmp.message);
  }
  return "";
}

void PrintList(const char* title, const std::vector<std::string>& items) {
  std::printf("%s (%zu):\n", title, items.size());
  for (const std::string& s : items) std::printf("  %s\n", s.c_str());
}

TEST(ConformanceCodegen, CasesMatchOnnxData) {
  KILN_TEST_ISA_OR_SKIP(t);
  const auto start = std::chrono::steady_clock::now();
  // $KILN_CONFORMANCE_FILTER: only case ids containing it (no floor then).
  const char* filter = std::getenv("KILN_CONFORMANCE_FILTER");
  const std::vector<conformance::Case> cases = conformance::DiscoverCases(
      conformance::kDefaultDataRoot, filter != nullptr ? filter : "");
  if (cases.empty()) {
    GTEST_SKIP() << "SKIPPED: no ONNX conformance data under " << conformance::kDefaultDataRoot;
  }
  Tally tally;
  std::vector<Runnable> runnable;
  for (const conformance::Case& c : cases) {
    if (std::optional<Runnable> r = PrepareCase(c, &tally)) runnable.push_back(*std::move(r));
  }

  RunOptions options;
  options.emit.kernels_per_unit = 128;
  options.run_timeout = absl::Minutes(5);
  std::vector<LoweredCase> lowered_cases;
  std::vector<std::pair<size_t, size_t>> origin;  // (runnable, data set)
  for (size_t i = 0; i < runnable.size(); ++i) {
    for (size_t s = 0; s < runnable[i].sets.size(); ++s) {
      lowered_cases.push_back({absl::StrCat(runnable[i].id, " ", runnable[i].sets[s].name),
                               &runnable[i].lowered, runnable[i].sets[s].inputs});
      origin.emplace_back(i, s);
    }
  }
  absl::StatusOr<std::vector<LoweredResult>> results =
      RunLoweredCases(t, lowered_cases, options, kCasesPerBatch);
  ASSERT_TRUE(results.ok()) << results.status();
  std::map<size_t, std::string> failure;  // runnable -> first failing set
  std::vector<int> loop_segments(runnable.size(), 0);
  int max_segments = 0;
  for (size_t j = 0; j < lowered_cases.size(); ++j) {
    const auto [i, s] = origin[j];
    std::string why = Judge(runnable[i].sets[s], (*results)[j]);
    if (!why.empty() && failure.count(i) == 0) failure[i] = std::move(why);
    loop_segments[i] += (*results)[j].loop_segments;
    max_segments = std::max(max_segments, (*results)[j].loop_segments);
  }
  for (size_t i = 0; i < runnable.size(); ++i) {
    auto it = failure.find(i);
    const bool expected = IsExpectedFailure(runnable[i].id);
    const std::string& ops = runnable[i].extern_ops;
    if (it != failure.end()) {
      (expected ? tally.expected_failures : tally.mismatches)
          .push_back(absl::StrCat(runnable[i].id, ops.empty() ? "" : " (extern " + ops + ")",
                                  ": ", it->second));
    } else if (loop_segments[i] == 0) {
      // Nothing ran as generated code: not a pass of this ISA.
      tally.extern_only.push_back(absl::StrCat(runnable[i].id, ": extern ", ops));
    } else {
      tally.passed.push_back(runnable[i].id);
      if (!ops.empty()) tally.extern_cases.push_back(absl::StrCat(runnable[i].id, ": extern ", ops));
      if (expected) tally.unexpected_passes.push_back(runnable[i].id);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  PrintList("passed with extern kernels run on the host's reference", tally.extern_cases);
  PrintList("extern kernels only (no loop kernel ran on this ISA; not counted as passes)",
            tally.extern_only);
  PrintList("refused by lowering (reference fallback calls on every ISA)", tally.refused);
  PrintList("skipped (the reference interpreter cannot run them)", tally.reference_skipped);
  PrintList("errors", tally.errors);
  PrintList("known failures (kExpectedFailures)", tally.expected_failures);
  PrintList("mismatches", tally.mismatches);
  std::printf(
      "conformance on %s%s: %zu cases, %zu pass (%zu with extern kernels on the host), %zu fail "
      "(%zu mismatch, %zu error), %zu known failures, %zu extern only, %zu refused (reference "
      "fallbacks), %zu skipped; up to %d loop segments per program, %.1f s\n",
      t.isa->name.c_str(), t.emulated ? " (emulated)" : "", cases.size(), tally.passed.size(),
      tally.extern_cases.size(), tally.mismatches.size() + tally.errors.size(),
      tally.mismatches.size(), tally.errors.size(), tally.expected_failures.size(),
      tally.extern_only.size(), tally.refused.size(), tally.reference_skipped.size(), max_segments,
      seconds);
  EXPECT_TRUE(tally.mismatches.empty()) << absl::StrJoin(tally.mismatches, "\n");
  EXPECT_TRUE(tally.errors.empty()) << absl::StrJoin(tally.errors, "\n");
  EXPECT_TRUE(tally.unexpected_passes.empty())
      << "listed in kExpectedFailures but passing (remove them): "
      << absl::StrJoin(tally.unexpected_passes, ", ");
  if (filter == nullptr) {
    EXPECT_GE(static_cast<int>(tally.passed.size()), kPassFloor);
  }
}

}  // namespace
}  // namespace kiln::backends::cpp
