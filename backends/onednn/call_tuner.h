// File: backends/onednn/call_tuner.h — chooses the activation layouts of a
// library conv by timing the candidates once, at compile time, for the
// call's actual shapes and the compile's thread count.
//
//   if (DoubtfulCall(lp.program, kernel)) {
//     KILN_ASSIGN_OR_RETURN(CallTuning t, TuneCall(lp.program, kernel, lp.constants, {}));
//     if (t.chosen != "rule") kernel.call.attrs[ir::loop::kAttrCallForm] = t.chosen;
//   }
#ifndef KILN_BACKENDS_ONEDNN_CALL_TUNER_H_
#define KILN_BACKENDS_ONEDNN_CALL_TUNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"

namespace kiln::onednn {

// Why a conv's rule-chosen layouts are worth measuring: "C_out 1 <= 4",
// "C_in 24 not a multiple of 16", "ConvTranspose"; nullopt for calls the
// rule is trusted with (MatMul, Gemm, RNNs, wide convs in whole blocks,
// reference calls). `vector_channels`: the channel count of the widest
// block oneDNN's kernels use on this CPU (16 on AVX-512, 8 on AVX2).
std::optional<std::string> DoubtfulCall(const ir::loop::LoopProgram& program,
                                        const ir::loop::Kernel& kernel,
                                        int64_t vector_channels);

struct CallTuningOptions {
  // Team size the candidates run with (the compiled model's); 0: the
  // calling thread's current one.
  int threads = 0;
  // Timed runs per candidate after one warm-up; the median counts.
  int repetitions = 5;
  // A candidate other than the rule's is chosen only when its median is at
  // most this fraction of the rule's (timing noise does not flip choices).
  double min_gain = 0.9;
};

// The candidates' times and the choice for one extern conv.
struct CallTuning {
  struct Candidate {
    std::string form;      // ActivationFormName: "rule", "caller", "nhwc", ...
    double median_ms = 0;  // 0 when refused or the same primitive as an earlier one
    std::string impl;      // oneDNN's implementation
    std::string layouts;   // "src nchw, weights OIhw8i8o, dst nChw8c, 2 reorders"
    std::string note;      // "same as rule", "refused: ...", "stopped after 1 run"
  };
  std::vector<Candidate> candidates;  // the rule's first
  std::string chosen = "rule";        // the fastest form (ActivationFormName)
};

// Times every activation form of extern conv `kernel` (the rule's, the
// caller's layouts, format_tag::any, nhwc, nChw8c, nChw16c) on scratch
// buffers of its shapes (constants: `constants`' data) and picks the fastest
// median, preferring the rule unless beaten by options.min_gain. The
// caller's buffer layouts (propagate-layout's) are fixed: each candidate's
// time includes the reorders it needs between them and its own, so a choice
// never adds reorders outside the call. Unimplemented when oneDNN does not
// run the call at all.
absl::StatusOr<CallTuning> TuneCall(
    const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
    const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants,
    const CallTuningOptions& options);

// One line for reports: "nhwc (rule 179 ms, caller 2.10 ms, any 180 ms, ...)".
std::string DescribeTuning(const CallTuning& tuning);

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_CALL_TUNER_H_
