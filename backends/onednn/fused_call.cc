// Shape rules, validation and the printable form of a FusedCall.
#include "backends/onednn/fused_call.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"

namespace kiln::onednn {
namespace {

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
}

bool Uniform(const std::vector<int64_t>& v) {
  return v.empty() || AllEqual(v, v[0]);
}

// "1" for {1,1}, "2x1" otherwise.
std::string Compact(const std::vector<int64_t>& v) {
  if (!v.empty() && Uniform(v)) return absl::StrCat(v[0]);
  return absl::StrJoin(v, "x");
}

std::string FormatFloat(float f) { return absl::StrCat(f); }

absl::Status Error(const FusedCall& call, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("oneDNN call ", call.ToString(), ": ", what));
}

const char* PostOpName(PostOpKind kind) {
  switch (kind) {
    case PostOpKind::kRelu: return "relu";
    case PostOpKind::kLeakyRelu: return "leaky_relu";
    case PostOpKind::kElu: return "elu";
    case PostOpKind::kGeluErf: return "gelu_erf";
    case PostOpKind::kGeluTanh: return "gelu_tanh";
    case PostOpKind::kSwish: return "swish";
    case PostOpKind::kSigmoid: return "sigmoid";
    case PostOpKind::kTanh: return "tanh";
    case PostOpKind::kHardSwish: return "hardswish";
    case PostOpKind::kHardSigmoid: return "hardsigmoid";
    case PostOpKind::kClip: return "clip";
    case PostOpKind::kLinear: return "linear";
    case PostOpKind::kAdd: return "add";
    case PostOpKind::kSub: return "sub";
    case PostOpKind::kMul: return "mul";
    case PostOpKind::kSum: return "sum";
  }
  return "?";
}

std::string ShapeX(const ir::Shape& shape) {
  return shape.empty() ? "scalar" : absl::StrJoin(shape, "x");
}

absl::Status CheckSpec(const FusedCall& call, const TensorSpec& spec,
                       const char* role) {
  if (spec.dtype == ir::DType::kInvalid) {
    return Error(call, absl::StrCat(role, " has no dtype"));
  }
  for (int64_t d : spec.shape) {
    if (d <= 0) {
      return Error(call, absl::StrCat(role, " shape ", ir::ShapeToString(spec.shape),
                                      " must have static positive dims"));
    }
  }
  if (ir::NumElements(spec.shape) < 0) {
    return Error(call, absl::StrCat(role, " shape ", ir::ShapeToString(spec.shape),
                                    " is too large"));
  }
  if (!spec.strides.empty()) {
    if (spec.strides.size() != spec.shape.size()) {
      return Error(call, absl::StrCat(role, " has ", spec.strides.size(),
                                      " strides for rank ", spec.shape.size()));
    }
    for (int64_t s : spec.strides) {
      if (s < 0) {
        return Error(call, absl::StrCat(role, " has a negative stride"));
      }
    }
  }
  if (spec.channel_block < 0 ||
      (spec.channel_block > 0 && (!spec.strides.empty() || spec.shape.size() < 3 ||
                                  spec.shape.size() > 5))) {
    return Error(call, absl::StrCat(role, " has channel block ", spec.channel_block,
                                    ": blocked layouts are for rank 3-5 tensors "
                                    "without strides"));
  }
  return absl::OkStatus();
}

// True when `operand` broadcasts to `dst` (right-aligned) without changing it.
bool BroadcastsTo(const ir::Shape& operand, const ir::Shape& dst) {
  if (operand.size() > dst.size()) return false;
  const size_t offset = dst.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != 1 && operand[i] != dst[offset + i]) return false;
  }
  return true;
}

// One output length of a forward window along a dim.
absl::StatusOr<int64_t> ConvOutLength(const FusedCall& call, int64_t in,
                                      int64_t k, int64_t s, int64_t d,
                                      int64_t pb, int64_t pe) {
  const int64_t window = (k - 1) * d + 1;
  const int64_t span = in + pb + pe - window;
  if (span < 0) {
    return Error(call, absl::StrCat("window ", window, " is larger than padded input ",
                                    in + pb + pe));
  }
  return span / s + 1;
}

