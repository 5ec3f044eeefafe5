// File: lowering/nn.cc — lowerings of ONNX's nn family (onnx/defs/nn): the
// normalizations (BatchNormalization in inference mode is an affine
// elementwise op; training mode reduces the batch statistics), LRN, global and
// windowed pools (padding handled by a mask and a clamped load; MaxPool's
// Indices by an argmax), MaxUnpool, Shrink, Dropout, Flatten and
// TfIdfVectorizer as loop kernels; Conv, ConvTranspose and ConvInteger as
// extern calls.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/loop/extern_schema.h"
#include "ir/status_macros.h"
#include "lowering/elementwise.h"
#include "lowering/kernel_util.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

// mean and 1/sqrt(var + eps) over the reduction space of `k`, reading x at
// `rc`.
absl::Status MeanInvStd(Emitter& k, const Operand& x, const Coords& rc,
                        float epsilon, int32_t* mean, int32_t* inv_std) {
  KILN_ASSIGN_OR_RETURN(int32_t v, k.Load(x, rc));
  *mean = k.b().Reduce(ReduceKind::kWelfordMean, v);
  KILN_ASSIGN_OR_RETURN(int32_t v2, k.Load(x, rc));
  const int32_t var = k.b().Reduce(ReduceKind::kWelfordVar, v2);
  *inv_std = k.Un(OpCode::kRsqrt,
                  k.Bin(OpCode::kAdd, var, k.Const(x.dtype, epsilon)));
  return absl::OkStatus();
}

absl::Status LowerLayerNorm(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand scale, L.Input(1));
  if (!ir::IsFloat(x.dtype)) return L.Error("needs a float input");
  KILN_ASSIGN_OR_RETURN(int64_t axis_attr, n.AttrOr<int64_t>("axis", -1));
  KILN_ASSIGN_OR_RETURN(float eps, n.AttrOr<float>("epsilon", 1e-5f));
  const size_t rank = x.shape.size();
  std::optional<int64_t> axis = NormalizeAxis(axis_attr, rank);
  if (!axis.has_value()) return L.Error("axis ", axis_attr, " out of range");
  const Shape norm_shape(x.shape.begin() + *axis, x.shape.end());
  std::vector<Operand> params = {scale};
  if (L.HasInput(2)) {
    KILN_ASSIGN_OR_RETURN(Operand bias, L.Input(2));
    params.push_back(bias);
  }
  for (const Operand& p : params) {
    absl::StatusOr<Shape> b = ir::BroadcastShapes(p.shape, norm_shape);
    if (!b.ok() || *b != norm_shape || p.dtype != x.dtype) {
      return L.Error("Scale/B of ", ir::DTypeName(p.dtype),
                     ir::ShapeToString(p.shape), " do not fit X ",
                     ir::ShapeToString(x.shape));
    }
  }
  std::vector<int64_t> red(norm_shape.begin(), norm_shape.end());
  Shape outer(x.shape.begin(), x.shape.begin() + *axis);
  {
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(x.shape, red);
    const Coords it = k->IterCoords();
    Coords rc = it;
    for (size_t d = *axis; d < rank; ++d) rc[d] = k->r(d - *axis);
    int32_t mean, inv;
    KILN_RETURN_IF_ERROR(MeanInvStd(*k, x, rc, eps, &mean, &inv));
    KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
    const Coords inner(it.begin() + *axis, it.end());
    KILN_ASSIGN_OR_RETURN(int32_t s, k->LoadBroadcast(scale, inner));
    int32_t y = k->Bin(OpCode::kMul,
                       k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, xi, mean), inv), s);
    if (params.size() > 1) {
      KILN_ASSIGN_OR_RETURN(int32_t bv, k->LoadBroadcast(params[1], inner));
      y = k->Bin(OpCode::kAdd, y, bv);
    }
    k->Store(buffer, x.shape, it, y);
  }
  for (int out = 1; out <= 2; ++out) {
    if (!L.HasOutput(out)) continue;
    const ir::Value& v = L.OutputValue(out);
    if (v.dtype != x.dtype) {
      return L.Unimplemented("statistics output of dtype ", ir::DTypeName(v.dtype));
    }
    const int32_t buffer = L.OutputBuffer(out);
    auto k = L.NewKernel(v.shape, red);
    const Coords it = k->IterCoords();
    Coords rc = it;
    for (size_t d = *axis; d < rank; ++d) rc[d] = k->r(d - *axis);
    int32_t mean, inv;
    KILN_RETURN_IF_ERROR(MeanInvStd(*k, x, rc, eps, &mean, &inv));
    k->Store(buffer, v.shape, it, out == 1 ? mean : inv);
  }
  return absl::OkStatus();
}

absl::Status LowerInstanceNorm(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand scale, L.Input(1));
  KILN_ASSIGN_OR_RETURN(Operand bias, L.Input(2));
  KILN_ASSIGN_OR_RETURN(float eps, n.AttrOr<float>("epsilon", 1e-5f));
  if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
    return L.Error("needs a float input of rank >= 2");
  }
  const int64_t c = x.shape[1];
  if (scale.shape != Shape{c} || bias.shape != Shape{c}) {
    return L.Error("scale and B must have shape [", c, "]");
  }
  std::vector<int64_t> red(x.shape.begin() + 2, x.shape.end());
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape, red);
  const Coords it = k->IterCoords();
  Coords rc = it;
  for (size_t d = 2; d < x.shape.size(); ++d) rc[d] = k->r(d - 2);
  int32_t mean, inv;
  KILN_RETURN_IF_ERROR(MeanInvStd(*k, x, rc, eps, &mean, &inv));
  KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
  KILN_ASSIGN_OR_RETURN(int32_t s, k->Load(scale, {it[1]}));
  KILN_ASSIGN_OR_RETURN(int32_t b, k->Load(bias, {it[1]}));
  const int32_t y = k->Bin(
      OpCode::kAdd,
      k->Bin(OpCode::kMul, k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, xi, mean), inv), s),
      b);
  k->Store(buffer, x.shape, it, y);
  return absl::OkStatus();
}

