// OneDnnRnnKernel: reads an ONNX LSTM/GRU/RNN extern kernel (the contract
// of ir/loop/extern_schema.h), refuses what oneDNN cannot compute exactly,
// builds the oneDNN RNN primitive and puts ONNX's weights into oneDNN's
// gate order and ldigo layout (then the primitive's preferred layout).
//
// Gate orders: ONNX LSTM i, o, f, c (peepholes i, o, f); oneDNN i, f, c, o
// (peepholes i, f, o). ONNX GRU z, r, h = oneDNN u, r, o. ONNX keeps the
// input and recurrence biases apart; oneDNN adds one bias per gate, so
// bias = Wb + Rb, except for the linear-before-reset GRU, whose candidate
// keeps Rbh inside the reset product: oneDNN's lbr_gru takes 4 bias gates
// (Wbz+Rbz, Wbr+Rbr, Wbh, Rbh). ONNX's default GRU applies the reset gate to
// h before the matmul with Rh, as oneDNN's gru_forward does.
#include "backends/onednn/rnn_kernel.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "backends/onednn/engine.h"
#include "backends/onednn/kernel_reader.h"
#include "backends/onednn/rnn_sequence.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using ir::Shape;
using ir::Tensor;
using ir::loop::Buffer;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

using ir::loop::kAttrInputSlots;
using ir::loop::kAttrOutputSlots;
using ir::loop::kOnnxOpPrefix;

// ONNX input / output positions; kiln.FusedLSTM's R is 8-bit, its scale and
// zero point follow P.
enum InputSlot {
  kX = 0, kW, kR, kB, kSeqLens, kInitH, kInitC, kP, kRScale, kRZeroPoint, kNumInputSlots
};
constexpr int kOnnxInputSlots = kRScale;
enum OutputSlot { kY = 0, kYh, kYc, kNumOutputSlots };

enum class Cell { kLstm, kGru, kLbrGru, kRnn };

// oneDNN gate g reads ONNX gate kLstmGates[g].
constexpr int kLstmGates[] = {0, 2, 3, 1};
constexpr int kLstmPeepholes[] = {0, 2, 1};
constexpr int kIdentityGates[] = {0, 1, 2};

// The shape of the problem and where each operand comes from.
struct Problem {
  Cell cell = Cell::kLstm;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  int64_t gates = 4;       // ONNX weight blocks per direction
  int64_t bias_gates = 4;  // oneDNN bias blocks per direction
  std::string direction;
  dnnl::algorithm activation = dnnl::algorithm::eltwise_tanh;  // RNN only
  std::string activation_name;
  // Call input index of each ONNX input slot (-1: absent), call output
  // index of each output slot.
  int in[kNumInputSlots] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  int out[kNumOutputSlots] = {-1, -1, -1};
  // Constant data of W, R, B, P (nullptr: absent or read at Run; R: until
  // dequantized, for an 8-bit R).
  const float* constant[kNumInputSlots] = {};
  // kiln.FusedLSTM: R as 8-bit constants (decision 0074).
  bool quantized_r = false;
  QuantizedRecurrence r8;
  const Tensor* r8_q = nullptr;
};

// Reads the call's attributes and buffers; every error names the kernel.
class Reader : public internal::KernelReader {
 public:
  using KernelReader::KernelReader;

  const Buffer& BufferOf(int32_t index) const { return p_.buffers[index]; }
  const Kernel& kernel() const { return k_; }

  absl::Status CheckIndices() const {
    for (const std::vector<int32_t>* list : {&k_.call.inputs, &k_.call.outputs}) {
      for (int32_t b : *list) {
        if (b < 0 || b >= static_cast<int32_t>(p_.buffers.size())) {
          return Invalid("buffer index ", b, " is out of range");
        }
      }
    }
    return absl::OkStatus();
  }
};

