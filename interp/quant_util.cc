// File: interp/quant_util.cc — the helpers quant_util.h declares.
#include "interp/quant_util.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "interp/kernel_util.h"
#include "ir/status_macros.h"

namespace kiln::interp {

using ir::DType;
using ir::Shape;

absl::StatusOr<std::pair<double, double>> QuantRange(const OpContext& ctx,
                                                     DType d) {
  switch (d) {
    case DType::kU8: return std::make_pair(0.0, 255.0);
    case DType::kI8: return std::make_pair(-128.0, 127.0);
    case DType::kI32:
      return std::make_pair(-2147483648.0, 2147483647.0);
    default:
      return ctx.Error("quantized type must be u8, i8 or i32, got ",
                       ir::DTypeName(d));
  }
}

absl::Status SubtractZeroPoint(const OpContext& ctx, const Tensor* zp,
                               DType data_dtype, int64_t per_channel_dim,
                               std::vector<int64_t>* v, absl::string_view what) {
  if (zp == nullptr) return absl::OkStatus();
  if (zp->dtype() != data_dtype) {
    return ctx.Error(what, " zero point ", zp->TypeString(),
                     " must have the data's type ", ir::DTypeName(data_dtype));
  }
  if (zp->num_elements() == 1) {
    const int64_t z = zp->GetAsInt64(0);
    for (int64_t& e : *v) e -= z;
    return absl::OkStatus();
  }
  if (per_channel_dim <= 0 || zp->rank() != 1 ||
      zp->dim(0) != per_channel_dim) {
    return ctx.Error(what, " zero point ", zp->TypeString(),
                     " must be a scalar",
                     per_channel_dim > 0
                         ? absl::StrCat(" or have ", per_channel_dim, " values")
                         : "");
  }
  const int64_t per = static_cast<int64_t>(v->size()) / per_channel_dim;
  for (size_t i = 0; i < v->size(); ++i) (*v)[i] -= zp->GetAsInt64(i / per);
  return absl::OkStatus();
}

absl::Status RequireQuantized(const OpContext& ctx, const Tensor& t,
                              absl::string_view what) {
  if (t.dtype() != DType::kU8 && t.dtype() != DType::kI8) {
    return ctx.Error(what, " must be u8 or i8, got ", t.TypeString());
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Requantize(const OpContext& ctx, Shape shape,
                                  const std::vector<int64_t>& acc,
                                  const std::vector<double>& scale,
                                  int64_t scale_inner, const Tensor* y_zp) {
  const DType out_dtype =
      DeclaredDType(ctx, 0, y_zp != nullptr ? y_zp->dtype() : DType::kU8);
  KILN_ASSIGN_OR_RETURN(auto range, QuantRange(ctx, out_dtype));
  const double zp = y_zp != nullptr ? y_zp->GetAsDouble(0) : 0.0;
  std::vector<double> y(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    const double s =
        scale.size() == 1 ? scale[0] : scale[(i / scale_inner) % scale.size()];
    y[i] = std::clamp(std::nearbyint(static_cast<double>(acc[i]) * s + zp),
                      range.first, range.second);
  }
  return MakeTensor(out_dtype, std::move(shape), y);
}

absl::StatusOr<const Tensor*> ScalarParam(const OpContext& ctx, int i,
                                          absl::string_view what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (t->num_elements() != 1) {
    return ctx.Error(what, " must have exactly one value (per-tensor), got ",
                     t->TypeString());
  }
  return t;
}

}  // namespace kiln::interp
