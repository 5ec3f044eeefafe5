// OneDnnCall: maps a FusedCall onto a oneDNN 2.6 primitive descriptor with a
// post-op chain, prepacks the constant weights, and executes on raw pointers.
#include "backends/onednn/onednn_call.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/onednn/engine.h"
#include "backends/onednn/winograd.h"
#include "ir/status_macros.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
using DT = memory::data_type;

const char* DnnlStatusName(dnnl_status_t s) {
  switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown status";
  }
}

// A dnnl::error during creation: oneDNN refusing the combination means the
// caller should keep the op in the loop IR.
absl::Status CreateError(const FusedCall& call, const dnnl::error& e) {
  const std::string msg =
      absl::StrCat("oneDNN cannot run ", call.ToString(), ": ", e.what(), " (",
                   DnnlStatusName(e.status), ")");
  switch (e.status) {
    case dnnl_unimplemented:
    case dnnl_invalid_arguments:
      return absl::UnimplementedError(msg);
    case dnnl_out_of_memory:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

Dims ToDims(const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); }

// oneDNN's type for the dtypes calls take (FusedCall validates them).
DT DnnlType(ir::DType t) {
  switch (t) {
    case ir::DType::kU8: return DT::u8;
    case ir::DType::kI8: return DT::s8;
    case ir::DType::kI32: return DT::s32;
    case ir::DType::kBF16: return DT::bf16;
    default: return DT::f32;
  }
}

// `shape`/`strides` left-padded with 1-sized dims to `rank`.
void PadToRank(size_t rank, std::vector<int64_t>* shape,
               std::vector<int64_t>* strides) {
  if (shape->size() >= rank) return;
  const int64_t outer =
      shape->empty() ? 1 : (*strides)[0] * std::max<int64_t>((*shape)[0], 1);
  const size_t missing = rank - shape->size();
  shape->insert(shape->begin(), missing, 1);
  strides->insert(strides->begin(), missing, std::max<int64_t>(outer, 1));
}

// oneDNN's tag for N C spatial... activations blocked by `block` channels
// (nChw8c...); undef when oneDNN has no such tag.
Tag ChannelBlockedTag(size_t rank, int64_t block) {
  static const Tag kTags[3][3] = {{Tag::nCw4c, Tag::nCw8c, Tag::nCw16c},
                                  {Tag::nChw4c, Tag::nChw8c, Tag::nChw16c},
                                  {Tag::nCdhw4c, Tag::nCdhw8c, Tag::nCdhw16c}};
  const int b = block == 4 ? 0 : block == 8 ? 1 : block == 16 ? 2 : -1;
  if (rank < 3 || rank > 5 || b < 0) return Tag::undef;
  return kTags[rank - 3][b];
}

// N spatial... C for an N C spatial... activation of `rank` (nwc, nhwc,
// ndhwc); undef for other ranks.
Tag ChannelsLastTag(size_t rank) {
  switch (rank) {
    case 3: return Tag::nwc;
    case 4: return Tag::nhwc;
    case 5: return Tag::ndhwc;
    default: return Tag::undef;
  }
}

// The channel block of a oneDNN activation descriptor laid out as N C
// spatial... with one inner block of channels (nChw8c -> 8); 0 otherwise.
int64_t ChannelBlockOf(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims < 3) return 0;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  if (b.inner_nblks != 1 || b.inner_idxs[0] != 1) return 0;
  for (int i = 0; i + 1 < d.ndims; ++i) {
    if (b.strides[i] < b.strides[i + 1]) return 0;
  }
  const memory::desc like(md.dims(), md.data_type(),
                          ChannelBlockedTag(static_cast<size_t>(d.ndims), b.inner_blks[0]));
  return like == md ? b.inner_blks[0] : 0;
}

// Whether oneDNN implementation `impl` is one of its optimized direct
// kernels: "jit:...", "brgconv:..." / "brg:..." (brgemm) and
// "brdgmm_dw:..." (the AVX-512 depthwise brgemm), not "gemm:..." / "x64:gemm"
// (im2col + sgemm) or "ref:...".
bool IsOptimizedImpl(absl::string_view impl) {
  return absl::StartsWith(impl, "jit") || absl::StartsWith(impl, "brg") ||
         absl::StartsWith(impl, "brdgmm");
}

// Whether `a` and `b` put every element at the same byte: equal dims, type,
// inner blocks and padding, strides that differ only on dims of size 1 (NCHW
// and NHWC of an N x C x 1 x 1 tensor). Then no reorder is needed between
// them, only the primitive's own descriptor on the caller's pointer.
bool SamePhysicalLayout(const memory::desc& a, const memory::desc& b) {
  if (a == b) return true;
  const dnnl_memory_desc_t& x = a.data;
  const dnnl_memory_desc_t& y = b.data;
  if (x.format_kind != dnnl_blocked || y.format_kind != dnnl_blocked ||
      x.ndims != y.ndims || x.data_type != y.data_type || x.offset0 != y.offset0 ||
      x.extra.flags != 0 || y.extra.flags != 0) {
    return false;
  }
  const dnnl_blocking_desc_t& bx = x.format_desc.blocking;
  const dnnl_blocking_desc_t& by = y.format_desc.blocking;
  if (bx.inner_nblks != by.inner_nblks) return false;
  for (int i = 0; i < bx.inner_nblks; ++i) {
    if (bx.inner_blks[i] != by.inner_blks[i] || bx.inner_idxs[i] != by.inner_idxs[i]) {
      return false;
    }
  }
  for (int i = 0; i < x.ndims; ++i) {
    if (x.dims[i] != y.dims[i] || x.padded_dims[i] != y.padded_dims[i] ||
        x.padded_offsets[i] != y.padded_offsets[i]) {
      return false;
    }
    if (x.padded_dims[i] > 1 && bx.strides[i] != by.strides[i]) return false;
  }
  return a.get_size() == b.get_size();
}

// Whether `spec` is an activation in one channel block of at least its
// channel count, stored channels-last (NHWC, the spatial positions b
// apart): an integer one (oneDNN's int8 convs run optimized on NHWC only,
// not on nChw16c), or an f32 one marked channels_last (propagate-layout's
// kChannelsLast, where oneDNN's brgconv takes NHWC). Other f32 specs keep
// their blocked tag whatever the block.
bool ChannelsLastSpec(const TensorSpec& spec) {
  return spec.channel_block > 0 &&
         (spec.dtype != ir::DType::kF32 || spec.channels_last) &&
         spec.shape.size() >= 3 && spec.channel_block >= spec.shape[1];
}

memory::desc StridedDesc(const TensorSpec& spec, size_t rank = 0) {
  if (ChannelsLastSpec(spec)) {
    const int64_t b = spec.channel_block;
    int64_t inner = 1;
    for (size_t d = 2; d < spec.shape.size(); ++d) inner *= spec.shape[d];
    std::vector<int64_t> strides(spec.shape.size(), 1);
    strides[0] = inner * b;
    int64_t step = b;
    for (size_t d = spec.shape.size(); d-- > 2;) {
      strides[d] = step;
      step *= spec.shape[d];
    }
    return memory::desc(ToDims(spec.shape), DnnlType(spec.dtype), ToDims(strides));
  }
  if (spec.channel_block > 0) {
    const Tag tag = ChannelBlockedTag(spec.shape.size(), spec.channel_block);
    if (tag == Tag::undef) {
      throw dnnl::error(dnnl_unimplemented, "no oneDNN tag for this channel block");
    }
    return memory::desc(ToDims(spec.shape), DnnlType(spec.dtype), tag);
  }
  std::vector<int64_t> shape = spec.shape;
  std::vector<int64_t> strides = spec.EffectiveStrides();
  PadToRank(rank, &shape, &strides);
  return memory::desc(ToDims(shape), DnnlType(spec.dtype), ToDims(strides));
}

memory::desc AnyDesc(const memory::desc& like) {
  return memory::desc(like.dims(), like.data_type(), Tag::any);
}

// `md` with its elements of type `type` (same dims, same layout).
memory::desc WithType(const memory::desc& md, memory::data_type type) {
  memory::desc out = md;
  out.data.data_type = static_cast<dnnl_data_type_t>(type);
  return out;
}

// A dense row-major descriptor with `like`'s dims.
memory::desc DenseRowMajor(const memory::desc& like) {
  const memory::dims dims = like.dims();
  memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  }
  return memory::desc(dims, like.data_type(), strides);
}

// A dense descriptor with `like`'s dims whose last two dims are stored
// transposed: [..., K, N] laid out as [..., N, K].
memory::desc TransposedLastTwo(const memory::desc& like) {
  const memory::dims dims = like.dims();
  const size_t r = dims.size();
  if (r < 2) return DenseRowMajor(like);
  memory::dims strides(r, 1);
  strides[r - 2] = 1;
  strides[r - 1] = std::max<int64_t>(dims[r - 2], 1);
  int64_t outer = std::max<int64_t>(dims[r - 2], 1) * std::max<int64_t>(dims[r - 1], 1);
  for (int i = static_cast<int>(r) - 3; i >= 0; --i) {
    strides[i] = outer;
    outer *= std::max<int64_t>(dims[i], 1);
  }
  return memory::desc(dims, like.data_type(), strides);
}

// The oneDNN weights descriptor over the model's weights buffer. oneDNN
// wants conv weights as [OC, IC, k...] or [G, OC/G, IC/G, k...]; ONNX's
// ConvTranspose stores [IC, OC/G, k...]: both are views with strides.
memory::desc WeightsDesc(const FusedCall& call, int64_t groups) {
  const ir::Shape& w = call.weights.shape;
  const std::vector<int64_t> s = call.weights.EffectiveStrides();
  switch (call.kind) {
    case CallKind::kConv: {
      if (groups == 1) return StridedDesc(call.weights);
      std::vector<int64_t> dims = {groups, w[0] / groups};
      std::vector<int64_t> strides = {(w[0] / groups) * s[0], s[0]};
      for (size_t i = 1; i < w.size(); ++i) {
        dims.push_back(w[i]);
        strides.push_back(s[i]);
      }
      return memory::desc(ToDims(dims), DnnlType(call.weights.dtype), ToDims(strides));
    }
    case CallKind::kConvTranspose: {
      // w = [IC, OC/G, k...]
      std::vector<int64_t> dims, strides;
      if (groups == 1) {
        dims = {w[1], w[0]};
        strides = {s[1], s[0]};
      } else {
        dims = {groups, w[1], w[0] / groups};
        strides = {(w[0] / groups) * s[0], s[1], s[0]};
      }
      for (size_t i = 2; i < w.size(); ++i) {
        dims.push_back(w[i]);
        strides.push_back(s[i]);
      }
      return memory::desc(ToDims(dims), DnnlType(call.weights.dtype), ToDims(strides));
    }
    case CallKind::kMatMul:
      return StridedDesc(call.weights, call.dst.shape.size());
    case CallKind::kInnerProduct:
      return StridedDesc(call.weights);
  }
  return StridedDesc(call.weights);
}

