// File: lowering/tensor.cc — lowerings of ONNX's tensor family (onnx/defs/tensor).
// View ops (Reshape, Squeeze, Unsqueeze, Transpose, Slice, Split, Tile,
// DepthToSpace, SpaceToDepth, Pad edge/reflect/wrap, Identity, Gather with an
// arithmetic index sequence, nearest Resize without extrapolation) compose an
// index function and emit no kernel; Concat, constant Pad, Gather* and the
// other indexed reads emit kernels (a checked load_indirect: an out-of-range
// index fails the kernel), scatters a checked store_indirect; Shape and Size
// fold at lowering time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"
#include "lowering/elementwise.h"
#include "lowering/kernel_util.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;
using ir::loop::StoreCombine;

// ---- Views and copies.

absl::Status LowerTranspose(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const size_t rank = x.shape.size();
  std::vector<int64_t> perm;
  KILN_ASSIGN_OR_RETURN(perm, n.AttrOr<std::vector<int64_t>>("perm", {}));
  if (perm.empty()) {
    for (size_t d = rank; d-- > 0;) perm.push_back(d);
  }
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank) return L.Error("perm has the wrong length");
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) {
      return L.Error("perm is not a permutation");
    }
    seen[p] = true;
  }
  SetView(L, 0, x, [perm](const Coords& c) {
    Coords in(c.size());
    for (size_t j = 0; j < perm.size(); ++j) in[perm[j]] = c[j];
    return in;
  });
  return absl::OkStatus();
}

absl::Status LowerTile(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const Shape in = x.shape, out = L.OutputValue(0).shape;
  if (in.size() != out.size()) return L.Error("output rank differs");
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 0 ? out[d] != 0 : out[d] % in[d] != 0) {
      return L.Error("output shape is not a tiling of the input");
    }
  }
  SetView(L, 0, x, [in](const Coords& c) {
    Coords r(c.size());
    for (size_t d = 0; d < c.size(); ++d) {
      r[d] = in[d] <= 1 ? (in[d] == 1 ? Const(0) : c[d]) : ir::loop::Mod(c[d], in[d]);
    }
    return r;
  });
  return absl::OkStatus();
}

struct SliceAxis {
  int64_t start = 0, step = 1;
};

// Slice whose starts/ends/axes/steps are known only at run time, into the
// static output shape: one kernel reads the parameters with scalar loads
// (computed once per kernel run), clamps them as ONNX specifies, and reads
// x through a checked load_indirect at the flat source offset. A parameter
// set whose extent on some dim differs from the static output shape (or a
// bad axis, a repeated axis, a zero step) makes the offset out of range: the
// loop interpreter reports "index ... out of range", a compiled kernel
// kErrorIndexOutOfRange, and no element is read.
absl::Status LowerRuntimeSlice(Lowerer& L, const Operand& x) {
  const Shape out = L.OutputValue(0).shape;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (static_cast<int64_t>(out.size()) != rank) return L.Error("output rank differs from the input's");
  std::vector<Operand> params;  // starts, ends, axes, steps (absent: nullopt)
  std::vector<bool> present;
  int64_t count = -1;
  for (int i = 1; i <= 4; ++i) {
    present.push_back(L.HasInput(i));
    if (!L.HasInput(i)) {
      params.emplace_back();
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Operand p, L.Input(i));
    if (p.shape.size() != 1 || !ir::IsInteger(p.dtype)) {
      return L.Error("starts, ends, axes and steps must be 1-D integer tensors");
    }
    if (count >= 0 && p.shape[0] != count) {
      return L.Error("starts, ends, axes and steps differ in length");
    }
    count = p.shape[0];
    params.push_back(std::move(p));
  }
  if (!present[2] && count > rank) return L.Error("more starts than input dims");
  if (ir::NumElements(out) == 0) {  // nothing to read: no parameter check either
    L.SetOutputConstant(0, ir::Tensor(x.dtype, out));
    return absl::OkStatus();
  }
  const int64_t numel = ir::NumElements(x.shape);
  if (numel == 0) return L.Error("slices an empty input into a non-empty output");
  KILN_ASSIGN_OR_RETURN(int32_t src, L.Materialize(x));
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out);
  const DType i64 = DType::kI64;
  auto c = [&](int64_t v) { return k->Const(i64, static_cast<double>(v)); };
  auto load = [&](int which, int64_t j) -> absl::StatusOr<int32_t> {
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(params[which], {Const(j)}));
    return params[which].dtype == i64 ? v : k->Cast(v, i64);
  };
  // Per data dim: the start and step of the slice (defaults 0 and 1), its
  // element count, and how many parameter entries name it (a |step| of 0
  // or 2^63 divides by 2^62: the count is then 1, or refused for step 0).
  std::vector<int32_t> start(rank), step(rank), extent(rank), named(rank);
  for (int64_t d = 0; d < rank; ++d) {
    start[d] = c(0);
    step[d] = c(1);
    extent[d] = c(x.shape[d]);
    named[d] = c(0);
  }
  int32_t ok = k->Const(DType::kBool, 1);
  auto all = [&](int32_t cond) { ok = k->Bin(OpCode::kAnd, ok, cond); };
  for (int64_t j = 0; j < std::max<int64_t>(count, 0); ++j) {
    KILN_ASSIGN_OR_RETURN(int32_t st, load(0, j));
    KILN_ASSIGN_OR_RETURN(int32_t en, load(1, j));
    int32_t ax = c(j);
    if (present[2]) {
      KILN_ASSIGN_OR_RETURN(ax, load(2, j));
      all(k->Bin(OpCode::kAnd, k->Bin(OpCode::kGe, ax, c(-rank)), k->Bin(OpCode::kLt, ax, c(rank))));
      ax = k->Sel(k->Bin(OpCode::kLt, ax, c(0)), k->Bin(OpCode::kAdd, ax, c(rank)), ax);
    }
    int32_t s = c(1);
    if (present[3]) {
      KILN_ASSIGN_OR_RETURN(s, load(3, j));
      all(k->Bin(OpCode::kNe, s, c(0)));
    }
    const int32_t pos = k->Bin(OpCode::kGt, s, c(0));
    for (int64_t d = 0; d < rank; ++d) {
      if (!present[2] && d != j) continue;
      const int64_t dim = x.shape[d];
      const int32_t neg_st = k->Bin(OpCode::kLt, st, c(0));
      int32_t a = k->Sel(neg_st, k->Bin(OpCode::kAdd, st, c(dim)), st);
      const int32_t neg_en = k->Bin(OpCode::kLt, en, c(0));
      int32_t b = k->Sel(neg_en, k->Bin(OpCode::kAdd, en, c(dim)), en);
      // step > 0: clamp to [0, dim]; step < 0: start to [0, dim-1], end to [-1, dim-1].
      a = k->Bin(OpCode::kMax, a, c(0));
      a = k->Bin(OpCode::kMin, a, k->Sel(pos, c(dim), c(std::max<int64_t>(dim - 1, 0))));
      b = k->Bin(OpCode::kMax, b, k->Sel(pos, c(0), c(-1)));
      b = k->Bin(OpCode::kMin, b, k->Sel(pos, c(dim), c(dim - 1)));
      const int32_t span = k->Sel(pos, k->Bin(OpCode::kSub, b, a), k->Bin(OpCode::kSub, a, b));
      const int32_t mag = k->Un(OpCode::kAbs, s);
      // (span - 1) / |step| + 1 for span > 0 (no overflow for huge steps).
      const int32_t n_el = k->Sel(
          k->Bin(OpCode::kGt, span, c(0)),
          k->Bin(OpCode::kAdd,
                 k->Bin(OpCode::kDiv, k->Bin(OpCode::kSub, span, c(1)),
                        k->Sel(k->Bin(OpCode::kLt, mag, c(1)), c(int64_t{1} << 62), mag)),
                 c(1)),
          c(0));
      const int32_t here = present[2] ? k->Bin(OpCode::kEq, ax, c(d)) : k->Const(DType::kBool, 1);
      start[d] = k->Sel(here, a, start[d]);
      step[d] = k->Sel(here, s, step[d]);
      extent[d] = k->Sel(here, n_el, extent[d]);
      named[d] = k->Bin(OpCode::kAdd, named[d], k->Sel(here, c(1), c(0)));
    }
  }
  const std::vector<int64_t> strides = [&] {
    std::vector<int64_t> st(rank, 1);
    for (int64_t d = rank - 1; d > 0; --d) st[d - 1] = st[d] * x.shape[d];
    return st;
  }();
  int32_t offset = c(0);
  for (int64_t d = 0; d < rank; ++d) {
    all(k->Bin(OpCode::kEq, extent[d], c(out[d])));
    all(k->Bin(OpCode::kLe, named[d], c(1)));
    const int32_t at = k->Bin(OpCode::kAdd,
                              k->Bin(OpCode::kMul, k->b().Index(k->i(static_cast<int>(d))), step[d]),
                              start[d]);
    offset = k->Bin(OpCode::kAdd, offset, k->Bin(OpCode::kMul, at, c(strides[d])));
  }
  const int32_t n_idx = k->Sel(ok, offset, c(numel));
  k->Store(buffer, out, k->IterCoords(), k->b().LoadIndirect(src, Const(0), n_idx, numel, 1));
  return absl::OkStatus();
}

absl::Status LowerSlice(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const size_t rank = x.shape.size();
  std::vector<int64_t> starts, ends, axes, steps;
  if (L.opset() >= 10) {
    bool runtime = false;
    for (int i = 1; i <= 4; ++i) {
      runtime = runtime || (L.HasInput(i) && L.ConstantInput(i) == nullptr);
    }
    if (runtime) return LowerRuntimeSlice(L, x);
  }
  if (L.opset() < 10) {
    KILN_ASSIGN_OR_RETURN(starts, n.Attr<std::vector<int64_t>>("starts"));
    KILN_ASSIGN_OR_RETURN(ends, n.Attr<std::vector<int64_t>>("ends"));
    KILN_ASSIGN_OR_RETURN(axes, n.AttrOr<std::vector<int64_t>>("axes", {}));
  } else {
    KILN_ASSIGN_OR_RETURN(starts, L.ConstantInts(1, "starts"));
    KILN_ASSIGN_OR_RETURN(ends, L.ConstantInts(2, "ends"));
    if (L.HasInput(3)) {
      KILN_ASSIGN_OR_RETURN(axes, L.ConstantInts(3, "axes"));
    }
    if (L.HasInput(4)) {
      KILN_ASSIGN_OR_RETURN(steps, L.ConstantInts(4, "steps"));
    }
  }
  if (axes.empty()) {
    for (size_t d = 0; d < starts.size(); ++d) axes.push_back(d);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return L.Error("starts, ends, axes and steps differ in length");
  }
  std::vector<SliceAxis> sl(rank);
  Shape expect = x.shape;
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < starts.size(); ++j) {
    std::optional<int64_t> a = NormalizeAxis(axes[j], rank);
    if (!a.has_value() || seen[*a]) return L.Error("bad or repeated axis ", axes[j]);
    seen[*a] = true;
    const int64_t dim = x.shape[*a], s = steps[j];
    if (s == 0) return L.Error("step is 0");
    int64_t st = starts[j], en = ends[j];
    if (st < 0) st = st < -dim ? 0 : st + dim;
    if (en < 0) en = en < -dim ? -1 : en + dim;
    if (s > 0) {
      st = std::clamp<int64_t>(st, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
    } else {
      st = std::clamp<int64_t>(st, 0, std::max<int64_t>(dim - 1, 0));
      en = std::clamp<int64_t>(en, -1, dim - 1);
      if (ends[j] < -dim) en = -1;
    }
    const int64_t span = en - st;
    int64_t count = 0;
    if ((s > 0 && span > 0) || (s < 0 && span < 0)) {
      count = (std::abs(span) + std::abs(s) - 1) / std::abs(s);
    }
    expect[*a] = count;
    sl[*a] = {st, s};
  }
  const Shape out = L.OutputValue(0).shape;
  if (out != expect) {
    return L.Error("output shape ", ir::ShapeToString(out),
                   " differs from the slice's ", ir::ShapeToString(expect));
  }
  SetView(L, 0, x, [sl](const Coords& c) {
    Coords r(c.size());
    for (size_t d = 0; d < c.size(); ++d) r[d] = c[d] * sl[d].step + sl[d].start;
    return r;
  });
  return absl::OkStatus();
}

