// File: interp/tensor.cc — reference kernels of ONNX's tensor family (onnx/defs/tensor):
// views, copies, indexing (Gather*/Scatter*), Shape/Size, Cast, Where, IsNaN/IsInf,
// Resize and GridSample, with every index and shape from the model checked.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "interp/elementwise.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Float16;
using ir::Shape;
using Outputs = std::vector<Tensor>;
using Result = absl::StatusOr<Outputs>;

absl::StatusOr<int64_t> Axis(const OpContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return ctx.Error("axis ", axis, " is out of range for rank ", rank);
  }
  return axis < 0 ? axis + rank : axis;
}

// Normalizes a list of axes for `rank`; duplicates are an error.
absl::StatusOr<std::vector<int64_t>> Axes(const OpContext& ctx,
                                          const std::vector<int64_t>& axes,
                                          int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t n, Axis(ctx, a, rank));
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      return ctx.Error("axis ", a, " is repeated in [",
                       absl::StrJoin(axes, ","), "]");
    }
    out.push_back(n);
  }
  return out;
}

bool IsIntegerIndexType(DType d) {
  return d == DType::kI64 || d == DType::kI32;
}

// The value of a one-element input as int64 or double.
absl::StatusOr<int64_t> OneElementInt(const OpContext& ctx, int i,
                                  absl::string_view what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (t->num_elements() != 1) {
    return ctx.Error(what, " must have one element, got ", t->TypeString());
  }
  if (ir::IsFloat(t->dtype())) {
    double v = t->GetAsDouble(0);
    if (!(std::fabs(v) < 9.2e18)) return ctx.Error(what, " is out of range");
    return static_cast<int64_t>(v);
  }
  return t->GetAsInt64(0);
}

// Copies `count` elements of `esize` bytes.
void CopyElems(void* dst, int64_t di, const void* src, int64_t si,
               int64_t count, size_t esize) {
  if (count <= 0) return;
  std::memcpy(static_cast<uint8_t*>(dst) + di * esize,
              static_cast<const uint8_t*>(src) + si * esize, count * esize);
}

// ---- Views.

Result Reshape(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  std::vector<int64_t> shape;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(shape, IntValues(ctx, 1, "shape"));
  } else {
    KILN_ASSIGN_OR_RETURN(shape, ctx.node.Attr<std::vector<int64_t>>("shape"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t allowzero,
                        ctx.node.AttrOr<int64_t>("allowzero", 0));
  Shape out(shape.size());
  int infer = -1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t v = shape[i];
    if (v == -1) {
      if (infer >= 0) return ctx.Error("shape has more than one -1");
      infer = static_cast<int>(i);
      out[i] = 1;
    } else if (v == 0 && allowzero == 0) {
      if (static_cast<int64_t>(i) >= x->rank()) {
        return ctx.Error("shape ", ir::ShapeToString(shape), " copies dim ", i,
                         " (0) but the input is ", x->TypeString());
      }
      out[i] = x->dim(i);
    } else if (v < 0) {
      return ctx.Error("invalid dim ", v, " in shape ", ir::ShapeToString(shape));
    } else {
      if (v == 0) has_zero = true;
      out[i] = v;
    }
  }
  if (infer >= 0) {
    if (has_zero) {
      return ctx.Error("shape ", ir::ShapeToString(shape),
                       " has both -1 and 0 with allowzero=1");
    }
    int64_t known = 1;
    for (int64_t d : out) {
      if (d != 0 && known > kMaxResultElements / d) {
        return ctx.Error("shape ", ir::ShapeToString(shape), " is too large");
      }
      known *= d;
    }
    if (known == 0 || x->num_elements() % known != 0) {
      return ctx.Error("cannot reshape ", x->TypeString(), " to ",
                       ir::ShapeToString(shape));
    }
    out[infer] = x->num_elements() / known;
  }
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, out));
  if (ir::NumElements(out) != x->num_elements()) {
    return ctx.Error("cannot reshape ", x->TypeString(), " to ",
                     ir::ShapeToString(shape), " (", ir::ShapeToString(out), ")");
  }
  KILN_ASSIGN_OR_RETURN(Tensor y, x->Reshaped(out));
  return std::vector<Tensor>{std::move(y)};
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, input 1 from 13.
absl::StatusOr<std::optional<std::vector<int64_t>>> AxesOperand(
    OpContext& ctx) {
  if (ctx.opset < 13) {
    if (!ctx.node.HasAttr("axes")) return std::nullopt;
    KILN_ASSIGN_OR_RETURN(auto axes,
                          ctx.node.Attr<std::vector<int64_t>>("axes"));
    return axes;
  }
  if (!ctx.has_input(1)) return std::nullopt;
  KILN_ASSIGN_OR_RETURN(auto axes, IntValues(ctx, 1, "axes"));
  return axes;
}

Result Squeeze(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(auto axes, AxesOperand(ctx));
  std::vector<bool> drop(x->rank(), false);
  if (axes.has_value()) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> norm,
                          Axes(ctx, *axes, x->rank()));
    for (int64_t a : norm) {
      if (x->dim(a) != 1) {
        return ctx.Error("cannot squeeze axis ", a, " of ", x->TypeString(),
                         ": its size is not 1");
      }
      drop[a] = true;
    }
  } else {
    for (int64_t i = 0; i < x->rank(); ++i) drop[i] = x->dim(i) == 1;
  }
  Shape out;
  for (int64_t i = 0; i < x->rank(); ++i) {
    if (!drop[i]) out.push_back(x->dim(i));
  }
  KILN_ASSIGN_OR_RETURN(Tensor y, x->Reshaped(out));
  return std::vector<Tensor>{std::move(y)};
}

