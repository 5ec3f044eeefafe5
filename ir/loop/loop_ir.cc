// Loop IR data structures: names of enums, op typing rules (the pointwise
// ops' from their rows in opcodes.def), buffers and the kernel builder.
#include "ir/loop/loop_ir.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"

namespace kiln::ir::loop {
namespace {

// Bits of the operand kinds a pointwise op accepts (its form lines in
// opcodes.def).
constexpr uint8_t kFloatForm = 1, kIntForm = 2, kBoolForm = 4;

constexpr uint8_t FormsOf(OpCode code) {
  uint8_t forms = 0;
  switch (code) {
#define KILN_FLOAT(Name, eval, scalar, vector) case OpCode::k##Name:
#include "ir/loop/opcodes.def"
      forms |= kFloatForm;
      break;
    default:
      break;
  }
  switch (code) {
#define KILN_INT(Name, eval, scalar, vector) case OpCode::k##Name:
#include "ir/loop/opcodes.def"
      forms |= kIntForm;
      break;
    default:
      break;
  }
  switch (code) {
#define KILN_BOOL(Name, eval, scalar, vector) case OpCode::k##Name:
#include "ir/loop/opcodes.def"
      forms |= kBoolForm;
      break;
    default:
      break;
  }
  return forms;
}

constexpr bool HasCheckedIntForm(OpCode code) {
  switch (code) {
#define KILN_INT_CHECKED(Name, eval, scalar, vector) case OpCode::k##Name:
#include "ir/loop/opcodes.def"
      return true;
    default:
      return false;
  }
}

enum class Result : uint8_t {
  kNone,     // the op's own rule (InferResultDType)
  kOperand,  // the operands' dtype
  kBool,
};

struct OpInfo {
  OpCode code;
  const char* name;
  int arity;
  uint8_t forms;  // kFloatForm | kIntForm | kBoolForm; 0: not pointwise
  Result result;
  bool checked;   // the integer form can fail
};

constexpr OpInfo kOps[] = {
    {OpCode::kLoad, "load", 0, 0, Result::kNone, false},
    {OpCode::kStore, "store", 1, 0, Result::kNone, false},
    {OpCode::kConstant, "constant", 0, 0, Result::kNone, false},
    {OpCode::kIndex, "index", 0, 0, Result::kNone, false},
    {OpCode::kCast, "cast", 1, 0, Result::kNone, false},
    {OpCode::kSelect, "select", 3, 0, Result::kNone, false},
    {OpCode::kReduce, "reduce", 1, 0, Result::kNone, false},
#define KILN_OP(Name, token, arity, result)                                  \
  {OpCode::k##Name, token, arity, FormsOf(OpCode::k##Name), Result::result, \
   HasCheckedIntForm(OpCode::k##Name)},
#include "ir/loop/opcodes.def"
    {OpCode::kLoadIndirect, "load_indirect", 1, 0, Result::kNone, false},
    {OpCode::kStoreIndirect, "store_indirect", 2, 0, Result::kNone, false},
};

// Every row of opcodes.def is unary or binary, has a form, and fails only
// where its result has the operands' dtype (loop fusion relies on it).
constexpr bool RowsAreConsistent() {
  for (const OpInfo& info : kOps) {
    const bool row = info.result != Result::kNone;
    if (row != (info.forms != 0)) return false;
    if (row && info.arity != 1 && info.arity != 2) return false;
    if (info.checked && info.result != Result::kOperand) return false;
  }
  return true;
}
static_assert(RowsAreConsistent(), "an inconsistent row in ir/loop/opcodes.def");

// The table is in OpCode order.
constexpr bool InEnumOrder() {
  int expect = 0;
  for (const OpInfo& info : kOps) {
    if (static_cast<int>(info.code) != expect++) return false;
  }
  return true;
}
static_assert(InEnumOrder(), "kOps must list every OpCode in order");

constexpr std::pair<StoreCombine, const char*> kCombineNames[] = {
    {StoreCombine::kNone, "none"}, {StoreCombine::kAdd, "add"},
    {StoreCombine::kMul, "mul"},   {StoreCombine::kMax, "max"},
    {StoreCombine::kMin, "min"},
};

const OpInfo* Info(OpCode code) {
  const size_t i = static_cast<size_t>(code);
  return i < sizeof(kOps) / sizeof(kOps[0]) ? &kOps[i] : nullptr;
}

constexpr std::pair<ReduceKind, const char*> kReduceNames[] = {
    {ReduceKind::kSum, "sum"},
    {ReduceKind::kProd, "prod"},
    {ReduceKind::kMax, "max"},
    {ReduceKind::kMin, "min"},
    {ReduceKind::kArgMax, "argmax"},
    {ReduceKind::kArgMin, "argmin"},
    {ReduceKind::kArgMaxLast, "argmax_last"},
    {ReduceKind::kArgMinLast, "argmin_last"},
    {ReduceKind::kWelfordMean, "welford_mean"},
    {ReduceKind::kWelfordVar, "welford_var"},
};

bool IsNumeric(DType d) { return IsFloat(d) || IsInteger(d); }

uint8_t FormBit(OperandKind kind) {
  switch (kind) {
    case OperandKind::kFloat: return kFloatForm;
    case OperandKind::kInt: return kIntForm;
    case OperandKind::kBool: return kBoolForm;
  }
  return 0;
}

bool Accepts(const OpInfo& info, DType d) {
  return d != DType::kInvalid && (info.forms & FormBit(OperandKindOf(d))) != 0;
}

// "a float", "a numeric", "a numeric or bool", ...: the operands `info`
// accepts.
std::string AcceptedName(const OpInfo& info) {
  std::vector<const char*> kinds;
  const uint8_t numeric = kFloatForm | kIntForm;
  if ((info.forms & numeric) == numeric) {
    kinds.push_back("numeric");
  } else if (info.forms & kFloatForm) {
    kinds.push_back("float");
  } else if (info.forms & kIntForm) {
    kinds.push_back("integer");
  }
  if (info.forms & kBoolForm) kinds.push_back("bool");
  std::string out = kinds.empty() || kinds[0][0] != 'i' ? "a" : "an";
  for (size_t k = 0; k < kinds.size(); ++k) {
    absl::StrAppend(&out, k == 0 ? " " : " or ", kinds[k]);
  }
  return out;
}

absl::Status TypeError(const Op& op, absl::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", OpCodeName(op.code), "': ", msg));
}

}  // namespace

absl::string_view BufferKindName(BufferKind kind) {
  switch (kind) {
    case BufferKind::kInput: return "input";
    case BufferKind::kOutput: return "output";
    case BufferKind::kIntermediate: return "intermediate";
    case BufferKind::kConstant: return "constant";
  }
  return "?";
}

std::optional<BufferKind> BufferKindFromName(absl::string_view name) {
  for (BufferKind k : {BufferKind::kInput, BufferKind::kOutput,
                       BufferKind::kIntermediate, BufferKind::kConstant}) {
    if (BufferKindName(k) == name) return k;
  }
  return std::nullopt;
}

std::optional<int64_t> Buffer::StorageSize() const {
  if (strides.size() != shape.size()) return std::nullopt;
  int64_t last = 0;  // largest offset
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0 || strides[d] < 0) return std::nullopt;
    if (shape[d] == 0) return 0;
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t span;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &span) ||
        __builtin_add_overflow(last, span, &last)) {
      return std::nullopt;
    }
  }
  int64_t size;
  if (__builtin_add_overflow(last, 1, &size)) return std::nullopt;
  return size;
}

