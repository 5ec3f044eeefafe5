// OneDnnExternKernel: reads an extern kernel's op, attributes and buffers
// (the contract of ir/loop/extern_schema.h) into a FusedCall plus the
// constant weights/bias, builds the OneDnnCall, and maps Run's buffer
// pointers onto it.
#include "backends/onednn/extern_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "backends/onednn/fused_call.h"
#include "ir/loop/extern_schema.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "backends/onednn/kernel_reader.h"
#include "backends/onednn/rnn_kernel.h"
#include "ir/status_macros.h"

namespace kiln::onednn {
namespace {

using ir::Shape;
using ir::Tensor;
using ir::loop::Buffer;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

using ir::loop::kAttrBlockedInputs;
using ir::loop::kAttrBlockedOutputs;
using ir::loop::kAttrChannelBlock;
using ir::loop::kAttrInputSlots;
using ir::loop::kAttrOutputSlots;
using ir::loop::kKilnOpPrefix;
using ir::loop::kOnnxOpPrefix;

// Where a pointer handed to OneDnnCall comes from at Run: one of Run's
// inputs, or data the kernel owns (a scaled copy of a constant).
struct PointerSource {
  int input = -1;
  const void* owned = nullptr;
};

// dst <- operand before a sum post-op, when they are different buffers.
// The sum's scale is applied here, so oneDNN always accumulates with scale 1
// (its optimized conv kernels refuse other scales).
struct SumCopy {
  int input = -1;
  float scale = 1.0f;
  bool dense = false;  // both row-major: one memcpy
  int64_t bytes = 0;
  int64_t storage_bytes = 0;  // the operand buffer's whole extent
  Shape shape;
  std::vector<int64_t> src_strides, dst_strides;
};

// Reads the call's attributes and buffers; every error names the kernel.
class Translator : public internal::KernelReader {
 public:
  using KernelReader::KernelReader;

  absl::Status Annotate(const absl::Status& s) const {
    return absl::Status(s.code(), absl::StrCat(Where(), ": ", s.message()));
  }

  // Integer ops (ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul)
  // read and write u8/s8/s32 buffers; every other call is f32.
  void AllowIntegerBuffers() { integer_ = true; }

  absl::Status ReadSlots() {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> in, Ints(kAttrInputSlots));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out, Ints(kAttrOutputSlots));
    if (in.size() != k_.call.inputs.size() || out.size() != k_.call.outputs.size()) {
      return Invalid("slot attributes do not match the call's buffers");
    }
    for (size_t j = 0; j < in.size(); ++j) {
      if (in[j] < 0 || slot_to_input_.count(in[j])) {
        return Invalid("bad input slot ", in[j]);
      }
      slot_to_input_[in[j]] = static_cast<int>(j);
      num_slots_ = std::max<int64_t>(num_slots_, in[j] + 1);
    }
    if (out.size() != 1 || out[0] != 0) {
      return Unimplemented("expects exactly one output (slot 0)");
    }
    for (int32_t b : k_.call.inputs) KILN_RETURN_IF_ERROR(CheckBuffer(b));
    for (int32_t b : k_.call.outputs) KILN_RETURN_IF_ERROR(CheckBuffer(b));
    return ReadLayouts();
  }

  // The buffer as the call sees it: its logical shape and layout.
  TensorSpec SpecOf(int32_t buffer) const {
    auto it = blocked_channels_.find(buffer);
    if (it == blocked_channels_.end()) return Spec(p_.buffers[buffer]);
    const Buffer& b = p_.buffers[buffer];
    Shape logical(b.shape.begin(), b.shape.end() - 1);
    logical[1] = it->second;
    TensorSpec s{b.dtype, logical, {}};
    s.channels_last = channel_block_ == ir::loop::kChannelsLastBlock;
    s.channel_block = s.channels_last ? it->second : channel_block_;
    return s;
  }
  bool AnyBlocked() const { return !blocked_channels_.empty(); }

  int64_t num_slots() const { return num_slots_; }
  bool Has(int64_t slot) const { return slot_to_input_.count(slot) > 0; }
  // Index into the call's inputs of node input `slot` (which must exist).
  int Input(int64_t slot) const { return slot_to_input_.at(slot); }
  const Buffer& InputBuffer(int64_t slot) const {
    return p_.buffers[k_.call.inputs[Input(slot)]];
  }
  int32_t InputBufferIndex(int64_t slot) const { return k_.call.inputs[Input(slot)]; }
  const Buffer& OutputBuffer() const { return p_.buffers[k_.call.outputs[0]]; }
  int32_t OutputBufferIndex() const { return k_.call.outputs[0]; }
  // The constant data of node input `slot`, or nullptr.
  const Tensor* Constant(int64_t slot) const {
    return ConstantOfInput(Input(slot));
  }
  static TensorSpec Spec(const Buffer& b) {
    TensorSpec s{b.dtype, b.shape, {}};
    if (!b.IsRowMajor()) s.strides = b.strides;
    return s;
  }

 private:
  absl::Status CheckBuffer(int32_t b) const {
    if (b < 0 || b >= static_cast<int32_t>(p_.buffers.size())) {
      return Invalid("buffer index ", b, " is out of range");
    }
    const Buffer& buf = p_.buffers[b];
    const bool integer = buf.dtype == ir::DType::kU8 || buf.dtype == ir::DType::kI8 ||
                         buf.dtype == ir::DType::kI32;
    // bf16: an activation stored in bf16 (bf16 mode); FusedCall validation
    // allows it as the src or dst only.
    const bool bf16 = buf.dtype == ir::DType::kBF16 && !integer_;
    if (buf.dtype != ir::DType::kF32 && !bf16 && !(integer_ && integer)) {
      return Unimplemented("buffer '", buf.name, "' is ", ir::DTypeName(buf.dtype),
                           ": oneDNN calls run f32 only");
    }
    if (buf.strides.size() != buf.shape.size() || !buf.StorageSize().has_value()) {
      return Invalid("buffer '", buf.name, "' has inconsistent strides");
    }
    for (int64_t d : buf.shape) {
      if (d <= 0) return Unimplemented("buffer '", buf.name, "' is empty");
    }
    return absl::OkStatus();
  }

  // kAttrBlockedInputs / kAttrBlockedOutputs: each blocked buffer's
  // physical shape must be [N, ceil(C/b), spatial..., b].
  absl::Status ReadLayouts() {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> in, Ints(kAttrBlockedInputs));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out, Ints(kAttrBlockedOutputs));
    if (in.empty() && out.empty()) return absl::OkStatus();
    if (in.size() != k_.call.inputs.size() || out.size() != k_.call.outputs.size()) {
      return Invalid("layout attributes do not match the call's buffers");
    }
    KILN_ASSIGN_OR_RETURN(channel_block_, Int(kAttrChannelBlock, 0));
    // Channels-last: each buffer blocked by its own channel count.
    const bool channels_last = channel_block_ == ir::loop::kChannelsLastBlock;
    auto add = [&](int32_t buffer, int64_t channels) -> absl::Status {
      if (channels == 0) return absl::OkStatus();
      const Buffer& b = p_.buffers[buffer];
      const size_t rank = b.shape.size();
      const int64_t block = channels_last ? channels : channel_block_;
      if (block <= 0 || channels < 0 || rank < 4 || rank > 6 || b.shape.back() != block ||
          b.shape[1] != (channels + block - 1) / block || !b.IsRowMajor()) {
        return Invalid("buffer '", b.name, "' ", ir::ShapeToString(b.shape),
                       " is not blocked by ",
                       channels_last ? std::string("its channel count")
                                     : absl::StrCat(channel_block_),
                       " over ", channels, " channels");
      }
      auto [it, fresh] = blocked_channels_.emplace(buffer, channels);
      if (!fresh && it->second != channels) {
        return Invalid("buffer '", b.name, "' has two layouts");
      }
      return absl::OkStatus();
    };
    for (size_t j = 0; j < in.size(); ++j) KILN_RETURN_IF_ERROR(add(k_.call.inputs[j], in[j]));
    for (size_t j = 0; j < out.size(); ++j) {
      KILN_RETURN_IF_ERROR(add(k_.call.outputs[j], out[j]));
    }
    return absl::OkStatus();
  }

  std::map<int64_t, int> slot_to_input_;
  int64_t num_slots_ = 0;
  std::map<int32_t, int64_t> blocked_channels_;  // buffer -> logical C
  int64_t channel_block_ = 0;
  bool integer_ = false;
};

// The few weights of a MatMulInteger whose difference d from their zero
// point leaves s8: the call runs on clamp(d, -128, 127), and Run adds the
// rest, dst[m, n] += (x[m, k] - x_zero_point) * (d - clamp(d)), exactly in
// s32. A and dst are row-major [rows, k] and [rows, n].
struct WeightResiduals {
  struct Entry {
    int64_t k, n;
    int32_t residual;
  };
  std::vector<Entry> entries;
  int64_t rows = 0, k = 0, n = 0;
  int32_t src_zero_point = 0;  // a constant one (else the run-time value)
  ir::DType src_dtype = ir::DType::kU8;
};