Result Unsqueeze(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(auto axes, AxesOperand(ctx));
  if (!axes.has_value()) return ctx.Error("axes are required");
  const int64_t out_rank = x->rank() + static_cast<int64_t>(axes->size());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> norm,
                        Axes(ctx, *axes, out_rank));
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : norm) inserted[a] = true;
  Shape out;
  int64_t k = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    out.push_back(inserted[i] ? 1 : x->dim(k++));
  }
  KILN_ASSIGN_OR_RETURN(Tensor y, x->Reshaped(out));
  return std::vector<Tensor>{std::move(y)};
}

// ---- Copies.

Result Transpose(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  const int64_t r = x->rank();
  std::vector<int64_t> perm(r);
  for (int64_t i = 0; i < r; ++i) perm[i] = r - 1 - i;
  if (ctx.node.HasAttr("perm")) {
    KILN_ASSIGN_OR_RETURN(perm, ctx.node.Attr<std::vector<int64_t>>("perm"));
  }
  std::vector<bool> seen(r, false);
  if (static_cast<int64_t>(perm.size()) != r) {
    return ctx.Error("perm [", absl::StrJoin(perm, ","),
                     "] does not match rank ", r);
  }
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[p]) {
      return ctx.Error("perm [", absl::StrJoin(perm, ","),
                       "] is not a permutation of 0..", r - 1);
    }
    seen[p] = true;
  }
  Shape out(r);
  for (int64_t i = 0; i < r; ++i) out[i] = x->dim(perm[i]);
  const std::vector<int64_t> strides = ir::RowMajorStrides(x->shape());
  Tensor y = Remap(*x, out, [&](int64_t, const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (int64_t i = 0; i < r; ++i) s += idx[i] * strides[perm[i]];
    return s;
  });
  return std::vector<Tensor>{std::move(y)};
}

