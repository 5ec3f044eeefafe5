// File: passes/loop/store_activations_in_bf16.h — pass
// `store-activations-in-bf16` (bf16 mode, docs/decisions/0055): f32
// activations that a bf16 library call reads as its source or writes as its
// destination are stored in bf16, so the call reads and writes them without
// a conversion pass over memory, and the loop kernels next to it move half
// the bytes. Loop kernels still compute in f32: a load of such a buffer is
// followed by a cast to f32, a store preceded by a cast to bf16.
//
// A buffer changes when it is an f32 intermediate (never a graph input,
// output or constant: the interface keeps its types), the source (node
// input 0) or destination of at least one Conv / ConvTranspose / MatMul /
// Gemm call with constant weights (the calls bf16 mode runs in bf16), and
// every other use is:
//   - the source or destination of another such call (not as the
//     destination of a call with a `sum` post-op, which copies its operand
//     into the destination as f32);
//   - a load or store in a loop kernel whose loaded value is not cast to
//     an integer (integer-valued f32 results of
//     integer-calls-in-f32 stay exact).
// Post-op operands, runtime weights, biases, reference calls and other
// extern calls keep f32. A buffer such a use keeps f32 (a transformer's
// LayerNorm output, which the next residual add reads too) that bf16 calls
// read as their source and only loop kernels write gets a bf16 twin: the
// kernels store both, the calls read the twin, instead of converting the
// f32 buffer once per call. Softmax and normalization statistics stay f32:
// their buffers lie between loop kernels, which no call touches.
// Constructed disabled, the pass changes nothing (kiln's f32 mode).
#ifndef KILN_PASSES_LOOP_STORE_ACTIVATIONS_IN_BF16_H_
#define KILN_PASSES_LOOP_STORE_ACTIVATIONS_IN_BF16_H_

#include "ir/loop/module.h"
#include "passes/loop/loop_pass.h"

namespace kiln::passes {

class StoreActivationsInBf16 : public LoopPass {
 public:
  explicit StoreActivationsInBf16(bool enabled = true) : enabled_(enabled) {}
  absl::string_view name() const override { return "store-activations-in-bf16"; }
  absl::StatusOr<bool> Run(ir::loop::LoopModule* program) override;

 private:
  bool enabled_;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_STORE_ACTIVATIONS_IN_BF16_H_
