// Reference kernels for neural-network ops: Conv, ConvTranspose, Gemm,
// MatMul(Integer), Einsum, BatchNormalization, pooling, LRN, Resize/Upsample.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ir/status_macros.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;

// Largest output the reference agrees to materialize (elements).
constexpr int64_t kMaxOutputElements = int64_t{1} << 31;

// ---------------------------------------------------------------------------
// Element conversion: kernels compute in double (floats) or int64 (integers).

template <typename Acc, typename T>
Acc LoadAs(T v) {
  if constexpr (std::is_same_v<T, ir::Float16>) {
    return static_cast<Acc>(ir::HalfToFloat(v));
  } else {
    return static_cast<Acc>(v);
  }
}

template <typename T, typename Acc>
T StoreAs(Acc v) {
  if constexpr (std::is_same_v<T, ir::Float16>) {
    return ir::FloatToHalf(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

template <typename Acc>
std::vector<Acc> ReadAll(const Tensor& t) {
  std::vector<Acc> out(t.num_elements());
  DispatchDType(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = LoadAs<Acc>(p[i]);
  });
  return out;
}

template <typename Acc>
Tensor MakeTensor(DType dtype, Shape shape, const std::vector<Acc>& values) {
  Tensor t(dtype, std::move(shape));
  DispatchDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = StoreAs<T>(values[i]);
  });
  return t;
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
  return absl::OkStatus();
}

absl::Status RequireFloat(const OpContext& ctx, const Tensor& t,
                          absl::string_view what) {
  if (!ir::IsFloat(t.dtype())) {
    return ctx.Error(what, " must be a float tensor, got ", t.TypeString());
  }
  return absl::OkStatus();
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

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t CeilDiv(int64_t a, int64_t b) { return -FloorDiv(-a, b); }

// c_r[j] += a_r * b[j] for four rows r; restrict parameters let the
// compiler vectorize.
template <typename Acc>
void Axpy4(int64_t n, Acc a0, Acc a1, Acc a2, Acc a3, const Acc* __restrict b,
           Acc* __restrict c0, Acc* __restrict c1, Acc* __restrict c2,
           Acc* __restrict c3) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int u = 0; u < 4; ++u) {
      const Acc bv = b[j + u];
      c0[j + u] += a0 * bv;
      c1[j + u] += a1 * bv;
      c2[j + u] += a2 * bv;
      c3[j + u] += a3 * bv;
    }
  }
  for (; j < n; ++j) {
    const Acc bv = b[j];
    c0[j] += a0 * bv;
    c1[j] += a1 * bv;
    c2[j] += a2 * bv;
    c3[j] += a3 * bv;
  }
}

template <typename Acc>
void Axpy(int64_t n, Acc a, const Acc* __restrict b, Acc* __restrict c) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int u = 0; u < 4; ++u) c[j + u] += a * b[j + u];
  }
  for (; j < n; ++j) c[j] += a * b[j];
}

// C += A * B for row-major A [M,K], B [K,N], C [M,N]; i-k-j order so the
// inner loop is contiguous, four rows of C at a time so each row of B is
// read once per four rows (the reference must run whole models).
template <typename Acc>
void GemmAccumulate(int64_t m, int64_t k, int64_t n, const Acc* a,
                    const Acc* b, Acc* c) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    Acc* c0 = c + i * n;
    for (int64_t p = 0; p < k; ++p) {
      Axpy4<Acc>(n, a[i * k + p], a[(i + 1) * k + p], a[(i + 2) * k + p],
                 a[(i + 3) * k + p], b + p * n, c0, c0 + n, c0 + 2 * n,
                 c0 + 3 * n);
    }
  }
  for (; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      Axpy<Acc>(n, a[i * k + p], b + p * n, c + i * n);
    }
  }
}

// ---------------------------------------------------------------------------
// Sliding windows shared by Conv, ConvTranspose and the pools.

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

// ---------------------------------------------------------------------------
// Conv / ConvTranspose.

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
  return std::vector<Tensor>{MakeTensor(x->dtype(), out_shape, y)};
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
  return std::vector<Tensor>{MakeTensor(x->dtype(), out_shape, y)};
}

// ---------------------------------------------------------------------------
// BatchNormalization, LRN.

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
  outs.push_back(MakeTensor(x->dtype(), x->shape(), y));
  if (training != 0) {
    outs.push_back(MakeTensor(params[2]->dtype(), params[2]->shape(),
                              running_mean));
    outs.push_back(MakeTensor(params[3]->dtype(), params[3]->shape(),
                              running_var));
  }
  return outs;
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
  return std::vector<Tensor>{MakeTensor(x->dtype(), x->shape(), y)};
}

