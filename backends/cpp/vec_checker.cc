// The vectorization checker (see vec_checker.h): a dependence analysis of
// the kernel body, a vector-form check of every op for each candidate
// vector variable, and the plan (variable, tiling, inner reductions, loop
// order, parallel loop).
#include "backends/cpp/vec_checker.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "backends/cpp/op_forms.h"

namespace kiln::backends::cpp {
namespace {

// The buffer indices a per-kernel map holds, in increasing order.
template <class Map>
std::vector<int32_t> SortedKeys(const Map& m) {
  std::vector<int32_t> keys;
  keys.reserve(m.size());
  for (const auto& entry : m) keys.push_back(entry.first);
  std::sort(keys.begin(), keys.end());
  return keys;
}

using ir::DType;
using ir::loop::Buffer;
using ir::loop::IndexExpr;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;
using ir::loop::OpCode;
using ir::loop::ReduceKind;
using ir::loop::SanitizeIdentifier;
using ir::loop::VecStatus;


// ---------------------------------------------------------------------------
// Analysis.

// Dtypes with a vector form: values of f32, f16 and bf16 in f32 lanes, of
// i32, i8 and u8 in i32 lanes, bool as masks; their buffers load and store
// as vectors (narrow ones widened and narrowed on the way).
bool IsVecDType(DType t) {
  return t == DType::kF32 || t == DType::kI32 || t == DType::kBool ||
         ir::IsLowPrecisionFloat(t) || t == DType::kI8 || t == DType::kU8;
}

// i8 / u8 values in i32 lanes: loads, stores, casts and selects keep them in
// range, arithmetic is wrapped after every op (the emitter's KilnWrapI8 /
// KilnWrapU8); reductions over them stay scalar.
bool IsNarrowInt(DType t) { return t == DType::kI8 || t == DType::kU8; }

bool IsArgReduce(ReduceKind k) {
  return k == ReduceKind::kArgMax || k == ReduceKind::kArgMin ||
         k == ReduceKind::kArgMaxLast || k == ReduceKind::kArgMinLast;
}

uint64_t Bit(int var) { return VarBit(var); }

// Whether k has f64 values and every value and accessed buffer is f64 or
// f32, with no index or indirect op (VecAnalysis::f64).
bool IsF64Kernel(const LoopProgram& p, const Kernel& k) {
  auto f = [](DType t) { return t == DType::kF64 || t == DType::kF32; };
  bool any_f64 = false;
  for (const Op& op : k.body) {
    if (op.code == OpCode::kIndex || op.code == OpCode::kLoadIndirect ||
        op.code == OpCode::kStoreIndirect) {
      return false;
    }
    if (op.is_load() || op.is_store()) {
      if (!f(p.buffers[op.buffer].dtype)) return false;
    }
    if (!op.is_store()) {
      if (!f(op.dtype)) return false;
      any_f64 |= op.dtype == DType::kF64;
    }
  }
  return any_f64;
}

// Whether k may run on f64 lanes although it also has values of other
// dtypes: it has f64 values, accesses only float buffers (f64, f32, f16,
// bf16) and nothing indirectly. Its index, integer and bool ops must not
// depend on the vector variable (they are computed as scalars, once per
// vector step); CheckVectorOp checks that per variable.
bool IsMixedF64Kernel(const LoopProgram& p, const Kernel& k) {
  bool any_f64 = false;
  for (const Op& op : k.body) {
    if (op.code == OpCode::kLoadIndirect || op.code == OpCode::kStoreIndirect) return false;
    if ((op.is_load() || op.is_store()) && !ir::IsFloat(p.buffers[op.buffer].dtype)) {
      return false;
    }
    any_f64 |= op.dtype == DType::kF64;
  }
  return any_f64;
}

// Whether values of `t` have a vector form in kernels analysed as `a` (on
// f64 lanes: every float dtype, f16 and bf16 values held exactly).
bool VecDTypeIn(const VecAnalysis& a, DType t) {
  return a.f64 ? ir::IsFloat(t) : IsVecDType(t);
}

VecAnalysis Analyze(const LoopProgram& p, const Kernel& k) {
  VecAnalysis a;
  a.k = &k;
  a.f64 = IsF64Kernel(p, k);
  a.extents = k.VarExtents();
  const size_t n = k.body.size();
  a.index.resize(n);
  a.deps.assign(n, 0);
  a.rvarying.assign(n, false);
  a.cone.resize(n);
  a.in_cone.assign(n, false);
  for (int64_t e : k.ranges) a.empty |= e == 0;
  const int nv = k.num_vars();
  const int first_r = static_cast<int>(k.ranges.size());
  uint64_t rmask = 0;
  for (int v = first_r; v < nv && v < 64; ++v) rmask |= Bit(v);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = k.body[i];
    const bool indexed = op.has_index();
    if (indexed) a.index[i] = ir::loop::Simplify(op.index, a.extents);
    if (op.code == OpCode::kReduce) {
      a.deps[i] = a.deps[op.args[0]] & ~rmask;
      continue;
    }
    for (int32_t arg : op.args) {
      a.deps[i] |= a.deps[arg];
      a.rvarying[i] = a.rvarying[i] || a.rvarying[arg];
    }
    for (int v = 0; indexed && v < nv && v < 64; ++v) {
      if (a.index[i].UsesVar(v)) {
        a.deps[i] |= Bit(v);
        if (v >= first_r) a.rvarying[i] = true;
      }
    }
  }
  a.lane_index.assign(n, false);
  a.lane_cast_src.assign(n, false);
  std::vector<int> uses(n, 0), index_uses(n, 0), cast_uses(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = k.body[i];
    for (size_t j = 0; j < op.args.size(); ++j) {
      ++uses[op.args[j]];
      if (op.code == OpCode::kLoadIndirect && j == 0) ++index_uses[op.args[j]];
      if (op.code == OpCode::kCast && IsVecDType(op.dtype)) ++cast_uses[op.args[j]];
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const Op& op = k.body[i];
    a.lane_cast_src[i] = op.code == OpCode::kLoad && !IsVecDType(op.dtype) &&
                         uses[i] > 0 && uses[i] == cast_uses[i];
  }
  for (size_t i = 0; i < n; ++i) {
    const Op& op = k.body[i];
    a.lane_index[i] = op.code == OpCode::kLoad && ir::IsInteger(op.dtype) &&
                      uses[i] > 0 && uses[i] == index_uses[i];
  }
  std::vector<int> float_casts(n, 0);
  for (const Op& op : k.body) {
    if (op.code == OpCode::kCast && ir::IsFloat(op.dtype)) ++float_casts[op.args[0]];
  }
  // i64 values, or i32 ones that cannot wrap: the interpreter's value is the
  // index expression's.
  a.float_cast_only.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = k.body[i];
    if (op.code != OpCode::kIndex || uses[i] == 0 || uses[i] != float_casts[i]) continue;
    if (op.dtype == DType::kI32) {
      const ir::loop::Interval r = ir::loop::ValueRange(a.index[i], a.extents);
      a.float_cast_only[i] = r.lo >= std::numeric_limits<int32_t>::min() &&
                             r.hi <= std::numeric_limits<int32_t>::max();
    } else {
      a.float_cast_only[i] = op.dtype == DType::kI64;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (k.body[i].code != OpCode::kReduce) continue;
    std::vector<bool> mark(n, false);
    std::vector<int32_t> stack = {k.body[i].args[0]};
    while (!stack.empty()) {
      const int32_t j = stack.back();
      stack.pop_back();
      if (!a.rvarying[j] || mark[j]) continue;
      mark[j] = true;
      for (int32_t arg : k.body[j].args) stack.push_back(arg);
    }
    for (size_t j = 0; j < i; ++j) {
      if (mark[j]) {
        a.cone[i].push_back(static_cast<int>(j));
        a.in_cone[j] = true;
      }
    }
  }
  // Hazards: reordering (hoisting, vector lanes) is only sound when no buffer
  // is both read and written and no buffer is stored twice.
  if (nv > 64) {
    a.hazard = "more than 64 loop variables";
    return a;
  }
  for (size_t i = 0; i < n; ++i) {
    if (k.body[i].code == OpCode::kStoreIndirect) {
      a.hazard = absl::StrCat("store_indirect op #", i,
                              ": data-dependent store computed point by point in "
                              "iteration order");
      return a;
    }
  }
  // Counted per buffer the kernel touches, in buffer order (a count per
  // buffer of the program made emission quadratic in the kernel count).
  absl::flat_hash_map<int32_t, std::pair<int, int>> counts;  // loads, stores
  for (const Op& op : k.body) {
    if (op.is_load()) ++counts[op.buffer].first;
    if (op.code == OpCode::kStore) ++counts[op.buffer].second;
  }
  for (int32_t b : SortedKeys(counts)) {
    const auto [loads, stores] = counts[b];
    if (stores > 0 && loads > 0) {
      a.hazard = absl::StrCat("kernel reads buffer '", NamePart(p.buffers[b].name),
                              "' that it writes");
      break;
    }
    if (stores > 1) {
      a.hazard = absl::StrCat("kernel stores into buffer '", NamePart(p.buffers[b].name),
                              "' more than once");
      break;
    }
  }
  return a;
}

struct VecCheck {
  std::string failure;              // empty: vectorizable
  int failure_op = -1;              // the op `failure` names
  std::string failure_why;          // `failure` without the op's name
  // Contiguous loads 2, gathered -1; contiguous stores 4, scattered -3 (the
  // store's contiguous variable wins over a few small contiguous loads, such
  // as per-channel parameters); reduction-varying accesses count 4 times
  // (they run at every point of the reduction space).
  int score = 0;
  std::vector<std::string> notes;   // gathered accesses
};

std::string VarLabel(const Kernel& k, int var) { return k.VarName(var); }

// Vector steps over `var` start at multiples of the lane count, which
// divides kBlock on every target (1, 4, 8 or 16 32-bit lanes).
constexpr int64_t kBlock = 16;
// Lanes of the widest vector any target has (64 bytes of 8-bit lanes): a
// bound on how far past its last value a vector step may compute.
constexpr int64_t kMaxVectorLanes = 64;
// A reduction that does not depend on the kernel's vector variable is
// vectorized along its last reduction variable only from this extent on
// (the f32 lanes of the widest target): shorter ones are a single masked
// step and a horizontal combine, slower than the scalar loop
// (docs/decisions/0021-short-reductions-stay-scalar.md). In a kernel
// without a vector variable, reductions over fewer elements per output than
// this in all (one vector step's worth) vectorize along their own variable
// only when no iteration variable vectorizes: per-lane accumulators over a
// wide variable beat a step and a horizontal combine per output even with
// gathered loads (docs/decisions/0064-short-reductions-vectorize-over-outputs.md).
constexpr int64_t kMinInnerReduceExtent = 16;

struct LaneForm {
  bool ok = true;
  int64_t step = 0;      // e(v + l) == e(v) + step * l for the lanes l of a step
  bool aligned = false;  // e(v) is a lane-aligned offset modulo kBlock
};

// How `e` changes across the lanes of one vector step over `var` when it is
// not affine in var: floor divisions and modulos by multiples of kBlock of
// aligned arguments keep every lane in one chunk (the flattened heads of an
// attention output: (i // 64) * 4096 + i % 64 is contiguous within steps).
LaneForm LaneFormOf(const IndexExpr& e, int var) {
  LaneForm r;
  switch (e.kind()) {
    case IndexExpr::Kind::kConst:
      r.aligned = e.value() % kBlock == 0;
      return r;
    case IndexExpr::Kind::kVar:
      r.step = e.var() == var ? 1 : 0;
      r.aligned = e.var() == var;
      return r;
    case IndexExpr::Kind::kAdd:
      r.aligned = true;
      for (const IndexExpr& o : e.operands()) {
        const LaneForm f = LaneFormOf(o, var);
        if (!f.ok) return f;
        r.step += f.step;
        r.aligned = r.aligned && f.aligned;
      }
      return r;
    case IndexExpr::Kind::kMul: {
      int64_t k = 1;
      std::optional<LaneForm> varying;
      bool any_aligned = false;
      for (const IndexExpr& o : e.operands()) {
        if (o.is_const()) {
          k *= o.value();
          continue;
        }
        const LaneForm f = LaneFormOf(o, var);
        if (!f.ok) return f;
        any_aligned |= f.aligned;
        if (f.step != 0) {
          if (varying.has_value()) return LaneForm{false};
          varying = f;
        }
      }
      r.step = varying.has_value() ? varying->step * k : 0;
      r.aligned = any_aligned || k % kBlock == 0;
      return r;
    }
    case IndexExpr::Kind::kFloorDiv:
    case IndexExpr::Kind::kMod: {
      if (!e.UsesVar(var)) return r;
      const IndexExpr& d = e.operand(1);
      const LaneForm x = LaneFormOf(e.operand(0), var);
      if (!x.ok || x.step != 1 || !x.aligned || !d.is_const() || d.value() <= 0 ||
          d.value() % kBlock != 0) {
        return LaneForm{false};
      }
      if (e.kind() == IndexExpr::Kind::kFloorDiv) return r;
      r.step = 1;
      r.aligned = true;
      return r;
    }
    case IndexExpr::Kind::kMin:
    case IndexExpr::Kind::kMax:
      if (e.UsesVar(var)) return LaneForm{false};
      return r;
  }
  return LaneForm{false};
}

// Contiguous in var over the lanes of every vector step, though not affine.
bool BlockContiguous(const IndexExpr& e, int var) {
  const LaneForm f = LaneFormOf(e, var);
  return f.ok && f.step == 1;
}

}  // namespace

std::string NamePart(absl::string_view raw) {
  constexpr size_t kMaxNamePart = 48;
  std::string s = SanitizeIdentifier(raw);
  if (s.size() > kMaxNamePart) s.resize(kMaxNamePart);
  return s;
}

std::optional<int64_t> IotaIndexStride(const VecAnalysis& a, int op, int var) {
  const std::optional<int64_t> stride = ir::loop::StrideOf(a.index[op], var);
  if (!stride.has_value()) return std::nullopt;
  std::vector<int64_t> extents = a.extents;
  extents[var] += kMaxVectorLanes;
  const ir::loop::Interval r = ir::loop::ValueRange(a.index[op], extents);
  constexpr int64_t kLo = std::numeric_limits<int32_t>::min();
  constexpr int64_t kHi = std::numeric_limits<int32_t>::max();
  if (r.lo < kLo || r.hi > kHi || *stride < kLo || *stride > kHi) return std::nullopt;
  return stride;
}

std::optional<int64_t> HardwareGatherStride(const LoopProgram& p, const VecAnalysis& a, int op,
                                            int var) {
  const Op& o = a.k->body[op];
  if (o.code != OpCode::kLoad && o.code != OpCode::kStore) return std::nullopt;
  if (a.lane_index[op] || a.lane_cast_src[op]) return std::nullopt;
  const DType t = p.buffers[o.buffer].dtype;
  if ((t != DType::kF32 && t != DType::kI32) || a.f64) return std::nullopt;
  const std::optional<int64_t> s = ir::loop::StrideOf(a.index[op], var);
  if (!s.has_value() || *s == 0 || *s == 1) return std::nullopt;
  constexpr int64_t kLimit = std::numeric_limits<int32_t>::max() / kMaxVectorLanes;
  if (*s > kLimit || *s < -kLimit) return std::nullopt;
  return s;
}

bool HardwareIndirectGather(const LoopProgram& p, const VecAnalysis& a, int op, int var) {
  const Op& o = a.k->body[op];
  if (o.code != OpCode::kLoadIndirect || a.f64 || var < 0) return false;
  const DType t = p.buffers[o.buffer].dtype;
  if (t != DType::kF32 && t != DType::kI32) return false;
  const int n = o.args[0];
  if (!(a.deps[n] & Bit(var)) || a.lane_index[n] || a.k->body[n].dtype != DType::kI32) {
    return false;
  }
  const std::optional<int64_t> s = ir::loop::StrideOf(a.index[op], var);
  if (!s.has_value() || *s != 0) return false;
  constexpr int64_t kLo = std::numeric_limits<int32_t>::min();
  constexpr int64_t kHi = std::numeric_limits<int32_t>::max();
  if (o.extent < 1 || o.extent > kHi || o.stride < -kHi || o.stride > kHi) return false;
  const int64_t span = (o.extent - 1) * o.stride;  // |.| < 2^62
  const ir::loop::Interval r = ir::loop::ValueRange(a.index[op], a.extents);
  return r.lo >= 0 && r.hi <= kHi && r.lo + std::min<int64_t>(span, 0) >= kLo &&
         r.hi + std::max<int64_t>(span, 0) <= kHi && span >= kLo && span <= kHi;
}

std::optional<Access> AccessOf(const LoopProgram& p, const VecAnalysis& a, int op, int var) {
  std::optional<int64_t> s = ir::loop::StrideOf(a.index[op], var);
  if (s.has_value() && *s == 1) return Access::kContiguous;
  if (!s.has_value() && BlockContiguous(a.index[op], var)) return Access::kContiguous;
  return Access::kGathered;
}

namespace {

// Whether op `i` (which depends on `var`) has a vector form with `var` as the
// vector variable.
void CheckVectorOp(const LoopProgram& p, const VecAnalysis& a, int i, int var, VecCheck* c) {
  const Kernel& k = *a.k;
  const Op& op = k.body[i];
  const std::string where = absl::StrCat("op #", i, " (", ir::loop::OpCodeName(op.code), ")");
  auto fail = [&](std::string why) {
    if (!c->failure.empty()) return;
    c->failure = absl::StrCat(where, ": ", why);
    c->failure_op = i;
    c->failure_why = std::move(why);
  };
  auto dt = [&](int arg) { return k.body[op.args[arg]].dtype; };
  if (a.lane_index[i] || a.lane_cast_src[i]) return;  // read per lane by their users
  if (op.code == OpCode::kCast && a.lane_cast_src[op.args[0]]) {
    c->score -= 1;
    c->notes.push_back(absl::StrCat("cast op #", i, " converts ", ir::DTypeName(dt(0)),
                                    " buffer '", NamePart(p.buffers[k.body[op.args[0]].buffer].name),
                                    "' lane by lane"));
    return;
  }
  if (op.code == OpCode::kLoadIndirect) {
    const Buffer& b = p.buffers[op.buffer];
    if (!IsVecDType(b.dtype)) {
      return fail(absl::StrCat("buffer dtype ", ir::DTypeName(b.dtype),
                               " is not vectorized"));
    }
    const int n = op.args[0];
    if (a.deps[n] & Bit(var)) {
      if (!a.lane_index[n] && dt(0) != DType::kI32) {
        return fail(absl::StrCat("index operand dtype ", ir::DTypeName(dt(0)),
                                 " is not vectorized"));
      }
      if (HardwareIndirectGather(p, a, i, var)) {
        c->notes.push_back(absl::StrCat("load_indirect op #", i, " gathered in hardware ",
                                        "(data-dependent index in ", VarLabel(k, var), ")"));
        return;
      }
    } else if (b.dtype != DType::kBool && AccessOf(p, a, i, var) == Access::kContiguous) {
      c->score += 2;
      c->notes.push_back(absl::StrCat("load_indirect op #", i, " contiguous in ",
                                      VarLabel(k, var), " (index checked once per row)"));
      return;
    }
    c->score -= 1;
    c->notes.push_back(absl::StrCat("load_indirect op #", i,
                                    " computed per lane (data-dependent index in ",
                                    VarLabel(k, var), ")"));
    return;
  }
  if (op.code == OpCode::kStore || op.code == OpCode::kLoad) {
    const Buffer& b = p.buffers[op.buffer];
    if (!VecDTypeIn(a, b.dtype)) {
      return fail(absl::StrCat("buffer dtype ", ir::DTypeName(b.dtype),
                               " is not vectorized"));
    }
    const bool store = op.code == OpCode::kStore;
    const int weight = a.rvarying[i] ? 4 : 1;
    if (AccessOf(p, a, i, var) == Access::kContiguous) {
      c->score += (store ? 4 : 2) * weight;
      if (!ir::loop::StrideOf(a.index[i], var).has_value()) {
        c->notes.push_back(absl::StrCat(op.code == OpCode::kLoad ? "load of '" : "store to '",
                                        NamePart(b.name), "' contiguous within vector steps of ",
                                        VarLabel(k, var), " (not affine)"));
      }
    } else {
      c->score -= (store ? 3 : 1) * weight;
      std::optional<int64_t> s = ir::loop::StrideOf(a.index[i], var);
      c->notes.push_back(absl::StrCat(
          op.code == OpCode::kLoad ? "gathered load of '" : "scattered store to '",
          NamePart(b.name), "' (",
          s.has_value() ? absl::StrCat("stride ", *s, " in ", VarLabel(k, var))
                        : absl::StrCat("not affine in ", VarLabel(k, var)),
          ")"));
    }
    return;
  }
  if (a.f64 && op.code == OpCode::kIndex) {
    if (!a.float_cast_only[i]) return fail("index op on f64 lanes not read only by casts to float");
    if (!IotaIndexStride(a, i, var).has_value()) {
      c->notes.push_back(absl::StrCat("index op #", i, " computed per lane"));
    }
    return;
  }
  if (a.f64 && op.code == OpCode::kCast && ir::IsFloat(op.dtype) &&
      k.body[op.args[0]].code == OpCode::kIndex) {
    return;  // of an iota on f64 lanes (checked above)
  }
  if (!VecDTypeIn(a, op.dtype)) {
    return fail(absl::StrCat("dtype ", ir::DTypeName(op.dtype), " is not vectorized",
                             op.dtype == DType::kF64 ? " beside other dtypes" : ""));
  }
  for (size_t j = 0; j < op.args.size(); ++j) {
    if (!VecDTypeIn(a, dt(static_cast<int>(j)))) {
      return fail(absl::StrCat("operand dtype ", ir::DTypeName(dt(static_cast<int>(j))),
                               " is not vectorized"));
    }
  }
  if (op.code == OpCode::kReduce && (IsNarrowInt(op.dtype) || IsNarrowInt(dt(0)))) {
    return fail(absl::StrCat(ir::DTypeName(dt(0)), " reduction is not vectorized"));
  }
  switch (op.code) {
    case OpCode::kReduce:
      if (IsArgReduce(op.reduce) || op.reduce == ReduceKind::kWelfordMean ||
          op.reduce == ReduceKind::kWelfordVar) {
        return fail(absl::StrCat(ir::loop::ReduceKindName(op.reduce),
                                 " reductions are not vectorized yet"));
      }
      if (op.dtype == DType::kBool) return fail("bool reduction");
      for (int64_t e : k.reduction_ranges) {
        if (e == 0) return fail("empty reduction");
      }
      return;
    case OpCode::kIndex:
      if (IotaIndexStride(a, i, var).has_value()) return;
      c->notes.push_back(absl::StrCat("index op #", i, " computed per lane"));
      return;
    default:
      return;
  }
}

// Tries to vectorize reduce `i` along the last reduction variable.
VecCheck CheckInnerReduce(const LoopProgram& p, const VecAnalysis& a, int i) {
  VecCheck c;
  const Kernel& k = *a.k;
  if (k.reduction_ranges.empty()) {
    c.failure = "no reduction variable";
    return c;
  }
  const int rv = k.num_vars() - 1;
  if (a.extents[rv] < 2) {
    c.failure = absl::StrCat("reduction extent of ", k.VarName(rv), " below 2");
    return c;
  }
  const Op& op = k.body[i];
  if (op.reduce == ReduceKind::kWelfordMean || op.reduce == ReduceKind::kWelfordVar) {
    // Two vector passes over the reduction space (EmitInnerVectorWelford):
    // the sum gives the mean, then the squared deviations from that mean
    // give the variance; lanes combine in double.
    auto f32_lanes = [](DType t) { return t == DType::kF32 || ir::IsLowPrecisionFloat(t); };
    if (a.f64 || !f32_lanes(op.dtype) || !f32_lanes(k.body[op.args[0]].dtype)) {
      c.failure = absl::StrCat("op #", i, ": ", ir::loop::ReduceKindName(op.reduce),
                               " over ", ir::DTypeName(k.body[op.args[0]].dtype));
      return c;
    }
    for (int64_t e : k.reduction_ranges) {
      if (e == 0) {
        c.failure = absl::StrCat("op #", i, ": empty reduction");
        return c;
      }
    }
    c.notes.push_back(absl::StrCat("reduce #", i, " ", ir::loop::ReduceKindName(op.reduce),
                                   " as vector passes (sum",
                                   op.reduce == ReduceKind::kWelfordVar
                                       ? ", then squared deviations from the mean)"
                                       : ")"));
  } else {
    CheckVectorOp(p, a, i, rv, &c);
  }
  for (int j : a.cone[i]) {
    if (a.deps[j] & Bit(rv)) CheckVectorOp(p, a, j, rv, &c);
  }
  return c;
}

// Loads of op i strided (affine) in the vector variable and contiguous in
// another iteration variable `tile`: candidates for transposed tiles.
bool TileableLoad(const LoopProgram& p, const VecAnalysis& a, int i, int var, int tile) {
  const Op& op = a.k->body[i];
  if (op.code != OpCode::kLoad || a.lane_index[i]) return false;
  const DType t = p.buffers[op.buffer].dtype;
  if ((t != DType::kF32 && t != DType::kI32) || a.f64) return false;
  const std::optional<int64_t> sv = ir::loop::StrideOf(a.index[i], var);
  const std::optional<int64_t> st = ir::loop::StrideOf(a.index[i], tile);
  return sv.has_value() && *sv != 0 && *sv != 1 && st.has_value() && *st == 1;
}

// Picks the variable to tile with (the one the most strided loads are
// contiguous in) for a kernel vectorized over plan->vec_var without
// reductions; records the transposed loads and the status.
void TryTile(const LoopProgram& p, const VecAnalysis& a, VecPlan* plan) {
  const Kernel& k = *a.k;
  const int var = plan->vec_var;
  if (!plan->hoist || !k.reduction_ranges.empty()) return;
  for (size_t i = 0; i < k.body.size(); ++i) {
    if (k.body[i].code == OpCode::kStore && (a.deps[i] & Bit(var)) &&
        AccessOf(p, a, static_cast<int>(i), var) != Access::kContiguous) {
      return;
    }
  }
  int best = -1, best_count = 0;
  for (int t = 0; t < static_cast<int>(k.ranges.size()); ++t) {
    if (t == var || k.ranges[t] < 2) continue;
    int count = 0;
    for (size_t i = 0; i < k.body.size(); ++i) {
      if ((a.deps[i] & Bit(var)) && TileableLoad(p, a, static_cast<int>(i), var, t)) ++count;
    }
    if (count > best_count) {
      best = t;
      best_count = count;
    }
  }
  if (best < 0) return;
  plan->tile_var = best;
  std::vector<std::string> names;
  for (size_t i = 0; i < k.body.size(); ++i) {
    if ((a.deps[i] & Bit(var)) && TileableLoad(p, a, static_cast<int>(i), var, best)) {
      plan->tiled_load[i] = true;
      names.push_back(absl::StrCat("'", NamePart(p.buffers[k.body[i].buffer].name), "'"));
    }
  }
  plan->status.kind = VecStatus::Kind::kTiled;
  // The gathered-load notes of the tiled loads no longer apply.
  std::vector<std::string> kept;
  for (absl::string_view part : absl::StrSplit(plan->status.reason, "; ")) {
    bool drop = false;
    for (const std::string& n : names) {
      drop |= absl::StartsWith(part, absl::StrCat("gathered load of ", n));
    }
    if (!drop) kept.emplace_back(part);
  }
  plan->status.reason = absl::StrCat(
      "tiled: ", absl::StrJoin(kept, "; "), "; load of ", absl::StrJoin(names, ", "),
      " transposed in lanes x lanes tiles over ", k.VarName(best), " x ", k.VarName(var));
}

// Whether iterations of loop variable `v` touch disjoint elements of every
// buffer the kernel both reads and writes or updates with store_indirect
// (a scatter's duplicate indices, a scan reading its previous element), so
// running them in parallel cannot reorder two accesses to one element. Rule:
// every access to such a buffer is affine in v with one common coefficient
// c > 0, and with v fixed the offsets of all of them (the store_indirect's
// data-dependent part over its whole [0, extent) * stride) span fewer than
// c elements. Kernels without such buffers always qualify.
bool PartitionsSharedBuffers(const LoopProgram& p, const VecAnalysis& a, int v) {
  const Kernel& k = *a.k;
  // Per buffer the kernel touches: read, written.
  absl::flat_hash_map<int32_t, std::pair<bool, bool>> access;
  for (const Op& op : k.body) {
    if (op.is_load() || op.code == OpCode::kStoreIndirect) access[op.buffer].first = true;
    if (op.is_store()) access[op.buffer].second = true;
  }
  std::vector<int32_t> shared;  // read and written, in buffer order
  for (int32_t b : SortedKeys(access)) {
    if (access[b].first && access[b].second) shared.push_back(b);
  }
  if (shared.empty()) return true;
  std::vector<int64_t> fixed = a.extents;
  fixed[v] = 1;
  for (int32_t b : shared) {
    std::optional<int64_t> coef;
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (size_t i = 0; i < k.body.size(); ++i) {
      const Op& op = k.body[i];
      if (op.buffer != static_cast<int32_t>(b) || !op.has_index()) continue;
      const std::optional<int64_t> c = ir::loop::StrideOf(a.index[i], v);
      if (!c.has_value() || *c <= 0 || (coef.has_value() && *coef != *c)) return false;
      coef = c;
      ir::loop::Interval r = ir::loop::ValueRange(a.index[i], fixed);
      if (op.code == OpCode::kLoadIndirect || op.code == OpCode::kStoreIndirect) {
        int64_t span;
        if (__builtin_mul_overflow(op.extent - 1, op.stride, &span)) return false;
        if (__builtin_add_overflow(r.lo, std::min<int64_t>(span, 0), &r.lo) ||
            __builtin_add_overflow(r.hi, std::max<int64_t>(span, 0), &r.hi)) {
          return false;
        }
      }
      lo = std::min(lo, r.lo);
      hi = std::max(hi, r.hi);
    }
    if (!coef.has_value()) continue;
    int64_t width;
    if (__builtin_sub_overflow(hi, lo, &width) || width >= *coef) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Per-op decisions: how the plan's code computes each op (the emitter's
// EmitVectorOp / VectorExpr cases, in the same order).

constexpr char kKernelScalar[] = "kernel is scalar";

// Why reduce `i`, which does not depend on vector variable `var` (>= 0), is
// kept scalar although it might vectorize along its last reduction
// variable: too short for a vector pass (kMinInnerReduceExtent). Empty
// when that rule does not apply.
std::string ShortLaneInvariantReduce(const VecAnalysis& a, int i, int var) {
  const Kernel& k = *a.k;
  if (var < 0 || k.reduction_ranges.empty() || (a.deps[i] & Bit(var))) return "";
  const int64_t last = a.extents[k.num_vars() - 1];
  if (last >= kMinInnerReduceExtent) return "";
  return absl::StrCat("does not depend on ", k.VarName(var),
                      ", computed once per row (last reduction extent ", last, " below ",
                      kMinInnerReduceExtent, ")");
}

}  // namespace

bool F64Lanewise(const OpForm& form) {
  if (form.lanewise()) return true;
  // f32-only helpers (range checks and polynomials for float); the generic
  // ones work on any float tag.
  std::string rest = form.vector;
  for (const char* generic : {"KilnMaxF(", "KilnMinF(", "KilnSignF("}) {
    rest = absl::StrReplaceAll(rest, {{generic, ""}});
  }
  return absl::StrContains(rest, "Kiln");
}

namespace {

// Pointwise ops on vector dtypes whose row has no vector instruction (in
// f64 kernels, no f64 one): the emitter calls their scalar form lane by lane.
bool LanewiseMath(const VecAnalysis& a, OpCode code, DType in) {
  if (!IsVecDType(in) && in != DType::kF64) return false;
  const OpForm* form = FindOpForm(code, ir::loop::OperandKindOf(in));
  if (form == nullptr) return false;
  return a.f64 ? F64Lanewise(*form) : form->lanewise();
}

std::string StrideText(const VecAnalysis& a, int i, int var) {
  const std::optional<int64_t> s = ir::loop::StrideOf(a.index[i], var);
  return s.has_value() ? absl::StrCat("stride ", *s, " in ", a.k->VarName(var))
                       : absl::StrCat("not affine in ", a.k->VarName(var));
}

// Op i (not a reduce) where the vector variable is `var` (-1: none).
OpDecision DecideInContext(const LoopProgram& p, const VecAnalysis& a, const VecPlan& plan,
                           int i, int var) {
  const Kernel& k = *a.k;
  const Op& op = k.body[i];
  if (var < 0 || !(a.deps[i] & Bit(var))) return {OpVec::kBroadcast, ""};
  if (a.lane_index[i]) return {OpVec::kPerLane, "read lane by lane as a load_indirect index"};
  if (a.lane_cast_src[i]) {
    return {OpVec::kPerLane,
            absl::StrCat(ir::DTypeName(p.buffers[op.buffer].dtype), " read lane by lane by its cast")};
  }
  if (plan.tiled_load[i]) {
    return {OpVec::kVector, absl::StrCat("transposed tiles over ", k.VarName(plan.tile_var), " x ",
                                         k.VarName(var))};
  }
  switch (op.code) {
    case OpCode::kCast:
      if (a.lane_cast_src[op.args[0]]) {
        return {OpVec::kPerLane,
                absl::StrCat("converts ", ir::DTypeName(k.body[op.args[0]].dtype), " lane by lane")};
      }
      break;
    case OpCode::kLoadIndirect: {
      if (a.deps[op.args[0]] & Bit(var)) {
        if (HardwareIndirectGather(p, a, i, var)) {
          return {OpVec::kVector,
                  absl::StrCat("hardware gather (data-dependent index in ", k.VarName(var), ")")};
        }
        return {OpVec::kPerLane, absl::StrCat("data-dependent index in ", k.VarName(var))};
      }
      if (p.buffers[op.buffer].dtype == DType::kBool) {
        return {OpVec::kPerLane, "bool elements read lane by lane"};
      }
      if (AccessOf(p, a, i, var) == Access::kContiguous) {
        return {OpVec::kVector, "index checked once per row"};
      }
      return {OpVec::kPerLane, absl::StrCat("gathered (", StrideText(a, i, var), ")")};
    }
    case OpCode::kLoad:
    case OpCode::kStore:
      if (AccessOf(p, a, i, var) == Access::kContiguous) {
        if (ir::loop::StrideOf(a.index[i], var).has_value()) return {OpVec::kVector, ""};
        return {OpVec::kVector, "contiguous within vector steps (not affine)"};
      }
      if (HardwareGatherStride(p, a, i, var).has_value()) {
        return {OpVec::kVector,
                absl::StrCat(op.code == OpCode::kLoad ? "hardware gather (" : "hardware scatter (",
                             StrideText(a, i, var),
                             op.code == OpCode::kLoad ? ")" : "; tail lane by lane)")};
      }
      return {OpVec::kPerLane, absl::StrCat(op.code == OpCode::kLoad ? "gathered (" : "scattered (",
                                            StrideText(a, i, var), ")")};
    case OpCode::kIndex:
      if (IotaIndexStride(a, i, var).has_value()) return {OpVec::kVector, "iota"};
      return {OpVec::kPerLane, "index computed lane by lane"};
    default:
      break;
  }
  const DType in = op.args.empty() ? op.dtype : k.body[op.args[0]].dtype;
  if (LanewiseMath(a, op.code, in)) {
    return {OpVec::kPerLane, absl::StrCat("no vector instruction for ", ir::DTypeName(in), " ",
                                          ir::loop::OpCodeName(op.code))};
  }
  return {OpVec::kVector, ""};
}

// Keeps the less vectorized of two decisions (an op in the cones of two
// reduces is computed in each).
void Merge(OpDecision d, OpDecision* into) {
  if (static_cast<int>(d.kind) > static_cast<int>(into->kind)) *into = std::move(d);
}

void DecideOps(const LoopProgram& p, const VecAnalysis& a, VecPlan* plan) {
  const Kernel& k = *a.k;
  const int n = static_cast<int>(k.body.size());
  plan->ops.assign(n, OpDecision{OpVec::kScalar, kKernelScalar});
  if (plan->status.kind == VecStatus::Kind::kScalar) {
    // Name what stops each op where the kernel's reason comes from one.
    for (int i = 0; i < n; ++i) {
      if (k.body[i].code == OpCode::kStoreIndirect) {
        plan->ops[i].reason = "data-dependent store computed point by point in iteration order";
      }
    }
    if (!a.hazard.empty() || a.empty || plan->status.reason == "vectorization disabled") return;
    if (plan->failed_var >= 0) {
      for (int i = 0; i < n; ++i) {
        if (!(a.deps[i] & Bit(plan->failed_var))) continue;
        VecCheck c;
        CheckVectorOp(p, a, i, plan->failed_var, &c);
        if (!c.failure.empty()) plan->ops[i].reason = c.failure_why;
      }
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (k.body[i].code != OpCode::kReduce) continue;
      const VecCheck rc = CheckInnerReduce(p, a, i);
      if (!rc.failure.empty()) plan->ops[i].reason = rc.failure;
    }
    return;
  }
  const int rv = k.num_vars() - 1;
  for (int i = 0; i < n; ++i) {
    if (!a.in_cone[i] && k.body[i].code != OpCode::kReduce) {
      plan->ops[i] = DecideInContext(p, a, *plan, i, plan->vec_var);
    }
  }
  // Cone ops: the context of their reduce (lane accumulators over the
  // kernel's vector variable, vector accumulators over the last reduction
  // variable, or a scalar reduction).
  std::vector<bool> seen(n, false);
  for (int i = 0; i < n; ++i) {
    const Op& op = k.body[i];
    if (op.code != OpCode::kReduce) continue;
    int var = -1;
    std::string scalar_why;
    if (plan->vec_var >= 0 && (a.deps[i] & Bit(plan->vec_var))) {
      var = plan->vec_var;
      plan->ops[i] = {OpVec::kVector,
                      absl::StrCat("one accumulator per lane of ", k.VarName(var))};
    } else if (plan->inner_reduce[i]) {
      var = rv;
      const bool welford =
          op.reduce == ReduceKind::kWelfordMean || op.reduce == ReduceKind::kWelfordVar;
      plan->ops[i] = {OpVec::kVector,
                      absl::StrCat("vectorized over ", k.VarName(rv),
                                   welford ? (op.reduce == ReduceKind::kWelfordVar
                                                  ? " in two passes (sum, squared deviations)"
                                                  : " as a vector sum")
                                           : "")};
    } else if (std::string why = ShortLaneInvariantReduce(a, i, plan->vec_var); !why.empty()) {
      plan->ops[i] = {OpVec::kScalar, why};
      scalar_why = absl::StrCat("in scalar reduce #", i);
    } else {
      const VecCheck rc = CheckInnerReduce(p, a, i);
      plan->ops[i] = {OpVec::kScalar, rc.failure};
      scalar_why = absl::StrCat("in scalar reduce #", i);
      if (rc.failure_op >= 0 && rc.failure_op != i && !seen[rc.failure_op]) {
        seen[rc.failure_op] = true;
        plan->ops[rc.failure_op] = {OpVec::kScalar, rc.failure_why};
      }
    }
    for (int j : a.cone[i]) {
      OpDecision d = var >= 0 ? DecideInContext(p, a, *plan, j, var)
                              : OpDecision{OpVec::kScalar, scalar_why};
      if (!seen[j]) {
        seen[j] = true;
        plan->ops[j] = std::move(d);
      } else {
        Merge(std::move(d), &plan->ops[j]);
      }
    }
  }
}

VecPlan MakePlan(const LoopProgram& p, const VecAnalysis& a, const VecCheckOptions& options) {
  const Kernel& k = *a.k;
  VecPlan plan;
  plan.inner_reduce.assign(k.body.size(), false);
  plan.hoist = a.hazard.empty();
  const int ni = static_cast<int>(k.ranges.size());
  auto scalar = [&](std::string reason) {
    plan.status.kind = VecStatus::Kind::kScalar;
    plan.status.reason = std::move(reason);
  };
  std::string reason;
  if (!options.vectorize) {
    reason = "vectorization disabled";
  } else if (!a.hazard.empty()) {
    reason = a.hazard;
  } else if (a.empty) {
    reason = "empty iteration space";
  }
  struct Choice {
    int var = -1;
    int score = 0;
    bool any_vector = false;
    // Var -1 with reductions over fewer than kMinInnerReduceExtent elements
    // per output: a last resort.
    bool short_only = false;
    std::vector<bool> inner;
    std::vector<std::string> notes;
    std::string failure;
  };
  std::vector<Choice> choices;
  int64_t reduction_size = 1;  // elements reduced per output
  for (int64_t e : k.reduction_ranges) {
    reduction_size = std::min(reduction_size * std::min(e, kMinInnerReduceExtent),
                              kMinInnerReduceExtent);
  }
  if (reason.empty()) {
    // Candidates: each iteration variable with extent >= 2 (innermost first),
    // then none (only reductions vectorized along their own variable; over
    // fewer than kMinInnerReduceExtent elements per output, only if no
    // iteration variable vectorizes).
    std::vector<int> cands;
    for (int v = ni - 1; v >= 0; --v) {
      if (k.ranges[v] >= 2) cands.push_back(v);
    }
    cands.push_back(-1);
    for (int v : cands) {
      Choice ch;
      ch.var = v;
      ch.inner.assign(k.body.size(), false);
      VecCheck c;
      for (size_t i = 0; v >= 0 && i < k.body.size(); ++i) {
        if (a.deps[i] & Bit(v)) CheckVectorOp(p, a, static_cast<int>(i), v, &c);
      }
      if (!c.failure.empty()) {
        ch.failure = absl::StrCat("vectorizing ", k.VarName(v), ": ", c.failure);
        choices.push_back(std::move(ch));
        continue;
      }
      for (size_t i = 0; v >= 0 && i < k.body.size(); ++i) {
        if (a.deps[i] & Bit(v)) ch.any_vector = true;
      }
      ch.score = c.score;
      ch.notes = c.notes;
      for (size_t i = 0; i < k.body.size(); ++i) {
        if (k.body[i].code != OpCode::kReduce) continue;
        if (v >= 0 && (a.deps[i] & Bit(v))) {
          ch.notes.push_back(absl::StrCat("reduce #", i, " per lane over ", k.VarName(v)));
          continue;
        }
        const std::string short_why = ShortLaneInvariantReduce(a, static_cast<int>(i), v);
        if (!short_why.empty()) {
          // Lane-invariant under v: the scalar reduction runs once per
          // enclosing iteration; a vector pass along a short last variable
          // would be one masked step plus a horizontal combine, slower.
          ch.notes.push_back(absl::StrCat("reduce #", i, " scalar: ", short_why));
          continue;
        }
        VecCheck rc = CheckInnerReduce(p, a, static_cast<int>(i));
        if (rc.failure.empty()) {
          ch.inner[i] = true;
          ch.any_vector = true;
          ch.score += rc.score;
          ch.notes.push_back(absl::StrCat("reduce #", i, " vectorized over ",
                                          k.VarName(k.num_vars() - 1)));
          for (std::string& note : rc.notes) ch.notes.push_back(std::move(note));
        } else {
          ch.notes.push_back(absl::StrCat("reduce #", i, " scalar: ", rc.failure));
        }
      }
      ch.short_only = v < 0 && ch.any_vector && reduction_size < kMinInnerReduceExtent;
      choices.push_back(std::move(ch));
    }
    const Choice* best = nullptr;
    for (const Choice& ch : choices) {
      if (!ch.failure.empty() || !ch.any_vector) continue;
      if (ch.short_only && best != nullptr) continue;  // the last candidate
      if (best == nullptr || ch.score > best->score) best = &ch;
    }
    if (best != nullptr) {
      plan.vec_var = best->var;
      plan.inner_reduce = best->inner;
      plan.status.kind = VecStatus::Kind::kVectorized;
      std::string head = best->var >= 0
                             ? absl::StrCat("vectorized over ", k.VarName(best->var))
                             : std::string("reductions vectorized");
      plan.status.reason = best->notes.empty()
                               ? head
                               : absl::StrCat(head, "; ", absl::StrJoin(best->notes, "; "));
    } else {
      for (const Choice& ch : choices) {
        if (!ch.failure.empty()) {
          reason = ch.failure;
          plan.failed_var = ch.var;
          break;
        }
      }
      if (reason.empty()) {
        reason = choices.back().notes.empty() ? "no loop with extent >= 2 to vectorize"
                                              : absl::StrJoin(choices.back().notes, "; ");
      }
    }
  }
  if (plan.status.kind != VecStatus::Kind::kVectorized) scalar(reason);
  plan.tiled_load.assign(k.body.size(), false);
  if (plan.vec_var >= 0) TryTile(p, a, &plan);
  for (int v = 0; v < ni; ++v) {
    if (v != plan.vec_var && v != plan.tile_var) plan.loop_order.push_back(v);
  }
  if (plan.tile_var >= 0) plan.loop_order.push_back(plan.tile_var);
  if (plan.vec_var >= 0) plan.loop_order.push_back(plan.vec_var);
  int64_t work = 1;
  for (int64_t e : a.extents) {
    work = (e != 0 && work > std::numeric_limits<int64_t>::max() / e) ? std::numeric_limits<int64_t>::max() : work * e;
  }
  if (work > options.parallel_grain && !a.empty) {
    for (size_t pos = 0; pos < plan.loop_order.size(); ++pos) {
      const int v = plan.loop_order[pos];
      if (k.ranges[v] <= 1) continue;
      // Only the first candidate loop; a shared buffer it cannot split
      // keeps the kernel sequential.
      if (PartitionsSharedBuffers(p, a, v)) plan.parallel_pos = static_cast<int>(pos);
      break;
    }
  }
  DecideOps(p, a, &plan);
  return plan;
}

}  // namespace

VecPlan CheckVectorization(const LoopProgram& program, int kernel_index,
                           const VecCheckOptions& options) {
  const Kernel& k = program.kernels[kernel_index];
  VecAnalysis a = Analyze(program, k);
  VecPlan plan = MakePlan(program, a, options);
  if (plan.status.kind == VecStatus::Kind::kScalar && options.vectorize && !a.f64 &&
      a.hazard.empty() && !a.empty && IsMixedF64Kernel(program, k)) {
    // Scalar in f32 / i32 lanes: f64 lanes for the ops that depend on the
    // vector variable, every other op a scalar.
    VecAnalysis m = a;
    m.f64 = true;
    m.lane_index.assign(m.lane_index.size(), false);
    m.lane_cast_src.assign(m.lane_cast_src.size(), false);
    VecPlan mp = MakePlan(program, m, options);
    if (mp.status.kind != VecStatus::Kind::kScalar) {
      mp.status.reason = absl::StrCat(mp.status.reason, "; on f64 lanes beside scalar ",
                                      "index/integer ops");
      plan = std::move(mp);
      a = std::move(m);
    } else {
      plan.status.reason =
          absl::StrCat(plan.status.reason, "; on f64 lanes: ", mp.status.reason);
    }
  }
  plan.analysis = std::move(a);
  return plan;
}

absl::string_view OpVecName(OpVec kind) {
  switch (kind) {
    case OpVec::kVector: return "vector";
    case OpVec::kBroadcast: return "broadcast";
    case OpVec::kPerLane: return "per-lane";
    case OpVec::kScalar: return "scalar";
  }
  return "?";
}

std::string PrintVecPlan(const LoopProgram& program, int kernel_index, const VecPlan& plan) {
  const Kernel& k = program.kernels[kernel_index];
  std::string s = absl::StrCat("kernel ", kernel_index, " ", NamePart(k.name), ": ",
                               ir::loop::VecKindName(plan.status.kind));
  if (plan.vec_var >= 0) absl::StrAppend(&s, ", vector ", k.VarName(plan.vec_var));
  if (plan.tile_var >= 0) absl::StrAppend(&s, ", tile ", k.VarName(plan.tile_var));
  std::vector<std::string> loops;
  for (int v : plan.loop_order) loops.push_back(k.VarName(v));
  absl::StrAppend(&s, ", loops (", absl::StrJoin(loops, ", "), ")");
  if (plan.parallel_pos >= 0) {
    absl::StrAppend(&s, ", parallel ", k.VarName(plan.loop_order[plan.parallel_pos]));
  }
  if (!plan.status.reason.empty()) absl::StrAppend(&s, " -- ", plan.status.reason);
  s += "\n";
  for (size_t i = 0; i < k.body.size() && i < plan.ops.size(); ++i) {
    const Op& op = k.body[i];
    std::string what(ir::loop::OpCodeName(op.code));
    if (op.is_load() || op.is_store()) absl::StrAppend(&what, " ", NamePart(program.buffers[op.buffer].name));
    if (op.code == OpCode::kReduce) absl::StrAppend(&what, " ", ir::loop::ReduceKindName(op.reduce));
    if (op.code == OpCode::kCast) absl::StrAppend(&what, " ", ir::DTypeName(op.dtype));
    absl::StrAppend(&s, "  #", i, " ", what, ": ", OpVecName(plan.ops[i].kind));
    if (!plan.ops[i].reason.empty()) absl::StrAppend(&s, " -- ", plan.ops[i].reason);
    s += "\n";
  }
  return s;
}

bool VecPlan::HasVectorCode() const {
  if (vec_var >= 0) return true;
  for (bool b : inner_reduce) {
    if (b) return true;
  }
  return false;
}

}  // namespace kiln::backends::cpp
