// The graph verifier: structural invariants of ir::Graph (see verifier.h).
#include "ir/graph/verifier.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::ir {
namespace {

// Where a value is defined: before all nodes (input, constant, capture) or
// by node `node`.
struct Definition {
  enum Kind { kNone, kInput, kConstant, kCapture, kNodeOutput } kind = kNone;
  int index = 0;  // input / capture / node index
  int slot = 0;   // output slot of the node
  int node() const { return kind == kNodeOutput ? index : -1; }
};

std::string DescribeDefinition(const Definition& d) {
  switch (d.kind) {
    case Definition::kInput: return absl::StrCat("graph input ", d.index);
    case Definition::kConstant: return "a constant";
    case Definition::kCapture: return absl::StrCat("capture ", d.index);
    case Definition::kNodeOutput:
      return absl::StrCat("output ", d.slot, " of node ", d.index);
    case Definition::kNone: break;
  }
  return "nothing";
}

// One graph being verified, linked to the enclosing graph and the node whose
// attribute holds it, so captures can be resolved by name.
struct Scope {
  const Graph* graph;
  std::vector<Definition> defs;
  absl::flat_hash_map<std::string, ValueId> by_name;  // defined values only
  const Scope* parent = nullptr;
  int parent_node = -1;  // the enclosing graph's node holding this graph
  std::string path;      // "graph 'main' node 2 'if0' (If) attribute 'then'"

  // Whether `name` is defined before node `node` here, or visible at the
  // enclosing node in an enclosing scope.
  bool Visible(const std::string& name, int node) const {
    auto it = by_name.find(name);
    if (it != by_name.end() && defs[it->second].node() < node) return true;
    return parent != nullptr && parent->Visible(name, parent_node);
  }
};

class Verifier {
 public:
  explicit Verifier(Blame blame) : blame_(blame) {}

  absl::Status Verify(const Graph& g, const Scope* parent, int parent_node,
                      const std::string& path_prefix) {
    Scope s;
    s.graph = &g;
    s.parent = parent;
    s.parent_node = parent_node;
    s.path = absl::StrCat(path_prefix, "graph '", EscapeForMessage(g.name()),
                          "'");
    s.defs.resize(std::max(g.num_values(), 0));
    KILN_RETURN_IF_ERROR(CheckIdsAndDefine(s));
    KILN_RETURN_IF_ERROR(CheckNames(s));
    KILN_RETURN_IF_ERROR(CheckConstants(s));
    KILN_RETURN_IF_ERROR(CheckCaptures(s));
    KILN_RETURN_IF_ERROR(CheckNodes(s));
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const ValueId id = g.outputs()[i];
      if (!InRange(g, id)) {
        return Error(s.path, ": graph output ", i, " has invalid value id ",
                     id);
      }
      if (s.defs[id].kind == Definition::kNone) {
        return Error(s.path, ": graph output ", i, " ", Name(g, id),
                     " is never defined");
      }
    }
    return absl::OkStatus();
  }

