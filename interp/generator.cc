// File: interp/generator.cc — reference kernels of ONNX's generator family
// (onnx/defs/generator): Constant, ConstantOfShape, EyeLike, Range.
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using Result = absl::StatusOr<std::vector<Tensor>>;

Result ConstantOfShape(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                        IntValues(ctx, 0, "shape"));
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, shape));
  Tensor value = Tensor::Scalar<float>(0.0f);
  if (ctx.node.HasAttr("value")) {
    KILN_ASSIGN_OR_RETURN(value, ctx.node.Attr<Tensor>("value"));
    if (value.num_elements() != 1) {
      return ctx.Error("value must have one element, got ",
                       value.TypeString());
    }
  }
  return One(Remap(value, shape, [](int64_t, const std::vector<int64_t>&) { return 0; }));
}

Result Range(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* start, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* limit, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* delta, ctx.Input(2));
  const DType dt = start->dtype();
  for (const Tensor* t : {start, limit, delta}) {
    if (t->num_elements() != 1 || t->dtype() != dt) {
      return ctx.Error("start, limit and delta must be scalars of one type, "
                       "got ", start->TypeString(), ", ", limit->TypeString(),
                       ", ", delta->TypeString());
    }
  }
  if (dt == DType::kBool) return ctx.Error("bool is not a Range type");
  int64_t n = 0;
  if (ir::IsFloat(dt)) {
    const double s = start->GetAsDouble(0), l = limit->GetAsDouble(0),
                 d = delta->GetAsDouble(0);
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) ||
        !std::isfinite(d)) {
      return ctx.Error("invalid range start=", s, " limit=", l, " delta=", d);
    }
    const double count = std::ceil((l - s) / d);
    if (count > static_cast<double>(kMaxResultElements)) {
      return ctx.Error("range has more than 2^34 elements");
    }
    n = count > 0 ? static_cast<int64_t>(count) : 0;
  } else {
    const __int128 s = start->GetAsInt64(0), l = limit->GetAsInt64(0),
                   d = delta->GetAsInt64(0);
    if (d == 0) return ctx.Error("delta is 0");
    __int128 count = 0;
    if (d > 0 && l > s) count = (l - s + d - 1) / d;
    if (d < 0 && l < s) count = (s - l + (-d) - 1) / (-d);
    if (count > kMaxResultElements) {
      return ctx.Error("range has more than 2^34 elements");
    }
    n = static_cast<int64_t>(count);
  }
  KILN_RETURN_IF_ERROR(CheckRunLimit(ctx, n, {n}));
  Tensor y(dt, {n});
  DispatchDType(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = y.data<T>();
    if constexpr (std::is_integral_v<T>) {
      const int64_t s = start->GetAsInt64(0), d = delta->GetAsInt64(0);
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<T>(static_cast<int64_t>(s + __int128{i} * d));
      }
    } else {
      const double s = start->GetAsDouble(0), d = delta->GetAsDouble(0);
      for (int64_t i = 0; i < n; ++i) out[i] = FromDouble<T>(s + i * d);
    }
    return 0;
  });
  return std::vector<Tensor>{std::move(y)};
}

Result Constant(OpContext& ctx) {
  const ir::Node& node = ctx.node;
  if (node.HasAttr("value")) {
    KILN_ASSIGN_OR_RETURN(Tensor t, node.Attr<Tensor>("value"));
    return std::vector<Tensor>{std::move(t)};
  }
  if (node.HasAttr("value_float")) {
    KILN_ASSIGN_OR_RETURN(float v, node.Attr<float>("value_float"));
    return std::vector<Tensor>{Tensor::Scalar<float>(v)};
  }
  if (node.HasAttr("value_floats")) {
    KILN_ASSIGN_OR_RETURN(auto v, node.Attr<std::vector<float>>("value_floats"));
    const int64_t n = static_cast<int64_t>(v.size());
    return std::vector<Tensor>{Tensor::FromVector<float>({n}, v)};
  }
  if (node.HasAttr("value_int")) {
    KILN_ASSIGN_OR_RETURN(int64_t v, node.Attr<int64_t>("value_int"));
    return std::vector<Tensor>{Tensor::Scalar<int64_t>(v)};
  }
  if (node.HasAttr("value_ints")) {
    KILN_ASSIGN_OR_RETURN(auto v, node.Attr<std::vector<int64_t>>("value_ints"));
    const int64_t n = static_cast<int64_t>(v.size());
    return std::vector<Tensor>{Tensor::FromVector<int64_t>({n}, v)};
  }
  if (node.HasAttr("value_string") || node.HasAttr("value_strings") ||
      node.HasAttr("sparse_value")) {
    return absl::UnimplementedError(absl::StrCat(
        node.Describe(), ": string and sparse constants are not supported"));
  }
  return ctx.Error("has no value attribute");
}

Result EyeLike(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t k, ctx.node.AttrOr<int64_t>("k", 0));
  if (x->rank() != 2) {
    return ctx.Error("input must be 2-D, got ", x->TypeString());
  }
  DType dt = x->dtype();
  if (ctx.node.HasAttr("dtype")) {
    KILN_ASSIGN_OR_RETURN(int64_t code, ctx.node.Attr<int64_t>("dtype"));
    std::optional<DType> d = DTypeFromOnnx(code);
    if (!d.has_value()) {
      return absl::UnimplementedError(absl::StrCat(
          ctx.node.Describe(), ": unsupported dtype code ", code));
    }
    dt = *d;
  }
  Tensor y(dt, x->shape());
  if (k >= x->dim(1) || k <= -x->dim(0)) return std::vector<Tensor>{y};
  DispatchDType(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = y.data<T>();
    for (int64_t i = 0; i < x->dim(0); ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < x->dim(1)) out[i * x->dim(1) + j] = FromDouble<T>(1);
    }
    return 0;
  });
  return std::vector<Tensor>{std::move(y)};
}

}  // namespace

void RegisterGeneratorOps(OpRegistry* r) {
  r->Register("Constant", Constant);
  r->Register("ConstantOfShape", ConstantOfShape);
  r->Register("EyeLike", EyeLike);
  r->Register("Range", Range);
}

}  // namespace kiln::interp
