// File: interp/fused.cc — reference kernels of kiln's own fused library-call ops
// (domain "kiln"): FusedConv, FusedConvTranspose, FusedMatMul, FusedGemm run
// their anchor with the ONNX op's reference kernel, then apply the post-op
// chain in order; FusedLSTM runs the reference DequantizeLinear on its 8-bit
// R, then the reference LSTM.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;

// Attributes the fused node adds to its anchor's.
constexpr const char* kFusionAttrs[] = {"post_ops", "post_op_alphas",
                                        "post_op_betas", "post_op_inputs",
                                        "fused_nodes"};

struct PostOp {
  std::string kind;
  double alpha = 0.0;
  double beta = 0.0;
  int64_t input = -1;  // operand index among the node's inputs, -1 if none
};

bool NeedsOperand(absl::string_view kind) {
  return kind == "add" || kind == "sub" || kind == "mul" || kind == "sum";
}

bool IsKnownKind(absl::string_view kind) {
  static constexpr absl::string_view kKinds[] = {
      "relu",      "leaky_relu",  "elu",  "gelu_erf", "gelu_tanh", "swish",
      "sigmoid",   "tanh",        "hardswish", "hardsigmoid", "clip",
      "linear",    "add",         "sub",  "mul",      "sum"};
  return std::find(std::begin(kKinds), std::end(kKinds), kind) != std::end(kKinds);
}

