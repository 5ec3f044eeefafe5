// The lowering driver: buffers for the graph interface, constants and
// intermediates; value operands (views compose index functions); one
// lowering per node through the op table; output binding and verification.
#include "lowering/lower_graph.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/module.h"
#include "ir/loop/verifier.h"
#include "ir/status_macros.h"
#include "lowering/extern_attrs.h"
#include "lowering/lowerer.h"
#include "lowering/ops_fallback.h"

namespace kiln::lowering {
namespace internal {

using ir::loop::BufferKind;
using ir::loop::Const;
using ir::loop::Var;

IndexExpr LinearIndex(const Shape& shape, const Coords& coords) {
  std::vector<IndexExpr> terms;
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    terms.push_back(coords[d] * stride);
    stride *= shape[d];
  }
  return IndexExpr::Sum(std::move(terms));
}

Coords Delinearize(const Shape& shape, const IndexExpr& linear) {
  Coords out(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    IndexExpr q = stride == 1 ? linear : ir::loop::FloorDiv(linear, stride);
    out[d] = d == 0 ? q : ir::loop::Mod(q, std::max<int64_t>(shape[d], 1));
    stride *= std::max<int64_t>(shape[d], 1);
  }
  return out;
}

Coords BroadcastCoords(const Shape& in_shape, const Coords& out) {
  const size_t r = in_shape.size(), n = out.size();
  Coords c(r);
  for (size_t d = 0; d < r; ++d) {
    c[d] = in_shape[d] == 1 ? Const(0) : out[n - r + d];
  }
  return c;
}

std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

// ---------------------------------------------------------------------------
// Emitter.

Emitter::Emitter(Lowerer* lowerer, std::vector<int64_t> ranges,
                 std::vector<int64_t> reduction_ranges, std::string description)
    : lowerer_(lowerer),
      builder_(&lowerer->program(), lowerer->NewKernelName(description),
               ranges, reduction_ranges) {
  num_ranges_ = static_cast<int>(ranges.size());
  extents_ = ranges;
  extents_.insert(extents_.end(), reduction_ranges.begin(),
                  reduction_ranges.end());
  builder_.kernel().description = std::move(description);
  const std::string label = lowerer->NodeLabel();
  if (!label.empty()) builder_.kernel().ops.push_back(label);
}

Coords Emitter::IterCoords() const {
  Coords c;
  for (int k = 0; k < num_ranges_; ++k) c.push_back(i(k));
  return c;
}

IndexExpr Emitter::Simplify(const IndexExpr& e) const {
  return ir::loop::Simplify(e, extents_);
}

absl::StatusOr<int32_t> Emitter::Load(const Operand& op, const Coords& coords) {
  if (op.splat.has_value()) return builder_.Constant(op.dtype, *op.splat);
  KILN_ASSIGN_OR_RETURN(int32_t buffer, lowerer_->BufferOf(op.root));
  return builder_.Load(buffer, Simplify(op.index(coords)));
}

absl::StatusOr<int32_t> Emitter::LoadBroadcast(const Operand& op,
                                               const Coords& out) {
  return Load(op, BroadcastCoords(op.shape, out));
}

void Emitter::Store(int32_t buffer, const Shape& shape, const Coords& coords,
                    int32_t value) {
  builder_.Store(buffer, Simplify(LinearIndex(shape, coords)), value);
}

// ---------------------------------------------------------------------------
// The op table.

void LowerTable::Add(absl::string_view op, LowerFn lowering) {
  if (!lowerings_.emplace(std::string(op), std::move(lowering)).second &&
      status_.ok()) {
    status_ = InternalError("op ", op, " has two lowerings");
  }
}

void LowerTable::AddExternCall(absl::string_view op) {
  Add(op, LowerExternCall);
  extern_calls_.emplace(op);
}

void LowerTable::AddExternCall(absl::string_view op, LowerFn check) {
  Add(op, [check = std::move(check)](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_RETURN_IF_ERROR(check(L, n));
    return LowerExternCall(L, n);
  });
  extern_calls_.emplace(op);
}

void LowerTable::AddExternCallWithLoopForm(
    absl::string_view op,
    std::function<absl::StatusOr<bool>(Lowerer&, const ir::Node&)> loop_form) {
  Add(op, [loop_form = std::move(loop_form)](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(const bool lowered, loop_form(L, n));
    if (lowered) return absl::OkStatus();
    return LowerExternCall(L, n);
  });
  extern_calls_.emplace(op);
}

const LowerFn* LowerTable::Find(absl::string_view op) const {
  auto it = lowerings_.find(op);
  return it == lowerings_.end() ? nullptr : &it->second;
}

bool LowerTable::IsExternCall(absl::string_view op) const {
  return extern_calls_.find(op) != extern_calls_.end();
}

const LowerTable& OpLowerings() {
  static const LowerTable* const table = [] {
    auto* t = new LowerTable;
    AddMathLowerings(*t);
    AddNnLowerings(*t);
    AddTensorLowerings(*t);
    AddReductionLowerings(*t);
    AddLogicalLowerings(*t);
    AddGeneratorLowerings(*t);
    AddQuantizationLowerings(*t);
    AddObjectDetectionLowerings(*t);
    AddRnnLowerings(*t);
    AddFusedLowerings(*t);
    return t;
  }();
  return *table;
}

// ---------------------------------------------------------------------------
// Lowerer.

Lowerer::Lowerer(const ir::Graph& graph, const LoweringOptions& options)
    : graph_(graph), options_(options) {}

std::string Lowerer::NodeLabel() const {
  if (node_ == nullptr) return "";
  if (!node_->name.empty()) return node_->name;
  return absl::StrCat(node_->op, "#", node_index_);
}

std::string Lowerer::NewKernelName(absl::string_view what) {
  std::string op = absl::AsciiStrToLower(
      ir::loop::SanitizeIdentifier(node_ != nullptr ? node_->op : "copy"));
  if (op.size() > 24) op.resize(24);
  (void)what;
  return absl::StrCat("k", kernel_counter_++, "_", op);
}

std::unique_ptr<Emitter> Lowerer::NewKernel(
    std::vector<int64_t> ranges, std::vector<int64_t> reduction_ranges) {
  std::string description = node_ != nullptr ? node_->op : "copy";
  return std::make_unique<Emitter>(this, std::move(ranges),
                                   std::move(reduction_ranges),
                                   std::move(description));
}

std::string Lowerer::UniqueBufferName(const std::string& model_name) {
  std::string base = ir::loop::SanitizeIdentifier(model_name);
  if (static_cast<int>(base.size()) > options_.max_name_length) {
    base.resize(options_.max_name_length);
  }
  std::string name = base;
  for (int k = 1; used_names_.count(name) > 0; ++k) {
    name = absl::StrCat(base, "_", k);
  }
  used_names_.insert(name);
  return name;
}

int32_t Lowerer::AddBuffer(ValueId value, BufferKind kind) {
  const ir::Value& v = graph_.value(value);
  const std::string name = UniqueBufferName(v.name);
  const int32_t b = result_.program.AddBuffer(name, v.dtype, v.shape, kind);
  result_.value_names[name] = v.name;
  return b;
}

Operand Lowerer::OwnedOperand(ValueId v) const {
  Operand op;
  op.dtype = graph_.value(v).dtype;
  op.shape = graph_.value(v).shape;
  op.root = v;
  const Shape shape = op.shape;
  op.index = [shape](const Coords& c) { return LinearIndex(shape, c); };
  return op;
}

std::optional<double> Lowerer::SplatOf(const ir::Tensor& t) const {
  const int64_t n = t.num_elements();
  if (n < 1 || n > options_.max_inline_constant_elements) return std::nullopt;
  if (t.dtype() == DType::kI64) {
    const int64_t v = t.GetAsInt64(0);
    if (v > (int64_t{1} << 53) || v < -(int64_t{1} << 53)) return std::nullopt;
  }
  const double first = t.GetAsDouble(0);
  for (int64_t i = 1; i < n; ++i) {
    const double x = t.GetAsDouble(i);
    if (!(x == first || (std::isnan(x) && std::isnan(first)))) {
      return std::nullopt;
    }
  }
  return first;
}

absl::StatusOr<int32_t> Lowerer::BufferOf(ValueId root) {
  auto it = buffers_.find(root);
  if (it != buffers_.end()) return it->second;
  std::shared_ptr<const ir::Tensor> data = graph_.shared_constant(root);
  if (data == nullptr) {
    auto f = folded_.find(root);
    if (f != folded_.end()) data = f->second;
  }
  if (data == nullptr) {
    return InternalError("value '", graph_.value(root).name,
                         "' has no buffer and is not a constant");
  }
  const int32_t b = AddBuffer(root, BufferKind::kConstant);
  if (data->dtype() != graph_.value(root).dtype ||
      data->shape() != graph_.value(root).shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "constant '", graph_.value(root).name, "' holds ", data->TypeString(),
        " but is declared ", ir::DTypeName(graph_.value(root).dtype),
        ir::ShapeToString(graph_.value(root).shape)));
  }
  result_.constants[b] = data;
  buffers_[root] = b;
  return b;
}