absl::Status LowerSplit(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", 0));
  std::optional<int64_t> axis = NormalizeAxis(axis_attr, x.shape.size());
  if (!axis.has_value()) return L.Error("axis out of range");
  int64_t offset = 0;
  for (int i = 0; i < static_cast<int>(n.outputs.size()); ++i) {
    if (!L.HasOutput(i)) return L.Unimplemented("omitted Split outputs");
    const Shape& s = L.OutputValue(i).shape;
    const int64_t a = *axis, off = offset;
    for (size_t d = 0; d < x.shape.size(); ++d) {
      if (s.size() != x.shape.size() || (static_cast<int64_t>(d) != a && s[d] != x.shape[d])) {
        return L.Error("output ", i, " is ", ir::ShapeToString(s), ", not a part of the input ",
                       ir::ShapeToString(x.shape), " along axis ", a);
      }
    }
    SetView(L, i, x, [a, off](const Coords& c) {
      Coords r = c;
      r[a] = c[a] + off;
      return r;
    });
    offset += s[a];
  }
  if (offset != x.shape[*axis]) {
    return L.Error("outputs cover ", offset, " of ", x.shape[*axis],
                   " elements along the axis");
  }
  return absl::OkStatus();
}

absl::Status LowerDepthToSpace(Lowerer& L, const ir::Node& n, bool to_space) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t b, n.Attr<int64_t>("blocksize"));
  KILN_ASSIGN_OR_RETURN(std::string mode, n.AttrOr<std::string>("mode", "DCR"));
  if (x.shape.size() != 4 || b <= 0) return L.Error("needs a 4-D input and blocksize > 0");
  if (mode != "DCR" && mode != "CRD") return L.Error("unknown mode '", mode, "'");
  const Shape out = L.OutputValue(0).shape;
  if (to_space) {
    const int64_t c_out = out[1];
    const bool dcr = mode == "DCR";
    if (x.shape[1] != c_out * b * b) return L.Error("channels do not divide");
    SetView(L, 0, x, [b, c_out, dcr](const Coords& c) {
      const IndexExpr h = ir::loop::FloorDiv(c[2], b), i = ir::loop::Mod(c[2], b);
      const IndexExpr w = ir::loop::FloorDiv(c[3], b), j = ir::loop::Mod(c[3], b);
      const IndexExpr ch = dcr ? (i * b + j) * c_out + c[1]
                               : c[1] * (b * b) + i * b + j;
      return Coords{c[0], ch, h, w};
    });
  } else {
    const int64_t c_in = x.shape[1];
    SetView(L, 0, x, [b, c_in](const Coords& c) {
      const IndexExpr i = ir::loop::FloorDiv(c[1], b * c_in);
      const IndexExpr j = ir::loop::Mod(ir::loop::FloorDiv(c[1], c_in), b);
      const IndexExpr ch = ir::loop::Mod(c[1], c_in);
      return Coords{c[0], ch, c[2] * b + i, c[3] * b + j};
    });
  }
  return absl::OkStatus();
}

absl::Status LowerConcat(Lowerer& L, const ir::Node& n) {
  const ir::Value& out = L.OutputValue(0);
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr,
                        n.AttrOr<int64_t>("axis", L.opset() < 4 ? 1 : 0));
  std::optional<int64_t> axis = NormalizeAxis(axis_attr, out.shape.size());
  if (!axis.has_value()) return L.Error("axis out of range");
  std::vector<Operand> ins;
  int64_t total = 0;
  for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
    if (!L.HasInput(i)) continue;
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    if (op.dtype != out.dtype || op.shape.size() != out.shape.size()) {
      return L.Error("input ", i, " does not match the output");
    }
    for (size_t d = 0; d < op.shape.size(); ++d) {
      if (static_cast<int64_t>(d) != *axis && op.shape[d] != out.shape[d]) {
        return L.Error("input ", i, " differs outside the axis");
      }
    }
    total += op.shape[*axis];
    ins.push_back(std::move(op));
  }
  if (total != out.shape[*axis]) return L.Error("inputs do not fill the output");
  const int32_t buffer = L.OutputBuffer(0);
  int64_t offset = 0;
  for (const Operand& op : ins) {
    if (ir::NumElements(op.shape) > 0) {
      auto k = L.NewKernel(op.shape);
      const Coords c = k->IterCoords();
      KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(op, c));
      Coords oc = c;
      oc[*axis] = c[*axis] + offset;
      k->Store(buffer, out.shape, oc, v);
    }
    offset += op.shape[*axis];
  }
  return absl::OkStatus();
}

// Helpers for kernels that compute a flat source offset from run-time
// parameters: small i64 arithmetic on kernel values.
struct I64Ops {
  Emitter& k;
  int32_t C(int64_t v) { return k.Const(DType::kI64, v); }
  int32_t Add(int32_t a, int32_t b) { return k.Bin(OpCode::kAdd, a, b); }
  int32_t Sub(int32_t a, int32_t b) { return k.Bin(OpCode::kSub, a, b); }
  int32_t Mul(int32_t a, int32_t b) { return k.Bin(OpCode::kMul, a, b); }
  int32_t Lt(int32_t a, int32_t b) { return k.Bin(OpCode::kLt, a, b); }
  int32_t Eq(int32_t a, int32_t b) { return k.Bin(OpCode::kEq, a, b); }
  int32_t And(int32_t a, int32_t b) { return k.Bin(OpCode::kAnd, a, b); }
  int32_t Sel(int32_t c, int32_t a, int32_t b) { return k.Sel(c, a, b); }
  int32_t Clamp(int32_t v, int64_t lo, int64_t hi) {
    return k.Bin(OpCode::kMin, k.Bin(OpCode::kMax, v, C(lo)), C(hi));
  }
  // v + dim when v < 0.
  int32_t Wrap(int32_t v, int64_t dim) { return Sel(Lt(v, C(0)), Add(v, C(dim)), v); }
  int32_t Load(const Operand& op, int64_t j) {
    absl::StatusOr<int32_t> v = k.Load(op, {Const(j)});
    // Operands here are 1-D parameters that exist (checked by the caller).
    int32_t r = v.ok() ? *v : C(0);
    return k.DTypeOf(r) == DType::kI64 ? r : k.Cast(r, DType::kI64);
  }
};

absl::StatusOr<Operand> IntVectorInput(Lowerer& L, int i, const char* what) {
  KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
  if (!ir::IsInteger(op.dtype) || op.shape.size() != 1) {
    return L.Error(what, " must be a 1-D integer tensor");
  }
  if (!op.splat.has_value()) KILN_RETURN_IF_ERROR(L.BufferOf(op.root).status());
  return op;
}

// Pad whose pads are a run-time input (static output shape; opset >= 11):
// source coordinates by mode from the run-time begin pads; the kernel checks
// that the pads give the declared shape.
absl::Status LowerPadWithRunTimePads(Lowerer& L, const ir::Node& n) {
  if (L.HasInput(3)) return L.Unimplemented("axes with run-time pads");
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand pads, IntVectorInput(L, 1, "pads"));
  KILN_ASSIGN_OR_RETURN(std::string mode, n.AttrOr<std::string>("mode", "constant"));
  if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap") {
    return L.Error("unknown mode '", mode, "'");
  }
  const ir::Value& out = L.OutputValue(0);
  const int64_t rank = x.shape.size(), total = ir::NumElements(x.shape);
  if (pads.shape[0] != 2 * rank || static_cast<int64_t>(out.shape.size()) != rank) {
    return L.Error("pads must have ", 2 * rank, " values");
  }
  std::optional<Operand> fill;
  if (L.HasInput(2) && mode == "constant") {
    KILN_ASSIGN_OR_RETURN(Operand f, L.Input(2));
    if (f.dtype != x.dtype || ir::NumElements(f.shape) != 1) {
      return L.Error("constant_value must be one element of the data's type");
    }
    fill = f;
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  if (total == 0) return L.Unimplemented("padding an empty tensor with run-time pads");
  KILN_ASSIGN_OR_RETURN(int32_t src, L.Materialize(x));
  auto k = L.NewKernel(out.shape);
  I64Ops o{*k};
  int32_t ok = k->Const(DType::kBool, 1), inside = k->Const(DType::kBool, 1);
  int32_t flat = o.C(0);
  int64_t stride = total;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t dim = x.shape[d];
    stride /= dim;
    const int32_t b = o.Load(pads, d), e = o.Load(pads, d + rank);
    ok = o.And(ok, o.Eq(o.Add(b, e), o.C(out.shape[d] - dim)));
    int32_t j = o.Sub(k->b().Index(k->i(d)), b);
    if (mode == "constant") {
      inside = o.And(inside, o.And(k->Bin(OpCode::kGe, j, o.C(0)), o.Lt(j, o.C(dim))));
      j = o.Clamp(j, 0, dim - 1);
    } else if (mode == "edge") {
      j = o.Clamp(j, 0, dim - 1);
    } else if (mode == "wrap") {
      j = k->Bin(OpCode::kMod, j, o.C(dim));
    } else if (dim == 1) {
      j = o.C(0);
    } else {
      const int64_t period = 2 * (dim - 1);
      j = k->Bin(OpCode::kMod, j, o.C(period));
      j = o.Sel(o.Lt(j, o.C(dim)), j, o.Sub(o.C(period), j));
    }
    flat = o.Add(flat, o.Mul(j, o.C(stride)));
  }
  const int32_t idx = o.Sel(ok, flat, o.C(total));
  int32_t v = k->b().LoadIndirect(src, Const(0), idx, total, 1);
  if (mode == "constant") {
    int32_t c = k->Const(x.dtype, 0);
    if (fill.has_value()) {
      KILN_ASSIGN_OR_RETURN(c, k->Load(*fill, Coords(fill->shape.size(), Const(0))));
    }
    v = k->Sel(inside, v, c);
  }
  k->Store(buffer, out.shape, k->IterCoords(), v);
  return absl::OkStatus();
}

