// models/tiny_cnn compiled ahead of time (aot/BUILD.bazel's
// kiln_aot_library) against kiln's reference interpreter: the default ISA
// choice, every ISA this CPU runs forced one by one, the refusal of an ISA
// the CPU lacks (detection overridden) or the library lacks, the options
// fixed at build time, and the kernel libraries' copts against the JIT's
// flags for the same ISA.
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "aot/tiny_cnn_aot.h"
#include "aot/tiny_cnn_ref_aot.h"
#include "compiler/compiler.h"
#include "frontend/onnx/importer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "isa/isa.h"
#include "nlohmann/json.hpp"
#include "runtime/aot.h"
#include "compiler/jit/jit_compiler.h"
#include "runtime/compiled_model.h"
#include "interp/compare.h"
#include "interp/interpreter.h"

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

class TinyCnnAotTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<frontend::ImportResult> imported =
        frontend::ImportModelFile(Runfile("models/tiny_cnn/model.onnx"));
    ASSERT_TRUE(imported.ok()) << imported.status();
    graph_ = new ir::Graph(std::move(imported->graph));
    absl::StatusOr<ir::Tensor> input =
        frontend::LoadTensorFile(Runfile("models/tiny_cnn/test_data_set_0/input_0.pb"));
    ASSERT_TRUE(input.ok()) << input.status();
    inputs_ = new std::vector<std::vector<ir::Tensor>>();
    inputs_->push_back({*input});
    // Two seeded random inputs of the same type: N(0, 1).
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal;
    for (int r = 0; r < 2; ++r) {
      ir::Tensor t(input->dtype(), input->shape());
      for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = normal(rng);
      inputs_->push_back({t});
    }
    expected_ = new std::vector<std::vector<ir::Tensor>>();
    for (const std::vector<ir::Tensor>& in : *inputs_) {
      absl::StatusOr<std::vector<ir::Tensor>> out = interp::Run(*graph_, in);
      ASSERT_TRUE(out.ok()) << out.status();
      expected_->push_back(*std::move(out));
    }
  }

  // Runs `model` on every input and compares with the reference.
  static void ExpectMatchesReference(const CompiledModel& model, const std::string& what) {
    for (size_t c = 0; c < inputs_->size(); ++c) {
      absl::StatusOr<std::vector<ir::Tensor>> got = model.Run((*inputs_)[c]);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      ASSERT_EQ(got->size(), (*expected_)[c].size()) << what;
      for (size_t o = 0; o < got->size(); ++o) {
        const interp::CompareResult r =
            interp::CompareTensors((*got)[o], (*expected_)[c][o], kTol);
        EXPECT_TRUE(r.ok) << what << ", input set " << c << ", output " << o << ": "
                          << r.message;
      }
    }
  }

  static std::vector<std::string> BuiltIsas() {
    std::vector<std::string> isas;
    const aot::Artifact& a = tiny_cnn_aot::Artifact();
    for (int i = 0; i < a.num_isas; ++i) isas.push_back(a.isas[i].isa);
    return isas;
  }

  // The copts Bazel has for each per-ISA kernel library tiny_cnn_aot_<isa>
  // (aot/BUILD.bazel's tiny_cnn_aot_copts: every ISA kiln_aot_library builds
  // by default), in that order.
  static std::vector<std::pair<std::string, std::vector<std::string>>> KernelCopts() {
    std::ifstream in(Runfile("aot/tiny_cnn_aot_copts.txt"));
    EXPECT_TRUE(in.good());
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> f = absl::StrSplit(line, '\t');
      if (f.size() != 2) continue;
      absl::string_view isa = f[0];
      EXPECT_TRUE(absl::ConsumePrefix(&isa, "tiny_cnn_aot_")) << line;
      out.emplace_back(std::string(isa), absl::StrSplit(f[1], ' ', absl::SkipEmpty()));
    }
    return out;
  }

  static bool HostRuns(const std::string& name) {
    const isa::VecIsa* isa = isa::FindIsa(name);
    return isa != nullptr && isa->emulator.empty() && isa->host_supports();
  }

  static ir::Graph* graph_;
  static std::vector<std::vector<ir::Tensor>>* inputs_;
  static std::vector<std::vector<ir::Tensor>>* expected_;
};

