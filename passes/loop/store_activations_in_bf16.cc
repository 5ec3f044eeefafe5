// store-activations-in-bf16: which f32 activations bf16 library calls read
// or write, stored in bf16 (rules in store_activations_in_bf16.h).
#include "passes/loop/store_activations_in_bf16.h"

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/loop_ir.h"
#include "passes/loop/fusion_util.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::loop::Buffer;
using ir::loop::BufferKind;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;
using ir::loop::OpCode;

bool IsIntegerType(DType t) {
  return t != DType::kF32 && t != DType::kF16 && t != DType::kBF16 && t != DType::kF64;
}

// The int list attribute `name`, or empty.
std::vector<int64_t> IntsAttr(const Kernel& k, absl::string_view name) {
  auto it = k.call.attrs.find(name);
  if (it == k.call.attrs.end()) return {};
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return {*v};
  return {};
}

// A Conv / ConvTranspose / MatMul / Gemm call (fused or not) whose weights
// (node input 1) are a constant buffer: the calls bf16 mode computes in
// bf16. Sets `src` / `dst` to its source and destination buffers and
// `dst_ok` to whether the destination may be bf16 (no sum post-op).
bool IsBf16Call(const LoopProgram& p, const Kernel& k, int32_t* src, int32_t* dst,
                bool* dst_ok) {
  if (k.kind != Kernel::Kind::kExtern || ir::loop::IsReferenceCall(k)) return false;
  absl::string_view op = k.call.op;
  if (absl::ConsumePrefix(&op, ir::loop::kKilnOpPrefix)) {
    if (!absl::ConsumePrefix(&op, "Fused")) return false;
  } else if (!absl::ConsumePrefix(&op, ir::loop::kOnnxOpPrefix)) {
    return false;
  }
  if (op != "Conv" && op != "ConvTranspose" && op != "MatMul" && op != "Gemm") return false;
  const std::vector<int64_t> slots = IntsAttr(k, ir::loop::kAttrInputSlots);
  if (slots.size() != k.call.inputs.size() || k.call.outputs.size() != 1) return false;
  *src = *dst = -1;
  int32_t weights = -1;
  for (size_t j = 0; j < slots.size(); ++j) {
    if (slots[j] == 0) *src = k.call.inputs[j];
    if (slots[j] == 1) weights = k.call.inputs[j];
  }
  if (*src < 0 || weights < 0 || p.buffers[weights].kind != BufferKind::kConstant) return false;
  // A 1-D MatMul operand runs through a reshaped view: keep it f32.
  if (p.buffers[*src].shape.size() < 2 || p.buffers[weights].shape.size() < 2) return false;
  *dst = k.call.outputs[0];
  *dst_ok = true;
  if (auto it = k.call.attrs.find("post_ops"); it != k.call.attrs.end()) {
    if (const auto* kinds = std::get_if<std::string>(&it->second)) {
      for (absl::string_view kind : absl::StrSplit(*kinds, ir::loop::kListSeparator)) {
        if (kind == "sum") *dst_ok = false;
      }
    }
  }
  return true;
}

// `base` or `base_<k>`: a buffer name the program does not use yet.
std::string UniqueName(const LoopProgram& p, const std::string& base) {
  std::string name = base;
  for (int k = 2; p.FindBuffer(name) >= 0; ++k) name = absl::StrCat(base, "_", k);
  return name;
}

// `k`'s body with loads of the buffers in `bf16` cast to f32 after them, the
// values stored into them cast to bf16 before, and every store into a buffer
// with a twin (twin[b] >= 0) repeated into the twin, cast to bf16.
void RewriteBody(const std::vector<bool>& bf16, const std::vector<int32_t>& twin,
                 Kernel* k) {
  std::vector<Op> body;
  body.reserve(k->body.size() + 8);
  std::vector<int32_t> renumber(k->body.size(), -1);
  for (size_t i = 0; i < k->body.size(); ++i) {
    Op op = k->body[i];
    for (int32_t& a : op.args) a = renumber[a];
    const bool touches = op.buffer >= 0 && bf16[op.buffer];
    if (touches && op.is_store()) {
      Op cast;
      cast.code = OpCode::kCast;
      cast.dtype = DType::kBF16;
      cast.args = {op.args[0]};
      body.push_back(std::move(cast));
      op.args[0] = static_cast<int32_t>(body.size() - 1);
      body.push_back(std::move(op));
      continue;
    }
    if (touches && op.is_load()) {
      op.dtype = DType::kBF16;
      body.push_back(std::move(op));
      Op cast;
      cast.code = OpCode::kCast;
      cast.dtype = DType::kF32;
      cast.args = {static_cast<int32_t>(body.size() - 1)};
      body.push_back(std::move(cast));
      renumber[i] = static_cast<int32_t>(body.size() - 1);
      continue;
    }
    const int32_t copy_to =
        op.code == OpCode::kStore && op.buffer < static_cast<int32_t>(twin.size())
            ? twin[op.buffer]
            : -1;
    body.push_back(op);
    renumber[i] = static_cast<int32_t>(body.size() - 1);
    if (copy_to >= 0) {
      Op cast;
      cast.code = OpCode::kCast;
      cast.dtype = DType::kBF16;
      cast.args = {op.args[0]};
      body.push_back(std::move(cast));
      Op store = op;
      store.buffer = copy_to;
      store.args = {static_cast<int32_t>(body.size() - 1)};
      body.push_back(std::move(store));
    }
  }
  k->body = std::move(body);
}

}  // namespace

