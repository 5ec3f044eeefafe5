// File: tools/opt_file_test.h — runs a `kilnc opt` test file: text IR with
// RUN lines (opt's flags) and CHECK lines, split into cases at `// -----`
// or `# -----` lines, as MLIR's split-input-file. tools/opt.bzl's
// kiln_opt_test makes one Bazel test of a file.
//
//   # RUN: --pass=fuse-vertical --verify-results
//   # CHECK: kernel k1
//   buffer %x: f32[8] input
//   ...
//   # -----
//   # A case without RUN lines runs the first case's.
//   buffer %x: f32[8] input
//   ...
//
// The first chunk may also be a header without IR: RUN lines and comments
// only.
//
// Each RUN line runs its case through tools/opt.h's RunOpt (the case is the
// input, so RUN lines name no file) and matches what `kilnc opt` would
// print against the case's CHECK lines (testing/filecheck.h); a RUN line
// with --check-prefix=P matches the P: lines instead. Parser errors and
// CHECK line numbers count lines of the whole file.
#ifndef KILN_TOOLS_OPT_FILE_TEST_H_
#define KILN_TOOLS_OPT_FILE_TEST_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::tools {

// The number of cases when every case passes; otherwise FailedPrecondition
// listing each failing case (its first line, RUN line and output), or
// InvalidArgument for a file without cases or RUN lines.
absl::StatusOr<int> RunOptTestFile(absl::string_view text, absl::string_view file_name);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_OPT_FILE_TEST_H_
