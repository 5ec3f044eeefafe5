// The FileCheck matcher: directives are compiled to regexes and matched in
// order over the output, tracking the current position and line.
#include "testing/filecheck.h"

#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kiln::testing {
namespace {

enum class Kind { kCheck, kNext, kSame, kNot, kLabel };

struct Directive {
  Kind kind;
  std::string pattern;  // as written
  std::regex re;
  int line;  // 1-based line in the check text
};

std::string EscapeRegex(absl::string_view s) {
  std::string out;
  bool in_space = false;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (!in_space) out += "[ \\t]+";
      in_space = true;
      continue;
    }
    in_space = false;
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

absl::StatusOr<std::regex> CompilePattern(absl::string_view p, int line) {
  std::string re;
  while (!p.empty()) {
    size_t open = p.find("{{");
    if (open == absl::string_view::npos) {
      re += EscapeRegex(p);
      break;
    }
    re += EscapeRegex(p.substr(0, open));
    size_t close = p.find("}}", open + 2);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("check line ", line, ": unterminated {{"));
    }
    re += absl::StrCat("(?:", p.substr(open + 2, close - open - 2), ")");
    p.remove_prefix(close + 2);
  }
  try {
    return std::regex(re, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("check line ", line, ": bad regex: ", e.what()));
  }
}

absl::StatusOr<std::vector<Directive>> ParseDirectives(absl::string_view text,
                                                       absl::string_view prefix) {
  const std::pair<std::string, Kind> kNames[] = {
      {absl::StrCat(prefix, "-NEXT:"), Kind::kNext},
      {absl::StrCat(prefix, "-SAME:"), Kind::kSame},
      {absl::StrCat(prefix, "-NOT:"), Kind::kNot},
      {absl::StrCat(prefix, "-LABEL:"), Kind::kLabel},
      {absl::StrCat(prefix, ":"), Kind::kCheck}};
  std::vector<Directive> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    for (const auto& [name, kind] : kNames) {
      size_t at = line.find(name);
      if (at == absl::string_view::npos) continue;
      absl::string_view pattern =
          absl::StripAsciiWhitespace(line.substr(at + name.size()));
      if (pattern.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("check line ", line_no, ": empty ", name));
      }
      absl::StatusOr<std::regex> re = CompilePattern(pattern, line_no);
      if (!re.ok()) return re.status();
      out.push_back({kind, std::string(pattern), *std::move(re), line_no});
      break;
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no ", prefix, " directive: the test checks nothing"));
  }
  return out;
}

struct Match {
  size_t begin, end;
};

std::optional<Match> Find(const std::string& s, size_t from, size_t to,
                          const std::regex& re) {
  if (from > to) return std::nullopt;
  std::smatch m;
  auto first = s.begin() + from, last = s.begin() + to;
  if (!std::regex_search(first, last, m, re)) return std::nullopt;
  return Match{from + m.position(0), from + m.position(0) + m.length(0)};
}

size_t LineEnd(const std::string& s, size_t pos) {
  size_t e = s.find('\n', pos);
  return e == std::string::npos ? s.size() : e;
}

std::string Context(const std::string& s, size_t pos) {
  size_t begin = s.rfind('\n', pos == 0 ? 0 : pos - 1);
  begin = begin == std::string::npos ? 0 : begin + 1;
  size_t end = pos;
  for (int i = 0; i < 4 && end < s.size(); ++i) end = LineEnd(s, end) + 1;
  return std::string(s.substr(begin, std::min(end, s.size()) - begin));
}

}  // namespace

absl::Status RunFileCheck(absl::string_view output_view, absl::string_view check_text,
                          absl::string_view prefix) {
  absl::StatusOr<std::vector<Directive>> directives = ParseDirectives(check_text, prefix);
  if (!directives.ok()) return directives.status();
  const std::string output(output_view);
  size_t pos = 0;            // matching continues from here
  size_t last_match_end = 0;  // end of the previous positive match
  bool have_match = false;
  std::vector<const Directive*> pending_nots;

  auto fail = [&](const Directive& d, absl::string_view why, size_t at) {
    return absl::FailedPreconditionError(absl::StrCat(
        "check line ", d.line, " (", d.pattern, "): ", why,
        "\n--- output from here ---\n", Context(output, at)));
  };
  // CHECK-NOTs must not match in [from, to).
  auto check_nots = [&](size_t from, size_t to) -> absl::Status {
    for (const Directive* n : pending_nots) {
      if (std::optional<Match> m = Find(output, from, to, n->re)) {
        return fail(*n, "found text that must not be there", m->begin);
      }
    }
    pending_nots.clear();
    return absl::OkStatus();
  };

  for (const Directive& d : *directives) {
    switch (d.kind) {
      case Kind::kNot:
        pending_nots.push_back(&d);
        break;
      case Kind::kCheck:
      case Kind::kLabel: {
        std::optional<Match> m = Find(output, pos, output.size(), d.re);
        if (!m) return fail(d, "no match", pos);
        if (absl::Status s = check_nots(pos, m->begin); !s.ok()) return s;
        pos = last_match_end = m->end;
        have_match = true;
        break;
      }
      case Kind::kNext: {
        if (!have_match) return fail(d, "CHECK-NEXT needs a previous match", 0);
        size_t next_line = LineEnd(output, last_match_end);
        if (next_line >= output.size()) return fail(d, "no next line", last_match_end);
        ++next_line;
        std::optional<Match> m =
            Find(output, next_line, LineEnd(output, next_line), d.re);
        if (!m) return fail(d, "not on the next line", next_line);
        if (absl::Status s = check_nots(pos, m->begin); !s.ok()) return s;
        pos = last_match_end = m->end;
        break;
      }
      case Kind::kSame: {
        if (!have_match) return fail(d, "CHECK-SAME needs a previous match", 0);
        std::optional<Match> m =
            Find(output, last_match_end, LineEnd(output, last_match_end), d.re);
        if (!m) return fail(d, "not later on the same line", last_match_end);
        if (absl::Status s = check_nots(pos, m->begin); !s.ok()) return s;
        pos = last_match_end = m->end;
        break;
      }
    }
  }
  return check_nots(pos, output.size());
}

}  // namespace kiln::testing
