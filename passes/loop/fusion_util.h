// File: passes/loop/fusion_util.h — helpers shared by the loop passes:
// variable substitution in index expressions, dense (invertible) store
// indices, per-buffer reader/writer maps, op classification, body cleanup
// (dead ops, common subexpressions) and program compaction.
#ifndef KILN_PASSES_LOOP_FUSION_UTIL_H_
#define KILN_PASSES_LOOP_FUSION_UTIL_H_

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "ir/loop/index_expr.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"

namespace kiln::passes::loop_util {

using ir::loop::IndexExpr;
using ir::loop::Kernel;
using ir::loop::LoopProgram;
using ir::loop::Op;
using ir::loop::OpCode;

// `e` with variable v replaced by subs[v] (variables >= subs.size() stay).
// Not simplified. (ir/loop has no substitution helper; this is it.)
IndexExpr SubstituteVars(const IndexExpr& e, absl::Span<const IndexExpr> subs);

// A store index that maps the iteration space bijectively onto [0, size):
// e == sum_v strides[v] * i_v where the (stride, extent) pairs of the
// variables with extent > 1, sorted by stride, form a mixed radix (first
// stride 1, each next stride = previous stride * previous extent).
// Variables of extent 1 get stride 0.
struct DenseIndex {
  std::vector<int64_t> strides;  // per iteration variable
  int64_t size = 0;              // product of the extents
};

// `e` over iteration variables 0..extents.size()-1 (no other variables) as a
// DenseIndex; nullopt when it is not one (offset, gaps, overlap, a
// non-affine term, an empty extent).
std::optional<DenseIndex> AnalyzeDenseIndex(const IndexExpr& e,
                                            absl::Span<const int64_t> extents);

// The iteration variables that `dense` stored at flat offset `offset`:
// (offset // stride) % extent per variable (0 for extent 1), simplified over
// `simplify_extents` (the extents of the variables `offset` uses). Valid for
// offsets in [0, dense.size).
std::vector<IndexExpr> InvertDenseIndex(const IndexExpr& offset,
                                        const DenseIndex& dense,
                                        absl::Span<const int64_t> extents,
                                        absl::Span<const int64_t> simplify_extents);

// Ops whose semantics the passes know (everything in loop_ir.h at the time
// they were written). Other ops are copied verbatim when a kernel is inlined
// or merged, never removed, never merged with each other, and their buffer
// (if any) counts as an opaque read.
bool IsKnownOp(OpCode code);
// A known op that has no side effect and cannot raise an error (integer
// division/modulo can), so it may be removed when unused or computed for
// fewer points than before.
bool IsPureOp(const Op& op);
// The buffer `op` reads, or -1 (stores read none; store_indirect reads and
// writes its buffer: the element it updates holds an earlier kernel's value).
int32_t ReadBufferOf(const Op& op);

// Buffers each kernel reads and writes (loop bodies and extern calls;
// store_indirect's buffer is both).
std::set<int32_t> KernelReads(const Kernel& k);
std::set<int32_t> KernelWrites(const Kernel& k);

// Readers and writers of each buffer: indices of live kernels, ascending.
struct BufferUses {
  std::vector<std::vector<int>> readers;
  std::vector<std::vector<int>> writers;
};
BufferUses ComputeBufferUses(const LoopProgram& p,
                             const std::vector<bool>& alive);

// A buffer no pass may remove or stop writing: graph input/output,
// constant, or any buffer whose kind is not intermediate.
bool IsProtectedBuffer(const ir::loop::LoopModule& lp, int32_t buffer);

// Removes ops of a loop kernel whose values no store, unknown op or
// fallible op needs; renumbers the rest. True when something was removed.
bool EliminateDeadOps(Kernel* k);
// Replaces an op by an identical earlier one (same code, dtype, operands,
// buffer, index, constant, reduce kind), for known pure ops and loads of
// buffers the kernel does not write; then removes dead ops. True when the
// body changed.
bool EliminateCommonOps(Kernel* k);

// Drops the kernels with keep[k] == false.
void CompactKernels(LoopProgram* p, const std::vector<bool>& keep);
// Removes intermediate buffers no kernel references and renumbers buffer
// indices everywhere (ops, extern calls, the ir::loop::LoopModule's inputs,
// outputs, constants and value names). True when a buffer was removed.
bool RemoveUnreferencedBuffers(ir::loop::LoopModule* lp);

// OK when `k` passes the loop verifier against the program's buffers (the
// kernel alone: used to refuse a rewrite whose bounds cannot be proven).
absl::Status VerifyKernelAlone(const LoopProgram& p, const Kernel& k);

// Appends the entries of `from` missing from `to`.
void AppendOps(const std::vector<std::string>& from,
               std::vector<std::string>* to);

}  // namespace kiln::passes::loop_util

#endif  // KILN_PASSES_LOOP_FUSION_UTIL_H_
