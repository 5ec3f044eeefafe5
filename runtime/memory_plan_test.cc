// Tests for the arena planner: reuse across disjoint live ranges, no overlap
// between buffers alive at the same time, and eager (no sharing) plans.
#include "runtime/memory_plan.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/loop/loop_ir.h"

namespace kiln::runtime {
namespace {

using ir::DType;
using ir::loop::BufferKind;
using ir::loop::KernelBuilder;
using ir::loop::LoopProgram;
using ir::loop::OpCode;

// x -> t0 -> t1 -> ... -> t(n-1) -> y, one pointwise kernel per arrow;
// t_k has `sizes[k]` f32 elements read contiguously from its producer's
// first elements.
LoopProgram Chain(const std::vector<int64_t>& sizes) {
  LoopProgram p;
  int32_t prev = p.AddBuffer("x", DType::kF32, {sizes[0]}, BufferKind::kInput);
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int32_t t = p.AddBuffer("t" + std::to_string(k), DType::kF32, {sizes[k]},
                                  BufferKind::kIntermediate);
    KernelBuilder b(&p, "k" + std::to_string(k), {sizes[k]});
    b.Store(t, b.i(0), b.Unary(OpCode::kExp, b.Load(prev, b.i(0) * 0)));
    prev = t;
  }
  const int32_t y = p.AddBuffer("y", DType::kF32, {1}, BufferKind::kOutput);
  KernelBuilder b(&p, "out", {1});
  b.Store(y, b.i(0), b.Load(prev, b.i(0)));
  return p;
}

TEST(PlanMemory, ChainReusesEveryOtherBuffer) {
  // Four 100-float intermediates: t0,t2 and t1,t3 can share (live ranges of
  // neighbours overlap at the kernel connecting them).
  LoopProgram p = Chain({100, 100, 100, 100});
  absl::StatusOr<MemoryPlan> plan = PlanMemory(p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 400 bytes rounded to 448 (7 cache lines); two slots.
  EXPECT_EQ(plan->intermediate_bytes, 4 * 448);
  EXPECT_EQ(plan->arena_bytes, 2 * 448);
  EXPECT_EQ(plan->offsets[p.FindBuffer("x")], -1);
  EXPECT_EQ(plan->offsets[p.FindBuffer("y")], -1);
  EXPECT_NE(plan->offsets[p.FindBuffer("t0")], plan->offsets[p.FindBuffer("t1")]);
  EXPECT_EQ(plan->first_use[p.FindBuffer("t1")], 1);
  EXPECT_EQ(plan->last_use[p.FindBuffer("t1")], 2);
}

TEST(PlanMemory, NoSharingGivesEveryBufferItsOwnBytes) {
  LoopProgram p = Chain({16, 32, 16});
  absl::StatusOr<MemoryPlan> plan = PlanMemory(p, {.share = false, .in_place = {}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->arena_bytes, 64 + 128 + 64);
  EXPECT_EQ(plan->arena_bytes, plan->intermediate_bytes);
}

TEST(PlanMemory, BuffersAliveTogetherNeverOverlap) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> sizes;
    for (int k = 0; k < 12; ++k) sizes.push_back(1 + rng() % 300);
    LoopProgram p = Chain(sizes);
    // Also a kernel late in the program that reads t1: stretches its range.
    const int32_t z = p.AddBuffer("z", DType::kF32, {1}, BufferKind::kOutput);
    KernelBuilder b(&p, "late", {1});
    b.Store(z, b.i(0), b.Load(p.FindBuffer("t1"), b.i(0)));
    absl::StatusOr<MemoryPlan> plan = PlanMemory(p);
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (size_t a = 0; a < p.buffers.size(); ++a) {
      if (plan->offsets[a] < 0) continue;
      EXPECT_EQ(plan->offsets[a] % kArenaAlignment, 0);
      const int64_t a_end = plan->offsets[a] + 4 * *p.buffers[a].StorageSize();
      EXPECT_LE(a_end, plan->arena_bytes);
      for (size_t c = a + 1; c < p.buffers.size(); ++c) {
        if (plan->offsets[c] < 0) continue;
        const bool live_together = plan->first_use[a] <= plan->last_use[c] &&
                                   plan->first_use[c] <= plan->last_use[a];
        const int64_t c_end = plan->offsets[c] + 4 * *p.buffers[c].StorageSize();
        const bool bytes_overlap = plan->offsets[a] < c_end && plan->offsets[c] < a_end;
        EXPECT_FALSE(live_together && bytes_overlap)
            << p.buffers[a].name << " and " << p.buffers[c].name;
      }
    }
    EXPECT_LE(plan->arena_bytes, plan->intermediate_bytes);
  }
}

TEST(PlanMemory, InPlacePairSharesOnePlace) {
  // k1 reads t0 last and writes t1 first: one place, live over [0, 2].
  LoopProgram p = Chain({100, 100, 100, 100});
  const int32_t t0 = p.FindBuffer("t0"), t1 = p.FindBuffer("t1");
  absl::StatusOr<MemoryPlan> plan = PlanMemory(p, {.share = true, .in_place = {{1, t0, t1}}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->offsets[t0], plan->offsets[t1]);
  ASSERT_EQ(plan->shared_in_place.size(), 1u);
  EXPECT_EQ(plan->shared_in_place[0].kernel, 1);
  // t2 is alive with t1 (kernel 2); t3 only after it: still two slots.
  EXPECT_NE(plan->offsets[p.FindBuffer("t2")], plan->offsets[t1]);
  EXPECT_EQ(plan->arena_bytes, 2 * 448);
  EXPECT_EQ(plan->intermediate_bytes, 4 * 448);
}

TEST(PlanMemory, InPlacePairsThatDoNotHoldAreIgnored) {
  LoopProgram p = Chain({100, 100, 200});
  const int32_t t0 = p.FindBuffer("t0"), t1 = p.FindBuffer("t1"), t2 = p.FindBuffer("t2");
  const int32_t x = p.FindBuffer("x");
  absl::StatusOr<MemoryPlan> plan = PlanMemory(
      p, {.share = true,
          .in_place = {{0, t0, t1},     // t0 is read after kernel 0
                       {1, t0, t2},     // t2 is first written by kernel 2
                       {2, t1, t2},     // different sizes
                       {0, x, t0},      // x is not an intermediate
                       {1, t1, t1},     // one buffer
                       {1, 99, t1}}});  // not a buffer
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->shared_in_place.empty());
  EXPECT_NE(plan->offsets[t0], plan->offsets[t1]);
  EXPECT_NE(plan->offsets[t1], plan->offsets[t2]);
  // Without sharing, pairs change nothing.
  absl::StatusOr<MemoryPlan> eager = PlanMemory(p, {.share = false, .in_place = {{1, t0, t1}}});
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_TRUE(eager->shared_in_place.empty());
  EXPECT_EQ(eager->arena_bytes, eager->intermediate_bytes);
}

TEST(PlanMemory, InPlaceChainsOverlapOnlyAtTheirHandOffs) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> sizes;
    for (int k = 0; k < 12; ++k) sizes.push_back(1 + rng() % 3 * 64);
    LoopProgram p = Chain(sizes);
    // A kernel late in the program reads t1: t1 is not dead after k2.
    const int32_t z = p.AddBuffer("z", DType::kF32, {1}, BufferKind::kOutput);
    KernelBuilder b(&p, "late", {1});
    b.Store(z, b.i(0), b.Load(p.FindBuffer("t1"), b.i(0)));
    MemoryPlanOptions options;
    for (int k = 1; k < 12; ++k) {
      options.in_place.push_back({k, p.FindBuffer("t" + std::to_string(k - 1)),
                                  p.FindBuffer("t" + std::to_string(k))});
    }
    absl::StatusOr<MemoryPlan> plan = PlanMemory(p, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (const InPlaceUse& u : plan->shared_in_place) {
      EXPECT_NE(p.buffers[u.input].name, "t1");
      EXPECT_EQ(sizes[u.kernel - 1], sizes[u.kernel]);
      EXPECT_EQ(plan->offsets[u.input], plan->offsets[u.output]);
    }
    for (size_t a = 0; a < p.buffers.size(); ++a) {
      if (plan->offsets[a] < 0) continue;
      const int64_t a_end = plan->offsets[a] + 4 * *p.buffers[a].StorageSize();
      EXPECT_LE(a_end, plan->arena_bytes);
      for (size_t c = a + 1; c < p.buffers.size(); ++c) {
        if (plan->offsets[c] < 0) continue;
        const bool live_together = plan->first_use[a] <= plan->last_use[c] &&
                                   plan->first_use[c] <= plan->last_use[a];
        const int64_t c_end = plan->offsets[c] + 4 * *p.buffers[c].StorageSize();
        const bool bytes_overlap = plan->offsets[a] < c_end && plan->offsets[c] < a_end;
        if (!live_together || !bytes_overlap) continue;
        const bool hand_off = std::any_of(
            plan->shared_in_place.begin(), plan->shared_in_place.end(),
            [&](const InPlaceUse& u) {
              return u.input == static_cast<int32_t>(a) && u.output == static_cast<int32_t>(c);
            });
        EXPECT_TRUE(hand_off) << p.buffers[a].name << " and " << p.buffers[c].name;
      }
    }
  }
}