absl::Status LowerPad(Lowerer& L, const ir::Node& n) {
  if (L.opset() >= 11 && L.HasInput(1) && L.ConstantInput(1) == nullptr) {
    return LowerPadWithRunTimePads(L, n);
  }
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const size_t rank = x.shape.size();
  KILN_ASSIGN_OR_RETURN(std::string mode, n.AttrOr<std::string>("mode", "constant"));
  std::vector<int64_t> pads;
  std::optional<Operand> value;
  double value_attr = 0;
  if (L.opset() < 11) {
    const char* name = n.HasAttr("paddings") ? "paddings" : "pads";
    KILN_ASSIGN_OR_RETURN(pads, n.Attr<std::vector<int64_t>>(name));
    KILN_ASSIGN_OR_RETURN(float v, n.AttrOr<float>("value", 0.0f));
    value_attr = v;
  } else {
    KILN_ASSIGN_OR_RETURN(pads, L.ConstantInts(1, "pads"));
    if (L.HasInput(2)) {
      KILN_ASSIGN_OR_RETURN(Operand cv, L.Input(2));
      if (ir::NumElements(cv.shape) != 1 || cv.dtype != x.dtype) {
        return L.Error("constant_value must be a scalar of the input's dtype");
      }
      auto inner = cv.index;
      const size_t r = cv.shape.size();
      cv.shape = {};
      cv.index = [inner, r](const Coords&) { return inner(Coords(r, Const(0))); };
      value = cv;
    }
  }
  std::vector<int64_t> axes;
  if (L.HasInput(3)) {
    KILN_ASSIGN_OR_RETURN(axes, L.ConstantInts(3, "axes"));
  } else {
    for (size_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) return L.Error("pads has the wrong length");
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  for (size_t j = 0; j < axes.size(); ++j) {
    std::optional<int64_t> a = NormalizeAxis(axes[j], rank);
    if (!a.has_value()) return L.Error("axis out of range");
    begin[*a] = pads[j];
    end[*a] = pads[axes.size() + j];
  }
  const Shape in = x.shape, out = L.OutputValue(0).shape;
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] != in[d] + begin[d] + end[d]) return L.Error("output shape does not match pads");
    if (mode != "constant" && (begin[d] < 0 || end[d] < 0)) {
      return L.Unimplemented("negative pads in mode ", mode);
    }
    if (mode != "constant" && in[d] == 0 && out[d] > 0) {
      return L.Error("cannot pad an empty axis in mode ", mode);
    }
    if (mode == "reflect" && (begin[d] >= in[d] || end[d] >= in[d]) &&
        (begin[d] > 0 || end[d] > 0)) {
      return L.Unimplemented("reflect pads as large as the axis");
    }
  }
  if (mode == "edge" || mode == "reflect" || mode == "wrap") {
    SetView(L, 0, x, [=](const Coords& c) {
      Coords r(rank);
      for (size_t d = 0; d < rank; ++d) {
        if (begin[d] == 0 && end[d] == 0) {
          r[d] = c[d];
          continue;
        }
        const IndexExpr s = c[d] - begin[d];
        const int64_t last = in[d] - 1;
        if (mode == "edge") {
          r[d] = ir::loop::Min(ir::loop::Max(s, 0), last);
        } else if (mode == "wrap") {
          r[d] = ir::loop::Mod(s, in[d]);
        } else {
          // One reflection on each side: last - |last - |s||.
          const IndexExpr a = ir::loop::Max(s, -s);
          const IndexExpr t = Const(last) - a;
          // The clamp is a no-op for pads < size; it lets value-range
          // analysis prove the load in bounds.
          r[d] = ir::loop::Min(
              ir::loop::Max(Const(last) - ir::loop::Max(t, -t), 0), last);
        }
      }
      return r;
    });
    return absl::OkStatus();
  }
  if (mode != "constant") return L.Error("unknown mode '", mode, "'");
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out);
  const Coords c = k->IterCoords();
  int32_t pad_value;
  if (value.has_value()) {
    KILN_ASSIGN_OR_RETURN(pad_value, k->Load(*value, {}));
  } else {
    pad_value = k->Const(x.dtype, value_attr);
  }
  int32_t result = pad_value;
  if (ir::NumElements(in) > 0) {
    Coords src(rank);
    int32_t valid = -1;
    for (size_t d = 0; d < rank; ++d) {
      const IndexExpr s = k->Simplify(c[d] - begin[d]);
      src[d] = ir::loop::Min(ir::loop::Max(s, 0), in[d] - 1);
      if (begin[d] <= 0 && end[d] <= 0) continue;
      const int32_t sv = k->b().Index(s);
      const int32_t ok = k->Bin(
          OpCode::kAnd, k->Bin(OpCode::kGe, sv, k->Const(DType::kI64, 0)),
          k->Bin(OpCode::kLt, sv, k->Const(DType::kI64, in[d])));
      valid = valid < 0 ? ok : k->Bin(OpCode::kAnd, valid, ok);
    }
    KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(x, src));
    result = valid < 0 ? xv : k->Sel(valid, xv, pad_value);
  }
  k->Store(buffer, out, c, result);
  return absl::OkStatus();
}

absl::Status LowerTrilu(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t upper, n.AttrOr<int64_t>("upper", 1));
  const size_t rank = x.shape.size();
  if (rank < 2) return L.Error("input must have rank >= 2");
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  const int32_t diff = k->b().Index(k->Simplify(it[rank - 1] - it[rank - 2]));
  int32_t kv = k->Const(DType::kI64, 0);
  if (L.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(Operand k_op, L.Input(1));
    if (ir::NumElements(k_op.shape) != 1 || !ir::IsInteger(k_op.dtype)) {
      return L.Error("k must be one integer");
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(k_op, Coords(k_op.shape.size(), Const(0))));
    kv = k->Cast(v, DType::kI64);
  }
  const int32_t keep = k->Bin(upper != 0 ? OpCode::kGe : OpCode::kLe, diff, kv);
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, it));
  k->Store(buffer, x.shape, it, k->Sel(keep, v, k->Const(x.dtype, 0)));
  return absl::OkStatus();
}

absl::Status LowerReverseSequence(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand lens, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t batch_axis, n.AttrOr<int64_t>("batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t time_axis, n.AttrOr<int64_t>("time_axis", 0));
  if (x.shape.size() < 2) return L.Error("input must have rank >= 2");
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return L.Error("batch_axis and time_axis must be 0 and 1 in some order, got ",
                   batch_axis, " and ", time_axis);
  }
  if (!ir::IsInteger(lens.dtype) || lens.shape != Shape{x.shape[batch_axis]}) {
    return L.Error("sequence_lens must be integers of shape [",
                   x.shape[batch_axis], "]");
  }
  const int64_t nt = x.shape[time_axis];
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(x.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t len, k->Load(lens, {it[batch_axis]}));
  if (k->DTypeOf(len) != DType::kI64) len = k->Cast(len, DType::kI64);
  const int32_t t = k->b().Index(it[time_axis]);
  const int32_t bad_len =
      k->Bin(OpCode::kOr, k->Bin(OpCode::kLt, len, k->Const(DType::kI64, 0)),
             k->Bin(OpCode::kGt, len, k->Const(DType::kI64, nt)));
  const int32_t reversed = k->Bin(
      OpCode::kSub, k->Bin(OpCode::kSub, len, k->Const(DType::kI64, 1)), t);
  int32_t src = k->Sel(k->Bin(OpCode::kLt, t, len), reversed, t);
  src = k->Sel(bad_len, k->Const(DType::kI64, nt), src);
  KILN_ASSIGN_OR_RETURN(int32_t v, LoadIndirectAlong(L, *k, x, it, time_axis,
                                                     Extents(x.shape), src));
  k->Store(buffer, x.shape, it, v);
  return absl::OkStatus();
}

// ---- Indexing. Reads at data-dependent places are checked load_indirects;
// scatters write with the checked store_indirect: a copy of `data` into the
// output buffer, then one kernel over the updates that stores each at its
// index, in row-major order of the updates, so duplicate indices with
// reduction none keep the last update, as the reference interpreter does.

// How a kernel over `ranges` reads `data` at coordinates `dc` (in the
// kernel's variables) whose `axis` entry is a runtime index: a load_indirect
// of `buffer` at `base` + index * `stride`.
struct AxisRead {
  int32_t buffer = -1;
  IndexExpr base;
  int64_t stride = 0;
};

// The data's index function must be affine in the axis coordinate; a view
// that is not (a reshape splitting the axis, ...) is copied row-major first,
// so call this before creating the kernel that reads it.
absl::StatusOr<AxisRead> PrepareAxisRead(Lowerer& L, const Operand& data, Coords dc,
                                         int64_t axis, const Shape& ranges) {
  const int64_t dim = data.shape[axis];
  // A placeholder variable after the kernel's own, ranging over the axis.
  const int placeholder = static_cast<int>(ranges.size());
  std::vector<int64_t> extents = ranges;
  extents.push_back(dim);
  AxisRead r;
  std::optional<int64_t> stride;
  if (!data.splat.has_value()) {
    Coords pc = dc;
    pc[axis] = ir::loop::Var(placeholder);
    stride = ir::loop::StrideOf(ir::loop::Simplify(data.index(pc), extents), placeholder);
    if (stride.has_value()) {
      KILN_ASSIGN_OR_RETURN(r.buffer, L.BufferOf(data.root));
      r.base = data.index(dc);
    }
  }
  if (!stride.has_value()) {
    KILN_ASSIGN_OR_RETURN(r.buffer, L.Materialize(data));
    r.base = LinearIndex(data.shape, dc);
    stride = ir::loop::CheckedRowMajorStrides(data.shape).value_or(
        std::vector<int64_t>(data.shape.size(), 0))[axis];
  }
  r.base = ir::loop::Simplify(r.base, ranges);
  r.stride = *stride;
  return r;
}

Coords VarCoords(size_t n) {
  Coords c;
  for (size_t d = 0; d < n; ++d) c.push_back(ir::loop::Var(static_cast<int>(d)));
  return c;
}

absl::Status LowerGather(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand data, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand idx, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", 0));
  const size_t rank = data.shape.size();
  std::optional<int64_t> axis_opt = NormalizeAxis(axis_attr, rank);
  if (!axis_opt.has_value()) return L.Error("axis out of range");
  const int64_t axis = *axis_opt, dim = data.shape[axis];
  if (!ir::IsInteger(idx.dtype)) return L.Error("indices must be integers");
  const size_t q = idx.shape.size();
  Shape expect(data.shape.begin(), data.shape.begin() + axis);
  expect.insert(expect.end(), idx.shape.begin(), idx.shape.end());
  expect.insert(expect.end(), data.shape.begin() + axis + 1, data.shape.end());
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != expect) return L.Error("output shape does not match");
  const Shape ishape = idx.shape;
  if (const ir::Tensor* t = L.ConstantInput(1)) {
    std::vector<int64_t> v = t->ToInt64Vector();
    for (int64_t& i : v) {
      if (i < -dim || i >= dim) {
        return L.Error("index ", i, " out of range for axis of size ", dim);
      }
      if (i < 0) i += dim;
    }
    bool arithmetic = true;
    const int64_t step = v.size() > 1 ? v[1] - v[0] : 0;
    for (size_t j = 1; j < v.size(); ++j) arithmetic &= v[j] - v[j - 1] == step;
    if (arithmetic && !v.empty()) {
      const int64_t first = v[0];
      SetView(L, 0, data, [=](const Coords& c) {
        Coords r(c.begin(), c.begin() + axis);
        const Coords ic(c.begin() + axis, c.begin() + axis + q);
        r.push_back(LinearIndex(ishape, ic) * step + first);
        r.insert(r.end(), c.begin() + axis + q, c.end());
        return r;
      });
      return absl::OkStatus();
    }
  }
  if (dim == 0) return L.Error("gathers from an empty axis");
  const Coords c = VarCoords(out.shape.size());
  Coords dc(c.begin(), c.begin() + axis);
  dc.push_back(Const(0));
  dc.insert(dc.end(), c.begin() + axis + q, c.end());
  KILN_ASSIGN_OR_RETURN(AxisRead read, PrepareAxisRead(L, data, dc, axis, out.shape));
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  const Coords ic(c.begin() + axis, c.begin() + axis + q);
  KILN_ASSIGN_OR_RETURN(int32_t iv, k->Load(idx, ic));
  k->Store(buffer, out.shape, c,
           k->b().LoadIndirect(read.buffer, read.base, iv, dim, read.stride));
  return absl::OkStatus();
}

// GatherElements: out[c] = data[c with c[axis] replaced by indices[c]].
absl::Status LowerGatherElements(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand data, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand idx, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", 0));
  const size_t rank = data.shape.size();
  std::optional<int64_t> axis_opt = NormalizeAxis(axis_attr, rank);
  if (!axis_opt.has_value()) return L.Error("axis out of range");
  const int64_t axis = *axis_opt, dim = data.shape[axis];
  if (!ir::IsInteger(idx.dtype)) return L.Error("indices must be integers");
  if (idx.shape.size() != rank) return L.Error("indices rank differs from data rank");
  for (size_t d = 0; d < rank; ++d) {
    if (static_cast<int64_t>(d) != axis && idx.shape[d] > data.shape[d]) {
      return L.Error("indices dim ", d, " exceeds the data's");
    }
  }
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != idx.shape) return L.Error("output shape does not match the indices");
  if (const ir::Tensor* t = L.ConstantInput(1)) {
    for (int64_t i : t->ToInt64Vector()) {
      if (i < -dim || i >= dim) {
        return L.Error("index ", i, " out of range for axis of size ", dim);
      }
    }
  }
  if (ir::NumElements(out.shape) == 0) {
    L.OutputBuffer(0);
    return absl::OkStatus();
  }
  if (dim == 0) return L.Error("gathers from an empty axis");
  const Coords c = VarCoords(out.shape.size());
  Coords dc = c;
  dc[axis] = Const(0);
  KILN_ASSIGN_OR_RETURN(AxisRead read, PrepareAxisRead(L, data, dc, axis, out.shape));
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  KILN_ASSIGN_OR_RETURN(int32_t iv, k->Load(idx, c));
  k->Store(buffer, out.shape, c,
           k->b().LoadIndirect(read.buffer, read.base, iv, dim, read.stride));
  return absl::OkStatus();
}

