// Helpers shared by the loop passes (see fusion_util.h).
#include "passes/loop/fusion_util.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/types/span.h"
#include "ir/loop/module.h"
#include "ir/loop/verifier.h"

namespace kiln::passes::loop_util {

using ir::loop::Buffer;
using ir::loop::BufferKind;
using ir::loop::Const;
using ir::loop::Var;

IndexExpr SubstituteVars(const IndexExpr& e, absl::Span<const IndexExpr> subs) {
  switch (e.kind()) {
    case IndexExpr::Kind::kConst:
      return e;
    case IndexExpr::Kind::kVar:
      return e.var() < static_cast<int>(subs.size()) ? subs[e.var()] : e;
    case IndexExpr::Kind::kAdd:
    case IndexExpr::Kind::kMul: {
      std::vector<IndexExpr> ops;
      ops.reserve(e.operands().size());
      for (const IndexExpr& o : e.operands()) ops.push_back(SubstituteVars(o, subs));
      return e.kind() == IndexExpr::Kind::kAdd ? IndexExpr::Sum(std::move(ops))
                                               : IndexExpr::Product(std::move(ops));
    }
    default:
      return IndexExpr::Binary(e.kind(), SubstituteVars(e.operand(0), subs),
                               SubstituteVars(e.operand(1), subs));
  }
}

std::optional<DenseIndex> AnalyzeDenseIndex(const IndexExpr& e,
                                            absl::Span<const int64_t> extents) {
  const int n = static_cast<int>(extents.size());
  if (e.MaxVar() >= n) return std::nullopt;
  std::vector<IndexExpr> zero_unit(n);
  for (int v = 0; v < n; ++v) {
    if (extents[v] <= 0) return std::nullopt;
    zero_unit[v] = extents[v] == 1 ? Const(0) : Var(v);
  }
  const IndexExpr s = ir::loop::Simplify(SubstituteVars(e, zero_unit), extents);
  DenseIndex d;
  d.strides.assign(n, 0);
  std::vector<IndexExpr> terms;
  std::vector<std::pair<int64_t, int64_t>> radix;  // (stride, extent)
  for (int v = 0; v < n; ++v) {
    if (extents[v] == 1) continue;
    std::optional<int64_t> st = ir::loop::StrideOf(s, v);
    if (!st.has_value() || *st <= 0) return std::nullopt;
    d.strides[v] = *st;
    terms.push_back(Var(v) * *st);
    radix.emplace_back(*st, extents[v]);
  }
  const IndexExpr rest =
      ir::loop::Simplify(s - IndexExpr::Sum(std::move(terms)), extents);
  if (!rest.is_const() || rest.value() != 0) return std::nullopt;
  std::sort(radix.begin(), radix.end());
  int64_t expect = 1;
  for (const auto& [stride, extent] : radix) {
    if (stride != expect) return std::nullopt;
    if (__builtin_mul_overflow(expect, extent, &expect)) return std::nullopt;
  }
  d.size = expect;
  return d;
}

std::vector<IndexExpr> InvertDenseIndex(
    const IndexExpr& offset, const DenseIndex& dense,
    absl::Span<const int64_t> extents,
    absl::Span<const int64_t> simplify_extents) {
  std::vector<IndexExpr> vars(extents.size());
  for (size_t v = 0; v < extents.size(); ++v) {
    if (extents[v] == 1) {
      vars[v] = Const(0);
      continue;
    }
    const int64_t stride = dense.strides[v];
    IndexExpr q = stride == 1 ? offset : ir::loop::FloorDiv(offset, stride);
    if (stride * extents[v] != dense.size) q = ir::loop::Mod(q, extents[v]);
    vars[v] = ir::loop::Simplify(q, simplify_extents);
  }
  return vars;
}

bool IsKnownOp(OpCode code) {
  switch (code) {
    case OpCode::kLoad: case OpCode::kStore: case OpCode::kConstant:
    case OpCode::kIndex: case OpCode::kCast: case OpCode::kSelect:
    case OpCode::kReduce:
      return true;
    default:
      return ir::loop::IsElementwise(code);
  }
}

bool IsPureOp(const Op& op) {
  if (!IsKnownOp(op.code) || op.code == OpCode::kStore) return false;
  // Integer division by zero is an error. An op that can fail (a
  // KILN_INT_CHECKED form in opcodes.def) has its operands' dtype.
  return !ir::loop::MayFail(op.code, op.dtype);
}

int32_t ReadBufferOf(const Op& op) {
  if (op.code == OpCode::kStore) return -1;
  // store_indirect reads its buffer too (it combines with, or partially
  // overwrites, what an earlier kernel stored there).
  return op.buffer;
}

std::set<int32_t> KernelReads(const Kernel& k) {
  std::set<int32_t> out;
  if (k.kind == Kernel::Kind::kExtern) {
    out.insert(k.call.inputs.begin(), k.call.inputs.end());
    return out;
  }
  for (const Op& op : k.body) {
    const int32_t b = ReadBufferOf(op);
    if (b >= 0) out.insert(b);
  }
  return out;
}

std::set<int32_t> KernelWrites(const Kernel& k) {
  std::set<int32_t> out;
  if (k.kind == Kernel::Kind::kExtern) {
    out.insert(k.call.outputs.begin(), k.call.outputs.end());
    return out;
  }
  for (const Op& op : k.body) {
    if (op.is_store() && op.buffer >= 0) out.insert(op.buffer);
  }
  return out;
}

BufferUses ComputeBufferUses(const LoopProgram& p,
                             const std::vector<bool>& alive) {
  BufferUses u;
  u.readers.resize(p.buffers.size());
  u.writers.resize(p.buffers.size());
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    if (!alive[k]) continue;
    for (int32_t b : KernelReads(p.kernels[k])) {
      if (b >= 0 && b < static_cast<int32_t>(p.buffers.size())) {
        u.readers[b].push_back(static_cast<int>(k));
      }
    }
    for (int32_t b : KernelWrites(p.kernels[k])) {
      if (b >= 0 && b < static_cast<int32_t>(p.buffers.size())) {
        u.writers[b].push_back(static_cast<int>(k));
      }
    }
  }
  return u;
}