// Dim letters of oneDNN's tag notation for a descriptor of `ndims` dims:
// "goihw" / "oihw" for conv weights, "nchw" for conv activations, "abc..."
// for matmul.
std::string DimLetters(const FusedCall& call, bool is_weights, int ndims,
                       bool as_conv = false) {
  static const char* kSpatial[] = {"", "w", "hw", "dhw"};
  if (as_conv) {
    const std::string base = is_weights ? "oi" : "nc";
    if (ndims == 4) return base + kSpatial[2];
  }
  if (call.kind != CallKind::kMatMul) {
    std::string base = is_weights ? "oi" : "nc";
    if (is_weights && call.kind != CallKind::kInnerProduct && call.conv.groups > 1) {
      base = "goi";
    }
    const int spatial = ndims - static_cast<int>(base.size());
    if (spatial >= 0 && spatial <= 3) return base + kSpatial[spatial];
  }
  std::string letters;
  for (int i = 0; i < ndims; ++i) letters.push_back(static_cast<char>('a' + i));
  return letters;
}

// "OIhw16i16o", "nchw", "acdb", "BA16a64b": outer dims by decreasing stride
// (upper case when also blocked), then the inner blocks.
std::string LayoutString(const memory::desc& md, const std::string& letters) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked) return "opaque";
  const int n = d.ndims;
  if (n == 0 || static_cast<int>(letters.size()) < n) return "opaque";
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return b.strides[x] > b.strides[y];
  });
  std::vector<bool> blocked(n, false);
  for (int i = 0; i < b.inner_nblks; ++i) blocked[b.inner_idxs[i]] = true;
  std::string s;
  for (int i : order) {
    s.push_back(blocked[i] ? static_cast<char>(letters[i] - 'a' + 'A')
                           : letters[i]);
  }
  for (int i = 0; i < b.inner_nblks; ++i) {
    absl::StrAppend(&s, b.inner_blks[i]);
    s.push_back(letters[b.inner_idxs[i]]);
  }
  return s;
}

dnnl::algorithm BinaryAlgorithm(PostOpKind kind) {
  switch (kind) {
    case PostOpKind::kSub: return dnnl::algorithm::binary_sub;
    case PostOpKind::kMul: return dnnl::algorithm::binary_mul;
    default: return dnnl::algorithm::binary_add;
  }
}

// Appends the oneDNN post-ops of `call` to `ops`. `binary_args` receives,
// per binary post-op of the call, the oneDNN post-op index of its operand.
// `operand_mds`, when given, holds the descriptor of each binary operand (in
// call order) in the primitive's dims (a linear layer run as a 1x1 conv).
void BuildPostOps(const FusedCall& call, dnnl::post_ops* ops,
                  std::vector<std::pair<int, memory::desc>>* binary_args,
                  const std::vector<memory::desc>* operand_mds = nullptr) {
  const size_t rank = call.dst.shape.size();
  auto eltwise = [ops](dnnl::algorithm a, float alpha, float beta) {
    ops->append_eltwise(1.0f, a, alpha, beta);
  };
  using A = dnnl::algorithm;
  for (const PostOp& p : call.post_ops) {
    switch (p.kind) {
      case PostOpKind::kRelu: eltwise(A::eltwise_relu, 0, 0); break;
      case PostOpKind::kLeakyRelu: eltwise(A::eltwise_relu, p.alpha, 0); break;
      case PostOpKind::kElu: eltwise(A::eltwise_elu, p.alpha, 0); break;
      case PostOpKind::kGeluErf: eltwise(A::eltwise_gelu_erf, 0, 0); break;
      case PostOpKind::kGeluTanh: eltwise(A::eltwise_gelu_tanh, 0, 0); break;
      case PostOpKind::kSwish: eltwise(A::eltwise_swish, p.alpha, 0); break;
      case PostOpKind::kSigmoid: eltwise(A::eltwise_logistic, 0, 0); break;
      case PostOpKind::kTanh: eltwise(A::eltwise_tanh, 0, 0); break;
      case PostOpKind::kHardSwish: eltwise(A::eltwise_hardswish, 0, 0); break;
      case PostOpKind::kHardSigmoid:
        // oneDNN 2.6 has no hardsigmoid: clamp(alpha x + beta, 0, 1).
        eltwise(A::eltwise_linear, p.alpha, p.beta);
        eltwise(A::eltwise_clip, 0.0f, 1.0f);
        break;
      case PostOpKind::kClip: eltwise(A::eltwise_clip, p.alpha, p.beta); break;
      case PostOpKind::kLinear: eltwise(A::eltwise_linear, p.alpha, p.beta); break;
      case PostOpKind::kAdd:
      case PostOpKind::kSub:
      case PostOpKind::kMul: {
        memory::desc md = operand_mds ? (*operand_mds)[binary_args->size()]
                                      : StridedDesc(p.operand, rank);
        binary_args->emplace_back(ops->len(), md);
        ops->append_binary(BinaryAlgorithm(p.kind), md);
        break;
      }
      case PostOpKind::kSum: ops->append_sum(p.alpha); break;
    }
  }
}

// An f32 call, or an integer call (whose dtypes Validate checked).
absl::Status CheckF32(const FusedCall& call) {
  if (call.integer.has_value()) return absl::OkStatus();
  auto f32 = [](const TensorSpec& s) { return s.dtype == ir::DType::kF32; };
  // Activations stored in bf16 (bf16 mode, docs/decisions/0055): the call
  // reads or writes them as they are, or converts them around an f32 call.
  auto activation = [&](const TensorSpec& s) { return f32(s) || s.dtype == ir::DType::kBF16; };
  bool ok = activation(call.src) && f32(call.weights) && activation(call.dst) &&
            (!call.bias || f32(*call.bias));
  for (const PostOp& p : call.post_ops) ok = ok && (!p.is_binary() || f32(p.operand));
  if (!ok) {
    return absl::UnimplementedError(absl::StrCat(
        "oneDNN call ", call.ToString(), ": only f32 tensors are supported"));
  }
  return absl::OkStatus();
}

// An integer call's zero points and output scales as oneDNN attributes:
// per-tensor values are mask 0, per-channel scales vary along dst dim 1
// (conv, inner product) or the last dst dim (matmul).
void SetIntegerAttrs(const FusedCall& call, dnnl::primitive_attr* attr) {
  if (!call.integer.has_value()) return;
  const IntegerCall& q = *call.integer;
  if (q.runtime_src_zero_point) {
    attr->set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  } else if (q.src_zero_point != 0) {
    attr->set_zero_points(DNNL_ARG_SRC, 0, {q.src_zero_point});
  }
  if (q.weights_zero_point != 0) {
    attr->set_zero_points(DNNL_ARG_WEIGHTS, 0, {q.weights_zero_point});
  }
  if (q.dst_zero_point != 0) attr->set_zero_points(DNNL_ARG_DST, 0, {q.dst_zero_point});
  if (q.scales.size() == 1) {
    attr->set_output_scales(0, q.scales);
  } else if (q.scales.size() > 1) {
    const int channel_dim = call.kind == CallKind::kMatMul
                                ? static_cast<int>(call.dst.shape.size()) - 1
                                : 1;
    attr->set_output_scales(1 << channel_dim, q.scales);
  }
}

// Explicit padding. oneDNN 2.6's direct AVX2 conv kernel refuses left
// padding wider than its register block (an 11x11 conv with pad 5, a 3x39
// one with pad 19, a dilated 3x3 with pad 4), leaving the gemm-based kernel,
// 3-4x slower at small channel counts (benchmarks/results/
// 2026-12-03-vm-amd-avx2-pathologies.md). The same conv without padding on
// a zero-bordered copy of its src is one the direct kernel takes: the call
// copies its src into the interior of a buffer it owns (the border is
// zeroed once and never written) and runs the unpadded conv on it.
bool HasPadding(const FusedCall& call, const ConvParams& conv) {
  if (call.kind != CallKind::kConv || call.integer.has_value()) return false;
  auto positive = [](int64_t p) { return p > 0; };
  return std::any_of(conv.pads_begin.begin(), conv.pads_begin.end(), positive) ||
         std::any_of(conv.pads_end.begin(), conv.pads_end.end(), positive);
}

ConvParams Unpadded(const ConvParams& conv) {
  ConvParams u = conv;
  std::fill(u.pads_begin.begin(), u.pads_begin.end(), 0);
  std::fill(u.pads_end.begin(), u.pads_end.end(), 0);
  return u;
}

// `src` with its spatial dims grown by the conv's padding, layout `any`.
memory::desc PaddedSrcDesc(const memory::desc& src, const ConvParams& conv) {
  Dims dims = src.dims();
  for (size_t i = 0; i < conv.pads_begin.size() && 2 + i < dims.size(); ++i) {
    dims[2 + i] += conv.pads_begin[i] + conv.pads_end[i];
  }
  return memory::desc(dims, src.data_type(), Tag::any);
}

// The call's primitive attributes: its post-ops (binary operands as
// BuildPostOps gives them), a user-managed scratchpad, and an integer call's
// zero points and output scales.
dnnl::primitive_attr CallAttr(const FusedCall& call,
                              std::vector<std::pair<int, memory::desc>>* binary_args,
                              const std::vector<memory::desc>* operand_mds = nullptr) {
  dnnl::post_ops ops;
  BuildPostOps(call, &ops, binary_args, operand_mds);
  // An 8-bit dst: round before oneDNN adds the dst zero point, as ONNX and
  // ONNX Runtime do (oneDNN alone rounds scale * acc + zero point, which
  // differs where that sum rounds in f32).
  const ir::DType dst = call.dst.dtype;
  if (call.integer.has_value() && call.integer->dst_zero_point != 0 &&
      (dst == ir::DType::kU8 || dst == ir::DType::kI8)) {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  SetIntegerAttrs(call, &attr);
  return attr;
}

// Elements a strided spec addresses (max offset + 1).
int64_t Extent(const TensorSpec& spec) {
  const std::vector<int64_t> strides = spec.EffectiveStrides();
  int64_t last = 0;
  for (size_t i = 0; i < spec.shape.size(); ++i) last += (spec.shape[i] - 1) * strides[i];
  return last + 1;
}

absl::Status CheckConstant(const FusedCall& call, const TensorSpec& spec,
                           const ir::Tensor& t, const char* role) {
  const bool shape_ok = spec.strides.empty() ? t.shape() == spec.shape
                                             : t.num_elements() >= Extent(spec);
  if (t.dtype() != spec.dtype || !shape_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oneDNN call ", call.ToString(), ": ", role, " tensor ", t.TypeString(),
        " does not match its description ", ir::DTypeName(spec.dtype),
        ir::ShapeToString(spec.shape)));
  }
  return absl::OkStatus();
}

