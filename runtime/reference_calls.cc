// Library calls on the reference interpreter (runtime/reference_calls.h).
#include "runtime/reference_calls.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "interp/loop_module.h"
#include "ir/loop/blocked_layout.h"
#include "ir/loop/extern_schema.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::runtime {
namespace {

using ir::loop::Buffer;
using ir::loop::Kernel;
using ir::loop::LoopProgram;

// Element offset of row-major position `flat` in a strided buffer.
int64_t StridedOffset(const Buffer& b, int64_t flat) {
  int64_t off = 0;
  for (int d = static_cast<int>(b.shape.size()) - 1; d >= 0; --d) {
    const int64_t extent = b.shape[d] == 0 ? 1 : b.shape[d];
    off += (flat % extent) * b.strides[d];
    flat /= extent;
  }
  return off;
}

// Runs the kernel's ONNX node (or, for a reference fallback call, the node
// lowering could not compile) on the reference interpreter, copying its
// operands to tensors and its results back into the buffers. Values of
// data-dependent shape are passed as the ir::Tensor objects holding them.
class ReferenceStep final : public ExternStep {
 public:
  // An extern kernel that does not describe a node makes Run fail; Create
  // reports that up front.
  ReferenceStep(const LoopProgram& program, const Kernel& kernel)
      : name_(kernel.name), inputs_(kernel.call.inputs), outputs_(kernel.call.outputs) {
    absl::StatusOr<std::unique_ptr<interp::ReferenceKernel>> ref =
        interp::ReferenceKernel::Create(program, kernel);
    if (!ref.ok()) {
      error_ = ref.status();
      return;
    }
    ref_ = *std::move(ref);
    for (int32_t b : inputs_) in_buffers_.push_back(program.buffers[b]);
    for (int32_t b : outputs_) out_buffers_.push_back(program.buffers[b]);
    dynamic_in_ = ir::loop::DynamicOperands(kernel, /*outputs=*/false);
    dynamic_out_ = ir::loop::DynamicOperands(kernel, /*outputs=*/true);
  }

