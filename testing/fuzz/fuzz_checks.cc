// File: testing/fuzz/fuzz_checks.cc — the checks of fuzz_checks.h.
#include "testing/fuzz/fuzz_checks.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "ir/message.h"

namespace kiln::fuzz {

void Fail(absl::string_view what, absl::string_view detail) {
  std::fprintf(stderr, "kiln fuzz check failed: %.*s\n%.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

void CheckStatus(const absl::Status& status, std::initializer_list<absl::StatusCode> allowed,
                 absl::string_view what) {
  static const bool verbose = [] {
    const char* v = std::getenv("KILN_FUZZ_VERBOSE");
    return v != nullptr && std::string(v) == "1";
  }();
  if (verbose) {
    const std::string s = status.ToString();
    std::fprintf(stderr, "%.*s: %.300s\n", static_cast<int>(what.size()), what.data(), s.c_str());
  }
  if (status.ok()) return;
  bool code_ok = false;
  for (absl::StatusCode c : allowed) code_ok |= status.code() == c;
  if (!code_ok) Fail(absl::StrCat(what, ": unexpected error code"), status.ToString());
  // Room for the "...[N more bytes]..." note a cut line carries.
  constexpr size_t kLineLimit = kMaxMessageLineBytes + 64;
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    if (line.size() > kLineLimit) {
      Fail(absl::StrCat(what, ": a message line of ", line.size(), " bytes"),
           line.substr(0, 300));
    }
    for (char ch : line) {
      const unsigned char u = static_cast<unsigned char>(ch);
      if (u < 0x20 || u == 0x7f) {
        Fail(absl::StrCat(what, ": a raw control byte ", static_cast<int>(u), " in a message"),
             absl::CEscape(line.substr(0, 300)));
      }
    }
  }
}

}  // namespace kiln::fuzz