Result Concat(OpContext& ctx) {
  std::vector<const Tensor*> xs;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) xs.push_back(ctx.inputs[i]);
  }
  if (xs.empty()) return ctx.Error("needs at least one input");
  // Concat-1 defaults axis to 1; from opset 4 it is required.
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr,
                        ctx.opset < 4 ? ctx.node.AttrOr<int64_t>("axis", 1)
                                      : ctx.node.Attr<int64_t>("axis"));
  const Tensor& first = *xs[0];
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, axis_attr, first.rank()));
  Shape out = first.shape();
  out[axis] = 0;
  for (const Tensor* t : xs) {
    bool ok = t->dtype() == first.dtype() && t->rank() == first.rank();
    for (int64_t i = 0; ok && i < t->rank(); ++i) {
      ok = i == axis || t->dim(i) == first.dim(i);
    }
    if (!ok) {
      return ctx.Error("inputs ", first.TypeString(), " and ", t->TypeString(),
                       " cannot be concatenated on axis ", axis);
    }
    out[axis] += t->dim(axis);
  }
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, out));
  Tensor y(first.dtype(), out);
  const int64_t outer = Product(out, 0, axis);
  const int64_t inner = Product(out, axis + 1, out.size());
  const size_t esize = ir::DTypeSize(first.dtype());
  int64_t offset = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor* t : xs) {
      const int64_t chunk = t->dim(axis) * inner;
      CopyElems(y.raw_data(), offset, t->raw_data(), o * chunk, chunk, esize);
      offset += chunk;
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

Result Split(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node.AttrOr<int64_t>("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, axis_attr, x->rank()));
  const int64_t dim = x->dim(axis);
  const int64_t n_out = ctx.num_outputs();
  std::vector<int64_t> split;
  bool has_split = false;
  if (ctx.opset < 13 && ctx.node.HasAttr("split")) {
    KILN_ASSIGN_OR_RETURN(split, ctx.node.Attr<std::vector<int64_t>>("split"));
    has_split = true;
  } else if ((ctx.opset >= 13 || ctx.opset < 2) && ctx.has_input(1)) {
    // Split-1 also took split as an optional input.
    KILN_ASSIGN_OR_RETURN(split, IntValues(ctx, 1, "split"));
    has_split = true;
  }
  if (has_split) {
    if (static_cast<int64_t>(split.size()) != n_out) {
      return ctx.Error("split has ", split.size(), " entries for ", n_out,
                       " outputs");
    }
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return ctx.Error("negative split size ", s);
      sum += s;
      if (sum > dim) break;
    }
    if (sum != dim) {
      return ctx.Error("split sizes [", absl::StrJoin(split, ","),
                       "] do not add up to dim ", dim, " of axis ", axis);
    }
  } else {
    int64_t n = n_out;
    if (ctx.opset >= 18 && ctx.node.HasAttr("num_outputs")) {
      KILN_ASSIGN_OR_RETURN(n, ctx.node.Attr<int64_t>("num_outputs"));
      if (n != n_out) {
        return ctx.Error("num_outputs is ", n, " but the node has ", n_out,
                         " outputs");
      }
    }
    if (n <= 0) return ctx.Error("needs at least one output");
    if (dim % n == 0) {
      split.assign(n, dim / n);
    } else if (ctx.opset >= 18) {
      const int64_t chunk = dim / n + 1;
      split.assign(n, chunk);
      split.back() = dim - chunk * (n - 1);
      if (split.back() < 0) {
        return ctx.Error("dim ", dim, " cannot be split into ", n,
                         " chunks of ", chunk);
      }
    } else {
      return ctx.Error("dim ", dim, " of axis ", axis,
                       " does not split evenly into ", n, " outputs");
    }
  }
  const int64_t outer = Product(x->shape(), 0, axis);
  const int64_t inner = Product(x->shape(), axis + 1, x->rank());
  const size_t esize = ir::DTypeSize(x->dtype());
  std::vector<Tensor> outs;
  int64_t start = 0;
  for (int64_t s : split) {
    Shape shape = x->shape();
    shape[axis] = s;
    Tensor y(x->dtype(), shape);
    for (int64_t o = 0; o < outer; ++o) {
      CopyElems(y.raw_data(), o * s * inner, x->raw_data(),
                (o * dim + start) * inner, s * inner, esize);
    }
    start += s;
    outs.push_back(std::move(y));
  }
  return outs;
}

Result Slice(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  const int64_t r = x->rank();
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false, has_steps = false;
  if (ctx.opset < 10) {
    KILN_ASSIGN_OR_RETURN(starts, ctx.node.Attr<std::vector<int64_t>>("starts"));
    KILN_ASSIGN_OR_RETURN(ends, ctx.node.Attr<std::vector<int64_t>>("ends"));
    if (ctx.node.HasAttr("axes")) {
      KILN_ASSIGN_OR_RETURN(axes, ctx.node.Attr<std::vector<int64_t>>("axes"));
      has_axes = true;
    }
  } else {
    KILN_ASSIGN_OR_RETURN(starts, IntValues(ctx, 1, "starts"));
    KILN_ASSIGN_OR_RETURN(ends, IntValues(ctx, 2, "ends"));
    if (ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(axes, IntValues(ctx, 3, "axes"));
      has_axes = true;
    }
    if (ctx.has_input(4)) {
      KILN_ASSIGN_OR_RETURN(steps, IntValues(ctx, 4, "steps"));
      has_steps = true;
    }
  }
  const size_t n = starts.size();
  if (ends.size() != n || (has_axes && axes.size() != n) ||
      (has_steps && steps.size() != n)) {
    return ctx.Error("starts, ends, axes and steps differ in length (",
                     n, ", ", ends.size(), ", ", axes.size(), ", ",
                     steps.size(), ")");
  }
  if (!has_axes) {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (!has_steps) steps.assign(n, 1);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> norm, Axes(ctx, axes, r));
  std::vector<int64_t> begin(r, 0), step(r, 1);
  Shape out = x->shape();
  for (size_t i = 0; i < n; ++i) {
    const int64_t a = norm[i];
    const int64_t d = x->dim(a);
    const int64_t st = steps[i];
    if (st == 0) return ctx.Error("step is 0 for axis ", axes[i]);
    int64_t s = starts[i], e = ends[i];
    if (d == 0) {
      out[a] = 0;
      continue;
    }
    if (s < 0) s += d;
    if (e < 0) e += d;
    int64_t size;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      size = e > s ? (e - s - 1) / st + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      size = s > e ? (s - e - 1) / (-st) + 1 : 0;
    }
    begin[a] = s;
    step[a] = st;
    out[a] = size;
  }
  const std::vector<int64_t> strides = ir::RowMajorStrides(x->shape());
  Tensor y = Remap(*x, out, [&](int64_t, const std::vector<int64_t>& idx) {
    int64_t src = 0;
    for (int64_t i = 0; i < r; ++i) {
      src += (begin[i] + idx[i] * step[i]) * strides[i];
    }
    return src;
  });
  return std::vector<Tensor>{std::move(y)};
}

