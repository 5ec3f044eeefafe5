// Pass compute-f16-in-f32.
#include "passes/graph/compute_f16_in_f32.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxFloat16 = 10;

ir::Tensor ToF32(const ir::Tensor& h) {
  ir::Tensor f(ir::DType::kF32, h.shape());
  const ir::Float16* src = h.data<ir::Float16>();
  float* dst = f.data<float>();
  for (int64_t i = 0; i < h.num_elements(); ++i) dst[i] = ir::HalfToFloat(src[i]);
  return f;
}

bool HasSubgraph(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes()) {
    for (const auto& [key, attr] : n.attrs) {
      if (std::holds_alternative<std::shared_ptr<const ir::Graph>>(attr)) return true;
    }
  }
  return false;
}

// Attributes holding an ONNX element type: Cast's `to`, the generators'
// `dtype`, the window functions' `output_datatype`.
bool IsDTypeAttr(const std::string& key) {
  return key == "to" || key == "dtype" || key == "output_datatype";
}

}  // namespace

absl::StatusOr<bool> ComputeF16InF32::Run(ir::Graph* graph) {
  bool any = false;
  for (ir::ValueId v = 0; v < graph->num_values(); ++v) {
    any |= graph->value(v).dtype == ir::DType::kF16;
  }
  if (!any || HasSubgraph(*graph)) return false;

  // Interface values keep their f16 type: inputs are read through a Cast to
  // f32, outputs written through a Cast to f16.
  std::vector<ir::Node> head, tail;
  std::vector<bool> keep_f16(graph->num_values(), false);
  for (ir::ValueId in : graph->inputs()) {
    if (graph->value(in).dtype != ir::DType::kF16 || keep_f16[in]) continue;
    keep_f16[in] = true;
    const ir::Value info = graph->value(in);
    const ir::ValueId wide =
        graph->AddValue(UniqueName(*graph, info.name + ".f32"), ir::DType::kF32, info.shape);
    if (!info.shape_known) graph->mutable_value(wide).shape_known = false;
    ReplaceAllUses(graph, in, wide);
    // ReplaceAllUses also rewired a graph output that is this input; the
    // output stays the input itself.
    std::replace(graph->mutable_outputs().begin(), graph->mutable_outputs().end(), wide, in);
    ir::Node cast;
    cast.op = "Cast";
    cast.inputs = {in};
    cast.outputs = {wide};
    cast.attrs["to"] = kOnnxFloat;
    head.push_back(std::move(cast));
  }
  for (ir::ValueId& out : graph->mutable_outputs()) {
    if (graph->value(out).dtype != ir::DType::kF16 || keep_f16[out]) continue;
    if (const ir::Tensor* t = graph->constant(out)) {
      // A constant output stays as it is; its readers read an f32 copy.
      const ir::Value info = graph->value(out);
      const ir::ValueId wide = graph->AddValue(UniqueName(*graph, info.name + ".f32"),
                                               ir::DType::kF32, info.shape);
      graph->SetConstant(wide, ToF32(*t));
      for (ir::Node& n : graph->mutable_nodes()) {
        std::replace(n.inputs.begin(), n.inputs.end(), out, wide);
      }
      keep_f16[out] = true;
      continue;
    }
    // The producer writes a new f32 value that its readers read; the output
    // value (the user's name) is the Cast's.
    const ir::Value info = graph->value(out);
    const ir::ValueId wide =
        graph->AddValue(UniqueName(*graph, info.name + ".f32"), ir::DType::kF32, info.shape);
    if (!info.shape_known) graph->mutable_value(wide).shape_known = false;
    for (ir::Node& n : graph->mutable_nodes()) {
      for (ir::ValueId& i : n.inputs) {
        if (i == out) i = wide;
      }
      for (ir::ValueId& o : n.outputs) {
        if (o == out) o = wide;
      }
    }
    keep_f16[out] = true;
    ir::Node cast;
    cast.op = "Cast";
    cast.inputs = {wide};
    cast.outputs = {out};
    cast.attrs["to"] = kOnnxFloat16;
    tail.push_back(std::move(cast));
  }
  // A Cast or CastLike to f16 still rounds: its result goes through a Cast
  // back to f32, and the node's own output is a new f16 value.
  std::vector<ir::Node> nodes;
  nodes.reserve(graph->nodes().size() + head.size() + tail.size());
  for (ir::Node& n : head) nodes.push_back(std::move(n));
  for (ir::Node& n : graph->mutable_nodes()) {
    const bool rounds =
        n.domain.empty() && n.outputs.size() == 1 && n.outputs[0] != ir::kNoValue &&
        graph->value(n.outputs[0]).dtype == ir::DType::kF16 &&
        (n.op == "Cast" || n.op == "CastLike");
    for (auto& [key, attr] : n.attrs) {
      if (int64_t* code = std::get_if<int64_t>(&attr); code != nullptr && IsDTypeAttr(key) &&
                                                         *code == kOnnxFloat16 && !rounds) {
        *code = kOnnxFloat;
      } else if (ir::Tensor* t = std::get_if<ir::Tensor>(&attr);
                 t != nullptr && t->dtype() == ir::DType::kF16) {
        *t = ToF32(*t);
      }
    }
    if (!rounds) {
      nodes.push_back(std::move(n));
      continue;
    }
    const ir::ValueId out = n.outputs[0];
    const ir::Value info = graph->value(out);
    const ir::ValueId narrow =
        graph->AddValue(UniqueName(*graph, info.name + ".f16"), ir::DType::kF16, info.shape);
    if (!info.shape_known) graph->mutable_value(narrow).shape_known = false;
    keep_f16.resize(graph->num_values(), false);
    keep_f16[narrow] = true;
    ir::Node round;
    round.op = "Cast";
    round.name = n.name;
    round.inputs = {n.inputs[0]};
    round.outputs = {narrow};
    round.attrs["to"] = kOnnxFloat16;
    ir::Node widen;
    widen.op = "Cast";
    widen.inputs = {narrow};
    widen.outputs = {out};
    widen.attrs["to"] = kOnnxFloat;
    nodes.push_back(std::move(round));
    nodes.push_back(std::move(widen));
  }
  for (ir::Node& n : tail) nodes.push_back(std::move(n));
  graph->mutable_nodes() = std::move(nodes);

  // Every other f16 value computes in f32; f16 constants convert once.
  keep_f16.resize(graph->num_values(), false);
  for (ir::ValueId v = 0; v < graph->num_values(); ++v) {
    if (graph->value(v).dtype != ir::DType::kF16 || keep_f16[v]) continue;
    graph->mutable_value(v).dtype = ir::DType::kF32;
    if (const ir::Tensor* t = graph->constant(v)) graph->SetConstant(v, ToF32(*t));
  }
  return true;
}

}  // namespace kiln::passes
