// GraphProto -> ir::Graph: topological sort, constants, attributes,
// subgraphs with captures.
#include "frontend/onnx/graph_importer.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/onnx/tensor_proto.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::frontend::onnx_internal {
namespace {

using ir::DType;
using ir::ValueId;
using AP = onnx::AttributeProto;

struct TypeInfo {
  DType dtype = DType::kInvalid;
  ir::Shape shape;
  bool shape_known = false;
  bool is_tensor = false;
};

// Non-tensor types (sequence, map, optional) come back untyped and unshaped:
// kiln leaves them to the ops that produce and consume them.
absl::StatusOr<TypeInfo> TypeFromProto(const onnx::TypeProto& type,
                                       absl::string_view what) {
  TypeInfo info;
  if (!type.has_tensor_type()) return info;
  info.is_tensor = true;
  const onnx::TypeProto::Tensor& tt = type.tensor_type();
  if (tt.elem_type() != onnx::TensorProto::UNDEFINED) {
    KILN_ASSIGN_OR_RETURN(info.dtype, DTypeFromOnnx(tt.elem_type(), what));
  }
  if (tt.has_shape()) {
    info.shape_known = true;
    for (const onnx::TensorShapeProto::Dimension& d : tt.shape().dim()) {
      info.shape.push_back(d.has_dim_value() && d.dim_value() >= 0
                               ? d.dim_value()
                               : ir::kDynamicDim);
    }
  }
  return info;
}

// A top-level graph input must be a tensor of a known element type.
absl::Status CheckInputType(const onnx::ValueInfoProto& in, absl::string_view what) {
  if (!in.has_type()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has no type (a graph input must declare one)"));
  }
  if (!in.type().has_tensor_type()) {
    return absl::UnimplementedError(absl::StrCat(
        what, " is not a tensor (sequence, map and optional inputs are "
        "not supported)"));
  }
  return DTypeFromOnnx(in.type().tensor_type().elem_type(), what).status();
}

std::string AttrTypeName(int type) {
  if (!AP::AttributeType_IsValid(type)) return absl::StrCat("type ", type);
  return AP::AttributeType_Name(static_cast<AP::AttributeType>(type));
}

bool IsListType(int type) {
  return type == AP::FLOATS || type == AP::INTS || type == AP::STRINGS ||
         type == AP::TENSORS || type == AP::GRAPHS ||
         type == AP::SPARSE_TENSORS || type == AP::TYPE_PROTOS;
}

// The payload kinds an attribute actually carries.
std::vector<int> PresentPayloads(const AP& a) {
  std::vector<int> p;
  if (a.has_f()) p.push_back(AP::FLOAT);
  if (a.has_i()) p.push_back(AP::INT);
  if (a.has_s()) p.push_back(AP::STRING);
  if (a.has_t()) p.push_back(AP::TENSOR);
  if (a.has_g()) p.push_back(AP::GRAPH);
  if (a.has_sparse_tensor()) p.push_back(AP::SPARSE_TENSOR);
  if (a.has_tp()) p.push_back(AP::TYPE_PROTO);
  if (a.floats_size() > 0) p.push_back(AP::FLOATS);
  if (a.ints_size() > 0) p.push_back(AP::INTS);
  if (a.strings_size() > 0) p.push_back(AP::STRINGS);
  if (a.tensors_size() > 0) p.push_back(AP::TENSORS);
  if (a.graphs_size() > 0) p.push_back(AP::GRAPHS);
  if (a.sparse_tensors_size() > 0) p.push_back(AP::SPARSE_TENSORS);
  if (a.type_protos_size() > 0) p.push_back(AP::TYPE_PROTOS);
  return p;
}

void CollectOuterNames(const onnx::GraphProto& g,
                       std::vector<std::string>* out) {
  absl::flat_hash_set<std::string> defined;
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node()) {
    for (const std::string& o : n.output()) defined.insert(o);
  }
  absl::flat_hash_set<std::string> seen;
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.contains(name) && seen.insert(name).second) {
      out->push_back(name);
    }
  };
  for (const auto& n : g.node()) {
    for (const std::string& in : n.input()) use(in);
    for (const AP& a : n.attribute()) {
      std::vector<std::string> inner;
      if (a.has_g()) CollectOuterNames(a.g(), &inner);
      for (const auto& sub : a.graphs()) CollectOuterNames(sub, &inner);
      for (const std::string& name : inner) use(name);
    }
  }
  for (const auto& v : g.output()) use(v.name());
}