// A linear layer's row dims [..., M] (all but the last) as one dim: M and
// its stride, ignoring 1-sized dims; nullopt when the rows are not evenly
// strided (e.g. a transposed view).
std::optional<std::pair<int64_t, int64_t>> CollapsedRows(
    const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t rows = 1, stride = 0;
  for (size_t i = shape.size() - 1; i-- > 0;) {
    if (shape[i] == 1) continue;
    if (rows == 1) {
      stride = strides[i];
    } else if (strides[i] != stride * rows) {
      return std::nullopt;
    }
    rows *= shape[i];
  }
  if (rows == 1) stride = strides.back() * shape.back();
  return std::make_pair(rows, std::max<int64_t>(stride, 1));
}

// A linear layer y[..., M, N] = x[..., M, K] w[K, N] (+ bias[N]) (+ post-ops)
// written as the 1x1 convolution it is: batch 1, C = K, spatial M x 1,
// OC = N, over the same buffers (a row-major [M, K] matrix is nhwc
// [1, K, M, 1]). oneDNN 2.6 runs that on its direct jit_1x1 kernel instead
// of the gemm-based matmul / inner product (OneDnnCallOptions::linear_as_conv).
struct ConvForm {
  memory::desc src, weights, dst;
  std::optional<memory::desc> bias;
  std::vector<memory::desc> operands;  // binary post-op operands, call order
  int64_t m = 0;
};

// [1, C, rows, 1] over a [..., rows, C] buffer with the given row stride.
memory::desc RowsAsNhwc(int64_t rows, int64_t row_stride, int64_t channels,
                        int64_t channel_stride) {
  return memory::desc({1, channels, rows, 1}, DT::f32,
                      {rows * row_stride, channel_stride, row_stride, row_stride});
}

// The conv form of a kMatMul with constant 2-D weights or a kInnerProduct;
// nullopt when some operand cannot be expressed in its dims (batched
// weights, strided row dims, a binary operand broadcasting over part of the
// rows, blocked layouts).
std::optional<ConvForm> LinearAsConv(const FusedCall& call) {
  if (call.kind != CallKind::kMatMul && call.kind != CallKind::kInnerProduct) {
    return std::nullopt;
  }
  if (call.src.channel_block > 0 || call.dst.channel_block > 0) return std::nullopt;
  // Integer calls run as the matmul / inner product they are.
  if (call.integer.has_value()) return std::nullopt;
  const std::vector<int64_t> xs = call.src.EffectiveStrides();
  const std::vector<int64_t> ys = call.dst.EffectiveStrides();
  const std::vector<int64_t> ws = call.weights.EffectiveStrides();
  const ir::Shape& w = call.weights.shape;
  const ir::Shape& y = call.dst.shape;
  if (call.src.shape.size() < 2 || y.size() < 2 || w.size() < 2) return std::nullopt;
  // The src's row dims must be the dst's (no broadcast of src over batches).
  if (call.src.shape.size() != y.size()) return std::nullopt;
  for (size_t i = 0; i + 1 < y.size(); ++i) {
    if (call.src.shape[i] != y[i]) return std::nullopt;
  }
  const int64_t k = call.src.shape.back(), n = y.back();
  int64_t w_stride_n = 0, w_stride_k = 0;
  if (call.kind == CallKind::kMatMul) {
    for (size_t i = 0; i + 2 < w.size(); ++i) {
      if (w[i] != 1) return std::nullopt;  // per-batch weights
    }
    w_stride_k = ws[w.size() - 2];
    w_stride_n = ws[w.size() - 1];
  } else {
    w_stride_n = ws[0];
    w_stride_k = ws[1];
  }
  const auto x_rows = CollapsedRows(call.src.shape, xs);
  const auto y_rows = CollapsedRows(y, ys);
  if (!x_rows || !y_rows || x_rows->first != y_rows->first) return std::nullopt;
  ConvForm f;
  f.m = y_rows->first;
  f.src = RowsAsNhwc(f.m, x_rows->second, k, xs.back());
  f.dst = RowsAsNhwc(f.m, y_rows->second, n, ys.back());
  f.weights = memory::desc({n, k, 1, 1}, DT::f32,
                           {w_stride_n, w_stride_k, 1, 1});
  if (call.bias) {
    const ir::Shape& b = call.bias->shape;
    const std::vector<int64_t> bs = call.bias->EffectiveStrides();
    if (b.empty() || b.back() != n) return std::nullopt;  // per-column only
    for (size_t i = 0; i + 1 < b.size(); ++i) {
      if (b[i] != 1) return std::nullopt;
    }
    f.bias = memory::desc({n}, DT::f32, {bs.back()});
  }
  for (const PostOp& p : call.post_ops) {
    if (!p.is_binary()) continue;
    std::vector<int64_t> shape = p.operand.shape;
    std::vector<int64_t> strides = p.operand.EffectiveStrides();
    if (p.operand.channel_block > 0 || shape.size() > y.size()) return std::nullopt;
    PadToRank(y.size(), &shape, &strides);
    const int64_t cols = shape.back();
    if (cols != 1 && cols != n) return std::nullopt;
    bool all_rows_one = true, rows_full = true;
    for (size_t i = 0; i + 1 < y.size(); ++i) {
      all_rows_one = all_rows_one && shape[i] == 1;
      rows_full = rows_full && shape[i] == y[i];
    }
    // One row: laid out like a dst row, which oneDNN's kernels expect of a
    // per-channel operand.
    int64_t rows = 1, row_stride = cols * strides.back();
    if (!all_rows_one) {
      if (!rows_full) return std::nullopt;  // broadcast over part of the rows
      const auto r = CollapsedRows(shape, strides);
      if (!r) return std::nullopt;
      rows = r->first;
      row_stride = r->second;
    }
    f.operands.push_back(RowsAsNhwc(rows, row_stride, cols, strides.back()));
  }
  return f;
}

}  // namespace

namespace {
constexpr std::pair<OneDnnCallOptions::ActivationForm, const char*> kFormNames[] = {
    {OneDnnCallOptions::ActivationForm::kRule, "rule"},
    {OneDnnCallOptions::ActivationForm::kCaller, "caller"},
    {OneDnnCallOptions::ActivationForm::kAny, "any"},
    {OneDnnCallOptions::ActivationForm::kNhwc, "nhwc"},
    {OneDnnCallOptions::ActivationForm::kBlocked8, "blocked8"},
    {OneDnnCallOptions::ActivationForm::kBlocked16, "blocked16"},
};
}  // namespace

const char* ActivationFormName(OneDnnCallOptions::ActivationForm form) {
  for (const auto& [f, name] : kFormNames) {
    if (f == form) return name;
  }
  return "?";
}

absl::StatusOr<OneDnnCallOptions::ActivationForm> ParseActivationForm(
    absl::string_view name) {
  for (const auto& [f, n] : kFormNames) {
    if (name == n) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown library-call activation form '", name,
      "' (rule, caller, any, nhwc, blocked8, blocked16)"));
}

struct OneDnnCall::Impl {
  FusedCall call;
  OneDnnCallOptions options;

  dnnl::primitive primitive;
  std::unordered_map<int, memory> args;
  std::vector<int> binary_arg_keys;  // execution-argument keys, in call order

  // Caller-layout memories whose handles Execute swaps in.
  memory user_src, user_dst, user_weights;
  // When the primitive runs on other activation layouts.
  std::optional<dnnl::reorder> src_in, dst_in, dst_out;
  memory internal_src, internal_dst;
  // What src_in writes: internal_src, or with explicit padding
  // (HasPadding) the interior of internal_src, whose border stays 0.
  memory src_in_target;
  bool explicit_padding = false;
  bool runtime_weights = false;
  // The run-time src zero point (IntegerCall::runtime_src_zero_point):
  // SetSrcZeroPoint writes it here, the primitive reads it at execution.
  int32_t src_zero_point = 0;

  ir::Tensor plain_weights;  // shares the caller's weights when not prepacked
  ir::Tensor bias;           // shares the caller's bias
  memory packed_weights;
  memory scratchpad;

  int64_t prepacked_bytes = 0;
  int64_t scratchpad_bytes = 0;
  std::string weights_layout, src_layout, dst_layout, impl_name;
  int reorders_per_call = 0;
  bool as_conv = false;  // a linear layer run as a 1x1 conv (LinearAsConv)
  bool bf16 = false;     // src and weights in bf16 (OneDnnCallOptions::bf16)

  // Binary operands reordered per call into the layout the primitive reads
  // them in (a blocked dst's, with explicit padding); `index` is the
  // operand's place in Execute's binary_operands.
  struct OperandReorder {
    size_t index = 0;
    memory user, internal;
    dnnl::reorder reorder;
  };
  std::vector<OperandReorder> operand_reorders;
  std::vector<bool> operand_reordered;  // per binary operand

  // kiln's own Winograd conv (winograd.h) where oneDNN has none: it reads
  // winograd_src and writes winograd_out, and `primitive` is then a binary
  // add of the bias (or zeros) with the call's post-ops into the dst.
  std::unique_ptr<WinogradConv> winograd;
  memory winograd_src, winograd_out;
  std::vector<float> zero_bias;
};

