// kilnc's argument parsing, tensor summaries, seeded random inputs and the
// pure parts of bench and profile: everything of the tool that needs no
// model file to test.
#include "tools/kilnc_lib.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ir/message.h"

namespace kiln::tools {
namespace {

constexpr absl::string_view kMainUsage =
    R"(usage: kilnc <command> [flags] [args]

kiln's command line tool: compiles ONNX models to native code for this CPU,
runs, checks, explains, benchmarks and profiles them.

Commands:
  check DIR       run an ONNX test folder (DIR/model.onnx and
                  DIR/test_data_set_*/{input,output}_K.pb) and compare every
                  output with the expected one
  run MODEL       run MODEL on given or seeded random inputs and summarize the
                  outputs
  compile MODEL   compile MODEL and print the compile report; --dump-dir
                  writes the IR after every pass and the generated C++
  explain MODEL   every kernel: its fused ONNX ops, backend, vectorization
                  and why; every library call: post-ops, weight layout,
                  prepacked bytes, reorders (--json: the report as JSON)
  bench MODEL     cold and warm compile time, then latency (median, p90),
                  peak RSS and arena size (--json: one JSON line)
  profile MODEL   time every kernel, write a Chrome/Perfetto trace and print
                  the kernels that take the most time
  aot MODEL       write the sources of an ahead-of-time compiled library
                  (what tools/aot.bzl's kiln_aot_library builds)
  opt FILE        run named graph or loop passes on a text-IR file and
                  print the result (kiln's pass driver, as LLVM's opt)

Run 'kilnc <command> --help' for the flags of a command.
Models run compiled by default; check and run take --engine=reference for
kiln's reference interpreter (the correctness oracle).
Exit codes: 0 success, 1 wrong result or a kiln failure, 2 bad input (flags,
missing files, an unreadable or invalid model), 3 out of memory (or over
--memory-limit), whichever engine finds it.
)";

constexpr absl::string_view kCompileFlagsUsage =
    R"(
Compile flags:
  --isa=NAME             VecISA module: scalar, avx2, avx512 (default: the
                         best this CPU runs; one it lacks is refused)
  --threads=N            OpenMP team of the generated kernels and oneDNN
                         (default: OMP_NUM_THREADS, else every core)
  --mode=compiled|eager  kiln's compiled code (default), or its eager
                         baseline: one kernel per op, no fusion, no
                         prepacking, no arena sharing
  --disable-pass=NAME    skip a graph or loop pass (repeatable)
  --no-prepack           keep oneDNN weights in the model's layout
  --no-reference-fallback  refuse a model with a node lowering cannot
                         compile (default: it runs on the reference
                         interpreter as a library call, named in explain)
  --shape NAME=DIMS      bind the dynamic dims of input NAME, e.g.
                         --shape input=1x3x224x224 (repeatable); dims left
                         dynamic take any size at run time (each new size
                         compiles on first use; the compile-time program
                         binds them to 1, with a warning)
  --cache-dir=DIR        JIT cache (default $XDG_CACHE_HOME/kiln, else
                         ~/.cache/kiln)
  --precision=f32|bf16|auto
                         what Conv/MatMul/Gemm compute in: f32 (default),
                         bf16 with f32 accumulation and bf16 weights, or
                         auto: bf16 where the CPU has AMX-BF16 (where
                         oneDNN's bf16 beats its f32), else f32
  --tune-calls=off|on|cached
                         library convs whose rule-chosen layouts are
                         doubtful (few or odd channels, ConvTranspose): off
                         (default) keeps the rule; on times the candidate
                         layouts once and caches the fastest under the cache
                         dir; cached (deterministic) uses cached choices only;
                         on and cached also run narrow non-overlapping
                         ConvTransposes as loop kernels
  --denormals=flush|keep subnormal floats during a run: flush (default)
                         treats them as 0 (FTZ/DAZ on the threads running
                         the model: a conv meeting them runs ~100x slower
                         otherwise); keep computes them per IEEE 754
  --memory-limit=BYTES   refuse (exit 3) a model whose arena, constant
                         weights and prepacked weights together need more
                         than BYTES (compiled and eager engines)
  --deterministic        bit-identical results across runs and thread
                         counts on one ISA: oneDNN calls whose threads may
                         split a reduction (gemm-based MatMul/Gemm, RNNs)
                         run on one thread (explain names them); needs
                         --tune-calls=off
)";

constexpr absl::string_view kInputFlagsUsage =
    R"(
Input flags:
  --input NAME=FILE.pb   feed graph input NAME from a serialized TensorProto
                         (repeatable); other inputs get seeded random data
  --seed=N               seed of the random inputs (default 0): floats are
                         N(0,1), integers uniform in the --int-range, bools 0/1
  --int-range=LO:HI      range [LO, HI) of random integer inputs (default 0:10)
)";

constexpr absl::string_view kCheckUsage =
    R"(usage: kilnc check DIR [--engine=compiled|eager|reference] [--rtol=X]
                  [--atol=X] [--atol-absolute] [--max-rel=X] [--verbose]
                  [compile flags]

Compiles DIR/model.onnx, runs it on the inputs of every
DIR/test_data_set_*/ folder and compares each output with output_K.pb: max
abs error, error relative to the output's max |ref|, max elementwise
relative error, shape/dtype, PASS/FAIL; prints the compile time and the
wall time of each run. A data set whose input shapes differ from the
model's recompiles the model with them.

Flags:
  --engine=E    compiled (default), eager (kiln's one-kernel-per-op
                baseline, the same as --mode=eager) or reference (kiln's
                reference interpreter, no compilation)
  --rtol=X      relative tolerance per element (default 1e-3; 2^-8 for a
                model that holds f16 values)
  --atol=X      absolute tolerance per element (default 1e-5; 2^-10, one
                f16 ulp at 1.0, for a model that holds f16 values) in units of
                the output's scale: an element passes when
                |got-ref| <= atol*max(1, max|ref|) + rtol*|ref| (NaN equals
                NaN). A whole fp32 model's rounding error grows with the
                magnitude of what it computes (logits of ~500 have an ulp
                of 3e-5), so outputs beyond [-1, 1] scale atol with them
  --atol-absolute
                numpy.allclose's rule instead: |got-ref| <= atol + rtol*|ref|
  --max-rel=X   norm-wise criterion instead: pass when
                max|got-ref| <= X * max|ref| over each output
  --verbose     also print compile warnings and statistics of each output
  --help        this text
)";

constexpr absl::string_view kCheckExit =
    R"(
Exit codes: 0 all outputs pass, 1 a wrong result (or a run or compile that
failed in kiln), 2 bad input (missing folder or files, an unreadable or
invalid model or data, bad flags), 3 out of memory (a tensor, the arena or the
weights do not fit, or --memory-limit is exceeded), whichever engine finds it.
)";

constexpr absl::string_view kRunUsage =
    R"(usage: kilnc run MODEL [--engine=compiled|eager|reference]
                  [--save-outputs=DIR [--force]] [--num-values=N]
                  [input flags] [compile flags]

Compiles MODEL (an .onnx file), runs it once and prints, per output, its
name, dtype, shape, min/max/mean and first values, then the compile and run
times.

Flags:
  --engine=E             compiled (default), eager or reference (see
                         'kilnc check --help')
  --save-outputs=DIR     write the inputs used and the outputs to DIR as
                         input_K.pb / output_K.pb (a test data set folder);
                         refused where DIR already holds such files, or
                         where a file is an input of this run
  --force                let --save-outputs replace an existing data set's
                         files (the model and the --input files, never)
  --num-values=N         first values printed per output (default 8)
  --help                 this text
)";

