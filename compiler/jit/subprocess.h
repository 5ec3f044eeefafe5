// File: compiler/jit/subprocess.h — runs a program from an argv vector with
// posix_spawn (never through a shell), capturing its output and exit code.
// The JIT uses it for the C++ compiler and for emulated test binaries.
//
//   KILN_ASSIGN_OR_RETURN(ProcessResult r, RunProcess({"/usr/bin/g++", "--version"}));
#ifndef KILN_COMPILER_JIT_SUBPROCESS_H_
#define KILN_COMPILER_JIT_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kiln::jit {

struct ProcessOptions {
  std::string working_dir;  // empty: the caller's
  // stderr goes to the same capture as stdout (compiler diagnostics).
  bool merge_stderr = false;
  absl::Duration timeout = absl::InfiniteDuration();
  // Keep at most this many bytes of each stream (the tail is dropped).
  size_t max_output_bytes = 1 << 20;
};

struct ProcessResult {
  int exit_code = 0;        // 128 + signal number when killed by a signal
  bool timed_out = false;
  std::string stdout_text;  // stdout, plus stderr when merged
  std::string stderr_text;
};

// The absolute path of `program`: itself when it contains a '/', else the
// first executable match on $PATH. NotFound when there is none.
absl::StatusOr<std::string> FindProgram(absl::string_view program);

// Runs argv[0] (looked up with FindProgram) with the caller's environment and
// stdin from /dev/null. A nonzero exit is a result, not an error; the status
// is an error only when the program cannot be started.
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const ProcessOptions& options = {});

}  // namespace kiln::jit

#endif  // KILN_COMPILER_JIT_SUBPROCESS_H_
