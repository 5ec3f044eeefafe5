// File: backends/onednn/layout_oracle.h — oneDNN as the compile's oracles:
// which channel blocks this process's oneDNN conv kernels want
// (propagate-layout), and whether oneDNN runs an extern kernel (lowering).
//
//   passes::PropagateLayout pass(onednn::ConvLayoutOracle());
//   lowering_options.library_call = onednn::LibraryCallOracle();
#ifndef KILN_BACKENDS_ONEDNN_LAYOUT_ORACLE_H_
#define KILN_BACKENDS_ONEDNN_LAYOUT_ORACLE_H_

#include <functional>

#include "absl/status/status.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "passes/loop/propagate_layout.h"

namespace kiln::onednn {

// The answer depends on the CPU ISA oneDNN runs in this process
// (OneDnnCpuIsa: the CPU's, capped by DNNL_MAX_CPU_ISA). `bf16`: the
// layouts of bf16 calls on bf16 activations (bf16 mode).
passes::ConvLayoutOracle ConvLayoutOracle(bool bf16 = false);

// OK when OneDnnExternKernel::Create takes the kernel (then dropped), else
// its refusal: the same decision the runtime takes at load, on this
// process's CPU. A lowering::LibraryCallOracle (the type is spelled out:
// backends do not depend on lowering).
std::function<absl::Status(const ir::loop::LoopModule&, const ir::loop::Kernel&)>
LibraryCallOracle();

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_LAYOUT_ORACLE_H_