constexpr absl::string_view kRunExit =
    R"(
Exit codes: 0 success, 1 the run or compile failed in kiln, 2 bad input
(flags, files, an invalid model), 3 out of memory (a tensor, the arena or the
weights do not fit, or --memory-limit is exceeded), whichever engine finds it.
)";

constexpr absl::string_view kCompileUsage =
    R"(usage: kilnc compile MODEL [--dump-dir=DIR] [--verbose] [compile flags]

Compiles MODEL and prints the summary of the compile report: time per
phase, JIT cache hit, loop kernels and how many are vectorized, library
calls, arena and weight memory.

Flags:
  --dump-dir=DIR   write the graph IR after every graph pass (DIR/graph/),
                   the loop IR after lowering and every loop pass
                   (DIR/loop/) and the generated C++ (DIR/cpp/)
  --verbose        add a table of every kernel
  --help           this text
)";

constexpr absl::string_view kExplainUsage =
    R"(usage: kilnc explain MODEL [--json] [compile flags]

Compiles MODEL and lists every kernel in execution order: the ONNX ops it
computes, its backend (loop: generated code; onednn: a oneDNN primitive;
reference: a library op on kiln's reference interpreter), whether it is
vectorized and why not; for library calls the post-ops, weight layout,
prepacked bytes and activation reorders per call.

Flags:
  --json    print the compile report as one JSON object (kernels,
            extern_calls, reorders, memory, compile times)
  --help    this text
)";

constexpr absl::string_view kBenchUsage =
    R"(usage: kilnc bench MODEL [--min-time=S] [--min-iterations=N]
                  [--warmup=N] [--json] [--progress] [--vs-eager]
                  [--warm-only] [input flags] [compile flags]

Compiles MODEL twice: cold, into a fresh temporary JIT cache (deleted
afterwards; with --cache-dir, into that one), then warm, from that cache.
The cold compile uses the JIT's precompiled header of the user's cache
(made there once if missing: JSON compile_precompiled_header_ms); with
--cache-dir, that cache's.
Then runs it --warmup times untimed, then timed until both --min-time and
--min-iterations are reached, and prints the median, p90, mean and min
latency, the peak resident memory (getrusage) and the arena size.

Flags:
  --min-time=S         timed runs last at least S seconds (default 3)
  --min-iterations=N   and are at least N (default 10)
  --warmup=N           untimed runs first (default 3)
  --json               print exactly one JSON object line on stdout
                       (median_ms, p90_ms, mean_ms, iterations, compile_ms,
                       compile_warm_ms, peak_rss_bytes, arena_bytes,
                       threads, mode, isa, model, ...)
  --progress           show the progress bar on stderr even when stderr is
                       not a terminal
  --vs-eager           then also compile MODEL in eager mode (one kernel per
                       op, no fusion, prepacking or arena sharing) and time
                       both alternately, one run each per round, for
                       --min-time more: prints both medians and the speedup
                       (JSON: eager_median_ms, speedup_vs_eager)
  --warm-only          skip the cold compile: compile once, from the JIT
                       cache (--cache-dir or the user's); for repeated
                       benchmark rounds (JSON then omits compile_ms)
  --vs-static          with several shapes: per shape, also compile the
                       model bound to that shape and time both alternately
                       (JSON: static_median_ms, dynamic_over_static)
  --help               this text

Several shapes: --shape repeated for one input, or a sweep in its DIMS —
one of {A..B} (step 1), {A..B:+S}, {A..B:xF} (times F) or {A,B,C}:
  kilnc bench bert.onnx --shape input_ids=1x{16..512:x2}
compiles MODEL once with those inputs' dynamic dims unbound, then per shape
times the first run (which compiles that shape's specialization) and the
steady latency (--warmup, then --min-time / --min-iterations per shape).
Inputs not given take the swept sizes of the dims they share a symbol with
(ONNX dim_param; attention_mask follows input_ids above). Swept inputs
need as many shapes each; point K runs each at its K-th shape.
)";

constexpr absl::string_view kProfileUsage =
    R"(usage: kilnc profile MODEL [--trace=FILE.json] [--iterations=N]
                  [--warmup=N] [--top=N] [input flags] [compile flags]

Compiles MODEL, runs it --warmup times, then --iterations times timing every
kernel; writes a Chrome/Perfetto trace (open in ui.perfetto.dev or
chrome://tracing) and prints the kernels that take the most time, with their
share of the total.

Flags:
  --trace=FILE.json   where the trace goes (default: no trace)
  --iterations=N      profiled runs (default 10)
  --warmup=N          untimed runs first (default 1)
  --top=N             kernels in the table (default 15)
  --help              this text
)";

constexpr absl::string_view kAotUsage =
    R"(usage: kilnc aot MODEL --out-dir=DIR --name=NAME [--isas=scalar,avx2,avx512]
                 [--shards=N] [--header=PATH] [--data-dir=DIR]
                 [--part=glue|ISA [--weights=FILE]] [--reference-calls]
                 [compile flags]

Compiles MODEL ahead of time and writes into DIR what a cc_library needs
(compiler/aot_writer.h): NAME.h (NAME::Create), NAME_table.cc, NAME_data.S,
NAME_weights.inc and, per ISA, NAME_<isa>_program.inc (the compiled
program), NAME_<isa>_table.cc, NAME_<isa>_data.S and N translation units
NAME_<isa>_<k>.cc of loop kernels. tools/aot.bzl runs it once per ISA
(--part=ISA, oneDNN capped at that ISA) and once for the rest (--part=glue).

Flags:
  --out-dir=DIR    where the files go (must exist)
  --name=NAME      C++ namespace and file stem ([A-Za-z_][A-Za-z0-9_]*)
  --isas=LIST      VecISA modules to compile kernels for (any registered one,
                   also one this CPU lacks)
  --shards=N       translation units per ISA (default 1)
  --header=PATH    how NAME_table.cc includes NAME.h (default DIR/NAME.h)
  --data-dir=DIR   where the assembler finds the .inc files (default DIR)
  --part=P         only the files of ISA P, or the shared ones (glue)
  --weights=FILE   with --part=ISA: the glue run's NAME_weights.inc, which
                   must hold this run's constants byte for byte
  --reference-calls  link kiln's reference interpreter into the library (for
                   nodes lowering cannot compile and library calls oneDNN
                   cannot run); without it such a model is refused
  --help           this text
)";

constexpr absl::string_view kToolExit =
    R"(
Exit codes: 0 success, 1 the compile or a run failed, 2 bad input (flags,
files, model), 3 out of memory (a tensor, the arena or the weights do not
fit, or --memory-limit is exceeded).
)";

absl::Status UsageError(absl::string_view subcommand, absl::string_view what) {
  const std::string hint =
      subcommand.empty() ? "run 'kilnc --help' for usage"
                         : absl::StrCat("run 'kilnc ", subcommand,
                                        " --help' for usage");
  return absl::InvalidArgumentError(absl::StrCat(what, "\n", hint));
}

// One parsed "--name[=value]" argument.
struct Flag {
  std::string name;  // without dashes, '_' folded to '-'
  std::optional<std::string> value;
};

std::optional<Flag> SplitFlag(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "-") return std::nullopt;
  absl::string_view body = arg;
  body.remove_prefix(arg[1] == '-' ? 2 : 1);
  Flag f;
  size_t eq = body.find('=');
  std::string name(eq == absl::string_view::npos ? body : body.substr(0, eq));
  std::replace(name.begin(), name.end(), '_', '-');
  f.name = name;
  if (eq != absl::string_view::npos) f.value = std::string(body.substr(eq + 1));
  return f;
}

