// Extensions of lowerings other families register (Dropout with a run-time
// training_mode, ReduceSum with run-time axes, MaxPool's Indices output,
// BatchNormalization in training mode, Pad with run-time pads): each handles
// what its predecessor refuses and delegates the rest. Plus explicit
// refusals for data-dependent shapes and scatters.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/status_macros.h"
#include "lowering/lowerer.h"
#include "lowering/ops_more_util.h"

namespace kiln::lowering::internal {
namespace {

using ir::loop::Const;

// Dropout whose training_mode is a run-time input: an identity copy that
// fails at run time when training is on with a ratio other than 0 (that
// output would be random).
LowerFn DropoutWithRunTimeTraining(LowerFn prev) {
  return [prev](Lowerer& L, const ir::Node& n) -> absl::Status {
    if (!L.HasInput(2) || L.ConstantInput(2) != nullptr) return prev(L, n);
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
  };
}

// ReduceSum whose axes are a run-time input (static shapes): the axes
// follow from the input and output shapes when every reading of them
// reduces the same non-unit dims; the kernel checks the given axes agree.
LowerFn ReduceSumWithRunTimeAxes(LowerFn prev) {
  return [prev](Lowerer& L, const ir::Node& n) -> absl::Status {
    if (L.opset() < 13 || !L.HasInput(1) || L.ConstantInput(1) != nullptr) {
      return prev(L, n);
    }
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    KILN_ASSIGN_OR_RETURN(Operand axes, L.Input(1));
    KILN_ASSIGN_OR_RETURN(int64_t keepdims, n.AttrOr<int64_t>("keepdims", 1));
    KILN_ASSIGN_OR_RETURN(int64_t noop, n.AttrOr<int64_t>("noop_with_empty_axes", 0));
    if (!ir::IsInteger(axes.dtype) || axes.shape.size() != 1) {
      return L.Error("axes must be a 1-D integer tensor");
    }
    if (x.dtype == DType::kBool) return L.Error("does not accept bool inputs");
    const int64_t rank = x.shape.size(), count = axes.shape[0];
    const ir::Value& out = L.OutputValue(0);
    // Every set of `count` dims whose reduction gives the output shape.
    std::vector<std::vector<int64_t>> candidates;
    if (count == 0) {
      if (noop != 0) {
        L.SetOutputView(0, x);
        return absl::OkStatus();
      }
      std::vector<int64_t> all;
      for (int64_t d = 0; d < rank; ++d) all.push_back(d);
      candidates.push_back(all);
    } else if (rank <= 16) {
      for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
        if (__builtin_popcount(mask) != count) continue;
        Shape s;
        std::vector<int64_t> set;
        for (int64_t d = 0; d < rank; ++d) {
          const bool red = (mask >> d) & 1;
          if (red) set.push_back(d);
          if (!red) s.push_back(x.shape[d]);
          if (red && keepdims != 0) s.push_back(1);
        }
        if (s == out.shape) candidates.push_back(set);
      }
    }
    if (candidates.empty()) {
      return L.Error("no ", count, " axes reduce ", ir::ShapeToString(x.shape),
                     " to ", ir::ShapeToString(out.shape));
    }
    // The dims of size > 1 a candidate reduces; all must agree.
    auto essential = [&](const std::vector<int64_t>& set) {
      std::vector<int64_t> e;
      for (int64_t d : set) {
        if (x.shape[d] != 1) e.push_back(d);
      }
      return e;
    };
    const std::vector<int64_t> must = essential(candidates[0]);
    for (const auto& c : candidates) {
      if (essential(c) != must) {
        return L.Unimplemented("axes given at run time are ambiguous for ",
                               ir::ShapeToString(x.shape), " -> ",
                               ir::ShapeToString(out.shape));
      }
    }
    const std::vector<int64_t>& chosen = candidates[0];
    std::vector<int64_t> red;
    for (int64_t d : must) red.push_back(x.shape[d]);
    const int32_t buffer = NewOutput(L, 0);
    if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
    auto k = L.NewKernel(out.shape, red);
    // The given axes (normalized) must be distinct, each a reduced dim or a
    // unit dim, and cover every reduced dim of size > 1.
    std::vector<int32_t> given;
    int32_t ok = k->Const(DType::kBool, 1);
    for (int64_t j = 0; j < count; ++j) {
      KILN_ASSIGN_OR_RETURN(int32_t a, k->Load(axes, {Const(j)}));
      if (k->DTypeOf(a) != DType::kI64) a = k->Cast(a, DType::kI64);
      a = k->Sel(k->Bin(OpCode::kLt, a, k->Const(DType::kI64, 0)),
                 k->Bin(OpCode::kAdd, a, k->Const(DType::kI64, rank)), a);
      int32_t allowed = k->Const(DType::kBool, 0);
      for (int64_t d = 0; d < rank; ++d) {
        const bool may = x.shape[d] == 1 ||
                         std::find(must.begin(), must.end(), d) != must.end();
        if (!may) continue;
        allowed = k->Bin(OpCode::kOr, allowed,
                         k->Bin(OpCode::kEq, a, k->Const(DType::kI64, d)));
      }
      ok = k->Bin(OpCode::kAnd, ok, allowed);
      for (int32_t prev_axis : given) {
        ok = k->Bin(OpCode::kAnd, ok, k->Bin(OpCode::kNe, a, prev_axis));
      }
      given.push_back(a);
    }
    for (int64_t d : must) {
      if (count == 0) break;  // no axes: every dim, nothing to check
      int32_t seen = k->Const(DType::kBool, 0);
      for (int32_t a : given) {
        seen = k->Bin(OpCode::kOr, seen, k->Bin(OpCode::kEq, a, k->Const(DType::kI64, d)));
      }
      ok = k->Bin(OpCode::kAnd, ok, seen);
    }
    Coords in(rank);
    int next_i = 0, next_r = 0;
    for (int64_t d = 0; d < rank; ++d) {
      const bool reduced = std::find(chosen.begin(), chosen.end(), d) != chosen.end();
      const bool is_must = std::find(must.begin(), must.end(), d) != must.end();
      if (reduced) {
        in[d] = is_must ? k->r(next_r++) : Const(0);
        if (keepdims != 0) ++next_i;
      } else {
        in[d] = k->i(next_i++);
      }
    }
    KILN_ASSIGN_OR_RETURN(int32_t v, LoadIfValid(L, *k, x, in, ok));
    k->Store(buffer, out.shape, k->IterCoords(), k->b().Reduce(ReduceKind::kSum, v));
    return absl::OkStatus();
  };
}

// MaxPool's Indices output: the window's first maximum (an argmax over the
// valid positions), as a flat index into X (row-major, or column-major over
// the spatial dims with storage_order=1).
LowerFn MaxPoolWithIndices(LowerFn prev) {
  return [prev](Lowerer& L, const ir::Node& n) -> absl::Status {
    if (!L.HasOutput(1)) return prev(L, n);
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
  };
}

// BatchNormalization with training_mode=1 (opset >= 14): Y normalized with
// the batch's statistics (population variance, Welford), and the running
// statistics input * momentum + batch * (1 - momentum).
LowerFn BatchNormTraining(LowerFn prev) {
  return [prev](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(int64_t training, n.AttrOr<int64_t>("training_mode", 0));
    if (training == 0 || L.opset() < 14) return prev(L, n);
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
  };
}

// Helpers for kernels that compute a flat source offset from run-time
// parameters: small i64 arithmetic on kernel values.
struct I64Ops {
  Emitter& k;
  int32_t C(int64_t v) { return k.Const(DType::kI64, v); }
  int32_t Add(int32_t a, int32_t b) { return k.Bin(OpCode::kAdd, a, b); }
  int32_t Sub(int32_t a, int32_t b) { return k.Bin(OpCode::kSub, a, b); }
  int32_t Mul(int32_t a, int32_t b) { return k.Bin(OpCode::kMul, a, b); }
  int32_t Lt(int32_t a, int32_t b) { return k.Bin(OpCode::kLt, a, b); }
  int32_t Eq(int32_t a, int32_t b) { return k.Bin(OpCode::kEq, a, b); }
  int32_t And(int32_t a, int32_t b) { return k.Bin(OpCode::kAnd, a, b); }
  int32_t Sel(int32_t c, int32_t a, int32_t b) { return k.Sel(c, a, b); }
  int32_t Clamp(int32_t v, int64_t lo, int64_t hi) {
    return k.Bin(OpCode::kMin, k.Bin(OpCode::kMax, v, C(lo)), C(hi));
  }
  // v + dim when v < 0.
  int32_t Wrap(int32_t v, int64_t dim) { return Sel(Lt(v, C(0)), Add(v, C(dim)), v); }
  int32_t Load(const Operand& op, int64_t j) {
    absl::StatusOr<int32_t> v = k.Load(op, {Const(j)});
    // Operands here are 1-D parameters that exist (checked by the caller).
    int32_t r = v.ok() ? *v : C(0);
    return k.DTypeOf(r) == DType::kI64 ? r : k.Cast(r, DType::kI64);
  }
};

absl::StatusOr<Operand> IntVectorInput(Lowerer& L, int i, const char* what) {
  KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
  if (!ir::IsInteger(op.dtype) || op.shape.size() != 1) {
    return L.Error(what, " must be a 1-D integer tensor");
  }
  if (!op.splat.has_value()) KILN_RETURN_IF_ERROR(L.BufferOf(op.root).status());
  return op;
}

// Pad whose pads are a run-time input (static output shape; opset >= 11):
// source coordinates by mode from the run-time begin pads; the kernel checks
// that the pads give the declared shape.
LowerFn PadWithRunTimePads(LowerFn prev) {
  return [prev](Lowerer& L, const ir::Node& n) -> absl::Status {
    if (L.opset() < 11 || !L.HasInput(1) || L.ConstantInput(1) != nullptr) {
      return prev(L, n);
    }
    if (L.HasInput(3)) return L.Unimplemented("axes with run-time pads");
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    KILN_ASSIGN_OR_RETURN(Operand pads, IntVectorInput(L, 1, "pads"));
    KILN_ASSIGN_OR_RETURN(std::string mode, n.AttrOr<std::string>("mode", "constant"));
    if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap") {
      return L.Error("unknown mode '", mode, "'");
    }
    const ir::Value& out = L.OutputValue(0);
    const int64_t rank = x.shape.size(), total = ir::NumElements(x.shape);
    if (pads.shape[0] != 2 * rank || static_cast<int64_t>(out.shape.size()) != rank) {
      return L.Error("pads must have ", 2 * rank, " values");
    }
    std::optional<Operand> fill;
    if (L.HasInput(2) && mode == "constant") {
      KILN_ASSIGN_OR_RETURN(Operand f, L.Input(2));
      if (f.dtype != x.dtype || ir::NumElements(f.shape) != 1) {
        return L.Error("constant_value must be one element of the data's type");
      }
      fill = f;
    }
    const int32_t buffer = NewOutput(L, 0);
    if (ir::NumElements(out.shape) == 0) return absl::OkStatus();
    if (total == 0) return L.Unimplemented("padding an empty tensor with run-time pads");
    KILN_ASSIGN_OR_RETURN(int32_t src, L.Materialize(x));
    auto k = L.NewKernel(out.shape);
    I64Ops o{*k};
    int32_t ok = k->Const(DType::kBool, 1), inside = k->Const(DType::kBool, 1);
    int32_t flat = o.C(0);
    int64_t stride = total;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t dim = x.shape[d];
      stride /= dim;
      const int32_t b = o.Load(pads, d), e = o.Load(pads, d + rank);
      ok = o.And(ok, o.Eq(o.Add(b, e), o.C(out.shape[d] - dim)));
      int32_t j = o.Sub(k->b().Index(k->i(d)), b);
      if (mode == "constant") {
        inside = o.And(inside, o.And(k->Bin(OpCode::kGe, j, o.C(0)), o.Lt(j, o.C(dim))));
        j = o.Clamp(j, 0, dim - 1);
      } else if (mode == "edge") {
        j = o.Clamp(j, 0, dim - 1);
      } else if (mode == "wrap") {
        j = k->Bin(OpCode::kMod, j, o.C(dim));
      } else if (dim == 1) {
        j = o.C(0);
      } else {
        const int64_t period = 2 * (dim - 1);
        j = k->Bin(OpCode::kMod, j, o.C(period));
        j = o.Sel(o.Lt(j, o.C(dim)), j, o.Sub(o.C(period), j));
      }
      flat = o.Add(flat, o.Mul(j, o.C(stride)));
    }
    const int32_t idx = o.Sel(ok, flat, o.C(total));
    int32_t v = k->b().LoadIndirect(src, Const(0), idx, total, 1);
    if (mode == "constant") {
      int32_t c = k->Const(x.dtype, 0);
      if (fill.has_value()) {
        KILN_ASSIGN_OR_RETURN(c, k->Load(*fill, Coords(fill->shape.size(), Const(0))));
      }
      v = k->Sel(inside, v, c);
    }
    k->Store(buffer, out.shape, k->IterCoords(), v);
    return absl::OkStatus();
  };
}

