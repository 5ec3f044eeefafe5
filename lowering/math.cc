// File: lowering/math.cc — lowerings of ONNX's math family (onnx/defs/math):
// elementwise arithmetic and activations (one loop kernel per node, broadcast
// inputs read with stride 0), Softmax and friends, Einsum, TopK, CumSum,
// QLinearMatMul, the losses, windows, DFT and STFT as loop kernels; Gemm,
// MatMul and MatMulInteger as extern calls.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"
#include "lowering/elementwise.h"
#include "lowering/kernel_util.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

// ---- Elementwise arithmetic and activations.

LowerFn SimpleBinary(OpCode code) {
  return [code](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
    if (ins.size() != 2) return L.Error("needs two inputs");
    KILN_RETURN_IF_ERROR(RequireSame(L, ins));
    return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                   -> absl::StatusOr<int32_t> {
      return k.Bin(code, v[0], v[1]);
    });
  };
}

// Folds `code` over all inputs left to right (Max, Min, Sum, Mean).
LowerFn Variadic(OpCode code, bool mean) {
  return [code, mean](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
    KILN_RETURN_IF_ERROR(RequireSame(L, ins));
    if (mean) KILN_RETURN_IF_ERROR(RequireFloat(L, ins[0]));
    const DType dt = ins[0].dtype;
    return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                   -> absl::StatusOr<int32_t> {
      int32_t acc = v[0];
      for (size_t i = 1; i < v.size(); ++i) acc = k.Bin(code, acc, v[i]);
      if (mean) {
        acc = k.Bin(OpCode::kDiv, acc,
                    k.Const(dt, static_cast<double>(v.size())));
      }
      return acc;
    });
  };
}

// Evaluates f in f64 (functions whose f32 forms lose precision without
// expm1/log1p, which the loop IR lacks), then rounds back.
int32_t InF64(Emitter& k, int32_t x, DType dt,
              const std::function<int32_t(int32_t)>& f) {
  if (dt == DType::kF64) return f(x);
  return k.Cast(f(k.Cast(x, DType::kF64)), dt);
}

// log(1 + exp(x)), stable for large |x| (x is f64).
int32_t SoftplusF64(Emitter& k, int32_t x) {
  const DType d = DType::kF64;
  const int32_t one = k.Const(d, 1), zero = k.Const(d, 0);
  const int32_t pos = k.Bin(OpCode::kGt, x, zero);
  const int32_t neg_abs = k.Un(OpCode::kNeg, k.Un(OpCode::kAbs, x));
  const int32_t tail =
      k.Un(OpCode::kLog, k.Bin(OpCode::kAdd, one, k.Un(OpCode::kExp, neg_abs)));
  return k.Bin(OpCode::kAdd, k.Sel(pos, x, zero), tail);
}

absl::Status LowerRelu(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) && !ir::IsSigned(x.dtype)) {
    return L.Error("does not accept ", ir::DTypeName(x.dtype));
  }
  return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    return k.Bin(OpCode::kMax, v[0], k.Const(x.dtype, 0));
  });
}

absl::Status LowerPRelu(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand slope, L.Input(1));
  if (slope.dtype != x.dtype) return L.Error("slope dtype differs from X");
  if (L.opset() < 7 && slope.shape.size() == 1 && x.shape.size() >= 2 &&
      slope.shape[0] == x.shape[1] && slope.shape[0] != 1) {
    // Per-channel slope: view it as [C, 1, ..., 1].
    Shape per_channel(x.shape.size() - 1, 1);
    per_channel[0] = slope.shape[0];
    auto inner = slope.index;
    slope.shape = per_channel;
    slope.index = [inner](const Coords& c) { return inner({c[0]}); };
  }
  return Elementwise(L, {x, slope}, [&](Emitter& k, const std::vector<int32_t>& v)
                                        -> absl::StatusOr<int32_t> {
    const int32_t neg = k.Bin(OpCode::kLt, v[0], k.Const(x.dtype, 0));
    return k.Sel(neg, k.Bin(OpCode::kMul, v[1], v[0]), v[0]);
  });
}

absl::Status LowerClip(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  std::vector<Operand> ins = {x};
  int lo = -1, hi = -1;
  if (L.opset() < 11) {
    KILN_RETURN_IF_ERROR(RequireFloat(L, x));
    KILN_ASSIGN_OR_RETURN(float a, n.AttrOr<float>("min", std::numeric_limits<float>::lowest()));
    KILN_ASSIGN_OR_RETURN(float b, n.AttrOr<float>("max", std::numeric_limits<float>::max()));
    Operand ca, cb;
    ca.dtype = cb.dtype = x.dtype;
    ca.splat = a;
    cb.splat = b;
    ins.push_back(ca);
    ins.push_back(cb);
    lo = 1;
    hi = 2;
  } else {
    for (int i = 1; i <= 2; ++i) {
      if (!L.HasInput(i)) continue;
      KILN_ASSIGN_OR_RETURN(Operand bound, L.Input(i));
      if (bound.dtype != x.dtype) return L.Error("bound dtype differs from input");
      if (ir::NumElements(bound.shape) != 1) return L.Error("bounds must be scalars");
      // A one-element bound of any rank is read at its only element.
      auto inner = bound.index;
      const size_t rank = bound.shape.size();
      bound.shape = {};
      bound.index = [inner, rank](const Coords&) {
        return inner(Coords(rank, ir::loop::Const(0)));
      };
      (i == 1 ? lo : hi) = static_cast<int>(ins.size());
      ins.push_back(bound);
    }
  }
  return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    int32_t y = v[0];
    if (lo >= 0) y = k.Sel(k.Bin(OpCode::kLt, y, v[lo]), v[lo], y);
    if (hi >= 0) y = k.Sel(k.Bin(OpCode::kGt, y, v[hi]), v[hi], y);
    return y;
  });
}

absl::Status LowerMod(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(int64_t fmod, n.AttrOr<int64_t>("fmod", 0));
  KILN_ASSIGN_OR_RETURN(Operand a, L.Input(0));
  if (fmod == 0 && ir::IsFloat(a.dtype)) {
    return L.Error("fmod must be 1 for floating-point inputs");
  }
  return SimpleBinary(fmod != 0 ? OpCode::kFmod : OpCode::kMod)(L, n);
}

absl::Status LowerPow(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand b, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand e, L.Input(1));
  const DType bd = b.dtype, ed = e.dtype;
  if (!ir::IsFloat(bd) && bd != DType::kI32 && bd != DType::kI64) {
    return L.Error("does not accept ", ir::DTypeName(bd));
  }
  if (ed == DType::kBool) return L.Error("does not accept a bool exponent");
  // An f32/f16/bf16 base squared (an exponent that is 2 everywhere, as in
  // every exported LayerNorm's variance) is x * x: the square is exact in
  // double (and f16/bf16 squares in f32), so x * x in f32 rounds it once,
  // exactly as the double pow converted back does, and it runs in vector
  // lanes, where pow runs lane by lane.
  const ir::Tensor* exponent = L.ConstantInput(1);
  bool squares = ir::IsFloat(bd) && bd != DType::kF64 && exponent != nullptr &&
                 exponent->num_elements() > 0;
  for (int64_t i = 0; squares && i < exponent->num_elements(); ++i) {
    squares = exponent->GetAsDouble(i) == 2.0;
  }
  return Elementwise(L, {b, e}, [&](Emitter& k, const std::vector<int32_t>& v)
                                    -> absl::StatusOr<int32_t> {
    if (squares) {
      const int32_t x = bd == DType::kF32 ? v[0] : k.Cast(v[0], DType::kF32);
      const int32_t sq = k.Bin(OpCode::kMul, x, x);
      return bd == DType::kF32 ? sq : k.Cast(sq, bd);
    }
    if (ir::IsFloat(bd) || !ir::IsInteger(ed)) {
      // Computed in double like the reference, then converted.
      const int32_t x = k.Cast(v[0], DType::kF64);
      const int32_t y = k.Cast(v[1], DType::kF64);
      return k.Cast(k.Bin(OpCode::kPow, x, y), bd);
    }
    return k.Bin(OpCode::kPow, v[0], ed == bd ? v[1] : k.Cast(v[1], bd));
  });
}

absl::Status LowerExpand(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const Shape in = x.shape, out = L.OutputValue(0).shape;
  absl::StatusOr<Shape> b = ir::BroadcastShapes(in, out);
  if (!b.ok() || *b != out) {
    return L.Error("cannot expand ", ir::ShapeToString(in), " to ",
                   ir::ShapeToString(out));
  }
  SetView(L, 0, x, [in](const Coords& c) { return BroadcastCoords(in, c); });
  return absl::OkStatus();
}

// ---- Softmax, LogSoftmax, Hardmax.

enum class SoftmaxOp { kSoftmax, kLogSoftmax, kHardmax };

