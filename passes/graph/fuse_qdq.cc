// Pass fuse-qdq.
#include "passes/graph/fuse_qdq.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"
#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Tensor;
using ir::ValueId;

absl::Status Refuse(absl::string_view why) { return absl::UnimplementedError(why); }

std::string NodeName(const ir::Graph& g, const ir::Node& n) {
  if (!n.name.empty()) return n.name;
  return n.outputs.empty() || n.outputs[0] == ir::kNoValue ? n.op : g.value(n.outputs[0]).name;
}

// InvalidArgument naming `n` and its op: the model breaks ONNX's rules.
absl::Status Invalid(const ir::Graph& g, const ir::Node& n, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("node '", NodeName(g, n), "' (", n.op, "): ", why));
}

bool IsQuant8(DType t) { return t == DType::kU8 || t == DType::kI8; }

// Scale and zero point of a (De)QuantizeLinear node, both constants.
struct QParams {
  ValueId scale = ir::kNoValue;
  ValueId zero_point = ir::kNoValue;  // absent: 0
  std::shared_ptr<const Tensor> s, z;
  int64_t axis = 1;  // as written (per-axis parameters only)
  int64_t count() const { return s->num_elements(); }
  bool per_tensor() const { return s->num_elements() == 1 && s->rank() <= 1; }
  float Scale(int64_t c) const {
    return static_cast<float>(s->GetAsDouble(per_tensor() ? 0 : c));
  }
  double ZeroPoint(int64_t c) const {
    if (z == nullptr) return 0;
    return z->GetAsDouble(z->num_elements() == 1 ? 0 : c);
  }
};

absl::StatusOr<QParams> ReadParams(const ir::Graph& g, const ir::Node& n, const std::string& what) {
  QParams p;
  if (!n.has_input(1)) return Refuse(absl::StrCat(what, " has no scale"));
  if (n.HasAttr("block_size")) return Refuse(absl::StrCat(what, " is blocked"));
  p.scale = n.inputs[1];
  p.s = g.shared_constant(p.scale);
  if (p.s == nullptr || p.s->dtype() != DType::kF32 || p.s->rank() > 1 ||
      p.s->num_elements() == 0) {
    return Refuse(absl::StrCat(what, "'s scale is not an f32 constant of one value or one per channel"));
  }
  if (n.has_input(2)) {
    p.zero_point = n.inputs[2];
    p.z = g.shared_constant(p.zero_point);
    if (p.z == nullptr) return Refuse(absl::StrCat(what, "'s zero point is not a constant"));
    if (p.z->num_elements() != 1 && p.z->num_elements() != p.s->num_elements()) {
      return Invalid(g, n, absl::StrCat("its zero point has ", p.z->num_elements(),
                                        " values and its scale ", p.s->num_elements()));
    }
  }
  KILN_ASSIGN_OR_RETURN(p.axis, n.AttrOr<int64_t>("axis", 1));
  return p;
}

// A constant input of the integer node: an existing graph constant, or a
// new one (named `name` when added), or absent. The activation B of a
// MatMul is the one run-time slot: no tensor, `dtype` and `shape` only.
struct Slot {
  ValueId existing = ir::kNoValue;
  std::shared_ptr<const Tensor> tensor;
  std::string name;
  DType dtype = DType::kInvalid;
  ir::Shape shape;
};

Slot Existing(const ir::Graph& g, ValueId v) { return {v, g.shared_constant(v), ""}; }
Slot New(Tensor t, std::string name) {
  return {ir::kNoValue, std::make_shared<const Tensor>(std::move(t)), std::move(name)};
}

Tensor Zero(DType t) {
  return t == DType::kU8 ? Tensor::Scalar<uint8_t>(0) : Tensor::Scalar<int8_t>(0);
}

// An activation B of a MatMul pattern that is u8, as the s8 value
// b - 128 the integer call reads (oneDNN 2.6 takes s8 weights only). When
// B is a QuantizeLinear's result with a constant zero point zq, a second
// QuantizeLinear of the same input with zero point zq - 128 writes it (the
// same rounding and saturation, shifted: loop fusion computes it in the
// kernel that produced B); otherwise QuantizeLinear(DequantizeLinear(b, 1,
// 128), 1, 0) does, exactly.
struct ShiftB {
  ValueId b = ir::kNoValue;
  int producer = -1;  // B's QuantizeLinear, or -1
  int zero_point = 0;  // its zero point
};

