// File: backends/cpp/test_util.h — for emitter tests: seeded random tensors,
// and running a batch of emitted loop programs with the JIT for one ISA (in
// process, or as an executable with a generated main() under the emulator for
// neon) so they can be compared with the loop interpreter or other data.
//
//   std::vector<ProgramCase> cases = ...;
//   KILN_ASSIGN_OR_RETURN(auto results, RunCases(test_isa, cases));
//   ExpectMatchesInterpreter(cases[0], results[0]);
//
// Many programs at once (one emitted program, few translation units, per-case
// errors): RunCases(test_isa, cases, RunOptions{.merge = true}).
//
// Whole lowered programs, extern kernels included: RunLoweredCases runs the
// loop kernels on the ISA (batched as above) and each extern kernel on the
// host's reference (interp/loop_module.h), for ISAs without oneDNN.
#ifndef KILN_BACKENDS_CPP_TEST_UTIL_H_
#define KILN_BACKENDS_CPP_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/cpp/emitter.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"
#include "compiler/jit/isa_test_util.h"
#include "interp/compare.h"

namespace kiln::backends::cpp {

struct ProgramCase {
  std::string name;  // for messages only
  ir::loop::LoopProgram program;
  std::map<std::string, ir::Tensor> inputs;  // input and constant buffers
  interp::Tolerance tol{1e-6, 1e-7, {}};
  // Symbol/unit prefixes are set per case by RunCases; one unit per program
  // by default (the Highway headers dominate compile time).
  EmitOptions options = [] {
    EmitOptions o;
    o.kernels_per_unit = 1000;
    return o;
  }();
  // Buffers (by name) gathered after the run besides the kOutput ones.
  std::vector<std::string> read_back;
};

struct CaseResult {
  // Merged runs (RunOptions::merge): this case's kernels of the merged
  // program, with kernel_index and buffer_args counted in the case's own
  // program (names keep the merged c<k>_ prefix); no sources, no run_symbol.
  EmittedProgram emitted;
  int rc = -1;  // what the run entry returned (merged: the first nonzero kernel's)
  std::map<std::string, ir::Tensor> outputs;  // row-major, by buffer name
  // Set when this case alone failed: its inputs do not fit its buffers, it
  // does not emit, or the emulated driver died while running it. The other
  // cases' results stand.
  std::string error;
};

struct RunOptions {
  // Merge every case's program into one (buffers and kernels renamed c<k>_),
  // emitted once with `emit`: a few translation units for the whole batch
  // instead of one per case (the Highway headers dominate compile time).
  // Each case's own EmitOptions are then ignored.
  bool merge = false;
  EmitOptions emit = [] {
    EmitOptions o;
    o.kernels_per_unit = 64;
    return o;
  }();
  // Per run of the emulated driver (it restarts after the case it died in).
  absl::Duration run_timeout = absl::Minutes(2);
};

// Uniform values in [lo, hi] (integers: rounded; bool: 0/1), seeded. With
// `specials`, some elements become NaN, +-inf, -0 and 0 (float dtypes).
ir::Tensor RandomTensor(ir::DType dtype, const ir::Shape& shape, uint32_t seed, double lo,
                        double hi, bool specials = false);

// Emits every case (with its own symbol prefix), builds them all in one JIT
// call for the ISA under test, runs each program's run entry and gathers
// its outputs.
absl::StatusOr<std::vector<CaseResult>> RunCases(const jit::TestIsa& isa,
                                                 std::vector<ProgramCase>& cases);

// The same with options. Failures of one case are reported in its
// CaseResult::error; the status fails only for the batch as a whole (the
// build, the emulator).
absl::StatusOr<std::vector<CaseResult>> RunCases(const jit::TestIsa& isa,
                                                 std::vector<ProgramCase>& cases,
                                                 const RunOptions& options);

// A lowered program and one data set for RunLoweredCases.
struct LoweredCase {
  std::string name;                          // for messages only
  const ir::loop::LoopModule* lowered;   // not owned
  std::vector<ir::Tensor> inputs;            // one per graph input, in order
};

struct LoweredResult {
  // One per graph output, in order; set when error is empty and rc is 0.
  std::vector<ir::Tensor> outputs;
  int rc = 0;          // the first nonzero return of a loop kernel
  std::string error;   // this case failed (build, run, an extern kernel)
  int loop_segments = 0;  // runs of consecutive loop kernels run on the ISA
  int extern_calls = 0;   // extern kernels run on the host's reference
};

// Runs each case's program split at its extern kernels: every run of
// consecutive loop kernels is one program run with RunCases (merged, at most
// `cases_per_batch` cases per build and run; the buffers it reads bound from
// what ran before, the ones it writes read back), every extern kernel runs
// on the host through interp::RunExternKernel between them. Cases advance
// in lockstep, so a program with n loop segments costs n batched runs, not
// one per case. Programs with values of data-dependent shape (reference
// calls) are refused per case. The status fails only on a bad argument.
absl::StatusOr<std::vector<LoweredResult>> RunLoweredCases(const jit::TestIsa& isa,
                                                          const std::vector<LoweredCase>& cases,
                                                          const RunOptions& options,
                                                          size_t cases_per_batch);

// Runs the loop interpreter on the case and compares every output (gtest
// failures naming the case, buffer and mismatch).
void ExpectMatchesInterpreter(const ProgramCase& c, const CaseResult& r);

}  // namespace kiln::backends::cpp

#endif  // KILN_BACKENDS_CPP_TEST_UTIL_H_
