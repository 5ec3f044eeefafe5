// File: interp/nn.cc — reference kernels of ONNX's nn family (onnx/defs/nn): Conv,
// ConvTranspose and their quantized forms, pooling, MaxUnpool, the
// normalizations, LRN, Shrink, Dropout, Flatten and TfIdfVectorizer.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "interp/elementwise.h"
#include "interp/gemm.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "interp/quant_util.h"
#include "ir/graph/dtype.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;
using Outputs = std::vector<Tensor>;
using Result = absl::StatusOr<Outputs>;

// ---- Sliding windows shared by Conv, ConvTranspose and the pools.

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end;
};

absl::StatusOr<Window> ReadWindow(const OpContext& ctx,
                                  std::vector<int64_t> kernel) {
  const size_t n = kernel.size();
  Window w;
  w.kernel = std::move(kernel);
  KILN_ASSIGN_OR_RETURN(w.strides, IntsOr(ctx, "strides", n, 1));
  KILN_ASSIGN_OR_RETURN(w.dilations, IntsOr(ctx, "dilations", n, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                        IntsOr(ctx, "pads", 2 * n, 0));
  constexpr int64_t kMaxWindowValue = int64_t{1} << 31;
  for (size_t i = 0; i < n; ++i) {
    if (w.kernel[i] > kMaxWindowValue || w.strides[i] > kMaxWindowValue ||
        w.dilations[i] > kMaxWindowValue || pads[i] > kMaxWindowValue ||
        pads[n + i] > kMaxWindowValue) {
      return ctx.Error("kernel, strides, dilations or pads value too large");
    }
    if (w.kernel[i] <= 0) return ctx.Error("kernel dims must be positive");
    if (w.strides[i] <= 0) return ctx.Error("strides must be positive");
    if (w.dilations[i] <= 0) return ctx.Error("dilations must be positive");
    if (pads[i] < 0 || pads[n + i] < 0) {
      return ctx.Error("pads must be non-negative");
    }
  }
  w.pad_begin.assign(pads.begin(), pads.begin() + n);
  w.pad_end.assign(pads.begin() + n, pads.end());
  return w;
}

// Output spatial shape of a forward window op (Conv, pools); resolves
// auto_pad into w->pad_begin / pad_end.
absl::StatusOr<Shape> WindowOutputShape(const OpContext& ctx, const Shape& in,
                                        bool ceil_mode, Window* w) {
  KILN_ASSIGN_OR_RETURN(std::string auto_pad,
                        ctx.node.AttrOr<std::string>("auto_pad", "NOTSET"));
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t s = w->strides[i];
    const int64_t ek = (w->kernel[i] - 1) * w->dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[i] = CeilDiv(in[i], s);
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * s + ek - in[i]);
      const int64_t half = total / 2;
      w->pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      w->pad_end[i] = total - w->pad_begin[i];
    } else if (auto_pad == "VALID" || auto_pad == "NOTSET" || auto_pad.empty()) {
      if (auto_pad == "VALID") w->pad_begin[i] = w->pad_end[i] = 0;
      const int64_t span = in[i] + w->pad_begin[i] + w->pad_end[i] - ek;
      if (span < 0) {
        return ctx.Error("kernel extent ", ek, " exceeds padded input size ",
                         in[i] + w->pad_begin[i] + w->pad_end[i],
                         " in spatial dim ", i);
      }
      out[i] = (ceil_mode ? CeilDiv(span, s) : span / s) + 1;
      if (ceil_mode && (out[i] - 1) * s >= in[i] + w->pad_begin[i]) --out[i];
    } else {
      return ctx.Error("unknown auto_pad '", auto_pad, "'");
    }
    if (out[i] <= 0) {
      return ctx.Error("output spatial dim ", i, " would be ", out[i]);
    }
  }
  return out;
}

constexpr int64_t kOutside = std::numeric_limits<int64_t>::min();

// Where each kernel tap of a sliding window lands. `grid` is the side the
// window moves over in strides (Conv output, ConvTranspose input), `target`
// the side it reads or writes. coord[d][k * grid[d] + g] is
// g * stride - pad_begin + k * dilation, or kOutside when that falls outside
// the target (or outside the padded target, with include_padding).
struct PatchMap {
  Shape grid;
  Shape kernel;
  std::vector<int64_t> target_strides;
  std::vector<std::vector<int64_t>> coord;
  int64_t grid_size = 0;
  int64_t kernel_size = 0;
};

PatchMap MakePatchMap(const Shape& grid, const Shape& target, const Window& w,
                      bool include_padding) {
  PatchMap m;
  m.grid = grid;
  m.kernel = w.kernel;
  m.target_strides = ir::RowMajorStrides(target);
  m.grid_size = ir::NumElements(grid);
  m.kernel_size = ir::NumElements(w.kernel);
  m.coord.resize(grid.size());
  for (size_t d = 0; d < grid.size(); ++d) {
    const int64_t lo = include_padding ? -w.pad_begin[d] : 0;
    const int64_t hi = target[d] + (include_padding ? w.pad_end[d] : 0);
    m.coord[d].resize(w.kernel[d] * grid[d]);
    for (int64_t k = 0; k < w.kernel[d]; ++k) {
      for (int64_t g = 0; g < grid[d]; ++g) {
        const int64_t c =
            g * w.strides[d] - w.pad_begin[d] + k * w.dilations[d];
        m.coord[d][k * grid[d] + g] = (c >= lo && c < hi) ? c : kOutside;
      }
    }
  }
  return m;
}

