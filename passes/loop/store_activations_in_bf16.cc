// store-activations-in-bf16: which f32 activations bf16 library calls read
// or write, stored in bf16 (rules in store_activations_in_bf16.h).
#include "passes/loop/store_activations_in_bf16.h"

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
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

// `k`'s body with loads of the buffers in `bf16` cast to f32 after them and
// the values stored into them cast to bf16 before.
void RewriteBody(const std::vector<bool>& bf16, Kernel* k) {
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
    body.push_back(std::move(op));
    renumber[i] = static_cast<int32_t>(body.size() - 1);
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
      if (op.buffer >= 0 && !loop_util::IsKnownOp(op.code)) allowed[op.buffer] = false;
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
  if (!changed) return false;
  for (Kernel& k : p.kernels) {
    if (k.kind != Kernel::Kind::kLoop) continue;
    bool touches = false;
    for (const Op& op : k.body) touches = touches || (op.buffer >= 0 && bf16[op.buffer]);
    if (touches) RewriteBody(bf16, &k);
  }
  return true;
}

}  // namespace kiln::passes