absl::StatusOr<Operand> Lowerer::Input(int i) {
  if (!node_->has_input(i)) return Error("input ", i, " is missing");
  const ValueId v = node_->inputs[i];
  auto it = operands_.find(v);
  if (it == operands_.end()) {
    return InternalError("input '", graph_.value(v).name,
                         "' of ", node_->Describe(), " is not lowered yet");
  }
  return it->second;
}

const ir::Tensor* Lowerer::ConstantInput(int i) const {
  if (!node_->has_input(i)) return nullptr;
  const ValueId v = node_->inputs[i];
  if (const ir::Tensor* t = graph_.constant(v)) return t;
  auto f = folded_.find(v);
  return f == folded_.end() ? nullptr : f->second.get();
}

absl::StatusOr<std::vector<int64_t>> Lowerer::ConstantInts(int i,
                                                           const char* what) {
  if (!HasInput(i)) return Error(what, " (input ", i, ") is missing");
  const ir::Tensor* t = ConstantInput(i);
  if (t == nullptr) {
    return Unimplemented(what, " must be a constant to be lowered");
  }
  if (!ir::IsInteger(t->dtype())) {
    return Error(what, " must be integers, got ", t->TypeString());
  }
  return t->ToInt64Vector();
}

int32_t Lowerer::OutputBuffer(int i) {
  const ValueId v = node_->outputs[i];
  const bool is_output = graph_outputs_.count(v) > 0;
  const int32_t b =
      AddBuffer(v, is_output ? BufferKind::kOutput : BufferKind::kIntermediate);
  buffers_[v] = b;
  operands_[v] = OwnedOperand(v);
  return b;
}

