// Lowerings of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (all
// reductions, class weights, ignore_index, any number of spatial dims) to
// loop kernels: the class is read with a checked load_indirect, the
// log-softmax is a max/sum-exp reduction over the class axis; plus the
// helpers of ops_more_util.h.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/status_macros.h"
#include "lowering/lowerer.h"
#include "lowering/ops_more_util.h"

namespace kiln::lowering::internal {

absl::StatusOr<int32_t> LoadIndirectAlong(Lowerer& L, Emitter& k,
                                          const Operand& data, Coords dc,
                                          int64_t axis,
                                          const std::vector<int64_t>& extents,
                                          int32_t n) {
  const int64_t dim = data.shape[axis];
  if (dim <= 0) {
    return L.Error("reads by index from an empty axis of ",
                   ir::ShapeToString(data.shape));
  }
  if (k.DTypeOf(n) != DType::kI64) n = k.Cast(n, DType::kI64);
  dc[axis] = ir::loop::Const(0);
  const int placeholder = static_cast<int>(extents.size());
  std::vector<int64_t> with_axis = extents;
  with_axis.push_back(dim);
  std::optional<int64_t> stride;
  int32_t buffer = -1;
  IndexExpr base;
  if (data.splat.has_value()) {
    // Still a checked read, of a buffer holding the splat.
    KILN_ASSIGN_OR_RETURN(buffer, L.Materialize(data));
  } else {
    Coords pc = dc;
    pc[axis] = ir::loop::Var(placeholder);
    stride = ir::loop::StrideOf(ir::loop::Simplify(data.index(pc), with_axis),
                                placeholder);
    if (stride.has_value()) {
      KILN_ASSIGN_OR_RETURN(buffer, L.BufferOf(data.root));
      base = k.Simplify(data.index(dc));
    } else {
      KILN_ASSIGN_OR_RETURN(buffer, L.Materialize(data));
    }
  }
  if (!stride.has_value()) {
    base = RowMajor(k, data.shape, dc);
    int64_t s = 1;
    for (size_t d = data.shape.size(); d-- > static_cast<size_t>(axis) + 1;) {
      s *= data.shape[d];
    }
    stride = s;
  }
  return k.b().LoadIndirect(buffer, base, n, dim, *stride);
}

int32_t NonNegativeIndex(Emitter& k, int32_t n, int64_t dim) {
  if (k.DTypeOf(n) != DType::kI64) n = k.Cast(n, DType::kI64);
  const int32_t bad =
      k.Bin(OpCode::kOr, k.Bin(OpCode::kLt, n, k.Const(DType::kI64, 0)),
            k.Bin(OpCode::kGe, n, k.Const(DType::kI64, dim)));
  return k.Sel(bad, k.Const(DType::kI64, dim), n);
}

absl::StatusOr<int32_t> ScratchBuffer(Lowerer& L, DType dtype,
                                      const Shape& shape) {
  Operand zero;
  zero.dtype = dtype;
  zero.shape = shape;
  zero.splat = 0.0;
  zero.index = [shape](const Coords& c) { return LinearIndex(shape, c); };
  return L.Materialize(zero);
}

absl::StatusOr<int32_t> LoadIfValid(Lowerer& L, Emitter& k, const Operand& op,
                                    const Coords& coords, int32_t ok) {
  KILN_ASSIGN_OR_RETURN(int32_t buffer, op.splat.has_value() ? L.Materialize(op)
                                                             : L.BufferOf(op.root));
  const IndexExpr index = op.splat.has_value() ? RowMajor(k, op.shape, coords)
                                               : k.Simplify(op.index(coords));
  const int32_t n = k.Sel(ok, k.Const(DType::kI64, 0), k.Const(DType::kI64, 1));
  return k.b().LoadIndirect(buffer, index, n, /*extent=*/1, /*stride=*/0);
}

int32_t NewOutput(Lowerer& L, int i) {
  const int32_t buffer = L.OutputBuffer(i);
  const Shape shape = L.OutputValue(i).shape;
  if (ir::NumElements(shape) == 0) {
    auto k = L.NewKernel(shape);
    k->Store(buffer, shape, k->IterCoords(), k->Const(L.OutputValue(i).dtype, 0));
  }
  return buffer;
}

IndexExpr RowMajor(Emitter& k, const Shape& shape, const Coords& coords) {
  return k.Simplify(LinearIndex(shape, coords));
}

namespace {

enum class Reduction { kNone, kSum, kMean };

// What both losses share: attributes, the target and the optional weight.
struct LossSpec {
  Operand x;       // scores (SCE) or log-probabilities (NLL): [N, C, d...]
  Operand target;  // [N, d...]
  std::optional<Operand> weight;  // [C]
  Reduction reduction = Reduction::kMean;
  std::optional<int64_t> ignore_index;
  int64_t classes = 0;
  Shape target_shape;
};

absl::StatusOr<LossSpec> ReadLossSpec(Lowerer& L, const ir::Node& n) {
  LossSpec s;
  KILN_ASSIGN_OR_RETURN(s.x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(s.target, L.Input(1));
  if (!ir::IsFloat(s.x.dtype)) return L.Error("input must be a float tensor");
  if (s.x.shape.size() < 2) {
    return L.Error("input must have rank >= 2 (N, C, ...), got ",
                   ir::ShapeToString(s.x.shape));
  }
  if (!ir::IsInteger(s.target.dtype)) return L.Error("target must be integers");
  s.classes = s.x.shape[1];
  s.target_shape = s.x.shape;
  s.target_shape.erase(s.target_shape.begin() + 1);
  if (s.target.shape != s.target_shape) {
    return L.Error("target has shape ", ir::ShapeToString(s.target.shape),
                   ", expected ", ir::ShapeToString(s.target_shape));
  }
  if (L.HasInput(2)) {
    KILN_ASSIGN_OR_RETURN(Operand w, L.Input(2));
    if (w.shape != Shape{s.classes} || w.dtype != s.x.dtype) {
      return L.Error("weight is ", ir::DTypeName(w.dtype),
                     ir::ShapeToString(w.shape), ", expected ",
                     ir::DTypeName(s.x.dtype), "[", s.classes, "]");
    }
    s.weight = w;
  }
  KILN_ASSIGN_OR_RETURN(std::string reduction,
                        n.AttrOr<std::string>("reduction", "mean"));
  if (reduction == "none") {
    s.reduction = Reduction::kNone;
  } else if (reduction == "sum") {
    s.reduction = Reduction::kSum;
  } else if (reduction == "mean") {
    s.reduction = Reduction::kMean;
  } else {
    return L.Error("unknown reduction '", reduction, "'");
  }
  if (n.HasAttr("ignore_index")) {
    KILN_ASSIGN_OR_RETURN(int64_t ii, n.Attr<int64_t>("ignore_index"));
    s.ignore_index = ii;
  }
  const ir::Value& out = L.OutputValue(0);
  const Shape want = s.reduction == Reduction::kNone ? s.target_shape : Shape{};
  if (out.shape != want || out.dtype != s.x.dtype) {
    return L.Error("output is ", ir::DTypeName(out.dtype),
                   ir::ShapeToString(out.shape), ", expected ",
                   ir::DTypeName(s.x.dtype), ir::ShapeToString(want));
  }
  if (s.classes == 0 && ir::NumElements(s.target_shape) > 0) {
    return L.Error("has no classes (C = 0)");
  }
  return s;
}

// Per target element at coordinates `tc`: whether it is ignored, the class
// to read (0 when ignored; an invalid class fails the read) and its weight
// (0 when ignored).
struct TargetRead {
  int32_t ignored = -1;  // bool, or -1 without ignore_index
  int32_t cls = -1;      // i64
  int32_t weight = -1;   // x dtype
};

absl::StatusOr<TargetRead> ReadTarget(Lowerer& L, Emitter& k, const LossSpec& s,
                                      const Coords& tc,
                                      const std::vector<int64_t>& extents,
                                      bool need_class = true) {
  TargetRead t;
  const DType dt = s.x.dtype;
  t.weight = k.Const(dt, 1);
  // No op is created that nothing uses: the C++ emitter places an unused
  // reduction-varying op outside the reduction loop.
  if (!need_class && !s.weight.has_value() && !s.ignore_index.has_value()) return t;
  KILN_ASSIGN_OR_RETURN(int32_t raw, k.Load(s.target, tc));
  if (k.DTypeOf(raw) != DType::kI64) raw = k.Cast(raw, DType::kI64);
  if (s.ignore_index.has_value()) {
    t.ignored = k.Bin(OpCode::kEq, raw, k.Const(DType::kI64, *s.ignore_index));
  }
  if (need_class || s.weight.has_value()) {
    int32_t cls = NonNegativeIndex(k, raw, s.classes);
    if (t.ignored >= 0) cls = k.Sel(t.ignored, k.Const(DType::kI64, 0), cls);
    t.cls = cls;
  }
  if (s.weight.has_value()) {
    KILN_ASSIGN_OR_RETURN(t.weight, LoadIndirectAlong(L, k, *s.weight, {ir::loop::Const(0)},
                                                      0, extents, t.cls));
  }
  if (t.ignored >= 0) t.weight = k.Sel(t.ignored, k.Const(dt, 0), t.weight);
  return t;
}

// x coordinates [n, class, d...] of target coordinates [n, d...].
Coords ScoreCoords(const Coords& tc, IndexExpr cls) {
  Coords c = tc;
  c.insert(c.begin() + 1, std::move(cls));
  return c;
}

// Per-element loss and weight at target coordinates (kernel values).
struct LossTerm {
  int32_t loss = -1;
  int32_t weight = -1;
};
using LossElement = std::function<absl::StatusOr<LossTerm>(Emitter&, const Coords&)>;

// Stores the reduced loss: sum over the target space of the per-element
// loss, divided by the summed weights for "mean". Both terms are read before
// either Reduce (the C++ emitter expects a kernel's reduction-varying ops
// ahead of its reductions unless they depend on an earlier one).
absl::Status StoreReducedLoss(Lowerer& L, const LossSpec& s, int32_t out_buffer,
                              const LossElement& element) {
  const std::vector<int64_t> red(s.target_shape.begin(), s.target_shape.end());
  auto k = L.NewKernel({}, red);
  Coords tc;
  for (size_t d = 0; d < red.size(); ++d) tc.push_back(k->r(d));
  KILN_ASSIGN_OR_RETURN(LossTerm term, element(*k, tc));
  int32_t total = k->b().Reduce(ReduceKind::kSum, term.loss);
  if (s.reduction == Reduction::kMean) {
    const int32_t wsum = k->b().Reduce(ReduceKind::kSum, term.weight);
    total = k->Bin(OpCode::kDiv, total, wsum);
  }
  k->Store(out_buffer, {}, {}, total);
  return absl::OkStatus();
}

// loss[n, d...] = -logp[n, t, d...] * w[t], 0 when t is ignored.
absl::Status LowerNll(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(LossSpec s, ReadLossSpec(L, n));
  auto element = [&](Emitter& k, const Coords& tc,
                     const std::vector<int64_t>& extents) -> absl::StatusOr<int32_t> {
    KILN_ASSIGN_OR_RETURN(TargetRead t, ReadTarget(L, k, s, tc, extents));
    KILN_ASSIGN_OR_RETURN(int32_t xv, LoadIndirectAlong(L, k, s.x, ScoreCoords(tc, ir::loop::Const(0)),
                                                        1, extents, t.cls));
    return k.Un(OpCode::kNeg, k.Bin(OpCode::kMul, xv, t.weight));
  };
  const int32_t out = NewOutput(L, 0);
  if (s.reduction == Reduction::kNone) {
    auto k = L.NewKernel(s.target_shape);
    const std::vector<int64_t> extents(s.target_shape.begin(), s.target_shape.end());
    const Coords tc = k->IterCoords();
    KILN_ASSIGN_OR_RETURN(int32_t loss, element(*k, tc, extents));
    k->Store(out, s.target_shape, tc, loss);
    return absl::OkStatus();
  }
  const std::vector<int64_t> red(s.target_shape.begin(), s.target_shape.end());
  return StoreReducedLoss(L, s, out, [&](Emitter& k, const Coords& tc) -> absl::StatusOr<LossTerm> {
    KILN_ASSIGN_OR_RETURN(TargetRead t, ReadTarget(L, k, s, tc, red));
    KILN_ASSIGN_OR_RETURN(int32_t xv, LoadIndirectAlong(L, k, s.x, ScoreCoords(tc, ir::loop::Const(0)),
                                                        1, red, t.cls));
    return LossTerm{k.Un(OpCode::kNeg, k.Bin(OpCode::kMul, xv, t.weight)), t.weight};
  });
}

// max and log(sum(exp(x - max))) over the class axis of x at target
// coordinates `tc` (the kernel's single reduction variable walks the class).
void LogSumExp(Emitter& k, const LossSpec& s, const Coords& tc, int32_t* max,
               int32_t* log_sum, absl::Status* status) {
  const Coords rc = ScoreCoords(tc, k.r(0));
  absl::StatusOr<int32_t> v = k.Load(s.x, rc);
  absl::StatusOr<int32_t> v2 = k.Load(s.x, rc);
  if (!v.ok() || !v2.ok()) {
    *status = v.ok() ? v2.status() : v.status();
    return;
  }
  *max = k.b().Reduce(ReduceKind::kMax, *v);
  const int32_t sum = k.b().Reduce(
      ReduceKind::kSum, k.Un(OpCode::kExp, k.Bin(OpCode::kSub, *v2, *max)));
  *log_sum = k.Un(OpCode::kLog, sum);
}

// SoftmaxCrossEntropyLoss: NLL of log_softmax(x) over the class axis. The
// per-element loss is one kernel with the class reduction; "sum"/"mean"
// reduce it from a scratch buffer; log_prob (output 1) is its own kernel.
absl::Status LowerSce(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(LossSpec s, ReadLossSpec(L, n));
  const DType dt = s.x.dtype;
  if (L.HasOutput(1)) {
    const ir::Value& lp = L.OutputValue(1);
    if (lp.shape != s.x.shape || lp.dtype != dt) {
      return L.Error("log_prob output is ", ir::DTypeName(lp.dtype),
                     ir::ShapeToString(lp.shape), ", expected ",
                     ir::DTypeName(dt), ir::ShapeToString(s.x.shape));
    }
  }
  const int32_t out = NewOutput(L, 0);
  int32_t per_element = out;
  if (s.reduction != Reduction::kNone) {
    KILN_ASSIGN_OR_RETURN(per_element, ScratchBuffer(L, dt, s.target_shape));
  }
  if (ir::NumElements(s.target_shape) > 0) {
    auto k = L.NewKernel(s.target_shape, {s.classes});
    std::vector<int64_t> extents(s.target_shape.begin(), s.target_shape.end());
    extents.push_back(s.classes);
    const Coords tc = k->IterCoords();
    int32_t max = -1, log_sum = -1;
    absl::Status st;
    LogSumExp(*k, s, tc, &max, &log_sum, &st);
    KILN_RETURN_IF_ERROR(st);
    KILN_ASSIGN_OR_RETURN(TargetRead t, ReadTarget(L, *k, s, tc, extents));
    KILN_ASSIGN_OR_RETURN(int32_t xv, LoadIndirectAlong(L, *k, s.x, ScoreCoords(tc, ir::loop::Const(0)),
                                                        1, extents, t.cls));
    const int32_t logp = k->Bin(OpCode::kSub, k->Bin(OpCode::kSub, xv, max), log_sum);
    k->Store(per_element, s.target_shape, tc,
             k->Un(OpCode::kNeg, k->Bin(OpCode::kMul, logp, t.weight)));
  }
  if (s.reduction != Reduction::kNone) {
    const Shape tshape = s.target_shape;
    const std::vector<int64_t> red(tshape.begin(), tshape.end());
    KILN_RETURN_IF_ERROR(StoreReducedLoss(
        L, s, out, [&](Emitter& k, const Coords& tc) -> absl::StatusOr<LossTerm> {
          LossTerm term;
          // Weights only for "mean": an unused reduction-varying read is
          // emitted outside the reduction loop by the C++ emitter.
          if (s.reduction == Reduction::kMean) {
            KILN_ASSIGN_OR_RETURN(TargetRead t, ReadTarget(L, k, s, tc, red, /*need_class=*/false));
            term.weight = t.weight;
          }
          term.loss = k.b().Load(per_element, RowMajor(k, tshape, tc));
          return term;
        }));
  }
  if (L.HasOutput(1) && ir::NumElements(s.x.shape) > 0) {
    const int32_t lp = NewOutput(L, 1);
    auto k = L.NewKernel(s.x.shape, {s.classes});
    const Coords xc = k->IterCoords();
    Coords tc = xc;
    tc.erase(tc.begin() + 1);
    int32_t max = -1, log_sum = -1;
    absl::Status st;
    LogSumExp(*k, s, tc, &max, &log_sum, &st);
    KILN_RETURN_IF_ERROR(st);
    KILN_ASSIGN_OR_RETURN(int32_t xv, k->Load(s.x, xc));
    k->Store(lp, s.x.shape, xc,
             k->Bin(OpCode::kSub, k->Bin(OpCode::kSub, xv, max), log_sum));
  } else if (L.HasOutput(1)) {
    NewOutput(L, 1);
  }
  return absl::OkStatus();
}

}  // namespace

void AddLossLowerings(LowerTable& t) {
  t["NegativeLogLikelihoodLoss"] = LowerNll;
  t["SoftmaxCrossEntropyLoss"] = LowerSce;
}

}  // namespace kiln::lowering::internal
