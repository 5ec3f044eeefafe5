// Lowerings of GridSample and RoiAlign (interpolation taps as checked
// load_indirect reads), DFT and STFT (reductions over the signal axis) to loop kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/status_macros.h"
#include "lowering/lowerer.h"
#include "lowering/ops_more_util.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

// ---------------------------------------------------------------------------
// GridSample (any spatial rank, nearest / linear / cubic, zeros / border /
// reflection padding): coordinate math in f64 as the reference does, every
// tap of the interpolation unrolled as one checked load_indirect into the
// (n, c) plane.

// Value-op form of the reference's Reflect(x, lo, hi) (f64).
int32_t ReflectValue(Emitter& k, int32_t x, double lo, double hi) {
  const double range = hi - lo;
  auto c = [&](double v) { return k.Const(DType::kF64, v); };
  if (range <= 0) return c(lo);
  const int32_t below = k.Bin(OpCode::kLt, x, c(lo));
  const int32_t above = k.Bin(OpCode::kGt, x, c(hi));
  const int32_t dx = k.Sel(below, k.Bin(OpCode::kSub, c(lo), x), k.Bin(OpCode::kSub, x, c(hi)));
  const int32_t n = k.Un(OpCode::kFloor, k.Bin(OpCode::kDiv, dx, c(range)));
  const int32_t rem = k.Bin(OpCode::kSub, dx, k.Bin(OpCode::kMul, n, c(range)));
  const int32_t even = k.Bin(OpCode::kEq, k.Bin(OpCode::kFmod, n, c(2)), c(0));
  const int32_t from_lo = k.Bin(OpCode::kAdd, c(lo), rem);
  const int32_t from_hi = k.Bin(OpCode::kSub, c(hi), rem);
  const int32_t reflected =
      k.Sel(below, k.Sel(even, from_lo, from_hi), k.Sel(even, from_hi, from_lo));
  return k.Sel(k.Bin(OpCode::kOr, below, above), reflected, x);
}

enum class GridPad { kZeros, kBorder, kReflection };

