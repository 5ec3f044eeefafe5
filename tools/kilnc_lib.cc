// kilnc's argument parsing, error metrics, tensor summaries and seeded random
// inputs: everything of the tool that needs no model file to test.
#include "tools/kilnc_lib.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kiln::tools {
namespace {

constexpr absl::string_view kMainUsage =
    R"(usage: kilnc <command> [flags] [args]

kiln's command line tool: runs ONNX models and checks their results.

Commands:
  check DIR     run an ONNX test folder (DIR/model.onnx and
                DIR/test_data_set_*/{input,output}_K.pb) and compare every
                output with the expected one
  run MODEL     run MODEL on given or seeded random inputs and summarize the
                outputs

Run 'kilnc <command> --help' for the flags of a command.
Models run on kiln's reference interpreter (the correctness oracle).
Exit codes: 0 success, 1 wrong result or failed run, 2 bad input (flags,
missing files, unreadable model).
)";

constexpr absl::string_view kCheckUsage =
    R"(usage: kilnc check DIR [--rtol=X] [--atol=X] [--max-rel=X] [--verbose]

Runs DIR/model.onnx on the inputs of every DIR/test_data_set_*/ folder and
compares each output with output_K.pb: max abs error, error relative to the
output's max |ref|, max elementwise relative error, shape/dtype, PASS/FAIL,
and the wall time of each run.

Flags:
  --rtol=X      relative tolerance per element (default 1e-3)
  --atol=X      absolute tolerance per element (default 1e-5); an element
                passes when |got-ref| <= atol + rtol*|ref| (NaN equals NaN)
  --max-rel=X   norm-wise criterion instead: pass when
                max|got-ref| <= X * max|ref| over each output
  --verbose     also print importer notes and statistics of each output
  --help        this text

Exit codes: 0 all outputs pass, 1 a wrong result (or a run that failed),
2 bad input (missing folder or files, unreadable model or data, bad flags).
)";

constexpr absl::string_view kRunUsage =
    R"(usage: kilnc run MODEL [--input NAME=FILE.pb ...] [--shape NAME=DIMS ...]
                  [--seed=N] [--int-range=LO:HI] [--save-outputs=DIR]
                  [--num-values=N]

Runs MODEL (an .onnx file) once and prints, per output, its name, dtype,
shape, min/max/mean and first values, then the import and run times.

Flags:
  --input NAME=FILE.pb   feed graph input NAME from a serialized TensorProto
                         (repeatable); other inputs get seeded random data
  --shape NAME=DIMS      bind the dynamic dims of input NAME, e.g.
                         --shape input=1x3x224x224 (repeatable); dims left
                         dynamic become 1 (the importer says so)
  --seed=N               seed of the random inputs (default 0): floats are
                         N(0,1), integers uniform in the --int-range, bools 0/1
  --int-range=LO:HI      range [LO, HI) of random integer inputs (default 0:10)
  --save-outputs=DIR     write the inputs used and the outputs to DIR as
                         input_K.pb / output_K.pb (a test data set folder)
  --num-values=N         first values printed per output (default 8)
  --help                 this text

Exit codes: 0 success, 1 the run failed, 2 bad input (flags, files, model).
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

absl::StatusOr<Command> ParseCheck(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kCheck;
  CheckOptions& o = cmd.check;
  auto takes_value = [](const std::string& name) -> std::optional<bool> {
    if (name == "rtol" || name == "atol" || name == "max-rel") return true;
    if (name == "verbose" || name == "v") return false;
    return std::nullopt;
  };
  auto on_flag = [&](const std::string& name,
                     const std::string& value) -> absl::Status {
    if (name == "verbose" || name == "v") {
      o.verbose = true;
      return absl::OkStatus();
    }
    absl::StatusOr<double> v = ParseNonNegative("check", name, value);
    if (!v.ok()) return v.status();
    if (name == "rtol") o.tol.rtol = *v;
    if (name == "atol") o.tol.atol = *v;
    if (name == "max-rel") o.tol.max_rel = *v;
    return absl::OkStatus();
  };
  std::vector<std::string> pos;
  absl::Status s = WalkArgs("check", args, 1, takes_value, on_flag, &pos);
  if (!s.ok()) return s;
  if (pos.size() != 1) {
    return UsageError("check", pos.empty()
                                   ? "check needs a folder (DIR)"
                                   : absl::StrCat("check takes one folder, got ",
                                                  pos.size(), " arguments"));
  }
  o.dir = pos[0];
  return cmd;
}

