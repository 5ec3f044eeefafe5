// Pass fuse-dequantize-lstm.
#include "passes/graph/fuse_dequantize_lstm.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"
#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Tensor;
using ir::ValueId;

constexpr char kKilnDomain[] = "kiln";
constexpr char kFusedOp[] = "FusedLSTM";
constexpr int kR = 2;
constexpr int kLstmInputs = 8;

// R's 8-bit form: q [D, 4H, H], scale [D] or [D, 4H], zero point of the
// scale's shape (or none).
struct QuantizedR {
  std::shared_ptr<const Tensor> q;  // set when q is one constant of the graph
  ValueId q_value = ir::kNoValue;
  std::optional<Tensor> q_concat;  // the Concat form's directions joined
  Tensor scale;
  std::optional<Tensor> zero_point;
  int concat = -1;  // the Concat node's index (the Concat form)
};

bool Is8Bit(DType t) { return t == DType::kU8 || t == DType::kI8; }

const ir::Node* Producer(const ir::Graph& g, const std::vector<int>& producer, ValueId v,
                         const char* op) {
  if (v == ir::kNoValue || producer[v] < 0) return nullptr;
  const ir::Node& n = g.nodes()[producer[v]];
  return n.domain.empty() && n.op == op ? &n : nullptr;
}

// A DequantizeLinear's constants when they are 8-bit q, f32 scale and a
// zero point of q's type; nullopt otherwise.
struct DqParts {
  const Tensor* q;
  const Tensor* scale;
  const Tensor* zp;  // nullptr: none
  ValueId q_value;
};
std::optional<DqParts> DqConstants(const ir::Graph& g, const ir::Node& dq) {
  if (dq.inputs.size() < 2 || dq.outputs.size() != 1 || dq.HasAttr("block_size")) {
    return std::nullopt;
  }
  const Tensor* q = g.constant(dq.inputs[0]);
  const Tensor* scale = g.constant(dq.inputs[1]);
  const Tensor* zp = dq.has_input(2) ? g.constant(dq.inputs[2]) : nullptr;
  if (q == nullptr || scale == nullptr || (dq.has_input(2) && zp == nullptr)) return std::nullopt;
  if (!Is8Bit(q->dtype()) || scale->dtype() != DType::kF32 ||
      (zp != nullptr && zp->dtype() != q->dtype()) ||
      g.value(dq.outputs[0]).dtype != DType::kF32) {
    return std::nullopt;
  }
  return DqParts{q, scale, zp, dq.inputs[0]};
}

// `count` copies of element 0 of `t` (a per-tensor parameter spread per
// direction).
Tensor Repeated(const Tensor& t, int64_t count) {
  Tensor out(t.dtype(), {count});
  const size_t bytes = ir::DTypeSize(t.dtype());
  for (int64_t k = 0; k < count; ++k) {
    std::memcpy(static_cast<char*>(out.raw_data()) + k * bytes, t.raw_data(), bytes);
  }
  return out;
}

// The one-DequantizeLinear form of R for an LSTM of D directions.
std::optional<QuantizedR> MatchOne(const ir::Graph& g, const ir::Node& dq, int64_t D) {
  std::optional<DqParts> p = DqConstants(g, dq);
  if (!p.has_value()) return std::nullopt;
  const Tensor& q = *p->q;
  if (q.rank() != 3 || q.dim(0) != D || q.dim(1) != 4 * q.dim(2)) return std::nullopt;
  QuantizedR r;
  r.q = g.shared_constant(p->q_value);
  r.q_value = p->q_value;
  const Tensor& s = *p->scale;
  if (s.num_elements() == 1 && s.rank() <= 1) {
    if (p->zp != nullptr && p->zp->num_elements() != 1) return std::nullopt;
    r.scale = Repeated(s, D);
    if (p->zp != nullptr) r.zero_point = Repeated(*p->zp, D);
    return r;
  }
  if (s.rank() != 1 || g.opset() < 13) return std::nullopt;
  absl::StatusOr<int64_t> axis_attr = dq.AttrOr<int64_t>("axis", 1);
  if (!axis_attr.ok()) return std::nullopt;
  const int64_t axis = *axis_attr < 0 ? *axis_attr + 3 : *axis_attr;
  if (p->zp != nullptr && p->zp->shape() != s.shape()) return std::nullopt;
  ir::Shape shape;
  if (axis == 0 && s.dim(0) == D) {
    shape = {D};
  } else if (axis == 1 && D == 1 && s.dim(0) == q.dim(1)) {
    shape = {1, q.dim(1)};
  } else {
    return std::nullopt;
  }
  r.scale = Tensor::FromBytes(DType::kF32, shape, s.raw_data());
  if (p->zp != nullptr) r.zero_point = Tensor::FromBytes(p->zp->dtype(), shape, p->zp->raw_data());
  return r;
}