OneDnnCall::OneDnnCall(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnCall::~OneDnnCall() = default;

namespace {

// Creates the primitive descriptor for `call` with the given descriptors.
// `winograd`: a forward conv with oneDNN's Winograd algorithm instead of
// the direct one (ignored for other kinds).
dnnl::primitive_desc MakePrimitiveDesc(const FusedCall& call,
                                       const ConvParams& conv,
                                       const memory::desc& src,
                                       const memory::desc& weights,
                                       const memory::desc* bias,
                                       const memory::desc& dst,
                                       const dnnl::primitive_attr& attr,
                                       bool winograd = false) {
  dnnl::engine& engine = CpuEngine();
  const auto inference = dnnl::prop_kind::forward_inference;
  switch (call.kind) {
    case CallKind::kConv:
    case CallKind::kConvTranspose: {
      Dims strides = ToDims(conv.strides);
      Dims dilates, pad_l = ToDims(conv.pads_begin), pad_r;
      for (int64_t d : conv.dilations) dilates.push_back(d - 1);
      for (size_t i = 0; i < conv.pads_end.size(); ++i) {
        const int64_t op =
            call.kind == CallKind::kConvTranspose ? conv.output_padding[i] : 0;
        pad_r.push_back(conv.pads_end[i] - op);
      }
      if (call.kind == CallKind::kConv) {
        using C = dnnl::convolution_forward;
        const auto algo = winograd ? dnnl::algorithm::convolution_winograd
                                   : dnnl::algorithm::convolution_direct;
        C::desc d = bias ? C::desc(inference, algo, src, weights, *bias, dst,
                                   strides, dilates, pad_l, pad_r)
                         : C::desc(inference, algo, src, weights, dst, strides,
                                   dilates, pad_l, pad_r);
        return C::primitive_desc(d, attr, engine);
      }
      using D = dnnl::deconvolution_forward;
      const auto algo = dnnl::algorithm::deconvolution_direct;
      D::desc d = bias ? D::desc(inference, algo, src, weights, *bias, dst,
                                 strides, dilates, pad_l, pad_r)
                       : D::desc(inference, algo, src, weights, dst, strides,
                                 dilates, pad_l, pad_r);
      return D::primitive_desc(d, attr, engine);
    }
    case CallKind::kMatMul: {
      using M = dnnl::matmul;
      M::desc d = bias ? M::desc(src, weights, *bias, dst)
                       : M::desc(src, weights, dst);
      return M::primitive_desc(d, attr, engine);
    }
    case CallKind::kInnerProduct: {
      using I = dnnl::inner_product_forward;
      I::desc d = bias ? I::desc(inference, src, weights, *bias, dst)
                       : I::desc(inference, src, weights, dst);
      return I::primitive_desc(d, attr, engine);
    }
  }
  throw dnnl::error(dnnl_unimplemented, "unknown call kind");
}

}  // namespace

namespace {

// `spec` padded to `rank` with leading 1s, its dims [0, rank - 1) merged into
// one ([rows, last]); nullopt when its strides do not nest.
std::optional<TensorSpec> MergeLeadingDims(const TensorSpec& spec, size_t rank) {
  if (spec.channel_block > 0 || spec.shape.size() > rank || rank < 2) return std::nullopt;
  ir::Shape shape = spec.shape;
  std::vector<int64_t> strides = spec.EffectiveStrides();
  PadToRank(rank, &shape, &strides);
  int64_t rows = 1, row_stride = 0, inner_stride = 0, inner_extent = 1;
  bool first = true;
  for (int i = static_cast<int>(rank) - 2; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (first) {
      row_stride = strides[i];
      first = false;
    } else if (strides[i] != inner_stride * inner_extent) {
      return std::nullopt;
    }
    inner_stride = strides[i];
    inner_extent = shape[i];
    rows *= shape[i];
  }
  const int64_t cols = shape[rank - 1], col_stride = strides[rank - 1];
  if (first) row_stride = std::max<int64_t>(cols * col_stride, 1);
  TensorSpec out;
  out.dtype = spec.dtype;
  out.shape = {rows, cols};
  if (!(col_stride == 1 && (row_stride == cols || rows == 1))) {
    out.strides = {row_stride, col_stride};
  }
  return out;
}

// A matmul whose weights have no batch (all leading dims 1) over batched
// activations [..., M, K] is one 2-D matmul with the batch folded into M.
// Why: oneDNN 2.6 picks a blocked (prepackable) weights layout for its
// brgemm matmul only at rank 2; at rank 3 `any` resolves to the plain
// layout and every call re-packs B (docs/decisions/0012). Operands (bias,
// binary post-ops) must either broadcast over all rows or span them like the
// dst. nullopt: not such a call.
std::optional<FusedCall> FoldMatMulBatch(const FusedCall& call) {
  if (call.kind != CallKind::kMatMul) return std::nullopt;
  const size_t rank = call.dst.shape.size();
  if (rank < 3 || call.weights.shape.size() < 2) return std::nullopt;
  const ir::Shape& ws = call.weights.shape;
  for (size_t i = 0; i + 2 < ws.size(); ++i) {
    if (ws[i] != 1) return std::nullopt;
  }
  FusedCall folded = call;
  const std::vector<int64_t> wst = call.weights.EffectiveStrides();
  folded.weights.shape = {ws[ws.size() - 2], ws[ws.size() - 1]};
  folded.weights.strides = {wst[wst.size() - 2], wst[wst.size() - 1]};
  if (folded.weights.strides[1] == 1 && folded.weights.strides[0] == folded.weights.shape[1]) {
    folded.weights.strides.clear();
  }
  std::optional<TensorSpec> src = MergeLeadingDims(call.src, rank);
  std::optional<TensorSpec> dst = MergeLeadingDims(call.dst, rank);
  if (!src || !dst) return std::nullopt;
  folded.src = *src;
  folded.dst = *dst;
  // An operand broadcasting over every row, or covering the dst's rows.
  auto fold_operand = [&](const TensorSpec& op) -> std::optional<TensorSpec> {
    ir::Shape shape = op.shape;
    std::vector<int64_t> strides = op.EffectiveStrides();
    if (shape.size() > rank) return std::nullopt;
    PadToRank(rank, &shape, &strides);
    bool all_one = true, like_dst = true;
    for (size_t i = 0; i + 1 < rank; ++i) {
      all_one &= shape[i] == 1;
      like_dst &= shape[i] == call.dst.shape[i];
    }
    if (!all_one && !like_dst) return std::nullopt;
    return MergeLeadingDims(op, rank);
  };
  if (call.bias) {
    std::optional<TensorSpec> b = fold_operand(*call.bias);
    if (!b) return std::nullopt;
    folded.bias = *b;
  }
  for (PostOp& p : folded.post_ops) {
    if (!p.is_binary()) continue;
    std::optional<TensorSpec> o = fold_operand(p.operand);
    if (!o) return std::nullopt;
    p.operand = *o;
  }
  if (!Validate(folded).ok()) return std::nullopt;
  return folded;
}

// A conv whose spatial dim d has extent 1 in src, weights and dst, with no
// padding (nor output padding) on d, is the same conv without d, and every
// buffer keeps its bytes: a dim of extent 1 moves no address, blocked
// (nCdhw16c with D = 1 is nChw16c) or strided. Why: oneDNN 2.6's direct
// kernels block their registers over the innermost spatial dim, so an
// [N, C, H, 1] conv with a kx1 kernel runs one output point at a time
// (magika's 5x1 conv ran 20x slower than its 1-D form), and its 5-D kernels
// have only the reference implementation for post-ops the 4-D ones run (a
// full-size binary mul; rivagan's 1x11x11 convs). One spatial dim always
// stays: a conv whose every spatial dim is 1 is left as it is. nullopt:
// nothing to drop.
std::optional<FusedCall> DropUnitSpatialDims(const FusedCall& call) {
  if (call.kind != CallKind::kConv && call.kind != CallKind::kConvTranspose) {
    return std::nullopt;
  }
  const size_t rank = call.src.shape.size();
  if (rank < 4 || call.dst.shape.size() != rank || call.weights.shape.size() != rank) {
    return std::nullopt;
  }
  const int spatial = static_cast<int>(rank) - 2;
  const absl::StatusOr<ConvParams> normalized = NormalizeConvParams(call.conv, spatial);
  if (!normalized.ok()) return std::nullopt;
  const ConvParams& p = *normalized;
  const bool transposed = call.kind == CallKind::kConvTranspose;
  std::vector<int> drop;  // spatial indices, ascending
  for (int i = 0; i < spatial; ++i) {
    const size_t d = 2 + static_cast<size_t>(i);
    if (call.src.shape[d] == 1 && call.dst.shape[d] == 1 && call.weights.shape[d] == 1 &&
        p.pads_begin[i] == 0 && p.pads_end[i] == 0 &&
        (!transposed || p.output_padding[i] == 0)) {
      drop.push_back(i);
    }
  }
  if (drop.empty() || static_cast<int>(drop.size()) == spatial) return std::nullopt;
  // Removes the dropped dims from a tensor of `rank` dims (shorter ones are
  // left-padded with 1s first, as broadcasting reads them).
  auto drop_dims = [&](const TensorSpec& spec) -> std::optional<TensorSpec> {
    TensorSpec out = spec;
    if (out.shape.size() > rank) return std::nullopt;
    if (out.channel_block > 0 && out.shape.size() != rank) return std::nullopt;
    if (!out.strides.empty()) PadToRank(rank, &out.shape, &out.strides);
    out.shape.insert(out.shape.begin(), rank - out.shape.size(), 1);
    for (auto it = drop.rbegin(); it != drop.rend(); ++it) {
      const size_t d = 2 + static_cast<size_t>(*it);
      if (out.shape[d] != 1) return std::nullopt;
      out.shape.erase(out.shape.begin() + d);
      if (!out.strides.empty()) out.strides.erase(out.strides.begin() + d);
    }
    return out;
  };
  FusedCall folded = call;
  std::optional<TensorSpec> src = drop_dims(call.src);
  std::optional<TensorSpec> dst = drop_dims(call.dst);
  std::optional<TensorSpec> weights = drop_dims(call.weights);
  if (!src || !dst || !weights) return std::nullopt;
  folded.src = *src;
  folded.dst = *dst;
  folded.weights = *weights;
  for (PostOp& op : folded.post_ops) {
    if (!op.is_binary()) continue;
    std::optional<TensorSpec> o = drop_dims(op.operand);
    if (!o) return std::nullopt;
    op.operand = *o;
  }
  ConvParams& c = folded.conv;
  c = p;
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) {
    for (std::vector<int64_t>* v :
         {&c.strides, &c.dilations, &c.pads_begin, &c.pads_end, &c.output_padding}) {
      if (static_cast<int>(v->size()) == spatial) v->erase(v->begin() + *it);
    }
  }
  if (!Validate(folded).ok()) return std::nullopt;
  return folded;
}

}  // namespace