// BatchNormalization with training_mode=1 (opset >= 14): Y normalized with
// the batch's statistics (population variance, Welford), and the running
// statistics input * momentum + batch * (1 - momentum).
absl::Status LowerBatchNormTraining(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
    return L.Error("needs a float input of rank >= 2");
  }
  KILN_ASSIGN_OR_RETURN(float eps, n.AttrOr<float>("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(float momentum, n.AttrOr<float>("momentum", 0.9f));
  const int64_t c = x.shape[1];
  std::vector<Operand> p;
  for (int i = 1; i <= 4; ++i) {
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    if (op.shape != Shape{c} || !ir::IsFloat(op.dtype)) {
      return L.Error("input ", i, " must be float of shape [", c, "], got ",
                     ir::ShapeToString(op.shape));
    }
    p.push_back(op);
  }
  // Batch, then spatial dims: the statistics' reduction space.
  std::vector<int64_t> red = {x.shape[0]};
  red.insert(red.end(), x.shape.begin() + 2, x.shape.end());
  auto stats_coords = [&](Emitter& k, IndexExpr ch) {
    Coords rc = {k.r(0), std::move(ch)};
    for (size_t d = 2; d < x.shape.size(); ++d) rc.push_back(k.r(d - 1));
    return rc;
  };
  auto stats = [&](Emitter& k, IndexExpr ch, int32_t* mean,
                   int32_t* var) -> absl::Status {
    const Coords rc = stats_coords(k, std::move(ch));
    KILN_ASSIGN_OR_RETURN(int32_t v, k.Load(x, rc));
    KILN_ASSIGN_OR_RETURN(int32_t v2, k.Load(x, rc));
    *mean = k.b().Reduce(ReduceKind::kWelfordMean, v);
    *var = k.b().Reduce(ReduceKind::kWelfordVar, v2);
    return absl::OkStatus();
  };
  const DType dt = x.dtype;
  const int32_t ybuf = NewOutput(L, 0);
  if (ir::NumElements(x.shape) > 0) {
    auto k = L.NewKernel(x.shape, red);
    const Coords it = k->IterCoords();
    int32_t mean, var;
    KILN_RETURN_IF_ERROR(stats(*k, it[1], &mean, &var));
    KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
    KILN_ASSIGN_OR_RETURN(int32_t scale, k->Load(p[0], {it[1]}));
    KILN_ASSIGN_OR_RETURN(int32_t bias, k->Load(p[1], {it[1]}));
    if (k->DTypeOf(scale) != dt) scale = k->Cast(scale, dt);
    if (k->DTypeOf(bias) != dt) bias = k->Cast(bias, dt);
    const int32_t inv =
        k->Un(OpCode::kRsqrt, k->Bin(OpCode::kAdd, var, k->Const(dt, eps)));
    const int32_t y = k->Bin(
        OpCode::kAdd,
        k->Bin(OpCode::kMul, k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, xi, mean), inv),
               scale),
        bias);
    k->Store(ybuf, x.shape, it, y);
  }
  for (int o = 1; o <= 2; ++o) {
    if (!L.HasOutput(o)) continue;
    const ir::Value& v = L.OutputValue(o);
    const Operand& running = p[o + 1];
    if (v.shape != Shape{c} || v.dtype != running.dtype) {
      return L.Error("output ", o, " must be ", ir::DTypeName(running.dtype), "[", c, "]");
    }
    const int32_t buffer = NewOutput(L, o);
    if (c == 0) continue;
    auto k = L.NewKernel({c}, red);
    int32_t mean, var;
    KILN_RETURN_IF_ERROR(stats(*k, k->i(0), &mean, &var));
    int32_t batch = o == 1 ? mean : var;
    KILN_ASSIGN_OR_RETURN(int32_t old, k->Load(running, {k->i(0)}));
    const DType rt = running.dtype;
    if (dt != rt) batch = k->Cast(batch, rt);
    const int32_t r = k->Bin(
        OpCode::kAdd, k->Bin(OpCode::kMul, old, k->Const(rt, momentum)),
        k->Bin(OpCode::kMul, batch, k->Const(rt, 1.0 - static_cast<double>(momentum))));
    k->Store(buffer, {c}, {k->i(0)}, r);
  }
  return absl::OkStatus();
}

absl::Status LowerBatchNorm(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(int64_t training, n.AttrOr<int64_t>("training_mode", 0));
  if (training != 0 && L.opset() >= 14) return LowerBatchNormTraining(L, n);
  if (training != 0) return L.Unimplemented("training_mode=1");
  for (int o = 1; o < static_cast<int>(n.outputs.size()); ++o) {
    if (L.HasOutput(o)) return L.Unimplemented("training outputs (mean/var)");
  }
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
    return L.Error("needs a float input of rank >= 2");
  }
  KILN_ASSIGN_OR_RETURN(float eps, n.AttrOr<float>("epsilon", 1e-5f));
  const int64_t c = x.shape[1];
  std::vector<Operand> p;
  for (int i = 1; i <= 4; ++i) {
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    if (op.shape != Shape{c}) {
      return L.Error("input ", i, " must have shape [", c, "], got ",
                     ir::ShapeToString(op.shape));
    }
    if (op.dtype != x.dtype) {
      return L.Unimplemented("parameters of another dtype than X");
    }
    p.push_back(op);
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape);
  const Coords it = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
  std::vector<int32_t> v;
  for (const Operand& op : p) {
    KILN_ASSIGN_OR_RETURN(int32_t val, k->Load(op, {it[1]}));
    v.push_back(val);
  }
  // (x - mean) / sqrt(var + eps) * scale + B
  const int32_t inv = k->Un(
      OpCode::kRsqrt, k->Bin(OpCode::kAdd, v[3], k->Const(x.dtype, eps)));
  const int32_t y = k->Bin(
      OpCode::kAdd,
      k->Bin(OpCode::kMul, k->Bin(OpCode::kMul, k->Bin(OpCode::kSub, xi, v[2]), inv),
             v[0]),
      v[1]);
  k->Store(buffer, x.shape, it, y);
  return absl::OkStatus();
}

absl::Status LowerMvn(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype)) return L.Error("needs a float input");
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        n.AttrOr<std::vector<int64_t>>("axes", {0, 2, 3}));
  std::vector<bool> reduced(rank, false);
  for (int64_t a : axes) {
    std::optional<int64_t> norm = NormalizeAxis(a, rank);
    if (!norm.has_value() || reduced[*norm]) {
      return L.Error("axis ", a, " out of range or repeated");
    }
    reduced[*norm] = true;
  }
  std::vector<int64_t> red;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) red.push_back(x.shape[d]);
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape, red);
  const Coords it = k->IterCoords();
  Coords rc = it;
  int next = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) rc[d] = k->r(next++);
  }
  KILN_ASSIGN_OR_RETURN(int32_t v1, k->Load(x, rc));
  const int32_t mean = k->b().Reduce(ReduceKind::kWelfordMean, v1);
  KILN_ASSIGN_OR_RETURN(int32_t v2, k->Load(x, rc));
  const int32_t var = k->b().Reduce(ReduceKind::kWelfordVar, v2);
  KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
  const int32_t denom =
      k->Bin(OpCode::kAdd, k->Un(OpCode::kSqrt, var), k->Const(x.dtype, 1e-9));
  k->Store(buffer, x.shape, it,
           k->Bin(OpCode::kDiv, k->Bin(OpCode::kSub, xi, mean), denom));
  return absl::OkStatus();
}

