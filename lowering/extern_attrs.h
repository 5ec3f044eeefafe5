// File: lowering/extern_attrs.h — which kiln ops lower to extern kernels (the
// attributes those kernels carry are ir/loop/extern_schema.h's).
#ifndef KILN_LOWERING_EXTERN_ATTRS_H_
#define KILN_LOWERING_EXTERN_ATTRS_H_

#include "absl/strings/string_view.h"

namespace kiln::lowering {

// kiln's fused library-call ops (passes/graph/fuse_onednn_post_ops.h,
// fuse_dequantize_lstm.h): "FusedConv", "FusedConvTranspose", "FusedMatMul",
// "FusedGemm", "FusedLSTM". LowerGraph
// lowers domain-"kiln" nodes of these ops to "kiln.Fused*" extern kernels
// carrying all their attributes.
bool IsKilnFusedOp(absl::string_view op);

}  // namespace kiln::lowering

#endif  // KILN_LOWERING_EXTERN_ATTRS_H_
