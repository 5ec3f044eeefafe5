// fuse-vertical: producer loop kernels inlined into their consumers (the
// legality and profitability rules are in fuse_vertical.h).
#include "passes/loop/fuse_vertical.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "passes/loop/fusion_util.h"

namespace kiln::passes {
namespace {

using ir::loop::IndexExpr;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;
using ir::loop::OpCode;
using ir::loop::Var;
using loop_util::DenseIndex;

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// What inlining one producer into one consumer needs.
struct ConsumerPlan {
  int kernel = -1;
  std::vector<int64_t> reduction_ranges;  // of the fused kernel
  std::vector<int64_t> extents;           // every variable of the fused kernel
};

class VerticalFuser {
 public:
  VerticalFuser(ir::loop::LoopModule* lp, const FuseVertical::Options& o)
      : lp_(lp), p_(lp->program), options_(o) {}

  bool Run() {
    const size_t n = p_.kernels.size();
    alive_.assign(n, true);
    reads_.resize(n);
    writes_.resize(n);
    for (size_t k = 0; k < n; ++k) {
      reads_[k] = loop_util::KernelReads(p_.kernels[k]);
      writes_[k] = loop_util::KernelWrites(p_.kernels[k]);
    }
    uses_ = loop_util::ComputeBufferUses(p_, alive_);
    kernel_stamp_.assign(n, 0);
    buffer_stamp_.assign(p_.buffers.size(), 0);
    failed_.assign(n, Failure{});
    recomputed_.assign(n, 0);
    bool changed = false;
    for (bool progress = true; progress;) {
      progress = false;
      // Last producer first: consumers absorb their nearest producers while
      // those are still cheap to recompute (a reduction inlined early into
      // a pointwise kernel would make that kernel expensive to share).
      for (size_t k = n; k-- > 0;) {
        if (!alive_[k] || StillFails(static_cast<int>(k))) continue;
        if (TryInline(static_cast<int>(k))) progress = changed = true;
      }
    }
    if (changed) {
      loop_util::CompactKernels(&p_, alive_);
      loop_util::RemoveUnreferencedBuffers(lp_);
    }
    return changed;
  }

 private:
  // An attempt's outcome depends only on the producer, the kernels up to
  // its last reader, and its buffer's readers and writers: a failed attempt
  // is not repeated until one of those changed (so the result is the same
  // as rescanning everything after every fusion).
  struct Failure {
    bool valid = false;
    uint64_t at = 0;
    int hi = -1;
    int32_t buffer = -1;
  };

  bool StillFails(int pk) const {
    const Failure& f = failed_[pk];
    if (!f.valid) return false;
    if (f.buffer >= 0 && buffer_stamp_[f.buffer] > f.at) return false;
    for (int m = pk; m <= f.hi; ++m) {
      if (kernel_stamp_[m] > f.at) return false;
    }
    return true;
  }

  bool Fail(int pk, int32_t buffer, int hi) {
    failed_[pk] = Failure{true, clock_, std::max(pk, hi), buffer};
    return false;
  }

  static void EraseSorted(std::vector<int>* v, int k) {
    auto it = std::lower_bound(v->begin(), v->end(), k);
    if (it != v->end() && *it == k) v->erase(it);
  }
  static void InsertSorted(std::vector<int>* v, int k) {
    auto it = std::lower_bound(v->begin(), v->end(), k);
    if (it == v->end() || *it != k) v->insert(it, k);
  }
  bool InRange(int32_t b) const {
    return b >= 0 && b < static_cast<int32_t>(p_.buffers.size());
  }