absl::Status LowerLrn(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
    return L.Error("needs a float input of rank >= 2");
  }
  KILN_ASSIGN_OR_RETURN(int64_t size, n.Attr<int64_t>("size"));
  KILN_ASSIGN_OR_RETURN(float alpha, n.AttrOr<float>("alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(float beta, n.AttrOr<float>("beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(float bias, n.AttrOr<float>("bias", 1.0f));
  if (size <= 0) return L.Error("size must be positive, got ", size);
  const int64_t channels = x.shape[1];
  const int64_t before = (size - 1) / 2;
  const DType dt = x.dtype;
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(x.shape, {size});
  const Coords it = k->IterCoords();
  const IndexExpr ch = k->Simplify(it[1] - before + k->r(0));
  Coords window = it;
  window[1] = ir::loop::Min(ir::loop::Max(ch, 0), std::max<int64_t>(channels - 1, 0));
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, window));
  const int32_t c = k->b().Index(ch);
  const int32_t inside = k->Bin(
      OpCode::kAnd, k->Bin(OpCode::kGe, c, k->Const(DType::kI64, 0)),
      k->Bin(OpCode::kLt, c, k->Const(DType::kI64, static_cast<double>(channels))));
  const int32_t sq = k->b().Reduce(
      ReduceKind::kSum,
      k->Sel(inside, k->Bin(OpCode::kMul, v, v), k->Const(dt, 0)));
  // bias + alpha / size * sum, with alpha / size in float as ONNX writes it.
  const int32_t base = k->Bin(
      OpCode::kAdd, k->Const(dt, bias),
      k->Bin(OpCode::kMul, k->Const(dt, alpha / static_cast<float>(size)), sq));
  KILN_ASSIGN_OR_RETURN(int32_t xi, k->Load(x, it));
  const int32_t y =
      k->Bin(OpCode::kDiv, xi, k->Bin(OpCode::kPow, base, k->Const(dt, beta)));
  k->Store(buffer, x.shape, it, y);
  return absl::OkStatus();
}

// ---- Pooling, MaxUnpool.

LowerFn MakeGlobalPool(bool is_max) {
  return [is_max](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    if (!ir::IsFloat(x.dtype) || x.shape.size() < 2) {
      return L.Error("needs a float input of rank >= 2");
    }
    std::vector<int64_t> red(x.shape.begin() + 2, x.shape.end());
    std::vector<int64_t> axes;
    int64_t count = 1;
    for (size_t d = 2; d < x.shape.size(); ++d) {
      axes.push_back(d);
      count *= x.shape[d];
    }
    const ir::Value& out = L.OutputValue(0);
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(out.shape, red);
    const Coords in = ReductionInputCoords(*k, x.shape.size(), axes, true);
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
    int32_t r;
    if (is_max) {
      r = k->b().Reduce(ReduceKind::kMax, v);
    } else {
      r = k->Bin(OpCode::kDiv, k->b().Reduce(ReduceKind::kSum, v),
                 k->Const(x.dtype, static_cast<double>(count)));
    }
    k->Store(buffer, out.shape, k->IterCoords(), r);
    return absl::OkStatus();
  };
}

absl::StatusOr<std::vector<int64_t>> IntsOr(Lowerer& L, const ir::Node& n,
                                            const char* name, size_t count,
                                            int64_t fallback) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                        n.AttrOr<std::vector<int64_t>>(name, {}));
  if (v.empty()) v.assign(count, fallback);
  if (v.size() != count) {
    return L.Error("attribute '", name, "' has ", v.size(), " values, expected ",
                   count);
  }
  return v;
}

// The smallest value of `dt` (-inf for floats) as a constant op.
int32_t Lowest(Emitter& k, DType dt) {
  if (ir::IsFloat(dt)) return k.Const(dt, -std::numeric_limits<double>::infinity());
  const int32_t c = k.Const(dt, 0);
  int64_t v = 0;
  switch (dt) {
    case DType::kI64: v = std::numeric_limits<int64_t>::min(); break;
    case DType::kI32: v = std::numeric_limits<int32_t>::min(); break;
    case DType::kI8: v = std::numeric_limits<int8_t>::min(); break;
    default: break;
  }
  k.b().kernel().body[c].ivalue = v;
  return c;
}

// MaxPool's Indices output: the window's first maximum (an argmax over the
// valid positions), as a flat index into X (row-major, or column-major over
// the spatial dims with storage_order=1).
absl::Status LowerMaxPoolWithIndices(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) || x.shape.size() < 3) {
    return L.Error("needs a float input of rank >= 3");
  }
  const size_t nsp = x.shape.size() - 2;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                        n.Attr<std::vector<int64_t>>("kernel_shape"));
  auto ints = [&](const char* name, size_t size,
                  int64_t fallback) -> absl::StatusOr<std::vector<int64_t>> {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                          n.AttrOr<std::vector<int64_t>>(name, {}));
    if (v.empty()) v.assign(size, fallback);
    if (v.size() != size) return L.Error("attribute '", name, "' has the wrong size");
    return v;
  };
  if (kernel.size() != nsp) return L.Error("kernel_shape has the wrong rank");
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, ints("strides", nsp, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dil, ints("dilations", nsp, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ints("pads", 2 * nsp, 0));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, n.AttrOr<std::string>("auto_pad", "NOTSET"));
  KILN_ASSIGN_OR_RETURN(int64_t storage_order, n.AttrOr<int64_t>("storage_order", 0));
  const ir::Value& out = L.OutputValue(0);
  if (out.shape.size() != x.shape.size() || L.OutputValue(1).shape != out.shape ||
      L.OutputValue(1).dtype != DType::kI64) {
    return L.Error("outputs do not fit the input");
  }
  std::vector<int64_t> pad_begin(nsp);
  for (size_t d = 0; d < nsp; ++d) {
    if (kernel[d] <= 0 || strides[d] <= 0 || dil[d] <= 0) {
      return L.Error("kernel, strides and dilations must be positive");
    }
    const int64_t in = x.shape[d + 2], o = out.shape[d + 2];
    const int64_t ek = (kernel[d] - 1) * dil[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (o - 1) * strides[d] + ek - in);
      pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "VALID") {
      pad_begin[d] = 0;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
      pad_begin[d] = pads[d];
    } else {
      return L.Error("unknown auto_pad '", auto_pad, "'");
    }
    if (pad_begin[d] < 0) return L.Error("negative pads");
  }
  const int32_t vbuf = NewOutput(L, 0);
  const int32_t ibuf = NewOutput(L, 1);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel(out.shape, kernel);
  auto& b = k->b();
  const Coords it = k->IterCoords();
  Coords in = {it[0], it[1]};
  int32_t valid = k->Const(DType::kBool, 1);
  for (size_t d = 0; d < nsp; ++d) {
    const int64_t size = x.shape[d + 2];
    const IndexExpr h =
        k->Simplify(it[d + 2] * strides[d] - pad_begin[d] + k->r(d) * dil[d]);
    in.push_back(ir::loop::Min(ir::loop::Max(h, 0), size - 1));
    const int32_t hv = b.Index(h);
    valid = k->Bin(OpCode::kAnd, valid,
                   k->Bin(OpCode::kAnd, k->Bin(OpCode::kGe, hv, k->Const(DType::kI64, 0)),
                          k->Bin(OpCode::kLt, hv, k->Const(DType::kI64, size))));
  }
  KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
  KILN_ASSIGN_OR_RETURN(int32_t v2, k->Load(x, in));
  const int32_t lowest = k->Const(x.dtype, -std::numeric_limits<double>::infinity());
  // Both operands before either Reduce (see StoreReducedLoss).
  const int32_t masked = k->Sel(valid, v, lowest), masked2 = k->Sel(valid, v2, lowest);
  const int32_t m = b.Reduce(ReduceKind::kMax, masked);
  const int32_t arg = b.Reduce(ReduceKind::kArgMax, masked2);
  // Window position -> input coordinates (clamped like the loads).
  std::vector<int32_t> hs(nsp);
  int64_t window = 1;
  for (size_t d = nsp; d-- > 0;) {
    int32_t kd = arg;
    if (window > 1) kd = k->Bin(OpCode::kDiv, kd, k->Const(DType::kI64, window));
    kd = k->Bin(OpCode::kMod, kd, k->Const(DType::kI64, kernel[d]));
    window *= kernel[d];
    const int32_t base = b.Index(k->Simplify(it[d + 2] * strides[d] - pad_begin[d]));
    const int32_t h = k->Bin(OpCode::kAdd, base,
                             k->Bin(OpCode::kMul, kd, k->Const(DType::kI64, dil[d])));
    hs[d] = k->Bin(OpCode::kMin, k->Bin(OpCode::kMax, h, k->Const(DType::kI64, 0)),
                   k->Const(DType::kI64, x.shape[d + 2] - 1));
  }
  int64_t plane_size = 1;
  for (size_t d = 0; d < nsp; ++d) plane_size *= x.shape[d + 2];
  int32_t flat = b.Index(k->Simplify((it[0] * x.shape[1] + it[1]) * plane_size));
  std::vector<int64_t> stride(nsp, 1);
  if (storage_order != 0) {
    for (size_t d = 1; d < nsp; ++d) stride[d] = stride[d - 1] * x.shape[d + 1];
  } else {
    for (size_t d = nsp - 1; d-- > 0;) stride[d] = stride[d + 1] * x.shape[d + 3];
  }
  for (size_t d = 0; d < nsp; ++d) {
    flat = k->Bin(OpCode::kAdd, flat,
                  k->Bin(OpCode::kMul, hs[d], k->Const(DType::kI64, stride[d])));
  }
  k->Store(vbuf, out.shape, it, m);
  k->Store(ibuf, out.shape, it, flat);
  return absl::OkStatus();
}