// The parts of the translation Create hands to OneDnnCall and keeps for Run.
struct Translation {
  FusedCall call;
  const Tensor* weights = nullptr;  // constant weights, or nullptr
  const Tensor* bias = nullptr;
  std::deque<Tensor> owned;  // scaled / reshaped constants (stable addresses)
  int src_input = -1;
  int weights_input = -1;  // runtime weights (MatMul)
  // A run-time src zero point (one u8 / s8 element, IntegerCall::
  // runtime_src_zero_point): Run reads it and hands it to the call.
  int src_zero_point_input = -1;
  ir::DType src_zero_point_dtype = ir::DType::kU8;
  // MatMulInteger's constant weights minus their zero point where that
  // leaves s8 (WeightResiduals): Run adds them to the s32 dst.
  WeightResiduals residuals;
  // An s8 src the call runs as u8 (x + 128, see FlipS8SrcWithoutVnni): Run
  // flips it into a scratch copy first.
  bool flip_src = false;
  std::vector<PointerSource> binary;  // per binary post-op, in order
  std::optional<SumCopy> sum;
  TensorSpec sum_operand;  // the sum operand's buffer, when `sum` is set
  // The sum rewritten as binary add `sum_binary` (SumAsBinaryAdd), reading
  // `sum_binary_bytes` bytes of its operand.
  int sum_binary = -1;
  int64_t sum_binary_bytes = 0;
};

// The sum post-op as a binary add of its operand (read in place of the copy
// into dst): oneDNN's gemm-based matmul has only its reference kernel for
// some chains with a sum (e.g. +add[N]+sum) but takes the same chain with a
// full-size binary add. False when there is nothing to rewrite.
bool SumAsBinaryAdd(Translation& t) {
  if (!t.sum.has_value() || t.sum->scale != 1.0f) return false;
  std::vector<PostOp>& ops = t.call.post_ops;
  int binaries_before = 0;
  for (PostOp& p : ops) {
    if (p.kind == PostOpKind::kSum) {
      p = PostOp::Add(t.sum_operand);
      t.binary.insert(t.binary.begin() + binaries_before, {t.sum->input, nullptr});
      t.sum_binary = binaries_before;
      t.sum_binary_bytes = t.sum->storage_bytes;
      t.sum.reset();
      return true;
    }
    if (p.is_binary()) ++binaries_before;
  }
  return false;
}

// Elements a strided spec addresses (its largest offset + 1).
int64_t SpecExtent(const TensorSpec& spec) {
  const std::vector<int64_t> strides = spec.EffectiveStrides();
  int64_t last = 0;
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    if (spec.shape[d] == 0) return 0;
    last += (spec.shape[d] - 1) * strides[d];
  }
  return last + 1;
}

const Tensor* Own(Translation& t, Tensor tensor) {
  t.owned.push_back(std::move(tensor));
  return &t.owned.back();
}

Tensor Scaled(const Tensor& t, double scale) {
  Tensor out = t;
  float* d = out.data<float>();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    d[i] = static_cast<float>(d[i] * scale);
  }
  return out;
}

// A binary post-op reading node input `slot` (its buffer as laid out).
PostOp BinaryFromSlot(const Translator& tr, PostOpKind kind, int64_t slot,
                      Translation& t) {
  PostOp p;
  p.kind = kind;
  p.operand = tr.SpecOf(tr.InputBufferIndex(slot));
  t.binary.push_back({tr.Input(slot), nullptr});
  return p;
}

PostOp BinaryFromOwned(PostOpKind kind, TensorSpec spec, const Tensor* data,
                       Translation& t) {
  PostOp p;
  p.kind = kind;
  p.operand = std::move(spec);
  t.binary.push_back({-1, data->raw_data()});
  return p;
}

// Pads from ONNX's auto_pad / pads for a forward conv.
absl::Status ConvPads(const Translator& tr, const Shape& x, const Shape& w,
                      ConvParams* conv) {
  const size_t spatial = x.size() - 2;
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, tr.String("auto_pad", "NOTSET"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, tr.Ints("pads"));
  conv->pads_begin.assign(spatial, 0);
  conv->pads_end.assign(spatial, 0);
  if (auto_pad == "NOTSET" || auto_pad.empty()) {
    if (!pads.empty()) {
      if (pads.size() != 2 * spatial) {
        return tr.Invalid("pads has ", pads.size(), " values for ", spatial,
                          " spatial dims");
      }
      for (size_t i = 0; i < spatial; ++i) {
        conv->pads_begin[i] = pads[i];
        conv->pads_end[i] = pads[spatial + i];
      }
    }
    return absl::OkStatus();
  }
  if (auto_pad == "VALID") return absl::OkStatus();
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return tr.Invalid("unknown auto_pad '", auto_pad, "'");
  }
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t in = x[2 + i], s = conv->strides[i], d = conv->dilations[i];
    const int64_t ek = (w[2 + i] - 1) * d + 1;
    const int64_t out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
    const int64_t half = total / 2;
    conv->pads_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
    conv->pads_end[i] = total - conv->pads_begin[i];
  }
  return absl::OkStatus();
}

// Pads of a ConvTranspose: explicit, VALID, or from auto_pad SAME_* /
// output_shape as ONNX defines them.
absl::Status ConvTransposePads(const Translator& tr, const Shape& x,
                               const Shape& w, ConvParams* conv) {
  const size_t spatial = x.size() - 2;
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, tr.String("auto_pad", "NOTSET"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, tr.Ints("pads"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_shape, tr.Ints("output_shape"));
  if (out_shape.size() == spatial + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != spatial) {
    return tr.Invalid("output_shape has ", out_shape.size(), " values for ",
                      spatial, " spatial dims");
  }
  if (auto_pad != "NOTSET" && auto_pad.empty() == false && auto_pad != "VALID" &&
      auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return tr.Invalid("unknown auto_pad '", auto_pad, "'");
  }
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  const bool explicit_pads = !pads.empty() && !same;
  if (explicit_pads && pads.size() != 2 * spatial) {
    return tr.Invalid("pads has ", pads.size(), " values for ", spatial, " spatial dims");
  }
  conv->pads_begin.assign(spatial, 0);
  conv->pads_end.assign(spatial, 0);
  for (size_t i = 0; i < spatial; ++i) {
    if (explicit_pads && auto_pad != "VALID") {
      conv->pads_begin[i] = pads[i];
      conv->pads_end[i] = pads[spatial + i];
    }
    if ((out_shape.empty() && !same) || explicit_pads) continue;
    const int64_t ek = (w[2 + i] - 1) * conv->dilations[i] + 1;
    const int64_t full =
        conv->strides[i] * (x[2 + i] - 1) + conv->output_padding[i] + ek;
    const int64_t out = !out_shape.empty() ? out_shape[i] : x[2 + i] * conv->strides[i];
    const int64_t total = full - out;
    if (total < 0) {
      return tr.Unimplemented("ConvTranspose output larger than its full extent "
                              "(negative pads)");
    }
    const int64_t half = total / 2;
    conv->pads_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
    conv->pads_end[i] = total - conv->pads_begin[i];
  }
  return absl::OkStatus();
}

// Node input positions of a conv's X, W and bias (QLinearConv interleaves
// scales and zero points).
struct ConvSlots {
  int64_t x = 0, w = 1, bias = 2;
};

absl::Status TranslateConv(const Translator& tr, bool transpose,
                           int64_t anchor_inputs, Translation& t,
                           ConvSlots slots = {}) {
  FusedCall& c = t.call;
  c.kind = transpose ? CallKind::kConvTranspose : CallKind::kConv;
  if (!tr.Has(slots.x) || !tr.Has(slots.w)) return tr.Invalid("needs X and W");
  c.src = tr.SpecOf(tr.InputBufferIndex(slots.x));
  t.src_input = tr.Input(slots.x);
  const Shape& x = c.src.shape;
  const Shape w = tr.InputBuffer(slots.w).shape;
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size()) {
    return tr.Unimplemented("only 1-D to 3-D convolutions are supported (X ",
                            ir::ShapeToString(x), ", W ", ir::ShapeToString(w), ")");
  }
  t.weights = tr.Constant(slots.w);
  if (t.weights == nullptr) {
    // Runtime f32 weights: read in their plain layout at each run (no
    // prepacking; oneDNN picks a kernel that takes that layout). Integer
    // calls need constant weights (their zero point is subtracted once).
    if (tr.InputBuffer(slots.w).dtype != ir::DType::kF32) {
      return tr.Unimplemented("weights are not a constant buffer");
    }
    t.weights_input = tr.Input(slots.w);
  }
  c.weights = TensorSpec{tr.InputBuffer(slots.w).dtype, w, {}};
  const size_t spatial = x.size() - 2;
  KILN_ASSIGN_OR_RETURN(c.conv.groups, tr.Int("group", 1));
  KILN_ASSIGN_OR_RETURN(c.conv.strides, tr.Ints("strides"));
  KILN_ASSIGN_OR_RETURN(c.conv.dilations, tr.Ints("dilations"));
  if (c.conv.strides.empty()) c.conv.strides.assign(spatial, 1);
  if (c.conv.dilations.empty()) c.conv.dilations.assign(spatial, 1);
  if (c.conv.strides.size() != spatial || c.conv.dilations.size() != spatial) {
    return tr.Invalid("strides/dilations do not have ", spatial, " values");
  }
  for (size_t i = 0; i < spatial; ++i) {
    if (c.conv.strides[i] < 1 || c.conv.dilations[i] < 1) {
      return tr.Invalid("strides and dilations must be >= 1");
    }
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel_shape, tr.Ints("kernel_shape"));
  if (!kernel_shape.empty() && kernel_shape != Shape(w.begin() + 2, w.end())) {
    return tr.Invalid("kernel_shape does not match the weights ", ir::ShapeToString(w));
  }
  if (transpose) {
    KILN_ASSIGN_OR_RETURN(c.conv.output_padding, tr.Ints("output_padding"));
    if (c.conv.output_padding.empty()) c.conv.output_padding.assign(spatial, 0);
    if (c.conv.output_padding.size() != spatial) {
      return tr.Invalid("output_padding does not have ", spatial, " values");
    }
    KILN_RETURN_IF_ERROR(ConvTransposePads(tr, x, w, &c.conv));
  } else {
    KILN_RETURN_IF_ERROR(ConvPads(tr, x, w, &c.conv));
  }
  if (anchor_inputs > slots.bias && tr.Has(slots.bias)) {
    const Buffer& b = tr.InputBuffer(slots.bias);
    if (b.shape.size() != 1) return tr.Invalid("bias is not 1-D");
    t.bias = tr.Constant(slots.bias);
    if (t.bias != nullptr) {
      c.bias = TensorSpec{b.dtype, b.shape, {}};
    } else {
      if (b.dtype != ir::DType::kF32) return tr.Unimplemented("a runtime integer bias");
      // A runtime bias: a per-channel binary add before the post-ops.
      TensorSpec spec{ir::DType::kF32, Shape(spatial + 1, 1), {}};
      spec.shape[0] = b.shape[0];
      spec.strides.assign(spatial + 1, 1);
      PostOp add;
      add.kind = PostOpKind::kAdd;
      add.operand = spec;
      c.post_ops.push_back(add);
      t.binary.push_back({tr.Input(slots.bias), nullptr});
    }
  }
  return absl::OkStatus();
}

