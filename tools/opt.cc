// `kilnc opt`: the pass driver (see opt.h).
#include "tools/opt.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "backends/onednn/layout_oracle.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "interp/loop_module.h"
#include "ir/graph/graph.h"
#include "ir/graph/text.h"
#include "ir/graph/verifier.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "ir/loop/verifier.h"
#include "ir/status_macros.h"
#include "lowering/lower_graph.h"
#include "passes/graph_pipeline.h"
#include "passes/loop/loop_pipeline.h"
#include "passes/loop/propagate_layout.h"
#include "tools/kilnc_lib.h"

namespace kiln::tools {
namespace {

constexpr absl::string_view kOptUsage =
    R"usage(usage: kilnc opt [flags] FILE

Runs graph and loop passes on a text-IR file (graph text or loop text, as
`kilnc compile --dump-dir` writes them; '-' reads stdin) and prints the
result in the same text form, or "(unchanged)" when no pass changed it.
A graph is lowered to loop IR before the first loop pass.

Flags (steps run in command-line order):
  --pass=NAME            run one pass (listed below); repeatable
  --pipeline=graph|loop  run every pass of kiln's graph or loop pipeline,
                         in its order (the f32 compile's: without
                         store-activations-in-bf16)
  --lower                lower the graph to loop IR (no pass needed)
  --ir=graph|loop        the input's IR (default: `graph` as its first
                         keyword means graph text, anything else loop text)
  --conv-layout-oracle=none|onednn
                         what propagate-layout asks for the layouts conv
                         kernels want: nobody (default: every buffer stays
                         plain) or this CPU's oneDNN (DNNL_MAX_CPU_ISA caps
                         it)
  --verify-results       check the result computes what the input does:
                         graph reference interpreter / loop interpreter on
                         two seeded random input sets (loop text's constant
                         buffers, which carry no data, get seeded data too)
  --seed=N               first seed of --verify-results (default 1)
  --rtol=X --atol=X      its tolerance (default 1e-5, 1e-6)
  --int-range=LO:HI      its random integers, from [LO, HI) (default -5:6)
  -o FILE                write the result to FILE instead of stdout

Exit codes: 0 success, 1 a pass failed or the results differ, 2 bad input
(flags, unknown pass, unreadable IR).
)usage";

absl::Status UsageError(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, "\nrun 'kilnc opt --help' for usage"));
}

absl::StatusOr<double> ParseTolerance(absl::string_view flag, absl::string_view value) {
  double v;
  if (!absl::SimpleAtod(value, &v) || !(v >= 0)) {
    return UsageError(absl::StrCat("--", flag, " wants a non-negative number, got '",
                                   value, "'"));
  }
  return v;
}

bool IsGraphPass(absl::string_view name) {
  for (const std::string& n : passes::GraphPassNames()) {
    if (n == name) return true;
  }
  return false;
}

bool IsLoopPass(absl::string_view name) {
  for (const std::string& n : passes::LoopPassNames()) {
    if (n == name) return true;
  }
  return false;
}

absl::Status UnknownPass(absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown pass '", name, "'; graph passes: ",
      absl::StrJoin(passes::GraphPassNames(), ", "),
      "; loop passes: ", absl::StrJoin(passes::LoopPassNames(), ", ")));
}

// `graph` when the first word outside comments is `graph`.
OptIr DetectIr(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "//") || absl::StartsWith(line, "#")) {
      continue;
    }
    return absl::StartsWith(line, "graph") ? OptIr::kGraph : OptIr::kLoop;
  }
  return OptIr::kLoop;
}

// A seeded random tensor per `inputs` entry (graph inputs or loop buffers).
absl::StatusOr<std::vector<ir::Tensor>> RandomInputs(
    const std::vector<std::pair<std::string, std::pair<ir::DType, ir::Shape>>>& inputs,
    uint64_t seed, const OptOptions& options) {
  std::vector<ir::Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& [name, type] = inputs[i];
    if (ir::NumElements(type.second) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--verify-results needs static input shapes; ", name, " is ",
          ir::ShapeToString(type.second)));
    }
    absl::StatusOr<ir::Tensor> t = RandomTensor(type.first, type.second, seed * 1000003 + i,
                                                options.int_low, options.int_high);
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", t.status().message()));
    out.push_back(*std::move(t));
  }
  return out;
}

