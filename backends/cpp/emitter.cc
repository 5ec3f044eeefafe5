// The C++/Highway emitter (see emitter.h): per kernel, the vectorization
// checker's plan (vec_checker.h) and the code it describes: a loop nest where
// every op sits at the innermost loop it depends on, the vector variable's
// loop innermost.
#include "backends/cpp/emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/cpp/op_forms.h"
#include "backends/cpp/prelude.h"
#include "backends/cpp/vec_checker.h"
#include "ir/loop/verifier.h"
#include "ir/status_macros.h"

namespace kiln::backends::cpp {
namespace {

using ir::DType;
using ir::loop::Buffer;
using ir::loop::IndexExpr;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;
using ir::loop::OpCode;
using ir::loop::ReduceKind;
using ir::loop::SanitizeIdentifier;
using ir::loop::VecStatus;


// ---------------------------------------------------------------------------
// Types and literals.

// The C++ type of a value of `dtype` (f16 and bf16 compute in float).
const char* ValueType(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: return "float";
    case DType::kF64: return "double";
    case DType::kI64: return "int64_t";
    case DType::kI32: return "int32_t";
    case DType::kI8: return "int8_t";
    case DType::kU8: return "uint8_t";
    case DType::kBool: return "bool";
    case DType::kInvalid: break;
  }
  return "void";
}

// The C++ type of one stored element.
const char* StorageType(DType t) {
  switch (t) {
    case DType::kF16: case DType::kBF16: return "uint16_t";
    case DType::kBool: return "uint8_t";
    default: return ValueType(t);
  }
}

// Scalar C++ reading element `ref` of a buffer of dtype `t` as a value.
std::string LoadConversion(DType t, const std::string& ref) {
  switch (t) {
    case DType::kF16: return absl::StrCat("kiln_rt::HalfToFloat(", ref, ")");
    case DType::kBF16: return absl::StrCat("kiln_rt::BF16ToFloat(", ref, ")");
    case DType::kBool: return absl::StrCat("(", ref, " != 0)");
    default: return ref;
  }
}

// Scalar C++ for value `v` as an element of a buffer of dtype `t` (bool
// stores are written where they happen).
std::string StoreConversion(DType t, const std::string& v) {
  switch (t) {
    case DType::kF16: return absl::StrCat("kiln_rt::FloatToHalf(", v, ")");
    case DType::kBF16: return absl::StrCat("kiln_rt::FloatToBF16(", v, ")");
    default: return v;
  }
}

// Whether values of `t` are held in the f32 lanes of vector code (f16 and
// bf16 too); i32, i8 and u8 values are held in i32 lanes, bool as masks.
bool InF32Lanes(DType t) { return t == DType::kF32 || ir::IsLowPrecisionFloat(t); }
// Values held in the float lanes of `df`: f32 lanes, or f64 ones in f64
// kernels (VecAnalysis::f64, where df is a tag of double).
bool InFloatLanes(DType t) { return InF32Lanes(t) || t == DType::kF64; }

// The longest run of vector steps an f32 sum accumulator takes before its
// lanes are added into f64 partials (decision 0050). 4096 steps keep the
// worst-case relative error of a block near 4096 * 2^-24 (2.4e-4) and its
// typical one near 64 * 2^-24; a flush every 4096 steps costs nothing
// measurable. Reductions over at most this many points are emitted as one
// block, without the flush.
constexpr int64_t kReduceBlockSteps = 4096;

// The scalar conversion of a float to integer dtype `t` (truncating, NaN 0):
// saturating to i8 / u8 (in the low-precision prelude, present wherever an
// i8 / u8 value is), else saturating to int64 and wrapping.
const char* FloatToIntFn(DType t) {
  return t == DType::kI8 || t == DType::kU8 ? "kiln_rt::FloatToNarrowInt"
                                            : "kiln_rt::FloatToInt";
}

// Whether code for the program reads kiln_rt's low-precision helpers.
bool UsesLowPrecision(const LoopProgram& p) {
  auto lowp = [](DType t) {
    return ir::IsLowPrecisionFloat(t) || t == DType::kI8 || t == DType::kU8 ||
           t == DType::kF64;
  };
  for (const Buffer& b : p.buffers) {
    if (lowp(b.dtype)) return true;
  }
  for (const Kernel& k : p.kernels) {
    for (const Op& op : k.body) {
      if (lowp(op.dtype)) return true;
    }
  }
  return false;
}

std::string IntLiteral(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  if (v < 0) return absl::StrCat("(", v, "LL)");
  return absl::StrCat(v, "LL");
}

std::string DoubleLiteral(double v) {
  if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(v)) {
    return v > 0 ? "std::numeric_limits<double>::infinity()"
                 : "(-std::numeric_limits<double>::infinity())";
  }
  return absl::StrFormat("(%a)", v);
}

// Two's-complement wrap of a constant to its dtype (the interpreter's Wrap).
int64_t WrapConst(DType t, int64_t v) {
  switch (t) {
    case DType::kI32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::kI8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DType::kU8: return static_cast<uint8_t>(v);
    case DType::kBool: return v != 0 ? 1 : 0;
    default: return v;
  }
}

using VarNamer = std::function<std::string(int var)>;

// C++ int64 arithmetic for an index expression (floor semantics via kiln_rt).
std::string CppIndex(const IndexExpr& e, const VarNamer& var) {
  switch (e.kind()) {
    case IndexExpr::Kind::kConst: return IntLiteral(e.value());
    case IndexExpr::Kind::kVar: return var(e.var());
    case IndexExpr::Kind::kAdd:
    case IndexExpr::Kind::kMul: {
      std::vector<std::string> parts;
      for (const IndexExpr& o : e.operands()) parts.push_back(CppIndex(o, var));
      return absl::StrCat(
          "(", absl::StrJoin(parts, e.kind() == IndexExpr::Kind::kAdd ? " + " : " * "), ")");
    }
    case IndexExpr::Kind::kFloorDiv:
      return absl::StrCat("kiln_rt::FloorDiv(", CppIndex(e.operand(0), var), ", ",
                          CppIndex(e.operand(1), var), ")");
    case IndexExpr::Kind::kMod:
      return absl::StrCat("kiln_rt::FloorMod(", CppIndex(e.operand(0), var), ", ",
                          CppIndex(e.operand(1), var), ")");
    case IndexExpr::Kind::kMin:
    case IndexExpr::Kind::kMax:
      return absl::StrCat("std::", e.kind() == IndexExpr::Kind::kMin ? "min" : "max",
                          "<int64_t>(", CppIndex(e.operand(0), var), ", ",
                          CppIndex(e.operand(1), var), ")");
  }
  return "0";
}

// ---------------------------------------------------------------------------
// Helpers shared with the plan (vec_checker.h).

uint64_t Bit(int var) { return VarBit(var); }

bool IsArgReduce(ReduceKind k) {
  return k == ReduceKind::kArgMax || k == ReduceKind::kArgMin ||
         k == ReduceKind::kArgMaxLast || k == ReduceKind::kArgMinLast;
}

// ---------------------------------------------------------------------------
// Code writer.

class Writer {
 public:
  void Line(absl::string_view s) {
    if (s.empty()) {
      text_ += "\n";
      return;
    }
    text_.append(indent_ * 2, ' ');
    absl::StrAppend(&text_, s, "\n");
  }
  void Open(absl::string_view s) {
    Line(absl::StrCat(s, s.empty() ? "{" : " {"));
    ++indent_;
  }
  void Close(absl::string_view suffix = "") {
    --indent_;
    Line(absl::StrCat("}", suffix));
  }
  std::string& text() { return text_; }

 private:
  std::string text_;
  int indent_ = 0;
};

// ---------------------------------------------------------------------------
// Kernel emission.

class KernelEmitter {
 public:
  KernelEmitter(const LoopProgram& p, const VecPlan& plan, Writer* w,
                const std::vector<std::string>& buffer_params)
      : p_(p),
        a_(plan.analysis),
        k_(*plan.analysis.k),
        plan_(plan),
        w_(*w),
        params_(buffer_params) {}

  void EmitBody() {
    if (a_.empty) {
      w_.Line("return 0;");
      return;
    }
    const int nloops = static_cast<int>(plan_.loop_order.size());
    pos_of_var_.assign(k_.num_vars(), -1);
    for (int pos = 0; pos < nloops; ++pos) pos_of_var_[plan_.loop_order[pos]] = pos;
    level_.assign(k_.body.size(), -1);
    for (size_t i = 0; i < k_.body.size(); ++i) {
      if (a_.in_cone[i]) continue;
      if (!plan_.hoist) {
        level_[i] = nloops - 1;
        continue;
      }
      for (int v = 0; v < static_cast<int>(k_.ranges.size()); ++v) {
        if (a_.deps[i] & Bit(v)) level_[i] = std::max(level_[i], pos_of_var_[v]);
      }
    }
    EmitLevelOps(-1);
    EmitNest(0);
    w_.Line("return kiln_err;");
  }