Result Pad(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  const int64_t r = x->rank();
  KILN_ASSIGN_OR_RETURN(std::string mode,
                        ctx.node.AttrOr<std::string>("mode", "constant"));
  std::vector<int64_t> pads;
  Tensor fill(x->dtype(), {});
  if (ctx.opset < 11) {
    // Pad-1 named the attribute "paddings".
    const char* name = ctx.opset < 2 && ctx.node.HasAttr("paddings")
                           ? "paddings"
                           : "pads";
    KILN_ASSIGN_OR_RETURN(pads, ctx.node.Attr<std::vector<int64_t>>(name));
    KILN_ASSIGN_OR_RETURN(float value, ctx.node.AttrOr<float>("value", 0.0f));
    DispatchDType(x->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      fill.data<T>()[0] = FromDouble<T>(value);
      return 0;
    });
  } else {
    KILN_ASSIGN_OR_RETURN(pads, IntValues(ctx, 1, "pads"));
    if (ctx.has_input(2)) {
      const Tensor* v = ctx.inputs[2];
      if (v->dtype() != x->dtype() || v->num_elements() != 1) {
        return ctx.Error("constant_value ", v->TypeString(),
                         " must be one element of the data's type ",
                         ir::DTypeName(x->dtype()));
      }
      CopyElems(fill.raw_data(), 0, v->raw_data(), 0, 1,
                ir::DTypeSize(x->dtype()));
    }
  }
  std::vector<int64_t> axes;
  if (ctx.opset >= 18 && ctx.has_input(3)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> raw, IntValues(ctx, 3, "axes"));
    KILN_ASSIGN_OR_RETURN(axes, Axes(ctx, raw, r));
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  const int64_t na = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * na) {
    return ctx.Error("pads has ", pads.size(), " entries, expected ", 2 * na);
  }
  std::vector<int64_t> before(r, 0);
  Shape out = x->shape();
  for (int64_t i = 0; i < na; ++i) {
    const int64_t a = axes[i];
    const int64_t b = pads[i], e = pads[i + na];
    if (std::abs(b) > kMaxResultElements || std::abs(e) > kMaxResultElements) {
      return ctx.Error("pad ", b, ", ", e, " is too large");
    }
    before[a] = b;
    out[a] = x->dim(a) + b + e;
    if (out[a] < 0) {
      return ctx.Error("pads ", b, ", ", e, " crop more than dim ", x->dim(a),
                       " of axis ", a);
    }
  }
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, out));
  enum { kConstant, kReflect, kEdge, kWrap } m;
  if (mode == "constant") {
    m = kConstant;
  } else if (mode == "reflect") {
    m = kReflect;
  } else if (mode == "edge") {
    m = kEdge;
  } else if (mode == "wrap") {
    m = kWrap;
  } else {
    return ctx.Error("unknown mode '", mode, "'");
  }
  if (m != kConstant) {
    for (int64_t a = 0; a < r; ++a) {
      if (x->dim(a) == 0 && out[a] > 0) {
        return ctx.Error("mode '", mode, "' cannot pad empty axis ", a);
      }
    }
  }
  const std::vector<int64_t> strides = ir::RowMajorStrides(x->shape());
  Tensor y = Remap(
      *x, out,
      [&](int64_t, const std::vector<int64_t>& idx) -> int64_t {
        int64_t src = 0;
        for (int64_t a = 0; a < r; ++a) {
          const int64_t d = x->dim(a);
          int64_t j = idx[a] - before[a];
          if (j < 0 || j >= d) {
            switch (m) {
              case kConstant:
                return -1;
              case kEdge:
                j = j < 0 ? 0 : d - 1;
                break;
              case kWrap:
                j = ((j % d) + d) % d;
                break;
              case kReflect:
                if (d == 1) {
                  j = 0;
                } else {
                  const int64_t period = 2 * (d - 1);
                  j = ((j % period) + period) % period;
                  if (j >= d) j = period - j;
                }
                break;
            }
          }
          src += j * strides[a];
        }
        return src;
      },
      &fill);
  return std::vector<Tensor>{std::move(y)};
}

Result Tile(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps,
                        IntValues(ctx, 1, "repeats"));
  const int64_t r = x->rank();
  if (static_cast<int64_t>(reps.size()) != r) {
    return ctx.Error("repeats has ", reps.size(), " entries for rank ", r);
  }
  Shape out(r);
  for (int64_t i = 0; i < r; ++i) {
    if (reps[i] < 0) return ctx.Error("negative repeat ", reps[i]);
    if (x->dim(i) != 0 && reps[i] > kMaxResultElements / x->dim(i)) {
      return ctx.Error("repeat ", reps[i], " of axis ", i, " is too large");
    }
    out[i] = x->dim(i) * reps[i];
  }
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, out));
  const std::vector<int64_t> strides = ir::RowMajorStrides(x->shape());
  Tensor y = Remap(*x, out, [&](int64_t, const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (int64_t i = 0; i < r; ++i) s += (idx[i] % x->dim(i)) * strides[i];
    return s;
  });
  return std::vector<Tensor>{std::move(y)};
}