absl::StatusOr<double> ParseNonNegative(absl::string_view sub,
                                        absl::string_view flag,
                                        absl::string_view text) {
  double v;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < 0) {
    return UsageError(sub, absl::StrCat("--", flag,
                                        " wants a finite number >= 0, got '",
                                        text, "'"));
  }
  return v;
}

absl::StatusOr<int> ParseIntInRange(absl::string_view sub,
                                    absl::string_view flag,
                                    absl::string_view text, int lo, int hi) {
  int v;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    return UsageError(sub, absl::StrCat("--", flag, " wants an integer in [",
                                        lo, ", ", hi, "], got '", text, "'"));
  }
  return v;
}

// Walks the arguments after the subcommand, handing flags to `on_flag` and
// collecting positionals. `takes_value(name)` says whether a flag needs a
// value (then "--name value" works too).
template <typename TakesValue, typename OnFlag>
absl::Status WalkArgs(absl::string_view sub,
                      const std::vector<std::string>& args, size_t start,
                      TakesValue takes_value, OnFlag on_flag,
                      std::vector<std::string>* positionals) {
  bool flags_done = false;
  for (size_t i = start; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done) {
      positionals->push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    std::optional<Flag> flag = SplitFlag(arg);
    if (!flag) {
      positionals->push_back(arg);
      continue;
    }
    std::optional<bool> needs = takes_value(flag->name);
    if (!needs.has_value()) {
      return UsageError(sub, absl::StrCat("unknown flag '", arg, "'"));
    }
    if (*needs && !flag->value.has_value()) {
      if (i + 1 >= args.size()) {
        return UsageError(sub, absl::StrCat("--", flag->name, " needs a value"));
      }
      flag->value = args[++i];
    }
    if (!*needs && flag->value.has_value()) {
      return UsageError(sub,
                        absl::StrCat("--", flag->name, " takes no value"));
    }
    absl::Status s = on_flag(flag->name, flag->value.value_or(""));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The flags of one subcommand: its own plus the shared groups it takes.
struct FlagSpec {
  std::map<std::string, bool> own;  // name -> takes a value
  bool engine = false;              // --engine (check, run)
  bool inputs = false;              // --input, --seed, --int-range
};

std::optional<bool> CompileFlagTakesValue(const std::string& name) {
  if (name == "isa" || name == "threads" || name == "mode" ||
      name == "disable-pass" || name == "shape" || name == "cache-dir" ||
      name == "precision" || name == "memory-limit" || name == "tune-calls" ||
      name == "denormals") {
    return true;
  }
  if (name == "no-prepack" || name == "no-reference-fallback" || name == "deterministic") {
    return false;
  }
  return std::nullopt;
}

std::optional<bool> InputFlagTakesValue(const std::string& name) {
  if (name == "input" || name == "seed" || name == "int-range") return true;
  return std::nullopt;
}

// Parses the shared flags into `cmd`; the subcommand's own flags go to
// `on_own`. `mode` / `engine` collect --mode and --engine for a final
// consistency check.
struct SharedState {
  std::optional<Engine> from_mode, from_engine;
};

absl::Status OnSharedFlag(absl::string_view sub, const std::string& name,
                          const std::string& value, Command* cmd,
                          SharedState* state) {
  CompileFlags& c = cmd->compile;
  InputFlags& in = cmd->inputs;
  if (name == "isa") {
    if (value.empty()) return UsageError(sub, "--isa needs a module name");
    c.isa = value;
  } else if (name == "threads") {
    absl::StatusOr<int> t = ParseIntInRange(sub, "threads", value, 1, 1024);
    if (!t.ok()) return t.status();
    c.threads = *t;
  } else if (name == "memory-limit") {
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(value, &bytes) || bytes <= 0) {
      return UsageError(sub, absl::StrCat("--memory-limit must be a positive number of bytes, "
                                          "got '", value, "'"));
    }
    c.memory_limit_bytes = bytes;
  } else if (name == "mode") {
    if (value == "compiled") {
      state->from_mode = Engine::kCompiled;
    } else if (value == "eager") {
      state->from_mode = Engine::kEager;
    } else {
      return UsageError(sub, absl::StrCat("unknown --mode '", value,
                                          "'; modes: compiled, eager"));
    }
  } else if (name == "engine") {
    if (value == "compiled") {
      state->from_engine = Engine::kCompiled;
    } else if (value == "eager") {
      state->from_engine = Engine::kEager;
    } else if (value == "reference") {
      state->from_engine = Engine::kReference;
    } else {
      return UsageError(sub, absl::StrCat("unknown --engine '", value,
                                          "'; engines: compiled, eager, "
                                          "reference"));
    }
  } else if (name == "disable-pass") {
    if (value.empty()) return UsageError(sub, "--disable-pass needs a pass name");
    c.disabled_passes.push_back(value);
  } else if (name == "no-prepack") {
    c.prepack = false;
  } else if (name == "no-reference-fallback") {
    c.reference_fallback = false;
  } else if (name == "deterministic") {
    c.deterministic = true;
  } else if (name == "shape") {
    absl::StatusOr<std::pair<std::string, std::vector<ir::Shape>>> sh =
        ParseShapeSweepFlag(value);
    if (!sh.ok()) return UsageError(sub, sh.status().message());
    if (sub == "bench") {
      // Several shapes per input are bench's sweep (ParseBench sorts them).
      for (auto& [n, list] : cmd->bench.sweep) {
        if (n == sh->first) {
          list.insert(list.end(), sh->second.begin(), sh->second.end());
          return absl::OkStatus();
        }
      }
      cmd->bench.sweep.push_back(*std::move(sh));
      return absl::OkStatus();
    }
    if (sh->second.size() != 1) {
      return UsageError(sub, absl::StrCat("--shape '", value, "' gives several shapes; only "
                                          "kilnc bench takes several"));
    }
    for (const auto& [n, d] : c.shapes) {
      if (n == sh->first) {
        return UsageError(sub, absl::StrCat("--shape '", n, "' given twice"));
      }
    }
    c.shapes.emplace_back(sh->first, sh->second[0]);
  } else if (name == "cache-dir") {
    if (value.empty()) return UsageError(sub, "--cache-dir needs a folder");
    c.cache_dir = value;
  } else if (name == "precision") {
    absl::StatusOr<CompileOptions::Precision> p = ParsePrecision(value);
    if (!p.ok()) return UsageError(sub, p.status().message());
    c.precision = *p;
  } else if (name == "denormals") {
    absl::StatusOr<CompileOptions::Denormals> d = ParseDenormals(value);
    if (!d.ok()) return UsageError(sub, d.status().message());
    c.denormals = *d;
  } else if (name == "tune-calls") {
    absl::StatusOr<CompileOptions::CallTuning> t = ParseCallTuning(value);
    if (!t.ok()) return UsageError(sub, t.status().message());
    c.call_tuning = *t;
  } else if (name == "input") {
    absl::StatusOr<std::pair<std::string, std::string>> i = ParseInputFlag(value);
    if (!i.ok()) return UsageError(sub, i.status().message());
    for (const auto& [n, f] : in.inputs) {
      if (n == i->first) {
        return UsageError(sub, absl::StrCat("--input '", n, "' given twice"));
      }
    }
    in.inputs.push_back(*std::move(i));
  } else if (name == "seed") {
    if (!absl::SimpleAtoi(value, &in.seed)) {
      return UsageError(sub, absl::StrCat(
                                 "--seed wants a non-negative integer, got '",
                                 value, "'"));
    }
  } else if (name == "int-range") {
    std::vector<std::string> parts = absl::StrSplit(value, ':');
    int64_t lo, hi;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) ||
        !absl::SimpleAtoi(parts[1], &hi) || lo >= hi) {
      return UsageError(sub, absl::StrCat("--int-range wants LO:HI with "
                                          "LO < HI, got '",
                                          value, "'"));
    }
    in.int_low = lo;
    in.int_high = hi;
  }
  return absl::OkStatus();
}