std::string Lower(absl::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The activations attribute: absent, or the defaults in every direction
// (RNN: one of tanh/relu/sigmoid, the same in every direction).
absl::Status ReadActivations(const Reader& rd, Problem& pb) {
  if (rd.HasAttr("activation_alpha") || rd.HasAttr("activation_beta")) {
    return rd.Unimplemented("activation_alpha / activation_beta are not supported");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, rd.StringList("activations"));
  std::vector<std::string> defaults;
  switch (pb.cell) {
    case Cell::kLstm: defaults = {"sigmoid", "tanh", "tanh"}; break;
    case Cell::kGru:
    case Cell::kLbrGru: defaults = {"sigmoid", "tanh"}; break;
    case Cell::kRnn: defaults = {"tanh"}; break;
  }
  if (names.empty()) names = defaults;
  const size_t per_dir = defaults.size();
  if (names.size() != per_dir && names.size() != per_dir * pb.dirs) {
    return rd.Invalid("expected ", per_dir, " activations per direction, got ",
                      names.size());
  }
  if (pb.cell == Cell::kRnn) {
    const std::string first = Lower(names[0]);
    for (const std::string& n : names) {
      if (Lower(n) != first) {
        return rd.Unimplemented("directions with different activations");
      }
    }
    if (first == "tanh") {
      pb.activation = dnnl::algorithm::eltwise_tanh;
    } else if (first == "relu") {
      pb.activation = dnnl::algorithm::eltwise_relu;
    } else if (first == "sigmoid") {
      pb.activation = dnnl::algorithm::eltwise_logistic;
    } else {
      return rd.Unimplemented("activation '", names[0], "'");
    }
    pb.activation_name = first;
    return absl::OkStatus();
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (Lower(names[i]) != defaults[i % per_dir]) {
      return rd.Unimplemented("non-default activation '", names[i], "'");
    }
  }
  return absl::OkStatus();
}

// Every buffer's shape, dtype and layout, the attributes, and which inputs
// are constant.
absl::StatusOr<Problem> ReadProblem(const Reader& rd, absl::string_view op) {
  const Kernel& k = rd.kernel();
  Problem pb;
  if (op == "LSTM" || op == "FusedLSTM") {
    pb.cell = Cell::kLstm;
    pb.quantized_r = op == "FusedLSTM";
  } else if (op == "GRU") {
    pb.cell = Cell::kGru;
  } else {
    pb.cell = Cell::kRnn;
  }
  KILN_RETURN_IF_ERROR(rd.CheckIndices());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> in_slots, rd.Ints(kAttrInputSlots));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_slots, rd.Ints(kAttrOutputSlots));
  if (in_slots.size() != k.call.inputs.size() || out_slots.size() != k.call.outputs.size()) {
    return rd.Invalid("slot attributes do not match the call's buffers");
  }
  const int max_in = pb.quantized_r           ? kNumInputSlots
                     : pb.cell == Cell::kLstm ? kOnnxInputSlots
                                              : kInitC;
  const int max_out = pb.cell == Cell::kLstm ? kNumOutputSlots : kYc;
  for (size_t j = 0; j < in_slots.size(); ++j) {
    const int64_t s = in_slots[j];
    if (s < 0 || s >= max_in || pb.in[s] >= 0) return rd.Invalid("bad input slot ", s);
    pb.in[s] = static_cast<int>(j);
  }
  for (size_t j = 0; j < out_slots.size(); ++j) {
    const int64_t s = out_slots[j];
    if (s < 0 || s >= max_out || pb.out[s] >= 0) return rd.Invalid("bad output slot ", s);
    pb.out[s] = static_cast<int>(j);
  }
  for (int s : {kX, kW, kR}) {
    if (pb.in[s] < 0) return rd.Invalid("input ", s, " (X, W or R) is missing");
  }
  if (k.call.outputs.empty()) return rd.Invalid("no outputs");
  if (pb.quantized_r && pb.in[kRScale] < 0) return rd.Invalid("input R_scale is missing");

  // Attributes: only those this mapping understands, at values it computes
  // exactly as ONNX does.
  for (const auto& attr : k.call.attrs) {
    const std::string& name = attr.first;
    if (absl::StartsWith(name, "kiln_")) continue;
    static const char* const kKnown[] = {
        "activation_alpha", "activation_beta", "activations", "clip", "direction",
        "hidden_size", "input_forget", "layout", "linear_before_reset"};
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&](const char* n) { return name == n; }) == std::end(kKnown)) {
      return rd.Unimplemented("attribute '", name, "'");
    }
  }
  // Channel-blocked activations (passes/loop/propagate_layout) are for convs.
  for (const char* name : {"kiln_blocked_inputs", "kiln_blocked_outputs"}) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> blocked, rd.Ints(name));
    for (int64_t c : blocked) {
      if (c != 0) return rd.Unimplemented("a channel-blocked buffer");
    }
  }
  if (rd.HasAttr("clip")) return rd.Unimplemented("clip is not supported by oneDNN");
  KILN_ASSIGN_OR_RETURN(int64_t layout, rd.Int("layout", 0));
  if (layout != 0) return rd.Unimplemented("layout=", layout, " (batch-major)");
  if (pb.cell == Cell::kLstm) {
    KILN_ASSIGN_OR_RETURN(int64_t input_forget, rd.Int("input_forget", 0));
    if (input_forget != 0) return rd.Unimplemented("input_forget=", input_forget);
  } else if (rd.HasAttr("input_forget")) {
    return rd.Unimplemented("attribute 'input_forget'");
  }
  if (pb.cell == Cell::kGru) {
    KILN_ASSIGN_OR_RETURN(int64_t lbr, rd.Int("linear_before_reset", 0));
    if (lbr != 0) pb.cell = Cell::kLbrGru;
  } else if (rd.HasAttr("linear_before_reset")) {
    return rd.Unimplemented("attribute 'linear_before_reset'");
  }
  KILN_ASSIGN_OR_RETURN(pb.direction, rd.String("direction", "forward"));
  if (pb.direction == "bidirectional") {
    pb.dirs = 2;
  } else if (pb.direction != "forward" && pb.direction != "reverse") {
    return rd.Invalid("unknown direction '", pb.direction, "'");
  }
  KILN_RETURN_IF_ERROR(ReadActivations(rd, pb));

  switch (pb.cell) {
    case Cell::kLstm: pb.gates = 4; pb.bias_gates = 4; break;
    case Cell::kGru: pb.gates = 3; pb.bias_gates = 3; break;
    case Cell::kLbrGru: pb.gates = 3; pb.bias_gates = 4; break;
    case Cell::kRnn: pb.gates = 1; pb.bias_gates = 1; break;
  }

  // Shapes.
  auto buffer_of_input = [&](int slot) -> const Buffer& {
    return rd.BufferOf(k.call.inputs[pb.in[slot]]);
  };
  const Shape& x = buffer_of_input(kX).shape;
  const Shape& r = buffer_of_input(kR).shape;
  if (x.size() != 3 || r.size() != 3) return rd.Invalid("X and R must have rank 3");
  pb.seq = x[0];
  pb.batch = x[1];
  pb.input = x[2];
  pb.hidden = r[2];
  if (rd.HasAttr("hidden_size")) {
    KILN_ASSIGN_OR_RETURN(int64_t hs, rd.Int("hidden_size", 0));
    if (hs != pb.hidden) {
      return rd.Invalid("hidden_size is ", hs, " but R is ", ir::ShapeToString(r));
    }
  }
  const int64_t D = pb.dirs, G = pb.gates, H = pb.hidden, N = pb.batch;
  const Shape want_in[kOnnxInputSlots] = {
      {pb.seq, N, pb.input}, {D, G * H, pb.input}, {D, G * H, H}, {D, 2 * G * H},
      {N},                   {D, N, H},            {D, N, H},     {D, 3 * H}};
  for (int s = 0; s < kOnnxInputSlots; ++s) {
    if (pb.in[s] < 0) continue;
    const Buffer& b = buffer_of_input(s);
    if (b.shape != want_in[s]) {
      return rd.Invalid("input ", s, " ('", b.name, "') is ", ir::ShapeToString(b.shape),
                        ", expected ", ir::ShapeToString(want_in[s]));
    }
    if (!b.IsRowMajor()) return rd.Unimplemented("input '", b.name, "' is strided");
    if (s == kSeqLens) continue;
    if (s == kR && pb.quantized_r) {
      if (b.dtype != ir::DType::kI8 && b.dtype != ir::DType::kU8) {
        return rd.Invalid("8-bit R ('", b.name, "') is ", ir::DTypeName(b.dtype));
      }
      continue;
    }
    if (b.dtype != ir::DType::kF32) {
      return rd.Unimplemented("buffer '", b.name, "' is ", ir::DTypeName(b.dtype),
                              ": oneDNN RNN calls run f32 only");
    }
  }
  const Shape want_out[kNumOutputSlots] = {{pb.seq, D, N, H}, {D, N, H}, {D, N, H}};
  for (int s = 0; s < kNumOutputSlots; ++s) {
    if (pb.out[s] < 0) continue;
    const Buffer& b = rd.BufferOf(k.call.outputs[pb.out[s]]);
    if (b.shape != want_out[s]) {
      return rd.Invalid("output ", s, " ('", b.name, "') is ", ir::ShapeToString(b.shape),
                        ", expected ", ir::ShapeToString(want_out[s]));
    }
    if (!b.IsRowMajor()) return rd.Unimplemented("output '", b.name, "' is strided");
    if (b.dtype != ir::DType::kF32) {
      return rd.Unimplemented("buffer '", b.name, "' is ", ir::DTypeName(b.dtype),
                              ": oneDNN RNN calls run f32 only");
    }
  }
  if (pb.seq <= 0 || N <= 0 || pb.input <= 0 || H <= 0) {
    return rd.Unimplemented("empty dimension in ", ir::ShapeToString(x), " / hidden ", H);
  }

  // sequence_lens: only when known to cover the whole sequence in every row.
  if (pb.in[kSeqLens] >= 0) {
    const Tensor* lens = rd.ConstantOfInput(pb.in[kSeqLens]);
    if (lens == nullptr || !ir::IsInteger(lens->dtype())) {
      return rd.Unimplemented("sequence_lens known only at run time");
    }
    for (int64_t b = 0; b < N; ++b) {
      if (lens->GetAsInt64(b) != pb.seq) {
        return rd.Unimplemented("sequence_lens[", b, "] = ", lens->GetAsInt64(b),
                                " is shorter than the sequence (", pb.seq, ")");
      }
    }
  }
  for (int s : {kW, kR, kB, kP}) {
    if (pb.in[s] < 0 || (s == kR && pb.quantized_r)) continue;
    if (const Tensor* t = rd.ConstantOfInput(pb.in[s])) pb.constant[s] = t->data<float>();
  }
  if (pb.quantized_r) {
    // The 8-bit R, its scales ([D] or [D, 4H]) and zero points: constants.
    const Tensor* q = rd.ConstantOfInput(pb.in[kR]);
    const Tensor* scale = rd.ConstantOfInput(pb.in[kRScale]);
    const Tensor* zp = pb.in[kRZeroPoint] >= 0 ? rd.ConstantOfInput(pb.in[kRZeroPoint]) : nullptr;
    if (q == nullptr || scale == nullptr || (pb.in[kRZeroPoint] >= 0 && zp == nullptr)) {
      return rd.Unimplemented("8-bit R, its scale or zero point known only at run time");
    }
    const Shape per_direction = {D}, per_column = {D, G * H};
    if (scale->dtype() != ir::DType::kF32 ||
        (scale->shape() != per_direction && scale->shape() != per_column)) {
      return rd.Invalid("R_scale is ", scale->TypeString(), "; it must be f32",
                        ir::ShapeToString(per_direction), " or f32",
                        ir::ShapeToString(per_column));
    }
    if (zp != nullptr && (zp->dtype() != q->dtype() || zp->shape() != scale->shape())) {
      return rd.Invalid("R_zero_point is ", zp->TypeString(), "; it must be ",
                        ir::DTypeName(q->dtype()), ir::ShapeToString(scale->shape()));
    }
    pb.r8_q = q;
    pb.r8.q = q->raw_data();
    pb.r8.is_uint8 = q->dtype() == ir::DType::kU8;
    pb.r8.scale = scale->data<float>();
    pb.r8.zero_point = zp != nullptr ? zp->raw_data() : nullptr;
    pb.r8.per_column = scale->rank() == 2;
  }
  return pb;
}