namespace {

// Whether a conv may run on a Winograd F(2x2, 3x3) kernel (oneDNN's on
// AVX-512, kiln's elsewhere): 2-D, 3x3, stride 1, undilated, ungrouped.
bool WinogradShape3x3(const FusedCall& call, const ConvParams& conv) {
  if (call.kind != CallKind::kConv || call.weights.shape.size() != 4 ||
      call.dst.shape.size() != 4 || conv.groups != 1) {
    return false;
  }
  for (size_t i = 0; i < 2; ++i) {
    if (call.weights.shape[2 + i] != 3 || conv.strides[i] != 1 || conv.dilations[i] != 1) {
      return false;
    }
  }
  return true;
}

// Whether oneDNN 2.6 has Winograd kernels on this CPU under its ISA cap
// (avx512_core and above; its cpu_isa values nest as bit masks).
bool OneDnnHasWinograd() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & core) == core;
}

// kRule's bounds: output pixels and the fewer of in/out channels from which
// each Winograd kernel measured faster than the direct one
// (docs/decisions/0076, 0080).
bool WinogradByRule(const FusedCall& call, int64_t min_pixels, int64_t min_channels) {
  return call.dst.shape[2] * call.dst.shape[3] >= min_pixels &&
         std::min(call.weights.shape[0], call.weights.shape[1]) >= min_channels;
}

// How kiln's Winograd conv (winograd.h) reads and writes an activation
// descriptor: channels-last, or channel-blocked by 8 or 16; nullopt for
// any other layout.
std::optional<WinogradShape> WinogradLayout(const memory::desc& md) {
  WinogradShape s;
  if (md.dims().size() != 4 || md.data_type() != DT::f32) return std::nullopt;
  const int64_t block = ChannelBlockOf(md);
  if (block == 8 || block == 16) {
    s.block = block;
  } else if (md == memory::desc(md.dims(), DT::f32, Tag::nhwc)) {
    s.channels_last = true;
    s.block = 8;
  } else {
    return std::nullopt;
  }
  return s;
}