TEST(PlanMemory, RejectsKernelsUsingUnknownBuffers) {
  LoopProgram p = Chain({4});
  ir::loop::Kernel ext;
  ext.name = "bad";
  ext.kind = ir::loop::Kernel::Kind::kExtern;
  ext.call.inputs = {99};
  p.kernels.push_back(ext);
  absl::StatusOr<MemoryPlan> plan = PlanMemory(p);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("bad"), std::string::npos);
}

TEST(CheckMemoryBudget, RefusesAFootprintOverTheLimit) {
  MemoryFootprint planned;
  planned.arena_bytes = 1000;
  planned.constant_bytes = 200;
  planned.prepacked_bytes = 30;
  EXPECT_EQ(planned.total(), 1230);
  EXPECT_TRUE(CheckMemoryBudget("m", planned, 0).ok());  // no budget
  EXPECT_TRUE(CheckMemoryBudget("m", planned, 1230).ok());
  EXPECT_TRUE(CheckMemoryBudget("m", planned, 1 << 30).ok());
  const absl::Status over = CheckMemoryBudget("m", planned, 1229);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.message(),
            "model 'm' needs 1230 bytes (arena 1000 + constants 200 + prepacked weights 30), "
            "over its memory limit of 1229 bytes");
  // Before prepacking the total is a lower bound, and says so.
  planned.prepacked_bytes = 0;
  planned.prepacked_known = false;
  EXPECT_TRUE(CheckMemoryBudget("m", planned, 1200).ok());
  const absl::Status early = CheckMemoryBudget("m", planned, 1199);
  EXPECT_EQ(early.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(early.message(),
            "model 'm' needs at least 1200 bytes before its weights are prepacked (arena 1000 + "
            "constants 200), over its memory limit of 1199 bytes");
}

}  // namespace
}  // namespace kiln::runtime