  // Kernel k stops counting as a reader/writer (dead, or about to change).
  void Unregister(int k) {
    for (int32_t b : reads_[k]) {
      if (!InRange(b)) continue;
      EraseSorted(&uses_.readers[b], k);
      buffer_stamp_[b] = clock_;
    }
    for (int32_t b : writes_[k]) {
      if (!InRange(b)) continue;
      EraseSorted(&uses_.writers[b], k);
      buffer_stamp_[b] = clock_;
    }
    kernel_stamp_[k] = clock_;
  }
  void Register(int k) {
    reads_[k] = loop_util::KernelReads(p_.kernels[k]);
    writes_[k] = loop_util::KernelWrites(p_.kernels[k]);
    for (int32_t b : reads_[k]) {
      if (!InRange(b)) continue;
      InsertSorted(&uses_.readers[b], k);
      buffer_stamp_[b] = clock_;
    }
    for (int32_t b : writes_[k]) {
      if (!InRange(b)) continue;
      InsertSorted(&uses_.writers[b], k);
      buffer_stamp_[b] = clock_;
    }
    kernel_stamp_[k] = clock_;
  }

  // The producer's ops its stored value needs (the store excluded).
  static std::vector<bool> Cone(const Kernel& k, int store) {
    std::vector<bool> in(k.body.size(), false);
    in[k.body[store].args[0]] = true;
    for (int i = store - 1; i >= 0; --i) {
      if (!in[i]) continue;
      for (int32_t a : k.body[i].args) in[a] = true;
    }
    return in;
  }

  // Consumer-variable expressions for every producer variable, for a load at
  // `offset` (iteration vars by the dense inverse, reduction vars shared).
  std::vector<IndexExpr> Substitution(const Kernel& prod, const DenseIndex& dense,
                                      const IndexExpr& offset,
                                      const ConsumerPlan& plan,
                                      int consumer_iter_vars) const {
    std::vector<IndexExpr> subs = loop_util::InvertDenseIndex(
        offset, dense, prod.ranges, plan.extents);
    for (size_t r = 0; r < prod.reduction_ranges.size(); ++r) {
      subs.push_back(Var(consumer_iter_vars + static_cast<int>(r)));
    }
    return subs;
  }

  // Rule 6: no Reduce of the producer depends on a producer iteration
  // variable whose value now uses a consumer reduction variable.
  static bool NestsReduction(const Kernel& prod, const std::vector<bool>& cone,
                             const std::vector<IndexExpr>& subs,
                             int consumer_iter_vars) {
    std::vector<int> bad_vars;
    for (size_t v = 0; v < prod.ranges.size(); ++v) {
      if (subs[v].MaxVar() >= consumer_iter_vars) bad_vars.push_back(v);
    }
    if (bad_vars.empty()) return false;
    std::vector<bool> dep(prod.body.size(), false);
    for (size_t i = 0; i < prod.body.size(); ++i) {
      if (!cone[i]) continue;
      const Op& op = prod.body[i];
      if (op.code == OpCode::kReduce) {
        if (dep[op.args[0]]) return true;
        continue;  // a reduce result is invariant in the reduction space
      }
      for (int v : bad_vars) dep[i] = dep[i] || op.index.UsesVar(v);
      for (int32_t a : op.args) dep[i] = dep[i] || dep[a];
    }
    return false;
  }

  // True when some Reduce of P's cone would be recomputed at every point of
  // the consumer's innermost loop although P computes it outside its own
  // innermost loop: the emitter evaluates a reduction once per point of the
  // loops it depends on, so a LayerNorm's row statistics inlined into a
  // consumer whose innermost variable walks rows (a window-partition or
  // transpose copy) would be recomputed once per element, C times over.
  static bool ReductionMovesInnermost(const Kernel& prod, const std::vector<bool>& cone,
                                      const std::vector<IndexExpr>& subs,
                                      int consumer_iter_vars) {
    const int pn = static_cast<int>(prod.ranges.size());
    if (pn == 0 || consumer_iter_vars == 0) return false;
    // Per op: the producer iteration variables its value depends on.
    std::vector<std::vector<bool>> uses(prod.body.size(), std::vector<bool>(pn, false));
    for (size_t i = 0; i < prod.body.size(); ++i) {
      if (!cone[i]) continue;
      const Op& op = prod.body[i];
      for (int v = 0; v < pn; ++v) uses[i][v] = op.index.UsesVar(v);
      for (int32_t a : op.args) {
        for (int v = 0; v < pn; ++v) uses[i][v] = uses[i][v] || uses[a][v];
      }
      if (op.code != OpCode::kReduce) continue;
      const bool inner_in_p = uses[i][pn - 1];
      bool inner_in_c = false;
      for (int v = 0; v < pn; ++v) {
        inner_in_c = inner_in_c || (uses[i][v] && subs[v].UsesVar(consumer_iter_vars - 1));
      }
      if (inner_in_c && !inner_in_p) return true;
    }
    return false;
  }

