// File: compiler/jit/isa_test_util.h — for tests stamped per ISA by
// kiln_isa_test (tools/isa_test.bzl): which ISA this shard tests, and whether
// it runs natively, under its emulator, or must be skipped (visibly).
//
//   TEST(Foo, Bar) {
//     KILN_TEST_ISA_OR_SKIP(t);            // t.isa, t.emulated
//     ...
//   }
#ifndef KILN_COMPILER_JIT_ISA_TEST_UTIL_H_
#define KILN_COMPILER_JIT_ISA_TEST_UTIL_H_

#include <string>

#include "isa/isa.h"

namespace kiln::jit {

struct TestIsa {
  const isa::VecIsa* isa = nullptr;
  // Code for it runs only as an executable under isa->emulator (neon on x86).
  bool emulated = false;
  // Non-empty: the shard cannot run here and the test should skip.
  std::string skip_reason;
  // Non-empty: the shard is misconfigured (unknown ISA name): a failure.
  std::string error;
};

// The ISA named by $KILN_TEST_ISA or a --kiln_isa=<name> argument, else the
// best host ISA. Skips when this CPU lacks it and it has no emulator, or when
// its compiler or emulator is not installed.
TestIsa GetTestIsa();

}  // namespace kiln::jit

// Declares `var` (a TestIsa); fails or skips the current test (with the
// reason on stderr and in the gtest log) when the shard cannot run here.
#define KILN_TEST_ISA_OR_SKIP(var)                                         \
  const ::kiln::jit::TestIsa var = ::kiln::jit::GetTestIsa();      \
  if (!var.error.empty()) FAIL() << var.error;                             \
  if (!var.skip_reason.empty()) GTEST_SKIP() << "SKIPPED: " << var.skip_reason

#endif  // KILN_COMPILER_JIT_ISA_TEST_UTIL_H_