// ---- Integer calls: ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul.

// The values of a constant scale or zero point input (absent: `absent`, one
// value). Unimplemented when it is a runtime value: the call is built once.
absl::StatusOr<std::vector<double>> QuantConstant(const Translator& tr, int64_t slot,
                                                  const char* what, double absent) {
  if (!tr.Has(slot)) return std::vector<double>{absent};
  const Tensor* c = tr.Constant(slot);
  if (c == nullptr) return tr.Unimplemented(what, " is not a constant");
  std::vector<double> v(static_cast<size_t>(c->num_elements()));
  for (int64_t i = 0; i < c->num_elements(); ++i) v[i] = c->GetAsDouble(i);
  if (v.empty()) return tr.Invalid(what, " is empty");
  return v;
}

// A per-tensor parameter (one value) as an int32 zero point.
absl::StatusOr<int32_t> ScalarZeroPoint(const Translator& tr, int64_t slot,
                                        const char* what) {
  KILN_ASSIGN_OR_RETURN(std::vector<double> v, QuantConstant(tr, slot, what, 0));
  if (v.size() != 1) {
    return tr.Unimplemented("a per-channel ", what, " (oneDNN takes one value)");
  }
  return static_cast<int32_t>(v[0]);
}

// The src zero point of an integer call (node input `slot`): a constant
// (one value), or one u8 / s8 element computed at run time (what
// DynamicQuantizeLinear writes), which the call reads at each run as oneDNN's
// run-time src zero point. A per-row zero point is refused, constant or not.
absl::Status SrcZeroPoint(const Translator& tr, int64_t slot, const char* what,
                          IntegerCall& q, Translation& t) {
  if (!tr.Has(slot) || tr.Constant(slot) != nullptr) {
    KILN_ASSIGN_OR_RETURN(q.src_zero_point, ScalarZeroPoint(tr, slot, what));
    return absl::OkStatus();
  }
  const Buffer& b = tr.InputBuffer(slot);
  int64_t count = 1;
  for (int64_t d : b.shape) count *= d;
  if (count != 1) {
    return tr.Unimplemented("a per-row run-time ", what, " (oneDNN takes one value)");
  }
  if (b.dtype != ir::DType::kU8 && b.dtype != ir::DType::kI8) {
    return tr.Invalid(what, " is ", ir::DTypeName(b.dtype), ", not u8 or s8");
  }
  q.runtime_src_zero_point = true;
  t.src_zero_point_input = tr.Input(slot);
  t.src_zero_point_dtype = b.dtype;
  return absl::OkStatus();
}

// oneDNN 2.6 takes s8 weights with a zero point of 0 only. The constant u8
// or s8 weights minus their zero point (one value, or one per output channel
// `channel_of(i)` of element i) become the s8 weights the call runs on,
// which is exact when every difference fits in s8; otherwise Unimplemented
// (naming why), and the node stays on the reference interpreter.
//
// With `residuals` (MatMulInteger with VNNI), differences outside s8 are
// clamped and recorded in t.residuals (element indices) while they are at
// most one in kMaxResidualFraction of the weights; Run adds them.
constexpr int64_t kMaxResidualFraction = 256;

template <typename ChannelOf>
absl::Status ShiftWeightsToS8(const Translator& tr, const std::vector<double>& zero_points,
                              int64_t channels, ChannelOf channel_of, Translation& t,
                              bool residuals = false) {
  const Tensor& w = *t.weights;
  if (zero_points.size() != 1 && static_cast<int64_t>(zero_points.size()) != channels) {
    return tr.Invalid(zero_points.size(), " weight zero points for ", channels,
                      " output channels");
  }
  const bool zero = std::all_of(zero_points.begin(), zero_points.end(),
                                [](double z) { return z == 0; });
  if (w.dtype() == ir::DType::kI8 && zero) return absl::OkStatus();
  Tensor shifted(ir::DType::kI8, w.shape());
  int8_t* out = shifted.data<int8_t>();
  for (int64_t i = 0; i < w.num_elements(); ++i) {
    const double z = zero_points.size() == 1 ? zero_points[0] : zero_points[channel_of(i)];
    const double d = w.GetAsDouble(i) - z;
    if ((d < -128 || d > 127) && residuals &&
        static_cast<int64_t>(t.residuals.entries.size() + 1) * kMaxResidualFraction <=
            w.num_elements()) {
      const double clamped = std::clamp(d, -128.0, 127.0);
      t.residuals.entries.push_back({i, 0, static_cast<int32_t>(d - clamped)});
      out[i] = static_cast<int8_t>(clamped);
      continue;
    }
    if (d < -128 || d > 127) {
      return tr.Unimplemented(
          "weights minus their zero point do not fit in s8 (", w.GetAsDouble(i), " - ", z,
          "): oneDNN 2.6 runs integer weights as s8 with a zero point of 0");
    }
    out[i] = static_cast<int8_t>(d);
  }
  t.weights = Own(t, std::move(shifted));
  t.call.weights.dtype = ir::DType::kI8;
  return absl::OkStatus();
}

// Whether oneDNN's int8 kernels on this CPU have VNNI (vpdpbusd: exact s32
// accumulation of u8 x s8 products).
bool HasVnni() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
}

// oneDNN 2.6's int8 kernels on CPUs without VNNI run an s8 src with the
// weights halved ("scale adjust"), which rounds odd weights (measured:
// integer_call_test). The call runs an s8 src as u8 instead, exactly:
// sum (x - z) * w = sum ((x + 128) - (z + 128)) * w, so Run feeds x + 128
// (x ^ 0x80 bit for bit) and the src zero point becomes z + 128, which is
// within [0, 255] for any s8 z (a run-time z: Run adds the 128).
void FlipS8SrcWithoutVnni(Translation& t, IntegerCall& q) {
  if (HasVnni() || t.call.src.dtype != ir::DType::kI8) return;
  t.call.src.dtype = ir::DType::kU8;
  if (!q.runtime_src_zero_point) q.src_zero_point += 128;
  t.flip_src = true;
}