// The integer node a pattern becomes, before it is added to the graph.
struct Rewrite {
  std::string op;
  ir::AttributeMap attrs;
  ValueId x = ir::kNoValue;
  ir::Shape x_shape;        // as the integer node reads it
  bool reshape = false;     // Gemm: x to [M, K, 1, 1], the result back to [M, N]
  std::vector<Slot> slots;  // inputs 1.. of the integer node
  std::optional<ShiftB> shift_b;  // a u8 activation B, read as s8
  // MatMulInteger of an f32 pattern: the result is Cast(acc, f32) * this.
  std::optional<float> to_float_scale;
  DType y_dtype = DType::kU8;
  ir::Shape y_shape;  // the integer node's output
};

// The f32 values of a constant bias input, one per channel: an f32
// constant, or a DequantizeLinear of one (computed as the reference does).
absl::StatusOr<std::vector<double>> BiasValues(const ir::Graph& g, const ir::Node* dq, ValueId b,
                                               int64_t channels) {
  std::vector<double> v;
  if (dq != nullptr) {
    const Tensor* q = g.constant(dq->inputs[0]);
    KILN_ASSIGN_OR_RETURN(QParams p, ReadParams(g, *dq, "the bias's DequantizeLinear"));
    if (q == nullptr || q->num_elements() != channels ||
        (!p.per_tensor() && p.count() != channels)) {
      return Refuse("the bias is not a constant of one value per output channel");
    }
    for (int64_t c = 0; c < channels; ++c) {
      const double d = q->GetAsDouble(c) - p.ZeroPoint(c);
      v.push_back(static_cast<float>(d) * p.Scale(c));
    }
    return v;
  }
  const Tensor* t = g.constant(b);
  if (t == nullptr || t->dtype() != DType::kF32 ||
      (t->num_elements() != channels && t->num_elements() != 1)) {
    return Refuse("the bias is not an f32 constant of one value per output channel");
  }
  for (int64_t c = 0; c < channels; ++c) v.push_back(t->GetAsDouble(t->num_elements() == 1 ? 0 : c));
  return v;
}

class Matcher {
 public:
  explicit Matcher(const ir::Graph& g) : g_(g), producer_(g.num_values(), -1), uses_(CountUses(g)),
                                         captured_(CapturedNames(g)) {
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      for (ValueId o : g.nodes()[i].outputs) {
        if (o != ir::kNoValue) producer_[o] = static_cast<int>(i);
      }
    }
  }

  // The node producing `v` when it is a default-domain `op`, else nullptr.
  const ir::Node* Producer(ValueId v, absl::string_view op) const {
    if (v == ir::kNoValue || producer_[v] < 0) return nullptr;
    const ir::Node& n = g_.nodes()[producer_[v]];
    return n.domain.empty() && n.op == op ? &n : nullptr;
  }
  int ProducerIndex(ValueId v) const { return v == ir::kNoValue ? -1 : producer_[v]; }

  // Read by exactly one node input, not a graph output nor a capture.
  bool SingleUse(ValueId v) const {
    return uses_[v] == 1 && !IsGraphOutput(g_, v) && !captured_.contains(g_.value(v).name);
  }

  absl::StatusOr<Rewrite> Match(const ir::Node& q, const ir::Node& anchor, const ir::Node* act) const;
  absl::StatusOr<Rewrite> MatchToFloat(const ir::Node& anchor) const;

 private:
  absl::StatusOr<QParams> MatchInput(const ir::Node& dx, Rewrite& r) const;
  absl::Status MatchActivationB(const ir::Node& dw, const ir::Node& dx, Rewrite& r) const;
  absl::Status CheckActivation(const ir::Node& act, const QParams& y, DType y_dtype) const;
  absl::StatusOr<Slot> IntegerBias(const ir::Node& anchor, int64_t channels, const QParams& x,
                                   const QParams& w, float beta) const;

  const ir::Graph& g_;
  std::vector<int> producer_;
  std::vector<int> uses_;
  absl::flat_hash_set<std::string> captured_;
};

