// File: runtime/memory_plan.h — assigns every intermediate buffer of a loop
// program an offset in one arena, reusing bytes between buffers whose live
// ranges (first kernel touching them .. last kernel touching them) are
// disjoint.
//
//   KILN_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(program, {}));
//   char* storage_of_b = arena + plan.offsets[b];   // plan.offsets[b] >= 0
#ifndef KILN_RUNTIME_MEMORY_PLAN_H_
#define KILN_RUNTIME_MEMORY_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/loop/loop_ir.h"

namespace kiln::runtime {

// Every arena offset is a multiple of this (cache line; AVX-512 vectors).
inline constexpr int64_t kArenaAlignment = 64;

// Kernel `kernel` may write its output buffer `output` over its input
// buffer `input` (a library call's sum post-op accumulates in place).
struct InPlaceUse {
  int kernel = -1;
  int32_t input = -1;
  int32_t output = -1;
};

struct MemoryPlanOptions {
  // false: every intermediate gets its own bytes (eager mode, ablations).
  bool share = true;
  // With `share`: pairs that get one place when `input` is last touched by
  // `kernel`, `output` first touched by it, both are intermediates of the
  // same size. Other pairs are ignored.
  std::vector<InPlaceUse> in_place;
};

struct MemoryPlan {
  // Per buffer index: byte offset in the arena, or -1 for buffers that live
  // outside it (inputs, outputs, constants, intermediates nobody touches).
  std::vector<int64_t> offsets;
  int64_t arena_bytes = 0;
  // Sum of the planned buffers' sizes (what one allocation per buffer costs).
  int64_t intermediate_bytes = 0;
  // Per buffer index: the first and last kernel touching it (-1 if none).
  std::vector<int> first_use;
  std::vector<int> last_use;
  // The MemoryPlanOptions::in_place pairs that got one place.
  std::vector<InPlaceUse> shared_in_place;
};

// Buffers every kernel reads and writes, as buffer indices (loads, indirect
// loads and extern inputs are reads; stores and extern outputs writes).
struct KernelAccess {
  std::vector<int32_t> reads;
  std::vector<int32_t> writes;
};
KernelAccess AccessesOf(const ir::loop::Kernel& kernel);

// Greedy by size (largest first, lowest offset that fits among the
// already placed buffers whose live ranges overlap); buffers joined by
// in-place pairs are placed as one, live over the union of their ranges.
// InvalidArgument when a buffer's storage size is unknown or the arena would
// overflow int64.
absl::StatusOr<MemoryPlan> PlanMemory(const ir::loop::LoopProgram& program,
                                      const MemoryPlanOptions& options = {});

// What one model holds in memory at run time: the arena of one execution
// context, the constant weights and oneDNN's prepacked copies.
struct MemoryFootprint {
  int64_t arena_bytes = 0;
  int64_t constant_bytes = 0;
  int64_t prepacked_bytes = 0;
  // False before the library calls are built: prepacked_bytes is not known
  // yet, and total() is a lower bound.
  bool prepacked_known = true;
  int64_t total() const { return arena_bytes + constant_bytes + prepacked_bytes; }
};

// OK when `limit_bytes` is 0 (no budget) or the footprint fits in it; else
// ResourceExhausted naming `model`, the planned bytes (each part and their
// sum; "at least" before prepacking) and the budget
// (CompileOptions::memory_limit_bytes).
absl::Status CheckMemoryBudget(absl::string_view model, const MemoryFootprint& planned,
                               int64_t limit_bytes);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_MEMORY_PLAN_H_
