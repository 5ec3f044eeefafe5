// File: passes/loop/demote_index.cc — see demote_index.h.
#include "passes/loop/demote_index.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "ir/loop/index_expr.h"
#include "ir/loop/module.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::loop::Interval;
using ir::loop::Kernel;
using ir::loop::Op;
using ir::loop::OpCode;

using Wide = __int128;
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

// Exact bounds of an integer op's value, when known to fit int64.
using Range = std::optional<Interval>;

Range FromWide(Wide lo, Wide hi) {
  if (lo < std::numeric_limits<int64_t>::min() || hi > std::numeric_limits<int64_t>::max()) {
    return std::nullopt;
  }
  return Interval{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

bool FitsI32(const Range& r) { return r.has_value() && r->lo >= kI32Min && r->hi <= kI32Max; }

// The values `op` can take, from its operands' ranges; nullopt when unknown
// (loads, reductions, anything but the arithmetic demote-index handles).
Range RangeOf(const Op& op, const std::vector<Range>& ranges,
              const std::vector<int64_t>& extents) {
  auto arg = [&](int j) -> const Range& { return ranges[op.args[j]]; };
  switch (op.code) {
    case OpCode::kIndex: {
      const Interval r = ir::loop::ValueRange(op.index, extents);
      // ValueRange uses the int64 extremes for "unbounded".
      if (r.lo == std::numeric_limits<int64_t>::min() ||
          r.hi == std::numeric_limits<int64_t>::max()) {
        return std::nullopt;
      }
      return r;
    }
    case OpCode::kConstant:
      return Interval{op.ivalue, op.ivalue};
    case OpCode::kAdd:
    case OpCode::kSub:
    case OpCode::kMul:
    case OpCode::kMin:
    case OpCode::kMax: {
      if (!arg(0) || !arg(1)) return std::nullopt;
      const Wide al = arg(0)->lo, ah = arg(0)->hi, bl = arg(1)->lo, bh = arg(1)->hi;
      switch (op.code) {
        case OpCode::kAdd: return FromWide(al + bl, ah + bh);
        case OpCode::kSub: return FromWide(al - bh, ah - bl);
        case OpCode::kMin: return FromWide(std::min(al, bl), std::min(ah, bh));
        case OpCode::kMax: return FromWide(std::max(al, bl), std::max(ah, bh));
        default: {
          const Wide c[4] = {al * bl, al * bh, ah * bl, ah * bh};
          return FromWide(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
        }
      }
    }
    case OpCode::kNeg:
      if (!arg(0)) return std::nullopt;
      return FromWide(-Wide(arg(0)->hi), -Wide(arg(0)->lo));
    case OpCode::kAbs: {
      if (!arg(0)) return std::nullopt;
      const Wide lo = arg(0)->lo, hi = arg(0)->hi;
      if (lo >= 0) return FromWide(lo, hi);
      if (hi <= 0) return FromWide(-hi, -lo);
      return FromWide(0, std::max(-lo, hi));
    }
    case OpCode::kSelect:
      if (!arg(1) || !arg(2)) return std::nullopt;
      return Interval{std::min(arg(1)->lo, arg(2)->lo), std::max(arg(1)->hi, arg(2)->hi)};
    default:
      return std::nullopt;
  }
}

// Ops whose i64 result demote-index may compute in i32 (given the ranges).
bool DemotableCode(OpCode c) {
  switch (c) {
    case OpCode::kIndex: case OpCode::kConstant: case OpCode::kAdd: case OpCode::kSub:
    case OpCode::kMul: case OpCode::kNeg: case OpCode::kAbs: case OpCode::kMin:
    case OpCode::kMax: case OpCode::kSelect:
      return true;
    default:
      return false;
  }
}

bool IsComparison(OpCode c) {
  return c == OpCode::kEq || c == OpCode::kNe || c == OpCode::kLt || c == OpCode::kLe ||
         c == OpCode::kGt || c == OpCode::kGe;
}

}  // namespace

std::vector<bool> DemotableOps(const Kernel& k) {
  const size_t n = k.body.size();
  std::vector<bool> demote(n, false);
  if (k.kind != Kernel::Kind::kLoop) return demote;
  const std::vector<int64_t> extents = k.VarExtents();
  std::vector<Range> ranges(n);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = k.body[i];
    if (!op.has_result() || op.dtype != DType::kI64) continue;
    ranges[i] = RangeOf(op, ranges, extents);
  }
  // Candidates: i64 results of the arithmetic above whose value and integer
  // operands' values fit int32.
  for (size_t i = 0; i < n; ++i) {
    const Op& op = k.body[i];
    if (op.dtype != DType::kI64 || !DemotableCode(op.code) || !FitsI32(ranges[i])) continue;
    demote[i] = true;
  }
  // Operands first (a candidate needs demoted integer operands), then users
  // (each must take the i32 value as it took the i64 one); repeat until
  // nothing more is dropped.
  std::vector<std::vector<int>> users(n);
  for (size_t i = 0; i < n; ++i) {
    for (int a : k.body[i].args) users[a].push_back(static_cast<int>(i));
  }
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (!demote[i]) continue;
      const Op& op = k.body[i];
      bool ok = true;
      for (size_t j = op.code == OpCode::kSelect ? 1 : 0; j < op.args.size(); ++j) {
        ok = ok && demote[op.args[j]];
      }
      for (int u : users[i]) {
        if (!ok) break;
        const Op& user = k.body[u];
        if (demote[u]) continue;
        if (IsComparison(user.code)) {
          ok = demote[user.args[0]] && demote[user.args[1]];
        } else if (user.code == OpCode::kCast) {
          ok = true;
        } else if (user.code == OpCode::kLoadIndirect) {
          ok = user.args[0] == static_cast<int>(i);
        } else if (user.code == OpCode::kStoreIndirect) {
          ok = user.args[1] == static_cast<int>(i) && user.args[0] != static_cast<int>(i);
        } else {
          ok = false;
        }
      }
      if (!ok) {
        demote[i] = false;
        changed = true;
      }
    }
  }
  return demote;
}

absl::StatusOr<bool> DemoteIndex::Run(ir::loop::LoopModule* program) {
  bool changed = false;
  for (Kernel& k : program->program.kernels) {
    const std::vector<bool> demote = DemotableOps(k);
    for (size_t i = 0; i < demote.size(); ++i) {
      if (!demote[i]) continue;
      k.body[i].dtype = DType::kI32;
      changed = true;
    }
  }
  return changed;
}

}  // namespace kiln::passes
