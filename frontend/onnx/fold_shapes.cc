// Shape inference to a fixpoint: infer, fold cheap constant nodes and
// Shape/Size of static values into initializers on the reference
// interpreter, replace Ifs with constant conditions by their branch, repeat.
#include "frontend/onnx/fold_shapes.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "frontend/onnx/guarded_schemas.h"
#include "frontend/onnx/tensor_proto.h"
#include "ir/graph/graph.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#include "interp/interpreter.h"

namespace kiln::frontend::onnx_internal {
namespace {

using Dims = std::vector<int64_t>;

// Random, stateful or non-tensor ops, Constant (read as a source, left for
// the importer to fold), and DequantizeLinear: a quantized model's weights,
// which the graph passes read as such (fuse-qdq turns QDQ patterns into
// integer calls, fold-dequantize-linear folds the rest).
const absl::flat_hash_set<std::string>& NeverFold() {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "Constant", "DequantizeLinear", "RandomNormal", "RandomUniform", "RandomNormalLike",
      "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout", "If", "Loop",
      "Scan", "SequenceConstruct", "SequenceEmpty", "SequenceInsert",
      "SequenceErase", "SequenceAt", "SequenceLength", "SequenceMap",
      "SplitToSequence", "ConcatFromSequence", "Optional",
      "OptionalGetElement", "OptionalHasElement"};
  return *ops;
}

// Ops whose cost grows faster than their inputs' size.
const absl::flat_hash_set<std::string>& HeavyOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "Conv", "ConvInteger", "ConvTranspose", "DeformConv", "MatMul",
      "MatMulInteger", "Gemm", "Einsum", "QLinearConv", "QLinearMatMul",
      "LSTM", "GRU", "RNN"};
  return *ops;
}

std::string OneLine(const char* what) {
  return absl::StrReplaceAll(what, {{"\n\n==> ", "; "}, {"\n", " "}});
}

// Element count of `dims`, or nullopt on a negative dim or overflow.
std::optional<int64_t> Elements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > (int64_t{1} << 62) / d) return std::nullopt;
    n *= d;
  }
  return n;
}

// Static dims of a tensor type, if every dim has a value.
std::optional<Dims> StaticDims(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) {
    return std::nullopt;
  }
  Dims dims;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

// Dims of a Constant node's value, if it has a tensor-like attribute.
std::optional<Dims> ConstantNodeDims(const onnx::NodeProto& node) {
  if (node.attribute_size() != 1) return std::nullopt;
  const onnx::AttributeProto& a = node.attribute(0);
  if (a.name() == "value" && a.has_t()) {
    return Dims(a.t().dims().begin(), a.t().dims().end());
  }
  if (a.name() == "value_float" || a.name() == "value_int") return Dims{};
  if (a.name() == "value_floats") return Dims{a.floats_size()};
  if (a.name() == "value_ints") return Dims{a.ints_size()};
  return std::nullopt;
}

// Element type of a Constant node's value (0 if unknown).
int32_t ConstantNodeElemType(const onnx::NodeProto& node) {
  if (node.attribute_size() != 1) return 0;
  const onnx::AttributeProto& a = node.attribute(0);
  if (a.name() == "value" && a.has_t()) return a.t().data_type();
  if (a.name() == "value_float" || a.name() == "value_floats") {
    return onnx::TensorProto::FLOAT;
  }
  if (a.name() == "value_int" || a.name() == "value_ints") {
    return onnx::TensorProto::INT64;
  }
  return 0;
}

// Bytes per element of an ONNX element type (0 if kiln lacks it).
int64_t ElemBytes(int32_t elem_type) {
  absl::StatusOr<ir::DType> d = DTypeFromOnnx(elem_type, "");
  return d.ok() ? static_cast<int64_t>(ir::DTypeSize(*d)) : 0;
}

// Removes the elements `remove` selects, keeping the others' order.
template <typename T, typename Pred>
void RemoveIf(google::protobuf::RepeatedPtrField<T>* list, Pred remove) {
  int kept = 0;
  for (int i = 0; i < list->size(); ++i) {
    if (remove(list->Get(i))) continue;
    if (kept != i) list->SwapElements(kept, i);
    ++kept;
  }
  while (list->size() > kept) list->RemoveLast();
}

// Every value name `graph` and its subgraphs (but those of `skip`) define
// or read.
void CollectNames(const onnx::GraphProto& graph,
                  absl::flat_hash_set<std::string>* names,
                  const onnx::NodeProto* skip = nullptr) {
  for (const auto& v : graph.input()) names->insert(v.name());
  for (const auto& v : graph.output()) names->insert(v.name());
  for (const auto& v : graph.value_info()) names->insert(v.name());
  for (const auto& t : graph.initializer()) names->insert(t.name());
  for (const auto& node : graph.node()) {
    names->insert(node.input().begin(), node.input().end());
    names->insert(node.output().begin(), node.output().end());
    if (&node == skip) continue;
    for (const auto& a : node.attribute()) {
      if (a.has_g()) CollectNames(a.g(), names);
      for (const auto& sub : a.graphs()) CollectNames(sub, names);
    }
  }
}

using Renames = absl::flat_hash_map<std::string, std::string>;
using OuterTypes = absl::flat_hash_map<std::string, onnx::TypeProto>;

void Rename(std::string* name, const Renames& renames) {
  if (auto it = renames.find(*name); it != renames.end()) *name = it->second;
}

// Applies `renames` to the values of `graph` (`top`: the graph whose own
// values are renamed) and to the outer-scope reads of its subgraphs; a
// subgraph's own definitions shadow the outer names they repeat.
void RenameValues(onnx::GraphProto* graph, Renames renames, bool top) {
  if (!top) {
    for (const auto& v : graph->input()) renames.erase(v.name());
    for (const auto& t : graph->initializer()) renames.erase(t.name());
    for (const auto& node : graph->node()) {
      for (const std::string& out : node.output()) renames.erase(out);
    }
    if (renames.empty()) return;
  }
  for (auto& node : *graph->mutable_node()) {
    for (std::string& in : *node.mutable_input()) Rename(&in, renames);
    for (std::string& out : *node.mutable_output()) Rename(&out, renames);
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) RenameValues(a.mutable_g(), renames, false);
      for (auto& sub : *a.mutable_graphs()) RenameValues(&sub, renames, false);
    }
  }
  if (!top) {
    for (auto& v : *graph->mutable_output()) Rename(v.mutable_name(), renames);
    return;
  }
  for (auto& v : *graph->mutable_output()) Rename(v.mutable_name(), renames);
  for (auto& v : *graph->mutable_value_info()) Rename(v.mutable_name(), renames);
  for (auto& t : *graph->mutable_initializer()) Rename(t.mutable_name(), renames);
}

class Folder {
 public:
  // Before IR 4 an initializer is also a graph input, or shape inference
  // ignores it: `initializers_are_inputs` lists new ones as inputs too.
  Folder(onnx::GraphProto* graph, const FoldShapesOptions& options,
         bool initializers_are_inputs)
      : g_(graph),
        options_(options),
        initializers_are_inputs_(initializers_are_inputs) {}

  // Types of this graph's values, initializers included, as its branches
  // see them.
  OuterTypes TypesForSubgraphs() const {
    OuterTypes types;
    for (const auto& [name, type] : infer_types_) types[name] = *type;
    for (const auto& [name, type] : types_) types[name] = *type;
    return types;
  }

