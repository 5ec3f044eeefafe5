// Runs a `kilnc opt` test file (see opt_file_test.h).
#include "tools/opt_file_test.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "testing/filecheck.h"
#include "tools/opt.h"

namespace kiln::tools {
namespace {

struct Case {
  int first_line = 1;  // in the file, 1-based
  std::string text;    // the case's lines
  std::vector<std::string> runs;
  std::string title;  // its first comment that is no directive
};

// The text of a `//` or `#` comment line, or nullopt.
std::optional<absl::string_view> CommentText(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&line, "//") && !absl::ConsumePrefix(&line, "#")) {
    return std::nullopt;
  }
  return absl::StripAsciiWhitespace(line);
}

// "CHECK:", "CHECK-NEXT:", "RUN:", "LOWERED-NOT:", ...
bool IsDirective(absl::string_view comment) {
  const size_t colon = comment.find(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  for (char c : comment.substr(0, colon)) {
    if (!absl::ascii_isupper(c) && c != '-' && c != '_') return false;
  }
  return true;
}

bool HasContent(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StripAsciiWhitespace(line).empty() && !CommentText(line).has_value()) return true;
  }
  return false;
}

struct File {
  std::vector<Case> cases;
  // The first chunk's RUN lines: what cases without their own run.
  std::vector<std::string> default_runs;
  bool header_has_checks = false;  // a first chunk without IR checks nothing
};

File SplitCases(absl::string_view text) {
  std::vector<Case> chunks(1);
  std::vector<bool> has_checks(1, false);
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    std::optional<absl::string_view> comment = CommentText(line);
    if (comment.has_value() && *comment == "-----") {
      chunks.emplace_back();
      chunks.back().first_line = line_no + 1;
      has_checks.push_back(false);
      continue;
    }
    Case& c = chunks.back();
    absl::StrAppend(&c.text, line, "\n");
    if (!comment.has_value()) continue;
    absl::string_view body = *comment;
    if (absl::ConsumePrefix(&body, "RUN:")) {
      c.runs.emplace_back(absl::StripAsciiWhitespace(body));
    } else if (IsDirective(body)) {
      has_checks.back() = true;
    } else if (c.title.empty() && !body.empty()) {
      c.title = std::string(body);
    }
  }
  File file;
  file.default_runs = chunks[0].runs;
  file.header_has_checks = !HasContent(chunks[0].text) && has_checks[0];
  for (Case& c : chunks) {
    if (HasContent(c.text)) file.cases.push_back(std::move(c));
  }
  return file;
}

// Runs one RUN line on `input` (the case, preceded by blank lines so that
// line numbers are the file's); OK or why it failed.
absl::Status RunOne(absl::string_view run, const std::string& input,
                    absl::string_view file_name) {
  std::vector<std::string> args = {"opt"};
  std::string prefix = "CHECK";
  for (absl::string_view token : absl::StrSplit(run, ' ', absl::SkipWhitespace())) {
    if (absl::ConsumePrefix(&token, "--check-prefix=")) {
      prefix = std::string(token);
    } else {
      args.emplace_back(token);
    }
  }
  absl::StatusOr<OptOptions> options = ParseOptArgs(args);
  if (!options.ok()) return options.status();
  if (!options->input.empty() || !options->output.empty()) {
    return absl::InvalidArgumentError("RUN lines name no files: the case is the input");
  }
  absl::StatusOr<OptResult> result = RunOpt(*options, input, file_name);
  if (!result.ok()) return result.status();
  absl::Status check = kiln::testing::RunFileCheck(result->text, input, prefix);
  if (!check.ok()) {
    return absl::Status(check.code(), absl::StrCat(check.message(), "\n--- kilnc opt output ---\n",
                                                   result->text));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> RunOptTestFile(absl::string_view text, absl::string_view file_name) {
  const File file = SplitCases(text);
  if (file.cases.empty()) return absl::InvalidArgumentError(absl::StrCat(file_name, ": no cases"));
  if (file.default_runs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": no RUN line before the first case's IR"));
  }
  if (file.header_has_checks) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": CHECK lines before the first `-----` without IR to check"));
  }
  std::string failures;
  for (const Case& c : file.cases) {
    const std::vector<std::string>& runs = c.runs.empty() ? file.default_runs : c.runs;
    const std::string input = absl::StrCat(std::string(c.first_line - 1, '\n'), c.text);
    for (const std::string& run : runs) {
      absl::Status s = RunOne(run, input, file_name);
      if (s.ok()) continue;
      absl::StrAppend(&failures, file_name, ":", c.first_line, ": case '", c.title,
                      "' failed\n  RUN: ", run, "\n", s.message(), "\n\n");
    }
  }
  if (!failures.empty()) return absl::FailedPreconditionError(failures);
  return static_cast<int>(file.cases.size());
}

}  // namespace kiln::tools