 private:
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    if (blame_ == Blame::kKiln) {
      return kiln::InternalError("graph verifier: ", args...);
    }
    return absl::InvalidArgumentError(absl::StrCat("invalid graph: ", args...));
  }

  static bool InRange(const Graph& g, ValueId id) {
    return id >= 0 && id < g.num_values();
  }
  static std::string Name(const Graph& g, ValueId id) {
    return absl::StrCat("'", EscapeForMessage(g.value(id).name), "' (#", id,
                        ")");
  }
  static std::string NodeText(const Scope& s, int n) {
    const Node& node = s.graph->nodes()[n];
    return absl::StrCat(s.path, ": node ", n, " '",
                        EscapeForMessage(node.name), "' (",
                        EscapeForMessage(node.domain),
                        node.domain.empty() ? "" : ".",
                        EscapeForMessage(node.op), ")");
  }

  // `where` is the error location, built only on failure.
  template <typename Where>
  absl::Status Define(Scope& s, ValueId id, Definition def, Where where) {
    Definition& d = s.defs[id];
    if (d.kind != Definition::kNone) {
      return Error(where(), ": value ", Name(*s.graph, id),
                   " is defined twice: as ", DescribeDefinition(d), " and as ",
                   DescribeDefinition(def));
    }
    d = def;
    return absl::OkStatus();
  }

  // Ranges of every id, then the single definition of each value.
  absl::Status CheckIdsAndDefine(Scope& s) {
    const Graph& g = *s.graph;
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const ValueId id = g.inputs()[i];
      if (!InRange(g, id)) {
        return Error(s.path, ": graph input ", i, " has invalid value id ",
                     id);
      }
      KILN_RETURN_IF_ERROR(Define(
          s, id, {Definition::kInput, static_cast<int>(i), 0},
          [&] { return s.path; }));
    }
    std::vector<ValueId> constants;
    for (const auto& [id, tensor] : g.constants()) constants.push_back(id);
    std::sort(constants.begin(), constants.end());
    for (ValueId id : constants) {
      if (!InRange(g, id)) {
        return Error(s.path, ": a constant has invalid value id ", id);
      }
      KILN_RETURN_IF_ERROR(
          Define(s, id, {Definition::kConstant, 0, 0}, [&] { return s.path; }));
    }
    for (size_t i = 0; i < g.captures().size(); ++i) {
      const ValueId id = g.captures()[i].inner;
      if (!InRange(g, id)) {
        return Error(s.path, ": capture ", i, " has invalid value id ", id);
      }
      KILN_RETURN_IF_ERROR(Define(
          s, id, {Definition::kCapture, static_cast<int>(i), 0},
          [&] { return s.path; }));
    }
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      const Node& node = g.nodes()[n];
      const int ni = static_cast<int>(n);
      if (node.op.empty()) return Error(NodeText(s, ni), ": empty op name");
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const ValueId id = node.inputs[i];
        if (id != kNoValue && !InRange(g, id)) {
          return Error(NodeText(s, ni), ": input ", i, " has invalid value id ",
                       id);
        }
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        const ValueId id = node.outputs[i];
        if (id == kNoValue) continue;
        if (!InRange(g, id)) {
          return Error(NodeText(s, ni), ": output ", i,
                       " has invalid value id ", id);
        }
        KILN_RETURN_IF_ERROR(Define(
            s, id, {Definition::kNodeOutput, ni, static_cast<int>(i)},
            [&] { return NodeText(s, ni); }));
        if (g.value(id).dtype == DType::kInvalid) {
          return Error(NodeText(s, ni), ": output ", i, " ", Name(g, id),
                       " has no known dtype");
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckNames(Scope& s) {
    const Graph& g = *s.graph;
    for (ValueId id = 0; id < g.num_values(); ++id) {
      if (s.defs[id].kind == Definition::kNone) continue;
      const std::string& name = g.value(id).name;
      if (name.empty()) continue;
      auto [it, inserted] = s.by_name.emplace(name, id);
      if (!inserted) {
        return Error(s.path, ": values ", Name(g, it->second), " and ",
                     Name(g, id), " have the same name");
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckConstants(const Scope& s) {
    const Graph& g = *s.graph;
    std::vector<ValueId> constants;
    for (const auto& [id, tensor] : g.constants()) constants.push_back(id);
    std::sort(constants.begin(), constants.end());
    for (ValueId id : constants) {
      const Tensor* t = g.constant(id);
      const Value& v = g.value(id);
      if (t == nullptr) {
        return Error(s.path, ": constant ", Name(g, id), " has no data");
      }
      if (t->dtype() == DType::kInvalid || t->dtype() != v.dtype ||
          !v.shape_known || t->shape() != v.shape) {
        return Error(s.path, ": constant ", Name(g, id), " holds ",
                     t->TypeString(), " but the value is declared ",
                     DTypeName(v.dtype),
                     v.shape_known ? ShapeToString(v.shape) : "[*]");
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckCaptures(const Scope& s) {
    const Graph& g = *s.graph;
    for (size_t i = 0; i < g.captures().size(); ++i) {
      const Graph::Capture& c = g.captures()[i];
      if (s.parent == nullptr) {
        return Error(s.path, ": capture ", i, " ", Name(g, c.inner),
                     " reads '", EscapeForMessage(c.outer_name),
                     "' but the graph has no enclosing graph");
      }
      if (!s.parent->Visible(c.outer_name, s.parent_node)) {
        return Error(s.path, ": capture ", i, " ", Name(g, c.inner),
                     " reads '", EscapeForMessage(c.outer_name),
                     "', which no enclosing graph defines before node ",
                     s.parent_node);
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckNodes(const Scope& s) {
    const Graph& g = *s.graph;
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      const Node& node = g.nodes()[n];
      const int ni = static_cast<int>(n);
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const ValueId id = node.inputs[i];
        if (id == kNoValue) continue;
        const Definition& d = s.defs[id];
        if (d.kind == Definition::kNone) {
          return Error(NodeText(s, ni), ": input ", i, " ", Name(g, id),
                       " is never defined");
        }
        if (d.node() >= ni) {
          return Error(NodeText(s, ni), ": input ", i, " ", Name(g, id),
                       " is used before it is defined (by node ", d.index,
                       "): nodes are not in topological order");
        }
      }
      for (const auto& [key, attr] : node.attrs) {
        const auto* sub = std::get_if<std::shared_ptr<const Graph>>(&attr);
        if (sub == nullptr) continue;
        const std::string where = absl::StrCat(
            NodeText(s, ni), " attribute '", EscapeForMessage(key), "'");
        if (*sub == nullptr) return Error(where, ": null subgraph");
        KILN_RETURN_IF_ERROR(Verify(**sub, &s, ni, where + ": "));
      }
    }
    return absl::OkStatus();
  }

  Blame blame_;
};

}  // namespace

absl::Status VerifyGraph(const Graph& graph, Blame blame) {
  // Names are the model's: each is escaped and capped where it is quoted,
  // and the message's line is capped here, as ParseGraph's is.
  return SanitizedStatus(Verifier(blame).Verify(graph, nullptr, -1, ""),
                         /*keep_line_breaks=*/false);
}

}  // namespace kiln::ir