// The IR between steps: a graph until it is lowered, then a loop module.
struct Ir {
  OptIr kind = OptIr::kGraph;
  ir::Graph graph;
  ir::loop::LoopModule module;

  // The graph reference interpreter or the loop interpreter.
  absl::StatusOr<std::vector<ir::Tensor>> Run(absl::Span<const ir::Tensor> inputs) const {
    if (kind == OptIr::kGraph) return interp::Run(graph, inputs);
    for (const ir::loop::Kernel& k : module.program.kernels) {
      if (k.kind == ir::loop::Kernel::Kind::kExtern &&
          k.call.attrs.count(ir::loop::kAttrChannelBlock) > 0) {
        return absl::UnimplementedError(absl::StrCat(
            "--verify-results cannot run channel-blocked extern kernels (", k.name,
            " after propagate-layout)"));
      }
    }
    return interp::RunLoopModule(module, inputs);
  }
};

// A loop program read from text as a module: graph inputs and outputs are
// the input and output buffers in order; constant buffers (the text has no
// data) are bound to seeded random data.
absl::StatusOr<ir::loop::LoopModule> LoopModuleFromText(ir::loop::LoopProgram program,
                                                        const OptOptions& options) {
  ir::loop::LoopModule lp;
  lp.program = std::move(program);
  for (size_t b = 0; b < lp.program.buffers.size(); ++b) {
    const ir::loop::Buffer& buf = lp.program.buffers[b];
    const int32_t index = static_cast<int32_t>(b);
    switch (buf.kind) {
      case ir::loop::BufferKind::kInput:
        lp.inputs.push_back(index);
        break;
      case ir::loop::BufferKind::kOutput:
        lp.outputs.push_back(index);
        break;
      case ir::loop::BufferKind::kConstant: {
        KILN_ASSIGN_OR_RETURN(
            ir::Tensor t, RandomTensor(buf.dtype, buf.shape, 0x5eed0000 + b, options.int_low,
                                       options.int_high));
        lp.constants[index] = std::make_shared<const ir::Tensor>(std::move(t));
        break;
      }
      default:
        break;
    }
  }
  return lp;
}

std::vector<std::pair<std::string, std::pair<ir::DType, ir::Shape>>> Interface(const Ir& ir) {
  std::vector<std::pair<std::string, std::pair<ir::DType, ir::Shape>>> out;
  if (ir.kind == OptIr::kGraph) {
    for (ir::ValueId v : ir.graph.inputs()) {
      const ir::Value& value = ir.graph.value(v);
      out.push_back({ir::PrintValueName(value.name), {value.dtype, value.shape}});
    }
  } else {
    for (int32_t b : ir.module.inputs) {
      const ir::loop::Buffer& buf = ir.module.program.buffers[b];
      out.push_back({absl::StrCat("%", buf.name), {buf.dtype, buf.shape}});
    }
  }
  return out;
}

absl::Status VerifyResults(const Ir& before, const Ir& after, const OptOptions& options) {
  const auto inputs = Interface(before);
  interp::Tolerance tol;
  tol.rtol = options.rtol;
  tol.atol = options.atol;
  for (uint64_t seed : {options.seed, options.seed + 1}) {
    KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> in, RandomInputs(inputs, seed, options));
    absl::StatusOr<std::vector<ir::Tensor>> want = before.Run(in);
    if (!want.ok()) {
      return absl::Status(want.status().code(),
                          absl::StrCat("--verify-results: the input: ", want.status().message()));
    }
    absl::StatusOr<std::vector<ir::Tensor>> got = after.Run(in);
    if (!got.ok()) {
      return absl::Status(got.status().code(),
                          absl::StrCat("--verify-results: the result: ", got.status().message()));
    }
    if (got->size() != want->size()) {
      return absl::InternalError(absl::StrCat("--verify-results: the result has ", got->size(),
                                              " outputs, the input ", want->size()));
    }
    for (size_t i = 0; i < want->size(); ++i) {
      interp::CompareResult r = interp::CompareTensors((*got)[i], (*want)[i], tol);
      if (!r.ok) {
        return absl::InternalError(absl::StrCat("--verify-results: output ", i,
                                                " differs (seed ", seed, "): ", r.message));
      }
    }
  }
  return absl::OkStatus();
}