class GraphImporter {
 public:
  // `where` is appended to node descriptions in errors (empty for the
  // top-level graph).
  GraphImporter(const onnx::GraphProto& proto,
                const GraphImportOptions& options, GraphImporter* parent,
                std::string where)
      : proto_(proto),
        options_(options),
        parent_(parent),
        where_(std::move(where)),
        graph_(proto.name().empty() ? "main" : proto.name()) {
    graph_.set_opset(options.opset);
  }

  absl::Status Run() {
    if (proto_.sparse_initializer_size() > 0) {
      return absl::UnimplementedError(absl::StrCat(
          "graph '", proto_.name(), "'", where_,
          ": sparse initializers are not supported"));
    }
    for (const auto& v : proto_.value_info()) declared_[v.name()] = &v.type();
    for (const auto& v : proto_.output()) declared_[v.name()] = &v.type();
    for (const auto& v : proto_.input()) declared_[v.name()] = &v.type();
    KILN_RETURN_IF_ERROR(ImportInitializers());
    KILN_RETURN_IF_ERROR(ImportInputs());
    for (int i = 0; i < proto_.node_size(); ++i) {
      KILN_RETURN_IF_ERROR(ImportNode(i));
    }
    return ImportOutputs();
  }

  ir::Graph TakeGraph() { return std::move(graph_); }

 private:
  // Names the node by its position in the file, not in the sorted graph.
  std::string Describe(int index) const {
    const onnx::NodeProto& node = proto_.node(index);
    if (options_.file_index != nullptr) {
      auto it = options_.file_index->find(&node);
      if (it != options_.file_index->end()) index = it->second;
    }
    return absl::StrCat(DescribeNode(node, index), where_);
  }

  // The value `name` in this graph, capturing it from the enclosing graphs
  // (through every level in between) if this graph does not define it.
  std::optional<ValueId> Resolve(const std::string& name) {
    if (std::optional<ValueId> id = graph_.FindValue(name)) return id;
    if (parent_ == nullptr) return std::nullopt;
    std::optional<ValueId> outer = parent_->Resolve(name);
    if (!outer.has_value()) return std::nullopt;
    const ir::Value& v = parent_->graph_.value(*outer);
    ValueId inner = graph_.AddValue(name, v.dtype, v.shape);
    graph_.mutable_value(inner).shape_known = v.shape_known;
    graph_.AddCapture(inner, name);
    return inner;
  }

  absl::StatusOr<TypeInfo> DeclaredType(const std::string& name,
                                        absl::string_view what) const {
    auto it = declared_.find(name);
    if (it == declared_.end()) return TypeInfo{};
    return TypeFromProto(*it->second, what);
  }

  // A new value typed from the graph's declarations (value_info, inputs,
  // outputs, including what ONNX shape inference added).
  absl::StatusOr<ValueId> AddDeclaredValue(const std::string& name,
                                           const std::string& what) {
    KILN_ASSIGN_OR_RETURN(TypeInfo t, DeclaredType(name, what));
    const bool is_static =
        std::find(t.shape.begin(), t.shape.end(), ir::kDynamicDim) ==
        t.shape.end();
    if (t.shape_known && is_static && t.dtype != DType::kInvalid) {
      KILN_RETURN_IF_ERROR(
          CheckedByteSize(t.shape, t.dtype, options_.max_tensor_bytes, what)
              .status());
    }
    if (!t.shape_known) return graph_.AddUnshapedValue(name, t.dtype);
    return graph_.AddValue(name, t.dtype, t.shape);
  }