void Lowerer::SetOutputView(int i, Operand op) {
  if (op.root == ir::kNoValue) op.root = node_->outputs[i];
  op.dtype = OutputValue(i).dtype;
  op.shape = OutputValue(i).shape;
  operands_[node_->outputs[i]] = std::move(op);
}

absl::Status Lowerer::SetOutputSame(int i, Operand op) {
  const ir::Value& out = OutputValue(i);
  if (!op.splat.has_value() && op.shape != out.shape) {
    return Error("output '", out.name, "' is ", ir::ShapeToString(out.shape),
                 " but passes through its input of shape ", ir::ShapeToString(op.shape));
  }
  SetOutputView(i, std::move(op));
  return absl::OkStatus();
}

void Lowerer::SetOutputConstant(int i, ir::Tensor t) {
  const ValueId v = node_->outputs[i];
  auto data = std::make_shared<const ir::Tensor>(std::move(t));
  folded_[v] = data;
  Operand op = OwnedOperand(v);
  op.splat = SplatOf(*data);
  operands_[v] = std::move(op);
}

bool Lowerer::IsRowMajorIdentity(const Operand& op) {
  if (op.splat.has_value()) return false;
  auto it = buffers_.find(op.root);
  if (it == buffers_.end()) {
    // A constant without a buffer yet: identity if it is read whole.
    if (graph_.value(op.root).shape != op.shape) return false;
  } else {
    const ir::loop::Buffer& b = result_.program.buffers[it->second];
    if (b.shape != op.shape || !b.IsRowMajor()) return false;
  }
  Coords c;
  for (size_t d = 0; d < op.shape.size(); ++d) c.push_back(Var(d));
  const std::vector<int64_t> extents(op.shape.begin(), op.shape.end());
  return ir::loop::Simplify(op.index(c), extents) ==
         ir::loop::Simplify(LinearIndex(op.shape, c), extents);
}