  // Folds what the current value_info allows; returns the number of nodes
  // folded or rewritten (0: nothing changed).
  absl::StatusOr<int> Round() {
    IndexGraph();
    int spelled_out = 0;
    for (onnx::NodeProto& node : *g_->mutable_node()) {
      DropDeterministicTrainingMode(&node);
      if (SpellOutSqueezeAxes(&node)) ++spelled_out;
    }
    const int n = g_->node_size();
    std::vector<bool> folded(n, false);
    int count = 0;
    for (int i = 0; i < n; ++i) {
      if (TryFold(g_->node(i))) {
        folded[i] = true;
        ++count;
        RecordFolded(g_->node(i));
      } else if (count > 0) {
        InferLocally(g_->mutable_node(i));
      }
    }
    if (count > 0) KILN_RETURN_IF_ERROR(Rewrite(folded));
    IndexGraph();
    KILN_ASSIGN_OR_RETURN(int inlined, InlineConstantIfs());
    inlined_ifs_ += inlined;
    // A spelled-out Squeeze changes no value but needs another inference run.
    return count + inlined + spelled_out;
  }

  // If nodes replaced by their branch so far.
  int inlined_ifs() const { return inlined_ifs_; }

 private:
  // A constant's element type and dims without materializing it.
  struct ConstInfo {
    int32_t elem_type = 0;
    Dims dims;
  };

  void IndexGraph() {
    infer_types_.clear();
    infer_data_.clear();
    owned_types_.clear();
    owned_data_.clear();
    for (auto& v : *g_->mutable_input()) {
      infer_types_[v.name()] = v.mutable_type();
    }
    for (auto& v : *g_->mutable_value_info()) {
      infer_types_[v.name()] = v.mutable_type();
    }
    for (auto& v : *g_->mutable_output()) {
      infer_types_[v.name()] = v.mutable_type();
    }
    for (const auto& t : g_->initializer()) {
      infer_data_[t.name()] = &t;
      if (infer_types_.count(t.name()) == 0) {
        onnx::TypeProto& type = owned_types_.emplace_back();
        auto* tt = type.mutable_tensor_type();
        tt->set_elem_type(t.data_type());
        for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
        infer_types_[t.name()] = &type;
      }
    }
    types_.clear();
    initializers_.clear();
    constant_nodes_.clear();
    graph_outputs_.clear();
    for (const auto& v : g_->input()) types_[v.name()] = &v.type();
    for (const auto& v : g_->value_info()) types_[v.name()] = &v.type();
    for (const auto& v : g_->output()) {
      types_[v.name()] = &v.type();
      graph_outputs_.insert(v.name());
    }
    for (const auto& t : g_->initializer()) initializers_[t.name()] = &t;
    for (const auto& node : g_->node()) {
      if (node.domain().empty() && node.op_type() == "Constant" &&
          node.output_size() == 1) {
        constant_nodes_[node.output(0)] = &node;
        if (node.attribute_size() == 1 && node.attribute(0).name() == "value" &&
            node.attribute(0).has_t()) {
          infer_data_[node.output(0)] = &node.attribute(0).t();
        }
      }
    }
  }

  void SetLocalType(const std::string& name, onnx::TypeProto type) {
    onnx::TypeProto& owned = owned_types_.emplace_back(std::move(type));
    infer_types_[name] = &owned;
    types_[name] = &owned;
  }

  // A folded node's outputs are known exactly: later nodes of the same
  // sweep see their types and (for small ones) their data.
  void RecordFolded(const onnx::NodeProto& node) {
    for (const std::string& out : node.output()) {
      if (out.empty()) continue;
      const ir::Tensor& t = *values_.at(out);
      onnx::TypeProto type;
      auto* tt = type.mutable_tensor_type();
      tt->set_elem_type(OnnxElemTypeFromDType(t.dtype()));
      for (int64_t d : t.shape()) tt->mutable_shape()->add_dim()->set_dim_value(d);
      SetLocalType(out, std::move(type));
      if (t.num_elements() <= kMaxLocalData) {
        absl::StatusOr<onnx::TensorProto> proto = TensorToProto(t, out);
        if (proto.ok()) {
          owned_data_.push_back(*std::move(proto));
          infer_data_[out] = &owned_data_.back();
        }
      }
    }
  }

  // Runs the node's libonnx shape-inference function on this sweep's types
  // so a Shape further down can fold in the same sweep. Only fully static
  // results that agree with what is already known are kept; the next
  // full inference run stays the authority.
  void InferLocally(onnx::NodeProto* node) {
    if (!node->domain().empty() || node->op_type() == "Constant") return;
    bool all_static = true;
    for (const std::string& out : node->output()) {
      auto it = types_.find(out);
      all_static &= out.empty() ||
                    (it != types_.end() && StaticDims(*it->second).has_value());
    }
    if (all_static) return;
    for (const auto& a : node->attribute()) {
      if (a.has_g() || a.graphs_size() > 0) return;
    }
    for (const std::string& in : node->input()) {
      if (in.empty()) continue;
      auto it = infer_types_.find(in);
      if (it == infer_types_.end() || !it->second->has_tensor_type() ||
          it->second->tensor_type().elem_type() == 0) {
        return;
      }
    }
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(
        node->op_type(), static_cast<int>(options_.opset), "");
    if (schema == nullptr || !schema->has_type_and_shape_inference_function()) {
      return;
    }
    static const auto* no_sparse =
        new std::unordered_map<std::string, const onnx::SparseTensorProto*>();
    onnx::shape_inference::InferenceContextImpl ctx(*node, infer_types_,
                                                    infer_data_, *no_sparse);
    try {
      schema->GetTypeAndShapeInferenceFunction()(ctx);
    } catch (...) {
      return;
    }
    for (int j = 0; j < node->output_size() &&
                    j < static_cast<int>(ctx.allOutputTypes_.size());
         ++j) {
      const std::string& out = node->output(j);
      const onnx::TypeProto& inferred = ctx.allOutputTypes_[j];
      std::optional<Dims> dims = StaticDims(inferred);
      if (out.empty() || !dims.has_value() ||
          inferred.tensor_type().elem_type() == 0) {
        continue;
      }
      if (auto it = types_.find(out); it != types_.end()) {
        const onnx::TypeProto& known = *it->second;
        if (!known.has_tensor_type()) continue;
        const auto& kt = known.tensor_type();
        if (kt.elem_type() != 0 &&
            kt.elem_type() != inferred.tensor_type().elem_type()) {
          continue;
        }
        if (kt.has_shape()) {
          if (kt.shape().dim_size() != static_cast<int>(dims->size())) continue;
          bool agrees = true;
          for (int d = 0; d < kt.shape().dim_size(); ++d) {
            agrees &= !kt.shape().dim(d).has_dim_value() ||
                      kt.shape().dim(d).dim_value() == (*dims)[d];
          }
          if (!agrees) continue;
        }
      }
      SetLocalType(out, inferred);
    }
  }

