// File: lowering/fused.cc — lowerings of kiln's own ops (domain "kiln"): the
// fused library calls the default graph pipeline makes
// (passes/graph/fuse_onednn_post_ops.h, fuse_dequantize_lstm.h) lower to
// "kiln.Fused*" extern kernels carrying all their attributes, like the ONNX
// ops they replace.
#include <algorithm>
#include <iterator>

#include "absl/strings/string_view.h"
#include "lowering/extern_attrs.h"
#include "lowering/lowerer.h"

namespace kiln::lowering {
namespace {

constexpr const char* kKilnFusedOps[] = {"FusedConv", "FusedConvTranspose", "FusedMatMul",
                                         "FusedGemm", "FusedLSTM"};

}  // namespace

bool IsKilnFusedOp(absl::string_view op) {
  return std::find(std::begin(kKilnFusedOps), std::end(kKilnFusedOps), op) !=
         std::end(kKilnFusedOps);
}

namespace internal {

void AddFusedLowerings(LowerTable& t) {
  for (const char* op : kKilnFusedOps) {
    if (absl::string_view(op) == "FusedConvTranspose") {
      t.AddExternCallWithLoopForm(op, LowerConvTransposeLoopForm);
    } else {
      t.AddExternCall(op);
    }
  }
}

}  // namespace internal
}  // namespace kiln::lowering