void Lowerer::CopyKernel(const Operand& src, int32_t dst, const Shape& shape) {
  auto k = NewKernel(shape);
  const Coords c = k->IterCoords();
  absl::StatusOr<int32_t> v = k->Load(src, c);
  // Load only fails for a missing buffer, which BufferOf reported already.
  if (v.ok()) k->Store(dst, shape, c, *v);
}

absl::StatusOr<int32_t> Lowerer::Materialize(const Operand& op) {
  if (IsRowMajorIdentity(op)) return BufferOf(op.root);
  if (!op.splat.has_value()) KILN_RETURN_IF_ERROR(BufferOf(op.root).status());
  ValueId named = op.root != ir::kNoValue ? op.root : node_->inputs[0];
  const std::string name =
      UniqueBufferName(absl::StrCat(graph_.value(named).name, "_view"));
  const int32_t b = result_.program.AddBuffer(name, op.dtype, op.shape,
                                              BufferKind::kIntermediate);
  result_.value_names[name] = graph_.value(named).name;
  CopyKernel(op, b, op.shape);
  return b;
}

namespace {

// Why lowering refuses value `v`: its shape or dtype is not known at
// compile time. Names the value and where it comes from.
absl::Status ShapeRefusal(const ir::Graph& graph, ValueId v) {
  const ir::Value& val = graph.value(v);
  std::string from = "a graph input";
  if (graph.IsConstant(v)) from = "a constant";
  for (const ir::Node& n : graph.nodes()) {
    if (std::find(n.outputs.begin(), n.outputs.end(), v) != n.outputs.end()) {
      from = absl::StrCat("produced by ", n.Describe());
      break;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "value '", val.name, "' (", from, ") has ",
      val.dtype == DType::kInvalid ? "no dtype"
                                   : (val.shape_known
                                          ? absl::StrCat("dynamic shape ",
                                                         ir::ShapeToString(val.shape))
                                          : std::string("unknown rank")),
      "; lowering needs static shapes"));
}

}  // namespace

absl::Status Lowerer::CheckStaticShapes() const {
  // With reference fallback, values of data-dependent shape flow between
  // reference calls (LowerNode makes every node touching one a call); the
  // graph inputs still need static shapes, every value a dtype.
  const bool fallback = static_cast<bool>(options_.reference_fallback);
  auto check = [&](ValueId v, bool graph_input) -> absl::Status {
    const ir::Value& val = graph_.value(v);
    if (val.dtype != DType::kInvalid &&
        (HasStaticShape(val) || (fallback && !graph_input))) {
      return absl::OkStatus();
    }
    return ShapeRefusal(graph_, v);
  };
  for (ValueId v : graph_.inputs()) KILN_RETURN_IF_ERROR(check(v, true));
  for (ValueId v : graph_.outputs()) KILN_RETURN_IF_ERROR(check(v, false));
  for (const ir::Node& n : graph_.nodes()) {
    for (ValueId v : n.inputs) {
      if (v != ir::kNoValue) KILN_RETURN_IF_ERROR(check(v, false));
    }
    for (ValueId v : n.outputs) {
      if (v != ir::kNoValue) KILN_RETURN_IF_ERROR(check(v, false));
    }
  }
  return absl::OkStatus();
}