LowerFn MakePool(bool is_max) {
  return [is_max](Lowerer& L, const ir::Node& n) -> absl::Status {
    if (is_max && L.HasOutput(1)) return LowerMaxPoolWithIndices(L, n);
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    if ((is_max ? x.dtype == DType::kBool : !ir::IsFloat(x.dtype)) ||
        x.shape.size() < 3) {
      return L.Error("needs a ", is_max ? "numeric" : "float",
                     " input of rank >= 3");
    }
    if (L.HasOutput(1)) return L.Unimplemented("the Indices output");
    const size_t nsp = x.shape.size() - 2;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          n.Attr<std::vector<int64_t>>("kernel_shape"));
    if (kernel.size() != nsp) return L.Error("kernel_shape has the wrong rank");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, IntsOr(L, n, "strides", nsp, 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dil, IntsOr(L, n, "dilations", nsp, 1));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsOr(L, n, "pads", 2 * nsp, 0));
    KILN_ASSIGN_OR_RETURN(std::string auto_pad,
                          n.AttrOr<std::string>("auto_pad", "NOTSET"));
    KILN_ASSIGN_OR_RETURN(int64_t include_pad,
                          n.AttrOr<int64_t>("count_include_pad", 0));
    const ir::Value& out = L.OutputValue(0);
    if (out.shape.size() != x.shape.size()) return L.Error("output rank differs");
    std::vector<int64_t> pad_begin(nsp), pad_end(nsp);
    for (size_t d = 0; d < nsp; ++d) {
      if (kernel[d] <= 0 || strides[d] <= 0 || dil[d] <= 0) {
        return L.Error("kernel, strides and dilations must be positive");
      }
      const int64_t in = x.shape[d + 2], o = out.shape[d + 2];
      const int64_t ek = (kernel[d] - 1) * dil[d] + 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        const int64_t total = std::max<int64_t>(0, (o - 1) * strides[d] + ek - in);
        pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pad_end[d] = total - pad_begin[d];
      } else if (auto_pad == "VALID") {
        pad_begin[d] = pad_end[d] = 0;
      } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
        pad_begin[d] = pads[d];
        pad_end[d] = pads[nsp + d];
      } else {
        return L.Error("unknown auto_pad '", auto_pad, "'");
      }
      if (pad_begin[d] < 0 || pad_end[d] < 0) return L.Error("negative pads");
    }
    // A max pool whose every window holds an input element (dilation 1, so
    // a window is a contiguous run) needs no validity masks: a tap in the
    // padding, clamped to the border, reads an element of its own window,
    // which cannot change the max. The masks are i64 index arithmetic per
    // tap that keeps the kernel partly scalar (ResNet's stem maxpool).
    bool clamped_max = is_max;
    for (size_t d = 0; d < nsp && clamped_max; ++d) {
      clamped_max = dil[d] == 1;
      for (int64_t o = 0; o < out.shape[d + 2] && clamped_max; ++o) {
        const int64_t first = o * strides[d] - pad_begin[d];
        clamped_max = first + kernel[d] - 1 >= 0 && first <= x.shape[d + 2] - 1;
      }
    }
    const int32_t buffer = L.OutputBuffer(0);
    auto k = L.NewKernel(out.shape, kernel);
    auto& b = k->b();
    const Coords it = k->IterCoords();
    const DType dt = x.dtype;
    Coords in = {it[0], it[1]};
    if (clamped_max) {
      for (size_t d = 0; d < nsp; ++d) {
        const IndexExpr h = k->Simplify(it[d + 2] * strides[d] - pad_begin[d] + k->r(d));
        in.push_back(ir::loop::Min(ir::loop::Max(h, 0), x.shape[d + 2] - 1));
      }
      KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
      k->Store(buffer, out.shape, it, b.Reduce(ReduceKind::kMax, v));
      return absl::OkStatus();
    }
    int32_t valid = -1;
    auto conj = [&](int32_t acc, int32_t c) {
      return acc < 0 ? c : k->Bin(OpCode::kAnd, acc, c);
    };
    for (size_t d = 0; d < nsp; ++d) {
      const int64_t size = x.shape[d + 2];
      const IndexExpr h = k->Simplify(it[d + 2] * strides[d] - pad_begin[d] +
                                      k->r(d) * dil[d]);
      in.push_back(ir::loop::Min(ir::loop::Max(h, 0), size - 1));
      const int32_t hv = b.Index(h);
      valid = conj(valid, k->Bin(OpCode::kAnd,
                                 k->Bin(OpCode::kGe, hv, k->Const(DType::kI64, 0)),
                                 k->Bin(OpCode::kLt, hv, k->Const(DType::kI64, size))));
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, in));
    // How many window positions fall inside the input (and, for
    // count_include_pad, inside input + end padding) is a closed form of
    // the output position, not a reduction: per spatial dim, the taps j in
    // [0, K) with 0 <= o*s - pb + j*dil < limit are those from
    // max(0, ceil((pb - o*s) / dil)) to min(K - 1, floor((limit - 1 + pb -
    // o*s) / dil)); the count is the product over dims. It depends on the
    // output position only, so the emitter computes it once per row.
    auto window_count = [&](bool include_pad) {
      IndexExpr total = ir::loop::Const(1);
      for (size_t d = 0; d < nsp; ++d) {
        const int64_t limit = x.shape[d + 2] + (include_pad ? pad_end[d] : 0);
        const IndexExpr start = it[d + 2] * strides[d] - pad_begin[d];  // tap 0
        const IndexExpr first =
            include_pad ? ir::loop::Const(0)
                        : ir::loop::Max(ir::loop::FloorDiv(ir::loop::Const(dil[d] - 1) - start, dil[d]), 0);
        const IndexExpr last = ir::loop::Min(
            ir::loop::FloorDiv(ir::loop::Const(limit - 1) - start, dil[d]), kernel[d] - 1);
        total = total * ir::loop::Max(last - first + 1, 0);
      }
      return k->Simplify(total);
    };
    const int32_t zero = k->Const(dt, 0);
    const IndexExpr count = window_count(false);
    const bool always_valid = ir::loop::ValueRange(count, b.kernel().VarExtents()).lo >= 1;
    int32_t r;
    if (is_max) {
      r = b.Reduce(ReduceKind::kMax, k->Sel(valid, v, Lowest(*k, dt)));
      // A window entirely in the padding gives 0.
      if (!always_valid) {
        r = k->Sel(k->Bin(OpCode::kGt, b.Index(count), k->Const(DType::kI64, 0)), r, zero);
      }
    } else {
      const int32_t s = b.Reduce(ReduceKind::kSum, k->Sel(valid, v, zero));
      const IndexExpr div = include_pad != 0 ? window_count(true) : count;
      const int32_t divv = b.Index(div, dt);
      r = k->Bin(OpCode::kDiv, s, divv);
      if (ir::loop::ValueRange(div, b.kernel().VarExtents()).lo < 1) {
        r = k->Sel(k->Bin(OpCode::kGt, divv, zero), r, zero);
      }
    }
    k->Store(buffer, out.shape, it, r);
    return absl::OkStatus();
  };
}

