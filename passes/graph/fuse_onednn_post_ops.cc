// Pass fuse-onednn-post-ops: the rewriter half of oneDNN fusion (the
// OneDnnMatcher decides what oneDNN supports; this decides what is safe).
#include "passes/graph/fuse_onednn_post_ops.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/status_macros.h"
#include "passes/graph/onednn_matcher.h"
#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

bool StaticShape(const ir::Value& v) {
  return v.shape_known &&
         std::none_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d < 0; });
}

ir::Shape NonUnitDims(const ir::Shape& shape) {
  ir::Shape out;
  for (int64_t d : shape) {
    if (d != 1) out.push_back(d);
  }
  return out;
}

// `n` only relabels its input's dims of extent 1 (a Squeeze, Unsqueeze,
// Reshape or Flatten between static shapes with the same dims of other
// extents in the same order), or is a Slice that keeps every element in
// order (same static shape, steps absent or 1): its output holds its
// input's bytes.
bool RelabelsUnitDims(const ir::Graph& graph, const ir::Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue || !n.has_input(0)) return false;
  const ir::Value& in = graph.value(n.inputs[0]);
  const ir::Value& out = graph.value(n.outputs[0]);
  if (!StaticShape(in) || !StaticShape(out) || in.dtype != out.dtype) return false;
  if (n.op == "Slice") {
    if (in.shape != out.shape) return false;
    if (!n.has_input(4)) return true;
    const ir::Tensor* steps = graph.constant(n.inputs[4]);
    if (steps == nullptr) return false;
    for (int64_t i = 0; i < steps->num_elements(); ++i) {
      if (steps->GetAsDouble(i) != 1.0) return false;
    }
    return true;
  }
  if (n.op != "Squeeze" && n.op != "Unsqueeze" && n.op != "Reshape" && n.op != "Flatten") {
    return false;
  }
  return NonUnitDims(in.shape) == NonUnitDims(out.shape);
}

// Element-wise ops whose output has the shape of their broadcast inputs.
bool IsShapePreservingElementwise(const ir::Node& n) {
  static constexpr absl::string_view kOps[] = {
      "Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh",
      "HardSwish", "HardSigmoid", "Clip", "Max", "Min", "Erf", "Sqrt", "Exp", "Abs",
      "Neg", "Softplus", "Pow", "Reciprocal"};
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  return std::find(std::begin(kOps), std::end(kOps), n.op) != std::end(kOps);
}

// `c` (broadcast against `from`, of which it has at most the rank) as a
// constant of the same bytes broadcasting against `to`, where `from` and
// `to` have the same dims of extent other than 1 in the same order.
absl::StatusOr<ir::Shape> MapBroadcastShape(const ir::Shape& c, const ir::Shape& from,
                                            const ir::Shape& to) {
  KILN_RET_CHECK(c.size() <= from.size());
  ir::Shape full(from.size() - c.size(), 1);
  full.insert(full.end(), c.begin(), c.end());
  std::vector<int64_t> kept;  // full's dims at from's non-unit dims, in order
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1) {
      kept.push_back(full[i]);
    } else {
      KILN_RET_CHECK(full[i] == 1);
    }
  }
  ir::Shape out;
  size_t k = 0;
  for (int64_t d : to) {
    out.push_back(d != 1 ? kept[k++] : 1);
  }
  KILN_RET_CHECK(k == kept.size());
  return out;
}

