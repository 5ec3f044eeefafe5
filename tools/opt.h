// File: tools/opt.h — `kilnc opt`, kiln's pass driver (as LLVM's opt and
// XLA's hlo-opt): runs named graph and loop passes on a text-IR file and
// prints the result in the same text form.
//
//   kilnc opt --pass=fuse-vertical --pass=fuse-horizontal loop.txt
//   kilnc opt --pipeline=graph --pipeline=loop --verify-results graph.txt
//
// The input is graph text (ir/graph/text.h) or loop text (ir/loop/text.h),
// told apart by its first keyword (`graph`) or by --ir. Passes come from the
// registries next to the pipelines (passes/graph_pipeline.h,
// passes/loop/loop_pipeline.h), by the names --disable-pass takes. A graph
// is lowered (lowering/lower_graph.h) before the first loop pass.
#ifndef KILN_TOOLS_OPT_H_
#define KILN_TOOLS_OPT_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::tools {

// One step of `kilnc opt`, in command-line order.
struct OptStep {
  enum class Kind {
    kPass,           // --pass=NAME: one graph or loop pass
    kGraphPipeline,  // --pipeline=graph: every pass of DefaultGraphPipeline
    kLoopPipeline,   // --pipeline=loop: every pass of DefaultLoopPipeline
    kLower,          // --lower: the graph to loop IR
  };
  Kind kind = Kind::kPass;
  std::string pass;  // kPass
};

enum class OptIr { kGraph, kLoop };

// What propagate-layout asks which activation layouts the conv library
// wants: nobody (every buffer stays plain), or this process's oneDNN (its
// answer depends on the CPU, capped by DNNL_MAX_CPU_ISA).
enum class OptConvLayoutOracle { kNone, kOneDnn };

struct OptOptions {
  std::vector<OptStep> steps;
  std::optional<OptIr> ir;  // --ir=graph|loop; unset: from the first keyword
  std::string input;        // the IR file, as given ("-": stdin)
  std::string output;       // -o FILE; empty: stdout
  OptConvLayoutOracle conv_layout_oracle = OptConvLayoutOracle::kNone;
  // --verify-results: the input and the result compute the same outputs
  // (graph reference interpreter, loop interpreter) on two seeded random
  // input sets (seeds `seed` and `seed` + 1).
  bool verify_results = false;
  uint64_t seed = 1;
  double rtol = 1e-5;
  double atol = 1e-6;
  // Random integer inputs are drawn from [int_low, int_high).
  int64_t int_low = -5;
  int64_t int_high = 6;
};

// `kilnc opt --help`.
std::string OptUsage();

// Parses `kilnc opt`'s arguments (args[0] is "opt"). InvalidArgument with a
// usage hint for unknown flags or malformed values; pass names are checked
// by RunOpt. A missing input is allowed here (the test runner passes text).
absl::StatusOr<OptOptions> ParseOptArgs(const std::vector<std::string>& args);

struct OptResult {
  // What `kilnc opt` prints: the IR after the steps (graph text with every
  // constant in full, or loop text), or "(unchanged)\n" when it is still of
  // the input's kind and no step changed it.
  std::string text;
  bool changed = false;
};

// Runs `options.steps` on the IR text `input`; `input_name` prefixes the
// parsers' LINE:COL errors. InvalidArgument for unparsable input, unknown
// pass names (listing the passes), a graph pass after lowering or on loop
// IR; a pass's own error prefixed with its name; InternalError when the
// verifier rejects a pass's result, when a pass says it changed nothing but
// did, or when --verify-results finds different outputs.
absl::StatusOr<OptResult> RunOpt(const OptOptions& options, absl::string_view input,
                                 absl::string_view input_name);

// `kilnc opt` (args[0] is "opt"): parses, reads the input (relative paths
// from `working_dir`), runs, writes; the kilnc exit code (tools/kilnc_lib.h).
int OptMain(const std::vector<std::string>& args, absl::string_view working_dir,
            std::ostream& out, std::ostream& err);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_OPT_H_
