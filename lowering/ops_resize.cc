// Lowering of Resize (opsets 10-19) and Upsample (7, 9): nearest / linear /
// cubic interpolation with every coordinate_transformation_mode the
// reference interpreter knows, as loop kernels (no extern call).
//
// Source indices are index expressions, never data: with scales and roi
// known at lowering time, the source coordinate of an axis is affine in the
// output index, so each tap's index is floor((a*o + c) / b) (clamped), found
// by fitting the per-axis index table computed exactly as the reference
// does. Nearest resizes then are pure views. Linear and cubic weights are
// computed in the kernel (f64, the reference's formulas) from the output
// index and the fitted base index, so a coordinate that lands on an integer
// gives the same result on either side. When scales or roi are only known at
// run time (or no fit exists), every axis is a one-hot reduction over the
// input: correct, but O(out * in) — meant for tests, not models. Sizes known
// only at run time are taken from the static output shape (they must agree
// with it; that is not checked at run time).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/status_macros.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

struct ResizeSpec {
  std::string mode;          // nearest | linear | cubic
  std::string coord_mode;    // coordinate_transformation_mode
  std::string nearest_mode;  // or "legacy": ceil when downsampling, else floor
  double cubic_a = -0.75;
  double extrapolation = 0;
  bool exclude_outside = false;
};

// Where one axis' scale and roi come from: a value known at lowering time,
// or an element of the scales / roi input read in the kernel.
struct AxisSource {
  int64_t in = 0, out = 0;
  std::optional<double> scale;
  int scale_slot = -1;
  std::optional<double> roi_start, roi_end;
  int roi_start_slot = -1, roi_end_slot = -1;
};

bool IsTfCrop(const ResizeSpec& s) { return s.coord_mode == "tf_crop_and_resize"; }

// The reference's source coordinate of output index o (double precision).
double SourceCoord(const ResizeSpec& p, double xo, int64_t in, int64_t out,
                   double scale, double roi_start, double roi_end) {
  const double out_w = scale * static_cast<double>(in);
  const double in_d = static_cast<double>(in);
  const std::string& cm = p.coord_mode;
  if (cm == "half_pixel") return (xo + 0.5) / scale - 0.5;
  if (cm == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out) / out_w;
    const double offset = in_d / 2 * (1 - adjustment);
    return offset + (xo + 0.5) / scale - 0.5;
  }
  if (cm == "pytorch_half_pixel") {
    return out_w == 1 ? -0.5 : (xo + 0.5) / scale - 0.5;
  }
  if (cm == "align_corners") {
    return out_w == 1 ? 0.0 : xo * (in_d - 1) / (out_w - 1);
  }
  if (cm == "asymmetric") return xo / scale;
  if (cm == "tf_half_pixel_for_nn") return (xo + 0.5) / scale;
  // tf_crop_and_resize
  double x = out_w == 1 ? (roi_end - roi_start) * (in_d - 1) / 2
                        : xo * (roi_end - roi_start) * (in_d - 1) / (out_w - 1);
  return x + roi_start * (in_d - 1);
}

bool NearestRight(const ResizeSpec& p, double ratio, double scale) {
  if (ratio == 1) return true;
  const std::string& m = p.nearest_mode;
  if (m == "round_prefer_floor") return ratio > 0.5;
  if (m == "round_prefer_ceil") return ratio >= 0.5;
  if (m == "floor") return false;
  if (m == "ceil") return true;
  return scale < 1;  // legacy
}

// f(o) == floor((a*o + c) / b) for every o, b > 0.
struct FloorAffine {
  int64_t a = 0, b = 1, c = 0;
};

