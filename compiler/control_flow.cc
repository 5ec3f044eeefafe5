// File: compiler/control_flow.cc — the subgraphs of If, Loop and Scan as
// graphs of their own (compiler/control_flow.h).
#include "compiler/control_flow.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "ir/message.h"
#include "ir/status_macros.h"
#include "interp/interpreter.h"

namespace kiln::compiler {
namespace {

using ir::loop::Kernel;

// The data of buffer `b` when it is a constant buffer of `value`'s type
// (the captured value it binds); nullptr otherwise.
std::shared_ptr<const ir::Tensor> ConstantCapture(const ConstantBuffers& constants, int32_t b,
                                                  const ir::Value& value) {
  auto it = constants.find(b);
  if (it == constants.end() || it->second == nullptr) return nullptr;
  const ir::Tensor& t = *it->second;
  if (t.dtype() != value.dtype || !value.shape_known || t.shape() != value.shape) return nullptr;
  return it->second;
}

// `branch` with its captures turned into constants (of constant buffers)
// or inputs; `outer_position` maps an outer name to the call input it
// arrives as.
absl::StatusOr<IfBranch> Standalone(const ir::Graph& branch, const Kernel& kernel,
                                    const absl::flat_hash_map<std::string, int>& outer_position,
                                    const ConstantBuffers& constants) {
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
    const int32_t b = kernel.call.inputs[it->second];
    if (auto data = ConstantCapture(constants, b, g.value(c.inner))) {
      g.SetConstant(c.inner, std::move(data));
      continue;
    }
    g.AddInput(c.inner);
    out.buffers.push_back(b);
  }
  return out;
}

// The type a formal input of a subgraph takes where the model leaves it
// untyped or of unknown extent.
struct FormalType {
  ir::DType dtype = ir::DType::kInvalid;
  ir::Shape shape;
};

bool Static(const ir::Value& v) {
  if (!v.shape_known) return false;
  for (int64_t d : v.shape) {
    if (d < 0) return false;
  }
  return true;
}

// `sub` as a graph of its own: its formal inputs (typed by `formal` where
// it leaves them open), then its captures as inputs, those of constant
// buffers as constants; `capture_buffers` gets the buffer of the enclosing
// program bound to each capture input.
absl::StatusOr<ir::Graph> WithCapturesAsInputs(
    const ir::Graph& sub, const Kernel& kernel, const char* op,
    const absl::flat_hash_map<std::string, int>& outer_position,
    const std::vector<std::optional<FormalType>>& formal, const ConstantBuffers& constants,
    std::vector<int32_t>* capture_buffers) {
  if (sub.inputs().size() != formal.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op, " '", kernel.name, "': its body takes ",
                                                   sub.inputs().size(), " inputs, expected ",
                                                   formal.size()));
  }
  std::vector<std::optional<FormalType>> type_of(sub.num_values());
  for (size_t i = 0; i < formal.size(); ++i) {
    const ir::Value& v = sub.value(sub.inputs()[i]);
    if (formal[i].has_value() && (!Static(v) || v.dtype == ir::DType::kInvalid)) {
      type_of[sub.inputs()[i]] = formal[i];
    }
  }
  ir::Graph g;
  g.set_name(sub.name());
  g.set_opset(sub.opset());
  for (ir::ValueId v = 0; v < sub.num_values(); ++v) {
    const ir::Value& value = sub.value(v);
    ir::ValueId id;
    if (type_of[v].has_value()) {
      id = g.AddValue(value.name, type_of[v]->dtype, type_of[v]->shape);
    } else {
      id = value.shape_known ? g.AddValue(value.name, value.dtype, value.shape)
                             : g.AddUnshapedValue(value.name, value.dtype);
    }
    KILN_RET_CHECK(id == v);
  }
  for (const auto& [id, tensor] : sub.constants()) g.SetConstant(id, tensor);
  for (const ir::Node& n : sub.nodes()) {
    ir::Node& copy = g.AddNode(n.op, n.inputs, n.outputs, n.attrs, n.name);
    copy.domain = n.domain;
  }
  for (ir::ValueId i : sub.inputs()) g.AddInput(i);
  for (ir::ValueId o : sub.outputs()) g.AddOutput(o);
  for (const ir::Graph::Capture& c : sub.captures()) {
    auto it = outer_position.find(c.outer_name);
    if (it == outer_position.end()) {
      return InternalError(op, " '", kernel.name, "': captured value '", c.outer_name,
                           "' is not an input of its call");
    }
    const int32_t b = kernel.call.inputs[it->second];
    if (auto data = ConstantCapture(constants, b, g.value(c.inner))) {
      g.SetConstant(c.inner, std::move(data));
      continue;
    }
    g.AddInput(c.inner);
    capture_buffers->push_back(b);
  }
  return g;
}

