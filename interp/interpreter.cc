// The reference interpreter: walks nodes in order, calls each op's kernel,
// frees every value after its last use.
#include "interp/interpreter.h"

#include <algorithm>
#include <new>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "interp/op_registry.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::Graph;
using ir::Node;
using ir::Tensor;
using ir::ValueId;

// Values of one graph during one run, with a link to the enclosing scope so
// subgraph captures resolve by name.
class Scope {
 public:
  Scope(const Graph& graph, const Scope* parent, int64_t max_result_elements = 0)
      : graph_(graph),
        parent_(parent),
        opset_(parent ? parent->opset() : graph.opset()),
        max_result_elements_(parent ? parent->max_result_elements() : max_result_elements),
        values_(graph.num_values()) {}

  // The model's opset: subgraphs inherit the top-level graph's.
  int64_t opset() const { return opset_; }
  // RunOptions::max_result_elements, inherited as the opset is.
  int64_t max_result_elements() const { return max_result_elements_; }

  const Tensor* Get(ValueId id) const {
    if (values_[id].has_value()) return &*values_[id];
    if (const Tensor* c = graph_.constant(id)) return c;
    return nullptr;
  }
  void Set(ValueId id, Tensor t) { values_[id] = std::move(t); }
  void Free(ValueId id) { values_[id].reset(); }

  // The tensor named `name` here or in an enclosing scope.
  const Tensor* Lookup(const std::string& name) const {
    if (std::optional<ValueId> id = graph_.FindValue(name)) {
      if (const Tensor* t = Get(*id)) return t;
    }
    return parent_ ? parent_->Lookup(name) : nullptr;
  }

 private:
  const Graph& graph_;
  const Scope* parent_;
  int64_t opset_;
  int64_t max_result_elements_;
  std::vector<std::optional<Tensor>> values_;
};

// Default-domain ops by name; kiln's own ops (domain "kiln") as
// "kiln.<op>". Dotted names are never default-domain ops.
const OpKernel* FindKernel(const OpRegistry& registry, const Node& node) {
  if (node.domain == "kiln") return registry.Find(absl::StrCat("kiln.", node.op));
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  if (absl::StrContains(node.op, '.')) return nullptr;
  return registry.Find(node.op);
}

absl::Status CheckDeclaredType(const Graph& graph, const Node& node,
                               ValueId id, const Tensor& t) {
  const ir::Value& v = graph.value(id);
  if (v.dtype != ir::DType::kInvalid && v.dtype != t.dtype()) {
    return kiln::InternalError(node.Describe(), " produced ", t.TypeString(), " for '",
                               EscapeForMessage(v.name), "' declared ", ir::DTypeName(v.dtype));
  }
  return absl::OkStatus();
}

// The node's kernel; an allocation that fails inside it (std::bad_alloc
// from a Tensor) becomes ResourceExhausted naming the node's outputs.
absl::StatusOr<std::vector<Tensor>> RunKernelChecked(const OpKernel& kernel,
                                                     OpContext& ctx) {
  try {
    return kernel(ctx);
  } catch (const std::bad_alloc&) {
    std::vector<std::string> outs;
    int64_t bytes = 0;
    for (ValueId out : ctx.node.outputs) {
      if (out == ir::kNoValue) continue;
      const ir::Value& v = ctx.graph.value(out);
      outs.push_back(
          absl::StrCat("'", EscapeForMessage(v.name), "' ", ir::TypeString(v.dtype, v.shape)));
      const int64_t n = ir::NumElements(v.shape);
      if (n > 0) bytes += n * static_cast<int64_t>(ir::DTypeSize(v.dtype));
    }
    return ir::OutOfMemoryError(
        absl::StrCat(ctx.node.Describe(), ", computing ", absl::StrJoin(outs, ", "), ","),
        bytes);
  }
}