absl::StatusOr<bool> StoreActivationsInBf16::Run(ir::loop::LoopModule* lp) {
  if (!enabled_) return false;
  LoopProgram& p = lp->program;
  const size_t n = p.buffers.size();
  const std::vector<bool> dynamic = ir::loop::DynamicBuffers(p);
  std::vector<bool> allowed(n), touched_by_call(n, false);
  // Per buffer: whether some bf16 call reads it as its source, and whether
  // an extern kernel or an op other than a plain store writes it (then it
  // gets no bf16 twin).
  std::vector<bool> call_src(n, false), other_writer(n, false);
  for (size_t b = 0; b < n; ++b) {
    allowed[b] = p.buffers[b].dtype == DType::kF32 &&
                 p.buffers[b].kind == BufferKind::kIntermediate && !dynamic[b] &&
                 !loop_util::IsProtectedBuffer(*lp, static_cast<int32_t>(b));
  }
  for (const Kernel& k : p.kernels) {
    if (k.kind == Kernel::Kind::kExtern) {
      int32_t src = -1, dst = -1;
      bool dst_ok = false;
      const bool call = IsBf16Call(p, k, &src, &dst, &dst_ok);
      for (int32_t b : k.call.inputs) {
        if (!call || b != src) allowed[b] = false;
      }
      for (int32_t b : k.call.outputs) {
        if (!call || b != dst || !dst_ok) allowed[b] = false;
      }
      for (int32_t b : k.call.outputs) other_writer[b] = true;
      if (call) call_src[src] = true;
      if (call) {
        if (src == dst) allowed[src] = false;
        touched_by_call[src] = touched_by_call[dst] = true;
      }
      continue;
    }
    for (size_t i = 0; i < k.body.size(); ++i) {
      const Op& op = k.body[i];
      if (op.code == OpCode::kCast && IsIntegerType(op.dtype)) {
        const Op& from = k.body[op.args[0]];
        if (from.is_load()) allowed[from.buffer] = false;
      }
      // Indirect loads and stores (and ops the passes do not know) keep f32.
      if (op.buffer >= 0 && !loop_util::IsKnownOp(op.code)) {
        allowed[op.buffer] = false;
        if (op.is_store()) other_writer[op.buffer] = true;
      }
    }
  }
  std::vector<bool> bf16(n, false);
  bool changed = false;
  for (size_t b = 0; b < n; ++b) {
    bf16[b] = allowed[b] && touched_by_call[b];
    if (!bf16[b]) continue;
    p.buffers[b].dtype = DType::kBF16;
    changed = true;
  }
  // Twins: a buffer bf16 calls read as their source that must stay f32 for
  // another reader (a residual add's operand, a statistic) and that only
  // loop kernels write gets a bf16 copy, stored next to it by the same
  // kernels; the calls read the copy.
  std::vector<int32_t> twin(n, -1);
  for (size_t b = 0; b < n; ++b) {
    if (bf16[b] || !call_src[b] || other_writer[b] || p.buffers[b].dtype != DType::kF32 ||
        p.buffers[b].kind != BufferKind::kIntermediate || dynamic[b] ||
        loop_util::IsProtectedBuffer(*lp, static_cast<int32_t>(b))) {
      continue;
    }
    Buffer copy = p.buffers[b];
    copy.dtype = DType::kBF16;
    copy.name = UniqueName(p, p.buffers[b].name + "_bf16");
    twin[b] = static_cast<int32_t>(p.buffers.size());
    p.buffers.push_back(std::move(copy));
  }
  for (size_t b = 0; b < n; ++b) changed = changed || twin[b] >= 0;
  if (!changed) return false;
  bf16.resize(p.buffers.size(), false);
  for (int32_t t : twin) {
    if (t >= 0) bf16[t] = true;
  }
  for (Kernel& k : p.kernels) {
    if (k.kind == Kernel::Kind::kExtern) {
      int32_t src = -1, dst = -1;
      bool dst_ok = false;
      if (!IsBf16Call(p, k, &src, &dst, &dst_ok) || twin[src] < 0) continue;
      const std::vector<int64_t> slots = IntsAttr(k, ir::loop::kAttrInputSlots);
      for (size_t j = 0; j < slots.size(); ++j) {
        if (slots[j] == 0) k.call.inputs[j] = twin[src];
      }
      continue;
    }
    bool touches = false;
    for (const Op& op : k.body) {
      touches = touches || (op.buffer >= 0 && (bf16[op.buffer] ||
                                               (op.is_store() && twin[op.buffer] >= 0)));
    }
    if (touches) RewriteBody(bf16, twin, &k);
  }
  return true;
}

}  // namespace kiln::passes