// R = (q - zero_point) * scale in f32, as DequantizeLinear rounds it, for
// oneDNN's primitive.
std::vector<float> DequantizedR(const Problem& p) {
  const QuantizedRecurrence& r = p.r8;
  const int64_t D = p.dirs, rows = p.gates * p.hidden, K = p.hidden;
  std::vector<float> out(D * rows * K);
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t j = 0; j < rows; ++j) {
      const int64_t at = r.per_column ? d * rows + j : d;
      const float scale = r.scale[at];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t i = (d * rows + j) * K + k;
        float v, z = 0.0f;
        if (r.is_uint8) {
          v = static_cast<const uint8_t*>(r.q)[i];
          if (r.zero_point != nullptr) z = static_cast<const uint8_t*>(r.zero_point)[at];
        } else {
          v = static_cast<const int8_t*>(r.q)[i];
          if (r.zero_point != nullptr) z = static_cast<const int8_t*>(r.zero_point)[at];
        }
        out[i] = (v - z) * scale;
      }
    }
  }
  return out;
}

// [D][G*H][K] (ONNX W or R) -> ldigo [1][D][K][G][H], oneDNN gate g read
// from ONNX gate gate_map[g].
void PackWeights(const float* src, int64_t D, int64_t G, int64_t H, int64_t K,
                 const int* gate_map, float* dst) {
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t g = 0; g < G; ++g) {
      const float* from = src + (d * G + gate_map[g]) * H * K;
      for (int64_t o = 0; o < H; ++o) {
        for (int64_t k = 0; k < K; ++k) {
          dst[((d * K + k) * G + g) * H + o] = from[o * K + k];
        }
      }
    }
  }
}

