// File: lowering/elementwise.h — internal to lowering/: the elementwise kernel
// shared by the math, logical, tensor and nn lowerings: out = body(inputs)
// at every element of output 0, broadcast inputs read with stride 0.
//
//   t.Add("Neg", SimpleUnary(OpCode::kNeg, /*float_only=*/false));
#ifndef KILN_LOWERING_ELEMENTWISE_H_
#define KILN_LOWERING_ELEMENTWISE_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {

using Body = std::function<absl::StatusOr<int32_t>(Emitter&,
                                                   const std::vector<int32_t>&)>;

// out = body(loaded inputs) at every element of output 0.
absl::Status Elementwise(Lowerer& L, const std::vector<Operand>& ins,
                         const Body& body);

// The node's present inputs; InvalidArgument when there are none.
absl::StatusOr<std::vector<Operand>> AllInputs(Lowerer& L, const ir::Node& n);

absl::Status RequireFloat(Lowerer& L, const Operand& op);

// InvalidArgument unless every input has the dtype of the first.
absl::Status RequireSame(Lowerer& L, const std::vector<Operand>& ins);

// A unary float activation body, given x.
using Activation = std::function<int32_t(Emitter&, int32_t x, DType dt)>;

// A lowering applying `f` to a float input elementwise.
LowerFn FloatUnary(Activation f);

// A lowering applying unary `code` elementwise (float inputs only when
// `float_only`).
LowerFn SimpleUnary(OpCode code, bool float_only);

// Activations reading float attributes: `attrs` are their names and
// defaults, passed to `f` in order.
LowerFn WithAttrs(
    std::vector<std::pair<const char*, float>> attrs,
    std::function<int32_t(Emitter&, int32_t, DType, const std::vector<float>&)>
        f);

}  // namespace kiln::lowering::internal

#endif  // KILN_LOWERING_ELEMENTWISE_H_