// oneDNN 2.6's int8 kernels on CPUs without VNNI multiply u8 by s8 with
// vpmaddubsw, which adds each pair of products in saturating 16 bits: exact
// while |w| <= 64 (2 * 255 * 64 < 2^15). Calls with other weights are
// refused, naming why (the src is u8 here: FlipS8SrcWithoutVnni ran).
absl::Status CheckExactOnThisCpu(const Translator& tr, const Translation& t) {
  if (HasVnni()) return absl::OkStatus();
  const std::string isa = OneDnnCpuIsa();
  if (t.call.src.dtype != ir::DType::kU8) {
    return InternalError(tr.Where(), ": an s8 src without VNNI was not flipped to u8");
  }
  const Tensor& w = *t.weights;
  for (int64_t i = 0; i < w.num_elements(); ++i) {
    const double v = w.GetAsDouble(i);
    if (v < -64 || v > 64) {
      return tr.Unimplemented("oneDNN's int8 kernels on ", isa,
                              " (no VNNI) add u8 x s8 products in saturating 16 bits: "
                              "weights outside [-64, 64] (here ", v, ") would overflow");
    }
  }
  return absl::OkStatus();
}

// Requantization of a QLinear* call: scale = a_scale * b_scale[c] / y_scale
// per output channel c (in f32, as ONNX Runtime computes it), dst zero point.
absl::Status QLinearScales(const Translator& tr, int64_t a_scale_slot, int64_t b_scale_slot,
                           int64_t y_scale_slot, int64_t y_zp_slot, int64_t channels,
                           IntegerCall& q) {
  KILN_ASSIGN_OR_RETURN(std::vector<double> as, QuantConstant(tr, a_scale_slot, "the input scale", 1));
  KILN_ASSIGN_OR_RETURN(std::vector<double> bs, QuantConstant(tr, b_scale_slot, "the weight scale", 1));
  KILN_ASSIGN_OR_RETURN(std::vector<double> ys, QuantConstant(tr, y_scale_slot, "the output scale", 1));
  if (as.size() != 1 || ys.size() != 1) {
    return tr.Unimplemented("per-channel input or output scales");
  }
  if (bs.size() != 1 && static_cast<int64_t>(bs.size()) != channels) {
    return tr.Invalid(bs.size(), " weight scales for ", channels, " output channels");
  }
  for (double b : bs) {
    q.scales.push_back(static_cast<float>(as[0]) * static_cast<float>(b) /
                       static_cast<float>(ys[0]));
  }
  KILN_ASSIGN_OR_RETURN(q.dst_zero_point, ScalarZeroPoint(tr, y_zp_slot, "output zero point"));
  return absl::OkStatus();
}

// ConvInteger(x, w, x_zero_point, w_zero_point) -> s32, and QLinearConv(x,
// x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
// B) -> u8/s8.
absl::Status TranslateIntegerConv(const Translator& tr, bool qlinear, Translation& t) {
  const ConvSlots slots = qlinear ? ConvSlots{0, 3, 8} : ConvSlots{0, 1, 99};
  KILN_RETURN_IF_ERROR(TranslateConv(tr, /*transpose=*/false, tr.num_slots(), t, slots));
  FusedCall& c = t.call;
  IntegerCall q;
  KILN_RETURN_IF_ERROR(SrcZeroPoint(tr, 2, "input zero point", q, t));
  KILN_ASSIGN_OR_RETURN(std::vector<double> wzp,
                        QuantConstant(tr, qlinear ? 5 : 3, "weight zero point", 0));
  const int64_t oc = t.weights->shape()[0];
  const int64_t per_oc = t.weights->num_elements() / oc;
  KILN_RETURN_IF_ERROR(ShiftWeightsToS8(
      tr, wzp, oc, [per_oc](int64_t i) { return i / per_oc; }, t));
  FlipS8SrcWithoutVnni(t, q);
  KILN_RETURN_IF_ERROR(CheckExactOnThisCpu(tr, t));
  if (qlinear) KILN_RETURN_IF_ERROR(QLinearScales(tr, 1, 4, 6, 7, oc, q));
  c.integer = std::move(q);
  return absl::OkStatus();
}

// An activation B (a runtime s8 operand, batched like A: attention's
// Q x K^T and softmax x V in a QDQ model): B's zero point stays with the call
// (oneDNN's common weights zero point) and nothing is prepacked. A u8 B is
// refused: oneDNN 2.6 takes s8 weights only, and graph pass fuse-qdq writes
// the u8 B of a QDQ pattern as s8 (b - 128, zero point - 128) where it is
// produced. Without VNNI the weights' range cannot be checked at build time,
// so the call is refused there.
absl::Status TranslateRuntimeB(const Translator& tr, int64_t b_slot, int64_t bzp_slot,
                               IntegerCall& q, Translation& t) {
  const Buffer& bb = tr.InputBuffer(b_slot);
  if (bb.dtype != ir::DType::kI8) {
    return tr.Unimplemented("a runtime ", ir::DTypeName(bb.dtype),
                            " B: oneDNN 2.6's integer matmul takes s8 weights");
  }
  if (!HasVnni()) {
    return tr.Unimplemented("a runtime B on ", OneDnnCpuIsa(),
                            " (no VNNI): its values cannot be checked to fit [-64, 64]");
  }
  KILN_ASSIGN_OR_RETURN(q.weights_zero_point, ScalarZeroPoint(tr, bzp_slot, "B's zero point"));
  t.call.weights = Translator::Spec(bb);
  t.weights_input = tr.Input(b_slot);
  return absl::OkStatus();
}

// MatMulInteger(A, B, a_zero_point, b_zero_point) -> s32, and
// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point,
// y_scale, y_zero_point) -> u8/s8, with constant 2-D B or a runtime s8 B
// (TranslateRuntimeB).
absl::Status TranslateIntegerMatMul(const Translator& tr, bool qlinear, Translation& t) {
  FusedCall& c = t.call;
  c.kind = CallKind::kMatMul;
  const int64_t a_slot = 0, b_slot = qlinear ? 3 : 1, bzp_slot = qlinear ? 5 : 3;
  if (!tr.Has(a_slot) || !tr.Has(b_slot)) return tr.Invalid("needs A and B");
  const Buffer& ab = tr.InputBuffer(a_slot);
  const Buffer& bb = tr.InputBuffer(b_slot);
  const bool runtime_b = tr.Constant(b_slot) == nullptr;
  if (ab.shape.size() < 2 || bb.shape.size() < 2 || (!runtime_b && bb.shape.size() != 2)) {
    return tr.Unimplemented("integer MatMul with a 1-D operand or a batched constant B");
  }
  c.src = Translator::Spec(ab);
  c.dst = Translator::Spec(tr.OutputBuffer());
  t.src_input = tr.Input(a_slot);
  IntegerCall q;
  KILN_RETURN_IF_ERROR(SrcZeroPoint(tr, 2, "A's zero point", q, t));
  const int64_t n = bb.shape.back();
  if (runtime_b) {
    KILN_RETURN_IF_ERROR(TranslateRuntimeB(tr, b_slot, bzp_slot, q, t));
    if (qlinear) KILN_RETURN_IF_ERROR(QLinearScales(tr, 1, 4, 6, 7, n, q));
    c.integer = std::move(q);
    return absl::OkStatus();
  }
  t.weights = tr.Constant(b_slot);
  c.weights = TensorSpec{bb.dtype, bb.shape, {}};
  KILN_ASSIGN_OR_RETURN(std::vector<double> bzp,
                        QuantConstant(tr, bzp_slot, "B's zero point", 0));
  // Residuals: only for an s32 dst (no requantization) on row-major
  // operands, and with VNNI (without it the clamped weights overflow anyway).
  const bool residuals = !qlinear && HasVnni() && c.src.strides.empty() &&
                         c.dst.strides.empty() && c.dst.dtype == ir::DType::kI32;
  KILN_RETURN_IF_ERROR(
      ShiftWeightsToS8(tr, bzp, n, [n](int64_t i) { return i % n; }, t, residuals));
  if (!t.residuals.entries.empty()) {
    WeightResiduals& r = t.residuals;
    for (WeightResiduals::Entry& e : r.entries) {
      e.n = e.k % n;
      e.k /= n;
    }
    r.k = bb.shape[0];
    r.n = n;
    r.rows = SpecExtent(c.src) / r.k;
    r.src_zero_point = q.src_zero_point;
    r.src_dtype = c.src.dtype;
  }
  FlipS8SrcWithoutVnni(t, q);
  KILN_RETURN_IF_ERROR(CheckExactOnThisCpu(tr, t));
  if (qlinear) KILN_RETURN_IF_ERROR(QLinearScales(tr, 1, 4, 6, 7, n, q));
  c.integer = std::move(q);
  return absl::OkStatus();
}