ir::Graph* TinyCnnAotTest::graph_ = nullptr;
std::vector<std::vector<ir::Tensor>>* TinyCnnAotTest::inputs_ = nullptr;
std::vector<std::vector<ir::Tensor>>* TinyCnnAotTest::expected_ = nullptr;

TEST_F(TinyCnnAotTest, BuiltForTheRequestedIsas) {
  // The macro's default: every row of isa/isas.bzl it can build, worst first.
  std::vector<std::string> requested;
  for (const auto& [isa, copts] : KernelCopts()) requested.push_back(isa);
  EXPECT_THAT(requested, ::testing::Contains("scalar"));
  EXPECT_EQ(BuiltIsas(), requested);
}

TEST_F(TinyCnnAotTest, KernelLibrariesAreCompiledWithTheJitsFlags) {
  // Each ISA's kernels are built with the JIT's flags for that ISA: its
  // cxx_flags last, exactly, after the JIT's optimization flags and -w.
  const jit::JitOptions jit;
  for (const auto& [name, copts] : KernelCopts()) {
    const isa::VecIsa* isa = isa::FindIsa(name);
    ASSERT_NE(isa, nullptr) << name;
    ASSERT_GE(copts.size(), isa->cxx_flags.size()) << name;
    const std::vector<std::string> head(copts.begin(), copts.end() - isa->cxx_flags.size());
    const std::vector<std::string> tail(copts.end() - isa->cxx_flags.size(), copts.end());
    EXPECT_EQ(tail, isa->cxx_flags) << name;
    EXPECT_THAT(head, ::testing::Contains("-O3")) << name;
    for (const std::string& f : head) {
      if (f == "-w") continue;
      EXPECT_THAT(jit.optimization_flags, ::testing::Contains(f)) << name << ": " << f;
    }
  }
}

TEST_F(TinyCnnAotTest, DefaultPicksTheBestIsaThisCpuRunsAndMatchesReference) {
  std::string best;
  for (const std::string& name : BuiltIsas()) {
    if (HostRuns(name) && (best.empty() || isa::FindIsa(name)->rank > isa::FindIsa(best)->rank)) {
      best = name;
    }
  }
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = tiny_cnn_aot::Create();
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->report().isa, best);
  // Built with oneDNN capped at the best ISA compiled in (tools/aot.bzl):
  // on a CPU of that class, no layout warning.
  if (best == "avx512") {
    for (const std::string& w : (*model)->report().warnings) {
      EXPECT_THAT(w, ::testing::Not(HasSubstr("activation layouts were chosen"))) << w;
    }
  }
  ExpectMatchesReference(**model, "default ISA");
  // The interface is the model's.
  ASSERT_EQ((*model)->inputs().size(), graph_->inputs().size());
  EXPECT_EQ((*model)->inputs()[0].name, graph_->value(graph_->inputs()[0]).name);
  EXPECT_EQ((*model)->inputs()[0].shape, (*inputs_)[0][0].shape());
}

TEST_F(TinyCnnAotTest, EveryIsaTheHostRunsMatchesReference) {
  int ran = 0;
  for (const std::string& name : BuiltIsas()) {
    CompileOptions options;
    options.isa = name;
    options.threads = 1;
    absl::StatusOr<std::unique_ptr<CompiledModel>> model = tiny_cnn_aot::Create(options);
    if (!HostRuns(name)) {
      std::cout << "this CPU lacks " << name << ": checking the refusal\n";
      ASSERT_FALSE(model.ok());
      EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(model.status().message(), HasSubstr("not supported by this CPU"));
      continue;
    }
    ASSERT_TRUE(model.ok()) << name << ": " << model.status();
    EXPECT_EQ((*model)->report().isa, name);
    EXPECT_GT((*model)->report().loop_kernels, 0);
    EXPECT_GT((*model)->report().library_calls, 0);
    ExpectMatchesReference(**model, name);
    ++ran;
  }
  EXPECT_GE(ran, 1);  // scalar runs everywhere
}