// Rejects windows whose tap tables or im2col buffer would be unreasonably
// large (the model can ask for anything).
absl::Status CheckWindowWork(const OpContext& ctx, const Shape& grid,
                             const Window& w, int64_t rows) {
  int64_t col = rows;
  for (size_t d = 0; d < grid.size(); ++d) {
    if (w.kernel[d] * grid[d] > kMaxOutputElements) {
      return ctx.Error("window tables too large for the reference interpreter");
    }
    col = grid[d] == 0 ? 0 : col * grid[d];
    if (col > kMaxOutputElements) {
      return ctx.Error("im2col buffer too large for the reference interpreter");
    }
  }
  return absl::OkStatus();
}

// Calls f(grid_offset, target_offset) for kernel tap `kidx` (row-major over
// the kernel) at every grid position whose tap lands inside the target.
template <typename F>
void VisitPatch(const PatchMap& m, int64_t kidx, F&& f) {
  const size_t nd = m.grid.size();
  if (m.grid_size == 0 || nd == 0) return;
  std::vector<int64_t> k(nd);
  for (size_t d = nd; d-- > 0;) {
    k[d] = kidx % m.kernel[d];
    kidx /= m.kernel[d];
  }
  const int64_t last = m.grid[nd - 1];
  const int64_t* last_coord = &m.coord[nd - 1][k[nd - 1] * last];
  const int64_t outer = m.grid_size / last;
  std::vector<int64_t> o(nd, 0);
  for (int64_t r = 0; r < outer; ++r) {
    bool inside = true;
    int64_t base = 0;
    for (size_t d = 0; d + 1 < nd; ++d) {
      const int64_t c = m.coord[d][k[d] * m.grid[d] + o[d]];
      if (c == kOutside) {
        inside = false;
        break;
      }
      base += c * m.target_strides[d];
    }
    if (inside) {
      const int64_t row = r * last;
      for (int64_t g = 0; g < last; ++g) {
        const int64_t c = last_coord[g];
        if (c != kOutside) f(row + g, base + c);
      }
    }
    for (size_t d = nd - 1; d-- > 0;) {
      if (++o[d] < m.grid[d]) break;
      o[d] = 0;
    }
  }
}

// ---- Conv, ConvTranspose.

absl::StatusOr<std::vector<int64_t>> KernelFromWeights(const OpContext& ctx,
                                                       const Tensor& w) {
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.node.HasAttr("kernel_shape")) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> attr,
                          ctx.node.Attr<std::vector<int64_t>>("kernel_shape"));
    if (attr != kernel) {
      return ctx.Error("kernel_shape ", ir::ShapeToString(attr),
                       " does not match weight spatial dims ",
                       ir::ShapeToString(kernel));
    }
  }
  return kernel;
}

absl::StatusOr<std::vector<double>> ReadBias(const OpContext& ctx,
                                             int64_t channels) {
  if (!ctx.has_input(2)) return std::vector<double>(channels, 0.0);
  const Tensor& b = *ctx.inputs[2];
  if (b.rank() != 1 || b.dim(0) != channels) {
    return ctx.Error("bias has shape ", ir::ShapeToString(b.shape()),
                     ", expected [", channels, "]");
  }
  return ReadAll<double>(b);
}

absl::StatusOr<std::vector<Tensor>> Conv(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  if (x->rank() < 3 || w->rank() != x->rank()) {
    return ctx.Error("X ", x->TypeString(), " and W ", w->TypeString(),
                     " must have the same rank >= 3");
  }
  KILN_ASSIGN_OR_RETURN(int64_t group, ctx.node.AttrOr<int64_t>("group", 1));
  const int64_t n = x->dim(0), c = x->dim(1), m = w->dim(0), cg = w->dim(1);
  if (group <= 0) return ctx.Error("group must be positive, got ", group);
  if (c % group != 0) {
    return ctx.Error("group ", group, " does not divide input channels ", c);
  }
  if (cg * group != c) {
    return ctx.Error("W has ", cg, " input channels per group, but X has ", c,
                     " channels and group is ", group);
  }
  if (m % group != 0) {
    return ctx.Error("group ", group, " does not divide output channels ", m);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelFromWeights(ctx, *w));
  KILN_ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, kernel));
  const Shape in_sp(x->shape().begin() + 2, x->shape().end());
  KILN_ASSIGN_OR_RETURN(Shape out_sp, WindowOutputShape(ctx, in_sp, false, &win));
  KILN_ASSIGN_OR_RETURN(std::vector<double> bias, ReadBias(ctx, m));
  Shape out_shape = {n, m};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_shape));

  KILN_RETURN_IF_ERROR(
      CheckWindowWork(ctx, out_sp, win, cg * ir::NumElements(kernel)));
  const std::vector<double> xv = ReadAll<double>(*x);
  const std::vector<double> wv = ReadAll<double>(*w);
  const int64_t mg = m / group;
  const int64_t p_in = ir::NumElements(in_sp), p = ir::NumElements(out_sp);
  const PatchMap pm = MakePatchMap(out_sp, in_sp, win, false);
  const int64_t r = cg * pm.kernel_size;
  std::vector<double> col(r * p);
  std::vector<double> y(ir::NumElements(out_shape), 0.0);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < group; ++g) {
      std::fill(col.begin(), col.end(), 0.0);
      for (int64_t ci = 0; ci < cg; ++ci) {
        const double* xc = &xv[(b * c + g * cg + ci) * p_in];
        for (int64_t k = 0; k < pm.kernel_size; ++k) {
          double* row = &col[(ci * pm.kernel_size + k) * p];
          VisitPatch(pm, k, [&](int64_t go, int64_t ti) { row[go] = xc[ti]; });
        }
      }
      double* yg = &y[(b * m + g * mg) * p];
      GemmAccumulate<double>(mg, r, p, &wv[g * mg * r], col.data(), yg);
      for (int64_t mi = 0; mi < mg; ++mi) {
        const double bv = bias[g * mg + mi];
        for (int64_t j = 0; j < p; ++j) yg[mi * p + j] += bv;
      }
    }
  }
  return std::vector<Tensor>{StoreAll(x->dtype(), out_shape, y)};
}

