// The blocked activation layout of the loop IR (ir/loop/blocked_layout.h).
#include "ir/loop/blocked_layout.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"

namespace kiln::ir::loop {

int CountLayoutReorderKernels(const LoopProgram& program) {
  return static_cast<int>(std::count_if(
      program.kernels.begin(), program.kernels.end(), [](const Kernel& k) {
        return k.kind == Kernel::Kind::kLoop && absl::EndsWith(k.description, kReorderTag);
      }));
}

absl::StatusOr<std::vector<int64_t>> BlockedChannels(const Kernel& kernel, bool outputs) {
  const char* name = outputs ? kAttrBlockedOutputs : kAttrBlockedInputs;
  const size_t n = outputs ? kernel.call.outputs.size() : kernel.call.inputs.size();
  auto it = kernel.call.attrs.find(name);
  if (it == kernel.call.attrs.end()) return std::vector<int64_t>(n, 0);
  const auto* v = std::get_if<std::vector<int64_t>>(&it->second);
  if (v == nullptr || v->size() != n ||
      std::any_of(v->begin(), v->end(), [](int64_t c) { return c < 0; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extern kernel '", kernel.name, "': attribute ", name,
        " must hold one channel count per call ", outputs ? "output" : "input"));
  }
  return *v;
}

Shape LogicalShape(const Shape& physical, int64_t channels) {
  Shape s(physical.begin(), physical.end() - (physical.empty() ? 0 : 1));
  if (s.size() >= 2) s[1] = channels;
  return s;
}

namespace {

int64_t Inner(const Shape& logical) {
  int64_t inner = 1;
  for (size_t d = 2; d < logical.size(); ++d) inner *= logical[d];
  return inner;
}

// Copies elements of `bytes` bytes between a logical tensor and its blocked
// form (`to_blocked`), the blocked one zero-filled first.
void CopyBlocked(const char* from, char* to, const Shape& logical, int64_t b,
                 bool to_blocked, size_t bytes) {
  const int64_t n = logical[0], c = logical[1], inner = Inner(logical);
  const int64_t cb = (c + b - 1) / b;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t s = 0; s < inner; ++s) {
        const int64_t lo = (i * c + ch) * inner + s;
        const int64_t ph = ((i * cb + ch / b) * inner + s) * b + ch % b;
        if (to_blocked) {
          std::memcpy(to + ph * bytes, from + lo * bytes, bytes);
        } else {
          std::memcpy(to + lo * bytes, from + ph * bytes, bytes);
        }
      }
    }
  }
}

}  // namespace

absl::StatusOr<ir::Tensor> ToBlocked(const ir::Tensor& logical, int64_t block) {
  const Shape& s = logical.shape();
  if (s.size() < 3 || block <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot block ", logical.TypeString(), " by ", block, " channels"));
  }
  Shape physical = s;
  physical[1] = (s[1] + block - 1) / block;
  physical.push_back(block);
  ir::Tensor out(logical.dtype(), physical);
  std::memset(out.raw_data(), 0, out.byte_size());
  CopyBlocked(static_cast<const char*>(logical.raw_data()),
              static_cast<char*>(out.raw_data()), s, block, true,
              static_cast<size_t>(ir::DTypeSize(logical.dtype())));
  return out;
}

absl::StatusOr<ir::Tensor> FromBlocked(const ir::Tensor& physical, int64_t channels) {
  const Shape& s = physical.shape();
  if (s.size() < 4 || channels <= 0 ||
      s[1] != (channels + s.back() - 1) / std::max<int64_t>(s.back(), 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot unblock ", physical.TypeString(), " to ", channels, " channels"));
  }
  const Shape logical = LogicalShape(s, channels);
  ir::Tensor out(physical.dtype(), logical);
  CopyBlocked(static_cast<const char*>(physical.raw_data()),
              static_cast<char*>(out.raw_data()), logical, s.back(), false,
              static_cast<size_t>(ir::DTypeSize(physical.dtype())));
  return out;
}

absl::StatusOr<ExternLogicalView> LogicalViewForExtern(const LoopProgram& program,
                                                       const Kernel& kernel) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> in, BlockedChannels(kernel, false));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> out, BlockedChannels(kernel, true));
  ExternLogicalView view;
  view.program.buffers = program.buffers;
  view.kernel = kernel;
  view.kernel.call.attrs.erase(kAttrBlockedInputs);
  view.kernel.call.attrs.erase(kAttrBlockedOutputs);
  view.kernel.call.attrs.erase(kAttrChannelBlock);
  auto relabel = [&](int32_t b, int64_t channels) -> absl::Status {
    if (channels == 0) return absl::OkStatus();
    if (b < 0 || b >= static_cast<int32_t>(program.buffers.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extern kernel '", kernel.name, "' names buffer ", b));
    }
    Buffer& buf = view.program.buffers[b];
    if (buf.shape.size() < 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "extern kernel '", kernel.name, "': buffer '", buf.name, "' is not blocked"));
    }
    buf.shape = LogicalShape(buf.shape, channels);
    buf.strides = ir::RowMajorStrides(buf.shape);
    return absl::OkStatus();
  };
  for (size_t j = 0; j < in.size(); ++j) KILN_RETURN_IF_ERROR(relabel(kernel.call.inputs[j], in[j]));
  for (size_t j = 0; j < out.size(); ++j) {
    KILN_RETURN_IF_ERROR(relabel(kernel.call.outputs[j], out[j]));
  }
  return view;
}

}  // namespace kiln::ir::loop
