// File: ir/message.h — model text made safe for error messages: control bytes
// escaped, every line capped, so a hostile name cannot drive a terminal,
// split a message or make it megabytes long.
#ifndef KILN_IR_MESSAGE_H_
#define KILN_IR_MESSAGE_H_

#include <cstddef>
#include <string>
#include <type_traits>

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

// An argument of a message built with absl::StrCat from model text and
// fixed words: a std::string or absl::string_view (a name, an attribute
// value) is escaped and capped as EscapeForMessage does; string literals,
// numbers and other StrCat arguments pass as they are. For helpers that
// build a whole message from their arguments (interp's OpContext::Error).
inline std::string MessageArg(const std::string& text) { return EscapeForMessage(text); }
inline std::string MessageArg(absl::string_view text) { return EscapeForMessage(text); }
template <typename T, typename = std::enable_if_t<!std::is_same_v<T, std::string> &&
                                                  !std::is_same_v<T, absl::string_view>>>
const T& MessageArg(const T& other) {
  return other;
}

// `message` made safe as SanitizedStatus makes a status's message.
std::string SanitizedMessage(absl::string_view message, bool keep_line_breaks);

// `status` with its message made safe: control bytes escaped (line breaks
// kept when `keep_line_breaks`, for messages that quote a compiler's output),
// each line longer than kMaxMessageLineBytes cut in its middle (its start and
// end kept, saying how much was left out). The code is kept; OK stays OK.
absl::Status SanitizedStatus(const absl::Status& status, bool keep_line_breaks);

}  // namespace kiln

#endif  // KILN_IR_MESSAGE_H_