absl::StatusOr<std::vector<Tensor>> RunInScope(const Graph& graph, absl::Span<const Tensor> inputs,
                                               const Scope* parent,
                                               int64_t max_result_elements = 0) {
  if (inputs.size() != graph.inputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", EscapeForMessage(graph.name()),
                                                   "' takes ", graph.inputs().size(),
                                                   " inputs, got ", inputs.size()));
  }
  Scope scope(graph, parent, max_result_elements);
  for (size_t i = 0; i < inputs.size(); ++i) {
    try {
      scope.Set(graph.inputs()[i], inputs[i]);
    } catch (const std::bad_alloc&) {
      return ir::OutOfMemoryError(
          absl::StrCat("the copy of input '", EscapeForMessage(graph.value(graph.inputs()[i]).name),
                       "' ", inputs[i].TypeString()),
          static_cast<int64_t>(inputs[i].byte_size()));
    }
  }
  for (const Graph::Capture& c : graph.captures()) {
    const Tensor* outer = parent ? parent->Lookup(c.outer_name) : nullptr;
    if (outer == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("graph '", EscapeForMessage(graph.name()),
                                                     "' captures '", EscapeForMessage(c.outer_name),
                                                     "', which no enclosing graph defines"));
    }
    scope.Set(c.inner, *outer);
  }

  // Last use of each value, so intermediates are freed early. Subgraphs may
  // read any enclosing value by name, so nodes with subgraphs pin everything.
  std::vector<int> last_use(graph.num_values(), -1);
  const int num_nodes = static_cast<int>(graph.nodes().size());
  for (int n = 0; n < num_nodes; ++n) {
    for (ValueId in : graph.nodes()[n].inputs) {
      if (in != ir::kNoValue) last_use[in] = n;
    }
    for (const auto& [key, attr] : graph.nodes()[n].attrs) {
      if (std::holds_alternative<std::shared_ptr<const Graph>>(attr)) {
        std::fill(last_use.begin(), last_use.end(), num_nodes);
      }
    }
  }
  for (ValueId out : graph.outputs()) last_use[out] = num_nodes;
  if (parent != nullptr) {  // nested subgraphs may capture anything here
    std::fill(last_use.begin(), last_use.end(), num_nodes);
  }

  const OpRegistry& registry = OpRegistry::Default();
  for (int n = 0; n < num_nodes; ++n) {
    const Node& node = graph.nodes()[n];
    auto where = [&] {
      return absl::StrCat(node.Describe(), " [#", n, "]");
    };
    const OpKernel* kernel = FindKernel(registry, node);
    if (kernel == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          where(), ": op '", node.domain.empty() ? "" : EscapeForMessage(node.domain),
          node.domain.empty() ? "" : ".", EscapeForMessage(node.op), "' has no reference kernel"));
    }
    OpContext ctx{node, graph, scope.opset(), {}, {}, scope.max_result_elements()};
    for (ValueId in : node.inputs) {
      if (in == ir::kNoValue) {
        ctx.inputs.push_back(nullptr);
        continue;
      }
      const Tensor* t = scope.Get(in);
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(where(), ": input '",
                                                       EscapeForMessage(graph.value(in).name),
                                                       "' has no value (not produced before use)"));
      }
      ctx.inputs.push_back(t);
    }
    ctx.run_subgraph = [&scope](const Graph& sub,
                                absl::Span<const Tensor> sub_inputs) {
      return RunInScope(sub, sub_inputs, &scope);
    };
    absl::StatusOr<std::vector<Tensor>> outs = RunKernelChecked(*kernel, ctx);
    if (!outs.ok()) {
      absl::Status s = outs.status();
      // Kernels name the node already (OpContext::Error); add the index.
      absl::string_view msg = s.message();
      const std::string described = absl::StrCat(node.Describe(), ": ");
      if (absl::StartsWith(msg, described)) msg.remove_prefix(described.size());
      return absl::Status(s.code(), absl::StrCat(where(), ": ", msg));
    }
    // Extra results are trailing optional outputs the node does not declare
    // (e.g. BatchNormalization's running statistics): dropped.
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      ValueId out = node.outputs[i];
      if (out == ir::kNoValue) continue;
      if (i >= outs->size()) {
        return kiln::InternalError(where(), " kernel did not produce output ", i, " ('",
                                   EscapeForMessage(graph.value(out).name), "')");
      }
      KILN_RETURN_IF_ERROR(CheckDeclaredType(graph, node, out, (*outs)[i]));
      scope.Set(out, std::move((*outs)[i]));
    }
    for (ValueId in : node.inputs) {
      if (in != ir::kNoValue && last_use[in] == n) scope.Free(in);
    }
  }

  std::vector<Tensor> results;
  results.reserve(graph.outputs().size());
  for (ValueId out : graph.outputs()) {
    const Tensor* t = scope.Get(out);
    if (t == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output '", EscapeForMessage(graph.value(out).name), "' is never produced"));
    }
    results.push_back(*t);
  }
  return results;
}

