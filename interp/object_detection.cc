// File: interp/object_detection.cc — reference kernels of ONNX's object_detection
// family (onnx/defs/object_detection): RoiAlign, NonMaxSuppression.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::Shape;
using Outputs = std::vector<Tensor>;

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

}  // namespace

void RegisterObjectDetectionOps(OpRegistry* r) {
  r->Register("RoiAlign", RoiAlign);
  r->Register("NonMaxSuppression", NonMaxSuppression);
}

}  // namespace kiln::interp
