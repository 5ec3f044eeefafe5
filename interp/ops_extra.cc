// Reference kernels for the remaining ONNX ops (opsets 9-18): losses, linear
// quantization and quantized Conv/MatMul, MaxUnpool, ReverseSequence, Det,
// window functions, MelWeightMatrix, DFT/STFT, GridSample, RoiAlign,
// NonMaxSuppression, Unique, Scan and TfIdfVectorizer. Math is in double
// (int64 for integer accumulation) unless ONNX's definition rounds in f32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "ir/graph/dtype.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;
using Outputs = std::vector<Tensor>;

// Largest output (elements) or loop trip count the reference agrees to run.
constexpr int64_t kMaxElements = int64_t{1} << 31;
constexpr double kPi = 3.14159265358979323846;

// ---------------------------------------------------------------------------
// Element conversion and small input readers.

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, ir::Float16>) {
    return ir::FloatToHalf(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
      return std::numeric_limits<T>::lowest();
    }
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(v);
  }
}

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

// The dtype the node declares for output i; `fallback` when it is unknown.
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

absl::Status CheckOutputSize(const OpContext& ctx, const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) {
      return ctx.Error("computed output shape ", ir::ShapeToString(shape),
                       " has a negative dimension");
    }
  }
  const int64_t n = ir::NumElements(shape);
  if (n < 0 || n > kMaxElements) {
    return ctx.Error("output shape ", ir::ShapeToString(shape),
                     " is too large for the reference interpreter");
  }
  return absl::OkStatus();
}

// Input i as a single integer (a scalar or a one-element tensor).
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

// Row-major coordinates of flat index `i` in `shape`.
void Unravel(int64_t i, const Shape& shape, std::vector<int64_t>* coord) {
  coord->resize(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    (*coord)[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
}

// ---------------------------------------------------------------------------
// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss.

// loss[n, d...] = -logp[n, target[n, d...], d...] * weight[target], with
// ignored targets contributing 0 to the loss and to the mean's denominator.
absl::StatusOr<Tensor> NllLoss(const OpContext& ctx, const Shape& shape,
                               const std::vector<double>& logp,
                               const Tensor& target, const Tensor* weight,
                               DType out_dtype) {
  if (shape.size() < 2) {
    return ctx.Error("input must have rank >= 2 (N, C, ...), got ",
                     ir::ShapeToString(shape));
  }
  KILN_RETURN_IF_ERROR(RequireInteger(ctx, target, "target"));
  Shape want = shape;
  want.erase(want.begin() + 1);
  if (target.shape() != want) {
    return ctx.Error("target has shape ", ir::ShapeToString(target.shape()),
                     ", expected ", ir::ShapeToString(want));
  }
  const int64_t n = shape[0], c = shape[1];
  const int64_t inner = n == 0 ? 0 : ir::NumElements(want) / n;
  std::vector<double> w;
  if (weight != nullptr) {
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, *weight, "weight"));
    if (weight->rank() != 1 || weight->dim(0) != c) {
      return ctx.Error("weight has shape ",
                       ir::ShapeToString(weight->shape()), ", expected [", c,
                       "]");
    }
    w = ReadDoubles(*weight);
  }
  KILN_ASSIGN_OR_RETURN(std::string reduction,
                        ctx.node.AttrOr<std::string>("reduction", "mean"));
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return ctx.Error("unknown reduction '", reduction, "'");
  }
  const bool has_ignore = ctx.node.HasAttr("ignore_index");
  KILN_ASSIGN_OR_RETURN(int64_t ignore,
                        ctx.node.AttrOr<int64_t>("ignore_index", 0));

  std::vector<double> loss(target.num_elements());
  double loss_sum = 0, weight_sum = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t i = b * inner + j;
      const int64_t t = target.GetAsInt64(i);
      if (has_ignore && t == ignore) {
        loss[i] = 0;
        continue;
      }
      if (t < 0 || t >= c) {
        return ctx.Error("target value ", t, " at flat index ", i,
                         " is outside [0, ", c, ")");
      }
      const double wt = w.empty() ? 1.0 : w[t];
      loss[i] = -logp[(b * c + t) * inner + j] * wt;
      loss_sum += loss[i];
      weight_sum += wt;
    }
  }
  if (reduction == "none") return MakeTensor(out_dtype, target.shape(), loss);
  const double v = reduction == "sum" ? loss_sum : loss_sum / weight_sum;
  return MakeTensor(out_dtype, {}, {v});
}

absl::StatusOr<Outputs> NegativeLogLikelihoodLoss(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* target, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "input"));
  KILN_ASSIGN_OR_RETURN(
      Tensor loss,
      NllLoss(ctx, x->shape(), ReadDoubles(*x), *target,
              ctx.has_input(2) ? ctx.inputs[2] : nullptr,
              DeclaredDType(ctx, 0, x->dtype())));
  Outputs out;
  out.push_back(std::move(loss));
  return out;
}

absl::StatusOr<Outputs> SoftmaxCrossEntropyLoss(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* labels, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "scores"));
  if (x->rank() < 2) {
    return ctx.Error("scores must have rank >= 2 (N, C, ...), got ",
                     x->TypeString());
  }
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t inner = n * c == 0 ? 0 : x->num_elements() / (n * c);
  std::vector<double> logp = ReadDoubles(*x);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t j = 0; j < inner; ++j) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < c; ++k) {
        mx = std::max(mx, logp[(b * c + k) * inner + j]);
      }
      double sum = 0;
      for (int64_t k = 0; k < c; ++k) {
        sum += std::exp(logp[(b * c + k) * inner + j] - mx);
      }
      const double lse = mx + std::log(sum);
      for (int64_t k = 0; k < c; ++k) logp[(b * c + k) * inner + j] -= lse;
    }
  }
  KILN_ASSIGN_OR_RETURN(
      Tensor loss, NllLoss(ctx, x->shape(), logp, *labels,
                           ctx.has_input(2) ? ctx.inputs[2] : nullptr,
                           DeclaredDType(ctx, 0, x->dtype())));
  Outputs out;
  out.push_back(std::move(loss));
  if (ctx.num_outputs() > 1) {
    out.push_back(MakeTensor(DeclaredDType(ctx, 1, x->dtype()), x->shape(),
                             logp));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Linear quantization.

// Integer range of a quantized dtype.
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

// ---------------------------------------------------------------------------
// Quantized Conv (ConvInteger, QLinearConv) and QLinearMatMul.

struct ConvGeometry {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0;
  Shape in_sp, out_sp, kernel;
  std::vector<int64_t> strides, dilations, pad_begin;
};

absl::StatusOr<ConvGeometry> ReadConvGeometry(const OpContext& ctx,
                                              const Shape& x, const Shape& w) {
  if (x.size() < 3 || w.size() != x.size()) {
    return ctx.Error("X ", ir::ShapeToString(x), " and W ",
                     ir::ShapeToString(w), " must have the same rank >= 3");
  }
  ConvGeometry g;
  const size_t nd = x.size() - 2;
  KILN_ASSIGN_OR_RETURN(g.group, ctx.node.AttrOr<int64_t>("group", 1));
  g.n = x[0];
  g.c = x[1];
  g.m = w[0];
  g.cg = w[1];
  if (g.group <= 0 || g.c % g.group != 0 || g.m % g.group != 0 ||
      g.cg * g.group != g.c) {
    return ctx.Error("group ", g.group, " does not fit X channels ", g.c,
                     ", W shape ", ir::ShapeToString(w));
  }
  g.in_sp.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  if (ctx.node.HasAttr("kernel_shape")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ks,
                          ctx.node.Attr<std::vector<int64_t>>("kernel_shape"));
    if (ks != g.kernel) {
      return ctx.Error("kernel_shape ", ir::ShapeToString(ks),
                       " does not match W's spatial dims ",
                       ir::ShapeToString(g.kernel));
    }
  }
  KILN_ASSIGN_OR_RETURN(g.strides, IntsOr(ctx, "strides", nd, 1));
  KILN_ASSIGN_OR_RETURN(g.dilations, IntsOr(ctx, "dilations", nd, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                        IntsOr(ctx, "pads", 2 * nd, 0));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad,
                        ctx.node.AttrOr<std::string>("auto_pad", "NOTSET"));
  constexpr int64_t kLimit = int64_t{1} << 31;
  g.out_sp.resize(nd);
  g.pad_begin.resize(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t s = g.strides[i], d = g.dilations[i];
    if (s <= 0 || d <= 0 || g.kernel[i] <= 0 || pads[i] < 0 ||
        pads[nd + i] < 0 || s > kLimit || d > kLimit || pads[i] > kLimit ||
        pads[nd + i] > kLimit || g.kernel[i] > kLimit) {
      return ctx.Error("invalid kernel, strides, dilations or pads");
    }
    const int64_t ek = (g.kernel[i] - 1) * d + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out_sp[i] = (g.in_sp[i] + s - 1) / s;
      const int64_t total =
          std::max<int64_t>(0, (g.out_sp[i] - 1) * s + ek - g.in_sp[i]);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "VALID" || auto_pad == "NOTSET" ||
               auto_pad.empty()) {
      const int64_t pb = auto_pad == "VALID" ? 0 : pads[i];
      const int64_t pe = auto_pad == "VALID" ? 0 : pads[nd + i];
      const int64_t span = g.in_sp[i] + pb + pe - ek;
      if (span < 0) {
        return ctx.Error("kernel extent ", ek, " exceeds padded input size ",
                         g.in_sp[i] + pb + pe, " in spatial dim ", i);
      }
      g.pad_begin[i] = pb;
      g.out_sp[i] = span / s + 1;
    } else {
      return ctx.Error("unknown auto_pad '", auto_pad, "'");
    }
  }
  Shape out = {g.n, g.m};
  out.insert(out.end(), g.out_sp.begin(), g.out_sp.end());
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  const int64_t work = ir::NumElements(out);
  const int64_t taps = g.cg * ir::NumElements(g.kernel);
  if (taps > 0 && work > kMaxElements / taps) {
    return ctx.Error("convolution too large for the reference interpreter");
  }
  return g;
}