// A reference call of op `op`: its one-node graph, parsed.
absl::StatusOr<ir::Graph> ReferenceCallOf(const Kernel& kernel, const char* op) {
  if (!ir::loop::IsReferenceCall(kernel)) {
    return absl::UnimplementedError(absl::StrCat("'", kernel.name, "' is not a reference call"));
  }
  auto it = kernel.call.attrs.find(ir::loop::kAttrReferenceOp);
  if (it == kernel.call.attrs.end() || !std::holds_alternative<std::string>(it->second) ||
      std::get<std::string>(it->second) != op) {
    return absl::UnimplementedError(absl::StrCat("'", kernel.name, "' is not a ", op));
  }
  auto text = kernel.call.attrs.find(ir::loop::kAttrReferenceGraph);
  if (text == kernel.call.attrs.end() || !std::holds_alternative<std::string>(text->second)) {
    return InternalError("reference call '", kernel.name, "' carries no graph");
  }
  KILN_ASSIGN_OR_RETURN(ir::Graph call, ir::ParseGraph(std::get<std::string>(text->second)));
  if (call.nodes().size() != 1 || call.inputs().size() != kernel.call.inputs.size() ||
      call.outputs().size() != kernel.call.outputs.size()) {
    return InternalError("reference call '", kernel.name, "' does not match its graph");
  }
  return call;
}

// Where the call's node reads and writes: per node input, the buffer of the
// enclosing program (-1 absent); per node output, likewise.
struct CallOperands {
  std::vector<int32_t> inputs, outputs;
  absl::flat_hash_map<std::string, int> outer_position;  // name -> call input
};
CallOperands OperandsOf(const ir::Graph& call, const Kernel& kernel) {
  CallOperands out;
  absl::flat_hash_map<ir::ValueId, int> position;
  for (size_t i = 0; i < call.inputs().size(); ++i) {
    position.emplace(call.inputs()[i], static_cast<int>(i));
    out.outer_position.emplace(call.value(call.inputs()[i]).name, static_cast<int>(i));
  }
  const ir::Node& node = call.nodes()[0];
  for (ir::ValueId v : node.inputs) {
    auto it = v == ir::kNoValue ? position.end() : position.find(v);
    out.inputs.push_back(it == position.end() ? -1 : kernel.call.inputs[it->second]);
  }
  size_t next = 0;
  for (ir::ValueId v : node.outputs) {
    out.outputs.push_back(v == ir::kNoValue || next >= kernel.call.outputs.size()
                              ? -1
                              : kernel.call.outputs[next++]);
  }
  return out;
}

std::optional<FormalType> TypeOfBuffer(const ir::loop::LoopProgram& program, int32_t b,
                                       const std::vector<bool>& dynamic, int drop_axis = -1,
                                       bool drop_batch = false) {
  if (b < 0 || static_cast<size_t>(b) >= program.buffers.size() || dynamic[b]) {
    return std::nullopt;
  }
  FormalType t;
  t.dtype = program.buffers[b].dtype;
  t.shape = program.buffers[b].shape;
  if (drop_batch) {
    if (t.shape.empty()) return std::nullopt;
    t.shape.erase(t.shape.begin());
  }
  if (drop_axis >= 0) {
    if (static_cast<size_t>(drop_axis) >= t.shape.size()) return std::nullopt;
    t.shape.erase(t.shape.begin() + drop_axis);
  }
  return t;
}