// Parses `args` (args[0] is the subcommand) with the shared flags of `spec`
// and its own flags (handed to `on_own`); returns the positionals.
template <typename OnOwn>
absl::StatusOr<std::vector<std::string>> ParseSubcommand(
    const std::vector<std::string>& args, const FlagSpec& spec, Command* cmd,
    OnOwn on_own) {
  const std::string& sub = args[0];
  SharedState state;
  auto takes_value = [&](const std::string& name) -> std::optional<bool> {
    auto it = spec.own.find(name);
    if (it != spec.own.end()) return it->second;
    if (std::optional<bool> c = CompileFlagTakesValue(name)) return c;
    if (spec.engine && name == "engine") return true;
    if (spec.inputs) return InputFlagTakesValue(name);
    return std::nullopt;
  };
  auto on_flag = [&](const std::string& name,
                     const std::string& value) -> absl::Status {
    if (spec.own.count(name)) return on_own(name, value);
    return OnSharedFlag(sub, name, value, cmd, &state);
  };
  std::vector<std::string> pos;
  absl::Status s = WalkArgs(sub, args, 1, takes_value, on_flag, &pos);
  if (!s.ok()) return s;
  if (state.from_mode && state.from_engine &&
      *state.from_mode != *state.from_engine) {
    return UsageError(sub, absl::StrCat("--engine=", EngineName(*state.from_engine),
                                        " contradicts --mode=",
                                        EngineName(*state.from_mode)));
  }
  if (state.from_engine) cmd->compile.engine = *state.from_engine;
  if (state.from_mode) cmd->compile.engine = *state.from_mode;
  return pos;
}

absl::Status OnePositional(absl::string_view sub, absl::string_view what,
                           const std::vector<std::string>& pos,
                           std::string* out) {
  if (pos.size() != 1) {
    return UsageError(sub, pos.empty()
                               ? absl::StrCat(sub, " needs ", what)
                               : absl::StrCat(sub, " takes one argument (",
                                              what, "), got ", pos.size()));
  }
  *out = pos[0];
  return absl::OkStatus();
}