// Direct integer convolution of zero-point-shifted data (padding reads 0).
std::vector<int64_t> IntegerConv(const ConvGeometry& g,
                                 const std::vector<int64_t>& x,
                                 const std::vector<int64_t>& w) {
  const size_t nd = g.in_sp.size();
  const int64_t in_size = ir::NumElements(g.in_sp);
  const int64_t out_size = ir::NumElements(g.out_sp);
  const int64_t k_size = ir::NumElements(g.kernel);
  const std::vector<int64_t> in_strides = ir::RowMajorStrides(g.in_sp);
  const int64_t mg = g.m / g.group;
  std::vector<int64_t> y(g.n * g.m * out_size, 0);
  std::vector<int64_t> oc, kc;
  for (int64_t b = 0; b < g.n; ++b) {
    for (int64_t mo = 0; mo < g.m; ++mo) {
      const int64_t grp = mo / mg;
      for (int64_t o = 0; o < out_size; ++o) {
        Unravel(o, g.out_sp, &oc);
        int64_t acc = 0;
        for (int64_t k = 0; k < k_size; ++k) {
          Unravel(k, g.kernel, &kc);
          int64_t offset = 0;
          bool inside = true;
          for (size_t d = 0; d < nd; ++d) {
            const int64_t pos = oc[d] * g.strides[d] - g.pad_begin[d] +
                                kc[d] * g.dilations[d];
            if (pos < 0 || pos >= g.in_sp[d]) {
              inside = false;
              break;
            }
            offset += pos * in_strides[d];
          }
          if (!inside) continue;
          for (int64_t ci = 0; ci < g.cg; ++ci) {
            acc += x[(b * g.c + grp * g.cg + ci) * in_size + offset] *
                   w[(mo * g.cg + ci) * k_size + k];
          }
        }
        y[(b * g.m + mo) * out_size + o] = acc;
      }
    }
  }
  return y;
}

// Subtracts a zero point that is per tensor or, when `per_channel_dim` > 0,
// one per slice along dim 0 of size `per_channel_dim`.
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

std::vector<int64_t> ReadInts(const Tensor& t) { return t.ToInt64Vector(); }

absl::Status RequireQuantized(const OpContext& ctx, const Tensor& t,
                              absl::string_view what) {
  if (t.dtype() != DType::kU8 && t.dtype() != DType::kI8) {
    return ctx.Error(what, " must be u8 or i8, got ", t.TypeString());
  }
  return absl::OkStatus();
}

absl::StatusOr<Outputs> ConvInteger(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *x, "x"));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *w, "w"));
  KILN_ASSIGN_OR_RETURN(ConvGeometry g,
                        ReadConvGeometry(ctx, x->shape(), w->shape()));
  std::vector<int64_t> xv = ReadInts(*x), wv = ReadInts(*w);
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(
      ctx, ctx.has_input(2) ? ctx.inputs[2] : nullptr, x->dtype(), 0, &xv,
      "x"));
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(
      ctx, ctx.has_input(3) ? ctx.inputs[3] : nullptr, w->dtype(), g.m, &wv,
      "w"));
  const std::vector<int64_t> y = IntegerConv(g, xv, wv);
  Shape out = {g.n, g.m};
  out.insert(out.end(), g.out_sp.begin(), g.out_sp.end());
  Tensor t(DType::kI32, out);
  for (size_t i = 0; i < y.size(); ++i) {
    t.data<int32_t>()[i] = FromDouble<int32_t>(static_cast<double>(y[i]));
  }
  return Outputs{std::move(t)};
}

// Requantizes an int accumulator: round(acc * scale + zero_point), clamped.
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

absl::StatusOr<Outputs> QLinearConv(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* xs, ScalarParam(ctx, 1, "x_scale"));
  KILN_ASSIGN_OR_RETURN(const Tensor* xz, ScalarParam(ctx, 2, "x_zero_point"));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(3));
  KILN_ASSIGN_OR_RETURN(const Tensor* ws, ctx.Input(4));
  KILN_ASSIGN_OR_RETURN(const Tensor* ys, ScalarParam(ctx, 6, "y_scale"));
  KILN_ASSIGN_OR_RETURN(const Tensor* yz, ScalarParam(ctx, 7, "y_zero_point"));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *x, "x"));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *w, "w"));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *xs, "x_scale"));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *ws, "w_scale"));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *ys, "y_scale"));
  KILN_ASSIGN_OR_RETURN(ConvGeometry g,
                        ReadConvGeometry(ctx, x->shape(), w->shape()));
  if (ws->num_elements() != 1 && (ws->rank() != 1 || ws->dim(0) != g.m)) {
    return ctx.Error("w_scale ", ws->TypeString(), " must be a scalar or have ",
                     g.m, " values");
  }
  std::vector<int64_t> xv = ReadInts(*x), wv = ReadInts(*w);
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(ctx, xz, x->dtype(), 0, &xv, "x"));
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(
      ctx, ctx.has_input(5) ? ctx.inputs[5] : nullptr, w->dtype(), g.m, &wv,
      "w"));
  std::vector<int64_t> acc = IntegerConv(g, xv, wv);
  const int64_t out_size = ir::NumElements(g.out_sp);
  if (ctx.has_input(8)) {
    const Tensor& b = *ctx.inputs[8];
    if (b.dtype() != DType::kI32 || b.rank() != 1 || b.dim(0) != g.m) {
      return ctx.Error("B must be i32[", g.m, "], got ", b.TypeString());
    }
    for (size_t i = 0; i < acc.size(); ++i) {
      acc[i] += b.GetAsInt64((i / out_size) % g.m);
    }
  }
  std::vector<double> scale;
  for (int64_t i = 0; i < ws->num_elements(); ++i) {
    scale.push_back(xs->GetAsDouble(0) * ws->GetAsDouble(i) /
                    ys->GetAsDouble(0));
  }
  Shape out = {g.n, g.m};
  out.insert(out.end(), g.out_sp.begin(), g.out_sp.end());
  KILN_ASSIGN_OR_RETURN(Tensor y,
                        Requantize(ctx, out, acc, scale, out_size, yz));
  return Outputs{std::move(y)};
}

absl::StatusOr<Outputs> QLinearMatMul(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* as, ScalarParam(ctx, 1, "a_scale"));
  KILN_ASSIGN_OR_RETURN(const Tensor* az, ScalarParam(ctx, 2, "a_zero_point"));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(3));
  KILN_ASSIGN_OR_RETURN(const Tensor* bs, ScalarParam(ctx, 4, "b_scale"));
  KILN_ASSIGN_OR_RETURN(const Tensor* bz, ScalarParam(ctx, 5, "b_zero_point"));
  KILN_ASSIGN_OR_RETURN(const Tensor* ys, ScalarParam(ctx, 6, "y_scale"));
  KILN_ASSIGN_OR_RETURN(const Tensor* yz, ScalarParam(ctx, 7, "y_zero_point"));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *a, "a"));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *b, "b"));
  if (a->rank() == 0 || b->rank() == 0) {
    return ctx.Error("operands must have rank >= 1");
  }
  std::vector<int64_t> av = ReadInts(*a), bv = ReadInts(*b);
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(ctx, az, a->dtype(), 0, &av, "a"));
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(ctx, bz, b->dtype(), 0, &bv, "b"));
  // numpy matmul: 1-D operands gain a unit dim that is dropped afterwards.
  Shape ash = a->shape(), bsh = b->shape();
  if (ash.size() == 1) ash.insert(ash.begin(), 1);
  if (bsh.size() == 1) bsh.push_back(1);
  const int64_t m = ash[ash.size() - 2], k = ash.back(), n = bsh.back();
  if (bsh[bsh.size() - 2] != k) {
    return ctx.Error("inner dimensions differ: ", a->TypeString(), " x ",
                     b->TypeString());
  }
  const Shape abatch(ash.begin(), ash.end() - 2), bbatch(bsh.begin(), bsh.end() - 2);
  absl::StatusOr<Shape> batch = ir::BroadcastShapes(abatch, bbatch);
  if (!batch.ok()) return ctx.Error(batch.status().message());
  Shape out = *batch;
  if (a->rank() > 1) out.push_back(m);
  if (b->rank() > 1) out.push_back(n);
  Shape full = *batch;
  full.push_back(m);
  full.push_back(n);
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, full));
  const int64_t nb = ir::NumElements(*batch);
  if (nb * m * n > 0 && k > kMaxElements / (nb * m * n)) {
    return ctx.Error("matmul too large for the reference interpreter");
  }
  const BroadcastMap amap(abatch, *batch), bmap(bbatch, *batch);
  std::vector<int64_t> acc(nb * m * n, 0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const int64_t* ap = av.data() + amap(bi) * m * k;
    const int64_t* bp = bv.data() + bmap(bi) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t s = 0;
        for (int64_t p = 0; p < k; ++p) s += ap[i * k + p] * bp[p * n + j];
        acc[(bi * m + i) * n + j] = s;
      }
    }
  }
  const std::vector<double> scale = {as->GetAsDouble(0) * bs->GetAsDouble(0) /
                                     ys->GetAsDouble(0)};
  KILN_ASSIGN_OR_RETURN(Tensor y, Requantize(ctx, out, acc, scale, 1, yz));
  return Outputs{std::move(y)};
}