// Whether graph output `o` of `body` is its input `i` passed through
// (directly or by an Identity).
bool PassesThrough(const ir::Graph& body, size_t o, size_t i) {
  if (o >= body.outputs().size() || i >= body.inputs().size()) return false;
  const ir::ValueId out = body.outputs()[o], in = body.inputs()[i];
  if (out == in) return true;
  for (const ir::Node& n : body.nodes()) {
    if (n.op == "Identity" && n.domain.empty() && n.outputs.size() == 1 &&
        n.outputs[0] == out && n.inputs.size() == 1 && n.inputs[0] == in) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string ReferenceCallOp(const Kernel& kernel) {
  if (!ir::loop::IsReferenceCall(kernel)) return "";
  auto it = kernel.call.attrs.find(ir::loop::kAttrReferenceOp);
  if (it == kernel.call.attrs.end() || !std::holds_alternative<std::string>(it->second)) {
    return "";
  }
  return std::get<std::string>(it->second);
}

absl::StatusOr<LoopBody> ExtractLoopBody(const ir::loop::LoopProgram& program,
                                         const ConstantBuffers& constants,
                                         const Kernel& kernel) {
  KILN_ASSIGN_OR_RETURN(const ir::Graph call, ReferenceCallOf(kernel, "Loop"));
  const ir::Node& node = call.nodes()[0];
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ir::Graph> body,
                        node.Attr<std::shared_ptr<const ir::Graph>>("body"));
  if (body == nullptr || node.inputs.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": a Loop takes M, cond and a body"));
  }
  const CallOperands ops = OperandsOf(call, kernel);
  const std::vector<bool> dynamic = ir::loop::DynamicBuffers(program);
  const size_t nc = node.inputs.size() - 2;
  if (body->outputs().size() < 1 + nc) {
    return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": its body yields ",
                                                   body->outputs().size(), " outputs for ",
                                                   nc, " loop-carried values"));
  }
  const size_t nscan = body->outputs().size() - 1 - nc;
  LoopBody out;
  runtime::LoopCall& c = out.call;
  c.trip_count = ops.inputs[0];
  c.cond = ops.inputs[1];
  std::vector<std::optional<FormalType>> formal;
  formal.push_back(FormalType{ir::DType::kI64, {}});
  formal.push_back(FormalType{ir::DType::kBool, {}});
  for (size_t i = 0; i < nc; ++i) {
    if (ops.inputs[2 + i] < 0) {
      return absl::UnimplementedError(absl::StrCat(
          node.Describe(), ": loop-carried value ", i, " is absent (an optional)"));
    }
    c.carried.push_back(ops.inputs[2 + i]);
    formal.push_back(TypeOfBuffer(program, ops.inputs[2 + i], dynamic));
  }
  for (size_t j = 0; j < nc + nscan; ++j) {
    const int32_t b = j < ops.outputs.size() ? ops.outputs[j] : -1;
    (j < nc ? c.final_values : c.scan_outputs).push_back(b);
  }
  c.cond_passed_through = PassesThrough(*body, 0, 1);
  KILN_ASSIGN_OR_RETURN(out.graph, WithCapturesAsInputs(*body, kernel, "Loop", ops.outer_position,
                                                        formal, constants, &c.captures));
  return out;
}

