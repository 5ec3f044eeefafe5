// File: compiler/concurrency_test.cc — compiled models used concurrently give
// exactly the results of serial runs: N threads on one CompiledModel, several
// models at once, and several processes compiling one model into one cache
// directory. Built and run under --config=tsan too (//testing:tsan_tests);
// models use one intra-op thread, so no OpenMP team runs.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/compiler.h"
#include "compiler/test_util.h"
#include "gtest/gtest.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "ir/graph/graph.h"

namespace kiln {
namespace {

using compiler_testing::kPointwiseAndReductions;
using compiler_testing::Parse;
using compiler_testing::Random;

// A oneDNN call (MatMul with a fused bias and ReLU) between loop kernels.
constexpr char kLibraryCall[] = R"(
graph g(%x: f32[4,16]) -> (%y) opset 13 {
  %w = constant f32[16,8] <elided>
  %bias = constant f32[8] <elided>
  %m = MatMul(%x, %w) name="mm" : f32[4,8]
  %a = Add(%m, %bias) name="bias" : f32[4,8]
  %r = Relu(%a) name="relu" : f32[4,8]
  %y = Sigmoid(%r) name="sig" : f32[4,8]
}
)";

// A reference call (NonZero has a data-dependent shape) feeding a loop kernel.
constexpr char kReferenceCall[] = R"(
graph g(%x: f32[2,5]) -> (%y, %n) opset 13 {
  %n = NonZero(%x) name="nz" : i64[2,?]
  %y = Tanh(%x) name="tanh" : f32[2,5]
}
)";

CompileOptions OneThread() {
  CompileOptions o = compiler_testing::Options();
  o.threads = 1;
  return o;
}

bool BitIdentical(const std::vector<ir::Tensor>& a, const std::vector<ir::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape() ||
        std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].byte_size()) != 0) {
      return false;
    }
  }
  return true;
}

// A model compiled from `text`, with inputs for `runs` runs (seeded per run)
// and the outputs a serial run gives on each; the serial outputs are also
// checked against the reference interpreter.
struct Case {
  std::unique_ptr<CompiledModel> model;
  std::vector<std::vector<ir::Tensor>> inputs, serial;
};

Case Prepare(const char* text, int runs, uint32_t seed) {
  Case c;
  ir::Graph g = Parse(text);
  absl::StatusOr<std::unique_ptr<CompiledModel>> m = Compiler(OneThread()).CompileGraph(g);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return c;
  c.model = *std::move(m);
  for (int r = 0; r < runs; ++r) {
    std::vector<ir::Tensor> in;
    for (size_t i = 0; i < c.model->inputs().size(); ++i) {
      ir::Tensor t = Random(c.model->inputs()[i].shape, seed + 17 * r + i);
      // Zeros for NonZero to find, differing per run.
      for (int64_t e = r % 3; e < t.num_elements(); e += 3) t.data<float>()[e] = 0;
      in.push_back(std::move(t));
    }
    absl::StatusOr<std::vector<ir::Tensor>> out = c.model->Run(in);
    EXPECT_TRUE(out.ok()) << out.status();
    absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, in);
    EXPECT_TRUE(want.ok()) << want.status();
    if (!out.ok() || !want.ok()) return c;
    for (size_t o = 0; o < out->size(); ++o) {
      EXPECT_TRUE(interp::CompareTensors((*out)[o], (*want)[o], {1e-4, 1e-5, {}}).ok)
          << "output " << o;
    }
    c.inputs.push_back(std::move(in));
    c.serial.push_back(*std::move(out));
  }
  return c;
}

// Runs `threads` threads over `cases` (thread t uses case t % cases.size()),
// each running every input set `reps` times; counts runs that failed or
// differed from the serial run in any bit.
int ConcurrentMismatches(const std::vector<Case*>& cases, int threads, int reps) {
  std::vector<int> mismatches(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const Case& c = *cases[t % cases.size()];
      for (int rep = 0; rep < reps; ++rep) {
        for (size_t r = 0; r < c.inputs.size(); ++r) {
          const size_t k = (r + t) % c.inputs.size();  // threads start at different sets
          absl::StatusOr<std::vector<ir::Tensor>> got = c.model->Run(c.inputs[k]);
          if (!got.ok() || !BitIdentical(*got, c.serial[k])) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& th : pool) th.join();
  int total = 0;
  for (int m : mismatches) total += m;
  return total;
}

TEST(Concurrency, ThreadsOnOneModelMatchSerialRunsBitForBit) {
  for (const char* text : {kPointwiseAndReductions, kLibraryCall, kReferenceCall}) {
    Case c = Prepare(text, 3, 100);
    ASSERT_NE(c.model, nullptr);
    ASSERT_EQ(c.serial.size(), 3u);
    EXPECT_EQ(ConcurrentMismatches({&c}, 4, 10), 0) << text;
  }
}

TEST(Concurrency, SeveralModelsAtOnceMatchSerialRunsBitForBit) {
  Case a = Prepare(kPointwiseAndReductions, 3, 200), b = Prepare(kLibraryCall, 3, 300),
       c = Prepare(kReferenceCall, 3, 400);
  ASSERT_TRUE(a.model && b.model && c.model);
  EXPECT_EQ(ConcurrentMismatches({&a, &b, &c}, 6, 10), 0);
}

// Processes that compile the same model into one cache directory at once
// each get a working model with the serial outputs, and the entry they
// leave loads and runs the same afterwards.
TEST(Concurrency, SeveralProcessesCompileOneModelIntoOneCache) {
  CompileOptions o = OneThread();
  o.cache_dir =
      std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/kiln_cache_processes";
  const ir::Tensor x = Random({4, 16}, 7);
  const ir::Graph g = Parse(kLibraryCall);
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, {x});
  ASSERT_TRUE(want.ok()) << want.status();
  constexpr int kChildren = 3;
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      absl::StatusOr<std::unique_ptr<CompiledModel>> m = Compiler(o).CompileGraph(g);
      if (!m.ok()) _exit(2);
      absl::StatusOr<std::vector<ir::Tensor>> got = (*m)->Run(std::vector<ir::Tensor>{x});
      if (!got.ok()) _exit(3);
      _exit(interp::CompareTensors((*got)[0], (*want)[0], {1e-4, 1e-5, {}}).ok ? 0 : 4);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: compile failed, 3: run failed, 4: wrong output";
  }
  absl::StatusOr<std::unique_ptr<CompiledModel>> again = Compiler(o).CompileGraph(g);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::StatusOr<std::vector<ir::Tensor>> got = (*again)->Run(std::vector<ir::Tensor>{x});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(interp::CompareTensors((*got)[0], (*want)[0], {1e-4, 1e-5, {}}).ok);
}

}  // namespace
}  // namespace kiln