  std::optional<ConstInfo> Constant(const std::string& name) const {
    if (auto it = values_.find(name); it != values_.end()) {
      return ConstInfo{OnnxElemTypeFromDType(it->second->dtype()),
                       it->second->shape()};
    }
    if (auto it = initializers_.find(name); it != initializers_.end()) {
      const onnx::TensorProto& t = *it->second;
      return ConstInfo{t.data_type(), Dims(t.dims().begin(), t.dims().end())};
    }
    if (auto it = constant_nodes_.find(name); it != constant_nodes_.end()) {
      std::optional<Dims> dims = ConstantNodeDims(*it->second);
      if (!dims.has_value()) return std::nullopt;
      return ConstInfo{ConstantNodeElemType(*it->second), *dims};
    }
    return std::nullopt;
  }

  // Static dims of any value: its inferred or declared type, or the
  // constant's own dims.
  std::optional<Dims> KnownDims(const std::string& name) const {
    if (auto it = types_.find(name); it != types_.end()) {
      if (std::optional<Dims> d = StaticDims(*it->second)) return d;
    }
    if (std::optional<ConstInfo> c = Constant(name)) return c->dims;
    return std::nullopt;
  }

  // The constant `name` as a tensor (cached: a value never changes).
  absl::StatusOr<std::shared_ptr<const ir::Tensor>> Materialize(
      const std::string& name) {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    std::shared_ptr<const ir::Tensor> t;
    auto detached = options_.detached == nullptr
                        ? DetachedTensors::const_iterator()
                        : options_.detached->find(name);
    if (options_.detached != nullptr && detached != options_.detached->end() &&
        initializers_.contains(name)) {
      t = detached->second;
    } else if (auto it = initializers_.find(name); it != initializers_.end()) {
      KILN_ASSIGN_OR_RETURN(
          ir::Tensor v, TensorFromProto(*it->second, options_.max_tensor_bytes,
                                        absl::StrCat("initializer '", name,
                                                     "'")));
      t = std::make_shared<const ir::Tensor>(std::move(v));
    } else if (auto it = constant_nodes_.find(name);
               it != constant_nodes_.end()) {
      // The importer's own Constant folding, on a graph of that one node.
      onnx::GraphProto one;
      *one.add_node() = *it->second;
      one.add_output()->set_name(name);
      KILN_ASSIGN_OR_RETURN(ir::Graph graph, ImportGraph(one, MiniImportOptions()));
      std::optional<ir::ValueId> id = graph.FindValue(name);
      KILN_RET_CHECK(id.has_value() && graph.IsConstant(*id));
      t = graph.shared_constant(*id);
    } else {
      return kiln::InternalError("'", name, "' is not a constant");
    }
    values_[name] = t;
    return t;
  }

  GraphImportOptions MiniImportOptions() const {
    GraphImportOptions o;
    o.opset = options_.opset;
    o.max_tensor_bytes = options_.max_tensor_bytes;
    return o;
  }

  bool Foldable(const onnx::NodeProto& node) const {
    if (!node.domain().empty() || NeverFold().contains(node.op_type())) {
      return false;
    }
    for (const auto& a : node.attribute()) {
      if (a.has_g() || a.graphs_size() > 0) return false;
    }
    if (node.output_size() == 0) return false;
    for (const std::string& out : node.output()) {
      if (graph_outputs_.contains(out)) return false;
    }
    return true;
  }

  bool TryFold(const onnx::NodeProto& node) {
    if (!Foldable(node)) return false;
    std::optional<std::vector<std::shared_ptr<const ir::Tensor>>> outs;
    if (node.op_type() == "Shape" || node.op_type() == "Size") {
      outs = FoldShapeOrSize(node);
    }
    if (!outs.has_value()) outs = Evaluate(node);
    if (!outs.has_value()) return false;
    for (int j = 0; j < node.output_size(); ++j) {
      if (!node.output(j).empty()) values_[node.output(j)] = (*outs)[j];
    }
    return true;
  }

  // Dropout with a constant ratio of 0 is a copy even in training mode
  // (ONNX: "if it was set to 0, the output would be a simple copy of the
  // input"; the mask is all true): its training_mode input is dropped so
  // the node reads as the inference-mode Dropout it is.
  void DropDeterministicTrainingMode(onnx::NodeProto* node) {
    if (!node->domain().empty() || node->op_type() != "Dropout" ||
        node->input_size() != 3 || node->input(2).empty() ||
        node->input(1).empty()) {
      return;
    }
    std::optional<ConstInfo> info = Constant(node->input(1));
    if (!info.has_value() || !info->dims.empty()) return;
    absl::StatusOr<std::shared_ptr<const ir::Tensor>> ratio =
        Materialize(node->input(1));
    if (!ratio.ok() || !ir::IsFloat((*ratio)->dtype()) ||
        (*ratio)->GetAsDouble(0) != 0.0) {
      return;
    }
    node->mutable_input()->RemoveLast();
  }

  // A Squeeze before opset 13 without `axes` removes every dim of extent 1,
  // but libonnx's inference of those versions gives no shape without the
  // attribute (everything after it would stay unshaped, on the reference
  // interpreter). With the input's dims static, the axes are spelled out:
  // the same op, which inference then shapes. Returns whether it did.
  bool SpellOutSqueezeAxes(onnx::NodeProto* node) {
    if (!node->domain().empty() || node->op_type() != "Squeeze" || options_.opset >= 13 ||
        node->input_size() != 1 || node->input(0).empty()) {
      return false;
    }
    for (const auto& a : node->attribute()) {
      if (a.name() == "axes") return false;
    }
    auto it = types_.find(node->input(0));
    if (it == types_.end()) return false;
    const std::optional<Dims> dims = StaticDims(*it->second);
    if (!dims.has_value()) return false;
    onnx::AttributeProto* axes = node->add_attribute();
    axes->set_name("axes");
    axes->set_type(onnx::AttributeProto::INTS);
    for (size_t d = 0; d < dims->size(); ++d) {
      if ((*dims)[d] == 1) axes->add_ints(static_cast<int64_t>(d));
    }
    return true;
  }

  // Shape and Size read only the input's dims, which need not be constant.
  std::optional<std::vector<std::shared_ptr<const ir::Tensor>>>
  FoldShapeOrSize(const onnx::NodeProto& node) {
    if (node.input_size() != 1 || node.output_size() != 1 ||
        node.output(0).empty()) {
      return std::nullopt;
    }
    std::optional<Dims> dims = KnownDims(node.input(0));
    if (!dims.has_value()) return std::nullopt;
    if (node.op_type() == "Size") {
      std::optional<int64_t> n = Elements(*dims);
      if (!n.has_value()) return std::nullopt;
      return std::vector<std::shared_ptr<const ir::Tensor>>{
          std::make_shared<const ir::Tensor>(ir::Tensor::Scalar<int64_t>(*n))};
    }
    const int64_t rank = static_cast<int64_t>(dims->size());
    int64_t start = 0;
    int64_t end = rank;
    for (const auto& a : node.attribute()) {
      if (a.name() == "start") start = a.i();
      if (a.name() == "end") end = a.i();
    }
    auto clamp = [rank](int64_t v) {
      if (v < 0) v += rank;
      return std::clamp<int64_t>(v, 0, rank);
    };
    start = clamp(start);
    end = std::max(start, clamp(end));
    Dims slice(dims->begin() + start, dims->begin() + end);
    return std::vector<std::shared_ptr<const ir::Tensor>>{
        std::make_shared<const ir::Tensor>(ir::Tensor::FromVector<int64_t>(
            {static_cast<int64_t>(slice.size())}, slice))};
  }