absl::StatusOr<std::vector<Tensor>> ConvTranspose(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  if (x->rank() < 3 || w->rank() != x->rank()) {
    return ctx.Error("X ", x->TypeString(), " and W ", w->TypeString(),
                     " must have the same rank >= 3");
  }
  KILN_ASSIGN_OR_RETURN(int64_t group, ctx.node.AttrOr<int64_t>("group", 1));
  const int64_t n = x->dim(0), c = x->dim(1), mg = w->dim(1);
  if (group <= 0) return ctx.Error("group must be positive, got ", group);
  if (c % group != 0) {
    return ctx.Error("group ", group, " does not divide input channels ", c);
  }
  if (w->dim(0) != c) {
    return ctx.Error("W has ", w->dim(0), " input channels, X has ", c);
  }
  const int64_t cg = c / group, m = mg * group;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, KernelFromWeights(ctx, *w));
  const size_t nsp = kernel.size();
  KILN_ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, kernel));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_pad,
                        IntsOr(ctx, "output_padding", nsp, 0));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad,
                        ctx.node.AttrOr<std::string>("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER" && auto_pad != "VALID" && !auto_pad.empty()) {
    return ctx.Error("unknown auto_pad '", auto_pad, "'");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape_attr,
                        ctx.node.AttrOr<std::vector<int64_t>>(
                            "output_shape", std::vector<int64_t>{}));
  if (out_shape_attr.size() == nsp + 2) {
    out_shape_attr.erase(out_shape_attr.begin(), out_shape_attr.begin() + 2);
  }
  if (!out_shape_attr.empty() && out_shape_attr.size() != nsp) {
    return ctx.Error("output_shape has ", out_shape_attr.size(),
                     " values, expected ", nsp);
  }
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  const bool explicit_pads = ctx.node.HasAttr("pads") && !same;
  const Shape in_sp(x->shape().begin() + 2, x->shape().end());
  Shape out_sp(nsp);
  for (size_t i = 0; i < nsp; ++i) {
    if (out_pad[i] < 0) return ctx.Error("output_padding must be >= 0");
    const int64_t ek = (kernel[i] - 1) * win.dilations[i] + 1;
    const int64_t full = win.strides[i] * (in_sp[i] - 1) + out_pad[i] + ek;
    if (auto_pad == "VALID") win.pad_begin[i] = win.pad_end[i] = 0;
    if (!out_shape_attr.empty() || same) {
      out_sp[i] = !out_shape_attr.empty() ? out_shape_attr[i]
                                          : in_sp[i] * win.strides[i];
      if (!explicit_pads) {
        const int64_t total = full - out_sp[i];
        const int64_t half = FloorDiv(total, 2);
        win.pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
        win.pad_end[i] = total - win.pad_begin[i];
      }
    } else {
      out_sp[i] = full - win.pad_begin[i] - win.pad_end[i];
    }
    if (out_sp[i] <= 0) {
      return ctx.Error("output spatial dim ", i, " would be ", out_sp[i]);
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<double> bias, ReadBias(ctx, m));
  Shape out_shape = {n, m};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_shape));

  KILN_RETURN_IF_ERROR(
      CheckWindowWork(ctx, in_sp, win, mg * ir::NumElements(kernel)));
  const std::vector<double> xv = ReadAll<double>(*x);
  const std::vector<double> wv = ReadAll<double>(*w);
  const int64_t p_in = ir::NumElements(in_sp), p = ir::NumElements(out_sp);
  const PatchMap pm = MakePatchMap(in_sp, out_sp, win, false);
  const int64_t r = mg * pm.kernel_size;
  std::vector<double> col(r * p_in);
  std::vector<double> y(ir::NumElements(out_shape), 0.0);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < group; ++g) {
      std::fill(col.begin(), col.end(), 0.0);
      for (int64_t ci = 0; ci < cg; ++ci) {
        const double* xr = &xv[(b * c + g * cg + ci) * p_in];
        const double* wr = &wv[(g * cg + ci) * r];
        for (int64_t ri = 0; ri < r; ++ri) {
          const double a = wr[ri];
          double* __restrict cr = &col[ri * p_in];
          for (int64_t j = 0; j < p_in; ++j) cr[j] += a * xr[j];
        }
      }
      for (int64_t mi = 0; mi < mg; ++mi) {
        double* yr = &y[(b * m + g * mg + mi) * p];
        for (int64_t k = 0; k < pm.kernel_size; ++k) {
          const double* cr = &col[(mi * pm.kernel_size + k) * p_in];
          VisitPatch(pm, k, [&](int64_t gi, int64_t ti) { yr[ti] += cr[gi]; });
        }
        const double bv = bias[g * mg + mi];
        for (int64_t j = 0; j < p; ++j) yr[j] += bv;
      }
    }
  }
  return std::vector<Tensor>{StoreAll(x->dtype(), out_shape, y)};
}

