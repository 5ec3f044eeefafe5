// Compile-time timing of a library conv's activation forms
// (backends/onednn/call_tuner.h).
#include "backends/onednn/call_tuner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/onednn_call.h"
#include "backends/onednn/threads.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"

namespace kiln::onednn {
namespace {

using ir::loop::Kernel;
using ir::loop::LoopProgram;
using Form = OneDnnCallOptions::ActivationForm;

constexpr const char* kConvOps[] = {"onnx.Conv", "onnx.ConvTranspose", "kiln.FusedConv",
                                    "kiln.FusedConvTranspose"};

// The logical channel count of call operand `index` (an input when
// `output` is false): the blocked attribute's C, else dim 1 of its buffer.
std::optional<int64_t> Channels(const LoopProgram& program, const Kernel& kernel,
                                size_t index, bool output) {
  const std::vector<int32_t>& buffers = output ? kernel.call.outputs : kernel.call.inputs;
  if (index >= buffers.size()) return std::nullopt;
  const int32_t b = buffers[index];
  if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) return std::nullopt;
  const ir::loop::Buffer& buffer = program.buffers[b];
  if (buffer.dtype != ir::DType::kF32 || buffer.shape.size() < 3) return std::nullopt;
  auto it = kernel.call.attrs.find(output ? ir::loop::kAttrBlockedOutputs
                                          : ir::loop::kAttrBlockedInputs);
  if (it != kernel.call.attrs.end()) {
    if (const auto* blocked = std::get_if<std::vector<int64_t>>(&it->second);
        blocked != nullptr && index < blocked->size() && (*blocked)[index] > 0) {
      return (*blocked)[index];
    }
  }
  return buffer.shape[1];
}

double MedianMs(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 == 1 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

std::string Ms(double ms) {
  return ms >= 100 ? absl::StrFormat("%.0f ms", ms)
         : ms >= 1 ? absl::StrFormat("%.2f ms", ms)
                   : absl::StrFormat("%.1f us", ms * 1000);
}

// Restores the calling thread's team size on scope exit.
class ThreadsFor {
 public:
  explicit ThreadsFor(int threads) : saved_(NumThreads()) {
    if (threads > 0) set_ = SetNumThreads(threads).ok();
  }
  ~ThreadsFor() {
    if (set_) SetNumThreads(saved_).IgnoreError();
  }

 private:
  int saved_;
  bool set_ = false;
};

}  // namespace

std::optional<std::string> DoubtfulCall(const LoopProgram& program, const Kernel& kernel,
                                        int64_t vector_channels) {
  if (kernel.kind != Kernel::Kind::kExtern) return std::nullopt;
  if (std::none_of(std::begin(kConvOps), std::end(kConvOps),
                   [&](const char* op) { return kernel.call.op == op; })) {
    return std::nullopt;
  }
  const std::optional<int64_t> c_in = Channels(program, kernel, 0, false);
  const std::optional<int64_t> c_out = Channels(program, kernel, 0, true);
  if (!c_in || !c_out) return std::nullopt;
  if (*c_out <= 4) return absl::StrCat("C_out ", *c_out, " <= 4");
  if (*c_in <= 4) return absl::StrCat("C_in ", *c_in, " <= 4");
  if (vector_channels > 0 && *c_out % vector_channels != 0) {
    return absl::StrCat("C_out ", *c_out, " not a multiple of ", vector_channels);
  }
  if (vector_channels > 0 && *c_in % vector_channels != 0) {
    return absl::StrCat("C_in ", *c_in, " not a multiple of ", vector_channels);
  }
  if (kernel.call.op == "onnx.ConvTranspose" || kernel.call.op == "kiln.FusedConvTranspose") {
    return std::string("ConvTranspose");
  }
  return std::nullopt;
}

absl::StatusOr<CallTuning> TuneCall(
    const LoopProgram& program, const Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants,
    const CallTuningOptions& options) {
  // Scratch storage for every non-constant operand, filled with small
  // values (zeros could take faster paths than real data).
  std::vector<std::vector<float>> scratch;
  auto pointers = [&](const std::vector<int32_t>& buffers,
                      std::vector<void*>* out) -> absl::Status {
    for (int32_t b : buffers) {
      if (b < 0 || static_cast<size_t>(b) >= program.buffers.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("extern kernel '", kernel.name, "' uses buffer ", b));
      }
      if (auto c = constants.find(b); c != constants.end()) {
        out->push_back(const_cast<void*>(c->second->raw_data()));
        continue;
      }
      const ir::loop::Buffer& buffer = program.buffers[b];
      const std::optional<int64_t> elements = buffer.StorageSize();
      if (!elements) {
        return absl::InvalidArgumentError(
            absl::StrCat("buffer '", buffer.name, "' has no storage size"));
      }
      const size_t bytes = static_cast<size_t>(*elements) * ir::DTypeSize(buffer.dtype);
      std::vector<float> data((bytes + sizeof(float) - 1) / sizeof(float) + 1, 0.0f);
      if (buffer.dtype == ir::DType::kF32) {
        for (size_t i = 0; i < data.size(); ++i) data[i] = 0.01f * static_cast<float>(i % 13) - 0.06f;
      }
      scratch.push_back(std::move(data));
      out->push_back(scratch.back().data());
    }
    return absl::OkStatus();
  };
  std::vector<void*> inputs, outputs;
  KILN_RETURN_IF_ERROR(pointers(kernel.call.inputs, &inputs));
  KILN_RETURN_IF_ERROR(pointers(kernel.call.outputs, &outputs));