absl::StatusOr<Command> ParseCheck(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kCheck;
  CheckOptions& o = cmd.check;
  FlagSpec spec{{{"rtol", true}, {"atol", true}, {"max-rel", true},
                 {"atol-absolute", false}, {"verbose", false}, {"v", false}},
                /*engine=*/true,
                /*inputs=*/false};
  auto on_own = [&](const std::string& name,
                    const std::string& value) -> absl::Status {
    if (name == "verbose" || name == "v") {
      o.verbose = true;
      return absl::OkStatus();
    }
    o.tol_given = true;
    if (name == "atol-absolute") {
      o.tol.atol_scaled = false;
      return absl::OkStatus();
    }
    absl::StatusOr<double> v = ParseNonNegative("check", name, value);
    if (!v.ok()) return v.status();
    if (name == "rtol") o.tol.rtol = *v;
    if (name == "atol") o.tol.atol = *v;
    if (name == "max-rel") o.tol.max_rel = *v;
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> pos =
      ParseSubcommand(args, spec, &cmd, on_own);
  if (!pos.ok()) return pos.status();
  if (pos->size() > 1) {
    return UsageError("check", absl::StrCat("check takes one folder, got ",
                                            pos->size(), " arguments"));
  }
  absl::Status s = OnePositional("check", "a folder (DIR)", *pos, &o.dir);
  if (!s.ok()) return s;
  return cmd;
}

absl::StatusOr<Command> ParseRun(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kRun;
  RunOptions& o = cmd.run;
  FlagSpec spec{{{"save-outputs", true}, {"num-values", true}, {"force", false}},
                /*engine=*/true,
                /*inputs=*/true};
  auto on_own = [&](const std::string& name,
                    const std::string& value) -> absl::Status {
    if (name == "save-outputs") {
      if (value.empty()) {
        return UsageError("run", "--save-outputs needs a folder");
      }
      o.save_outputs = value;
    } else if (name == "force") {
      o.force = true;
    } else if (name == "num-values") {
      if (!absl::SimpleAtoi(value, &o.num_values) || o.num_values < 0) {
        return UsageError("run", absl::StrCat(
                                     "--num-values wants an integer >= 0, got '",
                                     value, "'"));
      }
    }
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> pos =
      ParseSubcommand(args, spec, &cmd, on_own);
  if (!pos.ok()) return pos.status();
  absl::Status s = OnePositional("run", "a model file (MODEL)", *pos, &o.model);
  if (!s.ok()) return s;
  return cmd;
}

absl::StatusOr<Command> ParseCompile(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kCompile;
  CompileCommandOptions& o = cmd.compile_cmd;
  FlagSpec spec{{{"dump-dir", true}, {"verbose", false}, {"v", false}},
                /*engine=*/false,
                /*inputs=*/false};
  auto on_own = [&](const std::string& name,
                    const std::string& value) -> absl::Status {
    if (name == "dump-dir") {
      if (value.empty()) return UsageError("compile", "--dump-dir needs a folder");
      o.dump_dir = value;
    } else {
      o.verbose = true;
    }
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> pos =
      ParseSubcommand(args, spec, &cmd, on_own);
  if (!pos.ok()) return pos.status();
  absl::Status s = OnePositional("compile", "a model file (MODEL)", *pos, &o.model);
  if (!s.ok()) return s;
  return cmd;
}

absl::StatusOr<Command> ParseAot(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kAot;
  AotCommandOptions& o = cmd.aot;
  FlagSpec spec{{{"out-dir", true},
                 {"name", true},
                 {"isas", true},
                 {"shards", true},
                 {"header", true},
                 {"data-dir", true},
                 {"part", true},
                 {"weights", true},
                 {"reference-calls", false}},
                /*engine=*/false,
                /*inputs=*/false};
  auto on_own = [&](const std::string& name, const std::string& value) -> absl::Status {
    if (name == "reference-calls") {
      o.reference_calls = true;
      return absl::OkStatus();
    }
    if (value.empty()) return UsageError("aot", absl::StrCat("--", name, " needs a value"));
    if (name == "out-dir") {
      o.out_dir = value;
    } else if (name == "name") {
      o.name = value;
    } else if (name == "isas") {
      o.isas = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (name == "shards") {
      if (!absl::SimpleAtoi(value, &o.shards) || o.shards < 1 || o.shards > 1024) {
        return UsageError("aot", "--shards wants an integer in [1, 1024]");
      }
    } else if (name == "header") {
      o.header_include = value;
    } else if (name == "part") {
      o.part = value;
    } else if (name == "weights") {
      o.weights_file = value;
    } else {
      o.data_dir = value;
    }
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> pos = ParseSubcommand(args, spec, &cmd, on_own);
  if (!pos.ok()) return pos.status();
  absl::Status s = OnePositional("aot", "a model file (MODEL)", *pos, &o.model);
  if (!s.ok()) return s;
  if (o.out_dir.empty()) return UsageError("aot", "aot needs --out-dir");
  if (o.name.empty()) return UsageError("aot", "aot needs --name");
  if (o.header_include.empty()) o.header_include = absl::StrCat(o.out_dir, "/", o.name, ".h");
  if (o.data_dir.empty()) o.data_dir = o.out_dir;
  return cmd;
}

absl::StatusOr<Command> ParseExplain(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kExplain;
  ExplainOptions& o = cmd.explain;
  FlagSpec spec{{{"json", false}}, /*engine=*/false, /*inputs=*/false};
  auto on_own = [&](const std::string&, const std::string&) -> absl::Status {
    o.json = true;
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> pos =
      ParseSubcommand(args, spec, &cmd, on_own);
  if (!pos.ok()) return pos.status();
  absl::Status s = OnePositional("explain", "a model file (MODEL)", *pos, &o.model);
  if (!s.ok()) return s;
  return cmd;
}

absl::StatusOr<Command> ParseBench(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kBench;
  BenchOptions& o = cmd.bench;
  FlagSpec spec{{{"min-time", true},
                 {"min-iterations", true},
                 {"warmup", true},
                 {"json", false},
                 {"progress", false},
                 {"vs-eager", false},
                 {"vs-static", false},
                 {"warm-only", false}},
                /*engine=*/false,
                /*inputs=*/true};
  auto on_own = [&](const std::string& name,
                    const std::string& value) -> absl::Status {
    if (name == "min-time") {
      absl::StatusOr<double> v = ParseNonNegative("bench", name, value);
      if (!v.ok()) return v.status();
      if (*v > 86400) {
        return UsageError("bench", "--min-time is at most 86400 (a day)");
      }
      o.min_time_s = *v;
    } else if (name == "min-iterations") {
      absl::StatusOr<int> v = ParseIntInRange("bench", name, value, 1, 100000000);
      if (!v.ok()) return v.status();
      o.min_iterations = *v;
    } else if (name == "warmup") {
      absl::StatusOr<int> v = ParseIntInRange("bench", name, value, 0, 1000000);
      if (!v.ok()) return v.status();
      o.warmup = *v;
    } else if (name == "json") {
      o.json = true;
    } else if (name == "progress") {
      o.progress = true;
    } else if (name == "vs-eager") {
      o.vs_eager = true;
    } else if (name == "warm-only") {
      o.warm_only = true;
    } else if (name == "vs-static") {
      o.vs_static = true;
    }
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> pos =
      ParseSubcommand(args, spec, &cmd, on_own);
  if (!pos.ok()) return pos.status();
  absl::Status s = OnePositional("bench", "a model file (MODEL)", *pos, &o.model);
  if (!s.ok()) return s;
  // Inputs of one shape are bound at compile time, as everywhere; inputs of
  // several make the sweep.
  std::vector<std::pair<std::string, std::vector<ir::Shape>>> sweep;
  for (auto& [name, list] : o.sweep) {
    if (list.size() == 1) {
      cmd.compile.shapes.emplace_back(name, list[0]);
    } else {
      sweep.emplace_back(name, std::move(list));
    }
  }
  for (const auto& [name, list] : sweep) {
    if (list.size() != sweep[0].second.size()) {
      return UsageError("bench", absl::StrCat("--shape gives ", sweep[0].second.size(),
                                              " shapes for '", sweep[0].first, "' but ",
                                              list.size(), " for '", name,
                                              "'; swept inputs need as many shapes each"));
    }
  }
  if (!sweep.empty() && o.vs_eager) {
    return UsageError("bench", "--vs-eager takes one shape per input");
  }
  if (sweep.empty() && o.vs_static) {
    return UsageError("bench", "--vs-static needs several shapes (a --shape sweep)");
  }
  o.sweep = std::move(sweep);
  return cmd;
}

absl::StatusOr<Command> ParseProfile(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kProfile;
  ProfileOptions& o = cmd.profile;
  FlagSpec spec{{{"trace", true}, {"iterations", true}, {"warmup", true}, {"top", true}},
                /*engine=*/false,
                /*inputs=*/true};
  auto on_own = [&](const std::string& name,
                    const std::string& value) -> absl::Status {
    if (name == "trace") {
      if (value.empty()) return UsageError("profile", "--trace needs a file name");
      o.trace = value;
      return absl::OkStatus();
    }
    const int lo = name == "warmup" ? 0 : 1;
    absl::StatusOr<int> v = ParseIntInRange("profile", name, value, lo, 1000000);
    if (!v.ok()) return v.status();
    if (name == "iterations") o.iterations = *v;
    if (name == "warmup") o.warmup = *v;
    if (name == "top") o.top = *v;
    return absl::OkStatus();
  };
  absl::StatusOr<std::vector<std::string>> pos =
      ParseSubcommand(args, spec, &cmd, on_own);
  if (!pos.ok()) return pos.status();
  absl::Status s = OnePositional("profile", "a model file (MODEL)", *pos, &o.model);
  if (!s.ok()) return s;
  return cmd;
}

bool IsHelp(const std::string& arg) {
  return arg == "--help" || arg == "-h" || arg == "-help" || arg == "help";
}

std::string FormatDouble(double v) { return absl::StrFormat("%.6g", v); }

constexpr absl::string_view kCommands[] = {"check", "run",   "compile", "explain",
                                           "bench", "profile", "aot"};

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return kExitBadInput;
    case absl::StatusCode::kResourceExhausted:
      return kExitResourceExhausted;
    default:
      return kExitWrongResult;
  }
}

const char* EngineName(Engine engine) {
  switch (engine) {
    case Engine::kCompiled: return "compiled";
    case Engine::kEager: return "eager";
    case Engine::kReference: return "reference";
  }
  return "?";
}

std::string Usage(absl::string_view subcommand) {
  if (subcommand == "check") {
    return absl::StrCat(kCheckUsage, kCompileFlagsUsage, kCheckExit);
  }
  if (subcommand == "run") {
    return absl::StrCat(kRunUsage, kInputFlagsUsage, kCompileFlagsUsage, kRunExit);
  }
  if (subcommand == "compile") {
    return absl::StrCat(kCompileUsage, kCompileFlagsUsage, kToolExit);
  }
  if (subcommand == "explain") {
    return absl::StrCat(kExplainUsage, kCompileFlagsUsage, kToolExit);
  }
  if (subcommand == "bench") {
    return absl::StrCat(kBenchUsage, kInputFlagsUsage, kCompileFlagsUsage, kToolExit);
  }
  if (subcommand == "profile") {
    return absl::StrCat(kProfileUsage, kInputFlagsUsage, kCompileFlagsUsage, kToolExit);
  }
  if (subcommand == "aot") {
    return absl::StrCat(kAotUsage, kCompileFlagsUsage, kToolExit);
  }
  return std::string(kMainUsage);
}

absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& args) {
  if (args.empty()) return UsageError("", "missing command");
  const std::string& sub = args[0];
  if (IsHelp(sub)) {
    Command cmd;
    cmd.help_text = Usage(args.size() > 1 && sub == "help" ? args[1] : "");
    return cmd;
  }
  if (std::find(std::begin(kCommands), std::end(kCommands), sub) ==
      std::end(kCommands)) {
    if (!sub.empty() && sub[0] == '-') {
      return UsageError("", absl::StrCat("unknown flag '", sub,
                                         "' (flags go after the command)"));
    }
    return UsageError("", absl::StrCat("unknown command '", sub, "'; commands: ",
                                       absl::StrJoin(kCommands, ", ")));
  }
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "--help" || args[i] == "-h") {
      Command cmd;
      cmd.help_text = Usage(sub);
      return cmd;
    }
  }
  if (sub == "check") return ParseCheck(args);
  if (sub == "run") return ParseRun(args);
  if (sub == "compile") return ParseCompile(args);
  if (sub == "explain") return ParseExplain(args);
  if (sub == "bench") return ParseBench(args);
  if (sub == "aot") return ParseAot(args);
  return ParseProfile(args);
}

CompileOptions ToCompileOptions(const CompileFlags& flags,
                                absl::string_view working_dir) {
  CompileOptions o;
  o.isa = flags.isa;
  o.threads = flags.threads;
  o.prepack_weights = flags.prepack;
  o.reference_fallback = flags.reference_fallback;
  for (const auto& [name, shape] : flags.shapes) o.input_shapes[name] = shape;
  if (!flags.cache_dir.empty()) o.cache_dir = ResolvePath(flags.cache_dir, working_dir);
  o.mode = flags.engine == Engine::kEager ? CompileOptions::Mode::kEager
                                          : CompileOptions::Mode::kCompiled;
  o.disabled_passes = flags.disabled_passes;
  o.precision = flags.precision;
  o.call_tuning = flags.call_tuning;
  o.memory_limit_bytes = flags.memory_limit_bytes;
  o.deterministic = flags.deterministic;
  o.denormals = flags.denormals;
  return o;
}

absl::StatusOr<ir::Shape> ParseDims(absl::string_view text) {
  if (text.empty()) {
    return absl::InvalidArgumentError(
        "empty shape: expected dims like 1x3x224x224");
  }
  ir::Shape shape;
  for (absl::string_view part : absl::StrSplit(text, 'x')) {
    int64_t d;
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        });
    if (!digits || !absl::SimpleAtoi(part, &d)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad shape '", text, "': dim '", part,
          "' is not a non-negative integer (expected dims like 1x3x224x224)"));
    }
    shape.push_back(d);
  }
  if (ir::NumElements(shape) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad shape '", text, "': too many elements"));
  }
  return shape;
}