// ---- Quantized Conv: ConvInteger, QLinearConv.

// Row-major coordinates of flat index `i` in `shape`.
void Unravel(int64_t i, const Shape& shape, std::vector<int64_t>* coord) {
  coord->resize(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    (*coord)[d] = shape[d] == 0 ? 0 : i % shape[d];
    i = shape[d] == 0 ? 0 : i / shape[d];
  }
}

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
  if (taps > 0 && work > kMaxOutputElements / taps) {
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

absl::StatusOr<Outputs> ConvInteger(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *x, "x"));
  KILN_RETURN_IF_ERROR(RequireQuantized(ctx, *w, "w"));
  KILN_ASSIGN_OR_RETURN(ConvGeometry g,
                        ReadConvGeometry(ctx, x->shape(), w->shape()));
  std::vector<int64_t> xv = x->ToInt64Vector(), wv = w->ToInt64Vector();
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
  std::vector<int64_t> xv = x->ToInt64Vector(), wv = w->ToInt64Vector();
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

// ---- Pooling, MaxUnpool.

enum class PoolKind { kMax, kAverage, kLp };

absl::StatusOr<std::vector<Tensor>> Pool(OpContext& ctx, PoolKind kind) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (x->rank() < 3) return ctx.Error("X must have rank >= 3");
  const size_t nsp = x->rank() - 2;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                        ctx.node.Attr<std::vector<int64_t>>("kernel_shape"));
  if (kernel.size() != nsp) {
    return ctx.Error("kernel_shape has ", kernel.size(), " dims, X has ", nsp,
                     " spatial dims");
  }
  KILN_ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, kernel));
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode,
                        ctx.node.AttrOr<int64_t>("ceil_mode", 0));
  KILN_ASSIGN_OR_RETURN(int64_t include_pad,
                        ctx.node.AttrOr<int64_t>("count_include_pad", 0));
  KILN_ASSIGN_OR_RETURN(int64_t storage_order,
                        ctx.node.AttrOr<int64_t>("storage_order", 0));
  KILN_ASSIGN_OR_RETURN(int64_t p_norm, ctx.node.AttrOr<int64_t>("p", 2));
  if (kind != PoolKind::kMax && !ir::IsFloat(x->dtype())) {
    return ctx.Error("X must be a float tensor, got ", x->TypeString());
  }
  const Shape in_sp(x->shape().begin() + 2, x->shape().end());
  KILN_ASSIGN_OR_RETURN(Shape out_sp,
                        WindowOutputShape(ctx, in_sp, ceil_mode != 0, &win));
  Shape out_shape = {x->dim(0), x->dim(1)};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_shape));
  KILN_RETURN_IF_ERROR(CheckWindowWork(ctx, out_sp, win, 1));
  const bool want_indices =
      kind == PoolKind::kMax && ctx.num_outputs() > 1 &&
      ctx.node.outputs[1] != ir::kNoValue;

  const std::vector<double> xv = ReadAll<double>(*x);
  const int64_t planes = x->dim(0) * x->dim(1);
  const int64_t p_in = ir::NumElements(in_sp), p = ir::NumElements(out_sp);
  const PatchMap pm = MakePatchMap(out_sp, in_sp, win, false);
  std::vector<int64_t> padded_count;
  if (kind == PoolKind::kAverage && include_pad != 0) {
    const PatchMap padded = MakePatchMap(out_sp, in_sp, win, true);
    padded_count.assign(p, 0);
    for (int64_t k = 0; k < padded.kernel_size; ++k) {
      VisitPatch(padded, k, [&](int64_t go, int64_t) { ++padded_count[go]; });
    }
  }
  std::vector<double> y(planes * p);
  std::vector<int64_t> indices(want_indices ? planes * p : 0);
  std::vector<double> acc(p);
  std::vector<int64_t> count(p), arg(p);
  const double lowest = -std::numeric_limits<double>::infinity();
  for (int64_t plane = 0; plane < planes; ++plane) {
    const double* xp = &xv[plane * p_in];
    std::fill(acc.begin(), acc.end(), kind == PoolKind::kMax ? lowest : 0.0);
    std::fill(count.begin(), count.end(), 0);
    std::fill(arg.begin(), arg.end(), -1);
    for (int64_t k = 0; k < pm.kernel_size; ++k) {
      VisitPatch(pm, k, [&](int64_t go, int64_t ti) {
        const double v = xp[ti];
        ++count[go];
        switch (kind) {
          case PoolKind::kMax:
            if (arg[go] < 0 || v > acc[go]) {
              acc[go] = v;
              arg[go] = ti;
            }
            break;
          case PoolKind::kAverage:
            acc[go] += v;
            break;
          case PoolKind::kLp:
            acc[go] += std::pow(std::fabs(v), static_cast<double>(p_norm));
            break;
        }
      });
    }
    for (int64_t j = 0; j < p; ++j) {
      double& out = y[plane * p + j];
      switch (kind) {
        case PoolKind::kMax:
          out = count[j] > 0 ? acc[j] : 0.0;
          break;
        case PoolKind::kAverage: {
          const int64_t div = include_pad != 0 ? padded_count[j] : count[j];
          out = div > 0 ? acc[j] / div : 0.0;
          break;
        }
        case PoolKind::kLp:
          out = std::pow(acc[j], 1.0 / static_cast<double>(p_norm));
          break;
      }
      if (want_indices) {
        int64_t idx = std::max<int64_t>(arg[j], 0);
        if (storage_order != 0) {
          int64_t rest = idx, col_major = 0, stride = 1;
          std::vector<int64_t> coord(nsp);
          for (size_t d = nsp; d-- > 0;) {
            coord[d] = rest % in_sp[d];
            rest /= in_sp[d];
          }
          for (size_t d = 0; d < nsp; ++d) {
            col_major += coord[d] * stride;
            stride *= in_sp[d];
          }
          idx = col_major;
        }
        indices[plane * p + j] = plane * p_in + idx;
      }
    }
  }
  std::vector<Tensor> outs;
  outs.push_back(StoreAll(x->dtype(), out_shape, y));
  if (want_indices) {
    outs.push_back(StoreAll(DType::kI64, out_shape, indices));
  }
  return outs;
}