  // A constant must agree with any type the graph declares for its name.
  absl::Status CheckAgainstDeclared(const std::string& name,
                                    const ir::Tensor& t,
                                    const std::string& what) const {
    KILN_ASSIGN_OR_RETURN(TypeInfo decl, DeclaredType(name, what));
    if (decl.dtype != DType::kInvalid && decl.dtype != t.dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " is ", ir::DTypeName(t.dtype()),
                       " but its declared type is ", ir::DTypeName(decl.dtype)));
    }
    if (!decl.shape_known) return absl::OkStatus();
    bool ok = decl.shape.size() == t.shape().size();
    for (size_t i = 0; ok && i < decl.shape.size(); ++i) {
      ok = decl.shape[i] == ir::kDynamicDim || decl.shape[i] == t.shape()[i];
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has shape ", ir::ShapeToString(t.shape()),
          " but its declared shape is ", ir::ShapeToString(decl.shape)));
    }
    return absl::OkStatus();
  }

  absl::Status AddConstant(const std::string& name, ir::Tensor t,
                           const std::string& what) {
    KILN_RETURN_IF_ERROR(CheckAgainstDeclared(name, t, what));
    ValueId id = graph_.AddValue(name, t.dtype(), t.shape());
    graph_.SetConstant(id, std::move(t));
    return absl::OkStatus();
  }
  absl::Status AddConstant(const std::string& name,
                           std::shared_ptr<const ir::Tensor> t,
                           const std::string& what) {
    KILN_RETURN_IF_ERROR(CheckAgainstDeclared(name, *t, what));
    ValueId id = graph_.AddValue(name, t->dtype(), t->shape());
    graph_.SetConstant(id, std::move(t));
    return absl::OkStatus();
  }

  absl::Status ImportInitializers() {
    for (const onnx::TensorProto& init : proto_.initializer()) {
      const std::string what = absl::StrCat("initializer '", init.name(), "'",
                                            where_);
      if (init.name().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("an initializer", where_, " has no name"));
      }
      if (graph_.FindValue(init.name())) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " is defined twice"));
      }
      if (parent_ == nullptr && options_.detached != nullptr) {
        auto it = options_.detached->find(init.name());
        if (it != options_.detached->end()) {
          std::shared_ptr<const ir::Tensor> t = std::move(it->second);
          options_.detached->erase(it);
          KILN_RETURN_IF_ERROR(AddConstant(init.name(), std::move(t), what));
          continue;
        }
      }
      KILN_ASSIGN_OR_RETURN(
          ir::Tensor t, TensorFromProto(init, options_.max_tensor_bytes, what));
      KILN_RETURN_IF_ERROR(AddConstant(init.name(), std::move(t), what));
    }
    return absl::OkStatus();
  }

  // Inputs that are also initializers (IR < 4 style) are constants, not
  // inputs: kiln does not let callers override weights.
  absl::Status ImportInputs() {
    absl::flat_hash_set<std::string> initializers;
    for (const auto& t : proto_.initializer()) initializers.insert(t.name());
    absl::flat_hash_set<std::string> seen;
    for (const onnx::ValueInfoProto& in : proto_.input()) {
      const std::string what =
          absl::StrCat("graph input '", in.name(), "'", where_);
      if (in.name().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("a graph input", where_, " has no name"));
      }
      if (!seen.insert(in.name()).second) {
        return absl::InvalidArgumentError(absl::StrCat(what, " is listed twice"));
      }
      if (initializers.contains(in.name())) continue;
      if (parent_ == nullptr) KILN_RETURN_IF_ERROR(CheckInputType(in, what));
      KILN_ASSIGN_OR_RETURN(ValueId id, AddDeclaredValue(in.name(), what));
      graph_.AddInput(id);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ir::AttrValue> ConvertAttribute(const AP& a,
                                                 const std::string& node_desc) {
    const std::string what =
        absl::StrCat("attribute '", a.name(), "' of ", node_desc);
    if (!a.ref_attr_name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " refers to a function attribute ('", a.ref_attr_name(),
          "') outside a function"));
    }
    std::vector<int> present = PresentPayloads(a);
    int type = a.type();
    if (type == AP::UNDEFINED) {
      if (present.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " has no declared type and ", present.size(),
            " payloads"));
      }
      type = present[0];
    }
    for (int p : present) {
      if (p != type) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " is declared ", AttrTypeName(type),
                         " but carries a ", AttrTypeName(p), " value"));
      }
    }
    if (!IsListType(type) && present.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " is declared ", AttrTypeName(type), " but has no value"));
    }
    switch (type) {
      case AP::FLOAT: return ir::AttrValue(a.f());
      case AP::INT: return ir::AttrValue(static_cast<int64_t>(a.i()));
      case AP::STRING: return ir::AttrValue(a.s());
      case AP::FLOATS:
        return ir::AttrValue(std::vector<float>(a.floats().begin(),
                                                a.floats().end()));
      case AP::INTS:
        return ir::AttrValue(std::vector<int64_t>(a.ints().begin(),
                                                  a.ints().end()));
      case AP::STRINGS:
        return ir::AttrValue(std::vector<std::string>(a.strings().begin(),
                                                      a.strings().end()));
      case AP::TENSOR: {
        KILN_ASSIGN_OR_RETURN(
            ir::Tensor t,
            TensorFromProto(a.t(), options_.max_tensor_bytes, what));
        return ir::AttrValue(std::move(t));
      }
      case AP::GRAPH: {
        GraphImporter sub(a.g(), options_, this,
                          absl::StrCat(" in subgraph '", a.name(), "' of ",
                                       node_desc));
        KILN_RETURN_IF_ERROR(sub.Run());
        return ir::AttrValue(
            std::make_shared<const ir::Graph>(sub.TakeGraph()));
      }
      default:
        return absl::UnimplementedError(absl::StrCat(
            what, " has type ", AttrTypeName(type),
            ", which kiln does not support"));
    }
  }

  // Constant nodes become graph constants, not nodes.
  absl::Status FoldConstant(const onnx::NodeProto& node,
                            const std::string& desc) {
    if (node.input_size() != 0 || node.output_size() != 1 ||
        node.output(0).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          desc, ": Constant must have no inputs and exactly one output"));
    }
    if (node.attribute_size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(desc, ": Constant must have exactly one attribute, has ",
                       node.attribute_size()));
    }
    const AP& a = node.attribute(0);
    const std::string& key = a.name();
    if (key == "value_string" || key == "value_strings" ||
        key == "sparse_value") {
      return absl::UnimplementedError(absl::StrCat(
          desc, ": attribute '", key,
          "' is not supported (kiln has no string or sparse tensors)"));
    }
    KILN_ASSIGN_OR_RETURN(ir::AttrValue v, ConvertAttribute(a, desc));
    std::optional<ir::Tensor> t;
    if (key == "value" && std::holds_alternative<ir::Tensor>(v)) {
      t = std::move(std::get<ir::Tensor>(v));
    } else if (key == "value_float" && std::holds_alternative<float>(v)) {
      t = ir::Tensor::Scalar<float>(std::get<float>(v));
    } else if (key == "value_int" && std::holds_alternative<int64_t>(v)) {
      t = ir::Tensor::Scalar<int64_t>(std::get<int64_t>(v));
    } else if (key == "value_floats" &&
               std::holds_alternative<std::vector<float>>(v)) {
      const auto& f = std::get<std::vector<float>>(v);
      t = ir::Tensor::FromVector<float>({static_cast<int64_t>(f.size())}, f);
    } else if (key == "value_ints" &&
               std::holds_alternative<std::vector<int64_t>>(v)) {
      const auto& i = std::get<std::vector<int64_t>>(v);
      t = ir::Tensor::FromVector<int64_t>({static_cast<int64_t>(i.size())}, i);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          desc, ": attribute '", key, "' of type ", AttrTypeName(a.type()),
          " is not a valid Constant value"));
    }
    const std::string& out = node.output(0);
    return AddConstant(out, std::move(*t),
                       absl::StrCat("output '", out, "' of ", desc));
  }

  absl::Status ImportNode(int index) {
    const onnx::NodeProto& node = proto_.node(index);
    const std::string desc = Describe(index);
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    if (domain.empty() && node.op_type() == "Constant") {
      return FoldConstant(node, desc);
    }
    std::vector<ValueId> inputs;
    for (const std::string& in : node.input()) {
      if (in.empty()) {
        inputs.push_back(ir::kNoValue);
        continue;
      }
      std::optional<ValueId> id = Resolve(in);
      if (!id.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat(desc, ": input '", in, "' is never defined"));
      }
      inputs.push_back(*id);
    }
    ir::AttributeMap attrs;
    for (const AP& a : node.attribute()) {
      if (attrs.count(a.name())) {
        return absl::InvalidArgumentError(absl::StrCat(
            desc, ": attribute '", a.name(), "' is given twice"));
      }
      KILN_ASSIGN_OR_RETURN(ir::AttrValue v, ConvertAttribute(a, desc));
      attrs.emplace(a.name(), std::move(v));
    }
    std::vector<ValueId> outputs;
    for (const std::string& out : node.output()) {
      if (out.empty()) {
        outputs.push_back(ir::kNoValue);
        continue;
      }
      if (graph_.FindValue(out)) {
        return absl::InvalidArgumentError(
            absl::StrCat(desc, ": output '", out, "' is defined twice"));
      }
      KILN_ASSIGN_OR_RETURN(
          ValueId id,
          AddDeclaredValue(out, absl::StrCat("output '", out, "' of ", desc)));
      outputs.push_back(id);
    }
    ir::Node& added = graph_.AddNode(node.op_type(), std::move(inputs),
                                     std::move(outputs), std::move(attrs),
                                     node.name());
    added.domain = domain;
    return absl::OkStatus();
  }

  absl::Status ImportOutputs() {
    for (const onnx::ValueInfoProto& out : proto_.output()) {
      std::optional<ValueId> id = Resolve(out.name());
      if (out.name().empty() || !id.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("graph output '", out.name(), "'", where_,
                         " is never defined"));
      }
      graph_.AddOutput(*id);
    }
    return absl::OkStatus();
  }

  const onnx::GraphProto& proto_;
  const GraphImportOptions& options_;
  GraphImporter* parent_;
  std::string where_;
  ir::Graph graph_;
  absl::flat_hash_map<std::string, const onnx::TypeProto*> declared_;
};


