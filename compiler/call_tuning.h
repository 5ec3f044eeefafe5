// File: compiler/call_tuning.h — the JIT's library-call tuner: oneDNN's
// measurement of a doubtful conv's layouts (backends/onednn/call_tuner.h)
// behind a cache in the JIT cache folder, so a warm compile does not re-time
// and a cached choice is the same on every run.
//
//   target.library_call_tuner = compiler::CallTuner(options, &report.tuned_calls);
#ifndef KILN_COMPILER_CALL_TUNING_H_
#define KILN_COMPILER_CALL_TUNING_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/loop/module.h"
#include "runtime/compiled_model.h"

namespace kiln::compiler {

// compiler::Target::library_call_tuner for options.call_tuning (empty for
// kOff). Each tuned call is appended to `log` (must outlive the function).
// The cache entry of a call is <cache dir>/tuning/<sha256 of the call's
// kernel text, buffer shapes, oneDNN's ISA and the thread count>; an entry
// that cannot be read is re-timed, one that cannot be written is a warning
// in `log`'s report only through the missing [cached] on the next compile.
std::function<absl::StatusOr<std::string>(const ir::loop::LoopModule&, const ir::loop::Kernel&)>
CallTuner(const CompileOptions& options, std::vector<CompileReport::TunedCall>* log);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_CALL_TUNING_H_
