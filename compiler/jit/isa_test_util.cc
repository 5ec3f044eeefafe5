// Resolves the ISA under test from the environment or /proc/self/cmdline.
#include "compiler/jit/isa_test_util.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "compiler/jit/subprocess.h"

namespace kiln::jit {
namespace {

std::string IsaNameFromCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
  for (absl::string_view arg : absl::StrSplit(cmdline, '\0')) {
    if (absl::ConsumePrefix(&arg, "--kiln_isa=")) return std::string(arg);
  }
  return "";
}

TestIsa Resolve() {
  TestIsa t;
  const char* env = std::getenv("KILN_TEST_ISA");
  std::string name = (env != nullptr && env[0] != '\0') ? env : IsaNameFromCommandLine();
  if (name.empty()) {
    t.isa = isa::BestHostIsa();
    if (t.isa == nullptr) t.error = "no VecISA module is linked into this test";
    return t;
  }
  t.isa = isa::FindIsa(name);
  if (t.isa == nullptr) {
    t.error = absl::StrCat("unknown ISA '", name, "' (is its isa/ module linked in?)");
    return t;
  }
  absl::StatusOr<const isa::VecIsa*> native = isa::SelectIsa(name);
  if (!native.ok()) {
    if (t.isa->emulator.empty()) {
      t.skip_reason = absl::StrCat("ISA '", name, "' cannot run on this host and has no emulator: ",
                                   native.status().message());
      return t;
    }
    t.emulated = true;
    const std::vector<std::string> emulator =
        absl::StrSplit(t.isa->emulator, ' ', absl::SkipWhitespace());
    if (absl::Status found = FindProgram(emulator.front()).status(); !found.ok()) {
      t.skip_reason = absl::StrCat("emulator for ISA '", name, "' unavailable: ", found.message());
      return t;
    }
  }
  if (absl::Status found = FindProgram(t.isa->cxx).status(); !found.ok()) {
    t.skip_reason = absl::StrCat("compiler for ISA '", name, "' unavailable: ", found.message());
  }
  return t;
}

}  // namespace

TestIsa GetTestIsa() {
  static const TestIsa* resolved = [] {
    auto* t = new TestIsa(Resolve());
    if (!t->skip_reason.empty()) std::fprintf(stderr, "SKIPPED: %s\n", t->skip_reason.c_str());
    return t;
  }();
  return *resolved;
}

}  // namespace kiln::jit