TEST_F(TinyCnnAotTest, EachIsaHasTheProgramOneDnnWantsOnIt) {
  // Each ISA's program was compiled with oneDNN capped at that ISA; a CPU of
  // another oneDNN class runs it correctly (checked above) but is warned.
  const std::vector<std::string> built = BuiltIsas();
  std::string best;
  for (const std::string& name : built) {
    if (HostRuns(name) && (best.empty() || isa::FindIsa(name)->rank > isa::FindIsa(best)->rank)) {
      best = name;
    }
  }
  for (const std::string& name : built) {
    if (!HostRuns(name)) continue;
    CompileOptions options;
    options.isa = name;
    absl::StatusOr<std::unique_ptr<CompiledModel>> model = tiny_cnn_aot::Create(options);
    ASSERT_TRUE(model.ok()) << model.status();
    bool warned = false;
    for (const std::string& w : (*model)->report().warnings) {
      warned |= absl::StrContains(w, "activation layouts were chosen at build time");
    }
    if (name == best) EXPECT_FALSE(warned) << name << " is this CPU's class";
    // Forced below the CPU's class (scalar's program is for SSE4.1 CPUs).
    if (name == "avx2" && HostRuns("avx512")) EXPECT_TRUE(warned) << name;
    if (name == "scalar" && HostRuns("avx2")) EXPECT_TRUE(warned) << name;
  }
}

TEST_F(TinyCnnAotTest, SameStepsAsTheJit) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> aot = tiny_cnn_aot::Create();
  ASSERT_TRUE(aot.ok()) << aot.status();
  CompileOptions options;
  options.isa = (*aot)->report().isa;
  absl::StatusOr<std::unique_ptr<CompiledModel>> jit =
      Compiler(options).CompileFile(Runfile("models/tiny_cnn/model.onnx"));
  ASSERT_TRUE(jit.ok()) << jit.status();
  const CompileReport& a = (*aot)->report();
  const CompileReport& j = (*jit)->report();
  ASSERT_EQ(a.kernels.size(), j.kernels.size());
  for (size_t k = 0; k < a.kernels.size(); ++k) {
    EXPECT_EQ(a.kernels[k].name, j.kernels[k].name);
    EXPECT_EQ(a.kernels[k].backend, j.kernels[k].backend);
    EXPECT_EQ(a.kernels[k].status, j.kernels[k].status);
    EXPECT_EQ(a.kernels[k].call, j.kernels[k].call);
  }
  EXPECT_EQ(a.arena_bytes, j.arena_bytes);
  EXPECT_EQ(a.constant_bytes, j.constant_bytes);
}

TEST_F(TinyCnnAotTest, RefusesAnIsaTheCpuLacks) {
  // A CPU without AVX-512: asking for it is refused before any of its code
  // runs; the default falls back to the next best.
  auto no_avx512 = [](absl::string_view name) {
    return name != "avx512" && HostRuns(std::string(name));
  };
  CompileOptions options;
  options.isa = "avx512";
  absl::StatusOr<std::unique_ptr<CompiledModel>> refused =
      aot::CreateModel(tiny_cnn_aot::Artifact(), options, no_avx512);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("ISA 'avx512' is not supported by this CPU"));

  options.isa = "";
  absl::StatusOr<std::unique_ptr<CompiledModel>> fallback =
      aot::CreateModel(tiny_cnn_aot::Artifact(), options, no_avx512);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ((*fallback)->report().isa, HostRuns("avx2") ? "avx2" : "scalar");
  ExpectMatchesReference(**fallback, "fallback without avx512");

  absl::StatusOr<std::unique_ptr<CompiledModel>> none = aot::CreateModel(
      tiny_cnn_aot::Artifact(), options, [](absl::string_view) { return false; });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("runs none of the ISAs"));
}