absl::Status Lowerer::LowerNode(const ir::Node& node) {
  for (ValueId v : node.inputs) {
    if (v != ir::kNoValue && !operands_.contains(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          node.Describe(), ": input '", graph_.value(v).name,
          "' is not defined before the node (graph not topologically sorted?)"));
    }
  }
  auto with_table = [&]() -> absl::Status {
    // kiln's own fused library calls (the default graph pipeline's output)
    // lower to extern kernels like the ONNX ops they replace.
    const bool kiln_fused = node.domain == ir::loop::kKilnDomain && IsKilnFusedOp(node.op);
    if (!node.domain.empty() && node.domain != "ai.onnx" && !kiln_fused) {
      return Unimplemented("op domain '", node.domain, "' is not supported");
    }
    const LowerFn* lowering = OpLowerings().Find(node.op);
    if (lowering == nullptr) {
      return Unimplemented("no lowering for op ", node.op);
    }
    KILN_RETURN_IF_ERROR((*lowering)(*this, node));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const ValueId o = node.outputs[i];
      if (o != ir::kNoValue && !operands_.contains(o)) {
        return Unimplemented("optional output ", i, " ('",
                             graph_.value(o).name, "') is not supported");
      }
    }
    return absl::OkStatus();
  };
  if (!options_.reference_fallback) return with_table();

  // Reference fallback: a node touching a value of data-dependent shape has
  // no loop or library form; a node whose lowering is missing or refuses
  // its form (Unimplemented) is undone and becomes a reference call.
  const std::vector<ValueId> reads = ReferenceCallReads(graph_, node);
  auto reference_call = [&](const absl::Status& refusal) -> absl::Status {
    std::vector<Operand> operands;
    for (ValueId v : reads) {
      auto it = operands_.find(v);
      if (it == operands_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            node.Describe(), ": its subgraph captures '", graph_.value(v).name,
            "', which is not defined before the node"));
      }
      operands.push_back(it->second);
    }
    return LowerReferenceCall(*this, node, reads, operands, refusal);
  };
  for (const std::vector<ValueId>* values : {&reads, &node.outputs}) {
    for (ValueId v : *values) {
      if (v != ir::kNoValue && !HasStaticShape(graph_.value(v))) {
        return reference_call(ShapeRefusal(graph_, v));
      }
    }
  }
  const Checkpoint mark = Mark();
  absl::Status lowered = with_table();
  if (lowered.ok() || lowered.code() != absl::StatusCode::kUnimplemented) return lowered;
  Rollback(mark, node);
  return reference_call(lowered);
}

Lowerer::Checkpoint Lowerer::Mark() const {
  return {result_.program.buffers.size(), result_.program.kernels.size(), kernel_counter_};
}

void Lowerer::Rollback(const Checkpoint& mark, const ir::Node& node) {
  for (size_t b = mark.buffers; b < result_.program.buffers.size(); ++b) {
    const std::string& name = result_.program.buffers[b].name;
    used_names_.erase(name);
    result_.value_names.erase(name);
    result_.constants.erase(static_cast<int32_t>(b));
  }
  result_.program.buffers.resize(mark.buffers);
  result_.program.kernels.resize(mark.kernels);
  kernel_counter_ = mark.kernel_counter;
  for (auto it = buffers_.begin(); it != buffers_.end();) {
    if (it->second >= static_cast<int32_t>(mark.buffers)) {
      buffers_.erase(it++);
    } else {
      ++it;
    }
  }
  for (ValueId o : node.outputs) {
    if (o == ir::kNoValue) continue;
    operands_.erase(o);
    folded_.erase(o);
  }
}