absl::Status LowerGatherNd(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand data, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand ind, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t b, n.AttrOr<int64_t>("batch_dims", 0));
  if (!ir::IsInteger(ind.dtype)) return L.Error("indices must be integers");
  const int64_t r = data.shape.size(), q = ind.shape.size();
  if (q < 1 || r < 1) return L.Error("data and indices must have rank >= 1");
  const int64_t m = ind.shape[q - 1];
  if (b < 0 || b >= std::min(q, r) || m < 1 || b + m > r) {
    return L.Error("batch_dims ", b, " and index depth ", m,
                   " do not fit data ", ir::ShapeToString(data.shape),
                   " and indices ", ir::ShapeToString(ind.shape));
  }
  for (int64_t d = 0; d < b; ++d) {
    if (data.shape[d] != ind.shape[d]) return L.Error("batch dims differ");
  }
  const ir::Value& out = L.OutputValue(0);
  Shape want(ind.shape.begin(), ind.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + b + m, data.shape.end());
  if (out.shape != want) {
    return L.Error("output shape ", ir::ShapeToString(out.shape), ", expected ",
                   ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  int64_t block = 1;
  for (int64_t d = b; d < b + m; ++d) block *= data.shape[d];
  if (block == 0) return L.Error("gathers from an empty axis");
  int64_t inner = 1;
  for (int64_t d = b + m; d < r; ++d) inner *= data.shape[d];
  KILN_ASSIGN_OR_RETURN(int32_t src, L.Materialize(data));
  auto k = L.NewKernel(out.shape);
  const Coords it = k->IterCoords();
  Coords ic(it.begin(), it.begin() + (q - 1));
  ic.push_back(Const(0));
  int32_t offset = k->Const(DType::kI64, 0), bad = -1;
  for (int64_t j = 0; j < m; ++j) {
    ic[q - 1] = Const(j);
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(ind, ic));
    if (k->DTypeOf(v) != DType::kI64) v = k->Cast(v, DType::kI64);
    const int64_t dim = data.shape[b + j];
    const int32_t zero = k->Const(DType::kI64, 0);
    v = k->Sel(k->Bin(OpCode::kLt, v, zero),
               k->Bin(OpCode::kAdd, v, k->Const(DType::kI64, dim)), v);
    const int32_t out_of_range =
        k->Bin(OpCode::kOr, k->Bin(OpCode::kLt, v, zero),
               k->Bin(OpCode::kGe, v, k->Const(DType::kI64, dim)));
    bad = bad < 0 ? out_of_range : k->Bin(OpCode::kOr, bad, out_of_range);
    offset = k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, offset, k->Const(DType::kI64, dim)), v);
  }
  offset = k->Sel(bad, k->Const(DType::kI64, block), offset);
  Coords dc(it.begin(), it.begin() + b);
  for (int64_t d = b; d < b + m; ++d) dc.push_back(Const(0));
  dc.insert(dc.end(), it.begin() + (q - 1), it.end());
  const int32_t v = k->b().LoadIndirect(src, RowMajor(*k, data.shape, dc), offset,
                                        block, inner);
  k->Store(buffer, out.shape, it, v);
  return absl::OkStatus();
}

absl::Status LowerOneHot(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand ind, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand values, L.Input(2));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", -1));
  if (ir::NumElements(values.shape) != 2) {
    return L.Error("values must have two elements (off, on), got ",
                   ir::ShapeToString(values.shape));
  }
  if (ind.dtype == DType::kBool) return L.Error("indices must be numeric");
  const int64_t rank = static_cast<int64_t>(ind.shape.size()) + 1;
  std::optional<int64_t> axis = NormalizeAxis(axis_attr, rank);
  if (!axis.has_value()) return L.Error("axis ", axis_attr, " out of range");
  const ir::Value& out = L.OutputValue(0);
  if (static_cast<int64_t>(out.shape.size()) != rank || out.dtype != values.dtype) {
    return L.Error("output ", ir::DTypeName(out.dtype), ir::ShapeToString(out.shape),
                   " does not fit indices ", ir::ShapeToString(ind.shape));
  }
  const int64_t depth = out.shape[*axis];
  if (const ir::Tensor* d = L.ConstantInput(1)) {
    if (d->num_elements() != 1 || static_cast<int64_t>(d->GetAsDouble(0)) != depth) {
      return L.Error("depth ", d->TypeString(), " does not match the output's ",
                     depth);
    }
  }
  if (depth < 1) return L.Error("depth ", depth, " must be positive");
  const int32_t buffer = NewOutput(L, 0);
  auto k = L.NewKernel(out.shape);
  const Coords it = k->IterCoords();
  Coords ic = it;
  ic.erase(ic.begin() + *axis);
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(ind, ic));
  const int32_t j = k->b().Index(it[*axis]);
  int32_t hit;
  if (ir::IsFloat(ind.dtype)) {
    // Truncate toward zero in the float domain (no cast of NaN/inf).
    const DType dt = ind.dtype;
    const int32_t zero = k->Const(dt, 0);
    const int32_t t = k->Sel(k->Bin(OpCode::kLt, v, zero), k->Un(OpCode::kCeil, v),
                             k->Un(OpCode::kFloor, v));
    const int32_t w = k->Sel(k->Bin(OpCode::kLt, t, zero),
                             k->Bin(OpCode::kAdd, t, k->Const(dt, depth)), t);
    hit = k->Bin(OpCode::kEq, w, k->Cast(j, dt));
  } else {
    if (k->DTypeOf(v) != DType::kI64) v = k->Cast(v, DType::kI64);
    const int32_t w = k->Sel(k->Bin(OpCode::kLt, v, k->Const(DType::kI64, 0)),
                             k->Bin(OpCode::kAdd, v, k->Const(DType::kI64, depth)), v);
    hit = k->Bin(OpCode::kEq, w, j);
  }
  const Coords flat0 = Delinearize(values.shape, Const(0));
  const Coords flat1 = Delinearize(values.shape, Const(1));
  KILN_ASSIGN_OR_RETURN(int32_t off, k->Load(values, flat0));
  KILN_ASSIGN_OR_RETURN(int32_t on, k->Load(values, flat1));
  k->Store(buffer, out.shape, it, k->Sel(hit, on, off));
  return absl::OkStatus();
}

// ONNX `reduction` (none when absent; opset < 16 has no attribute).
absl::StatusOr<StoreCombine> ReadCombine(Lowerer& L, const ir::Node& n, DType dtype) {
  KILN_ASSIGN_OR_RETURN(std::string r, n.AttrOr<std::string>("reduction", "none"));
  StoreCombine c;
  if (r == "none") {
    c = StoreCombine::kNone;
  } else if (r == "add") {
    c = StoreCombine::kAdd;
  } else if (r == "mul") {
    c = StoreCombine::kMul;
  } else if (r == "max") {
    c = StoreCombine::kMax;
  } else if (r == "min") {
    c = StoreCombine::kMin;
  } else {
    return L.Error("unknown reduction '", r, "'");
  }
  if (c != StoreCombine::kNone && !ir::IsFloat(dtype) && !ir::IsInteger(dtype)) {
    return L.Unimplemented("reduction '", r, "' of ", ir::DTypeName(dtype));
  }
  return c;
}

// The output buffer of the current node holding a copy of `data` (the
// elements the scatter does not touch).
// An empty output is a constant (no kernel writes it): -1.
absl::StatusOr<int32_t> CopyOfData(Lowerer& L, const Operand& data) {
  if (ir::NumElements(data.shape) == 0) {
    L.SetOutputConstant(0, ir::Tensor(data.dtype, data.shape));
    return -1;
  }
  const int32_t out = L.OutputBuffer(0);
  auto k = L.NewKernel(data.shape);
  const Coords c = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(data, c));
  k->Store(out, data.shape, c, v);
  return out;
}

absl::Status CheckConstantIndices(Lowerer& L, int input, int64_t dim) {
  if (const ir::Tensor* t = L.ConstantInput(input)) {
    for (int64_t i : t->ToInt64Vector()) {
      if (i < -dim || i >= dim) {
        return L.Error("index ", i, " out of range for axis of size ", dim);
      }
    }
  }
  return absl::OkStatus();
}

// ScatterElements (opset 11+) and Scatter (opset 9-10, no reduction).
absl::Status LowerScatterElements(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand data, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand idx, L.Input(1));
  KILN_ASSIGN_OR_RETURN(Operand upd, L.Input(2));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", 0));
  KILN_ASSIGN_OR_RETURN(StoreCombine combine, ReadCombine(L, n, data.dtype));
  const size_t rank = data.shape.size();
  std::optional<int64_t> axis_opt = NormalizeAxis(axis_attr, rank);
  if (!axis_opt.has_value()) return L.Error("axis ", axis_attr, " out of range");
  const int64_t axis = *axis_opt, dim = data.shape[axis];
  if (!ir::IsInteger(idx.dtype)) return L.Error("indices must be integers");
  if (idx.shape.size() != rank) return L.Error("indices rank differs from data rank");
  if (upd.shape != idx.shape || upd.dtype != data.dtype) {
    return L.Error("updates ", ir::DTypeName(upd.dtype), ir::ShapeToString(upd.shape),
                   " should be ", ir::DTypeName(data.dtype), ir::ShapeToString(idx.shape));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (static_cast<int64_t>(d) != axis && idx.shape[d] > data.shape[d]) {
      return L.Error("indices dim ", d, " exceeds the data's");
    }
  }
  if (L.OutputValue(0).shape != data.shape) return L.Error("output shape differs from data's");
  KILN_RETURN_IF_ERROR(CheckConstantIndices(L, 1, dim));
  KILN_ASSIGN_OR_RETURN(int32_t out, CopyOfData(L, data));
  if (out < 0 || ir::NumElements(idx.shape) == 0) return absl::OkStatus();
  if (dim == 0) return L.Error("scatters into an empty axis");
  const std::vector<int64_t> strides = Strides(data.shape);
  auto k = L.NewKernel(idx.shape);
  const Coords c = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t iv, k->Load(idx, c));
  KILN_ASSIGN_OR_RETURN(int32_t uv, k->Load(upd, c));
  IndexExpr base = Const(0);
  for (size_t d = 0; d < rank; ++d) {
    if (static_cast<int64_t>(d) != axis) base = base + c[d] * strides[d];
  }
  k->b().StoreIndirect(out, k->Simplify(base), uv, iv, dim, strides[axis], combine);
  return absl::OkStatus();
}

// ScatterND: each index tuple (the last indices dim, m values) names a slice
// of data; the first m data dims are addressed as one flattened axis (a tuple
// with a component outside [-d, d) becomes an out-of-range flat index).
absl::Status LowerScatterND(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand data, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand idx, L.Input(1));
  KILN_ASSIGN_OR_RETURN(Operand upd, L.Input(2));
  KILN_ASSIGN_OR_RETURN(StoreCombine combine, ReadCombine(L, n, data.dtype));
  const int64_t r = static_cast<int64_t>(data.shape.size());
  const int64_t q = static_cast<int64_t>(idx.shape.size());
  if (!ir::IsInteger(idx.dtype)) return L.Error("indices must be integers");
  if (q < 1 || r < 1) return L.Error("data and indices need rank >= 1");
  const int64_t m = idx.shape[q - 1];
  if (m < 1 || m > r) return L.Error("index tuples of length ", m, " do not fit data of rank ", r);
  Shape expect(idx.shape.begin(), idx.shape.end() - 1);
  expect.insert(expect.end(), data.shape.begin() + m, data.shape.end());
  if (upd.shape != expect || upd.dtype != data.dtype) {
    return L.Error("updates ", ir::DTypeName(upd.dtype), ir::ShapeToString(upd.shape),
                   " should be ", ir::DTypeName(data.dtype), ir::ShapeToString(expect));
  }
  if (L.OutputValue(0).shape != data.shape) return L.Error("output shape differs from data's");
  if (const ir::Tensor* t = L.ConstantInput(1)) {
    const std::vector<int64_t> v = t->ToInt64Vector();
    for (size_t i = 0; i < v.size(); ++i) {
      const int64_t d = data.shape[i % m];
      if (v[i] < -d || v[i] >= d) return L.Error("index ", v[i], " out of range for axis of size ", d);
    }
  }
  KILN_ASSIGN_OR_RETURN(int32_t out, CopyOfData(L, data));
  if (out < 0 || ir::NumElements(upd.shape) == 0) return absl::OkStatus();
  int64_t flat_extent = 1;
  for (int64_t j = 0; j < m; ++j) flat_extent *= data.shape[j];
  if (flat_extent == 0) return L.Error("scatters into an empty tensor");
  const std::vector<int64_t> strides = Strides(data.shape);
  auto k = L.NewKernel(upd.shape);
  const Coords c = k->IterCoords();
  Coords t(c.begin(), c.begin() + (q - 1));
  auto component = [&](int64_t j) -> absl::StatusOr<int32_t> {
    Coords ic = t;
    ic.push_back(Const(j));
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(idx, ic));
    return v;
  };
  int32_t nidx;
  if (m == 1) {
    KILN_ASSIGN_OR_RETURN(nidx, component(0));
  } else {
    const DType i64 = DType::kI64;
    int32_t flat = -1, valid = -1;
    for (int64_t j = 0; j < m; ++j) {
      KILN_ASSIGN_OR_RETURN(int32_t raw, component(j));
      const int32_t v = idx.dtype == i64 ? raw : k->Cast(raw, i64);
      const double d = static_cast<double>(data.shape[j]);
      const int32_t ok = k->Bin(OpCode::kAnd, k->Bin(OpCode::kGe, v, k->Const(i64, -d)),
                                k->Bin(OpCode::kLt, v, k->Const(i64, d)));
      const int32_t w = k->Sel(k->Bin(OpCode::kLt, v, k->Const(i64, 0)),
                               k->Bin(OpCode::kAdd, v, k->Const(i64, d)), v);
      valid = valid < 0 ? ok : k->Bin(OpCode::kAnd, valid, ok);
      flat = flat < 0 ? w : k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, flat, k->Const(i64, d)), w);
    }
    nidx = k->Sel(valid, flat, k->Const(i64, static_cast<double>(flat_extent)));
  }
  KILN_ASSIGN_OR_RETURN(int32_t uv, k->Load(upd, c));
  IndexExpr base = Const(0);
  for (int64_t s = 0; s < r - m; ++s) base = base + c[q - 1 + s] * strides[m + s];
  k->b().StoreIndirect(out, k->Simplify(base), uv, nidx, flat_extent, strides[m - 1], combine);
  return absl::OkStatus();
}