absl::StatusOr<std::vector<PostOp>> ReadPostOps(const OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> kinds,
                        ctx.node.Attr<std::vector<std::string>>("post_ops"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> alphas,
                        ctx.node.Attr<std::vector<float>>("post_op_alphas"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> betas,
                        ctx.node.Attr<std::vector<float>>("post_op_betas"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> inputs,
                        ctx.node.Attr<std::vector<int64_t>>("post_op_inputs"));
  if (alphas.size() != kinds.size() || betas.size() != kinds.size() ||
      inputs.size() != kinds.size()) {
    return ctx.Error("post_ops has ", kinds.size(), " entries but post_op_alphas ",
                     alphas.size(), ", post_op_betas ", betas.size(),
                     " and post_op_inputs ", inputs.size());
  }
  std::vector<PostOp> ops;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (!IsKnownKind(kinds[i])) {
      return ctx.Error("unknown post-op '", kinds[i], "'");
    }
    if (NeedsOperand(kinds[i]) != (inputs[i] >= 0)) {
      return ctx.Error("post-op ", i, " (", kinds[i], ") ",
                       NeedsOperand(kinds[i]) ? "needs an operand input"
                                              : "takes no operand input");
    }
    ops.push_back({kinds[i], alphas[i], betas[i], inputs[i]});
  }
  return ops;
}

// True when `operand` broadcasts to `out` (right-aligned) without growing it.
bool BroadcastsTo(const Shape& operand, const Shape& out) {
  if (operand.size() > out.size()) return false;
  const size_t offset = out.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i) {
    if (operand[i] != 1 && operand[i] != out[offset + i]) return false;
  }
  return true;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Clamp(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }

double ApplyUnary(const PostOp& p, double x) {
  const std::string& k = p.kind;
  if (k == "relu") return x > 0 ? x : 0.0;
  if (k == "leaky_relu") return x < 0 ? p.alpha * x : x;
  if (k == "elu") return x < 0 ? p.alpha * (std::exp(x) - 1.0) : x;
  if (k == "gelu_erf") return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (k == "gelu_tanh") {
    const double c = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
  }
  if (k == "swish") return x * Sigmoid(p.alpha * x);
  if (k == "sigmoid") return Sigmoid(x);
  if (k == "tanh") return std::tanh(x);
  if (k == "hardswish") return x * Clamp(x / 6.0 + 0.5, 0.0, 1.0);
  if (k == "hardsigmoid") return Clamp(p.alpha * x + p.beta, 0.0, 1.0);
  if (k == "clip") return Clamp(x, p.alpha, p.beta);
  return p.alpha * x + p.beta;  // linear
}

absl::StatusOr<std::vector<Tensor>> Fused(OpContext& ctx,
                                          absl::string_view anchor_op) {
  KILN_ASSIGN_OR_RETURN(std::vector<PostOp> post_ops, ReadPostOps(ctx));
  // Operands follow the anchor's own inputs.
  int anchor_inputs = ctx.num_inputs();
  for (const PostOp& p : post_ops) {
    if (p.input >= 0) {
      anchor_inputs = std::min(anchor_inputs, static_cast<int>(p.input));
    }
  }
  if (anchor_inputs < 2) {
    return ctx.Error("needs the ", anchor_op, "'s inputs before the post-op operands, "
                     "got ", anchor_inputs);
  }
  for (const PostOp& p : post_ops) {
    if (p.input >= 0 && !ctx.has_input(static_cast<int>(p.input))) {
      return ctx.Error("post-op ", p.kind, " reads input ", p.input, ", which the node lacks");
    }
  }

  ir::Node anchor = ctx.node;
  anchor.op = std::string(anchor_op);
  anchor.domain.clear();
  for (const char* attr : kFusionAttrs) anchor.attrs.erase(attr);
  anchor.inputs.resize(anchor_inputs);
  const OpKernel* kernel = OpRegistry::Default().Find(anchor_op);
  if (kernel == nullptr) {
    return kiln::InternalError("no reference kernel for anchor op ", anchor_op);
  }
  OpContext anchor_ctx{anchor, ctx.graph, ctx.opset,
                       std::vector<const Tensor*>(ctx.inputs.begin(),
                                                  ctx.inputs.begin() + anchor_inputs),
                       ctx.run_subgraph};
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, (*kernel)(anchor_ctx));
  if (outs.empty()) return kiln::InternalError(anchor_op, " kernel produced nothing");
  Tensor y = std::move(outs[0]);
  if (y.dtype() != DType::kF32) {
    return ctx.Error("fused calls compute f32 only, the ", anchor_op, " gave ",
                     y.TypeString());
  }

  float* out = y.data<float>();
  const int64_t n = y.num_elements();
  for (const PostOp& p : post_ops) {
    if (p.input < 0) {
      for (int64_t i = 0; i < n; ++i) {
        out[i] = static_cast<float>(ApplyUnary(p, out[i]));
      }
      continue;
    }
    const Tensor& operand = *ctx.inputs[p.input];
    if (operand.dtype() != DType::kF32) {
      return ctx.Error("post-op ", p.kind, " operand is ", operand.TypeString(),
                       ", expected f32");
    }
    const bool fits = p.kind == "sum" ? operand.shape() == y.shape()
                                      : BroadcastsTo(operand.shape(), y.shape());
    if (!fits) {
      return ctx.Error("post-op ", p.kind, " operand ", operand.TypeString(),
                       p.kind == "sum" ? " does not have the output's shape "
                                       : " does not broadcast to the output ",
                       ir::ShapeToString(y.shape()));
    }
    const BroadcastMap map(operand.shape(), y.shape());
    const float* b = operand.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      const double x = out[i], v = b[map(i)];
      double r;
      if (p.kind == "add") {
        r = x + v;
      } else if (p.kind == "sub") {
        r = x - v;
      } else if (p.kind == "mul") {
        r = x * v;
      } else {  // sum: accumulate onto what the destination held
        r = x + p.alpha * v;
      }
      out[i] = static_cast<float>(r);
    }
  }
  return std::vector<Tensor>{std::move(y)};
}