// DepthToSpace and SpaceToDepth as a reshape-transpose-reshape on a 6-D view.
Result BlockRearrange(OpContext& ctx, bool depth_to_space) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t b, ctx.node.Attr<int64_t>("blocksize"));
  if (x->rank() != 4) {
    return ctx.Error("input must be 4-D (N,C,H,W), got ", x->TypeString());
  }
  if (b <= 0 || b > 65536) return ctx.Error("invalid blocksize ", b);
  const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  Shape view, out;
  std::vector<int64_t> perm;
  if (depth_to_space) {
    KILN_ASSIGN_OR_RETURN(std::string mode,
                          ctx.node.AttrOr<std::string>("mode", "DCR"));
    if (c % (b * b) != 0) {
      return ctx.Error("channels ", c, " are not divisible by blocksize^2 ",
                       b * b);
    }
    const int64_t oc = c / (b * b);
    if (mode == "DCR") {
      view = {n, b, b, oc, h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      view = {n, oc, b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      return ctx.Error("unknown mode '", mode, "'");
    }
    out = {n, oc, h * b, w * b};
  } else {
    if (h % b != 0 || w % b != 0) {
      return ctx.Error("spatial dims ", h, "x", w,
                       " are not divisible by blocksize ", b);
    }
    view = {n, c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    out = {n, c * b * b, h / b, w / b};
  }
  Shape tshape(6);
  for (int i = 0; i < 6; ++i) tshape[i] = view[perm[i]];
  const std::vector<int64_t> strides = ir::RowMajorStrides(view);
  Tensor y = Remap(*x, tshape, [&](int64_t, const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (int i = 0; i < 6; ++i) s += idx[i] * strides[perm[i]];
    return s;
  });
  KILN_ASSIGN_OR_RETURN(Tensor result, y.Reshaped(out));
  return std::vector<Tensor>{std::move(result)};
}

Result DepthToSpace(OpContext& ctx) { return BlockRearrange(ctx, true); }
Result SpaceToDepth(OpContext& ctx) { return BlockRearrange(ctx, false); }

Result Trilu(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t upper, ctx.node.AttrOr<int64_t>("upper", 1));
  int64_t k = 0;
  if (ctx.has_input(1)) {
    KILN_ASSIGN_OR_RETURN(k, OneElementInt(ctx, 1, "k"));
  }
  if (x->rank() < 2) {
    return ctx.Error("input must have rank >= 2, got ", x->TypeString());
  }
  const int64_t r = x->rank();
  Tensor y = Remap(*x, x->shape(),
                   [&](int64_t i, const std::vector<int64_t>& idx) -> int64_t {
                     const int64_t diff = idx[r - 1] - idx[r - 2];
                     const bool keep = upper != 0 ? diff >= k : diff <= k;
                     return keep ? i : -1;
                   });
  return std::vector<Tensor>{std::move(y)};
}

Result Compress(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* cond, ctx.Input(1));
  if (cond->rank() != 1) {
    return ctx.Error("condition must be 1-D, got ", cond->TypeString());
  }
  Tensor data = *x;
  int64_t axis = 0;
  if (ctx.node.HasAttr("axis")) {
    KILN_ASSIGN_OR_RETURN(int64_t a, ctx.node.Attr<int64_t>("axis"));
    KILN_ASSIGN_OR_RETURN(axis, Axis(ctx, a, x->rank()));
  } else {
    KILN_ASSIGN_OR_RETURN(data, x->Reshaped({x->num_elements()}));
  }
  const int64_t d = data.dim(axis);
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond->num_elements(); ++i) {
    if (cond->GetAsDouble(i) == 0) continue;
    if (i >= d) {
      return ctx.Error("condition selects index ", i, " beyond dim ", d);
    }
    keep.push_back(i);
  }
  Shape out = data.shape();
  out[axis] = static_cast<int64_t>(keep.size());
  const std::vector<int64_t> strides = ir::RowMajorStrides(data.shape());
  Tensor y = Remap(data, out, [&](int64_t, const std::vector<int64_t>& idx) {
    int64_t s = 0;
    for (int64_t i = 0; i < data.rank(); ++i) {
      s += (i == axis ? keep[idx[i]] : idx[i]) * strides[i];
    }
    return s;
  });
  return std::vector<Tensor>{std::move(y)};
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

// ---- Indexing.

// Index values of input `i`, wrapped from [-dim, dim) into [0, dim).
absl::StatusOr<std::vector<int64_t>> Indices(const OpContext& ctx, int i,
                                             int64_t dim,
                                             absl::string_view what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (!IsIntegerIndexType(t->dtype())) {
    return ctx.Error(what, " must be i32 or i64, got ", t->TypeString());
  }
  std::vector<int64_t> v = t->ToInt64Vector();
  for (int64_t& x : v) {
    if (x < -dim || x >= dim) {
      return ctx.Error(what, " value ", x, " is out of range [", -dim, ", ",
                       dim, ")");
    }
    if (x < 0) x += dim;
  }
  return v;
}

Result Gather(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t a, ctx.node.AttrOr<int64_t>("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, a, x->rank()));
  const int64_t d = x->dim(axis);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                        Indices(ctx, 1, d, "indices"));
  Shape out(x->shape().begin(), x->shape().begin() + axis);
  out.insert(out.end(), ind->shape().begin(), ind->shape().end());
  out.insert(out.end(), x->shape().begin() + axis + 1, x->shape().end());
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, out));
  Tensor y(x->dtype(), out);
  const int64_t outer = Product(x->shape(), 0, axis);
  const int64_t inner = Product(x->shape(), axis + 1, x->rank());
  const int64_t n = static_cast<int64_t>(idx.size());
  const size_t esize = ir::DTypeSize(x->dtype());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      CopyElems(y.raw_data(), (o * n + j) * inner, x->raw_data(),
                (o * d + idx[j]) * inner, inner, esize);
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

// Checks GatherElements/ScatterElements operands: equal ranks, and indices no
// larger than data on every axis but `axis`.
absl::Status CheckElementsShapes(const OpContext& ctx, const Tensor& data,
                                 const Tensor& ind, int64_t axis) {
  if (ind.rank() != data.rank()) {
    return ctx.Error("indices ", ind.TypeString(), " and data ",
                     data.TypeString(), " differ in rank");
  }
  for (int64_t i = 0; i < data.rank(); ++i) {
    if (i != axis && ind.dim(i) > data.dim(i)) {
      return ctx.Error("indices ", ind.TypeString(), " exceed data ",
                       data.TypeString(), " on axis ", i);
    }
  }
  return absl::OkStatus();
}