// Kahn's algorithm, always taking the ready node that comes first in the
// file, so an already sorted graph keeps its order. `outer` holds every name
// the enclosing graphs define.
absl::Status SortGraph(onnx::GraphProto* g,
                       const absl::flat_hash_set<std::string>& outer,
                       const std::string& where, NodeIndexMap* file_index) {
  const int n = g->node_size();
  std::vector<std::string> desc(n);
  for (int i = 0; i < n; ++i) {
    file_index->emplace(&g->node(i), i);
    desc[i] = absl::StrCat(DescribeNode(g->node(i), i), where);
  }
  absl::flat_hash_set<std::string> defined;
  for (const auto& v : g->input()) defined.insert(v.name());
  for (const auto& t : g->initializer()) defined.insert(t.name());
  absl::flat_hash_map<std::string, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const std::string& out : g->node(i).output()) {
      if (out.empty()) continue;
      if (defined.contains(out)) {
        return absl::InvalidArgumentError(
            absl::StrCat(desc[i], ": output '", out,
                         "' is already a graph input or initializer"));
      }
      auto [it, inserted] = producer.emplace(out, i);
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat(desc[i], ": output '", out, "' is also produced by ",
                         desc[it->second]));
      }
    }
  }
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    const onnx::NodeProto& node = g->node(i);
    auto depend = [&](const std::string& name,
                      const std::string& how) -> absl::Status {
      auto it = producer.find(name);
      if (it != producer.end()) {
        users[it->second].push_back(i);
        ++pending[i];
        return absl::OkStatus();
      }
      if (defined.contains(name) || outer.contains(name)) {
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrCat(
          desc[i], ": ", how, " '", name,
          "', which is never defined (not a graph input, initializer or "
          "node output)"));
    };
    for (const std::string& in : node.input()) {
      if (!in.empty()) KILN_RETURN_IF_ERROR(depend(in, "uses input"));
    }
    for (const AP& a : node.attribute()) {
      std::vector<std::string> names;
      if (a.has_g()) CollectOuterNames(a.g(), &names);
      for (const auto& sub : a.graphs()) CollectOuterNames(sub, &names);
      for (const std::string& name : names) {
        KILN_RETURN_IF_ERROR(
            depend(name, absl::StrCat("its subgraph '", a.name(), "' uses")));
      }
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[i]) {
      if (--pending[u] == 0) ready.push(u);
    }
  }
  if (static_cast<int>(order.size()) != n) {
    std::vector<std::string> stuck;
    for (int i = 0; i < n && stuck.size() < 5; ++i) {
      if (pending[i] > 0) stuck.push_back(desc[i]);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("the graph has a cycle: ", n - order.size(),
                     " node(s) wait on each other, e.g. ",
                     absl::StrJoin(stuck, ", ")));
  }
  // Moves the node objects (pointers, not copies) so file_index stays valid.
  google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes =
      g->mutable_node();
  std::vector<onnx::NodeProto*> released(n);
  for (int i = n - 1; i >= 0; --i) released[i] = nodes->ReleaseLast();
  for (int i : order) nodes->AddAllocated(released[i]);

  absl::flat_hash_set<std::string> inner_outer = outer;
  for (const std::string& name : defined) inner_outer.insert(name);
  for (const auto& [name, unused] : producer) inner_outer.insert(name);
  for (int k = 0; k < n; ++k) {
    onnx::NodeProto* node = g->mutable_node(k);
    const std::string node_desc = desc[order[k]];
    for (AP& a : *node->mutable_attribute()) {
      const std::string sub_where =
          absl::StrCat(" in subgraph '", a.name(), "' of ", node_desc);
      if (a.has_g()) {
        KILN_RETURN_IF_ERROR(
            SortGraph(a.mutable_g(), inner_outer, sub_where, file_index));
      }
      for (onnx::GraphProto& sub : *a.mutable_graphs()) {
        KILN_RETURN_IF_ERROR(SortGraph(&sub, inner_outer, sub_where, file_index));
      }
    }
  }
  return absl::OkStatus();
}