// ---------------------------------------------------------------------------
// MaxUnpool, ReverseSequence, Det.

absl::StatusOr<Outputs> MaxUnpool(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* idx, ctx.Input(1));
  if (x->rank() < 3) return ctx.Error("X must have rank >= 3, got ", x->TypeString());
  if (idx->shape() != x->shape()) {
    return ctx.Error("I ", idx->TypeString(), " must have X's shape ",
                     ir::ShapeToString(x->shape()));
  }
  KILN_RETURN_IF_ERROR(RequireInteger(ctx, *idx, "I"));
  const size_t nd = x->rank() - 2;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                        ctx.node.Attr<std::vector<int64_t>>("kernel_shape"));
  if (kernel.size() != nd) {
    return ctx.Error("kernel_shape has ", kernel.size(), " values, expected ",
                     nd);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                        IntsOr(ctx, "strides", nd, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsOr(ctx, "pads", 2 * nd, 0));
  // Indices address the shape MaxPool's input would have had; an explicit
  // output_shape pads that block at the end of each spatial dim.
  Shape inferred = {x->dim(0), x->dim(1)};
  for (size_t i = 0; i < nd; ++i) {
    inferred.push_back((x->dim(2 + i) - 1) * strides[i] + kernel[i] - pads[i] -
                       pads[nd + i]);
  }
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, inferred));
  Shape out = inferred;
  if (ctx.has_input(2)) {
    out = ctx.inputs[2]->ToInt64Vector();
    bool fits = out.size() == inferred.size();
    for (size_t d = 0; fits && d < out.size(); ++d) {
      fits = d < 2 ? out[d] == inferred[d] : out[d] >= inferred[d];
    }
    if (!fits) {
      return ctx.Error("output_shape ", ir::ShapeToString(out),
                       " must match X's batch and channels and be at least ",
                       ir::ShapeToString(inferred));
    }
  }
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  const int64_t total = ir::NumElements(inferred);
  const std::vector<int64_t> out_strides = ir::RowMajorStrides(out);
  Tensor y(x->dtype(), out);
  const size_t esize = ir::DTypeSize(x->dtype());
  const auto* src = static_cast<const uint8_t*>(x->raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  std::vector<int64_t> coord;
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const int64_t j = idx->GetAsInt64(i);
    if (j < 0 || j >= total) {
      return ctx.Error("index ", j, " at flat position ", i,
                       " is outside the unpooled shape ",
                       ir::ShapeToString(inferred));
    }
    Unravel(j, inferred, &coord);
    int64_t at = 0;
    for (size_t d = 0; d < coord.size(); ++d) at += coord[d] * out_strides[d];
    std::memcpy(dst + at * esize, src + i * esize, esize);
  }
  return Outputs{std::move(y)};
}

absl::StatusOr<Outputs> ReverseSequence(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* lens, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireInteger(ctx, *lens, "sequence_lens"));
  if (x->rank() < 2) return ctx.Error("input must have rank >= 2");
  KILN_ASSIGN_OR_RETURN(int64_t batch_axis, ctx.node.AttrOr<int64_t>("batch_axis", 1));
  KILN_ASSIGN_OR_RETURN(int64_t time_axis, ctx.node.AttrOr<int64_t>("time_axis", 0));
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return ctx.Error("batch_axis and time_axis must be 0 and 1 in some order, got ",
                     batch_axis, " and ", time_axis);
  }
  const int64_t nb = x->dim(batch_axis), nt = x->dim(time_axis);
  if (lens->rank() != 1 || lens->dim(0) != nb) {
    return ctx.Error("sequence_lens ", lens->TypeString(), " must have ", nb,
                     " values");
  }
  const std::vector<int64_t> len = lens->ToInt64Vector();
  for (int64_t l : len) {
    if (l < 0 || l > nt) {
      return ctx.Error("sequence length ", l, " is outside [0, ", nt, "]");
    }
  }
  const std::vector<int64_t> strides = ir::RowMajorStrides(x->shape());
  Tensor y = *x;
  const size_t esize = ir::DTypeSize(x->dtype());
  const auto* src = static_cast<const uint8_t*>(x->raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const int64_t b = (i / strides[batch_axis]) % nb;
    const int64_t t = (i / strides[time_axis]) % nt;
    if (t >= len[b]) continue;
    const int64_t from = i + (len[b] - 1 - 2 * t) * strides[time_axis];
    std::memcpy(dst + i * esize, src + from * esize, esize);
  }
  return Outputs{std::move(y)};
}

absl::StatusOr<Outputs> Det(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  if (x->rank() < 2 || x->dim(x->rank() - 1) != x->dim(x->rank() - 2)) {
    return ctx.Error("X must be [..., M, M], got ", x->TypeString());
  }
  const int64_t m = x->dim(x->rank() - 1);
  const Shape out(x->shape().begin(), x->shape().end() - 2);
  const int64_t count = ir::NumElements(out);
  const std::vector<double> v = ReadDoubles(*x);
  std::vector<double> dets(count);
  std::vector<double> a(m * m);
  for (int64_t b = 0; b < count; ++b) {
    std::copy(v.begin() + b * m * m, v.begin() + (b + 1) * m * m, a.begin());
    double det = 1;
    for (int64_t col = 0; col < m && det != 0; ++col) {
      int64_t pivot = col;
      for (int64_t r = col + 1; r < m; ++r) {
        if (std::abs(a[r * m + col]) > std::abs(a[pivot * m + col])) pivot = r;
      }
      if (a[pivot * m + col] == 0) {
        det = 0;
        break;
      }
      if (pivot != col) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[col * m + j], a[pivot * m + j]);
        det = -det;
      }
      det *= a[col * m + col];
      for (int64_t r = col + 1; r < m; ++r) {
        const double f = a[r * m + col] / a[col * m + col];
        for (int64_t j = col; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
      }
    }
    dets[b] = det;
  }
  return Outputs{MakeTensor(x->dtype(), out, dets)};
}

// ---------------------------------------------------------------------------
// Signal processing: windows, MelWeightMatrix, DFT, STFT.

// ONNX TensorProto element type -> kiln dtype (output_datatype attributes).
DType DTypeFromOnnx(int64_t t) {
  switch (t) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    default: return DType::kInvalid;
  }
}

absl::StatusOr<DType> OutputDataType(const OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t code,
                        ctx.node.AttrOr<int64_t>("output_datatype", 1));
  const DType attr = DTypeFromOnnx(code);
  if (attr == DType::kInvalid) {
    return ctx.Error("output_datatype ", code, " is not supported");
  }
  return DeclaredDType(ctx, 0, attr);
}

// Generalized cosine window sum_k a_k cos(2 pi k n / D), D = N if periodic
// else N - 1.
absl::StatusOr<Outputs> CosineWindow(OpContext& ctx,
                                     const std::vector<double>& a) {
  KILN_ASSIGN_OR_RETURN(int64_t size, ScalarInt(ctx, 0, "size"));
  if (size < 0 || size > kMaxElements) {
    return ctx.Error("window size ", size, " is out of range");
  }
  KILN_ASSIGN_OR_RETURN(int64_t periodic, ctx.node.AttrOr<int64_t>("periodic", 1));
  KILN_ASSIGN_OR_RETURN(DType dtype, OutputDataType(ctx));
  const double denom = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(size);
  for (int64_t i = 0; i < size; ++i) {
    double v = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      v += a[k] * (denom == 0 ? 1.0 : std::cos(2 * kPi * k * i / denom));
    }
    w[i] = v;
  }
  return Outputs{MakeTensor(dtype, {size}, w)};
}

absl::StatusOr<Outputs> HannWindow(OpContext& ctx) {
  return CosineWindow(ctx, {0.5, -0.5});
}
absl::StatusOr<Outputs> HammingWindow(OpContext& ctx) {
  return CosineWindow(ctx, {25.0 / 46.0, -21.0 / 46.0});
}
absl::StatusOr<Outputs> BlackmanWindow(OpContext& ctx) {
  return CosineWindow(ctx, {0.42, -0.5, 0.08});
}

