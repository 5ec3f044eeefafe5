// File: interp/quantization.cc — reference kernels of ONNX's quantization family
// (onnx/defs/quantization): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "interp/quant_util.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using Outputs = std::vector<Tensor>;

// Scale and zero point of (De)QuantizeLinear, per tensor or along `axis`:
// element i uses parameter (i / inner) % count.
struct QuantParams {
  std::vector<double> scale;
  std::vector<double> zero_point;  // empty: 0
  int64_t inner = 1;
  int64_t count = 1;
  int64_t Index(int64_t i) const { return count == 1 ? 0 : (i / inner) % count; }
};

absl::StatusOr<QuantParams> ReadQuantParams(const OpContext& ctx,
                                            const Tensor& x, int scale_input,
                                            int zp_input) {
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(scale_input));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *scale, "scale"));
  const Tensor* zp = ctx.has_input(zp_input) ? ctx.inputs[zp_input] : nullptr;
  QuantParams p;
  if (scale->num_elements() != 1 || scale->rank() > 1) {
    if (scale->rank() != 1) {
      return ctx.Error("scale must be a scalar or 1-D, got ",
                       scale->TypeString());
    }
    if (ctx.opset < 13) {
      return ctx.Error("per-axis scale needs opset >= 13 (model opset ",
                       ctx.opset, ")");
    }
    KILN_ASSIGN_OR_RETURN(int64_t axis_attr,
                          ctx.node.AttrOr<int64_t>("axis", 1));
    absl::StatusOr<int64_t> axis = NormalizeAxis(axis_attr, x.rank());
    if (!axis.ok()) return ctx.Error(axis.status().message());
    if (scale->dim(0) != x.dim(*axis)) {
      return ctx.Error("scale has ", scale->dim(0), " values, but axis ",
                       *axis, " of x has ", x.dim(*axis));
    }
    p.count = scale->dim(0);
    for (int64_t d = *axis + 1; d < x.rank(); ++d) p.inner *= x.dim(d);
  }
  p.scale = ReadDoubles(*scale);
  if (zp != nullptr) {
    if (zp->shape() != scale->shape() &&
        !(zp->num_elements() == 1 && p.count == 1)) {
      return ctx.Error("zero point ", zp->TypeString(),
                       " does not match scale ", scale->TypeString());
    }
    p.zero_point = ReadDoubles(*zp);
  }
  return p;
}

absl::StatusOr<Outputs> QuantizeLinear(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (!ir::IsFloat(x->dtype()) && x->dtype() != DType::kI32) {
    return ctx.Error("x must be float or i32, got ", x->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(QuantParams p, ReadQuantParams(ctx, *x, 1, 2));
  const DType out_dtype = DeclaredDType(
      ctx, 0, ctx.has_input(2) ? ctx.inputs[2]->dtype() : DType::kU8);
  if (ctx.has_input(2) && ctx.inputs[2]->dtype() != out_dtype) {
    return ctx.Error("output is declared ", ir::DTypeName(out_dtype),
                     " but the zero point is ", ctx.inputs[2]->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(auto range, QuantRange(ctx, out_dtype));
  const bool f32 = x->dtype() == DType::kF32 || x->dtype() == DType::kF16;
  std::vector<double> y(x->num_elements());
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const int64_t k = p.Index(i);
    const double q = f32 ? static_cast<double>(static_cast<float>(x->GetAsDouble(i)) /
                                               static_cast<float>(p.scale[k]))
                         : x->GetAsDouble(i) / p.scale[k];
    double v = std::nearbyint(q) + (p.zero_point.empty() ? 0 : p.zero_point[k]);
    y[i] = std::clamp(v, range.first, range.second);
  }
  return Outputs{MakeTensor(out_dtype, x->shape(), y)};
}

absl::StatusOr<Outputs> DequantizeLinear(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(QuantRange(ctx, x->dtype()).status());
  KILN_ASSIGN_OR_RETURN(QuantParams p, ReadQuantParams(ctx, *x, 1, 2));
  if (ctx.has_input(2) && ctx.inputs[2]->dtype() != x->dtype()) {
    return ctx.Error("zero point ", ctx.inputs[2]->TypeString(),
                     " must have x's type ", ir::DTypeName(x->dtype()));
  }
  const DType out_dtype = DeclaredDType(ctx, 0, ctx.inputs[1]->dtype());
  const bool f32 = out_dtype != DType::kF64;
  std::vector<double> y(x->num_elements());
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const int64_t k = p.Index(i);
    const double d =
        x->GetAsDouble(i) - (p.zero_point.empty() ? 0 : p.zero_point[k]);
    y[i] = f32 ? static_cast<double>(static_cast<float>(d) *
                                     static_cast<float>(p.scale[k]))
               : d * p.scale[k];
  }
  return Outputs{MakeTensor(out_dtype, x->shape(), y)};
}

// u8 quantization with scale and zero point chosen from x's range (which is
// widened to include 0); all arithmetic in f32 as ONNX defines it.
absl::StatusOr<Outputs> DynamicQuantizeLinear(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "x"));
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const float v = static_cast<float>(x->GetAsDouble(i));
    if (std::isnan(v)) return ctx.Error("x contains NaN");
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const float scale = (hi - lo) / 255.0f;
  float zp = 0;
  if (scale > 0) zp = std::clamp(std::nearbyint(0.0f - lo / scale), 0.0f, 255.0f);
  std::vector<double> y(x->num_elements(), zp);
  if (scale > 0) {
    for (int64_t i = 0; i < x->num_elements(); ++i) {
      const float q = std::nearbyint(static_cast<float>(x->GetAsDouble(i)) / scale);
      y[i] = std::clamp(q + zp, 0.0f, 255.0f);
    }
  }
  Outputs out;
  out.push_back(MakeTensor(DType::kU8, x->shape(), y));
  out.push_back(Tensor::Scalar<float>(scale));
  out.push_back(Tensor::Scalar<uint8_t>(static_cast<uint8_t>(zp)));
  return out;
}

}  // namespace

void RegisterQuantizationOps(OpRegistry* r) {
  r->Register("QuantizeLinear", QuantizeLinear);
  r->Register("DequantizeLinear", DequantizeLinear);
  r->Register("DynamicQuantizeLinear", DynamicQuantizeLinear);
}

}  // namespace kiln::interp