bool IsProtectedBuffer(const ir::loop::LoopModule& lp, int32_t buffer) {
  if (lp.program.buffers[buffer].kind != BufferKind::kIntermediate) return true;
  auto has = [buffer](const std::vector<int32_t>& v) {
    return std::find(v.begin(), v.end(), buffer) != v.end();
  };
  return has(lp.inputs) || has(lp.outputs) || lp.constants.count(buffer) > 0;
}

namespace {

// Keeps ops with keep[i]; remaps operands. Returns true if any was dropped.
bool Retain(Kernel* k, const std::vector<bool>& keep) {
  std::vector<int32_t> remap(k->body.size(), -1);
  std::vector<Op> body;
  body.reserve(k->body.size());
  for (size_t i = 0; i < k->body.size(); ++i) {
    if (!keep[i]) continue;
    Op op = std::move(k->body[i]);
    for (int32_t& a : op.args) a = remap[a];
    remap[i] = static_cast<int32_t>(body.size());
    body.push_back(std::move(op));
  }
  const bool changed = body.size() != k->body.size();
  k->body = std::move(body);
  return changed;
}

bool SameDouble(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

bool EliminateDeadOps(Kernel* k) {
  if (k->kind != Kernel::Kind::kLoop) return false;
  std::vector<bool> live(k->body.size(), false);
  for (size_t i = k->body.size(); i-- > 0;) {
    const Op& op = k->body[i];
    if (!IsPureOp(op)) live[i] = true;
    if (!live[i]) continue;
    for (int32_t a : op.args) live[a] = true;
  }
  return Retain(k, live);
}

bool EliminateCommonOps(Kernel* k) {
  if (k->kind != Kernel::Kind::kLoop) return false;
  const std::set<int32_t> written = KernelWrites(*k);
  // Earlier pure ops by the hash of what makes two ops equal; a bucket's
  // ops are compared in body order, so the first equal op wins.
  auto same = [](const Op& a, const Op& b) {
    return a.code == b.code && a.dtype == b.dtype && a.args == b.args &&
           a.buffer == b.buffer && SameDouble(a.fvalue, b.fvalue) && a.ivalue == b.ivalue &&
           a.reduce == b.reduce && a.index == b.index;
  };
  absl::flat_hash_map<size_t, std::vector<int32_t>> seen;
  std::vector<int32_t> repl(k->body.size());
  bool changed = false;
  for (size_t i = 0; i < k->body.size(); ++i) {
    Op& op = k->body[i];
    for (int32_t& a : op.args) a = repl[a];
    repl[i] = static_cast<int32_t>(i);
    if (!IsPureOp(op)) continue;
    if (op.code == OpCode::kLoad && written.count(op.buffer) > 0) continue;
    int64_t fbits;
    static_assert(sizeof fbits == sizeof op.fvalue, "double is 64-bit");
    std::memcpy(&fbits, &op.fvalue, sizeof fbits);
    const size_t key = absl::HashOf(static_cast<int>(op.code), static_cast<int>(op.dtype),
                                    absl::MakeConstSpan(op.args), op.buffer, fbits, op.ivalue,
                                    static_cast<int>(op.reduce), op.index.hash());
    std::vector<int32_t>& cands = seen[key];
    bool found = false;
    for (int32_t c : cands) {
      if (same(k->body[c], op)) {
        repl[i] = c;
        changed = found = true;
        break;
      }
    }
    if (!found) cands.push_back(static_cast<int32_t>(i));
  }
  if (changed) EliminateDeadOps(k);
  return changed;
}

void CompactKernels(LoopProgram* p, const std::vector<bool>& keep) {
  std::vector<Kernel> kept;
  kept.reserve(p->kernels.size());
  for (size_t k = 0; k < p->kernels.size(); ++k) {
    if (keep[k]) kept.push_back(std::move(p->kernels[k]));
  }
  p->kernels = std::move(kept);
}

bool RemoveUnreferencedBuffers(ir::loop::LoopModule* lp) {
  LoopProgram& p = lp->program;
  std::vector<bool> used(p.buffers.size(), false);
  for (const Kernel& k : p.kernels) {
    for (int32_t b : KernelReads(k)) used[b] = true;
    for (int32_t b : KernelWrites(k)) used[b] = true;
  }
  std::vector<int32_t> remap(p.buffers.size(), -1);
  std::vector<Buffer> kept;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (!used[b] && !IsProtectedBuffer(*lp, static_cast<int32_t>(b))) {
      lp->value_names.erase(p.buffers[b].name);
      continue;
    }
    remap[b] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(p.buffers[b]));
  }
  if (kept.size() == p.buffers.size()) {
    p.buffers = std::move(kept);
    return false;
  }
  p.buffers = std::move(kept);
  for (Kernel& k : p.kernels) {
    for (Op& op : k.body) {
      if (op.buffer >= 0) op.buffer = remap[op.buffer];
    }
    for (int32_t& b : k.call.inputs) b = remap[b];
    for (int32_t& b : k.call.outputs) b = remap[b];
  }
  for (int32_t& b : lp->inputs) b = remap[b];
  for (int32_t& b : lp->outputs) b = remap[b];
  std::map<int32_t, std::shared_ptr<const ir::Tensor>> constants;
  for (auto& [b, t] : lp->constants) constants[remap[b]] = std::move(t);
  lp->constants = std::move(constants);
  return true;
}

absl::Status VerifyKernelAlone(const LoopProgram& p, const Kernel& k) {
  // Only the buffers `k` touches, in place: the fusion passes call this for
  // every candidate, and verifying (or copying) every buffer of a large
  // program each time made them quadratic (densenet121's concats, a model
  // with thousands of outputs). The pipeline verifies the whole program
  // between passes.
  return ir::loop::VerifyKernel(p, k);
}

void AppendOps(const std::vector<std::string>& from,
               std::vector<std::string>* to) {
  for (const std::string& s : from) {
    if (std::find(to->begin(), to->end(), s) == to->end()) to->push_back(s);
  }
}

}  // namespace kiln::passes::loop_util
