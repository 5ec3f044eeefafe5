// Control flow in AOT libraries (aot/BUILD.bazel): models with Ifs (nested),
// a Loop with a run-time trip count and condition, a Scan, and ONNX's
// conformance If/Loop/Scan cases, compiled ahead of time, against kiln's
// reference interpreter on the ONNX model (and ONNX's expected outputs for
// the conformance cases), on every ISA this CPU runs. Their Ifs, Loops and
// Scans run compiled subgraphs, as in the JIT.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "aot/conf_if_aot.h"
#include "aot/conf_loop11_aot.h"
#include "aot/conf_range_expanded_aot.h"
#include "aot/conf_scan9_sum_aot.h"
#include "aot/if_nested_aot.h"
#include "aot/loop_state_aot.h"
#include "aot/scan_state_aot.h"
#include "compiler/compiler.h"
#include "frontend/onnx/importer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "isa/isa.h"
#include "runtime/aot.h"
#include "runtime/compiled_model.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kiln", "/", path);
}

// kilnc check's tolerance for whole models.
const interp::Tolerance kTol{1e-3, 1e-5, std::nullopt, /*atol_scaled=*/true};

bool HostRuns(const std::string& name) {
  const isa::VecIsa* isa = isa::FindIsa(name);
  return isa != nullptr && isa->emulator.empty() && isa->host_supports();
}

ir::Tensor Scalar(ir::DType dtype, double v) {
  ir::Tensor t(dtype, {});
  if (dtype == ir::DType::kBool) {
    t.data<bool>()[0] = v != 0;
  } else if (dtype == ir::DType::kI64) {
    t.data<int64_t>()[0] = static_cast<int64_t>(v);
  } else {
    t.data<float>()[0] = static_cast<float>(v);
  }
  return t;
}