  // Runs a node whose inputs are all constant on the reference interpreter,
  // within the size limits.
  std::optional<std::vector<std::shared_ptr<const ir::Tensor>>> Evaluate(
      const onnx::NodeProto& node) {
    const int64_t max_in = HeavyOps().contains(node.op_type())
                               ? options_.max_heavy_input_elements
                               : options_.max_input_elements;
    int64_t in_elements = 0;
    int64_t in_bytes = 0;
    std::vector<std::string> names;  // distinct inputs, in order
    for (const std::string& in : node.input()) {
      if (in.empty()) continue;
      std::optional<ConstInfo> c = Constant(in);
      if (!c.has_value()) return std::nullopt;
      std::optional<int64_t> n = Elements(c->dims);
      const int64_t elem_bytes = ElemBytes(c->elem_type);
      if (!n.has_value() || elem_bytes == 0) return std::nullopt;
      if (std::find(names.begin(), names.end(), in) != names.end()) continue;
      names.push_back(in);
      // Over the limit alone: stop before the sums below can overflow.
      if (*n > max_in) return std::nullopt;
      in_elements += *n;
      in_bytes += *n * elem_bytes;
    }
    if (in_elements > max_in) return std::nullopt;
    const int64_t max_out_bytes = std::max(in_bytes, options_.max_growth_bytes);
    // Outputs shape inference already sized are checked before running.
    bool all_sized = true;
    int64_t out_elements = 0;
    int64_t out_bytes = 0;
    for (const std::string& out : node.output()) {
      if (out.empty()) continue;
      auto it = types_.find(out);
      std::optional<Dims> dims;
      if (it != types_.end()) dims = StaticDims(*it->second);
      std::optional<int64_t> n =
          dims.has_value() ? Elements(*dims) : std::nullopt;
      const int64_t eb =
          it != types_.end() && it->second->has_tensor_type()
              ? ElemBytes(it->second->tensor_type().elem_type())
              : 0;
      if (!n.has_value() || eb == 0) {
        all_sized = false;
        continue;
      }
      // Over the limit alone (shape inference may say 2^61 elements): stop
      // before the sums below can overflow.
      if (*n > options_.max_output_elements) return std::nullopt;
      out_elements += *n;
      out_bytes += *n * eb;
    }
    if (out_elements > options_.max_output_elements || out_bytes > max_out_bytes) {
      return std::nullopt;
    }
    if (!all_sized && in_elements > options_.max_output_elements) {
      return std::nullopt;
    }

    onnx::GraphProto one;
    one.set_name("fold");
    std::vector<ir::Tensor> inputs;
    for (const std::string& name : names) {
      absl::StatusOr<std::shared_ptr<const ir::Tensor>> t = Materialize(name);
      if (!t.ok()) return std::nullopt;
      onnx::ValueInfoProto* vi = one.add_input();
      vi->set_name(name);
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(OnnxElemTypeFromDType((*t)->dtype()));
      auto* shape = tt->mutable_shape();
      for (int64_t d : (*t)->shape()) shape->add_dim()->set_dim_value(d);
      inputs.push_back(**t);
    }
    *one.add_node() = node;
    for (const std::string& out : node.output()) {
      if (!out.empty()) one.add_output()->set_name(out);
    }
    absl::StatusOr<ir::Graph> graph = ImportGraph(one, MiniImportOptions());
    if (!graph.ok()) return std::nullopt;
    // A result over the output limit fails before it is allocated: a node
    // whose outputs shape inference could not size (ConstantOfShape of
    // [6225922, 36] beside an Expand that does not broadcast) stays a
    // run-time op instead of costing seconds and gigabytes here.
    interp::RunOptions run_options;
    run_options.max_result_elements = options_.max_output_elements;
    absl::StatusOr<std::vector<ir::Tensor>> results = interp::Run(*graph, inputs, run_options);
    if (!results.ok() ||
        static_cast<int>(results->size()) != one.output_size()) {
      return std::nullopt;
    }
    std::vector<std::shared_ptr<const ir::Tensor>> outs;
    out_elements = 0;
    out_bytes = 0;
    size_t k = 0;
    for (const std::string& out : node.output()) {
      if (out.empty()) {
        outs.push_back(nullptr);
        continue;
      }
      ir::Tensor& t = (*results)[k++];
      if (!AgreesWithInferred(out, t)) return std::nullopt;
      out_elements += t.num_elements();
      out_bytes += static_cast<int64_t>(t.byte_size());
      outs.push_back(std::make_shared<const ir::Tensor>(std::move(t)));
    }
    if (out_elements > options_.max_output_elements || out_bytes > max_out_bytes) {
      return std::nullopt;
    }
    return outs;
  }