// Dropping the activation is exact when the Q's saturation implies it:
// Q(relu(v)) = max(Q(v), Q(0)) = Q(v) when Q(0) (the zero point) is the
// type's minimum; Q(clip(v, lo, hi)) = clamp(Q(v), Q(lo), Q(hi)) = Q(v) when
// Q(lo) and Q(hi) lie outside the type's range (Q is monotonic).
absl::Status Matcher::CheckActivation(const ir::Node& act, const QParams& y, DType y_dtype) const {
  const double qmin = y_dtype == DType::kU8 ? 0 : -128, qmax = y_dtype == DType::kU8 ? 255 : 127;
  const double zp = y.ZeroPoint(0);
  auto quantize = [&](double t) {
    return std::nearbyint(static_cast<double>(static_cast<float>(t) / y.Scale(0))) + zp;
  };
  if (act.op == "Relu") {
    if (zp != qmin) {
      return Refuse(absl::StrCat("Relu before a QuantizeLinear whose zero point (", zp,
                                 ") is not the type's minimum: not exact to drop"));
    }
    return absl::OkStatus();
  }
  std::optional<double> lo, hi;
  for (int i : {1, 2}) {
    if (!act.has_input(i)) continue;
    const Tensor* t = g_.constant(act.inputs[i]);
    if (t == nullptr || t->num_elements() != 1) return Refuse("Clip with runtime bounds");
    (i == 1 ? lo : hi) = t->GetAsDouble(0);
  }
  if (act.HasAttr("min")) lo = *act.AttrOr<float>("min", 0.0f);
  if (act.HasAttr("max")) hi = *act.AttrOr<float>("max", 0.0f);
  if ((lo.has_value() && quantize(*lo) > qmin) || (hi.has_value() && quantize(*hi) < qmax)) {
    return Refuse("Clip bounds inside the QuantizeLinear's range: not exact to drop");
  }
  return absl::OkStatus();
}

// The integer node's bias: i32 in units of x_scale * w_scale[c].
absl::StatusOr<Slot> Matcher::IntegerBias(const ir::Node& anchor, int64_t channels,
                                          const QParams& x, const QParams& w, float beta) const {
  const ValueId b = anchor.inputs[2];
  const ir::Node* dq = Producer(b, "DequantizeLinear");
  std::vector<double> units(channels);
  for (int64_t c = 0; c < channels; ++c) units[c] = x.Scale(0) * w.Scale(c);
  if (dq != nullptr && beta == 1) {
    // onnxruntime's form: i32 with scale x_scale * w_scale[c] and zero point 0.
    const Tensor* q = g_.constant(dq->inputs[0]);
    absl::StatusOr<QParams> p = ReadParams(g_, *dq, "the bias's DequantizeLinear");
    bool same = p.ok() && q != nullptr && q->dtype() == DType::kI32 && q->rank() == 1 &&
                q->num_elements() == channels && (p->per_tensor() || p->count() == channels);
    for (int64_t c = 0; same && c < channels; ++c) {
      same = p->ZeroPoint(c) == 0 && p->Scale(c) == static_cast<float>(units[c]);
    }
    if (same) return Existing(g_, dq->inputs[0]);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<double> values, BiasValues(g_, dq, b, channels));
  Tensor t(DType::kI32, {channels});
  for (int64_t c = 0; c < channels; ++c) {
    const double r = std::nearbyint(beta * values[c] / units[c]);
    if (!(std::abs(r) < 2147483647.0)) {
      return Refuse("the bias in units of x_scale * w_scale does not fit in i32");
    }
    t.data<int32_t>()[c] = static_cast<int32_t>(r);
  }
  return New(std::move(t), g_.value(b).name + ".quantized");
}

// DQ(a) x DQ(b) -> MatMul -> Q with b an activation (attention's
// Q x K^T and softmax x V): QLinearMatMul on the run-time b, batched like a
// (ONNX's MatMul broadcasting). Fills slots 2-4 of `r` (b, b_scale,
// b_zero_point) and, for a u8 b, `r.shift_b`.
// The input side of a pattern: `dx` reads u8/i8 of known shape (r.x) and
// its zero point, if any, has that type.
absl::StatusOr<QParams> Matcher::MatchInput(const ir::Node& dx, Rewrite& r) const {
  r.x = dx.inputs[0];
  const ir::Value& xv = g_.value(r.x);
  if (!IsQuant8(xv.dtype) || !xv.shape_known) {
    return Refuse("the input's DequantizeLinear does not read u8/i8 of known shape");
  }
  KILN_ASSIGN_OR_RETURN(const QParams x, ReadParams(g_, dx, "the input's DequantizeLinear"));
  if (x.z != nullptr && x.z->dtype() != xv.dtype) {
    return Invalid(g_, dx, absl::StrCat("its zero point is ", ir::DTypeName(x.z->dtype()),
                                        " and its input ", ir::DTypeName(xv.dtype)));
  }
  return x;
}