absl::StatusOr<bool> Lowerer::TryLibraryCall(const ir::Node& node, std::string* why) {
  const Checkpoint mark = Mark();
  KILN_RETURN_IF_ERROR(LowerExternCall(*this, node));
  if (!options_.library_call) return true;
  const absl::Status taken = options_.library_call(result_, result_.program.kernels.back());
  if (taken.ok()) return true;
  if (why != nullptr) *why = std::string(taken.message());
  Rollback(mark, node);
  return false;
}

absl::Status Lowerer::BindOutputs() {
  std::set<int32_t> claimed;
  node_ = nullptr;
  for (ValueId v : graph_.outputs()) {
    if (!HasStaticShape(graph_.value(v))) {
      // Owned by the reference call producing it; sized at run time.
      auto owned = buffers_.find(v);
      if (owned == buffers_.end()) {
        return InternalError("graph output '", graph_.value(v).name,
                             "' of data-dependent shape has no buffer");
      }
      result_.outputs.push_back(owned->second);
      continue;
    }
    const Operand& op = operands_.at(v);
    auto it = buffers_.find(op.root);
    if (!op.splat.has_value() && it != buffers_.end() &&
        result_.program.buffers[it->second].kind == BufferKind::kOutput &&
        claimed.count(it->second) == 0 && IsRowMajorIdentity(op)) {
      claimed.insert(it->second);
      result_.outputs.push_back(it->second);
      continue;
    }
    const int32_t b = AddBuffer(v, BufferKind::kOutput);
    claimed.insert(b);
    if (!op.splat.has_value()) KILN_RETURN_IF_ERROR(BufferOf(op.root).status());
    CopyKernel(op, b, graph_.value(v).shape);
    result_.outputs.push_back(b);
  }
  return absl::OkStatus();
}

absl::StatusOr<ir::loop::LoopModule> Lowerer::Run() {
  KILN_RETURN_IF_ERROR(OpLowerings().status());
  KILN_RETURN_IF_ERROR(CheckStaticShapes());
  for (ValueId v : graph_.outputs()) graph_outputs_.insert(v);
  for (ValueId v : graph_.inputs()) {
    const int32_t b = AddBuffer(v, BufferKind::kInput);
    buffers_[v] = b;
    operands_[v] = OwnedOperand(v);
    result_.inputs.push_back(b);
  }
  for (const auto& [v, data] : graph_.constants()) {
    if (operands_.contains(v)) continue;  // an input with a default value
    Operand op = OwnedOperand(v);
    op.splat = SplatOf(*data);
    operands_[v] = std::move(op);
  }
  // Values some node produces, gathered once (one scan of the nodes per
  // graph output was quadratic in a model with many outputs).
  absl::flat_hash_set<ValueId> produced;
  for (const ir::Node& n : graph_.nodes()) produced.insert(n.outputs.begin(), n.outputs.end());
  for (ValueId v : graph_.outputs()) {
    if (!operands_.contains(v) && !produced.contains(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output '", graph_.value(v).name, "' is never produced"));
    }
  }
  for (size_t n = 0; n < graph_.nodes().size(); ++n) {
    node_ = &graph_.nodes()[n];
    node_index_ = static_cast<int>(n);
    KILN_RETURN_IF_ERROR(LowerNode(*node_));
  }
  KILN_RETURN_IF_ERROR(BindOutputs());
  absl::Status verified = ir::loop::VerifyProgram(result_.program);
  if (!verified.ok()) {
    return InternalError("lowered program fails verification: ",
                         verified.message());
  }
  return std::move(result_);
}

}  // namespace internal

absl::StatusOr<ir::loop::LoopModule> LowerGraph(const ir::Graph& graph,
                                          const LoweringOptions& options) {
  internal::Lowerer lowerer(graph, options);
  return lowerer.Run();
}

}  // namespace kiln::lowering