// The bias-and-post-ops primitive for running `pd`'s conv (a Winograd
// candidate on a direct kernel) on kiln's Winograd conv instead
// (winograd.h, docs/decisions/0080), when that applies: src and dst in one
// layout kiln's conv takes (WinogradLayout) whose block divides both
// channel counts, padding of at most 2 in front, and a oneDNN binary
// primitive other than the reference one that adds the bias and applies the
// call's post-ops.
std::optional<dnnl::binary::primitive_desc> KilnWinogradPost(
    const FusedCall& call, const ConvParams& conv, const dnnl::primitive_desc& pd,
    const dnnl::primitive_attr& attr) {
  const memory::desc src = pd.query_md(dnnl::query::src_md, 0);
  const memory::desc dst = pd.query_md(dnnl::query::dst_md, 0);
  const std::optional<WinogradShape> in = WinogradLayout(src);
  const std::optional<WinogradShape> out = WinogradLayout(dst);
  if (!in || !out || in->block != out->block || in->channels_last != out->channels_last ||
      src.dims()[1] % in->block != 0 || dst.dims()[1] % in->block != 0 ||
      conv.pads_begin[0] > 2 || conv.pads_begin[1] > 2 || call.integer.has_value()) {
    return std::nullopt;
  }
  try {
    // The bias as a [1, C, 1, 1] tensor laid out like the dst (the same
    // bytes as plain, C being a multiple of the block): oneDNN 2.6's jit
    // binary kernel takes a per-channel operand only so.
    const memory::desc bias4({1, dst.dims()[1], 1, 1}, DT::f32,
                             out->channels_last ? Tag::nhwc : ChannelBlockedTag(4, out->block));
    dnnl::binary::primitive_desc post(
        dnnl::binary::desc(dnnl::algorithm::binary_add, dst, bias4, dst), attr,
        CpuEngine());
    if (!IsOptimizedImpl(post.impl_info_str())) return std::nullopt;
    return post;
  } catch (const dnnl::error&) {
    return std::nullopt;  // A post-op the binary primitive does not take.
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<OneDnnCall>> OneDnnCall::Create(
    const FusedCall& original, const ir::Tensor* weights, const ir::Tensor* bias,
    const OneDnnCallOptions& options) {
  KILN_RETURN_IF_ERROR(Validate(original));
  std::optional<FusedCall> folded = FoldMatMulBatch(original);
  if (!folded) folded = DropUnitSpatialDims(original);
  const FusedCall& call = folded ? *folded : original;
  KILN_RETURN_IF_ERROR(CheckF32(call));
  if (weights == nullptr && call.kind != CallKind::kMatMul && call.kind != CallKind::kConv &&
      call.kind != CallKind::kConvTranspose) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oneDNN call ", call.ToString(), ": constant weights are required"));
  }
  if (weights) {
    KILN_RETURN_IF_ERROR(CheckConstant(original, original.weights, *weights, "weights"));
  }
  if (call.bias.has_value() != (bias != nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oneDNN call ", call.ToString(), ": bias tensor ",
        bias ? "given but not described" : "missing"));
  }
  if (bias) KILN_RETURN_IF_ERROR(CheckConstant(original, *original.bias, *bias, "bias"));
  ConvParams conv;
  const bool is_conv = call.kind == CallKind::kConv ||
                       call.kind == CallKind::kConvTranspose;
  if (is_conv) {
    KILN_ASSIGN_OR_RETURN(
        conv, NormalizeConvParams(call.conv, static_cast<int>(call.src.shape.size()) - 2));
  }

  auto impl = std::make_unique<Impl>();
  impl->call = original;
  impl->options = options;
  impl->runtime_weights = weights == nullptr;
  Impl& m = *impl;
  try {
    dnnl::engine& engine = CpuEngine();
    const size_t rank = call.dst.shape.size();
    const bool matmul = call.kind == CallKind::kMatMul;
    memory::desc user_src_md = StridedDesc(call.src, matmul ? rank : 0);
    memory::desc user_dst_md = StridedDesc(call.dst);
    memory::desc user_w_md = WeightsDesc(call, conv.groups);
    std::optional<memory::desc> bias_md;
    if (call.bias) bias_md = StridedDesc(*call.bias, matmul ? rank : 1);

    // A batched linear layer was folded into one 2-D matmul above
    // (FoldMatMulBatch); this is its 1x1-conv form (see ConvForm).
    const std::optional<ConvForm> linear =
        impl->runtime_weights ? std::nullopt : LinearAsConv(call);
    std::vector<std::pair<int, memory::desc>> binary;
    const dnnl::primitive_attr attr = CallAttr(call, &binary);

    const bool prepack = options.prepack_weights && !impl->runtime_weights;
    // bf16: the primitive reads bf16 src and weights; the weights are
    // converted once when prepacked, the src by the input reorder.
    m.bf16 = options.bf16 && prepack && !call.integer.has_value();
    const memory::desc w_md = !prepack  ? user_w_md
                              : m.bf16 ? AnyDesc(WithType(user_w_md, DT::bf16))
                                       : AnyDesc(user_w_md);
    // The activations the primitive reads and writes: the src in the type it
    // computes in; the dst bf16 only in a bf16 call, where the caller stores
    // it in bf16 (else a reorder converts it).
    const bool float_call = !call.integer.has_value();
    const memory::desc pd_user_src =
        !float_call ? user_src_md : WithType(user_src_md, m.bf16 ? DT::bf16 : DT::f32);
    const memory::desc pd_user_dst =
        float_call && !m.bf16 ? WithType(user_dst_md, DT::f32) : user_dst_md;
    const memory::desc* b = bias_md ? &*bias_md : nullptr;
    // Preference: an optimized kernel (jit/brgemm) on oneDNN's own activation
    // layouts (when allowed: blocked layouts plus two cheap reorders beat
    // gemm-based or NHWC kernels on the caller's layout, see
    // fusion_benchmark), then one on the caller's layouts, then anything but
    // the reference implementation.
    using Form = OneDnnCallOptions::ActivationForm;
    const Form form = is_conv ? options.activation_form : Form::kRule;
    std::optional<dnnl::primitive_desc> forced;
    if (form != Form::kRule) {
      // One primitive on the activation layouts the tuner measured fastest.
      auto laid_out = [&](const memory::desc& like) -> memory::desc {
        switch (form) {
          case Form::kCaller: return like;
          case Form::kAny: return AnyDesc(like);
          case Form::kNhwc:
            return memory::desc(like.dims(), like.data_type(), ChannelsLastTag(rank));
          case Form::kBlocked8:
          case Form::kBlocked16:
            return memory::desc(like.dims(), like.data_type(),
                                ChannelBlockedTag(rank, form == Form::kBlocked8 ? 8 : 16));
          case Form::kRule: break;
        }
        return like;
      };
      if ((form == Form::kNhwc && ChannelsLastTag(rank) == Tag::undef) ||
          ((form == Form::kBlocked8 || form == Form::kBlocked16) &&
           ChannelBlockedTag(rank, 8) == Tag::undef)) {
        return absl::UnimplementedError(absl::StrCat(
            "oneDNN call ", call.ToString(), ": no ", ActivationFormName(form),
            " activation layout at rank ", rank));
      }
      forced = MakePrimitiveDesc(call, conv, laid_out(pd_user_src), w_md, b,
                                 laid_out(pd_user_dst), attr);
      if (absl::StartsWith(forced->impl_info_str(), "ref") && !options.allow_reference_impl) {
        return absl::UnimplementedError(absl::StrCat(
            "oneDNN has only its slow reference implementation (", forced->impl_info_str(),
            ") for ", call.ToString(), " on ", ActivationFormName(form),
            " activations"));
      }
    }
    std::optional<dnnl::primitive_desc> on_user_layout, on_any_layout;
    if (!forced) {
      try {
        on_user_layout =
            MakePrimitiveDesc(call, conv, pd_user_src, w_md, b, pd_user_dst, attr);
      } catch (const dnnl::error&) {
        if (!options.any_activation_layout) throw;
      }
    }
    if (!forced && options.any_activation_layout) {
      try {
        on_any_layout = MakePrimitiveDesc(call, conv, AnyDesc(pd_user_src), w_md,
                                          b, AnyDesc(pd_user_dst), attr);
      } catch (const dnnl::error&) {
        if (!on_user_layout) throw;
      }
    }
    auto starts = [](const dnnl::primitive_desc& pd, const char* prefix) {
      return absl::StartsWith(pd.impl_info_str(), prefix);
    };
    auto direct = [&](const dnnl::primitive_desc& pd) {
      return IsOptimizedImpl(pd.impl_info_str());
    };
    std::vector<dnnl::primitive_desc> candidates;
    // Activations the layout pass already keeps blocked (passes/loop/
    // propagate_layout asked PreferredActivationBlocks for this block) are
    // taken as they are when an optimized kernel runs on them: on AVX-512
    // `any` resolves to brgconv's NHWC, and converting blocked <-> NHWC around
    // every conv would undo the pass.
    const bool blocked_by_caller =
        call.src.channel_block > 0 || call.dst.channel_block > 0;
    if (blocked_by_caller && on_user_layout && direct(*on_user_layout)) {
      candidates.push_back(*on_user_layout);
    }
    if (on_any_layout && direct(*on_any_layout)) candidates.push_back(*on_any_layout);
    if (on_user_layout && direct(*on_user_layout)) candidates.push_back(*on_user_layout);
    if (on_user_layout) candidates.push_back(*on_user_layout);
    if (on_any_layout) candidates.push_back(*on_any_layout);
    if (forced) candidates.assign(1, *forced);
    auto chosen = std::find_if(candidates.begin(), candidates.end(),
                               [&](const auto& pd) { return !starts(pd, "ref"); });
    if (chosen == candidates.end()) {
      if (!options.allow_reference_impl) {
        return absl::UnimplementedError(absl::StrCat(
            "oneDNN has only its slow reference implementation (",
            candidates[0].impl_info_str(), ") for ", call.ToString(),
            ": fuse fewer post-ops or keep the op in the loop IR"));
      }
      chosen = candidates.begin();
    }
    dnnl::primitive_desc pd = *chosen;
    using LAC = OneDnnCallOptions::LinearAsConv;
    // oneDNN 2.6 miscomputes chains with two linear post-ops on its
    // gemm-based kernels and on the 1x1 conv alike (measured); the extern
    // kernel refuses them by the gemm impl name, so they stay on it.
    const bool two_linears =
        std::count_if(call.post_ops.begin(), call.post_ops.end(), [](const PostOp& p) {
          return p.kind == PostOpKind::kLinear;
        }) >= 2;
    // (Not in bf16, nor on bf16 activations: the 1x1-conv form is an AVX2
    // gemm workaround.)
    const bool f32_activations =
        call.src.dtype == ir::DType::kF32 && call.dst.dtype == ir::DType::kF32;
    if (prepack && !m.bf16 && f32_activations && options.linear_as_conv != LAC::kNever &&
        linear && !two_linears) {
      const ConvForm* f = &*linear;
      const bool wanted =
          options.linear_as_conv == LAC::kAlways ||
          ((starts(pd, "gemm") || starts(pd, "x64:gemm")) &&
           f->m >= kLinearAsConvMinRows);
      if (wanted) {
        try {
          std::vector<std::pair<int, memory::desc>> conv_binary;
          const dnnl::primitive_attr conv_attr = CallAttr(call, &conv_binary, &f->operands);
          FusedCall as_conv = call;
          as_conv.kind = CallKind::kConv;
          ConvParams one;
          one.strides = one.dilations = {1, 1};
          one.pads_begin = one.pads_end = {0, 0};
          dnnl::primitive_desc c =
              MakePrimitiveDesc(as_conv, one, f->src, AnyDesc(f->weights),
                                f->bias ? &*f->bias : nullptr, f->dst, conv_attr);
          if (direct(c)) {
            pd = c;
            m.as_conv = true;
            user_src_md = f->src;
            user_dst_md = f->dst;
            user_w_md = f->weights;
            bias_md = f->bias;
            binary = std::move(conv_binary);
          }
        } catch (const dnnl::error&) {
          // Keep the matmul / inner product.
        }
      }
    }
    if (!m.as_conv && prepack && !m.bf16 && call.kind == CallKind::kMatMul &&
        starts(pd, "gemm")) {
      // The gemm-based matmul takes whatever weights layout it is given and
      // resolves `any` to row-major [K, N]; with the weights transposed
      // ([N, K] row-major) its packing is faster for wide N
      // (fusion_benchmark BM_MatMulWeightsLayout; docs/decisions/0011).
      // Prepacking makes that layout free at run time.
      const memory::desc kn = pd.query_md(dnnl::query::weights_md, 0);
      const memory::desc nk = TransposedLastTwo(user_w_md);
      if (kn == DenseRowMajor(user_w_md)) {
        try {
          dnnl::primitive_desc t = MakePrimitiveDesc(
              call, conv, pd.query_md(dnnl::query::src_md, 0), nk, b,
              pd.query_md(dnnl::query::dst_md, 0), attr);
          if (starts(t, "gemm")) pd = t;
        } catch (const dnnl::error&) {
          // Keep the row-major form.
        }
      }
    }
    using Algo = OneDnnCallOptions::ConvAlgorithm;
    std::optional<dnnl::binary::primitive_desc> winograd_post;
    if (options.conv_algorithm != Algo::kDirect && !m.as_conv && prepack && !m.bf16 &&
        f32_activations && WinogradShape3x3(call, conv)) {
      const bool asked = options.conv_algorithm == Algo::kWinograd;
      auto is_wino = [&] { return absl::StrContains(pd.impl_info_str(), "wino"); };
      if (asked || WinogradByRule(call, kWinogradMinOutputPixels, kWinogradMinChannels)) {
        // On the activation layouts already chosen, so the choice never adds
        // a reorder (oneDNN's Winograd kernels run on nChw16c only).
        try {
          dnnl::primitive_desc w = MakePrimitiveDesc(
              call, conv, pd.query_md(dnnl::query::src_md, 0), w_md, b,
              pd.query_md(dnnl::query::dst_md, 0), attr, /*winograd=*/true);
          if (direct(w)) pd = w;
        } catch (const dnnl::error&) {
          // No Winograd kernel on these layouts: keep the direct one.
        }
      }
      if (asked && !is_wino()) {
        // Asked for: on oneDNN's own activation layouts, behind reorders.
        try {
          dnnl::primitive_desc w =
              MakePrimitiveDesc(call, conv, AnyDesc(pd_user_src), w_md, b,
                                AnyDesc(pd_user_dst), attr, /*winograd=*/true);
          if (direct(w)) pd = w;
        } catch (const dnnl::error&) {
          // No Winograd kernel for this call on this CPU.
        }
      }
      // Where oneDNN has none (AVX2), kiln's own on the same layouts; by
      // rule only on CPUs without oneDNN's (it was measured on AVX2 only).
      if (!is_wino() && direct(pd) &&
          (asked ||
           (!OneDnnHasWinograd() &&
            WinogradByRule(call, kKilnWinogradMinOutputPixels, kKilnWinogradMinChannels)))) {
        winograd_post = KilnWinogradPost(call, conv, pd, attr);
      }
      if (asked && !is_wino() && !winograd_post) {
        return absl::UnimplementedError(absl::StrCat(
            "neither oneDNN nor kiln has a Winograd kernel for ", call.ToString(), " on ",
            pd.impl_info_str(), "'s activation layouts"));
      }
    } else if (options.conv_algorithm == Algo::kWinograd) {
      return absl::UnimplementedError(absl::StrCat(
          "oneDNN call ", call.ToString(),
          ": Winograd needs an f32 3x3 stride-1 undilated ungrouped conv with "
          "prepacked weights"));
    }
    if (!forced && !m.as_conv && options.any_activation_layout && !direct(pd) &&
        HasPadding(call, conv)) {
      // Explicit padding (HasPadding): the unpadded conv on the caller's dst
      // layout, else on oneDNN's own.
      const ConvParams unpadded = Unpadded(conv);
      const memory::desc padded_src = PaddedSrcDesc(pd_user_src, conv);
      for (const memory::desc& d : {pd_user_dst, AnyDesc(pd_user_dst)}) {
        try {
          dnnl::primitive_desc p =
              MakePrimitiveDesc(call, unpadded, padded_src, w_md, b, d, attr);
          if (direct(p)) {
            pd = p;
            m.explicit_padding = true;
            break;
          }
        } catch (const dnnl::error&) {
          // No kernel on this dst layout either.
        }
      }
      // Then on a channel-blocked dst, with the binary operands of the dst's
      // full size reordered per call into the same layout (oneDNN 2.6's
      // jit:avx2 reads such an operand only in the dst's layout): rivagan's
      // last conv, 32->3 11x11 + tanh + scale + the input frame, took 110 ms
      // on the gemm kernel and 28 ms so.
      for (const int64_t block : {int64_t{8}, int64_t{16}}) {
        const Tag blocked = ChannelBlockedTag(rank, block);
        if (m.explicit_padding || blocked == Tag::undef) break;
        const memory::desc dst_b(pd_user_dst.dims(), pd_user_dst.data_type(), blocked);
        std::vector<memory::desc> operand_mds;
        std::vector<size_t> full_size;  // indices into `binary`
        for (size_t i = 0; i < binary.size(); ++i) {
          const memory::desc& md = binary[i].second;
          const bool full = md.dims() == dst_b.dims() && md.data_type() == DT::f32 &&
                            !SamePhysicalLayout(md, dst_b);
          operand_mds.push_back(full ? dst_b : md);
          if (full) full_size.push_back(i);
        }
        if (full_size.empty()) continue;
        try {
          std::vector<std::pair<int, memory::desc>> blocked_binary;
          const dnnl::primitive_attr a = CallAttr(call, &blocked_binary, &operand_mds);
          dnnl::primitive_desc p =
              MakePrimitiveDesc(call, unpadded, padded_src, w_md, b, dst_b, a);
          if (!direct(p)) continue;
          pd = p;
          m.explicit_padding = true;
          for (size_t i : full_size) {
            m.operand_reorders.push_back(
                {i, memory(binary[i].second, engine, DNNL_MEMORY_NONE), memory(dst_b, engine), {}});
          }
          binary = std::move(blocked_binary);
        } catch (const dnnl::error&) {
          // Not on this block either.
        }
      }
    }
    const memory::desc pd_src = pd.query_md(dnnl::query::src_md, 0);
    const memory::desc pd_dst = pd.query_md(dnnl::query::dst_md, 0);
    const memory::desc pd_w = pd.query_md(dnnl::query::weights_md, 0);

    // Weights: prepacked once, or the caller's (shared, not copied).
    if (winograd_post) {
      WinogradShape shape = *WinogradLayout(pd_src);
      shape.batch = pd_src.dims()[0];
      shape.in_channels = pd_src.dims()[1];
      shape.out_channels = pd_dst.dims()[1];
      shape.in_h = pd_src.dims()[2];
      shape.in_w = pd_src.dims()[3];
      shape.out_h = pd_dst.dims()[2];
      shape.out_w = pd_dst.dims()[3];
      shape.pad_top = conv.pads_begin[0];
      shape.pad_left = conv.pads_begin[1];
      KILN_ASSIGN_OR_RETURN(
          m.winograd,
          WinogradConv::Create(shape, static_cast<const float*>(weights->raw_data())));
      m.prepacked_bytes = m.winograd->weights_bytes();
    } else if (impl->runtime_weights) {
      m.user_weights = memory(user_w_md, engine, DNNL_MEMORY_NONE);
      m.args[DNNL_ARG_WEIGHTS] = m.user_weights;
    } else if (prepack) {
      m.packed_weights = memory(pd_w, engine);
      memory src_w(user_w_md, engine, const_cast<void*>(weights->raw_data()));
      ReorderOnce(src_w, m.packed_weights);
      m.prepacked_bytes = static_cast<int64_t>(pd_w.get_size());
      m.args[DNNL_ARG_WEIGHTS] = m.packed_weights;
    } else {
      // The model's own layout: the call shares the constant's bytes instead
      // of copying them; oneDNN only reads weights and bias.
      m.plain_weights = weights->Share();
      m.args[DNNL_ARG_WEIGHTS] = memory(
          user_w_md, engine, const_cast<void*>(std::as_const(m.plain_weights).raw_data()));
    }
    if (bias) {
      m.bias = bias->Share();
      m.args[DNNL_ARG_BIAS] =
          memory(*bias_md, engine, const_cast<void*>(std::as_const(m.bias).raw_data()));
    }

    // Activations: the caller's buffers, or internal ones behind reorders.
    m.user_src = memory(user_src_md, engine, DNNL_MEMORY_NONE);
    m.user_dst = memory(user_dst_md, engine, DNNL_MEMORY_NONE);
    if (m.explicit_padding) {
      m.internal_src = memory(pd_src, engine);
      std::memset(m.internal_src.get_data_handle(), 0, pd_src.get_size());
      Dims offsets(user_src_md.dims().size(), 0);
      for (size_t i = 0; i < conv.pads_begin.size(); ++i) offsets[2 + i] = conv.pads_begin[i];
      m.src_in_target = memory(pd_src.submemory_desc(user_src_md.dims(), offsets), engine,
                               m.internal_src.get_data_handle());
      m.src_in = dnnl::reorder(m.user_src, m.src_in_target);
      m.args[DNNL_ARG_SRC] = m.internal_src;
      ++m.reorders_per_call;
    } else if (SamePhysicalLayout(pd_src, user_src_md)) {
      m.user_src = memory(pd_src, engine, DNNL_MEMORY_NONE);
      m.args[DNNL_ARG_SRC] = m.user_src;
    } else {
      m.internal_src = memory(pd_src, engine);
      m.src_in_target = m.internal_src;
      m.src_in = dnnl::reorder(m.user_src, m.internal_src);
      m.args[DNNL_ARG_SRC] = m.internal_src;
      ++m.reorders_per_call;
    }
    if (SamePhysicalLayout(pd_dst, user_dst_md)) {
      m.user_dst = memory(pd_dst, engine, DNNL_MEMORY_NONE);
      m.args[DNNL_ARG_DST] = m.user_dst;
    } else {
      m.internal_dst = memory(pd_dst, engine);
      m.dst_out = dnnl::reorder(m.internal_dst, m.user_dst);
      ++m.reorders_per_call;
      if (call.has_sum()) {
        m.dst_in = dnnl::reorder(m.user_dst, m.internal_dst);
        ++m.reorders_per_call;
      }
      m.args[DNNL_ARG_DST] = m.internal_dst;
    }
    for (const auto& [index, md] : binary) {
      const int key = DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1;
      m.binary_arg_keys.push_back(key);
      m.args[key] = memory(md, engine, DNNL_MEMORY_NONE);
    }
    m.operand_reordered.assign(binary.size(), false);
    for (Impl::OperandReorder& r : m.operand_reorders) {
      m.args[m.binary_arg_keys[r.index]] = r.internal;
      m.operand_reordered[r.index] = true;
      r.reorder = dnnl::reorder(r.user, r.internal);
      ++m.reorders_per_call;
    }
    if (m.winograd) {
      // The conv's src and dst stay where they are; the binary primitive
      // reads the Winograd result and the bias and writes the dst.
      m.winograd_src = m.args[DNNL_ARG_SRC];
      m.winograd_out = memory(pd_dst, engine);
      const int64_t oc = pd_dst.dims()[1];
      const memory::desc bias4 = winograd_post->src_desc(1);
      void* bias_data = const_cast<void*>(std::as_const(m.bias).raw_data());
      if (!bias) {
        m.zero_bias.assign(static_cast<size_t>(oc), 0.f);
        bias_data = m.zero_bias.data();
      }
      m.args.erase(DNNL_ARG_SRC);
      m.args.erase(DNNL_ARG_WEIGHTS);
      m.args.erase(DNNL_ARG_BIAS);
      m.args[DNNL_ARG_SRC_0] = m.winograd_out;
      m.args[DNNL_ARG_SRC_1] = memory(bias4, engine, bias_data);
    }
    const dnnl::primitive_desc_base& run_pd =
        m.winograd ? static_cast<const dnnl::primitive_desc_base&>(*winograd_post) : pd;
    const memory::desc scratch_md = run_pd.scratchpad_desc();
    m.scratchpad_bytes = static_cast<int64_t>(scratch_md.get_size());
    m.scratchpad = memory(scratch_md, engine);
    m.args[DNNL_ARG_SCRATCHPAD] = m.scratchpad;
    if (call.integer.has_value() && call.integer->runtime_src_zero_point) {
      m.args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] =
          memory({{1}, memory::data_type::s32, memory::format_tag::x}, engine,
                 &m.src_zero_point);
    }

    m.primitive = m.winograd ? dnnl::primitive(dnnl::binary(*winograd_post))
                             : dnnl::primitive(pd);
    const int w_ndims = pd_w.data.ndims;
    m.weights_layout = m.winograd ? "winograd_2x3[16][I][O]"
                                  : LayoutString(pd_w, DimLetters(call, true, w_ndims, m.as_conv));
    m.src_layout =
        LayoutString(pd_src, DimLetters(call, false, pd_src.data.ndims, m.as_conv));
    m.dst_layout =
        LayoutString(pd_dst, DimLetters(call, false, pd_dst.data.ndims, m.as_conv));
    m.impl_name = m.winograd ? absl::StrCat("kiln:wino_2x3 (", m.winograd->matmul_impl(),
                                            " matmul, ", winograd_post->impl_info_str(),
                                            " post-ops)")
                  : m.as_conv        ? absl::StrCat(pd.impl_info_str(), " (as 1x1 conv)")
                  : m.explicit_padding ? absl::StrCat(pd.impl_info_str(), " (src padded)")
                                       : pd.impl_info_str();
  } catch (const dnnl::error& e) {
    return CreateError(call, e);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "oneDNN call ", call.ToString(), ": out of memory"));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("oneDNN call ", call.ToString(), ": ", e.what()));
  }
  return std::unique_ptr<OneDnnCall>(new OneDnnCall(std::move(impl)));
}