// ---- Shape, Size, Where, Cast, IsInf, Identity.

absl::Status LowerShape(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const int64_t rank = x.shape.size();
  KILN_ASSIGN_OR_RETURN(int64_t start, n.AttrOr<int64_t>("start", 0));
  KILN_ASSIGN_OR_RETURN(int64_t end, n.AttrOr<int64_t>("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(x.shape[d]);
  if (L.OutputValue(0).dtype != DType::kI64 ||
      L.OutputValue(0).shape != Shape{static_cast<int64_t>(dims.size())}) {
    return L.Error("output must be i64[", dims.size(), "]");
  }
  L.SetOutputConstant(0, ir::Tensor::FromVector<int64_t>(
                             {static_cast<int64_t>(dims.size())}, dims));
  return absl::OkStatus();
}

absl::Status LowerSize(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (L.OutputValue(0).dtype != DType::kI64 || !L.OutputValue(0).shape.empty()) {
    return L.Error("output must be an i64 scalar");
  }
  L.SetOutputConstant(0, ir::Tensor::Scalar<int64_t>(ir::NumElements(x.shape)));
  return absl::OkStatus();
}

absl::Status LowerWhere(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
  if (ins.size() != 3) return L.Error("needs three inputs");
  if (ins[0].dtype != DType::kBool) return L.Error("condition must be bool");
  if (ins[1].dtype != ins[2].dtype) return L.Error("X and Y dtypes differ");
  return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    return k.Sel(v[0], v[1], v[2]);
  });
}

absl::Status LowerCast(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const DType to = L.OutputValue(0).dtype;
  if (x.dtype == to) return L.SetOutputSame(0, x);
  return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    return k.Cast(v[0], to);
  });
}

absl::Status LowerIsInf(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(L, x));
  KILN_ASSIGN_OR_RETURN(int64_t pos, n.AttrOr<int64_t>("detect_positive", 1));
  KILN_ASSIGN_OR_RETURN(int64_t neg, n.AttrOr<int64_t>("detect_negative", 1));
  return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    const int32_t inf = k.Un(OpCode::kIsInf, v[0]);
    const int32_t gt = k.Bin(OpCode::kGt, v[0], k.Const(x.dtype, 0));
    const int32_t f = k.Const(DType::kBool, 0);
    const int32_t sign_ok = pos && neg ? k.Const(DType::kBool, 1)
                            : pos      ? gt
                            : neg      ? k.Un(OpCode::kNot, gt)
                                       : f;
    return k.Bin(OpCode::kAnd, inf, sign_ok);
  });
}

absl::Status LowerIdentity(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  return L.SetOutputSame(0, x);
}

// ---- Resize (opsets 10-19) and Upsample (7, 9): nearest / linear / cubic
// interpolation with every coordinate_transformation_mode the reference
// interpreter knows, as loop kernels (no extern call).
//
// Source indices are index expressions, never data: with scales and roi
// known at lowering time, the source coordinate of an axis is affine in the
// output index, so each tap's index is floor((a*o + c) / b) (clamped), found
// by fitting the per-axis index table computed exactly as the reference
// does. Nearest resizes then are pure views. Linear and cubic weights are
// computed in the kernel (f64, the reference's formulas) from the output
// index and the fitted base index, so a coordinate that lands on an integer
// gives the same result on either side. When scales or roi are only known at
// run time (or no fit exists), every axis is a one-hot reduction over the
// input: correct, but O(out * in) — meant for tests, not models. Sizes known
// only at run time are taken from the static output shape (they must agree
// with it; that is not checked at run time).

struct ResizeSpec {
  std::string mode;          // nearest | linear | cubic
  std::string coord_mode;    // coordinate_transformation_mode
  std::string nearest_mode;  // or "legacy": ceil when downsampling, else floor
  double cubic_a = -0.75;
  double extrapolation = 0;
  bool exclude_outside = false;
};

// Where one axis' scale and roi come from: a value known at lowering time,
// or an element of the scales / roi input read in the kernel.
struct AxisSource {
  int64_t in = 0, out = 0;
  std::optional<double> scale;
  int scale_slot = -1;
  std::optional<double> roi_start, roi_end;
  int roi_start_slot = -1, roi_end_slot = -1;
};

bool IsTfCrop(const ResizeSpec& s) { return s.coord_mode == "tf_crop_and_resize"; }

// The reference's source coordinate of output index o (double precision).
double SourceCoord(const ResizeSpec& p, double xo, int64_t in, int64_t out,
                   double scale, double roi_start, double roi_end) {
  const double out_w = scale * static_cast<double>(in);
  const double in_d = static_cast<double>(in);
  const std::string& cm = p.coord_mode;
  if (cm == "half_pixel") return (xo + 0.5) / scale - 0.5;
  if (cm == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out) / out_w;
    const double offset = in_d / 2 * (1 - adjustment);
    return offset + (xo + 0.5) / scale - 0.5;
  }
  if (cm == "pytorch_half_pixel") {
    return out_w == 1 ? -0.5 : (xo + 0.5) / scale - 0.5;
  }
  if (cm == "align_corners") {
    return out_w == 1 ? 0.0 : xo * (in_d - 1) / (out_w - 1);
  }
  if (cm == "asymmetric") return xo / scale;
  if (cm == "tf_half_pixel_for_nn") return (xo + 0.5) / scale;
  // tf_crop_and_resize
  double x = out_w == 1 ? (roi_end - roi_start) * (in_d - 1) / 2
                        : xo * (roi_end - roi_start) * (in_d - 1) / (out_w - 1);
  return x + roi_start * (in_d - 1);
}

bool NearestRight(const ResizeSpec& p, double ratio, double scale) {
  if (ratio == 1) return true;
  const std::string& m = p.nearest_mode;
  if (m == "round_prefer_floor") return ratio > 0.5;
  if (m == "round_prefer_ceil") return ratio >= 0.5;
  if (m == "floor") return false;
  if (m == "ceil") return true;
  return scale < 1;  // legacy
}

// f(o) == floor((a*o + c) / b) for every o, b > 0.
struct FloorAffine {
  int64_t a = 0, b = 1, c = 0;
};

std::optional<FloorAffine> FitFloorAffine(const std::vector<int64_t>& f,
                                          double slope) {
  const int64_t n = static_cast<int64_t>(f.size());
  if (n <= 1) return FloorAffine{0, 1, n == 1 ? f[0] : 0};
  if (!std::isfinite(slope) || std::abs(slope) > 1e6) return std::nullopt;
  for (int64_t b = 1; b <= 1024; ++b) {
    const double center = slope * static_cast<double>(b);
    for (int64_t a = static_cast<int64_t>(std::floor(center)) - 1;
         a <= static_cast<int64_t>(std::ceil(center)) + 1; ++a) {
      int64_t lo = std::numeric_limits<int64_t>::min();
      int64_t hi = std::numeric_limits<int64_t>::max();
      for (int64_t o = 0; o < n && lo <= hi; ++o) {
        lo = std::max(lo, b * f[o] - a * o);
        hi = std::min(hi, b * f[o] + b - 1 - a * o);
      }
      if (lo <= hi) return FloorAffine{a, b, lo};
    }
  }
  return std::nullopt;
}

// One resized axis with lowering-time coordinates: either a single source
// index per output (`single`), or taps[t] = clamp(base + t - shift) with
// weights computed in the kernel.
struct AxisPlan {
  bool single = false;
  FloorAffine fit;       // of the single index, or of base (x0)
  int64_t lo = 0, hi = 0;  // range of the fitted sequence
};

// floor((a*o + c) / b) for output coordinate `o`.
IndexExpr FitExpr(const FloorAffine& f, const IndexExpr& o) {
  IndexExpr e = o * f.a + f.c;
  return f.b == 1 ? e : ir::loop::FloorDiv(e, f.b);
}

// The source index expression clamp(fit(o) + t) for output coordinate `o`.
IndexExpr TapIndex(const AxisPlan& plan, int64_t in, const IndexExpr& o,
                   int64_t t) {
  IndexExpr e = FitExpr(plan.fit, o) + t;
  if (plan.lo + t < 0) e = ir::loop::Max(e, 0);
  if (plan.hi + t > in - 1) e = ir::loop::Min(e, in - 1);
  return e;
}

// Plans an axis whose scale and roi are known; nullopt when no fit exists.
std::optional<AxisPlan> PlanAxis(const ResizeSpec& p, const AxisSource& s) {
  std::vector<int64_t> seq;
  bool all_integer = true;
  const double scale = *s.scale;
  const double rs = s.roi_start.value_or(0), re = s.roi_end.value_or(1);
  for (int64_t o = 0; o < s.out; ++o) {
    const double x = SourceCoord(p, static_cast<double>(o), s.in, s.out, scale, rs, re);
    if (!std::isfinite(x) || std::abs(x) > 1e12) return std::nullopt;
    double x0 = std::floor(x), ratio = x - x0;
    if (ratio == 0) {
      x0 -= 1;
      ratio = 1;
    }
    all_integer &= ratio == 1;
    if (p.mode == "nearest") {
      seq.push_back(static_cast<int64_t>(x0) + (NearestRight(p, ratio, scale) ? 1 : 0));
    } else {
      seq.push_back(static_cast<int64_t>(x0));
    }
  }
  AxisPlan plan;
  // On integer coordinates linear and cubic weights are exactly one 1 at x.
  plan.single = p.mode == "nearest" || all_integer;
  if (plan.single && p.mode != "nearest") {
    for (int64_t& v : seq) v += 1;
  }
  double slope;
  const double in_d = static_cast<double>(s.in), out_w = scale * in_d;
  if (p.coord_mode == "align_corners") {
    slope = out_w == 1 ? 0 : (in_d - 1) / (out_w - 1);
  } else if (IsTfCrop(p)) {
    slope = out_w == 1 ? 0 : (re - rs) * (in_d - 1) / (out_w - 1);
  } else {
    slope = 1 / scale;
  }
  std::optional<FloorAffine> fit = FitFloorAffine(seq, slope);
  if (!fit.has_value()) return std::nullopt;
  plan.fit = *fit;
  if (!seq.empty()) {
    plan.lo = *std::min_element(seq.begin(), seq.end());
    plan.hi = *std::max_element(seq.begin(), seq.end());
  }
  return plan;
}

