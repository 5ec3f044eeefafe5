// fuse-horizontal: sibling loop kernels over one iteration space merged
// (rules in fuse_horizontal.h).
#include "passes/loop/fuse_horizontal.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "ir/loop/index_expr.h"
#include "ir/loop/module.h"
#include "passes/loop/fusion_util.h"

namespace kiln::passes {
namespace {

using ir::loop::IndexExpr;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;
using ir::loop::OpCode;

bool Intersects(const std::set<int32_t>& a, const std::set<int32_t>& b) {
  for (int32_t x : a) {
    if (b.count(x) > 0) return true;
  }
  return false;
}

class HorizontalFuser {
 public:
  HorizontalFuser(ir::loop::LoopModule* lp, const FuseHorizontal::Options& options)
      : p_(lp->program), options_(options) {}

  bool Run() {
    alive_.assign(p_.kernels.size(), true);
    // Every kernel's read and write sets and every buffer's readers, kept
    // up to date across merges: recomputing them per candidate made the
    // pass quadratic in the kernel count (densenet121's 120 concats).
    reads_.resize(p_.kernels.size());
    writes_.resize(p_.kernels.size());
    readers_.assign(p_.buffers.size(), {});
    for (size_t k = 0; k < p_.kernels.size(); ++k) Record(static_cast<int>(k));
    bool changed = false;
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t a = 0; a < p_.kernels.size(); ++a) {
        if (!alive_[a] || p_.kernels[a].kind != Kernel::Kind::kLoop) continue;
        while (MergeOne(static_cast<int>(a))) progress = changed = true;
      }
    }
    if (changed) loop_util::CompactKernels(&p_, alive_);
    return changed;
  }

 private:
  // Caches kernel k's reads and writes and adds it to its buffers' readers.
  void Record(int k) {
    reads_[k] = loop_util::KernelReads(p_.kernels[k]);
    writes_[k] = loop_util::KernelWrites(p_.kernels[k]);
    for (int32_t b : reads_[k]) {
      if (b >= 0 && static_cast<size_t>(b) < readers_.size()) readers_[b].insert(k);
    }
  }
  // Removes kernel k from its buffers' readers.
  void Forget(int k) {
    for (int32_t b : reads_[k]) {
      if (b >= 0 && static_cast<size_t>(b) < readers_.size()) readers_[b].erase(k);
    }
  }

  // Merges the first legal later sibling into kernel `a`.
  bool MergeOne(int a) {
    const Kernel& ka = p_.kernels[a];
    const std::set<int32_t>& a_reads = reads_[a];
    const std::set<int32_t>& a_writes = writes_[a];
    // The later readers of A's inputs in increasing order, merged lazily
    // from the buffers' reader sets: a merge is usually the first
    // candidate, and collecting every reader per merge was quadratic in a
    // buffer's readers.
    struct Cursor {
      std::set<int>::const_iterator at, end;
    };
    std::vector<Cursor> cursors;
    for (int32_t x : a_reads) {
      if (a_writes.count(x) > 0) continue;
      if (x < 0 || static_cast<size_t>(x) >= readers_.size()) continue;
      cursors.push_back({readers_[x].upper_bound(a), readers_[x].end()});
    }
    auto next_candidate = [&cursors]() {
      int best = -1;
      for (const Cursor& c : cursors) {
        if (c.at != c.end && (best < 0 || *c.at < best)) best = *c.at;
      }
      for (Cursor& c : cursors) {
        if (c.at != c.end && *c.at == best) ++c.at;
      }
      return best;
    };
    for (int bk = next_candidate(); bk >= 0; bk = next_candidate()) {
      const Kernel& kb = p_.kernels[bk];
      if (ka.body.size() + kb.body.size() > static_cast<size_t>(options_.max_kernel_ops)) {
        continue;
      }
      if (kb.kind != Kernel::Kind::kLoop || kb.ranges != ka.ranges) continue;
      if (!ka.reduction_ranges.empty() && !kb.reduction_ranges.empty() &&
          ka.reduction_ranges != kb.reduction_ranges) {
        continue;
      }
      const std::set<int32_t>& b_reads = reads_[bk];
      const std::set<int32_t>& b_writes = writes_[bk];
      if (Intersects(a_writes, b_writes) || Intersects(a_reads, b_writes)) continue;
      bool blocked = false;
      for (int m = a + 1; m < bk && !blocked; ++m) {
        if (!alive_[m]) continue;
        const std::set<int32_t>& mr = reads_[m];
        const std::set<int32_t>& mw = writes_[m];
        blocked = Intersects(mw, b_reads) || Intersects(mr, b_writes) ||
                  Intersects(mw, b_writes);
      }
      if (blocked) continue;
      std::optional<Kernel> merged = Merge(ka, kb, a_writes);
      if (!merged.has_value()) continue;
      if (!loop_util::VerifyKernelAlone(p_, *merged).ok()) continue;
      Forget(a);
      Forget(bk);
      p_.kernels[a] = *std::move(merged);
      alive_[bk] = false;
      Record(a);
      return true;
    }
    return false;
  }