 private:
  std::string Var(int v) const { return k_.VarName(v); }
  std::string S(int i) const { return absl::StrCat("s", i); }
  std::string V(int i) const { return absl::StrCat("v", i); }
  DType Dt(int i) const { return k_.body[i].dtype; }
  const Buffer& Buf(int i) const { return p_.buffers[k_.body[i].buffer]; }
  const std::string& Param(int i) const { return params_[k_.body[i].buffer]; }
  std::string Idx(int i) const {
    return CppIndex(a_.index[i], [this](int v) { return Var(v); });
  }
  // The checked data-dependent offset of load_indirect op i with index `n`.
  std::string IndirectOffset(int i, const std::string& n) const {
    const Op& op = k_.body[i];
    return absl::StrCat("kiln_rt::IndirectIndex(", n, ", ", IntLiteral(op.extent),
                        ", &kiln_err) * ", IntLiteral(op.stride));
  }

  void EmitLevelOps(int level) {
    for (size_t i = 0; i < k_.body.size(); ++i) {
      if (a_.in_cone[i] || level_[i] != level) continue;
      EmitScalarOp(static_cast<int>(i));
    }
  }

  void EmitNest(int pos) {
    if (pos >= static_cast<int>(plan_.loop_order.size())) return;
    const int v = plan_.loop_order[pos];
    const int64_t e = k_.ranges[v];
    if (v == plan_.tile_var) return EmitTiledNest(pos);
    if (v == plan_.vec_var) {
      EmitVectorLoop(v, e, pos == plan_.parallel_pos, [&](bool tail) {
        for (size_t i = 0; i < k_.body.size(); ++i) {
          if (a_.in_cone[i] || level_[i] != pos) continue;
          EmitVectorOp(static_cast<int>(i), v, tail);
        }
      });
      return;
    }
    if (pos == plan_.parallel_pos) w_.Line("#pragma omp parallel for reduction(|:kiln_err)");
    w_.Open(absl::StrCat("for (int64_t ", Var(v), " = 0; ", Var(v), " < ", IntLiteral(e), "; ++",
                         Var(v), ")"));
    EmitLevelOps(pos);
    EmitNest(pos + 1);
    w_.Close();
  }

  // The tile variable's loop blocked by the vector width around the vector
  // loop: per vector step, each transposed load reads one tile, then the
  // block's points run with the tile's columns as vectors.
  void EmitTiledNest(int pos) {
    const int tv = plan_.tile_var, vv = plan_.vec_var;
    const std::string block = absl::StrCat(Var(tv), "_0");
    const int64_t e = k_.ranges[tv];
    if (pos == plan_.parallel_pos) w_.Line("#pragma omp parallel for reduction(|:kiln_err)");
    w_.Open(absl::StrCat("for (int64_t ", block, " = 0; ", block, " < ", IntLiteral(e), "; ",
                         block, " += kL)"));
    w_.Line(absl::StrCat("const size_t kiln_nb = static_cast<size_t>(std::min<int64_t>(kL, ",
                         IntLiteral(e), " - ", block, "));"));
    EmitVectorLoop(vv, k_.ranges[vv], pos + 1 == plan_.parallel_pos, [&](bool tail) {
      for (size_t i = 0; i < k_.body.size(); ++i) {
        if (!plan_.tiled_load[i] || level_[i] != pos + 1) continue;
        const DType bt = Buf(static_cast<int>(i)).dtype;
        const std::string base = CppIndex(a_.index[i], [&](int v) {
          return v == tv ? block : Var(v);
        });
        w_.Line(absl::StrCat("alignas(64) ", ValueType(bt), " kiln_tile", i,
                             "[kKilnMaxLanes * kKilnMaxLanes];"));
        w_.Line(absl::StrCat("KilnTransposeTile(", Tag(bt), ", ", Param(static_cast<int>(i)),
                             " + ", base, ", ", IntLiteral(*ir::loop::StrideOf(a_.index[i], vv)),
                             ", kiln_n, kiln_nb, kiln_tile", i, ");"));
      }
      w_.Open("for (size_t kj = 0; kj < kiln_nb; ++kj)");
      w_.Line(absl::StrCat("const int64_t ", Var(tv), " = ", block,
                           " + static_cast<int64_t>(kj);"));
      EmitLevelOps(pos);
      for (size_t i = 0; i < k_.body.size(); ++i) {
        if (a_.in_cone[i] || level_[i] != pos + 1) continue;
        EmitVectorOp(static_cast<int>(i), vv, tail);
      }
      w_.Close();
    });
    w_.Close();
  }

  // A loop over `v` in steps of the vector width; `body(tail)` emits one step
  // (tail: kiln_n < Lanes valid lanes).
  void EmitVectorLoop(int v, int64_t e, bool parallel, const std::function<void(bool)>& body) {
    const std::string full = absl::StrCat("kiln_full_", Var(v));
    w_.Line(absl::StrCat("const int64_t ", full, " = ", IntLiteral(e), " / kL * kL;"));
    if (parallel) w_.Line("#pragma omp parallel for reduction(|:kiln_err)");
    w_.Open(absl::StrCat("for (int64_t ", Var(v), " = 0; ", Var(v), " < ", full, "; ", Var(v),
                         " += kL)"));
    w_.Line("const size_t kiln_n = static_cast<size_t>(kL);");
    w_.Line("(void)kiln_n;");
    body(false);
    w_.Close();
    w_.Open(absl::StrCat("if (", full, " < ", IntLiteral(e), ")"));
    w_.Line(absl::StrCat("const int64_t ", Var(v), " = ", full, ";"));
    w_.Line(absl::StrCat("const size_t kiln_n = static_cast<size_t>(", IntLiteral(e), " - ", full,
                         ");"));
    body(true);
    w_.Close();
  }

  // ---- Scalar ops.

  std::string ScalarExpr(int i) {
    const Op& op = k_.body[i];
    const DType t = op.dtype;
    const std::string vt = ValueType(t);
    auto arg = [&](int j) { return S(op.args[j]); };
    auto adt = [&](int j) { return k_.body[op.args[j]].dtype; };
    const bool fl = ir::IsFloat(t);
    switch (op.code) {
      case OpCode::kLoad:
        return LoadConversion(Buf(i).dtype, absl::StrCat(Param(i), "[", Idx(i), "]"));
      case OpCode::kLoadIndirect:
        return LoadConversion(Buf(i).dtype,
                              absl::StrCat(Param(i), "[", Idx(i), " + ",
                                           IndirectOffset(i, S(op.args[0])), "]"));
      case OpCode::kConstant:
        if (fl) return absl::StrCat("static_cast<", vt, ">(", DoubleLiteral(op.fvalue), ")");
        if (t == DType::kBool) return WrapConst(t, op.ivalue) != 0 ? "true" : "false";
        return absl::StrCat("static_cast<", vt, ">(", IntLiteral(WrapConst(t, op.ivalue)), ")");
      case OpCode::kIndex: {
        const std::string v = absl::StrCat("static_cast<int64_t>(", Idx(i), ")");
        if (fl) return absl::StrCat("static_cast<", vt, ">(static_cast<double>(", v, "))");
        return absl::StrCat("kiln_rt::Wrap<", vt, ">(static_cast<uint64_t>(", v, "))");
      }
      case OpCode::kCast: {
        const DType from = adt(0);
        std::string r;
        if (fl) {
          r = absl::StrCat("static_cast<", vt, ">(static_cast<double>(", arg(0), "))");
          if (t == DType::kF16) r = absl::StrCat("kiln_rt::RoundHalf(", r, ")");
          if (t == DType::kBF16) r = absl::StrCat("kiln_rt::RoundBF16(", r, ")");
        } else if (t == DType::kBool) {
          r = absl::StrCat("(", arg(0), " != 0)");
        } else if (ir::IsFloat(from)) {
          r = absl::StrCat(FloatToIntFn(t), "<", vt, ">(static_cast<double>(", arg(0), "))");
        } else {
          r = absl::StrCat("kiln_rt::Wrap<", vt, ">(static_cast<uint64_t>(static_cast<int64_t>(",
                           arg(0), ")))");
        }
        return r;
      }
      case OpCode::kSelect:
        return absl::StrCat("(", arg(0), " ? ", arg(1), " : ", arg(2), ")");
      default:
        break;
    }
    // A pointwise op: its row's scalar form (ir/loop/opcodes.def).
    const OpForm* form =
        op.args.empty() ? nullptr : FindOpForm(op.code, ir::loop::OperandKindOf(adt(0)));
    if (form == nullptr) return "0 /* unsupported */";
    std::vector<std::string> args;
    for (size_t j = 0; j < op.args.size(); ++j) args.push_back(arg(static_cast<int>(j)));
    return ExpandForm(form->scalar, args, vt);
  }

