// File: tools/kilnc_lib.h — the testable parts of the `kilnc` command line
// tool: argument parsing for each subcommand, `--shape name=1x3x224x224`
// parsing, error metrics between a result and an expected tensor, and the
// one-line output summary `kilnc run` prints.
//
//   absl::StatusOr<tools::Command> cmd = tools::ParseCommandLine(args);
//   if (!cmd.ok()) { std::cerr << cmd.status().message(); return 2; }
//   tools::ErrorMetrics m = tools::CompareOutput(got, expected, cmd->check.tol);
#ifndef KILN_TOOLS_KILNC_LIB_H_
#define KILN_TOOLS_KILNC_LIB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph/tensor.h"
#include "testing/compare.h"

namespace kiln::tools {

// Exit codes of kilnc.
inline constexpr int kExitOk = 0;
inline constexpr int kExitWrongResult = 1;
inline constexpr int kExitBadInput = 2;

// ---------------------------------------------------------------- arguments

struct CheckOptions {
  std::string dir;  // as given; resolve with ResolvePath
  // kilnc's default atol is 1e-5 (whole models accumulate more rounding
  // than ONNX's single-op cases, judged at 1e-7).
  testing::Tolerance tol{1e-3, 1e-5, std::nullopt};
  bool verbose = false;  // also print importer warnings and per-output stats
};

struct RunOptions {
  std::string model;  // as given; resolve with ResolvePath
  // --input name=file.pb, in command-line order.
  std::vector<std::pair<std::string, std::string>> inputs;
  // --shape name=dims, in command-line order.
  std::vector<std::pair<std::string, ir::Shape>> shapes;
  uint64_t seed = 0;
  // Random integer inputs are drawn from [int_low, int_high).
  int64_t int_low = 0;
  int64_t int_high = 10;
  std::string save_outputs;  // folder; empty: do not save
  int num_values = 8;        // first values printed per output
};

struct Command {
  enum class Kind { kHelp, kCheck, kRun };
  Kind kind = Kind::kHelp;
  std::string help_text;  // kHelp: what to print on stdout
  CheckOptions check;
  RunOptions run;
};

// Parses kilnc's arguments (without argv[0]). `--help` anywhere gives kHelp
// with the relevant usage. Unknown subcommands or flags, missing or malformed
// values give InvalidArgument whose message ends with a usage hint.
absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args);

// Usage of kilnc ("" subcommand) or of one subcommand.
std::string Usage(absl::string_view subcommand = "");

// "1x3x224x224" -> {1, 3, 224, 224}. Dims are non-negative decimal integers;
// the element count must fit in int64.
absl::StatusOr<ir::Shape> ParseDims(absl::string_view text);
// "name=1x3x224x224" -> {"name", {1, 3, 224, 224}}. The name is everything
// before the last '=' and must not be empty.
absl::StatusOr<std::pair<std::string, ir::Shape>> ParseShapeFlag(
    absl::string_view text);
// "name=path" -> {"name", "path"}, split at the first '='; both non-empty.
absl::StatusOr<std::pair<std::string, std::string>> ParseInputFlag(
    absl::string_view text);

// A relative `path` resolved against `working_dir` (bazel run sets
// $BUILD_WORKING_DIRECTORY to where the user typed the command); absolute
// paths and an empty working_dir leave it unchanged.
std::string ResolvePath(absl::string_view path, absl::string_view working_dir);

// ---------------------------------------------------------------- summaries

struct TensorStats {
  double min = 0, max = 0, mean = 0;  // over finite elements
  int64_t num_nan = 0, num_inf = 0;
};
TensorStats ComputeStats(const ir::Tensor& t);

// "'probs' f32[1,10] min -0.5 max 2 mean 0.1 values [0.1, 0.2, ...]"
// showing the first `num_values` elements.
std::string SummarizeTensor(absl::string_view name, const ir::Tensor& t,
                            int num_values);

// Deterministic pseudo-random tensor for `kilnc run`: floats from N(0, 1),
// integers uniform in [int_low, int_high), bools 0/1. Same seed, same data
// on every platform (mt19937_64 with hand-written conversions).
absl::StatusOr<ir::Tensor> RandomTensor(ir::DType dtype, const ir::Shape& shape,
                                        uint64_t seed, int64_t int_low,
                                        int64_t int_high);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_KILNC_LIB_H_