// ONNX B [D][2*G*H] (Wb then Rb; nullptr: zeros) -> ldgo [1][D][bias_gates][H].
void PackBias(const Problem& pb, const float* b, const int* gate_map, float* dst) {
  const int64_t D = pb.dirs, G = pb.gates, H = pb.hidden, BG = pb.bias_gates;
  std::fill(dst, dst + D * BG * H, 0.0f);
  if (b == nullptr) return;
  for (int64_t d = 0; d < D; ++d) {
    const float* wb = b + d * 2 * G * H;
    const float* rb = wb + G * H;
    float* out = dst + d * BG * H;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t src = gate_map[g] * H;
      const bool lbr_candidate = pb.cell == Cell::kLbrGru && g == 2;
      for (int64_t o = 0; o < H; ++o) {
        out[g * H + o] = lbr_candidate ? wb[src + o] : wb[src + o] + rb[src + o];
      }
    }
    if (pb.cell == Cell::kLbrGru) {
      for (int64_t o = 0; o < H; ++o) out[3 * H + o] = rb[2 * H + o];
    }
  }
}

// ONNX P [D][3*H] (i, o, f) -> ldgo [1][D][3][H] (i, f, o).
void PackPeepholes(const float* p, int64_t D, int64_t H, float* dst) {
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t g = 0; g < 3; ++g) {
      std::memcpy(dst + (d * 3 + g) * H, p + (d * 3 + kLstmPeepholes[g]) * H,
                  sizeof(float) * H);
    }
  }
}

// "ldigo", "rnn_packed", or the dims by decreasing stride.
std::string WeightsLayout(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind == dnnl_format_kind_rnn_packed) return "rnn_packed";
  if (d.format_kind != dnnl_blocked || d.ndims != 5) return "opaque";
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  std::vector<int> order = {0, 1, 2, 3, 4};
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::string s;
  for (int i : order) s.push_back("ldigo"[i]);
  for (int i = 0; i < b.inner_nblks; ++i) {
    absl::StrAppend(&s, b.inner_blks[i]);
    s.push_back("ldigo"[b.inner_idxs[i]]);
  }
  return s;
}

}  // namespace