// A oneDNN anchor's result often reaches its bias and activation through
// nodes that only drop or add dims of extent 1 (a TF/JAX export squeezes
// the width-1 dim of a 1-D conv, and slices it whole, before the bias add).
// They end a post-op chain. This moves them below the element-wise nodes
// that follow: those compute in the anchor's shape (their constants
// reshaped to broadcast the same way) and the relabelling is applied to
// each of their results read elsewhere. Returns whether it changed `graph`.
absl::StatusOr<bool> SinkUnitRelabels(ir::Graph* graph) {
  const absl::flat_hash_set<std::string> captured = CapturedNames(*graph);
  bool changed = false;
  std::vector<std::vector<int>> consumers;
  bool stale = true;
  for (int anchor = 0; anchor < static_cast<int>(graph->nodes().size()); ++anchor) {
    const ir::Node& an = graph->nodes()[anchor];
    if (OneDnnMatcher::FusedOpName(an).empty() || an.outputs.empty()) continue;
    const ir::ValueId a = an.outputs[0];
    if (a == ir::kNoValue || !StaticShape(graph->value(a))) continue;
    if (stale) {
      consumers.assign(graph->num_values(), {});
      for (int k = 0; k < static_cast<int>(graph->nodes().size()); ++k) {
        for (ir::ValueId v : graph->nodes()[k].inputs) {
          if (v != ir::kNoValue) consumers[v].push_back(k);
        }
      }
      stale = false;
    }
    auto internal = [&](ir::ValueId v) {
      return !IsGraphOutput(*graph, v) && !captured.contains(graph->value(v).name);
    };
    // The relabelling chain a -> ... -> y, each value read by one node.
    ir::ValueId y = a;
    int last = anchor;
    absl::flat_hash_set<int> chain;
    while (internal(y) && consumers[y].size() == 1 &&
           RelabelsUnitDims(*graph, graph->nodes()[consumers[y][0]])) {
      last = consumers[y][0];
      chain.insert(last);
      y = graph->nodes()[last].outputs[0];
    }
    if (y == a || !internal(y) || consumers[y].empty()) continue;
    const ir::Value yv = graph->value(y);
    const ir::Shape a_shape = graph->value(a).shape;
    // The element-wise region computed from y (and constants) in y's shape.
    absl::flat_hash_set<ir::ValueId> region_values = {y};
    std::vector<int> region;
    for (int k = last + 1; k < static_cast<int>(graph->nodes().size()); ++k) {
      const ir::Node& n = graph->nodes()[k];
      if (!IsShapePreservingElementwise(n) || n.outputs.size() != 1 ||
          n.outputs[0] == ir::kNoValue) {
        continue;
      }
      const ir::Value& out = graph->value(n.outputs[0]);
      if (!out.shape_known || out.shape != yv.shape || out.dtype != yv.dtype) continue;
      bool reads_region = false, ok = true;
      for (ir::ValueId v : n.inputs) {
        if (v == ir::kNoValue) continue;
        if (region_values.contains(v)) {
          reads_region = true;
        } else if (!graph->IsConstant(v) || !graph->value(v).shape_known ||
                   graph->value(v).shape.size() > yv.shape.size()) {
          ok = false;
        }
      }
      if (!ok || !reads_region) continue;
      region.push_back(k);
      region_values.insert(n.outputs[0]);
    }
    // Every reader of y must move with it, or the anchor keeps two readers.
    const absl::flat_hash_set<int> in_region(region.begin(), region.end());
    if (region.empty() || std::any_of(consumers[y].begin(), consumers[y].end(),
                                      [&](int k) { return !in_region.contains(k); })) {
      continue;
    }
    // Rewrite: region nodes read a and constants reshaped for a's shape;
    // results read outside the region come back through a Reshape.
    std::vector<std::pair<int, ir::Node>> relabels;  // (after node k, node)
    absl::flat_hash_map<ir::ValueId, ir::ValueId> renamed = {{y, a}};
    for (int k : region) {
      ir::Node& n = graph->mutable_nodes()[k];
      for (ir::ValueId& v : n.inputs) {
        if (v == ir::kNoValue) continue;
        if (auto it = renamed.find(v); it != renamed.end()) {
          v = it->second;
          continue;
        }
        const ir::Tensor* c = graph->constant(v);
        if (c == nullptr) continue;
        const ir::Shape& cs = graph->value(v).shape;
        if (c->num_elements() == 1 && cs.size() <= a_shape.size()) continue;
        KILN_ASSIGN_OR_RETURN(ir::Shape mapped, MapBroadcastShape(cs, yv.shape, a_shape));
        KILN_ASSIGN_OR_RETURN(ir::Tensor t, c->ShareReshaped(mapped));
        const ir::ValueId nv = graph->AddValue(
            UniqueName(*graph, absl::StrCat(graph->value(v).name, ".relabelled")),
            graph->value(v).dtype, mapped);
        graph->SetConstant(nv, std::move(t));
        v = nv;
      }
      const ir::ValueId out = n.outputs[0];
      const bool read_outside =
          !internal(out) || std::any_of(consumers[out].begin(), consumers[out].end(),
                                        [&](int r) { return !in_region.contains(r); });
      if (!read_outside) {
        graph->mutable_value(out).shape = a_shape;
        renamed[out] = out;
        continue;
      }
      const ir::ValueId wide = graph->AddValue(
          UniqueName(*graph, absl::StrCat(graph->value(out).name, ".unrelabelled")),
          graph->value(out).dtype, a_shape);
      graph->mutable_nodes()[k].outputs[0] = wide;
      renamed[out] = wide;
      const ir::Shape& ys = yv.shape;
      const ir::ValueId shape = graph->AddValue(
          UniqueName(*graph, absl::StrCat(graph->value(out).name, ".shape")), ir::DType::kI64,
          ir::Shape{static_cast<int64_t>(ys.size())});
      graph->SetConstant(shape, ir::Tensor::FromVector<int64_t>(
                                    ir::Shape{static_cast<int64_t>(ys.size())}, ys));
      ir::Node relabel;
      relabel.op = "Reshape";
      relabel.inputs = {wide, shape};
      relabel.outputs = {out};
      relabels.emplace_back(k, std::move(relabel));
    }
    // The chain's nodes are dead (its values had one reader each, y only
    // region readers); each relabel follows the node computing its input.
    std::vector<ir::Node> nodes;
    nodes.reserve(graph->nodes().size() + relabels.size());
    size_t r = 0;
    for (int k = 0; k < static_cast<int>(graph->nodes().size()); ++k) {
      if (!chain.contains(k)) nodes.push_back(std::move(graph->mutable_nodes()[k]));
      while (r < relabels.size() && relabels[r].first == k) {
        nodes.push_back(std::move(relabels[r++].second));
      }
    }
    graph->mutable_nodes() = std::move(nodes);
    changed = stale = true;
  }
  return changed;
}

