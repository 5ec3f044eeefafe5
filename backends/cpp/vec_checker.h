// File: backends/cpp/vec_checker.h — the vectorization checker: for one loop
// kernel, which variable (if any) becomes the vector variable, the loop
// order, tiling and parallel loop, and why. The emitter (emitter.h) writes
// the code this plan describes.
//
//   VecPlan plan = CheckVectorization(program, kernel_index, {});
//   plan.status;   // kernel: vectorized / tiled / scalar + reason
//
// The rules are the emitter's (see emitter.h, "Vectorization").
#ifndef KILN_BACKENDS_CPP_VEC_CHECKER_H_
#define KILN_BACKENDS_CPP_VEC_CHECKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
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
  std::string hazard;             // non-empty: ops must keep body order
  bool empty = false;             // an iteration extent is 0
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

// How a vectorized load or store of op `op` reaches memory over `var`:
// contiguous (stride 1, or not affine but contiguous within every vector
// step) or gathered lane by lane.
enum class Access { kContiguous, kGathered };
std::optional<Access> AccessOf(const ir::loop::LoopProgram& p, const VecAnalysis& a, int op,
                               int var);

}  // namespace kiln::backends::cpp

#endif  // KILN_BACKENDS_CPP_VEC_CHECKER_H_
