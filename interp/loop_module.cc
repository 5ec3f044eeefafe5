// File: interp/loop_module.cc — runs a loop module on interpreters: loop
// kernels on ir/loop's interpreter, extern calls on the reference interpreter.
#include "interp/loop_module.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "interp/interpreter.h"
#include "ir/graph/graph.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/interpreter.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::loop::BufferKind;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

// Runs kernels [begin, end) (all loop kernels) with the buffers in `env`
// bound; stores what they write into `env`.
absl::Status RunLoopSegment(const LoopProgram& p, size_t begin, size_t end,
                            const std::vector<bool>& dynamic,
                            std::map<int32_t, ir::Tensor>* env) {
  LoopProgram sub;
  sub.buffers = p.buffers;
  std::vector<bool> written(p.buffers.size(), false);
  for (size_t k = begin; k < end; ++k) {
    for (const ir::loop::Op& op : p.kernels[k].body) {
      if (op.code == ir::loop::OpCode::kStore) written[op.buffer] = true;
    }
    sub.kernels.push_back(p.kernels[k]);
  }
  std::map<std::string, ir::Tensor> bindings;
  for (size_t b = 0; b < sub.buffers.size(); ++b) {
    ir::loop::Buffer& buf = sub.buffers[b];
    if (written[b]) {
      if (env->count(b)) {
        return InternalError("buffer '", EscapeForMessage(buf.name), "' is written twice");
      }
      buf.kind = BufferKind::kOutput;
    } else if (env->count(b) && !dynamic[b]) {
      buf.kind = BufferKind::kInput;
      bindings.emplace(buf.name, env->at(b));
    } else {
      buf.kind = BufferKind::kIntermediate;
    }
  }
  KILN_ASSIGN_OR_RETURN(auto outs, ir::loop::RunLoopProgram(sub, bindings));
  for (size_t b = 0; b < sub.buffers.size(); ++b) {
    if (written[b]) env->insert_or_assign(b, std::move(outs.at(sub.buffers[b].name)));
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<T> GetAttr(const Kernel& k, const char* name) {
  auto it = k.call.attrs.find(name);
  if (it == k.call.attrs.end() || !std::holds_alternative<T>(it->second)) {
    return absl::InvalidArgumentError(
        absl::StrCat("extern kernel '", EscapeForMessage(k.name), "' lacks attribute ", name));
  }
  return std::get<T>(it->second);
}

}  // namespace

namespace {

// The one-node graph of an "onnx.<Op>" / "kiln.<Op>" extern kernel: its
// buffers as graph inputs and outputs, its attributes back in graph form.
absl::StatusOr<ir::Graph> ExternNodeGraph(const LoopProgram& program, const Kernel& kernel) {
  std::string domain;
  absl::string_view op = kernel.call.op;
  if (absl::ConsumePrefix(&op, ir::loop::kKilnOpPrefix)) {
    domain = ir::loop::kKilnDomain;
  } else if (!absl::ConsumePrefix(&op, ir::loop::kOnnxOpPrefix)) {
    return absl::UnimplementedError(absl::StrCat(
        "extern call '", kernel.call.op, "' is neither an ONNX nor a kiln op"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t opset, GetAttr<int64_t>(kernel, ir::loop::kAttrOpset));
  KILN_ASSIGN_OR_RETURN(auto in_slots,
                        GetAttr<std::vector<int64_t>>(kernel, ir::loop::kAttrInputSlots));
  KILN_ASSIGN_OR_RETURN(auto out_slots,
                        GetAttr<std::vector<int64_t>>(kernel, ir::loop::kAttrOutputSlots));
  if (in_slots.size() != kernel.call.inputs.size() ||
      out_slots.size() != kernel.call.outputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("extern kernel '", EscapeForMessage(kernel.name), "': slot counts differ"));
  }
  for (int64_t slot : in_slots) {
    if (slot < 0 || slot > 1024) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extern kernel '", EscapeForMessage(kernel.name), "': bad input slot ", slot));
    }
  }
  for (int64_t slot : out_slots) {
    if (slot < 0 || slot > 1024) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extern kernel '", EscapeForMessage(kernel.name), "': bad output slot ", slot));
    }
  }
  std::vector<std::string> lists;
  if (auto it = kernel.call.attrs.find(ir::loop::kAttrStringLists);
      it != kernel.call.attrs.end() && std::holds_alternative<std::string>(it->second)) {
    lists = absl::StrSplit(std::get<std::string>(it->second), ir::loop::kListSeparator);
  }
  ir::Graph g(absl::StrCat("extern_", kernel.name));
  g.set_opset(opset);
  std::vector<ir::ValueId> node_in, node_out;
  for (size_t j = 0; j < in_slots.size(); ++j) {
    const ir::loop::Buffer& b = program.buffers[kernel.call.inputs[j]];
    const ir::ValueId v = g.AddValue(absl::StrCat("in", j), b.dtype, b.shape);
    g.AddInput(v);
    if (node_in.size() <= static_cast<size_t>(in_slots[j])) {
      node_in.resize(in_slots[j] + 1, ir::kNoValue);
    }
    node_in[in_slots[j]] = v;
  }
  for (size_t j = 0; j < out_slots.size(); ++j) {
    const ir::loop::Buffer& b = program.buffers[kernel.call.outputs[j]];
    const ir::ValueId v = g.AddValue(absl::StrCat("out", j), b.dtype, b.shape);
    g.AddOutput(v);
    if (node_out.size() <= static_cast<size_t>(out_slots[j])) {
      node_out.resize(out_slots[j] + 1, ir::kNoValue);
    }
    node_out[out_slots[j]] = v;
  }
  ir::AttributeMap attrs;
  for (const auto& [name, value] : kernel.call.attrs) {
    if (absl::StartsWith(name, "kiln_")) continue;
    if (const auto* v = std::get_if<int64_t>(&value)) {
      attrs[name] = *v;
    } else if (const auto* v = std::get_if<double>(&value)) {
      attrs[name] = static_cast<float>(*v);
    } else if (const auto* v = std::get_if<std::string>(&value)) {
      if (std::find(lists.begin(), lists.end(), name) != lists.end()) {
        attrs[name] = std::vector<std::string>(absl::StrSplit(*v, ir::loop::kListSeparator));
      } else {
        attrs[name] = *v;
      }
    } else if (const auto* v = std::get_if<std::vector<int64_t>>(&value)) {
      attrs[name] = *v;
    } else if (const auto* v = std::get_if<std::vector<double>>(&value)) {
      attrs[name] = std::vector<float>(v->begin(), v->end());
    }
  }
  g.AddNode(std::string(op), node_in, node_out, std::move(attrs), kernel.name)
      .domain = domain;
  return g;
}

// The graph a reference fallback call carries, checked against its call.
absl::StatusOr<ir::Graph> ReferenceCallGraph(const Kernel& kernel) {
  KILN_ASSIGN_OR_RETURN(std::string text, GetAttr<std::string>(kernel, ir::loop::kAttrReferenceGraph));
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reference call '", EscapeForMessage(kernel.name),
                     "': its graph does not parse: ", g.status().message()));
  }
  if (g->inputs().size() != kernel.call.inputs.size() ||
      g->outputs().size() != kernel.call.outputs.size() || g->nodes().size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("reference call '", EscapeForMessage(kernel.name), "': its graph has ",
                     g->inputs().size(), " inputs, ", g->outputs().size(), " outputs and ",
                     g->nodes().size(), " nodes; the call has ", kernel.call.inputs.size(),
                     " inputs and ", kernel.call.outputs.size(), " outputs"));
  }
  return g;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReferenceKernel>> ReferenceKernel::Create(
    const LoopProgram& program, const Kernel& kernel) {
  for (const std::vector<int32_t>* buffers : {&kernel.call.inputs, &kernel.call.outputs}) {
    for (int32_t b : *buffers) {
      if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("extern kernel '", EscapeForMessage(kernel.name), "' uses buffer ", b,
                         ", which does not exist"));
      }
    }
  }
  std::unique_ptr<ReferenceKernel> rk(new ReferenceKernel());
  rk->kernel_name_ = kernel.name;
  rk->op_ = kernel.call.op;
  if (ir::loop::IsReferenceCall(kernel)) {
    KILN_ASSIGN_OR_RETURN(rk->graph_, ReferenceCallGraph(kernel));
    rk->op_ = rk->graph_.nodes()[0].op;
  } else {
    KILN_ASSIGN_OR_RETURN(rk->graph_, ExternNodeGraph(program, kernel));
  }
  rk->dynamic_outputs_ = ir::loop::DynamicOperands(kernel, /*outputs=*/true);
  for (int32_t b : kernel.call.outputs) {
    rk->output_dtypes_.push_back(program.buffers[b].dtype);
    rk->output_shapes_.push_back(program.buffers[b].shape);
  }
  return rk;
}