// Appends dst += beta * C as post-ops (C from node input 2, broadcasting to
// [m, n]). A constant C is scaled once; one that broadcasts along rows only
// ([m, 1]) is expanded to [m, n], since oneDNN's optimized kernels take
// scalar, per-column and full binary operands.
absl::Status AppendGemmC(const Translator& tr, double beta, int64_t m, int64_t n,
                         Translation& t) {
  FusedCall& c = t.call;
  if (beta == 0.0) return absl::OkStatus();
  const Shape cs = tr.InputBuffer(2).shape;
  if (const Tensor* data = tr.Constant(2)) {
    const bool direct = cs.empty() || cs == Shape{n} || cs == Shape{1, n} ||
                        cs == Shape{m, n};
    if (direct && beta == 1.0) {
      c.post_ops.push_back(BinaryFromSlot(tr, PostOpKind::kAdd, 2, t));
      return absl::OkStatus();
    }
    Tensor operand = Scaled(*data, beta);
    if (!direct) {
      if (cs.size() > 2 || ir::NumElements(cs) <= 0) {
        return tr.Invalid("C ", ir::ShapeToString(cs), " does not broadcast to [",
                          m, ",", n, "]");
      }
      Tensor full(ir::DType::kF32, {m, n});
      const int64_t rows = cs.size() == 2 ? cs[0] : 1;
      const int64_t cols = cs.back();
      if ((rows != 1 && rows != m) || (cols != 1 && cols != n)) {
        return tr.Invalid("C ", ir::ShapeToString(cs), " does not broadcast to [",
                          m, ",", n, "]");
      }
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          full.data<float>()[i * n + j] = operand.data<float>()[(rows == 1 ? 0 : i) * cols +
                                                                (cols == 1 ? 0 : j)];
        }
      }
      operand = std::move(full);
    }
    const Shape shape = operand.shape();
    const Tensor* owned = Own(t, std::move(operand));
    c.post_ops.push_back(BinaryFromOwned(
        PostOpKind::kAdd, TensorSpec{ir::DType::kF32, shape, {}}, owned, t));
    return absl::OkStatus();
  }
  if (beta != 1.0) {
    // beta * (x / beta + C) would need two linear post-ops (see
    // CheckLinearPostOps); oneDNN's binary post-op has no operand scale.
    return tr.Unimplemented("Gemm beta != 1 with a runtime C");
  }
  c.post_ops.push_back(BinaryFromSlot(tr, PostOpKind::kAdd, 2, t));
  return absl::OkStatus();
}