LowerFn MakeSoftmax(SoftmaxOp kind) {
  return [kind](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    if (!ir::IsFloat(x.dtype)) return L.Error("needs a float input");
    const bool legacy = L.opset() < 13;
    KILN_ASSIGN_OR_RETURN(int64_t axis_attr,
                          n.AttrOr<int64_t>("axis", legacy ? 1 : -1));
    const size_t rank = x.shape.size();
    std::optional<int64_t> axis = NormalizeAxis(axis_attr, rank);
    if (!axis.has_value()) return L.Error("axis ", axis_attr, " out of range");
    std::vector<int64_t> axes = {*axis};
    if (legacy) {
      for (size_t d = *axis + 1; d < rank; ++d) axes.push_back(d);
    }
    std::vector<int64_t> red;
    for (int64_t a : axes) red.push_back(x.shape[a]);
    const DType dt = x.dtype;
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(x.shape, red);
    const Coords it = k->IterCoords();
    Coords rc = it;
    for (size_t j = 0; j < axes.size(); ++j) rc[axes[j]] = k->r(j);
    auto& b = k->b();
    int32_t result;
    if (kind == SoftmaxOp::kHardmax) {
      KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, rc));
      const int32_t arg = b.Reduce(ReduceKind::kArgMax, v);
      Shape red_shape(red.begin(), red.end());
      Coords mine;
      for (int64_t a : axes) mine.push_back(it[a]);
      const int32_t pos = b.Index(k->Simplify(LinearIndex(red_shape, mine)));
      result = k->Sel(k->Bin(OpCode::kEq, pos, arg), k->Const(dt, 1),
                      k->Const(dt, 0));
    } else {
      KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, rc));
      const int32_t m = b.Reduce(ReduceKind::kMax, v);
      KILN_ASSIGN_OR_RETURN(int32_t v2, k->Load(x, rc));
      const int32_t s = b.Reduce(
          ReduceKind::kSum, k->Un(OpCode::kExp, k->Bin(OpCode::kSub, v2, m)));
      KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
      const int32_t shifted = k->Bin(OpCode::kSub, xi, m);
      result = kind == SoftmaxOp::kSoftmax
                   ? k->Bin(OpCode::kDiv, k->Un(OpCode::kExp, shifted), s)
                   : k->Bin(OpCode::kSub, shifted, k->Un(OpCode::kLog, s));
    }
    k->Store(buffer, x.shape, it, result);
    return absl::OkStatus();
  };
}

// ---- Einsum (any equation over static shapes: one reduction kernel whose
// body multiplies the operands' loads) and QLinearMatMul.

// Einsum labels: letters 0..51, the dims "..." stands for 52 onwards.
constexpr int kNumLetters = 52;

struct EinsumTerm {
  std::vector<int> labels;  // -1 marks where "..." stands
  bool has_ellipsis = false;
};

absl::StatusOr<EinsumTerm> ParseTerm(Lowerer& L, absl::string_view s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch >= 'A' && ch <= 'Z') {
      t.labels.push_back(ch - 'A');
    } else if (ch >= 'a' && ch <= 'z') {
      t.labels.push_back(26 + ch - 'a');
    } else if (ch == '.' && s.substr(i, 3) == "..." && !t.has_ellipsis) {
      t.has_ellipsis = true;
      t.labels.push_back(-1);
      i += 2;
    } else {
      return L.Error("bad einsum term (character ", static_cast<int>(ch), ")");
    }
  }
  return t;
}

// "..." expanded to `count` labels, right-aligned to `total`.
std::vector<int> ExpandEllipsis(const EinsumTerm& t, int count, int total) {
  std::vector<int> out;
  for (int l : t.labels) {
    if (l >= 0) {
      out.push_back(l);
      continue;
    }
    for (int j = 0; j < count; ++j) out.push_back(kNumLetters + total - count + j);
  }
  return out;
}

absl::Status LowerEinsum(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(std::string eq, n.Attr<std::string>("equation"));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  std::vector<EinsumTerm> terms;
  for (absl::string_view part : absl::StrSplit(eq.substr(0, arrow), ',')) {
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseTerm(L, part));
    terms.push_back(std::move(t));
  }
  if (n.inputs.empty()) return L.Error("needs at least one input");
  if (terms.size() != n.inputs.size()) {
    return L.Error("equation has ", terms.size(), " operands, node has ",
                   n.inputs.size(), " inputs");
  }
  std::vector<Operand> in;
  int ellipsis_rank = 0;
  std::vector<int> ellipsis_count(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(static_cast<int>(i)));
    if (!in.empty() && op.dtype != in.front().dtype) {
      return L.Error("operands differ in dtype");
    }
    if (op.dtype == DType::kBool) return L.Error("does not accept bool inputs");
    const int letters = static_cast<int>(terms[i].labels.size()) -
                        (terms[i].has_ellipsis ? 1 : 0);
    const int extra = static_cast<int>(op.shape.size()) - letters;
    if (extra < 0 || (extra > 0 && !terms[i].has_ellipsis)) {
      return L.Error("operand ", i, " ", ir::ShapeToString(op.shape),
                     " does not match its einsum term");
    }
    ellipsis_count[i] = extra;
    ellipsis_rank = std::max(ellipsis_rank, extra);
    in.push_back(std::move(op));
  }
  const int num_labels = kNumLetters + ellipsis_rank;
  std::vector<int64_t> size(num_labels, -1);
  std::vector<int> occurrences(num_labels, 0);
  std::vector<std::vector<int>> op_labels(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    op_labels[i] = ExpandEllipsis(terms[i], ellipsis_count[i], ellipsis_rank);
    for (size_t d = 0; d < op_labels[i].size(); ++d) {
      const int l = op_labels[i][d];
      const int64_t dim = in[i].shape[d];
      ++occurrences[l];
      if (size[l] == -1 || (l >= kNumLetters && size[l] == 1)) {
        size[l] = dim;
      } else if (dim != size[l] && !(l >= kNumLetters && dim == 1)) {
        return L.Error("einsum label sizes disagree (", size[l], " vs ", dim,
                       ") in operand ", i);
      }
    }
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseTerm(L, eq.substr(arrow + 2)));
    out_labels = ExpandEllipsis(t, ellipsis_rank, ellipsis_rank);
    std::vector<bool> seen(num_labels, false);
    for (int l : out_labels) {
      if (size[l] == -1 || seen[l]) return L.Error("bad einsum output term");
      seen[l] = true;
    }
  } else {
    for (int j = 0; j < ellipsis_rank; ++j) out_labels.push_back(kNumLetters + j);
    for (int l = 0; l < kNumLetters; ++l) {
      if (occurrences[l] == 1) out_labels.push_back(l);
    }
  }
  std::vector<int> sum_labels;
  for (int l = 0; l < num_labels; ++l) {
    if (size[l] != -1 &&
        std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) {
      sum_labels.push_back(l);
    }
  }
  Shape out_dims;
  std::vector<int64_t> sum_dims;
  for (int l : out_labels) out_dims.push_back(size[l]);
  for (int l : sum_labels) sum_dims.push_back(size[l]);
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != out_dims || out.dtype != in[0].dtype) {
    return L.Error("output ", ir::DTypeName(out.dtype), ir::ShapeToString(out.shape),
                   " differs from the equation's ", ir::DTypeName(in[0].dtype),
                   ir::ShapeToString(out_dims));
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out_dims, sum_dims);
  std::vector<IndexExpr> label_var(num_labels);
  for (size_t j = 0; j < out_labels.size(); ++j) label_var[out_labels[j]] = k->i(j);
  for (size_t j = 0; j < sum_labels.size(); ++j) label_var[sum_labels[j]] = k->r(j);
  int32_t prod = -1;
  for (size_t i = 0; i < in.size(); ++i) {
    Coords c;
    for (size_t d = 0; d < op_labels[i].size(); ++d) {
      c.push_back(in[i].shape[d] == 1 ? Const(0) : label_var[op_labels[i][d]]);
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(in[i], c));
    prod = prod < 0 ? v : k->Bin(OpCode::kMul, prod, v);
  }
  if (!sum_dims.empty()) prod = k->b().Reduce(ReduceKind::kSum, prod);
  k->Store(buffer, out_dims, k->IterCoords(), prod);
  return absl::OkStatus();
}

