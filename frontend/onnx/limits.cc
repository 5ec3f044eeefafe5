// File: frontend/onnx/limits.cc — one walk over a parsed model checking the
// structural limits of limits.h.
#include "frontend/onnx/limits.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/message.h"

namespace kiln::frontend {
namespace {

class LimitChecker {
 public:
  explicit LimitChecker(const ModelLimits& limits) : limits_(limits) {}

  absl::Status Graph(const onnx::GraphProto& g, int depth, const std::string& where) {
    const std::string in_graph = absl::StrCat("graph '", Name(g.name()), "'", where);
    if (absl::Status s = CheckName(g.name(), "the graph's name", where); !s.ok()) return s;
    if (depth == 0 && g.output_size() > limits_.max_graph_outputs) {
      return Exceeded(absl::StrCat(in_graph, " has ", g.output_size(), " outputs"), "graph outputs",
                      limits_.max_graph_outputs);
    }
    for (const auto* infos : {&g.input(), &g.output(), &g.value_info()}) {
      for (const onnx::ValueInfoProto& v : *infos) {
        const std::string what = absl::StrCat("value '", Name(v.name()), "' of ", in_graph);
        if (absl::Status s = CheckName(v.name(), "a value's name", in_graph); !s.ok()) return s;
        if (absl::Status s = Type(v.type(), what); !s.ok()) return s;
      }
    }
    for (const onnx::TensorProto& t : g.initializer()) {
      const std::string what = absl::StrCat("initializer '", Name(t.name()), "' of ", in_graph);
      if (absl::Status s = CheckName(t.name(), "an initializer's name", in_graph); !s.ok()) {
        return s;
      }
      if (absl::Status s = Dims(t.dims(), what); !s.ok()) return s;
    }
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      const std::string node = absl::StrCat("node #", i, " '", Name(n.name()), "' (",
                                            Name(n.op_type()), ") of ", in_graph);
      if (++nodes_ > limits_.max_nodes) {
        return Exceeded(absl::StrCat("the model has more nodes; the next is ", node), "nodes",
                        limits_.max_nodes);
      }
      for (const std::string* text : {&n.name(), &n.op_type(), &n.domain()}) {
        if (absl::Status s = CheckName(*text, "a node's name, op type or domain", node); !s.ok()) {
          return s;
        }
      }
      for (const auto* names : {&n.input(), &n.output()}) {
        for (const std::string& name : *names) {
          if (absl::Status s = CheckName(name, "a value's name", node); !s.ok()) return s;
        }
      }
      for (const onnx::AttributeProto& a : n.attribute()) {
        if (absl::Status s = CheckName(a.name(), "an attribute's name", node); !s.ok()) return s;
        const std::string sub_where = absl::StrCat(" in subgraph '", Name(a.name()), "' of ", node);
        if ((a.has_g() || a.graphs_size() > 0) && depth + 1 > limits_.max_subgraph_depth) {
          return Exceeded(
              absl::StrCat("subgraph '", Name(a.name()), "' of ", node, " is at depth ", depth + 1),
              "subgraph nesting depth", limits_.max_subgraph_depth);
        }
        if (a.has_g()) {
          if (absl::Status s = Graph(a.g(), depth + 1, sub_where); !s.ok()) return s;
        }
        for (const onnx::GraphProto& sub : a.graphs()) {
          if (absl::Status s = Graph(sub, depth + 1, sub_where); !s.ok()) return s;
        }
        if (a.has_t()) {
          if (absl::Status s =
                  Dims(a.t().dims(), absl::StrCat("attribute '", Name(a.name()), "' of ", node));
              !s.ok()) {
            return s;
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  static std::string Name(const std::string& text) { return EscapeForMessage(text, 64); }

  static absl::Status Exceeded(const std::string& what, const char* limit, int64_t max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": over kiln's limit of ", max, " ", limit));
  }

  absl::Status CheckName(const std::string& name, const char* which, const std::string& where) {
    if (static_cast<int64_t>(name.size()) <= limits_.max_name_bytes) return absl::OkStatus();
    return Exceeded(
        absl::StrCat(which, " '", Name(name), "' of ", where, " has ", name.size(), " bytes"),
        "bytes per name", limits_.max_name_bytes);
  }

  template <typename DimList>
  absl::Status Dims(const DimList& dims, const std::string& what) {
    if (dims.size() > limits_.max_rank) {
      return Exceeded(absl::StrCat(what, " has rank ", dims.size()), "dims (rank)",
                      limits_.max_rank);
    }
    for (int i = 0; i < dims.size(); ++i) {
      if (dims[i] > limits_.max_dim) {
        return Exceeded(absl::StrCat(what, ": dim ", i, " is ", dims[i]), "elements per dim",
                        limits_.max_dim);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Type(const onnx::TypeProto& type, const std::string& what) {
    switch (type.value_case()) {
      case onnx::TypeProto::kTensorType: {
        if (!type.tensor_type().has_shape()) return absl::OkStatus();
        const onnx::TensorShapeProto& shape = type.tensor_type().shape();
        std::vector<int64_t> dims;
        if (shape.dim_size() > limits_.max_rank) {
          return Exceeded(absl::StrCat(what, " has rank ", shape.dim_size()), "dims (rank)",
                          limits_.max_rank);
        }
        for (const onnx::TensorShapeProto::Dimension& d : shape.dim()) {
          if (absl::Status s = CheckName(d.dim_param(), "a dim's symbol", what); !s.ok()) {
            return s;
          }
          dims.push_back(d.has_dim_value() ? d.dim_value() : 0);
        }
        return Dims(dims, what);
      }
      case onnx::TypeProto::kSequenceType:
        return Type(type.sequence_type().elem_type(), what);
      case onnx::TypeProto::kOptionalType:
        return Type(type.optional_type().elem_type(), what);
      default:
        return absl::OkStatus();
    }
  }

  const ModelLimits& limits_;
  int64_t nodes_ = 0;
};

}  // namespace

absl::Status CheckModelLimits(const onnx::ModelProto& model, const ModelLimits& limits) {
  return LimitChecker(limits).Graph(model.graph(), 0, "");
}

}  // namespace kiln::frontend