namespace {

// An integer conv: channels-last for src and dst when oneDNN runs an
// optimized kernel on that pair (its int8 convs take NHWC, not nChw16c:
// on nChw16c they have only ref_int8), else plain. Create takes the
// channels-last descriptors as the caller's layout, without reorders.
absl::StatusOr<ActivationBlocks> IntegerActivationBlocks(const FusedCall& call) {
  ActivationBlocks blocks;
  if (call.kind != CallKind::kConv) return blocks;
  FusedCall laid_out = call;
  laid_out.src.strides.clear();
  laid_out.dst.strides.clear();
  laid_out.src.channel_block = call.src.shape[1];
  laid_out.dst.channel_block = call.dst.shape[1];
  if (!ChannelsLastSpec(laid_out.src) || !ChannelsLastSpec(laid_out.dst)) {
    return blocks;
  }
  KILN_ASSIGN_OR_RETURN(
      ConvParams conv,
      NormalizeConvParams(call.conv, static_cast<int>(call.src.shape.size()) - 2));
  try {
    std::vector<std::pair<int, memory::desc>> binary;
    const dnnl::primitive_attr attr = CallAttr(laid_out, &binary);
    const memory::desc w_md = AnyDesc(WeightsDesc(laid_out, conv.groups));
    std::optional<memory::desc> bias_md;
    if (call.bias) bias_md = StridedDesc(*call.bias, 1);
    const dnnl::primitive_desc pd =
        MakePrimitiveDesc(laid_out, conv, StridedDesc(laid_out.src), w_md,
                          bias_md ? &*bias_md : nullptr, StridedDesc(laid_out.dst), attr);
    if (IsOptimizedImpl(pd.impl_info_str())) {
      blocks.src = blocks.dst = ActivationBlocks::kChannelsLast;
    }
  } catch (const dnnl::error&) {
    // No kernel on channels-last activations: they stay plain.
  }
  return blocks;
}

}  // namespace

