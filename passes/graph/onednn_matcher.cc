// OneDnnMatcher: the anchors and post-ops oneDNN supports, and the
// exporters' composite activation patterns it recognizes.
#include "passes/graph/onednn_matcher.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kiln::passes {
namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;

bool Fail(std::string* why_not, std::string reason) {
  if (why_not != nullptr) *why_not = std::move(reason);
  return false;
}

// Within float rounding of a decimal constant (exporters print 8 digits).
bool Near(double v, double c) { return std::abs(v - c) <= 1e-5 * std::abs(c); }

bool IsStaticF32(const ir::Value& v) {
  if (v.dtype != ir::DType::kF32 || !v.shape_known) return false;
  for (int64_t d : v.shape) {
    if (d < 0) return false;
  }
  return true;
}

std::string TypeText(const ir::Value& v) {
  std::string dims;
  if (!v.shape_known) {
    dims = "*";
  } else {
    for (size_t i = 0; i < v.shape.size(); ++i) {
      absl::StrAppend(&dims, i ? "," : "",
                      v.shape[i] < 0 ? std::string("?") : absl::StrCat(v.shape[i]));
    }
  }
  return absl::StrCat(ir::DTypeName(v.dtype), "[", dims, "]");
}

// The broadcast patterns oneDNN 2.6's optimized kernels take for a binary
// post-op operand (probed on its gemm-based matmul; conv kernels take the
// same ones): full size, a scalar, one non-1 dim that is the last or dim 1
// (per output channel), or dim 1 broadcast with dim 0 and the last dim full
// (per minibatch). Others, e.g. Swin's [1,3,49,49] bias onto
// [64,3,49,49] scores or a per-row [M,1] onto [M,N], make oneDNN pick its
// scalar reference kernel, so they stay in the loop IR.
bool OneDnnBroadcastPattern(const ir::Shape& operand, const ir::Shape& out) {
  const size_t r = out.size();
  if (operand.size() > r) return false;
  ir::Shape o(r - operand.size(), 1);
  o.insert(o.end(), operand.begin(), operand.end());
  if (o == out) return true;
  auto ones_except = [&](std::initializer_list<size_t> keep) {
    for (size_t i = 0; i < r; ++i) {
      if (o[i] != 1 && std::find(keep.begin(), keep.end(), i) == keep.end()) return false;
    }
    return true;
  };
  if (ones_except({})) return true;
  if (r >= 1 && ones_except({r - 1})) return true;
  if (r >= 2 && ones_except({1})) return true;
  if (r >= 3 && o[1] == 1 && o[0] == out[0] && o[r - 1] == out[r - 1]) {
    for (size_t i = 2; i + 1 < r; ++i) {
      if (o[i] != 1 && o[i] != out[i]) return false;
    }
    return true;
  }
  return false;
}

bool BroadcastsTo(const ir::Shape& operand, const ir::Shape& out) {
  if (operand.size() > out.size()) return false;
  const size_t offset = out.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != 1 && operand[i] != out[offset + i]) return false;
  }
  return true;
}

PostOpSpec Op(std::string kind, float alpha = 0.0f, float beta = 0.0f,
              ir::ValueId operand = ir::kNoValue) {
  return PostOpSpec{std::move(kind), alpha, beta, operand};
}

PostOpMatch Single(int node_index, PostOpSpec op, ir::ValueId output) {
  PostOpMatch m;
  m.post_ops.push_back(std::move(op));
  m.nodes = {node_index};
  m.output = output;
  return m;
}

}  // namespace

OneDnnMatcher::OneDnnMatcher(const ir::Graph& graph)
    : graph_(graph),
      consumers_(graph.num_values()),
      producer_(graph.num_values(), -1) {
  for (int i = 0; i < static_cast<int>(graph.nodes().size()); ++i) {
    const ir::Node& n = graph.nodes()[i];
    for (ir::ValueId in : n.inputs) {
      if (in == ir::kNoValue) continue;
      std::vector<int>& c = consumers_[in];
      if (c.empty() || c.back() != i) c.push_back(i);
    }
    for (ir::ValueId out : n.outputs) {
      if (out != ir::kNoValue) producer_[out] = i;
    }
  }
}