// One anchor and the post-op nodes it absorbs.
struct Chain {
  int anchor = -1;
  std::vector<int> nodes;  // anchor included, ascending
  std::vector<PostOpSpec> post_ops;
  ir::ValueId output = ir::kNoValue;
};

class Fuser {
 public:
  Fuser(const ir::Graph& graph, OneDnnFusionStats* stats)
      : graph_(graph),
        matcher_(graph),
        captured_(CapturedNames(graph)),
        owner_(graph.nodes().size(), -1),
        stats_(stats) {}

  std::vector<Chain> FindChains() {
    std::vector<Chain> chains;
    for (int i = 0; i < static_cast<int>(graph_.nodes().size()); ++i) {
      const ir::Node& n = graph_.nodes()[i];
      if (OneDnnMatcher::FusedOpName(n).empty()) continue;
      ++stats_->anchors;
      std::string why;
      if (!matcher_.IsAnchorSupported(n, &why)) {
        ++stats_->unsupported[why];
        continue;
      }
      ++stats_->supported;
      Chain c = Grow(i);
      if (c.post_ops.empty()) continue;
      for (int k : c.nodes) owner_[k] = static_cast<int>(chains.size());
      ++stats_->fused;
      for (const PostOpSpec& p : c.post_ops) ++stats_->post_ops[p.kind];
      chains.push_back(std::move(c));
    }
    // A follower one chain left out may have joined a later chain (a
    // residual Add becomes the sum of the block's last conv): only the
    // nodes no chain took are unfused, each listed once.
    absl::flat_hash_set<int> listed;
    for (auto& [k, u] : pending_unfused_) {
      if (owner_[k] < 0 && listed.insert(k).second) {
        stats_->unfused_elementwise.push_back(std::move(u));
      }
    }
    return chains;
  }

 private:
  bool Internal(ir::ValueId v) const {
    return !IsGraphOutput(graph_, v) && !captured_.contains(graph_.value(v).name);
  }

  // Every reader of `running` and of the values the match computes on the
  // way (all but its output) is inside the match, and nothing in it belongs
  // to another chain: replacing the nodes drops no work.
  bool Closed(const PostOpMatch& m, ir::ValueId running) const {
    auto inside = [&](int k) {
      return std::binary_search(m.nodes.begin(), m.nodes.end(), k);
    };
    for (int k : m.nodes) {
      if (owner_[k] >= 0) return false;
    }
    for (int k : matcher_.Consumers(running)) {
      if (!inside(k)) return false;
    }
    for (int k : m.nodes) {
      for (ir::ValueId out : graph_.nodes()[k].outputs) {
        if (out == ir::kNoValue || out == m.output) continue;
        if (!Internal(out)) return false;
        for (int r : matcher_.Consumers(out)) {
          if (!inside(r)) return false;
        }
      }
    }
    for (const PostOpSpec& p : m.post_ops) {
      if (p.operand == running) return false;
    }
    return true;
  }