// f64 arithmetic on kernel values.
class F64 {
 public:
  explicit F64(Emitter& k) : k_(k) {}
  int32_t C(double v) { return k_.Const(DType::kF64, v); }
  int32_t Add(int32_t a, int32_t b) { return k_.Bin(OpCode::kAdd, a, b); }
  int32_t Sub(int32_t a, int32_t b) { return k_.Bin(OpCode::kSub, a, b); }
  int32_t Mul(int32_t a, int32_t b) { return k_.Bin(OpCode::kMul, a, b); }
  int32_t Div(int32_t a, int32_t b) { return k_.Bin(OpCode::kDiv, a, b); }
  int32_t Eq(int32_t a, int32_t b) { return k_.Bin(OpCode::kEq, a, b); }
  int32_t Sel(int32_t c, int32_t a, int32_t b) { return k_.Sel(c, a, b); }
  int32_t Of(int32_t v) {
    return k_.DTypeOf(v) == DType::kF64 ? v : k_.Cast(v, DType::kF64);
  }
  int32_t Index(const IndexExpr& e) {
    return k_.Cast(k_.b().Index(k_.Simplify(e)), DType::kF64);
  }

 private:
  Emitter& k_;
};

// Scale and roi of an axis as kernel values.
struct AxisValues {
  int32_t scale = -1, roi_start = -1, roi_end = -1;
};

absl::StatusOr<AxisValues> EmitAxisValues(Emitter& k, const AxisSource& s,
                                          const std::optional<Operand>& scales,
                                          const std::optional<Operand>& roi) {
  F64 f(k);
  AxisValues v;
  if (s.scale.has_value()) {
    v.scale = f.C(*s.scale);
  } else {
    KILN_ASSIGN_OR_RETURN(int32_t l, k.Load(*scales, {Const(s.scale_slot)}));
    v.scale = f.Of(l);
  }
  if (s.roi_start.has_value()) {
    v.roi_start = f.C(*s.roi_start);
    v.roi_end = f.C(*s.roi_end);
  } else if (s.roi_start_slot >= 0) {
    KILN_ASSIGN_OR_RETURN(int32_t a, k.Load(*roi, {Const(s.roi_start_slot)}));
    KILN_ASSIGN_OR_RETURN(int32_t b, k.Load(*roi, {Const(s.roi_end_slot)}));
    v.roi_start = f.Of(a);
    v.roi_end = f.Of(b);
  } else {
    v.roi_start = f.C(0);
    v.roi_end = f.C(1);
  }
  return v;
}

// SourceCoord in the kernel.
int32_t EmitSourceCoord(Emitter& k, const ResizeSpec& p, const AxisSource& s,
                        const AxisValues& v, int32_t xo) {
  F64 f(k);
  const int32_t in_d = f.C(static_cast<double>(s.in));
  const int32_t out_w = f.Mul(v.scale, in_d);
  const int32_t half = f.C(0.5), one = f.C(1);
  const int32_t out_w_is_1 = f.Eq(out_w, one);
  const int32_t hp = f.Sub(f.Div(f.Add(xo, half), v.scale), half);
  const std::string& cm = p.coord_mode;
  if (cm == "half_pixel") return hp;
  if (cm == "half_pixel_symmetric") {
    const int32_t adjustment = f.Div(f.C(static_cast<double>(s.out)), out_w);
    const int32_t offset =
        f.Mul(f.Div(in_d, f.C(2)), f.Sub(one, adjustment));
    return f.Sub(f.Add(offset, f.Div(f.Add(xo, half), v.scale)), half);
  }
  if (cm == "pytorch_half_pixel") return f.Sel(out_w_is_1, f.C(-0.5), hp);
  const int32_t in_m1 = f.Sub(in_d, one);
  if (cm == "align_corners") {
    return f.Sel(out_w_is_1, f.C(0),
                 f.Div(f.Mul(xo, in_m1), f.Sub(out_w, one)));
  }
  if (cm == "asymmetric") return f.Div(xo, v.scale);
  if (cm == "tf_half_pixel_for_nn") return f.Div(f.Add(xo, half), v.scale);
  const int32_t span = f.Sub(v.roi_end, v.roi_start);
  const int32_t x = f.Sel(out_w_is_1, f.Div(f.Mul(span, in_m1), f.C(2)),
                          f.Div(f.Mul(f.Mul(xo, span), in_m1), f.Sub(out_w, one)));
  return f.Add(x, f.Mul(v.roi_start, in_m1));
}

// Weights of the taps first+0.. for `ratio` in (0, 1] (linear: 2, cubic: 4),
// with exclude_outside applied given the f64 value of `first`.
std::vector<int32_t> EmitWeights(Emitter& k, const ResizeSpec& p, int64_t in,
                                 int32_t ratio, int32_t first) {
  F64 f(k);
  std::vector<int32_t> w;
  const int32_t one = f.C(1);
  if (p.mode == "linear") {
    w = {f.Sub(one, ratio), ratio};
  } else {
    const int32_t a = f.C(p.cubic_a);
    const int32_t a2 = f.C(p.cubic_a + 2), a3 = f.C(p.cubic_a + 3);
    const int32_t a5 = f.C(5 * p.cubic_a), a8 = f.C(8 * p.cubic_a),
                  a4 = f.C(4 * p.cubic_a);
    auto outer = [&](int32_t t) {  // ((a*t - 5a)*t + 8a)*t - 4a
      return f.Sub(f.Mul(f.Add(f.Mul(f.Sub(f.Mul(a, t), a5), t), a8), t), a4);
    };
    auto inner = [&](int32_t t) {  // ((a+2)*t - (a+3))*t*t + 1
      return f.Add(f.Mul(f.Mul(f.Sub(f.Mul(a2, t), a3), t), t), one);
    };
    const int32_t q = f.Sub(one, ratio);
    w = {outer(f.Add(ratio, one)), inner(ratio), inner(q), outer(f.Add(q, one))};
  }
  if (p.exclude_outside) {
    const int32_t zero = f.C(0), last = f.C(static_cast<double>(in - 1));
    int32_t sum = -1;
    for (size_t t = 0; t < w.size(); ++t) {
      const int32_t j = f.Add(first, f.C(static_cast<double>(t)));
      const int32_t inside = k.Bin(OpCode::kAnd, k.Bin(OpCode::kGe, j, zero),
                                   k.Bin(OpCode::kLe, j, last));
      w[t] = f.Sel(inside, w[t], zero);
      sum = sum < 0 ? w[t] : f.Add(sum, w[t]);
    }
    const int32_t nonzero = k.Bin(OpCode::kNe, sum, zero);
    for (int32_t& wt : w) wt = f.Sel(nonzero, f.Div(wt, sum), wt);
  }
  return w;
}

// Conjunction of "not extrapolated" over tf_crop_and_resize axes, or -1.
int32_t AccumulateInside(Emitter& k, int32_t acc, const AxisSource& s, int32_t x) {
  F64 f(k);
  const int32_t inside =
      k.Bin(OpCode::kAnd, k.Bin(OpCode::kGe, x, f.C(0)),
            k.Bin(OpCode::kLe, x, f.C(static_cast<double>(s.in - 1))));
  return acc < 0 ? inside : k.Bin(OpCode::kAnd, acc, inside);
}

int32_t Finish(Emitter& k, const ResizeSpec& p, int32_t value, int32_t inside,
               DType out) {
  if (inside >= 0) {
    value = k.Sel(inside, value, k.Const(DType::kF64, p.extrapolation));
  }
  return out == DType::kF64 ? value : k.Cast(value, out);
}

// Every axis planned: nearest without extrapolation is a view, the rest a
// kernel summing a fixed set of taps.
absl::Status LowerPlanned(Lowerer& L, const ResizeSpec& p, const Operand& x,
                          const std::vector<AxisSource>& axes,
                          const std::vector<AxisPlan>& plans) {
  const size_t rank = axes.size();
  bool all_single = true;
  for (const AxisPlan& pl : plans) all_single &= pl.single;
  if (all_single && !IsTfCrop(p)) {
    Operand v = x;
    if (!x.splat.has_value()) {
      auto inner = x.index;
      v.index = [inner, plans, axes](const Coords& c) {
        Coords in(c.size());
        for (size_t d = 0; d < c.size(); ++d) {
          in[d] = TapIndex(plans[d], axes[d].in, c[d], 0);
        }
        return inner(in);
      };
    }
    L.SetOutputView(0, std::move(v));
    return absl::OkStatus();
  }
  const ir::Value& out = L.OutputValue(0);
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  F64 f(*k);
  const Coords it = k->IterCoords();
  // Per axis: the source index of each tap and its weight (-1: weight 1).
  std::vector<std::vector<IndexExpr>> tap_index(rank);
  std::vector<std::vector<int32_t>> tap_weight(rank);
  int32_t inside = -1;
  for (size_t d = 0; d < rank; ++d) {
    const AxisPlan& pl = plans[d];
    int32_t x_coord = -1;
    if (!pl.single || IsTfCrop(p)) {
      KILN_ASSIGN_OR_RETURN(AxisValues v,
                            EmitAxisValues(*k, axes[d], std::nullopt, std::nullopt));
      x_coord = EmitSourceCoord(*k, p, axes[d], v, f.Index(it[d]));
      if (IsTfCrop(p)) inside = AccumulateInside(*k, inside, axes[d], x_coord);
    }
    if (pl.single) {
      tap_index[d] = {TapIndex(pl, axes[d].in, it[d], 0)};
      tap_weight[d] = {-1};
      continue;
    }
    const int64_t shift = p.mode == "cubic" ? 1 : 0;
    const int32_t x0 = f.Index(FitExpr(pl.fit, it[d]));
    const int32_t ratio = f.Sub(x_coord, x0);
    const int32_t first = f.Sub(x0, f.C(static_cast<double>(shift)));
    tap_weight[d] = EmitWeights(*k, p, axes[d].in, ratio, first);
    for (size_t t = 0; t < tap_weight[d].size(); ++t) {
      tap_index[d].push_back(TapIndex(pl, axes[d].in, it[d],
                                      static_cast<int64_t>(t) - shift));
    }
  }
  std::vector<size_t> t(rank, 0);
  int32_t sum = -1;
  while (true) {
    Coords c(rank);
    int32_t w = -1;
    for (size_t d = 0; d < rank; ++d) {
      c[d] = tap_index[d][t[d]];
      const int32_t wd = tap_weight[d][t[d]];
      if (wd >= 0) w = w < 0 ? wd : f.Mul(w, wd);
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, c));
    int32_t term = f.Of(v);
    if (w >= 0) term = f.Mul(w, term);
    sum = sum < 0 ? term : f.Add(sum, term);
    size_t d = rank;
    while (d-- > 0) {
      if (++t[d] < tap_index[d].size()) break;
      t[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  k->Store(buffer, out.shape, it, Finish(*k, p, sum, inside, out.dtype));
  return absl::OkStatus();
}

// Scales or roi known only at run time: out = sum over the input of
// x[r] * prod_d W_d(o_d, r_d), W_d one-hot on the taps of axis d.
absl::Status LowerRunTimeScales(Lowerer& L, const ResizeSpec& p, const Operand& x,
                                const std::vector<AxisSource>& axes,
                                const std::optional<Operand>& scales,
                                const std::optional<Operand>& roi) {
  const ir::Value& out = L.OutputValue(0);
  std::vector<int64_t> red;
  double work = static_cast<double>(ir::NumElements(out.shape));
  for (const AxisSource& s : axes) {
    red.push_back(s.in);
    work *= static_cast<double>(s.in);
  }
  if (work > 1e9) {
    return L.Unimplemented(
        "scales or roi known only at run time on a large tensor (make them "
        "constants)");
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape, red);
  F64 f(*k);
  const Coords it = k->IterCoords();
  const int32_t zero = f.C(0), one = f.C(1);
  int32_t inside = -1;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> taps(axes.size());
  for (size_t d = 0; d < axes.size(); ++d) {
    const AxisSource& s = axes[d];
    KILN_ASSIGN_OR_RETURN(AxisValues v, EmitAxisValues(*k, s, scales, roi));
    const int32_t x_coord = EmitSourceCoord(*k, p, s, v, f.Index(it[d]));
    if (IsTfCrop(p)) inside = AccumulateInside(*k, inside, s, x_coord);
    const int32_t fl = k->Un(OpCode::kFloor, x_coord);
    const int32_t at_integer = f.Eq(f.Sub(x_coord, fl), zero);
    const int32_t x0 = f.Sel(at_integer, f.Sub(fl, one), fl);
    const int32_t ratio = f.Sel(at_integer, one, f.Sub(x_coord, fl));
    std::vector<std::pair<int32_t, int32_t>> raw;  // (f64 index, weight)
    if (p.mode == "nearest") {
      int32_t right;
      const std::string& m = p.nearest_mode;
      if (m == "round_prefer_floor") {
        right = k->Bin(OpCode::kGt, ratio, f.C(0.5));
      } else if (m == "round_prefer_ceil") {
        right = k->Bin(OpCode::kGe, ratio, f.C(0.5));
      } else if (m == "floor") {
        right = f.Eq(ratio, one);
      } else if (m == "ceil") {
        right = k->Bin(OpCode::kGe, ratio, zero);
      } else {
        right = k->Bin(OpCode::kLt, v.scale, one);
      }
      right = k->Bin(OpCode::kOr, right, f.Eq(ratio, one));
      raw.push_back({f.Add(x0, f.Sel(right, one, zero)), -1});
    } else {
      const double shift = p.mode == "cubic" ? 1 : 0;
      const int32_t first = f.Sub(x0, f.C(shift));
      std::vector<int32_t> w = EmitWeights(*k, p, s.in, ratio, first);
      for (size_t t = 0; t < w.size(); ++t) {
        raw.push_back({f.Add(first, f.C(static_cast<double>(t))), w[t]});
      }
    }
    const int32_t last = f.C(static_cast<double>(s.in - 1));
    for (auto& [idx, w] : raw) {
      const int32_t clamped =
          k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, idx, zero), last);
      taps[d].push_back({k->Cast(clamped, DType::kI64), w});
    }
  }
  int32_t weight = -1;
  for (size_t d = 0; d < axes.size(); ++d) {
    const int32_t rd = k->b().Index(k->r(d));
    int32_t wd = -1;
    for (auto& [idx, w] : taps[d]) {
      const int32_t term = f.Sel(k->Bin(OpCode::kEq, idx, rd), w < 0 ? one : w, zero);
      wd = wd < 0 ? term : f.Add(wd, term);
    }
    weight = weight < 0 ? wd : f.Mul(weight, wd);
  }
  Coords rc;
  for (size_t d = 0; d < axes.size(); ++d) rc.push_back(k->r(d));
  KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(x, rc));
  int32_t term = f.Of(xv);
  if (weight >= 0) term = f.Mul(weight, term);
  const int32_t sum = red.empty() ? term : k->b().Reduce(ReduceKind::kSum, term);
  k->Store(buffer, out.shape, it, Finish(*k, p, sum, inside, out.dtype));
  return absl::OkStatus();
}

