// File: ir/message.cc — escaping and capping of text that reaches messages.
#include "ir/message.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kiln {
namespace {

void AppendEscaped(char c, std::string* out) {
  const unsigned char u = static_cast<unsigned char>(c);
  switch (c) {
    case '\n': out->append("\\n"); return;
    case '\t': out->append("\\t"); return;
    case '\r': out->append("\\r"); return;
    default: break;
  }
  if (u < 0x20 || u == 0x7f) {
    absl::StrAppendFormat(out, "\\x%02x", u);
  } else {
    out->push_back(c);
  }
}

}  // namespace

std::string EscapeForMessage(absl::string_view text, size_t max_bytes) {
  std::string out;
  size_t used = 0;
  for (; used < text.size() && out.size() < max_bytes; ++used) AppendEscaped(text[used], &out);
  if (used < text.size()) absl::StrAppend(&out, "...[", text.size() - used, " more bytes]");
  return out;
}

namespace {

// A line escaped and, past kMaxMessageLineBytes, cut in the middle: its start
// says where (file, node) and its end what is wrong, so both are kept.
std::string SafeLine(absl::string_view line) {
  std::string escaped = EscapeForMessage(line, std::string::npos);
  if (escaped.size() <= kMaxMessageLineBytes) return escaped;
  const size_t head = kMaxMessageLineBytes * 3 / 4, tail = kMaxMessageLineBytes / 4;
  return absl::StrCat(escaped.substr(0, head), "...[", escaped.size() - head - tail,
                      " bytes left out]...", escaped.substr(escaped.size() - tail));
}

}  // namespace

std::string SanitizedMessage(absl::string_view message, bool keep_line_breaks) {
  std::vector<std::string> lines;
  if (keep_line_breaks) {
    for (absl::string_view line : absl::StrSplit(message, '\n')) lines.push_back(SafeLine(line));
  } else {
    lines.push_back(SafeLine(message));
  }
  return absl::StrJoin(lines, "\n");
}

absl::Status SanitizedStatus(const absl::Status& status, bool keep_line_breaks) {
  if (status.ok()) return status;
  const std::string safe = SanitizedMessage(status.message(), keep_line_breaks);
  if (safe == status.message()) return status;
  return absl::Status(status.code(), safe);
}

}  // namespace kiln