// ---------------------------------------------------------------------------
// Gemm, MatMul, MatMulInteger, Einsum.

template <typename Acc>
std::vector<Acc> ReadMatrix(const Tensor& t, bool transpose) {
  std::vector<Acc> v = ReadAll<Acc>(t);
  if (!transpose) return v;
  const int64_t rows = t.dim(0), cols = t.dim(1);
  std::vector<Acc> out(v.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = v[i * cols + j];
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> Gemm(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  if (a->rank() != 2 || b->rank() != 2) {
    return ctx.Error("A ", a->TypeString(), " and B ", b->TypeString(),
                     " must be 2-D");
  }
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, ctx.node.AttrOr<int64_t>("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, ctx.node.AttrOr<int64_t>("transB", 0));
  KILN_ASSIGN_OR_RETURN(float alpha, ctx.node.AttrOr<float>("alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(float beta, ctx.node.AttrOr<float>("beta", 1.0f));
  const int64_t m = trans_a ? a->dim(1) : a->dim(0);
  const int64_t k = trans_a ? a->dim(0) : a->dim(1);
  const int64_t kb = trans_b ? b->dim(1) : b->dim(0);
  const int64_t n = trans_b ? b->dim(0) : b->dim(1);
  if (k != kb) {
    return ctx.Error("inner dims differ: A ", ir::ShapeToString(a->shape()),
                     (trans_a ? " (transposed)" : ""), ", B ",
                     ir::ShapeToString(b->shape()),
                     (trans_b ? " (transposed)" : ""));
  }
  const Shape out_shape = {m, n};
  std::vector<double> cv;
  if (ctx.has_input(2)) {
    const Tensor& c = *ctx.inputs[2];
    bool ok = c.rank() <= 2;
    for (int64_t i = 0; ok && i < c.rank(); ++i) {
      const int64_t want = out_shape[2 - c.rank() + i];
      ok = c.dim(i) == want || c.dim(i) == 1;
    }
    if (!ok) {
      return ctx.Error("C ", ir::ShapeToString(c.shape()),
                       " does not broadcast to ", ir::ShapeToString(out_shape));
    }
    const std::vector<double> raw = ReadAll<double>(c);
    BroadcastMap map(c.shape(), out_shape);
    cv.resize(m * n);
    for (int64_t i = 0; i < m * n; ++i) cv[i] = raw[map(i)];
  }
  std::vector<double> result(m * n, 0.0);
  auto finish = [&](const auto& acc_vec) {
    for (int64_t i = 0; i < m * n; ++i) {
      result[i] = alpha * static_cast<double>(acc_vec[i]) +
                  (cv.empty() ? 0.0 : beta * cv[i]);
    }
  };
  if (ir::IsFloat(a->dtype())) {
    const std::vector<double> av = ReadMatrix<double>(*a, trans_a != 0);
    const std::vector<double> bv = ReadMatrix<double>(*b, trans_b != 0);
    std::vector<double> acc(m * n, 0.0);
    GemmAccumulate<double>(m, k, n, av.data(), bv.data(), acc.data());
    finish(acc);
  } else {
    const std::vector<int64_t> av = ReadMatrix<int64_t>(*a, trans_a != 0);
    const std::vector<int64_t> bv = ReadMatrix<int64_t>(*b, trans_b != 0);
    std::vector<int64_t> acc(m * n, 0);
    GemmAccumulate<int64_t>(m, k, n, av.data(), bv.data(), acc.data());
    finish(acc);
  }
  return std::vector<Tensor>{MakeTensor(a->dtype(), out_shape, result)};
}

// Numpy matmul on already-converted operands; returns the output shape.
template <typename Acc>
absl::StatusOr<Shape> BatchedMatMul(const OpContext& ctx, Shape a_shape,
                                    const std::vector<Acc>& a, Shape b_shape,
                                    const std::vector<Acc>& b,
                                    std::vector<Acc>* out) {
  if (a_shape.empty() || b_shape.empty()) {
    return ctx.Error("MatMul operands must have rank >= 1");
  }
  const bool squeeze_m = a_shape.size() == 1;
  const bool squeeze_n = b_shape.size() == 1;
  if (squeeze_m) a_shape.insert(a_shape.begin(), 1);
  if (squeeze_n) b_shape.push_back(1);
  const int64_t m = a_shape[a_shape.size() - 2], k = a_shape.back();
  const int64_t kb = b_shape[b_shape.size() - 2], n = b_shape.back();
  if (k != kb) {
    return ctx.Error("inner dims differ: ", ir::ShapeToString(a_shape), " x ",
                     ir::ShapeToString(b_shape));
  }
  const Shape a_batch(a_shape.begin(), a_shape.end() - 2);
  const Shape b_batch(b_shape.begin(), b_shape.end() - 2);
  absl::StatusOr<Shape> batch = ir::BroadcastShapes(a_batch, b_batch);
  if (!batch.ok()) {
    return ctx.Error("batch dims do not broadcast: ", batch.status().message());
  }
  Shape out_shape = *batch;
  if (!squeeze_m) out_shape.push_back(m);
  if (!squeeze_n) out_shape.push_back(n);
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_shape));
  const int64_t num_batches = ir::NumElements(*batch);
  BroadcastMap amap(a_batch, *batch), bmap(b_batch, *batch);
  out->assign(num_batches * m * n, Acc{0});
  for (int64_t i = 0; i < num_batches; ++i) {
    GemmAccumulate<Acc>(m, k, n, a.data() + amap(i) * m * k,
                        b.data() + bmap(i) * k * n, out->data() + i * m * n);
  }
  return out_shape;
}

absl::StatusOr<std::vector<Tensor>> MatMul(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  if (ir::IsFloat(a->dtype())) {
    std::vector<double> out;
    KILN_ASSIGN_OR_RETURN(
        Shape shape, BatchedMatMul<double>(ctx, a->shape(), ReadAll<double>(*a),
                                           b->shape(), ReadAll<double>(*b), &out));
    return std::vector<Tensor>{MakeTensor(a->dtype(), shape, out)};
  }
  std::vector<int64_t> out;
  KILN_ASSIGN_OR_RETURN(
      Shape shape, BatchedMatMul<int64_t>(ctx, a->shape(), ReadAll<int64_t>(*a),
                                          b->shape(), ReadAll<int64_t>(*b), &out));
  return std::vector<Tensor>{MakeTensor(a->dtype(), shape, out)};
}

// Subtracts a zero point that is a scalar or one value per row (`per_row`,
// A's [M]) or per column (B's [N]) of the last two dims.
absl::Status SubtractZeroPoint(const OpContext& ctx, const Tensor* zp,
                               const Shape& shape, bool per_row,
                               std::vector<int64_t>* v) {
  if (zp == nullptr) return absl::OkStatus();
  const std::vector<int64_t> z = ReadAll<int64_t>(*zp);
  if (z.size() == 1) {
    for (int64_t& e : *v) e -= z[0];
    return absl::OkStatus();
  }
  const int64_t rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  const int64_t cols = shape.back();
  const int64_t want = per_row ? rows : cols;
  if (zp->rank() != 1 || zp->dim(0) != want || shape.size() < 2) {
    return absl::UnimplementedError(absl::StrCat(
        ctx.node.Describe(), ": zero point of shape ",
        ir::ShapeToString(zp->shape()), " (only scalar or 1-D per-",
        per_row ? "row" : "column", " zero points are supported)"));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const int64_t row = (i / cols) % rows, col = i % cols;
    (*v)[i] -= z[per_row ? row : col];
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> MatMulInteger(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* a, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* b, ctx.Input(1));
  if (a->rank() == 0 || b->rank() == 0) {
    return ctx.Error("operands must have rank >= 1");
  }
  std::vector<int64_t> av = ReadAll<int64_t>(*a), bv = ReadAll<int64_t>(*b);
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(
      ctx, ctx.has_input(2) ? ctx.inputs[2] : nullptr, a->shape(), true, &av));
  KILN_RETURN_IF_ERROR(SubtractZeroPoint(
      ctx, ctx.has_input(3) ? ctx.inputs[3] : nullptr, b->shape(), false, &bv));
  std::vector<int64_t> out;
  KILN_ASSIGN_OR_RETURN(Shape shape, BatchedMatMul<int64_t>(
                                         ctx, a->shape(), av, b->shape(), bv,
                                         &out));
  return std::vector<Tensor>{MakeTensor(DType::kI32, shape, out)};
}

// Einsum labels: 'A'-'Z' are 0-25, 'a'-'z' 26-51 (so sorting ids sorts
// letters as ASCII does), ellipsis dims 52 onwards.
constexpr int kNumLetters = 52;

struct EinsumTerm {
  std::vector<int> labels;  // letters; -1 marks where "..." stands
  bool has_ellipsis = false;
};

absl::StatusOr<EinsumTerm> ParseEinsumTerm(const OpContext& ctx,
                                           absl::string_view s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch >= 'A' && ch <= 'Z') {
      t.labels.push_back(ch - 'A');
    } else if (ch >= 'a' && ch <= 'z') {
      t.labels.push_back(26 + ch - 'a');
    } else if (ch == '.' && s.substr(i, 3) == "..." && !t.has_ellipsis) {
      t.has_ellipsis = true;
      t.labels.push_back(-1);
      i += 2;
    } else {
      return ctx.Error("bad einsum term '", s, "'");
    }
  }
  return t;
}

// Expands "..." into `count` ellipsis labels, right-aligned to `total`.
std::vector<int> ExpandEllipsis(const EinsumTerm& t, int count, int total) {
  std::vector<int> out;
  for (int l : t.labels) {
    if (l >= 0) {
      out.push_back(l);
      continue;
    }
    for (int j = 0; j < count; ++j) out.push_back(kNumLetters + total - count + j);
  }
  return out;
}

template <typename Acc>
std::vector<Acc> EinsumCompute(const std::vector<std::vector<Acc>>& data,
                               const std::vector<std::vector<int64_t>>& strides_o,
                               const std::vector<std::vector<int64_t>>& strides_s,
                               const Shape& out_dims, const Shape& sum_dims) {
  const size_t ops = data.size();
  const int64_t out_count = ir::NumElements(out_dims);
  const int64_t sum_count = ir::NumElements(sum_dims);
  std::vector<Acc> out(out_count, Acc{0});
  std::vector<int64_t> io(out_dims.size(), 0), is(sum_dims.size(), 0);
  std::vector<int64_t> base(ops), off(ops);
  for (int64_t p = 0; p < out_count; ++p) {
    for (size_t i = 0; i < ops; ++i) {
      base[i] = 0;
      for (size_t j = 0; j < out_dims.size(); ++j) base[i] += io[j] * strides_o[i][j];
      off[i] = base[i];
    }
    Acc acc{0};
    std::fill(is.begin(), is.end(), 0);
    for (int64_t q = 0; q < sum_count; ++q) {
      Acc prod{1};
      for (size_t i = 0; i < ops; ++i) prod *= data[i][off[i]];
      acc += prod;
      for (size_t j = sum_dims.size(); j-- > 0;) {
        if (++is[j] < sum_dims[j]) {
          for (size_t i = 0; i < ops; ++i) off[i] += strides_s[i][j];
          break;
        }
        for (size_t i = 0; i < ops; ++i) off[i] -= (sum_dims[j] - 1) * strides_s[i][j];
        is[j] = 0;
      }
    }
    out[p] = acc;
    for (size_t j = out_dims.size(); j-- > 0;) {
      if (++io[j] < out_dims[j]) break;
      io[j] = 0;
    }
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> Einsum(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::string eq, ctx.node.Attr<std::string>("equation"));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<EinsumTerm> terms;
  for (absl::string_view part : absl::StrSplit(lhs, ',')) {
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseEinsumTerm(ctx, part));
    terms.push_back(std::move(t));
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs()) {
    return ctx.Error("equation '", eq, "' has ", terms.size(),
                     " operands, node has ", ctx.num_inputs(), " inputs");
  }
  std::vector<const Tensor*> in(terms.size());
  int ellipsis_rank = 0;
  std::vector<int> ellipsis_count(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(in[i], ctx.Input(i));
    const int letters = static_cast<int>(terms[i].labels.size()) -
                        (terms[i].has_ellipsis ? 1 : 0);
    const int extra = static_cast<int>(in[i]->rank()) - letters;
    if (extra < 0 || (extra > 0 && !terms[i].has_ellipsis)) {
      return ctx.Error("operand ", i, " ", in[i]->TypeString(),
                       " does not match its einsum term");
    }
    ellipsis_count[i] = extra;
    ellipsis_rank = std::max(ellipsis_rank, extra);
  }
  const int num_labels = kNumLetters + ellipsis_rank;
  std::vector<int64_t> size(num_labels, -1);
  std::vector<int> occurrences(num_labels, 0);
  std::vector<std::vector<int>> op_labels(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    op_labels[i] = ExpandEllipsis(terms[i], ellipsis_count[i], ellipsis_rank);
    for (size_t d = 0; d < op_labels[i].size(); ++d) {
      const int l = op_labels[i][d];
      const int64_t dim = in[i]->dim(d);
      ++occurrences[l];
      if (size[l] == -1 || (l >= kNumLetters && size[l] == 1)) {
        size[l] = dim;
      } else if (dim != size[l] && !(l >= kNumLetters && dim == 1)) {
        return ctx.Error("einsum label sizes disagree (", size[l], " vs ", dim,
                         ") in operand ", i);
      }
    }
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    KILN_ASSIGN_OR_RETURN(EinsumTerm t, ParseEinsumTerm(ctx, eq.substr(arrow + 2)));
    out_labels = ExpandEllipsis(t, ellipsis_rank, ellipsis_rank);
    std::vector<bool> seen(num_labels, false);
    for (int l : out_labels) {
      if (size[l] == -1 || seen[l]) {
        return ctx.Error("bad einsum output term in '", eq, "'");
      }
      seen[l] = true;
    }
  } else {
    for (int j = 0; j < ellipsis_rank; ++j) out_labels.push_back(kNumLetters + j);
    for (int l = 0; l < kNumLetters; ++l) {
      if (occurrences[l] == 1) out_labels.push_back(l);
    }
  }
  std::vector<int> sum_labels;
  for (int l = 0; l < num_labels; ++l) {
    if (size[l] != -1 &&
        std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) {
      sum_labels.push_back(l);
    }
  }
  // Stride of each label in each operand: repeated labels (diagonals) add up,
  // broadcast size-1 dims contribute nothing.
  std::vector<std::vector<int64_t>> label_stride(
      terms.size(), std::vector<int64_t>(num_labels, 0));
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::vector<int64_t> st = ir::RowMajorStrides(in[i]->shape());
    for (size_t d = 0; d < op_labels[i].size(); ++d) {
      if (in[i]->dim(d) != 1) label_stride[i][op_labels[i][d]] += st[d];
    }
  }
  Shape out_dims, sum_dims;
  std::vector<std::vector<int64_t>> so(terms.size()), ss(terms.size());
  for (int l : out_labels) out_dims.push_back(size[l]);
  for (int l : sum_labels) sum_dims.push_back(size[l]);
  for (size_t i = 0; i < terms.size(); ++i) {
    for (int l : out_labels) so[i].push_back(label_stride[i][l]);
    for (int l : sum_labels) ss[i].push_back(label_stride[i][l]);
  }
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_dims));
  const DType dtype = in[0]->dtype();
  if (ir::IsFloat(dtype)) {
    std::vector<std::vector<double>> data;
    for (const Tensor* t : in) data.push_back(ReadAll<double>(*t));
    return std::vector<Tensor>{MakeTensor(
        dtype, out_dims, EinsumCompute<double>(data, so, ss, out_dims, sum_dims))};
  }
  std::vector<std::vector<int64_t>> data;
  for (const Tensor* t : in) data.push_back(ReadAll<int64_t>(*t));
  return std::vector<Tensor>{MakeTensor(
      dtype, out_dims, EinsumCompute<int64_t>(data, so, ss, out_dims, sum_dims))};
}