Result GatherElements(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t a, ctx.node.AttrOr<int64_t>("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, a, x->rank()));
  KILN_RETURN_IF_ERROR(CheckElementsShapes(ctx, *x, *ind, axis));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                        Indices(ctx, 1, x->dim(axis), "indices"));
  const std::vector<int64_t> strides = ir::RowMajorStrides(x->shape());
  Tensor y = Remap(*x, ind->shape(),
                   [&](int64_t i, const std::vector<int64_t>& pos) {
                     int64_t s = 0;
                     for (int64_t k = 0; k < x->rank(); ++k) {
                       s += (k == axis ? idx[i] : pos[k]) * strides[k];
                     }
                     return s;
                   });
  return std::vector<Tensor>{std::move(y)};
}

// Shared by GatherND and ScatterND: where each index tuple points.
struct NdPlan {
  std::vector<int64_t> offsets;  // flat data offset of each tuple's slice
  int64_t slice = 1;             // elements per slice
};

// Resolves the tuples of `ind` (last dim m) into data offsets; the first
// `batch_dims` dims of ind and data are batch dims.
absl::StatusOr<NdPlan> PlanNd(const OpContext& ctx, const Tensor& data,
                              const Tensor& ind, int64_t batch_dims) {
  if (!IsIntegerIndexType(ind.dtype())) {
    return ctx.Error("indices must be i32 or i64, got ", ind.TypeString());
  }
  const int64_t r = data.rank(), q = ind.rank();
  if (q < 1 || r < 1) return ctx.Error("data and indices need rank >= 1");
  if (batch_dims < 0 || batch_dims >= std::min(q, r)) {
    return ctx.Error("batch_dims ", batch_dims, " is out of range");
  }
  const int64_t m = ind.dim(q - 1);
  if (m < 1 || m > r - batch_dims) {
    return ctx.Error("index tuples of length ", m, " do not fit data ",
                     data.TypeString());
  }
  for (int64_t i = 0; i < batch_dims; ++i) {
    if (ind.dim(i) != data.dim(i)) {
      return ctx.Error("batch dim ", i, " differs: indices ", ind.TypeString(),
                       ", data ", data.TypeString());
    }
  }
  NdPlan plan;
  plan.slice = Product(data.shape(), batch_dims + m, r);
  const int64_t batch_size = Product(data.shape(), batch_dims, r);
  const int64_t batches = Product(ind.shape(), 0, batch_dims);
  const int64_t tuples = Product(ind.shape(), batch_dims, q - 1);
  const std::vector<int64_t> strides = ir::RowMajorStrides(data.shape());
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = b * batch_size;
      for (int64_t j = 0; j < m; ++j) {
        const int64_t d = data.dim(batch_dims + j);
        int64_t v = ind.GetAsInt64((b * tuples + t) * m + j);
        if (v < -d || v >= d) {
          return ctx.Error("index ", v, " is out of range [", -d, ", ", d,
                           ") for axis ", batch_dims + j);
        }
        if (v < 0) v += d;
        off += v * strides[batch_dims + j];
      }
      plan.offsets.push_back(off);
    }
  }
  return plan;
}

Result GatherND(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t b, ctx.node.AttrOr<int64_t>("batch_dims", 0));
  KILN_ASSIGN_OR_RETURN(NdPlan plan, PlanNd(ctx, *x, *ind, b));
  const int64_t m = ind->dim(ind->rank() - 1);
  Shape out(ind->shape().begin(), ind->shape().end() - 1);
  out.insert(out.end(), x->shape().begin() + b + m, x->shape().end());
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, out));
  Tensor y(x->dtype(), out);
  const size_t esize = ir::DTypeSize(x->dtype());
  for (size_t t = 0; t < plan.offsets.size(); ++t) {
    CopyElems(y.raw_data(), t * plan.slice, x->raw_data(), plan.offsets[t],
              plan.slice, esize);
  }
  return std::vector<Tensor>{std::move(y)};
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

absl::StatusOr<Reduction> ReadReduction(const OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::string r,
                        ctx.node.AttrOr<std::string>("reduction", "none"));
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return ctx.Error("unknown reduction '", r, "'");
}

template <typename T>
T Combine(T a, T b, Reduction r) {
  if constexpr (ir::kIsLowPrecision<T>) {
    return ir::FromFloat<T>(Combine(ir::ToFloat(a), ir::ToFloat(b), r));
  } else {
    switch (r) {
      case Reduction::kNone: return b;
      case Reduction::kAdd: return static_cast<T>(a + b);
      case Reduction::kMul: return static_cast<T>(a * b);
      case Reduction::kMax: return std::max(a, b);
      case Reduction::kMin: return std::min(a, b);
    }
    return b;
  }
}

// Copies data and combines updates[u] into element dst(u) for each u.
template <typename DstFn>
Tensor ScatterInto(const Tensor& data, const Tensor& updates, Reduction red,
                   int64_t count, DstFn dst) {
  Tensor out = data;
  DispatchDType(data.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.data<T>();
    const T* u = updates.data<T>();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t j = dst(i);
      y[j] = Combine(y[j], u[i], red);
    }
    return 0;
  });
  return out;
}