absl::Status TranslateGemm(const Translator& tr, int64_t anchor_inputs,
                           Translation& t) {
  FusedCall& c = t.call;
  if (!tr.Has(0) || !tr.Has(1)) return tr.Invalid("needs A and B");
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, tr.Int("transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, tr.Int("transB", 0));
  KILN_ASSIGN_OR_RETURN(double alpha, tr.Float("alpha", 1.0));
  KILN_ASSIGN_OR_RETURN(double beta, tr.Float("beta", 1.0));
  const Buffer& ab = tr.InputBuffer(0);
  const Buffer& bb = tr.InputBuffer(1);
  if (ab.shape.size() != 2 || bb.shape.size() != 2) {
    return tr.Invalid("Gemm operands must be 2-D");
  }
  if (!std::isfinite(alpha) || !std::isfinite(beta)) {
    return tr.Unimplemented("non-finite alpha/beta");
  }
  // src: logical [M, K] over A's buffer.
  c.src = TensorSpec{ab.dtype, ab.shape, ab.strides};
  if (trans_a) {
    c.src.shape = {ab.shape[1], ab.shape[0]};
    c.src.strides = {ab.strides[1], ab.strides[0]};
  }
  t.src_input = tr.Input(0);
  const int64_t m = c.src.shape[0];
  const int64_t n = trans_b ? bb.shape[0] : bb.shape[1];
  const bool has_c = anchor_inputs > 2 && tr.Has(2);
  const Tensor* b_const = tr.Constant(1);
  if (b_const != nullptr) {
    // Linear: weights [N, K] over B's buffer, alpha folded into a copy.
    c.kind = CallKind::kInnerProduct;
    c.weights = TensorSpec{ir::DType::kF32, {n, trans_b ? bb.shape[1] : bb.shape[0]}, {}};
    if (!trans_b) c.weights.strides = {1, n};
    t.weights = alpha == 1.0 ? b_const : Own(t, Scaled(*b_const, alpha));
    if (has_c && beta != 0.0) {
      const Shape& cs = tr.InputBuffer(2).shape;
      const bool per_column = (cs.size() == 1 && cs[0] == n) ||
                              (cs.size() == 2 && cs[0] == 1 && cs[1] == n);
      const Tensor* c_const = tr.Constant(2);
      if (per_column && c_const != nullptr) {
        KILN_ASSIGN_OR_RETURN(Tensor bias, c_const->Reshaped({n}));
        t.bias = beta == 1.0 && cs.size() == 1 ? c_const
                                               : Own(t, Scaled(bias, beta));
        c.bias = TensorSpec{ir::DType::kF32, {n}, {}};
      } else {
        KILN_RETURN_IF_ERROR(AppendGemmC(tr, beta, m, n, t));
      }
    }
    return absl::OkStatus();
  }
  // Activation B: a matmul with runtime weights [K, N].
  c.kind = CallKind::kMatMul;
  c.weights = TensorSpec{ir::DType::kF32, bb.shape, bb.strides};
  if (trans_b) {
    c.weights.shape = {bb.shape[1], bb.shape[0]};
    c.weights.strides = {bb.strides[1], bb.strides[0]};
  }
  t.weights_input = tr.Input(1);
  if (alpha != 1.0) c.post_ops.push_back(PostOp::Linear(static_cast<float>(alpha), 0.0f));
  if (has_c) KILN_RETURN_IF_ERROR(AppendGemmC(tr, beta, m, n, t));
  return absl::OkStatus();
}

absl::Status TranslateMatMul(const Translator& tr, Translation& t,
                             bool has_post_ops) {
  FusedCall& c = t.call;
  c.kind = CallKind::kMatMul;
  if (!tr.Has(0) || !tr.Has(1)) return tr.Invalid("needs A and B");
  const Buffer& ab = tr.InputBuffer(0);
  const Buffer& bb = tr.InputBuffer(1);
  const Buffer& yb = tr.OutputBuffer();
  c.src = Translator::Spec(ab);
  c.weights = Translator::Spec(bb);
  c.dst = Translator::Spec(yb);
  const bool a1 = ab.shape.size() == 1, b1 = bb.shape.size() == 1;
  if (a1 || b1) {
    // 1-D operands as [1, K] / [K, 1]; the dst gains the matching 1.
    if (has_post_ops) {
      return tr.Unimplemented("post-ops on a MatMul with a 1-D operand");
    }
    if (!yb.IsRowMajor()) return tr.Unimplemented("1-D MatMul into a strided dst");
    if (a1) c.src = TensorSpec{ab.dtype, {1, ab.shape[0]},
                                        {ab.shape[0] * ab.strides[0], ab.strides[0]}};
    if (b1) c.weights = TensorSpec{ir::DType::kF32, {bb.shape[0], 1}, {bb.strides[0], 1}};
    Shape dst = yb.shape;
    if (a1) dst.insert(dst.end() - (b1 ? 0 : 1), 1);
    if (b1) dst.push_back(1);
    c.dst = TensorSpec{yb.dtype, dst, {}};
  }
  t.src_input = tr.Input(0);
  if (const Tensor* w = tr.Constant(1)) {
    if (b1) {
      KILN_ASSIGN_OR_RETURN(Tensor reshaped, w->Reshaped(c.weights.shape));
      t.weights = Own(t, std::move(reshaped));
      c.weights.strides.clear();
    } else {
      t.weights = w;
    }
  } else {
    t.weights_input = tr.Input(1);
  }
  return absl::OkStatus();
}

absl::StatusOr<PostOpKind> PostOpKindFromName(absl::string_view name) {
  static const std::pair<const char*, PostOpKind> kKinds[] = {
      {"relu", PostOpKind::kRelu},           {"leaky_relu", PostOpKind::kLeakyRelu},
      {"elu", PostOpKind::kElu},             {"gelu_erf", PostOpKind::kGeluErf},
      {"gelu_tanh", PostOpKind::kGeluTanh},  {"swish", PostOpKind::kSwish},
      {"sigmoid", PostOpKind::kSigmoid},     {"tanh", PostOpKind::kTanh},
      {"hardswish", PostOpKind::kHardSwish}, {"hardsigmoid", PostOpKind::kHardSigmoid},
      {"clip", PostOpKind::kClip},           {"linear", PostOpKind::kLinear},
      {"add", PostOpKind::kAdd},             {"sub", PostOpKind::kSub},
      {"mul", PostOpKind::kMul},             {"sum", PostOpKind::kSum}};
  for (const auto& [n, k] : kKinds) {
    if (name == n) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown post-op '", name, "'"));
}

// The fused node's post-op chain, appended after what the anchor added.
absl::Status TranslatePostOps(const Translator& tr, Translation& t) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> kinds, tr.StringList("post_ops"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> alphas, tr.Floats("post_op_alphas"));
  KILN_ASSIGN_OR_RETURN(std::vector<double> betas, tr.Floats("post_op_betas"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> inputs, tr.Ints("post_op_inputs"));
  if (alphas.size() != kinds.size() || betas.size() != kinds.size() ||
      inputs.size() != kinds.size()) {
    return tr.Invalid("post_ops, post_op_alphas, post_op_betas and "
                      "post_op_inputs differ in length");
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    absl::StatusOr<PostOpKind> kind = PostOpKindFromName(kinds[i]);
    if (!kind.ok()) return tr.Invalid(kind.status().message());
    const bool needs_operand = *kind == PostOpKind::kAdd || *kind == PostOpKind::kSub ||
                               *kind == PostOpKind::kMul || *kind == PostOpKind::kSum;
    if (needs_operand != (inputs[i] >= 0)) {
      return tr.Invalid("post-op ", i, " (", kinds[i], ") ",
                        needs_operand ? "needs" : "takes no", " operand input");
    }
    if (needs_operand && !tr.Has(inputs[i])) {
      return tr.Invalid("post-op ", kinds[i], " reads input ", inputs[i],
                        ", which the call lacks");
    }
    const float a = static_cast<float>(alphas[i]), b = static_cast<float>(betas[i]);
    PostOp p;
    switch (*kind) {
      case PostOpKind::kAdd:
      case PostOpKind::kSub:
      case PostOpKind::kMul:
        p = BinaryFromSlot(tr, *kind, inputs[i], t);
        break;
      case PostOpKind::kSum: {
        if (t.sum.has_value()) return tr.Unimplemented("more than one sum post-op");
        const Buffer& operand = tr.InputBuffer(inputs[i]);
        const Buffer& dst = tr.OutputBuffer();
        if (dst.dtype == ir::DType::kBF16 || operand.dtype == ir::DType::kBF16) {
          return tr.Unimplemented("a sum post-op on a ", ir::DTypeName(dst.dtype),
                                  " destination (it copies f32 into it)");
        }
        if (operand.shape != dst.shape) {
          return tr.Invalid("sum operand ", ir::ShapeToString(operand.shape),
                            " does not have the output's shape ",
                            ir::ShapeToString(dst.shape));
        }
        p = PostOp::Sum(1.0f);
        const bool same_buffer = tr.InputBufferIndex(inputs[i]) == tr.OutputBufferIndex();
        if (!same_buffer || a != 1.0f) {
          SumCopy copy;
          copy.input = tr.Input(inputs[i]);
          copy.scale = a;
          copy.dense = operand.IsRowMajor() && dst.IsRowMajor();
          copy.bytes = ir::NumElements(dst.shape) * static_cast<int64_t>(sizeof(float));
          copy.storage_bytes =
              operand.StorageSize().value_or(0) * static_cast<int64_t>(sizeof(float));
          copy.shape = dst.shape;
          copy.src_strides = operand.strides;
          copy.dst_strides = dst.strides;
          t.sum = std::move(copy);
          t.sum_operand = tr.SpecOf(tr.InputBufferIndex(inputs[i]));
        }
        break;
      }
      default:
        p.kind = *kind;
        p.alpha = a;
        p.beta = b;
        if (*kind == PostOpKind::kSwish && a == 0.0f) p.alpha = 1.0f;
        break;
    }
    t.call.post_ops.push_back(std::move(p));
  }
  return absl::OkStatus();
}

// A leading add of a constant per-channel (conv) / per-column (matmul,
// linear) operand becomes the call's bias: oneDNN adds a bias in its
// accumulator epilogue, and some chains (e.g. +add[N]+sum on a matmul) have
// optimized kernels only in the bias form.
absl::Status FoldLeadingAddIntoBias(const Translator& tr, Translation& t) {
  FusedCall& c = t.call;
  if (c.bias.has_value() || c.post_ops.empty() ||
      c.post_ops[0].kind != PostOpKind::kAdd || t.binary.empty() ||
      t.binary[0].input < 0) {
    return absl::OkStatus();
  }
  const Tensor* data = tr.ConstantOfInput(t.binary[0].input);
  if (data == nullptr) return absl::OkStatus();
  const Shape& op = data->shape();
  const Shape& dst = c.dst.shape;
  if (op.size() > dst.size() || op.empty()) return absl::OkStatus();
  // The one dim the operand varies along, aligned to dst.
  const size_t offset = dst.size() - op.size();
  const size_t channel_dim = c.kind == CallKind::kConv || c.kind == CallKind::kConvTranspose
                                 ? 1
                                 : dst.size() - 1;
  for (size_t i = 0; i < op.size(); ++i) {
    const bool is_channel = offset + i == channel_dim;
    if (op[i] != (is_channel ? dst[channel_dim] : 1)) return absl::OkStatus();
  }
  if (channel_dim < offset) return absl::OkStatus();
  Shape bias_shape = {dst[channel_dim]};
  if (c.kind == CallKind::kMatMul) bias_shape = op;
  KILN_ASSIGN_OR_RETURN(Tensor bias, data->Reshaped(bias_shape));
  t.bias = Own(t, std::move(bias));
  c.bias = TensorSpec{ir::DType::kF32, bias_shape, {}};
  c.post_ops.erase(c.post_ops.begin());
  t.binary.erase(t.binary.begin());
  return absl::OkStatus();
}

// Adjacent linear post-ops as one: a2 (a1 x + b1) + b2.
void MergeLinearPostOps(std::vector<PostOp>* ops) {
  std::vector<PostOp> out;
  for (PostOp& p : *ops) {
    if (p.kind == PostOpKind::kLinear && !out.empty() &&
        out.back().kind == PostOpKind::kLinear) {
      PostOp& q = out.back();
      q.beta = p.alpha * q.beta + p.beta;
      q.alpha = p.alpha * q.alpha;
      continue;
    }
    out.push_back(std::move(p));
  }
  *ops = std::move(out);
}

// oneDNN 2.6 miscomputes chains with two linear post-ops: its gemm-based
// matmul / inner product on AVX2 (linear(1/3)+linear(3), linear+add+linear)
// and its brgemm matmul on AVX-512 (linear(1/3)+tanh+linear(3) applies 1/3
// twice). Such calls are refused whatever the implementation.
absl::Status CheckLinearPostOps(const Translator& tr, const OneDnnCall& call) {
  const std::vector<PostOp>& ops = call.call().post_ops;
  const auto linears = std::count_if(ops.begin(), ops.end(), [](const PostOp& p) {
    return p.kind == PostOpKind::kLinear;
  });
  if (linears >= 2) {
    return tr.Unimplemented("oneDNN's ", call.impl_name(), " miscomputes ",
                            call.call().ToString(),
                            " (two linear post-ops); keeping the reference extern");
  }
  return absl::OkStatus();
}

const char* KindName(CallKind kind) {
  switch (kind) {
    case CallKind::kConv: return "conv";
    case CallKind::kConvTranspose: return "conv_transpose";
    case CallKind::kMatMul: return "matmul";
    case CallKind::kInnerProduct: return "inner_product";
  }
  return "?";
}

// dst = scale * src over a dst-shaped tensor with both strides (no
// allocation: `index` is scratch of the tensor's rank). src may be dst.
void ScaledCopy(const SumCopy& c, const float* src, float* dst,
                std::vector<int64_t>& index) {
  const int64_t total = ir::NumElements(c.shape);
  if (c.dense) {
    if (c.scale == 1.0f) {
      if (src != dst) std::memmove(dst, src, static_cast<size_t>(c.bytes));
      return;
    }
    for (int64_t e = 0; e < total; ++e) dst[e] = c.scale * src[e];
    return;
  }
  const size_t rank = c.shape.size();
  std::fill(index.begin(), index.end(), 0);
  int64_t so = 0, d_off = 0;
  for (int64_t e = 0; e < total; ++e) {
    dst[d_off] = c.scale * src[so];
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < c.shape[d]) {
        so += c.src_strides[d];
        d_off += c.dst_strides[d];
        break;
      }
      so -= (c.shape[d] - 1) * c.src_strides[d];
      d_off -= (c.shape[d] - 1) * c.dst_strides[d];
      index[d] = 0;
    }
  }
}