// ---------------------------------------------------------------------------
// Pooling.

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
  outs.push_back(MakeTensor(x->dtype(), out_shape, y));
  if (want_indices) {
    outs.push_back(MakeTensor(DType::kI64, out_shape, indices));
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
  return std::vector<Tensor>{MakeTensor(x->dtype(), out_shape, y)};
}

// ---------------------------------------------------------------------------
// Resize / Upsample.

struct ResizeParams {
  std::string mode;          // nearest | linear | cubic
  std::string coord_mode;    // coordinate_transformation_mode
  std::string nearest_mode;  // or "legacy": floor when up-, ceil when downsampling
  double cubic_a = -0.75;
  double extrapolation = 0.0;
  bool exclude_outside = false;
};

// Source taps of one output axis: output index o reads
// idx[begin[o] .. begin[o+1]) with weights w, unless extrapolate[o].
struct AxisTaps {
  std::vector<int64_t> begin = {0};
  std::vector<int64_t> idx;
  std::vector<double> w;
  std::vector<char> extrapolate;
};

absl::StatusOr<AxisTaps> ComputeTaps(const OpContext& ctx,
                                     const ResizeParams& p, int64_t in,
                                     int64_t out, double scale,
                                     double roi_start, double roi_end) {
  AxisTaps t;
  const double out_w = scale * static_cast<double>(in);
  const double in_d = static_cast<double>(in);
  for (int64_t o = 0; o < out; ++o) {
    const double xo = static_cast<double>(o);
    double x;
    const std::string& cm = p.coord_mode;
    if (cm == "half_pixel") {
      x = (xo + 0.5) / scale - 0.5;
    } else if (cm == "half_pixel_symmetric") {
      const double adjustment = static_cast<double>(out) / out_w;
      const double offset = in_d / 2 * (1 - adjustment);
      x = offset + (xo + 0.5) / scale - 0.5;
    } else if (cm == "pytorch_half_pixel") {
      x = out_w == 1 ? -0.5 : (xo + 0.5) / scale - 0.5;
    } else if (cm == "align_corners") {
      x = out_w == 1 ? 0.0 : xo * (in_d - 1) / (out_w - 1);
    } else if (cm == "asymmetric") {
      x = xo / scale;
    } else if (cm == "tf_half_pixel_for_nn") {
      x = (xo + 0.5) / scale;
    } else if (cm == "tf_crop_and_resize") {
      x = out_w == 1 ? (roi_end - roi_start) * (in_d - 1) / 2
                     : xo * (roi_end - roi_start) * (in_d - 1) / (out_w - 1);
      x += roi_start * (in_d - 1);
    } else {
      return ctx.Error("unknown coordinate_transformation_mode '", cm, "'");
    }
    const bool extrapolate =
        cm == "tf_crop_and_resize" && (x < 0 || x > in_d - 1);
    t.extrapolate.push_back(extrapolate);
    if (!extrapolate && std::isfinite(x)) {
      double x0 = std::floor(x);
      double ratio = x - x0;
      if (ratio == 0) {  // prefer the left neighbour: ratio in (0, 1]
        x0 -= 1;
        ratio = 1;
      }
      double coeffs[4];
      int taps = 2;
      int64_t first = static_cast<int64_t>(x0);
      if (p.mode == "nearest") {
        bool right;
        if (ratio == 1) {
          right = true;
        } else if (p.nearest_mode == "round_prefer_floor") {
          right = ratio > 0.5;
        } else if (p.nearest_mode == "round_prefer_ceil") {
          right = ratio >= 0.5;
        } else if (p.nearest_mode == "floor") {
          right = false;
        } else if (p.nearest_mode == "ceil") {
          right = true;
        } else if (p.nearest_mode == "legacy") {
          right = scale < 1;
        } else {
          return ctx.Error("unknown nearest_mode '", p.nearest_mode, "'");
        }
        coeffs[0] = right ? 0 : 1;
        coeffs[1] = right ? 1 : 0;
      } else if (p.mode == "linear") {
        coeffs[0] = 1 - ratio;
        coeffs[1] = ratio;
      } else {
        const double a = p.cubic_a, r = ratio, q = 1 - ratio;
        coeffs[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
        coeffs[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
        coeffs[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
        coeffs[3] = ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a;
        taps = 4;
        first -= 1;
      }
      if (p.exclude_outside) {
        double sum = 0;
        for (int i = 0; i < taps; ++i) {
          const int64_t j = first + i;
          if (j < 0 || j >= in) coeffs[i] = 0;
          sum += coeffs[i];
        }
        if (sum != 0) {
          for (int i = 0; i < taps; ++i) coeffs[i] /= sum;
        }
      }
      for (int i = 0; i < taps; ++i) {
        if (coeffs[i] == 0) continue;
        t.idx.push_back(std::clamp<int64_t>(first + i, 0, in - 1));
        t.w.push_back(coeffs[i]);
      }
    }
    t.begin.push_back(static_cast<int64_t>(t.idx.size()));
  }
  return t;
}

absl::StatusOr<std::vector<double>> ReadFloats(const OpContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::vector<double>{};
  return ReadAll<double>(*ctx.inputs[i]);
}

absl::StatusOr<std::vector<Tensor>> Resize(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  const int64_t rank = x->rank();
  const bool legacy = ctx.node.op == "Upsample" || ctx.opset < 11;
  ResizeParams p;
  KILN_ASSIGN_OR_RETURN(p.mode, ctx.node.AttrOr<std::string>("mode", "nearest"));
  if (p.mode == "bilinear" || p.mode == "trilinear") p.mode = "linear";
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") {
    return ctx.Error("unknown mode '", p.mode, "'");
  }
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  std::vector<int64_t> axes;
  std::string policy = "stretch";
  if (legacy) {
    p.coord_mode = "asymmetric";
    p.nearest_mode = "legacy";
    if (ctx.node.op == "Upsample" && ctx.opset < 9) {
      KILN_ASSIGN_OR_RETURN(std::vector<float> s,
                            ctx.node.Attr<std::vector<float>>("scales"));
      scales.assign(s.begin(), s.end());
    } else {
      KILN_ASSIGN_OR_RETURN(scales, ReadFloats(ctx, 1));
    }
  } else {
    KILN_ASSIGN_OR_RETURN(p.coord_mode,
                          ctx.node.AttrOr<std::string>(
                              "coordinate_transformation_mode", "half_pixel"));
    KILN_ASSIGN_OR_RETURN(p.nearest_mode, ctx.node.AttrOr<std::string>(
                                              "nearest_mode", "round_prefer_floor"));
    KILN_ASSIGN_OR_RETURN(float a, ctx.node.AttrOr<float>("cubic_coeff_a", -0.75f));
    KILN_ASSIGN_OR_RETURN(float ev,
                          ctx.node.AttrOr<float>("extrapolation_value", 0.0f));
    KILN_ASSIGN_OR_RETURN(int64_t eo, ctx.node.AttrOr<int64_t>("exclude_outside", 0));
    KILN_ASSIGN_OR_RETURN(int64_t antialias, ctx.node.AttrOr<int64_t>("antialias", 0));
    KILN_ASSIGN_OR_RETURN(policy, ctx.node.AttrOr<std::string>(
                                      "keep_aspect_ratio_policy", "stretch"));
    KILN_ASSIGN_OR_RETURN(axes, ctx.node.AttrOr<std::vector<int64_t>>(
                                    "axes", std::vector<int64_t>{}));
    p.cubic_a = a;
    p.extrapolation = ev;
    p.exclude_outside = eo != 0;
    if (antialias != 0) {
      return absl::UnimplementedError(
          absl::StrCat(ctx.node.Describe(), ": antialias=1 is not supported"));
    }
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
      return ctx.Error("unknown keep_aspect_ratio_policy '", policy, "'");
    }
    KILN_ASSIGN_OR_RETURN(roi, ReadFloats(ctx, 1));
    KILN_ASSIGN_OR_RETURN(scales, ReadFloats(ctx, 2));
    if (ctx.has_input(3)) sizes = ctx.inputs[3]->ToInt64Vector();
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  } else {
    std::vector<bool> seen(rank, false);
    for (int64_t& a : axes) {
      absl::StatusOr<int64_t> norm = NormalizeAxis(a, rank);
      if (!norm.ok()) return ctx.Error(norm.status().message());
      a = *norm;
      if (seen[a]) return ctx.Error("axes repeat axis ", a);
      seen[a] = true;
    }
  }
  const size_t naxes = axes.size();
  if (!sizes.empty() && !scales.empty()) {
    return ctx.Error("only one of scales and sizes may be given");
  }
  if (sizes.empty() && scales.empty()) {
    return ctx.Error("one of scales and sizes must be given");
  }
  if ((!sizes.empty() && sizes.size() != naxes) ||
      (!scales.empty() && scales.size() != naxes)) {
    return ctx.Error("scales/sizes have ", std::max(sizes.size(), scales.size()),
                     " values, expected ", naxes);
  }
  std::vector<double> axis_scale(rank, 1.0), roi_start(rank, 0.0),
      roi_end(rank, 1.0);
  Shape out_shape = x->shape();
  if (!sizes.empty()) {
    for (size_t i = 0; i < naxes; ++i) {
      if (sizes[i] < 0) return ctx.Error("sizes must be non-negative");
      if (x->dim(axes[i]) == 0) return ctx.Error("cannot resize an empty axis");
      axis_scale[axes[i]] =
          static_cast<double>(sizes[i]) / static_cast<double>(x->dim(axes[i]));
      out_shape[axes[i]] = sizes[i];
    }
    if (policy != "stretch") {
      double s = axis_scale[axes[0]];
      for (int64_t a : axes) {
        s = policy == "not_larger" ? std::min(s, axis_scale[a])
                                   : std::max(s, axis_scale[a]);
      }
      for (int64_t a : axes) {
        axis_scale[a] = s;
        out_shape[a] = static_cast<int64_t>(s * x->dim(a) + 0.5);
      }
    }
  } else {
    for (size_t i = 0; i < naxes; ++i) {
      if (!(scales[i] > 0) || !std::isfinite(scales[i])) {
        return ctx.Error("scales must be positive, got ", scales[i]);
      }
      axis_scale[axes[i]] = scales[i];
      const double o = std::floor(scales[i] * x->dim(axes[i]));
      if (o > static_cast<double>(kMaxOutputElements)) {
        return ctx.Error("scale ", scales[i], " gives a too large output");
      }
      out_shape[axes[i]] = static_cast<int64_t>(o);
    }
  }
  if (p.coord_mode == "tf_crop_and_resize") {
    if (roi.size() != 2 * naxes) {
      return ctx.Error("roi has ", roi.size(), " values, expected ", 2 * naxes);
    }
    for (size_t i = 0; i < naxes; ++i) {
      roi_start[axes[i]] = roi[i];
      roi_end[axes[i]] = roi[naxes + i];
    }
  }
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, out_shape));
  for (int64_t d = 0; d < rank; ++d) {
    if (x->dim(d) == 0 && out_shape[d] > 0) {
      return ctx.Error("cannot resize an empty axis");
    }
  }
  std::vector<AxisTaps> taps;
  for (int64_t d = 0; d < rank; ++d) {
    KILN_ASSIGN_OR_RETURN(AxisTaps t,
                          ComputeTaps(ctx, p, x->dim(d), out_shape[d],
                                      axis_scale[d], roi_start[d], roi_end[d]));
    taps.push_back(std::move(t));
  }

  const std::vector<double> xv = ReadAll<double>(*x);
  const std::vector<int64_t> in_strides = ir::RowMajorStrides(x->shape());
  const int64_t total = ir::NumElements(out_shape);
  std::vector<double> y(total);
  std::vector<int64_t> o(rank, 0), tap(rank, 0);
  for (int64_t e = 0; e < total; ++e) {
    bool extrapolate = false;
    bool empty = false;
    for (int64_t d = 0; d < rank; ++d) {
      extrapolate |= taps[d].extrapolate[o[d]] != 0;
      empty |= taps[d].begin[o[d]] == taps[d].begin[o[d] + 1];
    }
    double sum = 0;
    if (extrapolate) {
      sum = p.extrapolation;
    } else if (!empty) {
      std::fill(tap.begin(), tap.end(), 0);
      while (true) {
        double w = 1;
        int64_t off = 0;
        for (int64_t d = 0; d < rank; ++d) {
          const int64_t t = taps[d].begin[o[d]] + tap[d];
          w *= taps[d].w[t];
          off += taps[d].idx[t] * in_strides[d];
        }
        sum += w * xv[off];
        int64_t d = rank - 1;
        for (; d >= 0; --d) {
          if (++tap[d] < taps[d].begin[o[d] + 1] - taps[d].begin[o[d]]) break;
          tap[d] = 0;
        }
        if (d < 0) break;
      }
    }
    y[e] = sum;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++o[d] < out_shape[d]) break;
      o[d] = 0;
    }
  }
  return std::vector<Tensor>{MakeTensor(x->dtype(), out_shape, y)};
}

}  // namespace