// Triangular mel filters over the dft_length / 2 + 1 spectrogram bins, with
// band edges at integer bins as ONNX's definition computes them.
absl::StatusOr<Outputs> MelWeightMatrix(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t num_mel, ScalarInt(ctx, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(int64_t dft_length, ScalarInt(ctx, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(int64_t sample_rate, ScalarInt(ctx, 2, "sample_rate"));
  KILN_ASSIGN_OR_RETURN(double lower, ScalarFloat(ctx, 3, "lower_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(double upper, ScalarFloat(ctx, 4, "upper_edge_hertz"));
  if (num_mel <= 0 || dft_length <= 0 || sample_rate <= 0 ||
      num_mel > kMaxElements || dft_length > kMaxElements) {
    return ctx.Error("num_mel_bins, dft_length and sample_rate must be positive");
  }
  if (!(lower >= 0 && upper > lower)) {
    return ctx.Error("need 0 <= lower_edge_hertz < upper_edge_hertz, got ",
                     lower, " and ", upper);
  }
  const int64_t num_bins = dft_length / 2 + 1;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, {num_bins, num_mel}));
  KILN_ASSIGN_OR_RETURN(DType dtype, OutputDataType(ctx));
  const double low_mel = 2595 * std::log10(1 + lower / 700);
  const double high_mel = 2595 * std::log10(1 + upper / 700);
  const double step = (high_mel - low_mel) / static_cast<double>(num_mel + 2);
  std::vector<int64_t> edges(num_mel + 2);
  for (int64_t i = 0; i < num_mel + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (i * step + low_mel) / 2595) - 1);
    edges[i] = static_cast<int64_t>(
        std::floor((dft_length + 1) * hz / static_cast<double>(sample_rate)));
    if (edges[i] < 0 || edges[i] >= num_bins) {
      return ctx.Error("mel band edge ", i, " falls on bin ", edges[i],
                       ", outside the ", num_bins, " spectrogram bins");
    }
  }
  std::vector<double> w(num_bins * num_mel, 0.0);
  for (int64_t i = 0; i < num_mel; ++i) {
    const int64_t lo = edges[i], mid = edges[i + 1], hi = edges[i + 2];
    if (mid == lo) {
      w[mid * num_mel + i] = 1;
    } else {
      for (int64_t j = lo; j <= mid; ++j) {
        w[j * num_mel + i] = static_cast<double>(j - lo) / (mid - lo);
      }
    }
    for (int64_t j = mid; j < hi; ++j) {
      w[j * num_mel + i] = static_cast<double>(hi - j) / (hi - mid);
    }
  }
  return Outputs{MakeTensor(dtype, {num_bins, num_mel}, w)};
}

// X[k] = sum_t x[t] e^(-+2 pi i k t / n) over the first n (zero-padded)
// samples of one line; the inverse divides by n.
void DftLine(const double* re, const double* im, int64_t stride,
             int64_t n_in, int64_t n, int64_t n_out, bool inverse,
             double* out_re, double* out_im, int64_t out_stride) {
  const double sign = inverse ? 1.0 : -1.0;
  const int64_t used = std::min(n_in, n);
  for (int64_t k = 0; k < n_out; ++k) {
    double sr = 0, si = 0;
    for (int64_t t = 0; t < used; ++t) {
      const double ang = sign * 2 * kPi * static_cast<double>((k * t) % n) / n;
      const double c = std::cos(ang), s = std::sin(ang);
      const double xr = re[t * stride], xi = im[t * stride];
      sr += xr * c - xi * s;
      si += xr * s + xi * c;
    }
    if (inverse) {
      sr /= n;
      si /= n;
    }
    out_re[k * out_stride] = sr;
    out_im[k * out_stride] = si;
  }
}

absl::StatusOr<Outputs> Dft(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "input"));
  const int64_t r = x->rank();
  if (r < 2 || (x->dim(r - 1) != 1 && x->dim(r - 1) != 2)) {
    return ctx.Error("input must be [..., 1] (real) or [..., 2] (complex), got ",
                     x->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, ctx.node.AttrOr<int64_t>("axis", 1));
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) {
    return ctx.Error("axis must be a signal dimension (not the last), got ",
                     axis);
  }
  KILN_ASSIGN_OR_RETURN(int64_t inverse, ctx.node.AttrOr<int64_t>("inverse", 0));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, ctx.node.AttrOr<int64_t>("onesided", 0));
  const int64_t n_in = x->dim(axis);
  int64_t n = n_in;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(n, ScalarInt(ctx, 1, "dft_length"));
    if (n <= 0) return ctx.Error("dft_length must be positive, got ", n);
  }
  const int64_t n_out = onesided ? n / 2 + 1 : n;
  Shape out = x->shape();
  out[axis] = n_out;
  out[r - 1] = 2;
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x->dim(d);
  for (int64_t d = axis + 1; d < r - 1; ++d) inner *= x->dim(d);
  if (outer * inner > 0 && n_out * std::min(n, n_in) > kMaxElements / (outer * inner)) {
    return ctx.Error("DFT too large for the reference interpreter");
  }
  const int64_t comps = x->dim(r - 1);
  const std::vector<double> v = ReadDoubles(*x);
  std::vector<double> re(outer * n_in * inner), im(re.size(), 0.0);
  for (size_t i = 0; i < re.size(); ++i) {
    re[i] = v[i * comps];
    if (comps == 2) im[i] = v[i * comps + 1];
  }
  std::vector<double> ore(outer * n_out * inner), oim(ore.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      DftLine(&re[o * n_in * inner + j], &im[o * n_in * inner + j], inner, n_in,
              n, n_out, inverse != 0, &ore[o * n_out * inner + j],
              &oim[o * n_out * inner + j], inner);
    }
  }
  std::vector<double> y(ore.size() * 2);
  for (size_t i = 0; i < ore.size(); ++i) {
    y[2 * i] = ore[i];
    y[2 * i + 1] = oim[i];
  }
  return Outputs{MakeTensor(x->dtype(), out, y)};
}

absl::StatusOr<Outputs> Stft(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "signal"));
  if (x->rank() != 3 || (x->dim(2) != 1 && x->dim(2) != 2)) {
    return ctx.Error("signal must be [batch, length, 1 or 2], got ",
                     x->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(int64_t step, ScalarInt(ctx, 1, "frame_step"));
  if (step <= 0) return ctx.Error("frame_step must be positive, got ", step);
  std::vector<double> window;
  int64_t length = -1;
  if (ctx.has_input(2)) {
    const Tensor& w = *ctx.inputs[2];
    KILN_RETURN_IF_ERROR(RequireFloat(ctx, w, "window"));
    if (w.rank() != 1) return ctx.Error("window must be 1-D, got ", w.TypeString());
    window = ReadDoubles(w);
    length = w.dim(0);
  }
  if (ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(int64_t fl, ScalarInt(ctx, 3, "frame_length"));
    if (length >= 0 && fl != length) {
      return ctx.Error("frame_length ", fl, " differs from the window length ",
                       length);
    }
    length = fl;
  }
  if (length < 0) return ctx.Error("needs a window or a frame_length");
  if (length <= 0 || length > x->dim(1)) {
    return ctx.Error("frame length ", length, " must be in [1, ", x->dim(1), "]");
  }
  if (window.empty()) window.assign(length, 1.0);
  KILN_ASSIGN_OR_RETURN(int64_t onesided, ctx.node.AttrOr<int64_t>("onesided", 1));
  const int64_t batch = x->dim(0), sig_len = x->dim(1), comps = x->dim(2);
  const int64_t frames = (sig_len - length) / step + 1;
  const int64_t bins = onesided ? length / 2 + 1 : length;
  const Shape out = {batch, frames, bins, 2};
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  if (batch * frames > 0 && bins * length > kMaxElements / (batch * frames)) {
    return ctx.Error("STFT too large for the reference interpreter");
  }
  const std::vector<double> v = ReadDoubles(*x);
  std::vector<double> re(length), im(length), ore(bins), oim(bins);
  std::vector<double> y(ir::NumElements(out));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < length; ++t) {
        const int64_t i = (b * sig_len + f * step + t) * comps;
        re[t] = v[i] * window[t];
        im[t] = comps == 2 ? v[i + 1] * window[t] : 0.0;
      }
      DftLine(re.data(), im.data(), 1, length, length, bins, false, ore.data(),
              oim.data(), 1);
      for (int64_t k = 0; k < bins; ++k) {
        y[((b * frames + f) * bins + k) * 2] = ore[k];
        y[((b * frames + f) * bins + k) * 2 + 1] = oim[k];
      }
    }
  }
  return Outputs{MakeTensor(x->dtype(), out, y)};
}

// ---------------------------------------------------------------------------
// GridSample and RoiAlign.

enum class GridPadding { kZeros, kBorder, kReflection };

// Reflects x by the nearer border until it lies in [lo, hi].
double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - n * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - n * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