absl::StatusOr<std::pair<std::string, ir::Shape>> ParseShapeFlag(
    absl::string_view text) {
  const size_t eq = text.rfind('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad --shape '", text, "': expected NAME=DIMS, e.g. input=1x3x224x224"));
  }
  absl::StatusOr<ir::Shape> dims = ParseDims(text.substr(eq + 1));
  if (!dims.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad --shape '", text, "': ", dims.status().message()));
  }
  return std::make_pair(std::string(text.substr(0, eq)), *std::move(dims));
}

absl::StatusOr<std::pair<std::string, std::vector<ir::Shape>>> ParseShapeSweepFlag(
    absl::string_view text) {
  const size_t open = text.find('{');
  if (open == absl::string_view::npos) {
    absl::StatusOr<std::pair<std::string, ir::Shape>> one = ParseShapeFlag(text);
    if (!one.ok()) return one.status();
    return std::make_pair(one->first, std::vector<ir::Shape>{one->second});
  }
  const size_t eq = text.rfind('=', open);
  const size_t close = text.find('}', open);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad --shape '", text, "': ", why,
        " (expected NAME=DIMS with one {A..B}, {A..B:+S}, {A..B:xF} or {A,B,C}, "
        "e.g. input_ids=1x{16..512:x2})"));
  };
  if (eq == absl::string_view::npos || eq == 0) return bad("no NAME=");
  if (close == absl::string_view::npos) return bad("'{' without '}'");
  if (text.find_first_of("{}", close + 1) != absl::string_view::npos) {
    return bad("more than one {...}");
  }
  const absl::string_view inner = text.substr(open + 1, close - open - 1);
  auto number = [](absl::string_view t, int64_t* v) {
    return !t.empty() &&
           std::all_of(t.begin(), t.end(),
                       [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) &&
           absl::SimpleAtoi(t, v);
  };
  constexpr size_t kMaxShapes = 1000;
  std::vector<int64_t> values;
  const size_t dots = inner.find("..");
  if (dots == absl::string_view::npos) {
    for (absl::string_view part : absl::StrSplit(inner, ',')) {
      int64_t v;
      if (!number(part, &v)) return bad(absl::StrCat("'", part, "' is not a size"));
      values.push_back(v);
    }
  } else {
    absl::string_view rest = inner.substr(dots + 2);
    absl::string_view step = "+1";
    const size_t colon = rest.find(':');
    if (colon != absl::string_view::npos) {
      step = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    }
    int64_t from, to, by;
    if (!number(inner.substr(0, dots), &from) || !number(rest, &to)) {
      return bad("range ends must be sizes");
    }
    if (from > to) return bad("the range is empty");
    if (step.size() < 2 || (step[0] != '+' && step[0] != 'x') || !number(step.substr(1), &by) ||
        by < (step[0] == '+' ? 1 : 2)) {
      return bad("the step is +S (S >= 1) or xF (F >= 2)");
    }
    for (int64_t v = from; v <= to && values.size() <= kMaxShapes;) {
      values.push_back(v);
      if (step[0] == '+' ? v > to - by : v > to / by) break;
      v = step[0] == '+' ? v + by : v * by;
    }
  }
  if (values.size() > kMaxShapes) return bad(absl::StrCat("more than ", kMaxShapes, " shapes"));
  const std::string name(text.substr(0, eq));
  std::vector<ir::Shape> shapes;
  for (int64_t v : values) {
    absl::StatusOr<ir::Shape> dims =
        ParseDims(absl::StrCat(text.substr(eq + 1, open - eq - 1), v, text.substr(close + 1)));
    if (!dims.ok()) return bad(dims.status().message());
    shapes.push_back(*std::move(dims));
  }
  return std::make_pair(name, std::move(shapes));
}

absl::StatusOr<std::pair<std::string, std::string>> ParseInputFlag(
    absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad --input '", text, "': expected NAME=FILE.pb"));
  }
  return std::make_pair(std::string(text.substr(0, eq)),
                        std::string(text.substr(eq + 1)));
}

std::string ResolvePath(absl::string_view path, absl::string_view working_dir) {
  if (path.empty() || path[0] == '/' || working_dir.empty()) {
    return std::string(path);
  }
  return absl::StrCat(absl::StripSuffix(working_dir, "/"), "/", path);
}

absl::Status CheckWritable(const std::string& path, const std::vector<std::string>& inputs,
                           bool overwrite_data_set) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return absl::OkStatus();
  for (const std::string& input : inputs) {
    if (std::filesystem::equivalent(path, input, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing to write '", path, "': it is an input of this command ('", input,
          "'); choose another file"));
    }
  }
  const std::string name = std::filesystem::path(path).filename().string();
  const bool data_file = (absl::StartsWith(name, "input_") || absl::StartsWith(name, "output_")) &&
                         absl::EndsWith(name, ".pb");
  if (data_file && !overwrite_data_set) {
    return absl::AlreadyExistsError(absl::StrCat(
        "refusing to overwrite '", path, "' of an existing data set (its expected outputs would ",
        "be lost); choose an empty folder, or pass --force"));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  const std::string tmp = absl::StrCat(path, ".kiln-tmp-", ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write '", path, "': ", ec.message()));
  }
  return absl::OkStatus();
}

TensorStats ComputeStats(const ir::Tensor& t) {
  TensorStats s;
  double sum = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double v = t.GetAsDouble(i);
    if (std::isnan(v)) {
      ++s.num_nan;
      continue;
    }
    if (std::isinf(v)) {
      ++s.num_inf;
      continue;
    }
    if (finite == 0 || v < s.min) s.min = v;
    if (finite == 0 || v > s.max) s.max = v;
    sum += v;
    ++finite;
  }
  s.mean = finite > 0 ? sum / static_cast<double>(finite) : 0;
  return s;
}

