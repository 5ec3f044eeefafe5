// File: passes/loop/propagate_layout.h — the propagate-layout loop pass:
// keeps CNN activations in the conv library's channel-blocked layout
// (nChw8c on AVX2, nChw16c on AVX-512) across chains of convs and the loop
// kernels between them, so a CNN pays layout reorders only at its edges.
//
//   PropagateLayout pass(onednn::ConvLayoutOracle());  // backends/onednn
//   KILN_ASSIGN_OR_RETURN(bool changed, pass.Run(&lowered));
//
// The blocked layout is ir/loop/blocked_layout.h's. Extern kernels say
// which of their buffers are blocked in attributes (kAttrBlockedInputs/
// Outputs, kAttrChannelBlock); loop kernels index the physical layout
// directly, with their channel loop split into (C/b, b) and the b lanes
// innermost so they stay vectorized.
#ifndef KILN_PASSES_LOOP_PROPAGATE_LAYOUT_H_
#define KILN_PASSES_LOOP_PROPAGATE_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/loop/blocked_layout.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "passes/loop/loop_pass.h"

namespace kiln::passes {

// Channel blocks a conv library kernel wants for an extern conv's src and
// dst (0: its plain layout), and the other blocks (dst blocked) an
// optimized kernel also runs on; `slower` when that kernel is slower than
// the wanted one (a narrower ISA: jit:avx2 on nChw8c on an AVX-512 host).
struct ConvLayout {
  // A block of kChannelsLast: each buffer blocked by its own channel count,
  // i.e. stored channels-last ([N, 1, spatial..., C], NHWC), where C
  // differs from buffer to buffer. oneDNN's int8 convs run optimized only
  // on NHWC u8/s8 activations, not on nChw16c, and on AVX-512 its f32
  // brgconv kernels prefer NHWC: the pass gives this layout to u8/s8
  // buffers, and to f32 ones when an f32 conv offers it and it costs least.
  static constexpr int64_t kChannelsLast = ir::loop::kChannelsLastBlock;
  struct Alternative {
    int64_t src_block = 0;
    int64_t dst_block = 0;
    bool slower = false;
  };
  int64_t src_block = 0;
  int64_t dst_block = 0;
  std::vector<Alternative> also;
};

// Asks the conv library which activation layouts its fastest kernel for
// extern kernel `kernel` runs on. An error means "not a conv the library
// runs": its buffers stay plain.
using ConvLayoutOracle = std::function<absl::StatusOr<ConvLayout>(
    const ir::loop::LoopModule& program, const ir::loop::Kernel& kernel)>;

// Why a pass: every conv primitive prefers the blocked layout, but a
// conv-per-call reorder NCHW -> nChw8c -> NCHW is paid around every conv;
// only a whole-program view can tell which buffers every reader and writer
// can take blocked. Chooses the largest set of f32 rank-3..5 intermediate
// buffers such that every extern touching one is a conv whose library
// kernel wants that layout there (a sum or full-size binary post-op operand
// shares its dst's layout), and every loop kernel touching one reads and
// writes it with its channel coordinate = one iteration variable (+ a
// multiple of b) whose extent is a multiple of b (the buffer's C too) --
// except a kernel that only reads blocked buffers: any C and extent, the
// last partial block of lanes split off into a tail kernel (its name
// + "_tail"); components with no conv stay plain. Loop kernels that also touch plain
// activations convert layouts inside themselves: they are the boundary
// reorders (description gets kReorderTag). One block b per region (the
// buffers some block keeps blocked, linked by the kernels touching several):
// of the blocks the oracle reports, the one whose solution reorders the
// fewest elements in that region, counting a conv on a `slower` kernel as
// its multiply-adds / 100 elements; ties go to the block most convs want.
//
// ConvLayout::kChannelsLast is one more candidate layout: u8 / s8 buffers
// (integer convs, QLinearConv), and f32 buffers when an f32 conv offers it,
// each buffer blocked by its own channel count. A loop kernel touching
// channels-last buffers of different channel counts (a concat or split
// along channels) splits its channel loop by its own extent.
//
// The oracle is the caller's (passes/ do not depend on backends/;
// backends/onednn/layout_oracle.h gives oneDNN's). Without one (an empty
// function) every buffer stays plain and the pass changes nothing.
class PropagateLayout : public LoopPass {
 public:
  PropagateLayout() = default;
  explicit PropagateLayout(ConvLayoutOracle oracle);
  absl::string_view name() const override { return "propagate-layout"; }
  absl::StatusOr<bool> Run(ir::loop::LoopModule* program) override;

 private:
  ConvLayoutOracle oracle_;
};

}  // namespace kiln::passes

#endif  // KILN_PASSES_LOOP_PROPAGATE_LAYOUT_H_