// Keys' cubic convolution weights (alpha -0.75) for taps -1, 0, 1, 2.
void CubicCoeffs(double x, double c[4]) {
  constexpr double a = -0.75;
  x = std::abs(x);
  c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

absl::StatusOr<Outputs> GridSample(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* grid, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *grid, "grid"));
  const int64_t r = x->rank() - 2;
  if (r < 1 || grid->rank() != r + 2 || grid->dim(0) != x->dim(0) ||
      grid->dim(grid->rank() - 1) != r) {
    return ctx.Error("X ", x->TypeString(), " and grid ", grid->TypeString(),
                     " must be [N, C, d1..dr] and [N, D1..Dr, r]");
  }
  KILN_ASSIGN_OR_RETURN(std::string mode,
                        ctx.node.AttrOr<std::string>("mode", "bilinear"));
  KILN_ASSIGN_OR_RETURN(std::string padding_name,
                        ctx.node.AttrOr<std::string>("padding_mode", "zeros"));
  KILN_ASSIGN_OR_RETURN(int64_t align, ctx.node.AttrOr<int64_t>("align_corners", 0));
  int taps_per_dim;
  if (mode == "bilinear" || mode == "linear") {
    taps_per_dim = 2;
  } else if (mode == "nearest") {
    taps_per_dim = 1;
  } else if (mode == "bicubic" || mode == "cubic") {
    taps_per_dim = 4;
  } else {
    return ctx.Error("unknown mode '", mode, "'");
  }
  GridPadding padding;
  if (padding_name == "zeros") {
    padding = GridPadding::kZeros;
  } else if (padding_name == "border") {
    padding = GridPadding::kBorder;
  } else if (padding_name == "reflection") {
    padding = GridPadding::kReflection;
  } else {
    return ctx.Error("unknown padding_mode '", padding_name, "'");
  }
  const int64_t n = x->dim(0), c = x->dim(1);
  const Shape dims(x->shape().begin() + 2, x->shape().end());
  const Shape out_sp(grid->shape().begin() + 1, grid->shape().end() - 1);
  Shape out = {n, c};
  out.insert(out.end(), out_sp.begin(), out_sp.end());
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  int64_t num_taps = 1;
  for (int64_t d = 0; d < r; ++d) {
    num_taps *= taps_per_dim;
    if (num_taps > (int64_t{1} << 20)) return ctx.Error("too many dimensions");
  }
  const int64_t out_points = ir::NumElements(out_sp);
  if (n * c * out_points > 0 && num_taps > kMaxElements / (n * c * out_points)) {
    return ctx.Error("GridSample too large for the reference interpreter");
  }
  const std::vector<double> xv = ReadDoubles(*x);
  const std::vector<double> gv = ReadDoubles(*grid);
  const std::vector<int64_t> strides = ir::RowMajorStrides(dims);
  const int64_t plane = ir::NumElements(dims);
  std::vector<double> lo(r), hi(r);
  for (int64_t d = 0; d < r; ++d) {
    lo[d] = align ? 0.0 : -0.5;
    hi[d] = align ? dims[d] - 1.0 : dims[d] - 0.5;
  }
  // Index of integer tap i in dim d after padding; -1 reads zero.
  auto tap_index = [&](int64_t i, int64_t d) -> int64_t {
    switch (padding) {
      case GridPadding::kZeros: return (i >= 0 && i < dims[d]) ? i : -1;
      case GridPadding::kBorder: return std::clamp<int64_t>(i, 0, dims[d] - 1);
      case GridPadding::kReflection:
        return std::clamp<int64_t>(
            static_cast<int64_t>(Reflect(static_cast<double>(i), lo[d], hi[d])),
            0, dims[d] - 1);
    }
    return -1;
  };
  std::vector<double> y(ir::NumElements(out));
  std::vector<double> pos(r);
  std::vector<std::vector<int64_t>> tap_idx(r, std::vector<int64_t>(taps_per_dim));
  std::vector<std::vector<double>> tap_w(r, std::vector<double>(taps_per_dim));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t p = 0; p < out_points; ++p) {
      bool empty_dim = false;
      for (int64_t d = 0; d < r; ++d) {
        if (dims[d] == 0) empty_dim = true;
        const double g = gv[(b * out_points + p) * r + (r - 1 - d)];
        double v = align ? (g + 1) / 2.0 * (dims[d] - 1)
                         : ((g + 1) * dims[d] - 1) / 2.0;
        if (taps_per_dim == 1) v = r == 3 ? std::round(v) : std::nearbyint(v);
        if (v < lo[d] || v > hi[d]) {
          if (padding == GridPadding::kBorder) {
            v = std::clamp(v, 0.0, static_cast<double>(dims[d] - 1));
          } else if (padding == GridPadding::kReflection) {
            v = Reflect(v, lo[d], hi[d]);
          }
        }
        if (taps_per_dim == 1) {
          const double t = std::trunc(v);
          tap_idx[d][0] = std::abs(t) < 1e18 ? tap_index(static_cast<int64_t>(t), d) : -1;
          tap_w[d][0] = 1;
          continue;
        }
        const double f = std::floor(v);
        if (!(std::abs(f) < 1e18)) {
          for (int k = 0; k < taps_per_dim; ++k) {
            tap_idx[d][k] = -1;
            tap_w[d][k] = 0;
          }
          continue;
        }
        const int64_t base = static_cast<int64_t>(f);
        const double frac = v - f;
        if (taps_per_dim == 2) {
          tap_w[d][0] = 1 - frac;
          tap_w[d][1] = frac;
          tap_idx[d][0] = tap_index(base, d);
          tap_idx[d][1] = tap_index(base + 1, d);
        } else {
          double cf[4];
          CubicCoeffs(frac, cf);
          for (int k = 0; k < 4; ++k) {
            tap_w[d][k] = cf[k];
            tap_idx[d][k] = tap_index(base - 1 + k, d);
          }
        }
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        double acc = 0;
        if (!empty_dim) {
          const double* src = &xv[(b * c + ch) * plane];
          for (int64_t t = 0; t < num_taps; ++t) {
            int64_t rest = t, offset = 0;
            double w = 1;
            for (int64_t d = r - 1; d >= 0; --d) {
              const int k = static_cast<int>(rest % taps_per_dim);
              rest /= taps_per_dim;
              const int64_t i = tap_idx[d][k];
              if (i < 0) {
                w = 0;
                break;
              }
              w *= tap_w[d][k];
              offset += i * strides[d];
            }
            if (w != 0) acc += w * src[offset];
          }
        }
        y[(b * c + ch) * out_points + p] = acc;
      }
    }
  }
  return Outputs{MakeTensor(x->dtype(), out, y)};
}

