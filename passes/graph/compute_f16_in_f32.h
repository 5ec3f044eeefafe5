// File: passes/graph/compute_f16_in_f32.h — pass `compute-f16-in-f32`: an
// f16 model computes in f32 inside, f16 only at its interface.
#ifndef KILN_PASSES_GRAPH_COMPUTE_F16_IN_F32_H_
#define KILN_PASSES_GRAPH_COMPUTE_F16_IN_F32_H_

#include "passes/graph_pass.h"

namespace kiln::passes {

// x86 CPUs have no f16 arithmetic and oneDNN 2.6 no f16 primitive, so every
// f16 value of the graph becomes f32 (decision 0036), as ONNX Runtime's CPU
// provider and OpenVINO do:
// - f16 constants (weights) are converted once, exactly, here;
// - an f16 graph input is read through Cast(to=f32), an f16 graph output is
//   written through Cast(to=f16); their names and types stay the user's;
// - a Cast or CastLike to f16 in the model still rounds: it becomes
//   Cast(to=f16) then Cast(to=f32), so what the model rounds on purpose
//   stays rounded;
// - dtype attributes naming f16 (EyeLike, Random*, Bernoulli) name f32, and
//   f16 tensor attributes (ConstantOfShape's value) become f32.
// What changes is only intermediate rounding: an op's result is no longer
// rounded to f16 before the next op reads it. A graph with subgraphs
// (If/Loop/Scan bodies) is left alone: their values bind by name and type.
class ComputeF16InF32 : public GraphPass {
 public:
  absl::string_view name() const override { return "compute-f16-in-f32"; }
  absl::StatusOr<bool> Run(ir::Graph* graph) override;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_GRAPH_COMPUTE_F16_IN_F32_H_