void RegisterNnOps(OpRegistry* registry) {
  registry->Register("Conv", Conv);
  registry->Register("ConvTranspose", ConvTranspose);
  registry->Register("BatchNormalization", BatchNormalization);
  registry->Register("LRN", Lrn);
  registry->Register("Gemm", Gemm);
  registry->Register("MatMul", MatMul);
  registry->Register("MatMulInteger", MatMulInteger);
  registry->Register("Einsum", Einsum);
  registry->Register("MaxPool",
                     [](OpContext& ctx) { return Pool(ctx, PoolKind::kMax); });
  registry->Register("AveragePool", [](OpContext& ctx) {
    return Pool(ctx, PoolKind::kAverage);
  });
  registry->Register("LpPool",
                     [](OpContext& ctx) { return Pool(ctx, PoolKind::kLp); });
  registry->Register("GlobalMaxPool", [](OpContext& ctx) {
    return GlobalPool(ctx, PoolKind::kMax);
  });
  registry->Register("GlobalAveragePool", [](OpContext& ctx) {
    return GlobalPool(ctx, PoolKind::kAverage);
  });
  registry->Register("GlobalLpPool", [](OpContext& ctx) {
    return GlobalPool(ctx, PoolKind::kLp);
  });
  registry->Register("Resize", Resize);
  registry->Register("Upsample", Resize);
}

}  // namespace kiln::interp