// The dtypes and parameters of an integer call (IntegerCall). Which dtypes
// other calls take is OneDnnCall's business (it runs f32 only).
absl::Status ValidateInteger(const FusedCall& call) {
  using ir::DType;
  if (!call.integer.has_value()) return absl::OkStatus();
  const IntegerCall& q = *call.integer;
  if (call.src.dtype != DType::kU8 && call.src.dtype != DType::kI8) {
    return Error(call, "integer call src must be u8 or s8");
  }
  if (call.weights.dtype != DType::kI8) return Error(call, "integer call weights must be s8");
  const DType d = call.dst.dtype;
  if (d != DType::kI32 && d != DType::kU8 && d != DType::kI8 && d != DType::kF32) {
    return Error(call, "integer call dst must be s32, u8, s8 or f32");
  }
  if (call.bias.has_value() && call.bias->dtype != DType::kI32 &&
      call.bias->dtype != DType::kF32) {
    return Error(call, "integer call bias must be s32 or f32");
  }
  const int64_t lo = call.src.dtype == DType::kU8 ? 0 : -128;
  if (q.src_zero_point < lo || q.src_zero_point > lo + 255) {
    return Error(call, absl::StrCat("src zero point ", q.src_zero_point,
                                    " is outside the src type's range"));
  }
  if (q.weights_zero_point < -128 || q.weights_zero_point > 127) {
    return Error(call, absl::StrCat("weights zero point ", q.weights_zero_point,
                                    " is outside s8's range"));
  }
  if (d == DType::kI32 && (!q.scales.empty() || q.dst_zero_point != 0)) {
    return Error(call, "an s32 dst takes no scales or zero point");
  }
  if (d == DType::kU8 || d == DType::kI8) {
    const int64_t dlo = d == DType::kU8 ? 0 : -128;
    if (q.dst_zero_point < dlo || q.dst_zero_point > dlo + 255) {
      return Error(call, absl::StrCat("dst zero point ", q.dst_zero_point,
                                      " is outside the dst type's range"));
    }
  } else if (q.dst_zero_point != 0) {
    return Error(call, "only a u8/s8 dst has a zero point");
  }
  const ir::Shape& dst = call.dst.shape;
  const int64_t channels = call.kind == CallKind::kConv || call.kind == CallKind::kConvTranspose
                               ? dst[1]
                               : dst.back();
  if (q.scales.size() > 1 && static_cast<int64_t>(q.scales.size()) != channels) {
    return Error(call, absl::StrCat(q.scales.size(), " scales for ", channels,
                                    " output channels"));
  }
  for (float s : q.scales) {
    if (!std::isfinite(s)) return Error(call, "a scale is not finite");
  }
  for (const PostOp& p : call.post_ops) {
    if (p.is_binary() && p.operand.dtype != DType::kF32) {
      return Error(call, "binary post-op operands of an integer call must be f32");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> TensorSpec::EffectiveStrides() const {
  return strides.empty() ? ir::RowMajorStrides(shape) : strides;
}

std::vector<int64_t> TransposedLastTwoStrides(const ir::Shape& logical_shape) {
  std::vector<int64_t> strides = ir::RowMajorStrides(logical_shape);
  const size_t r = logical_shape.size();
  if (r < 2) return strides;
  strides[r - 1] = logical_shape[r - 2];
  strides[r - 2] = 1;
  return strides;
}

std::vector<int64_t> ChannelsLastStrides(const ir::Shape& logical_shape) {
  const size_t r = logical_shape.size();
  std::vector<int64_t> strides(r, 1);
  if (r < 3) return ir::RowMajorStrides(logical_shape);
  // Memory order: N, spatial..., C.
  int64_t s = logical_shape[1];
  for (size_t i = r - 1; i >= 2; --i) {
    strides[i] = s;
    s *= logical_shape[i];
  }
  strides[1] = 1;
  strides[0] = s;
  return strides;
}

bool PostOp::is_binary() const {
  return kind == PostOpKind::kAdd || kind == PostOpKind::kSub ||
         kind == PostOpKind::kMul;
}

std::string PostOp::ToString() const {
  const char* name = PostOpName(kind);
  switch (kind) {
    case PostOpKind::kLeakyRelu:
    case PostOpKind::kElu:
      return absl::StrCat(name, "(", FormatFloat(alpha), ")");
    case PostOpKind::kSwish:
      if (alpha == 1.0f) return name;
      return absl::StrCat(name, "(", FormatFloat(alpha), ")");
    case PostOpKind::kClip:
      if (alpha == 0.0f && beta == 6.0f) return "relu6";
      return absl::StrCat(name, "(", FormatFloat(alpha), ",", FormatFloat(beta), ")");
    case PostOpKind::kHardSigmoid:
    case PostOpKind::kLinear:
      return absl::StrCat(name, "(", FormatFloat(alpha), ",", FormatFloat(beta), ")");
    case PostOpKind::kAdd:
    case PostOpKind::kSub:
    case PostOpKind::kMul:
      return absl::StrCat(name, "[", ShapeX(operand.shape), "]");
    case PostOpKind::kSum:
      if (alpha == 1.0f) return name;
      return absl::StrCat(name, "(", FormatFloat(alpha), ")");
    default:
      return name;
  }
}

std::string FusedCall::ToString() const {
  std::string s;
  const ir::Shape& w = weights.shape;
  switch (kind) {
    case CallKind::kConv:
    case CallKind::kConvTranspose: {
      s = kind == CallKind::kConv ? "conv[" : "conv_transpose[";
      const ir::Shape kernel(w.size() > 2 ? w.begin() + 2 : w.end(), w.end());
      absl::StrAppend(&s, kernel.empty() ? "?" : absl::StrJoin(kernel, "x"));
      absl::StrAppend(&s, " s", conv.strides.empty() ? "1" : Compact(conv.strides));
      absl::StrAppend(&s, " g", conv.groups);
      if (!conv.dilations.empty() && !AllEqual(conv.dilations, 1)) {
        absl::StrAppend(&s, " d", Compact(conv.dilations));
      }
      if (!AllEqual(conv.pads_begin, 0) || !AllEqual(conv.pads_end, 0)) {
        if (conv.pads_begin == conv.pads_end && Uniform(conv.pads_begin)) {
          absl::StrAppend(&s, " p", conv.pads_begin[0]);
        } else {
          absl::StrAppend(&s, " p", absl::StrJoin(conv.pads_begin, ","), "/",
                          absl::StrJoin(conv.pads_end, ","));
        }
      }
      if (!AllEqual(conv.output_padding, 0)) {
        absl::StrAppend(&s, " op", Compact(conv.output_padding));
      }
      absl::StrAppend(&s, "]");
      break;
    }
    case CallKind::kMatMul: {
      const ir::Shape& a = src.shape;
      s = "matmul[";
      if (a.size() >= 2 && w.size() >= 2) {
        int64_t batch = 1;
        for (int64_t d : dst.shape.size() > 2
                             ? ir::Shape(dst.shape.begin(), dst.shape.end() - 2)
                             : ir::Shape{}) {
          batch *= d;
        }
        if (batch > 1) absl::StrAppend(&s, batch, "*");
        absl::StrAppend(&s, a[a.size() - 2], "x", a[a.size() - 1], "x",
                        w[w.size() - 1]);
        if (!src.strides.empty() && src.strides == TransposedLastTwoStrides(a)) {
          absl::StrAppend(&s, " tA");
        }
        if (!weights.strides.empty() &&
            weights.strides == TransposedLastTwoStrides(w)) {
          absl::StrAppend(&s, " tB");
        }
      }
      absl::StrAppend(&s, "]");
      break;
    }
    case CallKind::kInnerProduct:
      s = "linear[";
      if (w.size() == 2) absl::StrAppend(&s, w[1], "->", w[0]);
      absl::StrAppend(&s, "]");
      break;
  }
  if (integer.has_value() && !s.empty() && s.back() == ']') {
    auto short_name = [](ir::DType t) {
      switch (t) {
        case ir::DType::kU8: return "u8";
        case ir::DType::kI8: return "s8";
        case ir::DType::kI32: return "s32";
        case ir::DType::kF32: return "f32";
        default: return "?";
      }
    };
    s.insert(s.size() - 1, absl::StrCat(" ", short_name(src.dtype),
                                        short_name(weights.dtype), "->",
                                        short_name(dst.dtype),
                                        integer->runtime_src_zero_point ? " zp:run" : ""));
  }
  if (bias.has_value()) absl::StrAppend(&s, "+bias");
  for (const PostOp& p : post_ops) absl::StrAppend(&s, "+", p.ToString());
  return s;
}

std::vector<int> FusedCall::BinaryPostOpIndices() const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(post_ops.size()); ++i) {
    if (post_ops[i].is_binary()) out.push_back(i);
  }
  return out;
}

bool FusedCall::has_sum() const {
  return std::any_of(post_ops.begin(), post_ops.end(), [](const PostOp& p) {
    return p.kind == PostOpKind::kSum;
  });
}

absl::StatusOr<ConvParams> NormalizeConvParams(const ConvParams& params,
                                               int spatial_rank) {
  ConvParams out = params;
  auto fill = [spatial_rank](std::vector<int64_t>& v, int64_t def,
                             const char* name) -> absl::Status {
    if (v.empty()) v.assign(spatial_rank, def);
    if (static_cast<int>(v.size()) != spatial_rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " has ", v.size(), " entries for ", spatial_rank,
          " spatial dims"));
    }
    return absl::OkStatus();
  };
  KILN_RETURN_IF_ERROR(fill(out.strides, 1, "strides"));
  KILN_RETURN_IF_ERROR(fill(out.dilations, 1, "dilations"));
  KILN_RETURN_IF_ERROR(fill(out.pads_begin, 0, "pads_begin"));
  KILN_RETURN_IF_ERROR(fill(out.pads_end, 0, "pads_end"));
  KILN_RETURN_IF_ERROR(fill(out.output_padding, 0, "output_padding"));
  for (int i = 0; i < spatial_rank; ++i) {
    if (out.strides[i] < 1 || out.dilations[i] < 1) {
      return absl::InvalidArgumentError("strides and dilations must be >= 1");
    }
    if (out.pads_begin[i] < 0 || out.pads_end[i] < 0 || out.output_padding[i] < 0) {
      return absl::InvalidArgumentError("pads must be >= 0");
    }
  }
  if (out.groups < 1) {
    return absl::InvalidArgumentError(absl::StrCat("groups ", out.groups, " must be >= 1"));
  }
  return out;
}

