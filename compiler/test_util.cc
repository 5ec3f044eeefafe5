// File: compiler/test_util.cc — see test_util.h.
#include "compiler/test_util.h"

#include <cstdlib>
#include <random>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"

namespace kiln::compiler_testing {

std::string CacheDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/kiln_cache";
}

CompileOptions Options() {
  CompileOptions o;
  o.cache_dir = CacheDir();
  return o;
}

ir::Tensor Random(const ir::Shape& shape, uint32_t seed) {
  ir::Tensor t(ir::DType::kF32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

ir::Graph Parse(const char* text) {
  ir::ParseOptions po;
  po.allow_elided_constants = true;
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text, po);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return ir::Graph("invalid");
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g->num_values()); ++v) {
    const ir::Tensor* c = g->constant(v);
    if (c != nullptr && c->dtype() == ir::DType::kF32) {
      g->SetConstant(v, Random(c->shape(), 1000 + v));
    }
  }
  return *std::move(g);
}

}  // namespace kiln::compiler_testing