// kiln.FusedLSTM (passes/graph/fuse_dequantize_lstm.h): inputs X, W, R_q, B,
// sequence_lens, initial_h, initial_c, P, R_scale, R_zero_point; the LSTM's
// R is DequantizeLinear(R_q, R_scale, R_zero_point) with R_q [D, 4H, H] and
// R_scale [D] (per direction) or [D, 4H] (per column), the zero point of the
// scale's shape or absent.
absl::StatusOr<std::vector<Tensor>> FusedLstm(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Tensor* q, ctx.Input(2));
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, ctx.Input(8));
  const Tensor* zp = ctx.has_input(9) ? ctx.inputs[9] : nullptr;
  if (q->rank() != 3) return ctx.Error("R_q must have rank 3, got ", q->TypeString());
  const Shape per_direction = {q->dim(0)};
  const Shape per_column = {q->dim(0), q->dim(1)};
  if (scale->shape() != per_direction && scale->shape() != per_column) {
    return ctx.Error("R_scale is ", scale->TypeString(), "; it must be ",
                     ir::ShapeToString(per_direction), " or ", ir::ShapeToString(per_column));
  }
  if (zp != nullptr && zp->shape() != scale->shape()) {
    return ctx.Error("R_zero_point is ", zp->TypeString(), " but R_scale is ",
                     scale->TypeString());
  }
  // Both forms are one DequantizeLinear along axis 0: per column over R_q
  // viewed as [D * 4H, H].
  const int64_t rows = scale->num_elements();
  KILN_ASSIGN_OR_RETURN(Tensor q2, q->ShareReshaped({rows, q->num_elements() / rows}));
  KILN_ASSIGN_OR_RETURN(Tensor s2, scale->ShareReshaped({rows}));
  std::optional<Tensor> z2;
  if (zp != nullptr) {
    KILN_ASSIGN_OR_RETURN(Tensor z, zp->ShareReshaped({rows}));
    z2 = std::move(z);
  }
  ir::Node dq = ctx.node;
  dq.domain.clear();
  dq.op = "DequantizeLinear";
  dq.attrs.clear();
  dq.attrs["axis"] = int64_t{0};
  dq.inputs = {ctx.node.inputs[2], ctx.node.inputs[8],
               zp != nullptr ? ctx.node.inputs[9] : ir::kNoValue};
  dq.outputs.clear();  // f32, the scale's type
  const OpKernel* dequantize = OpRegistry::Default().Find("DequantizeLinear");
  const OpKernel* lstm_kernel = OpRegistry::Default().Find("LSTM");
  if (dequantize == nullptr || lstm_kernel == nullptr) {
    return kiln::InternalError("no reference kernel for DequantizeLinear or LSTM");
  }
  OpContext dq_ctx{dq, ctx.graph, std::max<int64_t>(ctx.opset, 13),
                   {&q2, &s2, z2.has_value() ? &*z2 : nullptr}, ctx.run_subgraph,
                   ctx.max_result_elements};
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> r, (*dequantize)(dq_ctx));
  if (r.empty()) return kiln::InternalError("DequantizeLinear kernel produced nothing");
  KILN_ASSIGN_OR_RETURN(Tensor r3, r[0].Reshaped(q->shape()));

  ir::Node lstm = ctx.node;
  lstm.domain.clear();
  lstm.op = "LSTM";
  if (lstm.inputs.size() > 8) lstm.inputs.resize(8);
  std::vector<const Tensor*> inputs(ctx.inputs.begin(),
                                    ctx.inputs.begin() + std::min(ctx.num_inputs(), 8));
  inputs[2] = &r3;
  OpContext lstm_ctx{lstm, ctx.graph, ctx.opset, std::move(inputs), ctx.run_subgraph,
                     ctx.max_result_elements};
  return (*lstm_kernel)(lstm_ctx);
}

}  // namespace

void RegisterFusedOps(OpRegistry* r) {
  r->Register("kiln.FusedLSTM", FusedLstm);
  for (const char* op : {"Conv", "ConvTranspose", "MatMul", "Gemm"}) {
    const std::string anchor = op;
    r->Register(absl::StrCat("kiln.Fused", op),
                [anchor](OpContext& ctx) { return Fused(ctx, anchor); });
  }
}

}  // namespace kiln::interp
