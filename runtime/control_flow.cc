// File: runtime/control_flow.cc — the compiled If step
// (runtime/control_flow.h).
#include "runtime/control_flow.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

using ir::loop::Buffer;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

bool PlainStatic(const Buffer& b) {
  for (int64_t d : b.shape) {
    if (d < 0) return false;
  }
  return b.IsRowMajor();
}

absl::Status Refuse(const Kernel& kernel, const std::string& why) {
  return absl::UnimplementedError(
      absl::StrCat("If '", kernel.name, "' stays a reference call: ", why));
}

class IfStep final : public ExternStep {
 public:
  IfStep(int32_t cond, CompiledBranch then_branch, CompiledBranch else_branch,
         std::vector<int32_t> outputs, std::vector<std::optional<ir::Shape>> output_shapes)
      : cond_(cond), outputs_(std::move(outputs)), output_shapes_(std::move(output_shapes)) {
    branches_[0] = std::move(else_branch);
    branches_[1] = std::move(then_branch);
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    const bool cond = *static_cast<const bool*>(buffers[cond_]);
    const CompiledBranch& b = branches_[cond ? 1 : 0];
    std::vector<const void*> in(b.inputs.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = buffers[b.inputs[i]];
    std::vector<void*> out(outputs_.size());
    for (size_t o = 0; o < out.size(); ++o) out[o] = buffers[outputs_[o]];
    return RunOnBuffers(*b.model, in, out, output_shapes_);
  }

 private:
  int32_t cond_;
  CompiledBranch branches_[2];  // else, then
  std::vector<int32_t> outputs_;
  // nullopt: an output of data-dependent shape (its buffer is the
  // ir::Tensor holding it).
  std::vector<std::optional<ir::Shape>> output_shapes_;
};

// Whether a branch output typed `info` may fill a buffer of `shape`: a
// static branch output must match it, one of data-dependent shape is
// checked on each run.
bool Fits(const TensorInfo& info, const ir::Shape& shape) {
  if (!info.shape_known) return true;
  if (info.shape.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (info.shape[d] >= 0 && info.shape[d] != shape[d]) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExternStep>> CreateIfStep(const LoopProgram& program,
                                                         const Kernel& kernel,
                                                         CompiledBranch then_branch,
                                                         CompiledBranch else_branch) {
  if (kernel.kind != Kernel::Kind::kExtern || kernel.call.inputs.empty()) {
    return InternalError("kernel '", kernel.name, "' is not an If call");
  }
  for (bool d : ir::loop::DynamicOperands(kernel, /*outputs=*/false)) {
    if (d) return Refuse(kernel, "an input has a data-dependent shape");
  }
  const std::vector<bool> dynamic_out = ir::loop::DynamicOperands(kernel, /*outputs=*/true);
  if (kernel.call.attrs.count(ir::loop::kAttrBlockedInputs) > 0 ||
      kernel.call.attrs.count(ir::loop::kAttrBlockedOutputs) > 0) {
    return Refuse(kernel, "an operand is channel-blocked");
  }
  auto buffer = [&](int32_t b) -> const Buffer* {
    if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) return nullptr;
    return &program.buffers[b];
  };
  const Buffer* cond = buffer(kernel.call.inputs[0]);
  if (cond == nullptr || cond->dtype != ir::DType::kBool || cond->StorageSize().value_or(0) != 1) {
    return Refuse(kernel, "the condition is not one bool");
  }
  for (const CompiledBranch* br : {&then_branch, &else_branch}) {
    const char* which = br == &then_branch ? "then" : "else";
    if (br->model == nullptr) return InternalError("If '", kernel.name, "': no ", which, " branch");
    const std::vector<TensorInfo>& ins = br->model->inputs();
    const std::vector<TensorInfo>& outs = br->model->outputs();
    if (ins.size() != br->inputs.size() || outs.size() != kernel.call.outputs.size()) {
      return InternalError("If '", kernel.name, "': the ", which,
                           " branch's interface does not match the call");
    }
    for (size_t i = 0; i < ins.size(); ++i) {
      const Buffer* b = buffer(br->inputs[i]);
      if (b == nullptr || !PlainStatic(*b) || b->dtype != ins[i].dtype || b->shape != ins[i].shape) {
        return Refuse(kernel, absl::StrCat("the ", which, " branch's input '", ins[i].name,
                                           "' (", ir::TypeString(ins[i].dtype, ins[i].shape),
                                           ") is not a plain buffer of its type"));
      }
    }
    for (size_t o = 0; o < outs.size(); ++o) {
      const Buffer* b = buffer(kernel.call.outputs[o]);
      if (b != nullptr && dynamic_out[o] && b->dtype == outs[o].dtype) continue;
      if (b == nullptr || !PlainStatic(*b) || b->dtype != outs[o].dtype ||
          !Fits(outs[o], b->shape)) {
        return Refuse(kernel, absl::StrCat(
                                  "the ", which, " branch's output ", o, " is ",
                                  outs[o].shape_known ? ir::TypeString(outs[o].dtype, outs[o].shape)
                                                      : "of unknown rank",
                                  b == nullptr ? std::string(", not a buffer")
                                               : absl::StrCat(", the If's ",
                                                              ir::TypeString(b->dtype, b->shape))));
      }
    }
  }
  std::vector<std::optional<ir::Shape>> output_shapes;
  for (size_t o = 0; o < kernel.call.outputs.size(); ++o) {
    if (dynamic_out[o]) {
      output_shapes.push_back(std::nullopt);
    } else {
      output_shapes.push_back(program.buffers[kernel.call.outputs[o]].shape);
    }
  }
  return std::unique_ptr<ExternStep>(std::make_unique<IfStep>(
      kernel.call.inputs[0], std::move(then_branch), std::move(else_branch),
      kernel.call.outputs, std::move(output_shapes)));
}

}  // namespace kiln::runtime
