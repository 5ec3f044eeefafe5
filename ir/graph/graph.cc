// Graph construction and lookup.
#include "ir/graph/graph.h"

#include "ir/message.h"

namespace kiln::ir {

int Node::num_present_inputs() const {
  int n = static_cast<int>(inputs.size());
  while (n > 0 && inputs[n - 1] == kNoValue) --n;
  return n;
}

std::string Node::Describe() const {
  return absl::StrCat("node '", EscapeForMessage(name), "' (",
                      domain.empty() ? "" : EscapeForMessage(domain), domain.empty() ? "" : ".",
                      EscapeForMessage(op), ")");
}

ValueId Graph::AddValue(std::string name, DType dtype, Shape shape) {
  ValueId id = static_cast<ValueId>(values_.size());
  by_name_.emplace(name, id);
  values_.push_back(Value{std::move(name), dtype, std::move(shape), true});
  return id;
}

ValueId Graph::AddUnshapedValue(std::string name, DType dtype) {
  ValueId id = AddValue(std::move(name), dtype, {});
  values_[id].shape_known = false;
  return id;
}

std::optional<ValueId> Graph::FindValue(absl::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

void Graph::SetConstant(ValueId id, std::shared_ptr<const Tensor> data) {
  constants_[id] = std::move(data);
}

const Tensor* Graph::constant(ValueId id) const {
  auto it = constants_.find(id);
  return it == constants_.end() ? nullptr : it->second.get();
}

std::shared_ptr<const Tensor> Graph::shared_constant(ValueId id) const {
  auto it = constants_.find(id);
  return it == constants_.end() ? nullptr : it->second;
}

Node& Graph::AddNode(std::string op, std::vector<ValueId> inputs,
                     std::vector<ValueId> outputs, AttributeMap attrs,
                     std::string name) {
  nodes_.push_back(Node{std::move(name), std::move(op), "", std::move(inputs),
                        std::move(outputs), std::move(attrs)});
  return nodes_.back();
}

}  // namespace kiln::ir