absl::StatusOr<Outputs> RoiAlign(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* rois, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* batch_indices, ctx.Input(2));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *rois, "rois"));
  KILN_RETURN_IF_ERROR(RequireInteger(ctx, *batch_indices, "batch_indices"));
  if (x->rank() != 4) return ctx.Error("X must be [N, C, H, W], got ", x->TypeString());
  if (rois->rank() != 2 || rois->dim(1) != 4) {
    return ctx.Error("rois must be [num_rois, 4], got ", rois->TypeString());
  }
  const int64_t num_rois = rois->dim(0);
  if (batch_indices->rank() != 1 || batch_indices->dim(0) != num_rois) {
    return ctx.Error("batch_indices must have ", num_rois, " values, got ",
                     batch_indices->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(std::string mode, ctx.node.AttrOr<std::string>("mode", "avg"));
  if (mode != "avg" && mode != "max") return ctx.Error("unknown mode '", mode, "'");
  KILN_ASSIGN_OR_RETURN(int64_t oh, ctx.node.AttrOr<int64_t>("output_height", 1));
  KILN_ASSIGN_OR_RETURN(int64_t ow, ctx.node.AttrOr<int64_t>("output_width", 1));
  KILN_ASSIGN_OR_RETURN(int64_t sampling, ctx.node.AttrOr<int64_t>("sampling_ratio", 0));
  KILN_ASSIGN_OR_RETURN(float scale, ctx.node.AttrOr<float>("spatial_scale", 1.0f));
  KILN_ASSIGN_OR_RETURN(
      std::string ctm,
      ctx.node.AttrOr<std::string>("coordinate_transformation_mode",
                                   ctx.opset >= 16 ? "half_pixel"
                                                   : "output_half_pixel"));
  if (ctm != "half_pixel" && ctm != "output_half_pixel") {
    return ctx.Error("unknown coordinate_transformation_mode '", ctm, "'");
  }
  if (oh <= 0 || ow <= 0 || sampling < 0) {
    return ctx.Error("output_height/width must be positive and sampling_ratio "
                     "non-negative");
  }
  const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  const Shape out = {num_rois, c, oh, ow};
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  const bool half_pixel = ctm == "half_pixel";
  const std::vector<double> xv = ReadDoubles(*x);
  const std::vector<double> rv = ReadDoubles(*rois);
  std::vector<double> y(ir::NumElements(out), 0.0);
  struct Tap {
    int64_t pos[4];
    double w[4];
  };
  for (int64_t ri = 0; ri < num_rois; ++ri) {
    const int64_t b = batch_indices->GetAsInt64(ri);
    if (b < 0 || b >= n) {
      return ctx.Error("batch index ", b, " of roi ", ri, " is outside [0, ", n, ")");
    }
    const double off = half_pixel ? 0.5 : 0.0;
    const double x0 = rv[ri * 4 + 0] * scale - off;
    const double y0 = rv[ri * 4 + 1] * scale - off;
    const double x1 = rv[ri * 4 + 2] * scale - off;
    const double y1 = rv[ri * 4 + 3] * scale - off;
    double roi_w = x1 - x0, roi_h = y1 - y0;
    if (!half_pixel) {
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / oh, bin_w = roi_w / ow;
    const double gh_d = sampling > 0 ? sampling : std::ceil(roi_h / oh);
    const double gw_d = sampling > 0 ? sampling : std::ceil(roi_w / ow);
    if (!(gh_d * gw_d <= 1e6)) {
      return ctx.Error("roi ", ri, " needs too many samples per bin");
    }
    const int64_t gh = static_cast<int64_t>(gh_d), gw = static_cast<int64_t>(gw_d);
    const double count = std::max<int64_t>(gh * gw, 1);
    std::vector<Tap> taps;
    taps.reserve(oh * ow * gh * gw);
    for (int64_t ph = 0; ph < oh; ++ph) {
      for (int64_t pw = 0; pw < ow; ++pw) {
        for (int64_t iy = 0; iy < gh; ++iy) {
          double yy = y0 + ph * bin_h + (iy + 0.5) * bin_h / gh;
          for (int64_t ix = 0; ix < gw; ++ix) {
            double xx = x0 + pw * bin_w + (ix + 0.5) * bin_w / gw;
            Tap t = {{0, 0, 0, 0}, {0, 0, 0, 0}};
            if (yy < -1.0 || yy > h || xx < -1.0 || xx > w || h == 0 || w == 0) {
              taps.push_back(t);
              continue;
            }
            yy = std::max(yy, 0.0);
            xx = std::max(xx, 0.0);
            int64_t ylo = static_cast<int64_t>(yy), xlo = static_cast<int64_t>(xx);
            int64_t yhi, xhi;
            if (ylo >= h - 1) {
              yhi = ylo = h - 1;
              yy = static_cast<double>(ylo);
            } else {
              yhi = ylo + 1;
            }
            if (xlo >= w - 1) {
              xhi = xlo = w - 1;
              xx = static_cast<double>(xlo);
            } else {
              xhi = xlo + 1;
            }
            const double ly = yy - ylo, lx = xx - xlo, hy = 1 - ly, hx = 1 - lx;
            t = {{ylo * w + xlo, ylo * w + xhi, yhi * w + xlo, yhi * w + xhi},
                 {hy * hx, hy * lx, ly * hx, ly * lx}};
            taps.push_back(t);
          }
        }
      }
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      const double* src = &xv[(b * c + ch) * h * w];
      size_t ti = 0;
      for (int64_t ph = 0; ph < oh; ++ph) {
        for (int64_t pw = 0; pw < ow; ++pw) {
          double v = 0;
          bool first = true;
          for (int64_t s = 0; s < gh * gw; ++s, ++ti) {
            const Tap& t = taps[ti];
            if (mode == "avg") {
              for (int k = 0; k < 4; ++k) v += t.w[k] * src[t.pos[k]];
            } else {
              double m = t.w[0] * src[t.pos[0]];
              for (int k = 1; k < 4; ++k) m = std::max(m, t.w[k] * src[t.pos[k]]);
              v = first ? m : std::max(v, m);
              first = false;
            }
          }
          if (mode == "avg") v /= count;
          y[((ri * c + ch) * oh + ph) * ow + pw] = v;
        }
      }
    }
  }
  return Outputs{MakeTensor(x->dtype(), out, y)};
}

// ---------------------------------------------------------------------------
// NonMaxSuppression.

struct Box {
  double y1, x1, y2, x2;
};

bool SuppressByIou(const Box& a, const Box& b, double threshold) {
  const double area_a = (a.y2 - a.y1) * (a.x2 - a.x1);
  const double area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return false;
  const double iy = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double ix = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (iy <= 0 || ix <= 0) return false;
  const double inter = iy * ix;
  const double uni = area_a + area_b - inter;
  if (uni <= 0) return false;
  return inter / uni > threshold;
}

absl::StatusOr<Outputs> NonMaxSuppression(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* boxes, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scores, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *boxes, "boxes"));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *scores, "scores"));
  if (boxes->rank() != 3 || boxes->dim(2) != 4) {
    return ctx.Error("boxes must be [batch, num_boxes, 4], got ", boxes->TypeString());
  }
  const int64_t nb = boxes->dim(0), nbox = boxes->dim(1);
  if (scores->rank() != 3 || scores->dim(0) != nb || scores->dim(2) != nbox) {
    return ctx.Error("scores must be [", nb, ", classes, ", nbox, "], got ",
                     scores->TypeString());
  }
  const int64_t nc = scores->dim(1);
  int64_t max_out = 0;
  if (ctx.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(max_out, ScalarInt(ctx, 2, "max_output_boxes_per_class"));
    max_out = std::max<int64_t>(max_out, 0);
  }
  double iou_threshold = 0;
  if (ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(iou_threshold, ScalarFloat(ctx, 3, "iou_threshold"));
    if (!(iou_threshold >= 0 && iou_threshold <= 1)) {
      return ctx.Error("iou_threshold must be in [0, 1], got ", iou_threshold);
    }
  }
  const bool has_score_threshold = ctx.has_input(4);
  double score_threshold = 0;
  if (has_score_threshold) {
    KILN_ASSIGN_OR_RETURN(score_threshold, ScalarFloat(ctx, 4, "score_threshold"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t center, ctx.node.AttrOr<int64_t>("center_point_box", 0));
  if (center != 0 && center != 1) {
    return ctx.Error("center_point_box must be 0 or 1, got ", center);
  }
  const std::vector<double> bv = ReadDoubles(*boxes);
  const std::vector<double> sv = ReadDoubles(*scores);
  std::vector<Box> all(nb * nbox);
  for (int64_t i = 0; i < nb * nbox; ++i) {
    const double* p = &bv[i * 4];
    if (center) {
      all[i] = {p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
    } else {
      all[i] = {std::min(p[0], p[2]), std::min(p[1], p[3]),
                std::max(p[0], p[2]), std::max(p[1], p[3])};
    }
  }
  std::vector<int64_t> selected;
  std::vector<int64_t> order;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t cl = 0; cl < nc; ++cl) {
      const double* s = &sv[(b * nc + cl) * nbox];
      order.clear();
      for (int64_t i = 0; i < nbox; ++i) {
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t c) { return s[a] > s[c]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool suppressed = false;
        for (int64_t k : kept) {
          if (SuppressByIou(all[b * nbox + i], all[b * nbox + k], iou_threshold)) {
            suppressed = true;
            break;
          }
        }
        if (suppressed) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, cl, i});
      }
    }
  }
  const int64_t count = static_cast<int64_t>(selected.size()) / 3;
  return Outputs{Tensor::FromVector<int64_t>({count, 3}, selected)};
}

// ---------------------------------------------------------------------------
// Unique.

template <typename T>
auto UniqueKey(T v) {
  if constexpr (std::is_same_v<T, ir::Float16>) {
    return ir::HalfToFloat(v);
  } else {
    return v;
  }
}

absl::StatusOr<Outputs> Unique(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t sorted, ctx.node.AttrOr<int64_t>("sorted", 1));
  // Slices along the axis (or single elements when there is no axis).
  Shape slice_dims;
  int64_t outer = 1, count = x->num_elements(), inner = 1;
  int64_t axis = -1;
  if (ctx.node.HasAttr("axis")) {
    KILN_ASSIGN_OR_RETURN(int64_t a, ctx.node.Attr<int64_t>("axis"));
    absl::StatusOr<int64_t> na = NormalizeAxis(a, x->rank());
    if (!na.ok()) return ctx.Error(na.status().message());
    axis = *na;
    count = x->dim(axis);
    outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x->dim(d);
    for (int64_t d = axis + 1; d < x->rank(); ++d) inner *= x->dim(d);
  }
  // first[u]: first slice index of unique value u, in first-seen order.
  std::vector<int64_t> first, inverse(count), counts;
  DispatchDType(x->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using K = decltype(UniqueKey(T{}));
    const T* p = x->data<T>();
    auto slice = [&](int64_t s) {
      std::vector<K> key;
      key.reserve(outer * inner);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < inner; ++j) {
          key.push_back(UniqueKey(p[(o * count + s) * inner + j]));
        }
      }
      return key;
    };
    std::map<std::vector<K>, int64_t> seen;
    std::vector<std::vector<K>> keys;
    for (int64_t s = 0; s < count; ++s) {
      std::vector<K> key = slice(s);
      auto [it, inserted] = seen.emplace(key, static_cast<int64_t>(first.size()));
      if (inserted) {
        first.push_back(s);
        counts.push_back(0);
        keys.push_back(std::move(key));
      }
      inverse[s] = it->second;
      ++counts[it->second];
    }
    if (sorted) {
      std::vector<int64_t> perm(first.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::sort(perm.begin(), perm.end(),
                [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
      std::vector<int64_t> rank(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) rank[perm[i]] = i;
      std::vector<int64_t> f2(perm.size()), c2(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) {
        f2[i] = first[perm[i]];
        c2[i] = counts[perm[i]];
      }
      first = std::move(f2);
      counts = std::move(c2);
      for (int64_t& v : inverse) v = rank[v];
    }
  });
  const int64_t nu = static_cast<int64_t>(first.size());
  Shape yshape = axis < 0 ? Shape{nu} : x->shape();
  if (axis >= 0) yshape[axis] = nu;
  Tensor y(x->dtype(), yshape);
  const size_t esize = ir::DTypeSize(x->dtype());
  const auto* src = static_cast<const uint8_t*>(x->raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t u = 0; u < nu; ++u) {
      std::memcpy(dst + ((o * nu + u) * inner) * esize,
                  src + ((o * count + first[u]) * inner) * esize, inner * esize);
    }
  }
  Outputs out;
  out.push_back(std::move(y));
  out.push_back(Tensor::FromVector<int64_t>({nu}, first));
  out.push_back(Tensor::FromVector<int64_t>({count}, inverse));
  out.push_back(Tensor::FromVector<int64_t>({nu}, counts));
  out.resize(std::min<size_t>(out.size(), ctx.num_outputs()));
  return out;
}