bool UseRnnSequence(int64_t batch) {
  // Measured in benchmarks/results/2026-12-02-lstm-batch1.md (LSTM) and
  // 2026-12-02-gru-form.md (GRU).
  return batch <= kRnnSequenceMaxBatch;
}

namespace {

// Whether the LSTM or GRU runs as an RnnSequence: `form` kSequence asks for
// it (Unimplemented naming why where it does not apply), kAuto applies
// UseRnnSequence where it applies.
absl::StatusOr<bool> ChooseSequence(const Reader& rd, const Problem& p, bool runtime_weights,
                                    OneDnnCallOptions::RnnForm form) {
  using Form = OneDnnCallOptions::RnnForm;
  if (form == Form::kPrimitive) return false;
  std::string why_not;
  if (p.cell == Cell::kRnn) {
    why_not = "only LSTM and GRU run as a projection matmul plus recurrence";
  } else if (runtime_weights) {
    why_not = "weights known only at run time";
  }
  if (form == Form::kSequence) {
    if (!why_not.empty()) return rd.Unimplemented(why_not);
    return true;
  }
  return why_not.empty() && UseRnnSequence(p.batch);
}

const char* CellName(Cell c) {
  switch (c) {
    case Cell::kLstm: return "lstm";
    case Cell::kGru:
    case Cell::kLbrGru: return "gru";
    case Cell::kRnn: return "rnn";
  }
  return "?";
}

}  // namespace

struct OneDnnRnnKernel::Impl {
  std::string where;
  Problem pb;
  ExternKernelInfo info;
  size_t num_inputs = 0, num_outputs = 0;
  const int* gate_map = kIdentityGates;
  bool runtime_weights = false;  // some of W, R, B, P are read at Run

  dnnl::primitive prim;
  // Weights in ldigo / ldgo with oneDNN's gate order (what Pack* writes),
  // and, when the primitive prefers another layout, the packed copies.
  std::vector<float> w_plain, r_plain, bias, peep;
  memory w_plain_mem, r_plain_mem, w_mem, r_mem, bias_mem, peep_mem;
  bool w_reorder = false, r_reorder = false;
  // Stand-ins for absent states and outputs, and dst_layer when Y's
  // layout differs from oneDNN's ([T, N, D*H] for two directions).
  std::vector<float> zero_h, zero_c, y_scratch, yh_scratch, yc_scratch;
  memory src_layer, src_iter, src_iter_c, dst_layer, dst_iter, dst_iter_c, scratchpad;
  bool y_direct = false;
  std::unordered_map<int, memory> args;
  // Set when the LSTM or GRU runs as a projection matmul plus kiln's
  // recurrence instead of `prim` (decisions 0065, 0069).
  std::unique_ptr<RnnSequence> sequence;
  // An 8-bit R dequantized for `prim` (released once packed).
  std::vector<float> r_dequantized;

  absl::Status PackAll(absl::Span<void* const> inputs) {
    const Problem& p = pb;
    auto data = [&](int slot) -> const float* {
      if (p.in[slot] < 0) return nullptr;
      if (p.constant[slot] != nullptr) return p.constant[slot];
      return static_cast<const float*>(inputs[p.in[slot]]);
    };
    PackWeights(data(kW), p.dirs, p.gates, p.hidden, p.input, gate_map, w_plain.data());
    PackWeights(data(kR), p.dirs, p.gates, p.hidden, p.hidden, gate_map, r_plain.data());
    PackBias(p, data(kB), gate_map, bias.data());
    if (p.in[kP] >= 0) PackPeepholes(data(kP), p.dirs, p.hidden, peep.data());
    try {
      dnnl::stream& s = CpuStream();
      if (w_reorder) dnnl::reorder(w_plain_mem, w_mem).execute(s, w_plain_mem, w_mem);
      if (r_reorder) dnnl::reorder(r_plain_mem, r_mem).execute(s, r_plain_mem, r_mem);
      s.wait();
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat(where, ": weight reorder failed: ", e.what()));
    }
    return absl::OkStatus();
  }
};

OneDnnRnnKernel::OneDnnRnnKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnRnnKernel::~OneDnnRnnKernel() = default;

bool OneDnnRnnKernel::Handles(absl::string_view call_op) {
  return call_op == "onnx.LSTM" || call_op == "onnx.GRU" || call_op == "onnx.RNN" ||
         call_op == "kiln.FusedLSTM";
}

