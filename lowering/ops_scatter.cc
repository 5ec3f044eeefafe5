// Lowerings that write at data-dependent places, with the loop IR's checked
// store_indirect: ScatterElements / Scatter, ScatterND and MaxUnpool (a copy
// of `data` (or zeros) into the output buffer, then one kernel over the
// updates that stores each at its index, in row-major order of the updates,
// so duplicate indices with reduction none keep the last update, as the
// reference interpreter does); and CumSum (see LowerCumSum).
#include "lowering/ops_scatter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "ir/status_macros.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;
using ir::loop::StoreCombine;

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * std::max<int64_t>(shape[d], 1);
  return s;
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

// MaxUnpool: zeros, then X[i] at flat position I[i] of the shape MaxPool's
// input had (inferred from the attributes); an output_shape larger than that
// pads each spatial dim at its end. A runtime output_shape must equal the
// static output shape (checked per element: a mismatch is an index error).
absl::Status LowerMaxUnpool(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand ind, L.Input(1));
  const size_t rank = x.shape.size();
  if (rank < 3) return L.Error("X must have rank >= 3");
  if (ind.shape != x.shape || !ir::IsInteger(ind.dtype)) {
    return L.Error("I must be integers of X's shape");
  }
  const size_t nd = rank - 2;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, n.Attr<std::vector<int64_t>>("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                        n.AttrOr<std::vector<int64_t>>("strides", std::vector<int64_t>(nd, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                        n.AttrOr<std::vector<int64_t>>("pads", std::vector<int64_t>(2 * nd, 0)));
  if (kernel.size() != nd || strides.size() != nd || pads.size() != 2 * nd) {
    return L.Error("kernel_shape, strides and pads do not match X's spatial rank");
  }
  Shape inferred = {x.shape[0], x.shape[1]};
  for (size_t i = 0; i < nd; ++i) {
    inferred.push_back((x.shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[nd + i]);
  }
  const Shape out_shape = L.OutputValue(0).shape;
  bool fits = out_shape.size() == inferred.size();
  for (size_t d = 0; fits && d < rank; ++d) {
    fits = d < 2 ? out_shape[d] == inferred[d] : out_shape[d] >= inferred[d];
  }
  if (!fits || (!L.HasInput(2) && out_shape != inferred)) {
    return L.Error("output shape ", ir::ShapeToString(out_shape), " does not fit the unpooled ",
                   ir::ShapeToString(inferred));
  }
  std::optional<Operand> shape_op;
  if (L.HasInput(2)) {
    if (const ir::Tensor* t = L.ConstantInput(2)) {
      if (t->ToInt64Vector() != out_shape) return L.Error("output_shape differs from the output's");
    } else {
      KILN_ASSIGN_OR_RETURN(shape_op, L.Input(2));
      if (shape_op->shape != Shape{static_cast<int64_t>(rank)} ||
          !ir::IsInteger(shape_op->dtype)) {
        return L.Error("output_shape must hold ", rank, " integers");
      }
    }
  }
  const int64_t total_out = ir::NumElements(out_shape);
  if (total_out == 0) {
    if (ir::NumElements(x.shape) > 0) return L.Error("unpools into an empty output");
    L.SetOutputConstant(0, ir::Tensor(x.dtype, out_shape));
    return absl::OkStatus();
  }
  const int32_t out = L.OutputBuffer(0);
  {
    auto z = L.NewKernel(out_shape);
    z->Store(out, out_shape, z->IterCoords(), z->Const(x.dtype, 0));
  }
  if (ir::NumElements(x.shape) == 0) return absl::OkStatus();
  const DType i64 = DType::kI64;
  auto k = L.NewKernel(x.shape);
  const Coords c = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t raw, k->Load(ind, c));
  const int32_t j = ind.dtype == i64 ? raw : k->Cast(raw, i64);
  const int64_t total = ir::NumElements(inferred);
  int32_t valid = k->Bin(OpCode::kAnd, k->Bin(OpCode::kGe, j, k->Const(i64, 0)),
                         k->Bin(OpCode::kLt, j, k->Const(i64, static_cast<double>(total))));
  int32_t offset = j;
  if (out_shape != inferred) {
    const std::vector<int64_t> in_strides = Strides(inferred), out_strides = Strides(out_shape);
    offset = -1;
    for (size_t d = 0; d < rank; ++d) {
      int32_t coord = k->Bin(OpCode::kDiv, j, k->Const(i64, static_cast<double>(in_strides[d])));
      if (d > 0) coord = k->Bin(OpCode::kMod, coord, k->Const(i64, static_cast<double>(inferred[d])));
      const int32_t term = k->Bin(OpCode::kMul, coord, k->Const(i64, static_cast<double>(out_strides[d])));
      offset = offset < 0 ? term : k->Bin(OpCode::kAdd, offset, term);
    }
  }
  if (shape_op.has_value()) {
    for (size_t d = 0; d < rank; ++d) {
      KILN_ASSIGN_OR_RETURN(int32_t sv, k->Load(*shape_op, {Const(static_cast<int64_t>(d))}));
      const int32_t s = shape_op->dtype == i64 ? sv : k->Cast(sv, i64);
      valid = k->Bin(OpCode::kAnd, valid,
                     k->Bin(OpCode::kEq, s, k->Const(i64, static_cast<double>(out_shape[d]))));
    }
  }
  const int32_t nidx = k->Sel(valid, offset, k->Const(i64, static_cast<double>(total_out)));
  KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(x, c));
  k->b().StoreIndirect(out, Const(0), xv, nidx, total_out, 1);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// CumSum.
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

absl::StatusOr<int32_t> ScratchBuffer(Lowerer& L, const std::string& stem, DType dtype,
                                      const Shape& shape) {
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
      int32_t acc, ScratchBuffer(L, absl::StrCat(k->b().kernel().name, "_acc"), acc_t,
                                 {outer, len, inner}));
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

}  // namespace

void AddScatterLowerings(LowerTable& t) {
  t["ScatterElements"] = LowerScatterElements;
  t["Scatter"] = LowerScatterElements;
  t["ScatterND"] = LowerScatterND;
  t["MaxUnpool"] = LowerMaxUnpool;
  t["CumSum"] = LowerCumSum;
}

}  // namespace kiln::lowering::internal
