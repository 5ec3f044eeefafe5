// Kernel-by-kernel execution of programs with channel-blocked buffers
// (passes/loop/propagate_layout_test_util.h).
#include "passes/loop/propagate_layout_test_util.h"

#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "interp/loop_module.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/module.h"
#include "ir/status_macros.h"
#include "passes/loop/propagate_layout.h"

namespace kiln::passes::layout_testing {
namespace {

using ir::Tensor;
using ir::loop::Buffer;
using ir::loop::BufferKind;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;

int64_t Storage(const Buffer& b) { return b.StorageSize().value_or(0); }

// Row-major tensor of `b`'s shape from its raw storage, and back.
Tensor Gather(const Buffer& b, const char* raw) {
  Tensor t(b.dtype, b.shape);
  const size_t es = ir::DTypeSize(b.dtype);
  std::vector<int64_t> idx(b.shape.size(), 0);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * b.strides[d];
    std::memcpy(static_cast<char*>(t.raw_data()) + i * es, raw + off * es, es);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < b.shape[d]) break;
      idx[d] = 0;
    }
  }
  return t;
}

void Scatter(const Buffer& b, const Tensor& t, char* raw) {
  const size_t es = ir::DTypeSize(b.dtype);
  std::vector<int64_t> idx(b.shape.size(), 0);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * b.strides[d];
    std::memcpy(raw + off * es, static_cast<const char*>(t.raw_data()) + i * es, es);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < b.shape[d]) break;
      idx[d] = 0;
    }
  }
}

// One loop kernel over flat 1-D views of every buffer: written buffers get
// their current contents first (a copy kernel), so partial writes (concat
// slices) keep what earlier kernels stored.
absl::Status RunLoopKernel(const LoopProgram& p, const Kernel& k,
                           std::vector<Tensor>& storage) {
  LoopProgram q;
  std::map<std::string, Tensor> bindings;
  std::vector<int32_t> written;
  for (const Op& op : k.body) {
    if (op.buffer >= 0 && !op.is_load()) written.push_back(op.buffer);
  }
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer& src = p.buffers[b];
    const int64_t n = Storage(src);
    const bool writes = std::find(written.begin(), written.end(), b) != written.end();
    q.AddBuffer(src.name, src.dtype, {n}, writes ? BufferKind::kOutput : BufferKind::kInput);
    if (!writes) bindings[src.name] = storage[b];
  }
  for (int32_t b : written) {
    const Buffer& src = p.buffers[b];
    const std::string init = absl::StrCat("init_", src.name);
    const int32_t ib = q.AddBuffer(init, src.dtype, {Storage(src)}, BufferKind::kInput);
    bindings[init] = storage[b];
    ir::loop::KernelBuilder copy(&q, absl::StrCat("init_", k.name, "_", b),
                                 {Storage(src)});
    copy.Store(b, copy.i(0), copy.Load(ib, copy.i(0)));
  }
  q.kernels.push_back(k);
  KILN_ASSIGN_OR_RETURN(auto out, ir::loop::RunLoopProgram(q, bindings));
  for (int32_t b : written) storage[b] = out.at(p.buffers[b].name);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReferenceExtern(const LoopProgram& program, const Kernel& kernel,
                             absl::Span<void* const> inputs,
                             absl::Span<void* const> outputs) {
  KILN_ASSIGN_OR_RETURN(ir::loop::ExternLogicalView view, ir::loop::LogicalViewForExtern(program, kernel));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> in_c, ir::loop::BlockedChannels(kernel, false));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out_c, ir::loop::BlockedChannels(kernel, true));
  std::vector<Tensor> ins;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const Buffer& b = program.buffers[kernel.call.inputs[j]];
    Tensor raw = Gather(b, static_cast<const char*>(inputs[j]));
    if (in_c[j] > 0) {
      KILN_ASSIGN_OR_RETURN(raw, ir::loop::FromBlocked(raw, in_c[j]));
    }
    ins.push_back(std::move(raw));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                        interp::RunExternKernel(view.program, view.kernel, ins));
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Buffer& b = program.buffers[kernel.call.outputs[o]];
    Tensor t = outs[o];
    if (out_c[o] > 0) {
      KILN_ASSIGN_OR_RETURN(t, ir::loop::ToBlocked(t, b.shape.back()));
    }
    Scatter(b, t, static_cast<char*>(outputs[o]));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> RunProgram(const ir::loop::LoopModule& lp,
                                               absl::Span<const Tensor> inputs,
                                               const ExternRunner& run_extern) {
  const LoopProgram& p = lp.program;
  std::vector<Tensor> storage;
  for (const Buffer& b : p.buffers) {
    Tensor t(b.dtype, {Storage(b)});
    std::memset(t.raw_data(), 0, t.byte_size());
    storage.push_back(std::move(t));
  }
  if (inputs.size() != lp.inputs.size()) {
    return absl::InvalidArgumentError("wrong number of inputs");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int32_t b = lp.inputs[i];
    Scatter(p.buffers[b], inputs[i], static_cast<char*>(storage[b].raw_data()));
  }
  for (const auto& [b, t] : lp.constants) {
    Scatter(p.buffers[b], *t, static_cast<char*>(storage[b].raw_data()));
  }
  for (const Kernel& k : p.kernels) {
    if (k.kind == Kernel::Kind::kLoop) {
      KILN_RETURN_IF_ERROR(RunLoopKernel(p, k, storage));
      continue;
    }
    std::vector<void*> in, out;
    for (int32_t b : k.call.inputs) in.push_back(storage[b].raw_data());
    for (int32_t b : k.call.outputs) out.push_back(storage[b].raw_data());
    KILN_RETURN_IF_ERROR(run_extern(p, k, in, out));
  }
  std::vector<Tensor> outs;
  for (int32_t b : lp.outputs) {
    outs.push_back(Gather(p.buffers[b], static_cast<const char*>(storage[b].raw_data())));
  }
  return outs;
}

}  // namespace kiln::passes::layout_testing