std::optional<FloorAffine> FitFloorAffine(const std::vector<int64_t>& f,
                                          double slope) {
  const int64_t n = static_cast<int64_t>(f.size());
  if (n <= 1) return FloorAffine{0, 1, n == 1 ? f[0] : 0};
  if (!std::isfinite(slope) || std::abs(slope) > 1e6) return std::nullopt;
  for (int64_t b = 1; b <= 1024; ++b) {
    const double center = slope * static_cast<double>(b);
    for (int64_t a = static_cast<int64_t>(std::floor(center)) - 1;
         a <= static_cast<int64_t>(std::ceil(center)) + 1; ++a) {
      int64_t lo = std::numeric_limits<int64_t>::min();
      int64_t hi = std::numeric_limits<int64_t>::max();
      for (int64_t o = 0; o < n && lo <= hi; ++o) {
        lo = std::max(lo, b * f[o] - a * o);
        hi = std::min(hi, b * f[o] + b - 1 - a * o);
      }
      if (lo <= hi) return FloorAffine{a, b, lo};
    }
  }
  return std::nullopt;
}

// One resized axis with lowering-time coordinates: either a single source
// index per output (`single`), or taps[t] = clamp(base + t - shift) with
// weights computed in the kernel.
struct AxisPlan {
  bool single = false;
  FloorAffine fit;       // of the single index, or of base (x0)
  int64_t lo = 0, hi = 0;  // range of the fitted sequence
};

// floor((a*o + c) / b) for output coordinate `o`.
IndexExpr FitExpr(const FloorAffine& f, const IndexExpr& o) {
  IndexExpr e = o * f.a + f.c;
  return f.b == 1 ? e : ir::loop::FloorDiv(e, f.b);
}

// The source index expression clamp(fit(o) + t) for output coordinate `o`.
IndexExpr TapIndex(const AxisPlan& plan, int64_t in, const IndexExpr& o,
                   int64_t t) {
  IndexExpr e = FitExpr(plan.fit, o) + t;
  if (plan.lo + t < 0) e = ir::loop::Max(e, 0);
  if (plan.hi + t > in - 1) e = ir::loop::Min(e, in - 1);
  return e;
}

// Plans an axis whose scale and roi are known; nullopt when no fit exists.
std::optional<AxisPlan> PlanAxis(const ResizeSpec& p, const AxisSource& s) {
  std::vector<int64_t> seq;
  bool all_integer = true;
  const double scale = *s.scale;
  const double rs = s.roi_start.value_or(0), re = s.roi_end.value_or(1);
  for (int64_t o = 0; o < s.out; ++o) {
    const double x = SourceCoord(p, static_cast<double>(o), s.in, s.out, scale, rs, re);
    if (!std::isfinite(x) || std::abs(x) > 1e12) return std::nullopt;
    double x0 = std::floor(x), ratio = x - x0;
    if (ratio == 0) {
      x0 -= 1;
      ratio = 1;
    }
    all_integer &= ratio == 1;
    if (p.mode == "nearest") {
      seq.push_back(static_cast<int64_t>(x0) + (NearestRight(p, ratio, scale) ? 1 : 0));
    } else {
      seq.push_back(static_cast<int64_t>(x0));
    }
  }
  AxisPlan plan;
  // On integer coordinates linear and cubic weights are exactly one 1 at x.
  plan.single = p.mode == "nearest" || all_integer;
  if (plan.single && p.mode != "nearest") {
    for (int64_t& v : seq) v += 1;
  }
  double slope;
  const double in_d = static_cast<double>(s.in), out_w = scale * in_d;
  if (p.coord_mode == "align_corners") {
    slope = out_w == 1 ? 0 : (in_d - 1) / (out_w - 1);
  } else if (IsTfCrop(p)) {
    slope = out_w == 1 ? 0 : (re - rs) * (in_d - 1) / (out_w - 1);
  } else {
    slope = 1 / scale;
  }
  std::optional<FloorAffine> fit = FitFloorAffine(seq, slope);
  if (!fit.has_value()) return std::nullopt;
  plan.fit = *fit;
  if (!seq.empty()) {
    plan.lo = *std::min_element(seq.begin(), seq.end());
    plan.hi = *std::max_element(seq.begin(), seq.end());
  }
  return plan;
}