absl::StatusOr<ActivationBlocks> OneDnnCall::PreferredActivationBlocks(
    const FusedCall& original, const OneDnnCallOptions& options) {
  KILN_RETURN_IF_ERROR(Validate(original));
  // The question Create will put: a block of the lower-rank conv is the same
  // layout of the original buffers (DropUnitSpatialDims).
  const std::optional<FusedCall> folded = DropUnitSpatialDims(original);
  const FusedCall& call = folded ? *folded : original;
  KILN_RETURN_IF_ERROR(CheckF32(call));
  ActivationBlocks blocks;
  if ((call.kind != CallKind::kConv && call.kind != CallKind::kConvTranspose) ||
      !options.any_activation_layout) {
    return blocks;
  }
  if (call.integer.has_value()) return IntegerActivationBlocks(call);
  KILN_ASSIGN_OR_RETURN(
      ConvParams conv,
      NormalizeConvParams(call.conv, static_cast<int>(call.src.shape.size()) - 2));
  try {
    std::vector<std::pair<int, memory::desc>> binary;
    const dnnl::primitive_attr attr = CallAttr(call, &binary);
    // bf16 calls (Create's rule) on bf16 activations: the layouts the bf16
    // kernels want, which may differ from the f32 ones.
    const bool bf16 = options.bf16 && options.prepack_weights;
    const memory::desc user_w_md =
        bf16 ? WithType(WeightsDesc(call, conv.groups), DT::bf16) : WeightsDesc(call, conv.groups);
    const memory::desc w_md = options.prepack_weights ? AnyDesc(user_w_md) : user_w_md;
    std::optional<memory::desc> bias_md;
    if (call.bias) bias_md = StridedDesc(*call.bias, 1);
    const memory::desc* b = bias_md ? &*bias_md : nullptr;
    const memory::desc user_src =
        bf16 ? WithType(StridedDesc(call.src), DT::bf16) : StridedDesc(call.src);
    const memory::desc user_dst =
        bf16 ? WithType(StridedDesc(call.dst), DT::bf16) : StridedDesc(call.dst);
    dnnl::primitive_desc pd = MakePrimitiveDesc(
        call, conv, AnyDesc(user_src), w_md, b, AnyDesc(user_dst), attr);
    // Create takes this descriptor first only when it is an optimized kernel.
    auto optimized = [](const dnnl::primitive_desc& d) {
      const std::string impl = d.impl_info_str();
      return IsOptimizedImpl(impl);
    };
    // Create's explicit padding (HasPadding): where only the unpadded conv
    // on a padded copy of the src has an optimized kernel, the layouts are
    // that kernel's (the copy converts any src layout).
    const bool pad = HasPadding(call, conv);
    const ConvParams unpadded = Unpadded(conv);
    auto padded = [&](const memory::desc& dst, const dnnl::primitive_attr& a)
        -> std::optional<dnnl::primitive_desc> {
      if (!pad) return std::nullopt;
      try {
        dnnl::primitive_desc p = MakePrimitiveDesc(
            call, unpadded, PaddedSrcDesc(user_src, conv), w_md, b, dst, a);
        if (optimized(p)) return p;
      } catch (const dnnl::error&) {
        // Not with this dst layout either.
      }
      return std::nullopt;
    };
    if (!optimized(pd)) {
      if (std::optional<dnnl::primitive_desc> p = padded(AnyDesc(user_dst), attr)) pd = *p;
    }
    // The ISA of a kernel: "avx512_core" of "jit_1x1:avx512_core".
    auto isa = [](const dnnl::primitive_desc& d) {
      const std::string impl = d.impl_info_str();
      return impl.substr(impl.rfind(':') + 1);
    };
    // oneDNN's own pick (`any`): a channel-blocked layout (jit:avx512_core
    // on nChw16c), or on AVX-512 hosts NHWC for its brgemm convs, which
    // propagate-layout keeps as kChannelsLast (f32 only: bf16 activations
    // keep the blocked layouts they had).
    const size_t rank = call.src.shape.size();
    const Tag nhwc = bf16 ? Tag::undef : ChannelsLastTag(rank);
    auto channels_last = [&](const memory::desc& md, const memory::desc& like) {
      return nhwc != Tag::undef &&
             SamePhysicalLayout(md, memory::desc(like.dims(), like.data_type(), nhwc));
    };
    std::string best_isa;
    if (optimized(pd)) {
      best_isa = isa(pd);
      const memory::desc src_md = pd.query_md(dnnl::query::src_md, 0);
      const memory::desc dst_md = pd.query_md(dnnl::query::dst_md, 0);
      if (channels_last(dst_md, user_dst)) {
        blocks.dst = ActivationBlocks::kChannelsLast;
        blocks.src = channels_last(src_md, user_src) ? ActivationBlocks::kChannelsLast : 0;
      } else {
        blocks.src = ChannelBlockOf(src_md);
        blocks.dst = ChannelBlockOf(dst_md);
      }
    }
    if (blocks.dst == 0) blocks = ActivationBlocks{};
    // Which other layouts an optimized kernel also runs on: jit:avx512_core
    // on nChw16c; grouped convs with 8 channels a group only on nChw8c; 1x1
    // convs on nChw8c only with jit_1x1:avx2; brgconv on NHWC. The widest
    // block first; the first conv of a network keeps its plain input. The
    // pass picks one layout per region from these, by cost.
    for (const int64_t block : {int64_t{16}, int64_t{8}, ActivationBlocks::kChannelsLast}) {
      const Tag tag =
          block == ActivationBlocks::kChannelsLast ? nhwc : ChannelBlockedTag(rank, block);
      if (tag == Tag::undef) continue;
      const memory::desc src_blocked(user_src.dims(), user_src.data_type(), tag);
      const memory::desc dst_blocked(user_dst.dims(), user_dst.data_type(), tag);
      // A binary operand of the dst's shape (a residual add) shares the
      // dst's layout: propagate-layout keeps the pair in one layout. Asked
      // with a plain operand, the blocked kernels refuse and only the gemm
      // kernel remains (on AVX2, 3-10x slower at these shapes).
      std::vector<memory::desc> laid_out_operands;
      for (const PostOp& p : call.post_ops) {
        if (!p.is_binary()) continue;
        laid_out_operands.push_back(
            p.operand.shape == call.dst.shape
                ? memory::desc(ToDims(p.operand.shape), DnnlType(p.operand.dtype), tag)
                : StridedDesc(p.operand, call.dst.shape.size()));
      }
      std::vector<std::pair<int, memory::desc>> blocked_binary;
      const dnnl::primitive_attr blocked_attr =
          CallAttr(call, &blocked_binary, &laid_out_operands);
      for (const bool src_too : {true, false}) {
        const int64_t src_block = src_too ? block : 0;
        if (blocks.dst != 0 && src_block == blocks.src && block == blocks.dst) continue;
        try {
          std::optional<dnnl::primitive_desc> bd;
          try {
            bd = MakePrimitiveDesc(call, conv, src_too ? src_blocked : user_src, w_md, b,
                                   dst_blocked, blocked_attr);
          } catch (const dnnl::error&) {
            // Perhaps explicitly padded.
          }
          // Explicitly padded only with the src in the dst's block: the
          // padded copy converts any src, but a plain src is the layout a
          // kernel that needs no copy runs on.
          if ((!bd || !optimized(*bd)) && src_too) bd = padded(dst_blocked, blocked_attr);
          if (!bd || !optimized(*bd)) continue;
          if (best_isa.empty()) best_isa = isa(*bd);
          if (blocks.dst == 0) {
            blocks.src = src_block;
            blocks.dst = block;
          } else {
            blocks.also.push_back({src_block, block, isa(*bd) != best_isa});
          }
        } catch (const dnnl::error&) {
          // No kernel for this combination; try the next.
        }
      }
    }
  } catch (const dnnl::error& e) {
    return CreateError(call, e);
  }
  return blocks;
}

absl::Status OneDnnCall::Execute(const void* src,
                                 absl::Span<const void* const> binary_operands,
                                 void* dst) {
  if (impl_->runtime_weights) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oneDNN call ", impl_->call.ToString(),
        ": created without constant weights; pass them to Execute"));
  }
  return Run(src, nullptr, binary_operands, dst);
}

absl::Status OneDnnCall::Execute(const void* src, const void* weights,
                                 absl::Span<const void* const> binary_operands,
                                 void* dst) {
  if (!impl_->runtime_weights) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oneDNN call ", impl_->call.ToString(),
        ": has constant weights; use Execute without weights"));
  }
  if (weights == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oneDNN call ", impl_->call.ToString(), ": null weights pointer"));
  }
  return Run(src, weights, binary_operands, dst);
}

absl::Status OneDnnCall::Run(const void* src, const void* weights,
                             absl::Span<const void* const> binary_operands,
                             void* dst) {
  Impl& m = *impl_;
  if (binary_operands.size() != m.binary_arg_keys.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oneDNN call ", m.call.ToString(), ": expects ", m.binary_arg_keys.size(),
        " binary post-op operands, got ", binary_operands.size()));
  }
  if (src == nullptr || dst == nullptr ||
      std::find(binary_operands.begin(), binary_operands.end(), nullptr) !=
          binary_operands.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("oneDNN call ", m.call.ToString(), ": null buffer pointer"));
  }
  try {
    dnnl::stream& stream = CpuStream();
    m.user_src.set_data_handle(const_cast<void*>(src));
    m.user_dst.set_data_handle(dst);
    if (weights) m.user_weights.set_data_handle(const_cast<void*>(weights));
    for (size_t i = 0; i < binary_operands.size(); ++i) {
      if (m.operand_reordered[i]) continue;  // its arg is the internal copy
      m.args[m.binary_arg_keys[i]].set_data_handle(
          const_cast<void*>(binary_operands[i]));
    }
    for (Impl::OperandReorder& r : m.operand_reorders) {
      r.user.set_data_handle(const_cast<void*>(binary_operands[r.index]));
      r.reorder.execute(stream, r.user, r.internal);
    }
    if (m.src_in) m.src_in->execute(stream, m.user_src, m.src_in_target);
    if (m.dst_in) m.dst_in->execute(stream, m.user_dst, m.internal_dst);
    if (m.winograd) {
      stream.wait();
      m.winograd->Run(static_cast<const float*>(m.winograd_src.get_data_handle()),
                      static_cast<float*>(m.winograd_out.get_data_handle()));
    }
    m.primitive.execute(stream, m.args);
    if (m.dst_out) m.dst_out->execute(stream, m.internal_dst, m.user_dst);
    stream.wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN call ", m.call.ToString(),
                                            " failed: ", e.what(), " (",
                                            DnnlStatusName(e.status), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("oneDNN call ", m.call.ToString(),
                                            " failed: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status OneDnnCall::SetSrcZeroPoint(int32_t zero_point) {
  if (!impl_->call.integer.has_value() || !impl_->call.integer->runtime_src_zero_point) {
    return absl::InvalidArgumentError(absl::StrCat(
        "oneDNN call ", impl_->call.ToString(), ": has no run-time src zero point"));
  }
  impl_->src_zero_point = zero_point;
  return absl::OkStatus();
}

bool OneDnnCall::bf16() const { return impl_->bf16; }

const FusedCall& OneDnnCall::call() const { return impl_->call; }
int64_t OneDnnCall::prepacked_bytes() const { return impl_->prepacked_bytes; }
int64_t OneDnnCall::scratchpad_bytes() const { return impl_->scratchpad_bytes; }
std::string OneDnnCall::weights_layout() const { return impl_->weights_layout; }
std::string OneDnnCall::src_layout() const { return impl_->src_layout; }
std::string OneDnnCall::dst_layout() const { return impl_->dst_layout; }
int OneDnnCall::reorders_per_call() const { return impl_->reorders_per_call; }
std::string OneDnnCall::impl_name() const { return impl_->impl_name; }

}  // namespace kiln::onednn