std::string OneDnnMatcher::FusedOpName(const ir::Node& node) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return "";
  if (node.op == "Conv" || node.op == "ConvTranspose" || node.op == "Gemm" ||
      node.op == "MatMul") {
    return absl::StrCat("Fused", node.op);
  }
  return "";
}

bool OneDnnMatcher::IsAnchorSupported(const ir::Node& n,
                                      std::string* why_not) const {
  if (FusedOpName(n).empty()) {
    return Fail(why_not, absl::StrCat(n.op, " is not a oneDNN anchor"));
  }
  if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) {
    return Fail(why_not, "needs exactly one output");
  }
  if (!n.has_input(0) || !n.has_input(1)) return Fail(why_not, "missing an input");
  std::vector<ir::ValueId> tensors;
  for (ir::ValueId in : n.inputs) {
    if (in != ir::kNoValue) tensors.push_back(in);
  }
  tensors.push_back(n.outputs[0]);
  for (ir::ValueId id : tensors) {
    const ir::Value& v = graph_.value(id);
    if (!IsStaticF32(v)) {
      return Fail(why_not, absl::StrCat("'", v.name, "' is ", TypeText(v),
                                        ": only static-shaped f32 is supported"));
    }
  }
  const ir::Shape& x = graph_.value(n.inputs[0]).shape;
  const ir::Shape& w = graph_.value(n.inputs[1]).shape;
  const ir::Shape& y = graph_.value(n.outputs[0]).shape;
  const bool has_bias = n.has_input(2);

  if (n.op == "MatMul") {
    if (n.inputs.size() != 2) return Fail(why_not, "MatMul takes two inputs");
    if (x.size() < 2 || w.size() < 2) {
      return Fail(why_not, "1-D MatMul operands (oneDNN needs rank >= 2)");
    }
    return true;
  }
  // Conv, ConvTranspose and Gemm take constant weights (prepacked once).
  if (n.inputs.size() > 3) return Fail(why_not, "too many inputs");
  if (!graph_.IsConstant(n.inputs[1])) return Fail(why_not, "weights are not constant");
  if (has_bias && !graph_.IsConstant(n.inputs[2])) {
    return Fail(why_not, "bias is not constant");
  }
  if (n.op == "Gemm") {
    absl::StatusOr<float> alpha = n.AttrOr<float>("alpha", 1.0f);
    absl::StatusOr<float> beta = n.AttrOr<float>("beta", 1.0f);
    if (!alpha.ok() || !beta.ok()) return Fail(why_not, "malformed alpha/beta");
    if (*alpha != 1.0f) return Fail(why_not, "Gemm alpha != 1");
    if (has_bias && *beta != 1.0f) return Fail(why_not, "Gemm beta != 1");
    if (x.size() != 2 || w.size() != 2 || y.size() != 2) {
      return Fail(why_not, "Gemm operands must be 2-D");
    }
    if (has_bias) {
      const ir::Shape& c = graph_.value(n.inputs[2]).shape;
      const bool per_column = (c.size() == 1 && c[0] == y[1]) ||
                              (c.size() == 2 && c[0] == 1 && c[1] == y[1]);
      if (!per_column) {
        return Fail(why_not, "Gemm C is not a per-column bias ([N] or [1,N])");
      }
    }
    return true;
  }
  // Conv / ConvTranspose.
  if (x.size() < 3 || x.size() > 5) {
    return Fail(why_not, "only 1-D to 3-D convolutions are supported");
  }
  absl::StatusOr<int64_t> group = n.AttrOr<int64_t>("group", 1);
  if (!group.ok() || *group <= 0) return Fail(why_not, "bad group");
  absl::StatusOr<std::string> auto_pad = n.AttrOr<std::string>("auto_pad", "NOTSET");
  if (!auto_pad.ok()) return Fail(why_not, "malformed auto_pad");
  if (n.op == "ConvTranspose") {
    if (*auto_pad != "NOTSET" && *auto_pad != "VALID") {
      return Fail(why_not, absl::StrCat("ConvTranspose auto_pad ", *auto_pad));
    }
    if (n.HasAttr("output_shape")) {
      return Fail(why_not, "ConvTranspose output_shape (explicit pads needed)");
    }
  } else if (*auto_pad != "NOTSET" && *auto_pad != "VALID" &&
             *auto_pad != "SAME_UPPER" && *auto_pad != "SAME_LOWER") {
    return Fail(why_not, absl::StrCat("Conv auto_pad ", *auto_pad));
  }
  return true;
}