absl::StatusOr<std::unique_ptr<OneDnnRnnKernel>> OneDnnRnnKernel::Create(
    const LoopProgram& program, const Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const Tensor>>& constants,
    const OneDnnCallOptions& options) {
  Reader rd(program, kernel, constants);
  absl::string_view op = kernel.call.op;
  if (kernel.kind != Kernel::Kind::kExtern || !Handles(op)) {
    return rd.Unimplemented("not an ONNX recurrent op");
  }
  if (!absl::ConsumePrefix(&op, kOnnxOpPrefix)) absl::ConsumePrefix(&op, ir::loop::kKilnOpPrefix);
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.where = rd.Where();
  KILN_ASSIGN_OR_RETURN(m.pb, ReadProblem(rd, op));
  const Problem& p = m.pb;
  m.num_inputs = kernel.call.inputs.size();
  m.num_outputs = kernel.call.outputs.size();
  m.gate_map = p.cell == Cell::kLstm ? kLstmGates : kIdentityGates;
  for (int s : {kW, kR, kB, kP}) {
    if (s == kR && p.quantized_r) continue;  // a constant (ReadProblem)
    if (p.in[s] >= 0 && p.constant[s] == nullptr) m.runtime_weights = true;
  }

  const memory::dim T = p.seq, N = p.batch, I = p.input, H = p.hidden, D = p.dirs,
                    G = p.gates, BG = p.bias_gates;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const memory::desc src_layer_md({T, N, I}, f32, tag::tnc);
  const memory::desc state_md({1, D, N, H}, f32, tag::ldnc);
  const memory::desc w_plain_md({1, D, I, G, H}, f32, tag::ldigo);
  const memory::desc r_plain_md({1, D, H, G, H}, f32, tag::ldigo);
  const bool any = options.prepack_weights && !m.runtime_weights;
  const memory::desc w_md = any ? memory::desc({1, D, I, G, H}, f32, tag::any) : w_plain_md;
  const memory::desc r_md = any ? memory::desc({1, D, H, G, H}, f32, tag::any) : r_plain_md;
  const memory::desc bias_md({1, D, BG, H}, f32, tag::ldgo);
  const memory::desc peep_md = p.in[kP] >= 0 ? memory::desc({1, D, 3, H}, f32, tag::ldgo)
                                             : memory::desc();
  const memory::desc dst_layer_md({T, N, D * H}, f32, tag::tnc);
  const dnnl::rnn_direction dir =
      p.dirs == 2 ? dnnl::rnn_direction::bidirectional_concat
      : p.direction == "reverse" ? dnnl::rnn_direction::unidirectional_right2left
                                 : dnnl::rnn_direction::unidirectional_left2right;
  const auto inference = dnnl::prop_kind::forward_inference;

  std::string call = absl::StrCat(CellName(p.cell), "[seq ", T, " batch ", N, " input ", I,
                                  " hidden ", H, " ", p.direction);
  if (p.cell == Cell::kLbrGru) absl::StrAppend(&call, " linear_before_reset");
  if (p.cell == Cell::kRnn) absl::StrAppend(&call, " ", p.activation_name);
  absl::StrAppend(&call, "]");
  if (p.in[kB] >= 0) absl::StrAppend(&call, "+bias");
  if (p.in[kP] >= 0) absl::StrAppend(&call, "+peephole");
  if (p.quantized_r) {
    absl::StrAppend(&call, p.r8.is_uint8 ? "+r_u8" : "+r_s8",
                    p.r8.per_column ? "_per_column" : "_per_direction");
  }

  KILN_ASSIGN_OR_RETURN(const bool use_sequence,
                        ChooseSequence(rd, p, m.runtime_weights, options.rnn_form));
  if (use_sequence) {
    RnnSequenceShape shape;
    shape.cell = p.cell == Cell::kLstm  ? SequenceCell::kLstm
                 : p.cell == Cell::kGru ? SequenceCell::kGru
                                        : SequenceCell::kLbrGru;
    shape.seq = T;
    shape.batch = N;
    shape.input = I;
    shape.hidden = H;
    shape.dirs = D;
    shape.reverse = p.direction == "reverse";
    if (p.quantized_r) {
      KILN_ASSIGN_OR_RETURN(m.sequence,
                            RnnSequence::Create(shape, p.constant[kW], p.r8, p.constant[kB],
                                                p.constant[kP], options.prepack_weights,
                                                m.where));
    } else {
      KILN_ASSIGN_OR_RETURN(m.sequence,
                            RnnSequence::Create(shape, p.constant[kW], p.constant[kR],
                                                p.constant[kB], p.constant[kP],
                                                options.prepack_weights, m.where));
    }
    ExternKernelInfo& info = m.info;
    info.op = CellName(p.cell);
    info.call = call;
    info.weight_layout = m.sequence->weights_layout();
    info.impl = m.sequence->impl();
    info.prepacked_bytes = m.sequence->packed_bytes();
    return std::unique_ptr<OneDnnRnnKernel>(new OneDnnRnnKernel(std::move(impl)));
  }

  if (p.quantized_r) {
    // oneDNN 2.6's RNN primitive takes f32 weights here: the 8-bit R is
    // dequantized once, as DequantizeLinear would (decision 0074).
    m.r_dequantized = DequantizedR(p);
    m.pb.constant[kR] = m.r_dequantized.data();
  }
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    dnnl::engine& eng = CpuEngine();
    memory::desc pd_w, pd_r, pd_scratch;
    std::string impl_name;
    switch (p.cell) {
      case Cell::kLstm: {
        dnnl::lstm_forward::desc d(inference, dir, src_layer_md, state_md, state_md, w_md,
                                   r_md, peep_md, bias_md, dst_layer_md, state_md, state_md);
        dnnl::lstm_forward::primitive_desc pd(d, attr, eng);
        pd_w = pd.weights_layer_desc();
        pd_r = pd.weights_iter_desc();
        pd_scratch = pd.scratchpad_desc();
        impl_name = pd.impl_info_str();
        m.prim = dnnl::lstm_forward(pd);
        break;
      }
      case Cell::kGru: {
        dnnl::gru_forward::desc d(inference, dir, src_layer_md, state_md, w_md, r_md,
                                  bias_md, dst_layer_md, state_md);
        dnnl::gru_forward::primitive_desc pd(d, attr, eng);
        pd_w = pd.weights_layer_desc();
        pd_r = pd.weights_iter_desc();
        pd_scratch = pd.scratchpad_desc();
        impl_name = pd.impl_info_str();
        m.prim = dnnl::gru_forward(pd);
        break;
      }
      case Cell::kLbrGru: {
        dnnl::lbr_gru_forward::desc d(inference, dir, src_layer_md, state_md, w_md, r_md,
                                      bias_md, dst_layer_md, state_md);
        dnnl::lbr_gru_forward::primitive_desc pd(d, attr, eng);
        pd_w = pd.weights_layer_desc();
        pd_r = pd.weights_iter_desc();
        pd_scratch = pd.scratchpad_desc();
        impl_name = pd.impl_info_str();
        m.prim = dnnl::lbr_gru_forward(pd);
        break;
      }
      case Cell::kRnn: {
        dnnl::vanilla_rnn_forward::desc d(inference, p.activation, dir, src_layer_md,
                                          state_md, w_md, r_md, bias_md, dst_layer_md,
                                          state_md);
        dnnl::vanilla_rnn_forward::primitive_desc pd(d, attr, eng);
        pd_w = pd.weights_layer_desc();
        pd_r = pd.weights_iter_desc();
        pd_scratch = pd.scratchpad_desc();
        impl_name = pd.impl_info_str();
        m.prim = dnnl::vanilla_rnn_forward(pd);
        break;
      }
    }

    // Weights: plain ldigo buffers Pack* fills, reordered into the
    // primitive's layout when it differs.
    m.w_plain.assign(D * I * G * H, 0.0f);
    m.r_plain.assign(D * H * G * H, 0.0f);
    m.bias.assign(D * BG * H, 0.0f);
    m.w_plain_mem = memory(w_plain_md, eng, m.w_plain.data());
    m.r_plain_mem = memory(r_plain_md, eng, m.r_plain.data());
    m.w_reorder = pd_w != w_plain_md;
    m.r_reorder = pd_r != r_plain_md;
    m.w_mem = m.w_reorder ? memory(pd_w, eng) : m.w_plain_mem;
    m.r_mem = m.r_reorder ? memory(pd_r, eng) : m.r_plain_mem;
    m.bias_mem = memory(bias_md, eng, m.bias.data());
    if (p.in[kP] >= 0) {
      m.peep.assign(D * 3 * H, 0.0f);
      m.peep_mem = memory(peep_md, eng, m.peep.data());
    }

    // States and outputs: handles set at Run.
    m.src_layer = memory(src_layer_md, eng, nullptr);
    m.src_iter = memory(state_md, eng, nullptr);
    m.dst_iter = memory(state_md, eng, nullptr);
    m.dst_layer = memory(dst_layer_md, eng, nullptr);
    if (p.in[kInitH] < 0) m.zero_h.assign(D * N * H, 0.0f);
    if (p.out[kYh] < 0) m.yh_scratch.assign(D * N * H, 0.0f);
    m.y_direct = p.out[kY] >= 0 && D == 1;
    if (!m.y_direct) m.y_scratch.assign(T * N * D * H, 0.0f);
    if (p.cell == Cell::kLstm) {
      m.src_iter_c = memory(state_md, eng, nullptr);
      m.dst_iter_c = memory(state_md, eng, nullptr);
      if (p.in[kInitC] < 0) m.zero_c.assign(D * N * H, 0.0f);
      if (p.out[kYc] < 0) m.yc_scratch.assign(D * N * H, 0.0f);
    }
    m.scratchpad = memory(pd_scratch, eng);

    m.args = {{DNNL_ARG_SRC_LAYER, m.src_layer},   {DNNL_ARG_SRC_ITER, m.src_iter},
              {DNNL_ARG_WEIGHTS_LAYER, m.w_mem},   {DNNL_ARG_WEIGHTS_ITER, m.r_mem},
              {DNNL_ARG_BIAS, m.bias_mem},         {DNNL_ARG_DST_LAYER, m.dst_layer},
              {DNNL_ARG_DST_ITER, m.dst_iter},     {DNNL_ARG_SCRATCHPAD, m.scratchpad}};
    if (p.cell == Cell::kLstm) {
      m.args[DNNL_ARG_SRC_ITER_C] = m.src_iter_c;
      m.args[DNNL_ARG_DST_ITER_C] = m.dst_iter_c;
      if (p.in[kP] >= 0) m.args[DNNL_ARG_WEIGHTS_PEEPHOLE] = m.peep_mem;
    }

    ExternKernelInfo& info = m.info;
    info.op = CellName(p.cell);
    info.call = call;
    info.weight_layout = WeightsLayout(pd_w);
    info.impl = impl_name;
    if (!m.runtime_weights) {
      info.prepacked_bytes = static_cast<int64_t>(
          (m.w_reorder ? pd_w.get_size() : m.w_plain.size() * sizeof(float)) +
          (m.r_reorder ? pd_r.get_size() : m.r_plain.size() * sizeof(float)) +
          (m.bias.size() + m.peep.size()) * sizeof(float));
    }
  } catch (const dnnl::error& e) {
    return rd.Unimplemented("oneDNN refuses ", call, ": ", e.what());
  }
  if (!m.runtime_weights) {
    // Constant weights: packed once, here.
    KILN_RETURN_IF_ERROR(m.PackAll({}));
    // The plain copies are no longer read when reordered.
    if (m.w_reorder) std::vector<float>().swap(m.w_plain);
    if (m.r_reorder) std::vector<float>().swap(m.r_plain);
    m.pb.constant[kR] = nullptr;
    std::vector<float>().swap(m.r_dequantized);
  }
  return std::unique_ptr<OneDnnRnnKernel>(new OneDnnRnnKernel(std::move(impl)));
}