// ---------------------------------------------------------------------------
// Scan.

// Slice `index` along `axis` of t, with that axis removed.
Tensor SliceAlong(const Tensor& t, int64_t axis, int64_t index) {
  Shape shape = t.shape();
  const int64_t n = shape[axis];
  shape.erase(shape.begin() + axis);
  Tensor out(t.dtype(), shape);
  int64_t outer = 1, inner = ir::DTypeSize(t.dtype());
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    if (inner > 0) std::memcpy(dst + o * inner, src + (o * n + index) * inner, inner);
  }
  return out;
}

// Stacks equally shaped parts along a new axis `axis`.
absl::StatusOr<Tensor> StackAlong(const OpContext& ctx,
                                  const std::vector<Tensor>& parts,
                                  int64_t axis, DType dtype, const Shape& empty_part) {
  const Shape part_shape = parts.empty() ? empty_part : parts[0].shape();
  if (axis < 0 || axis > static_cast<int64_t>(part_shape.size())) {
    return ctx.Error("scan output axis ", axis, " is out of range for rank ",
                     part_shape.size() + 1);
  }
  Shape shape = part_shape;
  const int64_t n = static_cast<int64_t>(parts.size());
  shape.insert(shape.begin() + axis, n);
  Tensor out(parts.empty() ? dtype : parts[0].dtype(), shape);
  int64_t outer = 1, inner = ir::DTypeSize(out.dtype());
  for (int64_t d = 0; d < axis; ++d) outer *= part_shape[d];
  for (size_t d = axis; d < part_shape.size(); ++d) inner *= part_shape[d];
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t t = 0; t < n; ++t) {
    if (parts[t].shape() != part_shape || parts[t].dtype() != out.dtype()) {
      return ctx.Error("scan output changes from ", parts[0].TypeString(),
                       " to ", parts[t].TypeString(), " across iterations");
    }
    const auto* src = static_cast<const uint8_t*>(parts[t].raw_data());
    for (int64_t o = 0; o < outer; ++o) {
      if (inner > 0) std::memcpy(dst + (o * n + t) * inner, src + o * inner, inner);
    }
  }
  return out;
}

struct ScanSpec {
  const ir::Graph* body = nullptr;
  int num_state = 0, num_scan_in = 0, num_scan_out = 0;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

// One Scan over `states` and `scan_inputs` (axes already normalized).
absl::StatusOr<std::vector<Tensor>> RunScan(const OpContext& ctx,
                                            const ScanSpec& s,
                                            std::vector<Tensor> states,
                                            const std::vector<const Tensor*>& scans) {
  int64_t len = -1;
  for (int i = 0; i < s.num_scan_in; ++i) {
    const int64_t l = scans[i]->dim(s.in_axes[i]);
    if (len >= 0 && l != len) {
      return ctx.Error("scan inputs have different lengths ", len, " and ", l);
    }
    len = l;
  }
  if (len < 0) len = 0;
  std::vector<std::vector<Tensor>> outs(s.num_scan_out);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Tensor> inputs = std::move(states);
    for (int i = 0; i < s.num_scan_in; ++i) {
      const int64_t at = s.in_dirs[i] ? len - 1 - t : t;
      inputs.push_back(SliceAlong(*scans[i], s.in_axes[i], at));
    }
    absl::StatusOr<std::vector<Tensor>> r = ctx.run_subgraph(*s.body, inputs);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat(ctx.node.Describe(), ": in body: ",
                                       r.status().message()));
    }
    if (r->size() != static_cast<size_t>(s.num_state + s.num_scan_out)) {
      return ctx.Error("body returned ", r->size(), " outputs");
    }
    states.assign(std::make_move_iterator(r->begin()),
                  std::make_move_iterator(r->begin() + s.num_state));
    for (int k = 0; k < s.num_scan_out; ++k) {
      outs[k].push_back(std::move((*r)[s.num_state + k]));
    }
  }
  std::vector<Tensor> result = std::move(states);
  for (int k = 0; k < s.num_scan_out; ++k) {
    if (s.out_dirs[k]) std::reverse(outs[k].begin(), outs[k].end());
    const ir::Value& bv = s.body->value(s.body->outputs()[s.num_state + k]);
    Shape empty_part;
    if (outs[k].empty()) {
      for (int64_t d : bv.shape) empty_part.push_back(std::max<int64_t>(d, 0));
    }
    int64_t axis = s.out_axes[k];
    const int64_t rank = static_cast<int64_t>(
        (outs[k].empty() ? empty_part : outs[k][0].shape()).size()) + 1;
    if (axis < 0) axis += rank;
    const DType dtype = bv.dtype == DType::kInvalid ? DType::kF32 : bv.dtype;
    KILN_ASSIGN_OR_RETURN(Tensor st, StackAlong(ctx, outs[k], axis, dtype, empty_part));
    result.push_back(std::move(st));
  }
  return result;
}

absl::StatusOr<std::vector<int64_t>> ScanInts(const OpContext& ctx,
                                              const char* name, int n) {
  return IntsOr(ctx, name, static_cast<size_t>(n), 0);
}

absl::StatusOr<Outputs> Scan(OpContext& ctx) {
  if (!ctx.node.HasAttr("body")) return ctx.Error("missing attribute 'body'");
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ir::Graph> body,
                        ctx.node.Attr<std::shared_ptr<const ir::Graph>>("body"));
  if (body == nullptr) return ctx.Error("attribute 'body' is empty");
  KILN_ASSIGN_OR_RETURN(int64_t m, ctx.node.Attr<int64_t>("num_scan_inputs"));
  const bool v8 = ctx.opset < 9;
  const int first = v8 ? 1 : 0;
  const int num_inputs = ctx.num_inputs() - first;
  if (m <= 0 || m > num_inputs) {
    return ctx.Error("num_scan_inputs ", m, " does not fit ", num_inputs,
                     " inputs");
  }
  ScanSpec s;
  s.body = body.get();
  s.num_scan_in = static_cast<int>(m);
  s.num_state = num_inputs - s.num_scan_in;
  s.num_scan_out = static_cast<int>(body->outputs().size()) - s.num_state;
  if (static_cast<int>(body->inputs().size()) != num_inputs || s.num_scan_out < 0) {
    return ctx.Error("body has ", body->inputs().size(), " inputs and ",
                     body->outputs().size(), " outputs for ", s.num_state,
                     " states and ", m, " scan inputs");
  }
  if (ctx.num_outputs() > s.num_state + s.num_scan_out) {
    return ctx.Error("node has ", ctx.num_outputs(), " outputs, the body yields ",
                     s.num_state + s.num_scan_out);
  }
  std::vector<const Tensor*> inputs;
  for (int i = 0; i < num_inputs; ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(first + i));
    inputs.push_back(t);
  }
  std::vector<Tensor> results;
  if (!v8) {
    KILN_ASSIGN_OR_RETURN(s.in_axes, ScanInts(ctx, "scan_input_axes", s.num_scan_in));
    KILN_ASSIGN_OR_RETURN(s.in_dirs, ScanInts(ctx, "scan_input_directions", s.num_scan_in));
    KILN_ASSIGN_OR_RETURN(s.out_axes, ScanInts(ctx, "scan_output_axes", s.num_scan_out));
    KILN_ASSIGN_OR_RETURN(s.out_dirs, ScanInts(ctx, "scan_output_directions", s.num_scan_out));
    for (int i = 0; i < s.num_scan_in; ++i) {
      const Tensor& t = *inputs[s.num_state + i];
      absl::StatusOr<int64_t> a = NormalizeAxis(s.in_axes[i], t.rank());
      if (!a.ok()) return ctx.Error("scan input ", i, ": ", a.status().message());
      s.in_axes[i] = *a;
    }
    std::vector<Tensor> states;
    for (int i = 0; i < s.num_state; ++i) states.push_back(*inputs[i]);
    const std::vector<const Tensor*> scans(inputs.begin() + s.num_state, inputs.end());
    KILN_ASSIGN_OR_RETURN(results, RunScan(ctx, s, std::move(states), scans));
  } else {
    // Scan-8: every input has a leading batch dim; scan inputs scan axis 1.
    KILN_ASSIGN_OR_RETURN(s.in_dirs, ScanInts(ctx, "directions", s.num_scan_in));
    s.in_axes.assign(s.num_scan_in, 0);
    s.out_axes.assign(s.num_scan_out, 0);
    s.out_dirs.assign(s.num_scan_out, 0);
    int64_t batch = -1;
    for (int i = 0; i < num_inputs; ++i) {
      const Tensor& t = *inputs[i];
      const int64_t min_rank = i < s.num_state ? 1 : 2;
      if (t.rank() < min_rank || (batch >= 0 && t.dim(0) != batch)) {
        return ctx.Error("input ", first + i, " ", t.TypeString(),
                         " lacks the shared batch dimension");
      }
      batch = t.dim(0);
    }
    if (ctx.has_input(0)) {
      const Tensor& lens = *ctx.inputs[0];
      const int64_t full = inputs[s.num_state]->dim(1);
      for (int64_t v : lens.ToInt64Vector()) {
        if (v != full) {
          return absl::UnimplementedError(absl::StrCat(
              ctx.node.Describe(), ": sequence_lens shorter than the scan "
              "length are not supported"));
        }
      }
    }
    std::vector<std::vector<Tensor>> per_batch(s.num_state + s.num_scan_out);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> states;
      for (int i = 0; i < s.num_state; ++i) states.push_back(SliceAlong(*inputs[i], 0, b));
      std::vector<Tensor> scan_slices;
      for (int i = 0; i < s.num_scan_in; ++i) {
        scan_slices.push_back(SliceAlong(*inputs[s.num_state + i], 0, b));
      }
      std::vector<const Tensor*> scans;
      for (const Tensor& t : scan_slices) scans.push_back(&t);
      KILN_ASSIGN_OR_RETURN(std::vector<Tensor> r,
                            RunScan(ctx, s, std::move(states), scans));
      for (size_t k = 0; k < r.size(); ++k) per_batch[k].push_back(std::move(r[k]));
    }
    for (size_t k = 0; k < per_batch.size(); ++k) {
      const DType dtype = DeclaredDType(ctx, static_cast<int>(k), DType::kF32);
      KILN_ASSIGN_OR_RETURN(Tensor t, StackAlong(ctx, per_batch[k], 0, dtype, {}));
      results.push_back(std::move(t));
    }
  }
  results.resize(std::min<size_t>(results.size(), ctx.num_outputs()));
  for (int i = 0; i < static_cast<int>(results.size()); ++i) {
    const DType want = DeclaredDType(ctx, i, results[i].dtype());
    if (want != results[i].dtype()) {
      return ctx.Error("body produced ", results[i].TypeString(), " for output ",
                       i, ", which is declared ", ir::DTypeName(want));
    }
  }
  return results;
}