absl::StatusOr<std::vector<ir::Tensor>> ReferenceKernel::Run(
    absl::Span<const ir::Tensor> inputs) const {
  if (inputs.size() != graph_.inputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extern kernel '", kernel_name_, "' takes ", graph_.inputs().size(),
        " inputs, got ", inputs.size()));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> outputs, interp::Run(graph_, inputs));
  if (outputs.size() != output_dtypes_.size()) {
    return InternalError("extern kernel '", kernel_name_, "' returned ", outputs.size(),
                         " outputs, expected ", output_dtypes_.size());
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const ir::Tensor& t = outputs[o];
    const ir::Value& declared = graph_.value(graph_.outputs()[o]);
    bool fits = t.dtype() == output_dtypes_[o];
    if (!dynamic_outputs_[o]) {
      fits = fits && t.shape() == output_shapes_[o];
    } else if (declared.shape_known) {
      fits = fits && t.shape().size() == declared.shape.size();
      for (size_t d = 0; fits && d < declared.shape.size(); ++d) {
        fits = declared.shape[d] < 0 || declared.shape[d] == t.shape()[d];
      }
    }
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extern kernel '", kernel_name_, "' (", op_, "): output ", o, " ('",
          declared.name, "') is ", t.TypeString(), " at run time, but the model declares ",
          ir::DTypeName(output_dtypes_[o]),
          dynamic_outputs_[o]
              ? (declared.shape_known ? ir::ShapeToString(declared.shape) : "[*]")
              : ir::ShapeToString(output_shapes_[o])));
    }
  }
  return outputs;
}