// QLinearMatMul (per-tensor parameters): an i64 dot product over K of the
// zero-point-shifted operands in one reduction kernel, requantized in f64
// as the reference does. A loop-IR GEMM: right for the small matrices
// quantized models feed it outside oneDNN, not fast.
absl::Status LowerQLinearMatMul(Lowerer& L, const ir::Node& n) {
  std::vector<Operand> in;
  for (int i = 0; i < 8; ++i) {
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    in.push_back(op);
  }
  const Operand &a = in[0], &b = in[3];
  const DType y_type = L.OutputValue(0).dtype;
  if (!IsQuantType(a.dtype) || !IsQuantType(b.dtype) || !IsQuantType(y_type)) {
    return L.Error("a, b and y must be u8 or i8, got ", ir::DTypeName(a.dtype), ", ",
                   ir::DTypeName(b.dtype), " and ", ir::DTypeName(y_type));
  }
  const int64_t cols = b.shape.size() >= 2 ? b.shape.back() : 0;
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 1, "a_scale", DType::kInvalid));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 2, "a_zero_point", a.dtype));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 4, "b_scale", DType::kInvalid, cols));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 5, "b_zero_point", b.dtype, cols));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 6, "y_scale", DType::kInvalid));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 7, "y_zero_point", y_type));
  // Constant parameters and a constant 2-D B, or a runtime B of rank >= 2
  // (batched like A): the library's int8 matmul when it runs the call
  // (LoweringOptions::library_call asks it; oneDNN without VNNI refuses
  // full-range weights, oneDNN 2.6 a runtime u8 B), else the loop kernel below.
  const bool constant_b = L.ConstantInput(3) != nullptr;
  bool library = a.shape.size() >= 2 && (constant_b ? b.shape.size() == 2 : b.shape.size() >= 2);
  for (int i : {1, 2, 4, 5, 6, 7}) library = library && L.ConstantInput(i) != nullptr;
  if (library) {
    KILN_ASSIGN_OR_RETURN(const bool taken, L.TryLibraryCall(n));
    if (taken) return absl::OkStatus();
  }
  for (int i : {1, 2, 4, 5, 6, 7}) {
    if (ir::NumElements(in[i].shape) != 1) {
      return L.Unimplemented("per-axis parameter (input ", i, ")");
    }
  }
  for (const Operand* q : {&a, &b}) {
    if (q->dtype != DType::kU8 && q->dtype != DType::kI8) return L.Error("operands must be u8/i8");
  }
  if (in[2].dtype != a.dtype || in[5].dtype != b.dtype) {
    return L.Error("zero points must have their operand's dtype");
  }
  if (a.shape.empty() || b.shape.empty()) return L.Error("operands must have rank >= 1");
  Shape ash = a.shape, bsh = b.shape;
  if (ash.size() == 1) ash.insert(ash.begin(), 1);
  if (bsh.size() == 1) bsh.push_back(1);
  const int64_t m = ash[ash.size() - 2], kk = ash.back(), nn = bsh.back();
  if (bsh[bsh.size() - 2] != kk) return L.Error("inner dimensions differ");
  const Shape abatch(ash.begin(), ash.end() - 2), bbatch(bsh.begin(), bsh.end() - 2);
  absl::StatusOr<Shape> batch = ir::BroadcastShapes(abatch, bbatch);
  if (!batch.ok()) return L.Error(batch.status().message());
  Shape full = *batch;
  full.push_back(m);
  full.push_back(nn);
  Shape want = *batch;
  if (a.shape.size() > 1) want.push_back(m);
  if (b.shape.size() > 1) want.push_back(nn);
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != want || out.dtype != in[7].dtype) {
    return L.Error("output must be ", ir::DTypeName(in[7].dtype), ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(full) == 0) return absl::OkStatus();
  auto k = L.NewKernel(full, {kk});
  const Coords it = k->IterCoords();
  const size_t nb = batch->size();
  const Coords bc(it.begin(), it.begin() + nb);
  // A 1-D operand is the K vector itself.
  Coords ac = {k->r(0)}, bcs = {k->r(0)};
  if (a.shape.size() > 1) {
    ac = BroadcastCoords(abatch, bc);
    ac.push_back(it[nb]);
    ac.push_back(k->r(0));
  }
  if (b.shape.size() > 1) {
    bcs = BroadcastCoords(bbatch, bc);
    bcs.push_back(k->r(0));
    bcs.push_back(it[nb + 1]);
  }
  auto scalar = [&](const Operand& op) {
    return k->Load(op, Coords(op.shape.size(), Const(0)));
  };
  KILN_ASSIGN_OR_RETURN(int32_t av, k->Load(a, ac));
  KILN_ASSIGN_OR_RETURN(int32_t bv, k->Load(b, bcs));
  KILN_ASSIGN_OR_RETURN(int32_t az, scalar(in[2]));
  KILN_ASSIGN_OR_RETURN(int32_t bz, scalar(in[5]));
  auto wide = [&](int32_t v) { return k->Cast(v, DType::kI64); };
  const int32_t prod = k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, wide(av), wide(az)),
                              k->Bin(OpCode::kSub, wide(bv), wide(bz)));
  const int32_t acc = k->b().Reduce(ReduceKind::kSum, prod);
  auto f64 = [&](int32_t v) { return k->Cast(v, DType::kF64); };
  KILN_ASSIGN_OR_RETURN(int32_t as, scalar(in[1]));
  KILN_ASSIGN_OR_RETURN(int32_t bs, scalar(in[4]));
  KILN_ASSIGN_OR_RETURN(int32_t ys, scalar(in[6]));
  KILN_ASSIGN_OR_RETURN(int32_t yz, scalar(in[7]));
  const int32_t scale = k->Bin(OpCode::kDiv, k->Bin(OpCode::kMul, f64(as), f64(bs)), f64(ys));
  const auto [lo, hi] = QuantRange(out.dtype);
  int32_t y = k->Un(OpCode::kRound,
                    k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, f64(acc), scale), f64(yz)));
  y = k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, y, k->Const(DType::kF64, lo)),
             k->Const(DType::kF64, hi));
  k->Store(buffer, full, it, k->Cast(y, out.dtype));
  return absl::OkStatus();
}

// MatMulInteger(A, B, a_zero_point, b_zero_point) -> i32: A and B u8/i8,
// each zero point of its tensor's type, A's per tensor or per row (M), B's
// per tensor or per column (N).
absl::Status CheckMatMulInteger(Lowerer& L, const ir::Node&) {
  KILN_ASSIGN_OR_RETURN(Operand a, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand b, L.Input(1));
  if (!IsQuantType(a.dtype) || !IsQuantType(b.dtype)) {
    return L.Error("A and B must be u8 or i8, got ", ir::DTypeName(a.dtype), " and ",
                   ir::DTypeName(b.dtype));
  }
  const int64_t rows = a.shape.size() >= 2 ? a.shape[a.shape.size() - 2] : 0;
  const int64_t cols = b.shape.size() >= 2 ? b.shape.back() : 0;
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 2, "a_zero_point", a.dtype, rows));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 3, "b_zero_point", b.dtype, cols));
  if (L.OutputValue(0).dtype != DType::kI32) return L.Error("output must be i32");
  return absl::OkStatus();
}

// ---- TopK.

// a ranks above b (NaN greatest).
int32_t Greater(Emitter& k, int32_t a, int32_t b, bool is_float) {
  const int32_t gt = k.Bin(OpCode::kGt, a, b);
  if (!is_float) return gt;
  return k.Bin(OpCode::kOr, gt,
               k.Bin(OpCode::kAnd, k.Un(OpCode::kIsNan, a),
                     k.Un(OpCode::kNot, k.Un(OpCode::kIsNan, b))));
}