// The Concat form: Concat(axis 0) of D per-tensor DequantizeLinear nodes over
// q [1, 4H, H] of one type.
std::optional<QuantizedR> MatchConcat(const ir::Graph& g, const std::vector<int>& producer,
                                      const ir::Node& concat, int64_t D) {
  absl::StatusOr<int64_t> axis = concat.Attr<int64_t>("axis");
  if (!axis.ok() || (*axis != 0 && *axis != -3) ||
      static_cast<int64_t>(concat.inputs.size()) != D) {
    return std::nullopt;
  }
  std::vector<DqParts> parts;
  for (ValueId v : concat.inputs) {
    const ir::Node* dq = Producer(g, producer, v, "DequantizeLinear");
    if (dq == nullptr) return std::nullopt;
    std::optional<DqParts> p = DqConstants(g, *dq);
    if (!p.has_value()) return std::nullopt;
    const Tensor& q = *p->q;
    if (q.rank() != 3 || q.dim(0) != 1 || q.dim(1) != 4 * q.dim(2) ||
        p->scale->num_elements() != 1 || p->scale->rank() > 1 ||
        (p->zp != nullptr && p->zp->num_elements() != 1) ||
        (!parts.empty() && (q.dtype() != parts[0].q->dtype() ||
                            q.shape() != parts[0].q->shape() ||
                            (p->zp == nullptr) != (parts[0].zp == nullptr)))) {
      return std::nullopt;
    }
    parts.push_back(*p);
  }
  const Tensor& q0 = *parts[0].q;
  QuantizedR r;
  r.q_concat = Tensor(q0.dtype(), {D, q0.dim(1), q0.dim(2)});
  r.scale = Tensor(DType::kF32, {D});
  if (parts[0].zp != nullptr) r.zero_point = Tensor(q0.dtype(), {D});
  for (int64_t d = 0; d < D; ++d) {
    const DqParts& p = parts[d];
    std::memcpy(static_cast<char*>(r.q_concat->raw_data()) + d * q0.byte_size(),
                p.q->raw_data(), q0.byte_size());
    std::memcpy(r.scale.data<float>() + d, p.scale->raw_data(), sizeof(float));
    if (p.zp != nullptr) {
      std::memcpy(static_cast<char*>(r.zero_point->raw_data()) + d, p.zp->raw_data(), 1);
    }
  }
  r.concat = producer[concat.outputs[0]];
  return r;
}

// R in f32, float(q - zp) * scale per direction (the reference's rounding).
Tensor DequantizedR(const Tensor& q, const QuantizedR& r) {
  Tensor out(DType::kF32, q.shape());
  const int64_t D = q.dim(0), per_direction = q.num_elements() / D;
  float* y = out.data<float>();
  for (int64_t i = 0; i < q.num_elements(); ++i) {
    const int64_t d = i / per_direction;
    const double v = q.GetAsDouble(i) - (r.zero_point ? r.zero_point->GetAsDouble(d) : 0.0);
    y[i] = static_cast<float>(v) * r.scale.data<float>()[d];
  }
  return out;
}

std::string NodeName(const ir::Graph& g, const ir::Node& n) {
  if (!n.name.empty()) return n.name;
  for (ValueId v : n.outputs) {
    if (v != ir::kNoValue) return g.value(v).name;
  }
  return n.op;
}

// The fused node alone in a graph (its constants constant, the rest graph
// inputs), for the oracle.
ir::Graph CallGraph(const ir::Graph& g, const ir::Node& fused) {
  ir::Graph call("lstm_call");
  call.set_opset(g.opset());
  ir::Node copy = fused;
  for (ValueId& v : copy.inputs) {
    if (v == ir::kNoValue) continue;
    const ir::Value& info = g.value(v);
    const ValueId inner = call.AddValue(info.name, info.dtype, info.shape);
    if (g.IsConstant(v)) {
      call.SetConstant(inner, g.shared_constant(v));
    } else {
      call.AddInput(inner);
    }
    v = inner;
  }
  for (ValueId& v : copy.outputs) {
    if (v == ir::kNoValue) continue;
    const ir::Value& info = g.value(v);
    v = call.AddValue(info.name, info.dtype, info.shape);
    call.AddOutput(v);
  }
  call.mutable_nodes().push_back(std::move(copy));
  return call;
}

}  // namespace

