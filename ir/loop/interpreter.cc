// The loop IR's scalar interpreter (semantics in loop_ir.h, numerics in
// interpreter.h).
#include "ir/loop/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/loop/verifier.h"
#include "ir/status_macros.h"

namespace kiln::ir::loop {
namespace {

// One scalar: `f` for float dtypes, `i` for integers and bool.
struct Val {
  double f = 0;
  int64_t i = 0;
};

// Rounds a float result to what its dtype computes in.
double RoundFloat(DType dtype, double v) {
  if (dtype == DType::kF64) return v;
  return static_cast<double>(static_cast<float>(v));
}

// A float value as an element of `dtype` stores it: f16 and bf16 round to
// nearest even (after the f32 rounding every float value already had).
double RoundToStorage(DType dtype, double v) {
  switch (dtype) {
    case DType::kF16: return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case DType::kBF16: return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
    default: return v;
  }
}

// Two's-complement wrap to the dtype's width; bool becomes 0/1.
int64_t Wrap(DType dtype, uint64_t v) {
  switch (dtype) {
    case DType::kI32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::kI8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DType::kU8: return static_cast<uint8_t>(v);
    case DType::kBool: return v != 0 ? 1 : 0;
    default: return static_cast<int64_t>(v);
  }
}

int64_t FloatToInt(double v) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(v);
}

// Float to i8 / u8: truncates, NaN gives 0, out-of-range values saturate (as
// the graph interpreter's Cast, QuantizeLinear and Highway's DemoteTo do).
int64_t FloatToNarrowInt(DType dtype, double v) {
  const int64_t lo = dtype == DType::kI8 ? -128 : 0;
  const int64_t hi = dtype == DType::kI8 ? 127 : 255;
  return std::min(std::max(FloatToInt(v), lo), hi);
}

uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

int64_t IntPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;  // |base^exp| < 1 truncates to 0 (base 0: defined as 0 too)
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  while (exp > 0) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<int64_t>(result);
}