  ThreadsFor threads(options.threads);
  CallTuning tuning;
  std::vector<std::string> seen;  // impl + layouts of the candidates timed
  double rule_ms = 0, best_ms = 0;
  for (const Form form : {Form::kRule, Form::kCaller, Form::kAny, Form::kNhwc,
                          Form::kBlocked8, Form::kBlocked16}) {
    CallTuning::Candidate c;
    c.form = ActivationFormName(form);
    OneDnnCallOptions call_options;
    call_options.activation_form = form;
    absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> call =
        OneDnnExternKernel::Create(program, kernel, constants, call_options);
    if (!call.ok()) {
      if (form == Form::kRule) return call.status();
      c.note = absl::StrCat("refused: ", call.status().message());
      seen.push_back(std::string("\x01"));  // keeps seen[i] candidate i's
      tuning.candidates.push_back(std::move(c));
      continue;
    }
    const ExternKernelInfo& info = (*call)->info();
    c.impl = info.impl;
    c.layouts = absl::StrCat("src ", info.src_layout, ", weights ", info.weight_layout,
                             ", dst ", info.dst_layout, ", ", info.reorders_per_call,
                             " reorders");
    const std::string key = absl::StrCat(c.impl, "|", c.layouts);
    if (auto same = std::find(seen.begin(), seen.end(), key); same != seen.end()) {
      c.note = absl::StrCat("same as ", tuning.candidates[same - seen.begin()].form);
      seen.push_back(std::string("\x01"));
      tuning.candidates.push_back(std::move(c));
      continue;
    }
    seen.push_back(key);
    KILN_RETURN_IF_ERROR((*call)->Run(inputs, outputs));  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < std::max(1, options.repetitions); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      KILN_RETURN_IF_ERROR((*call)->Run(inputs, outputs));
      ms.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0)
                       .count());
      // Far behind the best so far: more runs would not change the choice.
      if (r == 0 && best_ms > 0 && ms[0] > 3 * best_ms) {
        c.note = "stopped after 1 run";
        break;
      }
    }
    c.median_ms = MedianMs(ms);
    if (form == Form::kRule) rule_ms = c.median_ms;
    if (best_ms == 0 || c.median_ms < best_ms) best_ms = c.median_ms;
    tuning.candidates.push_back(std::move(c));
  }
  double chosen_ms = rule_ms;
  for (const CallTuning::Candidate& c : tuning.candidates) {
    if (c.median_ms > 0 && c.median_ms <= options.min_gain * rule_ms &&
        c.median_ms < chosen_ms) {
      chosen_ms = c.median_ms;
      tuning.chosen = c.form;
    }
  }
  return tuning;
}

std::string DescribeTuning(const CallTuning& tuning) {
  std::vector<std::string> parts;
  for (const CallTuning::Candidate& c : tuning.candidates) {
    if (c.median_ms > 0) {
      parts.push_back(absl::StrCat(c.form, " ", Ms(c.median_ms)));
    } else if (absl::StartsWith(c.note, "same as ")) {
      parts.push_back(absl::StrCat(c.form, " = ", c.note.substr(8)));
    } else {
      parts.push_back(absl::StrCat(c.form, " refused"));
    }
  }
  return absl::StrCat(tuning.chosen, " (", absl::StrJoin(parts, ", "), ")");
}

}  // namespace kiln::onednn