// MaxUnpool: zeros, then X[i] at flat position I[i] of the shape MaxPool's
// input had (inferred from the attributes); an output_shape larger than that
// pads each spatial dim at its end. A runtime output_shape must equal the
// static output shape (checked per element: a mismatch is an index error).
absl::Status LowerMaxUnpool(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand ind, L.Input(1));
  const size_t rank = x.shape.size();
  if (rank < 3) return L.Error("X must have rank >= 3");
  if (ind.shape != x.shape || !ir::IsInteger(ind.dtype)) {
    return L.Error("I must be integers of X's shape");
  }
  const size_t nd = rank - 2;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, n.Attr<std::vector<int64_t>>("kernel_shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                        n.AttrOr<std::vector<int64_t>>("strides", std::vector<int64_t>(nd, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                        n.AttrOr<std::vector<int64_t>>("pads", std::vector<int64_t>(2 * nd, 0)));
  if (kernel.size() != nd || strides.size() != nd || pads.size() != 2 * nd) {
    return L.Error("kernel_shape, strides and pads do not match X's spatial rank");
  }
  Shape inferred = {x.shape[0], x.shape[1]};
  for (size_t i = 0; i < nd; ++i) {
    inferred.push_back((x.shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[nd + i]);
  }
  const Shape out_shape = L.OutputValue(0).shape;
  bool fits = out_shape.size() == inferred.size();
  for (size_t d = 0; fits && d < rank; ++d) {
    fits = d < 2 ? out_shape[d] == inferred[d] : out_shape[d] >= inferred[d];
  }
  if (!fits || (!L.HasInput(2) && out_shape != inferred)) {
    return L.Error("output shape ", ir::ShapeToString(out_shape), " does not fit the unpooled ",
                   ir::ShapeToString(inferred));
  }
  std::optional<Operand> shape_op;
  if (L.HasInput(2)) {
    if (const ir::Tensor* t = L.ConstantInput(2)) {
      if (t->ToInt64Vector() != out_shape) return L.Error("output_shape differs from the output's");
    } else {
      KILN_ASSIGN_OR_RETURN(shape_op, L.Input(2));
      if (shape_op->shape != Shape{static_cast<int64_t>(rank)} ||
          !ir::IsInteger(shape_op->dtype)) {
        return L.Error("output_shape must hold ", rank, " integers");
      }
    }
  }
  const int64_t total_out = ir::NumElements(out_shape);
  if (total_out == 0) {
    if (ir::NumElements(x.shape) > 0) return L.Error("unpools into an empty output");
    L.SetOutputConstant(0, ir::Tensor(x.dtype, out_shape));
    return absl::OkStatus();
  }
  const int32_t out = L.OutputBuffer(0);
  {
    auto z = L.NewKernel(out_shape);
    z->Store(out, out_shape, z->IterCoords(), z->Const(x.dtype, 0));
  }
  if (ir::NumElements(x.shape) == 0) return absl::OkStatus();
  const DType i64 = DType::kI64;
  auto k = L.NewKernel(x.shape);
  const Coords c = k->IterCoords();
  KILN_ASSIGN_OR_RETURN(int32_t raw, k->Load(ind, c));
  const int32_t j = ind.dtype == i64 ? raw : k->Cast(raw, i64);
  const int64_t total = ir::NumElements(inferred);
  int32_t valid = k->Bin(OpCode::kAnd, k->Bin(OpCode::kGe, j, k->Const(i64, 0)),
                         k->Bin(OpCode::kLt, j, k->Const(i64, static_cast<double>(total))));
  int32_t offset = j;
  if (out_shape != inferred) {
    const std::vector<int64_t> in_strides = Strides(inferred), out_strides = Strides(out_shape);
    offset = -1;
    for (size_t d = 0; d < rank; ++d) {
      int32_t coord = k->Bin(OpCode::kDiv, j, k->Const(i64, static_cast<double>(in_strides[d])));
      if (d > 0) coord = k->Bin(OpCode::kMod, coord, k->Const(i64, static_cast<double>(inferred[d])));
      const int32_t term = k->Bin(OpCode::kMul, coord, k->Const(i64, static_cast<double>(out_strides[d])));
      offset = offset < 0 ? term : k->Bin(OpCode::kAdd, offset, term);
    }
  }
  if (shape_op.has_value()) {
    for (size_t d = 0; d < rank; ++d) {
      KILN_ASSIGN_OR_RETURN(int32_t sv, k->Load(*shape_op, {Const(static_cast<int64_t>(d))}));
      const int32_t s = shape_op->dtype == i64 ? sv : k->Cast(sv, i64);
      valid = k->Bin(OpCode::kAnd, valid,
                     k->Bin(OpCode::kEq, s, k->Const(i64, static_cast<double>(out_shape[d]))));
    }
  }
  const int32_t nidx = k->Sel(valid, offset, k->Const(i64, static_cast<double>(total_out)));
  KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(x, c));
  k->b().StoreIndirect(out, Const(0), xv, nidx, total_out, 1);
  return absl::OkStatus();
}