absl::Status LowerGridSample(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand grid, L.Input(1));
  if (!ir::IsFloat(x.dtype) || !ir::IsFloat(grid.dtype)) {
    return L.Error("X and grid must be float");
  }
  const int64_t r = static_cast<int64_t>(x.shape.size()) - 2;
  if (r < 1 || static_cast<int64_t>(grid.shape.size()) != r + 2 ||
      grid.shape[0] != x.shape[0] || grid.shape[r + 1] != r) {
    return L.Error("X ", ir::ShapeToString(x.shape), " and grid ",
                   ir::ShapeToString(grid.shape),
                   " must be [N, C, d1..dr] and [N, D1..Dr, r]");
  }
  KILN_ASSIGN_OR_RETURN(std::string mode, n.AttrOr<std::string>("mode", "bilinear"));
  KILN_ASSIGN_OR_RETURN(std::string pad_name, n.AttrOr<std::string>("padding_mode", "zeros"));
  KILN_ASSIGN_OR_RETURN(int64_t align, n.AttrOr<int64_t>("align_corners", 0));
  int taps;
  if (mode == "bilinear" || mode == "linear") {
    taps = 2;
  } else if (mode == "nearest") {
    taps = 1;
  } else if (mode == "bicubic" || mode == "cubic") {
    taps = 4;
  } else {
    return L.Error("unknown mode '", mode, "'");
  }
  GridPad pad;
  if (pad_name == "zeros") {
    pad = GridPad::kZeros;
  } else if (pad_name == "border") {
    pad = GridPad::kBorder;
  } else if (pad_name == "reflection") {
    pad = GridPad::kReflection;
  } else {
    return L.Error("unknown padding_mode '", pad_name, "'");
  }
  int64_t num_taps = 1;
  for (int64_t d = 0; d < r; ++d) num_taps *= taps;
  if (num_taps > 256) return L.Unimplemented(num_taps, " interpolation taps per point");
  const ir::Value& out = L.OutputValue(0);
  Shape want = {x.shape[0], x.shape[1]};
  want.insert(want.end(), grid.shape.begin() + 1, grid.shape.end() - 1);
  if (out.shape != want || out.dtype != x.dtype) {
    return L.Error("output must be ", ir::DTypeName(x.dtype), ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(want) == 0) return absl::OkStatus();
  const Shape dims(x.shape.begin() + 2, x.shape.end());
  const int64_t plane = ir::NumElements(dims);
  auto k = L.NewKernel(want);
  const Coords it = k->IterCoords();
  auto f64 = [&](double v) { return k->Const(DType::kF64, v); };
  auto i64 = [&](int64_t v) { return k->Const(DType::kI64, v); };
  if (plane == 0) {
    k->Store(buffer, want, it, k->Const(x.dtype, 0));
    return absl::OkStatus();
  }
  KILN_ASSIGN_OR_RETURN(int32_t src, L.Materialize(x));
  // Per dim: the taps' indices (i64, valid when `ok`) and weights (f64).
  std::vector<std::vector<int32_t>> tap_idx(r), tap_ok(r), tap_w(r);
  std::vector<int64_t> strides(r, 1);
  for (int64_t d = r - 1; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
  for (int64_t d = 0; d < r; ++d) {
    const double dim = static_cast<double>(dims[d]);
    const double lo = align ? 0.0 : -0.5, hi = align ? dim - 1 : dim - 0.5;
    Coords gc = {it[0]};
    gc.insert(gc.end(), it.begin() + 2, it.end());
    gc.push_back(Const(r - 1 - d));
    KILN_ASSIGN_OR_RETURN(int32_t g, k->Load(grid, gc));
    g = k->Cast(g, DType::kF64);
    const int32_t g1 = k->Bin(OpCode::kAdd, g, f64(1));
    int32_t v = align ? k->Bin(OpCode::kMul, k->Bin(OpCode::kDiv, g1, f64(2)), f64(dim - 1))
                      : k->Bin(OpCode::kDiv, k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, g1, f64(dim)), f64(1)),
                               f64(2));
    if (taps == 1) {
      if (r == 3) {  // std::round: half away from zero
        const int32_t a = k->Un(OpCode::kFloor, k->Bin(OpCode::kAdd, k->Un(OpCode::kAbs, v), f64(0.5)));
        v = k->Sel(k->Bin(OpCode::kLt, v, f64(0)), k->Un(OpCode::kNeg, a), a);
      } else {
        v = k->Un(OpCode::kRound, v);
      }
    }
    const int32_t outside = k->Bin(OpCode::kOr, k->Bin(OpCode::kLt, v, f64(lo)),
                                   k->Bin(OpCode::kGt, v, f64(hi)));
    if (pad == GridPad::kBorder) {
      v = k->Sel(outside,
                 k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, v, f64(0)), f64(dim - 1)), v);
    } else if (pad == GridPad::kReflection) {
      v = ReflectValue(*k, v, lo, hi);
    }
    // Integer tap i (f64, integral) -> index after padding, and validity.
    auto tap = [&](int32_t i, int32_t* idx, int32_t* ok) {
      const int32_t finite = k->Bin(OpCode::kLt, k->Un(OpCode::kAbs, i), f64(1e18));
      const int32_t safe = k->Sel(finite, i, f64(0));
      switch (pad) {
        case GridPad::kZeros: {
          *ok = k->Bin(OpCode::kAnd, finite,
                       k->Bin(OpCode::kAnd, k->Bin(OpCode::kGe, safe, f64(0)),
                              k->Bin(OpCode::kLt, safe, f64(dim))));
          *idx = k->Cast(k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, safe, f64(0)), f64(dim - 1)),
                         DType::kI64);
          return;
        }
        case GridPad::kBorder:
          *ok = finite;
          *idx = k->Cast(k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, safe, f64(0)), f64(dim - 1)),
                         DType::kI64);
          return;
        case GridPad::kReflection: {
          *ok = finite;
          const int32_t rf = ReflectValue(*k, safe, lo, hi);
          // Truncation toward zero, then the clamp.
          const int32_t t = k->Sel(k->Bin(OpCode::kLt, rf, f64(0)), k->Un(OpCode::kCeil, rf),
                                   k->Un(OpCode::kFloor, rf));
          *idx = k->Cast(k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, t, f64(0)), f64(dim - 1)),
                         DType::kI64);
          return;
        }
      }
    };
    if (taps == 1) {
      const int32_t t = k->Sel(k->Bin(OpCode::kLt, v, f64(0)), k->Un(OpCode::kCeil, v),
                               k->Un(OpCode::kFloor, v));
      int32_t idx, ok;
      tap(t, &idx, &ok);
      tap_idx[d] = {idx};
      tap_ok[d] = {ok};
      tap_w[d] = {f64(1)};
      continue;
    }
    const int32_t f = k->Un(OpCode::kFloor, v);
    const int32_t frac = k->Bin(OpCode::kSub, v, f);
    std::vector<int32_t> w;
    if (taps == 2) {
      w = {k->Bin(OpCode::kSub, f64(1), frac), frac};
    } else {
      // Keys' cubic weights (a = -0.75) for taps -1..2 at distance |frac|.
      const double a = -0.75;
      const int32_t x0 = k->Un(OpCode::kAbs, frac);
      auto far = [&](int32_t t) {  // ((a t - 5a) t + 8a) t - 4a, t in [1, 2]
        int32_t e = k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, f64(a), t), f64(5 * a));
        e = k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, e, t), f64(8 * a));
        return k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, e, t), f64(4 * a));
      };
      auto near = [&](int32_t t) {  // ((a + 2) t - (a + 3)) t t + 1, t in [0, 1]
        int32_t e = k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, f64(a + 2), t), f64(a + 3));
        return k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, k->Bin(OpCode::kMul, e, t), t), f64(1));
      };
      w = {far(k->Bin(OpCode::kAdd, x0, f64(1))), near(x0),
           near(k->Bin(OpCode::kSub, f64(1), x0)), far(k->Bin(OpCode::kSub, f64(2), x0))};
    }
    for (int j = 0; j < taps; ++j) {
      const int32_t i = k->Bin(OpCode::kAdd, f, f64(taps == 2 ? j : j - 1));
      int32_t idx, ok;
      tap(i, &idx, &ok);
      // A non-finite floor reads nothing (the reference's weight 0).
      ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kLt, k->Un(OpCode::kAbs, f), f64(1e18)));
      tap_idx[d].push_back(idx);
      tap_ok[d].push_back(ok);
      tap_w[d].push_back(w[j]);
    }
  }
  const IndexExpr base = k->Simplify((it[0] * x.shape[1] + it[1]) * plane);
  int32_t acc = f64(0);
  for (int64_t t = 0; t < num_taps; ++t) {
    int64_t rest = t;
    int32_t offset = i64(0), w = f64(1), ok = k->Const(DType::kBool, 1);
    for (int64_t d = r - 1; d >= 0; --d) {
      const int j = static_cast<int>(rest % taps);
      rest /= taps;
      ok = k->Bin(OpCode::kAnd, ok, tap_ok[d][j]);
      w = k->Bin(OpCode::kMul, w, tap_w[d][j]);
      offset = k->Bin(OpCode::kAdd, offset,
                      k->Bin(OpCode::kMul, tap_idx[d][j], i64(strides[d])));
    }
    ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kNe, w, f64(0)));
    const int32_t val = k->Cast(
        k->b().LoadIndirect(src, base, k->Sel(ok, offset, i64(0)), plane, 1), DType::kF64);
    acc = k->Bin(OpCode::kAdd, acc, k->Sel(ok, k->Bin(OpCode::kMul, w, val), f64(0)));
  }
  k->Store(buffer, want, it, k->Cast(acc, x.dtype));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// DFT (opset 17): X[k] = sum_t x[t] e^(-+2 pi i k t / n), a reduction over
