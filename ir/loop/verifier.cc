// The loop IR verifier (the checked invariants are listed in verifier.h).
#include "ir/loop/verifier.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ir/loop/text_lexer.h"
#include "ir/status_macros.h"

namespace kiln::ir::loop {
namespace {

using text_internal::IsIdentifier;

absl::Status Error(const std::string& where, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
}

// The first variable outside [0, num_vars), if any.
std::optional<int> BadVar(const IndexExpr& e, int num_vars) {
  if (e.is_var()) {
    if (e.var() < 0 || e.var() >= num_vars) return e.var();
    return std::nullopt;
  }
  for (const IndexExpr& op : e.operands()) {
    if (std::optional<int> v = BadVar(op, num_vars)) return v;
  }
  return std::nullopt;
}

// A division whose divisor may be non-positive, if any.
std::optional<IndexExpr> BadDivisor(const IndexExpr& e,
                                    absl::Span<const int64_t> extents) {
  if ((e.kind() == IndexExpr::Kind::kFloorDiv ||
       e.kind() == IndexExpr::Kind::kMod) &&
      ValueRange(e.operand(1), extents).lo < 1) {
    return e;
  }
  for (const IndexExpr& op : e.operands()) {
    if (std::optional<IndexExpr> d = BadDivisor(op, extents)) return d;
  }
  return std::nullopt;
}

bool ConstantFits(DType dtype, int64_t v) {
  switch (dtype) {
    case DType::kI32:
      return v >= std::numeric_limits<int32_t>::min() &&
             v <= std::numeric_limits<int32_t>::max();
    case DType::kI8: return v >= -128 && v <= 127;
    case DType::kU8: return v >= 0 && v <= 255;
    case DType::kBool: return v == 0 || v == 1;
    default: return true;
  }
}

// Buffer `b`; with `names`, also that its name is not among them (added).
absl::Status VerifyBuffer(const Buffer& buf, size_t b,
                          absl::flat_hash_set<std::string>* names) {
  // Built on error only: the fusion passes verify per candidate.
  const auto where = [&] { return absl::StrCat("buffer ", b, " '", buf.name, "'"); };
  if (!IsIdentifier(buf.name)) {
    return Error(where(), "name is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  }
  if (names != nullptr && !names->insert(buf.name).second) {
    return Error(where(), "duplicate name");
  }
  if (buf.dtype == DType::kInvalid) return Error(where(), "has no dtype");
  if (buf.strides.size() != buf.shape.size()) {
    return Error(where(), absl::StrCat("has ", buf.strides.size(),
                                       " strides for rank ", buf.shape.size()));
  }
  for (int64_t d : buf.shape) {
    if (d < 0) return Error(where(), "has a negative or dynamic dim");
  }
  for (int64_t s : buf.strides) {
    if (s < 0) return Error(where(), "has a negative stride");
  }
  if (!buf.StorageSize().has_value()) {
    return Error(where(), "storage size overflows int64");
  }
  return absl::OkStatus();
}

absl::Status VerifyBuffers(const LoopProgram& p) {
  absl::flat_hash_set<std::string> names;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    KILN_RETURN_IF_ERROR(VerifyBuffer(p.buffers[b], b, &names));
  }
  return absl::OkStatus();
}

bool Writable(const Buffer& b) {
  return b.kind == BufferKind::kOutput || b.kind == BufferKind::kIntermediate;
}

absl::Status VerifyExtern(const LoopProgram& p, const Kernel& k,
                          const std::string& where) {
  if (k.call.op.empty()) return Error(where, "extern call names no op");
  if (!k.body.empty() || !k.ranges.empty() || !k.reduction_ranges.empty()) {
    return Error(where, "extern kernels have no loops or body");
  }
  for (int32_t b : k.call.inputs) {
    if (b < 0 || b >= static_cast<int32_t>(p.buffers.size())) {
      return Error(where, absl::StrCat("input buffer ", b, " does not exist"));
    }
  }
  for (int32_t b : k.call.outputs) {
    if (b < 0 || b >= static_cast<int32_t>(p.buffers.size())) {
      return Error(where, absl::StrCat("output buffer ", b, " does not exist"));
    }
    if (!Writable(p.buffers[b])) {
      return Error(where, absl::StrCat("writes ",
                                       BufferKindName(p.buffers[b].kind),
                                       " buffer '", p.buffers[b].name, "'"));
    }
  }
  return absl::OkStatus();
}

// What is wrong with index `e`, without saying where (the caller does).
absl::Status VerifyIndex(const Kernel& k, const IndexExpr& e,
                         absl::Span<const int64_t> extents) {
  if (std::optional<int> v = BadVar(e, k.num_vars())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "index uses variable ", *v, ", but the kernel has ", k.num_vars()));
  }
  if (std::optional<IndexExpr> d = BadDivisor(e, extents)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "divisor of '", ToString(*d, [&k](int v) { return k.VarName(v); }),
        "' may be non-positive"));
  }
  return absl::OkStatus();
}