int OneDnnMatcher::SoleConsumer(ir::ValueId value) const {
  if (value == ir::kNoValue) return -1;
  const std::vector<int>& c = consumers_[value];
  return c.size() == 1 ? c[0] : -1;
}

std::optional<float> OneDnnMatcher::ScalarConstant(ir::ValueId id) const {
  if (id == ir::kNoValue) return std::nullopt;
  const ir::Tensor* t = graph_.constant(id);
  if (t == nullptr || t->dtype() != ir::DType::kF32 || t->num_elements() != 1) {
    return std::nullopt;
  }
  return t->data<float>()[0];
}

bool OneDnnMatcher::IsElementwise(const ir::Node& n, absl::string_view op,
                                  ir::ValueId x) const {
  if (n.op != op || (!n.domain.empty() && n.domain != "ai.onnx")) return false;
  if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) return false;
  if (n.inputs.empty() || n.inputs[0] == ir::kNoValue) return false;
  const ir::Value& out = graph_.value(n.outputs[0]);
  const ir::Value& xv = graph_.value(x);
  return out.dtype == xv.dtype && out.shape_known && xv.shape_known &&
         out.shape == xv.shape;
}

ir::ValueId OneDnnMatcher::OtherInput(const ir::Node& n, ir::ValueId v) {
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return ir::kNoValue;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return ir::kNoValue;
}

bool OneDnnMatcher::OtherIsConstant(const ir::Node& n, ir::ValueId v,
                                    double c) const {
  std::optional<float> k = ScalarConstant(OtherInput(n, v));
  return k.has_value() && Near(*k, c);
}

std::optional<ir::ValueId> OneDnnMatcher::MatchHalfXTimes(
    ir::ValueId x, ir::ValueId a, std::vector<int>* nodes) const {
  const int c = SoleConsumer(a);
  if (c < 0 || !IsElementwise(node(c), "Mul", x)) return std::nullopt;
  const ir::Node& cn = node(c);
  const ir::ValueId other = OtherInput(cn, a);
  if (other == ir::kNoValue) return std::nullopt;
  const ir::ValueId prod = cn.outputs[0];
  if (other == x) {  // (x * a) * 0.5, or / 2
    const int d = SoleConsumer(prod);
    if (d < 0) return std::nullopt;
    const ir::Node& dn = node(d);
    const bool half = (IsElementwise(dn, "Mul", x) && OtherIsConstant(dn, prod, 0.5)) ||
                      (IsElementwise(dn, "Div", x) && dn.inputs[0] == prod &&
                       OtherIsConstant(dn, prod, 2.0));
    if (!half) return std::nullopt;
    nodes->insert(nodes->end(), {c, d});
    return dn.outputs[0];
  }
  if (std::optional<float> k = ScalarConstant(other); k && Near(*k, 0.5)) {
    const int d = SoleConsumer(prod);  // x * (a * 0.5)
    if (d < 0 || !IsElementwise(node(d), "Mul", x) || OtherInput(node(d), prod) != x) {
      return std::nullopt;
    }
    nodes->insert(nodes->end(), {c, d});
    return node(d).outputs[0];
  }
  const int p = producer_[other];  // (x * 0.5) * a
  if (p < 0 || !IsElementwise(node(p), "Mul", x) || !OtherIsConstant(node(p), x, 0.5)) {
    return std::nullopt;
  }
  nodes->insert(nodes->end(), {p, c});
  return prod;
}