absl::StatusOr<ir::Shape> ComputeDstShape(const FusedCall& call) {
  const ir::Shape& x = call.src.shape;
  const ir::Shape& w = call.weights.shape;
  switch (call.kind) {
    case CallKind::kConv:
    case CallKind::kConvTranspose: {
      if (x.size() < 3 || x.size() > 5) {
        return Error(call, absl::StrCat("src rank ", x.size(),
                                        " is not 3, 4 or 5 (N, C, spatial...)"));
      }
      if (w.size() != x.size()) {
        return Error(call, absl::StrCat("weights rank ", w.size(),
                                        " differs from src rank ", x.size()));
      }
      const int spatial = static_cast<int>(x.size()) - 2;
      absl::StatusOr<ConvParams> p = NormalizeConvParams(call.conv, spatial);
      if (!p.ok()) return Error(call, std::string(p.status().message()));
      const int64_t g = p->groups;
      int64_t oc;
      if (call.kind == CallKind::kConv) {
        if (w[1] * g != x[1] || w[0] % g != 0) {
          return Error(call, absl::StrCat("weights ", ir::ShapeToString(w),
                                          " with ", g, " groups do not match ",
                                          x[1], " input channels"));
        }
        oc = w[0];
      } else {
        if (w[0] != x[1] || x[1] % g != 0) {
          return Error(call, absl::StrCat("weights ", ir::ShapeToString(w),
                                          " with ", g, " groups do not match ",
                                          x[1], " input channels"));
        }
        oc = w[1] * g;
      }
      ir::Shape out = {x[0], oc};
      for (int i = 0; i < spatial; ++i) {
        const int64_t k = w[2 + i], s = p->strides[i], d = p->dilations[i];
        const int64_t pb = p->pads_begin[i], pe = p->pads_end[i];
        if (call.kind == CallKind::kConv) {
          KILN_ASSIGN_OR_RETURN(int64_t len,
                                ConvOutLength(call, x[2 + i], k, s, d, pb, pe));
          out.push_back(len);
        } else {
          const int64_t len = s * (x[2 + i] - 1) + p->output_padding[i] +
                              (k - 1) * d + 1 - pb - pe;
          if (len < 1) {
            return Error(call, "pads leave an empty conv_transpose output");
          }
          out.push_back(len);
        }
      }
      return out;
    }
    case CallKind::kMatMul: {
      if (x.size() < 2 || w.size() < 2) {
        return Error(call, "matmul operands need rank >= 2 (reshape 1-D ones)");
      }
      const int64_t k = x[x.size() - 1];
      if (w[w.size() - 2] != k) {
        return Error(call, absl::StrCat("inner dims differ: src ",
                                        ir::ShapeToString(x), ", weights ",
                                        ir::ShapeToString(w)));
      }
      absl::StatusOr<ir::Shape> batch = ir::BroadcastShapes(
          absl::MakeConstSpan(x).subspan(0, x.size() - 2),
          absl::MakeConstSpan(w).subspan(0, w.size() - 2));
      if (!batch.ok()) return Error(call, "batch dims do not broadcast");
      ir::Shape out = *batch;
      out.push_back(x[x.size() - 2]);
      out.push_back(w[w.size() - 1]);
      return out;
    }
    case CallKind::kInnerProduct:
      if (x.size() != 2 || w.size() != 2) {
        return Error(call, "linear needs src [N, IC] and weights [OC, IC]");
      }
      if (w[1] != x[1]) {
        return Error(call, absl::StrCat("weights ", ir::ShapeToString(w),
                                        " do not match src ", ir::ShapeToString(x)));
      }
      return ir::Shape{x[0], w[0]};
  }
  return kiln::InternalError("unknown CallKind");
}