absl::StatusOr<bool> FuseDequantizeLstm::Run(ir::Graph* graph) {
  patterns_.clear();
  const absl::flat_hash_set<std::string> captured = CapturedNames(*graph);
  std::vector<int> producer(graph->num_values(), -1);
  for (size_t i = 0; i < graph->nodes().size(); ++i) {
    for (ValueId v : graph->nodes()[i].outputs) {
      if (v != ir::kNoValue) producer[v] = static_cast<int>(i);
    }
  }
  auto add_constant = [&](const std::string& name, Tensor t) {
    const ValueId v = graph->AddValue(UniqueName(*graph, name), t.dtype(), t.shape());
    graph->SetConstant(v, std::move(t));
    return v;
  };
  std::vector<bool> remove(graph->nodes().size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph->nodes().size(); ++i) {
    const ir::Node& lstm = graph->nodes()[i];
    if (!lstm.domain.empty() || lstm.op != "LSTM" || !lstm.has_input(kR)) continue;
    absl::StatusOr<std::string> direction = lstm.AttrOr<std::string>("direction", "forward");
    if (!direction.ok()) continue;
    const int64_t D = *direction == "bidirectional" ? 2 : 1;
    const ValueId r_value = lstm.inputs[kR];
    std::optional<QuantizedR> r;
    if (const ir::Node* dq = Producer(*graph, producer, r_value, "DequantizeLinear")) {
      r = MatchOne(*graph, *dq, D);
    } else if (const ir::Node* concat = Producer(*graph, producer, r_value, "Concat")) {
      r = MatchConcat(*graph, producer, *concat, D);
    }
    if (!r.has_value()) continue;
    const Tensor& q = r->q != nullptr ? *r->q : *r->q_concat;
    const int64_t H = q.dim(2);
    QdqPattern pattern{NodeName(*graph, lstm), "LSTM", "", ""};
    absl::Status taken = absl::OkStatus();
    const int64_t f32_bytes = 4 * H * H * static_cast<int64_t>(sizeof(float));
    if (f32_bytes <= min_f32_r_bytes_) {
      taken = absl::UnimplementedError(
          absl::StrCat("one direction's f32 R is ", f32_bytes, " bytes, not above ",
                       min_f32_r_bytes_, ": it stays f32"));
    }
    ir::Node fused = lstm;
    if (taken.ok()) {
      const std::string base = graph->value(r_value).name;
      fused.domain = kKilnDomain;
      fused.op = kFusedOp;
      fused.inputs.resize(kLstmInputs + 2, ir::kNoValue);
      fused.inputs[kR] = r->q != nullptr ? r->q_value
                                         : add_constant(base + ".quantized", *r->q_concat);
      fused.inputs[kLstmInputs] = add_constant(base + ".scale", r->scale);
      if (r->zero_point.has_value()) {
        fused.inputs[kLstmInputs + 1] = add_constant(base + ".zero_point", *r->zero_point);
      }
      while (!fused.inputs.empty() && fused.inputs.back() == ir::kNoValue) fused.inputs.pop_back();
      if (oracle_) {
        const ir::Graph call = CallGraph(*graph, fused);
        taken = oracle_(call, call.nodes().front());
      }
    }
    if (!taken.ok()) {
      pattern.reason = std::string(taken.message());
      patterns_.push_back(std::move(pattern));
      // The Concat form: R's f32 constant here, as no later pass folds it.
      const ValueId out = r_value;
      if (r->concat >= 0 && !remove[r->concat] && !IsGraphOutput(*graph, out) &&
          !captured.contains(graph->value(out).name)) {
        Tensor f32 = DequantizedR(q, *r);
        ir::Value& v = graph->mutable_value(out);
        v.shape = f32.shape();
        v.shape_known = true;
        graph->SetConstant(out, std::move(f32));
        remove[r->concat] = true;
        changed = true;
      }
      continue;
    }
    pattern.op = kFusedOp;
    patterns_.push_back(std::move(pattern));
    graph->mutable_nodes()[i] = std::move(fused);
    changed = true;
  }
  if (!changed) return false;
  EraseNodes(graph, remove);
  return true;
}

}  // namespace kiln::passes