// Types a graph declares: inputs, outputs, value_info and initializers.
class TypeScope {
 public:
  TypeScope(const onnx::GraphProto& g, const TypeScope* parent)
      : parent_(parent) {
    for (const auto* list : {&g.input(), &g.output(), &g.value_info()}) {
      for (const onnx::ValueInfoProto& v : *list) Add(v.name(), v.type());
    }
    for (const onnx::TensorProto& t : g.initializer()) {
      onnx::TypeProto& type = owned_.emplace_back();
      onnx::TypeProto::Tensor* tt = type.mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      onnx::TensorShapeProto* shape = tt->mutable_shape();
      for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
      Add(t.name(), type);
    }
  }

  // The declared type of `name`, innermost scope first; null if none.
  const onnx::TypeProto* Find(const std::string& name) const {
    for (const TypeScope* s = this; s != nullptr; s = s->parent_) {
      auto it = s->types_.find(name);
      if (it != s->types_.end()) return it->second;
    }
    return nullptr;
  }

 private:
  void Add(const std::string& name, const onnx::TypeProto& type) {
    if (name.empty() || type.value_case() == onnx::TypeProto::VALUE_NOT_SET) {
      return;
    }
    types_.emplace(name, &type);
  }

  const TypeScope* parent_;
  std::deque<onnx::TypeProto> owned_;
  absl::flat_hash_map<std::string, const onnx::TypeProto*> types_;
};