// The loader bounds every number of a description before it reads one: a
// float, or an integer outside its field's range, is an error naming the
// field (nlohmann's get<size_t>() and get<int32_t>() convert unchecked, and
// a float out of an integer's range is undefined behaviour: a fuzz finding).
TEST_F(TinyCnnAotTest, RefusesDescriptionNumbersOutsideTheirFieldsRange) {
  const aot::Artifact& library = tiny_cnn_aot::Artifact();
  const aot::IsaTable* scalar = nullptr;
  for (int i = 0; i < library.num_isas; ++i) {
    if (std::string(library.isas[i].isa) == "scalar") scalar = &library.isas[i];
  }
  ASSERT_NE(scalar, nullptr);
  const nlohmann::json original = nlohmann::json::parse(
      scalar->description, scalar->description + scalar->description_size);
  ASSERT_TRUE(original.contains("constants") && !original["constants"].empty());
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* field;
  };
  const Case cases[] = {
      {"/constants/0/offset", 4.56e61, "offset"},
      {"/constants/0/bytes", -8, "bytes"},
      {"/weights_bytes", 1.5, "weights_bytes"},
      {"/constants/0/buffer", int64_t{1} << 40, "buffer"},
      {"/inputs/0/buffer", 0.5, "buffer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer);
    nlohmann::json broken = original;
    broken[nlohmann::json::json_pointer(c.pointer)] = c.value;
    const std::string text = broken.dump();
    aot::IsaTable table = *scalar;
    table.description = reinterpret_cast<const unsigned char*>(text.data());
    table.description_size = text.size();
    aot::Artifact artifact = library;
    artifact.isas = &table;
    artifact.num_isas = 1;
    absl::StatusOr<std::unique_ptr<CompiledModel>> m = aot::CreateModel(
        artifact, CompileOptions(), [](absl::string_view isa) { return isa == "scalar"; });
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal) << m.status();
    EXPECT_THAT(m.status().message(), HasSubstr(absl::StrCat("'", c.field, "' holds")))
        << m.status();
  }
}

TEST_F(TinyCnnAotTest, RefusesAnIsaNotCompiledIn) {
  CompileOptions options;
  options.isa = "neon";
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = tiny_cnn_aot::Create(options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(),
              HasSubstr("ISA 'neon' is not compiled into AOT library 'tiny_cnn_aot'"));
}

TEST_F(TinyCnnAotTest, RefusesOptionsFixedAtBuildTime) {
  CompileOptions shapes;
  shapes.input_shapes["input"] = {2, 3, 32, 32};
  absl::StatusOr<std::unique_ptr<CompiledModel>> m1 = tiny_cnn_aot::Create(shapes);
  ASSERT_FALSE(m1.ok());
  EXPECT_THAT(m1.status().message(), HasSubstr("input shapes fixed at build time"));

  CompileOptions eager;
  eager.mode = CompileOptions::Mode::kEager;
  absl::StatusOr<std::unique_ptr<CompiledModel>> m2 = tiny_cnn_aot::Create(eager);
  ASSERT_FALSE(m2.ok());
  EXPECT_EQ(m2.status().code(), absl::StatusCode::kInvalidArgument);

  CompileOptions threads;
  threads.threads = -1;
  EXPECT_FALSE(tiny_cnn_aot::Create(threads).ok());
}

TEST_F(TinyCnnAotTest, NoPrepackAgrees) {
  CompileOptions options;
  options.prepack_weights = false;
  absl::StatusOr<std::unique_ptr<CompiledModel>> a = tiny_cnn_aot::Create(options);
  ASSERT_TRUE(a.ok()) << a.status();
  ExpectMatchesReference(**a, "no prepack");
}

// Convs off oneDNN need the reference interpreter: a library without it
// refuses, naming the call; one built with reference_calls = True runs them.
TEST_F(TinyCnnAotTest, ReferenceLibraryCallsOnlyWhenLinked) {
  CompileOptions options;
  options.use_onednn = false;
  absl::StatusOr<std::unique_ptr<CompiledModel>> refused = tiny_cnn_aot::Create(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("extern kernel '"));
  EXPECT_THAT(refused.status().message(), HasSubstr("oneDNN disabled by option"));
  EXPECT_THAT(refused.status().message(), HasSubstr("reference_calls = True"));
  EXPECT_EQ(tiny_cnn_aot::Artifact().reference_steps, nullptr);

  absl::StatusOr<std::unique_ptr<CompiledModel>> b = tiny_cnn_ref_aot::Create(options);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT((*b)->report().reference_calls, 0);
  ExpectMatchesReference(**b, "library calls on the reference");
}

}  // namespace
}  // namespace kiln