// the signal axis in f64 with the angle taken from (k t) mod n exactly; the
// inverse divides by n.

absl::Status LowerDft(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const int64_t r = x.shape.size();
  if (!ir::IsFloat(x.dtype) || r < 2 || (x.shape[r - 1] != 1 && x.shape[r - 1] != 2)) {
    return L.Error("input must be float [..., 1] (real) or [..., 2] (complex)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, n.AttrOr<int64_t>("axis", 1));
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) {
    return L.Error("axis must be a signal dimension (not the last)");
  }
  KILN_ASSIGN_OR_RETURN(int64_t inverse, n.AttrOr<int64_t>("inverse", 0));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, n.AttrOr<int64_t>("onesided", 0));
  const int64_t n_in = x.shape[axis];
  int64_t len = n_in;
  if (L.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, L.ConstantInts(1, "dft_length"));
    if (v.size() != 1 || v[0] <= 0) return L.Error("dft_length must be one positive value");
    len = v[0];
  }
  const int64_t n_out = onesided != 0 ? len / 2 + 1 : len;
  Shape want = x.shape;
  want[axis] = n_out;
  want[r - 1] = 2;
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != want || out.dtype != x.dtype) {
    return L.Error("output must be ", ir::DTypeName(x.dtype), ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  const int64_t used = std::min(n_in, len);
  if (ir::NumElements(want) == 0) return absl::OkStatus();
  auto k = L.NewKernel(want, {std::max<int64_t>(used, 0)});
  const Coords it = k->IterCoords();
  Coords xc = it;
  xc[axis] = k->r(0);
  xc[r - 1] = Const(0);
  KILN_ASSIGN_OR_RETURN(int32_t re, k->Load(x, xc));
  re = k->Cast(re, DType::kF64);
  int32_t im = k->Const(DType::kF64, 0);
  if (x.shape[r - 1] == 2) {
    xc[r - 1] = Const(1);
    KILN_ASSIGN_OR_RETURN(im, k->Load(x, xc));
    im = k->Cast(im, DType::kF64);
  }
  const int32_t kt = k->Bin(OpCode::kMod,
                            k->Bin(OpCode::kMul, k->b().Index(it[axis]), k->b().Index(k->r(0))),
                            k->Const(DType::kI64, len));
  const double sign = inverse != 0 ? 1.0 : -1.0;
  const int32_t ang = k->Bin(OpCode::kMul, k->Cast(kt, DType::kF64),
                             k->Const(DType::kF64, sign * 2 * M_PI / static_cast<double>(len)));
  const int32_t c = k->Un(OpCode::kCos, ang), sn = k->Un(OpCode::kSin, ang);
  const int32_t real = k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, re, c), k->Bin(OpCode::kMul, im, sn));
  const int32_t imag = k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, re, sn), k->Bin(OpCode::kMul, im, c));
  const int32_t is_real = k->Bin(OpCode::kEq, k->b().Index(it[r - 1]), k->Const(DType::kI64, 0));
  int32_t sum = k->b().Reduce(ReduceKind::kSum, k->Sel(is_real, real, imag));
  if (inverse != 0) {
    sum = k->Bin(OpCode::kDiv, sum, k->Const(DType::kF64, static_cast<double>(len)));
  }
  k->Store(buffer, want, it, k->Cast(sum, x.dtype));
  return absl::OkStatus();
}