std::string ElemTypeName(int32_t elem) {
  if (!onnx::TensorProto::DataType_IsValid(elem)) {
    return absl::StrCat("type ", elem);
  }
  return onnx::TensorProto::DataType_Name(
      static_cast<onnx::TensorProto::DataType>(elem));
}

// "tensor(FLOAT, rank 2)", "sequence(tensor(INT64))", ...
std::string TypeText(const onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const onnx::TypeProto::Tensor& tt = t.tensor_type();
      return absl::StrCat(
          "tensor(", ElemTypeName(tt.elem_type()),
          tt.has_shape() ? absl::StrCat(", rank ", tt.shape().dim_size()) : "",
          ")");
    }
    case onnx::TypeProto::kSequenceType:
      return absl::StrCat("sequence(", TypeText(t.sequence_type().elem_type()),
                          ")");
    case onnx::TypeProto::kOptionalType:
      return absl::StrCat("optional(", TypeText(t.optional_type().elem_type()),
                          ")");
    case onnx::TypeProto::kSparseTensorType:
      return absl::StrCat("sparse_tensor(",
                          ElemTypeName(t.sparse_tensor_type().elem_type()), ")");
    case onnx::TypeProto::kMapType:
      return "map";
    default:
      return "undeclared";
  }
}

// Whether `a` and `b` contradict each other: different kinds, element types
// or, with `ranks`, (both known) ranks. An unknown part agrees with anything.
bool TypesConflict(const onnx::TypeProto& a, const onnx::TypeProto& b,
                   bool ranks) {
  if (a.value_case() == onnx::TypeProto::VALUE_NOT_SET ||
      b.value_case() == onnx::TypeProto::VALUE_NOT_SET) {
    return false;
  }
  if (a.value_case() != b.value_case()) return true;
  switch (a.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const onnx::TypeProto::Tensor& x = a.tensor_type();
      const onnx::TypeProto::Tensor& y = b.tensor_type();
      if (x.elem_type() != onnx::TensorProto::UNDEFINED &&
          y.elem_type() != onnx::TensorProto::UNDEFINED &&
          x.elem_type() != y.elem_type()) {
        return true;
      }
      return ranks && x.has_shape() && y.has_shape() &&
             x.shape().dim_size() != y.shape().dim_size();
    }
    case onnx::TypeProto::kSequenceType:
      return TypesConflict(a.sequence_type().elem_type(),
                           b.sequence_type().elem_type(), ranks);
    case onnx::TypeProto::kOptionalType:
      return TypesConflict(a.optional_type().elem_type(),
                           b.optional_type().elem_type(), ranks);
    case onnx::TypeProto::kSparseTensorType: {
      const int32_t x = a.sparse_tensor_type().elem_type();
      const int32_t y = b.sparse_tensor_type().elem_type();
      return x != onnx::TensorProto::UNDEFINED &&
             y != onnx::TensorProto::UNDEFINED && x != y;
    }
    default:
      return false;
  }
}

