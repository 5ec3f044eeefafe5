// Pass fold-batch-norm, and the per-output-channel affine fold of Conv,
// ConvTranspose, Gemm and MatMul weights it is built on.
#include "passes/graph/fold_batch_norm.h"

#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"
#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

bool IsFoldableFloat(ir::DType dtype) {
  return dtype == ir::DType::kF32 || dtype == ir::DType::kF64;
}

// A constant of a dtype whose values folding can rewrite; nullptr otherwise.
const ir::Tensor* FloatConstant(const ir::Graph& g, ir::ValueId id) {
  if (id == ir::kNoValue) return nullptr;
  const ir::Tensor* t = g.constant(id);
  return t != nullptr && IsFoldableFloat(t->dtype()) ? t : nullptr;
}

void SetFromDouble(ir::Tensor* t, int64_t i, double v) {
  if (t->dtype() == ir::DType::kF64) {
    t->data<double>()[i] = v;
  } else {
    t->data<float>()[i] = static_cast<float>(v);
  }
}

ir::ValueId AddConstant(ir::Graph* g, const std::string& base, ir::Tensor t) {
  const ir::ValueId id = g->AddValue(UniqueName(*g, base), t.dtype(), t.shape());
  g->SetConstant(id, std::move(t));
  return id;
}

// Gemm's C can absorb a per-column affine when it is a constant that
// broadcasts to [M, N] along the usual rules: rank <= 2, last dim 1 or N, a
// leading dim other than 1 only when the output's M is known to match.
bool GemmBiasFoldable(const ir::Tensor& c, int64_t n, const ir::Value& y) {
  if (c.rank() > 2) return false;
  const int64_t cols = c.rank() >= 1 ? c.dim(c.rank() - 1) : 1;
  if (cols != 1 && cols != n) return false;
  const int64_t rows = c.rank() == 2 ? c.dim(0) : 1;
  if (rows == 1) return true;
  return y.shape_known && y.shape.size() == 2 && y.shape[0] == rows;
}

bool IsInferenceBatchNorm(const ir::Graph& g, const ir::Node& n) {
  if (!n.domain.empty() || n.op != "BatchNormalization") return false;
  if (n.inputs.size() != 5 || n.outputs.empty() || n.outputs[0] == ir::kNoValue) {
    return false;
  }
  for (int i = 0; i < 5; ++i) {
    if (!n.has_input(i)) return false;
  }
  // Running-statistics outputs exist only in training.
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (n.outputs[i] != ir::kNoValue) return false;
  }
  if (g.opset() >= 14) {
    absl::StatusOr<int64_t> training = n.AttrOr<int64_t>("training_mode", 0);
    if (!training.ok() || *training != 0) return false;
  }
  if (g.opset() < 9) {
    // spatial=0 (opsets 7-8) normalizes per (channel, position).
    absl::StatusOr<int64_t> spatial = n.AttrOr<int64_t>("spatial", 1);
    if (!spatial.ok() || *spatial != 1) return false;
  }
  if (g.opset() < 7) {
    absl::StatusOr<int64_t> is_test = n.AttrOr<int64_t>("is_test", 0);
    if (!is_test.ok() || *is_test != 1) return false;
  }
  return true;
}

// s = scale / sqrt(var + eps), t = B - mean * s, so BN(y) = y * s + t; nullopt
// when a parameter is not a usable constant or the result is not finite
// (the BN then stays and keeps the model's own behaviour).
std::optional<ChannelAffine> BatchNormAffine(const ir::Graph& g,
                                             const ir::Node& bn,
                                             int64_t channels) {
  const ir::Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = FloatConstant(g, bn.inputs[i + 1]);
    if (p[i] == nullptr || p[i]->num_elements() != channels) return std::nullopt;
  }
  absl::StatusOr<float> eps = bn.AttrOr<float>("epsilon", 1e-5f);
  if (!eps.ok()) return std::nullopt;
  ChannelAffine a;
  a.scale.resize(channels);
  a.shift.resize(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const double s = p[0]->GetAsDouble(c) /
                     std::sqrt(p[3]->GetAsDouble(c) + static_cast<double>(*eps));
    const double t = p[1]->GetAsDouble(c) - p[2]->GetAsDouble(c) * s;
    if (!std::isfinite(s) || !std::isfinite(t)) return std::nullopt;
    a.scale[c] = s;
    a.shift[c] = t;
  }
  return a;
}

}  // namespace

int64_t OutputChannelAxis(const ir::Node& node, int64_t output_rank) {
  return node.op == "MatMul" ? output_rank - 1 : 1;
}