bool Buffer::IsRowMajor() const {
  std::optional<std::vector<int64_t>> row_major = CheckedRowMajorStrides(shape);
  return row_major.has_value() && strides == *row_major;
}

std::optional<std::vector<int64_t>> CheckedRowMajorStrides(
    absl::Span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] < 0) return std::nullopt;
    strides[d] = stride;
    // A zero dim makes every stride past it irrelevant; keep them 0-safe.
    if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[d], 1),
                               &stride)) {
      return std::nullopt;
    }
  }
  return strides;
}

std::string SanitizeIdentifier(absl::string_view name) {
  std::string out;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  if (out.empty() || (out[0] >= '0' && out[0] <= '9')) out.insert(0, "_");
  return out;
}

absl::string_view OpCodeName(OpCode code) {
  const OpInfo* info = Info(code);
  return info == nullptr ? "?" : info->name;
}

std::optional<OpCode> OpCodeFromName(absl::string_view name) {
  for (const OpInfo& info : kOps) {
    if (name == info.name) return info.code;
  }
  return std::nullopt;
}

int OpArity(OpCode code) {
  const OpInfo* info = Info(code);
  return info == nullptr ? 0 : info->arity;
}

bool IsElementwise(OpCode code) {
  const OpInfo* info = Info(code);
  return info != nullptr && info->forms != 0;
}

