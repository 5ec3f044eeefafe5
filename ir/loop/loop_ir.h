// File: ir/loop/loop_ir.h — kiln's loop IR: buffers and an ordered list of
// kernels. A loop kernel is a body of SSA ops evaluated at every point of its
// iteration space; an extern kernel calls library code (oneDNN Conv/GEMM).
// Lowering produces it from the graph IR, loop passes fuse and check it, the
// C++/Highway emitter prints it.
//
//   LoopProgram p;
//   int x = p.AddBuffer("x", DType::kF32, {4, 8}, BufferKind::kInput);
//   int y = p.AddBuffer("y", DType::kF32, {4, 8}, BufferKind::kOutput);
//   KernelBuilder b(&p, "k0", /*ranges=*/{4, 8});
//   int v = b.Load(x, b.i(0) * 8 + b.i(1));
//   b.Store(y, b.i(0) * 8 + b.i(1), b.Unary(OpCode::kExp, v));
//
// Semantics. The points of the iteration space (variables i0.. with extents
// `ranges`) are visited in row-major order; at each point the body runs in
// order. Index expressions are flat element offsets into a buffer's storage.
// An op is *reduction-varying* when it is a load, load_indirect or index
// whose expression uses a reduction variable (r0.., extents `reduction_ranges`), or has a
// reduction-varying operand; a Reduce op is not. Each Reduce op evaluates the
// reduction-varying ops its operand depends on at every point of the
// reduction space (row-major) and combines the values; ops after it (the
// epilogue) use the result like any other value. Stores (and
// store_indirect) are never reduction-varying. Values of dtype f16 are computed in f32 precision.
#ifndef KILN_IR_LOOP_LOOP_IR_H_
#define KILN_IR_LOOP_LOOP_IR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/loop/index_expr.h"

namespace kiln::ir::loop {

// ---------------------------------------------------------------------------
// Buffers.

enum class BufferKind : uint8_t { kInput, kOutput, kIntermediate, kConstant };

// "input", "output", "intermediate", "constant".
absl::string_view BufferKindName(BufferKind kind);
std::optional<BufferKind> BufferKindFromName(absl::string_view name);

// A named array. The logical tensor has `shape`; element (c0, c1, ...) lives
// at storage offset sum(c_d * strides[d]). Constant buffers get their data
// from the compiled model (bound by name like inputs).
struct Buffer {
  std::string name;  // a sanitized identifier: it reaches generated C++
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<int64_t> strides;  // elements, one per dim
  BufferKind kind = BufferKind::kIntermediate;