std::optional<PostOpMatch> OneDnnMatcher::MatchGeluErf(int start,
                                                       ir::ValueId x) const {
  const ir::Node& n = node(start);
  const bool div = IsElementwise(n, "Div", x) && n.inputs[0] == x &&
                   OtherIsConstant(n, x, kSqrt2);
  const bool mul = IsElementwise(n, "Mul", x) && OtherIsConstant(n, x, 1.0 / kSqrt2);
  if (!div && !mul) return std::nullopt;
  const int e = SoleConsumer(n.outputs[0]);
  if (e < 0 || !IsElementwise(node(e), "Erf", x)) return std::nullopt;
  const ir::ValueId erf = node(e).outputs[0];
  const int a = SoleConsumer(erf);
  if (a < 0 || !IsElementwise(node(a), "Add", x) || !OtherIsConstant(node(a), erf, 1.0)) {
    return std::nullopt;
  }
  std::vector<int> nodes = {start, e, a};
  std::optional<ir::ValueId> y = MatchHalfXTimes(x, node(a).outputs[0], &nodes);
  if (!y) return std::nullopt;
  PostOpMatch m;
  m.post_ops = {Op("gelu_erf")};
  std::sort(nodes.begin(), nodes.end());
  m.nodes = std::move(nodes);
  m.output = *y;
  return m;
}

std::optional<PostOpMatch> OneDnnMatcher::MatchGeluTanh(int start,
                                                        ir::ValueId x) const {
  const ir::Node& n = node(start);
  std::vector<int> nodes = {start};
  ir::ValueId cube = ir::kNoValue;
  ir::ValueId scaled_cube = ir::kNoValue;  // 0.044715 * x^3
  if (IsElementwise(n, "Mul", x) && OtherIsConstant(n, x, 0.044715)) {
    // x * (x * (0.044715 * x)), as JAX's gelu(approximate=True) exports.
    const int c1 = SoleConsumer(n.outputs[0]);
    if (c1 < 0 || !IsElementwise(node(c1), "Mul", x) ||
        OtherInput(node(c1), n.outputs[0]) != x) {
      return std::nullopt;
    }
    const int c2 = SoleConsumer(node(c1).outputs[0]);
    if (c2 < 0 || !IsElementwise(node(c2), "Mul", x) ||
        OtherInput(node(c2), node(c1).outputs[0]) != x) {
      return std::nullopt;
    }
    nodes.insert(nodes.end(), {c1, c2});
    scaled_cube = node(c2).outputs[0];
  } else if (IsElementwise(n, "Pow", x) && n.inputs.size() == 2 && n.inputs[0] == x) {
    const ir::Tensor* e = graph_.constant(n.inputs[1]);
    if (e == nullptr || e->num_elements() != 1 || e->GetAsDouble(0) != 3.0) {
      return std::nullopt;
    }
    cube = n.outputs[0];
  } else if (IsElementwise(n, "Mul", x) && n.inputs.size() == 2 &&
             n.inputs[0] == x && n.inputs[1] == x) {
    const ir::ValueId square = n.outputs[0];
    const int c = SoleConsumer(square);
    if (c < 0 || !IsElementwise(node(c), "Mul", x) || OtherInput(node(c), square) != x) {
      return std::nullopt;
    }
    nodes.push_back(c);
    cube = node(c).outputs[0];
  } else {
    return std::nullopt;
  }
  // 0.044715 * x^3, + x, * sqrt(2/pi), tanh, + 1.
  if (scaled_cube == ir::kNoValue) {
    const int d = SoleConsumer(cube);
    if (d < 0 || !IsElementwise(node(d), "Mul", x) ||
        !OtherIsConstant(node(d), cube, 0.044715)) {
      return std::nullopt;
    }
    nodes.push_back(d);
    scaled_cube = node(d).outputs[0];
  }
  const int e = SoleConsumer(scaled_cube);
  if (e < 0 || !IsElementwise(node(e), "Add", x) || OtherInput(node(e), scaled_cube) != x) {
    return std::nullopt;
  }
  const int f = SoleConsumer(node(e).outputs[0]);
  if (f < 0 || !IsElementwise(node(f), "Mul", x) ||
      !OtherIsConstant(node(f), node(e).outputs[0], kSqrt2OverPi)) {
    return std::nullopt;
  }
  const int t = SoleConsumer(node(f).outputs[0]);
  if (t < 0 || !IsElementwise(node(t), "Tanh", x)) return std::nullopt;
  const int g = SoleConsumer(node(t).outputs[0]);
  if (g < 0 || !IsElementwise(node(g), "Add", x) ||
      !OtherIsConstant(node(g), node(t).outputs[0], 1.0)) {
    return std::nullopt;
  }
  nodes.insert(nodes.end(), {e, f, t, g});
  std::optional<ir::ValueId> y = MatchHalfXTimes(x, node(g).outputs[0], &nodes);
  if (!y) return std::nullopt;
  PostOpMatch m;
  m.post_ops = {Op("gelu_tanh")};
  std::sort(nodes.begin(), nodes.end());
  m.nodes = std::move(nodes);
  m.output = *y;
  return m;
}

