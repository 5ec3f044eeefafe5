// File: ir/graph/graph.h — kiln's graph IR: typed values, nodes (an ONNX-style
// op with typed attributes) and constants. The ONNX frontend produces it, the
// graph passes rewrite it, the reference interpreter runs it.
//
//   Graph g("main");
//   ValueId x = g.AddValue("x", DType::kF32, {1, 8});
//   g.AddInput(x);
//   ValueId y = g.AddValue("y", DType::kF32, {1, 8});
//   g.AddNode("Relu", {x}, {y});
//   g.AddOutput(y);
//
// Values are single-assignment: produced by one node, or a graph input, or a
// constant, or a capture from an enclosing graph (subgraphs of If).
#ifndef KILN_IR_GRAPH_GRAPH_H_
#define KILN_IR_GRAPH_GRAPH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"

namespace kiln::ir {

class Graph;

using ValueId = int32_t;
// An omitted optional input or output of a node.
inline constexpr ValueId kNoValue = -1;

// One attribute value. Each ONNX attribute type maps to exactly one
// alternative (INT -> int64_t, FLOATS -> vector<float>, GRAPH -> Graph, ...).
using AttrValue =
    std::variant<int64_t, float, std::string, std::vector<int64_t>,
                 std::vector<float>, std::vector<std::string>, Tensor,
                 std::shared_ptr<const Graph>>;
// Ordered, so printing is deterministic.
using AttributeMap = std::map<std::string, AttrValue, std::less<>>;

struct Value {
  std::string name;  // the model's name: arbitrary text, unique in a graph
  DType dtype = DType::kInvalid;
  Shape shape;       // dims may be kDynamicDim (data-dependent)
  bool shape_known = true;  // false: even the rank is unknown
};

// An attribute the importer adds to an If for a branch that shape
// inference finds cannot run with the model's bound input shapes: this
// prefix and the branch attribute's name ("kiln_unfit_else_branch"); its
// value (a string) says why. The compiler leaves such a branch uncompiled
// (decision 0053).
inline constexpr char kAttrUnfitBranchPrefix[] = "kiln_unfit_";

struct Node {
  std::string name;    // the model's node name; may be empty
  std::string op;      // op type, e.g. "Conv"
  std::string domain;  // "" is the default ONNX domain
  std::vector<ValueId> inputs;   // kNoValue for an omitted optional input
  std::vector<ValueId> outputs;  // kNoValue for an omitted optional output
  AttributeMap attrs;

  bool HasAttr(absl::string_view key) const {
    return attrs.find(key) != attrs.end();
  }
  // The attribute as T, InvalidArgument if absent or of another type.
  template <typename T>
  absl::StatusOr<T> Attr(absl::string_view key) const {
    auto it = attrs.find(key);
    if (it == attrs.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Describe(), ": missing required attribute '", key, "'"));
    }
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(), ": attribute '", key, "' has the wrong type"));
  }
  // The attribute as T, `fallback` if absent, InvalidArgument if of another
  // type.
  template <typename T>
  absl::StatusOr<T> AttrOr(absl::string_view key, T fallback) const {
    if (!HasAttr(key)) return fallback;
    return Attr<T>(key);
  }
  // Number of inputs present, counting trailing omitted ones as absent.
  int num_present_inputs() const;
  bool has_input(int i) const {
    return i < static_cast<int>(inputs.size()) && inputs[i] != kNoValue;
  }
  // "node 'conv1' (Conv)": how errors name a node.
  std::string Describe() const;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Default-domain opset the graph was written against (op semantics differ
  // across versions, e.g. Softmax before 13 flattens to 2-D).
  int64_t opset() const { return opset_; }
  void set_opset(int64_t v) { opset_ = v; }

  // ---- Values.
  ValueId AddValue(std::string name, DType dtype, Shape shape);
  // A value whose rank is not known.
  ValueId AddUnshapedValue(std::string name, DType dtype);
  int num_values() const { return static_cast<int>(values_.size()); }
  const Value& value(ValueId id) const { return values_[id]; }
  Value& mutable_value(ValueId id) { return values_[id]; }
  // The value of that name, if any.
  std::optional<ValueId> FindValue(absl::string_view name) const;

  // ---- Constants (initializers and folded Constant nodes).
  void SetConstant(ValueId id, std::shared_ptr<const Tensor> data);
  void SetConstant(ValueId id, Tensor data) {
    SetConstant(id, std::make_shared<const Tensor>(std::move(data)));
  }
  bool IsConstant(ValueId id) const { return constants_.contains(id); }
  // nullptr if `id` is not a constant.
  const Tensor* constant(ValueId id) const;
  std::shared_ptr<const Tensor> shared_constant(ValueId id) const;
  const absl::flat_hash_map<ValueId, std::shared_ptr<const Tensor>>&
  constants() const {
    return constants_;
  }
  void RemoveConstant(ValueId id) { constants_.erase(id); }

  // ---- Nodes, in topological order once imported.
  Node& AddNode(std::string op, std::vector<ValueId> inputs,
                std::vector<ValueId> outputs, AttributeMap attrs = {},
                std::string name = "");
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }

  // ---- Graph interface.
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& mutable_inputs() { return inputs_; }
  std::vector<ValueId>& mutable_outputs() { return outputs_; }
  void AddInput(ValueId id) { inputs_.push_back(id); }
  void AddOutput(ValueId id) { outputs_.push_back(id); }

  // A subgraph (If branch) reads values of its enclosing graph through
  // captures: `inner` is this graph's value, `outer_name` the enclosing
  // graph's value name it is bound to at run time.
  struct Capture {
    ValueId inner;
    std::string outer_name;
  };
  const std::vector<Capture>& captures() const { return captures_; }
  void AddCapture(ValueId inner, std::string outer_name) {
    captures_.push_back({inner, std::move(outer_name)});
  }

 private:
  std::string name_;
  int64_t opset_ = 18;
  std::vector<Value> values_;
  absl::flat_hash_map<std::string, ValueId> by_name_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<Capture> captures_;
  absl::flat_hash_map<ValueId, std::shared_ptr<const Tensor>> constants_;
};

}  // namespace kiln::ir

#endif  // KILN_IR_GRAPH_GRAPH_H_