// STFT (opset 17) with frame_step and frame_length possibly given at run
// time: the static output fixes the frame and bin counts; the frame length
// is a run-time value bounded by the bins (the reduction runs to the bound
// and masks the rest), frames start at f * step (a checked load_indirect),
// and the kernel checks the parameters agree with the static shape.

absl::Status LowerStft(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) || x.shape.size() != 3 ||
      (x.shape[2] != 1 && x.shape[2] != 2)) {
    return L.Error("signal must be float [batch, length, 1 or 2]");
  }
  KILN_ASSIGN_OR_RETURN(Operand step_op, L.Input(1));
  KILN_ASSIGN_OR_RETURN(int64_t onesided, n.AttrOr<int64_t>("onesided", 1));
  std::optional<Operand> window, frame_length;
  if (L.HasInput(2)) {
    KILN_ASSIGN_OR_RETURN(Operand w, L.Input(2));
    if (!ir::IsFloat(w.dtype) || w.shape.size() != 1) return L.Error("window must be float 1-D");
    window = w;
  }
  if (L.HasInput(3)) {
    KILN_ASSIGN_OR_RETURN(Operand f, L.Input(3));
    frame_length = f;
  }
  for (const Operand* op : {&step_op, frame_length ? &*frame_length : nullptr}) {
    if (op != nullptr && (!ir::IsInteger(op->dtype) || ir::NumElements(op->shape) != 1)) {
      return L.Error("frame_step and frame_length must be integer scalars");
    }
  }
  if (!window.has_value() && !frame_length.has_value()) {
    return L.Error("needs a window or a frame_length");
  }
  const int64_t batch = x.shape[0], sig = x.shape[1];
  const ir::Value& out = L.OutputValue(0);
  if (out.shape.size() != 4 || out.shape[0] != batch || out.shape[3] != 2 ||
      out.dtype != x.dtype) {
    return L.Error("output must be ", ir::DTypeName(x.dtype), "[", batch, ", frames, bins, 2]");
  }
  const int64_t frames = out.shape[1], bins = out.shape[2];
  // The longest frame the bins allow; the window's length when there is one.
  int64_t max_len = onesided != 0 ? 2 * bins - 1 : bins;
  if (window.has_value()) {
    max_len = window->shape[0];
    if (max_len > sig) return L.Error("window is longer than the signal");
  }
  max_len = std::min(max_len, sig);
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  if (max_len <= 0) return L.Error("no frame fits the signal");
  auto k = L.NewKernel(out.shape, {max_len});
  const Coords it = k->IterCoords();
  auto i64 = [&](int64_t v) { return k->Const(DType::kI64, v); };
  auto scalar = [&](const Operand& op) -> absl::StatusOr<int32_t> {
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(op, Coords(op.shape.size(), Const(0))));
    return k->DTypeOf(v) == DType::kI64 ? v : k->Cast(v, DType::kI64);
  };
  KILN_ASSIGN_OR_RETURN(int32_t step, scalar(step_op));
  int32_t len = i64(max_len);
  int32_t ok = k->Bin(OpCode::kGt, step, i64(0));
  if (frame_length.has_value()) {
    KILN_ASSIGN_OR_RETURN(len, scalar(*frame_length));
    if (window.has_value()) ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kEq, len, i64(max_len)));
  }
  ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kAnd, k->Bin(OpCode::kGt, len, i64(0)),
                                       k->Bin(OpCode::kLe, len, i64(max_len))));
  const int32_t safe_step = k->Sel(ok, step, i64(1));
  const int32_t safe_len = k->Sel(ok, len, i64(1));
  const int32_t n_frames = k->Bin(
      OpCode::kAdd, k->Bin(OpCode::kDiv, k->Bin(OpCode::kSub, i64(sig), safe_len), safe_step), i64(1));
  const int32_t n_bins = onesided != 0
      ? k->Bin(OpCode::kAdd, k->Bin(OpCode::kDiv, safe_len, i64(2)), i64(1)) : safe_len;
  ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kAnd, k->Bin(OpCode::kEq, n_frames, i64(frames)),
                                       k->Bin(OpCode::kEq, n_bins, i64(bins))));
  const int32_t t = k->b().Index(k->r(0));
  const int32_t in_frame = k->Bin(OpCode::kLt, t, safe_len);
  // Sample f * step + t (t < len); a failed check reads out of range.
  const int32_t pos = k->Sel(ok, k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, k->b().Index(it[1]), safe_step),
                                        k->Sel(in_frame, t, i64(0))),
                             i64(sig));
  std::vector<int64_t> extents(out.shape.begin(), out.shape.end());
  extents.push_back(max_len);
  KILN_ASSIGN_OR_RETURN(int32_t re, LoadIndirectAlong(L, *k, x, {it[0], Const(0), Const(0)}, 1,
                                                      extents, pos));
  re = k->Cast(re, DType::kF64);
  int32_t im = k->Const(DType::kF64, 0);
  if (x.shape[2] == 2) {
    KILN_ASSIGN_OR_RETURN(im, LoadIndirectAlong(L, *k, x, {it[0], Const(0), Const(1)}, 1,
                                                extents, pos));
    im = k->Cast(im, DType::kF64);
  }
  if (window.has_value()) {
    KILN_ASSIGN_OR_RETURN(int32_t w, k->Load(*window, {k->r(0)}));
    w = k->Cast(w, DType::kF64);
    re = k->Bin(OpCode::kMul, re, w);
    im = k->Bin(OpCode::kMul, im, w);
  }
  const int32_t kt = k->Bin(OpCode::kMod, k->Bin(OpCode::kMul, k->b().Index(it[2]), t), safe_len);
  const int32_t ang = k->Bin(
      OpCode::kMul,
      k->Bin(OpCode::kDiv, k->Cast(kt, DType::kF64), k->Cast(safe_len, DType::kF64)),
      k->Const(DType::kF64, -2 * M_PI));
  const int32_t c = k->Un(OpCode::kCos, ang), sn = k->Un(OpCode::kSin, ang);
  const int32_t real = k->Bin(OpCode::kSub, k->Bin(OpCode::kMul, re, c), k->Bin(OpCode::kMul, im, sn));
  const int32_t imag = k->Bin(OpCode::kAdd, k->Bin(OpCode::kMul, re, sn), k->Bin(OpCode::kMul, im, c));
  const int32_t is_real = k->Bin(OpCode::kEq, k->b().Index(it[3]), i64(0));
  const int32_t term = k->Sel(in_frame, k->Sel(is_real, real, imag), k->Const(DType::kF64, 0));
  k->Store(buffer, out.shape, it, k->Cast(k->b().Reduce(ReduceKind::kSum, term), x.dtype));
  return absl::OkStatus();
}

