// com.microsoft.DynamicQuantizeLSTM -> ONNX LSTM over dequantized weights.
//
// Layouts (ONNX Runtime's contrib schema and CPU kernel): W is [D, input_size,
// 4*H] and R is [D, H, 4*H], both int8 or both uint8, gates i, o, f, c along
// the last dim as in ONNX; scales and zero points are [D] (per direction) or
// [D, 4*H] (per output column). ONNX's LSTM wants W [D, 4*H, input_size] and
// R [D, 4*H, H], so the dequantized weights are also transposed.
#include "frontend/onnx/dynamic_quantize_lstm.h"

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/tensor_proto.h"
#include "ir/graph/tensor.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::frontend::onnx_internal {
namespace {

using TP = onnx::TensorProto;

constexpr char kMsDomain[] = "com.microsoft";
constexpr char kOpType[] = "DynamicQuantizeLSTM";

// Input slots of ONNX Runtime's schema; all twelve are declared (1, 2 and
// 8-11 required).
constexpr int kW = 1;
constexpr int kR = 2;
constexpr int kWScale = 8;
constexpr int kWZeroPoint = 9;
constexpr int kRScale = 10;
constexpr int kRZeroPoint = 11;
constexpr int kNumInputs = 12;
constexpr int kLstmInputs = 8;  // X, W, R, B, sequence_lens, initial_h, initial_c, P
constexpr const char* kInputNames[kNumInputs] = {
    "X",       "W",       "R",         "B",            "sequence_lens", "initial_h",
    "initial_c", "P",     "W_scale",   "W_zero_point", "R_scale",       "R_zero_point"};

bool IsDynamicQuantizeLstm(const onnx::NodeProto& node) {
  return node.domain() == kMsDomain && node.op_type() == kOpType;
}

void ForEachGraph(onnx::GraphProto* g,
                  const std::function<void(onnx::GraphProto*, bool top)>& fn,
                  bool top = true) {
  fn(g, top);
  for (onnx::NodeProto& node : *g->mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) ForEachGraph(a.mutable_g(), fn, false);
      for (onnx::GraphProto& sub : *a.mutable_graphs()) ForEachGraph(&sub, fn, false);
    }
  }
}

// Every name a value has anywhere in the model, to pick fresh ones.
void CollectNames(onnx::GraphProto* model_graph, absl::flat_hash_set<std::string>* names) {
  ForEachGraph(model_graph, [&](onnx::GraphProto* g, bool) {
    for (const auto& v : g->input()) names->insert(v.name());
    for (const auto& v : g->output()) names->insert(v.name());
    for (const auto& v : g->value_info()) names->insert(v.name());
    for (const auto& t : g->initializer()) names->insert(t.name());
    for (const auto& n : g->node()) {
      for (const auto& i : n.input()) names->insert(i);
      for (const auto& o : n.output()) names->insert(o);
    }
  });
}

std::string DirectionName(int64_t d) { return d == 2 ? "bidirectional" : "one direction"; }

// Rewrites the DynamicQuantizeLSTM nodes of one graph.
class GraphRewriter {
 public:
  GraphRewriter(onnx::GraphProto* g, bool top, const DetachedTensors& detached,
                absl::string_view base_dir, int64_t max_tensor_bytes, int64_t opset,
                absl::flat_hash_set<std::string>* names)
      : g_(g), top_(top), detached_(detached), base_dir_(base_dir),
        max_tensor_bytes_(max_tensor_bytes), opset_(opset), names_(names) {
    for (TP& t : *g_->mutable_initializer()) constants_[t.name()] = &t;
    for (onnx::NodeProto& n : *g_->mutable_node()) {
      if (!n.domain().empty() || n.op_type() != "Constant" || n.output_size() != 1) continue;
      for (onnx::AttributeProto& a : *n.mutable_attribute()) {
        if (a.name() == "value" && a.has_t()) constants_.emplace(n.output(0), a.mutable_t());
      }
    }
  }

