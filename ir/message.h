// File: ir/message.h — model text made safe for error messages: control bytes
// escaped, every line capped, so a hostile name cannot drive a terminal,
// split a message or make it megabytes long.
#ifndef KILN_IR_MESSAGE_H_
#define KILN_IR_MESSAGE_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Longest line a sanitized message keeps, in bytes (longer lines are cut,
// saying how much was left out).
inline constexpr size_t kMaxMessageLineBytes = 1024;

// `text` with every byte below 0x20 and 0x7f written as an escape (\n, \t,
// \x1b, ...), cut to about `max_bytes` with "...[N more bytes]". For one
// name inside a message: `'` + EscapeForMessage(name) + `'`.
std::string EscapeForMessage(absl::string_view text, size_t max_bytes = 256);

// `status` with its message made safe: control bytes escaped (line breaks
// kept when `keep_line_breaks`, for messages that quote a compiler's output),
// each line longer than kMaxMessageLineBytes cut in its middle (its start and
// end kept, saying how much was left out). The code is kept; OK stays OK.
absl::Status SanitizedStatus(const absl::Status& status, bool keep_line_breaks);

}  // namespace kiln

#endif  // KILN_IR_MESSAGE_H_
