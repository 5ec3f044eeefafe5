// File: testing/fuzz/loop_text_fuzzer.cc — fuzz target: loop text (the
// `kilnc opt` loop input and the program inside an AOT description,
// ir/loop/text.h) -> parser -> verifier -> printer. The parser gives an
// InvalidArgument "LINE:COL: ..." or a program; a program prints back to
// text that parses to the same text (round trip).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/text.h"
#include "ir/loop/verifier.h"
#include "testing/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using absl::StatusCode;
  namespace loop = kiln::ir::loop;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<loop::LoopProgram> p = loop::ParseProgram(text);
  kiln::fuzz::CheckStatus(p.status(), {StatusCode::kInvalidArgument}, "ParseProgram");
  if (!p.ok()) return 0;
  kiln::fuzz::CheckStatus(loop::VerifyProgram(*p), {StatusCode::kInvalidArgument},
                          "VerifyProgram");
  const std::string printed = loop::PrintProgram(*p);
  absl::StatusOr<loop::LoopProgram> again = loop::ParseProgram(printed);
  if (!again.ok()) {
    kiln::fuzz::Fail("printed loop text does not parse back",
                     again.status().ToString() + "\n" + printed.substr(0, 2000));
  }
  const std::string reprinted = loop::PrintProgram(*again);
  if (reprinted != printed) {
    kiln::fuzz::Fail("loop text does not round-trip", printed.substr(0, 2000) +
                                                          "\n----- reprinted:\n" +
                                                          reprinted.substr(0, 2000));
  }
  return 0;
}