std::string SummarizeTensor(absl::string_view name, const ir::Tensor& t,
                            int num_values) {
  const TensorStats s = ComputeStats(t);
  const bool is_int = !ir::IsFloat(t.dtype());
  std::string out = absl::StrCat("'", name, "' ", t.TypeString());
  if (t.num_elements() > 0) {
    absl::StrAppend(&out, "  min ", FormatDouble(s.min), " max ",
                    FormatDouble(s.max), " mean ", FormatDouble(s.mean));
  }
  if (s.num_nan > 0) absl::StrAppend(&out, " nan ", s.num_nan);
  if (s.num_inf > 0) absl::StrAppend(&out, " inf ", s.num_inf);
  const int64_t shown = std::min<int64_t>(num_values, t.num_elements());
  if (shown > 0) {
    std::vector<std::string> vals;
    for (int64_t i = 0; i < shown; ++i) {
      vals.push_back(is_int ? absl::StrCat(t.GetAsInt64(i))
                            : FormatDouble(t.GetAsDouble(i)));
    }
    absl::StrAppend(&out, "  [", absl::StrJoin(vals, ", "),
                    shown < t.num_elements() ? ", ...]" : "]");
  }
  return out;
}

absl::StatusOr<ir::Tensor> RandomTensor(ir::DType dtype, const ir::Shape& shape,
                                        uint64_t seed, int64_t int_low,
                                        int64_t int_high) {
  if (ir::NumElements(shape) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot make random data of shape ", ir::ShapeToString(shape),
        ": dims must be static (bind them with --shape)"));
  }
  if (int_low >= int_high) {
    return absl::InvalidArgumentError(absl::StrCat(
        "empty integer range [", int_low, ", ", int_high, ")"));
  }
  int64_t lo_limit = std::numeric_limits<int64_t>::min();
  int64_t hi_limit = std::numeric_limits<int64_t>::max();
  switch (dtype) {
    case ir::DType::kI32:
      lo_limit = std::numeric_limits<int32_t>::min();
      hi_limit = std::numeric_limits<int32_t>::max();
      break;
    case ir::DType::kI8:
      lo_limit = -128;
      hi_limit = 127;
      break;
    case ir::DType::kU8:
      lo_limit = 0;
      hi_limit = 255;
      break;
    case ir::DType::kInvalid:
      return absl::InvalidArgumentError("cannot make random data of dtype invalid");
    default:
      break;
  }
  if (ir::IsInteger(dtype) && (int_low < lo_limit || int_high - 1 > hi_limit)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "integer range [", int_low, ", ", int_high, ") does not fit ",
        ir::DTypeName(dtype)));
  }

  absl::StatusOr<ir::Tensor> allocated = ir::Tensor::Create(dtype, shape, "random data");
  if (!allocated.ok()) return allocated.status();
  ir::Tensor t = *std::move(allocated);
  std::mt19937_64 gen(seed);
  auto uniform01 = [&gen] {  // [0, 1) with 53 random bits
    return static_cast<double>(gen() >> 11) * 0x1.0p-53;
  };
  auto normal = [&] {  // Box-Muller; 1-u keeps log's argument in (0, 1]
    const double u1 = 1.0 - uniform01();
    const double u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  };
  const uint64_t span =
      static_cast<uint64_t>(int_high) - static_cast<uint64_t>(int_low);
  auto integer = [&] {
    return static_cast<int64_t>(static_cast<uint64_t>(int_low) + gen() % span);
  };
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case ir::DType::kF32: t.data<float>()[i] = static_cast<float>(normal()); break;
      case ir::DType::kF64: t.data<double>()[i] = normal(); break;
      case ir::DType::kF16:
        t.data<ir::Float16>()[i] = ir::FloatToHalf(static_cast<float>(normal()));
        break;
      case ir::DType::kBF16:
        t.data<ir::BFloat16>()[i] = ir::FloatToBFloat16(static_cast<float>(normal()));
        break;
      case ir::DType::kI64: t.data<int64_t>()[i] = integer(); break;
      case ir::DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(integer()); break;
      case ir::DType::kI8: t.data<int8_t>()[i] = static_cast<int8_t>(integer()); break;
      case ir::DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(integer()); break;
      case ir::DType::kBool: t.data<bool>()[i] = (gen() >> 63) != 0; break;
      case ir::DType::kInvalid: break;
    }
  }
  return t;
}

std::string FormatMs(double ms) {
  if (ms >= 1000) return absl::StrFormat("%.2f s", ms / 1000);
  if (ms >= 1) return absl::StrFormat("%.3g ms", ms);
  return absl::StrFormat("%.3g us", ms * 1000);
}

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 1000) return absl::StrCat(bytes, " B");
  if (bytes < 1000 * 1000) return absl::StrFormat("%.1f kB", b / 1e3);
  if (bytes < int64_t{1000} * 1000 * 1000) return absl::StrFormat("%.1f MB", b / 1e6);
  return absl::StrFormat("%.2f GB", b / 1e9);
}

// ---------------------------------------------------------------- bench

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

LatencyStats ComputeLatencyStats(const std::vector<double>& ms) {
  LatencyStats s;
  s.iterations = static_cast<int>(ms.size());
  if (ms.empty()) return s;
  s.median_ms = Quantile(ms, 0.5);
  s.p90_ms = Quantile(ms, 0.9);
  double sum = 0;
  for (double v : ms) sum += v;
  s.mean_ms = sum / static_cast<double>(ms.size());
  s.min_ms = *std::min_element(ms.begin(), ms.end());
  s.max_ms = *std::max_element(ms.begin(), ms.end());
  return s;
}

nlohmann::json BenchResultToJson(const BenchResult& r) {
  nlohmann::json j{
      {"model", r.model},
      {"isa", r.isa},
      {"mode", r.mode},
      {"threads", r.threads},
      {"compile_ms", r.compile_ms},
      {"compile_warm_ms", r.compile_warm_ms},
      {"compile_cache_hit", r.cold_cache_hit},
      {"compile_precompiled_header_ms", r.cold_precompiled_header_ms},
      {"compile_warm_cache_hit", r.warm_cache_hit},
      {"warmup", r.warmup},
      {"iterations", r.latency.iterations},
      {"timed_s", r.timed_s},
      {"median_ms", r.latency.median_ms},
      {"p90_ms", r.latency.p90_ms},
      {"mean_ms", r.latency.mean_ms},
      {"min_ms", r.latency.min_ms},
      {"max_ms", r.latency.max_ms},
      {"peak_rss_bytes", r.peak_rss_bytes},
      {"arena_bytes", r.arena_bytes},
      {"prepacked_bytes", r.prepacked_bytes},
      {"kernels", r.kernels},
      {"loop_kernels", r.loop_kernels},
      {"library_calls", r.library_calls},
  };
  if (r.cold_skipped) {
    j.erase("compile_ms");
    j.erase("compile_cache_hit");
    j.erase("compile_precompiled_header_ms");
  }
  if (!r.points.empty()) {
    // A sweep: latency per shape; the top-level latency fields describe no
    // one shape.
    for (const char* k : {"iterations", "timed_s", "median_ms", "p90_ms", "mean_ms", "min_ms",
                          "max_ms", "arena_bytes", "prepacked_bytes", "kernels", "loop_kernels",
                          "library_calls"}) {
      j.erase(k);
    }
    nlohmann::json points = nlohmann::json::array();
    for (const BenchResult::ShapePoint& p : r.points) {
      points.push_back({{"shapes", p.shapes},
                        {"first_run_ms", p.first_run_ms},
                        {"compiled", p.compiled},
                        {"compile_ms", p.compile_ms},
                        {"compile_cache_hit", p.jit_cache_hit},
                        {"iterations", p.latency.iterations},
                        {"median_ms", p.latency.median_ms},
                        {"p90_ms", p.latency.p90_ms},
                        {"min_ms", p.latency.min_ms}});
      if (p.static_median_ms > 0) {
        points.back()["static_median_ms"] = p.static_median_ms;
        points.back()["static_compile_cache_hit"] = p.static_cache_hit;
        points.back()["dynamic_over_static"] = p.latency.median_ms / p.static_median_ms;
      }
    }
    j["shapes"] = std::move(points);
  }
  if (r.vs_eager_rounds > 0) {
    j["vs_eager_rounds"] = r.vs_eager_rounds;
    j["interleaved_median_ms"] = r.interleaved_compiled_median_ms;
    j["eager_median_ms"] = r.interleaved_eager_median_ms;
    j["eager_arena_bytes"] = r.eager_arena_bytes;
    j["speedup_vs_eager"] = r.interleaved_compiled_median_ms > 0
                                ? r.interleaved_eager_median_ms / r.interleaved_compiled_median_ms
                                : 0.0;
  }
  return j;
}