absl::Status LowerTopK(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t largest, n.AttrOr<int64_t>("largest", 1));
  if (x.dtype == DType::kBool) return L.Error("bool input is not supported");
  std::optional<int64_t> axis_opt = NormalizeAxis(axis_attr, x.shape.size());
  if (!axis_opt.has_value()) return L.Error("axis ", axis_attr, " out of range");
  const int64_t axis = *axis_opt, len = x.shape[axis];
  const ir::Value& values = L.OutputValue(0);
  const int64_t kk = values.shape.size() == x.shape.size() ? values.shape[axis] : -1;
  int64_t k_given = kk;
  std::optional<Operand> runtime_k;  // K given at run time: checked in the kernel
  if (L.opset() >= 10 && L.HasInput(1) && L.ConstantInput(1) == nullptr) {
    KILN_ASSIGN_OR_RETURN(Operand kop, L.Input(1));
    if (!ir::IsInteger(kop.dtype) || ir::NumElements(kop.shape) != 1) {
      return L.Error("K must be one integer");
    }
    runtime_k = kop;
  } else if (L.opset() >= 10) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kv, L.ConstantInts(1, "K"));
    if (kv.size() != 1) return L.Error("K must hold exactly one value");
    k_given = kv[0];
  } else {
    KILN_ASSIGN_OR_RETURN(k_given, n.Attr<int64_t>("k"));
  }
  Shape want = x.shape;
  if (k_given < 0 || k_given > len) {
    return L.Error("k = ", k_given, " is out of range for an axis of size ", len);
  }
  want[axis] = k_given;
  if (values.shape != want || (L.HasOutput(1) && L.OutputValue(1).shape != want)) {
    return L.Error("outputs must have shape ", ir::ShapeToString(want));
  }
  const bool fl = ir::IsFloat(x.dtype);
  const int32_t vbuf = NewOutput(L, 0);
  const int32_t ibuf = L.HasOutput(1) ? NewOutput(L, 1) : -1;
  if (ir::NumElements(want) == 0) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(int32_t ranks, ScratchBuffer(L, DType::kI64, x.shape));
  {
    auto k = L.NewKernel(x.shape, {len});
    const Coords it = k->IterCoords();
    Coords rc = it;
    rc[axis] = k->r(0);
    KILN_ASSIGN_OR_RETURN(int32_t mine, k->Load(x, it));
    KILN_ASSIGN_OR_RETURN(int32_t other, k->Load(x, rc));
    const int32_t better = largest != 0 ? Greater(*k, other, mine, fl)
                                        : Greater(*k, mine, other, fl);
    const int32_t worse = largest != 0 ? Greater(*k, mine, other, fl)
                                       : Greater(*k, other, mine, fl);
    const int32_t tie_before = k->Bin(
        OpCode::kAnd, k->Un(OpCode::kNot, worse),
        k->Bin(OpCode::kLt, k->b().Index(k->r(0)), k->b().Index(it[axis])));
    const int32_t before = k->Bin(OpCode::kOr, better, tie_before);
    const int32_t rank = k->b().Reduce(
        ReduceKind::kSum,
        k->Sel(before, k->Const(DType::kI64, 1), k->Const(DType::kI64, 0)));
    k->Store(ranks, x.shape, it, rank);
  }
  auto k = L.NewKernel(want, {len});
  const Coords it = k->IterCoords();
  Coords rc = it;
  rc[axis] = k->r(0);
  const int32_t rank = k->b().Load(ranks, RowMajor(*k, x.shape, rc));
  int32_t j = k->b().Index(it[axis]);
  if (runtime_k.has_value()) {
    const Coords zero(runtime_k->shape.size(), Const(0));
    KILN_ASSIGN_OR_RETURN(int32_t given, k->Load(*runtime_k, zero));
    if (k->DTypeOf(given) != DType::kI64) given = k->Cast(given, DType::kI64);
    const int32_t ok = k->Bin(OpCode::kEq, given, k->Const(DType::kI64, k_given));
    KILN_ASSIGN_OR_RETURN(int32_t checked, LoadIfValid(L, *k, *runtime_k, zero, ok));
    // j + (checked - k): j itself once K is confirmed.
    if (k->DTypeOf(checked) != DType::kI64) checked = k->Cast(checked, DType::kI64);
    j = k->Bin(OpCode::kAdd, j, k->Bin(OpCode::kSub, checked, k->Const(DType::kI64, k_given)));
  }
  const int32_t hit = k->Bin(OpCode::kEq, rank, j);
  const int32_t pos = k->b().Reduce(
      ReduceKind::kSum,
      k->Sel(hit, k->b().Index(k->r(0)), k->Const(DType::kI64, 0)));
  std::vector<int64_t> extents = Extents(want);
  extents.push_back(len);
  KILN_ASSIGN_OR_RETURN(int32_t v, LoadIndirectAlong(L, *k, x, it, axis, extents, pos));
  k->Store(vbuf, want, it, v);
  if (ibuf >= 0) k->Store(ibuf, want, it, pos);
  return absl::OkStatus();
}

// ---- CumSum.
//
// Axis known at lowering time: an axis of at most kTriangularMaxLen elements
// is a reduction over the triangular range r <= i (r < i exclusive, mirrored
// for reverse): O(n * len) work, but parallel and vectorized. A longer axis
// is a sequential scan: one kernel over (outer, axis, inner) in row-major
// order that adds each element to the running sum it stored at the previous
// position (floats accumulate in an f64 scratch buffer, integers in i64, as
// the reference interpreter does), O(n), scalar, parallel over `outer`
// (the emitter's disjointness rule). An axis given at run time is the
// triangular form for every candidate axis, selected by the axis value.
constexpr int64_t kTriangularMaxLen = 64;
// Work limit of the run-time-axis form (rank x elements x longest axis).
constexpr double kMaxRuntimeAxisWork = 1e9;

// A fresh intermediate buffer named `stem` (made unique), unlike
// ScratchBuffer filled by nothing: the caller's kernel writes all of it.
absl::StatusOr<int32_t> NamedScratchBuffer(Lowerer& L, const std::string& stem,
                                           DType dtype, const Shape& shape) {
  std::string name = stem;
  for (int s = 1; L.program().FindBuffer(name) >= 0; ++s) name = absl::StrCat(stem, "_", s);
  return L.program().AddBuffer(name, dtype, shape, ir::loop::BufferKind::kIntermediate);
}

absl::Status LowerCumSumScan(Lowerer& L, const Operand& x, int64_t axis, bool exclusive,
                             bool reverse) {
  const int64_t len = x.shape[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const Shape outer_shape(x.shape.begin(), x.shape.begin() + axis);
  const Shape inner_shape(x.shape.begin() + axis + 1, x.shape.end());
  const DType acc_t = ir::IsFloat(x.dtype) ? DType::kF64 : DType::kI64;
  const int32_t out = L.OutputBuffer(0);
  auto k = L.NewKernel({outer, len, inner});
  KILN_ASSIGN_OR_RETURN(
      int32_t acc, NamedScratchBuffer(L, absl::StrCat(k->b().kernel().name, "_acc"),
                                      acc_t, {outer, len, inner}));
  const IndexExpr pos = reverse ? Const(len - 1) - k->i(1) : k->i(1);
  const IndexExpr prev = reverse ? ir::loop::Min(pos + 1, len - 1) : ir::loop::Max(pos - 1, 0);
  Coords xc = Delinearize(outer_shape, k->i(0));
  if (outer_shape.empty()) xc.clear();
  xc.push_back(pos);
  Coords inner_c = Delinearize(inner_shape, k->i(2));
  if (inner_shape.empty()) inner_c.clear();
  xc.insert(xc.end(), inner_c.begin(), inner_c.end());
  KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(x, xc));
  const int32_t v = k->Cast(xv, acc_t);
  const int32_t before = k->b().Load(acc, k->Simplify(k->i(0) * (len * inner) + prev * inner + k->i(2)));
  const int32_t first = k->Bin(OpCode::kEq, k->b().Index(k->i(1)), k->Const(DType::kI64, 0));
  const int32_t run = k->Sel(first, k->Const(acc_t, 0), before);
  const int32_t incl = k->Bin(OpCode::kAdd, run, v);
  const IndexExpr at = k->Simplify(k->i(0) * (len * inner) + pos * inner + k->i(2));
  k->b().Store(acc, at, incl);
  k->b().Store(out, at, k->Cast(exclusive ? run : incl, x.dtype));
  return absl::OkStatus();
}

absl::Status LowerCumSum(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand axis_op, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t exclusive, n.AttrOr<int64_t>("exclusive", 0));
  KILN_ASSIGN_OR_RETURN(int64_t reverse, n.AttrOr<int64_t>("reverse", 0));
  const DType dt = x.dtype;
  if (!ir::IsFloat(dt) && dt != DType::kI32 && dt != DType::kI64) {
    return L.Error("input must be f16, f32, f64, i32 or i64");
  }
  if (ir::NumElements(axis_op.shape) != 1 || !ir::IsInteger(axis_op.dtype)) {
    return L.Error("axis must hold exactly one integer");
  }
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return L.Error("input must have rank >= 1");
  if (L.OutputValue(0).shape != x.shape) return L.Error("output shape differs from the input's");
  std::vector<int64_t> candidates;
  if (const ir::Tensor* t = L.ConstantInput(1)) {
    const int64_t a = t->GetAsInt64(0);
    std::optional<int64_t> norm = NormalizeAxis(a, rank);
    if (!norm.has_value()) return L.Error("axis ", a, " out of range");
    candidates.push_back(*norm);
  } else {
    for (int64_t d = 0; d < rank; ++d) candidates.push_back(d);
  }
  if (ir::NumElements(x.shape) == 0) {
    L.SetOutputConstant(0, ir::Tensor(x.dtype, x.shape));
    return absl::OkStatus();
  }
  if (candidates.size() == 1 && x.shape[candidates[0]] > kTriangularMaxLen) {
    return LowerCumSumScan(L, x, candidates[0], exclusive != 0, reverse != 0);
  }
  int64_t longest = 1;
  for (int64_t a : candidates) longest = std::max(longest, x.shape[a]);
  const double work = static_cast<double>(candidates.size()) *
                      static_cast<double>(ir::NumElements(x.shape)) * static_cast<double>(longest);
  if (work > kMaxRuntimeAxisWork) {
    return L.Unimplemented("CumSum with a run-time axis over ", ir::ShapeToString(x.shape),
                           " needs ", work, " operations; give the axis as a constant");
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape, {longest});
  const Coords it = k->IterCoords();
  const int32_t zero = k->Const(dt, 0);
  const int32_t r = k->b().Index(k->r(0));
  int32_t result = -1, axis_value = -1, valid = -1;
  if (candidates.size() > 1) {
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(axis_op, Coords(axis_op.shape.size(), Const(0))));
    axis_value = axis_op.dtype == DType::kI64 ? v : k->Cast(v, DType::kI64);
  }
  for (int64_t a : candidates) {
    const int64_t len = x.shape[a];
    Coords c = it;
    c[a] = ir::loop::Min(k->r(0), std::max<int64_t>(len - 1, 0));
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, c));
    const int32_t pos = k->b().Index(it[a]);
    // Forward: r <= i (r < i exclusive); reverse: r >= i (r > i).
    const OpCode cmp = reverse != 0 ? (exclusive != 0 ? OpCode::kGt : OpCode::kGe)
                                    : (exclusive != 0 ? OpCode::kLt : OpCode::kLe);
    int32_t take = k->Bin(cmp, r, pos);
    if (len < longest) {
      take = k->Bin(OpCode::kAnd, take,
                    k->Bin(OpCode::kLt, r, k->Const(DType::kI64, static_cast<double>(len))));
    }
    const int32_t sum = k->b().Reduce(ReduceKind::kSum, k->Sel(take, v, zero));
    if (axis_value < 0) {
      result = sum;
      continue;
    }
    const int32_t named = k->Bin(
        OpCode::kOr,
        k->Bin(OpCode::kEq, axis_value, k->Const(DType::kI64, static_cast<double>(a))),
        k->Bin(OpCode::kEq, axis_value, k->Const(DType::kI64, static_cast<double>(a - rank))));
    result = result < 0 ? k->Sel(named, sum, zero) : k->Sel(named, sum, result);
    valid = valid < 0 ? named : k->Bin(OpCode::kOr, valid, named);
  }
  if (axis_value >= 0 && !axis_op.splat.has_value()) {
    // An axis outside [-rank, rank) is an index error: a checked read of the
    // axis value itself at position 0 (valid) or 1 (extent 1: out of range).
    KILN_ASSIGN_OR_RETURN(int32_t axis_buf, L.BufferOf(axis_op.root));
    const IndexExpr at = k->Simplify(axis_op.index(Coords(axis_op.shape.size(), Const(0))));
    k->b().LoadIndirect(axis_buf, at,
                        k->Sel(valid, k->Const(DType::kI64, 0), k->Const(DType::kI64, 1)), 1, 0);
  }
  k->Store(buffer, x.shape, it, result);
  return absl::OkStatus();
}