// Runs steps on an Ir, checking each pass's result as the pipelines do.
class Driver {
 public:
  explicit Driver(const OptOptions& options) : options_(options) {
    if (options.conv_layout_oracle == OptConvLayoutOracle::kOneDnn) {
      oracle_ = onednn::ConvLayoutOracle();
    }
  }

  // InvalidArgument for a pass name in no registry.
  absl::Status CheckNames() const {
    for (const OptStep& step : options_.steps) {
      if (step.kind == OptStep::Kind::kPass && !IsGraphPass(step.pass) &&
          !IsLoopPass(step.pass)) {
        return UnknownPass(step.pass);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Run(const OptStep& step, Ir* ir) {
    switch (step.kind) {
      case OptStep::Kind::kPass:
        return RunPass(step.pass, ir);
      case OptStep::Kind::kGraphPipeline:
        for (const std::string& name : passes::DefaultGraphPipeline().PassNames()) {
          KILN_RETURN_IF_ERROR(RunPass(name, ir));
        }
        return absl::OkStatus();
      case OptStep::Kind::kLoopPipeline:
        for (const std::string& name : passes::DefaultLoopPipeline(oracle_).PassNames()) {
          // The f32 pipeline, where store-activations-in-bf16 changes
          // nothing (bf16 mode only; --pass= runs it).
          if (name == "store-activations-in-bf16") continue;
          KILN_RETURN_IF_ERROR(RunPass(name, ir));
        }
        return absl::OkStatus();
      case OptStep::Kind::kLower:
        if (ir->kind == OptIr::kLoop) {
          return absl::InvalidArgumentError("--lower: the IR is loop IR already");
        }
        return Lower(ir);
    }
    return absl::OkStatus();
  }

  bool changed() const { return changed_; }

 private:
  absl::Status Lower(Ir* ir) {
    lowering::LoweringOptions lo;
    lo.reference_fallback = [](const ir::Graph& g) { return interp::UnsupportedOps(g).empty(); };
    KILN_ASSIGN_OR_RETURN(ir->module, lowering::LowerGraph(ir->graph, lo));
    ir->kind = OptIr::kLoop;
    return absl::OkStatus();
  }

  absl::Status RunPass(const std::string& name, Ir* ir) {
    if (IsGraphPass(name)) {
      if (ir->kind == OptIr::kLoop) {
        return absl::InvalidArgumentError(
            absl::StrCat("graph pass ", name, " cannot run on loop IR (the input is loop "
                         "text, or a loop pass or --lower came first)"));
      }
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<passes::GraphPass> pass,
                            passes::CreateGraphPass(name));
      const std::string before = ir::PrintGraph(ir->graph);
      absl::StatusOr<bool> changed = pass->Run(&ir->graph);
      if (!changed.ok()) {
        return absl::Status(changed.status().code(),
                            absl::StrCat("pass ", name, ": ", changed.status().message()));
      }
      if (*changed) {
        absl::Status v = ir::VerifyGraph(ir->graph);
        if (!v.ok()) {
          return kiln::InternalError("graph invalid after pass ", name, ": ", v.message());
        }
      } else if (ir::PrintGraph(ir->graph) != before) {
        return kiln::InternalError("pass ", name, " said it changed nothing but changed:\n",
                                   ir::PrintGraph(ir->graph));
      }
      changed_ |= *changed;
      return absl::OkStatus();
    }
    if (ir->kind == OptIr::kGraph) KILN_RETURN_IF_ERROR(Lower(ir));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<passes::LoopPass> pass,
                          passes::CreateLoopPass(name, oracle_));
    const std::string before = ir::loop::PrintProgram(ir->module.program);
    absl::StatusOr<bool> changed = pass->Run(&ir->module);
    if (!changed.ok()) {
      return absl::Status(changed.status().code(),
                          absl::StrCat("loop pass ", name, ": ", changed.status().message()));
    }
    if (*changed) {
      absl::Status v = ir::loop::VerifyProgram(ir->module.program);
      if (!v.ok()) {
        return kiln::InternalError("loop program invalid after pass ", name, ": ",
                                   v.message());
      }
    } else if (ir::loop::PrintProgram(ir->module.program) != before) {
      return kiln::InternalError("loop pass ", name, " said it changed nothing but changed:\n",
                                 ir::loop::PrintProgram(ir->module.program));
    }
    changed_ |= *changed;
    return absl::OkStatus();
  }

  const OptOptions& options_;
  passes::ConvLayoutOracle oracle_;
  bool changed_ = false;
};

}  // namespace

