// File: lowering/kernel_util.cc — the helpers kernel_util.h declares.
#include "lowering/kernel_util.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"

namespace kiln::lowering::internal {

absl::StatusOr<int32_t> LoadIndirectAlong(Lowerer& L, Emitter& k,
                                          const Operand& data, Coords dc,
                                          int64_t axis,
                                          const std::vector<int64_t>& extents,
                                          int32_t n) {
  const int64_t dim = data.shape[axis];
  if (dim <= 0) {
    return L.Error("reads by index from an empty axis of ",
                   ir::ShapeToString(data.shape));
  }
  if (k.DTypeOf(n) != DType::kI64) n = k.Cast(n, DType::kI64);
  dc[axis] = ir::loop::Const(0);
  const int placeholder = static_cast<int>(extents.size());
  std::vector<int64_t> with_axis = extents;
  with_axis.push_back(dim);
  std::optional<int64_t> stride;
  int32_t buffer = -1;
  IndexExpr base;
  if (data.splat.has_value()) {
    // Still a checked read, of a buffer holding the splat.
    KILN_ASSIGN_OR_RETURN(buffer, L.Materialize(data));
  } else {
    Coords pc = dc;
    pc[axis] = ir::loop::Var(placeholder);
    stride = ir::loop::StrideOf(ir::loop::Simplify(data.index(pc), with_axis),
                                placeholder);
    if (stride.has_value()) {
      KILN_ASSIGN_OR_RETURN(buffer, L.BufferOf(data.root));
      base = k.Simplify(data.index(dc));
    } else {
      KILN_ASSIGN_OR_RETURN(buffer, L.Materialize(data));
    }
  }
  if (!stride.has_value()) {
    base = RowMajor(k, data.shape, dc);
    int64_t s = 1;
    for (size_t d = data.shape.size(); d-- > static_cast<size_t>(axis) + 1;) {
      s *= data.shape[d];
    }
    stride = s;
  }
  return k.b().LoadIndirect(buffer, base, n, dim, *stride);
}

int32_t NonNegativeIndex(Emitter& k, int32_t n, int64_t dim) {
  if (k.DTypeOf(n) != DType::kI64) n = k.Cast(n, DType::kI64);
  const int32_t bad =
      k.Bin(OpCode::kOr, k.Bin(OpCode::kLt, n, k.Const(DType::kI64, 0)),
            k.Bin(OpCode::kGe, n, k.Const(DType::kI64, dim)));
  return k.Sel(bad, k.Const(DType::kI64, dim), n);
}

absl::StatusOr<int32_t> ScratchBuffer(Lowerer& L, DType dtype,
                                      const Shape& shape) {
  Operand zero;
  zero.dtype = dtype;
  zero.shape = shape;
  zero.splat = 0.0;
  zero.index = [shape](const Coords& c) { return LinearIndex(shape, c); };
  return L.Materialize(zero);
}

absl::StatusOr<int32_t> LoadIfValid(Lowerer& L, Emitter& k, const Operand& op,
                                    const Coords& coords, int32_t ok) {
  KILN_ASSIGN_OR_RETURN(int32_t buffer, op.splat.has_value() ? L.Materialize(op)
                                                             : L.BufferOf(op.root));
  const IndexExpr index = op.splat.has_value() ? RowMajor(k, op.shape, coords)
                                               : k.Simplify(op.index(coords));
  const int32_t n = k.Sel(ok, k.Const(DType::kI64, 0), k.Const(DType::kI64, 1));
  return k.b().LoadIndirect(buffer, index, n, /*extent=*/1, /*stride=*/0);
}

int32_t NewOutput(Lowerer& L, int i) {
  const int32_t buffer = L.OutputBuffer(i);
  const Shape shape = L.OutputValue(i).shape;
  if (ir::NumElements(shape) == 0) {
    auto k = L.NewKernel(shape);
    k->Store(buffer, shape, k->IterCoords(), k->Const(L.OutputValue(i).dtype, 0));
  }
  return buffer;
}

IndexExpr RowMajor(Emitter& k, const Shape& shape, const Coords& coords) {
  return k.Simplify(LinearIndex(shape, coords));
}

std::vector<int64_t> Extents(const Shape& s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

std::pair<double, double> QuantRange(DType dt) {
  if (dt == DType::kI8) return {-128, 127};
  return {0, 255};
}

bool IsQuantType(DType dt) { return dt == DType::kU8 || dt == DType::kI8; }

absl::Status CheckQuantInput(Lowerer& L, int i, const char* what, DType dtype,
                             int64_t per_channel) {
  if (!L.HasInput(i)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
  if (dtype == DType::kInvalid ? !ir::IsFloat(op.dtype) : op.dtype != dtype) {
    return L.Error(what, " is ", ir::DTypeName(op.dtype), ", expected ",
                   dtype == DType::kInvalid ? "a float type" : ir::DTypeName(dtype));
  }
  const int64_t count = ir::NumElements(op.shape);
  const bool one = count == 1 && op.shape.size() <= 1;
  const bool channels = per_channel > 0 && op.shape.size() == 1 && count == per_channel;
  if (!one && !channels) {
    return L.Error(what, " has shape ", ir::ShapeToString(op.shape), ", expected ",
                   per_channel > 0 ? absl::StrCat("one value or [", per_channel, "]")
                                   : std::string("one value"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * std::max<int64_t>(shape[d], 1);
  return s;
}

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

Coords ReductionInputCoords(Emitter& k, size_t rank,
                            const std::vector<int64_t>& axes, bool keepdims) {
  Coords c(rank);
  int next_i = 0, next_r = 0;
  for (size_t d = 0; d < rank; ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(),
                                   static_cast<int64_t>(d)) != axes.end();
    if (reduced) {
      c[d] = k.r(next_r++);
      if (keepdims) ++next_i;
    } else {
      c[d] = k.i(next_i++);
    }
  }
  return c;
}

absl::Status RefuseDataDependentShape(Lowerer& L, const ir::Node&) {
  return L.Unimplemented(
      "the output shape depends on the input values; kiln compiles static "
      "shapes only");
}

}  // namespace kiln::lowering::internal