  // A result that contradicts shape inference is not folded (the node then
  // fails or runs later exactly as without folding).
  bool AgreesWithInferred(const std::string& name, const ir::Tensor& t) const {
    auto it = types_.find(name);
    if (it == types_.end() || !it->second->has_tensor_type()) return true;
    const onnx::TypeProto::Tensor& tt = it->second->tensor_type();
    if (tt.elem_type() != 0 &&
        tt.elem_type() != OnnxElemTypeFromDType(t.dtype())) {
      return false;
    }
    if (!tt.has_shape()) return true;
    if (tt.shape().dim_size() != t.rank()) return false;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() != t.shape()[i]) return false;
    }
    return true;
  }

  // Removes folded nodes, adds still-read outputs as initializers, drops
  // initializers and value_info entries nothing reads any more.
  absl::Status Rewrite(const std::vector<bool>& folded) {
    absl::flat_hash_set<std::string> read;
    absl::flat_hash_set<std::string> read_by_folded;
    for (int i = 0; i < g_->node_size(); ++i) {
      const onnx::NodeProto& node = g_->node(i);
      if (folded[i]) {
        for (const std::string& in : node.input()) read_by_folded.insert(in);
        continue;
      }
      for (const std::string& in : node.input()) read.insert(in);
      for (const auto& a : node.attribute()) {
        std::vector<std::string> outer;
        if (a.has_g()) outer = OuterScopeNames(a.g());
        for (const auto& sub : a.graphs()) {
          for (std::string& s : OuterScopeNames(sub)) outer.push_back(s);
        }
        read.insert(outer.begin(), outer.end());
      }
    }
    for (const auto& v : g_->output()) read.insert(v.name());
    for (const auto& v : g_->input()) read.insert(v.name());

    absl::flat_hash_set<std::string> gone;  // value_info entries to drop
    std::vector<onnx::TensorProto> added;
    for (int i = 0; i < g_->node_size(); ++i) {
      if (!folded[i]) continue;
      for (const std::string& out : g_->node(i).output()) {
        if (out.empty()) continue;
        if (!read.contains(out)) {
          gone.insert(out);
          values_.erase(out);
          continue;
        }
        KILN_ASSIGN_OR_RETURN(onnx::TensorProto t,
                              TensorToProto(*values_.at(out), out));
        added.push_back(std::move(t));
        // Inference would keep reading a stale (less precise) value_info
        // over the initializer's exact type.
        gone.insert(out);
      }
    }

    auto* nodes = g_->mutable_node();
    const int n = nodes->size();
    std::vector<onnx::NodeProto*> released(n);
    for (int i = n - 1; i >= 0; --i) released[i] = nodes->ReleaseLast();
    for (int i = 0; i < n; ++i) {
      if (!folded[i]) {
        nodes->AddAllocated(released[i]);
        continue;
      }
      if (options_.file_index != nullptr) options_.file_index->erase(released[i]);
      delete released[i];
    }

    auto* inits = g_->mutable_initializer();
    RemoveIf(inits, [&](const onnx::TensorProto& t) {
      if (!read_by_folded.contains(t.name()) || read.contains(t.name())) {
        return false;
      }
      values_.erase(t.name());
      return true;
    });
    for (onnx::TensorProto& t : added) {
      if (initializers_are_inputs_) {
        onnx::ValueInfoProto* in = g_->add_input();
        in->set_name(t.name());
        auto* tt = in->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(t.data_type());
        auto* shape = tt->mutable_shape();
        for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
      }
      *inits->Add() = std::move(t);
    }

    RemoveIf(g_->mutable_value_info(), [&](const onnx::ValueInfoProto& v) {
      return gone.contains(v.name());
    });
    return absl::OkStatus();
  }

  // An If whose condition is a constant becomes the branch it selects: the
  // branch's nodes and initializers move into this graph, its outputs take
  // the If's output names, and every other value it defines is renamed
  // where this graph (or a subgraph of it) already has the name. Nested Ifs
  // come up to this graph and fold in a later round, once inference has
  // typed them. Returns the number of Ifs inlined.
  absl::StatusOr<int> InlineConstantIfs() {
    int inlined = 0;
    for (int i = 0; i < g_->node_size(); ++i) {
      const onnx::NodeProto& node = g_->node(i);
      if (!node.domain().empty() || node.op_type() != "If" ||
          node.input_size() != 1) {
        continue;
      }
      std::optional<ConstInfo> c = Constant(node.input(0));
      if (!c.has_value() || Elements(c->dims) != 1) continue;
      absl::StatusOr<std::shared_ptr<const ir::Tensor>> cond =
          Materialize(node.input(0));
      if (!cond.ok() || (*cond)->num_elements() != 1) continue;
      const bool then = (*cond)->GetAsInt64(0) != 0;
      const onnx::GraphProto* branch = nullptr;
      for (const auto& a : node.attribute()) {
        if (a.name() == (then ? "then_branch" : "else_branch") && a.has_g()) {
          branch = &a.g();
        }
      }
      if (branch == nullptr || branch->output_size() != node.output_size() ||
          branch->sparse_initializer_size() > 0 || branch->input_size() > 0) {
        continue;  // malformed: the importer reports it
      }
      InlineBranch(i, *branch);
      ++inlined;
      IndexGraph();
    }
    return inlined;
  }

  void InlineBranch(int index, onnx::GraphProto branch) {
    const onnx::NodeProto& if_node = g_->node(index);
    // Names the rest of this graph uses (the If's own branches excluded).
    absl::flat_hash_set<std::string> taken;
    CollectNames(*g_, &taken, &if_node);
    absl::flat_hash_set<std::string> by_node;  // values branch nodes produce
    for (const auto& n : branch.node()) {
      for (const std::string& out : n.output()) {
        if (!out.empty()) by_node.insert(out);
      }
    }
    // Branch outputs a node produces become the If's outputs directly.
    Renames renames;
    std::vector<bool> renamed_output(branch.output_size(), false);
    for (int o = 0; o < branch.output_size(); ++o) {
      const std::string& name = branch.output(o).name();
      const std::string& target = if_node.output(o);
      if (target.empty() || !by_node.contains(name) || renames.contains(name)) {
        continue;
      }
      renames[name] = target;
      renamed_output[o] = true;
    }
    auto fresh = [&](const std::string& base) {
      std::string name = base;
      for (int k = 1; taken.contains(name); ++k) name = absl::StrCat(base, "_", k);
      taken.insert(name);
      return name;
    };
    for (const std::string& out : by_node) {
      if (!renames.contains(out)) renames[out] = fresh(out);
    }
    for (const auto& t : branch.initializer()) {
      if (!renames.contains(t.name())) renames[t.name()] = fresh(t.name());
    }
    RenameValues(&branch, renames, /*top=*/true);

    // Values downstream of the If keep types inferred from both branches
    // merged; they are dropped so inference types them from this one.
    absl::flat_hash_set<std::string> stale(if_node.output().begin(),
                                           if_node.output().end());
    for (int i = index + 1; i < g_->node_size(); ++i) {
      const onnx::NodeProto& n = g_->node(i);
      bool reads = false;
      for (const std::string& in : n.input()) reads |= stale.contains(in);
      for (const auto& a : n.attribute()) {
        std::vector<std::string> outer;
        if (a.has_g()) outer = OuterScopeNames(a.g());
        for (const auto& sub : a.graphs()) {
          for (std::string& name : OuterScopeNames(sub)) outer.push_back(name);
        }
        for (const std::string& name : outer) reads |= stale.contains(name);
      }
      if (reads) stale.insert(n.output().begin(), n.output().end());
    }
    RemoveIf(g_->mutable_value_info(), [&](const onnx::ValueInfoProto& v) {
      return stale.contains(v.name());
    });

    std::vector<onnx::NodeProto> replacement(branch.node().begin(),
                                             branch.node().end());
    for (int o = 0; o < branch.output_size(); ++o) {
      if (renamed_output[o] || if_node.output(o).empty()) continue;
      onnx::NodeProto copy;
      copy.set_op_type("Identity");
      copy.set_name(absl::StrCat(if_node.name(), "/output_", o));
      copy.add_input(branch.output(o).name());
      copy.add_output(if_node.output(o));
      replacement.push_back(std::move(copy));
    }
    for (onnx::TensorProto& t : *branch.mutable_initializer()) {
      if (initializers_are_inputs_) {
        onnx::ValueInfoProto* in = g_->add_input();
        in->set_name(t.name());
        auto* tt = in->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(t.data_type());
        auto* shape = tt->mutable_shape();
        for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
      }
      *g_->add_initializer() = std::move(t);
    }
    for (onnx::ValueInfoProto& v : *branch.mutable_value_info()) {
      *g_->add_value_info() = std::move(v);
    }

    // Splice: nodes before the If, the branch, nodes after it.
    auto* nodes = g_->mutable_node();
    const int n = nodes->size();
    std::vector<onnx::NodeProto*> released(n);
    for (int i = n - 1; i >= 0; --i) released[i] = nodes->ReleaseLast();
    for (int i = 0; i < n; ++i) {
      if (i != index) {
        nodes->AddAllocated(released[i]);
        continue;
      }
      for (onnx::NodeProto& r : replacement) *nodes->Add() = std::move(r);
      if (options_.file_index != nullptr) options_.file_index->erase(released[i]);
      delete released[i];
    }
  }

  onnx::GraphProto* g_;
  const FoldShapesOptions& options_;
  const bool initializers_are_inputs_;
  // Types and data for libonnx's per-node inference within a sweep.
  static constexpr int64_t kMaxLocalData = 4096;
  std::unordered_map<std::string, onnx::TypeProto*> infer_types_;
  std::unordered_map<std::string, const onnx::TensorProto*> infer_data_;
  std::deque<onnx::TypeProto> owned_types_;
  std::deque<onnx::TensorProto> owned_data_;
  absl::flat_hash_map<std::string, const onnx::TypeProto*> types_;
  absl::flat_hash_map<std::string, const onnx::TensorProto*> initializers_;
  absl::flat_hash_map<std::string, const onnx::NodeProto*> constant_nodes_;
  absl::flat_hash_set<std::string> graph_outputs_;
  // Materialized constants: initializers read so far and folded values.
  absl::flat_hash_map<std::string, std::shared_ptr<const ir::Tensor>> values_;
  int inlined_ifs_ = 0;
};

