// The compile report's compiler half (compiler/report.h).
#include "compiler/report.h"

#include <string>

#include "passes/graph/fuse_dequantize_lstm.h"
#include "passes/graph/fuse_onednn_post_ops.h"
#include "passes/graph/fuse_qdq.h"

namespace kiln::compiler {

absl::Status ReportObserver::AfterGraphPass(int index, const passes::GraphPass* pass,
                                            bool changed, const ir::Graph& graph) {
  if (pass == nullptr) {  // the input graph
    for (ir::ValueId v = 0; v < graph.num_values(); ++v) {
      if (graph.value(v).dtype == ir::DType::kF16) report_->model_float = ir::DType::kF16;
    }
  }
  if (const auto* fuse = dynamic_cast<const passes::FuseOneDnnPostOps*>(pass)) {
    for (const auto& u : fuse->stats().unfused_elementwise) {
      report_->unfused_elementwise.push_back({u.node, u.op, u.anchor, u.reason});
    }
  }
  if (const auto* qdq = dynamic_cast<const passes::FuseQdq*>(pass)) {
    for (const auto& p : qdq->patterns()) {
      report_->qdq_patterns.push_back({p.node, p.anchor, p.op, p.reason});
    }
  }
  if (const auto* lstm = dynamic_cast<const passes::FuseDequantizeLstm*>(pass)) {
    for (const auto& p : lstm->patterns()) {
      report_->qdq_patterns.push_back({p.node, p.anchor, p.op, p.reason});
    }
  }
  return absl::OkStatus();
}

absl::Status ReportObserver::AfterStage(Stage stage, absl::Duration elapsed,
                                        const CompiledProgram& program) {
  const double ms = absl::ToDoubleMilliseconds(elapsed);
  switch (stage) {
    case Stage::kVerify:
    case Stage::kGraphPasses:
      report_->graph_passes_ms += ms;
      break;
    case Stage::kLowering:
      report_->lowering_ms += ms;
      break;
    case Stage::kLoopPasses:
      report_->loop_passes_ms += ms;
      break;
    case Stage::kEmit:
      report_->emit_ms += ms;
      break;
  }
  return absl::OkStatus();
}

KernelReport LoopKernelReport(const ir::loop::Kernel& k, const backends::cpp::EmittedKernel& e) {
  KernelReport r;
  r.name = k.name;
  r.backend = "loop";
  r.ops = k.ops;
  r.status = std::string(ir::loop::VecKindName(e.vec.kind));
  r.vectorized = e.vec.kind == ir::loop::VecStatus::Kind::kVectorized ||
                 e.vec.kind == ir::loop::VecStatus::Kind::kTiled;
  r.reason = e.vec.reason;
  r.parallel = e.parallel;
  for (size_t i = 0; i < e.ops.size() && i < k.body.size(); ++i) {
    const backends::cpp::OpDecision& d = e.ops[i];
    if (d.kind != backends::cpp::OpVec::kPerLane && d.kind != backends::cpp::OpVec::kScalar) {
      continue;
    }
    r.unvectorized_ops.push_back({static_cast<int>(i),
                                  std::string(ir::loop::OpCodeName(k.body[i].code)),
                                  std::string(backends::cpp::OpVecName(d.kind)), d.reason});
  }
  return r;
}

}  // namespace kiln::compiler