absl::StatusOr<std::vector<Tensor>> GlobalPool(OpContext& ctx, PoolKind kind) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  if (x->rank() < 2) return ctx.Error("X must have rank >= 2");
  KILN_ASSIGN_OR_RETURN(int64_t p_norm, ctx.node.AttrOr<int64_t>("p", 2));
  const int64_t planes = x->dim(0) * x->dim(1);
  const int64_t s = ir::NumElements(Shape(x->shape().begin() + 2, x->shape().end()));
  Shape out_shape = x->shape();
  for (size_t d = 2; d < out_shape.size(); ++d) out_shape[d] = 1;
  const std::vector<double> xv = ReadAll<double>(*x);
  std::vector<double> y(planes);
  for (int64_t plane = 0; plane < planes; ++plane) {
    const double* xp = &xv[plane * s];
    double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity()
                                        : 0.0;
    for (int64_t j = 0; j < s; ++j) {
      switch (kind) {
        case PoolKind::kMax: acc = std::max(acc, xp[j]); break;
        case PoolKind::kAverage: acc += xp[j]; break;
        case PoolKind::kLp:
          acc += std::pow(std::fabs(xp[j]), static_cast<double>(p_norm));
          break;
      }
    }
    if (kind == PoolKind::kAverage) acc = s > 0 ? acc / s : 0.0;
    if (kind == PoolKind::kLp) acc = std::pow(acc, 1.0 / p_norm);
    y[plane] = acc;
  }
  return std::vector<Tensor>{StoreAll(x->dtype(), out_shape, y)};
}

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

// ---- Normalizations.

absl::StatusOr<std::vector<Tensor>> BatchNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  if (x->rank() < 2) return ctx.Error("X must have rank >= 2");
  const Tensor* params[4];
  for (int i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(params[i], ctx.Input(i + 1));
  }
  KILN_ASSIGN_OR_RETURN(float epsilon,
                        ctx.node.AttrOr<float>("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(float momentum,
                        ctx.node.AttrOr<float>("momentum", 0.9f));
  KILN_ASSIGN_OR_RETURN(int64_t spatial,
                        ctx.node.AttrOr<int64_t>("spatial", 1));
  int64_t training = 0;
  if (ctx.opset >= 14) {
    KILN_ASSIGN_OR_RETURN(training,
                          ctx.node.AttrOr<int64_t>("training_mode", 0));
  }
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t s = x->rank() > 2 ? ir::NumElements(Shape(
                                        x->shape().begin() + 2, x->shape().end()))
                                  : 1;
  // Per-channel parameters, or per (channel, position) with spatial=0.
  const bool per_element = ctx.opset < 9 && spatial == 0;
  const int64_t expected = per_element ? c * s : c;
  for (int i = 0; i < 4; ++i) {
    if (params[i]->num_elements() != expected) {
      return ctx.Error("parameter input ", i + 1, " has shape ",
                       ir::ShapeToString(params[i]->shape()), ", expected ",
                       expected, " elements");
    }
  }
  bool extra_outputs = false;
  for (int i = 1; i < ctx.num_outputs(); ++i) {
    if (ctx.node.outputs[i] != ir::kNoValue) extra_outputs = true;
  }
  if (extra_outputs && training == 0) {
    return absl::UnimplementedError(absl::StrCat(
        ctx.node.Describe(),
        ": training outputs are only supported with training_mode=1 (opset "
        ">= 14)"));
  }
  if (training != 0 && per_element) {
    return absl::UnimplementedError(
        absl::StrCat(ctx.node.Describe(), ": training with spatial=0"));
  }
  const std::vector<double> xv = ReadAll<double>(*x);
  const std::vector<double> scale = ReadAll<double>(*params[0]);
  const std::vector<double> bias = ReadAll<double>(*params[1]);
  std::vector<double> mean = ReadAll<double>(*params[2]);
  std::vector<double> var = ReadAll<double>(*params[3]);
  std::vector<double> running_mean, running_var;
  if (training != 0) {
    std::vector<double> bmean(c, 0.0), bvar(c, 0.0);
    const double count = static_cast<double>(n * s);
    for (int64_t ch = 0; ch < c; ++ch) {
      double sum = 0;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t j = 0; j < s; ++j) sum += xv[(b * c + ch) * s + j];
      }
      bmean[ch] = count > 0 ? sum / count : 0.0;
      double sq = 0;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t j = 0; j < s; ++j) {
          const double d = xv[(b * c + ch) * s + j] - bmean[ch];
          sq += d * d;
        }
      }
      bvar[ch] = count > 0 ? sq / count : 0.0;
    }
    running_mean.resize(c);
    running_var.resize(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      running_mean[ch] = mean[ch] * momentum + bmean[ch] * (1.0 - momentum);
      running_var[ch] = var[ch] * momentum + bvar[ch] * (1.0 - momentum);
    }
    mean = bmean;
    var = bvar;
  }
  std::vector<double> y(xv.size());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t j = 0; j < s; ++j) {
        const int64_t pi = per_element ? ch * s + j : ch;
        const int64_t i = (b * c + ch) * s + j;
        y[i] = (xv[i] - mean[pi]) / std::sqrt(var[pi] + epsilon) * scale[pi] +
               bias[pi];
      }
    }
  }
  std::vector<Tensor> outs;
  outs.push_back(StoreAll(x->dtype(), x->shape(), y));
  if (training != 0) {
    outs.push_back(StoreAll(params[2]->dtype(), params[2]->shape(),
                              running_mean));
    outs.push_back(StoreAll(params[3]->dtype(), params[3]->shape(),
                              running_var));
  }
  return outs;
}

