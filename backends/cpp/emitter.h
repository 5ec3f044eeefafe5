// File: backends/cpp/emitter.h — the C++/Highway emitter: turns the loop
// kernels of a LoopProgram into translation units for compiler/jit (one
// emitter for every ISA; the VecISA module only changes compiler flags).
//
//   EmitOptions opts = EmitOptionsForIsa(*isa);
//   KILN_ASSIGN_OR_RETURN(EmittedProgram out, EmitCpp(program, opts));
//   KILN_ASSIGN_OR_RETURN(auto lib, jit.Compile(out.sources));
//   auto* fn = reinterpret_cast<ir::loop::KernelFn>(*lib->Symbol(out.kernels[0].symbol));
//   void* args[] = {x_storage, y_storage};   // out.kernels[0].buffer_args order
//   int rc = fn(args);                       // 0, or kError* bits
//
// ABI (ir/loop/kernel_abi.h). Every loop kernel gets an entry `extern "C" int
// <symbol>(void* const* args)`: args[k] points at the storage (laid out with
// the buffer's strides, element types: f32 float, f16 IEEE half bits, f64
// double, i64/i32/i8/u8 the C integer, bool one byte 0/1) of buffer
// `buffer_args[k]`, listed by ascending buffer index. Buffers passed to one
// kernel must not overlap. `run_symbol` (when the program has no extern
// kernels) runs every kernel in order and takes all program buffers indexed by
// buffer number. Entries return 0 or the bitwise or of kErrorIntegerDivByZero
// (integer division or modulo by zero; the result element is then 0) and
// kErrorIndexOutOfRange (a load_indirect index outside [-extent, extent);
// element 0 of the axis is read instead, never memory outside the buffer; a
// store_indirect index outside it writes nothing).
//
// Generated code follows Highway's skeleton: kernels are functions over raw
// `__restrict` pointers inside `HWY_NAMESPACE` (between HWY_BEFORE_NAMESPACE
// and HWY_AFTER_NAMESPACE), no vectors at namespace scope, the static target
// chosen by the JIT's flags. The only names in the code are identifiers kiln
// made: `k<index>_<SanitizeIdentifier(kernel name)>`,
// `b<index>_<SanitizeIdentifier(buffer name)>`, value numbers and loop
// variables; descriptions and ONNX node names never reach it.
//
// Vectorization is decided by the vectorization checker (vec_checker.h,
// CheckVectorization); the emitter writes the code of its plan. Per kernel
// EmittedKernel::vec has the kind (vectorized, tiled or scalar) and a reason
// listing the choice and every per-op compromise, or why the kernel is
// scalar; EmittedKernel::ops has every op's decision (vector, broadcast,
// per-lane or scalar) with its reason. The rules:
//  - One iteration variable may become the vector variable (its loop moves
//    innermost; the kernel must not read a buffer it writes nor store twice
//    into one buffer). Ops that do not depend on it are computed as scalars
//    once per enclosing iteration and broadcast; loads with stride 1 are
//    LoadU (bool buffers: bytes widened to a mask), and so are non-affine
//    indices that stay contiguous within every vector step (floor divisions
//    and modulos by multiples of 16 of an aligned argument, as flattened
//    attention heads); f32/i32 accesses with another constant stride are
//    hardware gathers and scatters (GatherIndex/ScatterIndex over Iota *
//    stride; a scatter's tail lane by lane); other indices are gathered
//    lane by lane into a vector. The variable is chosen by a score: contiguous stores
//    weigh most, then contiguous loads; gathers and scatters count against.
//    f16 / bf16 buffers load and store as 16-bit lanes widened to f32
//    (F16C / NEON conversions; bf16 by a shift, rounded to nearest even
//    on the way back), i8 / u8 buffers as 8-bit lanes widened to i32.
//    Loads of dtypes without a vector form (i64, f64) that only feed casts
//    to a vector dtype are converted lane by lane inside the cast (noted in
//    the reason). Tails use
//    FirstN + MaskedLoad/BlendedStore where the target's masked ops cannot
//    fault (else a lane copy).
//  - Tiled: when loads are strided in the vector variable but contiguous in
//    another iteration variable (a 2-D transpose), that variable's loop is
//    blocked by the vector width just outside the vector loop and each such
//    load reads a lanes x lanes tile with contiguous loads, transposed in
//    registers (4- and 8-lane targets; element copies elsewhere). Kernels
//    with reductions or a store that is not contiguous are not tiled.
//  - load_indirect (Gather): the index is checked once per row and the load
//    is contiguous when the index does not depend on the vector variable;
//    otherwise this op alone is computed lane by lane (integer index loads
//    that only feed it are read per lane too), noted in the reason.
//  - A reduce that depends on the vector variable keeps one accumulator per
//    lane (reducing over a non-contiguous dim: "accumulate columns"). A
//    reduce that does not is vectorized along its innermost reduction
//    variable with vector accumulators and a horizontal combine (in
//    double). An f32 sum (sum, mean, the Welford passes) over more than
//    4096 points accumulates in blocks of 4096 vector steps, each block's
//    lanes added into per-lane f64 partials, so long sums keep growing
//    (decision 0050); shorter ones are a single block.
//  - f32, i32 and bool values vectorize, and f16 / bf16 values in f32 lanes
//    (computed in f32, rounded where cast to or stored as f16 / bf16), i8 /
//    u8 values in i32 lanes for loads, stores, casts and selects (i8 / u8
//    arithmetic is scalar: it would need a wrap per op). A pointwise op
//    whose row in ir/loop/opcodes.def has no vector instruction, such as tan
//    or i32 div, runs its scalar form lane by lane. Kernels whose every
//    value is f64 run on f64 lanes (df a tag of double; rows with f32-only
//    Highway math lane by lane); f64 beside other dtypes, i64 values,
//    argmax reductions and Welford reductions that would need per-lane
//    accumulators are scalar (the reason is recorded); Welford along the
//    last reduction variable is two vector passes (sum, squared deviations).
//    An index op affine in the vector variable is `first + Iota * stride`
//    in i32 lanes when all its lane values fit int32 (passes/loop's
//    demote-index makes i64 index arithmetic i32 where ranges allow);
//    otherwise it is filled per lane.
//  - store_indirect (ScatterND, ScatterElements, MaxUnpool) makes its kernel
//    scalar (the reason names the op): points run in row-major order, the
//    interpreter's, so duplicate indices combine in the same order and the
//    last write wins; an index outside [-extent, extent) writes nothing.
//  - The first loop with extent > 1 gets `#pragma omp parallel for` when the
//    kernel's work (iteration x reduction points) exceeds parallel_grain, and
//    its iterations touch disjoint elements of every buffer the kernel both
//    reads and writes or scatters into: each access to such a buffer is
//    affine in the loop variable with one common coefficient c > 0 and, the
//    variable fixed, all of them (a store_indirect over its whole
//    [0, extent) * stride) span fewer than c elements. Otherwise the kernel
//    stays sequential (e.g. ScatterElements on axis 0, whose outer loop
//    walks the scattered axis: two iterations may hit one element).
#ifndef KILN_BACKENDS_CPP_EMITTER_H_
#define KILN_BACKENDS_CPP_EMITTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/cpp/vec_checker.h"
#include "ir/loop/kernel_abi.h"
#include "ir/loop/loop_ir.h"
#include "isa/isa.h"
#include "ir/loop/source_file.h"