absl::Status VerifyLoopKernel(const LoopProgram& p, const Kernel& k,
                              const std::string& kernel_where) {
  if (!k.call.op.empty() || !k.call.inputs.empty() || !k.call.outputs.empty()) {
    return Error(kernel_where, "loop kernel carries an extern call");
  }
  const std::vector<int64_t> extents = k.VarExtents();
  for (int64_t e : extents) {
    if (e < 0) return Error(kernel_where, "negative loop extent");
  }
  // Ops that never run are not bounds-checked: none when the iteration
  // space is empty, the reduction-varying ones when the reduction space is.
  bool empty_space = false, empty_reduction = false;
  for (int64_t e : k.ranges) empty_space |= e == 0;
  for (int64_t e : k.reduction_ranges) empty_reduction |= e == 0;
  const auto namer = [&k](int v) { return k.VarName(v); };
  std::vector<bool> varying(k.body.size(), false);
  std::vector<DType> arg_dtypes;  // of the op checked, reused
  for (size_t i = 0; i < k.body.size(); ++i) {
    const Op& op = k.body[i];
    // Built on error only: the fusion passes verify per candidate.
    const auto where = [&] {
      return absl::StrCat(kernel_where, " op #", i, " (", OpCodeName(op.code), ")");
    };
    if (static_cast<int>(op.args.size()) != OpArity(op.code)) {
      return Error(where(), absl::StrCat("has ", op.args.size(),
                                       " operands, needs ", OpArity(op.code)));
    }
    arg_dtypes.clear();
    for (int32_t a : op.args) {
      if (a < 0 || a >= static_cast<int32_t>(i)) {
        return Error(where(), absl::StrCat("operand refers to op #", a,
                                         ", which is not defined before it"));
      }
      if (!k.body[a].has_result()) {
        return Error(where(), absl::StrCat("operand refers to op #", a,
                                         ", a store without a value"));
      }
      arg_dtypes.push_back(k.body[a].dtype);
      if (op.code != OpCode::kReduce && varying[a]) varying[i] = true;
    }
    const Buffer* buffer = nullptr;
    if (op.is_load() || op.is_store()) {
      if (op.buffer < 0 || op.buffer >= static_cast<int32_t>(p.buffers.size())) {
        return Error(where(), absl::StrCat("buffer ", op.buffer,
                                         " does not exist"));
      }
      buffer = &p.buffers[op.buffer];
      if (op.is_store() && !Writable(*buffer)) {
        return Error(where(), absl::StrCat("stores into ",
                                         BufferKindName(buffer->kind),
                                         " buffer '", buffer->name, "'"));
      }
    }
    absl::StatusOr<DType> dtype = InferResultDType(op, arg_dtypes, buffer);
    if (!dtype.ok()) return Error(where(), dtype.status().message());
    if (*dtype != op.dtype) {
      return Error(where(), absl::StrCat("records dtype ", DTypeName(op.dtype),
                                       ", the operands give ",
                                       DTypeName(*dtype)));
    }
    if (op.code == OpCode::kConstant && !IsFloat(op.dtype) &&
        !ConstantFits(op.dtype, op.ivalue)) {
      return Error(where(), absl::StrCat(op.ivalue, " does not fit ",
                                       DTypeName(op.dtype)));
    }
    if (op.code == OpCode::kReduce && k.reduction_ranges.empty()) {
      return Error(where(), "reduction in a kernel without reduction ranges");
    }
    if ((op.code == OpCode::kLoadIndirect ||
         op.code == OpCode::kStoreIndirect) &&
        op.extent < 1) {
      return Error(where(), absl::StrCat("extent ", op.extent, " is not positive"));
    }
    if (op.has_index()) {
      if (absl::Status bad = VerifyIndex(k, op.index, extents); !bad.ok()) {
        return Error(where(), bad.message());
      }
      for (int v = static_cast<int>(k.ranges.size()); v < k.num_vars(); ++v) {
        if (op.index.UsesVar(v)) varying[i] = true;
      }
    }
    if (buffer != nullptr && !empty_space &&
        !(varying[i] && empty_reduction)) {
      Interval r = ValueRange(op.index, extents);
      const int64_t size = *buffer->StorageSize();
      const bool indirect =
          op.code == OpCode::kLoadIndirect || op.code == OpCode::kStoreIndirect;
      if (indirect) {
        // The data-dependent part n * stride, n in [0, extent) once checked.
        int64_t step;
        if (__builtin_mul_overflow(op.extent - 1, op.stride, &step) ||
            __builtin_add_overflow(r.lo, std::min<int64_t>(step, 0), &r.lo) ||
            __builtin_add_overflow(r.hi, std::max<int64_t>(step, 0), &r.hi)) {
          return Error(where(), "index range overflows int64");
        }
      }
      if (r.lo < 0 || r.hi >= size) {
        std::string what = ToString(op.index, namer);
        if (indirect) absl::StrAppend(&what, " + [0, ", op.extent, ") * ", op.stride);
        return Error(where(), absl::StrCat(
                                "index ", what,
                                " ranges over [", r.lo, ", ", r.hi,
                                "], outside buffer '", buffer->name,
                                "' of ", size, " elements"));
      }
    }
    if (op.is_store() && varying[i]) {
      return Error(where(), "store depends on a reduction variable");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyKernel(const LoopProgram& program, const Kernel& k) {
  auto check_buffer = [&program](int32_t b) {
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) return absl::OkStatus();
    return VerifyBuffer(program.buffers[b], b, nullptr);
  };
  for (const Op& op : k.body) KILN_RETURN_IF_ERROR(check_buffer(op.buffer));
  for (int32_t b : k.call.inputs) KILN_RETURN_IF_ERROR(check_buffer(b));
  for (int32_t b : k.call.outputs) KILN_RETURN_IF_ERROR(check_buffer(b));
  const std::string where = absl::StrCat("kernel '", k.name, "'");
  if (!IsIdentifier(k.name)) return Error(where, "name is not an identifier");
  if (k.kind == Kernel::Kind::kExtern) return VerifyExtern(program, k, where);
  return VerifyLoopKernel(program, k, where);
}

absl::Status VerifyProgram(const LoopProgram& program) {
  KILN_RETURN_IF_ERROR(VerifyBuffers(program));
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    const Kernel& k = program.kernels[i];
    const std::string where = absl::StrCat("kernel ", i, " '", k.name, "'");
    if (!IsIdentifier(k.name)) return Error(where, "name is not an identifier");
    if (!names.insert(k.name).second) return Error(where, "duplicate name");
    if (k.kind == Kernel::Kind::kExtern) {
      KILN_RETURN_IF_ERROR(VerifyExtern(program, k, where));
    } else {
      KILN_RETURN_IF_ERROR(VerifyLoopKernel(program, k, where));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::ir::loop
