// Pass fold-binary-into-weights.
#include "passes/graph/fold_binary_into_weights.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"
#include "passes/graph/fold_batch_norm.h"
#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

// The value of constant `k` for each output channel when `k`, broadcast
// against an output of shape `y`, varies along `axis` only (or not at all)
// and does not enlarge the output; nullopt otherwise.
std::optional<std::vector<double>> PerChannelValues(const ir::Tensor& k,
                                                    const ir::Shape& y,
                                                    int64_t axis,
                                                    int64_t channels) {
  const int64_t rank = static_cast<int64_t>(y.size());
  if (k.rank() > rank || k.num_elements() <= 0) return std::nullopt;
  const int64_t offset = rank - k.rank();
  bool along_channels = false;
  for (int64_t d = 0; d < k.rank(); ++d) {
    if (k.dim(d) == 1) continue;
    if (offset + d == axis && k.dim(d) == channels) {
      along_channels = true;
      continue;
    }
    return std::nullopt;
  }
  std::vector<double> values(channels);
  for (int64_t c = 0; c < channels; ++c) {
    values[c] = k.GetAsDouble(along_channels ? c : 0);
  }
  return values;
}

// The affine `y op k` is, per channel; nullopt for Div by zero.
std::optional<ChannelAffine> AffineOf(const std::string& op,
                                      const std::vector<double>& k) {
  ChannelAffine a;
  a.scale.assign(k.size(), 1.0);
  a.shift.assign(k.size(), 0.0);
  for (size_t c = 0; c < k.size(); ++c) {
    if (op == "Mul") {
      a.scale[c] = k[c];
    } else if (op == "Div") {
      if (k[c] == 0.0) return std::nullopt;
      a.scale[c] = 1.0 / k[c];
    } else if (op == "Add") {
      a.shift[c] = k[c];
    } else {
      a.shift[c] = -k[c];
    }
  }
  return a;
}

struct Match {
  int producer;  // node index
  ChannelAffine affine;
};

// Whether node `e` reads the output of a foldable producer as operand
// `operand` and a per-channel constant as the other one.
std::optional<Match> MatchOperand(const ir::Graph& g, const ir::Node& e,
                                  int operand, const std::vector<int>& uses,
                                  const std::vector<int>& producer,
                                  const absl::flat_hash_set<std::string>& captured) {
  const ir::ValueId x = e.inputs[operand], k_id = e.inputs[1 - operand];
  const ir::Tensor* k = g.constant(k_id);
  if (k == nullptr || x == k_id || producer[x] < 0) return std::nullopt;
  if (uses[x] != 1 || IsGraphOutput(g, x) || captured.contains(g.value(x).name)) {
    return std::nullopt;
  }
  const ir::Node& p = g.nodes()[producer[x]];
  const bool shifts = e.op == "Add" || e.op == "Sub";
  const std::optional<int64_t> channels = AffineFoldableChannels(g, p, shifts);
  if (!channels.has_value()) return std::nullopt;
  const ir::Value& y = g.value(x);
  const ir::Value& out = g.value(e.outputs[0]);
  if (!y.shape_known || k->dtype() != y.dtype || out.dtype != y.dtype ||
      (out.shape_known && out.shape != y.shape)) {
    return std::nullopt;
  }
  const int64_t axis =
      OutputChannelAxis(p, static_cast<int64_t>(y.shape.size()));
  const std::optional<std::vector<double>> values =
      PerChannelValues(*k, y.shape, axis, *channels);
  if (!values.has_value()) return std::nullopt;
  std::optional<ChannelAffine> affine = AffineOf(e.op, *values);
  if (!affine.has_value()) return std::nullopt;
  return Match{producer[x], std::move(*affine)};
}

}  // namespace

absl::StatusOr<bool> FoldBinaryIntoWeights::Run(ir::Graph* graph) {
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
    const ir::Node& e = graph->nodes()[i];
    if (!e.domain.empty() || e.inputs.size() != 2 || e.outputs.size() != 1 ||
        e.outputs[0] == ir::kNoValue || !e.has_input(0) || !e.has_input(1)) {
      continue;
    }
    const bool commutative = e.op == "Mul" || e.op == "Add";
    if (!commutative && e.op != "Sub" && e.op != "Div") continue;
    std::optional<Match> match =
        MatchOperand(*graph, e, 0, uses, producer, captured);
    if (!match.has_value() && commutative) {
      match = MatchOperand(*graph, e, 1, uses, producer, captured);
    }
    if (!match.has_value()) continue;
    const ir::ValueId y = e.outputs[0];
    const std::string tag = absl::StrCat(absl::AsciiStrToLower(e.op), "_folded");
    KILN_RETURN_IF_ERROR(
        FoldChannelAffine(graph, match->producer, match->affine, tag));
    // The producer now writes the elementwise op's output; its readers all
    // come after the op, so node order stays topological.
    graph->mutable_nodes()[match->producer].outputs[0] = y;
    producer[y] = match->producer;
    remove[i] = true;
    changed = true;
  }
  if (!changed) return false;
  EraseNodes(graph, remove);
  return true;
}

}  // namespace kiln::passes