  absl::Status Run() {
    std::vector<std::vector<onnx::NodeProto>> before(g_->node_size());
    bool inserted = false;
    for (int i = 0; i < g_->node_size(); ++i) {
      onnx::NodeProto* node = g_->mutable_node(i);
      if (!IsDynamicQuantizeLstm(*node)) continue;
      KILN_RETURN_IF_ERROR(RewriteNode(node, i, &before[i]));
      inserted |= !before[i].empty();
    }
    if (!inserted) return absl::OkStatus();
    // The nodes computing a rewritten LSTM's R go right before it.
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < g_->node_size(); ++i) {
      for (onnx::NodeProto& n : before[i]) *nodes.Add() = std::move(n);
      *nodes.Add() = std::move(*g_->mutable_node(i));
    }
    g_->mutable_node()->Swap(&nodes);
    return absl::OkStatus();
  }

  // Constants the rewritten nodes read that may now be unused.
  const std::vector<std::string>& consumed() const { return consumed_; }

 private:
  absl::Status Error(const std::string& desc, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(desc, ": ", what));
  }

  // The constant at input `slot`, of element type `elem_type` (the type is
  // checked before any data is read).
  absl::StatusOr<ir::Tensor> Constant(const onnx::NodeProto& node, const std::string& desc,
                                      int slot, int32_t elem_type) const {
    const std::string& name = node.input(slot);
    const std::string what = absl::StrCat("input ", kInputNames[slot], " ('",
                                          EscapeForMessage(name), "')");
    auto it = name.empty() ? constants_.end() : constants_.find(name);
    if (it == constants_.end()) {
      return Error(desc, absl::StrCat(what, " must be an initializer or a Constant of the "
                                            "node's graph (kiln dequantizes the weights once, "
                                            "at import)"));
    }
    const TP& proto = *it->second;
    if (proto.data_type() != elem_type) {
      return Error(desc, absl::StrCat(what, " is ", OnnxElemTypeName(proto.data_type()),
                                      "; it must be ", OnnxElemTypeName(elem_type)));
    }
    if (top_ && proto.raw_data() == absl::string_view("\0", 1)) {
      auto d = detached_.find(name);
      if (d != detached_.end()) return d->second->Share();
    }
    TP copy = proto;
    const std::string data_what = absl::StrCat(desc, ": ", what);
    KILN_RETURN_IF_ERROR(InlineExternalData(&copy, base_dir_, max_tensor_bytes_, data_what));
    return TensorFromProto(copy, max_tensor_bytes_, data_what);
  }

  // Checks a scale / zero point pair and returns (scale, zero point).
  absl::StatusOr<std::pair<ir::Tensor, ir::Tensor>> QuantParams(
      const onnx::NodeProto& node, const std::string& desc, int scale_slot, int zp_slot,
      int32_t weight_type, int64_t directions, int64_t columns) const {
    KILN_ASSIGN_OR_RETURN(ir::Tensor scale, Constant(node, desc, scale_slot, TP::FLOAT));
    auto zp_proto = constants_.find(node.input(zp_slot));
    const int32_t zp_type =
        zp_proto != constants_.end() ? zp_proto->second->data_type() : weight_type;
    if (zp_type != weight_type) {
      return Error(desc, absl::StrCat("input ", kInputNames[zp_slot], " is ",
                                      OnnxElemTypeName(zp_type), " but its weights are ",
                                      OnnxElemTypeName(weight_type),
                                      " (one 8-bit type for W, R and both zero points)"));
    }
    KILN_ASSIGN_OR_RETURN(ir::Tensor zp, Constant(node, desc, zp_slot, weight_type));
    const ir::Shape per_direction = {directions};
    const ir::Shape per_column = {directions, columns};
    if (scale.shape() != per_direction && scale.shape() != per_column) {
      return Error(desc, absl::StrCat("input ", kInputNames[scale_slot], " has shape ",
                                      ir::ShapeToString(scale.shape()), "; it must be ",
                                      ir::ShapeToString(per_direction), " (per direction) or ",
                                      ir::ShapeToString(per_column), " (per column)"));
    }
    if (zp.shape() != scale.shape()) {
      return Error(desc, absl::StrCat("input ", kInputNames[zp_slot], " has shape ",
                                      ir::ShapeToString(zp.shape()), " but ",
                                      kInputNames[scale_slot], " has ",
                                      ir::ShapeToString(scale.shape())));
    }
    if (zp.rank() == 2) {
      // ONNX Runtime's kernel takes one zero point per direction and refuses
      // per-column ones it cannot express that way.
      for (int64_t k = 1; k < zp.num_elements(); ++k) {
        if (zp.GetAsInt64(k) != zp.GetAsInt64(0)) {
          return Error(desc, absl::StrCat("per-column ", kInputNames[zp_slot],
                                          " must hold one value (ONNX Runtime's kernel "
                                          "takes no other)"));
        }
      }
      if (weight_type == TP::INT8 && zp.num_elements() > 0 && zp.GetAsInt64(0) != 0) {
        return Error(desc, absl::StrCat("per-column ", kInputNames[zp_slot],
                                        " of int8 weights must be 0 (ONNX Runtime's kernel "
                                        "takes no other)"));
      }
    }
    return std::make_pair(std::move(scale), std::move(zp));
  }

  // q [D, K, N] -> f32 [D, N, K]: (q - zp) * scale, per direction or column.
  template <typename Q>
  static void DequantizeTransposed(const ir::Tensor& q, const ir::Tensor& scale,
                                   const ir::Tensor& zp, ir::Tensor* out) {
    const int64_t D = q.dim(0), K = q.dim(1), N = q.dim(2);
    const bool per_column = scale.rank() == 2;
    const Q* src = q.data<Q>();
    const Q* zps = zp.data<Q>();
    const float* scales = scale.data<float>();
    float* dst = out->data<float>();
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t n = 0; n < N; ++n) {
        const int64_t p = per_column ? d * N + n : d;
        const float s = scales[p];
        const float z = static_cast<float>(zps[p]);
        const Q* col = src + d * K * N + n;
        float* row = dst + (d * N + n) * K;
        for (int64_t k = 0; k < K; ++k) row[k] = (static_cast<float>(col[k * N]) - z) * s;
      }
    }
  }

  std::string FreshName(const std::string& base, absl::string_view suffix = "_dequantized") {
    std::string name = absl::StrCat(base, suffix);
    for (int k = 1; names_->contains(name); ++k) name = absl::StrCat(base, suffix, "_", k);
    names_->insert(name);
    return name;
  }

  // A new initializer holding `t`; its name.
  absl::StatusOr<std::string> AddInitializer(const ir::Tensor& t, const std::string& base,
                                             absl::string_view suffix) {
    const std::string name = FreshName(base, suffix);
    KILN_ASSIGN_OR_RETURN(TP proto, TensorToProto(t, name));
    *g_->add_initializer() = std::move(proto);
    return name;
  }

  // Directions [d0, d0 + count) of q [D, K, N] (8-bit), transposed to [count, N, K]:
  // the same integers in ONNX's weight layout.
  static ir::Tensor TransposedDirections(const ir::Tensor& q, int64_t d0, int64_t count) {
    const int64_t K = q.dim(1), N = q.dim(2);
    ir::Tensor out(q.dtype(), {count, N, K});
    const auto* src = static_cast<const uint8_t*>(q.raw_data());
    auto* dst = static_cast<uint8_t*>(out.raw_data());
    for (int64_t d = 0; d < count; ++d) {
      const uint8_t* from = src + (d0 + d) * K * N;
      uint8_t* to = dst + d * N * K;
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < K; ++k) to[n * K + k] = from[k * N + n];
      }
    }
    return out;
  }

  // Element `k` of a scale or zero point as a rank-0 tensor.
  static ir::Tensor ScalarAt(const ir::Tensor& t, int64_t k) {
    ir::Tensor out(t.dtype(), {});
    const size_t bytes = ir::DTypeSize(t.dtype());
    std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + k * bytes, bytes);
    return out;
  }

  static bool AllEqual(const ir::Tensor& t) {
    const size_t bytes = ir::DTypeSize(t.dtype());
    const auto* p = static_cast<const char*>(t.raw_data());
    for (int64_t k = 1; k < t.num_elements(); ++k) {
      if (std::memcmp(p, p + k * bytes, bytes) != 0) return false;
    }
    return true;
  }

  // The LSTM's R as ONNX's DequantizeLinear of the 8-bit weights in ONNX's
  // layout [D, 4H, H] (decision 0074), the nodes computing it appended to
  // `nodes`: per tensor when one scale and zero point cover every weight;
  // per direction on axis 0 and per column of one direction on axis 1 from
  // opset 13; per direction below opset 13 as one DequantizeLinear per
  // direction and a Concat. Empty (R stays 0071's f32 initializer) for what
  // no DequantizeLinear of the model's opset expresses: per-column
  // parameters of a bidirectional LSTM or below opset 13, any below opset 10.
  absl::StatusOr<std::string> QuantizedR(const onnx::NodeProto& node, const ir::Tensor& q,
                                         const std::pair<ir::Tensor, ir::Tensor>& params,
                                         std::vector<onnx::NodeProto>* nodes) {
    const ir::Tensor& scale = params.first;
    const ir::Tensor& zp = params.second;
    const int64_t D = q.dim(0);
    const bool per_column = scale.rank() == 2;
    const bool one_pair = !per_column && AllEqual(scale) && AllEqual(zp);
    if (opset_ < 10 || (per_column && (D != 1 || opset_ < 13))) return std::string();
    const std::string& base = node.input(kR);
    auto dequantize = [&](const std::string& qn, const std::string& sn, const std::string& zn,
                          const std::string& out, int64_t axis) {
      onnx::NodeProto dq;
      dq.set_op_type("DequantizeLinear");
      dq.set_name(FreshName(base, "_dequantize"));
      dq.add_input(qn);
      dq.add_input(sn);
      dq.add_input(zn);
      dq.add_output(out);
      if (axis >= 0) {
        onnx::AttributeProto* a = dq.add_attribute();
        a->set_name("axis");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(axis);
      }
      nodes->push_back(std::move(dq));
    };
    const std::string out = FreshName(base);
    if (one_pair || per_column || opset_ >= 13) {
      KILN_ASSIGN_OR_RETURN(std::string qn,
                            AddInitializer(TransposedDirections(q, 0, D), base, "_onnx_layout"));
      if (one_pair) {
        KILN_ASSIGN_OR_RETURN(std::string sn, AddInitializer(ScalarAt(scale, 0), base, "_scale"));
        KILN_ASSIGN_OR_RETURN(std::string zn, AddInitializer(ScalarAt(zp, 0), base, "_zero_point"));
        dequantize(qn, sn, zn, out, -1);
      } else if (per_column) {
        // [1, 4H] -> [4H], along axis 1 of [1, 4H, H].
        const ir::Shape columns = {scale.dim(1)};
        KILN_ASSIGN_OR_RETURN(
            std::string sn,
            AddInitializer(ir::Tensor::FromBytes(scale.dtype(), columns, scale.raw_data()), base,
                           "_scale"));
        KILN_ASSIGN_OR_RETURN(
            std::string zn,
            AddInitializer(ir::Tensor::FromBytes(zp.dtype(), columns, zp.raw_data()), base,
                           "_zero_point"));
        dequantize(qn, sn, zn, out, 1);
      } else {
        dequantize(qn, node.input(kRScale), node.input(kRZeroPoint), out, 0);
      }
      return out;
    }
    onnx::NodeProto concat;
    concat.set_op_type("Concat");
    concat.set_name(FreshName(base, "_concat"));
    onnx::AttributeProto* a = concat.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(0);
    for (int64_t d = 0; d < D; ++d) {
      const std::string suffix = absl::StrCat("_direction", d);
      KILN_ASSIGN_OR_RETURN(
          std::string qn,
          AddInitializer(TransposedDirections(q, d, 1), base, absl::StrCat(suffix, "_onnx_layout")));
      KILN_ASSIGN_OR_RETURN(std::string sn, AddInitializer(ScalarAt(scale, d), base,
                                                           absl::StrCat(suffix, "_scale")));
      KILN_ASSIGN_OR_RETURN(std::string zn, AddInitializer(ScalarAt(zp, d), base,
                                                           absl::StrCat(suffix, "_zero_point")));
      const std::string part = FreshName(base, absl::StrCat(suffix, "_dequantized"));
      dequantize(qn, sn, zn, part, -1);
      concat.add_input(part);
    }
    concat.add_output(out);
    nodes->push_back(std::move(concat));
    return out;
  }

  // The f32 ONNX-layout weights for (weights, scale, zero point) slots: a new
  // initializer, shared by nodes that read the same three constants.
  absl::StatusOr<std::string> Dequantized(const onnx::NodeProto& node, const std::string& desc,
                                          int slot, int scale_slot, int zp_slot,
                                          const ir::Tensor& q,
                                          const std::pair<ir::Tensor, ir::Tensor>& params) {
    const std::string key =
        absl::StrJoin({node.input(slot), node.input(scale_slot), node.input(zp_slot)},
                      std::string(1, '\0'));
    auto it = dequantized_.find(key);
    if (it != dequantized_.end()) return it->second;
    const ir::Shape dims = {q.dim(0), q.dim(2), q.dim(1)};
    const std::string what = absl::StrCat(desc, ": dequantized ", kInputNames[slot]);
    KILN_RETURN_IF_ERROR(
        CheckedByteSize(dims, ir::DType::kF32, max_tensor_bytes_, what).status());
    KILN_ASSIGN_OR_RETURN(ir::Tensor out, ir::Tensor::Create(ir::DType::kF32, dims, what));
    if (q.dtype() == ir::DType::kI8) {
      DequantizeTransposed<int8_t>(q, params.first, params.second, &out);
    } else {
      DequantizeTransposed<uint8_t>(q, params.first, params.second, &out);
    }
    const std::string name = FreshName(node.input(slot));
    KILN_ASSIGN_OR_RETURN(TP proto, TensorToProto(out, name));
    *g_->add_initializer() = std::move(proto);
    dequantized_.emplace(key, name);
    return name;
  }

  absl::Status RewriteNode(onnx::NodeProto* node, int index,
                           std::vector<onnx::NodeProto>* before) {
    const std::string desc = DescribeNode(*node, index);
    if (node->input_size() != kNumInputs) {
      return Error(desc, absl::StrCat("has ", node->input_size(), " inputs; ", kOpType,
                                      " takes ", kNumInputs, " (",
                                      absl::StrJoin(kInputNames, ", "), ")"));
    }
    if (node->output_size() > 3) {
      return Error(desc, absl::StrCat("has ", node->output_size(),
                                      " outputs; it has at most 3 (Y, Y_h, Y_c)"));
    }
    static const absl::flat_hash_set<std::string>* const kAttributes =
        new absl::flat_hash_set<std::string>{"direction", "hidden_size", "activation_alpha",
                                             "activation_beta", "clip", "activations",
                                             "input_forget"};
    int64_t directions = 1;
    int64_t hidden = 0;
    for (const onnx::AttributeProto& a : node->attribute()) {
      if (!kAttributes->contains(a.name())) {
        return Error(desc, absl::StrCat("attribute '", EscapeForMessage(a.name()),
                                        "' is not one of ", kOpType, "'s (",
                                        "direction, hidden_size, activations, activation_alpha, "
                                        "activation_beta, clip, input_forget)"));
      }
      if (a.name() == "direction") {
        if (a.type() != onnx::AttributeProto::STRING ||
            (a.s() != "forward" && a.s() != "reverse" && a.s() != "bidirectional")) {
          return Error(desc, "attribute 'direction' must be the string forward, reverse or "
                             "bidirectional");
        }
        directions = a.s() == "bidirectional" ? 2 : 1;
      }
      if (a.name() == "hidden_size") {
        if (a.type() != onnx::AttributeProto::INT) {
          return Error(desc, "attribute 'hidden_size' must be an int");
        }
        hidden = a.i();
      }
    }
    // ONNX Runtime's LSTM kernels require it; the weights' shapes follow from it.
    if (hidden <= 0 || hidden > (int64_t{1} << 40)) {
      return Error(desc, "attribute 'hidden_size' must be given and positive");
    }
    for (int slot : {kW, kR, kWScale, kWZeroPoint, kRScale, kRZeroPoint}) {
      if (node->input(slot).empty()) {
        return Error(desc, absl::StrCat("input ", kInputNames[slot], " is required"));
      }
    }
    // W and R: one 8-bit type, checked before their data is read.
    int32_t types[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      const int slot = k == 0 ? kW : kR;
      auto it = constants_.find(node->input(slot));
      if (it == constants_.end()) continue;  // Constant() reports it
      types[k] = it->second->data_type();
      if (types[k] != TP::INT8 && types[k] != TP::UINT8) {
        return Error(desc, absl::StrCat("input ", kInputNames[slot], " is ",
                                        OnnxElemTypeName(types[k]),
                                        "; it must be INT8 or UINT8"));
      }
    }
    if (types[0] != 0 && types[1] != 0 && types[0] != types[1]) {
      return Error(desc, absl::StrCat("W is ", OnnxElemTypeName(types[0]), " but R is ",
                                      OnnxElemTypeName(types[1]),
                                      " (one 8-bit type for W, R and both zero points)"));
    }
    const int32_t weight_type = types[0] != 0 ? types[0] : types[1] != 0 ? types[1] : TP::INT8;
    KILN_ASSIGN_OR_RETURN(ir::Tensor w, Constant(*node, desc, kW, weight_type));
    KILN_ASSIGN_OR_RETURN(ir::Tensor r, Constant(*node, desc, kR, weight_type));
    const int64_t columns = 4 * hidden;
    if (w.rank() != 3 || w.dim(0) != directions || w.dim(2) != columns) {
      return Error(desc, absl::StrCat("input W has shape ", ir::ShapeToString(w.shape()),
                                      "; it must be [", directions, ",input_size,", columns,
                                      "] (", DirectionName(directions), ", hidden_size ",
                                      hidden, ")"));
    }
    if (r.shape() != ir::Shape{directions, hidden, columns}) {
      return Error(desc, absl::StrCat("input R has shape ", ir::ShapeToString(r.shape()),
                                      "; it must be ",
                                      ir::ShapeToString({directions, hidden, columns}), " (",
                                      DirectionName(directions), ", hidden_size ", hidden, ")"));
    }
    KILN_ASSIGN_OR_RETURN(auto w_params, QuantParams(*node, desc, kWScale, kWZeroPoint,
                                                     weight_type, directions, columns));
    KILN_ASSIGN_OR_RETURN(auto r_params, QuantParams(*node, desc, kRScale, kRZeroPoint,
                                                     weight_type, directions, columns));
    KILN_ASSIGN_OR_RETURN(std::string w_name, Dequantized(*node, desc, kW, kWScale, kWZeroPoint, w, w_params));
    KILN_ASSIGN_OR_RETURN(std::string r_name, QuantizedR(*node, r, r_params, before));
    if (r_name.empty()) {
      KILN_ASSIGN_OR_RETURN(r_name, Dequantized(*node, desc, kR, kRScale, kRZeroPoint, r, r_params));
    }
    for (int slot : {kW, kR, kWScale, kWZeroPoint, kRScale, kRZeroPoint}) {
      consumed_.push_back(node->input(slot));
    }

    std::vector<std::string> inputs(node->input().begin(),
                                    node->input().begin() + kLstmInputs);
    inputs[kW] = w_name;
    inputs[kR] = r_name;
    while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
    node->clear_input();
    for (std::string& in : inputs) node->add_input(std::move(in));
    node->clear_domain();
    node->set_op_type("LSTM");
    return absl::OkStatus();
  }

  onnx::GraphProto* g_;
  bool top_;
  const DetachedTensors& detached_;
  std::string base_dir_;
  int64_t max_tensor_bytes_;
  int64_t opset_;
  absl::flat_hash_set<std::string>* names_;
  absl::flat_hash_map<std::string, TP*> constants_;
  absl::flat_hash_map<std::string, std::string> dequantized_;
  std::vector<std::string> consumed_;
};

}  // namespace