// Copies a float tensor into doubles (the reference's compute type).
absl::StatusOr<std::vector<double>> FloatValues(const OpContext& ctx,
                                                const Tensor& t,
                                                const char* what) {
  if (!ir::IsFloat(t.dtype())) {
    return ctx.Error(what, " must be f16, f32 or f64, got ", t.TypeString());
  }
  std::vector<double> v(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = t.GetAsDouble(i);
  return v;
}

// Writes doubles into a new tensor of a float dtype.
Tensor FloatTensor(DType dtype, Shape shape, absl::Span<const double> v) {
  Tensor t(dtype, std::move(shape));
  DispatchDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>) {
      T* p = t.data<T>();
      for (size_t i = 0; i < v.size(); ++i) p[i] = FromDouble<T>(v[i]);
    }
    return 0;
  });
  return t;
}

// `param` (Scale or B) unidirectionally broadcast to `target`, flattened.
absl::StatusOr<std::vector<double>> BroadcastParam(const OpContext& ctx,
                                                   const Tensor& param,
                                                   const Shape& target,
                                                   const char* what) {
  KILN_ASSIGN_OR_RETURN(std::vector<double> v, FloatValues(ctx, param, what));
  absl::StatusOr<Shape> b = ir::BroadcastShapes(param.shape(), target);
  if (!b.ok() || *b != target) {
    return ctx.Error(what, " of shape ", ir::ShapeToString(param.shape()),
                     " does not broadcast to ", ir::ShapeToString(target));
  }
  const int64_t n = ir::NumElements(target);
  std::vector<double> out(n);
  BroadcastMap map(param.shape(), target);
  for (int64_t i = 0; i < n; ++i) out[i] = v[map(i)];
  return out;
}

// The dtype of optional output `i`: as declared, else `fallback`.
DType DeclaredOr(const OpContext& ctx, int i, DType fallback) {
  if (i < ctx.num_outputs() && ctx.node.outputs[i] != ir::kNoValue) {
    const DType d = ctx.graph.value(ctx.node.outputs[i]).dtype;
    if (ir::IsFloat(d)) return d;
  }
  return fallback;
}

absl::StatusOr<Outputs> LayerNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(float epsilon, ctx.node.AttrOr<float>("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(int64_t stash_type,
                        ctx.node.AttrOr<int64_t>("stash_type", 1));
  absl::StatusOr<int64_t> axis = NormalizeAxis(axis_attr, x->rank());
  if (!axis.ok()) return ctx.Error(axis.status().message());
  DType stash;
  switch (stash_type) {
    case 1: stash = DType::kF32; break;
    case 10: stash = DType::kF16; break;
    case 16: stash = DType::kBF16; break;
    case 11: stash = DType::kF64; break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          ctx.node.Describe(), ": stash_type ", stash_type, " is not supported"));
  }
  const Shape norm_shape(x->shape().begin() + *axis, x->shape().end());
  const int64_t d = ir::NumElements(norm_shape);
  int64_t rows = 1;
  for (int64_t i = 0; i < *axis; ++i) rows *= x->dim(i);

  KILN_ASSIGN_OR_RETURN(std::vector<double> xv, FloatValues(ctx, *x, "X"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> sv,
                        BroadcastParam(ctx, *scale, norm_shape, "Scale"));
  std::vector<double> bv(d, 0.0);
  if (ctx.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(bv, BroadcastParam(ctx, *ctx.inputs[2], norm_shape, "B"));
  }
  std::vector<double> y(xv.size()), mean(rows), inv_std(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = xv.data() + r * d;
    double sum = 0;
    for (int64_t j = 0; j < d; ++j) sum += row[j];
    const double mu = sum / d;
    double sq = 0;
    for (int64_t j = 0; j < d; ++j) sq += (row[j] - mu) * (row[j] - mu);
    const double inv = 1.0 / std::sqrt(sq / d + epsilon);
    for (int64_t j = 0; j < d; ++j) {
      y[r * d + j] = (row[j] - mu) * inv * sv[j] + bv[j];
    }
    mean[r] = mu;
    inv_std[r] = inv;
  }
  Shape stat_shape = x->shape();
  for (size_t i = *axis; i < stat_shape.size(); ++i) stat_shape[i] = 1;
  Outputs out;
  out.push_back(FloatTensor(x->dtype(), x->shape(), y));
  if (ctx.num_outputs() > 1) {
    out.push_back(FloatTensor(DeclaredOr(ctx, 1, stash), stat_shape, mean));
  }
  if (ctx.num_outputs() > 2) {
    out.push_back(FloatTensor(DeclaredOr(ctx, 2, stash), stat_shape, inv_std));
  }
  return out;
}