std::optional<int64_t> AffineFoldableChannels(const ir::Graph& g,
                                              const ir::Node& n,
                                              bool with_shift) {
  if (!n.domain.empty() || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue ||
      !n.has_input(0) || !n.has_input(1) || n.inputs.size() > 3) {
    return std::nullopt;
  }
  const ir::Value& y = g.value(n.outputs[0]);
  const ir::Tensor* w = FloatConstant(g, n.inputs[1]);
  if (w == nullptr || w->dtype() != y.dtype || w->num_elements() <= 0) {
    return std::nullopt;
  }
  const ir::Tensor* bias = nullptr;
  if (n.has_input(2)) {
    bias = FloatConstant(g, n.inputs[2]);
    if (bias == nullptr || bias->dtype() != w->dtype()) return std::nullopt;
  }
  int64_t channels = 0;
  if (n.op == "Conv" || n.op == "ConvTranspose") {
    absl::StatusOr<int64_t> group = n.AttrOr<int64_t>("group", 1);
    if (w->rank() < 3 || !group.ok() || *group <= 0) return std::nullopt;
    if (w->dim(0) % *group != 0) return std::nullopt;
    channels = n.op == "Conv" ? w->dim(0) : w->dim(1) * *group;
    if (bias != nullptr && (bias->rank() != 1 || bias->dim(0) != channels)) {
      return std::nullopt;
    }
  } else if (n.op == "Gemm") {
    absl::StatusOr<int64_t> trans_b = n.AttrOr<int64_t>("transB", 0);
    absl::StatusOr<float> beta = n.AttrOr<float>("beta", 1.0f);
    if (w->rank() != 2 || !trans_b.ok() || !beta.ok()) return std::nullopt;
    channels = *trans_b != 0 ? w->dim(0) : w->dim(1);
    if (bias != nullptr && !GemmBiasFoldable(*bias, channels, y)) {
      return std::nullopt;
    }
  } else if (n.op == "MatMul") {
    if (with_shift || w->rank() != 2 || n.inputs.size() != 2) return std::nullopt;
    channels = w->dim(1);
  } else {
    return std::nullopt;
  }
  if (channels <= 0) return std::nullopt;
  if (y.shape_known) {
    const int64_t rank = static_cast<int64_t>(y.shape.size());
    const int64_t axis = OutputChannelAxis(n, rank);
    if (axis < 0 || axis >= rank) return std::nullopt;
    if (y.shape[axis] != ir::kDynamicDim && y.shape[axis] != channels) {
      return std::nullopt;
    }
  }
  return channels;
}