Result ScatterND(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* upd, ctx.Input(2));
  KILN_ASSIGN_OR_RETURN(Reduction red, ReadReduction(ctx));
  KILN_ASSIGN_OR_RETURN(NdPlan plan, PlanNd(ctx, *x, *ind, 0));
  const int64_t m = ind->dim(ind->rank() - 1);
  Shape expected(ind->shape().begin(), ind->shape().end() - 1);
  expected.insert(expected.end(), x->shape().begin() + m, x->shape().end());
  if (upd->shape() != expected || upd->dtype() != x->dtype()) {
    return ctx.Error("updates ", upd->TypeString(), " should be ",
                     ir::DTypeName(x->dtype()), ir::ShapeToString(expected));
  }
  const int64_t slice = plan.slice;
  Tensor y = ScatterInto(*x, *upd, red, upd->num_elements(), [&](int64_t i) {
    return plan.offsets[i / slice] + i % slice;
  });
  return std::vector<Tensor>{std::move(y)};
}

Result ScatterElements(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* upd, ctx.Input(2));
  KILN_ASSIGN_OR_RETURN(Reduction red, ReadReduction(ctx));
  KILN_ASSIGN_OR_RETURN(int64_t a, ctx.node.AttrOr<int64_t>("axis", 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, a, x->rank()));
  KILN_RETURN_IF_ERROR(CheckElementsShapes(ctx, *x, *ind, axis));
  if (upd->shape() != ind->shape() || upd->dtype() != x->dtype()) {
    return ctx.Error("updates ", upd->TypeString(), " should be ",
                     ir::DTypeName(x->dtype()), ir::ShapeToString(ind->shape()));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                        Indices(ctx, 1, x->dim(axis), "indices"));
  const std::vector<int64_t> strides = ir::RowMajorStrides(x->shape());
  const Shape& ishape = ind->shape();
  Tensor y = ScatterInto(*x, *upd, red, upd->num_elements(), [&](int64_t i) {
    int64_t dst = 0, rest = i;
    for (int64_t k = x->rank() - 1; k >= 0; --k) {
      const int64_t pos = rest % ishape[k];
      rest /= ishape[k];
      dst += (k == axis ? idx[i] : pos) * strides[k];
    }
    return dst;
  });
  return std::vector<Tensor>{std::move(y)};
}

Result NonZero(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  const int64_t r = std::max<int64_t>(x->rank(), 1);
  const Shape shape = x->rank() == 0 ? Shape{1} : x->shape();
  std::vector<std::vector<int64_t>> hits;
  MultiIndex mi(shape);
  for (int64_t i = 0; i < x->num_elements(); ++i, mi.Next()) {
    if (x->GetAsDouble(i) != 0) hits.push_back(mi.index());
  }
  const int64_t n = static_cast<int64_t>(hits.size());
  Tensor y(DType::kI64, {r, n});
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t k = 0; k < r; ++k) y.data<int64_t>()[k * n + j] = hits[j][k];
  }
  return std::vector<Tensor>{std::move(y)};
}

Result OneHot(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* ind, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t depth, OneElementInt(ctx, 1, "depth"));
  KILN_ASSIGN_OR_RETURN(const Tensor* values, ctx.Input(2));
  KILN_ASSIGN_OR_RETURN(int64_t a, ctx.node.AttrOr<int64_t>("axis", -1));
  if (values->num_elements() != 2) {
    return ctx.Error("values must have two elements (off, on), got ",
                     values->TypeString());
  }
  if (depth < 1) return ctx.Error("depth ", depth, " must be positive");
  const int64_t r = ind->rank() + 1;
  KILN_ASSIGN_OR_RETURN(int64_t axis, Axis(ctx, a, r));
  Shape out = ind->shape();
  out.insert(out.begin() + axis, depth);
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, out));
  std::vector<int64_t> cls(ind->num_elements());
  for (int64_t i = 0; i < ind->num_elements(); ++i) {
    const double v = ind->GetAsDouble(i);
    int64_t c = std::isfinite(v) && std::fabs(v) < 9e18
                    ? static_cast<int64_t>(v)
                    : depth;
    if (c < 0) c += depth;
    cls[i] = c;
  }
  const int64_t inner = Product(ind->shape(), axis, ind->rank());
  Tensor y = Remap(*values, out,
                   [&](int64_t i, const std::vector<int64_t>&) -> int64_t {
                     const int64_t k = i % inner;
                     const int64_t c = (i / inner) % depth;
                     const int64_t o = i / inner / depth;
                     return cls[o * inner + k] == c ? 1 : 0;
                   });
  return std::vector<Tensor>{std::move(y)};
}

template <typename T>
auto UniqueKey(T v) {
  if constexpr (ir::kIsLowPrecision<T>) {
    return ir::ToFloat(v);
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

// ---- Shape, Size.

Result ShapeOp(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  const int64_t r = x->rank();
  int64_t start = 0, end = r;
  if (ctx.opset >= 15) {
    KILN_ASSIGN_OR_RETURN(start, ctx.node.AttrOr<int64_t>("start", 0));
    KILN_ASSIGN_OR_RETURN(end, ctx.node.AttrOr<int64_t>("end", r));
  }
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x->dim(i));
  const int64_t n = static_cast<int64_t>(dims.size());
  return std::vector<Tensor>{Tensor::FromVector<int64_t>({n}, dims)};
}

Result Size(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  return std::vector<Tensor>{Tensor::Scalar<int64_t>(x->num_elements())};
}

// ---- IsNaN, IsInf, Where.

// Like Unary, but f is a predicate and the output is bool.
template <unsigned kAllowed, typename F>
Result UnaryPredicate(OpContext& ctx, F f) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  return DispatchDType(x->dtype(), [&](auto tag) -> Result {
    using T = typename decltype(tag)::type;
    if constexpr (!kAccepts<kAllowed, T>) {
      return WrongDType(ctx, x->dtype());
    } else {
      Tensor out(DType::kBool, x->shape());
      const T* in = x->data<T>();
      bool* o = out.data<bool>();
      for (int64_t i = 0; i < x->num_elements(); ++i) o[i] = f(Load(in[i]));
      return std::vector<Tensor>{std::move(out)};
    }
  });
}