absl::Status Matcher::MatchActivationB(const ir::Node& dw, const ir::Node& dx,
                                       Rewrite& r) const {
  const ValueId b = dw.inputs[0];
  const ir::Value& bv = g_.value(b);
  if (!IsQuant8(bv.dtype) || !bv.shape_known) {
    return Refuse("the weights are not a u8/i8 constant, nor a u8/i8 activation of known shape");
  }
  if (bv.shape.size() < 2 || g_.value(dx.inputs[0]).shape.size() < 2) {
    return Refuse("a MatMul of activations with a 1-D operand");
  }
  KILN_ASSIGN_OR_RETURN(const QParams w, ReadParams(g_, dw, "the weights' DequantizeLinear"));
  if (w.z != nullptr && w.z->dtype() != bv.dtype) {
    return Invalid(g_, dw, absl::StrCat("its zero point is ", ir::DTypeName(w.z->dtype()),
                                        " and its input ", ir::DTypeName(bv.dtype)));
  }
  if (!w.per_tensor()) {
    return Refuse("per-axis scale of an activation B (the integer call takes one)");
  }
  Slot runtime;
  runtime.dtype = DType::kI8;
  runtime.shape = bv.shape;
  r.slots.push_back(std::move(runtime));
  r.slots.push_back(Existing(g_, w.scale));
  if (bv.dtype == DType::kI8) {
    r.slots[0].existing = b;
    r.slots.push_back(w.zero_point != ir::kNoValue ? Existing(g_, w.zero_point)
                                                   : New(Zero(DType::kI8), bv.name + ".zero_point"));
    return absl::OkStatus();
  }
  // u8 b: read b - 128 with zero point zp - 128.
  ShiftB shift;
  shift.b = b;
  const int bq = ProducerIndex(b);
  if (const ir::Node* q = Producer(b, "QuantizeLinear");
      q != nullptr && q->has_input(2) && q->outputs.size() == 1 && !q->HasAttr("output_dtype")) {
    absl::StatusOr<QParams> p = ReadParams(g_, *q, "B's QuantizeLinear");
    if (p.ok() && p->per_tensor() && p->z != nullptr && p->z->dtype() == DType::kU8 &&
        p->z->num_elements() == 1) {
      shift.producer = bq;
      shift.zero_point = static_cast<int>(p->ZeroPoint(0));
    }
  }
  r.shift_b = shift;
  r.slots.push_back(New(Tensor::Scalar<int8_t>(static_cast<int8_t>(w.ZeroPoint(0) - 128)),
                        bv.name + ".s8.zero_point"));
  return absl::OkStatus();
}

// DQ(a) x DQ(b) -> MatMul with an f32 result read by no QuantizeLinear
// and b an activation: MatMulInteger(a, b, a_zp, b_zp) -> Cast(f32) ->
// Mul(a_scale * b_scale), the multiplier a product in f32 (what ONNX
// Runtime's MatMulIntegerToFloat computes).
absl::StatusOr<Rewrite> Matcher::MatchToFloat(const ir::Node& anchor) const {
  const ir::Node& dx = *Producer(anchor.inputs[0], "DequantizeLinear");
  const ir::Node& dw = *Producer(anchor.inputs[1], "DequantizeLinear");
  const ir::Value& out = g_.value(anchor.outputs[0]);
  if (out.dtype != DType::kF32 || !out.shape_known) return Refuse("the MatMul's result is not f32 of known shape");
  Rewrite r;
  KILN_ASSIGN_OR_RETURN(const QParams x, MatchInput(dx, r));
  const ir::Value& xv = g_.value(r.x);
  if (!x.per_tensor()) return Refuse("per-axis input scale (the integer call takes one)");
  KILN_RETURN_IF_ERROR(MatchActivationB(dw, dx, r));
  KILN_ASSIGN_OR_RETURN(const QParams w, ReadParams(g_, dw, "the weights' DequantizeLinear"));
  // MatMulInteger(A, B, a_zero_point, b_zero_point): slots B, a_zp, b_zp.
  Slot b = std::move(r.slots[0]), bz = std::move(r.slots[2]);
  r.slots = {std::move(b),
             x.zero_point != ir::kNoValue ? Existing(g_, x.zero_point)
                                          : New(Zero(xv.dtype), xv.name + ".zero_point"),
             std::move(bz)};
  r.to_float_scale = x.Scale(0) * w.Scale(0);
  r.x_shape = xv.shape;
  r.y_dtype = DType::kI32;
  r.y_shape = out.shape;
  r.op = "MatMulInteger";
  return r;
}