  // The element-wise readers of a chain's result that did not join it.
  void RecordUnfused(int anchor, const std::vector<int>& readers,
                     const std::string& reason) {
    static constexpr absl::string_view kElementwise[] = {
        "Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "HardSwish",
        "HardSigmoid", "Clip", "Add", "Sub", "Mul", "Div", "Erf", "Pow",
        "Sqrt", "Exp", "Log", "Neg", "Abs", "Softplus", "Mish", "Gelu",
        "PRelu", "Max", "Min", "Where", "Cast", "Not", "Equal", "Less",
        "Greater", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos"};
    for (int k : readers) {
      const ir::Node& n = graph_.nodes()[k];
      if (!n.domain.empty() && n.domain != "ai.onnx") continue;
      if (std::find(std::begin(kElementwise), std::end(kElementwise), n.op) ==
          std::end(kElementwise)) {
        continue;
      }
      auto label = [&](int i) {
        const ir::Node& m = graph_.nodes()[i];
        if (!m.name.empty()) return m.name;
        if (!m.outputs.empty() && m.outputs[0] != ir::kNoValue) {
          return graph_.value(m.outputs[0]).name;  // unnamed: its result
        }
        return absl::StrCat(m.op, "#", i);
      };
      pending_unfused_.push_back(
          {k, OneDnnFusionStats::Unfused{label(k), n.op, label(anchor), reason}});
    }
  }

  // Whether `m` adds a tensor of the running value's full size (a sum, or
  // a binary add of a full-size operand).
  bool AddsFullSize(const PostOpMatch& m, ir::ValueId running) const {
    for (const PostOpSpec& p : m.post_ops) {
      if (p.kind == "sum") return true;
      if ((p.kind == "add" || p.kind == "sub") && p.operand != ir::kNoValue &&
          graph_.value(p.operand).shape == graph_.value(running).shape) {
        return true;
      }
    }
    return false;
  }

  // Whether `m` has a binary post-op (not a sum) whose operand is as large as
  // the running value.
  bool HasFullSizeBinary(const PostOpMatch& m, ir::ValueId running) const {
    for (const PostOpSpec& p : m.post_ops) {
      if ((p.kind == "add" || p.kind == "sub" || p.kind == "mul") &&
          p.operand != ir::kNoValue &&
          graph_.value(p.operand).shape == graph_.value(running).shape) {
        return true;
      }
    }
    return false;
  }

  Chain Grow(int anchor) {
    Chain c;
    c.anchor = anchor;
    c.nodes = {anchor};
    c.output = graph_.nodes()[anchor].outputs[0];
    bool sum_used = false;
    // oneDNN 2.6's optimized (jit) convs take a sum, or a full-size add,
    // only before any binary post-op; after one they fall back to the
    // gemm-based conv, which applies a full-size add element by element
    // (measured: conv+mul[scalar]+add[full]+relu on 1x64x56x56 took 12x
    // the time of the conv with the add as its own loop kernel).
    const bool conv = graph_.nodes()[anchor].op == "Conv";
    bool binary_used = false;
    while (true) {
      const ir::ValueId r = c.output;
      const std::vector<int>& readers = matcher_.Consumers(r);
      std::string end;
      if (!Internal(r)) {
        end = "result is a graph output or captured";
      } else if (readers.empty()) {
        end = "result is unused";
      } else if (std::any_of(readers.begin(), readers.end(),
                             [&](int k) { return owner_[k] >= 0; })) {
        end = "next node already fused into another call";
      }
      std::optional<PostOpMatch> accepted;
      std::string first_reason;
      for (size_t k = 0; end.empty() && k < readers.size(); ++k) {
        std::string why;
        std::optional<PostOpMatch> m =
            matcher_.MatchPostOp(readers[k], r, !sum_used, &why);
        if (m && conv && binary_used && AddsFullSize(*m, r)) {
          why = "a full-size add after a binary post-op (oneDNN's jit convs take it only "
                "before one)";
          m.reset();
        }
        // Nor does any direct conv of oneDNN 2.6 take a full-size binary
        // operand (a sum is another post-op): the gemm-based conv that does
        // applies it element by element, and at rank 5 on one thread only
        // the reference takes it (measured: rivagan-decoder's 32->32 11x11
        // conv with a full-size mul took 1.10 s on the gemm-based conv, the
        // same conv alone 0.25 s on brgconv; a loop kernel does the mul).
        if (m && conv && HasFullSizeBinary(*m, r)) {
          why = "a full-size binary operand (oneDNN's direct convs take none)";
          m.reset();
        }
        if (m && Closed(*m, r)) {
          accepted = std::move(m);
          break;
        }
        if (first_reason.empty()) first_reason = why;
      }
      if (!accepted) {
        if (end.empty()) {
          if (readers.size() == 1 && !first_reason.empty()) {
            end = first_reason;
          } else {
            std::vector<std::string> ops;
            for (int k : readers) ops.push_back(graph_.nodes()[k].op);
            end = absl::StrCat("result read by ", readers.size(), " nodes (",
                               absl::StrJoin(ops, ", "), ")");
          }
        }
        ++stats_->chain_ends[end];
        RecordUnfused(c.anchor, readers, end);
        break;
      }
      for (const PostOpSpec& p : accepted->post_ops) {
        sum_used |= p.kind == "sum";
        binary_used |= p.kind == "add" || p.kind == "sub" || p.kind == "mul";
        c.post_ops.push_back(p);
      }
      c.nodes.insert(c.nodes.end(), accepted->nodes.begin(), accepted->nodes.end());
      c.output = accepted->output;
    }
    std::sort(c.nodes.begin(), c.nodes.end());
    return c;
  }

  const ir::Graph& graph_;
  OneDnnMatcher matcher_;
  absl::flat_hash_set<std::string> captured_;
  std::vector<int> owner_;  // chain index claiming each node, -1 if none
  // Element-wise readers where a chain stopped, by node index.
  std::vector<std::pair<int, OneDnnFusionStats::Unfused>> pending_unfused_;
  OneDnnFusionStats* stats_;
};

ir::Node BuildFusedNode(const ir::Graph& graph, const Chain& c) {
  const ir::Node& anchor = graph.nodes()[c.anchor];
  ir::Node f;
  f.name = anchor.name;
  f.op = OneDnnMatcher::FusedOpName(anchor);
  f.domain = "kiln";
  f.inputs = anchor.inputs;
  while (!f.inputs.empty() && f.inputs.back() == ir::kNoValue) f.inputs.pop_back();
  f.attrs = anchor.attrs;
  std::vector<std::string> kinds;
  std::vector<float> alphas, betas;
  std::vector<int64_t> operand_inputs;
  for (const PostOpSpec& p : c.post_ops) {
    kinds.push_back(p.kind);
    alphas.push_back(p.alpha);
    betas.push_back(p.beta);
    if (p.operand == ir::kNoValue) {
      operand_inputs.push_back(-1);
    } else {
      operand_inputs.push_back(static_cast<int64_t>(f.inputs.size()));
      f.inputs.push_back(p.operand);
    }
  }
  std::vector<std::string> names;
  for (int k : c.nodes) names.push_back(graph.nodes()[k].name);
  f.attrs["post_ops"] = std::move(kinds);
  f.attrs["post_op_alphas"] = std::move(alphas);
  f.attrs["post_op_betas"] = std::move(betas);
  f.attrs["post_op_inputs"] = std::move(operand_inputs);
  f.attrs["fused_nodes"] = std::move(names);
  f.outputs = {c.output};
  return f;
}

}  // namespace

