// Reference fallback calls (lowering/ops_fallback.h): the one-node graph a
// "kiln.Reference" extern kernel carries, its operands and the placeholders
// of values of data-dependent shape.
#include "lowering/ops_fallback.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"
#include "lowering/extern_attrs.h"
#include "lowering/lowerer.h"

namespace kiln::lowering {

using ir::loop::Kernel;
using ir::loop::LoopProgram;

bool HasStaticShape(const ir::Value& value) {
  if (!value.shape_known) return false;
  return std::none_of(value.shape.begin(), value.shape.end(),
                      [](int64_t d) { return d < 0; });
}

ir::Shape PlaceholderShape(const ir::Value& value) {
  if (!value.shape_known) return {0};
  ir::Shape shape = value.shape;
  for (int64_t& d : shape) d = std::max<int64_t>(d, 0);
  if (HasStaticShape(value)) return shape;
  // Keep the element count 0 even when every dim is known but negative.
  if (std::find(shape.begin(), shape.end(), 0) == shape.end()) shape.push_back(0);
  return shape;
}

namespace internal {
namespace {

void CollectCapturedNames(const ir::AttributeMap& attrs, std::vector<std::string>* names) {
  for (const auto& [key, attr] : attrs) {
    const auto* sub = std::get_if<std::shared_ptr<const ir::Graph>>(&attr);
    if (sub == nullptr || *sub == nullptr) continue;
    for (const ir::Graph::Capture& c : (*sub)->captures()) names->push_back(c.outer_name);
    for (const ir::Node& n : (*sub)->nodes()) CollectCapturedNames(n.attrs, names);
  }
}

ir::ValueId AddLike(ir::Graph& g, const ir::Value& v) {
  return v.shape_known ? g.AddValue(v.name, v.dtype, v.shape)
                       : g.AddUnshapedValue(v.name, v.dtype);
}

}  // namespace

std::vector<ir::ValueId> ReferenceCallReads(const ir::Graph& graph, const ir::Node& node) {
  std::vector<ir::ValueId> reads;
  auto add = [&reads](ir::ValueId v) {
    if (std::find(reads.begin(), reads.end(), v) == reads.end()) reads.push_back(v);
  };
  for (ir::ValueId v : node.inputs) {
    if (v != ir::kNoValue) add(v);
  }
  std::vector<std::string> captured;
  CollectCapturedNames(node.attrs, &captured);
  for (const std::string& name : captured) {
    // A name not found here is defined by an enclosing subgraph.
    if (std::optional<ir::ValueId> v = graph.FindValue(name)) add(*v);
  }
  return reads;
}

absl::Status LowerReferenceCall(Lowerer& L, const ir::Node& n,
                                absl::Span<const ir::ValueId> reads,
                                absl::Span<const Operand> operands,
                                const absl::Status& refusal) {
  const ir::Graph& graph = L.graph();
  if (reads.size() != operands.size()) {
    return InternalError(n.Describe(), ": ", reads.size(), " reads but ", operands.size(),
                         " operands");
  }
  // The node alone, reading graph inputs named like the model's values (so
  // subgraph captures resolve by name).
  ir::Graph g(absl::StrCat("reference_", n.op));
  g.set_opset(L.opset());
  std::map<ir::ValueId, ir::ValueId> inner;
  for (ir::ValueId v : reads) {
    const ir::ValueId iv = AddLike(g, graph.value(v));
    g.AddInput(iv);
    inner[v] = iv;
  }
  std::vector<ir::ValueId> node_in, node_out;
  for (ir::ValueId v : n.inputs) node_in.push_back(v == ir::kNoValue ? v : inner.at(v));
  for (ir::ValueId v : n.outputs) {
    if (v == ir::kNoValue) {
      node_out.push_back(v);
      continue;
    }
    const ir::ValueId iv = AddLike(g, graph.value(v));
    g.AddOutput(iv);
    node_out.push_back(iv);
  }
  g.AddNode(n.op, node_in, node_out, n.attrs, n.name).domain = n.domain;
  if (!L.options().reference_fallback || !L.options().reference_fallback(g)) return refusal;

  ir::loop::ExternCall call;
  call.op = ir::loop::kReferenceCallOp;
  std::vector<int64_t> dynamic_inputs, dynamic_outputs;
  for (size_t j = 0; j < reads.size(); ++j) {
    if (HasStaticShape(graph.value(reads[j]))) {
      KILN_ASSIGN_OR_RETURN(int32_t b, L.Materialize(operands[j]));
      call.inputs.push_back(b);
    } else {
      // Values of data-dependent shape are owned by the call producing them.
      KILN_ASSIGN_OR_RETURN(int32_t b, L.BufferOf(reads[j]));
      dynamic_inputs.push_back(static_cast<int64_t>(call.inputs.size()));
      call.inputs.push_back(b);
    }
  }
  for (int i = 0; i < static_cast<int>(n.outputs.size()); ++i) {
    if (!L.HasOutput(i)) continue;
    const int32_t b = L.OutputBuffer(i);
    const ir::Value& v = L.OutputValue(i);
    if (!HasStaticShape(v)) {
      ir::loop::Buffer& buf = L.program().buffers[b];
      buf.shape = PlaceholderShape(v);
      buf.strides =
          ir::loop::CheckedRowMajorStrides(buf.shape).value_or(std::vector<int64_t>());
      dynamic_outputs.push_back(static_cast<int64_t>(call.outputs.size()));
    }
    call.outputs.push_back(b);
  }
  call.attrs[ir::loop::kAttrReferenceGraph] = ir::PrintGraph(g, ir::PrintOptions::Full());
  call.attrs[ir::loop::kAttrReferenceOp] = n.domain.empty() ? n.op : absl::StrCat(n.domain, ".", n.op);
  call.attrs[ir::loop::kAttrFallbackReason] = std::string(refusal.message());
  call.attrs[ir::loop::kAttrOpset] = L.opset();
  if (!dynamic_inputs.empty()) call.attrs[ir::loop::kAttrDynamicInputs] = dynamic_inputs;
  if (!dynamic_outputs.empty()) call.attrs[ir::loop::kAttrDynamicOutputs] = dynamic_outputs;

  ir::loop::Kernel k;
  k.name = L.NewKernelName(n.op);
  k.description = absl::StrCat("reference ", n.op);
  k.kind = ir::loop::Kernel::Kind::kExtern;
  k.call = std::move(call);
  k.ops.push_back(L.NodeLabel());
  L.program().kernels.push_back(std::move(k));
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace kiln::lowering