// ---- Dropout, TfIdfVectorizer.

// Dropout whose training_mode is a run-time input: an identity copy that
// fails at run time when training is on with a ratio other than 0 (that
// output would be random).
absl::Status LowerDropoutWithRunTimeTraining(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand training, L.Input(2));
  if (training.dtype != DType::kBool || ir::NumElements(training.shape) != 1) {
    return L.Error("training_mode must be a bool scalar");
  }
  std::optional<Operand> ratio;
  if (L.HasInput(1)) {
    KILN_ASSIGN_OR_RETURN(Operand r, L.Input(1));
    if (!ir::IsFloat(r.dtype) || ir::NumElements(r.shape) != 1) {
      return L.Error("ratio must be a float scalar");
    }
    ratio = r;
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(x.shape) > 0) {
    auto k = L.NewKernel(x.shape);
    const Coords it = k->IterCoords();
    const Coords scalar0(training.shape.size(), Const(0));
    KILN_ASSIGN_OR_RETURN(int32_t t, k->Load(training, scalar0));
    int32_t ok = k->Un(OpCode::kNot, t);
    if (ratio.has_value()) {
      KILN_ASSIGN_OR_RETURN(int32_t r,
                            k->Load(*ratio, Coords(ratio->shape.size(), Const(0))));
      ok = k->Bin(OpCode::kOr, ok, k->Bin(OpCode::kEq, r, k->Const(ratio->dtype, 0)));
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, LoadIfValid(L, *k, x, it, ok));
    k->Store(buffer, x.shape, it, v);
  }
  if (L.HasOutput(1)) {
    const ir::Value& m = L.OutputValue(1);
    if (m.dtype != DType::kBool) return L.Error("mask must be bool");
    ir::Tensor mask(DType::kBool, m.shape);
    for (int64_t i = 0; i < mask.num_elements(); ++i) mask.data<bool>()[i] = true;
    L.SetOutputConstant(1, std::move(mask));
  }
  return absl::OkStatus();
}

absl::Status LowerDropout(Lowerer& L, const ir::Node& n) {
  if (L.HasInput(2) && L.ConstantInput(2) == nullptr) {
    return LowerDropoutWithRunTimeTraining(L, n);
  }
  if (L.HasInput(2)) {
    const ir::Tensor* training = L.ConstantInput(2);
    if (training->num_elements() != 1) {
      return L.Unimplemented("training_mode must be a constant scalar");
    }
    if (training->GetAsInt64(0) != 0) {
      return L.Unimplemented("training mode is not supported");
    }
  }
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_RETURN_IF_ERROR(L.SetOutputSame(0, x));
  if (L.HasOutput(1)) {
    ir::Tensor mask(DType::kBool, L.OutputValue(1).shape);
    for (int64_t i = 0; i < mask.num_elements(); ++i) mask.data<bool>()[i] = true;
    L.SetOutputConstant(1, std::move(mask));
  }
  return absl::OkStatus();
}