absl::StatusOr<FoldShapesStats> FoldToFixpoint(onnx::ModelProto* model,
                                               const FoldShapesOptions& options,
                                               std::vector<std::string>* warnings);

// Whether every node output of `graph` has an element type (libonnx skips
// nodes it cannot infer without saying so).
bool EveryValueTyped(const onnx::GraphProto& graph) {
  absl::flat_hash_set<std::string> typed;
  for (const auto& list : {graph.input(), graph.value_info(), graph.output()}) {
    for (const auto& v : list) {
      if (v.type().has_tensor_type() && v.type().tensor_type().elem_type() != 0) {
        typed.insert(v.name());
      }
    }
  }
  for (const auto& t : graph.initializer()) typed.insert(t.name());
  for (const auto& node : graph.node()) {
    for (const std::string& out : node.output()) {
      if (!out.empty() && !typed.contains(out)) return false;
    }
  }
  return true;
}

// A tensor type whose shape is known and static.
bool StaticTensorType(const onnx::TypeProto& t) {
  if (!t.has_tensor_type() || t.tensor_type().elem_type() == 0 ||
      !t.tensor_type().has_shape()) {
    return false;
  }
  for (const auto& d : t.tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return false;
  }
  return true;
}

// Whether every node output of `graph` has a static tensor type.
bool EveryValueStatic(const onnx::GraphProto& graph) {
  absl::flat_hash_set<std::string> static_values;
  for (const auto& list : {graph.input(), graph.value_info(), graph.output()}) {
    for (const auto& v : list) {
      if (StaticTensorType(v.type())) static_values.insert(v.name());
    }
  }
  for (const auto& t : graph.initializer()) static_values.insert(t.name());
  for (const auto& node : graph.node()) {
    for (const std::string& out : node.output()) {
      if (!out.empty() && !static_values.contains(out)) return false;
    }
  }
  return true;
}

bool SameStaticType(const onnx::TypeProto& a, const onnx::TypeProto& b) {
  if (!StaticTensorType(a) || !StaticTensorType(b) ||
      a.tensor_type().elem_type() != b.tensor_type().elem_type()) {
    return false;
  }
  const auto& da = a.tensor_type().shape().dim();
  const auto& db = b.tensor_type().shape().dim();
  if (da.size() != db.size()) return false;
  for (int i = 0; i < da.size(); ++i) {
    if (da[i].dim_value() != db[i].dim_value()) return false;
  }
  return true;
}

// The type `graph` gives value `name` (an input, output or value_info).
const onnx::TypeProto* TypeIn(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto* list : {&graph.output(), &graph.value_info(), &graph.input()}) {
    for (const auto& v : *list) {
      if (v.name() == name && v.has_type()) return &v.type();
    }
  }
  return nullptr;
}

// A Loop body whose formal inputs the model leaves untyped (ONNX's
// function expansions do: Range, ...) is typed as a model of its own:
// iteration number i64[], condition bool[], each carried value typed as
// the Loop's operand, the outer values it reads as typed inputs. Kept only
// when inference types every value and each carried value leaves the body
// with the static type it entered with: that type then holds on every
// iteration (induction), so the body's types are those of any iteration.
// Returns whether the body was typed.
bool TypeLoopBody(const onnx::ModelProto& model, onnx::GraphProto* graph, onnx::NodeProto* node,
                  const OuterTypes& outer, const FoldShapesOptions& options) {
  onnx::GraphProto* body = nullptr;
  for (auto& a : *node->mutable_attribute()) {
    if (a.name() == "body" && a.has_g()) body = a.mutable_g();
  }
  const int nc = node->input_size() - 2;
  if (body == nullptr || nc < 0 || body->input_size() != 2 + nc ||
      body->output_size() < 1 + nc || body->sparse_initializer_size() > 0) {
    return false;
  }
  bool open = false;
  for (const auto& in : body->input()) open = open || !StaticTensorType(in.type());
  if (!open) return false;
  std::vector<onnx::TypeProto> formal(2 + nc);
  formal[0].mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  formal[0].mutable_tensor_type()->mutable_shape();
  formal[1].mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  formal[1].mutable_tensor_type()->mutable_shape();
  for (int i = 0; i < nc; ++i) {
    auto it = outer.find(node->input(2 + i));
    if (it == outer.end() || !StaticTensorType(it->second)) return false;
    formal[2 + i] = it->second;
  }
  onnx::ModelProto alone;
  alone.set_ir_version(std::max<int64_t>(model.ir_version(), 4));
  *alone.mutable_opset_import() = model.opset_import();
  *alone.mutable_graph() = *body;
  for (int i = 0; i < 2 + nc; ++i) {
    onnx::ValueInfoProto* in = alone.mutable_graph()->mutable_input(i);
    if (StaticTensorType(in->type())) {
      if (!SameStaticType(in->type(), formal[i]) && i >= 2) return false;
      formal[i] = in->type();
    }
    *in->mutable_type() = formal[i];
  }
  absl::flat_hash_set<std::string> reads;
  for (const std::string& name : OuterScopeNames(*body)) {
    auto it = outer.find(name);
    if (it == outer.end() || !reads.insert(name).second) continue;
    onnx::ValueInfoProto* in = alone.mutable_graph()->add_input();
    in->set_name(name);
    *in->mutable_type() = it->second;
  }
  std::vector<std::string> failures;
  absl::StatusOr<FoldShapesStats> stats = FoldToFixpoint(&alone, options, &failures);
  const onnx::GraphProto& typed = alone.graph();
  if (!stats.ok() || !failures.empty() || !EveryValueTyped(typed)) return false;
  for (int i = 0; i < nc; ++i) {
    const onnx::TypeProto* t = TypeIn(typed, typed.output(1 + i).name());
    if (t == nullptr || !SameStaticType(*t, formal[2 + i])) return false;
  }
  for (int i = 0; i < 2 + nc; ++i) *body->mutable_input(i)->mutable_type() = formal[i];
  for (int o = 0; o < body->output_size(); ++o) {
    if (const onnx::TypeProto* t = TypeIn(typed, typed.output(o).name())) {
      *body->mutable_output(o)->mutable_type() = *t;
    }
  }
  onnx::GraphProto* folded = alone.mutable_graph();
  body->mutable_node()->Swap(folded->mutable_node());
  body->mutable_initializer()->Swap(folded->mutable_initializer());
  RemoveIf(folded->mutable_value_info(), [&](const onnx::ValueInfoProto& v) {
    return reads.contains(v.name());
  });
  body->mutable_value_info()->Swap(folded->mutable_value_info());
  // The Loop's final values have their carried values' types too (zero
  // iterations: the initial values). libonnx's Loop inference drops
  // carried shapes, so they are written here.
  for (int i = 0; i < nc && i < node->output_size(); ++i) {
    const std::string& name = node->output(i);
    if (name.empty()) continue;
    onnx::ValueInfoProto* entry = nullptr;
    for (auto* list : {graph->mutable_output(), graph->mutable_value_info()}) {
      for (auto& v : *list) {
        if (v.name() == name) entry = &v;
      }
    }
    if (entry == nullptr) {
      entry = graph->add_value_info();
      entry->set_name(name);
    }
    if (!StaticTensorType(entry->type())) *entry->mutable_type() = formal[2 + i];
  }
  return true;
}

