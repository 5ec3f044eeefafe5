// File: lowering/object_detection.cc — lowerings of ONNX's object_detection
// family (onnx/defs/object_detection): RoiAlign as a loop kernel;
// NonMaxSuppression is refused (its output shape depends on the input values).
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"
#include "lowering/kernel_util.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

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

void AddObjectDetectionLowerings(LowerTable& t) {
  t.Add("RoiAlign", LowerRoiAlign);
  t.Add("NonMaxSuppression", RefuseDataDependentShape);
}

}  // namespace kiln::lowering::internal