absl::StatusOr<Outputs> InstanceNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* bias, ctx.Input(2));
  KILN_ASSIGN_OR_RETURN(float epsilon, ctx.node.AttrOr<float>("epsilon", 1e-5f));
  if (x->rank() < 2) {
    return ctx.Error("input must have rank >= 2 (N, C, ...), got ",
                     x->TypeString());
  }
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t spatial = c == 0 || n == 0 ? 0 : x->num_elements() / (n * c);
  if (scale->shape() != Shape{c} || bias->shape() != Shape{c}) {
    return ctx.Error("scale and B must have shape [", c, "], got ",
                     scale->TypeString(), " and ", bias->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<double> xv, FloatValues(ctx, *x, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> sv, FloatValues(ctx, *scale, "scale"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> bv, FloatValues(ctx, *bias, "B"));
  std::vector<double> y(xv.size());
  for (int64_t nc = 0; nc < n * c; ++nc) {
    const double* p = xv.data() + nc * spatial;
    double sum = 0;
    for (int64_t j = 0; j < spatial; ++j) sum += p[j];
    const double mu = sum / spatial;
    double sq = 0;
    for (int64_t j = 0; j < spatial; ++j) sq += (p[j] - mu) * (p[j] - mu);
    const double inv = 1.0 / std::sqrt(sq / spatial + epsilon);
    const int64_t ch = nc % c;
    for (int64_t j = 0; j < spatial; ++j) {
      y[nc * spatial + j] = (p[j] - mu) * inv * sv[ch] + bv[ch];
    }
  }
  return One(FloatTensor(x->dtype(), x->shape(), y));
}

absl::StatusOr<Outputs> LpNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(int64_t p, ctx.node.AttrOr<int64_t>("p", 2));
  if (p != 1 && p != 2) return ctx.Error("p must be 1 or 2, got ", p);
  absl::StatusOr<int64_t> axis = NormalizeAxis(axis_attr, x->rank());
  if (!axis.ok()) return ctx.Error(axis.status().message());
  const AxisSplit s = SplitAt(x->shape(), *axis);
  KILN_ASSIGN_OR_RETURN(std::vector<double> xv, FloatValues(ctx, *x, "input"));
  std::vector<double> y(xv.size());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.n * s.inner + i;
      double norm = 0;
      for (int64_t j = 0; j < s.n; ++j) {
        const double v = xv[base + j * s.inner];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      for (int64_t j = 0; j < s.n; ++j) {
        y[base + j * s.inner] = xv[base + j * s.inner] / norm;
      }
    }
  }
  return One(FloatTensor(x->dtype(), x->shape(), y));
}

// ONNX's function body: (X - E[X]) / (sqrt(Var[X]) + 1e-9) over `axes`.
absl::StatusOr<Outputs> MeanVarianceNormalization(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        ctx.node.AttrOr<std::vector<int64_t>>(
                            "axes", std::vector<int64_t>{0, 2, 3}));
  KILN_ASSIGN_OR_RETURN(std::vector<bool> mask, AxesMask(ctx, axes, x->rank()));
  const ReductionPlan plan = PlanReduction(x->shape(), mask, true);
  KILN_ASSIGN_OR_RETURN(std::vector<double> xv, FloatValues(ctx, *x, "input"));
  std::vector<double> y(xv.size());
  const double count = static_cast<double>(plan.reduced.size());
  for (int64_t base : plan.kept) {
    double sum = 0;
    for (int64_t r : plan.reduced) sum += xv[base + r];
    const double mu = sum / count;
    double sq = 0;
    for (int64_t r : plan.reduced) sq += (xv[base + r] - mu) * (xv[base + r] - mu);
    const double denom = std::sqrt(sq / count) + 1e-9;
    for (int64_t r : plan.reduced) y[base + r] = (xv[base + r] - mu) / denom;
  }
  return One(FloatTensor(x->dtype(), x->shape(), y));
}