std::optional<PostOpMatch> OneDnnMatcher::MatchTimesSelf(int start,
                                                         ir::ValueId x) const {
  const ir::Node& n = node(start);
  PostOpSpec op;
  if (IsElementwise(n, "Sigmoid", x)) {
    op = Op("swish", 1.0f);
  } else if (IsElementwise(n, "HardSigmoid", x)) {
    absl::StatusOr<float> alpha = n.AttrOr<float>("alpha", 0.2f);
    absl::StatusOr<float> beta = n.AttrOr<float>("beta", 0.5f);
    if (!alpha.ok() || !beta.ok() || !Near(*alpha, 1.0 / 6.0) || !Near(*beta, 0.5)) {
      return std::nullopt;
    }
    op = Op("hardswish");
  } else {
    return std::nullopt;
  }
  if (n.inputs.size() != 1 || n.inputs[0] != x) return std::nullopt;
  const int m = SoleConsumer(n.outputs[0]);
  if (m < 0 || !IsElementwise(node(m), "Mul", x) || OtherInput(node(m), n.outputs[0]) != x) {
    return std::nullopt;
  }
  PostOpMatch match;
  match.post_ops = {op};
  match.nodes = {std::min(start, m), std::max(start, m)};
  match.output = node(m).outputs[0];
  return match;
}