absl::Status RewriteDynamicQuantizeLstm(onnx::ModelProto* model,
                                        const DetachedTensors& detached,
                                        absl::string_view base_dir,
                                        int64_t max_tensor_bytes) {
  // Without an opset import for the domain the node stays an unknown op.
  bool imported = false;
  for (const onnx::OperatorSetIdProto& op : model->opset_import()) {
    imported |= op.domain() == kMsDomain && op.version() >= 1;
  }
  if (!imported || !model->has_graph()) return absl::OkStatus();
  bool any = false;
  ForEachGraph(model->mutable_graph(), [&](onnx::GraphProto* g, bool) {
    for (const onnx::NodeProto& n : g->node()) any |= IsDynamicQuantizeLstm(n);
  });
  if (!any) return absl::OkStatus();

  int64_t opset = 0;
  for (const onnx::OperatorSetIdProto& op : model->opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  }
  absl::flat_hash_set<std::string> names;
  CollectNames(model->mutable_graph(), &names);
  std::vector<std::pair<onnx::GraphProto*, std::vector<std::string>>> consumed;
  absl::Status status;
  ForEachGraph(model->mutable_graph(), [&](onnx::GraphProto* g, bool top) {
    if (!status.ok()) return;
    bool has = false;
    for (const onnx::NodeProto& n : g->node()) has |= IsDynamicQuantizeLstm(n);
    if (!has) return;
    GraphRewriter rewriter(g, top, detached, base_dir, max_tensor_bytes, opset, &names);
    status = rewriter.Run();
    consumed.emplace_back(g, rewriter.consumed());
  });
  KILN_RETURN_IF_ERROR(status);

  // The quantized constants nothing reads any more leave the model.
  absl::flat_hash_set<std::string> read;
  bool ms_left = false;
  ForEachGraph(model->mutable_graph(), [&](onnx::GraphProto* g, bool) {
    for (const auto& v : g->output()) read.insert(v.name());
    for (const auto& v : g->input()) read.insert(v.name());
    for (const onnx::NodeProto& n : g->node()) {
      for (const auto& i : n.input()) read.insert(i);
      ms_left |= n.domain() == kMsDomain;
    }
  });
  for (auto& [g, names_read] : consumed) {
    absl::flat_hash_set<std::string> drop;
    for (const std::string& n : names_read) {
      if (!read.contains(n)) drop.insert(n);
    }
    auto* inits = g->mutable_initializer();
    for (int i = inits->size() - 1; i >= 0; --i) {
      if (drop.contains(inits->Get(i).name())) inits->DeleteSubrange(i, 1);
    }
  }
  if (!ms_left) {
    auto* imports = model->mutable_opset_import();
    for (int i = imports->size() - 1; i >= 0; --i) {
      if (imports->Get(i).domain() == kMsDomain) imports->DeleteSubrange(i, 1);
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::frontend::onnx_internal
