// Lowerings of data-movement and shape ops. View ops (Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Slice, Split, Expand, Tile, DepthToSpace,
// SpaceToDepth, Pad edge/reflect/wrap, Gather with an arithmetic index
// sequence) compose an index function and emit no kernel; Concat, constant
// Pad, and Gather / GatherElements by other indices emit kernels (a checked
// load_indirect: an out-of-range index fails the kernel); Shape, Size,
// ConstantOfShape and constant Range fold at lowering time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/status_macros.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;
using CoordMap = std::function<Coords(const Coords&)>;

// Output i reads `src` at map(output coordinates).
void SetView(Lowerer& L, int i, const Operand& src, CoordMap map) {
  Operand v = src;
  if (!src.splat.has_value()) {
    auto inner = src.index;
    v.index = [inner, map](const Coords& c) { return inner(map(c)); };
  }
  L.SetOutputView(i, std::move(v));
}

absl::Status ReshapeView(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const Shape in = x.shape, out = L.OutputValue(0).shape;
  if (ir::NumElements(in) != ir::NumElements(out)) {
    return L.Error("cannot view ", ir::ShapeToString(in), " as ",
                   ir::ShapeToString(out));
  }
  SetView(L, 0, x, [in, out](const Coords& c) {
    return Delinearize(in, LinearIndex(out, c));
  });
  return absl::OkStatus();
}

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

absl::Status LowerPad(Lowerer& L, const ir::Node& n) {
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

absl::Status LowerConstantOfShape(Lowerer& L, const ir::Node& n) {
  const ir::Value& out = L.OutputValue(0);
  double v = 0;
  if (n.HasAttr("value")) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, n.Attr<ir::Tensor>("value"));
    if (t.num_elements() != 1 || t.dtype() != out.dtype) {
      return L.Error("value must be one element of the output dtype");
    }
    v = t.GetAsDouble(0);
  } else if (out.dtype != DType::kF32) {
    return L.Error("output must be f32 without a value attribute");
  }
  Operand op;
  op.splat = v;
  L.SetOutputView(0, op);
  return absl::OkStatus();
}

absl::Status LowerRange(Lowerer& L, const ir::Node& n) {
  const ir::Value& out = L.OutputValue(0);
  const DType dt = out.dtype;
  if (dt == DType::kBool || out.shape.size() != 1) return L.Error("bad output type");
  const int64_t count = out.shape[0];
  const ir::Tensor* s = L.ConstantInput(0);
  const ir::Tensor* d = L.ConstantInput(2);
  if (s != nullptr && d != nullptr && L.ConstantInput(1) != nullptr) {
    ir::Tensor t(dt, out.shape);
    for (int64_t i = 0; i < count; ++i) {
      ir::Tensor one = ir::IsFloat(dt)
                           ? ir::Tensor::Scalar<double>(s->GetAsDouble(0) +
                                                        i * d->GetAsDouble(0))
                           : ir::Tensor::Scalar<int64_t>(
                                 static_cast<int64_t>(static_cast<uint64_t>(s->GetAsInt64(0)) +
                                                      static_cast<uint64_t>(i) *
                                                          static_cast<uint64_t>(d->GetAsInt64(0))));
      switch (dt) {
        case DType::kF32: t.data<float>()[i] = static_cast<float>(one.GetAsDouble(0)); break;
        case DType::kF64: t.data<double>()[i] = one.GetAsDouble(0); break;
        case DType::kI64: t.data<int64_t>()[i] = one.GetAsInt64(0); break;
        case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(one.GetAsInt64(0)); break;
        default: return L.Unimplemented("Range of ", ir::DTypeName(dt));
      }
    }
    L.SetOutputConstant(0, std::move(t));
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(Operand start, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand delta, L.Input(2));
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  const Coords c = k->IterCoords();
  const size_t sr = start.shape.size(), dr = delta.shape.size();
  KILN_ASSIGN_OR_RETURN(int32_t sv, k->Load(start, Coords(sr, Const(0))));
  KILN_ASSIGN_OR_RETURN(int32_t dv, k->Load(delta, Coords(dr, Const(0))));
  const DType cd = ir::IsFloat(dt) ? DType::kF64 : DType::kI64;
  const int32_t i = k->b().Index(c[0], cd);
  int32_t r = k->Bin(OpCode::kAdd, k->Cast(sv, cd),
                     k->Bin(OpCode::kMul, i, k->Cast(dv, cd)));
  k->Store(buffer, out.shape, c, k->Cast(r, dt));
  return absl::OkStatus();
}

}  // namespace

void AddMovementLowerings(LowerTable& t) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) {
    t[op] = ReshapeView;
  }
  t["Transpose"] = LowerTranspose;
  t["Expand"] = LowerExpand;
  t["Tile"] = LowerTile;
  t["Slice"] = LowerSlice;
  t["Split"] = LowerSplit;
  t["DepthToSpace"] = [](Lowerer& L, const ir::Node& n) {
    return LowerDepthToSpace(L, n, true);
  };
  t["SpaceToDepth"] = [](Lowerer& L, const ir::Node& n) {
    return LowerDepthToSpace(L, n, false);
  };
  t["Concat"] = LowerConcat;
  t["Gather"] = LowerGather;
  t["GatherElements"] = LowerGatherElements;
  t["Pad"] = LowerPad;
  t["Shape"] = LowerShape;
  t["Size"] = LowerSize;
  t["ConstantOfShape"] = LowerConstantOfShape;
  t["Range"] = LowerRange;
}

}  // namespace kiln::lowering::internal
