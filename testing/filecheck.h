// File: testing/filecheck.h — a small hermetic FileCheck for text-IR tests
// (XLA and LLVM style): the expectations are `CHECK` lines interleaved with
// the input text, matched in order against the output of a pass.
//
//   // CHECK: %y = Relu(%x)
//   // CHECK-NEXT: %z = Add(%y, %y)
//   // CHECK-NOT: Identity
//   EXPECT_TRUE(RunFileCheck(PrintGraph(g), test_text).ok());
//
// Directives (after any comment leader such as `//` or `#`):
//   CHECK: P       P occurs at or after the current position
//   CHECK-NEXT: P  P occurs on the line right after the previous match
//   CHECK-SAME: P  P occurs later on the line of the previous match
//   CHECK-NOT: P   P does not occur between the previous match and the next
//   CHECK-LABEL: P like CHECK; CHECK-NOTs never look across it
// P is literal text except {{regex}} spans (ECMAScript). Whitespace runs in
// P match any whitespace run. Another prefix than CHECK (LOWERED:,
// LOWERED-NEXT:, ...) lets one text hold the checks of several outputs.
#ifndef KILN_TESTING_FILECHECK_H_
#define KILN_TESTING_FILECHECK_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln::testing {

// OK when `output` satisfies every directive in `check_text`. Otherwise
// FailedPrecondition naming the directive's line and showing the output
// around where matching stopped. InvalidArgument when check_text has no
// directive at all (a test that checks nothing is a mistake) or a bad regex.
absl::Status RunFileCheck(absl::string_view output, absl::string_view check_text,
                          absl::string_view prefix = "CHECK");

}  // namespace kiln::testing

#endif  // KILN_TESTING_FILECHECK_H_