// The type a branch declares for its output `o`: on the output itself, else
// on the value (value_info, or an input), else in an enclosing graph (an
// output that passes an outer value through). Null if undeclared.
const onnx::TypeProto* BranchOutputType(const onnx::GraphProto& branch, int o,
                                        const TypeScope& outer) {
  const onnx::ValueInfoProto& out = branch.output(o);
  if (out.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) {
    return &out.type();
  }
  for (const auto* list : {&branch.value_info(), &branch.input()}) {
    for (const onnx::ValueInfoProto& v : *list) {
      if (v.name() == out.name() &&
          v.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) {
        return &v.type();
      }
    }
  }
  for (const onnx::TensorProto& t : branch.initializer()) {
    if (t.name() == out.name()) return nullptr;
  }
  for (const onnx::NodeProto& n : branch.node()) {
    for (const std::string& name : n.output()) {
      if (name == out.name()) return nullptr;
    }
  }
  return outer.Find(out.name());
}

// The rank of a tensor type with a shape; nullopt for anything else.
std::optional<int> TensorRank(const onnx::TypeProto* t) {
  if (t == nullptr || !t->has_tensor_type() || !t->tensor_type().has_shape()) {
    return std::nullopt;
  }
  return t->tensor_type().shape().dim_size();
}

absl::Status VerifyIfs(const onnx::GraphProto& g, const TypeScope* parent,
                       const std::string& where,
                       const NodeIndexMap* file_index) {
  const TypeScope scope(g, parent);
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& node = g.node(i);
    int index = i;
    if (file_index != nullptr) {
      auto it = file_index->find(&node);
      if (it != file_index->end()) index = it->second;
    }
    const std::string desc = absl::StrCat(DescribeNode(node, index), where);
    const bool is_if = (node.domain().empty() || node.domain() == "ai.onnx") &&
                       node.op_type() == "If";
    const onnx::GraphProto* branches[2] = {nullptr, nullptr};
    for (const AP& a : node.attribute()) {
      const std::string sub_where =
          absl::StrCat(" in subgraph '", EscapeForMessage(a.name()), "' of ", desc);
      if (a.has_g()) {
        KILN_RETURN_IF_ERROR(VerifyIfs(a.g(), &scope, sub_where, file_index));
        if (is_if && a.name() == "then_branch") branches[0] = &a.g();
        if (is_if && a.name() == "else_branch") branches[1] = &a.g();
      }
      for (const onnx::GraphProto& sub : a.graphs()) {
        KILN_RETURN_IF_ERROR(VerifyIfs(sub, &scope, sub_where, file_index));
      }
    }
    if (!is_if) continue;
    static constexpr const char* kNames[2] = {"then_branch", "else_branch"};
    for (int b = 0; b < 2; ++b) {
      if (branches[b] == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(desc, ": has no ", kNames[b], " graph"));
      }
      if (branches[b]->output_size() != node.output_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            desc, ": ", kNames[b], " has ", branches[b]->output_size(),
            " output(s), the If has ", node.output_size()));
      }
    }
    for (int o = 0; o < node.output_size(); ++o) {
      const onnx::TypeProto* types[2] = {nullptr, nullptr};
      for (int b = 0; b < 2; ++b) {
        types[b] = BranchOutputType(*branches[b], o, scope);
      }
      auto branch_out = [&](int b) {
        return absl::StrCat("output ", o, " of ", kNames[b], " ('",
                            EscapeForMessage(branches[b]->output(o).name()),
                            "', ", TypeText(*types[b]), ")");
      };
      // The branches may differ in shape, rank included (the If's output
      // then has their union: no shape); not in element type.
      if (types[0] != nullptr && types[1] != nullptr &&
          TypesConflict(*types[0], *types[1], /*ranks=*/false)) {
        return absl::InvalidArgumentError(absl::StrCat(
            desc, ": ", branch_out(1), " does not match ", branch_out(0)));
      }
      const std::string& name = node.output(o);
      const onnx::TypeProto* declared = name.empty() ? nullptr : scope.Find(name);
      if (declared == nullptr) continue;
      // The If's output has a rank only where both branches have that one.
      const std::optional<int> rank0 = TensorRank(types[0]);
      const bool ranked = rank0.has_value() && rank0 == TensorRank(types[1]);
      for (int b = 0; b < 2; ++b) {
        if (types[b] != nullptr &&
            TypesConflict(*types[b], *declared, /*ranks=*/ranked)) {
          return absl::InvalidArgumentError(absl::StrCat(
              desc, ": ", branch_out(b), " does not match the If's output '",
              EscapeForMessage(name), "' (", TypeText(*declared), ")"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SortGraphsTopologically(onnx::GraphProto* graph,
                                     NodeIndexMap* file_index) {
  return SortGraph(graph, {}, "", file_index);
}

absl::Status CheckTopLevelInputTypes(const onnx::GraphProto& graph) {
  absl::flat_hash_set<std::string> initializers;
  for (const auto& t : graph.initializer()) initializers.insert(t.name());
  for (const onnx::ValueInfoProto& in : graph.input()) {
    if (initializers.contains(in.name())) continue;
    KILN_RETURN_IF_ERROR(CheckInputType(
        in, absl::StrCat("graph input '", EscapeForMessage(in.name()), "'")));
  }
  return absl::OkStatus();
}

absl::Status VerifyIfBranches(const onnx::GraphProto& graph,
                              const NodeIndexMap* file_index) {
  return VerifyIfs(graph, nullptr, "", file_index);
}

std::string DescribeNode(const onnx::NodeProto& node, int index) {
  const bool default_domain =
      node.domain().empty() || node.domain() == "ai.onnx";
  return absl::StrCat("node #", index, " '", EscapeForMessage(node.name()), "' (",
                      default_domain ? "" : EscapeForMessage(node.domain()),
                      default_domain ? "" : ".", EscapeForMessage(node.op_type()), ")");
}

std::vector<std::string> OuterScopeNames(const onnx::GraphProto& graph) {
  std::vector<std::string> names;
  CollectOuterNames(graph, &names);
  return names;
}

DetachedTensors DetachLargeInitializers(onnx::GraphProto* graph,
                                        int64_t max_tensor_bytes,
                                        int64_t min_bytes) {
  DetachedTensors detached;
  for (onnx::TensorProto& init : *graph->mutable_initializer()) {
    const int32_t type = init.data_type();
    const bool floating = type == onnx::TensorProto::FLOAT ||
                          type == onnx::TensorProto::FLOAT16 ||
                          type == onnx::TensorProto::BFLOAT16 ||
                          type == onnx::TensorProto::DOUBLE;
    if (!floating || !init.has_raw_data() || init.name().empty() ||
        static_cast<int64_t>(init.raw_data().size()) < min_bytes ||
        detached.contains(init.name())) {
      continue;
    }
    absl::StatusOr<ir::Tensor> t =
        TensorFromProto(init, max_tensor_bytes, init.name());
    if (!t.ok()) continue;
    detached.emplace(init.name(),
                     std::make_shared<const ir::Tensor>(*std::move(t)));
    std::string placeholder(1, '\0');
    init.mutable_raw_data()->swap(placeholder);
  }
  return detached;
}

absl::StatusOr<ir::Graph> ImportGraph(const onnx::GraphProto& graph,
                                      const GraphImportOptions& options) {
  GraphImporter importer(graph, options, nullptr, "");
  KILN_RETURN_IF_ERROR(importer.Run());
  return importer.TakeGraph();
}

}  // namespace kiln::frontend::onnx_internal