// ---------------------------------------------------------------------------
// TfIdfVectorizer (integer n-gram pools).

absl::StatusOr<Outputs> TfIdfVectorizer(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (x->dtype() != DType::kI32 && x->dtype() != DType::kI64) {
    return ctx.Error("only i32/i64 input is supported, got ", x->TypeString());
  }
  if (x->rank() != 1 && x->rank() != 2) {
    return ctx.Error("X must be [C] or [N, C], got ", x->TypeString());
  }
  if (ctx.node.HasAttr("pool_strings")) {
    return absl::UnimplementedError(absl::StrCat(
        ctx.node.Describe(), ": string pools are not supported"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t min_n, ctx.node.Attr<int64_t>("min_gram_length"));
  KILN_ASSIGN_OR_RETURN(int64_t max_n, ctx.node.Attr<int64_t>("max_gram_length"));
  KILN_ASSIGN_OR_RETURN(int64_t max_skip, ctx.node.Attr<int64_t>("max_skip_count"));
  KILN_ASSIGN_OR_RETURN(std::string mode, ctx.node.Attr<std::string>("mode"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> counts,
                        ctx.node.Attr<std::vector<int64_t>>("ngram_counts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> indexes,
                        ctx.node.Attr<std::vector<int64_t>>("ngram_indexes"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pool,
                        ctx.node.Attr<std::vector<int64_t>>("pool_int64s"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> weights,
                        ctx.node.AttrOr<std::vector<float>>("weights", {}));
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") {
    return ctx.Error("unknown mode '", mode, "'");
  }
  if (min_n < 1 || max_n < min_n || max_n > static_cast<int64_t>(counts.size()) ||
      max_skip < 0 || max_skip > kMaxElements) {
    return ctx.Error("invalid gram lengths ", min_n, "..", max_n, " for ",
                     counts.size(), " ngram_counts, or max_skip_count ", max_skip);
  }
  // Pool entries of length n start at counts[n-1]; gram ids run on across n.
  struct Level {
    int64_t start, end, first_id;
  };
  std::vector<Level> levels;
  int64_t id = 0;
  for (size_t n = 1; n <= counts.size(); ++n) {
    const int64_t start = counts[n - 1];
    const int64_t end = n < counts.size() ? counts[n] : static_cast<int64_t>(pool.size());
    if (start < 0 || end < start || end > static_cast<int64_t>(pool.size()) ||
        (end - start) % static_cast<int64_t>(n) != 0) {
      return ctx.Error("ngram_counts do not split pool_int64s into n-grams");
    }
    levels.push_back({start, end, id});
    id += (end - start) / static_cast<int64_t>(n);
  }
  if (static_cast<int64_t>(indexes.size()) != id) {
    return ctx.Error("ngram_indexes has ", indexes.size(), " entries for ", id,
                     " n-grams");
  }
  if (!weights.empty() && weights.size() != indexes.size()) {
    return ctx.Error("weights has ", weights.size(), " entries for ", id, " n-grams");
  }
  int64_t num_out = 0;
  for (int64_t v : indexes) {
    if (v < 0 || v >= kMaxElements) return ctx.Error("ngram index ", v, " out of range");
    num_out = std::max(num_out, v + 1);
  }
  std::map<std::vector<int64_t>, int64_t> gram_ids;
  for (size_t n = 1; n <= levels.size(); ++n) {
    const Level& l = levels[n - 1];
    for (int64_t p = l.start, g = l.first_id; p < l.end; p += n, ++g) {
      gram_ids.emplace(std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n), g);
    }
  }
  const int64_t rows = x->rank() == 2 ? x->dim(0) : 1;
  const int64_t cols = x->dim(x->rank() - 1);
  const Shape out = x->rank() == 2 ? Shape{rows, num_out} : Shape{num_out};
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out));
  const std::vector<int64_t> xv = x->ToInt64Vector();
  std::vector<double> y(ir::NumElements(out), 0.0);
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> freq(id, 0);
    const int64_t* row = &xv[r * cols];
    for (int64_t n = min_n; n <= max_n; ++n) {
      const int64_t skips = n == 1 ? 0 : max_skip;
      for (int64_t skip = 0; skip <= skips; ++skip) {
        const int64_t span = (n - 1) * (skip + 1);
        for (int64_t start = 0; start + span < cols; ++start) {
          gram.clear();
          for (int64_t k = 0; k < n; ++k) gram.push_back(row[start + k * (skip + 1)]);
          auto it = gram_ids.find(gram);
          if (it != gram_ids.end()) ++freq[it->second];
        }
      }
    }
    for (int64_t g = 0; g < id; ++g) {
      if (freq[g] == 0) continue;
      const double w = weights.empty() ? 1.0 : weights[g];
      double v = static_cast<double>(freq[g]);
      if (mode == "IDF") v = w;
      if (mode == "TFIDF") v *= w;
      y[r * num_out + indexes[g]] = v;
    }
  }
  return Outputs{MakeTensor(DeclaredDType(ctx, 0, DType::kF32), out, y)};
}

}  // namespace

void RegisterExtraOps(OpRegistry* registry) {
  registry->Register("NegativeLogLikelihoodLoss", NegativeLogLikelihoodLoss);
  registry->Register("SoftmaxCrossEntropyLoss", SoftmaxCrossEntropyLoss);
  registry->Register("QuantizeLinear", QuantizeLinear);
  registry->Register("DequantizeLinear", DequantizeLinear);
  registry->Register("DynamicQuantizeLinear", DynamicQuantizeLinear);
  registry->Register("ConvInteger", ConvInteger);
  registry->Register("QLinearConv", QLinearConv);
  registry->Register("QLinearMatMul", QLinearMatMul);
  registry->Register("MaxUnpool", MaxUnpool);
  registry->Register("ReverseSequence", ReverseSequence);
  registry->Register("Det", Det);
  registry->Register("HannWindow", HannWindow);
  registry->Register("HammingWindow", HammingWindow);
  registry->Register("BlackmanWindow", BlackmanWindow);
  registry->Register("MelWeightMatrix", MelWeightMatrix);
  registry->Register("DFT", Dft);
  registry->Register("STFT", Stft);
  registry->Register("GridSample", GridSample);
  registry->Register("RoiAlign", RoiAlign);
  registry->Register("NonMaxSuppression", NonMaxSuppression);
  registry->Register("Unique", Unique);
  registry->Register("Scan", Scan);
  registry->Register("TfIdfVectorizer", TfIdfVectorizer);
}

}  // namespace kiln::interp