  // store_indirect: nothing is written for an index outside
  // [-extent, extent) (kErrorIndexOutOfRange instead).
  void EmitStoreIndirect(int i) {
    const Op& op = k_.body[i];
    const DType bt = Buf(i).dtype;
    const std::string q = absl::StrCat("kiln_q", i);
    w_.Line(absl::StrCat("const int64_t ", q, " = kiln_rt::IndirectStoreIndex(", S(op.args[1]),
                         ", ", IntLiteral(op.extent), ", &kiln_err);"));
    w_.Open(absl::StrCat("if (", q, " >= 0)"));
    const std::string ref = absl::StrCat(Param(i), "[", Idx(i), " + ", q, " * ",
                                         IntLiteral(op.stride), "]");
    const std::string v = S(op.args[0]);
    const std::string vt = ValueType(bt);
    const std::string old = LoadConversion(bt, ref);
    std::string r;
    const bool fl = ir::IsFloat(bt);
    switch (op.combine) {
      case ir::loop::StoreCombine::kNone: r = v; break;
      case ir::loop::StoreCombine::kAdd:
        r = fl ? absl::StrCat("static_cast<", vt, ">(", old, " + ", v, ")")
               : absl::StrCat("kiln_rt::AddW(", old, ", ", v, ")");
        break;
      case ir::loop::StoreCombine::kMul:
        r = fl ? absl::StrCat("static_cast<", vt, ">(", old, " * ", v, ")")
               : absl::StrCat("kiln_rt::MulW(", old, ", ", v, ")");
        break;
      case ir::loop::StoreCombine::kMax:
        r = absl::StrCat("kiln_rt::ScatterMax<", vt, ">(", old, ", ", v, ")");
        break;
      case ir::loop::StoreCombine::kMin:
        r = absl::StrCat("kiln_rt::ScatterMin<", vt, ">(", old, ", ", v, ")");
        break;
    }
    if (bt == DType::kBool) {
      w_.Line(absl::StrCat(ref, " = (", r, ") ? 1 : 0;"));
    } else {
      w_.Line(absl::StrCat(ref, " = ", StoreConversion(bt, r), ";"));
    }
    w_.Close();
  }

  void EmitScalarOp(int i) {
    const Op& op = k_.body[i];
    if (op.code == OpCode::kStoreIndirect) return EmitStoreIndirect(i);
    if (op.code == OpCode::kStore) {
      const std::string ref = absl::StrCat(Param(i), "[", Idx(i), "]");
      const std::string v = S(op.args[0]);
      if (Buf(i).dtype == DType::kBool) {
        w_.Line(absl::StrCat(ref, " = ", v, " ? 1 : 0;"));
      } else {
        w_.Line(absl::StrCat(ref, " = ", StoreConversion(Buf(i).dtype, v), ";"));
      }
      return;
    }
    if (op.code == OpCode::kReduce) {
      if (plan_.inner_reduce[i]) {
        EmitInnerVectorReduce(i);
      } else {
        EmitScalarReduce(i);
      }
      return;
    }
    w_.Line(absl::StrCat("const ", ValueType(op.dtype), " ", S(i), " = ", ScalarExpr(i), ";"));
    w_.Line(absl::StrCat("(void)", S(i), ";"));
  }

  // Opens the loops of the reduction space (all but `skip_last` innermost).
  int OpenReductionLoops(bool skip_last) {
    const int first_r = static_cast<int>(k_.ranges.size());
    const int last = k_.num_vars() - (skip_last ? 1 : 0);
    int opened = 0;
    for (int v = first_r; v < last; ++v) {
      w_.Open(absl::StrCat("for (int64_t ", Var(v), " = 0; ", Var(v), " < ", IntLiteral(a_.extents[v]),
                           "; ++", Var(v), ")"));
      ++opened;
    }
    return opened;
  }

  void EmitScalarReduce(int i) {
    const Op& op = k_.body[i];
    const int src = op.args[0];
    const DType in = Dt(src);
    const bool fl = ir::IsFloat(in);
    const std::string acc = absl::StrCat("kiln_acc", i);
    const std::string vt = ValueType(op.dtype);
    const ReduceKind rk = op.reduce;
    const bool arg = IsArgReduce(rk);
    const bool welford = rk == ReduceKind::kWelfordMean || rk == ReduceKind::kWelfordVar;
    if (arg) {
      w_.Line(absl::StrCat("bool ", acc, "_have = false;"));
      w_.Line(absl::StrCat(ValueType(in), " ", acc, "_best{};"));
      w_.Line(absl::StrCat("int64_t ", acc, "_bpos = 0, ", acc, "_pos = 0;"));
    } else if (welford) {
      w_.Line(absl::StrCat("double ", acc, "_count = 0, ", acc, "_mean = 0, ", acc, "_m2 = 0;"));
    } else if (fl) {
      const char* init = rk == ReduceKind::kProd  ? "1.0"
                         : rk == ReduceKind::kMax ? "-HUGE_VAL"
                         : rk == ReduceKind::kMin ? "HUGE_VAL"
                                                  : "0.0";
      w_.Line(absl::StrCat("double ", acc, " = ", init, ";"));
    } else if (rk == ReduceKind::kMax || rk == ReduceKind::kMin) {
      w_.Line(absl::StrCat("int64_t ", acc, " = std::numeric_limits<int64_t>::",
                           rk == ReduceKind::kMax ? "min" : "max", "();"));
    } else {
      w_.Line(absl::StrCat("uint64_t ", acc, " = ", rk == ReduceKind::kProd ? "1" : "0", ";"));
    }
    bool empty = false;
    for (int64_t e : k_.reduction_ranges) empty |= e == 0;
    if (!empty) {
      w_.Open("");
      const int opened = OpenReductionLoops(false);
      for (int j : a_.cone[i]) EmitScalarOp(j);
      const std::string x = S(src);
      switch (rk) {
        case ReduceKind::kSum:
          w_.Line(fl ? absl::StrCat(acc, " += static_cast<double>(", x, ");")
                     : absl::StrCat(acc, " += static_cast<uint64_t>(static_cast<int64_t>(", x, "));"));
          break;
        case ReduceKind::kProd:
          w_.Line(fl ? absl::StrCat(acc, " *= static_cast<double>(", x, ");")
                     : absl::StrCat(acc, " *= static_cast<uint64_t>(static_cast<int64_t>(", x, "));"));
          break;
        case ReduceKind::kMax:
        case ReduceKind::kMin: {
          const char* fn = rk == ReduceKind::kMax ? "max" : "min";
          if (fl) {
            w_.Line(absl::StrCat(acc, " = (std::isnan(", acc, ") || std::isnan(", x,
                                 ")) ? std::numeric_limits<double>::quiet_NaN() : std::", fn,
                                 "(", acc, ", static_cast<double>(", x, "));"));
          } else {
            w_.Line(absl::StrCat(acc, " = std::", fn, "<int64_t>(", acc, ", static_cast<int64_t>(",
                                 x, "));"));
          }
          break;
        }
        case ReduceKind::kWelfordMean:
        case ReduceKind::kWelfordVar:
          w_.Line(absl::StrCat(acc, "_count += 1;"));
          w_.Line(absl::StrCat("const double ", acc, "_delta = static_cast<double>(", x, ") - ",
                               acc, "_mean;"));
          w_.Line(absl::StrCat(acc, "_mean += ", acc, "_delta / ", acc, "_count;"));
          w_.Line(absl::StrCat(acc, "_m2 += ", acc, "_delta * (static_cast<double>(", x, ") - ",
                               acc, "_mean);"));
          break;
        default: {
          const bool mx = rk == ReduceKind::kArgMax || rk == ReduceKind::kArgMaxLast;
          const bool last = rk == ReduceKind::kArgMaxLast || rk == ReduceKind::kArgMinLast;
          const std::string best = acc + "_best";
          w_.Line("bool kiln_take;");
          w_.Open(absl::StrCat("if (!", acc, "_have)"));
          w_.Line("kiln_take = true;");
          if (fl) {
            w_.Close();
            w_.Open(absl::StrCat("else if (std::isnan(", best, ") || std::isnan(", x, "))"));
            w_.Line(absl::StrCat("kiln_take = std::isnan(", x, ")",
                                 last ? ";" : absl::StrCat(" && !std::isnan(", best, ");")));
          }
          w_.Close();
          w_.Open("else");
          w_.Line(absl::StrCat("const int kiln_cmp = (", x, " > ", best, ") - (", x, " < ", best,
                               ");"));
          w_.Line(absl::StrCat("const int kiln_better = ", mx ? "kiln_cmp" : "-kiln_cmp", ";"));
          w_.Line(absl::StrCat("kiln_take = kiln_better > 0",
                               last ? " || kiln_better == 0;" : ";"));
          w_.Close();
          w_.Open("if (kiln_take)");
          w_.Line(absl::StrCat(best, " = ", x, ";"));
          w_.Line(absl::StrCat(acc, "_bpos = ", acc, "_pos;"));
          w_.Line(absl::StrCat(acc, "_have = true;"));
          w_.Close();
          w_.Line(absl::StrCat("++", acc, "_pos;"));
          break;
        }
      }
      for (int c = 0; c < opened; ++c) w_.Close();
      w_.Close();
    }
    std::string result;
    if (arg) {
      result = absl::StrCat("kiln_rt::Wrap<", vt, ">(static_cast<uint64_t>(", acc, "_bpos))");
    } else if (welford) {
      const std::string v = rk == ReduceKind::kWelfordMean ? absl::StrCat(acc, "_mean")
                                                           : absl::StrCat(acc, "_m2 / ", acc, "_count");
      result = absl::StrCat("static_cast<", vt, ">(", acc, "_count == 0 ? std::numeric_limits<double>::quiet_NaN() : ", v, ")");
    } else if (ir::IsFloat(op.dtype)) {
      result = absl::StrCat("static_cast<", vt, ">(", acc, ")");
    } else {
      result = absl::StrCat("kiln_rt::Wrap<", vt, ">(static_cast<uint64_t>(", acc, "))");
    }
    w_.Line(absl::StrCat("const ", vt, " ", S(i), " = ", result, ";"));
  }

