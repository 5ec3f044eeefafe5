// File: testing/fuzz/graph_text_fuzzer.cc — fuzz target: graph text (the
// `kilnc opt` graph input, ir/graph/text.h) -> parser -> verifier -> printer.
// The parser gives an InvalidArgument "LINE:COL: ..." or a graph; a graph
// prints back to text that parses to the same text (round trip).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph/text.h"
#include "ir/graph/verifier.h"
#include "testing/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using absl::StatusCode;
  kiln::ir::ParseOptions options;
  options.max_constant_bytes = int64_t{1} << 20;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kiln::ir::Graph> g = kiln::ir::ParseGraph(text, options);
  kiln::fuzz::CheckStatus(g.status(), {StatusCode::kInvalidArgument}, "ParseGraph");
  if (!g.ok()) return 0;
  kiln::fuzz::CheckStatus(kiln::ir::VerifyGraph(*g, kiln::ir::Blame::kModel),
                          {StatusCode::kInvalidArgument}, "VerifyGraph");
  const std::string printed = kiln::ir::PrintGraph(*g, kiln::ir::PrintOptions::Full());
  absl::StatusOr<kiln::ir::Graph> again = kiln::ir::ParseGraph(printed, options);
  if (!again.ok()) {
    kiln::fuzz::Fail("printed graph text does not parse back",
                     again.status().ToString() + "\n" + printed.substr(0, 2000));
  }
  const std::string reprinted = kiln::ir::PrintGraph(*again, kiln::ir::PrintOptions::Full());
  if (reprinted != printed) {
    kiln::fuzz::Fail("graph text does not round-trip", printed.substr(0, 2000) +
                                                           "\n----- reprinted:\n" +
                                                           reprinted.substr(0, 2000));
  }
  return 0;
}