std::optional<PostOpMatch> OneDnnMatcher::MatchUnary(int i, ir::ValueId x,
                                                     std::string* why_not) const {
  const ir::Node& n = node(i);
  if (!IsElementwise(n, n.op, x)) {
    Fail(why_not, absl::StrCat(n.op, " changes the shape or dtype"));
    return std::nullopt;
  }
  if (n.inputs.empty() || n.inputs[0] != x) {
    Fail(why_not, absl::StrCat(n.op, " reads the result as a parameter"));
    return std::nullopt;
  }
  const ir::ValueId y = n.outputs[0];
  if (n.op == "Clip") {
    double lo = -std::numeric_limits<double>::infinity();
    double hi = std::numeric_limits<double>::infinity();
    if (graph_.opset() >= 11) {
      for (int k = 1; k < static_cast<int>(n.inputs.size()) && k < 3; ++k) {
        if (n.inputs[k] == ir::kNoValue) continue;
        std::optional<float> bound = ScalarConstant(n.inputs[k]);
        if (!bound) {
          Fail(why_not, "Clip bounds are not scalar constants");
          return std::nullopt;
        }
        (k == 1 ? lo : hi) = *bound;
      }
    } else {
      absl::StatusOr<float> min = n.AttrOr<float>("min", -std::numeric_limits<float>::max());
      absl::StatusOr<float> max = n.AttrOr<float>("max", std::numeric_limits<float>::max());
      if (!min.ok() || !max.ok()) {
        Fail(why_not, "malformed Clip min/max");
        return std::nullopt;
      }
      lo = *min;
      hi = *max;
    }
    if (std::isnan(lo) || std::isnan(hi) || lo > hi) {
      Fail(why_not, "Clip bounds are NaN or min > max");
      return std::nullopt;
    }
    // A missing bound is the largest finite float (oneDNN takes finite ones).
    const double big = std::numeric_limits<float>::max();
    return Single(i, Op("clip", static_cast<float>(std::max(lo, -big)),
                        static_cast<float>(std::min(hi, big))),
                  y);
  }
  if (n.inputs.size() != 1) {
    Fail(why_not, absl::StrCat(n.op, " has extra inputs"));
    return std::nullopt;
  }
  auto attr = [&](const char* name, float fallback) -> std::optional<float> {
    absl::StatusOr<float> v = n.AttrOr<float>(name, fallback);
    if (!v.ok() || !std::isfinite(*v)) return std::nullopt;
    return *v;
  };
  std::optional<PostOpSpec> op;
  if (n.op == "Relu") {
    op = Op("relu");
  } else if (n.op == "LeakyRelu") {
    if (auto a = attr("alpha", 0.01f)) op = Op("leaky_relu", *a);
  } else if (n.op == "Elu") {
    if (auto a = attr("alpha", 1.0f)) op = Op("elu", *a);
  } else if (n.op == "Sigmoid") {
    op = Op("sigmoid");
  } else if (n.op == "Tanh") {
    op = Op("tanh");
  } else if (n.op == "HardSwish") {
    op = Op("hardswish");
  } else if (n.op == "HardSigmoid") {
    auto a = attr("alpha", 0.2f), b = attr("beta", 0.5f);
    if (a && b) op = Op("hardsigmoid", *a, *b);
  }
  if (!op) {
    Fail(why_not, absl::StrCat(n.op, " has malformed attributes"));
    return std::nullopt;
  }
  return Single(i, *op, y);
}

std::optional<PostOpMatch> OneDnnMatcher::MatchBinary(int i, ir::ValueId x,
                                                      bool sum_available,
                                                      std::string* why_not) const {
  const ir::Node& n = node(i);
  if (!IsElementwise(n, n.op, x)) {
    Fail(why_not, absl::StrCat(n.op, " changes the shape or dtype (broadcasts the result)"));
    return std::nullopt;
  }
  const ir::ValueId o = OtherInput(n, x);
  if (o == ir::kNoValue) {
    Fail(why_not, absl::StrCat(n.op, " of the result with itself"));
    return std::nullopt;
  }
  const bool x_first = n.inputs[0] == x;
  const ir::ValueId y = n.outputs[0];
  if (std::optional<float> c = ScalarConstant(o)) {
    if (n.op == "Add") return Single(i, Op("linear", 1.0f, *c), y);
    if (n.op == "Sub") {
      return Single(i, x_first ? Op("linear", 1.0f, -*c) : Op("linear", -1.0f, *c), y);
    }
    if (n.op == "Mul") return Single(i, Op("linear", *c, 0.0f), y);
    const float inv = 1.0f / *c;
    if (!x_first || !std::isfinite(inv)) {
      Fail(why_not, "Div of a constant by the result, or by zero");
      return std::nullopt;
    }
    return Single(i, Op("linear", inv, 0.0f), y);
  }
  const ir::Value& ov = graph_.value(o);
  if (!IsStaticF32(ov) || !BroadcastsTo(ov.shape, graph_.value(x).shape)) {
    Fail(why_not, absl::StrCat(n.op, " operand '", ov.name, "' ", TypeText(ov),
                               " is not a static f32 tensor broadcasting to the result"));
    return std::nullopt;
  }
  if (n.op == "Div") {
    Fail(why_not, "Div by a tensor (oneDNN has no div post-op)");
    return std::nullopt;
  }
  if (!OneDnnBroadcastPattern(ov.shape, graph_.value(x).shape)) {
    Fail(why_not, absl::StrCat(n.op, " operand ", ir::ShapeToString(ov.shape),
                               " broadcasts over the result in a pattern only oneDNN's "
                               "reference kernel takes"));
    return std::nullopt;
  }
  if (n.op == "Mul") return Single(i, Op("mul", 0.0f, 0.0f, o), y);
  if (n.op == "Sub") {
    if (x_first) return Single(i, Op("sub", 0.0f, 0.0f, o), y);
    PostOpMatch m = Single(i, Op("linear", -1.0f, 0.0f), y);
    m.post_ops.push_back(Op("add", 0.0f, 0.0f, o));
    return m;
  }
  // Add: a full-size activation accumulates in place (sum), anything else
  // (bias-like constants, broadcast masks) is a binary add.
  const bool full_size = ov.shape == graph_.value(x).shape && !graph_.IsConstant(o);
  if (full_size && sum_available) return Single(i, Op("sum", 1.0f, 0.0f, o), y);
  return Single(i, Op("add", 0.0f, 0.0f, o), y);
}