  // Elements of storage the strides span (0 for an empty tensor); nullopt on
  // negative dims/strides, a rank mismatch or int64 overflow.
  std::optional<int64_t> StorageSize() const;
  bool IsRowMajor() const;
};

// Row-major strides of `shape`; nullopt for negative dims or int64 overflow.
std::optional<std::vector<int64_t>> CheckedRowMajorStrides(
    absl::Span<const int64_t> shape);

// [A-Za-z_][A-Za-z0-9_]* made from arbitrary text: other characters become
// '_', a leading digit or an empty name gets a '_' prefix.
std::string SanitizeIdentifier(absl::string_view name);

// ---------------------------------------------------------------------------
// Ops.

enum class OpCode : uint8_t {
  kLoad,      // buffer[index]
  kStore,     // buffer[index] = args[0]; no result
  kConstant,  // fvalue (float dtypes) or ivalue (integers, bool as 0/1)
  kIndex,     // the index expression as a value (iota, masks)
  kCast,      // args[0] converted to dtype
  kSelect,    // args[0] ? args[1] : args[2]
  kReduce,    // reduce `reduce` over the reduction space
  // The pointwise ops, one row each in opcodes.def (kExp, kAdd, kEq, ...):
  // their typing, semantics and generated code.
#define KILN_OP(Name, token, arity, result) k##Name,
#include "ir/loop/opcodes.def"
  // Data-dependent load: buffer[index + n * stride] where n is args[0] (an
  // integer) normalized against `extent` as ONNX Gather does: n in
  // [-extent, 0) wraps once to n + extent; n outside [-extent, extent) is an
  // error (the interpreter returns InvalidArgument, a compiled kernel
  // kErrorIndexOutOfRange) and is never read.
  kLoadIndirect,
  // Data-dependent store, the counterpart of load_indirect (ScatterND,
  // ScatterElements, MaxUnpool): element e = buffer[index + n * stride], n =
  // args[1] (an integer) normalized against `extent` as load_indirect does,
  // becomes combine(e, args[0]) (`combine`: none replaces, add/mul/max/min
  // as ONNX scatter reductions; max/min are std::max/std::min, so NaN does
  // not propagate). Points run in row-major order, so with duplicate indices
  // the last write (in iteration order) wins. An n outside [-extent, extent)
  // is an error (InvalidArgument / kErrorIndexOutOfRange) and nothing is
  // written. No result; never reduction-varying.
  kStoreIndirect,
};

// How store_indirect combines the stored value with the element it replaces.
enum class StoreCombine : uint8_t { kNone, kAdd, kMul, kMax, kMin };
absl::string_view StoreCombineName(StoreCombine c);  // "none", "add", ...
std::optional<StoreCombine> StoreCombineFromName(absl::string_view name);

// The op's name in the text form ("load", "exp", "add", ...).
absl::string_view OpCodeName(OpCode code);
std::optional<OpCode> OpCodeFromName(absl::string_view name);
// Number of value operands (Load 0, Store 1, Select 3, ...).
int OpArity(OpCode code);
bool IsElementwise(OpCode code);  // the pointwise ops of opcodes.def

// The operand kinds a pointwise op's row (opcodes.def) gives forms for.
enum class OperandKind : uint8_t {
  kFloat,  // f16, f32, f64
  kInt,    // i64, i32, i8, u8
  kBool,
};
// kInvalid counts as kInt.
OperandKind OperandKindOf(DType dtype);
// Whether pointwise op `code` accepts operands of `kind` (false for the
// other ops).
bool HasForm(OpCode code, OperandKind kind);
// Whether pointwise op `code` on operands of dtype `operand` can fail at run
// time (integer division and modulo by zero); false for the other ops.
bool MayFail(OpCode code, DType operand);

enum class ReduceKind : uint8_t {
  kSum,
  kProd,
  kMax,  // NaN propagates
  kMin,
  kArgMax,      // i64 row-major position in the reduction space; first wins
  kArgMin,
  kArgMaxLast,  // ties resolve to the last position (select_last_index)
  kArgMinLast,
  kWelfordMean,  // float only
  kWelfordVar,   // population variance, float only
};

absl::string_view ReduceKindName(ReduceKind kind);  // "sum", "argmax_last"
std::optional<ReduceKind> ReduceKindFromName(absl::string_view name);

// One SSA op. Op k of a kernel body defines value k (stores define none).
struct Op {
  OpCode code = OpCode::kConstant;
  DType dtype = DType::kInvalid;  // of the result; kInvalid for a store
  std::vector<int32_t> args;      // earlier ops of the same body
  int32_t buffer = -1;            // load / store: index into buffers
  IndexExpr index;                // load / store / index
  ReduceKind reduce = ReduceKind::kSum;
  double fvalue = 0;   // constant of a float dtype
  int64_t ivalue = 0;  // constant of an integer or bool dtype
  int64_t extent = 0;  // load/store_indirect: size of the indexed axis (>= 1)
  int64_t stride = 0;  // load/store_indirect: offset step per unit of the index
  StoreCombine combine = StoreCombine::kNone;  // store_indirect

  // Reads `buffer` (load, load_indirect).
  bool is_load() const {
    return code == OpCode::kLoad || code == OpCode::kLoadIndirect;
  }
  // Writes `buffer` (store, store_indirect).
  bool is_store() const {
    return code == OpCode::kStore || code == OpCode::kStoreIndirect;
  }
  // Has an index expression (load(_indirect), store(_indirect), index).
  bool has_index() const {
    return is_load() || is_store() || code == OpCode::kIndex;
  }