// f64 arithmetic on kernel values.
class F64 {
 public:
  explicit F64(Emitter& k) : k_(k) {}
  int32_t C(double v) { return k_.Const(DType::kF64, v); }
  int32_t Add(int32_t a, int32_t b) { return k_.Bin(OpCode::kAdd, a, b); }
  int32_t Sub(int32_t a, int32_t b) { return k_.Bin(OpCode::kSub, a, b); }
  int32_t Mul(int32_t a, int32_t b) { return k_.Bin(OpCode::kMul, a, b); }
  int32_t Div(int32_t a, int32_t b) { return k_.Bin(OpCode::kDiv, a, b); }
  int32_t Eq(int32_t a, int32_t b) { return k_.Bin(OpCode::kEq, a, b); }
  int32_t Sel(int32_t c, int32_t a, int32_t b) { return k_.Sel(c, a, b); }
  int32_t Of(int32_t v) {
    return k_.DTypeOf(v) == DType::kF64 ? v : k_.Cast(v, DType::kF64);
  }
  int32_t Index(const IndexExpr& e) {
    return k_.Cast(k_.b().Index(k_.Simplify(e)), DType::kF64);
  }

 private:
  Emitter& k_;
};

// Scale and roi of an axis as kernel values.
struct AxisValues {
  int32_t scale = -1, roi_start = -1, roi_end = -1;
};

absl::StatusOr<AxisValues> EmitAxisValues(Emitter& k, const AxisSource& s,
                                          const std::optional<Operand>& scales,
                                          const std::optional<Operand>& roi) {
  F64 f(k);
  AxisValues v;
  if (s.scale.has_value()) {
    v.scale = f.C(*s.scale);
  } else {
    KILN_ASSIGN_OR_RETURN(int32_t l, k.Load(*scales, {Const(s.scale_slot)}));
    v.scale = f.Of(l);
  }
  if (s.roi_start.has_value()) {
    v.roi_start = f.C(*s.roi_start);
    v.roi_end = f.C(*s.roi_end);
  } else if (s.roi_start_slot >= 0) {
    KILN_ASSIGN_OR_RETURN(int32_t a, k.Load(*roi, {Const(s.roi_start_slot)}));
    KILN_ASSIGN_OR_RETURN(int32_t b, k.Load(*roi, {Const(s.roi_end_slot)}));
    v.roi_start = f.Of(a);
    v.roi_end = f.Of(b);
  } else {
    v.roi_start = f.C(0);
    v.roi_end = f.C(1);
  }
  return v;
}

// SourceCoord in the kernel.
int32_t EmitSourceCoord(Emitter& k, const ResizeSpec& p, const AxisSource& s,
                        const AxisValues& v, int32_t xo) {
  F64 f(k);
  const int32_t in_d = f.C(static_cast<double>(s.in));
  const int32_t out_w = f.Mul(v.scale, in_d);
  const int32_t half = f.C(0.5), one = f.C(1);
  const int32_t out_w_is_1 = f.Eq(out_w, one);
  const int32_t hp = f.Sub(f.Div(f.Add(xo, half), v.scale), half);
  const std::string& cm = p.coord_mode;
  if (cm == "half_pixel") return hp;
  if (cm == "half_pixel_symmetric") {
    const int32_t adjustment = f.Div(f.C(static_cast<double>(s.out)), out_w);
    const int32_t offset =
        f.Mul(f.Div(in_d, f.C(2)), f.Sub(one, adjustment));
    return f.Sub(f.Add(offset, f.Div(f.Add(xo, half), v.scale)), half);
  }
  if (cm == "pytorch_half_pixel") return f.Sel(out_w_is_1, f.C(-0.5), hp);
  const int32_t in_m1 = f.Sub(in_d, one);
  if (cm == "align_corners") {
    return f.Sel(out_w_is_1, f.C(0),
                 f.Div(f.Mul(xo, in_m1), f.Sub(out_w, one)));
  }
  if (cm == "asymmetric") return f.Div(xo, v.scale);
  if (cm == "tf_half_pixel_for_nn") return f.Div(f.Add(xo, half), v.scale);
  const int32_t span = f.Sub(v.roi_end, v.roi_start);
  const int32_t x = f.Sel(out_w_is_1, f.Div(f.Mul(span, in_m1), f.C(2)),
                          f.Div(f.Mul(f.Mul(xo, span), in_m1), f.Sub(out_w, one)));
  return f.Add(x, f.Mul(v.roi_start, in_m1));
}