// An optional scales / roi / sizes input: absent (or empty, as opset 11
// models write it), constant (`values`), or known only at run time
// (`operand`).
struct FloatInput {
  bool present = false;
  std::optional<std::vector<double>> values;
  std::optional<Operand> operand;
  int64_t count = 0;
};

absl::StatusOr<FloatInput> ReadFloatInput(Lowerer& L, int i) {
  FloatInput r;
  if (!L.HasInput(i)) return r;
  KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
  r.count = ir::NumElements(op.shape);
  if (r.count == 0) return r;
  r.present = true;
  if (const ir::Tensor* t = L.ConstantInput(i)) {
    std::vector<double> v;
    for (int64_t e = 0; e < t->num_elements(); ++e) v.push_back(t->GetAsDouble(e));
    r.values = std::move(v);
  } else {
    r.operand = op;
  }
  return r;
}

absl::Status LowerResize(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const ir::Value& out = L.OutputValue(0);
  if (static_cast<int64_t>(out.shape.size()) != rank) {
    return L.Error("output rank differs from the input's");
  }
  const bool legacy = n.op == "Upsample" || L.opset() < 11;
  ResizeSpec p;
  KILN_ASSIGN_OR_RETURN(p.mode, n.AttrOr<std::string>("mode", "nearest"));
  if (p.mode == "bilinear" || p.mode == "trilinear") p.mode = "linear";
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") {
    return L.Error("unknown mode '", p.mode, "'");
  }
  std::vector<int64_t> axes_attr;
  std::string policy = "stretch";
  FloatInput scales, roi, sizes;
  if (legacy) {
    p.coord_mode = "asymmetric";
    p.nearest_mode = "legacy";
    if (n.op == "Upsample" && L.opset() < 9) {
      KILN_ASSIGN_OR_RETURN(std::vector<float> s, n.Attr<std::vector<float>>("scales"));
      scales.present = true;
      scales.count = static_cast<int64_t>(s.size());
      scales.values = std::vector<double>(s.begin(), s.end());
    } else {
      KILN_ASSIGN_OR_RETURN(scales, ReadFloatInput(L, 1));
    }
  } else {
    KILN_ASSIGN_OR_RETURN(p.coord_mode, n.AttrOr<std::string>(
                                            "coordinate_transformation_mode",
                                            "half_pixel"));
    KILN_ASSIGN_OR_RETURN(p.nearest_mode,
                          n.AttrOr<std::string>("nearest_mode", "round_prefer_floor"));
    KILN_ASSIGN_OR_RETURN(float a, n.AttrOr<float>("cubic_coeff_a", -0.75f));
    KILN_ASSIGN_OR_RETURN(float ev, n.AttrOr<float>("extrapolation_value", 0.0f));
    KILN_ASSIGN_OR_RETURN(int64_t eo, n.AttrOr<int64_t>("exclude_outside", 0));
    KILN_ASSIGN_OR_RETURN(int64_t antialias, n.AttrOr<int64_t>("antialias", 0));
    KILN_ASSIGN_OR_RETURN(policy, n.AttrOr<std::string>("keep_aspect_ratio_policy",
                                                        "stretch"));
    KILN_ASSIGN_OR_RETURN(axes_attr, n.AttrOr<std::vector<int64_t>>("axes", {}));
    p.cubic_a = a;
    p.extrapolation = ev;
    p.exclude_outside = eo != 0;
    if (antialias != 0) {
      return L.Unimplemented("antialias=1 is not supported by the lowering");
    }
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
      return L.Error("unknown keep_aspect_ratio_policy '", policy, "'");
    }
    KILN_ASSIGN_OR_RETURN(roi, ReadFloatInput(L, 1));
    KILN_ASSIGN_OR_RETURN(scales, ReadFloatInput(L, 2));
    KILN_ASSIGN_OR_RETURN(sizes, ReadFloatInput(L, 3));
  }
  static const char* const kCoordModes[] = {
      "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::none_of(std::begin(kCoordModes), std::end(kCoordModes),
                   [&](const char* m) { return p.coord_mode == m; })) {
    return L.Error("unknown coordinate_transformation_mode '", p.coord_mode, "'");
  }
  if (p.mode == "nearest" && p.nearest_mode != "legacy" &&
      p.nearest_mode != "round_prefer_floor" && p.nearest_mode != "round_prefer_ceil" &&
      p.nearest_mode != "floor" && p.nearest_mode != "ceil") {
    return L.Error("unknown nearest_mode '", p.nearest_mode, "'");
  }
  std::vector<int64_t> axes = axes_attr;
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  } else {
    std::vector<bool> seen(rank, false);
    for (int64_t& a : axes) {
      std::optional<int64_t> norm = NormalizeAxis(a, rank);
      if (!norm.has_value()) return L.Error("axis ", a, " out of range");
      if (seen[*norm]) return L.Error("axes repeat axis ", *norm);
      seen[*norm] = true;
      a = *norm;
    }
  }
  const int64_t naxes = static_cast<int64_t>(axes.size());
  if (scales.present == sizes.present) {
    return L.Error(scales.present ? "only one of scales and sizes may be given"
                                  : "one of scales and sizes must be given");
  }
  const FloatInput& given = scales.present ? scales : sizes;
  if (given.count != naxes) {
    return L.Error(scales.present ? "scales" : "sizes", " has ", given.count,
                   " values, expected ", naxes);
  }
  if (!ir::IsFloat(x.dtype) && p.mode != "nearest") {
    return L.Unimplemented(p.mode, " interpolation of ", ir::DTypeName(x.dtype));
  }

  std::vector<AxisSource> src(rank);
  for (int64_t d = 0; d < rank; ++d) {
    src[d].in = x.shape[d];
    src[d].out = out.shape[d];
    src[d].scale = 1.0;
    src[d].roi_start = 0.0;
    src[d].roi_end = 1.0;
    if (src[d].in == 0 && src[d].out > 0) return L.Error("cannot resize an empty axis");
  }
  Shape expect = x.shape;
  if (sizes.present) {
    if (sizes.values.has_value()) {
      std::vector<double> sc(naxes);
      for (int64_t i = 0; i < naxes; ++i) {
        const double s = (*sizes.values)[i];
        if (s < 0) return L.Error("sizes must be non-negative");
        if (x.shape[axes[i]] == 0) return L.Error("cannot resize an empty axis");
        sc[i] = s / static_cast<double>(x.shape[axes[i]]);
        expect[axes[i]] = static_cast<int64_t>(s);
      }
      if (policy != "stretch") {
        double s = sc[0];
        for (double v : sc) s = policy == "not_larger" ? std::min(s, v) : std::max(s, v);
        for (int64_t i = 0; i < naxes; ++i) {
          sc[i] = s;
          expect[axes[i]] = static_cast<int64_t>(s * x.shape[axes[i]] + 0.5);
        }
      }
      for (int64_t i = 0; i < naxes; ++i) src[axes[i]].scale = sc[i];
    } else {
      if (policy != "stretch") {
        return L.Unimplemented("keep_aspect_ratio_policy '", policy,
                               "' with sizes known only at run time");
      }
      // The output shape is static, so it is the sizes.
      for (int64_t a : axes) {
        if (x.shape[a] == 0) return L.Error("cannot resize an empty axis");
        src[a].scale = static_cast<double>(out.shape[a]) /
                       static_cast<double>(x.shape[a]);
        expect[a] = out.shape[a];
      }
    }
  } else if (scales.values.has_value()) {
    for (int64_t i = 0; i < naxes; ++i) {
      const double s = (*scales.values)[i];
      if (!(s > 0) || !std::isfinite(s)) {
        return L.Error("scales must be positive, got ", s);
      }
      src[axes[i]].scale = s;
      expect[axes[i]] =
          static_cast<int64_t>(std::floor(s * static_cast<double>(x.shape[axes[i]])));
    }
  } else {
    for (int64_t i = 0; i < naxes; ++i) {
      src[axes[i]].scale.reset();
      src[axes[i]].scale_slot = static_cast<int>(i);
      expect[axes[i]] = out.shape[axes[i]];
    }
  }
  if (expect != out.shape) {
    return L.Error("output shape ", ir::ShapeToString(out.shape),
                   " differs from the resize's ", ir::ShapeToString(expect));
  }
  if (IsTfCrop(p)) {
    if (!roi.present || roi.count != 2 * naxes) {
      return L.Error("roi has ", roi.count, " values, expected ", 2 * naxes);
    }
    for (int64_t i = 0; i < naxes; ++i) {
      AxisSource& s = src[axes[i]];
      if (roi.values.has_value()) {
        s.roi_start = (*roi.values)[i];
        s.roi_end = (*roi.values)[naxes + i];
      } else {
        s.roi_start.reset();
        s.roi_end.reset();
        s.roi_start_slot = static_cast<int>(i);
        s.roi_end_slot = static_cast<int>(naxes + i);
      }
    }
  }
  bool planned = true;
  std::vector<AxisPlan> plans;
  for (const AxisSource& s : src) {
    if (!s.scale.has_value() || (IsTfCrop(p) && !s.roi_start.has_value())) {
      planned = false;
      break;
    }
    std::optional<AxisPlan> pl = PlanAxis(p, s);
    if (!pl.has_value()) {
      planned = false;
      break;
    }
    plans.push_back(*pl);
  }
  if (planned) return LowerPlanned(L, p, x, src, plans);
  return LowerRunTimeScales(L, p, x, src, scales.operand, roi.operand);
}

// ---- GridSample.

