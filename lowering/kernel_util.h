// File: lowering/kernel_util.h — internal to lowering/: helpers shared by the
// op-family lowerings (math.cc, nn.cc, tensor.cc, ...) for building kernels:
// checked data-dependent reads, run-time assertions, scratch and output
// buffers, views, and the lowerings several families register.
#ifndef KILN_LOWERING_KERNEL_UTIL_H_
#define KILN_LOWERING_KERNEL_UTIL_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {

// ---- Reads at data-dependent places and run-time checks.

// Reads `data` at coordinates `dc` whose `axis` entry is replaced by the
// runtime integer value `n` of kernel `k` (a checked load_indirect: n in
// [-dim, 0) wraps, anything else outside [0, dim) fails the kernel).
// `extents` are the kernel's variable extents (iteration, then reduction).
// A view whose index is not affine along `axis` is first copied row-major.
absl::StatusOr<int32_t> LoadIndirectAlong(Lowerer& L, Emitter& k,
                                          const Operand& data, Coords dc,
                                          int64_t axis,
                                          const std::vector<int64_t>& extents,
                                          int32_t n);

// `n` (any integer dtype) as i64, with values outside [0, dim) mapped to
// `dim`, so a following load_indirect of extent `dim` fails on them instead
// of wrapping a negative value (for ops whose indices may not be negative).
int32_t NonNegativeIndex(Emitter& k, int32_t n, int64_t dim);

// A run-time assertion: loads `op` at `coords` (a scalar read) through a
// load_indirect whose index is 0 when the bool value `ok` holds and 1 (out
// of its extent 1) otherwise, so the kernel fails instead of computing with
// an input that contradicts the static shapes lowering relied on. Use the
// result, so the check stays live.
absl::StatusOr<int32_t> LoadIfValid(Lowerer& L, Emitter& k, const Operand& op,
                                    const Coords& coords, int32_t ok);

// ---- Buffers and offsets.

// A fresh row-major intermediate buffer of `dtype`/`shape` for a kernel's
// partial results. The lowerer has no public way to name a buffer that no
// graph value owns, so this goes through Materialize of a zero splat (one
// fill kernel, overwritten by the caller's kernel).
absl::StatusOr<int32_t> ScratchBuffer(Lowerer& L, DType dtype,
                                      const Shape& shape);

// L.OutputBuffer(i), plus a kernel over its (empty) shape when it has no
// elements, so an empty output is still written by some kernel.
int32_t NewOutput(Lowerer& L, int i);

// Row-major flat offset of `coords` in a buffer of `shape`, simplified for k.
IndexExpr RowMajor(Emitter& k, const Shape& shape, const Coords& coords);

// The dims of `s` as kernel extents.
std::vector<int64_t> Extents(const Shape& s);

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);

// Coordinates of the input of a reduction over `axes` (sorted): reduced dims
// read r0.., the others the kernel's iteration variables (in order, or at
// their own position when the output keeps the reduced dims).
Coords ReductionInputCoords(Emitter& k, size_t rank,
                            const std::vector<int64_t>& axes, bool keepdims);

// Integer range of a quantized dtype (i8, else u8).
std::pair<double, double> QuantRange(DType dt);

// Whether `dt` is a quantized integer type kiln runs (u8 or i8).
bool IsQuantType(DType dt);

// Checks input `i` of a quantized op when present: a scale (`dtype`
// kInvalid: any float type) or a zero point (`dtype` its tensor's type,
// which ONNX requires; a u8 zero point for an i8 tensor is refused),
// holding one value (a scalar or [1]) or, when `per_channel` > 0, one per
// channel as a 1-D [per_channel]. InvalidArgument naming the node and
// `what` otherwise.
absl::Status CheckQuantInput(Lowerer& L, int i, const char* what, DType dtype,
                             int64_t per_channel = 0);

// ---- Views.

using CoordMap = std::function<Coords(const Coords&)>;

// Output i reads `src` at map(output coordinates).
void SetView(Lowerer& L, int i, const Operand& src, CoordMap map);

// ---- Lowerings registered by several families.

// Output 0 views input 0 reshaped (Reshape, Squeeze, Unsqueeze, Flatten).
absl::Status ReshapeView(Lowerer& L, const ir::Node& n);

// Refuses ops whose output shape depends on the input values (NonZero,
// Unique, Compress, NonMaxSuppression), saying why.
absl::Status RefuseDataDependentShape(Lowerer& L, const ir::Node& n);

}  // namespace kiln::lowering::internal

#endif  // KILN_LOWERING_KERNEL_UTIL_H_