// Weights of the taps first+0.. for `ratio` in (0, 1] (linear: 2, cubic: 4),
// with exclude_outside applied given the f64 value of `first`.
std::vector<int32_t> EmitWeights(Emitter& k, const ResizeSpec& p, int64_t in,
                                 int32_t ratio, int32_t first) {
  F64 f(k);
  std::vector<int32_t> w;
  const int32_t one = f.C(1);
  if (p.mode == "linear") {
    w = {f.Sub(one, ratio), ratio};
  } else {
    const int32_t a = f.C(p.cubic_a);
    const int32_t a2 = f.C(p.cubic_a + 2), a3 = f.C(p.cubic_a + 3);
    const int32_t a5 = f.C(5 * p.cubic_a), a8 = f.C(8 * p.cubic_a),
                  a4 = f.C(4 * p.cubic_a);
    auto outer = [&](int32_t t) {  // ((a*t - 5a)*t + 8a)*t - 4a
      return f.Sub(f.Mul(f.Add(f.Mul(f.Sub(f.Mul(a, t), a5), t), a8), t), a4);
    };
    auto inner = [&](int32_t t) {  // ((a+2)*t - (a+3))*t*t + 1
      return f.Add(f.Mul(f.Mul(f.Sub(f.Mul(a2, t), a3), t), t), one);
    };
    const int32_t q = f.Sub(one, ratio);
    w = {outer(f.Add(ratio, one)), inner(ratio), inner(q), outer(f.Add(q, one))};
  }
  if (p.exclude_outside) {
    const int32_t zero = f.C(0), last = f.C(static_cast<double>(in - 1));
    int32_t sum = -1;
    for (size_t t = 0; t < w.size(); ++t) {
      const int32_t j = f.Add(first, f.C(static_cast<double>(t)));
      const int32_t inside = k.Bin(OpCode::kAnd, k.Bin(OpCode::kGe, j, zero),
                                   k.Bin(OpCode::kLe, j, last));
      w[t] = f.Sel(inside, w[t], zero);
      sum = sum < 0 ? w[t] : f.Add(sum, w[t]);
    }
    const int32_t nonzero = k.Bin(OpCode::kNe, sum, zero);
    for (int32_t& wt : w) wt = f.Sel(nonzero, f.Div(wt, sum), wt);
  }
  return w;
}

// Conjunction of "not extrapolated" over tf_crop_and_resize axes, or -1.
int32_t AccumulateInside(Emitter& k, int32_t acc, const AxisSource& s, int32_t x) {
  F64 f(k);
  const int32_t inside =
      k.Bin(OpCode::kAnd, k.Bin(OpCode::kGe, x, f.C(0)),
            k.Bin(OpCode::kLe, x, f.C(static_cast<double>(s.in - 1))));
  return acc < 0 ? inside : k.Bin(OpCode::kAnd, acc, inside);
}

int32_t Finish(Emitter& k, const ResizeSpec& p, int32_t value, int32_t inside,
               DType out) {
  if (inside >= 0) {
    value = k.Sel(inside, value, k.Const(DType::kF64, p.extrapolation));
  }
  return out == DType::kF64 ? value : k.Cast(value, out);
}

