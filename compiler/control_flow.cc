// File: compiler/control_flow.cc — an If's branches as graphs of their own
// (compiler/control_flow.h).
#include "compiler/control_flow.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"

namespace kiln::compiler {
namespace {

using ir::loop::Kernel;

// `branch` with its captures turned into inputs; `outer_position` maps an
// outer name to the call input it arrives as.
absl::StatusOr<IfBranch> Standalone(const ir::Graph& branch, const Kernel& kernel,
                                    const absl::flat_hash_map<std::string, int>& outer_position) {
  if (!branch.inputs().empty()) {
    return absl::UnimplementedError(
        absl::StrCat("If '", kernel.name, "': branch '", branch.name(), "' takes inputs"));
  }
  IfBranch out;
  ir::Graph& g = out.graph;
  g.set_name(branch.name());
  g.set_opset(branch.opset());
  for (ir::ValueId v = 0; v < branch.num_values(); ++v) {
    const ir::Value& value = branch.value(v);
    const ir::ValueId id = value.shape_known ? g.AddValue(value.name, value.dtype, value.shape)
                                             : g.AddUnshapedValue(value.name, value.dtype);
    KILN_RET_CHECK(id == v);
  }
  for (const auto& [id, tensor] : branch.constants()) g.SetConstant(id, tensor);
  for (const ir::Node& n : branch.nodes()) {
    ir::Node& copy = g.AddNode(n.op, n.inputs, n.outputs, n.attrs, n.name);
    copy.domain = n.domain;
  }
  for (ir::ValueId o : branch.outputs()) g.AddOutput(o);
  for (const ir::Graph::Capture& c : branch.captures()) {
    auto it = outer_position.find(c.outer_name);
    if (it == outer_position.end()) {
      return InternalError("If '", kernel.name, "': captured value '", c.outer_name,
                           "' is not an input of its call");
    }
    g.AddInput(c.inner);
    out.buffers.push_back(kernel.call.inputs[it->second]);
  }
  return out;
}

}  // namespace

absl::StatusOr<IfBranches> ExtractIfBranches(const ir::loop::LoopProgram& program,
                                             const Kernel& kernel) {
  (void)program;
  if (!ir::loop::IsReferenceCall(kernel)) {
    return absl::UnimplementedError(absl::StrCat("'", kernel.name, "' is not a reference call"));
  }
  auto op = kernel.call.attrs.find(ir::loop::kAttrReferenceOp);
  if (op == kernel.call.attrs.end() || !std::holds_alternative<std::string>(op->second) ||
      std::get<std::string>(op->second) != "If") {
    return absl::UnimplementedError(absl::StrCat("'", kernel.name, "' is not an If"));
  }
  auto text = kernel.call.attrs.find(ir::loop::kAttrReferenceGraph);
  if (text == kernel.call.attrs.end() || !std::holds_alternative<std::string>(text->second)) {
    return InternalError("reference call '", kernel.name, "' carries no graph");
  }
  KILN_ASSIGN_OR_RETURN(ir::Graph call, ir::ParseGraph(std::get<std::string>(text->second)));
  if (call.nodes().size() != 1 || call.inputs().size() != kernel.call.inputs.size()) {
    return InternalError("reference call '", kernel.name, "' does not match its graph");
  }
  absl::flat_hash_map<std::string, int> outer_position;
  for (size_t i = 0; i < call.inputs().size(); ++i) {
    outer_position.emplace(call.value(call.inputs()[i]).name, static_cast<int>(i));
  }
  const ir::Node& node = call.nodes()[0];
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ir::Graph> then_graph,
                        node.Attr<std::shared_ptr<const ir::Graph>>("then_branch"));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ir::Graph> else_graph,
                        node.Attr<std::shared_ptr<const ir::Graph>>("else_branch"));
  IfBranches out;
  KILN_ASSIGN_OR_RETURN(out.then_branch, Standalone(*then_graph, kernel, outer_position));
  KILN_ASSIGN_OR_RETURN(out.else_branch, Standalone(*else_graph, kernel, outer_position));
  return out;
}

}  // namespace kiln::compiler