OperandKind OperandKindOf(DType dtype) {
  if (IsFloat(dtype)) return OperandKind::kFloat;
  if (dtype == DType::kBool) return OperandKind::kBool;
  return OperandKind::kInt;
}

bool HasForm(OpCode code, OperandKind kind) {
  const OpInfo* info = Info(code);
  return info != nullptr && (info->forms & FormBit(kind)) != 0;
}

bool MayFail(OpCode code, DType operand) {
  const OpInfo* info = Info(code);
  return info != nullptr && info->checked && IsInteger(operand);
}

absl::string_view ReduceKindName(ReduceKind kind) {
  for (const auto& [k, name] : kReduceNames) {
    if (k == kind) return name;
  }
  return "?";
}

std::optional<ReduceKind> ReduceKindFromName(absl::string_view name) {
  for (const auto& [k, n] : kReduceNames) {
    if (name == n) return k;
  }
  return std::nullopt;
}

absl::string_view StoreCombineName(StoreCombine c) {
  for (const auto& [k, name] : kCombineNames) {
    if (k == c) return name;
  }
  return "?";
}

std::optional<StoreCombine> StoreCombineFromName(absl::string_view name) {
  for (const auto& [k, n] : kCombineNames) {
    if (name == n) return k;
  }
  return std::nullopt;
}

absl::string_view VecKindName(VecStatus::Kind kind) {
  switch (kind) {
    case VecStatus::Kind::kUnchecked: return "unchecked";
    case VecStatus::Kind::kVectorized: return "vectorized";
    case VecStatus::Kind::kTiled: return "tiled";
    case VecStatus::Kind::kScalar: return "scalar";
  }
  return "?";
}