absl::Status LowerTfIdf(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if ((x.dtype != DType::kI32 && x.dtype != DType::kI64) ||
      (x.shape.size() != 1 && x.shape.size() != 2)) {
    return L.Error("X must be i32/i64 [C] or [N, C]");
  }
  if (n.HasAttr("pool_strings")) return L.Unimplemented("string pools");
  KILN_ASSIGN_OR_RETURN(int64_t min_n, n.Attr<int64_t>("min_gram_length"));
  KILN_ASSIGN_OR_RETURN(int64_t max_n, n.Attr<int64_t>("max_gram_length"));
  KILN_ASSIGN_OR_RETURN(int64_t max_skip, n.Attr<int64_t>("max_skip_count"));
  KILN_ASSIGN_OR_RETURN(std::string mode, n.Attr<std::string>("mode"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> counts,
                        n.Attr<std::vector<int64_t>>("ngram_counts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> indexes,
                        n.Attr<std::vector<int64_t>>("ngram_indexes"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pool,
                        n.Attr<std::vector<int64_t>>("pool_int64s"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> weights,
                        n.AttrOr<std::vector<float>>("weights", {}));
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") {
    return L.Error("unknown mode '", mode, "'");
  }
  if (min_n < 1 || max_n < min_n || max_n > static_cast<int64_t>(counts.size()) ||
      max_skip < 0 || max_skip > 64) {
    return L.Error("invalid gram lengths ", min_n, "..", max_n,
                   " or max_skip_count ", max_skip);
  }
  struct Gram {
    std::vector<int64_t> tokens;
    int64_t column;
    double weight;
  };
  std::vector<Gram> grams;
  for (size_t len = 1; len <= counts.size(); ++len) {
    const int64_t start = counts[len - 1];
    const int64_t end = len < counts.size() ? counts[len] : static_cast<int64_t>(pool.size());
    if (start < 0 || end < start || end > static_cast<int64_t>(pool.size()) ||
        (end - start) % static_cast<int64_t>(len) != 0) {
      return L.Error("ngram_counts do not split pool_int64s into n-grams");
    }
    for (int64_t p = start; p < end; p += len) {
      const size_t g = grams.size();
      if (g >= indexes.size()) return L.Error("ngram_indexes is too short");
      grams.push_back({std::vector<int64_t>(pool.begin() + p, pool.begin() + p + len),
                       indexes[g], weights.empty() ? 1.0 : weights[g]});
    }
  }
  if (grams.size() != indexes.size() || (!weights.empty() && weights.size() != indexes.size())) {
    return L.Error("ngram_indexes / weights do not match the pool's ", grams.size(), " n-grams");
  }
  const ir::Value& out = L.OutputValue(0);
  const bool batched = x.shape.size() == 2;
  const int64_t rows = batched ? x.shape[0] : 1, cols = x.shape.back();
  const int64_t num_out = out.shape.empty() ? 0 : out.shape.back();
  if (!ir::IsFloat(out.dtype) ||
      out.shape != (batched ? Shape{rows, num_out} : Shape{num_out})) {
    return L.Error("output must be float [", batched ? "N, " : "", "num_out]");
  }
  for (const Gram& g : grams) {
    if (g.column < 0 || g.column >= num_out) {
      return L.Error("ngram index ", g.column, " outside the output's ", num_out, " columns");
    }
  }
  const int32_t buffer = NewOutput(L, 0);
  if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
  auto k = L.NewKernel({rows}, {std::max<int64_t>(cols, 1)});
  const DType dt = out.dtype;
  const int32_t zero = k->Const(dt, 0), one = k->Const(dt, 1);
  std::vector<int32_t> column(num_out, zero);
  const int32_t start = k->b().Index(k->r(0));
  // Every match first, then the reductions (the C++ emitter expects a
  // kernel's reduction-varying ops ahead of its independent reductions).
  std::vector<std::vector<int32_t>> matches(grams.size());
  for (size_t gi = 0; gi < grams.size(); ++gi) {
    const Gram& g = grams[gi];
    const int64_t len = g.tokens.size();
    if (len < min_n || len > max_n || cols == 0) continue;
    const int64_t skips = len == 1 ? 0 : max_skip;
    for (int64_t skip = 0; skip <= skips; ++skip) {
      const int64_t span = (len - 1) * (skip + 1);
      if (span >= cols) break;
      int32_t match = k->Bin(OpCode::kLt, start, k->Const(DType::kI64, cols - span));
      for (int64_t j = 0; j < len; ++j) {
        Coords c;
        if (batched) c.push_back(k->i(0));
        c.push_back(ir::loop::Min(k->r(0) + j * (skip + 1), cols - 1));
        KILN_ASSIGN_OR_RETURN(int32_t v, k->Load(x, c));
        match = k->Bin(OpCode::kAnd, match,
                       k->Bin(OpCode::kEq, v, k->Const(x.dtype, static_cast<double>(g.tokens[j]))));
      }
      matches[gi].push_back(k->Sel(match, one, zero));
    }
  }
  for (size_t gi = 0; gi < grams.size(); ++gi) {
    if (matches[gi].empty()) continue;
    const Gram& g = grams[gi];
    int32_t count = zero;
    for (int32_t m : matches[gi]) {
      count = k->Bin(OpCode::kAdd, count, k->b().Reduce(ReduceKind::kSum, m));
    }
    int32_t value = count;
    if (mode == "IDF") value = k->Const(dt, g.weight);
    if (mode == "TFIDF") value = k->Bin(OpCode::kMul, count, k->Const(dt, g.weight));
    column[g.column] = k->Sel(k->Bin(OpCode::kGt, count, zero), value, column[g.column]);
  }
  for (int64_t o = 0; o < num_out; ++o) {
    Coords c;
    if (batched) c.push_back(k->i(0));
    c.push_back(Const(o));
    k->Store(buffer, out.shape, c, column[o]);
  }
  return absl::OkStatus();
}

// ConvInteger(x, w, x_zero_point, w_zero_point) -> i32: x and w u8/i8,
// each zero point of its tensor's type; x's per tensor, w's per tensor or
// per output channel.
absl::Status CheckConvInteger(Lowerer& L, const ir::Node&) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand w, L.Input(1));
  if (!IsQuantType(x.dtype) || !IsQuantType(w.dtype)) {
    return L.Error("x and w must be u8 or i8, got ", ir::DTypeName(x.dtype), " and ",
                   ir::DTypeName(w.dtype));
  }
  if (w.shape.empty()) return L.Error("w must have rank >= 3");
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 2, "x_zero_point", x.dtype));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 3, "w_zero_point", w.dtype, w.shape[0]));
  if (L.OutputValue(0).dtype != DType::kI32) return L.Error("output must be i32");
  return absl::OkStatus();
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
// y_zero_point, B): x, w, y u8/i8 with zero points of their types, float
// scales, w's parameters per tensor or per output channel, B i32 [M].
absl::Status CheckQLinearConv(Lowerer& L, const ir::Node&) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand w, L.Input(3));
  const DType y = L.OutputValue(0).dtype;
  if (!IsQuantType(x.dtype) || !IsQuantType(w.dtype) || !IsQuantType(y)) {
    return L.Error("x, w and y must be u8 or i8, got ", ir::DTypeName(x.dtype), ", ",
                   ir::DTypeName(w.dtype), " and ", ir::DTypeName(y));
  }
  if (w.shape.empty()) return L.Error("w must have rank >= 3");
  const int64_t m = w.shape[0];
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 1, "x_scale", DType::kInvalid));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 2, "x_zero_point", x.dtype));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 4, "w_scale", DType::kInvalid, m));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 5, "w_zero_point", w.dtype, m));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 6, "y_scale", DType::kInvalid));
  KILN_RETURN_IF_ERROR(CheckQuantInput(L, 7, "y_zero_point", y));
  if (L.HasInput(8)) {
    KILN_ASSIGN_OR_RETURN(Operand b, L.Input(8));
    if (b.dtype != DType::kI32 || b.shape != Shape{m}) {
      return L.Error("B is ", ir::DTypeName(b.dtype), ir::ShapeToString(b.shape),
                     ", expected i32[", m, "]");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> LowerConvTransposeLoopForm(Lowerer& L, const ir::Node& n) {
  const int64_t max_channels = L.options().conv_transpose_loop_max_channels;
  if (max_channels <= 0 || !L.HasInput(0) || !L.HasInput(1)) return false;
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand w, L.Input(1));
  const ir::Value& y = L.OutputValue(0);
  if (x.dtype != DType::kF32 || w.dtype != DType::kF32 || y.dtype != DType::kF32 ||
      x.shape.size() != 4 || w.shape.size() != 4 || y.shape.size() != 4) {
    return false;
  }
  const int64_t c = x.shape[1], o = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  if (w.shape[0] != c || !(o <= 4 || (c <= max_channels && o <= max_channels))) {
    return false;
  }
  auto ints_are = [&](const char* name, const std::vector<int64_t>& want,
                      bool absent_ok) -> absl::StatusOr<bool> {
    if (!n.HasAttr(name)) return absent_ok;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, n.Attr<std::vector<int64_t>>(name));
    return v == want;
  };
  KILN_ASSIGN_OR_RETURN(const int64_t group, n.AttrOr<int64_t>("group", 1));
  KILN_ASSIGN_OR_RETURN(const std::string auto_pad,
                        n.AttrOr<std::string>("auto_pad", "NOTSET"));
  if (group != 1 || auto_pad != "NOTSET" || n.HasAttr("output_shape")) return false;
  for (const auto& [name, want, absent_ok] :
       std::vector<std::tuple<const char*, std::vector<int64_t>, bool>>{
           {"strides", {kh, kw}, false},
           {"kernel_shape", {kh, kw}, true},
           {"pads", {0, 0, 0, 0}, true},
           {"dilations", {1, 1}, true},
           {"output_padding", {0, 0}, true}}) {
    KILN_ASSIGN_OR_RETURN(const bool ok, ints_are(name, want, absent_ok));
    if (!ok) return false;
  }
  const Shape out = {x.shape[0], o, x.shape[2] * kh, x.shape[3] * kw};
  if (y.shape != out) return false;
  // kiln.FusedConvTranspose: its bias is input 2; its post-ops relu,
  // sigmoid, or sum (the fused Add of a same-shaped operand at scale 1).
  struct PostOp {
    std::string kind;
    std::optional<Operand> addend;  // sum
  };
  std::vector<PostOp> post_ops;
  if (n.domain == ir::loop::kKilnDomain) {
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> kinds,
                          n.AttrOr<std::vector<std::string>>("post_ops", {}));
    KILN_ASSIGN_OR_RETURN(std::vector<float> alphas,
                          n.AttrOr<std::vector<float>>("post_op_alphas", {}));
    KILN_ASSIGN_OR_RETURN(std::vector<float> betas,
                          n.AttrOr<std::vector<float>>("post_op_betas", {}));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> inputs,
                          n.AttrOr<std::vector<int64_t>>("post_op_inputs", {}));
    std::vector<bool> input_used(n.inputs.size(), false);
    for (size_t i = 0; i < kinds.size(); ++i) {
      PostOp p{kinds[i], std::nullopt};
      if (p.kind == "sum") {
        const int64_t in = i < inputs.size() ? inputs[i] : -1;
        if (in < 3 || (i < alphas.size() && alphas[i] != 1.0) ||
            (i < betas.size() && betas[i] != 0.0) || !L.HasInput(static_cast<int>(in))) {
          return false;
        }
        KILN_ASSIGN_OR_RETURN(p.addend, L.Input(static_cast<int>(in)));
        if (p.addend->dtype != DType::kF32 ||
            p.addend->shape != Shape{x.shape[0], o, x.shape[2] * kh, x.shape[3] * kw}) {
          return false;
        }
        input_used[in] = true;
      } else if (p.kind != "relu" && p.kind != "sigmoid") {
        return false;
      }
      post_ops.push_back(std::move(p));
    }
    for (int i = 3; i < static_cast<int>(n.inputs.size()); ++i) {
      if (L.HasInput(i) && !input_used[i]) return false;
    }
  }
  std::optional<Operand> bias;
  if (L.HasInput(2)) {
    KILN_ASSIGN_OR_RETURN(bias, L.Input(2));
    if (bias->dtype != DType::kF32 || bias->shape != Shape{o}) return false;
  }
  // y[n, o, h*kh + i, v*kw + j] = b[o] + sum_c x[n, c, h, v] * w[c, o, i, j].
  // Two kernels, so that the reduction vectorizes along v with contiguous
  // loads and stores: the sums into [N, O, kh, kw, H, W], then a copy that
  // interleaves them into the output's [N, O, H, kh, W, kw] view.
  const int64_t n_ = x.shape[0], h = x.shape[2], wd = x.shape[3];
  const Shape sums_shape = {n_, o, kh, kw, h, wd};
  KILN_ASSIGN_OR_RETURN(const int32_t sums, ScratchBuffer(L, DType::kF32, sums_shape));
  auto k = L.NewKernel(sums_shape, {c});
  KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(x, {k->i(0), k->r(0), k->i(4), k->i(5)}));
  KILN_ASSIGN_OR_RETURN(int32_t wv, k->Load(w, {k->r(0), k->i(1), k->i(2), k->i(3)}));
  int32_t v = k->b().Reduce(ReduceKind::kSum, k->Bin(OpCode::kMul, xv, wv));
  if (bias) {
    KILN_ASSIGN_OR_RETURN(int32_t bv, k->Load(*bias, {k->i(1)}));
    v = k->Bin(OpCode::kAdd, v, bv);
  }
  // Post-ops before the first sum apply to the sums; a sum's operand is in
  // the output's layout, so it and what follows apply in the copy below.
  const auto first_sum = std::find_if(post_ops.begin(), post_ops.end(),
                                      [](const PostOp& p) { return p.addend.has_value(); });
  for (auto p = post_ops.begin(); p != first_sum; ++p) {
    v = p->kind == "relu" ? k->Bin(OpCode::kMax, v, k->Const(DType::kF32, 0))
                          : k->b().Unary(OpCode::kSigmoid, v);
  }
  k->Store(sums, sums_shape, k->IterCoords(), v);
  if (n.domain == ir::loop::kKilnDomain) {
    // A fused node's kernel computes the nodes it replaced, as its call would.
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> fused,
                          n.AttrOr<std::vector<std::string>>("fused_nodes", {}));
    const bool named = std::none_of(fused.begin(), fused.end(),
                                    [](const std::string& f) { return f.empty(); });
    if (!fused.empty() && named) k->b().kernel().ops = std::move(fused);
  }
  const Shape view = {n_, o, h, kh, wd, kw};
  const int32_t buffer = L.OutputBuffer(0);
  auto copy = L.NewKernel(view);
  int32_t sv = copy->b().Load(
      sums, RowMajor(*copy, sums_shape,
                     {copy->i(0), copy->i(1), copy->i(3), copy->i(5), copy->i(2), copy->i(4)}));
  const Coords at_output = {copy->i(0), copy->i(1), copy->Simplify(copy->i(2) * kh + copy->i(3)),
                            copy->Simplify(copy->i(4) * kw + copy->i(5))};
  for (auto p = first_sum; p != post_ops.end(); ++p) {
    if (p->addend) {
      KILN_ASSIGN_OR_RETURN(int32_t r, copy->LoadBroadcast(*p->addend, at_output));
      sv = copy->Bin(OpCode::kAdd, sv, r);
    } else {
      sv = p->kind == "relu" ? copy->Bin(OpCode::kMax, sv, copy->Const(DType::kF32, 0))
                             : copy->b().Unary(OpCode::kSigmoid, sv);
    }
  }
  copy->Store(buffer, view, copy->IterCoords(), sv);
  return true;
}