absl::Status OneDnnRnnKernel::Run(absl::Span<void* const> inputs,
                                  absl::Span<void* const> outputs) {
  Impl& m = *impl_;
  const Problem& p = m.pb;
  if (inputs.size() != m.num_inputs || outputs.size() != m.num_outputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        m.where, ": expects ", m.num_inputs, " inputs and ", m.num_outputs,
        " outputs, got ", inputs.size(), " and ", outputs.size()));
  }
  if (std::find(inputs.begin(), inputs.end(), nullptr) != inputs.end() ||
      std::find(outputs.begin(), outputs.end(), nullptr) != outputs.end()) {
    return absl::InvalidArgumentError(absl::StrCat(m.where, ": null buffer pointer"));
  }
  if (m.sequence != nullptr) {
    auto in_or_null = [&](int slot) -> const float* {
      return p.in[slot] >= 0 ? static_cast<const float*>(inputs[p.in[slot]]) : nullptr;
    };
    auto out_or_null = [&](int slot) -> float* {
      return p.out[slot] >= 0 ? static_cast<float*>(outputs[p.out[slot]]) : nullptr;
    };
    return m.sequence->Run(in_or_null(kX), in_or_null(kInitH), in_or_null(kInitC),
                           out_or_null(kY), out_or_null(kYh), out_or_null(kYc));
  }
  if (m.runtime_weights) KILN_RETURN_IF_ERROR(m.PackAll(inputs));
  auto in = [&](int slot, std::vector<float>& fallback) -> void* {
    return p.in[slot] >= 0 ? inputs[p.in[slot]] : fallback.data();
  };
  auto out = [&](int slot, std::vector<float>& fallback) -> void* {
    return p.out[slot] >= 0 ? outputs[p.out[slot]] : fallback.data();
  };
  try {
    m.src_layer.set_data_handle(inputs[p.in[kX]]);
    m.src_iter.set_data_handle(in(kInitH, m.zero_h));
    m.dst_iter.set_data_handle(out(kYh, m.yh_scratch));
    m.dst_layer.set_data_handle(m.y_direct ? outputs[p.out[kY]] : m.y_scratch.data());
    if (p.cell == Cell::kLstm) {
      m.src_iter_c.set_data_handle(in(kInitC, m.zero_c));
      m.dst_iter_c.set_data_handle(out(kYc, m.yc_scratch));
    }
    dnnl::stream& s = CpuStream();
    m.prim.execute(s, m.args);
    s.wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat(m.where, ": oneDNN execute failed: ", e.what()));
  }
  if (!m.y_direct && p.out[kY] >= 0) {
    // [T, N, D*H] -> ONNX Y [T, D, N, H].
    const int64_t T = p.seq, N = p.batch, D = p.dirs, H = p.hidden;
    float* y = static_cast<float*>(outputs[p.out[kY]]);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t d = 0; d < D; ++d) {
        for (int64_t n = 0; n < N; ++n) {
          std::memcpy(y + ((t * D + d) * N + n) * H,
                      m.y_scratch.data() + (t * N + n) * D * H + d * H, sizeof(float) * H);
        }
      }
    }
  }
  return absl::OkStatus();
}

const ExternKernelInfo& OneDnnRnnKernel::info() const { return impl_->info; }

}  // namespace kiln::onednn