absl::StatusOr<ScanBody> ExtractScanBody(const ir::loop::LoopProgram& program,
                                         const ConstantBuffers& constants,
                                         const Kernel& kernel) {
  KILN_ASSIGN_OR_RETURN(const ir::Graph call, ReferenceCallOf(kernel, "Scan"));
  const ir::Node& node = call.nodes()[0];
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ir::Graph> body,
                        node.Attr<std::shared_ptr<const ir::Graph>>("body"));
  KILN_ASSIGN_OR_RETURN(int64_t m, node.Attr<int64_t>("num_scan_inputs"));
  const bool v8 = call.opset() < 9;
  const size_t first = v8 ? 1 : 0;
  if (v8 && node.has_input(0)) {
    return absl::UnimplementedError(
        absl::StrCat(node.Describe(), ": a Scan-8 with sequence_lens stays a reference call"));
  }
  if (body == nullptr || node.inputs.size() < first ||
      m <= 0 || static_cast<size_t>(m) > node.inputs.size() - first) {
    return absl::InvalidArgumentError(
        absl::StrCat(node.Describe(), ": num_scan_inputs ", m, " does not fit its inputs"));
  }
  const CallOperands ops = OperandsOf(call, kernel);
  const std::vector<bool> dynamic = ir::loop::DynamicBuffers(program);
  const size_t ni = static_cast<size_t>(m);
  const size_t ns = node.inputs.size() - first - ni;
  if (body->outputs().size() < ns) {
    return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": its body yields ",
                                                   body->outputs().size(), " outputs for ",
                                                   ns, " states"));
  }
  const size_t no = body->outputs().size() - ns;
  ScanBody out;
  runtime::ScanCall& c = out.call;
  c.batched = v8;
  std::vector<int64_t> in_axes(ni, 0), in_dirs(ni, 0), out_axes(no, 0), out_dirs(no, 0);
  if (v8) {
    KILN_ASSIGN_OR_RETURN(in_dirs, node.AttrOr<std::vector<int64_t>>("directions", in_dirs));
  } else {
    KILN_ASSIGN_OR_RETURN(in_axes, node.AttrOr<std::vector<int64_t>>("scan_input_axes", in_axes));
    KILN_ASSIGN_OR_RETURN(in_dirs,
                          node.AttrOr<std::vector<int64_t>>("scan_input_directions", in_dirs));
    KILN_ASSIGN_OR_RETURN(out_axes,
                          node.AttrOr<std::vector<int64_t>>("scan_output_axes", out_axes));
    KILN_ASSIGN_OR_RETURN(out_dirs,
                          node.AttrOr<std::vector<int64_t>>("scan_output_directions", out_dirs));
  }
  if (in_axes.size() != ni || in_dirs.size() != ni || out_axes.size() != no ||
      out_dirs.size() != no) {
    return absl::InvalidArgumentError(
        absl::StrCat(node.Describe(), ": its axes and directions do not fit its operands"));
  }
  std::vector<std::optional<FormalType>> formal;
  for (size_t s = 0; s < ns; ++s) {
    const int32_t b = ops.inputs[first + s];
    if (b < 0) return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": a state is absent"));
    c.states.push_back(b);
    formal.push_back(TypeOfBuffer(program, b, dynamic, -1, v8));
  }
  for (size_t i = 0; i < ni; ++i) {
    const int32_t b = ops.inputs[first + ns + i];
    if (b < 0 || dynamic[b]) {
      return absl::UnimplementedError(
          absl::StrCat(node.Describe(), ": scan input ", i, " is absent or data-dependent"));
    }
    const int64_t rank = static_cast<int64_t>(program.buffers[b].shape.size()) - (v8 ? 1 : 0);
    int64_t axis = in_axes[i] < 0 ? in_axes[i] + rank : in_axes[i];
    if (axis < 0 || axis >= rank) {
      return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": scan input axis ",
                                                     in_axes[i], " is out of range"));
    }
    c.scan_inputs.push_back(b);
    c.input_axes.push_back(axis);
    c.input_reverse.push_back(in_dirs[i] != 0);
    formal.push_back(TypeOfBuffer(program, b, dynamic, static_cast<int>(axis), v8));
  }
  for (size_t j = 0; j < ns + no; ++j) {
    const int32_t b = j < ops.outputs.size() ? ops.outputs[j] : -1;
    if (j < ns) {
      c.final_states.push_back(b);
      continue;
    }
    const size_t k = j - ns;
    int64_t axis = out_axes[k];
    if (axis < 0 && b >= 0) {
      axis += static_cast<int64_t>(program.buffers[b].shape.size()) - (v8 ? 1 : 0);
    }
    c.scan_outputs.push_back(b);
    c.output_axes.push_back(b < 0 ? 0 : axis);
    c.output_reverse.push_back(out_dirs[k] != 0);
    if (b >= 0 && axis < 0) {
      return absl::InvalidArgumentError(absl::StrCat(node.Describe(), ": scan output axis ",
                                                     out_axes[k], " is out of range"));
    }
  }
  KILN_ASSIGN_OR_RETURN(out.graph, WithCapturesAsInputs(*body, kernel, "Scan", ops.outer_position,
                                                        formal, constants, &c.captures));
  return out;
}

absl::StatusOr<IfBranches> ExtractIfBranches(const ir::loop::LoopProgram& program,
                                             const ConstantBuffers& constants,
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
  KILN_ASSIGN_OR_RETURN(out.then_branch,
                        Standalone(*then_graph, kernel, outer_position, constants));
  KILN_ASSIGN_OR_RETURN(out.else_branch,
                        Standalone(*else_graph, kernel, outer_position, constants));
  for (auto [branch, attr] : {std::pair{&out.then_branch, "then_branch"},
                              std::pair{&out.else_branch, "else_branch"}}) {
    auto it = node.attrs.find(absl::StrCat(ir::kAttrUnfitBranchPrefix, attr));
    if (it != node.attrs.end() && std::holds_alternative<std::string>(it->second)) {
      branch->unfit = EscapeForMessage(std::get<std::string>(it->second), 512);
    }
  }
  return out;
}

std::string ConfirmUnfit(const ir::Graph& branch, const std::string& why) {
  std::vector<ir::Tensor> zeros;
  for (ir::ValueId in : branch.inputs()) {
    const ir::Value& v = branch.value(in);
    if (!v.shape_known) return why;
    for (int64_t d : v.shape) {
      if (d < 0) return why;
    }
    absl::StatusOr<ir::Tensor> t = ir::Tensor::Create(v.dtype, v.shape, "a branch input");
    if (!t.ok()) return why;
    zeros.push_back(*std::move(t));
  }
  absl::StatusOr<std::vector<ir::Tensor>> ran = interp::Run(branch, zeros);
  if (ran.ok()) return "";
  return absl::StrCat(why, "; on the reference interpreter: ", ran.status().message());
}

