// Pass fold-dequantize-linear.
#include "passes/graph/fold_dequantize_linear.h"

#include <optional>
#include <string>
#include <vector>

#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

bool QuantizedInt(ir::DType t) {
  return t == ir::DType::kU8 || t == ir::DType::kI8 || t == ir::DType::kI32;
}

// The dequantized tensor, or nullopt for a form this pass leaves alone.
std::optional<ir::Tensor> Dequantize(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 2 || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) {
    return std::nullopt;
  }
  const ir::Tensor* x = g.constant(n.inputs[0]);
  const ir::Tensor* scale = g.constant(n.inputs[1]);
  const ir::Tensor* zp = n.has_input(2) ? g.constant(n.inputs[2]) : nullptr;
  if (x == nullptr || scale == nullptr || (n.has_input(2) && zp == nullptr)) return std::nullopt;
  if (!QuantizedInt(x->dtype()) || scale->dtype() != ir::DType::kF32 ||
      (zp != nullptr && zp->dtype() != x->dtype()) ||
      g.value(n.outputs[0]).dtype != ir::DType::kF32 || n.HasAttr("block_size")) {
    return std::nullopt;
  }
  int64_t count = 1, inner = 1;
  if (scale->num_elements() != 1 || scale->rank() > 1) {
    if (scale->rank() != 1 || g.opset() < 13) return std::nullopt;
    absl::StatusOr<int64_t> axis = n.AttrOr<int64_t>("axis", 1);
    if (!axis.ok()) return std::nullopt;
    int64_t a = *axis < 0 ? *axis + x->rank() : *axis;
    if (a < 0 || a >= x->rank() || scale->dim(0) != x->dim(a)) return std::nullopt;
    count = scale->dim(0);
    for (int64_t d = a + 1; d < x->rank(); ++d) inner *= x->dim(d);
  }
  if (zp != nullptr && zp->shape() != scale->shape() &&
      !(zp->num_elements() == 1 && count == 1)) {
    return std::nullopt;
  }
  ir::Tensor out(ir::DType::kF32, x->shape());
  float* y = out.data<float>();
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const int64_t k = count == 1 ? 0 : (i / inner) % count;
    const double d = x->GetAsDouble(i) - (zp == nullptr ? 0 : zp->GetAsDouble(k));
    y[i] = static_cast<float>(d) * static_cast<float>(scale->GetAsDouble(k));
  }
  return out;
}

}  // namespace

absl::StatusOr<bool> FoldDequantizeLinear::Run(ir::Graph* graph) {
  const absl::flat_hash_set<std::string> captured = CapturedNames(*graph);
  const std::vector<int> uses = CountUses(*graph);
  std::vector<bool> remove(graph->nodes().size(), false);
  bool changed = false;
  for (size_t i = 0; i < graph->nodes().size(); ++i) {
    const ir::Node& n = graph->nodes()[i];
    if (!n.domain.empty() || n.op != "DequantizeLinear") continue;
    // Unread ones (fuse-qdq's leftovers) are eliminate-dead-code's.
    if (n.outputs.size() == 1 && n.outputs[0] != ir::kNoValue && uses[n.outputs[0]] == 0) continue;
    std::optional<ir::Tensor> folded = Dequantize(*graph, n);
    if (!folded.has_value()) continue;
    const ir::ValueId out = n.outputs[0];
    if (IsGraphOutput(*graph, out) || captured.contains(graph->value(out).name)) continue;
    ir::Value& v = graph->mutable_value(out);
    if (v.shape_known && v.shape != folded->shape()) continue;
    v.shape = folded->shape();
    v.shape_known = true;
    graph->SetConstant(out, *std::move(folded));
    remove[i] = true;
    changed = true;
  }
  if (!changed) return false;
  EraseNodes(graph, remove);
  return true;
}

}  // namespace kiln::passes