  // ---- Vector ops.

  // Tag of a vector value of dtype t ("df" or "di"); bool values are masks
  // of df, f16 and bf16 values f32 lanes, i8 and u8 values i32 lanes.
  static const char* Tag(DType t) { return InFloatLanes(t) || t == DType::kBool ? "df" : "di"; }
  // The C++ type of one lane of a vector value of dtype t (bool: i32 0/1).
  const char* LaneType(DType t) const {
    if (a_.f64 && InFloatLanes(t)) return "double";
    return InF32Lanes(t) ? "float" : "int32_t";
  }

  // A contiguous vector load of op i's buffer at `ptr` (kiln_n lanes in a
  // tail step): narrow buffers widen into f32 / i32 lanes.
  std::string ContiguousLoad(int i, const std::string& ptr, bool tail) const {
    const DType bt = Buf(i).dtype;
    if (a_.f64 && bt == DType::kF32) return absl::StrCat("KilnLoadF32AsF64(df, ", ptr, ", kiln_n)");
    if (a_.f64 && bt == DType::kF16) return absl::StrCat("KilnLoadF16AsF64(df, ", ptr, ", kiln_n)");
    if (a_.f64 && bt == DType::kBF16) {
      return absl::StrCat("KilnLoadBF16AsF64(df, ", ptr, ", kiln_n)");
    }
    switch (bt) {
      case DType::kBool: return absl::StrCat("KilnLoadBool(df, ", ptr, ", kiln_n)");
      case DType::kF16: return absl::StrCat("KilnLoadF16(df, ", ptr, ", kiln_n)");
      case DType::kBF16: return absl::StrCat("KilnLoadBF16(df, ", ptr, ", kiln_n)");
      case DType::kI8:
      case DType::kU8: return absl::StrCat("KilnLoadInt8(di, ", ptr, ", kiln_n)");
      default:
        return tail ? absl::StrCat("KilnLoadN(", Tag(bt), ", ", ptr, ", kiln_n)")
                    : absl::StrCat("hn::LoadU(", Tag(bt), ", ", ptr, ")");
    }
  }

  // Lanes of a value of dtype `t` computed one by one: `conv` (a C++
  // expression of kl) into a lane array, then one vector load.
  std::string LaneLoad(DType t, const std::string& prologue, const std::string& conv) const {
    const std::string load = absl::StrCat(
        "[&]() { ", prologue, "alignas(64) ", LaneType(t),
        " kiln_t[kKilnMaxLanes] = {}; for (size_t kl = 0; kl < kiln_n; ++kl) kiln_t[kl] = ", conv,
        "; return hn::Load(", InFloatLanes(t) ? "df" : "di", ", kiln_t); }()");
    if (t == DType::kBool) return absl::StrCat("hn::RebindMask(df, hn::Zero(di) < ", load, ")");
    return load;
  }

  // Element `elem` (a C++ expression) of a buffer of dtype bt as one lane.
  static std::string LaneElement(DType bt, const std::string& elem) {
    if (bt == DType::kBool) return absl::StrCat("(", elem, " != 0) ? 1 : 0");
    return LoadConversion(bt, elem);
  }

  // Operand `j` as a vector in a context vectorized over `var`.
  std::string VArg(int j, int var) const {
    if (a_.deps[j] & Bit(var)) return V(j);
    switch (Dt(j)) {
      case DType::kBool: return absl::StrCat("hn::FirstN(df, ", S(j), " ? hn::Lanes(df) : 0)");
      default: return absl::StrCat("hn::Set(", Tag(Dt(j)), ", ", S(j), ")");
    }
  }

  // Index of op i with `var` at lane `kl`.
  std::string LaneIdx(int i, int var) const {
    return CppIndex(a_.index[i], [this, var](int v) {
      return v == var ? absl::StrCat("(", Var(v), " + static_cast<int64_t>(kl))") : Var(v);
    });
  }

  // A cast of a load without a vector dtype: each lane read and converted
  // as the scalar code does.
  std::string LaneCastExpr(int i, int var) {
    const Op& op = k_.body[i];
    const int src = op.args[0];
    const DType t = op.dtype;
    const std::string elem =
        LoadConversion(Buf(src).dtype, absl::StrCat(Param(src), "[", LaneIdx(src, var), "]"));
    const DType from = Dt(src);
    std::string conv;
    if (InF32Lanes(t)) {
      conv = absl::StrCat("static_cast<float>(static_cast<double>(", elem, "))");
      if (t == DType::kF16) conv = absl::StrCat("kiln_rt::RoundHalf(", conv, ")");
      if (t == DType::kBF16) conv = absl::StrCat("kiln_rt::RoundBF16(", conv, ")");
    } else if (t == DType::kBool) {
      conv = absl::StrCat("(", elem, " != 0) ? 1 : 0");
    } else if (ir::IsFloat(from)) {
      conv = absl::StrCat(FloatToIntFn(t), "<", ValueType(t), ">(static_cast<double>(", elem,
                          "))");
    } else {
      conv = absl::StrCat("kiln_rt::Wrap<", ValueType(t),
                          ">(static_cast<uint64_t>(static_cast<int64_t>(", elem, ")))");
    }
    return LaneLoad(t, "", conv);
  }

  // load_indirect in a vector context: one checked row offset and a
  // contiguous load when the index is the same for every lane, else lane by
  // lane.
  std::string IndirectVectorExpr(int i, int var, bool tail) {
    const Op& op = k_.body[i];
    const DType bt = Buf(i).dtype;
    const int n = op.args[0];
    const bool lane_n = (a_.deps[n] & Bit(var)) != 0;
    if (!lane_n && bt != DType::kBool && AccessOf(p_, a_, i, var) == Access::kContiguous) {
      return ContiguousLoad(
          i, absl::StrCat(Param(i), " + ", Idx(i), " + ", IndirectOffset(i, S(n))), tail);
    }
    if (HardwareIndirectGather(p_, a_, i, var)) {
      // One gather; out-of-range and tail lanes read offset 0 (an
      // out-of-range live lane also flags the error, as IndirectIndex does).
      const std::string e = IntLiteral(op.extent);
      std::string offset = "kiln_w";
      if (op.stride != 1) offset = absl::StrCat("hn::Mul(kiln_w, hn::Set(di, ", IntLiteral(op.stride), "))");
      return absl::StrCat(
          "[&]() { const auto kiln_g = ", V(n), "; ",
          "const auto kiln_in = hn::And(kiln_g > hn::Set(di, ", IntLiteral(-op.extent - 1),
          "), kiln_g < hn::Set(di, ", e,
          ")); const auto kiln_live = hn::FirstN(di, kiln_n); ",
          "if (!hn::AllTrue(di, hn::Or(kiln_in, hn::Not(kiln_live)))) kiln_err |= 2; ",
          "const auto kiln_w = hn::IfThenElseZero(hn::And(kiln_in, kiln_live), ",
          "hn::IfThenElse(kiln_g < hn::Zero(di), hn::Add(kiln_g, hn::Set(di, ", e, ")), kiln_g)); ",
          "return hn::GatherIndex(", Tag(bt), ", ", Param(i), " + ", Idx(i), ", ", offset, "); }()");
    }
    std::string prologue, lane;
    if (!lane_n) {
      lane = S(n);
    } else if (a_.lane_index[n]) {
      lane = absl::StrCat(Param(n), "[", LaneIdx(n, var), "]");
    } else {  // an i32 vector
      prologue = absl::StrCat("alignas(64) int32_t kiln_ix[kKilnMaxLanes]; hn::Store(", V(n),
                              ", di, kiln_ix); ");
      lane = "kiln_ix[kl]";
    }
    const std::string elem = absl::StrCat(Param(i), "[", LaneIdx(i, var), " + ",
                                          IndirectOffset(i, lane), "]");
    return LaneLoad(bt, prologue, LaneElement(bt, elem));
  }

  std::string Lanewise(int i, int var, const std::string& scalar_fn) {
    const Op& op = k_.body[i];
    const DType t = Dt(op.args[0]);
    const std::string ct = ValueType(t);
    if (op.args.size() == 1) {
      return absl::StrCat("KilnLanewise1(", Tag(t), ", ", VArg(op.args[0], var), ", kiln_n, [&](",
                          ct, " a) { return ", scalar_fn, "; })");
    }
    return absl::StrCat("KilnLanewise2(", Tag(t), ", ", VArg(op.args[0], var), ", ",
                        VArg(op.args[1], var), ", kiln_n, [&](", ct, " a, ", ct, " b) { return ",
                        scalar_fn, "; })");
  }

