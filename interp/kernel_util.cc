// File: interp/kernel_util.cc — the helpers kernel_util.h declares.
#include "interp/kernel_util.h"

#include "ir/status_macros.h"

namespace kiln::interp {

using ir::DType;
using ir::Shape;

std::vector<double> ReadDoubles(const Tensor& t) {
  std::vector<double> out(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) out[i] = t.GetAsDouble(i);
  return out;
}

Tensor MakeTensor(DType dtype, Shape shape, const std::vector<double>& v) {
  Tensor t(dtype, std::move(shape));
  DispatchDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = FromDouble<T>(v[i]);
  });
  return t;
}

std::optional<DType> DTypeFromOnnx(int64_t onnx_type) {
  switch (onnx_type) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 16: return DType::kBF16;
    case 11: return DType::kF64;
    default: return std::nullopt;
  }
}

DType DeclaredDType(const OpContext& ctx, int i, DType fallback) {
  if (i >= ctx.num_outputs()) return fallback;
  const ir::ValueId id = ctx.node.outputs[i];
  if (id == ir::kNoValue) return fallback;
  const DType d = ctx.graph.value(id).dtype;
  return d == DType::kInvalid ? fallback : d;
}

absl::Status RequireFloat(const OpContext& ctx, const Tensor& t,
                          absl::string_view what) {
  if (!ir::IsFloat(t.dtype())) {
    return ctx.Error(what, " must be a float tensor, got ", t.TypeString());
  }
  return absl::OkStatus();
}

absl::Status RequireInteger(const OpContext& ctx, const Tensor& t,
                            absl::string_view what) {
  if (!ir::IsInteger(t.dtype())) {
    return ctx.Error(what, " must be an integer tensor, got ",
                     t.TypeString());
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ScalarInt(const OpContext& ctx, int i,
                                  absl::string_view what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (!ir::IsInteger(t->dtype()) || t->num_elements() != 1) {
    return ctx.Error(what, " must be a single integer, got ",
                     t->TypeString());
  }
  return t->GetAsInt64(0);
}

absl::StatusOr<double> ScalarFloat(const OpContext& ctx, int i,
                                   absl::string_view what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (!ir::IsFloat(t->dtype()) || t->num_elements() != 1) {
    return ctx.Error(what, " must be a single float, got ", t->TypeString());
  }
  return t->GetAsDouble(0);
}

absl::StatusOr<std::vector<int64_t>> IntValues(const OpContext& ctx, int i,
                                               absl::string_view what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (!ir::IsInteger(t->dtype())) {
    return ctx.Error(what, " must have an integer type, got ",
                     t->TypeString());
  }
  return t->ToInt64Vector();
}

absl::StatusOr<std::vector<int64_t>> IntInput(const OpContext& ctx, int i,
                                              const char* what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (t->dtype() != DType::kI64 && t->dtype() != DType::kI32) {
    return ctx.Error(what, " must be an int64 tensor, got ", t->TypeString());
  }
  if (t->rank() > 1) {
    return ctx.Error(what, " must be a scalar or 1-D tensor, got ",
                     t->TypeString());
  }
  return t->ToInt64Vector();
}

absl::StatusOr<std::vector<int64_t>> IntsOr(const OpContext& ctx,
                                            const char* name, size_t n,
                                            int64_t fallback) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                        ctx.node.AttrOr<std::vector<int64_t>>(
                            name, std::vector<int64_t>(n, fallback)));
  if (v.size() != n) {
    return ctx.Error("attribute '", name, "' has ", v.size(),
                     " values, expected ", n);
  }
  return v;
}

absl::Status CheckRunLimit(const OpContext& ctx, int64_t elements, const Shape& shape) {
  if (ctx.max_result_elements <= 0 || elements <= ctx.max_result_elements) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(
      absl::StrCat(ctx.node.Describe(), ": result ", shape.empty() ? "" : ir::ShapeToString(shape),
                   shape.empty() ? "" : " ", "has ", elements,
                   " elements, over this run's limit of ", ctx.max_result_elements));
}

absl::Status CheckOutputSize(const OpContext& ctx, const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) {
      return ctx.Error("computed output shape ", ir::ShapeToString(shape),
                       " has a negative dimension");
    }
  }
  const int64_t n = ir::NumElements(shape);
  if (n < 0 || n > kMaxOutputElements) {
    return ctx.Error("output shape ", ir::ShapeToString(shape),
                     " is too large for the reference interpreter");
  }
  return CheckRunLimit(ctx, n, shape);
}

absl::Status CheckResultShape(const OpContext& ctx, const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) {
      return ctx.Error("negative dimension ", d, " in result shape ",
                       ir::ShapeToString(shape));
    }
  }
  for (int64_t d : shape) {
    if (d == 0) return absl::OkStatus();
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (n > kMaxResultElements / d) {
      return ctx.Error("result shape ", ir::ShapeToString(shape),
                       " has more than 2^34 ", "elements");
    }
    n *= d;
  }
  return CheckRunLimit(ctx, n, shape);
}

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) n *= s[i];
  return n;
}

AxisSplit SplitAt(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < axis; ++i) s.outer *= shape[i];
  s.n = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

std::vector<int64_t> GridOffsets(const Shape& shape,
                                 const std::vector<bool>& select) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (select[d] && shape[d] == 0) return {};  // an empty grid
  }
  const std::vector<int64_t> strides = ir::RowMajorStrides(shape);
  std::vector<int64_t> offsets = {0};
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!select[d]) continue;
    std::vector<int64_t> next;
    next.reserve(offsets.size() * shape[d]);
    for (int64_t base : offsets) {
      for (int64_t i = 0; i < shape[d]; ++i) next.push_back(base + i * strides[d]);
    }
    offsets = std::move(next);
  }
  return offsets;
}

ReductionPlan PlanReduction(const Shape& shape, const std::vector<bool>& mask,
                            bool keepdims) {
  ReductionPlan plan;
  std::vector<bool> kept_mask(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    kept_mask[d] = !mask[d];
    if (!mask[d]) {
      plan.out_shape.push_back(shape[d]);
    } else if (keepdims) {
      plan.out_shape.push_back(1);
    }
  }
  plan.kept = GridOffsets(shape, kept_mask);
  plan.reduced = GridOffsets(shape, mask);
  return plan;
}

absl::StatusOr<std::vector<bool>> AxesMask(const OpContext& ctx,
                                           absl::Span<const int64_t> axes,
                                           int64_t rank) {
  std::vector<bool> mask(rank, false);
  for (int64_t a : axes) {
    absl::StatusOr<int64_t> axis = NormalizeAxis(a, rank);
    if (!axis.ok()) return ctx.Error(axis.status().message());
    if (mask[*axis]) return ctx.Error("axis ", a, " is repeated in axes");
    mask[*axis] = true;
  }
  return mask;
}

}  // namespace kiln::interp