// The node errors of libonnx's shape inference in strict mode on `model`
// (the non-strict inference the fold runs skips such nodes silently), one
// per node: "(op_type:X, node name: Y): [ShapeInferenceError] ...".
// `model`'s value types may gain what the strict run infers.
std::vector<std::string> StrictInferenceErrors(onnx::ModelProto* model) {
  try {
    onnx::shape_inference::InferShapes(
        *model, GuardedSchemas(),
        onnx::ShapeInferenceOptions(/*check_type_val=*/false, /*strict_mode_val=*/1,
                                    /*data_prop_val=*/false));
  } catch (const std::exception& e) {
    // "[ShapeInferenceError] Inference error(s): (op_type:X, node name: Y):
    // [ShapeInferenceError] ...\n(op_type:...".
    const std::string what = e.what();
    const size_t first = what.find("(op_type:");
    if (first == std::string::npos) return {};
    return absl::StrSplit(what.substr(first), '\n', absl::SkipEmpty());
  }
  return {};
}

// The first node error of libonnx's strict inference on `model` when it is
// a shape or type inference error; empty otherwise.
std::string FirstInferenceError(onnx::ModelProto* model) {
  const std::vector<std::string> errors = StrictInferenceErrors(model);
  if (errors.empty() || (!absl::StrContains(errors[0], "[ShapeInferenceError]") &&
                         !absl::StrContains(errors[0], "[TypeInferenceError]"))) {
    return "";
  }
  return errors[0];
}

// The error of a node libonnx's inference on `model` was refused by a guard
// of GuardedSchemas(): the model breaks an ONNX rule libonnx 1.12 does not
// check before reading past a tensor's dims.
absl::Status GuardRefusalError(onnx::ModelProto* model) {
  for (const std::string& error : StrictInferenceErrors(model)) {
    // "(op_type:Conv, node name: c): [ShapeInferenceError] <guard><why>".
    const size_t guard = error.find(kGuardRefusal);
    if (guard == std::string::npos) continue;
    const std::string why = error.substr(guard + strlen(kGuardRefusal));
    const std::string op_key = "(op_type:", name_key = ", node name: ";
    const size_t name = error.find(name_key);
    const size_t end = error.find("): ", name);
    if (!absl::StartsWith(error, op_key) || name == std::string::npos ||
        end == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("ONNX shape inference: ", why));
    }
    const std::string op = error.substr(op_key.size(), name - op_key.size());
    const std::string node = error.substr(name + name_key.size(), end - name - name_key.size());
    return absl::InvalidArgumentError(
        absl::StrCat("node '", EscapeForMessage(node), "' (", EscapeForMessage(op), "): ", why));
  }
  return absl::InvalidArgumentError(
      "ONNX shape inference refused a node whose inputs' ranks break its operator's rules");
}

// Outer constants at most this large that a branch reads are given to its
// fold as data, not only as types: shape arithmetic in branches reads them
// (Slice bounds, Concat parts of a Reshape target, Gather indices).
constexpr int64_t kMaxPassedConstantElements = 4096;

// The small constants of `graph` by name: its initializers and the tensors
// of its Constant nodes, within kMaxPassedConstantElements (detached ones
// excluded: their data is elsewhere).
absl::flat_hash_map<std::string, const onnx::TensorProto*> SmallConstants(
    const onnx::GraphProto& graph, const FoldShapesOptions& options) {
  absl::flat_hash_map<std::string, const onnx::TensorProto*> out;
  auto small = [](const onnx::TensorProto& t) {
    std::optional<int64_t> n = Elements(Dims(t.dims().begin(), t.dims().end()));
    return n.has_value() && *n <= kMaxPassedConstantElements && !t.has_data_location();
  };
  for (const auto& t : graph.initializer()) {
    if (options.detached != nullptr && options.detached->contains(t.name())) continue;
    if (small(t)) out[t.name()] = &t;
  }
  for (const auto& node : graph.node()) {
    if (!node.domain().empty() || node.op_type() != "Constant" || node.output_size() != 1 ||
        node.attribute_size() != 1 || node.attribute(0).name() != "value" ||
        !node.attribute(0).has_t() || !small(node.attribute(0).t())) {
      continue;
    }
    out[node.output(0)] = &node.attribute(0).t();
  }
  return out;
}