namespace kiln::backends::cpp {

struct EmitOptions {
  // Prefix of every exported symbol (sanitized).
  std::string symbol_prefix = "kiln_";
  // Translation units are named <unit_prefix>_<n> (sanitized).
  std::string unit_prefix = "kiln_kernels";
  // Loop kernels per translation unit (>= 1).
  int kernels_per_unit = 16;
  // > 0: instead of kernels_per_unit, the loop kernels spread over at most
  // this many units, ceil(kernels / units) each (an AOT library's shards).
  int units = 0;
  // Smallest work (iteration x reduction points) worth an OpenMP loop.
  int64_t parallel_grain = 32768;
  // false: every kernel scalar (reason "vectorization disabled").
  bool vectorize = true;
  // Run the loop IR verifier first (its in-bounds proof is what makes the
  // generated code memory-safe). Only for callers that verified already.
  bool verify = true;
};

// Defaults with the ISA's tuning (parallel_grain).
EmitOptions EmitOptionsForIsa(const isa::VecIsa& isa);

struct EmittedKernel {
  int kernel_index = -1;    // into LoopProgram::kernels
  std::string name;         // the kernel's name
  std::string symbol;       // extern "C" entry
  std::string unit;         // the translation unit holding it
  std::vector<int32_t> buffer_args;        // buffer indices, argument order
  std::vector<std::string> buffer_names;   // their names, same order
  ir::loop::VecStatus vec;  // vectorized (with notes) or scalar (with reason)
  std::vector<OpDecision> ops;  // per op of the body: how it is computed
  bool parallel = false;    // got an OpenMP loop
};

struct EmittedProgram {
  std::vector<ir::loop::SourceFile> sources;
  std::vector<EmittedKernel> kernels;  // loop kernels, program order
  // Extern kernels are not emitted (the wrapper calls library code).
  std::vector<int> skipped_extern_kernels;
  // Runs every kernel; empty when the program has extern kernels.
  std::string run_symbol;
};

// InvalidArgument when the program fails the verifier (the verifier's
// message) or an option is out of range.
absl::StatusOr<EmittedProgram> EmitCpp(const ir::loop::LoopProgram& program,
                                       const EmitOptions& options = {});

}  // namespace kiln::backends::cpp

#endif  // KILN_BACKENDS_CPP_EMITTER_H_
