// File: tools/aot_test_main.cc — the test `kiln_aot_library(..., gen_test =
// True)` stamps as `<name>_test` (tools/aot.bzl): the library's model on
// seeded random inputs, run on every ISA compiled in that this CPU runs,
// against kiln's reference interpreter on the ONNX model itself; an ISA the
// CPU lacks must be refused with InvalidArgument.
//
// Built with `-include <the generated header>` and
// -DKILN_AOT_NAMESPACE=<name>; argv[1] is the model (runfiles path).
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "gtest/gtest.h"
#include "isa/isa.h"
#include "runtime/aot.h"
#include "runtime/compiled_model.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "tools/kilnc_lib.h"

#ifndef KILN_AOT_NAMESPACE
#error "build with -DKILN_AOT_NAMESPACE=<the kiln_aot_library's name>"
#endif

namespace kiln {
namespace {

std::string* model_path = nullptr;

// kilnc check's tolerance for whole models.
const interp::Tolerance kTol{1e-3, 1e-5, std::nullopt, /*atol_scaled=*/true};

bool HostRuns(const std::string& name) {
  const isa::VecIsa* isa = isa::FindIsa(name);
  return isa != nullptr && isa->emulator.empty() && isa->host_supports();
}

TEST(AotLibraryTest, EveryIsaThisCpuRunsMatchesTheReference) {
  absl::StatusOr<frontend::ImportResult> imported = frontend::ImportModelFile(*model_path);
  ASSERT_TRUE(imported.ok()) << imported.status();
  const ir::Graph& graph = imported->graph;
  std::vector<std::vector<ir::Tensor>> inputs, expected;
  for (uint64_t seed : {1, 2}) {
    std::vector<ir::Tensor> in;
    for (ir::ValueId id : graph.inputs()) {
      const ir::Value& v = graph.value(id);
      absl::StatusOr<ir::Tensor> t =
          tools::RandomTensor(v.dtype, v.shape, seed * 1000 + in.size(), 0, 10);
      ASSERT_TRUE(t.ok()) << v.name << ": " << t.status();
      in.push_back(*std::move(t));
    }
    absl::StatusOr<std::vector<ir::Tensor>> out = interp::Run(graph, in);
    ASSERT_TRUE(out.ok()) << out.status();
    inputs.push_back(std::move(in));
    expected.push_back(*std::move(out));
  }

  const aot::Artifact& artifact = KILN_AOT_NAMESPACE::Artifact();
  int ran = 0;
  for (int i = 0; i < artifact.num_isas; ++i) {
    const std::string isa = artifact.isas[i].isa;
    CompileOptions options;
    options.isa = isa;
    options.threads = 1;
    absl::StatusOr<std::unique_ptr<CompiledModel>> model = KILN_AOT_NAMESPACE::Create(options);
    if (!HostRuns(isa)) {
      std::cout << "this CPU lacks " << isa << ": checking the refusal\n";
      ASSERT_FALSE(model.ok()) << isa;
      EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
      continue;
    }
    ASSERT_TRUE(model.ok()) << isa << ": " << model.status();
    EXPECT_EQ((*model)->report().isa, isa);
    for (size_t c = 0; c < inputs.size(); ++c) {
      absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs[c]);
      ASSERT_TRUE(got.ok()) << isa << ": " << got.status();
      ASSERT_EQ(got->size(), expected[c].size());
      for (size_t o = 0; o < got->size(); ++o) {
        const interp::CompareResult r =
            interp::CompareTensors((*got)[o], expected[c][o], kTol);
        EXPECT_TRUE(r.ok) << isa << ", seed set " << c << ", output '"
                          << (*model)->outputs()[o].name << "': " << r.message;
      }
    }
    std::cout << isa << ": " << (*model)->report().kernels.size() << " kernels, "
              << inputs.size() << " input sets match the reference\n";
    ++ran;
  }
  EXPECT_GE(ran, 1) << "this CPU runs none of the library's ISAs";
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " MODEL (runfiles path)\n";
    return 2;
  }
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  kiln::model_path = new std::string(
      srcdir != nullptr ? absl::StrCat(srcdir, "/", ws ? ws : "kiln", "/", argv[1]) : argv[1]);
  return RUN_ALL_TESTS();
}