  // An index op affine in the vector variable whose values over every lane
  // a vector step may compute (tail lanes included) fit int32: the first
  // lane's value plus Iota times the stride, in integer lanes. nullopt: the
  // lane-by-lane form.
  std::optional<std::string> IotaIndex(int i, int var) const {
    const DType t = Dt(i);
    const std::optional<int64_t> stride = IotaIndexStride(a_, i, var);
    if (!stride.has_value()) return std::nullopt;
    const std::string first = absl::StrCat("static_cast<int32_t>(", Idx(i), ")");
    if (a_.f64 && ir::IsInteger(t)) {  // read only by casts to float
      const std::string f = absl::StrCat("static_cast<double>(", first, ")");
      return *stride == 1 ? absl::StrCat("hn::Iota(df, ", f, ")")
                          : absl::StrCat("hn::Add(hn::Set(df, ", f, "), hn::Mul(hn::Iota(df, 0), hn::Set(df, static_cast<double>(",
                                         IntLiteral(*stride), "))))");
    }
    const std::string v =
        *stride == 1 ? absl::StrCat("hn::Iota(di, ", first, ")")
                     : absl::StrCat("hn::Add(hn::Set(di, ", first, "), hn::Mul(hn::Iota(di, 0), hn::Set(di, ",
                                    IntLiteral(*stride), ")))");
    if (t == DType::kI32) return v;
    if (t == DType::kF32) return absl::StrCat("hn::ConvertTo(df, ", v, ")");
    return std::nullopt;
  }

  // A cast of vector value `v` from `from` to `t` (from != t), with the
  // interpreter's semantics: to f16/bf16 rounds to nearest even; float to
  // integer truncates with NaN 0, to i8 / u8 saturating (KilnF32ToI8,
  // KilnF32ToU8), to i32 saturating to int64 then wrapping (KilnF32ToI32);
  // integers wrap (KilnWrapI8 / KilnWrapU8); to bool is != 0.
  static std::string CastVector(DType from, DType t, const std::string& v) {
    // f32 <-> f64 on the f64 lanes of an f64 kernel: the value as is (an f32
    // result is rounded by its op, EmitVectorOp).
    if (InFloatLanes(from) && InFloatLanes(t) && (from == DType::kF64 || t == DType::kF64)) {
      return v;
    }
    if (InF32Lanes(t)) {
      std::string r;
      if (InF32Lanes(from)) {
        r = v;
      } else if (from == DType::kBool) {
        r = absl::StrCat("hn::IfThenElseZero(", v, ", hn::Set(df, 1.0f))");
      } else {
        r = absl::StrCat("hn::ConvertTo(df, ", v, ")");
      }
      if (t == DType::kF16) return absl::StrCat("KilnRoundF16(df, ", r, ")");
      if (t == DType::kBF16) return absl::StrCat("KilnRoundBF16(df, ", r, ")");
      return r;
    }
    if (t == DType::kBool) {
      if (InF32Lanes(from)) return absl::StrCat("hn::Not(", v, " == hn::Zero(df))");
      return absl::StrCat("hn::RebindMask(df, hn::Not(", v, " == hn::Zero(di)))");
    }
    std::string r;
    if (InF32Lanes(from) && (t == DType::kI8 || t == DType::kU8)) {
      return absl::StrCat(t == DType::kI8 ? "KilnF32ToI8(di, df, " : "KilnF32ToU8(di, df, ", v,
                          ")");
    }
    if (InF32Lanes(from)) {
      r = absl::StrCat("KilnF32ToI32(di, df, ", v, ")");
    } else if (from == DType::kBool) {
      r = absl::StrCat("hn::IfThenElseZero(hn::RebindMask(di, ", v, "), hn::Set(di, 1))");
    } else {
      r = v;  // i32 lanes holding an i32, i8 or u8 value
    }
    if (t == DType::kI8 && from != DType::kBool) return absl::StrCat("KilnWrapI8(di, ", r, ")");
    if (t == DType::kU8 && from != DType::kBool) return absl::StrCat("KilnWrapU8(di, ", r, ")");
    return r;
  }

  std::string VectorExpr(int i, int var, bool tail) {
    const Op& op = k_.body[i];
    const DType t = op.dtype;
    auto x = [&](int j) { return VArg(op.args[j], var); };
    auto adt = [&](int j) { return Dt(op.args[j]); };
    switch (op.code) {
      case OpCode::kLoad: {
        const DType bt = Buf(i).dtype;
        if (AccessOf(p_, a_, i, var) == Access::kContiguous) {
          return ContiguousLoad(i, absl::StrCat(Param(i), " + ", Idx(i)), tail);
        }
        if (std::optional<int64_t> st = HardwareGatherStride(p_, a_, i, var)) {
          // Tail lanes past kiln_n read the first lane's element (offset 0).
          std::string offsets = absl::StrCat("hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(",
                                             IntLiteral(*st), ")))");
          if (tail) offsets = absl::StrCat("hn::IfThenElseZero(hn::FirstN(di, kiln_n), ", offsets, ")");
          return absl::StrCat("hn::GatherIndex(", Tag(bt), ", ", Param(i), " + ", Idx(i), ", ",
                              offsets, ")");
        }
        const std::string elem = absl::StrCat(Param(i), "[", LaneIdx(i, var), "]");
        return LaneLoad(bt, "", LaneElement(bt, elem));
      }
      case OpCode::kLoadIndirect: return IndirectVectorExpr(i, var, tail);
      case OpCode::kIndex: {
        if (std::optional<std::string> iota = IotaIndex(i, var)) return *iota;
        const std::string v = absl::StrCat("static_cast<int64_t>(", LaneIdx(i, var), ")");
        if (a_.f64 && ir::IsInteger(t)) {  // read only by casts to float
          return LaneLoad(DType::kF64, "", absl::StrCat("static_cast<double>(", v, ")"));
        }
        const std::string conv =
            InF32Lanes(t) ? absl::StrCat("static_cast<float>(static_cast<double>(", v, "))")
            : t == DType::kBool
                ? absl::StrCat("(", v, " != 0) ? 1 : 0")
                : absl::StrCat("kiln_rt::Wrap<", ValueType(t), ">(static_cast<uint64_t>(", v, "))");
        return LaneLoad(t, "", conv);
      }
      case OpCode::kCast: {
        const DType from = adt(0);
        if (a_.lane_cast_src[op.args[0]]) return LaneCastExpr(i, var);
        // (A cast to f16 / bf16 rounds even from its own dtype: f16 and bf16
        // arithmetic results are f32 values until a cast or a store.)
        if (from == t && !ir::IsLowPrecisionFloat(t)) return x(0);
        // Between floats on f64 lanes: the value as is, rounded to t by
        // EmitVectorOp.
        if (a_.f64 && InFloatLanes(t) &&
            (InFloatLanes(from) || k_.body[op.args[0]].code == OpCode::kIndex)) {
          return x(0);
        }
        return CastVector(from, t, x(0));
      }
      case OpCode::kSelect:
        if (t == DType::kBool) {
          return absl::StrCat("hn::Or(hn::And(", x(0), ", ", x(1), "), hn::AndNot(", x(0), ", ",
                              x(2), "))");
        }
        if (!InF32Lanes(t)) {
          return absl::StrCat("hn::IfThenElse(hn::RebindMask(di, ", x(0), "), ", x(1), ", ", x(2),
                              ")");
        }
        return absl::StrCat("hn::IfThenElse(", x(0), ", ", x(1), ", ", x(2), ")");
      default:
        break;
    }
    // A pointwise op on f32, i32 or bool operands (the checker vectorizes no
    // other dtype): its row's vector form, or its scalar form lane by lane.
    const OpForm* form =
        op.args.empty() ? nullptr : FindOpForm(op.code, ir::loop::OperandKindOf(adt(0)));
    if (form == nullptr) return "/* unsupported */";
    if (a_.f64 ? F64Lanewise(*form) : form->lanewise()) {
      return Lanewise(i, var, ExpandForm(form->scalar, {"a", "b"}, ValueType(t)));
    }
    std::vector<std::string> args;
    for (size_t j = 0; j < op.args.size(); ++j) args.push_back(x(static_cast<int>(j)));
    return ExpandForm(form->vector, args, ValueType(t));
  }