  // Evaluations of an inlined copy at `offset` in the fused kernel: the
  // iteration points up to the innermost iteration variable the offset uses
  // (invariant inner loops are hoisted by the emitter), times the reduction
  // space when the offset uses a reduction variable.
  static double Evaluations(const IndexExpr& offset, const Kernel& c,
                            const ConsumerPlan& plan) {
    const int n = static_cast<int>(c.ranges.size());
    int innermost = -1;
    for (int v = 0; v < n; ++v) {
      if (offset.UsesVar(v)) innermost = v;
    }
    double evals = 1;
    for (int v = 0; v <= innermost; ++v) evals *= static_cast<double>(c.ranges[v]);
    bool uses_r = false;
    for (size_t r = 0; r < plan.reduction_ranges.size(); ++r) {
      uses_r = uses_r || offset.UsesVar(n + static_cast<int>(r));
    }
    if (uses_r) evals *= static_cast<double>(Product(plan.reduction_ranges));
    return evals;
  }

  bool TryInline(int pk) {
    const Kernel& prod = p_.kernels[pk];
    if (prod.kind != Kernel::Kind::kLoop) return Fail(pk, -1, pk);
    int store = -1;
    for (size_t i = 0; i < prod.body.size(); ++i) {
      if (prod.body[i].code != OpCode::kStore) continue;
      if (store >= 0) return Fail(pk, -1, pk);  // rule 1: one store
      store = static_cast<int>(i);
    }
    if (store < 0) return Fail(pk, -1, pk);
    // Rule 1: P writes nothing else (a store_indirect beside the store would
    // be lost with P).
    if (writes_[pk].size() != 1) return Fail(pk, -1, pk);
    const Op& st = prod.body[store];
    const int32_t b = st.buffer;
    if (loop_util::IsProtectedBuffer(*lp_, b)) return Fail(pk, -1, pk);
    for (int64_t e : prod.reduction_ranges) {
      if (e <= 0) return Fail(pk, -1, pk);
    }
    const ir::loop::Buffer& buf = p_.buffers[b];
    if ((ir::IsLowPrecisionFloat(buf.dtype) && prod.body[st.args[0]].code != OpCode::kCast) ||
        prod.body[st.args[0]].dtype != buf.dtype) {
      return Fail(pk, -1, pk);  // rule 3
    }
    std::optional<DenseIndex> dense =
        loop_util::AnalyzeDenseIndex(st.index, prod.ranges);
    std::optional<int64_t> storage = buf.StorageSize();
    if (!dense.has_value() || !storage.has_value() || dense->size != *storage) {
      return Fail(pk, -1, pk);  // rule 2
    }
    const std::set<int32_t>& prod_reads = reads_[pk];
    if (prod_reads.count(b) > 0) return Fail(pk, -1, pk);

    if (uses_.writers[b] != std::vector<int>{pk}) return Fail(pk, b, pk);
    const std::vector<int> readers = uses_.readers[b];
    // dead: eliminate-dead-buffers' job
    if (readers.empty()) return Fail(pk, b, pk);
    const int hi = readers.back();
    auto fail = [&] { return Fail(pk, b, hi); };

    const std::vector<bool> cone = Cone(prod, store);
    int cone_ops = 0;
    bool has_reduce = false, fallible = false;
    for (size_t i = 0; i < prod.body.size(); ++i) {
      if (!cone[i]) continue;
      ++cone_ops;
      has_reduce = has_reduce || prod.body[i].code == OpCode::kReduce;
      fallible = fallible || !loop_util::IsPureOp(prod.body[i]);
    }
    if (has_reduce && readers.size() > 1) return fail();
    for (int ck : readers) {
      if (static_cast<int>(p_.kernels[ck].body.size()) + cone_ops > options_.max_kernel_ops) {
        return fail();
      }
    }
    if (readers.size() > 1 && cone_ops > options_.max_recompute_ops) return fail();
    // Copies compound: with the last producer inlined first, a chain of
    // small multi-reader producers (a quantized residual stream: Add, Q, DQ,
    // Add, ...) would otherwise be recomputed whole in every later kernel.
    // A kernel carries at most max_recompute_ops duplicated ops.
    if (readers.size() > 1) {
      for (int ck : readers) {
        if (recomputed_[ck] + recomputed_[pk] + cone_ops > options_.max_recompute_ops) {
          return fail();
        }
      }
    }
    const double points = static_cast<double>(dense->size);

    std::vector<Kernel> fused;
    for (int ck : readers) {
      if (ck <= pk) return fail();  // rule 4: consumers come after P
      const Kernel& c = p_.kernels[ck];
      if (c.kind != Kernel::Kind::kLoop) return fail();
      const std::set<int32_t>& c_writes = writes_[ck];
      if (c_writes.count(b) > 0) return fail();
      for (int32_t r : prod_reads) {
        if (c_writes.count(r) > 0) return fail();
      }
      for (int32_t r : prod_reads) {  // rule 5
        if (!InRange(r)) continue;
        const std::vector<int>& w = uses_.writers[r];
        auto it = std::upper_bound(w.begin(), w.end(), pk);
        if (it != w.end() && *it < ck) return fail();
      }
      ConsumerPlan plan;
      plan.kernel = ck;
      if (!prod.reduction_ranges.empty() && !c.reduction_ranges.empty() &&
          prod.reduction_ranges != c.reduction_ranges) {
        return fail();  // rule 6
      }
      plan.reduction_ranges =
          c.reduction_ranges.empty() ? prod.reduction_ranges : c.reduction_ranges;
      plan.extents = c.ranges;
      plan.extents.insert(plan.extents.end(), plan.reduction_ranges.begin(),
                          plan.reduction_ranges.end());
      absl::StatusOr<Kernel> k = Inline(prod, store, *dense, cone, c, plan,
                                        has_reduce, fallible, cone_ops, points);
      if (!k.ok()) return fail();
      fused.push_back(*std::move(k));
    }
    ++clock_;
    Unregister(pk);
    alive_[pk] = false;
    for (size_t i = 0; i < readers.size(); ++i) {
      Unregister(readers[i]);
      p_.kernels[readers[i]] = std::move(fused[i]);
      recomputed_[readers[i]] += recomputed_[pk] + (readers.size() > 1 ? cone_ops : 0);
      Register(readers[i]);
    }
    return true;
  }