  // A's body then B's, B's reads of A's results forwarded (rule 3);
  // nullopt when a read of A's result cannot be forwarded.
  std::optional<Kernel> Merge(const Kernel& ka, const Kernel& kb,
                              const std::set<int32_t>& a_writes) const {
    std::vector<int64_t> extents = ka.VarExtents();
    if (ka.reduction_ranges.empty()) extents = kb.VarExtents();
    // A's store into a buffer B reads: (index, stored value); -1 when
    // stored twice. Found when B first reads the buffer (simplifying every
    // store of a large A per merge dominated a merge's cost).
    std::map<int32_t, std::pair<IndexExpr, int32_t>> stores;
    auto store_into = [&](int32_t buffer) {
      auto found = stores.find(buffer);
      if (found != stores.end()) return found;
      found = stores.end();
      for (const Op& op : ka.body) {
        if (op.code != OpCode::kStore || op.buffer != buffer) continue;
        if (found == stores.end()) {
          found = stores.try_emplace(buffer, ir::loop::Simplify(op.index, extents), op.args[0])
                      .first;
        } else {
          found->second.second = -1;
        }
      }
      return found;
    };
    Kernel out = ka;
    if (out.reduction_ranges.empty()) out.reduction_ranges = kb.reduction_ranges;
    out.vec = {};
    std::vector<int32_t> remap(kb.body.size(), -1);
    for (size_t j = 0; j < kb.body.size(); ++j) {
      const Op& op = kb.body[j];
      const int32_t rb = loop_util::ReadBufferOf(op);
      if (rb >= 0 && a_writes.count(rb) > 0) {
        auto it = store_into(rb);
        if (op.code != OpCode::kLoad || it == stores.end() ||
            it->second.second < 0 ||
            ir::loop::Simplify(op.index, extents) != it->second.first ||
            ka.body[it->second.second].dtype != op.dtype ||
            (ir::IsLowPrecisionFloat(p_.buffers[rb].dtype) &&
             ka.body[it->second.second].code != OpCode::kCast)) {
          return std::nullopt;
        }
        remap[j] = it->second.second;
        continue;
      }
      Op copy = op;
      for (int32_t& arg : copy.args) arg = remap[arg];
      remap[j] = static_cast<int32_t>(out.body.size());
      out.body.push_back(std::move(copy));
    }
    loop_util::AppendOps(kb.ops, &out.ops);
    loop_util::EliminateCommonOps(&out);
    return out;
  }

  LoopProgram& p_;
  const FuseHorizontal::Options& options_;
  std::vector<bool> alive_;
  std::vector<std::set<int32_t>> reads_, writes_;  // per kernel
  std::vector<std::set<int>> readers_;             // per buffer: alive kernels
};

}  // namespace

absl::StatusOr<bool> FuseHorizontal::Run(ir::loop::LoopModule* program) {
  return HorizontalFuser(program, options_).Run();
}

}  // namespace kiln::passes