// Ops that stay refused, with the reason instead of "no lowering".
LowerFn Refuse(std::string why) {
  return [why](Lowerer& L, const ir::Node&) -> absl::Status {
    return L.Unimplemented(why);
  };
}

}  // namespace

void AddExtendedLowerings(LowerTable& t) {
  const std::string dynamic =
      "the output shape depends on the input values; kiln compiles static "
      "shapes only";
  for (const char* op : {"NonMaxSuppression", "NonZero", "Unique", "Compress"}) {
    if (t.count(op) == 0) t[op] = Refuse(dynamic);
  }
  const std::string scatter =
      "needs a data-dependent store, which the loop IR does not have yet "
      "(a checked store_indirect, the counterpart of load_indirect)";
  for (const char* op : {"ScatterElements", "ScatterND", "Scatter", "MaxUnpool"}) {
    if (t.count(op) == 0) t[op] = Refuse(scatter);
  }
  const std::pair<const char*, LowerFn (*)(LowerFn)> extensions[] = {
      {"Dropout", DropoutWithRunTimeTraining},
      {"ReduceSum", ReduceSumWithRunTimeAxes},
      {"MaxPool", MaxPoolWithIndices},
      {"BatchNormalization", BatchNormTraining},
      {"Pad", PadWithRunTimePads},
  };
  for (const auto& [op, extend] : extensions) {
    auto it = t.find(op);
    if (it != t.end()) it->second = extend(it->second);
  }
}

}  // namespace kiln::lowering::internal