absl::StatusOr<Rewrite> Matcher::Match(const ir::Node& q, const ir::Node& anchor,
                                       const ir::Node* act) const {
  const ir::Node& dx = *Producer(anchor.inputs[0], "DequantizeLinear");
  const ir::Node& dw = *Producer(anchor.inputs[1], "DequantizeLinear");
  if (!SingleUse(anchor.outputs[0]) || (act != nullptr && !SingleUse(act->outputs[0]))) {
    return Refuse(absl::StrCat("the ", anchor.op, " result has readers besides the QuantizeLinear"));
  }
  Rewrite r;
  // Output.
  if (q.outputs.size() != 1 || q.outputs[0] == ir::kNoValue) return Refuse("malformed QuantizeLinear");
  const ir::Value& qv = g_.value(q.outputs[0]);
  r.y_dtype = qv.dtype;
  if (!IsQuant8(r.y_dtype) || !qv.shape_known) {
    return Refuse("the QuantizeLinear's output is not u8/i8 of known shape");
  }
  KILN_ASSIGN_OR_RETURN(const QParams y, ReadParams(g_, q, "the QuantizeLinear"));
  if (!y.per_tensor()) return Refuse("per-axis output scale (the integer call takes one)");
  if (act != nullptr) KILN_RETURN_IF_ERROR(CheckActivation(*act, y, r.y_dtype));
  // Input.
  KILN_ASSIGN_OR_RETURN(const QParams x, MatchInput(dx, r));
  const ir::Value& xv = g_.value(r.x);
  if (y.z != nullptr && y.z->dtype() != r.y_dtype) {
    return Invalid(g_, q, absl::StrCat("its zero point is ", ir::DTypeName(y.z->dtype()),
                                       " and its output ", ir::DTypeName(r.y_dtype)));
  }
  if (!x.per_tensor()) return Refuse("per-axis input scale (the integer call takes one)");
  // Weights.
  const std::shared_ptr<const Tensor> wq = g_.shared_constant(dw.inputs[0]);
  if (wq == nullptr && anchor.op == "MatMul") {
    KILN_RETURN_IF_ERROR(MatchActivationB(dw, dx, r));
    r.slots.insert(r.slots.begin(), {Existing(g_, x.scale), x.zero_point != ir::kNoValue
                                         ? Existing(g_, x.zero_point)
                                         : New(Zero(xv.dtype), xv.name + ".zero_point")});
    r.slots.push_back(Existing(g_, y.scale));
    r.slots.push_back(y.zero_point != ir::kNoValue ? Existing(g_, y.zero_point)
                                                   : New(Zero(r.y_dtype), qv.name + ".zero_point"));
    r.x_shape = xv.shape;
    r.y_shape = qv.shape;
    r.op = "QLinearMatMul";
    return r;
  }
  if (wq == nullptr || !IsQuant8(wq->dtype())) return Refuse("the weights are not a u8/i8 constant");
  KILN_ASSIGN_OR_RETURN(const QParams w, ReadParams(g_, dw, "the weights' DequantizeLinear"));
  if (w.z != nullptr && w.z->dtype() != wq->dtype()) {
    return Invalid(g_, dw, absl::StrCat("its zero point is ", ir::DTypeName(w.z->dtype()),
                                        " and its input ", ir::DTypeName(wq->dtype())));
  }
  // The axis of the weights that holds output channels, and how many.
  const std::string& op = anchor.op;
  int64_t channel_axis = 0;
  bool trans_b = false;
  float beta = 1;
  if (op == "Conv") {
    if (wq->rank() < 3) return Refuse("Conv weights of rank < 3");
  } else if (op == "Gemm") {
    KILN_ASSIGN_OR_RETURN(const int64_t ta, anchor.AttrOr<int64_t>("transA", 0));
    KILN_ASSIGN_OR_RETURN(const int64_t tb, anchor.AttrOr<int64_t>("transB", 0));
    KILN_ASSIGN_OR_RETURN(const float alpha, anchor.AttrOr<float>("alpha", 1.0f));
    KILN_ASSIGN_OR_RETURN(beta, anchor.AttrOr<float>("beta", 1.0f));
    if (ta != 0 || alpha != 1) return Refuse("Gemm with transA or alpha != 1");
    if (wq->rank() != 2 || xv.shape.size() != 2) return Refuse("Gemm operands are not 2-D");
    trans_b = tb != 0;
    channel_axis = trans_b ? 0 : 1;
  } else {  // MatMul
    if (wq->rank() != 2 || xv.shape.size() < 2) {
      return Refuse("MatMul with weights that are not 2-D or a 1-D input");
    }
    channel_axis = 1;
  }
  const int64_t channels = wq->dim(channel_axis);
  if (!w.per_tensor()) {
    const int64_t axis = w.axis < 0 ? w.axis + wq->rank() : w.axis;
    if (axis != channel_axis || w.count() != channels) {
      return Refuse("the weights' scales are not one per output channel");
    }
  }
  // Inputs 1.. of the integer node: x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp [, bias].
  auto zero_point = [&](const QParams& p, DType t, const std::string& base) {
    return p.zero_point != ir::kNoValue ? Existing(g_, p.zero_point) : New(Zero(t), base + ".zero_point");
  };
  r.slots.push_back(Existing(g_, x.scale));
  r.slots.push_back(zero_point(x, xv.dtype, xv.name));
  Slot weights = Existing(g_, dw.inputs[0]);
  r.x_shape = xv.shape;
  r.y_shape = qv.shape;
  if (op == "Gemm") {
    // [N, K, 1, 1] weights (transposed from [K, N]), x as [M, K, 1, 1].
    const int64_t n = channels, k = wq->dim(trans_b ? 1 : 0);
    Tensor w4(wq->dtype(), {n, k, 1, 1});
    auto* dst = static_cast<uint8_t*>(w4.raw_data());
    const auto* src = static_cast<const uint8_t*>(wq->raw_data());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j) dst[i * k + j] = trans_b ? src[i * k + j] : src[j * n + i];
    }
    weights = New(std::move(w4), g_.value(dw.inputs[0]).name + ".as_1x1");
    r.reshape = true;
    r.x_shape = {xv.shape[0], xv.shape[1], 1, 1};
    r.y_shape = {qv.shape[0], qv.shape[1], 1, 1};
    r.op = "QLinearConv";
  } else if (op == "Conv") {
    r.attrs = anchor.attrs;
    r.op = "QLinearConv";
  } else {
    r.op = "QLinearMatMul";
  }
  r.slots.push_back(std::move(weights));
  r.slots.push_back(Existing(g_, w.scale));
  r.slots.push_back(zero_point(w, wq->dtype(), g_.value(dw.inputs[0]).name));
  r.slots.push_back(Existing(g_, y.scale));
  r.slots.push_back(zero_point(y, r.y_dtype, qv.name));
  if (op != "MatMul" && anchor.has_input(2)) {
    KILN_ASSIGN_OR_RETURN(Slot bias, IntegerBias(anchor, channels, x, w, beta));
    r.slots.push_back(std::move(bias));
  }
  return r;
}