// Every axis planned: nearest without extrapolation is a view, the rest a
// kernel summing a fixed set of taps.
absl::Status LowerPlanned(Lowerer& L, const ResizeSpec& p, const Operand& x,
                          const std::vector<AxisSource>& axes,
                          const std::vector<AxisPlan>& plans) {
  const size_t rank = axes.size();
  bool all_single = true;
  for (const AxisPlan& pl : plans) all_single &= pl.single;
  if (all_single && !IsTfCrop(p)) {
    Operand v = x;
    if (!x.splat.has_value()) {
      auto inner = x.index;
      v.index = [inner, plans, axes](const Coords& c) {
        Coords in(c.size());
        for (size_t d = 0; d < c.size(); ++d) {
          in[d] = TapIndex(plans[d], axes[d].in, c[d], 0);
        }
        return inner(in);
      };
    }
    L.SetOutputView(0, std::move(v));
    return absl::OkStatus();
  }
  const ir::Value& out = L.OutputValue(0);
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  F64 f(*k);
  const Coords it = k->IterCoords();
  // Per axis: the source index of each tap and its weight (-1: weight 1).
  std::vector<std::vector<IndexExpr>> tap_index(rank);
  std::vector<std::vector<int32_t>> tap_weight(rank);
  int32_t inside = -1;
  for (size_t d = 0; d < rank; ++d) {
    const AxisPlan& pl = plans[d];
    int32_t x_coord = -1;
    if (!pl.single || IsTfCrop(p)) {
      KILN_ASSIGN_OR_RETURN(AxisValues v,
                            EmitAxisValues(*k, axes[d], std::nullopt, std::nullopt));
      x_coord = EmitSourceCoord(*k, p, axes[d], v, f.Index(it[d]));
      if (IsTfCrop(p)) inside = AccumulateInside(*k, inside, axes[d], x_coord);
    }
    if (pl.single) {
      tap_index[d] = {TapIndex(pl, axes[d].in, it[d], 0)};
      tap_weight[d] = {-1};
      continue;
    }
    const int64_t shift = p.mode == "cubic" ? 1 : 0;
    const int32_t x0 = f.Index(FitExpr(pl.fit, it[d]));
    const int32_t ratio = f.Sub(x_coord, x0);
    const int32_t first = f.Sub(x0, f.C(static_cast<double>(shift)));
    tap_weight[d] = EmitWeights(*k, p, axes[d].in, ratio, first);
    for (size_t t = 0; t < tap_weight[d].size(); ++t) {
      tap_index[d].push_back(TapIndex(pl, axes[d].in, it[d],
                                      static_cast<int64_t>(t) - shift));
    }
  }
  std::vector<size_t> t(rank, 0);
  int32_t sum = -1;
  while (true) {
    Coords c(rank);
    int32_t w = -1;
    for (size_t d = 0; d < rank; ++d) {
      c[d] = tap_index[d][t[d]];
      const int32_t wd = tap_weight[d][t[d]];
      if (wd >= 0) w = w < 0 ? wd : f.Mul(w, wd);
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, c));
    int32_t term = f.Of(v);
    if (w >= 0) term = f.Mul(w, term);
    sum = sum < 0 ? term : f.Add(sum, term);
    size_t d = rank;
    while (d-- > 0) {
      if (++t[d] < tap_index[d].size()) break;
      t[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  k->Store(buffer, out.shape, it, Finish(*k, p, sum, inside, out.dtype));
  return absl::OkStatus();
}

// Scales or roi known only at run time: out = sum over the input of
// x[r] * prod_d W_d(o_d, r_d), W_d one-hot on the taps of axis d.
absl::Status LowerOneHot(Lowerer& L, const ResizeSpec& p, const Operand& x,
                         const std::vector<AxisSource>& axes,
                         const std::optional<Operand>& scales,
                         const std::optional<Operand>& roi) {
  const ir::Value& out = L.OutputValue(0);
  std::vector<int64_t> red;
  double work = static_cast<double>(ir::NumElements(out.shape));
  for (const AxisSource& s : axes) {
    red.push_back(s.in);
    work *= static_cast<double>(s.in);
  }
  if (work > 1e9) {
    return L.Unimplemented(
        "scales or roi known only at run time on a large tensor (make them "
        "constants)");
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape, red);
  F64 f(*k);
  const Coords it = k->IterCoords();
  const int32_t zero = f.C(0), one = f.C(1);
  int32_t inside = -1;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> taps(axes.size());
  for (size_t d = 0; d < axes.size(); ++d) {
    const AxisSource& s = axes[d];
    KILN_ASSIGN_OR_RETURN(AxisValues v, EmitAxisValues(*k, s, scales, roi));
    const int32_t x_coord = EmitSourceCoord(*k, p, s, v, f.Index(it[d]));
    if (IsTfCrop(p)) inside = AccumulateInside(*k, inside, s, x_coord);
    const int32_t fl = k->Un(OpCode::kFloor, x_coord);
    const int32_t at_integer = f.Eq(f.Sub(x_coord, fl), zero);
    const int32_t x0 = f.Sel(at_integer, f.Sub(fl, one), fl);
    const int32_t ratio = f.Sel(at_integer, one, f.Sub(x_coord, fl));
    std::vector<std::pair<int32_t, int32_t>> raw;  // (f64 index, weight)
    if (p.mode == "nearest") {
      int32_t right;
      const std::string& m = p.nearest_mode;
      if (m == "round_prefer_floor") {
        right = k->Bin(OpCode::kGt, ratio, f.C(0.5));
      } else if (m == "round_prefer_ceil") {
        right = k->Bin(OpCode::kGe, ratio, f.C(0.5));
      } else if (m == "floor") {
        right = f.Eq(ratio, one);
      } else if (m == "ceil") {
        right = k->Bin(OpCode::kGe, ratio, zero);
      } else {
        right = k->Bin(OpCode::kLt, v.scale, one);
      }
      right = k->Bin(OpCode::kOr, right, f.Eq(ratio, one));
      raw.push_back({f.Add(x0, f.Sel(right, one, zero)), -1});
    } else {
      const double shift = p.mode == "cubic" ? 1 : 0;
      const int32_t first = f.Sub(x0, f.C(shift));
      std::vector<int32_t> w = EmitWeights(*k, p, s.in, ratio, first);
      for (size_t t = 0; t < w.size(); ++t) {
        raw.push_back({f.Add(first, f.C(static_cast<double>(t))), w[t]});
      }
    }
    const int32_t last = f.C(static_cast<double>(s.in - 1));
    for (auto& [idx, w] : raw) {
      const int32_t clamped =
          k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, idx, zero), last);
      taps[d].push_back({k->Cast(clamped, DType::kI64), w});
    }
  }
  int32_t weight = -1;
  for (size_t d = 0; d < axes.size(); ++d) {
    const int32_t rd = k->b().Index(k->r(d));
    int32_t wd = -1;
    for (auto& [idx, w] : taps[d]) {
      const int32_t term = f.Sel(k->Bin(OpCode::kEq, idx, rd), w < 0 ? one : w, zero);
      wd = wd < 0 ? term : f.Add(wd, term);
    }
    weight = weight < 0 ? wd : f.Mul(weight, wd);
  }
  Coords rc;
  for (size_t d = 0; d < axes.size(); ++d) rc.push_back(k->r(d));
  KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(x, rc));
  int32_t term = f.Of(xv);
  if (weight >= 0) term = f.Mul(weight, term);
  const int32_t sum = red.empty() ? term : k->b().Reduce(ReduceKind::kSum, term);
  k->Store(buffer, out.shape, it, Finish(*k, p, sum, inside, out.dtype));
  return absl::OkStatus();
}