std::string OptUsage() {
  return absl::StrCat(kOptUsage, "\nGraph passes: ", absl::StrJoin(passes::GraphPassNames(), ", "),
                      "\nLoop passes: ", absl::StrJoin(passes::LoopPassNames(), ", "), "\n");
}

absl::StatusOr<OptOptions> ParseOptArgs(const std::vector<std::string>& args) {
  OptOptions o;
  bool positional_only = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (positional_only || arg == "-" || arg.empty() || arg[0] != '-') {
      if (!o.input.empty()) {
        return UsageError(absl::StrCat("one input file expected, got '", o.input, "' and '",
                                       arg, "'"));
      }
      o.input = arg;
      continue;
    }
    if (arg == "--") {
      positional_only = true;
      continue;
    }
    if (arg == "-o") {
      if (i + 1 >= args.size()) return UsageError("-o needs a file name");
      o.output = args[++i];
      continue;
    }
    absl::string_view flag = absl::StripPrefix(absl::StripPrefix(arg, "-"), "-");
    std::string name(flag.substr(0, flag.find('=')));
    const bool has_value = flag.find('=') != absl::string_view::npos;
    const std::string value = has_value ? std::string(flag.substr(flag.find('=') + 1)) : "";
    auto need_value = [&]() -> absl::Status {
      if (!has_value || value.empty()) return UsageError(absl::StrCat("--", name, " needs a value"));
      return absl::OkStatus();
    };
    if (name == "pass") {
      KILN_RETURN_IF_ERROR(need_value());
      o.steps.push_back({OptStep::Kind::kPass, value});
    } else if (name == "pipeline") {
      KILN_RETURN_IF_ERROR(need_value());
      if (value == "graph") {
        o.steps.push_back({OptStep::Kind::kGraphPipeline, ""});
      } else if (value == "loop") {
        o.steps.push_back({OptStep::Kind::kLoopPipeline, ""});
      } else {
        return UsageError(absl::StrCat("--pipeline wants graph or loop, got '", value, "'"));
      }
    } else if (name == "lower" && !has_value) {
      o.steps.push_back({OptStep::Kind::kLower, ""});
    } else if (name == "ir") {
      KILN_RETURN_IF_ERROR(need_value());
      if (value == "graph") {
        o.ir = OptIr::kGraph;
      } else if (value == "loop") {
        o.ir = OptIr::kLoop;
      } else {
        return UsageError(absl::StrCat("--ir wants graph or loop, got '", value, "'"));
      }
    } else if (name == "conv-layout-oracle") {
      KILN_RETURN_IF_ERROR(need_value());
      if (value == "none") {
        o.conv_layout_oracle = OptConvLayoutOracle::kNone;
      } else if (value == "onednn") {
        o.conv_layout_oracle = OptConvLayoutOracle::kOneDnn;
      } else {
        return UsageError(
            absl::StrCat("--conv-layout-oracle wants none or onednn, got '", value, "'"));
      }
    } else if (name == "verify-results" && !has_value) {
      o.verify_results = true;
    } else if (name == "seed") {
      if (!absl::SimpleAtoi(value, &o.seed)) {
        return UsageError(absl::StrCat("--seed wants a non-negative integer, got '", value, "'"));
      }
    } else if (name == "rtol") {
      KILN_ASSIGN_OR_RETURN(o.rtol, ParseTolerance(name, value));
    } else if (name == "atol") {
      KILN_ASSIGN_OR_RETURN(o.atol, ParseTolerance(name, value));
    } else if (name == "int-range") {
      std::vector<std::string> parts = absl::StrSplit(value, ':');
      int64_t lo, hi;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) ||
          !absl::SimpleAtoi(parts[1], &hi) || lo >= hi) {
        return UsageError(
            absl::StrCat("--int-range wants LO:HI with LO < HI, got '", value, "'"));
      }
      o.int_low = lo;
      o.int_high = hi;
    } else if (name == "output" || name == "o") {
      KILN_RETURN_IF_ERROR(need_value());
      o.output = value;
    } else {
      return UsageError(absl::StrCat("unknown flag '", arg, "'"));
    }
  }
  return o;
}