absl::StatusOr<std::vector<ir::Tensor>> RunExternKernel(
    const LoopProgram& program, const Kernel& kernel,
    absl::Span<const ir::Tensor> inputs) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ReferenceKernel> rk,
                        ReferenceKernel::Create(program, kernel));
  return rk->Run(inputs);
}

absl::StatusOr<std::vector<ir::Tensor>> RunLoopModule(
    const ir::loop::LoopModule& lowered, absl::Span<const ir::Tensor> inputs) {
  const LoopProgram& p = lowered.program;
  if (inputs.size() != lowered.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", lowered.inputs.size(), " inputs, got ", inputs.size()));
  }
  std::map<int32_t, ir::Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) env.emplace(lowered.inputs[i], inputs[i]);
  for (const auto& [b, data] : lowered.constants) env.emplace(b, *data);
  const std::vector<bool> dynamic = ir::loop::DynamicBuffers(p);
  size_t k = 0;
  while (k < p.kernels.size()) {
    if (p.kernels[k].kind == Kernel::Kind::kLoop) {
      size_t end = k;
      while (end < p.kernels.size() && p.kernels[end].kind == Kernel::Kind::kLoop) {
        ++end;
      }
      KILN_RETURN_IF_ERROR(RunLoopSegment(p, k, end, dynamic, &env));
      k = end;
      continue;
    }
    const Kernel& ext = p.kernels[k];
    std::vector<ir::Tensor> args;
    for (int32_t b : ext.call.inputs) {
      auto it = env.find(b);
      if (it == env.end()) {
        return InternalError("extern kernel '", EscapeForMessage(ext.name), "' reads buffer '",
                             p.buffers[b].name, "' before it is written");
      }
      args.push_back(it->second);
    }
    // Checked against the buffers (ReferenceKernel::Run).
    KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> outs, RunExternKernel(p, ext, args));
    for (size_t j = 0; j < ext.call.outputs.size(); ++j) {
      env.insert_or_assign(ext.call.outputs[j], std::move(outs[j]));
    }
    ++k;
  }
  std::vector<ir::Tensor> result;
  for (int32_t b : lowered.outputs) {
    auto it = env.find(b);
    if (it == env.end()) {
      return InternalError("output buffer '", EscapeForMessage(p.buffers[b].name),
                           "' is never written");
    }
    result.push_back(it->second);
  }
  return result;
}

}  // namespace kiln::interp