// An optional scales / roi / sizes input: absent (or empty, as opset 11
// models write it), constant (`values`), or known only at run time
// (`operand`).
struct FloatInput {
  bool present = false;
  std::optional<std::vector<double>> values;
  std::optional<Operand> operand;
  int64_t count = 0;
};

absl::StatusOr<FloatInput> ReadFloatInput(Lowerer& L, int i) {
  FloatInput r;
  if (!L.HasInput(i)) return r;
  KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
  r.count = ir::NumElements(op.shape);
  if (r.count == 0) return r;
  r.present = true;
  if (const ir::Tensor* t = L.ConstantInput(i)) {
    std::vector<double> v;
    for (int64_t e = 0; e < t->num_elements(); ++e) v.push_back(t->GetAsDouble(e));
    r.values = std::move(v);
  } else {
    r.operand = op;
  }
  return r;
}

absl::Status LowerResize(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const ir::Value& out = L.OutputValue(0);
  if (static_cast<int64_t>(out.shape.size()) != rank) {
    return L.Error("output rank differs from the input's");
  }
  const bool legacy = n.op == "Upsample" || L.opset() < 11;
  ResizeSpec p;
  KILN_ASSIGN_OR_RETURN(p.mode, n.AttrOr<std::string>("mode", "nearest"));
  if (p.mode == "bilinear" || p.mode == "trilinear") p.mode = "linear";
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") {
    return L.Error("unknown mode '", p.mode, "'");
  }
  std::vector<int64_t> axes_attr;
  std::string policy = "stretch";
  FloatInput scales, roi, sizes;
  if (legacy) {
    p.coord_mode = "asymmetric";
    p.nearest_mode = "legacy";
    if (n.op == "Upsample" && L.opset() < 9) {
      KILN_ASSIGN_OR_RETURN(std::vector<float> s, n.Attr<std::vector<float>>("scales"));
      scales.present = true;
      scales.count = static_cast<int64_t>(s.size());
      scales.values = std::vector<double>(s.begin(), s.end());
    } else {
      KILN_ASSIGN_OR_RETURN(scales, ReadFloatInput(L, 1));
    }
  } else {
    KILN_ASSIGN_OR_RETURN(p.coord_mode, n.AttrOr<std::string>(
                                            "coordinate_transformation_mode",
                                            "half_pixel"));
    KILN_ASSIGN_OR_RETURN(p.nearest_mode,
                          n.AttrOr<std::string>("nearest_mode", "round_prefer_floor"));
    KILN_ASSIGN_OR_RETURN(float a, n.AttrOr<float>("cubic_coeff_a", -0.75f));
    KILN_ASSIGN_OR_RETURN(float ev, n.AttrOr<float>("extrapolation_value", 0.0f));
    KILN_ASSIGN_OR_RETURN(int64_t eo, n.AttrOr<int64_t>("exclude_outside", 0));
    KILN_ASSIGN_OR_RETURN(int64_t antialias, n.AttrOr<int64_t>("antialias", 0));
    KILN_ASSIGN_OR_RETURN(policy, n.AttrOr<std::string>("keep_aspect_ratio_policy",
                                                        "stretch"));
    KILN_ASSIGN_OR_RETURN(axes_attr, n.AttrOr<std::vector<int64_t>>("axes", {}));
    p.cubic_a = a;
    p.extrapolation = ev;
    p.exclude_outside = eo != 0;
    if (antialias != 0) {
      return L.Unimplemented("antialias=1 is not supported by the lowering");
    }
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
      return L.Error("unknown keep_aspect_ratio_policy '", policy, "'");
    }
    KILN_ASSIGN_OR_RETURN(roi, ReadFloatInput(L, 1));
    KILN_ASSIGN_OR_RETURN(scales, ReadFloatInput(L, 2));
    KILN_ASSIGN_OR_RETURN(sizes, ReadFloatInput(L, 3));
  }
  static const char* const kCoordModes[] = {
      "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::none_of(std::begin(kCoordModes), std::end(kCoordModes),
                   [&](const char* m) { return p.coord_mode == m; })) {
    return L.Error("unknown coordinate_transformation_mode '", p.coord_mode, "'");
  }
  if (p.mode == "nearest" && p.nearest_mode != "legacy" &&
      p.nearest_mode != "round_prefer_floor" && p.nearest_mode != "round_prefer_ceil" &&
      p.nearest_mode != "floor" && p.nearest_mode != "ceil") {
    return L.Error("unknown nearest_mode '", p.nearest_mode, "'");
  }
  std::vector<int64_t> axes = axes_attr;
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  } else {
    std::vector<bool> seen(rank, false);
    for (int64_t& a : axes) {
      std::optional<int64_t> norm = NormalizeAxis(a, rank);
      if (!norm.has_value()) return L.Error("axis ", a, " out of range");
      if (seen[*norm]) return L.Error("axes repeat axis ", *norm);
      seen[*norm] = true;
      a = *norm;
    }
  }
  const int64_t naxes = static_cast<int64_t>(axes.size());
  if (scales.present == sizes.present) {
    return L.Error(scales.present ? "only one of scales and sizes may be given"
                                  : "one of scales and sizes must be given");
  }
  const FloatInput& given = scales.present ? scales : sizes;
  if (given.count != naxes) {
    return L.Error(scales.present ? "scales" : "sizes", " has ", given.count,
                   " values, expected ", naxes);
  }
  if (!ir::IsFloat(x.dtype) && p.mode != "nearest") {
    return L.Unimplemented(p.mode, " interpolation of ", ir::DTypeName(x.dtype));
  }

  std::vector<AxisSource> src(rank);
  for (int64_t d = 0; d < rank; ++d) {
    src[d].in = x.shape[d];
    src[d].out = out.shape[d];
    src[d].scale = 1.0;
    src[d].roi_start = 0.0;
    src[d].roi_end = 1.0;
    if (src[d].in == 0 && src[d].out > 0) return L.Error("cannot resize an empty axis");
  }
  Shape expect = x.shape;
  if (sizes.present) {
    if (sizes.values.has_value()) {
      std::vector<double> sc(naxes);
      for (int64_t i = 0; i < naxes; ++i) {
        const double s = (*sizes.values)[i];
        if (s < 0) return L.Error("sizes must be non-negative");
        if (x.shape[axes[i]] == 0) return L.Error("cannot resize an empty axis");
        sc[i] = s / static_cast<double>(x.shape[axes[i]]);
        expect[axes[i]] = static_cast<int64_t>(s);
      }
      if (policy != "stretch") {
        double s = sc[0];
        for (double v : sc) s = policy == "not_larger" ? std::min(s, v) : std::max(s, v);
        for (int64_t i = 0; i < naxes; ++i) {
          sc[i] = s;
          expect[axes[i]] = static_cast<int64_t>(s * x.shape[axes[i]] + 0.5);
        }
      }
      for (int64_t i = 0; i < naxes; ++i) src[axes[i]].scale = sc[i];
    } else {
      if (policy != "stretch") {
        return L.Unimplemented("keep_aspect_ratio_policy '", policy,
                               "' with sizes known only at run time");
      }
      // The output shape is static, so it is the sizes.
      for (int64_t a : axes) {
        if (x.shape[a] == 0) return L.Error("cannot resize an empty axis");
        src[a].scale = static_cast<double>(out.shape[a]) /
                       static_cast<double>(x.shape[a]);
        expect[a] = out.shape[a];
      }
    }
  } else if (scales.values.has_value()) {
    for (int64_t i = 0; i < naxes; ++i) {
      const double s = (*scales.values)[i];
      if (!(s > 0) || !std::isfinite(s)) {
        return L.Error("scales must be positive, got ", s);
      }
      src[axes[i]].scale = s;
      expect[axes[i]] =
          static_cast<int64_t>(std::floor(s * static_cast<double>(x.shape[axes[i]])));
    }
  } else {
    for (int64_t i = 0; i < naxes; ++i) {
      src[axes[i]].scale.reset();
      src[axes[i]].scale_slot = static_cast<int>(i);
      expect[axes[i]] = out.shape[axes[i]];
    }
  }
  if (expect != out.shape) {
    return L.Error("output shape ", ir::ShapeToString(out.shape),
                   " differs from the resize's ", ir::ShapeToString(expect));
  }
  if (IsTfCrop(p)) {
    if (!roi.present || roi.count != 2 * naxes) {
      return L.Error("roi has ", roi.count, " values, expected ", 2 * naxes);
    }
    for (int64_t i = 0; i < naxes; ++i) {
      AxisSource& s = src[axes[i]];
      if (roi.values.has_value()) {
        s.roi_start = (*roi.values)[i];
        s.roi_end = (*roi.values)[naxes + i];
      } else {
        s.roi_start.reset();
        s.roi_end.reset();
        s.roi_start_slot = static_cast<int>(i);
        s.roi_end_slot = static_cast<int>(naxes + i);
      }
    }
  }
  bool planned = true;
  std::vector<AxisPlan> plans;
  for (const AxisSource& s : src) {
    if (!s.scale.has_value() || (IsTfCrop(p) && !s.roi_start.has_value())) {
      planned = false;
      break;
    }
    std::optional<AxisPlan> pl = PlanAxis(p, s);
    if (!pl.has_value()) {
      planned = false;
      break;
    }
    plans.push_back(*pl);
  }
  if (planned) return LowerPlanned(L, p, x, src, plans);
  return LowerOneHot(L, p, x, src, scales.operand, roi.operand);
}

}  // namespace

void AddResizeLowerings(LowerTable& t) {
  t["Resize"] = LowerResize;
  t["Upsample"] = LowerResize;
}

}  // namespace kiln::lowering::internal