absl::StatusOr<DType> InferResultDType(const Op& op,
                                       absl::Span<const DType> args,
                                       const Buffer* buffer) {
  const OpInfo* info = Info(op.code);
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown op code ", static_cast<int>(op.code)));
  }
  if (static_cast<int>(args.size()) != info->arity) {
    return TypeError(op, absl::StrCat("takes ", info->arity,
                                      " operand(s), got ", args.size()));
  }
  for (DType d : args) {
    if (d == DType::kInvalid) return TypeError(op, "operand has no dtype");
  }
  switch (op.code) {
    case OpCode::kLoad:
    case OpCode::kStore: {
      if (buffer == nullptr) return TypeError(op, "no such buffer");
      if (op.code == OpCode::kLoad) return buffer->dtype;
      if (args[0] != buffer->dtype) {
        return TypeError(op, absl::StrCat("stores ", DTypeName(args[0]),
                                          " into ", DTypeName(buffer->dtype),
                                          " buffer '", buffer->name, "'"));
      }
      return DType::kInvalid;
    }
    case OpCode::kLoadIndirect:
      if (buffer == nullptr) return TypeError(op, "no such buffer");
      if (!IsInteger(args[0])) {
        return TypeError(op, absl::StrCat("index operand is ",
                                          DTypeName(args[0]),
                                          ", not an integer"));
      }
      return buffer->dtype;
    case OpCode::kStoreIndirect:
      if (buffer == nullptr) return TypeError(op, "no such buffer");
      if (args[0] != buffer->dtype) {
        return TypeError(op, absl::StrCat("stores ", DTypeName(args[0]),
                                          " into ", DTypeName(buffer->dtype),
                                          " buffer '", buffer->name, "'"));
      }
      if (!IsInteger(args[1])) {
        return TypeError(op, absl::StrCat("index operand is ",
                                          DTypeName(args[1]),
                                          ", not an integer"));
      }
      if (op.combine != StoreCombine::kNone && !IsNumeric(args[0])) {
        return TypeError(op, absl::StrCat("combine ",
                                          StoreCombineName(op.combine), " of ",
                                          DTypeName(args[0])));
      }
      return DType::kInvalid;
    case OpCode::kConstant:
    case OpCode::kCast:
      if (op.dtype == DType::kInvalid) return TypeError(op, "needs a dtype");
      return op.dtype;
    case OpCode::kIndex:
      if (!IsInteger(op.dtype) && !IsFloat(op.dtype)) {
        return TypeError(op, "needs a numeric dtype");
      }
      return op.dtype;
    case OpCode::kSelect:
      if (args[0] != DType::kBool) {
        return TypeError(op, absl::StrCat("condition is ", DTypeName(args[0]),
                                          ", not bool"));
      }
      if (args[1] != args[2]) {
        return TypeError(op, absl::StrCat("branches differ: ",
                                          DTypeName(args[1]), " and ",
                                          DTypeName(args[2])));
      }
      return args[1];
    case OpCode::kReduce: {
      const bool welford = op.reduce == ReduceKind::kWelfordMean ||
                           op.reduce == ReduceKind::kWelfordVar;
      if (welford ? !IsFloat(args[0]) : !IsNumeric(args[0])) {
        return TypeError(op, absl::StrCat(ReduceKindName(op.reduce),
                                          " of ", DTypeName(args[0])));
      }
      switch (op.reduce) {
        case ReduceKind::kArgMax:
        case ReduceKind::kArgMin:
        case ReduceKind::kArgMaxLast:
        case ReduceKind::kArgMinLast:
          return DType::kI64;
        default:
          return args[0];
      }
    }
    default:
      break;
  }
  for (DType d : args) {
    if (!Accepts(*info, d)) {
      return TypeError(op, absl::StrCat("needs ", AcceptedName(*info),
                                        " operand, got ", DTypeName(d)));
    }
  }
  if (args.size() == 2 && args[0] != args[1]) {
    return TypeError(op, absl::StrCat("operand dtypes differ: ",
                                      DTypeName(args[0]), " and ",
                                      DTypeName(args[1])));
  }
  return info->result == Result::kBool ? DType::kBool : args[0];
}

std::vector<int64_t> Kernel::VarExtents() const {
  std::vector<int64_t> extents = ranges;
  extents.insert(extents.end(), reduction_ranges.begin(),
                 reduction_ranges.end());
  return extents;
}

std::string Kernel::VarName(int var) const {
  const int n = static_cast<int>(ranges.size());
  if (var >= 0 && var < n) return absl::StrCat("i", var);
  if (var >= n && var < num_vars()) return absl::StrCat("r", var - n);
  return absl::StrCat("v", var);
}

int32_t LoopProgram::AddBuffer(std::string name, DType dtype, Shape shape,
                               BufferKind kind, std::vector<int64_t> strides) {
  Buffer b;
  b.name = std::move(name);
  b.dtype = dtype;
  if (strides.empty() && !shape.empty()) {
    strides = CheckedRowMajorStrides(shape).value_or(std::vector<int64_t>());
  }
  b.strides = std::move(strides);
  b.shape = std::move(shape);
  b.kind = kind;
  buffers.push_back(std::move(b));
  return static_cast<int32_t>(buffers.size() - 1);
}