  void EmitVectorStore(int i, int var, bool tail) {
    const Op& op = k_.body[i];
    const DType bt = Buf(i).dtype;
    const std::string v = VArg(op.args[0], var);
    if (AccessOf(p_, a_, i, var) == Access::kContiguous) {
      const std::string ptr = absl::StrCat(Param(i), " + ", Idx(i));
      if (bt == DType::kBool) {
        w_.Line(absl::StrCat("KilnStoreBool(df, ", v, ", ", ptr, ", kiln_n);"));
        return;
      }
      if (a_.f64 && InF32Lanes(bt)) {
        const char* fn = bt == DType::kF16    ? "KilnStoreF64AsF16(df, "
                         : bt == DType::kBF16 ? "KilnStoreF64AsBF16(df, "
                                              : "KilnStoreF64AsF32(df, ";
        w_.Line(absl::StrCat(fn, v, ", ", ptr, ", kiln_n);"));
        return;
      }
      const char* narrow = bt == DType::kF16    ? "KilnStoreF16(df, "
                           : bt == DType::kBF16 ? "KilnStoreBF16(df, "
                           : bt == DType::kI8 || bt == DType::kU8 ? "KilnStoreInt8(di, "
                                                                  : nullptr;
      if (narrow != nullptr) {
        w_.Line(absl::StrCat(narrow, v, ", ", ptr, ", kiln_n);"));
        return;
      }
      w_.Line(tail ? absl::StrCat("KilnStoreN(", v, ", ", Tag(bt), ", ", ptr, ", kiln_n);")
                   : absl::StrCat("hn::StoreU(", v, ", ", Tag(bt), ", ", ptr, ");"));
      return;
    }
    if (!tail) {
      if (std::optional<int64_t> st = HardwareGatherStride(p_, a_, i, var)) {
        w_.Line(absl::StrCat("hn::ScatterIndex(", v, ", ", Tag(bt), ", ", Param(i), " + ", Idx(i),
                             ", hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(", IntLiteral(*st), "))));"));
        return;
      }
    }
    w_.Open("");
    if (bt == DType::kBool) {
      w_.Line("alignas(64) int32_t kiln_t[kKilnMaxLanes];");
      w_.Line(absl::StrCat("hn::Store(hn::IfThenElseZero(hn::RebindMask(di, ", v,
                           "), hn::Set(di, 1)), di, kiln_t);"));
    } else {
      w_.Line(absl::StrCat("alignas(64) ", LaneType(bt), " kiln_t[kKilnMaxLanes];"));
      w_.Line(absl::StrCat("hn::Store(", v, ", ", Tag(bt), ", kiln_t);"));
    }
    std::string lane = "kiln_t[kl]";
    if (bt == DType::kBool || bt == DType::kI8 || bt == DType::kU8) {
      lane = absl::StrCat("static_cast<", StorageType(bt), ">(kiln_t[kl])");
    } else {
      lane = StoreConversion(bt, lane);
    }
    w_.Line(absl::StrCat("for (size_t kl = 0; kl < kiln_n; ++kl) ", Param(i), "[", LaneIdx(i, var),
                         "] = ", lane, ";"));
    w_.Close();
  }

  // Op i inside a vector body over `var`: vector form when it depends on
  // var, else scalar.
  void EmitVectorOp(int i, int var, bool tail) {
    const Op& op = k_.body[i];
    if (!(a_.deps[i] & Bit(var))) {
      EmitScalarOp(i);
      return;
    }
    if (a_.lane_index[i] || a_.lane_cast_src[i]) return;  // read inside their users
    if (plan_.tiled_load[i]) {
      w_.Line(absl::StrCat("const auto ", V(i), " = hn::Load(", Tag(Buf(i).dtype), ", kiln_tile", i,
                           " + kj * static_cast<size_t>(kL));"));
      return;
    }
    if (op.code == OpCode::kStore) return EmitVectorStore(i, var, tail);
    if (op.code == OpCode::kReduce) return EmitLaneReduce(i, var, tail);
    std::string e = VectorExpr(i, var, tail);
    // i8 / u8 arithmetic in i32 lanes: wrapped to the dtype after every op,
    // as the interpreter wraps (loads, casts and selects are in range).
    if ((op.dtype == DType::kI8 || op.dtype == DType::kU8) && op.code != OpCode::kLoad &&
        op.code != OpCode::kLoadIndirect && op.code != OpCode::kCast &&
        op.code != OpCode::kSelect && op.code != OpCode::kIndex) {
      e = absl::StrCat(op.dtype == DType::kI8 ? "KilnWrapI8(di, " : "KilnWrapU8(di, ", e, ")");
    }
    // f32 values on f64 lanes: each op's result rounded to f32 (loads are);
    // f16 / bf16 ones too, and a cast to them then to f16 / bf16.
    if (a_.f64 && InF32Lanes(op.dtype) && op.code != OpCode::kLoad) {
      const char* round = op.code != OpCode::kCast  ? "KilnRoundF32(df, "
                          : op.dtype == DType::kF16  ? "KilnRoundF16OnF64(df, "
                          : op.dtype == DType::kBF16 ? "KilnRoundBF16OnF64(df, "
                                                     : "KilnRoundF32(df, ";
      e = absl::StrCat(round, e, ")");
    }
    w_.Line(absl::StrCat("const auto ", V(i), " = ", e, ";"));
  }

  std::string Identity(ReduceKind rk, DType t) const {
    const bool f = InFloatLanes(t);
    switch (rk) {
      case ReduceKind::kSum: return f ? "hn::Zero(df)" : "hn::Zero(di)";
      case ReduceKind::kProd: return f ? "hn::Set(df, 1.0f)" : "hn::Set(di, 1)";
      case ReduceKind::kMax:
        return f ? "hn::Set(df, -std::numeric_limits<float>::infinity())"
                 : "hn::Set(di, std::numeric_limits<int32_t>::min())";
      default:
        return f ? "hn::Set(df, std::numeric_limits<float>::infinity())"
                 : "hn::Set(di, std::numeric_limits<int32_t>::max())";
    }
  }

  // acc = acc (op) x; with `mask` (tail of a reduction loop) the masked-off
  // lanes contribute the identity.
  void EmitAccumulate(int i, const std::string& x, const std::string& mask) {
    const Op& op = k_.body[i];
    const DType t = op.dtype;
    const ReduceKind rk = op.reduce;
    const std::string acc = absl::StrCat("kiln_acc", i);
    const std::string xm =
        mask.empty() ? x
        : rk == ReduceKind::kSum
            ? absl::StrCat("hn::IfThenElseZero(", mask, ", ", x, ")")
            : absl::StrCat("hn::IfThenElse(", mask, ", ", x, ", ", Identity(rk, t), ")");
    switch (rk) {
      case ReduceKind::kSum: w_.Line(absl::StrCat(acc, " = hn::Add(", acc, ", ", xm, ");")); break;
      case ReduceKind::kProd: w_.Line(absl::StrCat(acc, " = hn::Mul(", acc, ", ", xm, ");")); break;
      default: {
        const char* fn = rk == ReduceKind::kMax ? "hn::Max" : "hn::Min";
        w_.Line(absl::StrCat(acc, " = ", fn, "(", acc, ", ", xm, ");"));
        if (InFloatLanes(t)) {
          const std::string isnan = absl::StrCat("hn::IsNaN(", x, ")");
          w_.Line(absl::StrCat(acc, "_nan = hn::Or(", acc, "_nan, ",
                               mask.empty() ? isnan : absl::StrCat("hn::And(", mask, ", ", isnan, ")"),
                               ");"));
        }
      }
    }
  }

  void EmitAccInit(int i) {
    const Op& op = k_.body[i];
    const std::string acc = absl::StrCat("kiln_acc", i);
    w_.Line(absl::StrCat("auto ", acc, " = ", Identity(op.reduce, op.dtype), ";"));
    if (InFloatLanes(op.dtype) &&
        (op.reduce == ReduceKind::kMax || op.reduce == ReduceKind::kMin)) {
      w_.Line(absl::StrCat("auto ", acc, "_nan = hn::FirstN(df, 0);"));
    }
    if (BlockedSum(i)) EmitBlockInit(acc);
  }

  // Whether reduce op i sums f32 lanes over more points than
  // kReduceBlockSteps: such a sum accumulates in blocks (EmitBlockInit).
  bool BlockedSum(int i) const {
    const Op& op = k_.body[i];
    const bool sum = op.reduce == ReduceKind::kSum || op.reduce == ReduceKind::kWelfordMean ||
                     op.reduce == ReduceKind::kWelfordVar;
    return sum && !a_.f64 && InF32Lanes(op.dtype) && ReductionPoints() > kReduceBlockSteps;
  }
  int64_t ReductionPoints() const {
    int64_t count = 1;
    for (int64_t e : k_.reduction_ranges) {
      count = (e != 0 && count > std::numeric_limits<int64_t>::max() / e)
                  ? std::numeric_limits<int64_t>::max()
                  : count * e;
    }
    return count;
  }
  // A long f32 sum: the vector accumulator `acc` takes at most
  // kReduceBlockSteps vector steps, then its lanes are added into per-lane
  // f64 partials `acc`_part and it restarts from zero, so no f32 partial grows
  // large enough to swallow its addends (an f32 sum of ones stops at 2^24).
  // The block boundaries depend on the points alone, never on threads.
  void EmitBlockInit(const std::string& acc) {
    w_.Line(absl::StrCat("alignas(64) double ", acc, "_part[kKilnMaxLanes] = {};"));
    w_.Line(absl::StrCat("int64_t ", acc, "_steps = 0;"));
  }
  // After one vector step into `acc`: the block's end, if reached.
  void EmitBlockStep(const std::string& acc) {
    w_.Open(absl::StrCat("if (++", acc, "_steps == ", kReduceBlockSteps, ")"));
    EmitBlockFlush(acc);
    w_.Line(absl::StrCat(acc, "_steps = 0;"));
    w_.Close();
  }
  void EmitBlockFlush(const std::string& acc) {
    w_.Open("");
    w_.Line(absl::StrCat("alignas(64) float ", acc, "_blk[kKilnMaxLanes];"));
    w_.Line(absl::StrCat("hn::Store(", acc, ", df, ", acc, "_blk);"));
    w_.Line(absl::StrCat("for (size_t l = 0; l < hn::Lanes(df); ++l) ", acc,
                         "_part[l] += static_cast<double>(", acc, "_blk[l]);"));
    w_.Line(absl::StrCat(acc, " = hn::Zero(df);"));
    w_.Close();
  }