// Floor modulo of floats: the sign of the divisor.
double FloorModFloat(double x, double y) {
  double r = std::fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

// Integer division and modulo: b == 0 fails, b == -1 cannot overflow.
constexpr char kDivisionByZero[] = "integer division by zero";

int64_t DivInt(DType dt, int64_t a, int64_t b, const char** error) {
  if (b == 0) {
    *error = kDivisionByZero;
    return 0;
  }
  if (b == -1) return Wrap(dt, 0 - U(a));
  return Wrap(dt, U(a / b));
}

int64_t FmodInt(int64_t a, int64_t b, const char** error) {
  if (b == 0) {
    *error = kDivisionByZero;
    return 0;
  }
  return b == -1 ? 0 : a % b;
}

int64_t ModInt(int64_t a, int64_t b, const char** error) {
  if (b == 0) {
    *error = kDivisionByZero;
    return 0;
  }
  return b == -1 ? 0 : FloorModInt(a, b);
}

// A float form's result: a double rounded to the result dtype, or a bool.
void SetFloatFormResult(DType dt, double r, Val& out) { out.f = RoundFloat(dt, r); }
void SetFloatFormResult(DType, bool r, Val& out) { out.i = r ? 1 : 0; }

// A buffer's storage; floats in `f`, integers and bool in `i`.
struct Storage {
  DType dtype = DType::kInvalid;
  std::vector<double> f;
  std::vector<int64_t> i;
  int64_t size = 0;
};

class Interpreter {
 public:
  Interpreter(const LoopProgram& p, const InterpreterOptions& options)
      : p_(p), options_(options) {}

  absl::StatusOr<std::map<std::string, Tensor>> Run(
      const std::map<std::string, Tensor>& bindings) {
    KILN_RETURN_IF_ERROR(VerifyProgram(p_));
    KILN_RETURN_IF_ERROR(Allocate(bindings));
    for (const Kernel& k : p_.kernels) {
      if (k.kind == Kernel::Kind::kExtern) {
        return absl::UnimplementedError(absl::StrCat(
            "kernel '", k.name, "': the loop interpreter cannot run extern "
            "call '", k.call.op, "'"));
      }
      KILN_RETURN_IF_ERROR(RunKernel(k));
    }
    std::map<std::string, Tensor> outputs;
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      if (p_.buffers[b].kind == BufferKind::kOutput) {
        outputs.emplace(p_.buffers[b].name, Gather(b));
      }
    }
    return outputs;
  }

 private:
  // Calls fn(element index, storage offset) for each element of a buffer in
  // row-major order.
  template <typename Fn>
  static void ForEachElement(const Buffer& b, Fn fn) {
    const int64_t n = NumElements(b.shape);
    std::vector<int64_t> coord(b.shape.size(), 0);
    for (int64_t e = 0; e < n; ++e) {
      int64_t offset = 0;
      for (size_t d = 0; d < coord.size(); ++d) offset += coord[d] * b.strides[d];
      fn(e, offset);
      for (size_t d = coord.size(); d-- > 0;) {
        if (++coord[d] < b.shape[d]) break;
        coord[d] = 0;
      }
    }
  }

  absl::Status Allocate(const std::map<std::string, Tensor>& bindings) {
    storage_.resize(p_.buffers.size());
    for (size_t bi = 0; bi < p_.buffers.size(); ++bi) {
      const Buffer& b = p_.buffers[bi];
      Storage& s = storage_[bi];
      s.dtype = b.dtype;
      s.size = *b.StorageSize();  // the verifier checked it exists
      if (s.size > options_.max_buffer_elements) {
        return absl::InvalidArgumentError(absl::StrCat(
            "buffer '", b.name, "' needs ", s.size,
            " elements, more than the interpreter's limit of ",
            options_.max_buffer_elements));
      }
      if (IsFloat(b.dtype)) {
        s.f.assign(s.size, 0.0);
      } else {
        s.i.assign(s.size, 0);
      }
      if (b.kind != BufferKind::kInput && b.kind != BufferKind::kConstant) {
        continue;
      }
      auto it = bindings.find(b.name);
      if (it == bindings.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            BufferKindName(b.kind), " buffer '", b.name, "' is not bound"));
      }
      const Tensor& t = it->second;
      if (t.dtype() != b.dtype || t.shape() != b.shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "buffer '", b.name, "' is ", DTypeName(b.dtype),
            ShapeToString(b.shape), ", bound to ", t.TypeString()));
      }
      ForEachElement(b, [&](int64_t e, int64_t offset) {
        if (IsFloat(b.dtype)) {
          s.f[offset] = t.GetAsDouble(e);
        } else {
          s.i[offset] = Wrap(b.dtype, static_cast<uint64_t>(t.GetAsInt64(e)));
        }
      });
    }
    return absl::OkStatus();
  }

  Tensor Gather(size_t bi) const {
    const Buffer& b = p_.buffers[bi];
    const Storage& s = storage_[bi];
    Tensor t(b.dtype, b.shape);
    void* raw = t.raw_data();
    ForEachElement(b, [&](int64_t e, int64_t offset) {
      switch (b.dtype) {
        case DType::kF32:
          static_cast<float*>(raw)[e] = static_cast<float>(s.f[offset]);
          break;
        case DType::kF16:
          static_cast<Float16*>(raw)[e] =
              FloatToHalf(static_cast<float>(s.f[offset]));
          break;
        case DType::kBF16:
          static_cast<BFloat16*>(raw)[e] =
              FloatToBFloat16(static_cast<float>(s.f[offset]));
          break;
        case DType::kF64: static_cast<double*>(raw)[e] = s.f[offset]; break;
        case DType::kI64: static_cast<int64_t*>(raw)[e] = s.i[offset]; break;
        case DType::kI32:
          static_cast<int32_t*>(raw)[e] = static_cast<int32_t>(s.i[offset]);
          break;
        case DType::kI8:
          static_cast<int8_t*>(raw)[e] = static_cast<int8_t>(s.i[offset]);
          break;
        case DType::kU8:
          static_cast<uint8_t*>(raw)[e] = static_cast<uint8_t>(s.i[offset]);
          break;
        case DType::kBool:
          static_cast<uint8_t*>(raw)[e] = s.i[offset] != 0 ? 1 : 0;
          break;
        case DType::kInvalid: break;
      }
    });
    return t;
  }

  // ---- Kernels.

  absl::Status RunKernel(const Kernel& k) {
    kernel_ = &k;
    const size_t n = k.body.size();
    // Reduction-varying ops, and for each reduce the varying ops its operand
    // needs, in body order.
    std::vector<bool> varying(n, false);
    const int first_r = static_cast<int>(k.ranges.size());
    for (size_t i = 0; i < n; ++i) {
      const Op& op = k.body[i];
      if (op.code == OpCode::kReduce) continue;
      for (int32_t a : op.args) varying[i] = varying[i] || varying[a];
      const bool indexed = op.has_index();
      for (int v = first_r; indexed && v < k.num_vars(); ++v) {
        if (op.index.UsesVar(v)) varying[i] = true;
      }
    }
    std::vector<std::vector<int32_t>> cones(n);
    for (size_t i = 0; i < n; ++i) {
      if (k.body[i].code != OpCode::kReduce) continue;
      std::vector<bool> in_cone(n, false);
      // Mark backwards from the operand through varying ops.
      std::vector<int32_t> stack = {k.body[i].args[0]};
      while (!stack.empty()) {
        const int32_t j = stack.back();
        stack.pop_back();
        if (!varying[j] || in_cone[j]) continue;
        in_cone[j] = true;
        for (int32_t a : k.body[j].args) stack.push_back(a);
      }
      for (size_t j = 0; j < i; ++j) {
        if (in_cone[j]) cones[i].push_back(static_cast<int32_t>(j));
      }
    }

    vars_.assign(k.num_vars(), 0);
    values_.assign(n, Val());
    for (int64_t e : k.ranges) {
      if (e == 0) return absl::OkStatus();
    }
    while (true) {
      for (size_t i = 0; i < n; ++i) {
        if (varying[i]) continue;
        if (k.body[i].code == OpCode::kReduce) {
          KILN_RETURN_IF_ERROR(Reduce(k, i, cones[i]));
        } else {
          KILN_RETURN_IF_ERROR(Eval(i));
        }
      }
      int d = first_r - 1;
      for (; d >= 0; --d) {
        if (++vars_[d] < k.ranges[d]) break;
        vars_[d] = 0;
      }
      if (d < 0) return absl::OkStatus();
    }
  }

  absl::Status Reduce(const Kernel& k, size_t at, const std::vector<int32_t>& cone) {
    const Op& op = k.body[at];
    const int32_t src = op.args[0];
    const DType in = k.body[src].dtype;
    const bool is_float = IsFloat(in);
    const int first_r = static_cast<int>(k.ranges.size());
    double acc_f = 0, mean = 0, m2 = 0;
    int64_t acc_i = 0, count = 0, best_pos = 0;
    bool have_best = false;
    Val best;
    switch (op.reduce) {
      case ReduceKind::kProd: acc_f = 1; acc_i = 1; break;
      case ReduceKind::kMax:
        acc_f = -HUGE_VAL;
        acc_i = std::numeric_limits<int64_t>::min();
        break;
      case ReduceKind::kMin:
        acc_f = HUGE_VAL;
        acc_i = std::numeric_limits<int64_t>::max();
        break;
      default: break;
    }
    bool empty = false;
    for (int64_t e : k.reduction_ranges) empty |= e == 0;
    for (int v = first_r; v < k.num_vars(); ++v) vars_[v] = 0;
    for (int64_t pos = 0; !empty; ++pos) {
      for (int32_t j : cone) KILN_RETURN_IF_ERROR(Eval(j));
      const Val x = values_[src];
      switch (op.reduce) {
        case ReduceKind::kSum:
          acc_f += x.f;
          acc_i = static_cast<int64_t>(static_cast<uint64_t>(acc_i) +
                                       static_cast<uint64_t>(x.i));
          break;
        case ReduceKind::kProd:
          acc_f *= x.f;
          acc_i = static_cast<int64_t>(static_cast<uint64_t>(acc_i) *
                                       static_cast<uint64_t>(x.i));
          break;
        case ReduceKind::kMax:
        case ReduceKind::kMin: {
          const bool mx = op.reduce == ReduceKind::kMax;
          if (std::isnan(acc_f) || std::isnan(x.f)) {
            acc_f = std::nan("");
          } else {
            acc_f = mx ? std::max(acc_f, x.f) : std::min(acc_f, x.f);
          }
          acc_i = mx ? std::max(acc_i, x.i) : std::min(acc_i, x.i);
          break;
        }
        case ReduceKind::kArgMax:
        case ReduceKind::kArgMin:
        case ReduceKind::kArgMaxLast:
        case ReduceKind::kArgMinLast: {
          const bool mx = op.reduce == ReduceKind::kArgMax ||
                          op.reduce == ReduceKind::kArgMaxLast;
          const bool last = op.reduce == ReduceKind::kArgMaxLast ||
                            op.reduce == ReduceKind::kArgMinLast;
          bool take;
          if (!have_best) {
            take = true;
          } else if (is_float && (std::isnan(best.f) || std::isnan(x.f))) {
            take = std::isnan(x.f) && (last || !std::isnan(best.f));
          } else {
            const int cmp = is_float ? (x.f > best.f) - (x.f < best.f)
                                     : (x.i > best.i) - (x.i < best.i);
            const int better = mx ? cmp : -cmp;
            take = better > 0 || (last && better == 0);
          }
          if (take) {
            best = x;
            best_pos = pos;
            have_best = true;
          }
          break;
        }
        case ReduceKind::kWelfordMean:
        case ReduceKind::kWelfordVar: {
          ++count;
          const double delta = x.f - mean;
          mean += delta / count;
          m2 += delta * (x.f - mean);
          break;
        }
      }
      int d = k.num_vars() - 1;
      for (; d >= first_r; --d) {
        if (++vars_[d] < k.reduction_ranges[d - first_r]) break;
        vars_[d] = 0;
      }
      if (d < first_r) break;
    }
    Val out;
    switch (op.reduce) {
      case ReduceKind::kArgMax:
      case ReduceKind::kArgMin:
      case ReduceKind::kArgMaxLast:
      case ReduceKind::kArgMinLast:
        out.i = best_pos;
        break;
      case ReduceKind::kWelfordMean:
        out.f = RoundFloat(op.dtype, count == 0 ? std::nan("") : mean);
        break;
      case ReduceKind::kWelfordVar:
        out.f = RoundFloat(op.dtype, count == 0 ? std::nan("") : m2 / count);
        break;
      default:
        if (is_float) {
          out.f = RoundFloat(op.dtype, acc_f);
        } else {
          out.i = Wrap(op.dtype, static_cast<uint64_t>(acc_i));
        }
    }
    values_[at] = out;
    return absl::OkStatus();
  }

  absl::Status OpError(size_t at, absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel '", kernel_->name, "' op #", at, " (",
        OpCodeName(kernel_->body[at].code), "): ", msg));
  }

  absl::StatusOr<int64_t> Offset(size_t at, const Op& op) {
    absl::StatusOr<int64_t> offset = Evaluate(op.index, vars_);
    if (!offset.ok()) return OpError(at, offset.status().message());
    if (*offset < 0 || *offset >= storage_[op.buffer].size) {
      return InternalError("kernel '", kernel_->name, "' op #", at,
                           " accesses offset ", *offset,
                           " outside its buffer after verification");
    }
    return *offset;
  }

  absl::Status Eval(size_t at) {
    const Op& op = kernel_->body[at];
    const DType dt = op.dtype;
    const bool fl = IsFloat(dt);
    Val& out = values_[at];
    auto arg = [&](int k) -> const Val& { return values_[op.args[k]]; };
    auto arg_dtype = [&](int k) { return kernel_->body[op.args[k]].dtype; };
    switch (op.code) {
      case OpCode::kLoad: {
        KILN_ASSIGN_OR_RETURN(int64_t offset, Offset(at, op));
        const Storage& s = storage_[op.buffer];
        if (fl) {
          out.f = s.f[offset];
        } else {
          out.i = s.i[offset];
        }
        return absl::OkStatus();
      }
      case OpCode::kLoadIndirect: {
        absl::StatusOr<int64_t> base = Evaluate(op.index, vars_);
        if (!base.ok()) return OpError(at, base.status().message());
        int64_t n = arg(0).i;
        if (n < -op.extent || n >= op.extent) {
          return OpError(at, absl::StrCat("index ", n, " is out of range [",
                                          -op.extent, ", ", op.extent, ")"));
        }
        if (n < 0) n += op.extent;
        const int64_t offset = *base + n * op.stride;
        const Storage& s = storage_[op.buffer];
        if (offset < 0 || offset >= s.size) {
          return InternalError("kernel '", kernel_->name, "' op #", at,
                               " accesses offset ", offset,
                               " outside its buffer after verification");
        }
        if (fl) {
          out.f = s.f[offset];
        } else {
          out.i = s.i[offset];
        }
        return absl::OkStatus();
      }
      case OpCode::kStore: {
        KILN_ASSIGN_OR_RETURN(int64_t offset, Offset(at, op));
        Storage& s = storage_[op.buffer];
        if (IsFloat(s.dtype)) {
          s.f[offset] = RoundToStorage(s.dtype, arg(0).f);
        } else {
          s.i[offset] = arg(0).i;
        }
        return absl::OkStatus();
      }
      case OpCode::kStoreIndirect: {
        absl::StatusOr<int64_t> base = Evaluate(op.index, vars_);
        if (!base.ok()) return OpError(at, base.status().message());
        int64_t n = arg(1).i;
        if (n < -op.extent || n >= op.extent) {
          return OpError(at, absl::StrCat("index ", n, " is out of range [",
                                          -op.extent, ", ", op.extent, ")"));
        }
        if (n < 0) n += op.extent;
        const int64_t offset = *base + n * op.stride;
        Storage& s = storage_[op.buffer];
        if (offset < 0 || offset >= s.size) {
          return InternalError("kernel '", kernel_->name, "' op #", at,
                               " accesses offset ", offset,
                               " outside its buffer after verification");
        }
        const DType bt = s.dtype;
        if (IsFloat(bt)) {
          const double a = s.f[offset], v = arg(0).f;
          double r = v;
          switch (op.combine) {
            case StoreCombine::kNone: break;
            case StoreCombine::kAdd: r = RoundFloat(bt, a + v); break;
            case StoreCombine::kMul: r = RoundFloat(bt, a * v); break;
            case StoreCombine::kMax: r = a < v ? v : a; break;
            case StoreCombine::kMin: r = v < a ? v : a; break;
          }
          s.f[offset] = RoundToStorage(bt, r);
        } else {
          const int64_t a = s.i[offset], v = arg(0).i;
          const uint64_t ua = static_cast<uint64_t>(a), uv = static_cast<uint64_t>(v);
          int64_t r = v;
          switch (op.combine) {
            case StoreCombine::kNone: break;
            case StoreCombine::kAdd: r = Wrap(bt, ua + uv); break;
            case StoreCombine::kMul: r = Wrap(bt, ua * uv); break;
            case StoreCombine::kMax: r = a < v ? v : a; break;
            case StoreCombine::kMin: r = v < a ? v : a; break;
          }
          s.i[offset] = r;
        }
        return absl::OkStatus();
      }
      case OpCode::kConstant:
        if (fl) {
          out.f = RoundFloat(dt, op.fvalue);
        } else {
          out.i = Wrap(dt, static_cast<uint64_t>(op.ivalue));
        }
        return absl::OkStatus();
      case OpCode::kIndex: {
        absl::StatusOr<int64_t> v = Evaluate(op.index, vars_);
        if (!v.ok()) return OpError(at, v.status().message());
        if (fl) {
          out.f = RoundFloat(dt, static_cast<double>(*v));
        } else {
          out.i = Wrap(dt, static_cast<uint64_t>(*v));
        }
        return absl::OkStatus();
      }
      case OpCode::kCast: {
        const Val& a = arg(0);
        const bool from_float = IsFloat(arg_dtype(0));
        if (fl) {
          out.f = RoundToStorage(
              dt, RoundFloat(dt, from_float ? a.f : static_cast<double>(a.i)));
        } else if (dt == DType::kBool) {
          out.i = from_float ? (a.f != 0 ? 1 : 0) : (a.i != 0 ? 1 : 0);
        } else if (from_float && (dt == DType::kI8 || dt == DType::kU8)) {
          out.i = FloatToNarrowInt(dt, a.f);
        } else {
          out.i = Wrap(dt, static_cast<uint64_t>(from_float ? FloatToInt(a.f)
                                                            : a.i));
        }
        return absl::OkStatus();
      }
      case OpCode::kSelect:
        out = arg(0).i != 0 ? arg(1) : arg(2);
        return absl::OkStatus();
      case OpCode::kReduce:
        return InternalError("reduce evaluated as an elementwise op");
      default:
        break;
    }
    return EvalPointwise(at, op, arg_dtype(0), out);
  }

  // A pointwise op: its row's form for the operands' kind (opcodes.def).
  absl::Status EvalPointwise(size_t at, const Op& op, DType in, Val& out) {
    const DType dt = op.dtype;
    const Val& va = values_[op.args[0]];
    const Val& vb = op.args.size() > 1 ? values_[op.args[1]] : va;
    switch (OperandKindOf(in)) {
      case OperandKind::kFloat: {
        const double x = va.f, y = vb.f;
        switch (op.code) {
#define KILN_FLOAT(Name, eval, scalar, vector) \
  case OpCode::k##Name:                        \
    SetFloatFormResult(dt, eval, out);         \
    return absl::OkStatus();
#include "ir/loop/opcodes.def"
          default:
            break;
        }
        break;
      }
      case OperandKind::kInt: {
        const int64_t a = va.i, b = vb.i;
        const char* error = nullptr;  // set by a checked form
        switch (op.code) {
#define KILN_INT(Name, eval, scalar, vector) \
  case OpCode::k##Name:                      \
    out.i = eval;                            \
    return error == nullptr ? absl::OkStatus() : OpError(at, error);
#include "ir/loop/opcodes.def"
          default:
            break;
        }
        break;
      }
      case OperandKind::kBool: {
        const int64_t a = va.i, b = vb.i;
        switch (op.code) {
#define KILN_BOOL(Name, eval, scalar, vector) \
  case OpCode::k##Name:                       \
    out.i = eval;                             \
    return absl::OkStatus();
#include "ir/loop/opcodes.def"
          default:
            break;
        }
        break;
      }
    }
    return OpError(at, absl::StrCat("no form for ", DTypeName(in), " operands"));
  }

  const LoopProgram& p_;
  const InterpreterOptions& options_;
  std::vector<Storage> storage_;
  const Kernel* kernel_ = nullptr;
  std::vector<int64_t> vars_;
  std::vector<Val> values_;
};

}  // namespace

absl::StatusOr<std::map<std::string, Tensor>> RunLoopProgram(
    const LoopProgram& program, const std::map<std::string, Tensor>& bindings,
    const InterpreterOptions& options) {
  return Interpreter(program, options).Run(bindings);
}

}  // namespace kiln::ir::loop