// The integer node alone, for the oracle.
ir::Graph CallGraph(const ir::Graph& g, const Rewrite& r, const std::string& name) {
  ir::Graph call("qdq_call");
  call.set_opset(g.opset());
  const ValueId x = call.AddValue("x", g.value(r.x).dtype, r.x_shape);
  call.AddInput(x);
  std::vector<ValueId> inputs = {x};
  for (size_t i = 0; i < r.slots.size(); ++i) {
    const Slot& s = r.slots[i];
    if (s.tensor == nullptr) {  // the activation B
      const ValueId v = call.AddValue(absl::StrCat("c", i), s.dtype, s.shape);
      call.AddInput(v);
      inputs.push_back(v);
      continue;
    }
    const ValueId v = call.AddValue(absl::StrCat("c", i), s.tensor->dtype(), s.tensor->shape());
    call.SetConstant(v, s.tensor);
    inputs.push_back(v);
  }
  const ValueId y = call.AddValue("y", r.y_dtype, r.y_shape);
  call.AddNode(r.op, inputs, {y}, r.attrs, name);
  call.AddOutput(y);
  return call;
}

// The Reshape to `shape` of `in` into `out`, with its shape constant.
ir::Node Reshape(ir::Graph* g, ValueId in, ValueId out, const ir::Shape& shape) {
  const ValueId s = g->AddValue(UniqueName(*g, g->value(out).name + ".shape"), DType::kI64,
                                {static_cast<int64_t>(shape.size())});
  g->SetConstant(s, Tensor::FromVector<int64_t>({static_cast<int64_t>(shape.size())},
                                                std::vector<int64_t>(shape.begin(), shape.end())));
  ir::Node n;
  n.op = "Reshape";
  n.inputs = {in, s};
  n.outputs = {out};
  return n;
}

}  // namespace

