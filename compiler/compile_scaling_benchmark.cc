// File: compiler/compile_scaling_benchmark.cc — compile time against graph
// size: a chain of n Adds and a model of n graph outputs, built as ir::Graph
// in process, through compiler::Compile (per stage) and the JIT's C++ build.
//
//   bazel run //compiler:compile_scaling_benchmark -- --benchmark_filter=Chain
//
// Counters are seconds per compile: verify, graph_passes, lowering,
// loop_passes, emit and (the *Build benchmarks) cxx_build, a cold g++ build
// of the emitted units (a fresh cache entry every iteration, in a cache
// directory of the process's own, removed at exit: the JIT makes its
// precompiled Highway header there for the first build of 6 units or more
// and reuses it). Each family ends with Google Benchmark's fitted
// complexity (BigO) over its sizes.
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "compiler/jit/jit_compiler.h"
#include "compiler/pipeline.h"
#include "ir/graph/graph.h"
#include "isa/isa.h"

namespace kiln::compiler {
namespace {

const ir::Shape kShape = {1, 16};

// y = x + x + ... + x: n Add nodes, each reading the previous one and x.
ir::Graph AddChain(int n) {
  ir::Graph g("add_chain");
  g.set_opset(13);
  const ir::ValueId x = g.AddValue("x", ir::DType::kF32, kShape);
  g.AddInput(x);
  ir::ValueId prev = x;
  for (int i = 0; i < n; ++i) {
    const ir::ValueId out = g.AddValue(i + 1 == n ? std::string("y") : absl::StrCat("t", i),
                                       ir::DType::kF32, kShape);
    g.AddNode("Add", {prev, x}, {out}, {}, absl::StrCat("add", i));
    prev = out;
  }
  g.AddOutput(prev);
  return g;
}

// o_i = x + x for i < n: n Add nodes, each a graph output.
ir::Graph ManyOutputs(int n) {
  ir::Graph g("many_outputs");
  g.set_opset(13);
  const ir::ValueId x = g.AddValue("x", ir::DType::kF32, kShape);
  g.AddInput(x);
  for (int i = 0; i < n; ++i) {
    const ir::ValueId out = g.AddValue(absl::StrCat("o", i), ir::DType::kF32, kShape);
    g.AddNode("Add", {x, x}, {out}, {}, absl::StrCat("add", i));
    g.AddOutput(out);
  }
  return g;
}

// Sums each stage's time over a benchmark's iterations.
class StageTimes final : public PipelineObserver {
 public:
  absl::Status AfterStage(Stage stage, absl::Duration elapsed,
                          const CompiledProgram& program) override {
    seconds_[std::string(StageName(stage))] += absl::ToDoubleSeconds(elapsed);
    return absl::OkStatus();
  }
  void Add(const std::string& name, double seconds) { seconds_[name] += seconds; }
  void Report(benchmark::State& state) const {
    for (const auto& [name, s] : seconds_) {
      std::string counter = name;
      for (char& c : counter) c = c == '-' ? '_' : c;
      state.counters[counter] = benchmark::Counter(s, benchmark::Counter::kAvgIterations);
    }
  }

 private:
  std::map<std::string, double> seconds_;
};

// One build directory per process, the cache of the *Build benchmarks,
// removed when the process exits.
const std::string& CacheDir() {
  static const std::string* dir = [] {
    char tmpl[] = "/tmp/kiln_compile_scaling_XXXXXX";
    const char* made = mkdtemp(tmpl);
    auto* path = new std::string(made != nullptr ? made : "");
    if (!path->empty()) {
      std::atexit([] {
        std::error_code ignored;
        std::filesystem::remove_all(CacheDir(), ignored);
      });
    }
    return path;
  }();
  return *dir;
}

enum class Model { kAddChain, kManyOutputs };

void Run(benchmark::State& state, Model model, bool eager, bool build) {
  const int n = static_cast<int>(state.range(0));
  const ir::Graph graph = model == Model::kAddChain ? AddChain(n) : ManyOutputs(n);
  const isa::VecIsa* isa = isa::BestHostIsa();
  Target target{isa, {}, {}, {}};
  PipelineOptions options;
  options.eager = eager;
  StageTimes times;
  int64_t kernels = 0;
  int64_t units = 0;
  static int64_t build_nonce = 0;
  for (auto _ : state) {
    absl::StatusOr<CompiledProgram> p = Compile(graph, target, options, &times);
    if (!p.ok()) {
      state.SkipWithError(std::string(p.status().message()).c_str());
      return;
    }
    kernels = static_cast<int64_t>(p->cpp->kernels.size());
    units = static_cast<int64_t>(p->cpp->sources.size());
    if (!build) continue;
    std::vector<ir::loop::SourceFile> sources = p->cpp->sources;
    // A new cache key per build (a comment), so g++ runs every iteration.
    sources.front().text = absl::StrCat("// build ", ++build_nonce, " pid ", getpid(), "\n",
                                        sources.front().text);
    jit::JitOptions jo;
    jo.isa = isa;
    jo.cache_dir = CacheDir();
    jit::JitCompiler jit(jo);
    const absl::Time start = absl::Now();
    absl::StatusOr<std::shared_ptr<jit::LoadedLibrary>> lib = jit.Compile(std::move(sources));
    times.Add("cxx_build", absl::ToDoubleSeconds(absl::Now() - start));
    if (!lib.ok()) {
      state.SkipWithError(std::string(lib.status().message()).c_str());
      return;
    }
  }
  times.Report(state);
  state.counters["kernels"] = static_cast<double>(kernels);
  state.counters["units"] = static_cast<double>(units);
  state.SetComplexityN(n);
}

void BM_AddChain(benchmark::State& state) { Run(state, Model::kAddChain, false, false); }
void BM_AddChainBuild(benchmark::State& state) { Run(state, Model::kAddChain, false, true); }
void BM_AddChainEager(benchmark::State& state) { Run(state, Model::kAddChain, true, false); }
void BM_AddChainEagerBuild(benchmark::State& state) { Run(state, Model::kAddChain, true, true); }
void BM_ManyOutputs(benchmark::State& state) { Run(state, Model::kManyOutputs, false, false); }
void BM_ManyOutputsBuild(benchmark::State& state) {
  Run(state, Model::kManyOutputs, false, true);
}

// The probe's sizes, 500 to 20,000 nodes.
void Sizes(benchmark::internal::Benchmark* b) {
  for (int n : {500, 1000, 2000, 4000, 8000, 20000}) b->Arg(n);
  b->Unit(benchmark::kSecond)->UseRealTime()->Complexity();
}
void BuildSizes(benchmark::internal::Benchmark* b) {
  Sizes(b);
  b->Iterations(1);
}

BENCHMARK(BM_AddChain)->Apply(Sizes);
BENCHMARK(BM_AddChainBuild)->Apply(BuildSizes);
BENCHMARK(BM_AddChainEager)->Apply(Sizes);
BENCHMARK(BM_AddChainEagerBuild)->Arg(500)->Arg(1000)->Arg(2000)->Iterations(1)
    ->Unit(benchmark::kSecond)->UseRealTime()->Complexity();
BENCHMARK(BM_ManyOutputs)->Apply(Sizes);
BENCHMARK(BM_ManyOutputsBuild)->Apply(BuildSizes);

}  // namespace
}  // namespace kiln::compiler
