// Reference kernels: shape and data-movement ops (see op_registry.h for the
// family's list) — views, copies, indexing (Gather*/Scatter*) and producers
// of shapes and constants, with every index and shape from the model checked.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;
using Result = absl::StatusOr<std::vector<Tensor>>;

// Results larger than this are refused: shapes come from model data.
constexpr int64_t kMaxElements = int64_t{1} << 34;

std::string ShapeStr(const Shape& s) { return ir::ShapeToString(s); }

// OK when `shape` is a valid result shape: no negative dims and at most
// kMaxElements elements (no overflow while multiplying).
absl::Status CheckResultShape(const OpContext& ctx, const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) {
      return ctx.Error("negative dimension ", d, " in result shape ",
                       ShapeStr(shape));
    }
  }
  for (int64_t d : shape) {
    if (d == 0) return absl::OkStatus();
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (n > kMaxElements / d) {
      return ctx.Error("result shape ", ShapeStr(shape), " has more than 2^34 ",
                       "elements");
    }
    n *= d;
  }
  return absl::OkStatus();
}

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

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) n *= s[i];
  return n;
}

bool IsIntegerIndexType(DType d) {
  return d == DType::kI64 || d == DType::kI32;
}

// A shape-like or index input as int64 values; InvalidArgument unless it has
// an integer dtype.
absl::StatusOr<std::vector<int64_t>> IntValues(const OpContext& ctx, int i,
                                               absl::string_view what) {
  KILN_ASSIGN_OR_RETURN(const Tensor* t, ctx.Input(i));
  if (!ir::IsInteger(t->dtype())) {
    return ctx.Error(what, " must have an integer type, got ",
                     t->TypeString());
  }
  return t->ToInt64Vector();
}

// The value of a one-element input as int64 or double.
absl::StatusOr<int64_t> ScalarInt(const OpContext& ctx, int i,
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

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, ir::Float16>) {
    return ir::FloatToHalf(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T{0};
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) {
      return std::numeric_limits<T>::min();
    }
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// Walks the multi-indices of a shape in row-major order.
class MultiIndex {
 public:
  explicit MultiIndex(const Shape& shape)
      : shape_(shape), index_(shape.size(), 0) {}
  const std::vector<int64_t>& index() const { return index_; }
  void Next() {
    for (int i = static_cast<int>(shape_.size()) - 1; i >= 0; --i) {
      if (++index_[i] < shape_[i]) return;
      index_[i] = 0;
    }
  }

 private:
  const Shape& shape_;
  std::vector<int64_t> index_;
};

// A tensor of `shape` whose element at (flat i, multi-index idx) is
// in[src(i, idx)], or `fill` (element 0; zero when null) when src returns a
// negative value. src must return indices valid for `in`.
template <typename SrcFn>
Tensor Remap(const Tensor& in, const Shape& shape, SrcFn src,
             const Tensor* fill = nullptr) {
  return DispatchDType(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor out(in.dtype(), shape);
    const T* x = in.data<T>();
    T* y = out.data<T>();
    const T f = fill != nullptr ? fill->data<T>()[0] : T{};
    MultiIndex mi(out.shape());
    for (int64_t i = 0; i < out.num_elements(); ++i, mi.Next()) {
      const int64_t s = src(i, mi.index());
      y[i] = s < 0 ? f : x[s];
    }
    return out;
  });
}

// Copies `count` elements of `esize` bytes.
void CopyElems(void* dst, int64_t di, const void* src, int64_t si,
               int64_t count, size_t esize) {
  if (count <= 0) return;
  std::memcpy(static_cast<uint8_t*>(dst) + di * esize,
              static_cast<const uint8_t*>(src) + si * esize, count * esize);
}