// ---- NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (all
// reductions, class weights, ignore_index, any number of spatial dims): the
// class is read with a checked load_indirect, the log-softmax is a
// max/sum-exp reduction over the class axis.

enum class Reduction { kNone, kSum, kMean };

// What both losses share: attributes, the target and the optional weight.
struct LossSpec {
  Operand x;       // scores (SCE) or log-probabilities (NLL): [N, C, d...]
  Operand target;  // [N, d...]
  std::optional<Operand> weight;  // [C]
  Reduction reduction = Reduction::kMean;
  std::optional<int64_t> ignore_index;
  int64_t classes = 0;
  Shape target_shape;
};

absl::StatusOr<LossSpec> ReadLossSpec(Lowerer& L, const ir::Node& n) {
  LossSpec s;
  KILN_ASSIGN_OR_RETURN(s.x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(s.target, L.Input(1));
  if (!ir::IsFloat(s.x.dtype)) return L.Error("input must be a float tensor");
  if (s.x.shape.size() < 2) {
    return L.Error("input must have rank >= 2 (N, C, ...), got ",
                   ir::ShapeToString(s.x.shape));
  }
  if (!ir::IsInteger(s.target.dtype)) return L.Error("target must be integers");
  s.classes = s.x.shape[1];
  s.target_shape = s.x.shape;
  s.target_shape.erase(s.target_shape.begin() + 1);
  if (s.target.shape != s.target_shape) {
    return L.Error("target has shape ", ir::ShapeToString(s.target.shape),
                   ", expected ", ir::ShapeToString(s.target_shape));
  }
  if (L.HasInput(2)) {
    KILN_ASSIGN_OR_RETURN(Operand w, L.Input(2));
    if (w.shape != Shape{s.classes} || w.dtype != s.x.dtype) {
      return L.Error("weight is ", ir::DTypeName(w.dtype),
                     ir::ShapeToString(w.shape), ", expected ",
                     ir::DTypeName(s.x.dtype), "[", s.classes, "]");
    }
    s.weight = w;
  }
  KILN_ASSIGN_OR_RETURN(std::string reduction,
                        n.AttrOr<std::string>("reduction", "mean"));
  if (reduction == "none") {
    s.reduction = Reduction::kNone;
  } else if (reduction == "sum") {
    s.reduction = Reduction::kSum;
  } else if (reduction == "mean") {
    s.reduction = Reduction::kMean;
  } else {
    return L.Error("unknown reduction '", reduction, "'");
  }
  if (n.HasAttr("ignore_index")) {
    KILN_ASSIGN_OR_RETURN(int64_t ii, n.Attr<int64_t>("ignore_index"));
    s.ignore_index = ii;
  }
  const ir::Value& out = L.OutputValue(0);
  const Shape want = s.reduction == Reduction::kNone ? s.target_shape : Shape{};
  if (out.shape != want || out.dtype != s.x.dtype) {
    return L.Error("output is ", ir::DTypeName(out.dtype),
                   ir::ShapeToString(out.shape), ", expected ",
                   ir::DTypeName(s.x.dtype), ir::ShapeToString(want));
  }
  if (s.classes == 0 && ir::NumElements(s.target_shape) > 0) {
    return L.Error("has no classes (C = 0)");
  }
  return s;
}

// Per target element at coordinates `tc`: whether it is ignored, the class
// to read (0 when ignored; an invalid class fails the read) and its weight
// (0 when ignored).
struct TargetRead {
  int32_t ignored = -1;  // bool, or -1 without ignore_index
  int32_t cls = -1;      // i64
  int32_t weight = -1;   // x dtype
};

absl::StatusOr<TargetRead> ReadTarget(Lowerer& L, Emitter& k, const LossSpec& s,
                                      const Coords& tc,
                                      const std::vector<int64_t>& extents,
                                      bool need_class = true) {
  TargetRead t;
  const DType dt = s.x.dtype;
  t.weight = k.Const(dt, 1);
  // No op is created that nothing uses: the C++ emitter places an unused
  // reduction-varying op outside the reduction loop.
  if (!need_class && !s.weight.has_value() && !s.ignore_index.has_value()) return t;
  KILN_ASSIGN_OR_RETURN(int32_t raw, k.Load(s.target, tc));
  if (k.DTypeOf(raw) != DType::kI64) raw = k.Cast(raw, DType::kI64);
  if (s.ignore_index.has_value()) {
    t.ignored = k.Bin(OpCode::kEq, raw, k.Const(DType::kI64, *s.ignore_index));
  }
  if (need_class || s.weight.has_value()) {
    int32_t cls = NonNegativeIndex(k, raw, s.classes);
    if (t.ignored >= 0) cls = k.Sel(t.ignored, k.Const(DType::kI64, 0), cls);
    t.cls = cls;
  }
  if (s.weight.has_value()) {
    KILN_ASSIGN_OR_RETURN(t.weight, LoadIndirectAlong(L, k, *s.weight, {ir::loop::Const(0)},
                                                      0, extents, t.cls));
  }
  if (t.ignored >= 0) t.weight = k.Sel(t.ignored, k.Const(dt, 0), t.weight);
  return t;
}

// x coordinates [n, class, d...] of target coordinates [n, d...].
Coords ScoreCoords(const Coords& tc, IndexExpr cls) {
  Coords c = tc;
  c.insert(c.begin() + 1, std::move(cls));
  return c;
}

// Per-element loss and weight at target coordinates (kernel values).
struct LossTerm {
  int32_t loss = -1;
  int32_t weight = -1;
};
using LossElement = std::function<absl::StatusOr<LossTerm>(Emitter&, const Coords&)>;

// Stores the reduced loss: sum over the target space of the per-element
// loss, divided by the summed weights for "mean". Both terms are read before
// either Reduce (the C++ emitter expects a kernel's reduction-varying ops
// ahead of its reductions unless they depend on an earlier one).
absl::Status StoreReducedLoss(Lowerer& L, const LossSpec& s, int32_t out_buffer,
                              const LossElement& element) {
  const std::vector<int64_t> red(s.target_shape.begin(), s.target_shape.end());
  auto k = L.NewKernel({}, red);
  Coords tc;
  for (size_t d = 0; d < red.size(); ++d) tc.push_back(k->r(d));
  KILN_ASSIGN_OR_RETURN(LossTerm term, element(*k, tc));
  int32_t total = k->b().Reduce(ReduceKind::kSum, term.loss);
  if (s.reduction == Reduction::kMean) {
    const int32_t wsum = k->b().Reduce(ReduceKind::kSum, term.weight);
    total = k->Bin(OpCode::kDiv, total, wsum);
  }
  k->Store(out_buffer, {}, {}, total);
  return absl::OkStatus();
}

// loss[n, d...] = -logp[n, t, d...] * w[t], 0 when t is ignored.
absl::Status LowerNll(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(LossSpec s, ReadLossSpec(L, n));
  auto element = [&](Emitter& k, const Coords& tc,
                     const std::vector<int64_t>& extents) -> absl::StatusOr<int32_t> {
    KILN_ASSIGN_OR_RETURN(TargetRead t, ReadTarget(L, k, s, tc, extents));
    KILN_ASSIGN_OR_RETURN(int32_t xv, LoadIndirectAlong(L, k, s.x, ScoreCoords(tc, ir::loop::Const(0)),
                                                        1, extents, t.cls));
    return k.Un(OpCode::kNeg, k.Bin(OpCode::kMul, xv, t.weight));
  };
  const int32_t out = NewOutput(L, 0);
  if (s.reduction == Reduction::kNone) {
    auto k = L.NewKernel(s.target_shape);
    const std::vector<int64_t> extents(s.target_shape.begin(), s.target_shape.end());
    const Coords tc = k->IterCoords();
    KILN_ASSIGN_OR_RETURN(int32_t loss, element(*k, tc, extents));
    k->Store(out, s.target_shape, tc, loss);
    return absl::OkStatus();
  }
  const std::vector<int64_t> red(s.target_shape.begin(), s.target_shape.end());
  return StoreReducedLoss(L, s, out, [&](Emitter& k, const Coords& tc) -> absl::StatusOr<LossTerm> {
    KILN_ASSIGN_OR_RETURN(TargetRead t, ReadTarget(L, k, s, tc, red));
    KILN_ASSIGN_OR_RETURN(int32_t xv, LoadIndirectAlong(L, k, s.x, ScoreCoords(tc, ir::loop::Const(0)),
                                                        1, red, t.cls));
    return LossTerm{k.Un(OpCode::kNeg, k.Bin(OpCode::kMul, xv, t.weight)), t.weight};
  });
}

// max and log(sum(exp(x - max))) over the class axis of x at target
// coordinates `tc` (the kernel's single reduction variable walks the class).
void LogSumExp(Emitter& k, const LossSpec& s, const Coords& tc, int32_t* max,
               int32_t* log_sum, absl::Status* status) {
  const Coords rc = ScoreCoords(tc, k.r(0));
  absl::StatusOr<int32_t> v = k.Load(s.x, rc);
  absl::StatusOr<int32_t> v2 = k.Load(s.x, rc);
  if (!v.ok() || !v2.ok()) {
    *status = v.ok() ? v2.status() : v.status();
    return;
  }
  *max = k.b().Reduce(ReduceKind::kMax, *v);
  const int32_t sum = k.b().Reduce(
      ReduceKind::kSum, k.Un(OpCode::kExp, k.Bin(OpCode::kSub, *v2, *max)));
  *log_sum = k.Un(OpCode::kLog, sum);
}

// SoftmaxCrossEntropyLoss: NLL of log_softmax(x) over the class axis. The
// per-element loss is one kernel with the class reduction; "sum"/"mean"
// reduce it from a scratch buffer; log_prob (output 1) is its own kernel.
absl::Status LowerSce(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(LossSpec s, ReadLossSpec(L, n));
  const DType dt = s.x.dtype;
  if (L.HasOutput(1)) {
    const ir::Value& lp = L.OutputValue(1);
    if (lp.shape != s.x.shape || lp.dtype != dt) {
      return L.Error("log_prob output is ", ir::DTypeName(lp.dtype),
                     ir::ShapeToString(lp.shape), ", expected ",
                     ir::DTypeName(dt), ir::ShapeToString(s.x.shape));
    }
  }
  const int32_t out = NewOutput(L, 0);
  int32_t per_element = out;
  if (s.reduction != Reduction::kNone) {
    KILN_ASSIGN_OR_RETURN(per_element, ScratchBuffer(L, dt, s.target_shape));
  }
  if (ir::NumElements(s.target_shape) > 0) {
    auto k = L.NewKernel(s.target_shape, {s.classes});
    std::vector<int64_t> extents(s.target_shape.begin(), s.target_shape.end());
    extents.push_back(s.classes);
    const Coords tc = k->IterCoords();
    int32_t max = -1, log_sum = -1;
    absl::Status st;
    LogSumExp(*k, s, tc, &max, &log_sum, &st);
    KILN_RETURN_IF_ERROR(st);
    KILN_ASSIGN_OR_RETURN(TargetRead t, ReadTarget(L, *k, s, tc, extents));
    KILN_ASSIGN_OR_RETURN(int32_t xv, LoadIndirectAlong(L, *k, s.x, ScoreCoords(tc, ir::loop::Const(0)),
                                                        1, extents, t.cls));
    const int32_t logp = k->Bin(OpCode::kSub, k->Bin(OpCode::kSub, xv, max), log_sum);
    k->Store(per_element, s.target_shape, tc,
             k->Un(OpCode::kNeg, k->Bin(OpCode::kMul, logp, t.weight)));
  }
  if (s.reduction != Reduction::kNone) {
    const Shape tshape = s.target_shape;
    const std::vector<int64_t> red(tshape.begin(), tshape.end());
    KILN_RETURN_IF_ERROR(StoreReducedLoss(
        L, s, out, [&](Emitter& k, const Coords& tc) -> absl::StatusOr<LossTerm> {
          LossTerm term;
          // Weights only for "mean": an unused reduction-varying read is
          // emitted outside the reduction loop by the C++ emitter.
          if (s.reduction == Reduction::kMean) {
            KILN_ASSIGN_OR_RETURN(TargetRead t, ReadTarget(L, k, s, tc, red, /*need_class=*/false));
            term.weight = t.weight;
          }
          term.loss = k.b().Load(per_element, RowMajor(k, tshape, tc));
          return term;
        }));
  }
  if (L.HasOutput(1) && ir::NumElements(s.x.shape) > 0) {
    const int32_t lp = NewOutput(L, 1);
    auto k = L.NewKernel(s.x.shape, {s.classes});
    const Coords xc = k->IterCoords();
    Coords tc = xc;
    tc.erase(tc.begin() + 1);
    int32_t max = -1, log_sum = -1;
    absl::Status st;
    LogSumExp(*k, s, tc, &max, &log_sum, &st);
    KILN_RETURN_IF_ERROR(st);
    KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(s.x, xc));
    k->Store(lp, s.x.shape, xc,
             k->Bin(OpCode::kSub, k->Bin(OpCode::kSub, xv, max), log_sum));
  } else if (L.HasOutput(1)) {
    NewOutput(L, 1);
  }
  return absl::OkStatus();
}