// Each If branch of `graph`'s nodes is folded as a model of its own: the
// outer values it reads become typed inputs (small constants: initializers
// with their data), so shape inference and folding
// run on it to their fixpoint (Ifs in it included, recursively), and its
// nodes, initializers and value types replace the branch's. Loop bodies
// with untyped formal inputs are typed (TypeLoopBody; `typed_loops` counts
// them); other Loop and Scan bodies are left alone: their inputs' declared
// types need not hold on every iteration. A branch output the folding
// types statically takes that type (the branch declares it with the
// exporter's symbolic dims), so the next inference round types the If's
// outputs from both branches' static types; `retyped` counts such outputs.
// Returns the Ifs inlined in branches.
absl::StatusOr<int> FoldBranches(onnx::ModelProto* model, onnx::GraphProto* graph,
                                 const OuterTypes& outer, const FoldShapesOptions& options,
                                 std::vector<std::string>* warnings, int* typed_loops,
                                 int* retyped) {
  FoldShapesOptions sub_options = options;
  sub_options.file_index = nullptr;
  sub_options.detached = nullptr;
  // libonnx 1.12's data propagation crashes (SIGSEGV, in Python too) on
  // silero-vad-v6's branch once its inner Ifs are inlined; the folding here
  // computes what it would propagate (Shape, Gather, Concat, ...) anyway.
  sub_options.data_propagation = false;
  int inlined = 0;
  const absl::flat_hash_map<std::string, const onnx::TensorProto*> constants =
      SmallConstants(*graph, options);
  for (onnx::NodeProto& node : *graph->mutable_node()) {
    if (node.domain().empty() && node.op_type() == "Loop") {
      if (TypeLoopBody(*model, graph, &node, outer, sub_options)) ++*typed_loops;
      continue;
    }
    if (!node.domain().empty() || node.op_type() != "If") continue;
    // Unfit branches found by an earlier call (and any such attribute the
    // model brings) are kept: their fold would fail again.
    absl::flat_hash_set<std::string> unfit;
    for (const auto& a : node.attribute()) {
      if (absl::StartsWith(a.name(), ir::kAttrUnfitBranchPrefix)) {
        unfit.insert(a.name().substr(std::strlen(ir::kAttrUnfitBranchPrefix)));
      }
    }
    std::vector<std::pair<std::string, std::string>> found_unfit;  // branch, why
    for (auto& a : *node.mutable_attribute()) {
      if (!a.has_g() || unfit.contains(a.name())) continue;
      onnx::GraphProto* branch = a.mutable_g();
      onnx::ModelProto alone;
      alone.set_ir_version(std::max<int64_t>(model->ir_version(), 4));
      *alone.mutable_opset_import() = model->opset_import();
      *alone.mutable_graph() = *branch;
      absl::flat_hash_set<std::string> reads, passed;
      bool all_static = true;  // every outer value the branch reads
      for (const std::string& name : OuterScopeNames(*branch)) {
        if (reads.contains(name) || passed.contains(name)) continue;
        if (auto c = constants.find(name); c != constants.end()) {
          onnx::TensorProto* t = alone.mutable_graph()->add_initializer();
          *t = *c->second;
          t->set_name(name);
          passed.insert(name);
          continue;
        }
        auto it = outer.find(name);
        if (it == outer.end()) {
          all_static = false;
          continue;
        }
        all_static = all_static && StaticTensorType(it->second);
        reads.insert(name);
        onnx::ValueInfoProto* in = alone.mutable_graph()->add_input();
        in->set_name(name);
        *in->mutable_type() = it->second;
      }
      // Kept only when inference typed the whole folded branch.
      std::vector<std::string> failures;
      absl::StatusOr<FoldShapesStats> stats = FoldToFixpoint(&alone, sub_options, &failures);
      const bool typed = stats.ok() && failures.empty() && EveryValueTyped(alone.graph());
      // Inference refusing a branch whose outer values all have static
      // types: the branch cannot run with these shapes (silero VAD's
      // 8 kHz branch given a 16 kHz chunk: its LSTM input gets rank 5).
      if (stats.ok() && all_static && (!typed || !EveryValueStatic(alone.graph()))) {
        std::string why = stats->inference_error;
        if (why.empty()) why = FirstInferenceError(&alone);
        if (!why.empty()) found_unfit.emplace_back(a.name(), why);
      }
      if (!typed) continue;
      inlined += stats->inlined_ifs;
      onnx::GraphProto* folded = alone.mutable_graph();
      for (int o = 0; o < branch->output_size() && o < folded->output_size(); ++o) {
        const onnx::TypeProto* t = TypeIn(*folded, folded->output(o).name());
        if (t == nullptr || !StaticTensorType(*t) ||
            SameStaticType(*t, branch->output(o).type())) {
          continue;
        }
        *branch->mutable_output(o)->mutable_type() = *t;
        ++*retyped;
      }
      branch->mutable_node()->Swap(folded->mutable_node());
      // The outer constants stay the enclosing graph's (read by scope).
      RemoveIf(folded->mutable_initializer(), [&](const onnx::TensorProto& t) {
        return passed.contains(t.name());
      });
      branch->mutable_initializer()->Swap(folded->mutable_initializer());
      RemoveIf(folded->mutable_value_info(), [&](const onnx::ValueInfoProto& v) {
        return reads.contains(v.name()) || passed.contains(v.name());
      });
      branch->mutable_value_info()->Swap(folded->mutable_value_info());
    }
    for (const auto& [name, why] : found_unfit) {
      onnx::AttributeProto* attr = node.add_attribute();
      attr->set_name(absl::StrCat(ir::kAttrUnfitBranchPrefix, name));
      attr->set_type(onnx::AttributeProto::STRING);
      attr->set_s(absl::StrCat("ONNX shape inference: ", why));
      unfit.insert(name);
    }
    // An unfit branch never yields values: it takes the other branch's
    // static output types, so the If's outputs are typed from that branch.
    if (unfit.size() == 1) {
      onnx::GraphProto* fit = nullptr;
      onnx::GraphProto* bad = nullptr;
      for (auto& a : *node.mutable_attribute()) {
        if (!a.has_g()) continue;
        (unfit.contains(a.name()) ? bad : fit) = a.mutable_g();
      }
      if (fit != nullptr && bad != nullptr && fit->output_size() == bad->output_size()) {
        for (int o = 0; o < fit->output_size(); ++o) {
          const onnx::TypeProto* t = TypeIn(*fit, fit->output(o).name());
          if (t == nullptr || !StaticTensorType(*t) ||
              SameStaticType(*t, bad->output(o).type())) {
            continue;
          }
          *bad->mutable_output(o)->mutable_type() = *t;
          ++*retyped;
        }
      }
    }
  }
  return inlined;
}

}  // namespace

namespace {

absl::StatusOr<FoldShapesStats> FoldToFixpoint(onnx::ModelProto* model,
                                               const FoldShapesOptions& options,
                                               std::vector<std::string>* warnings) {
  FoldShapesStats stats;
  Folder folder(model->mutable_graph(), options, model->ir_version() < 4);
  int subgraph_inlined = 0;
  for (int round = 0;; ++round) {
    const int64_t refused = GuardRefusals();
    try {
      ++stats.inference_runs;
      onnx::shape_inference::InferShapes(
          *model, GuardedSchemas(),
          onnx::ShapeInferenceOptions(/*check_type_val=*/false,
                                      /*strict_mode_val=*/0,
                                      /*data_prop_val=*/options.data_propagation));
    } catch (const std::exception& e) {
      stats.inference_error = OneLine(e.what());
      warnings->push_back(absl::StrCat(
          "ONNX shape inference failed (", stats.inference_error,
          "); values it did not reach keep their declared shapes"));
      return stats;
    }
    if (GuardRefusals() != refused) return GuardRefusalError(model);
    if (round + 1 >= options.max_rounds) break;
    KILN_ASSIGN_OR_RETURN(int folded, folder.Round());
    if (folded == 0) {
      // The branches last, once this graph's own types are final.
      int typed_loops = 0;
      int retyped = 0;
      KILN_ASSIGN_OR_RETURN(int sub_inlined,
                            FoldBranches(model, model->mutable_graph(),
                                         folder.TypesForSubgraphs(), options, warnings,
                                         &typed_loops, &retyped));
      subgraph_inlined += sub_inlined;
      // A typed Loop body types what follows the Loop in the next round,
      // a retyped branch output what follows its If.
      if (typed_loops > 0 || retyped > 0) folded = -1;
    }
    stats.inlined_ifs = folder.inlined_ifs() + subgraph_inlined;
    stats.folded_nodes += std::max(folded, 0);
    if (folded == 0) return stats;
  }
  warnings->push_back(absl::StrCat(
      "shape folding stopped after ", options.max_rounds,
      " rounds of shape inference; some shapes may stay dynamic"));
  return stats;
}

}  // namespace

namespace {

// Drops the unfit-branch marks a model brings: only the fold sets them.
void DropUnfitMarks(onnx::GraphProto* graph) {
  for (onnx::NodeProto& node : *graph->mutable_node()) {
    RemoveIf(node.mutable_attribute(), [](const onnx::AttributeProto& a) {
      return absl::StartsWith(a.name(), ir::kAttrUnfitBranchPrefix);
    });
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) DropUnfitMarks(a.mutable_g());
      for (auto& sub : *a.mutable_graphs()) DropUnfitMarks(&sub);
    }
  }
}

}  // namespace

absl::StatusOr<FoldShapesStats> InferShapesToFixpoint(
    onnx::ModelProto* model, const FoldShapesOptions& options,
    std::vector<std::string>* warnings) {
  DropUnfitMarks(model->mutable_graph());
  return FoldToFixpoint(model, options, warnings);
}

}  // namespace kiln::frontend::onnx_internal