// Value-op form of the reference's Reflect(x, lo, hi) (f64).
int32_t ReflectValue(Emitter& k, int32_t x, double lo, double hi) {
  const double range = hi - lo;
  auto c = [&](double v) { return k.Const(DType::kF64, v); };
  if (range <= 0) return c(lo);
  const int32_t below = k.Bin(OpCode::kLt, x, c(lo));
  const int32_t above = k.Bin(OpCode::kGt, x, c(hi));
  const int32_t dx = k.Sel(below, k.Bin(OpCode::kSub, c(lo), x), k.Bin(OpCode::kSub, x, c(hi)));
  const int32_t n = k.Un(OpCode::kFloor, k.Bin(OpCode::kDiv, dx, c(range)));
  const int32_t rem = k.Bin(OpCode::kSub, dx, k.Bin(OpCode::kMul, n, c(range)));
  const int32_t even = k.Bin(OpCode::kEq, k.Bin(OpCode::kFmod, n, c(2)), c(0));
  const int32_t from_lo = k.Bin(OpCode::kAdd, c(lo), rem);
  const int32_t from_hi = k.Bin(OpCode::kSub, c(hi), rem);
  const int32_t reflected =
      k.Sel(below, k.Sel(even, from_lo, from_hi), k.Sel(even, from_hi, from_lo));
  return k.Sel(k.Bin(OpCode::kOr, below, above), reflected, x);
}

enum class GridPad { kZeros, kBorder, kReflection };

absl::Status LowerGridSample(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand grid, L.Input(1));
  if (!ir::IsFloat(x.dtype) || !ir::IsFloat(grid.dtype)) {
    return L.Error("X and grid must be float");
  }
  const int64_t r = static_cast<int64_t>(x.shape.size()) - 2;
  if (r < 1 || static_cast<int64_t>(grid.shape.size()) != r + 2 ||
      grid.shape[0] != x.shape[0] || grid.shape[r + 1] != r) {
    return L.Error("X ", ir::ShapeToString(x.shape), " and grid ",
                   ir::ShapeToString(grid.shape),
                   " must be [N, C, d1..dr] and [N, D1..Dr, r]");
  }
  KILN_ASSIGN_OR_RETURN(std::string mode, n.AttrOr<std::string>("mode", "bilinear"));
  KILN_ASSIGN_OR_RETURN(std::string pad_name, n.AttrOr<std::string>("padding_mode", "zeros"));
  KILN_ASSIGN_OR_RETURN(int64_t align, n.AttrOr<int64_t>("align_corners", 0));
  int taps;
  if (mode == "bilinear" || mode == "linear") {
    taps = 2;
  } else if (mode == "nearest") {
    taps = 1;
  } else if (mode == "bicubic" || mode == "cubic") {
    taps = 4;
  } else {
    return L.Error("unknown mode '", mode, "'");
  }
  GridPad pad;
  if (pad_name == "zeros") {
    pad = GridPad::kZeros;
  } else if (pad_name == "border") {
    pad = GridPad::kBorder;
  } else if (pad_name == "reflection") {
    pad = GridPad::kReflection;
  } else {
    return L.Error("unknown padding_mode '", pad_name, "'");
  }
  int64_t num_taps = 1;
  for (int64_t d = 0; d < r; ++d) num_taps *= taps;
  if (num_taps > 256) return L.Unimplemented(num_taps, " interpolation taps per point");
  const ir::Value& out = L.OutputValue(0);
  Shape want = {x.shape[0], x.shape[1]};
  want.insert(want.end(), grid.shape.begin() + 1, grid.shape.end() - 1);
  if (out.shape != want || out.dtype != x.dtype) {
    return L.Error("output must be ", ir::DTypeName(x.dtype), ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(want) == 0) return absl::OkStatus();
  const Shape dims(x.shape.begin() + 2, x.shape.end());
  const int64_t plane = ir::NumElements(dims);
  auto k = L.NewKernel(want);
  const Coords it = k->IterCoords();
  auto f64 = [&](double v) { return k->Const(DType::kF64, v); };
  auto i64 = [&](int64_t v) { return k->Const(DType::kI64, v); };
  if (plane == 0) {
    k->Store(buffer, want, it, k->Const(x.dtype, 0));
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(int32_t src, L.Materialize(x));
  // Per dim: the taps' indices (i64, valid when `ok`) and weights (f64).
  std::vector<std::vector<int32_t>> tap_idx(r), tap_ok(r), tap_w(r);
  std::vector<int64_t> strides(r, 1);
  for (int64_t d = r - 1; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
  for (int64_t d = 0; d < r; ++d) {
    const double dim = static_cast<double>(dims[d]);
    const double lo = align ? 0.0 : -0.5, hi = align ? dim - 1 : dim - 0.5;
    Coords gc = {it[0]};
    gc.insert(gc.end(), it.begin() + 2, it.end());
    gc.push_back(Const(r - 1 - d));
    KILN_ASSIGN_OR_RETURN(int32_t g, k->Load(grid, gc));
    g = k->Cast(g, DType::kF64);
    const int32_t g1 = k->Bin(OpCode::kAdd, g, f64(1));
    int32_t v = align ? k->Bin(OpCode::kMul, k->Bin(OpCode::kDiv, g1, f64(2)), f64(dim - 1))
                      : k->Bin(OpCode::kDiv, k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, g1, f64(dim)), f64(1)),
                               f64(2));
    if (taps == 1) {
      if (r == 3) {  // std::round: half away from zero
        const int32_t a = k->Un(OpCode::kFloor, k->Bin(OpCode::kAdd, k->Un(OpCode::kAbs, v), f64(0.5)));
        v = k->Sel(k->Bin(OpCode::kLt, v, f64(0)), k->Un(OpCode::kNeg, a), a);
      } else {
        v = k->Un(OpCode::kRound, v);
      }
    }
    const int32_t outside = k->Bin(OpCode::kOr, k->Bin(OpCode::kLt, v, f64(lo)),
                                   k->Bin(OpCode::kGt, v, f64(hi)));
    if (pad == GridPad::kBorder) {
      v = k->Sel(outside,
                 k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, v, f64(0)), f64(dim - 1)), v);
    } else if (pad == GridPad::kReflection) {
      v = ReflectValue(*k, v, lo, hi);
    }
    // Integer tap i (f64, integral) -> index after padding, and validity.
    auto tap = [&](int32_t i, int32_t* idx, int32_t* ok) {
      const int32_t finite = k->Bin(OpCode::kLt, k->Un(OpCode::kAbs, i), f64(1e18));
      const int32_t safe = k->Sel(finite, i, f64(0));
      switch (pad) {
        case GridPad::kZeros: {
          *ok = k->Bin(OpCode::kAnd, finite,
                       k->Bin(OpCode::kAnd, k->Bin(OpCode::kGe, safe, f64(0)),
                              k->Bin(OpCode::kLt, safe, f64(dim))));
          *idx = k->Cast(k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, safe, f64(0)), f64(dim - 1)),
                         DType::kI64);
          return;
        }
        case GridPad::kBorder:
          *ok = finite;
          *idx = k->Cast(k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, safe, f64(0)), f64(dim - 1)),
                         DType::kI64);
          return;
        case GridPad::kReflection: {
          *ok = finite;
          const int32_t rf = ReflectValue(*k, safe, lo, hi);
          // Truncation toward zero, then the clamp.
          const int32_t t = k->Sel(k->Bin(OpCode::kLt, rf, f64(0)), k->Un(OpCode::kCeil, rf),
                                   k->Un(OpCode::kFloor, rf));
          *idx = k->Cast(k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, t, f64(0)), f64(dim - 1)),
                         DType::kI64);
          return;
        }
      }
    };
    if (taps == 1) {
      const int32_t t = k->Sel(k->Bin(OpCode::kLt, v, f64(0)), k->Un(OpCode::kCeil, v),
                               k->Un(OpCode::kFloor, v));
      int32_t idx, ok;
      tap(t, &idx, &ok);
      tap_idx[d] = {idx};
      tap_ok[d] = {ok};
      tap_w[d] = {f64(1)};
      continue;
    }
    const int32_t f = k->Un(OpCode::kFloor, v);
    const int32_t frac = k->Bin(OpCode::kSub, v, f);
    std::vector<int32_t> w;
    if (taps == 2) {
      w = {k->Bin(OpCode::kSub, f64(1), frac), frac};
    } else {
      // Keys' cubic weights (a = -0.75) for taps -1..2 at distance |frac|.
      const double a = -0.75;
      const int32_t x0 = k->Un(OpCode::kAbs, frac);
      auto far = [&](int32_t t) {  // ((a t - 5a) t + 8a) t - 4a, t in [1, 2]
        int32_t e = k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, f64(a), t), f64(5 * a));
        e = k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, e, t), f64(8 * a));
        return k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, e, t), f64(4 * a));
      };
      auto near = [&](int32_t t) {  // ((a + 2) t - (a + 3)) t t + 1, t in [0, 1]
        int32_t e = k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, f64(a + 2), t), f64(a + 3));
        return k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, k->Bin(OpCode::kMul, e, t), t), f64(1));
      };
      w = {far(k->Bin(OpCode::kAdd, x0, f64(1))), near(x0),
           near(k->Bin(OpCode::kSub, f64(1), x0)), far(k->Bin(OpCode::kSub, f64(2), x0))};
    }
    for (int j = 0; j < taps; ++j) {
      const int32_t i = k->Bin(OpCode::kAdd, f, f64(taps == 2 ? j : j - 1));
      int32_t idx, ok;
      tap(i, &idx, &ok);
      // A non-finite floor reads nothing (the reference's weight 0).
      ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kLt, k->Un(OpCode::kAbs, f), f64(1e18)));
      tap_idx[d].push_back(idx);
      tap_ok[d].push_back(ok);
      tap_w[d].push_back(w[j]);
    }
  }
  const IndexExpr base = k->Simplify((it[0] * x.shape[1] + it[1]) * plane);
  int32_t acc = f64(0);
  for (int64_t t = 0; t < num_taps; ++t) {
    int64_t rest = t;
    int32_t offset = i64(0), w = f64(1), ok = k->Const(DType::kBool, 1);
    for (int64_t d = r - 1; d >= 0; --d) {
      const int j = static_cast<int>(rest % taps);
      rest /= taps;
      ok = k->Bin(OpCode::kAnd, ok, tap_ok[d][j]);
      w = k->Bin(OpCode::kMul, w, tap_w[d][j]);
      offset = k->Bin(OpCode::kAdd, offset,
                      k->Bin(OpCode::kMul, tap_idx[d][j], i64(strides[d])));
    }
    ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kNe, w, f64(0)));
    const int32_t val = k->Cast(
        k->b().LoadIndirect(src, base, k->Sel(ok, offset, i64(0)), plane, 1), DType::kF64);
    acc = k->Bin(OpCode::kAdd, acc, k->Sel(ok, k->Bin(OpCode::kMul, w, val), f64(0)));
  }
  k->Store(buffer, want, it, k->Cast(acc, x.dtype));
  return absl::OkStatus();
}

}  // namespace

void AddTensorLowerings(LowerTable& t) {
  for (const char* op : {"Reshape", "Squeeze", "Unsqueeze"}) t.Add(op, ReshapeView);
  t.Add("Transpose", LowerTranspose);
  t.Add("Tile", LowerTile);
  t.Add("Slice", LowerSlice);
  t.Add("Split", LowerSplit);
  t.Add("DepthToSpace", [](Lowerer& L, const ir::Node& n) {
    return LowerDepthToSpace(L, n, true);
  });
  t.Add("SpaceToDepth", [](Lowerer& L, const ir::Node& n) {
    return LowerDepthToSpace(L, n, false);
  });
  t.Add("Concat", LowerConcat);
  t.Add("Pad", LowerPad);
  t.Add("Trilu", LowerTrilu);
  t.Add("ReverseSequence", LowerReverseSequence);
  t.Add("Gather", LowerGather);
  t.Add("GatherElements", LowerGatherElements);
  t.Add("GatherND", LowerGatherNd);
  t.Add("OneHot", LowerOneHot);
  t.Add("ScatterElements", LowerScatterElements);
  t.Add("Scatter", LowerScatterElements);
  t.Add("ScatterND", LowerScatterND);
  t.Add("Shape", LowerShape);
  t.Add("Size", LowerSize);
  t.Add("IsNaN", SimpleUnary(OpCode::kIsNan, true));
  t.Add("IsInf", LowerIsInf);
  t.Add("Where", LowerWhere);
  t.Add("Cast", LowerCast);
  t.Add("CastLike", LowerCast);
  t.Add("Identity", LowerIdentity);
  t.Add("Resize", LowerResize);
  t.Add("Upsample", LowerResize);
  t.Add("GridSample", LowerGridSample);
  for (const char* op : {"NonZero", "Unique", "Compress"}) {
    t.Add(op, RefuseDataDependentShape);
  }
}

}  // namespace kiln::lowering::internal
