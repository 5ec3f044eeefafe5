// File: backends/cpp/vec_checker.h — the vectorization checker: for one loop
// kernel, which variable (if any) becomes the vector variable, how every op
// of the body is then computed, and why. The emitter (emitter.h) writes the
// code this plan describes; the compile report shows its per-op decisions.
//
//   VecPlan plan = CheckVectorization(program, kernel_index, {});
//   plan.status;        // kernel: vectorized / tiled / scalar + reason
//   plan.ops[i].kind;   // op i: vector, broadcast, per-lane or scalar
//   std::cout << PrintVecPlan(program, kernel_index, plan);
//
// The rules are the emitter's (see emitter.h, "Vectorization"). Per op, in
// the context of the vector variable that op runs under (the kernel's, or
// for the cone of a reduce vectorized along its last reduction variable,
// that variable):
//  - vector: one vector instruction sequence per step (contiguous loads and
//    stores, transposed tiles, arithmetic with a vector form, a reduce with
//    vector accumulators);
//  - broadcast: does not depend on the vector variable: computed once per
//    enclosing iteration as a scalar (and splat where a vector op reads it);
//  - per-lane: computed lane by lane inside a vector step (strided or
//    data-dependent loads and stores, index ops, casts from a dtype without
//    a vector form, math with no vector instruction);
//  - scalar: the kernel is scalar, or the op is part of a reduction that is.
// Every decision other than vector/broadcast has a short reason.
//
// A component of its own (not inside the emitter) so that the decisions are
// tested on loop IR text (vec_checker_test: PrintVecPlan with CHECK lines)
// and reported per op (KernelReport::unvectorized_ops) without reading
// generated code. The emitter must write what the plan says: the tests check
// that emitted code has a lane loop exactly for the ops decided per-lane.
#ifndef KILN_BACKENDS_CPP_VEC_CHECKER_H_
#define KILN_BACKENDS_CPP_VEC_CHECKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "backends/cpp/op_forms.h"
#include "ir/loop/index_expr.h"
#include "ir/loop/loop_ir.h"

namespace kiln::backends::cpp {

inline uint64_t VarBit(int var) { return uint64_t{1} << var; }

// Value dependences of one kernel's body: what the plan and the emitter
// both need.
struct VecAnalysis {
  const ir::loop::Kernel* k = nullptr;
  std::vector<int64_t> extents;
  std::vector<ir::loop::IndexExpr> index;  // simplified, per op
  std::vector<uint64_t> deps;     // loop variables each op depends on
  std::vector<bool> rvarying;     // reduction-varying ops
  std::vector<std::vector<int>> cone;  // per reduce: its varying ops
  std::vector<bool> in_cone;
  // Integer loads read only as the index of load_indirect ops: in a vector
  // context they are read lane by lane inside those ops.
  std::vector<bool> lane_index;
  // Loads of a dtype without a vector form (i64, u8, f16, ...) read only by
  // casts to one that has it: in a vector context the cast converts lane by
  // lane from memory.
  std::vector<bool> lane_cast_src;
  // Integer index ops read only by casts to float dtypes: on f64 lanes
  // (`f64`) their iota is computed in f64 lanes, exactly.
  std::vector<bool> float_cast_only;
  // The kernel has f64 values and every value and accessed buffer is f64 or
  // f32 (no index or indirect access): vector code runs on f64 lanes (df is
  // a tag of double, half the lanes of f32), f32 values too, rounded to f32
  // after every op that makes one (as the interpreter computes f32 in double
  // and rounds); rows whose vector form is f32-only math run lane by lane.
  // A kernel that also has index, integer or bool values, or f16 / bf16
  // ones, and is scalar in f32 lanes, runs on f64 lanes when every op that
  // depends on the vector variable is a float op (f16 / bf16 values held
  // exactly, rounded where the interpreter rounds): the others are scalars
  // computed once per vector step.
  bool f64 = false;
  std::string hazard;             // non-empty: ops must keep body order
  bool empty = false;             // an iteration extent is 0
};

// How op `i` is computed (see the file comment).
enum class OpVec : uint8_t { kVector, kBroadcast, kPerLane, kScalar };
absl::string_view OpVecName(OpVec kind);  // "vector", "broadcast", ...

struct OpDecision {
  OpVec kind = OpVec::kScalar;
  // Why per-lane or scalar; a note for some vector ops (tiles, non-affine
  // contiguous access, per-lane accumulators).
  std::string reason;
};

struct VecPlan {
  VecAnalysis analysis;
  bool hoist = false;              // ops may leave body order (no hazard)
  int vec_var = -1;                // iteration variable, or -1
  // 2-D tiling: loads contiguous in `tile_var` (and strided in vec_var) are
  // read as Lanes x Lanes tiles transposed in registers; tile_var's loop is
  // blocked by the vector width just outside vec_var's.
  int tile_var = -1;
  std::vector<bool> tiled_load;    // per op
  std::vector<bool> inner_reduce;  // per op: reduce vectorized along its last r
  std::vector<int> loop_order;     // iteration variables, outermost first
  int parallel_pos = -1;           // index into loop_order
  ir::loop::VecStatus status;      // the kernel's kind and reason
  // Scalar kernels: the candidate vector variable whose check failed (the
  // one the reason names), or -1.
  int failed_var = -1;
  std::vector<OpDecision> ops;     // per op of the body

