// File: passes/graph/onednn_matcher.h — what oneDNN can run as one primitive
// (after XLA's LibraryMatcher): which Conv / ConvTranspose / Gemm / MatMul
// anchors it takes, and which element-wise nodes (including the composite
// patterns exporters emit for GELU and SiLU) it can absorb as post-ops.
// The fuse-onednn-post-ops pass decides what to rewrite with it.
#ifndef KILN_PASSES_GRAPH_ONEDNN_MATCHER_H_
#define KILN_PASSES_GRAPH_ONEDNN_MATCHER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"

namespace kiln::passes {

// One post-op of a fused call, named as backends/onednn's PostOpKind:
// relu, leaky_relu, elu, gelu_erf, gelu_tanh, swish, sigmoid, tanh,
// hardswish, hardsigmoid, clip, linear, add, sub, mul, sum.
struct PostOpSpec {
  std::string kind;
  // leaky_relu/elu alpha, swish alpha (1), clip min/max, hardsigmoid
  // alpha/beta, linear scale/shift, sum scale; 0 when unused.
  float alpha = 0.0f;
  float beta = 0.0f;
  // add/sub/mul: the operand broadcasting to the output; sum: the full-size
  // tensor the result accumulates onto. kNoValue for unary post-ops.
  ir::ValueId operand = ir::kNoValue;
};

// Nodes that together compute post-ops of a running value.
struct PostOpMatch {
  std::vector<PostOpSpec> post_ops;  // one, or two for Sub(operand, x)
  std::vector<int> nodes;            // indices into graph.nodes(), ascending
  ir::ValueId output = ir::kNoValue;  // the value the last of them writes
};

// kiln runs Conv/GEMM through oneDNN with fused post-ops: this class is the
// single place that knows what oneDNN accepts, so the rewriter stays a
// generic graph walk and another library could plug in its own matcher.
// It only reads the graph it was built on (node indices refer to it) and
// never checks who else reads a value: keeping every use is the rewriter's
// job.
class OneDnnMatcher {
 public:
  explicit OneDnnMatcher(const ir::Graph& graph);

  // "FusedConv" for Conv etc.; empty for an op that is no anchor.
  static std::string FusedOpName(const ir::Node& node);

  // True when oneDNN takes `node` as one primitive: a default-domain Conv,
  // ConvTranspose, Gemm or MatMul with f32 static-shaped operands, constant
  // weights (and bias) for Conv/ConvTranspose/Gemm, attributes it supports.
  // Otherwise false, with the reason in `why_not` if given.
  bool IsAnchorSupported(const ir::Node& node, std::string* why_not = nullptr) const;

  // The post-ops node `node_index`, which reads `running`, computes from it,
  // with every node of the composite pattern it starts (GELU-erf, GELU-tanh,
  // SiLU, x*HardSigmoid(x)). `sum_available` is false once the chain has its
  // one in-place sum. nullopt, with the reason in `why_not`, when oneDNN
  // cannot absorb it.
  std::optional<PostOpMatch> MatchPostOp(int node_index, ir::ValueId running,
                                         bool sum_available,
                                         std::string* why_not = nullptr) const;

  // Nodes reading `value`, ascending, each once.
  const std::vector<int>& Consumers(ir::ValueId value) const {
    return consumers_[value];
  }

 private:
  const ir::Node& node(int i) const { return graph_.nodes()[i]; }
  // The one node reading `value`, or -1.
  int SoleConsumer(ir::ValueId value) const;
  // The f32 scalar constant `id` holds (any rank, one element).
  std::optional<float> ScalarConstant(ir::ValueId id) const;
  // `n` is an op of that type with one output of x's dtype and shape.
  bool IsElementwise(const ir::Node& n, absl::string_view op, ir::ValueId x) const;
  // For a two-input node reading `v` once: its other input; else kNoValue.
  static ir::ValueId OtherInput(const ir::Node& n, ir::ValueId v);
  // `n`'s input other than `v` is a scalar constant close to `c`.
  bool OtherIsConstant(const ir::Node& n, ir::ValueId v, double c) const;

  std::optional<PostOpMatch> MatchGeluErf(int start, ir::ValueId x) const;
  std::optional<PostOpMatch> MatchGeluTanh(int start, ir::ValueId x) const;
  std::optional<PostOpMatch> MatchTimesSelf(int start, ir::ValueId x) const;
  // 0.5 * x * a in any association, where `a` is the value (1 + ...) the
  // nodes in `nodes` computed from x; appends its nodes, returns the result.
  std::optional<ir::ValueId> MatchHalfXTimes(ir::ValueId x, ir::ValueId a,
                                             std::vector<int>* nodes) const;
  std::optional<PostOpMatch> MatchUnary(int node_index, ir::ValueId x,
                                        std::string* why_not) const;
  std::optional<PostOpMatch> MatchMinMax(int node_index, ir::ValueId x,
                                         std::string* why_not) const;
  std::optional<PostOpMatch> MatchBinary(int node_index, ir::ValueId x,
                                         bool sum_available,
                                         std::string* why_not) const;

  const ir::Graph& graph_;
  std::vector<std::vector<int>> consumers_;
  std::vector<int> producer_;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_ONEDNN_MATCHER_H_