  bool has_result() const { return !is_store(); }
};

// The result dtype of `op` given its operands' dtypes (and the buffer a load
// or store references); InvalidArgument saying what is wrong otherwise.
absl::StatusOr<DType> InferResultDType(const Op& op,
                                       absl::Span<const DType> arg_dtypes,
                                       const Buffer* buffer);

// ---------------------------------------------------------------------------
// Kernels.

// What the vectorization checker decided for a kernel.
struct VecStatus {
  enum class Kind : uint8_t { kUnchecked, kVectorized, kTiled, kScalar };
  Kind kind = Kind::kUnchecked;
  std::string reason;  // why scalar / tiled; may be empty
};

absl::string_view VecKindName(VecStatus::Kind kind);  // "unchecked", ...

// Attribute of an extern call.
using ExternAttr = std::variant<int64_t, double, std::string,
                                std::vector<int64_t>, std::vector<double>>;

// A call into library code: `op` names the entry ("onednn.conv"), inputs
// and outputs are buffer indices. Lowering fills the attributes.
struct ExternCall {
  std::string op;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::map<std::string, ExternAttr, std::less<>> attrs;
};

struct Kernel {
  enum class Kind : uint8_t { kLoop, kExtern };

  std::string name;         // sanitized identifier, unique in the program
  std::string description;  // free text ("softmax"); never reaches code
  Kind kind = Kind::kLoop;
  // Loop kernels. Variables 0..n-1 are the iteration variables i0..,
  // n..n+m-1 the reduction variables r0.. .
  std::vector<int64_t> ranges;
  std::vector<int64_t> reduction_ranges;
  std::vector<Op> body;
  // Extern kernels.
  ExternCall call;
  // ONNX node names this kernel computes.
  std::vector<std::string> ops;
  VecStatus vec;

  int num_vars() const {
    return static_cast<int>(ranges.size() + reduction_ranges.size());
  }
  bool IsReductionVar(int var) const {
    return var >= static_cast<int>(ranges.size()) && var < num_vars();
  }
  // Extent of every variable, iteration variables first.
  std::vector<int64_t> VarExtents() const;
  // "i0", "r1"; "v<k>" outside the kernel's variables.
  std::string VarName(int var) const;
};

struct LoopProgram {
  std::vector<Buffer> buffers;
  std::vector<Kernel> kernels;

  // Row-major strides unless given. Returns the buffer index.
  int32_t AddBuffer(std::string name, DType dtype, Shape shape,
                    BufferKind kind, std::vector<int64_t> strides = {});
  // Buffer index by name, -1 if absent.
  int32_t FindBuffer(absl::string_view name) const;
};

// Appends a loop kernel to a program and its ops to the kernel, inferring
// result dtypes (left kInvalid when an operand is bad: the verifier says
// why). For lowering and tests.
class KernelBuilder {
 public:
  KernelBuilder(LoopProgram* program, std::string name,
                std::vector<int64_t> ranges,
                std::vector<int64_t> reduction_ranges = {});

  Kernel& kernel() { return program_->kernels[kernel_]; }
  IndexExpr i(int k) const { return Var(k); }
  IndexExpr r(int k) const { return Var(num_iteration_vars_ + k); }

  int32_t Load(int32_t buffer, IndexExpr index);
  // buffer[index + normalized(n) * stride], n an integer value (kLoadIndirect).
  int32_t LoadIndirect(int32_t buffer, IndexExpr index, int32_t n,
                       int64_t extent, int64_t stride);
  void Store(int32_t buffer, IndexExpr index, int32_t value);
  // buffer[index + normalized(n) * stride] = combine(old, value)
  // (kStoreIndirect).
  void StoreIndirect(int32_t buffer, IndexExpr index, int32_t value,
                     int32_t n, int64_t extent, int64_t stride,
                     StoreCombine combine = StoreCombine::kNone);
  int32_t Constant(DType dtype, double value);  // integers: truncated
  int32_t Index(IndexExpr index, DType dtype = DType::kI64);
  int32_t Cast(int32_t value, DType dtype);
  int32_t Select(int32_t cond, int32_t a, int32_t b);
  int32_t Unary(OpCode code, int32_t a);
  int32_t Binary(OpCode code, int32_t a, int32_t b);
  int32_t Reduce(ReduceKind kind, int32_t value);

 private:
  int32_t Append(Op op);

  LoopProgram* program_;
  size_t kernel_;
  int num_iteration_vars_;
};

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_LOOP_IR_H_