absl::StatusOr<std::vector<ir::Shape>> SweepPointShapes(
    const std::vector<TensorInfo>& inputs,
    const std::vector<std::pair<std::string, ir::Shape>>& given) {
  std::vector<std::string> names;
  for (const TensorInfo& in : inputs) names.push_back(in.name);
  std::map<std::string, int64_t> symbols;
  for (const auto& [name, shape] : given) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--shape ", name,
                                                     ": the model has no input '", name,
                                                     "'; its inputs: ",
                                                     absl::StrJoin(names, ", ")));
    }
    const TensorInfo& in = inputs[it - names.begin()];
    for (size_t d = 0; d < in.dim_params.size() && d < shape.size(); ++d) {
      if (!in.dim_params[d].empty()) symbols.emplace(in.dim_params[d], shape[d]);
    }
  }
  std::vector<ir::Shape> shapes;
  for (const TensorInfo& in : inputs) {
    auto g = std::find_if(given.begin(), given.end(),
                          [&](const auto& p) { return p.first == in.name; });
    if (g != given.end()) {
      shapes.push_back(g->second);
      continue;
    }
    ir::Shape shape = in.shape;
    for (size_t d = 0; d < in.dim_params.size() && d < shape.size(); ++d) {
      auto s = symbols.find(in.dim_params[d]);
      if (!in.dim_params[d].empty() && s != symbols.end()) shape[d] = s->second;
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

std::string ProgressLine(double elapsed_s, double min_time_s, int iterations,
                         int min_iterations, int width) {
  const double by_time = min_time_s > 0 ? elapsed_s / min_time_s : 1.0;
  const double by_iterations =
      min_iterations > 0 ? static_cast<double>(iterations) / min_iterations : 1.0;
  const double fraction = std::clamp(std::min(by_time, by_iterations), 0.0, 1.0);
  const int filled = static_cast<int>(fraction * width + 0.5);
  return absl::StrFormat("\r[%s%s] %3d%%  %.1f/%.1f s  %d runs", std::string(filled, '#'),
                         std::string(width - filled, '-'),
                         static_cast<int>(fraction * 100 + 0.5), elapsed_s, min_time_s,
                         iterations);
}

// ---------------------------------------------------------------- profile

std::string KernelLabel(const KernelReport& k, size_t max_ops) {
  // The ops are ONNX node names: model text, escaped and capped.
  std::vector<std::string> ops;
  for (size_t i = 0; i < std::min(max_ops, k.ops.size()); ++i) {
    ops.push_back(EscapeForMessage(k.ops[i], 64));
  }
  if (k.ops.size() > max_ops) ops.push_back(absl::StrCat("+", k.ops.size() - max_ops, " more"));
  if (ops.empty()) return EscapeForMessage(k.name);
  return absl::StrCat(EscapeForMessage(k.name), " (", absl::StrJoin(ops, ", "), ")");
}

absl::StatusOr<nlohmann::json> ChromeTrace(const CompileReport& report,
                                           const std::vector<ProfiledRun>& runs) {
  using nlohmann::json;
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1},
                    {"args", {{"name", absl::StrCat("kiln ", report.model)}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1},
                    {"args", {{"name", "Run"}}}});
  for (size_t r = 0; r < runs.size(); ++r) {
    for (const CompiledModel::KernelTiming& t : runs[r].timings) {
      if (t.kernel < 0 || t.kernel >= static_cast<int>(report.kernels.size())) {
        return absl::InternalError(absl::StrCat(
            "profile timing names kernel ", t.kernel, " but the report has ",
            report.kernels.size(), " kernels; this is a kiln bug"));
      }
      const KernelReport& k = report.kernels[t.kernel];
      json args = {{"backend", k.backend},
                   {"status", k.status},
                   {"ops", k.ops},
                   {"run", r},
                   {"kernel", t.kernel}};
      if (!k.reason.empty()) args["reason"] = k.reason;
      if (!k.call.empty()) args["call"] = k.call;
      events.push_back({{"name", KernelLabel(k)},
                        {"cat", k.backend},
                        {"ph", "X"},
                        {"pid", 1},
                        {"tid", 1},
                        {"ts", runs[r].start_us + t.start_us},
                        {"dur", t.duration_us},
                        {"args", std::move(args)}});
    }
  }
  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"model", report.model},
                {"isa", report.isa},
                {"mode", report.mode},
                {"threads", report.threads},
                {"runs", runs.size()}}}};
}

std::vector<KernelTotal> KernelTotals(const CompileReport& report,
                                      const std::vector<ProfiledRun>& runs) {
  std::vector<KernelTotal> totals(report.kernels.size());
  double all = 0;
  for (size_t k = 0; k < totals.size(); ++k) totals[k].kernel = static_cast<int>(k);
  for (const ProfiledRun& run : runs) {
    for (const CompiledModel::KernelTiming& t : run.timings) {
      if (t.kernel < 0 || t.kernel >= static_cast<int>(totals.size())) continue;
      totals[t.kernel].total_us += t.duration_us;
      ++totals[t.kernel].calls;
      all += t.duration_us;
    }
  }
  for (KernelTotal& t : totals) t.share = all > 0 ? t.total_us / all : 0;
  std::stable_sort(totals.begin(), totals.end(),
                   [](const KernelTotal& a, const KernelTotal& b) {
                     return a.total_us > b.total_us;
                   });
  return totals;
}

std::string FormatKernelTable(const CompileReport& report,
                              const std::vector<KernelTotal>& totals, int runs,
                              int top) {
  double all_us = 0;
  for (const KernelTotal& t : totals) all_us += t.total_us;
  std::string s = absl::StrFormat(
      "top %d of %d kernels by total time over %d run(s); kernels sum to %s per run\n",
      std::min<int>(top, totals.size()), totals.size(), runs,
      FormatMs(runs > 0 ? all_us / 1000 / runs : 0));
  absl::StrAppendFormat(&s, "%4s  %10s  %6s  %-9s  %-10s  %s\n", "#", "ms/run", "share",
                        "backend", "status", "kernel (ops)");
  double cumulative = 0;
  for (int i = 0; i < top && i < static_cast<int>(totals.size()); ++i) {
    const KernelTotal& t = totals[i];
    const KernelReport& k = report.kernels[t.kernel];
    cumulative += t.share;
    absl::StrAppendFormat(&s, "%4d  %10.3f  %5.1f%%  %-9s  %-10s  %s\n", i + 1,
                          runs > 0 ? t.total_us / 1000 / runs : 0.0, 100 * t.share,
                          k.backend, k.status, KernelLabel(k));
  }
  absl::StrAppendFormat(&s, "these %d kernels: %.1f%% of kernel time\n",
                        std::min<int>(top, totals.size()), 100 * cumulative);
  return s;
}

}  // namespace kiln::tools