ir::Tensor Normal(const ir::Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  ir::Tensor t(ir::DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

void ExpectClose(const std::vector<ir::Tensor>& got, const std::vector<ir::Tensor>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < got.size(); ++o) {
    const interp::CompareResult r = interp::CompareTensors(got[o], want[o], kTol);
    EXPECT_TRUE(r.ok) << what << ", output " << o << ": " << r.message;
  }
}

// The compiled control-flow steps of a report: kernel lines of backend
// `compiled` with call If, Loop or Scan.
int CompiledControlFlow(const CompileReport& r, const std::string& op) {
  int n = 0;
  for (const KernelReport& k : r.kernels) n += k.backend == "compiled" && k.call == op;
  return n;
}

// Runs `artifact` on every ISA it has that this CPU runs, on each input
// set, against the reference interpreter on `model` (and `expected` where
// given); each ISA's model has `compiled` compiled `op` steps and
// `reference_calls` reference calls, as the JIT's has.
void ExpectMatchesReference(const aot::Artifact& artifact, const std::string& model,
                            const std::vector<std::vector<ir::Tensor>>& inputs,
                            const std::string& op, int compiled, int reference_calls,
                            const std::vector<std::vector<ir::Tensor>>& expected = {}) {
  absl::StatusOr<frontend::ImportResult> imported = frontend::ImportModelFile(Runfile(model));
  ASSERT_TRUE(imported.ok()) << imported.status();
  int ran = 0;
  for (int i = 0; i < artifact.num_isas; ++i) {
    const std::string isa = artifact.isas[i].isa;
    if (!HostRuns(isa)) {
      std::cout << "this CPU lacks " << isa << ": not run\n";
      continue;
    }
    CompileOptions options;
    options.isa = isa;
    options.threads = 1;
    absl::StatusOr<std::unique_ptr<CompiledModel>> aot = aot::CreateModel(artifact, options);
    ASSERT_TRUE(aot.ok()) << isa << ": " << aot.status();
    const CompileReport& report = (*aot)->report();
    EXPECT_EQ(report.isa, isa);
    EXPECT_EQ(CompiledControlFlow(report, op), compiled) << isa << "\n" << report.ToText();
    EXPECT_EQ(report.reference_calls, reference_calls) << isa << "\n" << report.ToText();
    for (size_t c = 0; c < inputs.size(); ++c) {
      const std::string what = absl::StrCat(model, " on ", isa, ", input set ", c);
      absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(imported->graph, inputs[c]);
      ASSERT_TRUE(want.ok()) << what << ": " << want.status();
      absl::StatusOr<std::vector<ir::Tensor>> got = (*aot)->Run(inputs[c]);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      ExpectClose(*got, *want, what + " (reference interpreter)");
      if (c < expected.size()) ExpectClose(*got, expected[c], what + " (ONNX's outputs)");
    }
    // The JIT compiles the same subgraphs.
    absl::StatusOr<std::unique_ptr<CompiledModel>> jit =
        Compiler(options).CompileFile(Runfile(model));
    ASSERT_TRUE(jit.ok()) << jit.status();
    EXPECT_EQ(CompiledControlFlow((*jit)->report(), op), compiled);
    EXPECT_EQ((*jit)->report().reference_calls, reference_calls);
    ++ran;
  }
  EXPECT_GE(ran, 1);  // scalar runs everywhere
}

// ONNX's test_data_set_0 of a conformance case: inputs and outputs.
void LoadCase(const std::string& dir, std::vector<std::vector<ir::Tensor>>* inputs,
              std::vector<std::vector<ir::Tensor>>* outputs) {
  inputs->emplace_back();
  outputs->emplace_back();
  for (auto [prefix, into] : {std::pair{"input_", &inputs->back()},
                              std::pair{"output_", &outputs->back()}}) {
    for (int k = 0;; ++k) {
      const std::string path = Runfile(absl::StrCat(dir, "/test_data_set_0/", prefix, k, ".pb"));
      if (!std::ifstream(path).good()) break;
      absl::StatusOr<ir::Tensor> t = frontend::LoadTensorFile(path);
      ASSERT_TRUE(t.ok()) << path << ": " << t.status();
      into->push_back(*std::move(t));
    }
  }
  ASSERT_FALSE(inputs->back().empty()) << dir;
  ASSERT_FALSE(outputs->back().empty()) << dir;
}

TEST(ControlFlowAotTest, NestedIfsTakeEveryBranch) {
  std::vector<std::vector<ir::Tensor>> inputs;
  for (bool flag : {true, false}) {
    for (bool flag2 : {true, false}) {
      inputs.push_back({Normal({2, 16}, 7 + inputs.size()), Scalar(ir::DType::kBool, flag),
                        Scalar(ir::DType::kBool, flag2)});
    }
  }
  // The outer If (the inner one is in its else branch's program).
  ExpectMatchesReference(if_nested_aot::Artifact(), "aot/testdata/if_nested.onnx", inputs, "If",
                         1, 0);
  absl::StatusOr<std::unique_ptr<CompiledModel>> m = if_nested_aot::Create();
  ASSERT_TRUE(m.ok()) << m.status();
  bool nested = false;
  for (const KernelReport& k : (*m)->report().kernels) {
    if (k.call != "If") continue;
    EXPECT_THAT(k.reason, HasSubstr("then: ")) << k.reason;
    // The else branch holds the inner If as a library call, compiled.
    nested |= absl::StrContains(k.reason, "else: 0 loop kernels (0 vectorized), 1 library calls");
  }
  EXPECT_TRUE(nested) << (*m)->report().ToText();
}

TEST(ControlFlowAotTest, LoopWithRunTimeTripCountAndCondition) {
  std::vector<std::vector<ir::Tensor>> inputs;
  // The body stops the loop after iteration 6 (its condition), M earlier.
  for (int64_t m : {0, 1, 3, 10, 1000}) {
    inputs.push_back({Scalar(ir::DType::kI64, static_cast<double>(m)),
                      Normal({4, 8}, 11 + inputs.size())});
  }
  ExpectMatchesReference(loop_state_aot::Artifact(), "aot/testdata/loop_state.onnx", inputs,
                         "Loop", 1, 0);
}

TEST(ControlFlowAotTest, ScanAlongAnotherAxisReversed) {
  std::vector<std::vector<ir::Tensor>> inputs;
  for (uint32_t seed : {3, 4}) inputs.push_back({Normal({6}, seed), Normal({6, 5}, seed + 10)});
  ExpectMatchesReference(scan_state_aot::Artifact(), "aot/testdata/scan_state.onnx", inputs,
                         "Scan", 1, 0);
}

TEST(ControlFlowAotTest, ConformanceIf) {
  const std::string dir = "aot/testdata/onnx/test_if";
  std::vector<std::vector<ir::Tensor>> inputs, outputs;
  LoadCase(dir, &inputs, &outputs);
  // Both ways: the data's condition and its negation.
  inputs.push_back(inputs[0]);
  inputs[1][0].data<bool>()[0] = !inputs[0][0].data<bool>()[0];
  ExpectMatchesReference(conf_if_aot::Artifact(), dir + "/model.onnx", inputs, "If", 1, 0,
                         outputs);
}

TEST(ControlFlowAotTest, ConformanceScan) {
  const std::string dir = "aot/testdata/onnx/test_scan9_sum";
  std::vector<std::vector<ir::Tensor>> inputs, outputs;
  LoadCase(dir, &inputs, &outputs);
  ExpectMatchesReference(conf_scan9_sum_aot::Artifact(), dir + "/model.onnx", inputs, "Scan", 1,
                         0, outputs);
}

TEST(ControlFlowAotTest, ConformanceRangeExpandedIsALoop) {
  const std::string dir = "aot/testdata/onnx/test_range_float_type_positive_delta_expanded";
  std::vector<std::vector<ir::Tensor>> inputs, outputs;
  LoadCase(dir, &inputs, &outputs);
  ExpectMatchesReference(conf_range_expanded_aot::Artifact(), dir + "/model.onnx", inputs,
                         "Loop", 1, 0, outputs);
}

// test_loop11's body slices by the iteration number (a data-dependent
// extent): the body is compiled with two reference calls, which the
// library runs on the interpreter it links (reference_calls = True).
TEST(ControlFlowAotTest, ConformanceLoopWithReferenceCallsInItsBody) {
  const std::string dir = "aot/testdata/onnx/test_loop11";
  std::vector<std::vector<ir::Tensor>> inputs, outputs;
  LoadCase(dir, &inputs, &outputs);
  ExpectMatchesReference(conf_loop11_aot::Artifact(), dir + "/model.onnx", inputs, "Loop", 1, 2,
                         outputs);
}

}  // namespace
}  // namespace kiln