absl::Status Validate(const FusedCall& call) {
  KILN_RETURN_IF_ERROR(CheckSpec(call, call.src, "src"));
  KILN_RETURN_IF_ERROR(CheckSpec(call, call.weights, "weights"));
  KILN_RETURN_IF_ERROR(CheckSpec(call, call.dst, "dst"));
  KILN_ASSIGN_OR_RETURN(ir::Shape expected, ComputeDstShape(call));
  if (expected != call.dst.shape) {
    return Error(call, absl::StrCat("dst shape ", ir::ShapeToString(call.dst.shape),
                                    " should be ", ir::ShapeToString(expected)));
  }
  const ir::Shape& dst = call.dst.shape;
  if (call.bias.has_value()) {
    KILN_RETURN_IF_ERROR(CheckSpec(call, *call.bias, "bias"));
    const ir::Shape& b = call.bias->shape;
    if (call.kind == CallKind::kMatMul) {
      if (!BroadcastsTo(b, dst)) {
        return Error(call, absl::StrCat("bias ", ir::ShapeToString(b),
                                        " does not broadcast to dst ",
                                        ir::ShapeToString(dst)));
      }
    } else if (b.size() != 1 || b[0] != dst[1]) {
      return Error(call, absl::StrCat("bias ", ir::ShapeToString(b), " should be [",
                                      dst[1], "]"));
    }
  }
  KILN_RETURN_IF_ERROR(ValidateInteger(call));
  int sums = 0;
  for (const PostOp& p : call.post_ops) {
    if (p.is_binary()) {
      KILN_RETURN_IF_ERROR(CheckSpec(call, p.operand, "binary post-op operand"));
      if (!BroadcastsTo(p.operand.shape, dst)) {
        return Error(call, absl::StrCat("post-op ", p.ToString(),
                                        ": operand does not broadcast to dst ",
                                        ir::ShapeToString(dst)));
      }
    }
    if (!std::isfinite(p.alpha) || !std::isfinite(p.beta)) {
      return Error(call, absl::StrCat("post-op ", p.ToString(),
                                      " has a non-finite parameter"));
    }
    if (p.kind == PostOpKind::kClip && p.alpha > p.beta) {
      return Error(call, absl::StrCat("post-op ", p.ToString(), ": min > max"));
    }
    if (p.kind == PostOpKind::kSum) ++sums;
  }
  if (sums > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "oneDNN call ", call.ToString(), ": more than one sum post-op"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::onednn
