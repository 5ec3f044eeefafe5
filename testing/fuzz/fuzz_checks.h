// File: testing/fuzz/fuzz_checks.h — what every fuzz entry point demands of
// an error it gets back: a code that blames the input (or memory), and a
// message that is safe to print (ir/message.h). A breach aborts, which
// libFuzzer reports as a finding and the replay test as a crash.
#ifndef KILN_TESTING_FUZZ_FUZZ_CHECKS_H_
#define KILN_TESTING_FUZZ_FUZZ_CHECKS_H_

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln::fuzz {

// Aborts with `what` and `detail` on stderr.
[[noreturn]] void Fail(absl::string_view what, absl::string_view detail);

// `status` is OK or has one of `allowed` codes, and its message has no
// control byte but '\n' and no line longer than kMaxMessageLineBytes plus
// the cut note. `what` names the call in the abort message.
// With KILN_FUZZ_VERBOSE=1 in the environment, also prints `what` and the
// status to stderr (what a seed reaches, when replaying by hand).
void CheckStatus(const absl::Status& status, std::initializer_list<absl::StatusCode> allowed,
                 absl::string_view what);

}  // namespace kiln::fuzz

#endif  // KILN_TESTING_FUZZ_FUZZ_CHECKS_H_