  // A reduce that depends on the kernel's vector variable: one accumulator
  // per lane, scalar loops over the reduction space.
  void EmitLaneReduce(int i, int var, bool tail) {
    const Op& op = k_.body[i];
    EmitAccInit(i);
    w_.Open("");
    const int opened = OpenReductionLoops(false);
    for (int j : a_.cone[i]) EmitVectorOp(j, var, tail);
    EmitAccumulate(i, VArg(op.args[0], var), "");
    const std::string acc = absl::StrCat("kiln_acc", i);
    if (BlockedSum(i)) EmitBlockStep(acc);
    for (int c = 0; c < opened; ++c) w_.Close();
    w_.Close();
    if (BlockedSum(i)) {
      EmitBlockFlush(acc);
      w_.Line(absl::StrCat("alignas(64) float ", acc, "_r[kKilnMaxLanes];"));
      w_.Line(absl::StrCat("for (size_t l = 0; l < hn::Lanes(df); ++l) ", acc,
                           "_r[l] = static_cast<float>(", acc, "_part[l]);"));
      w_.Line(absl::StrCat("const auto ", V(i), " = hn::Load(df, ", acc, "_r);"));
    } else if (InFloatLanes(op.dtype) &&
        (op.reduce == ReduceKind::kMax || op.reduce == ReduceKind::kMin)) {
      w_.Line(absl::StrCat("const auto ", V(i), " = hn::IfThenElse(", acc,
                           "_nan, hn::Set(df, std::numeric_limits<float>::quiet_NaN()), ", acc, ");"));
    } else if (a_.f64 && InF32Lanes(op.dtype)) {
      w_.Line(absl::StrCat("const auto ", V(i), " = KilnRoundF32(df, ", acc, ");"));
    } else {
      w_.Line(absl::StrCat("const auto ", V(i), " = ", acc, ";"));
    }
  }

  // A reduce computed once per iteration point, vectorized along the last
  // reduction variable; lanes are combined at the end.
  // welford_mean / welford_var vectorized along the last reduction
  // variable: one vector pass summing the values (mean = sum / n) and, for
  // the variance, a second one summing (x - mean)^2 (the two-pass form,
  // as accurate as Welford's update for data held in memory, without its
  // division per element). Tails are masked; lanes combine in double.
  void EmitInnerVectorWelford(int i) {
    const Op& op = k_.body[i];
    const int rv = k_.num_vars() - 1;
    const std::string acc = absl::StrCat("kiln_acc", i);
    int64_t count = 1;
    for (int64_t e : k_.reduction_ranges) count *= e;
    const bool blocked = BlockedSum(i);
    auto pass = [&](const std::string& sum, const std::string& center) {
      w_.Line(absl::StrCat("auto ", sum, " = hn::Zero(df);"));
      if (blocked) EmitBlockInit(sum);
      w_.Open("");
      const int opened = OpenReductionLoops(true);
      for (int j : a_.cone[i]) {
        if (!(a_.deps[j] & Bit(rv))) EmitScalarOp(j);
      }
      EmitVectorLoop(rv, a_.extents[rv], false, [&](bool tail) {
        for (int j : a_.cone[i]) {
          if (a_.deps[j] & Bit(rv)) EmitVectorOp(j, rv, tail);
        }
        std::string x = VArg(op.args[0], rv);
        if (!center.empty()) {
          w_.Line(absl::StrCat("const auto ", sum, "_d = hn::Sub(", x, ", hn::Set(df, ", center,
                               "));"));
          x = absl::StrCat("hn::Mul(", sum, "_d, ", sum, "_d)");
        }
        if (tail) x = absl::StrCat("hn::IfThenElseZero(hn::FirstN(df, kiln_n), ", x, ")");
        w_.Line(absl::StrCat(sum, " = hn::Add(", sum, ", ", x, ");"));
        if (blocked) EmitBlockStep(sum);
      });
      for (int c = 0; c < opened; ++c) w_.Close();
      w_.Close();
      if (blocked) {
        EmitBlockFlush(sum);
        w_.Line(absl::StrCat("double ", sum, "_h = 0;"));
        w_.Line(absl::StrCat("for (size_t l = 0; l < hn::Lanes(df); ++l) ", sum, "_h += ", sum,
                             "_part[l];"));
        return;
      }
      w_.Line(absl::StrCat("alignas(64) float ", sum, "_l[kKilnMaxLanes];"));
      w_.Line(absl::StrCat("hn::Store(", sum, ", df, ", sum, "_l);"));
      w_.Line(absl::StrCat("double ", sum, "_h = 0;"));
      w_.Line(absl::StrCat("for (size_t l = 0; l < hn::Lanes(df); ++l) ", sum,
                           "_h += static_cast<double>(", sum, "_l[l]);"));
    };
    pass(acc + "_s", "");
    w_.Line(absl::StrCat("const double ", acc, "_mean = ", acc, "_s_h / ", count, ".0;"));
    std::string result = absl::StrCat(acc, "_mean");
    if (op.reduce == ReduceKind::kWelfordVar) {
      pass(acc + "_q", absl::StrCat("static_cast<float>(", acc, "_mean)"));
      result = absl::StrCat(acc, "_q_h / ", count, ".0");
    }
    w_.Line(absl::StrCat("const float ", S(i), " = static_cast<float>(", result, ");"));
  }

  void EmitInnerVectorReduce(int i) {
    const Op& op = k_.body[i];
    if (op.reduce == ReduceKind::kWelfordMean || op.reduce == ReduceKind::kWelfordVar) {
      return EmitInnerVectorWelford(i);
    }
    const int rv = k_.num_vars() - 1;
    const DType t = op.dtype;
    const std::string acc = absl::StrCat("kiln_acc", i);
    EmitAccInit(i);
    w_.Open("");
    const int opened = OpenReductionLoops(true);
    for (int j : a_.cone[i]) {
      if (!(a_.deps[j] & Bit(rv))) EmitScalarOp(j);
    }
    EmitVectorLoop(rv, a_.extents[rv], false, [&](bool tail) {
      for (int j : a_.cone[i]) {
        if (a_.deps[j] & Bit(rv)) EmitVectorOp(j, rv, tail);
      }
      const std::string mask =
          tail ? (t == DType::kI32 ? "hn::FirstN(di, kiln_n)" : "hn::FirstN(df, kiln_n)") : "";
      EmitAccumulate(i, VArg(op.args[0], rv), mask);
      if (BlockedSum(i)) EmitBlockStep(acc);
    });
    for (int c = 0; c < opened; ++c) w_.Close();
    w_.Close();
    const bool f = InFloatLanes(t);
    if (BlockedSum(i)) {
      EmitBlockFlush(acc);
      w_.Line(absl::StrCat("double ", acc, "_h = 0;"));
      w_.Line(absl::StrCat("for (size_t l = 0; l < hn::Lanes(df); ++l) ", acc, "_h += ", acc,
                           "_part[l];"));
      w_.Line(absl::StrCat("const ", ValueType(t), " ", S(i), " = static_cast<", ValueType(t),
                           ">(", acc, "_h);"));
      return;
    }
    // Horizontal combine in double / 64-bit, as the scalar form.
    w_.Line(absl::StrCat("alignas(64) ", LaneType(t), " ", acc, "_l[kKilnMaxLanes];"));
    w_.Line(absl::StrCat("hn::Store(", acc, ", ", f ? "df" : "di", ", ", acc, "_l);"));
    std::string combine, result;
    switch (op.reduce) {
      case ReduceKind::kSum:
      case ReduceKind::kProd: {
        const bool sum = op.reduce == ReduceKind::kSum;
        w_.Line(absl::StrCat(f ? "double " : "uint64_t ", acc, "_h = ", sum ? "0" : "1", ";"));
        w_.Line(absl::StrCat("for (size_t l = 0; l < hn::Lanes(df); ++l) ", acc, "_h ",
                             sum ? "+" : "*", "= ",
                             f ? absl::StrCat("static_cast<double>(", acc, "_l[l]);")
                               : absl::StrCat("static_cast<uint64_t>(static_cast<int64_t>(", acc, "_l[l]));")));
        break;
      }
      default: {
        const char* fn = op.reduce == ReduceKind::kMax ? "max" : "min";
        w_.Line(absl::StrCat(f ? "double " : "int64_t ", acc, "_h = ", acc, "_l[0];"));
        w_.Line(absl::StrCat("for (size_t l = 1; l < hn::Lanes(df); ++l) ", acc, "_h = std::", fn,
                             "<", f ? "double" : "int64_t", ">(", acc, "_h, ", acc, "_l[l]);"));
        if (f) {
          w_.Line(absl::StrCat("if (!hn::AllFalse(df, ", acc, "_nan)) ", acc,
                               "_h = std::numeric_limits<double>::quiet_NaN();"));
        }
      }
    }
    w_.Line(absl::StrCat("const ", ValueType(t), " ", S(i), " = ",
                         f ? absl::StrCat("static_cast<", ValueType(t), ">(", acc, "_h)")
                           : absl::StrCat("kiln_rt::Wrap<int32_t>(static_cast<uint64_t>(", acc, "_h))"),
                         ";"));
  }