std::optional<PostOpMatch> OneDnnMatcher::MatchMinMax(int i, ir::ValueId x,
                                                      std::string* why_not) const {
  const ir::Node& n = node(i);
  if (!IsElementwise(n, n.op, x)) {
    Fail(why_not, absl::StrCat(n.op, " changes the shape or dtype (broadcasts the result)"));
    return std::nullopt;
  }
  // Max(x, c) clips from below, Min(x, c) from above (TF exports write a
  // ReLU with a floor or a ceiling this way); a missing bound is FLT_MAX, as
  // for Clip.
  const std::optional<float> c = ScalarConstant(OtherInput(n, x));
  if (!c || !std::isfinite(*c)) {
    Fail(why_not, absl::StrCat(n.op, " of the result and anything but one finite scalar "
                               "constant"));
    return std::nullopt;
  }
  const float big = std::numeric_limits<float>::max();
  return Single(i, n.op == "Max" ? Op("clip", *c, big) : Op("clip", -big, *c), n.outputs[0]);
}

std::optional<PostOpMatch> OneDnnMatcher::MatchPostOp(int node_index,
                                                      ir::ValueId running,
                                                      bool sum_available,
                                                      std::string* why_not) const {
  const ir::Node& n = node(node_index);
  if (!n.domain.empty() && n.domain != "ai.onnx") {
    Fail(why_not, absl::StrCat(n.domain, ".", n.op, " is not an ONNX op"));
    return std::nullopt;
  }
  const ir::Value& xv = graph_.value(running);
  if (!IsStaticF32(xv)) {
    Fail(why_not, "the result is not static-shaped f32");
    return std::nullopt;
  }
  // Composites first: their first node alone may look like a simpler post-op.
  if (auto m = MatchGeluErf(node_index, running)) return m;
  if (auto m = MatchGeluTanh(node_index, running)) return m;
  if (auto m = MatchTimesSelf(node_index, running)) return m;
  static constexpr absl::string_view kUnary[] = {
      "Relu", "LeakyRelu", "Elu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Clip"};
  if (std::find(std::begin(kUnary), std::end(kUnary), n.op) != std::end(kUnary)) {
    return MatchUnary(node_index, running, why_not);
  }
  if (n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div") {
    return MatchBinary(node_index, running, sum_available, why_not);
  }
  if (n.op == "Max" || n.op == "Min") return MatchMinMax(node_index, running, why_not);
  Fail(why_not, absl::StrCat(n.op, " is not a oneDNN post-op"));
  return std::nullopt;
}

}  // namespace kiln::passes