// RoiAlign with a fixed sampling_ratio: one reduction over the bin's
// sampling grid; each sample's four bilinear taps are checked load_indirect
// reads at an offset that includes the roi's run-time batch index. An
// adaptive grid (sampling_ratio 0) depends on the roi sizes: refused.

absl::Status LowerRoiAlign(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand rois, L.Input(1));
  KILN_ASSIGN_OR_RETURN(Operand bidx, L.Input(2));
  if (!ir::IsFloat(x.dtype) || x.shape.size() != 4) return L.Error("X must be float [N, C, H, W]");
  if (!ir::IsFloat(rois.dtype) || rois.shape.size() != 2 || rois.shape[1] != 4) {
    return L.Error("rois must be float [num_rois, 4]");
  }
  const int64_t num_rois = rois.shape[0];
  if (!ir::IsInteger(bidx.dtype) || bidx.shape != Shape{num_rois}) {
    return L.Error("batch_indices must be ", num_rois, " integers");
  }
  KILN_ASSIGN_OR_RETURN(std::string mode, n.AttrOr<std::string>("mode", "avg"));
  KILN_ASSIGN_OR_RETURN(int64_t oh, n.AttrOr<int64_t>("output_height", 1));
  KILN_ASSIGN_OR_RETURN(int64_t ow, n.AttrOr<int64_t>("output_width", 1));
  KILN_ASSIGN_OR_RETURN(int64_t sampling, n.AttrOr<int64_t>("sampling_ratio", 0));
  KILN_ASSIGN_OR_RETURN(float scale, n.AttrOr<float>("spatial_scale", 1.0f));
  KILN_ASSIGN_OR_RETURN(std::string ctm, n.AttrOr<std::string>(
      "coordinate_transformation_mode", L.opset() >= 16 ? "half_pixel" : "output_half_pixel"));
  if (mode != "avg" && mode != "max") return L.Error("unknown mode '", mode, "'");
  if (ctm != "half_pixel" && ctm != "output_half_pixel") {
    return L.Error("unknown coordinate_transformation_mode '", ctm, "'");
  }
  if (oh <= 0 || ow <= 0 || sampling < 0) {
    return L.Error("output_height/width must be positive and sampling_ratio non-negative");
  }
  if (sampling == 0) {
    return L.Unimplemented("sampling_ratio 0 (the sampling grid depends on the roi sizes)");
  }
  const int64_t nb = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  const Shape want = {num_rois, c, oh, ow};
  const ir::Value& out = L.OutputValue(0);
  if (out.shape != want || out.dtype != x.dtype) {
    return L.Error("output must be ", ir::DTypeName(x.dtype), ir::ShapeToString(want));
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(want) == 0) return absl::OkStatus();
  const int64_t total = ir::NumElements(x.shape);
  if (total == 0) return L.Unimplemented("an empty X with rois");
  KILN_ASSIGN_OR_RETURN(int32_t src, L.Materialize(x));
  auto k = L.NewKernel(want, {sampling, sampling});
  const Coords it = k->IterCoords();
  auto f64 = [&](double v) { return k->Const(DType::kF64, v); };
  auto i64 = [&](int64_t v) { return k->Const(DType::kI64, v); };
  auto bin = [&](OpCode op, int32_t a, int32_t b) { return k->Bin(op, a, b); };
  const double off = ctm == "half_pixel" ? 0.5 : 0.0;
  int32_t corner[4];
  for (int j = 0; j < 4; ++j) {
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(rois, {it[0], Const(j)}));
    corner[j] = bin(OpCode::kSub, bin(OpCode::kMul, k->Cast(v, DType::kF64),
                                      f64(static_cast<double>(scale))), f64(off));
  }
  int32_t roi_w = bin(OpCode::kSub, corner[2], corner[0]);
  int32_t roi_h = bin(OpCode::kSub, corner[3], corner[1]);
  if (ctm != "half_pixel") {
    roi_w = bin(OpCode::kMax, roi_w, f64(1));
    roi_h = bin(OpCode::kMax, roi_h, f64(1));
  }
  const int32_t bin_h = bin(OpCode::kDiv, roi_h, f64(oh));
  const int32_t bin_w = bin(OpCode::kDiv, roi_w, f64(ow));
  auto sample = [&](int32_t start, int32_t size, IndexExpr cell, IndexExpr sub) {
    // start + cell * size + (sub + 0.5) * size / grid
    const int32_t cv = k->Cast(k->b().Index(cell), DType::kF64);
    const int32_t sv = bin(OpCode::kAdd, k->Cast(k->b().Index(sub), DType::kF64), f64(0.5));
    return bin(OpCode::kAdd, bin(OpCode::kAdd, start, bin(OpCode::kMul, cv, size)),
               bin(OpCode::kDiv, bin(OpCode::kMul, sv, size), f64(sampling)));
  };
  int32_t yy = sample(corner[1], bin_h, it[2], k->r(0));
  int32_t xx = sample(corner[0], bin_w, it[3], k->r(1));
  const int32_t outside = bin(OpCode::kOr,
      bin(OpCode::kOr, bin(OpCode::kLt, yy, f64(-1)), bin(OpCode::kGt, yy, f64(h))),
      bin(OpCode::kOr, bin(OpCode::kLt, xx, f64(-1)), bin(OpCode::kGt, xx, f64(w))));
  // Low/high taps and fractions per axis; clamped as the reference does.
  auto axis = [&](int32_t v, int64_t size, int32_t* lo, int32_t* hi, int32_t* frac) {
    v = bin(OpCode::kMin, bin(OpCode::kMax, v, f64(0)), f64(static_cast<double>(size)));
    const int32_t fl = k->Un(OpCode::kFloor, v);
    const int32_t at_end = bin(OpCode::kGe, fl, f64(static_cast<double>(size - 1)));
    const int32_t lo_f = k->Sel(at_end, f64(static_cast<double>(size - 1)), fl);
    *lo = k->Cast(lo_f, DType::kI64);
    *hi = k->Sel(at_end, *lo, bin(OpCode::kAdd, *lo, i64(1)));
    *frac = bin(OpCode::kSub, k->Sel(at_end, lo_f, v), lo_f);
  };
  int32_t ylo, yhi, ly, xlo, xhi, lx;
  axis(yy, h, &ylo, &yhi, &ly);
  axis(xx, w, &xlo, &xhi, &lx);
  const int32_t hy = bin(OpCode::kSub, f64(1), ly), hx = bin(OpCode::kSub, f64(1), lx);
  KILN_ASSIGN_OR_RETURN(int32_t b, k->Load(bidx, {it[0]}));
  if (k->DTypeOf(b) != DType::kI64) b = k->Cast(b, DType::kI64);
  const int32_t b_ok = bin(OpCode::kAnd, bin(OpCode::kGe, b, i64(0)), bin(OpCode::kLt, b, i64(nb)));
  const int32_t plane = bin(OpCode::kMul, bin(OpCode::kAdd, bin(OpCode::kMul, k->Sel(b_ok, b, i64(0)), i64(c)),
                                              k->b().Index(it[1])),
                            i64(h * w));
  const int32_t ys[2] = {ylo, yhi}, xs[2] = {xlo, xhi};
  const int32_t wy[2] = {hy, ly}, wx[2] = {hx, lx};
  int32_t acc = -1;
  for (int t = 0; t < 4; ++t) {
    const int32_t pos = bin(OpCode::kAdd, bin(OpCode::kMul, ys[t / 2], i64(w)), xs[t % 2]);
    int32_t idx = bin(OpCode::kAdd, plane, k->Sel(outside, i64(0), pos));
    idx = k->Sel(b_ok, idx, i64(total));
    const int32_t v = k->Cast(k->b().LoadIndirect(src, Const(0), idx, total, 1), DType::kF64);
    const int32_t wt = k->Sel(outside, f64(0), bin(OpCode::kMul, wy[t / 2], wx[t % 2]));
    const int32_t term = bin(OpCode::kMul, wt, v);
    acc = acc < 0 ? term : bin(mode == "avg" ? OpCode::kAdd : OpCode::kMax, acc, term);
  }
  int32_t r;
  if (mode == "avg") {
    r = bin(OpCode::kDiv, k->b().Reduce(ReduceKind::kSum, acc),
            f64(static_cast<double>(sampling * sampling)));
  } else {
    r = k->b().Reduce(ReduceKind::kMax, acc);
  }
  k->Store(buffer, want, it, k->Cast(r, x.dtype));
  return absl::OkStatus();
}

}  // namespace

void AddSignalLowerings(LowerTable& t) {
  t["GridSample"] = LowerGridSample;
  t["DFT"] = LowerDft;
  t["STFT"] = LowerStft;
  t["RoiAlign"] = LowerRoiAlign;
}

}  // namespace kiln::lowering::internal
