// File: tools/kilnc_lib.h — the testable parts of the `kilnc` command line
// tool: argument parsing for each subcommand, `--shape name=1x3x224x224`
// parsing, tensor summaries and seeded random inputs, and the pure pieces of
// `bench` and `profile` (latency statistics, the JSON result line, the
// progress bar, the Chrome trace and the per-kernel time table).
//
//   absl::StatusOr<tools::Command> cmd = tools::ParseCommandLine(args);
//   if (!cmd.ok()) { std::cerr << cmd.status().message(); return 2; }
//   kiln::CompileOptions options = tools::ToCompileOptions(cmd->compile);
#ifndef KILN_TOOLS_KILNC_LIB_H_
#define KILN_TOOLS_KILNC_LIB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph/tensor.h"
#include "nlohmann/json.hpp"
#include "runtime/compiled_model.h"
#include "interp/compare.h"

namespace kiln::tools {

// Exit codes of kilnc.
inline constexpr int kExitOk = 0;
inline constexpr int kExitWrongResult = 1;
inline constexpr int kExitBadInput = 2;
// A valid model and input that do not fit in the memory this process may
// use (ResourceExhausted): neither the model's fault nor a wrong result;
// the same command can pass with more memory or smaller shapes.
inline constexpr int kExitResourceExhausted = 3;

// The exit code for a failed operation: kExitBadInput when the user's input
// is at fault (InvalidArgument, NotFound, OutOfRange),
// kExitResourceExhausted when memory ran out (ResourceExhausted),
// kExitWrongResult for everything else (Unimplemented, Internal, ...).
int ExitCodeFor(const absl::Status& status);

// ---------------------------------------------------------------- arguments

// How a model executes: kiln's compiled code, kiln's eager baseline (one
// kernel per op) or the reference interpreter (check and run only).
enum class Engine { kCompiled, kEager, kReference };
const char* EngineName(Engine engine);

// Flags every subcommand takes: how to compile the model.
struct CompileFlags {
  std::string isa;  // --isa; empty: the best this CPU runs
  int threads = 0;  // --threads; 0: OMP_NUM_THREADS, else every core
  Engine engine = Engine::kCompiled;  // --mode (and --engine for check/run)
  std::vector<std::string> disabled_passes;  // --disable-pass, repeatable
  bool prepack = true;                       // --no-prepack
  bool reference_fallback = true;            // --no-reference-fallback
  // --shape name=dims, in command-line order: one shape per input, bound
  // at compile time.
  std::vector<std::pair<std::string, ir::Shape>> shapes;
  std::string cache_dir;  // --cache-dir; as given, resolve with ResolvePath
  // --precision: what Conv/MatMul/Gemm compute in (CompileOptions::precision).
  CompileOptions::Precision precision = CompileOptions::Precision::kF32;
  // --tune-calls: CompileOptions::call_tuning.
  CompileOptions::CallTuning call_tuning = CompileOptions::CallTuning::kOff;
  // --memory-limit: CompileOptions::memory_limit_bytes; 0: none.
  int64_t memory_limit_bytes = 0;
  // --deterministic: CompileOptions::deterministic.
  bool deterministic = false;
  // --denormals: CompileOptions::denormals.
  CompileOptions::Denormals denormals = CompileOptions::Denormals::kFlush;
};

// Flags of the commands that feed a model (run, bench, profile).
struct InputFlags {
  // --input name=file.pb, in command-line order.
  std::vector<std::pair<std::string, std::string>> inputs;
  uint64_t seed = 0;
  // Random integer inputs are drawn from [int_low, int_high).
  int64_t int_low = 0;
  int64_t int_high = 10;
};

struct CheckOptions {
  std::string dir;  // as given; resolve with ResolvePath
  // kilnc's default atol is 1e-5 (whole models accumulate more rounding
  // than ONNX's single-op cases, judged at 1e-7), in units of the output's
  // scale (Tolerance::atol_scaled; --atol-absolute turns that off).
  interp::Tolerance tol{1e-3, 1e-5, std::nullopt, /*atol_scaled=*/true};
  // --rtol, --atol, --atol-absolute or --max-rel given: `tol` is the user's,
  // whatever precision the model holds.
  bool tol_given = false;
  bool verbose = false;  // also print importer warnings and per-output stats
};

struct RunOptions {
  std::string model;         // as given; resolve with ResolvePath
  std::string save_outputs;  // folder; empty: do not save
  bool force = false;        // --force: --save-outputs may replace a data set's files
  int num_values = 8;        // first values printed per output
};

struct CompileCommandOptions {
  std::string model;
  std::string dump_dir;  // --dump-dir; empty: no dumps
  bool verbose = false;  // add the per-kernel table
};

struct ExplainOptions {
  std::string model;
  bool json = false;  // CompileReport::ToJson instead of the text form
};

struct BenchOptions {
  std::string model;
  double min_time_s = 3.0;   // timed runs last at least this long...
  int min_iterations = 10;   // ...and are at least this many
  int warmup = 3;            // untimed runs first
  bool json = false;         // one JSON object line on stdout
  bool progress = false;     // progress bar on stderr even when not a TTY
  // Also compile the model in eager mode and time both interleaved
  // (compiled, eager, compiled, ...): the speedup over kiln's own
  // one-kernel-per-op baseline from the same stretch of machine time.
  bool vs_eager = false;
  // Skip the cold compile (into a fresh cache): compile once, from the
  // user's cache. For repeated benchmark rounds; JSON then has no
  // compile_ms / compile_cache_hit.
  bool warm_only = false;
  // Inputs given several shapes (--shape repeated for one input, or a
  // sweep), in command-line order, each with its shapes in order; every
  // list has the same length. Point k runs input i at sweep[i].second[k].
  // Empty: one shape, bound at compile time (CompileFlags::shapes).
  std::vector<std::pair<std::string, std::vector<ir::Shape>>> sweep;
  // With a sweep: per shape, also compile the model with every input bound
  // to that shape (a static build) and time both alternately, one run each
  // per round; the steady latencies are then those interleaved medians.
  bool vs_static = false;
};

struct ProfileOptions {
  std::string model;
  std::string trace;  // Chrome trace file; empty: only the table
  int iterations = 10;
  int warmup = 1;
  int top = 15;  // kernels in the table
};

// `kilnc aot`: the files of a kiln_aot_library (compiler/aot_writer.h).
struct AotCommandOptions {
  std::string model;
  std::string out_dir;         // --out-dir (required)
  std::string name;            // --name (required): a C++ identifier
  std::vector<std::string> isas = {"scalar", "avx2", "avx512"};  // --isas=a,b
  int shards = 1;              // --shards
  std::string header_include;  // --header; default <out-dir>/<name>.h
  std::string data_dir;        // --data-dir; default <out-dir>
  std::string part;            // --part: "glue" or an ISA; empty: every file
  std::string weights_file;    // --weights: the glue run's weights (--part=ISA)
  bool reference_calls = false;  // --reference-calls
};

struct Command {
  enum class Kind { kHelp, kCheck, kRun, kCompile, kExplain, kBench, kProfile, kAot };
  Kind kind = Kind::kHelp;
  std::string help_text;  // kHelp: what to print on stdout
  CompileFlags compile;   // every command
  InputFlags inputs;      // run, bench, profile
  CheckOptions check;
  RunOptions run;
  CompileCommandOptions compile_cmd;
  ExplainOptions explain;
  BenchOptions bench;
  ProfileOptions profile;
  AotCommandOptions aot;
};

// Parses kilnc's arguments (without argv[0]). `--help` anywhere gives kHelp
// with the relevant usage. Unknown subcommands or flags, missing or malformed
// values give InvalidArgument whose message ends with a usage hint.
absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args);