absl::StatusOr<Command> ParseRun(const std::vector<std::string>& args) {
  Command cmd;
  cmd.kind = Command::Kind::kRun;
  RunOptions& o = cmd.run;
  auto takes_value = [](const std::string& name) -> std::optional<bool> {
    if (name == "input" || name == "shape" || name == "seed" ||
        name == "int-range" || name == "save-outputs" ||
        name == "num-values") {
      return true;
    }
    return std::nullopt;
  };
  auto on_flag = [&](const std::string& name,
                     const std::string& value) -> absl::Status {
    if (name == "input") {
      absl::StatusOr<std::pair<std::string, std::string>> in =
          ParseInputFlag(value);
      if (!in.ok()) return UsageError("run", in.status().message());
      for (const auto& [n, f] : o.inputs) {
        if (n == in->first) {
          return UsageError("run", absl::StrCat("--input '", n,
                                                "' given twice"));
        }
      }
      o.inputs.push_back(*std::move(in));
    } else if (name == "shape") {
      absl::StatusOr<std::pair<std::string, ir::Shape>> sh =
          ParseShapeFlag(value);
      if (!sh.ok()) return UsageError("run", sh.status().message());
      for (const auto& [n, d] : o.shapes) {
        if (n == sh->first) {
          return UsageError("run", absl::StrCat("--shape '", n,
                                                "' given twice"));
        }
      }
      o.shapes.push_back(*std::move(sh));
    } else if (name == "seed") {
      if (!absl::SimpleAtoi(value, &o.seed)) {
        return UsageError("run", absl::StrCat(
                                     "--seed wants a non-negative integer, got '",
                                     value, "'"));
      }
    } else if (name == "int-range") {
      std::vector<std::string> parts = absl::StrSplit(value, ':');
      int64_t lo, hi;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) ||
          !absl::SimpleAtoi(parts[1], &hi) || lo >= hi) {
        return UsageError("run", absl::StrCat("--int-range wants LO:HI with "
                                              "LO < HI, got '",
                                              value, "'"));
      }
      o.int_low = lo;
      o.int_high = hi;
    } else if (name == "save-outputs") {
      if (value.empty()) {
        return UsageError("run", "--save-outputs needs a folder");
      }
      o.save_outputs = value;
    } else if (name == "num-values") {
      if (!absl::SimpleAtoi(value, &o.num_values) || o.num_values < 0) {
        return UsageError("run", absl::StrCat(
                                     "--num-values wants an integer >= 0, got '",
                                     value, "'"));
      }
    }
    return absl::OkStatus();
  };
  std::vector<std::string> pos;
  absl::Status s = WalkArgs("run", args, 1, takes_value, on_flag, &pos);
  if (!s.ok()) return s;
  if (pos.size() != 1) {
    return UsageError("run", pos.empty()
                                 ? "run needs a model file (MODEL)"
                                 : absl::StrCat("run takes one model file, got ",
                                                pos.size(), " arguments"));
  }
  o.model = pos[0];
  return cmd;
}

bool IsHelp(const std::string& arg) {
  return arg == "--help" || arg == "-h" || arg == "-help" || arg == "help";
}

std::string FormatDouble(double v) { return absl::StrFormat("%.6g", v); }

}  // namespace

std::string Usage(absl::string_view subcommand) {
  if (subcommand == "check") return std::string(kCheckUsage);
  if (subcommand == "run") return std::string(kRunUsage);
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
  if (sub != "check" && sub != "run") {
    if (!sub.empty() && sub[0] == '-') {
      return UsageError("", absl::StrCat("unknown flag '", sub,
                                         "' (flags go after the command)"));
    }
    return UsageError("", absl::StrCat("unknown command '", sub,
                                       "'; commands: check, run"));
  }
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "--help" || args[i] == "-h") {
      Command cmd;
      cmd.help_text = Usage(sub);
      return cmd;
    }
  }
  return sub == "check" ? ParseCheck(args) : ParseRun(args);
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

  ir::Tensor t(dtype, shape);
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

}  // namespace kiln::tools