// ---- Signal processing: windows, DFT and STFT (reductions over the signal
// axis).

LowerFn MakeWindow(std::vector<double> coeffs) {
  return [coeffs](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand size_op, L.Input(0));
    KILN_ASSIGN_OR_RETURN(int64_t periodic, n.AttrOr<int64_t>("periodic", 1));
    const ir::Value& out = L.OutputValue(0);
    if (out.shape.size() != 1 || ir::NumElements(size_op.shape) != 1 ||
        !ir::IsInteger(size_op.dtype) || !ir::IsFloat(out.dtype)) {
      return L.Error("needs one integer size and a 1-D float output, got ",
                     ir::DTypeName(out.dtype), ir::ShapeToString(out.shape));
    }
    const int64_t size = out.shape[0];
    if (const ir::Tensor* t = L.ConstantInput(0)) {
      if (t->GetAsInt64(0) != size) {
        return L.Error("size ", t->GetAsInt64(0), " does not match the output ",
                       ir::ShapeToString(out.shape));
      }
    }
    const DType dt = out.dtype;
    const int32_t buffer = NewOutput(L, 0);
    if (size == 0) return absl::OkStatus();
    const double denom = periodic != 0 ? size : size - 1;
    auto k = L.NewKernel(out.shape);
    const Coords zero(size_op.shape.size(), Const(0));
    int32_t idx = k->Cast(k->b().Index(k->i(0)), DType::kF64);
    if (L.ConstantInput(0) == nullptr) {
      KILN_ASSIGN_OR_RETURN(int32_t given, k->Load(size_op, zero));
      if (k->DTypeOf(given) != DType::kI64) given = k->Cast(given, DType::kI64);
      const int32_t ok = k->Bin(OpCode::kEq, given, k->Const(DType::kI64, size));
      KILN_ASSIGN_OR_RETURN(int32_t checked, LoadIfValid(L, *k, size_op, zero, ok));
      // idx * (checked / size): idx itself when the check passes.
      idx = k->Bin(OpCode::kMul, idx,
                   k->Bin(OpCode::kDiv, k->Cast(checked, DType::kF64),
                          k->Const(DType::kF64, static_cast<double>(size))));
    }
    // Computed in f64 (the reference's precision), then cast.
    int32_t w = k->Const(DType::kF64, coeffs[0]);
    for (size_t j = 1; j < coeffs.size(); ++j) {
      if (denom == 0) {  // size 1, symmetric: every cosine is 1
        w = k->Bin(OpCode::kAdd, w, k->Const(DType::kF64, coeffs[j]));
        continue;
      }
      const double f = 2 * M_PI * static_cast<double>(j) / denom;
      const int32_t c = k->Un(OpCode::kCos, k->Bin(OpCode::kMul, idx, k->Const(DType::kF64, f)));
      w = k->Bin(OpCode::kAdd, w, k->Bin(OpCode::kMul, c, k->Const(DType::kF64, coeffs[j])));
    }
    if (dt != DType::kF64) w = k->Cast(w, dt);
    k->Store(buffer, out.shape, {k->i(0)}, w);
    return absl::OkStatus();
  };
}