absl::StatusOr<bool> FuseQdq::Run(ir::Graph* graph) {
  patterns_.clear();
  struct Found {
    size_t q, anchor;
    int act;
    Rewrite rewrite;
    std::string name;
  };
  std::vector<Found> found;
  {
    const Matcher m(*graph);
    std::vector<bool> q_anchor(graph->nodes().size(), false);  // seen with a Q
    // The pattern's outcome: found, or left f32 with the reason.
    auto decide = [&](QdqPattern p, absl::StatusOr<Rewrite> r, size_t at, size_t a,
                      int act) -> absl::Status {
      // A model that breaks ONNX's rules is an error, not a pattern left f32.
      if (absl::IsInvalidArgument(r.status())) return r.status();
      absl::Status taken = r.status();
      if (taken.ok() && oracle_) {
        const ir::Graph call = CallGraph(*graph, *r, p.node);
        taken = oracle_(call, call.nodes().front());
      }
      if (!taken.ok()) {
        p.reason = std::string(taken.message());
        patterns_.push_back(std::move(p));
        return absl::OkStatus();
      }
      p.op = r->op;
      patterns_.push_back(p);
      found.push_back({at, a, act, *std::move(r), p.node});
      return absl::OkStatus();
    };
    for (size_t i = 0; i < graph->nodes().size(); ++i) {
      const ir::Node& q = graph->nodes()[i];
      if (!q.domain.empty() || q.op != "QuantizeLinear" || q.inputs.empty()) continue;
      int a = m.ProducerIndex(q.inputs[0]);
      int act = -1;
      if (a >= 0 && graph->nodes()[a].domain.empty() &&
          (graph->nodes()[a].op == "Relu" || graph->nodes()[a].op == "Clip")) {
        act = a;
        a = m.ProducerIndex(graph->nodes()[a].inputs[0]);
      }
      if (a < 0) continue;
      const ir::Node& anchor = graph->nodes()[a];
      if (!anchor.domain.empty() ||
          (anchor.op != "Conv" && anchor.op != "Gemm" && anchor.op != "MatMul") ||
          anchor.inputs.size() < 2 || anchor.outputs.size() != 1 ||
          m.Producer(anchor.inputs[0], "DequantizeLinear") == nullptr ||
          m.Producer(anchor.inputs[1], "DequantizeLinear") == nullptr) {
        continue;
      }
      q_anchor[a] = true;
      KILN_RETURN_IF_ERROR(decide({NodeName(*graph, anchor), anchor.op, "", ""},
                                  m.Match(q, anchor, act >= 0 ? &graph->nodes()[act] : nullptr),
                                  i, static_cast<size_t>(a), act));
    }
    // MatMuls of two dequantized activations whose result stays f32.
    for (size_t i = 0; i < graph->nodes().size(); ++i) {
      const ir::Node& n = graph->nodes()[i];
      if (q_anchor[i] || !n.domain.empty() || n.op != "MatMul" || n.inputs.size() != 2 ||
          n.outputs.size() != 1) {
        continue;
      }
      const ir::Node* dw = m.Producer(n.inputs[1], "DequantizeLinear");
      if (m.Producer(n.inputs[0], "DequantizeLinear") == nullptr || dw == nullptr ||
          graph->IsConstant(dw->inputs[0])) {
        continue;
      }
      KILN_RETURN_IF_ERROR(
          decide({NodeName(*graph, n), n.op, "", ""}, m.MatchToFloat(n), i, i, -1));
    }
  }
  if (found.empty()) return false;
  std::vector<bool> remove(graph->nodes().size(), false);
  std::vector<std::vector<ir::Node>> replace(graph->nodes().size());
  // A constant added to the graph.
  auto add_constant = [&](const std::string& name, Tensor t) {
    const ValueId v = graph->AddValue(UniqueName(*graph, name), t.dtype(), t.shape());
    graph->SetConstant(v, std::move(t));
    return v;
  };
  absl::flat_hash_map<ValueId, ValueId> s8_of;  // u8 activation B -> its s8 form
  for (Found& f : found) {
    const Rewrite& r = f.rewrite;
    const ValueId q_out = graph->nodes()[f.q].outputs[0];
    std::vector<ValueId> inputs = {r.x};
    std::vector<ir::Node>& nodes = replace[f.q];
    ValueId b_s8 = ir::kNoValue;
    if (r.shift_b.has_value()) {
      const ShiftB& sb = *r.shift_b;
      if (auto it = s8_of.find(sb.b); it != s8_of.end()) {
        b_s8 = it->second;
      } else {
        const ir::Value& bv = graph->value(sb.b);
        const std::string base = bv.name + ".s8";
        const ir::Shape shape = bv.shape;
        b_s8 = graph->AddValue(UniqueName(*graph, base), DType::kI8, shape);
        ir::Node quantize;
        quantize.op = "QuantizeLinear";
        quantize.outputs = {b_s8};
        if (sb.producer >= 0) {
          const ir::Node& bq = graph->nodes()[sb.producer];
          quantize.attrs = bq.attrs;
          quantize.inputs = {bq.inputs[0], bq.inputs[1],
                             add_constant(base + ".zero_point",
                                          Tensor::Scalar<int8_t>(
                                              static_cast<int8_t>(sb.zero_point - 128)))};
        } else {
          const ValueId f32 =
              graph->AddValue(UniqueName(*graph, base + ".f32"), DType::kF32, shape);
          const ValueId one = add_constant(base + ".one", Tensor::Scalar<float>(1.0f));
          ir::Node dequantize;
          dequantize.op = "DequantizeLinear";
          dequantize.inputs = {sb.b, one,
                               add_constant(base + ".u8_zero_point", Tensor::Scalar<uint8_t>(128))};
          dequantize.outputs = {f32};
          nodes.push_back(std::move(dequantize));
          quantize.inputs = {f32, one,
                             add_constant(base + ".zero_point", Tensor::Scalar<int8_t>(0))};
        }
        nodes.push_back(std::move(quantize));
        s8_of[sb.b] = b_s8;
      }
    }
    if (r.reshape) {
      const ValueId x4 = graph->AddValue(UniqueName(*graph, graph->value(r.x).name + ".as_1x1"),
                                         graph->value(r.x).dtype, r.x_shape);
      nodes.push_back(Reshape(graph, r.x, x4, r.x_shape));
      inputs[0] = x4;
    }
    for (const Slot& s : r.slots) {
      if (s.existing != ir::kNoValue) {
        inputs.push_back(s.existing);
        continue;
      }
      if (s.tensor == nullptr) {  // a u8 activation B, as s8
        inputs.push_back(b_s8);
        continue;
      }
      const ValueId v = graph->AddValue(UniqueName(*graph, s.name), s.tensor->dtype(), s.tensor->shape());
      graph->SetConstant(v, s.tensor);
      inputs.push_back(v);
    }
    ValueId out = q_out;
    if (r.reshape) {
      out = graph->AddValue(UniqueName(*graph, graph->value(q_out).name + ".1x1"), r.y_dtype, r.y_shape);
    }
    if (r.to_float_scale.has_value()) {
      out = graph->AddValue(UniqueName(*graph, graph->value(q_out).name + ".i32"), r.y_dtype,
                            r.y_shape);
    }
    ir::Node call;
    call.name = f.name;
    call.op = r.op;
    call.inputs = std::move(inputs);
    call.outputs = {out};
    call.attrs = r.attrs;
    nodes.push_back(std::move(call));
    if (r.reshape) nodes.push_back(Reshape(graph, out, q_out, graph->value(q_out).shape));
    if (r.to_float_scale.has_value()) {
      const std::string base = graph->value(q_out).name;
      const ValueId f32 = graph->AddValue(UniqueName(*graph, base + ".f32"), DType::kF32, r.y_shape);
      ir::Node cast;
      cast.op = "Cast";
      cast.inputs = {out};
      cast.outputs = {f32};
      cast.attrs["to"] = int64_t{1};
      nodes.push_back(std::move(cast));
      ir::Node mul;
      mul.op = "Mul";
      mul.inputs = {f32, add_constant(base + ".scale", Tensor::Scalar<float>(*r.to_float_scale))};
      mul.outputs = {q_out};
      nodes.push_back(std::move(mul));
    }
    remove[f.anchor] = true;
    if (f.act >= 0) remove[f.act] = true;
  }
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < graph->nodes().size(); ++i) {
    if (!replace[i].empty()) {
      for (ir::Node& n : replace[i]) kept.push_back(std::move(n));
    } else if (!remove[i]) {
      kept.push_back(std::move(graph->mutable_nodes()[i]));
    }
  }
  graph->mutable_nodes() = std::move(kept);
  return true;
}

}  // namespace kiln::passes