  // Whether the kernel has any vector code (a vector variable or a
  // reduction vectorized along its own variable).
  bool HasVectorCode() const;
};

struct VecCheckOptions {
  // false: every kernel scalar (reason "vectorization disabled").
  bool vectorize = true;
  // Smallest work (iteration x reduction points) worth an OpenMP loop.
  int64_t parallel_grain = 32768;
};

// The plan of loop kernel `kernel_index` of `program` (which must pass the
// loop IR verifier). The plan points into the program's kernel.
VecPlan CheckVectorization(const ir::loop::LoopProgram& program, int kernel_index,
                           const VecCheckOptions& options = {});

// A model's buffer name as it may appear in generated identifiers and
// reasons: SanitizeIdentifier, cut to 48 characters.
std::string NamePart(absl::string_view raw);

// The stride in `var` of index op `op` when its vector form is Iota-based
// (first lane's value + Iota * stride in i32 lanes): affine in var, and
// every value a vector step computes (up to 64 lanes past the last point)
// and the stride fit int32. nullopt: computed lane by lane.
std::optional<int64_t> IotaIndexStride(const VecAnalysis& a, int op, int var);

// The stride in `var` of load/store op `op` when its full vector steps use
// a hardware gather/scatter (Highway GatherIndex / ScatterIndex with lane
// offsets Iota * stride): an f32/i32 buffer accessed affinely with a
// stride other than 0 and 1 whose lane offsets fit int32. In a tail step a
// gather's lanes past the end read the first lane's element (offset 0); a
// scatter's tail stays lane by lane (Highway 1.0 has no masked scatter).
// nullopt otherwise.
std::optional<int64_t> HardwareGatherStride(const ir::loop::LoopProgram& p, const VecAnalysis& a,
                                            int op, int var);

// Whether load_indirect op `op`, whose index operand is an i32 vector over
// `var` (a data-dependent index per lane: a table lookup), gathers with one
// hardware gather (Highway GatherIndex): an f32/i32 buffer, a base index
// that does not change with `var`, and every offset base + n * stride for n
// in [0, extent) within int32. Lanes whose index is out of range flag
// kErrorIndexOutOfRange and read offset 0, as the scalar code does; tail
// lanes read offset 0.
bool HardwareIndirectGather(const ir::loop::LoopProgram& p, const VecAnalysis& a, int op,
                            int var);

// How a vectorized load or store of op `op` reaches memory over `var`:
// contiguous (stride 1, or not affine but contiguous within every vector
// step) or gathered (a hardware gather/scatter when HardwareGatherStride
// holds, else lane by lane).
enum class Access { kContiguous, kGathered };
std::optional<Access> AccessOf(const ir::loop::LoopProgram& p, const VecAnalysis& a, int op,
                               int var);

// Whether the vector form of a float row runs lane by lane on f64 lanes
// (its Highway form is f32-only math, or it has none).
bool F64Lanewise(const OpForm& form);

// One header line for the kernel (kind, vector and tile variables, loop
// order outermost first, parallel loop, the status reason), then one line
// per op of the body (#<body index>, as reasons name ops):
//   kernel 0 exp_add: vectorized, vector i1, loops (i0, i1) -- vectorized over i1
//     #0 load x: vector
//     #1 index: per-lane -- index computed lane by lane
std::string PrintVecPlan(const ir::loop::LoopProgram& program, int kernel_index,
                         const VecPlan& plan);

}  // namespace kiln::backends::cpp

#endif  // KILN_BACKENDS_CPP_VEC_CHECKER_H_