absl::Status LowerDft(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const int64_t r = x.shape.size();
  if (!ir::IsFloat(x.dtype) || r < 2 || (x.shape[r - 1] != 1 && x.shape[r - 1] != 2)) {
    return L.Error("input must be float [..., 1] (real) or [..., 2] (complex)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, n.AttrOr<int64_t>("axis", 1));
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) {
    return L.Error("axis must be a signal dimension (not the last)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t inverse, n.AttrOr<int64_t>("inverse", 0));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, n.AttrOr<int64_t>("onesided", 0));
  const int64_t n_in = x.shape[axis];
  int64_t len = n_in;
  if (L.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, L.ConstantInts(1, "dft_length"));
    if (v.size() != 1 || v[0] <= 0) return L.Error("dft_length must be one positive value");
    len = v[0];
  }
  const int64_t n_out = onesided != 0 ? len / 2 + 1 : len;
  Shape want = x.shape;
  want[axis] = n_out;
  want[r - 1] = 2;
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != want || out.dtype != x.dtype) {
    return L.Error("output must be ", ir::DTypeName(x.dtype), ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  const int64_t used = std::min(n_in, len);
  if (ir::NumElements(want) == 0) return absl::OkStatus();
  auto k = L.NewKernel(want, {std::max<int64_t>(used, 0)});
  const Coords it = k->IterCoords();
  Coords xc = it;
  xc[axis] = k->r(0);
  xc[r - 1] = Const(0);
  KILN_ASSIGN_OR_RETURN(int32_t re, k->Load(x, xc));
  re = k->Cast(re, DType::kF64);
  int32_t im = k->Const(DType::kF64, 0);
  if (x.shape[r - 1] == 2) {
    xc[r - 1] = Const(1);
    KILN_ASSIGN_OR_RETURN(im, k->Load(x, xc));
    im = k->Cast(im, DType::kF64);
  }
  const int32_t kt = k->Bin(OpCode::kMod,
                            k->Bin(OpCode::kMul, k->b().Index(it[axis]), k->b().Index(k->r(0))),
                            k->Const(DType::kI64, len));
  const double sign = inverse != 0 ? 1.0 : -1.0;
  const int32_t ang = k->Bin(OpCode::kMul, k->Cast(kt, DType::kF64),
                             k->Const(DType::kF64, sign * 2 * M_PI / static_cast<double>(len)));
  const int32_t c = k->Un(OpCode::kCos, ang), sn = k->Un(OpCode::kSin, ang);
  const int32_t real = k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, re, c), k->Bin(OpCode::kMul, im, sn));
  const int32_t imag = k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, re, sn), k->Bin(OpCode::kMul, im, c));
  const int32_t is_real = k->Bin(OpCode::kEq, k->b().Index(it[r - 1]), k->Const(DType::kI64, 0));
  int32_t sum = k->b().Reduce(ReduceKind::kSum, k->Sel(is_real, real, imag));
  if (inverse != 0) {
    sum = k->Bin(OpCode::kDiv, sum, k->Const(DType::kF64, static_cast<double>(len)));
  }
  k->Store(buffer, want, it, k->Cast(sum, x.dtype));
  return absl::OkStatus();
}

// STFT (opset 17) with frame_step and frame_length possibly given at run
// time: the static output fixes the frame and bin counts; the frame length
// is a run-time value bounded by the bins (the reduction runs to the bound
// and masks the rest), frames start at f * step (a checked load_indirect),
// and the kernel checks the parameters agree with the static shape.

absl::Status LowerStft(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) || x.shape.size() != 3 ||
      (x.shape[2] != 1 && x.shape[2] != 2)) {
    return L.Error("signal must be float [batch, length, 1 or 2]");
  }
  KILN_ASSIGN_OR_RETURN(Operand step_op, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, n.AttrOr<int64_t>("onesided", 1));
  std::optional<Operand> window, frame_length;
  if (L.HasInput(2)) {
    KILN_ASSIGN_OR_RETURN(Operand w, L.Input(2));
    if (!ir::IsFloat(w.dtype) || w.shape.size() != 1) return L.Error("window must be float 1-D");
    window = w;
  }
  if (L.HasInput(3)) {
    KILN_ASSIGN_OR_RETURN(Operand f, L.Input(3));
    frame_length = f;
  }
  for (const Operand* op : {&step_op, frame_length ? &*frame_length : nullptr}) {
    if (op != nullptr && (!ir::IsInteger(op->dtype) || ir::NumElements(op->shape) != 1)) {
      return L.Error("frame_step and frame_length must be integer scalars");
    }
  }
  if (!window.has_value() && !frame_length.has_value()) {
    return L.Error("needs a window or a frame_length");
  }
  const int64_t batch = x.shape[0], sig = x.shape[1];
  const ir::Value& out = L.OutputValue(0);
  if (out.shape.size() != 4 || out.shape[0] != batch || out.shape[3] != 2 ||
      out.dtype != x.dtype) {
    return L.Error("output must be ", ir::DTypeName(x.dtype), "[", batch, ", frames, bins, 2]");
  }
  const int64_t frames = out.shape[1], bins = out.shape[2];
  // The longest frame the bins allow; the window's length when there is one.
  int64_t max_len = onesided != 0 ? 2 * bins - 1 : bins;
  if (window.has_value()) {
    max_len = window->shape[0];
    if (max_len > sig) return L.Error("window is longer than the signal");
  }
  max_len = std::min(max_len, sig);
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  if (max_len <= 0) return L.Error("no frame fits the signal");
  auto k = L.NewKernel(out.shape, {max_len});
  const Coords it = k->IterCoords();
  auto i64 = [&](int64_t v) { return k->Const(DType::kI64, v); };
  auto scalar = [&](const Operand& op) -> absl::StatusOr<int32_t> {
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(op, Coords(op.shape.size(), Const(0))));
    return k->DTypeOf(v) == DType::kI64 ? v : k->Cast(v, DType::kI64);
  };
  KILN_ASSIGN_OR_RETURN(int32_t step, scalar(step_op));
  int32_t len = i64(max_len);
  int32_t ok = k->Bin(OpCode::kGt, step, i64(0));
  if (frame_length.has_value()) {
    KILN_ASSIGN_OR_RETURN(len, scalar(*frame_length));
    if (window.has_value()) ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kEq, len, i64(max_len)));
  }
  ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kAnd, k->Bin(OpCode::kGt, len, i64(0)),
                                       k->Bin(OpCode::kLe, len, i64(max_len))));
  const int32_t safe_step = k->Sel(ok, step, i64(1));
  const int32_t safe_len = k->Sel(ok, len, i64(1));
  const int32_t n_frames = k->Bin(
      OpCode::kAdd, k->Bin(OpCode::kDiv, k->Bin(OpCode::kSub, i64(sig), safe_len), safe_step), i64(1));
  const int32_t n_bins = onesided != 0
      ? k->Bin(OpCode::kAdd, k->Bin(OpCode::kDiv, safe_len, i64(2)), i64(1)) : safe_len;
  ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kAnd, k->Bin(OpCode::kEq, n_frames, i64(frames)),
                                       k->Bin(OpCode::kEq, n_bins, i64(bins))));
  const int32_t t = k->b().Index(k->r(0));
  const int32_t in_frame = k->Bin(OpCode::kLt, t, safe_len);
  // Sample f * step + t (t < len); a failed check reads out of range.
  const int32_t pos = k->Sel(ok, k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, k->b().Index(it[1]), safe_step),
                                        k->Sel(in_frame, t, i64(0))),
                             i64(sig));
  std::vector<int64_t> extents(out.shape.begin(), out.shape.end());
  extents.push_back(max_len);
  KILN_ASSIGN_OR_RETURN(int32_t re, LoadIndirectAlong(L, *k, x, {it[0], Const(0), Const(0)}, 1,
                                                      extents, pos));
  re = k->Cast(re, DType::kF64);
  int32_t im = k->Const(DType::kF64, 0);
  if (x.shape[2] == 2) {
    KILN_ASSIGN_OR_RETURN(im, LoadIndirectAlong(L, *k, x, {it[0], Const(0), Const(1)}, 1,
                                                extents, pos));
    im = k->Cast(im, DType::kF64);
  }
  if (window.has_value()) {
    KILN_ASSIGN_OR_RETURN(int32_t w, k->Load(*window, {k->r(0)}));
    w = k->Cast(w, DType::kF64);
    re = k->Bin(OpCode::kMul, re, w);
    im = k->Bin(OpCode::kMul, im, w);
  }
  const int32_t kt = k->Bin(OpCode::kMod, k->Bin(OpCode::kMul, k->b().Index(it[2]), t), safe_len);
  const int32_t ang = k->Bin(
      OpCode::kMul,
      k->Bin(OpCode::kDiv, k->Cast(kt, DType::kF64), k->Cast(safe_len, DType::kF64)),
      k->Const(DType::kF64, -2 * M_PI));
  const int32_t c = k->Un(OpCode::kCos, ang), sn = k->Un(OpCode::kSin, ang);
  const int32_t real = k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, re, c), k->Bin(OpCode::kMul, im, sn));
  const int32_t imag = k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, re, sn), k->Bin(OpCode::kMul, im, c));
  const int32_t is_real = k->Bin(OpCode::kEq, k->b().Index(it[3]), i64(0));
  const int32_t term = k->Sel(in_frame, k->Sel(is_real, real, imag), k->Const(DType::kF64, 0));
  k->Store(buffer, out.shape, it, k->Cast(k->b().Reduce(ReduceKind::kSum, term), x.dtype));
  return absl::OkStatus();
}

}  // namespace