absl::StatusOr<bool> FuseOneDnnPostOps::Run(ir::Graph* graph) {
  stats_ = OneDnnFusionStats();
  KILN_ASSIGN_OR_RETURN(const bool relabelled, SinkUnitRelabels(graph));
  std::vector<Chain> chains = Fuser(*graph, &stats_).FindChains();
  if (chains.empty()) return relabelled;

  const int num_nodes = static_cast<int>(graph->nodes().size());
  std::vector<bool> absorbed(num_nodes, false);
  // The fused node takes the place of its chain's last node: every operand
  // is computed by then, and every reader of its output comes later.
  std::vector<std::optional<ir::Node>> fused_at(num_nodes);
  for (const Chain& c : chains) {
    for (int k : c.nodes) {
      KILN_RET_CHECK(!absorbed[k]);
      absorbed[k] = true;
    }
    fused_at[c.nodes.back()] = BuildFusedNode(*graph, c);
  }
  std::vector<ir::Node> nodes;
  nodes.reserve(num_nodes);
  for (int i = 0; i < num_nodes; ++i) {
    if (fused_at[i].has_value()) {
      nodes.push_back(std::move(*fused_at[i]));
    } else if (!absorbed[i]) {
      nodes.push_back(std::move(graph->mutable_nodes()[i]));
    }
  }
  graph->mutable_nodes() = std::move(nodes);
  return true;
}

}  // namespace kiln::passes
