// propagate-layout: chooses which activation buffers live in the conv
// library's channel-blocked layout, marks extern convs, and rewrites the
// loop kernels that touch those buffers (passes/loop/propagate_layout.h).
#include "passes/loop/propagate_layout.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "passes/loop/fusion_util.h"

namespace kiln::passes {
namespace {

using ir::Shape;
using ir::loop::Buffer;
using ir::loop::BufferKind;
using ir::loop::ExternAttr;
using ir::loop::IndexExpr;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;
using ir::loop::OpCode;

using ir::loop::kAttrBlockedInputs;
using ir::loop::kAttrBlockedOutputs;
using ir::loop::kAttrChannelBlock;
using ir::loop::kAttrInputSlots;
using ir::loop::kReorderTag;
using ir::loop::kReorderTailTag;

bool IsConvOp(absl::string_view op) {
  return op == "onnx.Conv" || op == "kiln.FusedConv" || op == "onnx.QLinearConv";
}

// The channel block of a buffer with logical shape `logical` when the
// program's blocked buffers are blocked by `b`: b, or under
// ConvLayout::kChannelsLast its own channel count (one block: NHWC).
int64_t BufferBlock(const Shape& logical, int64_t b) {
  return b == ConvLayout::kChannelsLast ? logical[1] : b;
}

std::vector<int64_t> IntsAttr(const Kernel& k, const char* name) {
  auto it = k.call.attrs.find(name);
  if (it == k.call.attrs.end()) return {};
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return {};
}

std::vector<std::string> StringListAttr(const Kernel& k, const char* name) {
  auto it = k.call.attrs.find(name);
  if (it == k.call.attrs.end()) return {};
  const auto* v = std::get_if<std::string>(&it->second);
  if (v == nullptr || v->empty()) return {};
  return absl::StrSplit(*v, ',');
}

int64_t Inner(const Shape& logical) {
  int64_t inner = 1;
  for (size_t d = 2; d < logical.size(); ++d) inner *= logical[d];
  return inner;
}

// The flat offset in the blocked buffer of logical flat offset `e` of an
// N C spatial... tensor `logical` (not simplified).
IndexExpr PhysicalIndex(const IndexExpr& e, const Shape& logical, int64_t b) {
  const int64_t c = logical[1], inner = Inner(logical);
  const int64_t cb = (c + b - 1) / b;
  const IndexExpr n = ir::loop::FloorDiv(e, c * inner);
  const IndexExpr ch = ir::loop::Mod(ir::loop::FloorDiv(e, inner), c);
  const IndexExpr s = ir::loop::Mod(e, inner);
  return n * (cb * inner * b) + ir::loop::FloorDiv(ch, b) * (inner * b) + s * b +
         ir::loop::Mod(ch, b);
}

// `e` with the variables of extent 1 replaced by 0 (the simplifier keeps
// them, which hides a plain channel variable behind i0*C + i1).
IndexExpr ZeroUnitVars(const IndexExpr& e, const std::vector<int64_t>& extents) {
  std::vector<IndexExpr> subs;
  for (size_t v = 0; v < extents.size(); ++v) {
    subs.push_back(extents[v] == 1 ? ir::loop::Const(0) : ir::loop::Var(static_cast<int>(v)));
  }
  return loop_util::SubstituteVars(e, subs);
}

// The iteration variable a loop kernel's access to an N C spatial...
// buffer uses as its channel coordinate, when the coordinate is that
// variable plus a multiple of b; nullopt otherwise.
std::optional<int> ChannelVar(const Kernel& k, const Op& op, const Shape& logical,
                              int64_t b) {
  const std::vector<int64_t> extents = k.VarExtents();
  const IndexExpr ch = ir::loop::Simplify(
      ir::loop::Mod(ir::loop::FloorDiv(ZeroUnitVars(op.index, extents), Inner(logical)),
                    logical[1]),
      extents);
  IndexExpr var = ch;
  if (ch.kind() == IndexExpr::Kind::kAdd && ch.operands().size() == 2 &&
      ch.operand(1).is_const() && ch.operand(1).value() % b == 0) {
    var = ch.operand(0);
  }
  if (!var.is_var() || var.var() >= static_cast<int>(k.ranges.size())) return std::nullopt;
  return var.var();
}

// The block loop kernel `k` splits its channel loop by: `b`, or under
// ConvLayout::kChannelsLast the one channel count of the blocked buffers it
// touches, or when they differ (a concat or a split along channels) the
// extent of its one channel variable: each channels-last buffer holds all
// its channels contiguously, so any channel offset fits (nullopt when the
// accesses do not share one channel variable).
std::optional<int64_t> LoopKernelBlock(const Kernel& k, const LoopProgram& p,
                                       const std::vector<char>& blocked, int64_t b) {
  if (b != ConvLayout::kChannelsLast) return b;
  std::optional<int64_t> c;
  bool same = true;
  for (const Op& op : k.body) {
    if (op.buffer < 0 || !blocked[op.buffer]) continue;
    const int64_t channels = p.buffers[op.buffer].shape[1];
    if (c.has_value() && *c != channels) same = false;
    c = channels;
  }
  if (same) return c;
  std::optional<int> var;
  for (const Op& op : k.body) {
    if (op.buffer < 0 || !blocked[op.buffer]) continue;
    if (op.code != OpCode::kLoad && op.code != OpCode::kStore) return std::nullopt;
    const std::optional<int> v = ChannelVar(k, op, p.buffers[op.buffer].shape, 1);
    if (!v.has_value() || (var.has_value() && *var != *v)) return std::nullopt;
    var = v;
  }
  if (!var.has_value()) return std::nullopt;
  return k.ranges[*var];
}

// Whether loop kernel `k` under block `b` touches channels-last buffers of
// different channel counts (LoopKernelBlock: split by its channel extent).
bool MixedChannelsLast(const Kernel& k, const LoopProgram& p,
                       const std::vector<char>& blocked, int64_t b) {
  if (b != ConvLayout::kChannelsLast) return false;
  std::optional<int64_t> c;
  for (const Op& op : k.body) {
    if (op.buffer < 0 || !blocked[op.buffer]) continue;
    const int64_t channels = p.buffers[op.buffer].shape[1];
    if (c.has_value() && *c != channels) return true;
    c = channels;
  }
  return false;
}

// The one channel variable of loop kernel `k` over its accesses to blocked
// buffers; nullopt when an access does not fit. Its extent is a multiple of
// b, except in a kernel that only reads blocked buffers: there the last,
// partial block of lanes runs in a tail kernel (SplitChannelTail), so a
// concat can read a 58-channel conv output blocked by 16.
std::optional<int> KernelChannelVar(const Kernel& k, const LoopProgram& p,
                                    const std::vector<char>& blocked, int64_t b) {
  const std::optional<int64_t> kb = LoopKernelBlock(k, p, blocked, b);
  if (!kb.has_value()) return std::nullopt;
  // Channels-last buffers of several channel counts have no padding lanes
  // and no block boundaries: any channel offset and extent fit.
  const bool mixed = MixedChannelsLast(k, p, blocked, b);
  b = *kb;
  std::optional<int> var;
  bool stores = false;
  for (const Op& op : k.body) {
    if (op.buffer < 0 || !blocked[op.buffer]) continue;
    if (op.code != OpCode::kLoad && op.code != OpCode::kStore) return std::nullopt;
    const Shape& logical = p.buffers[op.buffer].shape;
    if (op.code == OpCode::kStore && !mixed) {
      if (logical[1] % b != 0) return std::nullopt;
      stores = true;
    }
    std::optional<int> v = ChannelVar(k, op, logical, mixed ? 1 : b);
    if (!v.has_value() || (var.has_value() && *var != *v)) return std::nullopt;
    var = v;
  }
  if (var.has_value() && stores && k.ranges[*var] % b != 0) return std::nullopt;
  return var;
}

std::vector<int32_t> Touched(const Kernel& k) {
  std::vector<int32_t> out;
  if (k.kind == Kernel::Kind::kExtern) {
    out = k.call.inputs;
    out.insert(out.end(), k.call.outputs.begin(), k.call.outputs.end());
  } else {
    for (const Op& op : k.body) {
      if (op.buffer >= 0) out.push_back(op.buffer);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int32_t Find(std::vector<int32_t>& parent, int32_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

// Splits iteration variable `var` of `k` into (var / b, b) with the b lanes
// as a new innermost iteration variable, and indexes blocked buffers
// physically. `logical[buf]` is the logical shape of each blocked buffer.
void RewriteLoopKernel(Kernel* k, int var, int64_t b, int64_t region_block,
                       const std::vector<char>& blocked, const std::vector<Shape>& logical) {
  const int n = static_cast<int>(k->ranges.size());
  const int m = static_cast<int>(k->reduction_ranges.size());
  std::vector<IndexExpr> subs;
  for (int j = 0; j < n + m; ++j) {
    if (j == var) {
      subs.push_back(ir::loop::Var(var) * b + ir::loop::Var(n));
    } else if ((j < n ? k->ranges[j] : k->reduction_ranges[j - n]) == 1) {
      subs.push_back(ir::loop::Const(0));
    } else {
      subs.push_back(ir::loop::Var(j < n ? j : j + 1));
    }
  }
  k->ranges[var] /= b;
  k->ranges.push_back(b);
  const std::vector<int64_t> extents = k->VarExtents();
  for (Op& op : k->body) {
    if (!op.has_index()) continue;
    IndexExpr e = loop_util::SubstituteVars(op.index, subs);
    if (op.buffer >= 0 && blocked[op.buffer]) {
      const Shape& shape = logical[op.buffer];
      e = PhysicalIndex(e, shape, region_block == ConvLayout::kChannelsLast
                                      ? BufferBlock(shape, region_block)
                                      : b);
    }
    op.index = ir::loop::Simplify(e, extents);
  }
}


// The last, partial block of channel variable `var` of `k` (extent not a
// multiple of b) as a kernel of its own: `var` restricted to the tail
// [extent - extent % b, extent), blocked buffers indexed physically. `k`
// keeps the whole blocks. Only for kernels that read blocked buffers and
// write plain ones, so no padding lane is ever written.
Kernel SplitChannelTail(Kernel* k, int var, int64_t b, const std::vector<char>& blocked,
                        const std::vector<Shape>& logical) {
  const int64_t extent = k->ranges[var];
  const int64_t base = extent - extent % b;
  Kernel tail = *k;
  tail.name = absl::StrCat(k->name, "_tail");
  tail.ranges[var] = extent % b;
  const int n = static_cast<int>(tail.ranges.size()) +
                static_cast<int>(tail.reduction_ranges.size());
  std::vector<IndexExpr> subs;
  for (int j = 0; j < n; ++j) {
    subs.push_back(j == var ? ir::loop::Var(var) + base : ir::loop::Var(j));
  }
  const std::vector<int64_t> extents = tail.VarExtents();
  for (Op& op : tail.body) {
    if (!op.has_index()) continue;
    IndexExpr e = loop_util::SubstituteVars(op.index, subs);
    if (op.buffer >= 0 && blocked[op.buffer]) e = PhysicalIndex(e, logical[op.buffer], b);
    op.index = ir::loop::Simplify(e, extents);
  }
  k->ranges[var] = base;
  return tail;
}

}  // namespace

PropagateLayout::PropagateLayout(ConvLayoutOracle oracle) : oracle_(std::move(oracle)) {}

namespace {

// The src block conv layout `w` pairs with dst block `b`: b when a kernel
// takes both blocked, 0 when only its dst; nullopt when no kernel writes
// dst blocked by b.
std::optional<int64_t> SrcBlockFor(const ConvLayout& w, int64_t b) {
  std::optional<int64_t> src;
  auto consider = [&](int64_t s, int64_t d) {
    if (d != b || (s != b && s != 0)) return;
    if (!src.has_value() || s == b) src = s;
  };
  consider(w.src_block, w.dst_block);
  for (const ConvLayout::Alternative& a : w.also) consider(a.src_block, a.dst_block);
  return src;
}

// The kernel of conv layout `w` for src / dst blocks s / d: nullopt when
// there is none (the library reorders), else whether it is a slower one.
std::optional<bool> KernelFor(const ConvLayout& w, int64_t s, int64_t d) {
  if (s == w.src_block && d == w.dst_block) return false;
  for (const ConvLayout::Alternative& a : w.also) {
    if (a.src_block == s && a.dst_block == d) return a.slower;
  }
  return std::nullopt;
}

// Multiply-adds of extern conv `k` (its output elements times the weights
// per output channel); 0 when the weights are not known.
int64_t ConvMacs(const Kernel& k, const LoopProgram& p) {
  const std::vector<int64_t> slots = IntsAttr(k, kAttrInputSlots);
  if (slots.size() != k.call.inputs.size() || k.call.outputs.size() != 1) return 0;
  for (size_t j = 0; j < slots.size(); ++j) {
    if (slots[j] != 1) continue;
    const Shape& w = p.buffers[k.call.inputs[j]].shape;
    if (w.empty() || w[0] <= 0) return 0;
    return ir::NumElements(p.buffers[k.call.outputs[0]].shape) * (ir::NumElements(w) / w[0]);
  }
  return 0;
}

// Per input of extern `k`, whether it is a post-op operand that shares the
// dst's layout (a sum, or a full-size add/sub/mul: oneDNN reads it in the
// dst's layout); the src and every other input are 0. Empty when the
// kernel's slots do not describe its inputs.
std::vector<char> SharesDstLayout(const Kernel& k, const LoopProgram& p) {
  const std::vector<int64_t> slots = IntsAttr(k, kAttrInputSlots);
  if (slots.size() != k.call.inputs.size() || k.call.outputs.size() != 1) return {};
  const std::vector<int64_t> operand_slots = IntsAttr(k, "post_op_inputs");
  const std::vector<std::string> post_ops = StringListAttr(k, "post_ops");
  const Shape& dst = p.buffers[k.call.outputs[0]].shape;
  std::vector<char> same(slots.size(), 0);
  for (size_t j = 0; j < slots.size(); ++j) {
    auto it = std::find(operand_slots.begin(), operand_slots.end(), slots[j]);
    const size_t op_index = it - operand_slots.begin();
    if (slots[j] == 0 || it == operand_slots.end() || op_index >= post_ops.size()) continue;
    const std::string& kind = post_ops[op_index];
    const bool full = p.buffers[k.call.inputs[j]].shape == dst;
    same[j] = kind == "sum" || ((kind == "add" || kind == "sub" || kind == "mul") && full);
  }
  return same;
}

// The buffers that can live blocked by `b` (see PropagateLayout).
std::vector<char> ChooseBlocked(const ir::loop::LoopModule& lp,
                                const std::vector<std::optional<ConvLayout>>& wants,
                                int64_t b, bool f32_channels_last) {
  const LoopProgram& p = lp.program;
  const int32_t nb = static_cast<int32_t>(p.buffers.size());
  // Candidates: f32 N C spatial... intermediates; under kChannelsLast u8 /
  // s8 ones (the layout of the int8 convs), and f32 ones when an f32 conv
  // runs on channels-last activations (`f32_channels_last`).
  const bool channels_last = b == ConvLayout::kChannelsLast;
  std::vector<char> blocked(nb, 0);
  for (int32_t i = 0; i < nb; ++i) {
    const Buffer& buf = p.buffers[i];
    const bool integer = buf.dtype == ir::DType::kU8 || buf.dtype == ir::DType::kI8;
    const bool f32 = buf.dtype == ir::DType::kF32;
    const bool dtype_ok = channels_last ? integer || (f32 && f32_channels_last) : f32;
    blocked[i] = buf.kind == BufferKind::kIntermediate && dtype_ok &&
                 buf.shape.size() >= 3 && buf.shape.size() <= 5 && buf.IsRowMajor() &&
                 ir::NumElements(buf.shape) > 0 && !loop_util::IsProtectedBuffer(lp, i);
  }
  // Extern constraints; `same` pairs must share a layout.
  std::vector<std::pair<int32_t, int32_t>> same;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const Kernel& kernel = p.kernels[k];
    if (kernel.kind != Kernel::Kind::kExtern) continue;
    const std::vector<int32_t> touched = Touched(kernel);
    const std::vector<int64_t> slots = IntsAttr(kernel, kAttrInputSlots);
    const std::optional<int64_t> src_block =
        wants[k].has_value() ? SrcBlockFor(*wants[k], b) : std::nullopt;
    if (!src_block.has_value() || kernel.call.outputs.size() != 1 ||
        slots.size() != kernel.call.inputs.size()) {
      for (int32_t t : touched) blocked[t] = 0;
      continue;
    }
    const int32_t dst = kernel.call.outputs[0];
    const std::vector<char> shares = SharesDstLayout(kernel, p);
    for (size_t j = 0; j < kernel.call.inputs.size(); ++j) {
      const int32_t buf = kernel.call.inputs[j];
      if (slots[j] == 0) {
        if (*src_block != b) blocked[buf] = 0;
      } else if (shares[j]) {
        same.emplace_back(buf, dst);
      } else {
        blocked[buf] = 0;
      }
    }
  }
  // Loop kernel constraints, to a fixed point (removing a buffer can only
  // make other kernels fit).
  bool again = true;
  while (again) {
    again = false;
    for (const auto& [x, y] : same) {
      if (blocked[x] != blocked[y]) {
        blocked[x] = blocked[y] = 0;
        again = true;
      }
    }
    for (const Kernel& kernel : p.kernels) {
      if (kernel.kind != Kernel::Kind::kLoop) continue;
      const std::vector<int32_t> touched = Touched(kernel);
      if (std::none_of(touched.begin(), touched.end(),
                       [&](int32_t t) { return blocked[t] != 0; })) {
        continue;
      }
      if (!KernelChannelVar(kernel, p, blocked, b).has_value()) {
        for (int32_t t : touched) blocked[t] = 0;
        again = true;
      }
    }
  }
  // Components (buffers linked through loop kernels) that no conv touches
  // would only move reorders around: they stay plain.
  std::vector<int32_t> parent(nb);
  std::iota(parent.begin(), parent.end(), 0);
  for (const Kernel& kernel : p.kernels) {
    if (kernel.kind != Kernel::Kind::kLoop) continue;
    int32_t first = -1;
    for (int32_t t : Touched(kernel)) {
      if (!blocked[t]) continue;
      if (first < 0) {
        first = t;
      } else {
        parent[Find(parent, t)] = Find(parent, first);
      }
    }
  }
  std::vector<char> has_conv(nb, 0);
  for (const Kernel& kernel : p.kernels) {
    if (kernel.kind != Kernel::Kind::kExtern) continue;
    for (int32_t t : Touched(kernel)) {
      if (blocked[t]) has_conv[Find(parent, t)] = 1;
    }
  }
  for (int32_t i = 0; i < nb; ++i) {
    if (blocked[i] && !has_conv[Find(parent, i)]) blocked[i] = 0;
  }
  return blocked;
}

// Whether loop kernel `k` touches a plain activation while others are
// blocked: it converts layouts.
bool Converts(const Kernel& k, const LoopProgram& p, const std::vector<char>& blocked) {
  const std::vector<int32_t> touched = Touched(k);
  if (std::none_of(touched.begin(), touched.end(),
                   [&](int32_t t) { return blocked[t] != 0; })) {
    return false;
  }
  return std::any_of(touched.begin(), touched.end(), [&](int32_t t) {
    const Buffer& buf = p.buffers[t];
    return !blocked[t] && buf.kind != BufferKind::kConstant && buf.shape.size() >= 3 &&
           Inner(buf.shape) > 1;
  });
}

// Why a cost and not a vote: on AVX-512 CPUs 1x1 convs run on nChw8c only
// with jit_1x1:avx2, yet nChw8c removes every reorder of a RegNet. One
// reordered element costs about as much as this many multiply-adds on the
// slower kernel, fitted on CPU time per inference (docs/decisions/0025;
// data in benchmarks/results/2026-12-01-vm-propagate-layout-avx512.md).
constexpr int64_t kSlowerMacsPerReorderedElement = 100;

// What kernel `k` of `p` pays, in reordered elements, when `blocked`
// buffers are blocked by `b`: both activations of a conv the library runs
// behind reorders (no optimized kernel on that layout pair), the plain
// activations of a converting loop kernel, and the multiply-adds of a conv
// that runs on a slower kernel.
int64_t KernelLayoutCost(const LoopProgram& p,
                         const std::vector<std::optional<ConvLayout>>& wants, size_t k,
                         const std::vector<char>& blocked, int64_t b) {
  const Kernel& kernel = p.kernels[k];
  int64_t cost = 0;
  if (kernel.kind == Kernel::Kind::kLoop) {
    if (!Converts(kernel, p, blocked)) return 0;
    for (int32_t t : Touched(kernel)) {
      const Buffer& buf = p.buffers[t];
      if (!blocked[t] && buf.kind != BufferKind::kConstant && buf.shape.size() >= 3) {
        cost += ir::NumElements(buf.shape);
      }
    }
    return cost;
  }
  if (!wants[k].has_value() || wants[k]->dst_block == 0 || kernel.call.inputs.empty() ||
      kernel.call.outputs.size() != 1) {
    return 0;  // the same whatever the block
  }
  const int32_t src = kernel.call.inputs[0], dst = kernel.call.outputs[0];
  const std::optional<bool> slower =
      KernelFor(*wants[k], blocked[src] ? b : 0, blocked[dst] ? b : 0);
  if (!slower.has_value()) {
    return ir::NumElements(p.buffers[src].shape) + ir::NumElements(p.buffers[dst].shape);
  }
  return *slower ? ConvMacs(kernel, p) / kSlowerMacsPerReorderedElement : 0;
}

// A conv with a residual (a sum or full-size binary operand, which shares
// the dst's layout) that writes a graph output directly: the output must
// stay plain, so the operand stays plain too, and so does everything tied
// to it; oneDNN then has no direct kernel for the call (AVX2: the
// gemm-based conv takes the full-size add element by element, 10x slower
// at isnet's 64 x 512 x 512 stage outputs). Such a conv writes an
// intermediate copy of the output instead, and a loop kernel right after
// it copies that into the output; readers of the output read the copy.
// propagate-layout can then block the copy, and the copy kernel is the
// boundary reorder; where the copy stays plain, UndoPlainRedirects puts
// things back as they were. Convs without a residual need none of this:
// the library reorders a plain dst inside the call at the same cost.
struct OutputRedirect {
  size_t conv = 0;        // the conv's kernel index (after the insertions)
  int32_t output = -1;    // the graph output buffer
  int32_t copy = -1;      // the intermediate the conv now writes
};

IndexExpr RowMajorIndex(const Shape& shape) {
  IndexExpr e = ir::loop::Const(0);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    e = e + ir::loop::Var(static_cast<int>(d)) * stride;
    stride *= shape[d];
  }
  return ir::loop::Simplify(e, shape);
}

void ReplaceBuffer(Kernel* k, int32_t from, int32_t to, bool reads_only) {
  if (k->kind == Kernel::Kind::kExtern) {
    for (int32_t& b : k->call.inputs) b = b == from ? to : b;
    if (!reads_only) {
      for (int32_t& b : k->call.outputs) b = b == from ? to : b;
    }
    return;
  }
  for (Op& op : k->body) {
    if (op.buffer == from && (op.is_load() || !reads_only)) op.buffer = to;
  }
}

std::vector<OutputRedirect> RedirectConvOutputs(ir::loop::LoopModule* lp) {
  LoopProgram& p = lp->program;
  std::vector<OutputRedirect> out;
  std::vector<Kernel> kernels;
  kernels.reserve(p.kernels.size());
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    kernels.push_back(std::move(p.kernels[k]));
    Kernel& conv = kernels.back();
    if (conv.kind != Kernel::Kind::kExtern || !IsConvOp(conv.call.op) ||
        conv.call.outputs.size() != 1) {
      continue;
    }
    const int32_t output = conv.call.outputs[0];
    const Buffer& buf = p.buffers[output];
    const std::vector<char> shares = SharesDstLayout(conv, p);
    if (std::none_of(shares.begin(), shares.end(), [](char c) { return c != 0; })) continue;
    if (buf.kind != BufferKind::kOutput || buf.dtype != ir::DType::kF32 ||
        buf.shape.size() < 3 || buf.shape.size() > 5 || !buf.IsRowMajor() ||
        ir::NumElements(buf.shape) <= 0 ||
        std::find(conv.call.inputs.begin(), conv.call.inputs.end(), output) !=
            conv.call.inputs.end()) {
      continue;
    }
    const Shape shape = buf.shape;
    const int32_t copy = p.AddBuffer(absl::StrCat(buf.name, "_conv"), buf.dtype, shape,
                                     BufferKind::kIntermediate);
    conv.call.outputs[0] = copy;
    Kernel c;
    c.name = absl::StrCat(conv.name, "_output");
    c.description = "copy to output";
    c.kind = Kernel::Kind::kLoop;
    c.ranges = shape;
    c.ops = conv.ops;
    Op load;
    load.code = OpCode::kLoad;
    load.dtype = ir::DType::kF32;
    load.buffer = copy;
    load.index = RowMajorIndex(shape);
    Op store;
    store.code = OpCode::kStore;
    store.dtype = ir::DType::kInvalid;
    store.args = {0};
    store.buffer = output;
    store.index = load.index;
    c.body = {load, store};
    out.push_back({kernels.size() - 1, output, copy});
    kernels.push_back(std::move(c));
    // Later readers of the output read the copy.
    for (size_t r = k + 1; r < p.kernels.size(); ++r) {
      ReplaceBuffer(&p.kernels[r], output, copy, /*reads_only=*/true);
    }
  }
  p.kernels = std::move(kernels);
  return out;
}

// Puts back the redirects whose copy stays plain, and renumbers the copies
// that stay (appended after the program's buffers) so no buffer is unused.
// `block_of` is per buffer and is renumbered with them.
void UndoPlainRedirects(LoopProgram* p, const std::vector<OutputRedirect>& redirects,
                        int32_t first_copy, std::vector<int64_t>* block_of) {
  if (redirects.empty()) return;
  std::vector<char> drop_kernel(p->kernels.size(), 0);
  std::vector<int32_t> renumber(p->buffers.size(), -1);
  std::vector<Buffer> kept;
  for (const OutputRedirect& r : redirects) {
    if ((*block_of)[r.copy] != 0) {
      renumber[r.copy] = first_copy + static_cast<int32_t>(kept.size());
      kept.push_back(p->buffers[r.copy]);
      continue;
    }
    drop_kernel[r.conv + 1] = 1;
    for (Kernel& k : p->kernels) ReplaceBuffer(&k, r.copy, r.output, /*reads_only=*/false);
  }
  std::vector<Kernel> kernels;
  for (size_t k = 0; k < p->kernels.size(); ++k) {
    if (drop_kernel[k]) continue;
    Kernel& kernel = p->kernels[k];
    for (const OutputRedirect& r : redirects) {
      if (renumber[r.copy] >= 0 && renumber[r.copy] != r.copy) {
        ReplaceBuffer(&kernel, r.copy, renumber[r.copy], /*reads_only=*/false);
      }
    }
    kernels.push_back(std::move(kernel));
  }
  p->kernels = std::move(kernels);
  std::vector<int64_t> blocks(block_of->begin(), block_of->begin() + first_copy);
  for (const OutputRedirect& r : redirects) {
    if (renumber[r.copy] >= 0) blocks.push_back((*block_of)[r.copy]);
  }
  p->buffers.resize(first_copy);
  for (Buffer& b : kept) p->buffers.push_back(std::move(b));
  *block_of = std::move(blocks);
}

}  // namespace

absl::StatusOr<bool> PropagateLayout::Run(ir::loop::LoopModule* lp) {
  if (!oracle_) return false;
  LoopProgram& p = lp->program;
  const int32_t first_copy = static_cast<int32_t>(p.buffers.size());
  const std::vector<OutputRedirect> redirects = RedirectConvOutputs(lp);
  const int32_t nb_all = static_cast<int32_t>(p.buffers.size());

  // What the library wants for each conv; how many convs prefer each block.
  std::vector<std::optional<ConvLayout>> wants(p.kernels.size());
  std::map<int64_t, int> votes;
  bool f32_channels_last = false;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const Kernel& kernel = p.kernels[k];
    if (kernel.kind != Kernel::Kind::kExtern || !IsConvOp(kernel.call.op)) continue;
    if (kernel.call.attrs.count(kAttrBlockedInputs) > 0) continue;  // already done
    absl::StatusOr<ConvLayout> w = oracle_(*lp, kernel);
    if (!w.ok()) continue;
    wants[k] = *w;
    if (w->dst_block != 0) ++votes[w->dst_block];
    bool channels_last = w->dst_block == ConvLayout::kChannelsLast;
    for (const ConvLayout::Alternative& a : w->also) {
      if (a.dst_block != 0) votes.emplace(a.dst_block, 0);
      channels_last |= a.dst_block == ConvLayout::kChannelsLast;
    }
    if (channels_last && kernel.call.outputs.size() == 1 &&
        p.buffers[kernel.call.outputs[0]].dtype == ir::DType::kF32) {
      f32_channels_last = true;
    }
  }
  if (votes.empty()) {
    std::vector<int64_t> none(nb_all, 0);
    UndoPlainRedirects(&p, redirects, first_copy, &none);
    return false;
  }
  // Candidate blocks in order of preference: the one most convs prefer,
  // then the widest. E.g. on AVX-512 hosts convs prefer nChw16c, but a
  // RegNet's grouped convs (8 channels a group) run optimized only on
  // nChw8c and its 104- and 440-channel activations cannot be blocked by 16
  // in loop kernels: there nChw8c keeps every activation blocked.
  std::vector<int64_t> order;
  for (const auto& [block, n] : votes) order.push_back(block);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return votes[x] != votes[y] ? votes[x] > votes[y] : x > y;
  });
  std::vector<std::vector<char>> chosen;
  for (const int64_t candidate : order) chosen.push_back(ChooseBlocked(*lp, wants, candidate, f32_channels_last));

  // Regions: buffers some block can keep blocked, linked by every kernel
  // that touches several. No kernel touches two regions, so each takes its
  // own block: the cheapest (KernelLayoutCost over the kernels touching
  // it), on a tie the earlier in `order`. Most CNNs are one region; in a
  // ShuffleNet the channel shuffle keeps its activations plain, which cuts
  // the program into regions that want different blocks (the 24-channel
  // stem takes 8, the 464 -> 1024 conv before the classifier 16).
  std::vector<char> candidate(nb_all, 0);
  for (const std::vector<char>& c : chosen) {
    for (int32_t i = 0; i < nb_all; ++i) candidate[i] |= c[i];
  }
  std::vector<int32_t> parent(nb_all);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<int32_t> region_of_kernel(p.kernels.size(), -1);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    for (int32_t t : Touched(p.kernels[k])) {
      if (!candidate[t]) continue;
      if (region_of_kernel[k] < 0) {
        region_of_kernel[k] = t;
      } else {
        parent[Find(parent, t)] = Find(parent, region_of_kernel[k]);
      }
    }
  }
  std::map<int32_t, std::vector<int64_t>> region_cost;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    if (region_of_kernel[k] < 0) continue;  // pays the same whatever the blocks
    std::vector<int64_t>& cost = region_cost[Find(parent, region_of_kernel[k])];
    cost.resize(order.size(), 0);
    for (size_t c = 0; c < order.size(); ++c) {
      cost[c] += KernelLayoutCost(p, wants, k, chosen[c], order[c]);
    }
  }
  std::vector<int64_t> block_of(nb_all, 0);
  for (int32_t i = 0; i < nb_all; ++i) {
    if (!candidate[i]) continue;
    const std::vector<int64_t>& cost = region_cost[Find(parent, i)];
    const size_t best = std::min_element(cost.begin(), cost.end()) - cost.begin();
    if (chosen[best][i]) block_of[i] = order[best];
  }
  UndoPlainRedirects(&p, redirects, first_copy, &block_of);
  const int32_t nb = static_cast<int32_t>(p.buffers.size());
  std::vector<char> blocked(nb, 0);
  for (int32_t i = 0; i < nb; ++i) blocked[i] = block_of[i] != 0;
  if (std::none_of(blocked.begin(), blocked.end(), [](char c) { return c != 0; })) {
    return false;
  }
  // The block of the blocked buffers a kernel touches (one region's).
  auto kernel_block = [&](const std::vector<int32_t>& touched) {
    for (int32_t t : touched) {
      if (block_of[t] != 0) return block_of[t];
    }
    return int64_t{0};
  };

  // Rewrite: loop kernels (while buffers still have logical shapes), then
  // extern attributes, then buffer shapes.
  std::vector<Shape> logical(nb);
  for (int32_t i = 0; i < nb; ++i) logical[i] = p.buffers[i].shape;
  std::vector<Kernel> kernels;
  kernels.reserve(p.kernels.size());
  for (Kernel& original : p.kernels) {
    kernels.push_back(std::move(original));
    const std::vector<int32_t> touched = Touched(kernels.back());
    if (std::none_of(touched.begin(), touched.end(),
                     [&](int32_t t) { return blocked[t] != 0; })) {
      continue;
    }
    const int64_t region_block = kernel_block(touched);
    Kernel& kernel = kernels.back();
    if (kernel.kind == Kernel::Kind::kExtern) {
      std::vector<int64_t> in, out;
      for (int32_t t : kernel.call.inputs) in.push_back(blocked[t] ? logical[t][1] : 0);
      for (int32_t t : kernel.call.outputs) out.push_back(blocked[t] ? logical[t][1] : 0);
      kernel.call.attrs[kAttrBlockedInputs] = in;
      kernel.call.attrs[kAttrBlockedOutputs] = out;
      kernel.call.attrs[kAttrChannelBlock] = region_block;
      continue;
    }
    const std::optional<int> var = KernelChannelVar(kernel, p, blocked, region_block);
    const std::optional<int64_t> block = LoopKernelBlock(kernel, p, blocked, region_block);
    if (!var.has_value() || !block.has_value()) {
      return InternalError("propagate-layout: kernel '", kernel.name,
                           "' no longer fits the blocked layout");
    }
    const int64_t b = *block;
    const bool converts = Converts(kernel, p, blocked);
    std::optional<Kernel> tail;
    if (kernel.ranges[*var] % b != 0) {
      tail = SplitChannelTail(&kernel, *var, b, blocked, logical);
      if (kernel.ranges[*var] == 0) {  // fewer channels than one block
        kernel = *std::move(tail);
        tail.reset();
      }
    }
    if (kernel.ranges[*var] % b == 0) {
      RewriteLoopKernel(&kernel, *var, b, region_block, blocked, logical);
    }
    // A conversion counts once: the tail is part of its kernel's.
    if (converts && !absl::EndsWith(kernel.description, kReorderTag)) {
      kernel.description += kReorderTag;
    }
    if (tail.has_value()) {
      if (converts) tail->description += kReorderTailTag;
      kernels.push_back(*std::move(tail));
    }
  }
  p.kernels = std::move(kernels);
  for (int32_t i = 0; i < nb; ++i) {
    if (!blocked[i]) continue;
    Buffer& buf = p.buffers[i];
    const int64_t b = BufferBlock(buf.shape, block_of[i]);
    Shape physical = buf.shape;
    physical[1] = (physical[1] + b - 1) / b;
    physical.push_back(b);
    buf.shape = physical;
    buf.strides = ir::RowMajorStrides(physical);
  }
  return true;
}

}  // namespace kiln::passes
