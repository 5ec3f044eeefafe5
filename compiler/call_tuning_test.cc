// The JIT's library-call tuner: a doubtful conv is timed once and its choice
// cached, a second tuner reads the cache instead of timing, the deterministic
// mode never times, and calls the rule is trusted with are left alone.
#include "compiler/call_tuning.h"

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "gtest/gtest.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "lowering/lower_graph.h"

namespace kiln::compiler {
namespace {

std::string C(const ir::Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  ir::Tensor t(ir::DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(gen);
  return ir::PrintTensor(t, ir::PrintOptions::Full());
}

// `c_in` -> `c_out` 3x3 conv on 16x16.
ir::loop::LoopModule ConvModule(int64_t c_in, int64_t c_out) {
  const std::string text = absl::Substitute(R"(
graph main(%x: f32[1,$0,16,16]) -> (%y) opset 17 {
  %w = constant $2
  %b = constant $3
  %y = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,$1,16,16]
}
)",
                                            c_in, c_out, C({c_out, c_in, 3, 3}, 1),
                                            C({c_out}, 2));
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(*g);
  EXPECT_TRUE(lp.ok()) << lp.status();
  return std::move(*lp);
}

const ir::loop::Kernel& Extern(const ir::loop::LoopModule& m) {
  for (const ir::loop::Kernel& k : m.program.kernels) {
    if (k.kind == ir::loop::Kernel::Kind::kExtern) return k;
  }
  ADD_FAILURE() << "no extern kernel";
  return m.program.kernels[0];
}

std::string FreshDir(const char* name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(CallTuner, OffHasNoTuner) {
  CompileOptions o;
  std::vector<CompileReport::TunedCall> log;
  EXPECT_FALSE(CallTuner(o, &log));
}

TEST(CallTuner, TimesOnceThenReadsTheCache) {
  CompileOptions o;
  o.call_tuning = CompileOptions::CallTuning::kOn;
  o.threads = 1;
  o.cache_dir = FreshDir("on");
  const ir::loop::LoopModule m = ConvModule(3, 5);
  std::vector<CompileReport::TunedCall> first, second;
  absl::StatusOr<std::string> a = CallTuner(o, &first)(m, Extern(m));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_FALSE(first[0].cached);
  EXPECT_EQ(first[0].why, "C_in 3 <= 4");
  EXPECT_NE(first[0].choice.find("rule "), std::string::npos) << first[0].choice;
  // A warm compile: same choice, same description, nothing timed.
  absl::StatusOr<std::string> b = CallTuner(o, &second)(m, Extern(m));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_TRUE(second[0].cached);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(first[0].choice, second[0].choice);
  // Another thread count is another entry.
  o.threads = 2;
  std::vector<CompileReport::TunedCall> third;
  ASSERT_TRUE(CallTuner(o, &third)(m, Extern(m)).ok());
  ASSERT_EQ(third.size(), 1u);
  EXPECT_FALSE(third[0].cached);
}

TEST(CallTuner, CachedModeNeverTimes) {
  CompileOptions o;
  o.call_tuning = CompileOptions::CallTuning::kCached;
  o.cache_dir = FreshDir("cached");
  const ir::loop::LoopModule m = ConvModule(3, 5);
  std::vector<CompileReport::TunedCall> log;
  absl::StatusOr<std::string> form = CallTuner(o, &log)(m, Extern(m));
  ASSERT_TRUE(form.ok()) << form.status();
  EXPECT_EQ(*form, "");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].choice, "rule (no cached choice)");
  EXPECT_FALSE(std::filesystem::exists(o.cache_dir + "/tuning"));
}

TEST(CallTuner, TrustedCallsAreNotTuned) {
  CompileOptions o;
  o.call_tuning = CompileOptions::CallTuning::kOn;
  o.cache_dir = FreshDir("trusted");
  const ir::loop::LoopModule m = ConvModule(16, 32);
  std::vector<CompileReport::TunedCall> log;
  absl::StatusOr<std::string> form = CallTuner(o, &log)(m, Extern(m));
  ASSERT_TRUE(form.ok()) << form.status();
  EXPECT_EQ(*form, "");
  EXPECT_TRUE(log.empty());
}

}  // namespace
}  // namespace kiln::compiler