Result IsNaN(OpContext& ctx) {
  return UnaryPredicate<kFloat>(ctx, [](auto x) { return std::isnan(x); });
}

Result IsInf(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int64_t pos, ctx.node.AttrOr<int64_t>("detect_positive", 1));
  KILN_ASSIGN_OR_RETURN(int64_t neg, ctx.node.AttrOr<int64_t>("detect_negative", 1));
  return UnaryPredicate<kFloat>(ctx, [=](auto x) {
    return std::isinf(x) && (x > 0 ? pos != 0 : neg != 0);
  });
}

Result Where(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* cond, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* y, ctx.Input(2));
  if (cond->dtype() != DType::kBool) {
    return ctx.Error("condition must be bool, got ",
                     ir::DTypeName(cond->dtype()));
  }
  KILN_RETURN_IF_ERROR(CheckSameDType(ctx, *x, *y));
  KILN_ASSIGN_OR_RETURN(Shape xy, BroadcastShape(ctx, x->shape(), y->shape()));
  KILN_ASSIGN_OR_RETURN(Shape shape, BroadcastShape(ctx, cond->shape(), xy));
  Tensor out(x->dtype(), shape);
  DispatchDType(x->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* c = cond->data<bool>();
    const T* px = x->data<T>();
    const T* py = y->data<T>();
    T* po = out.data<T>();
    const int64_t n = out.num_elements();
    if (cond->shape() == shape && x->shape() == shape && y->shape() == shape) {
      for (int64_t i = 0; i < n; ++i) po[i] = c[i] ? px[i] : py[i];
      return;
    }
    const BroadcastMap mc(cond->shape(), shape);
    const BroadcastMap mx(x->shape(), shape);
    const BroadcastMap my(y->shape(), shape);
    for (int64_t i = 0; i < n; ++i) po[i] = c[mc(i)] ? px[mx(i)] : py[my(i)];
  });
  return std::vector<Tensor>{std::move(out)};
}

// ---- Cast, CastLike, Identity.

Tensor CastTensor(const Tensor& x, DType to) {
  Tensor out(to, x.shape());
  DispatchDType(x.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    DispatchDType(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* in = x.data<From>();
      To* o = out.data<To>();
      for (int64_t i = 0; i < x.num_elements(); ++i) o[i] = Convert<To>(in[i]);
    });
  });
  return out;
}

Result Cast(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(int64_t to, ctx.node.Attr<int64_t>("to"));
  std::optional<DType> dtype = DTypeFromOnnx(to);
  if (!dtype) {
    return Unimplemented(ctx, "cast to ONNX data type ", to,
                         " (kiln supports f32, f16, bf16, f64, i64, i32, i8, u8, bool)");
  }
  return std::vector<Tensor>{CastTensor(*x, *dtype)};
}

Result CastLike(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* like, ctx.Input(1));
  return std::vector<Tensor>{CastTensor(*x, like->dtype())};
}

Result Identity(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  return std::vector<Tensor>{*x};
}

// ---- Resize, Upsample.

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
  return std::vector<Tensor>{StoreAll(x->dtype(), out_shape, y)};
}

// ---- GridSample.

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
  if (n * c * out_points > 0 && num_taps > kMaxOutputElements / (n * c * out_points)) {
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

}  // namespace

void RegisterTensorOps(OpRegistry* r) {
  r->Register("Reshape", Reshape);
  r->Register("Squeeze", Squeeze);
  r->Register("Unsqueeze", Unsqueeze);
  r->Register("Transpose", Transpose);
  r->Register("Concat", Concat);
  r->Register("Split", Split);
  r->Register("Slice", Slice);
  r->Register("Pad", Pad);
  r->Register("Tile", Tile);
  r->Register("DepthToSpace", DepthToSpace);
  r->Register("SpaceToDepth", SpaceToDepth);
  r->Register("Trilu", Trilu);
  r->Register("Compress", Compress);
  r->Register("ReverseSequence", ReverseSequence);
  r->Register("Gather", Gather);
  r->Register("GatherElements", GatherElements);
  r->Register("GatherND", GatherND);
  r->Register("ScatterND", ScatterND);
  r->Register("ScatterElements", ScatterElements);
  r->Register("Scatter", ScatterElements);
  r->Register("NonZero", NonZero);
  r->Register("OneHot", OneHot);
  r->Register("Unique", Unique);
  r->Register("Shape", ShapeOp);
  r->Register("Size", Size);
  r->Register("IsNaN", IsNaN);
  r->Register("IsInf", IsInf);
  r->Register("Where", Where);
  r->Register("Cast", Cast);
  r->Register("CastLike", CastLike);
  r->Register("Identity", Identity);
  r->Register("Resize", Resize);
  r->Register("Upsample", Resize);
  r->Register("GridSample", GridSample);
}

}  // namespace kiln::interp