absl::StatusOr<OptResult> RunOpt(const OptOptions& options, absl::string_view input,
                                 absl::string_view input_name) {
  Driver driver(options);
  KILN_RETURN_IF_ERROR(driver.CheckNames());
  Ir ir;
  ir.kind = options.ir.value_or(DetectIr(input));
  // The parsers' errors start with LINE:COL, the verifiers' name what is wrong.
  auto located = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(input_name, ":", s.message()));
  };
  auto invalid = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(input_name, ": ", s.message()));
  };
  if (ir.kind == OptIr::kGraph) {
    absl::StatusOr<ir::Graph> g = ir::ParseGraph(input);
    if (!g.ok()) return located(g.status());
    if (absl::Status v = ir::VerifyGraph(*g, ir::Blame::kModel); !v.ok()) return invalid(v);
    ir.graph = *std::move(g);
  } else {
    absl::StatusOr<ir::loop::LoopProgram> p = ir::loop::ParseProgram(input);
    if (!p.ok()) return located(p.status());
    if (absl::Status v = ir::loop::VerifyProgram(*p); !v.ok()) return invalid(v);
    KILN_ASSIGN_OR_RETURN(ir.module, LoopModuleFromText(*std::move(p), options));
  }
  const OptIr input_kind = ir.kind;
  std::optional<Ir> before;
  if (options.verify_results) before = ir;
  for (const OptStep& step : options.steps) KILN_RETURN_IF_ERROR(driver.Run(step, &ir));
  if (before.has_value()) KILN_RETURN_IF_ERROR(VerifyResults(*before, ir, options));

  OptResult result;
  result.changed = driver.changed() || ir.kind != input_kind;
  if (!result.changed) {
    result.text = "(unchanged)\n";
  } else if (ir.kind == OptIr::kGraph) {
    result.text = ir::PrintGraph(ir.graph, ir::PrintOptions::Full());
  } else {
    result.text = ir::loop::PrintProgram(ir.module.program);
  }
  return result;
}

int OptMain(const std::vector<std::string>& args, absl::string_view working_dir,
            std::ostream& out, std::ostream& err) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "--help" || args[i] == "-h") {
      out << OptUsage();
      return kExitOk;
    }
  }
  absl::StatusOr<OptOptions> options = ParseOptArgs(args);
  if (!options.ok()) {
    err << "kilnc opt: " << options.status().message() << "\n";
    return kExitBadInput;
  }
  if (options->input.empty()) {
    err << "kilnc opt: missing the IR file\nrun 'kilnc opt --help' for usage\n";
    return kExitBadInput;
  }
  std::string text;
  std::string name = options->input;
  if (options->input == "-") {
    name = "<stdin>";
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    const std::string path = ResolvePath(options->input, working_dir);
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      err << "kilnc opt: cannot read " << path << "\n";
      return kExitBadInput;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  absl::StatusOr<OptResult> result = RunOpt(*options, text, name);
  if (!result.ok()) {
    err << "kilnc opt: " << result.status().message() << "\n";
    return ExitCodeFor(result.status());
  }
  if (options->output.empty()) {
    out << result->text;
    return kExitOk;
  }
  const std::string path = ResolvePath(options->output, working_dir);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << result->text;
  f.close();
  if (!f) {
    err << "kilnc opt: cannot write " << path << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace kiln::tools