std::vector<ControlFlowSite> FindControlFlowSites(const ir::loop::LoopModule& module,
                                                  const CompileSubgraphFn& compile,
                                                  std::vector<std::string>* warnings) {
  using Op = runtime::ControlFlowCall::Op;
  std::vector<ControlFlowSite> sites;
  const ir::loop::LoopProgram& program = module.program;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel& kernel = program.kernels[k];
    const std::string op = ReferenceCallOp(kernel);
    if (op == "Loop" || op == "Scan") {
      ControlFlowSite site;
      site.call.op = op == "Loop" ? Op::kLoop : Op::kScan;
      site.call.kernel = static_cast<int>(k);
      absl::StatusOr<ir::Graph> body = absl::UnknownError("");
      if (op == "Loop") {
        absl::StatusOr<LoopBody> loop = ExtractLoopBody(program, module.constants, kernel);
        if (loop.ok()) {
          body = std::move(loop->graph);
          site.call.loop = std::move(loop->call);
        } else {
          body = loop.status();
        }
      } else {
        absl::StatusOr<ScanBody> scan = ExtractScanBody(program, module.constants, kernel);
        if (scan.ok()) {
          body = std::move(scan->graph);
          site.call.scan = std::move(scan->call);
        } else {
          body = scan.status();
        }
      }
      absl::StatusOr<int> index = body.ok() ? compile(*std::move(body), kernel, "body")
                                            : absl::StatusOr<int>(body.status());
      if (!index.ok()) {
        warnings->push_back(absl::StrCat(op, " '", kernel.name, "' runs on the reference: ",
                                         body.ok() ? "its body does not compile: " : "",
                                         index.status().message()));
        continue;
      }
      site.models = {*index};
      sites.push_back(std::move(site));
      continue;
    }
    if (op != "If") continue;
    absl::StatusOr<IfBranches> branches = ExtractIfBranches(program, module.constants, kernel);
    if (!branches.ok()) continue;
    ControlFlowSite site;
    site.call.op = Op::kIf;
    site.call.kernel = static_cast<int>(k);
    bool ok = true;
    for (IfBranch* b : {&branches->then_branch, &branches->else_branch}) {
      const bool is_then = b == &branches->then_branch;
      const char* which = is_then ? "then" : "else";
      if (!b->unfit.empty()) b->unfit = ConfirmUnfit(b->graph, b->unfit);
      if (!b->unfit.empty()) {
        // It cannot run with these shapes: nothing to compile; taking it
        // is an error saying why.
        site.models.push_back(-1);
        site.call.unfit[is_then ? 0 : 1] = b->unfit;
        warnings->push_back(absl::StrCat(
            "If '", kernel.ops.empty() ? kernel.name : kernel.ops[0], "': its ", which,
            " branch cannot run with the input shapes the model is compiled for (", b->unfit,
            "); it is not compiled, and taking it fails"));
        continue;
      }
      absl::StatusOr<int> index = compile(std::move(b->graph), kernel, which);
      if (!index.ok()) {
        warnings->push_back(absl::StrCat("If '", kernel.name, "' runs on the reference: its ",
                                         which, " branch does not compile: ",
                                         index.status().message()));
        ok = false;
        break;
      }
      site.models.push_back(*index);
      (is_then ? site.call.then_buffers : site.call.else_buffers) = std::move(b->buffers);
    }
    // Both unfit: nothing compiled, the If stays a reference call.
    if (ok && (site.models[0] >= 0 || site.models[1] >= 0)) sites.push_back(std::move(site));
  }
  return sites;
}

ir::loop::LoopProgram MergePrograms(const std::vector<const ir::loop::LoopProgram*>& programs,
                                    std::vector<int>* kernel_base,
                                    std::vector<int32_t>* buffer_bases) {
  ir::loop::LoopProgram merged;
  for (size_t c = 0; c < programs.size(); ++c) {
    const ir::loop::LoopProgram& p = *programs[c];
    const int32_t buffer_base = static_cast<int32_t>(merged.buffers.size());
    kernel_base->push_back(static_cast<int>(merged.kernels.size()));
    buffer_bases->push_back(buffer_base);
    for (ir::loop::Buffer b : p.buffers) {
      b.name = absl::StrCat("c", c, "_", b.name);
      merged.buffers.push_back(std::move(b));
    }
    for (Kernel k : p.kernels) {
      k.name = absl::StrCat("c", c, "_", k.name);
      for (ir::loop::Op& op : k.body) {
        if (op.buffer >= 0) op.buffer += buffer_base;
      }
      for (int32_t& b : k.call.inputs) b += buffer_base;
      for (int32_t& b : k.call.outputs) b += buffer_base;
      merged.kernels.push_back(std::move(k));
    }
  }
  return merged;
}

}  // namespace kiln::compiler