void AddMathLowerings(LowerTable& t) {
  const std::pair<const char*, OpCode> float_unary[] = {
      {"Exp", OpCode::kExp},     {"Log", OpCode::kLog},
      {"Sqrt", OpCode::kSqrt},   {"Tanh", OpCode::kTanh},
      {"Erf", OpCode::kErf},     {"Sigmoid", OpCode::kSigmoid},
      {"Floor", OpCode::kFloor}, {"Ceil", OpCode::kCeil},
      {"Round", OpCode::kRound}, {"Sin", OpCode::kSin},
      {"Cos", OpCode::kCos},     {"Tan", OpCode::kTan},
      {"Asin", OpCode::kAsin},   {"Acos", OpCode::kAcos},
      {"Atan", OpCode::kAtan},   {"Sinh", OpCode::kSinh},
      {"Cosh", OpCode::kCosh},   {"Asinh", OpCode::kAsinh},
      {"Acosh", OpCode::kAcosh}, {"Atanh", OpCode::kAtanh},
      {"Reciprocal", OpCode::kReciprocal},
  };
  for (const auto& [name, code] : float_unary) t.Add(name, SimpleUnary(code, true));
  t.Add("Neg", SimpleUnary(OpCode::kNeg, false));
  t.Add("Abs", SimpleUnary(OpCode::kAbs, false));
  t.Add("Sign", SimpleUnary(OpCode::kSign, false));

  t.Add("Relu", LowerRelu);
  t.Add("PRelu", LowerPRelu);
  t.Add("LeakyRelu", WithAttrs({{"alpha", 0.01f}}, [](Emitter& k, int32_t x, DType dt,
                                                   const std::vector<float>& a) {
    const int32_t neg = k.Bin(OpCode::kLt, x, k.Const(dt, 0));
    return k.Sel(neg, k.Bin(OpCode::kMul, k.Const(dt, a[0]), x), x);
  }));
  t.Add("Elu", WithAttrs({{"alpha", 1.0f}}, [](Emitter& k, int32_t x, DType dt,
                                            const std::vector<float>& a) {
    const int32_t em1 = InF64(k, x, dt, [&](int32_t y) {
      return k.Bin(OpCode::kSub, k.Un(OpCode::kExp, y), k.Const(DType::kF64, 1));
    });
    const int32_t neg = k.Bin(OpCode::kLt, x, k.Const(dt, 0));
    return k.Sel(neg, k.Bin(OpCode::kMul, k.Const(dt, a[0]), em1), x);
  }));
  t.Add("Celu", WithAttrs({{"alpha", 1.0f}}, [](Emitter& k, int32_t x, DType dt,
                                             const std::vector<float>& a) {
    const int32_t scaled = k.Bin(OpCode::kDiv, x, k.Const(dt, a[0]));
    const int32_t em1 = InF64(k, scaled, dt, [&](int32_t y) {
      return k.Bin(OpCode::kSub, k.Un(OpCode::kExp, y), k.Const(DType::kF64, 1));
    });
    const int32_t pos = k.Bin(OpCode::kGt, x, k.Const(dt, 0));
    return k.Sel(pos, x, k.Bin(OpCode::kMul, k.Const(dt, a[0]), em1));
  }));
  t.Add("Selu", WithAttrs(
      {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}},
      [](Emitter& k, int32_t x, DType dt, const std::vector<float>& a) {
        const int32_t alpha = k.Const(dt, a[0]), gamma = k.Const(dt, a[1]);
        const int32_t le = k.Bin(OpCode::kLe, x, k.Const(dt, 0));
        const int32_t neg = k.Bin(
            OpCode::kMul, gamma,
            k.Bin(OpCode::kSub, k.Bin(OpCode::kMul, alpha, k.Un(OpCode::kExp, x)),
                  alpha));
        return k.Sel(le, neg, k.Bin(OpCode::kMul, gamma, x));
      }));
  t.Add("ThresholdedRelu", WithAttrs({{"alpha", 1.0f}}, [](Emitter& k, int32_t x, DType dt,
                                                        const std::vector<float>& a) {
    return k.Sel(k.Bin(OpCode::kGt, x, k.Const(dt, a[0])), x, k.Const(dt, 0));
  }));
  t.Add("HardSigmoid", WithAttrs({{"alpha", 0.2f}, {"beta", 0.5f}},
                               [](Emitter& k, int32_t x, DType dt,
                                  const std::vector<float>& a) {
    const int32_t y = k.Bin(OpCode::kAdd, k.Bin(OpCode::kMul, k.Const(dt, a[0]), x),
                            k.Const(dt, a[1]));
    return k.Bin(OpCode::kMax, k.Bin(OpCode::kMin, y, k.Const(dt, 1)), k.Const(dt, 0));
  }));
  t.Add("HardSwish", FloatUnary([](Emitter& k, int32_t x, DType dt) {
    const int32_t y = k.Bin(OpCode::kAdd, k.Bin(OpCode::kDiv, x, k.Const(dt, 6)),
                            k.Const(dt, 0.5));
    const int32_t c =
        k.Bin(OpCode::kMax, k.Bin(OpCode::kMin, y, k.Const(dt, 1)), k.Const(dt, 0));
    return k.Bin(OpCode::kMul, x, c);
  }));
  t.Add("Softplus", FloatUnary([](Emitter& k, int32_t x, DType dt) {
    return InF64(k, x, dt, [&](int32_t y) { return SoftplusF64(k, y); });
  }));
  t.Add("Softsign", FloatUnary([](Emitter& k, int32_t x, DType dt) {
    return k.Bin(OpCode::kDiv, x,
                 k.Bin(OpCode::kAdd, k.Const(dt, 1), k.Un(OpCode::kAbs, x)));
  }));
  t.Add("Mish", FloatUnary([](Emitter& k, int32_t x, DType dt) {
    return InF64(k, x, dt, [&](int32_t y) {
      return k.Bin(OpCode::kMul, y, k.Un(OpCode::kTanh, SoftplusF64(k, y)));
    });
  }));
  t.Add("Clip", LowerClip);
  t.Add("Add", SimpleBinary(OpCode::kAdd));
  t.Add("Sub", SimpleBinary(OpCode::kSub));
  t.Add("Mul", SimpleBinary(OpCode::kMul));
  t.Add("Div", SimpleBinary(OpCode::kDiv));
  t.Add("Mod", LowerMod);
  t.Add("Pow", LowerPow);
  t.Add("Max", Variadic(OpCode::kMax, false));
  t.Add("Min", Variadic(OpCode::kMin, false));
  t.Add("Sum", Variadic(OpCode::kAdd, false));
  t.Add("Mean", Variadic(OpCode::kAdd, true));
  t.Add("Expand", LowerExpand);

  t.Add("Softmax", MakeSoftmax(SoftmaxOp::kSoftmax));
  t.Add("LogSoftmax", MakeSoftmax(SoftmaxOp::kLogSoftmax));
  t.Add("Hardmax", MakeSoftmax(SoftmaxOp::kHardmax));

  for (const char* op : {"Gemm", "MatMul"}) t.AddExternCall(op);
  t.AddExternCall("MatMulInteger", CheckMatMulInteger);
  t.Add("Einsum", LowerEinsum);
  t.Add("QLinearMatMul", LowerQLinearMatMul);
  t.Add("TopK", LowerTopK);
  t.Add("CumSum", LowerCumSum);

  t.Add("NegativeLogLikelihoodLoss", LowerNll);
  t.Add("SoftmaxCrossEntropyLoss", LowerSce);

  t.Add("HannWindow", MakeWindow({0.5, -0.5}));
  t.Add("HammingWindow", MakeWindow({25.0 / 46.0, -21.0 / 46.0}));
  t.Add("BlackmanWindow", MakeWindow({0.42, -0.5, 0.08}));
  t.Add("DFT", LowerDft);
  t.Add("STFT", LowerStft);
}

}  // namespace kiln::lowering::internal