void AddNnLowerings(LowerTable& t) {
  t.AddExternCall("Conv");
  t.AddExternCallWithLoopForm("ConvTranspose", LowerConvTransposeLoopForm);
  t.AddExternCall("ConvInteger", CheckConvInteger);
  t.AddExternCall("QLinearConv", CheckQLinearConv);
  t.Add("BatchNormalization", LowerBatchNorm);
  t.Add("LayerNormalization", LowerLayerNorm);
  t.Add("InstanceNormalization", LowerInstanceNorm);
  t.Add("MeanVarianceNormalization", LowerMvn);
  t.Add("LRN", LowerLrn);
  t.Add("GlobalAveragePool", MakeGlobalPool(false));
  t.Add("GlobalMaxPool", MakeGlobalPool(true));
  t.Add("MaxPool", MakePool(true));
  t.Add("AveragePool", MakePool(false));
  t.Add("MaxUnpool", LowerMaxUnpool);
  t.Add("Shrink", WithAttrs({{"lambd", 0.5f}, {"bias", 0.0f}},
                          [](Emitter& k, int32_t x, DType dt,
                             const std::vector<float>& a) {
    const int32_t lam = k.Const(dt, a[0]), bias = k.Const(dt, a[1]);
    const int32_t nlam = k.Const(dt, -a[0]);
    const int32_t lo = k.Bin(OpCode::kLt, x, nlam);
    const int32_t hi = k.Bin(OpCode::kGt, x, lam);
    const int32_t zero = k.Const(dt, 0);
    return k.Sel(lo, k.Bin(OpCode::kAdd, x, bias),
                 k.Sel(hi, k.Bin(OpCode::kSub, x, bias), zero));
  }));
  t.Add("Dropout", LowerDropout);
  t.Add("Flatten", ReshapeView);
  t.Add("TfIdfVectorizer", LowerTfIdf);
}

}  // namespace kiln::lowering::internal