// The kernel's call as a FusedCall plus its constants, in `t`.
absl::Status TranslateKernel(Translator& tr, const Kernel& kernel, Translation& t) {
  if (kernel.kind != Kernel::Kind::kExtern) {
    return tr.Invalid("not an extern kernel");
  }
  absl::string_view op = kernel.call.op;
  bool fused = false;
  if (absl::ConsumePrefix(&op, kKilnOpPrefix)) {
    fused = absl::ConsumePrefix(&op, "Fused");
    if (!fused) return tr.Unimplemented("no oneDNN mapping for this kiln op");
  } else if (!absl::ConsumePrefix(&op, kOnnxOpPrefix)) {
    return tr.Unimplemented("not an ONNX or kiln op");
  }
  const bool integer_conv = !fused && (op == "ConvInteger" || op == "QLinearConv");
  const bool integer_matmul = !fused && (op == "MatMulInteger" || op == "QLinearMatMul");
  if (integer_conv || integer_matmul) {
    tr.AllowIntegerBuffers();
    KILN_RETURN_IF_ERROR(tr.ReadSlots());
    t.call.dst = tr.SpecOf(tr.OutputBufferIndex());
    const bool qlinear = absl::StartsWith(op, "QLinear");
    KILN_RETURN_IF_ERROR(integer_conv ? TranslateIntegerConv(tr, qlinear, t)
                                      : TranslateIntegerMatMul(tr, qlinear, t));
    if (tr.AnyBlocked() && (integer_matmul || t.flip_src)) {
      return tr.Unimplemented("blocked layouts for an integer matmul or an s8 src run as u8");
    }
    return absl::OkStatus();
  }
  if (op != "Conv" && op != "ConvTranspose" && op != "Gemm" && op != "MatMul") {
    return tr.Unimplemented("no oneDNN mapping for ", op);
  }
  KILN_RETURN_IF_ERROR(tr.ReadSlots());

  // The anchor's own inputs precede the post-op operands.
  int64_t anchor_inputs = tr.num_slots();
  if (fused) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> operand_slots, tr.Ints("post_op_inputs"));
    for (int64_t s : operand_slots) {
      if (s >= 0) anchor_inputs = std::min(anchor_inputs, s);
    }
  }
  if (op == "MatMul" && anchor_inputs > 2) return tr.Invalid("MatMul takes two inputs");
  if (anchor_inputs > 3) return tr.Invalid("too many anchor inputs");

  t.call.dst = tr.SpecOf(tr.OutputBufferIndex());
  if (op == "Conv" || op == "ConvTranspose") {
    KILN_RETURN_IF_ERROR(TranslateConv(tr, op == "ConvTranspose", anchor_inputs, t));
  } else if (op == "Gemm") {
    KILN_RETURN_IF_ERROR(TranslateGemm(tr, anchor_inputs, t));
  } else {
    KILN_RETURN_IF_ERROR(TranslateMatMul(tr, t, fused));
  }
  if (fused) KILN_RETURN_IF_ERROR(TranslatePostOps(tr, t));
  MergeLinearPostOps(&t.call.post_ops);
  KILN_RETURN_IF_ERROR(FoldLeadingAddIntoBias(tr, t));
  if (tr.AnyBlocked() && t.call.kind != CallKind::kConv &&
      t.call.kind != CallKind::kConvTranspose) {
    return tr.Unimplemented("blocked activation layouts are for convolutions only");
  }
  return absl::OkStatus();
}

// dst[m, n] += (x[m, k] - zero_point) * residual for every residual and row.
template <typename T>
void AddResidualsOf(const WeightResiduals& r, const T* x, int32_t zero_point, int32_t* dst) {
  for (int64_t m = 0; m < r.rows; ++m) {
    const T* row = x + m * r.k;
    int32_t* out = dst + m * r.n;
    for (const WeightResiduals::Entry& e : r.entries) {
      out[e.n] += (static_cast<int32_t>(row[e.k]) - zero_point) * e.residual;
    }
  }
}

void AddResiduals(const WeightResiduals& r, const void* x, int32_t zero_point, int32_t* dst) {
  if (r.src_dtype == ir::DType::kU8) {
    AddResidualsOf(r, static_cast<const uint8_t*>(x), zero_point, dst);
  } else {
    AddResidualsOf(r, static_cast<const int8_t*>(x), zero_point, dst);
  }
}

}  // namespace

struct OneDnnExternKernel::Impl {
  std::string where;
  // Set for onnx.LSTM/GRU/RNN, which run on their own primitive; the rest
  // of Impl is then unused.
  std::unique_ptr<OneDnnRnnKernel> rnn;
  std::unique_ptr<OneDnnCall> call;
  ExternKernelInfo info;
  std::deque<Tensor> owned;
  size_t num_inputs = 0, num_outputs = 0;
  int src_input = -1;
  int weights_input = -1;
  // Set when the call runs an s8 src as u8: Run writes src ^ 0x80 (x + 128)
  // over the src's extent here and passes it instead.
  bool flip_src = false;
  std::vector<uint8_t> flipped;
  // A run-time src zero point (Translation::src_zero_point_input).
  int src_zero_point_input = -1;
  ir::DType src_zero_point_dtype = ir::DType::kU8;
  WeightResiduals residuals;
  std::vector<PointerSource> binary;
  std::vector<const void*> binary_ptrs;
  std::optional<SumCopy> sum;
  std::vector<int64_t> copy_index;
  // The sum run as binary add `sum_binary`: when the memory plan gave its
  // operand dst's bytes (SumOperandInput), Run reads it from this copy, since
  // the call may write dst before its post-ops read the operand.
  int sum_binary = -1;
  std::vector<char> sum_operand_copy;
};

