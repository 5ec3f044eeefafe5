// File: lowering/lower_graph.h — lowers a static-shape ir::Graph to an
// ir::loop::LoopProgram: one loop kernel per op (fusion is a later pass),
// extern kernels for Conv/GEMM/RNN-class ops, view ops as index remappings
// composed into their consumers' loads (no copies).
//
//   KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule lp, LowerGraph(graph, {}));
//   // lp.program: buffers + kernels; lp.inputs[k]: buffer of graph input k
#ifndef KILN_LOWERING_LOWER_GRAPH_H_
#define KILN_LOWERING_LOWER_GRAPH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"

namespace kiln::lowering {

// Asks the call library whether it runs extern kernel `kernel` of `module`
// (buffers and constants bound as lowering made them): OK, or why not
// (Unimplemented naming the kernel). backends/onednn/layout_oracle.h gives
// oneDNN's answer, which depends on the CPU it runs on.
using LibraryCallOracle = std::function<absl::Status(const ir::loop::LoopModule& module,
                                                     const ir::loop::Kernel& kernel)>;

struct LoweringOptions {
  // Constants with at most this many elements, all equal, become constant
  // ops inside kernels instead of constant buffers.
  int64_t max_inline_constant_elements = 1;
  // Longest buffer name taken from a model value name (before the suffix
  // that makes it unique).
  int max_name_length = 40;
  // A node lowering cannot compile (no lowering for its op, a lowering that
  // returns Unimplemented for its form, or a value of data-dependent shape
  // among its inputs and outputs) becomes a "kiln.Reference" extern kernel
  // that runs that one node, attributes and subgraphs included, on the
  // reference interpreter (lowering/ops_fallback.h) — when this is set and
  // says the interpreter runs the node (given as a one-node graph). Unset:
  // such nodes are refused, and so is any value whose shape is not static.
  // Lowering does not depend on the interpreter: the caller passes its
  // query (interp::UnsupportedOps(g).empty()).
  std::function<bool(const ir::Graph& node_graph)> reference_fallback;
  // An op with both a library call and a loop form (QLinearMatMul with
  // constant B) becomes the library call when this says the library runs
  // it, else its loop kernel. Unset: the library call (which the runtime
  // replaces with a reference call when the library refuses it at load).
  // The library's own extern-kernel creation is the one place that decides;
  // this only asks it.
  LibraryCallOracle library_call;
  // ConvTranspose / kiln.FusedConvTranspose whose kernel equals its stride
  // (no overlap), without padding, dilation or groups, with no post-op but
  // relu or sigmoid, and with at most 4 output channels or at most this many
  // input and output channels, become a reduction loop kernel and an
  // interleaving copy instead of a library call: oneDNN 2.6 runs them with
  // all but C_out of its block's channels as padding, on its gemm-based
  // deconvolution with scalar post-ops, or on a jit kernel far below its conv
  // speed (docs/decisions/0045). 0: every ConvTranspose is a library call.
  // The pipeline sets it when library calls are tuned
  // (CompileOptions::call_tuning).
  int64_t conv_transpose_loop_max_channels = 0;
};

// InvalidArgument for a graph that is not static-shape (naming the value and
// its producer) or malformed; Unimplemented naming the node and op for what
// cannot be lowered yet. With `allow_reference_fallback`, values of
// data-dependent shape are allowed except graph inputs: only reference
// fallback calls produce and read them (their buffers are zero-size
// placeholders, see IsDynamicBuffer in lowering/ops_fallback.h).
absl::StatusOr<ir::loop::LoopModule> LowerGraph(const ir::Graph& graph,
                                          const LoweringOptions& options = {});

// Whether LowerGraph lowers `node` to an extern kernel (a library call):
// Conv, Gemm, MatMul, the RNN ops, ... and kiln's fused ops, as the op table
// says.
bool IsExternOp(const ir::Node& node);

}  // namespace kiln::lowering

#endif  // KILN_LOWERING_LOWER_GRAPH_H_