  static absl::StatusOr<std::unique_ptr<ExternStep>> Create(const LoopProgram& program,
                                                            const Kernel& kernel) {
    auto step = std::make_unique<ReferenceStep>(program, kernel);
    if (!step->error_.ok()) return step->error_;
    return std::unique_ptr<ExternStep>(std::move(step));
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    if (!error_.ok()) return error_;
    std::vector<ir::Tensor> inputs;
    inputs.reserve(inputs_.size());
    for (size_t j = 0; j < inputs_.size(); ++j) {
      if (dynamic_in_[j]) {
        inputs.push_back(*static_cast<const ir::Tensor*>(buffers[inputs_[j]]));
        continue;
      }
      const Buffer& buf = in_buffers_[j];
      ir::Tensor t(buf.dtype, buf.shape);
      const size_t esize = ir::DTypeSize(buf.dtype);
      const char* src = static_cast<const char*>(buffers[inputs_[j]]);
      char* dst = static_cast<char*>(t.raw_data());
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        std::memcpy(dst + i * esize, src + StridedOffset(buf, i) * esize, esize);
      }
      inputs.push_back(std::move(t));
    }
    // Checks every output's dtype and shape against its buffer.
    KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> outputs, ref_->Run(inputs));
    if (outputs.size() != outputs_.size()) {
      return InternalError("extern kernel '", EscapeForMessage(name_), "' returned ",
                           outputs.size(), " outputs, expected ", outputs_.size());
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (dynamic_out_[o]) {
        *static_cast<ir::Tensor*>(buffers[outputs_[o]]) = std::move(outputs[o]);
        continue;
      }
      const Buffer& buf = out_buffers_[o];
      const size_t esize = ir::DTypeSize(buf.dtype);
      const char* src = static_cast<const char*>(outputs[o].raw_data());
      char* dst = static_cast<char*>(buffers[outputs_[o]]);
      for (int64_t i = 0; i < outputs[o].num_elements(); ++i) {
        std::memcpy(dst + StridedOffset(buf, i) * esize, src + i * esize, esize);
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string name_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<Buffer> in_buffers_, out_buffers_;
  std::vector<bool> dynamic_in_, dynamic_out_;
  std::unique_ptr<interp::ReferenceKernel> ref_;
  absl::Status error_;
};

// A reference step over the logical view of a call whose buffers are
// channel-blocked (ir/loop/blocked_layout.h): converts them to and
// from plain tensors around the call (slow; only when oneDNN refuses a
// conv the layout pass blocked, or is turned off).
class BlockedReferenceStep final : public ExternStep {
 public:
  static absl::StatusOr<std::unique_ptr<ExternStep>> Create(const LoopProgram& program,
                                                            const Kernel& kernel) {
    KILN_ASSIGN_OR_RETURN(ir::loop::ExternLogicalView view,
                          ir::loop::LogicalViewForExtern(program, kernel));
    auto step = std::unique_ptr<BlockedReferenceStep>(new BlockedReferenceStep);
    KILN_ASSIGN_OR_RETURN(step->in_channels_, ir::loop::BlockedChannels(kernel, false));
    KILN_ASSIGN_OR_RETURN(step->out_channels_, ir::loop::BlockedChannels(kernel, true));
    step->inputs_ = kernel.call.inputs;
    step->outputs_ = kernel.call.outputs;
    step->physical_ = program.buffers;
    step->inner_ = std::make_unique<ReferenceStep>(view.program, view.kernel);
    return std::unique_ptr<ExternStep>(std::move(step));
  }

  absl::Status Run(absl::Span<void* const> buffers) const override {
    std::vector<void*> ptrs(buffers.begin(), buffers.end());
    std::vector<ir::Tensor> plain;
    plain.reserve(inputs_.size() + outputs_.size());
    for (size_t j = 0; j < inputs_.size(); ++j) {
      if (in_channels_[j] == 0) continue;
      const Buffer& buf = physical_[inputs_[j]];
      ir::Tensor blocked(buf.dtype, buf.shape);
      std::memcpy(blocked.raw_data(), buffers[inputs_[j]], blocked.byte_size());
      KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::loop::FromBlocked(blocked, in_channels_[j]));
      plain.push_back(std::move(t));
      ptrs[inputs_[j]] = plain.back().raw_data();
    }
    for (size_t o = 0; o < outputs_.size(); ++o) {
      if (out_channels_[o] == 0) continue;
      const Buffer& buf = physical_[outputs_[o]];
      plain.emplace_back(buf.dtype, ir::loop::LogicalShape(buf.shape, out_channels_[o]));
      ptrs[outputs_[o]] = plain.back().raw_data();
    }
    KILN_RETURN_IF_ERROR(inner_->Run(ptrs));
    for (size_t o = 0; o < outputs_.size(); ++o) {
      if (out_channels_[o] == 0) continue;
      const Buffer& buf = physical_[outputs_[o]];
      const ir::Shape logical = ir::loop::LogicalShape(buf.shape, out_channels_[o]);
      ir::Tensor t(buf.dtype, logical);
      std::memcpy(t.raw_data(), ptrs[outputs_[o]], t.byte_size());
      KILN_ASSIGN_OR_RETURN(ir::Tensor blocked, ir::loop::ToBlocked(t, buf.shape.back()));
      std::memcpy(buffers[outputs_[o]], blocked.raw_data(), blocked.byte_size());
    }
    return absl::OkStatus();
  }

 private:
  BlockedReferenceStep() = default;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<int64_t> in_channels_, out_channels_;
  std::vector<Buffer> physical_;
  std::unique_ptr<ReferenceStep> inner_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ExternStep>> CreateReferenceStep(const LoopProgram& program,
                                                                const Kernel& kernel) {
  if (kernel.call.attrs.count(ir::loop::kAttrBlockedInputs) > 0) {
    return BlockedReferenceStep::Create(program, kernel);
  }
  return ReferenceStep::Create(program, kernel);
}

}  // namespace kiln::runtime