OneDnnExternKernel::OneDnnExternKernel(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
OneDnnExternKernel::~OneDnnExternKernel() = default;

absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> OneDnnExternKernel::Create(
    const LoopProgram& program, const Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const Tensor>>& constants,
    const OneDnnCallOptions& caller_options) {
  if (kernel.kind == Kernel::Kind::kExtern && OneDnnRnnKernel::Handles(kernel.call.op)) {
    auto impl = std::make_unique<Impl>();
    KILN_ASSIGN_OR_RETURN(impl->rnn,
                          OneDnnRnnKernel::Create(program, kernel, constants, caller_options));
    return std::unique_ptr<OneDnnExternKernel>(new OneDnnExternKernel(std::move(impl)));
  }
  Translator tr(program, kernel, constants);
  Translation t;
  KILN_RETURN_IF_ERROR(TranslateKernel(tr, kernel, t));

  // The activation form the compile-time tuner chose; a form this CPU's
  // oneDNN refuses (another machine's choice) runs the rule's instead.
  OneDnnCallOptions options = caller_options;
  std::string form, form_refused;
  if (auto it = kernel.call.attrs.find(ir::loop::kAttrCallForm);
      it != kernel.call.attrs.end() &&
      options.activation_form == OneDnnCallOptions::ActivationForm::kRule) {
    const std::string* name = std::get_if<std::string>(&it->second);
    if (name == nullptr) {
      return tr.Annotate(absl::InvalidArgumentError(
          absl::StrCat(ir::loop::kAttrCallForm, " is not a string")));
    }
    absl::StatusOr<OneDnnCallOptions::ActivationForm> f = ParseActivationForm(*name);
    if (!f.ok()) return tr.Annotate(f.status());
    options.activation_form = *f;
    form = *name;
  }
  absl::StatusOr<std::unique_ptr<OneDnnCall>> call =
      OneDnnCall::Create(t.call, t.weights, t.bias, options);
  if (!form.empty() && absl::IsUnimplemented(call.status())) {
    form_refused = std::string(call.status().message());
    options.activation_form = OneDnnCallOptions::ActivationForm::kRule;
    call = OneDnnCall::Create(t.call, t.weights, t.bias, options);
  }
  if (absl::IsUnimplemented(call.status()) && SumAsBinaryAdd(t)) {
    call = OneDnnCall::Create(t.call, t.weights, t.bias, options);
  }
  // bf16 asked for but refused (no optimized bf16 kernel on this CPU for
  // this call): the call runs in f32, and the report says why.
  std::string bf16_refused;
  if (options.bf16 && absl::IsUnimplemented(call.status())) {
    bf16_refused = std::string(call.status().message());
    OneDnnCallOptions f32 = options;
    f32.bf16 = false;
    call = OneDnnCall::Create(t.call, t.weights, t.bias, f32);
  }
  if (!call.ok()) return tr.Annotate(call.status());
  KILN_RETURN_IF_ERROR(CheckLinearPostOps(tr, **call));

  auto impl = std::make_unique<Impl>();
  impl->where = tr.Where();
  impl->call = std::move(*call);
  impl->owned = std::move(t.owned);
  impl->num_inputs = kernel.call.inputs.size();
  impl->num_outputs = kernel.call.outputs.size();
  impl->src_input = t.src_input;
  impl->weights_input = t.weights_input;
  impl->flip_src = t.flip_src;
  impl->src_zero_point_input = t.src_zero_point_input;
  impl->src_zero_point_dtype = t.src_zero_point_dtype;
  impl->residuals = std::move(t.residuals);
  if (t.flip_src) impl->flipped.resize(static_cast<size_t>(SpecExtent(t.call.src)));
  impl->binary = std::move(t.binary);
  impl->binary_ptrs.assign(impl->binary.size(), nullptr);
  impl->sum = std::move(t.sum);
  if (impl->sum) impl->copy_index.assign(impl->sum->shape.size(), 0);
  impl->sum_binary = t.sum_binary;
  if (t.sum_binary >= 0) impl->sum_operand_copy.resize(static_cast<size_t>(t.sum_binary_bytes));

  ExternKernelInfo& info = impl->info;
  const FusedCall& fc = impl->call->call();
  info.op = KindName(fc.kind);
  info.call = fc.ToString();
  if (!impl->residuals.entries.empty()) {
    absl::StrAppend(&info.call, "+residuals[", impl->residuals.entries.size(), "]");
  }
  for (const PostOp& p : fc.post_ops) info.post_ops.push_back(p.ToString());
  info.weight_layout = impl->call->weights_layout();
  info.src_layout = impl->call->src_layout();
  info.dst_layout = impl->call->dst_layout();
  info.prepacked_bytes = impl->call->prepacked_bytes();
  info.reorders_per_call = impl->call->reorders_per_call();
  info.impl = impl->call->impl_name();
  info.precision = fc.integer.has_value() ? "int8" : impl->call->bf16() ? "bf16" : "f32";
  info.bf16_refused = std::move(bf16_refused);
  info.form = form_refused.empty() ? form : "";
  info.form_refused = std::move(form_refused);
  return std::unique_ptr<OneDnnExternKernel>(new OneDnnExternKernel(std::move(impl)));
}

absl::Status OneDnnExternKernel::Run(absl::Span<void* const> inputs,
                                     absl::Span<void* const> outputs) {
  Impl& m = *impl_;
  if (m.rnn != nullptr) return m.rnn->Run(inputs, outputs);
  if (inputs.size() != m.num_inputs || outputs.size() != m.num_outputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        m.where, ": expects ", m.num_inputs, " inputs and ", m.num_outputs,
        " outputs, got ", inputs.size(), " and ", outputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr && ReadsInput(i)) {
      return absl::InvalidArgumentError(absl::StrCat(m.where, ": null buffer pointer"));
    }
  }
  if (outputs[0] == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(m.where, ": null buffer pointer"));
  }
  for (size_t i = 0; i < m.binary.size(); ++i) {
    m.binary_ptrs[i] =
        m.binary[i].input >= 0 ? inputs[m.binary[i].input] : m.binary[i].owned;
  }
  void* dst = outputs[0];
  if (m.sum_binary >= 0 && m.binary_ptrs[m.sum_binary] == dst) {
    std::memcpy(m.sum_operand_copy.data(), dst, m.sum_operand_copy.size());
    m.binary_ptrs[m.sum_binary] = m.sum_operand_copy.data();
  }
  if (m.sum) {
    const float* from = static_cast<const float*>(inputs[m.sum->input]);
    if (from != dst || m.sum->scale != 1.0f) {
      ScaledCopy(*m.sum, from, static_cast<float*>(dst), m.copy_index);
    }
  }
  const void* src = inputs[m.src_input];
  if (m.flip_src) {
    const uint8_t* from = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < m.flipped.size(); ++i) m.flipped[i] = from[i] ^ 0x80;
    src = m.flipped.data();
  }
  int32_t runtime_zero_point = 0;
  if (m.src_zero_point_input >= 0) {
    const void* z = inputs[m.src_zero_point_input];
    runtime_zero_point = m.src_zero_point_dtype == ir::DType::kU8
                             ? *static_cast<const uint8_t*>(z)
                             : *static_cast<const int8_t*>(z);
    // The src runs as x + 128 when flipped.
    KILN_RETURN_IF_ERROR(
        m.call->SetSrcZeroPoint(runtime_zero_point + (m.flip_src ? 128 : 0)));
  }
  absl::Status s =
      m.weights_input >= 0
          ? m.call->Execute(src, inputs[m.weights_input], m.binary_ptrs, dst)
          : m.call->Execute(src, m.binary_ptrs, dst);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(m.where, ": ", s.message()));
  if (!m.residuals.entries.empty()) {
    AddResiduals(m.residuals, inputs[m.src_input],
                 m.src_zero_point_input >= 0 ? runtime_zero_point
                                             : m.residuals.src_zero_point,
                 static_cast<int32_t*>(dst));
  }
  return absl::OkStatus();
}

bool OneDnnExternKernel::ReadsInput(size_t input) const {
  const Impl& m = *impl_;
  if (m.rnn != nullptr) return true;
  const int i = static_cast<int>(input);
  if (i == m.src_input || i == m.weights_input || i == m.src_zero_point_input ||
      (m.sum && m.sum->input == i)) {
    return true;
  }
  return std::any_of(m.binary.begin(), m.binary.end(),
                     [i](const auto& b) { return b.input == i; });
}

const ExternKernelInfo& OneDnnExternKernel::info() const {
  return impl_->rnn != nullptr ? impl_->rnn->info() : impl_->info;
}

absl::StatusOr<ActivationBlocks> PreferredActivationBlocks(
    const LoopProgram& program, const Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const Tensor>>& constants,
    const OneDnnCallOptions& options) {
  Translator tr(program, kernel, constants);
  Translation t;
  KILN_RETURN_IF_ERROR(TranslateKernel(tr, kernel, t));
  // Runtime weights come in the plain layout; the activations stay plain,
  // as does an s8 src run as u8 (Run flips a plain copy).
  if (t.weights_input >= 0 || t.flip_src) return ActivationBlocks{};
  absl::StatusOr<ActivationBlocks> blocks =
      OneDnnCall::PreferredActivationBlocks(t.call, options);
  // Create's fallback, asked the same way: a sum that no optimized kernel
  // takes (oneDNN 2.6 on AVX2 takes an eltwise then a sum only in its
  // reference kernel) runs as a binary add of its operand, which jit:avx2
  // takes on blocked layouts. Without asking, the conv stays plain and runs
  // on the gemm-based kernel (x64:gemm:jit, 3-10x slower at these shapes).
  if ((!blocks.ok() || blocks->dst == 0) && SumAsBinaryAdd(t)) {
    absl::StatusOr<ActivationBlocks> binary =
        OneDnnCall::PreferredActivationBlocks(t.call, options);
    if (binary.ok() && binary->dst != 0) return *binary;
  }
  if (!blocks.ok()) return tr.Annotate(blocks.status());
  return *blocks;
}

std::optional<int> SumOperandInput(const LoopProgram& program, const Kernel& kernel) {
  if (kernel.kind != Kernel::Kind::kExtern || OneDnnRnnKernel::Handles(kernel.call.op) ||
      kernel.call.outputs.size() != 1) {
    return std::nullopt;
  }
  const std::map<int32_t, std::shared_ptr<const Tensor>> no_constants;
  Translator tr(program, kernel, no_constants);
  if (!tr.ReadSlots().ok()) return std::nullopt;
  absl::StatusOr<std::vector<std::string>> kinds = tr.StringList("post_ops");
  absl::StatusOr<std::vector<double>> alphas = tr.Floats("post_op_alphas");
  absl::StatusOr<std::vector<int64_t>> slots = tr.Ints("post_op_inputs");
  if (!kinds.ok() || !alphas.ok() || !slots.ok() || alphas->size() != kinds->size() ||
      slots->size() != kinds->size()) {
    return std::nullopt;
  }
  for (size_t i = 0; i < kinds->size(); ++i) {
    if ((*kinds)[i] != "sum") continue;
    if ((*alphas)[i] != 1.0 || !tr.Has((*slots)[i])) return std::nullopt;
    const int input = tr.Input((*slots)[i]);
    const int32_t operand = kernel.call.inputs[input];
    const int32_t dst = kernel.call.outputs[0];
    const Buffer& a = program.buffers[operand];
    const Buffer& b = program.buffers[dst];
    // The same bytes in the same layout, read by this call in one role.
    if (operand == dst || a.dtype != ir::DType::kF32 || b.dtype != ir::DType::kF32 ||
        a.shape != b.shape || a.strides != b.strides ||
        a.StorageSize() != b.StorageSize() || !a.StorageSize().has_value()) {
      return std::nullopt;
    }
    if (std::count(kernel.call.inputs.begin(), kernel.call.inputs.end(), operand) != 1 ||
        std::count(kernel.call.inputs.begin(), kernel.call.inputs.end(), dst) != 0) {
      return std::nullopt;
    }
    return input;
  }
  return std::nullopt;
}

bool NativeBf16() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

bool FastBf16() { return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx; }

bool ThreadCountInvariant(absl::string_view impl) {
  static constexpr absl::string_view kMeasured[] = {
      "jit:avx2", "jit_1x1:avx2", "jit_dw:avx2", "jit:sse41", "jit_1x1:sse41", "jit_dw:sse41",
  };
  // The primitive's name, without a note such as " (as 1x1 conv)".
  const absl::string_view name = impl.substr(0, impl.find(' '));
  for (absl::string_view m : kMeasured) {
    if (name == m) return true;
  }
  return false;
}

std::string OneDnnCpuIsa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return absl::StrCat("isa_", static_cast<int>(dnnl::get_effective_cpu_isa()));
  }
}

}  // namespace kiln::onednn
