// Arena offsets for a loop program's intermediates (runtime/memory_plan.h).
#include "runtime/memory_plan.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/message.h"

namespace kiln::runtime {

using ir::loop::Buffer;
using ir::loop::BufferKind;
using ir::loop::Kernel;
using ir::loop::OpCode;

KernelAccess AccessesOf(const Kernel& kernel) {
  KernelAccess a;
  if (kernel.kind == Kernel::Kind::kExtern) {
    a.reads.assign(kernel.call.inputs.begin(), kernel.call.inputs.end());
    a.writes.assign(kernel.call.outputs.begin(), kernel.call.outputs.end());
    return a;
  }
  for (const ir::loop::Op& op : kernel.body) {
    if (op.buffer < 0) continue;
    (op.code == OpCode::kStore ? a.writes : a.reads).push_back(op.buffer);
  }
  return a;
}

namespace {

int64_t AlignUp(int64_t n) {
  return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

}  // namespace

absl::StatusOr<MemoryPlan> PlanMemory(const ir::loop::LoopProgram& program,
                                      const MemoryPlanOptions& options) {
  const size_t n = program.buffers.size();
  MemoryPlan plan;
  plan.offsets.assign(n, -1);
  plan.first_use.assign(n, -1);
  plan.last_use.assign(n, -1);
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const KernelAccess a = AccessesOf(program.kernels[k]);
    for (const auto* list : {&a.reads, &a.writes}) {
      for (int32_t b : *list) {
        if (b < 0 || static_cast<size_t>(b) >= n) {
          return absl::InvalidArgumentError(absl::StrCat(
              "kernel '", program.kernels[k].name, "' uses buffer ", b,
              " of a program with ", n, " buffers"));
        }
        if (plan.first_use[b] < 0) plan.first_use[b] = static_cast<int>(k);
        plan.last_use[b] = static_cast<int>(k);
      }
    }
  }
  struct Item {
    int32_t buffer;  // the group's first member (its root)
    int64_t bytes;
    int first, last;  // the group's live range
  };
  std::vector<int64_t> bytes_of(n, -1);
  for (size_t b = 0; b < n; ++b) {
    const Buffer& buf = program.buffers[b];
    if (buf.kind != BufferKind::kIntermediate || plan.first_use[b] < 0) continue;
    const std::optional<int64_t> elems = buf.StorageSize();
    const int64_t esize = static_cast<int64_t>(ir::DTypeSize(buf.dtype));
    if (!elems.has_value() || esize <= 0 ||
        *elems > (std::numeric_limits<int64_t>::max() / 2) / esize) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer '", EscapeForMessage(buf.name), "' has no valid storage size"));
    }
    bytes_of[b] = AlignUp(std::max<int64_t>(*elems * esize, 1));
    // Offsets stay below this sum, so they cannot overflow either.
    if (plan.intermediate_bytes > std::numeric_limits<int64_t>::max() / 2 - bytes_of[b]) {
      return absl::InvalidArgumentError("intermediate buffers overflow int64 bytes");
    }
    plan.intermediate_bytes += bytes_of[b];
  }
  // In-place pairs join groups (union by smaller root: deterministic).
  std::vector<int32_t> root(n);
  for (size_t b = 0; b < n; ++b) root[b] = static_cast<int32_t>(b);
  auto find = [&](int32_t b) {
    while (root[b] != b) b = root[b] = root[root[b]];
    return b;
  };
  if (options.share) {
    for (const InPlaceUse& u : options.in_place) {
      const auto valid = [&](int32_t b) {
        return b >= 0 && static_cast<size_t>(b) < n && bytes_of[b] >= 0;
      };
      if (!valid(u.input) || !valid(u.output) || u.input == u.output ||
          bytes_of[u.input] != bytes_of[u.output] || plan.last_use[u.input] != u.kernel ||
          plan.first_use[u.output] != u.kernel) {
        continue;
      }
      const int32_t a = find(u.input), b = find(u.output);
      if (a == b) continue;
      root[std::max(a, b)] = std::min(a, b);
      plan.shared_in_place.push_back(u);
    }
  }
  std::vector<Item> items;
  std::vector<int> item_of(n, -1);
  for (size_t b = 0; b < n; ++b) {
    if (bytes_of[b] < 0) continue;
    const int32_t r = find(static_cast<int32_t>(b));
    if (item_of[r] < 0) {
      item_of[r] = static_cast<int>(items.size());
      items.push_back({r, bytes_of[b], plan.first_use[b], plan.last_use[b]});
    }
    Item& it = items[item_of[r]];
    it.bytes = std::max(it.bytes, bytes_of[b]);
    it.first = std::min(it.first, plan.first_use[b]);
    it.last = std::max(it.last, plan.last_use[b]);
  }
  // Largest first; ties by first use so the plan is deterministic.
  std::stable_sort(items.begin(), items.end(), [&](const Item& x, const Item& y) {
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return x.first < y.first;
  });
  std::vector<Item> placed;
  std::vector<int64_t> group_offset(n, -1);
  for (const Item& it : items) {
    int64_t offset = 0;
    if (!options.share) {
      offset = plan.arena_bytes;
    } else {
      // Address ranges of live-overlapping placed buffers, by offset.
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (const Item& p : placed) {
        const bool overlap = p.first <= it.last && it.first <= p.last;
        if (overlap) busy.push_back({group_offset[p.buffer], group_offset[p.buffer] + p.bytes});
      }
      std::sort(busy.begin(), busy.end());
      for (const auto& [begin, end] : busy) {
        if (offset + it.bytes <= begin) break;
        offset = std::max(offset, end);
      }
    }
    group_offset[it.buffer] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + it.bytes);
    placed.push_back(it);
  }
  for (size_t b = 0; b < n; ++b) {
    if (bytes_of[b] < 0) continue;
    plan.offsets[b] = group_offset[find(static_cast<int32_t>(b))];
  }
  return plan;
}

absl::Status CheckMemoryBudget(absl::string_view model, const MemoryFootprint& planned,
                               int64_t limit_bytes) {
  if (limit_bytes <= 0 || planned.total() <= limit_bytes) return absl::OkStatus();
  if (!planned.prepacked_known) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", model, "' needs at least ", planned.total(), " bytes before its weights are "
        "prepacked (arena ", planned.arena_bytes, " + constants ", planned.constant_bytes,
        "), over its memory limit of ", limit_bytes, " bytes"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "model '", model, "' needs ", planned.total(), " bytes (arena ", planned.arena_bytes,
      " + constants ", planned.constant_bytes, " + prepacked weights ",
      planned.prepacked_bytes, "), over its memory limit of ", limit_bytes, " bytes"));
}

}  // namespace kiln::runtime