  // The consumer with P inlined at every load of P's buffer; an error
  // (never shown) when a rule forbids it.
  absl::StatusOr<Kernel> Inline(const Kernel& prod, int store,
                                const DenseIndex& dense,
                                const std::vector<bool>& cone, const Kernel& c,
                                const ConsumerPlan& plan, bool has_reduce,
                                bool fallible, int cone_ops, double points) {
    const int32_t b = prod.body[store].buffer;
    const int cn = static_cast<int>(c.ranges.size());
    const DType dtype = p_.buffers[b].dtype;
    Kernel out = c;
    out.reduction_ranges = plan.reduction_ranges;
    out.body.clear();
    out.vec = {};
    std::vector<int32_t> remap(c.body.size(), -1);
    absl::flat_hash_map<IndexExpr, int32_t> copies;
    double evaluations = 0;
    for (size_t j = 0; j < c.body.size(); ++j) {
      const Op& op = c.body[j];
      if (op.buffer == b && op.code != OpCode::kStore) {
        if (op.code != OpCode::kLoad || op.dtype != dtype) {
          return absl::FailedPreconditionError("opaque read");  // rules 3, 4
        }
        const IndexExpr offset = ir::loop::Simplify(op.index, plan.extents);
        auto it = copies.find(offset);
        if (it != copies.end()) {
          remap[j] = it->second;
          continue;
        }
        if (fallible) {  // rule 7
          std::optional<DenseIndex> read =
              loop_util::AnalyzeDenseIndex(offset, plan.extents);
          if (!read.has_value() || read->size != dense.size) {
            return absl::FailedPreconditionError("partial read of fallible op");
          }
        }
        const std::vector<IndexExpr> subs =
            Substitution(prod, dense, offset, plan, cn);
        if (has_reduce && NestsReduction(prod, cone, subs, cn)) {
          return absl::FailedPreconditionError("nested reduction");
        }
        if (has_reduce && ReductionMovesInnermost(prod, cone, subs, cn)) {
          return absl::FailedPreconditionError("reduction recomputed per innermost point");
        }
        evaluations += Evaluations(offset, c, plan);
        std::vector<int32_t> pmap(prod.body.size(), -1);
        for (int q = 0; q < store; ++q) {
          if (!cone[q]) continue;
          Op copy = prod.body[q];
          for (int32_t& a : copy.args) a = pmap[a];
          copy.index =
              ir::loop::Simplify(loop_util::SubstituteVars(copy.index, subs),
                                 plan.extents);
          pmap[q] = static_cast<int32_t>(out.body.size());
          out.body.push_back(std::move(copy));
        }
        remap[j] = pmap[prod.body[store].args[0]];
        copies.emplace(offset, remap[j]);
        continue;
      }
      Op copy = op;
      for (int32_t& a : copy.args) a = remap[a];
      remap[j] = static_cast<int32_t>(out.body.size());
      out.body.push_back(std::move(copy));
    }
    const double amplification = evaluations / points;
    if (has_reduce && amplification > 1.0 + 1e-9) {
      return absl::FailedPreconditionError("reduction recomputed");
    }
    if (!has_reduce && amplification > 1.0 + 1e-9 &&
        cone_ops * amplification > options_.max_amplified_ops) {
      return absl::FailedPreconditionError("too much recomputation");
    }
    loop_util::AppendOps(prod.ops, &out.ops);
    loop_util::EliminateCommonOps(&out);
    loop_util::EliminateDeadOps(&out);
    if (static_cast<int>(out.body.size()) > options_.max_kernel_ops) {
      return absl::FailedPreconditionError("fused kernel too large");
    }
    KILN_RETURN_IF_ERROR(loop_util::VerifyKernelAlone(p_, out));  // rule 8
    return out;
  }

  using DType = ir::DType;
  ir::loop::LoopModule* lp_;
  LoopProgram& p_;
  const FuseVertical::Options& options_;
  std::vector<bool> alive_;
  // Incremental bookkeeping (the whole program is scanned once per run).
  std::vector<std::set<int32_t>> reads_, writes_;  // of each kernel
  loop_util::BufferUses uses_;                     // of live kernels
  uint64_t clock_ = 0;                             // bumped per fusion
  std::vector<uint64_t> kernel_stamp_;  // when a kernel last changed
  std::vector<uint64_t> buffer_stamp_;  // when a buffer's uses last changed
  std::vector<Failure> failed_;         // last failed attempt per producer
  // Ops each kernel computes again that another kernel also computes (from
  // multi-reader producers inlined into it, transitively).
  std::vector<int> recomputed_;
};

}  // namespace

absl::StatusOr<bool> FuseVertical::Run(ir::loop::LoopModule* program) {
  return VerticalFuser(program, options_).Run();
}

}  // namespace kiln::passes