// Usage of kilnc ("" subcommand) or of one subcommand.
std::string Usage(absl::string_view subcommand = "");

// The compiler options the flags ask for (engine kReference maps to the
// compiled mode: the caller does not compile then). `working_dir` resolves a
// relative --cache-dir.
CompileOptions ToCompileOptions(const CompileFlags& flags,
                                absl::string_view working_dir = "");

// "1x3x224x224" -> {1, 3, 224, 224}. Dims are non-negative decimal integers;
// the element count must fit in int64.
absl::StatusOr<ir::Shape> ParseDims(absl::string_view text);
// "name=1x3x224x224" -> {"name", {1, 3, 224, 224}}. The name is everything
// before the last '=' and must not be empty.
absl::StatusOr<std::pair<std::string, ir::Shape>> ParseShapeFlag(
    absl::string_view text);
// "name=1x{16..512:x2}" -> {"name", {1x16, 1x32, ..., 1x512}}: DIMS with at
// most one brace group, a range {A..B} (step 1), {A..B:+S} (step S),
// {A..B:xF} (times F, F >= 2) or a list {A,B,C}, expanded in place; without
// one, a single shape. At most 1000 shapes.
absl::StatusOr<std::pair<std::string, std::vector<ir::Shape>>> ParseShapeSweepFlag(
    absl::string_view text);
// "name=path" -> {"name", "path"}, split at the first '='; both non-empty.
absl::StatusOr<std::pair<std::string, std::string>> ParseInputFlag(
    absl::string_view text);

// A relative `path` resolved against `working_dir` (bazel run sets
// $BUILD_WORKING_DIRECTORY to where the user typed the command); absolute
// paths and an empty working_dir leave it unchanged.
std::string ResolvePath(absl::string_view path, absl::string_view working_dir);

// ---------------------------------------------------------------- writing

// Whether a command may write the file `path`. Never over one of `inputs`
// (the model and the files the command reads: compared by identity, so a
// link or another spelling of the same file counts), and never into an
// existing data set (`path` is data_set/input_K.pb or output_K.pb and that
// file exists) unless `overwrite_data_set` (kilnc's --force). The error
// names the file and what it is.
absl::Status CheckWritable(const std::string& path, const std::vector<std::string>& inputs,
                           bool overwrite_data_set = false);