int32_t LoopProgram::FindBuffer(absl::string_view name) const {
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

KernelBuilder::KernelBuilder(LoopProgram* program, std::string name,
                             std::vector<int64_t> ranges,
                             std::vector<int64_t> reduction_ranges)
    : program_(program),
      kernel_(program->kernels.size()),
      num_iteration_vars_(static_cast<int>(ranges.size())) {
  Kernel k;
  k.name = std::move(name);
  k.ranges = std::move(ranges);
  k.reduction_ranges = std::move(reduction_ranges);
  program->kernels.push_back(std::move(k));
}

int32_t KernelBuilder::Append(Op op) {
  std::vector<Op>& body = kernel().body;
  std::vector<DType> arg_dtypes;
  bool args_ok = true;
  for (int32_t a : op.args) {
    args_ok &= a >= 0 && a < static_cast<int32_t>(body.size());
    arg_dtypes.push_back(args_ok ? body[a].dtype : DType::kInvalid);
  }
  const Buffer* buffer =
      op.buffer >= 0 && op.buffer < static_cast<int32_t>(program_->buffers.size())
          ? &program_->buffers[op.buffer]
          : nullptr;
  absl::StatusOr<DType> dtype = InferResultDType(op, arg_dtypes, buffer);
  op.dtype = dtype.ok() ? *dtype : DType::kInvalid;
  body.push_back(std::move(op));
  return static_cast<int32_t>(body.size() - 1);
}

int32_t KernelBuilder::Load(int32_t buffer, IndexExpr index) {
  Op op;
  op.code = OpCode::kLoad;
  op.buffer = buffer;
  op.index = std::move(index);
  return Append(std::move(op));
}

int32_t KernelBuilder::LoadIndirect(int32_t buffer, IndexExpr index,
                                    int32_t n, int64_t extent, int64_t stride) {
  Op op;
  op.code = OpCode::kLoadIndirect;
  op.buffer = buffer;
  op.index = std::move(index);
  op.args = {n};
  op.extent = extent;
  op.stride = stride;
  return Append(std::move(op));
}

void KernelBuilder::Store(int32_t buffer, IndexExpr index, int32_t value) {
  Op op;
  op.code = OpCode::kStore;
  op.buffer = buffer;
  op.index = std::move(index);
  op.args = {value};
  Append(std::move(op));
}

void KernelBuilder::StoreIndirect(int32_t buffer, IndexExpr index,
                                  int32_t value, int32_t n, int64_t extent,
                                  int64_t stride, StoreCombine combine) {
  Op op;
  op.code = OpCode::kStoreIndirect;
  op.buffer = buffer;
  op.index = std::move(index);
  op.args = {value, n};
  op.extent = extent;
  op.stride = stride;
  op.combine = combine;
  Append(std::move(op));
}

int32_t KernelBuilder::Constant(DType dtype, double value) {
  Op op;
  op.code = OpCode::kConstant;
  op.dtype = dtype;
  if (IsFloat(dtype)) {
    op.fvalue = value;
  } else if (value >= -9.2e18 && value <= 9.2e18) {
    op.ivalue = static_cast<int64_t>(value);
  }
  return Append(std::move(op));
}

int32_t KernelBuilder::Index(IndexExpr index, DType dtype) {
  Op op;
  op.code = OpCode::kIndex;
  op.dtype = dtype;
  op.index = std::move(index);
  return Append(std::move(op));
}

int32_t KernelBuilder::Cast(int32_t value, DType dtype) {
  Op op;
  op.code = OpCode::kCast;
  op.dtype = dtype;
  op.args = {value};
  return Append(std::move(op));
}

int32_t KernelBuilder::Select(int32_t cond, int32_t a, int32_t b) {
  Op op;
  op.code = OpCode::kSelect;
  op.args = {cond, a, b};
  return Append(std::move(op));
}

int32_t KernelBuilder::Unary(OpCode code, int32_t a) {
  Op op;
  op.code = code;
  op.args = {a};
  return Append(std::move(op));
}

int32_t KernelBuilder::Binary(OpCode code, int32_t a, int32_t b) {
  Op op;
  op.code = code;
  op.args = {a, b};
  return Append(std::move(op));
}

int32_t KernelBuilder::Reduce(ReduceKind kind, int32_t value) {
  Op op;
  op.code = OpCode::kReduce;
  op.reduce = kind;
  op.args = {value};
  return Append(std::move(op));
}

}  // namespace kiln::ir::loop