absl::Status FoldChannelAffine(ir::Graph* g, int node_index,
                               const ChannelAffine& affine,
                               absl::string_view tag) {
  KILN_RET_CHECK(node_index >= 0 &&
                 node_index < static_cast<int>(g->nodes().size()));
  const ir::Node& n = g->nodes()[node_index];
  bool has_shift = false;
  for (double t : affine.shift) has_shift |= t != 0.0;
  const std::optional<int64_t> channels =
      AffineFoldableChannels(*g, n, has_shift);
  KILN_RET_CHECK(channels.has_value());
  const int64_t m = *channels;
  KILN_RET_CHECK(static_cast<int64_t>(affine.scale.size()) == m &&
                 static_cast<int64_t>(affine.shift.size()) == m);

  const std::string op = n.op;
  const ir::ValueId w_id = n.inputs[1];
  const ir::ValueId b_id = n.has_input(2) ? n.inputs[2] : ir::kNoValue;
  const std::shared_ptr<const ir::Tensor> w = g->shared_constant(w_id);
  const std::shared_ptr<const ir::Tensor> bias =
      b_id != ir::kNoValue ? g->shared_constant(b_id) : nullptr;
  const std::string w_name = g->value(w_id).name;

  // Output channel of weight element i.
  const int64_t total = w->num_elements();
  std::function<int64_t(int64_t)> channel_of;
  if (op == "Conv") {
    const int64_t per = total / m;
    channel_of = [per](int64_t i) { return i / per; };
  } else if (op == "ConvTranspose") {
    // [C_in, M/group, k...]: input channel ci of group ci / (C_in/group)
    // feeds output channel group * (M/group) + mi.
    const int64_t mg = w->dim(1), cg = w->dim(0) / (m / mg);
    const int64_t inner = total / (w->dim(0) * mg);
    channel_of = [=](int64_t i) {
      const int64_t ci = i / (mg * inner), mi = (i / inner) % mg;
      return (ci / cg) * mg + mi;
    };
  } else {
    const bool trans_b = op == "Gemm" && n.AttrOr<int64_t>("transB", 0).value() != 0;
    const int64_t cols = w->dim(1);
    channel_of = [=](int64_t i) { return trans_b ? i / cols : i % cols; };
  }
  bool scales = false;
  for (double s : affine.scale) scales |= s != 1.0;
  std::optional<ir::Tensor> new_w;
  if (scales) {
    new_w.emplace(w->dtype(), w->shape());
    for (int64_t i = 0; i < total; ++i) {
      SetFromDouble(&*new_w, i, w->GetAsDouble(i) * affine.scale[channel_of(i)]);
    }
  }

  ir::ValueId new_b = ir::kNoValue;
  const std::string b_base = bias != nullptr
                                 ? absl::StrCat(g->value(b_id).name, ".", tag)
                                 : absl::StrCat(w_name, ".", tag, "_bias");
  bool set_beta_one = false;
  if (op == "Conv" || op == "ConvTranspose") {
    if (bias != nullptr || has_shift) {
      ir::Tensor b(w->dtype(), {m});
      for (int64_t c = 0; c < m; ++c) {
        const double old = bias != nullptr ? bias->GetAsDouble(c) : 0.0;
        SetFromDouble(&b, c, old * affine.scale[c] + affine.shift[c]);
      }
      new_b = AddConstant(g, b_base, std::move(b));
    }
  } else if (op == "Gemm" && (bias != nullptr || has_shift)) {
    // Y = alpha * A B + beta * C becomes alpha * A B' + C' with beta = 1.
    const double beta = g->nodes()[node_index].AttrOr<float>("beta", 1.0f).value();
    const ir::Tensor* c = bias.get();
    const int64_t rows = c != nullptr && c->rank() == 2 ? c->dim(0) : 1;
    const int64_t c_cols = c == nullptr || c->rank() == 0 ? 1 : c->dim(c->rank() - 1);
    ir::Tensor out(w->dtype(), rows == 1 ? ir::Shape{m} : ir::Shape{rows, m});
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < m; ++j) {
        const double old =
            c == nullptr ? 0.0
                         : beta * c->GetAsDouble(r * c_cols + (c_cols == 1 ? 0 : j));
        SetFromDouble(&out, r * m + j, old * affine.scale[j] + affine.shift[j]);
      }
    }
    new_b = AddConstant(g, b_base, std::move(out));
    set_beta_one = beta != 1.0;
  }
  const ir::ValueId new_w_id =
      scales ? AddConstant(g, absl::StrCat(w_name, ".", tag), std::move(*new_w))
             : w_id;

  ir::Node& node = g->mutable_nodes()[node_index];
  node.inputs[1] = new_w_id;
  if (new_b != ir::kNoValue) {
    if (node.inputs.size() < 3) node.inputs.resize(3, ir::kNoValue);
    node.inputs[2] = new_b;
  }
  if (set_beta_one) node.attrs["beta"] = 1.0f;
  return absl::OkStatus();
}

absl::StatusOr<bool> FoldBatchNorm::Run(ir::Graph* graph) {
  const absl::flat_hash_set<std::string> captured = CapturedNames(*graph);
  const std::vector<int> uses = CountUses(*graph);
  std::vector<int> producer(graph->num_values(), -1);
  for (int i = 0; i < static_cast<int>(graph->nodes().size()); ++i) {
    for (ir::ValueId out : graph->nodes()[i].outputs) {
      if (out != ir::kNoValue) producer[out] = i;
    }
  }
  std::vector<bool> remove(graph->nodes().size(), false);
  bool changed = false;
  for (int i = 0; i < static_cast<int>(graph->nodes().size()); ++i) {
    const ir::Node& bn = graph->nodes()[i];
    if (!IsInferenceBatchNorm(*graph, bn)) continue;
    const ir::ValueId x = bn.inputs[0], y = bn.outputs[0];
    const int p = producer[x];
    if (p < 0) continue;
    const ir::Node& conv = graph->nodes()[p];
    if (conv.op != "Conv" && conv.op != "ConvTranspose" && conv.op != "Gemm") {
      continue;
    }
    if (uses[x] != 1 || IsGraphOutput(*graph, x) ||
        captured.contains(graph->value(x).name)) {
      continue;
    }
    const std::optional<int64_t> channels =
        AffineFoldableChannels(*graph, conv, /*with_shift=*/true);
    if (!channels.has_value()) continue;
    const std::optional<ChannelAffine> affine =
        BatchNormAffine(*graph, bn, *channels);
    if (!affine.has_value()) continue;
    KILN_RETURN_IF_ERROR(FoldChannelAffine(graph, p, *affine, "bn_folded"));
    // The producer now writes the BN's output (keeping its name); every
    // reader of it comes after the BN, so node order stays topological.
    graph->mutable_nodes()[p].outputs[0] = y;
    producer[y] = p;
    remove[i] = true;
    changed = true;
  }
  if (!changed) return false;
  EraseNodes(graph, remove);
  return true;
}

}  // namespace kiln::passes