// Writes `bytes` to a temporary file next to `path`, then renames it onto
// `path`: a reader sees the old file or the new one, never a part, and a
// failed write leaves the old file as it was.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes);

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

// "1.23 s", "45.6 ms", "789 us".
std::string FormatMs(double ms);
// "512 B", "12.3 kB", "45.6 MB", "1.23 GB" (decimal units).
std::string FormatBytes(int64_t bytes);

// ---------------------------------------------------------------- bench

struct LatencyStats {
  int iterations = 0;
  double median_ms = 0, p90_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0;
};
// The `q`-quantile (0..1) of `values` with linear interpolation between order
// statistics (numpy's default); 0 for no values.
double Quantile(std::vector<double> values, double q);
LatencyStats ComputeLatencyStats(const std::vector<double>& ms);

// What `kilnc bench` measured.
struct BenchResult {
  std::string model;
  std::string isa, mode;
  int threads = 0;  // the team size the runs used
  double compile_ms = 0;       // cold: a fresh JIT cache
  double compile_warm_ms = 0;  // again, the cache now holding the code
  bool cold_skipped = false;  // --warm-only
  bool cold_cache_hit = false;
  // Part of compile_ms: making the JIT's precompiled header, which a cold
  // compile shares with the user's cache (0 when it was there).
  double cold_precompiled_header_ms = 0;
  bool warm_cache_hit = false;
  int warmup = 0;
  double timed_s = 0;  // wall time of the timed runs
  LatencyStats latency;
  int64_t peak_rss_bytes = 0;
  int64_t arena_bytes = 0;
  int64_t prepacked_bytes = 0;
  int kernels = 0, loop_kernels = 0, library_calls = 0;
  // --vs-eager: medians of the interleaved rounds (0 when not asked).
  int vs_eager_rounds = 0;
  double interleaved_compiled_median_ms = 0;
  double interleaved_eager_median_ms = 0;
  int64_t eager_arena_bytes = 0;
  // A sweep (BenchOptions::sweep): one entry per shape point, in order.
  struct ShapePoint {
    std::string shapes;        // "input_ids: [1,16], attention_mask: [1,16]"
    double first_run_ms = 0;   // the first run, compiling its specialization
    bool compiled = false;     // the first run compiled a specialization
    double compile_ms = 0;     // that compile (CompileReport::specializations)
    bool jit_cache_hit = false;
    LatencyStats latency;      // the steady runs after --warmup
    // --vs-static: the static build's median, interleaved with `latency`'s
    // runs, and whether its C++ build was the specialization's (a JIT cache
    // hit: the same generated code).
    double static_median_ms = 0;
    bool static_cache_hit = false;
  };
  std::vector<ShapePoint> points;
};
nlohmann::json BenchResultToJson(const BenchResult& r);

// The shape of every input of `model` for one sweep point: `given` (input
// name -> shape) where given; else each dim the model declares with a
// symbol (TensorInfo::dim_params) that a given input fixes takes that size;
// any other dim keeps the compile-time shape's. InvalidArgument naming the
// input when a given name is not an input.
absl::StatusOr<std::vector<ir::Shape>> SweepPointShapes(
    const std::vector<TensorInfo>& inputs,
    const std::vector<std::pair<std::string, ir::Shape>>& given);

// One progress-bar line (no newline, starts with '\r'): the bar fills as
// both the time and the iteration minimums are approached.
std::string ProgressLine(double elapsed_s, double min_time_s, int iterations,
                         int min_iterations, int width = 30);

// ---------------------------------------------------------------- profile

// The timings of one Profile call and when it started (µs since the first).
struct ProfiledRun {
  double start_us = 0;
  std::vector<CompiledModel::KernelTiming> timings;
};

// "name (op1, op2, ...)": a kernel's trace label; past `max_ops` ops the
// rest are counted ("+3 more").
std::string KernelLabel(const KernelReport& k, size_t max_ops = 8);

// A Chrome / Perfetto trace: {"traceEvents": [...]} with one complete
// ("ph":"X") event per kernel per run, ts/dur in µs, args with the kernel's
// backend, status, ops and the run index. Timings naming a kernel outside
// the report are an InternalError.
absl::StatusOr<nlohmann::json> ChromeTrace(const CompileReport& report,
                                           const std::vector<ProfiledRun>& runs);

struct KernelTotal {
  int kernel = -1;  // index into the report's kernels
  double total_us = 0;
  int calls = 0;
  double share = 0;  // of the summed time of all kernels, 0..1
};
// Kernels by total time over all runs, longest first (ties by index).
std::vector<KernelTotal> KernelTotals(const CompileReport& report,
                                      const std::vector<ProfiledRun>& runs);
// The table `kilnc profile` prints: the first `top` entries of KernelTotals.
std::string FormatKernelTable(const CompileReport& report,
                              const std::vector<KernelTotal>& totals, int runs,
                              int top);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_KILNC_LIB_H_
