// File: backends/onednn/layout_oracle.h — oneDNN as propagate-layout's conv
// layout oracle: which channel blocks this process's oneDNN conv kernels
// want (PreferredActivationBlocks), for a compile to pass in its target.
//
//   passes::PropagateLayout pass(onednn::ConvLayoutOracle());
#ifndef KILN_BACKENDS_ONEDNN_LAYOUT_ORACLE_H_
#define KILN_BACKENDS_ONEDNN_LAYOUT_ORACLE_H_

#include "passes/loop/propagate_layout.h"

namespace kiln::onednn {

// The answer depends on the CPU ISA oneDNN runs in this process
// (OneDnnCpuIsa: the CPU's, capped by DNNL_MAX_CPU_ISA).
passes::ConvLayoutOracle ConvLayoutOracle();

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_LAYOUT_ORACLE_H_