// ---- Views.

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
        return ctx.Error("shape ", ShapeStr(shape), " copies dim ", i,
                         " (0) but the input is ", x->TypeString());
      }
      out[i] = x->dim(i);
    } else if (v < 0) {
      return ctx.Error("invalid dim ", v, " in shape ", ShapeStr(shape));
    } else {
      if (v == 0) has_zero = true;
      out[i] = v;
    }
  }
  if (infer >= 0) {
    if (has_zero) {
      return ctx.Error("shape ", ShapeStr(shape),
                       " has both -1 and 0 with allowzero=1");
    }
    int64_t known = 1;
    for (int64_t d : out) {
      if (d != 0 && known > kMaxElements / d) {
        return ctx.Error("shape ", ShapeStr(shape), " is too large");
      }
      known *= d;
    }
    if (known == 0 || x->num_elements() % known != 0) {
      return ctx.Error("cannot reshape ", x->TypeString(), " to ",
                       ShapeStr(shape));
    }
    out[infer] = x->num_elements() / known;
  }
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, out));
  if (ir::NumElements(out) != x->num_elements()) {
    return ctx.Error("cannot reshape ", x->TypeString(), " to ",
                     ShapeStr(shape), " (", ShapeStr(out), ")");
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
    if (std::abs(b) > kMaxElements || std::abs(e) > kMaxElements) {
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

Result Expand(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape,
                        IntValues(ctx, 1, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("negative dim ", d, " in shape");
  }
  absl::StatusOr<Shape> out = ir::BroadcastShapes(x->shape(), shape);
  if (!out.ok()) return ctx.Error(out.status().message());
  KILN_RETURN_IF_ERROR(CheckResultShape(ctx, *out));
  BroadcastMap map(x->shape(), *out);
  Tensor y = Remap(*x, *out, [&](int64_t i, const std::vector<int64_t>&) {
    return map(i);
  });
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
    if (x->dim(i) != 0 && reps[i] > kMaxElements / x->dim(i)) {
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
    KILN_ASSIGN_OR_RETURN(k, ScalarInt(ctx, 1, "k"));
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
  if constexpr (std::is_same_v<T, ir::Float16>) {
    return ir::FloatToHalf(
        Combine(ir::HalfToFloat(a), ir::HalfToFloat(b), r));
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
                     ir::DTypeName(x->dtype()), ShapeStr(expected));
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
                     ir::DTypeName(x->dtype()), ShapeStr(ind->shape()));
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
  KILN_ASSIGN_OR_RETURN(int64_t depth, ScalarInt(ctx, 1, "depth"));
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

// ---- Shape and constant producers.

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
  Tensor y = Remap(value, shape,
                   [](int64_t, const std::vector<int64_t>&) { return 0; });
  return std::vector<Tensor>{std::move(y)};
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
    if (count > static_cast<double>(kMaxElements)) {
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
    if (count > kMaxElements) {
      return ctx.Error("range has more than 2^34 elements");
    }
    n = static_cast<int64_t>(count);
  }
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

// ONNX TensorProto data type codes.
std::optional<DType> DTypeFromOnnx(int64_t code) {
  switch (code) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    default: return std::nullopt;
  }
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

void RegisterShapeOps(OpRegistry* registry) {
  registry->Register("Flatten", Flatten);
  registry->Register("Reshape", Reshape);
  registry->Register("Squeeze", Squeeze);
  registry->Register("Unsqueeze", Unsqueeze);
  registry->Register("Transpose", Transpose);
  registry->Register("Concat", Concat);
  registry->Register("Split", Split);
  registry->Register("Slice", Slice);
  registry->Register("Pad", Pad);
  registry->Register("Expand", Expand);
  registry->Register("Tile", Tile);
  registry->Register("DepthToSpace", DepthToSpace);
  registry->Register("SpaceToDepth", SpaceToDepth);
  registry->Register("Trilu", Trilu);
  registry->Register("Compress", Compress);
  registry->Register("Gather", Gather);
  registry->Register("GatherElements", GatherElements);
  registry->Register("GatherND", GatherND);
  registry->Register("ScatterND", ScatterND);
  registry->Register("ScatterElements", ScatterElements);
  registry->Register("Scatter", ScatterElements);
  registry->Register("NonZero", NonZero);
  registry->Register("OneHot", OneHot);
  registry->Register("Shape", ShapeOp);
  registry->Register("Size", Size);
  registry->Register("ConstantOfShape", ConstantOfShape);
  registry->Register("Range", Range);
  registry->Register("Constant", Constant);
  registry->Register("EyeLike", EyeLike);
}

}  // namespace kiln::interp