absl::StatusOr<std::vector<Tensor>> Lrn(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(ctx, *x, "X"));
  if (x->rank() < 2) return ctx.Error("X must have rank >= 2");
  KILN_ASSIGN_OR_RETURN(int64_t size, ctx.node.Attr<int64_t>("size"));
  KILN_ASSIGN_OR_RETURN(float alpha, ctx.node.AttrOr<float>("alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(float beta, ctx.node.AttrOr<float>("beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(float bias, ctx.node.AttrOr<float>("bias", 1.0f));
  if (size <= 0) return ctx.Error("size must be positive, got ", size);
  const int64_t n = x->dim(0), c = x->dim(1);
  const int64_t s = x->num_elements() / std::max<int64_t>(1, n * c);
  const std::vector<double> xv = ReadAll<double>(*x);
  std::vector<double> y(xv.size());
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t lo = std::max<int64_t>(0, ch - before);
      const int64_t hi = std::min<int64_t>(c - 1, ch + after);
      for (int64_t j = 0; j < s; ++j) {
        double sq = 0;
        for (int64_t k = lo; k <= hi; ++k) {
          const double v = xv[(b * c + k) * s + j];
          sq += v * v;
        }
        const int64_t i = (b * c + ch) * s + j;
        y[i] = xv[i] / std::pow(bias + alpha / size * sq, beta);
      }
    }
  }
  return std::vector<Tensor>{StoreAll(x->dtype(), x->shape(), y)};
}

// ---- Shrink, Dropout, Flatten, TfIdfVectorizer.

Result Shrink(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(float lambd, ctx.node.AttrOr<float>("lambd", 0.5f));
  KILN_ASSIGN_OR_RETURN(float bias, ctx.node.AttrOr<float>("bias", 0.0f));
  return Unary<kNumeric>(ctx, [=](auto x) {
    const double v = static_cast<double>(x);
    const double y = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
    return Convert<decltype(x)>(y);
  });
}

// Inference-mode Dropout is the identity; its optional mask is all ones.
// Training mode is random, so only ratio 0 (again the identity) is supported.
Result Dropout(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  if (ctx.has_input(2)) {
    const Tensor& training = *ctx.inputs[2];
    if (training.dtype() != DType::kBool || training.num_elements() != 1) {
      return ctx.Error("training_mode must be a bool scalar");
    }
    double ratio = 0.5;
    if (ctx.has_input(1)) {
      const Tensor& r = *ctx.inputs[1];
      if (!ir::IsFloat(r.dtype()) || r.num_elements() != 1) {
        return ctx.Error("ratio must be a float scalar");
      }
      ratio = r.GetAsDouble(0);
    }
    if (training.data<bool>()[0] && ratio != 0) {
      return Unimplemented(ctx, "training mode with ratio ", ratio,
                           " is random and not supported");
    }
  }
  std::vector<Tensor> outs = {*x};
  if (ctx.num_outputs() >= 2 && ctx.node.outputs[1] != ir::kNoValue) {
    DType mask_dtype = ctx.graph.value(ctx.node.outputs[1]).dtype;
    if (mask_dtype == DType::kInvalid) {
      mask_dtype = ctx.opset >= 10 ? DType::kBool : x->dtype();
    }
    Tensor mask(mask_dtype, x->shape());
    DispatchDType(mask_dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* m = mask.data<T>();
      for (int64_t i = 0; i < mask.num_elements(); ++i) m[i] = Convert<T>(true);
    });
    outs.push_back(std::move(mask));
  }
  return outs;
}

Result Flatten(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ctx.node.AttrOr<int64_t>("axis", 1));
  const int64_t r = x->rank();
  if (axis < -r || axis > r) {
    return ctx.Error("axis ", axis, " is out of range for rank ", r);
  }
  if (axis < 0) axis += r;
  Shape s{Product(x->shape(), 0, axis), Product(x->shape(), axis, r)};
  KILN_ASSIGN_OR_RETURN(Tensor y, x->Reshaped(s));
  return std::vector<Tensor>{std::move(y)};
}

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
      max_skip < 0 || max_skip > kMaxOutputElements) {
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
    if (v < 0 || v >= kMaxOutputElements) return ctx.Error("ngram index ", v, " out of range");
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

void RegisterNnOps(OpRegistry* r) {
  r->Register("Conv", Conv);
  r->Register("ConvTranspose", ConvTranspose);
  r->Register("ConvInteger", ConvInteger);
  r->Register("QLinearConv", QLinearConv);
  r->Register("MaxPool", [](OpContext& ctx) { return Pool(ctx, PoolKind::kMax); });
  r->Register("AveragePool", [](OpContext& ctx) {
    return Pool(ctx, PoolKind::kAverage);
  });
  r->Register("LpPool", [](OpContext& ctx) { return Pool(ctx, PoolKind::kLp); });
  r->Register("GlobalMaxPool", [](OpContext& ctx) {
    return GlobalPool(ctx, PoolKind::kMax);
  });
  r->Register("GlobalAveragePool", [](OpContext& ctx) {
    return GlobalPool(ctx, PoolKind::kAverage);
  });
  r->Register("GlobalLpPool", [](OpContext& ctx) {
    return GlobalPool(ctx, PoolKind::kLp);
  });
  r->Register("MaxUnpool", MaxUnpool);
  r->Register("BatchNormalization", BatchNormalization);
  r->Register("LayerNormalization", LayerNormalization);
  r->Register("InstanceNormalization", InstanceNormalization);
  r->Register("LpNormalization", LpNormalization);
  r->Register("MeanVarianceNormalization", MeanVarianceNormalization);
  r->Register("LRN", Lrn);
  r->Register("Shrink", Shrink);
  r->Register("Dropout", Dropout);
  r->Register("Flatten", Flatten);
  r->Register("TfIdfVectorizer", TfIdfVectorizer);
}

}  // namespace kiln::interp