void CollectUnsupported(const Graph& graph, const OpRegistry& registry,
                        std::set<std::string>* out) {
  for (const Node& node : graph.nodes()) {
    const bool default_domain = node.domain.empty() || node.domain == "ai.onnx";
    if (FindKernel(registry, node) == nullptr) {
      out->insert(default_domain ? node.op
                                 : absl::StrCat(node.domain, ".", node.op));
    }
    for (const auto& [key, attr] : node.attrs) {
      if (auto* sub = std::get_if<std::shared_ptr<const Graph>>(&attr)) {
        CollectUnsupported(**sub, registry, out);
      }
    }
  }
}

}  // namespace

absl::StatusOr<const Tensor*> OpContext::Input(int i) const {
  if (!has_input(i)) return Error("missing input ", i);
  return inputs[i];
}

void OpRegistry::Register(std::string op, OpKernel kernel) {
  auto [it, added] = kernels_.try_emplace(std::move(op), std::move(kernel));
  if (!added && status_.ok()) {
    status_ = kiln::InternalError("op ", it->first, " has two reference kernels");
  }
}

std::vector<std::string> OpRegistry::SupportedOps() const {
  std::vector<std::string> ops;
  for (const auto& [op, kernel] : kernels_) ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

const OpRegistry& OpRegistry::Default() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry;
    RegisterMathOps(r);
    RegisterNnOps(r);
    RegisterTensorOps(r);
    RegisterReductionOps(r);
    RegisterLogicalOps(r);
    RegisterGeneratorOps(r);
    RegisterQuantizationOps(r);
    RegisterObjectDetectionOps(r);
    RegisterRnnOps(r);
    RegisterControlFlowOps(r);
    RegisterFusedOps(r);
    return r;
  }();
  return *registry;
}

absl::StatusOr<std::vector<Tensor>> Run(const Graph& graph, absl::Span<const Tensor> inputs,
                                        const RunOptions& options) {
  KILN_RETURN_IF_ERROR(OpRegistry::Default().status());
  absl::StatusOr<std::vector<Tensor>> results;
  try {
    results = RunInScope(graph, inputs, nullptr, options.max_result_elements);
  } catch (const std::bad_alloc&) {
    // Kernels are covered node by node; this is the values' copies.
    results = absl::ResourceExhaustedError(absl::StrCat("out of memory running graph '",
                                                        EscapeForMessage(graph.name()),
                                                        "' on the reference interpreter"));
  }
  // Every message leaves with model text escaped and capped, whichever
  // kernel or check built it.
  if (!results.ok()) return SanitizedStatus(results.status(), /*keep_line_breaks=*/false);
  return results;
}

std::vector<std::string> UnsupportedOps(const Graph& graph) {
  std::set<std::string> ops;
  CollectUnsupported(graph, OpRegistry::Default(), &ops);
  return {ops.begin(), ops.end()};
}

}  // namespace kiln::interp