  const LoopProgram& p_;
  const VecAnalysis& a_;
  const Kernel& k_;
  const VecPlan& plan_;
  Writer& w_;
  // Per program buffer (not a copy: one per kernel made emission quadratic).
  const std::vector<std::string>& params_;
  std::vector<int> pos_of_var_;
  std::vector<int> level_;
};

}  // namespace

EmitOptions EmitOptionsForIsa(const isa::VecIsa& isa) {
  EmitOptions o;
  o.parallel_grain = isa.parallel_grain;
  return o;
}

absl::StatusOr<EmittedProgram> EmitCpp(const LoopProgram& program, const EmitOptions& options) {
  if (options.kernels_per_unit < 1 || options.units < 0) {
    return absl::InvalidArgumentError(
        "EmitOptions::kernels_per_unit must be >= 1 and EmitOptions::units >= 0");
  }
  int per_unit = options.kernels_per_unit;
  if (options.units > 0) {
    const int loop_kernels = static_cast<int>(std::count_if(
        program.kernels.begin(), program.kernels.end(),
        [](const Kernel& k) { return k.kind == Kernel::Kind::kLoop; }));
    per_unit = std::max(1, (loop_kernels + options.units - 1) / options.units);
  }
  if (options.verify) {
    absl::Status st = ir::loop::VerifyProgram(program);
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("loop program fails verification: ", st.message()));
    }
  }
  for (const Buffer& b : program.buffers) {
    if (!b.StorageSize().has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer '", NamePart(b.name), "' has no valid storage size"));
    }
  }
  const std::string prefix = SanitizeIdentifier(options.symbol_prefix);
  const std::string unit_prefix = NamePart(options.unit_prefix);

  EmittedProgram out;
  struct Unit {
    std::string name;
    Writer body;       // inside HWY_NAMESPACE
    std::string entries;  // extern "C"
    bool vector = false;
  };
  std::vector<Unit> units;
  bool has_extern = false;
  int in_unit = per_unit;
  // Each kernel's buffer parameter names by buffer index (empty for the
  // buffers it does not use); the entries of the last kernel's buffers.
  std::vector<std::string> param_names(program.buffers.size());
  std::vector<int32_t> last_used;

  for (size_t ki = 0; ki < program.kernels.size(); ++ki) {
    const Kernel& k = program.kernels[ki];
    if (k.kind == Kernel::Kind::kExtern) {
      out.skipped_extern_kernels.push_back(static_cast<int>(ki));
      has_extern = true;
      continue;
    }
    if (in_unit >= per_unit) {
      units.emplace_back();
      units.back().name = absl::StrCat(unit_prefix, "_", units.size() - 1);
      in_unit = 0;
    }
    ++in_unit;
    Unit& u = units.back();

    VecCheckOptions check;
    check.vectorize = options.vectorize;
    check.parallel_grain = options.parallel_grain;
    const VecPlan plan = CheckVectorization(program, static_cast<int>(ki), check);
    EmittedKernel ek;
    ek.kernel_index = static_cast<int>(ki);
    ek.name = k.name;
    ek.unit = u.name;
    ek.vec = plan.status;
    ek.ops = plan.ops;
    ek.parallel = plan.parallel_pos >= 0;
    const std::string fn = absl::StrCat("k", ki, "_", NamePart(k.name));
    ek.symbol = absl::StrCat(prefix, fn);

    // The kernel's buffers in increasing order, `param_names` set for them
    // only (per kernel work over every buffer of the program made emission
    // quadratic in the kernel count).
    std::vector<int32_t> used;
    absl::flat_hash_set<int32_t> stored;
    for (const Op& op : k.body) {
      if (op.is_load() || op.is_store()) used.push_back(op.buffer);
      if (op.is_store()) stored.insert(op.buffer);
    }
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    for (int32_t b : last_used) param_names[b].clear();
    last_used = used;
    std::vector<std::string> params, casts;
    for (int32_t b : used) {
      const Buffer& buf = program.buffers[b];
      param_names[b] = absl::StrCat("b", b, "_", NamePart(buf.name));
      const std::string type =
          absl::StrCat(stored.contains(b) ? "" : "const ", StorageType(buf.dtype), "*");
      params.push_back(absl::StrCat(type, " __restrict ", param_names[b]));
      casts.push_back(absl::StrCat("static_cast<", type, ">(args[", ek.buffer_args.size(), "])"));
      ek.buffer_args.push_back(static_cast<int32_t>(b));
      ek.buffer_names.push_back(buf.name);
    }

    const bool vector = plan.HasVectorCode();
    u.vector |= vector;
    Writer& w = u.body;
    w.Line(absl::StrCat("// kernel ", ki, ": ", ir::loop::VecKindName(plan.status.kind),
                        plan.parallel_pos >= 0 ? ", parallel" : ""));
    w.Open(absl::StrCat("static int ", fn, "(", absl::StrJoin(params, ", "), ")"));
    w.Line("int kiln_err = 0;");
    if (vector && plan.analysis.f64) {
      // f64 lanes (every value of the kernel is f64): di is unused.
      w.Line("const hn::ScalableTag<double> df;");
      w.Line("const hn::RebindToSigned<decltype(df)> di;");
      w.Line("const int64_t kL = static_cast<int64_t>(hn::Lanes(df));");
      w.Line("(void)di;");
      w.Line("(void)kL;");
    } else if (vector) {
      w.Line("const hn::ScalableTag<float> df;");
      w.Line("const hn::RebindToSigned<decltype(df)> di;");
      w.Line("const int64_t kL = static_cast<int64_t>(hn::Lanes(df));");
      w.Line("(void)di;");
      w.Line("(void)kL;");
    }
    KernelEmitter(program, plan, &w, param_names).EmitBody();
    w.Close();
    w.Line("");

    absl::StrAppend(&u.entries, "extern \"C\" int ", ek.symbol, "(void* const* args) {\n",
                    "  (void)args;\n", "  return kiln_gen::HWY_NAMESPACE::", fn, "(",
                    absl::StrJoin(casts, ", "), ");\n", "}\n\n");
    out.kernels.push_back(std::move(ek));
  }

  if (!has_extern) {
    if (units.empty()) {
      units.emplace_back();
      units.back().name = absl::StrCat(unit_prefix, "_0");
    }
    out.run_symbol = absl::StrCat(prefix, "run");
    std::string& e = units.front().entries;
    for (const EmittedKernel& ek : out.kernels) {
      absl::StrAppend(&e, "extern \"C\" int ", ek.symbol, "(void* const* args);\n");
    }
    absl::StrAppend(&e, "\nextern \"C\" int ", out.run_symbol, "(void* const* buffers) {\n",
                    "  (void)buffers;\n");
    for (const EmittedKernel& ek : out.kernels) {
      std::vector<std::string> args;
      for (int32_t b : ek.buffer_args) args.push_back(absl::StrCat("buffers[", b, "]"));
      absl::StrAppend(&e, "  {\n    void* const args[] = {", args.empty() ? "nullptr" : absl::StrJoin(args, ", "),
                      "};\n    const int rc = ", ek.symbol,
                      "(args);\n    if (rc != 0) return rc;\n  }\n");
    }
    absl::StrAppend(&e, "  return 0;\n}\n");
  }

  const bool lowp = UsesLowPrecision(program);
  for (Unit& u : units) {
    std::string text =
        "// Generated by kiln's C++/Highway emitter (backends/cpp). DO NOT EDIT.\n";
    absl::StrAppend(&text, ScalarPrelude());
    if (lowp) absl::StrAppend(&text, LowPrecisionScalarPrelude());
    absl::StrAppend(&text, "\n#include \"hwy/highway.h\"\n");
    if (u.vector) absl::StrAppend(&text, "#include \"hwy/contrib/math/math-inl.h\"\n");
    absl::StrAppend(&text, "\nHWY_BEFORE_NAMESPACE();\nnamespace kiln_gen {\nnamespace HWY_NAMESPACE {\n",
                    "namespace hn = hwy::HWY_NAMESPACE;\n");
    if (u.vector) absl::StrAppend(&text, VectorPrelude());
    if (u.vector && lowp) absl::StrAppend(&text, LowPrecisionVectorPrelude());
    absl::StrAppend(&text, "\n", u.body.text(), "}  // namespace HWY_NAMESPACE\n",
                    "}  // namespace kiln_gen\nHWY_AFTER_NAMESPACE();\n\n", u.entries);
    out.sources.push_back({u.name, std::move(text)});
  }
  return out;
}

}  // namespace kiln::backends::cpp
