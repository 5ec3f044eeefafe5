// Lowerings of elementwise ops: activations, unary math, broadcasting
// arithmetic and comparisons, logic, Where, Cast, Clip. One loop kernel per
// node over the output shape; broadcast inputs are read with stride 0.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/status_macros.h"
#include "lowering/lowerer.h"

namespace kiln::lowering::internal {
namespace {

using Body = std::function<absl::StatusOr<int32_t>(Emitter&,
                                                   const std::vector<int32_t>&)>;

bool Broadcasts(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return false;
  const size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1 && in[d] != out[off + d]) return false;
  }
  return true;
}

// out = body(loaded inputs) at every element of output 0.
absl::Status Elementwise(Lowerer& L, const std::vector<Operand>& ins,
                         const Body& body) {
  const ir::Value& out = L.OutputValue(0);
  for (const Operand& in : ins) {
    if (!Broadcasts(in.shape, out.shape)) {
      return L.Error("input shape ", ir::ShapeToString(in.shape),
                     " does not broadcast to output shape ",
                     ir::ShapeToString(out.shape));
    }
  }
  const int32_t buffer = L.OutputBuffer(0);
  auto k = L.NewKernel(out.shape);
  const Coords c = k->IterCoords();
  std::vector<int32_t> vals;
  for (const Operand& in : ins) {
    KILN_ASSIGN_OR_RETURN(int32_t v, k->LoadBroadcast(in, c));
    vals.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(int32_t r, body(*k, vals));
  if (k->DTypeOf(r) != out.dtype) {
    return L.Error("computes ", ir::DTypeName(k->DTypeOf(r)),
                   " but output '", out.name, "' is declared ",
                   ir::DTypeName(out.dtype));
  }
  k->Store(buffer, out.shape, c, r);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Operand>> AllInputs(Lowerer& L, const ir::Node& n) {
  std::vector<Operand> ins;
  for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
    if (!n.has_input(i)) continue;
    KILN_ASSIGN_OR_RETURN(Operand op, L.Input(i));
    ins.push_back(std::move(op));
  }
  if (ins.empty()) return L.Error("needs at least one input");
  return ins;
}

absl::Status RequireFloat(Lowerer& L, const Operand& op) {
  if (ir::IsFloat(op.dtype)) return absl::OkStatus();
  return L.Error("needs a float input, got ", ir::DTypeName(op.dtype));
}

absl::Status RequireSame(Lowerer& L, const std::vector<Operand>& ins) {
  for (const Operand& op : ins) {
    if (op.dtype != ins[0].dtype) {
      return L.Error("inputs have different dtypes ",
                     ir::DTypeName(ins[0].dtype), " and ",
                     ir::DTypeName(op.dtype));
    }
  }
  return absl::OkStatus();
}

// A unary float activation body, given x.
using Activation = std::function<int32_t(Emitter&, int32_t x, DType dt)>;

LowerFn FloatUnary(Activation f) {
  return [f](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    KILN_RETURN_IF_ERROR(RequireFloat(L, x));
    const DType dt = x.dtype;
    return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                   -> absl::StatusOr<int32_t> {
      return f(k, v[0], dt);
    });
  };
}

LowerFn SimpleUnary(OpCode code, bool float_only) {
  return [code, float_only](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
    if (float_only) KILN_RETURN_IF_ERROR(RequireFloat(L, x));
    return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                   -> absl::StatusOr<int32_t> {
      return k.Un(code, v[0]);
    });
  };
}

LowerFn SimpleBinary(OpCode code) {
  return [code](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
    if (ins.size() != 2) return L.Error("needs two inputs");
    KILN_RETURN_IF_ERROR(RequireSame(L, ins));
    return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                   -> absl::StatusOr<int32_t> {
      return k.Bin(code, v[0], v[1]);
    });
  };
}

// Folds `code` over all inputs left to right (Max, Min, Sum, Mean).
LowerFn Variadic(OpCode code, bool mean) {
  return [code, mean](Lowerer& L, const ir::Node& n) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
    KILN_RETURN_IF_ERROR(RequireSame(L, ins));
    if (mean) KILN_RETURN_IF_ERROR(RequireFloat(L, ins[0]));
    const DType dt = ins[0].dtype;
    return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                   -> absl::StatusOr<int32_t> {
      int32_t acc = v[0];
      for (size_t i = 1; i < v.size(); ++i) acc = k.Bin(code, acc, v[i]);
      if (mean) {
        acc = k.Bin(OpCode::kDiv, acc,
                    k.Const(dt, static_cast<double>(v.size())));
      }
      return acc;
    });
  };
}

// Evaluates f in f64 (functions whose f32 forms lose precision without
// expm1/log1p, which the loop IR lacks), then rounds back.
int32_t InF64(Emitter& k, int32_t x, DType dt,
              const std::function<int32_t(int32_t)>& f) {
  if (dt == DType::kF64) return f(x);
  return k.Cast(f(k.Cast(x, DType::kF64)), dt);
}

// log(1 + exp(x)), stable for large |x| (x is f64).
int32_t SoftplusF64(Emitter& k, int32_t x) {
  const DType d = DType::kF64;
  const int32_t one = k.Const(d, 1), zero = k.Const(d, 0);
  const int32_t pos = k.Bin(OpCode::kGt, x, zero);
  const int32_t neg_abs = k.Un(OpCode::kNeg, k.Un(OpCode::kAbs, x));
  const int32_t tail =
      k.Un(OpCode::kLog, k.Bin(OpCode::kAdd, one, k.Un(OpCode::kExp, neg_abs)));
  return k.Bin(OpCode::kAdd, k.Sel(pos, x, zero), tail);
}

float FloatAttr(const ir::Node& n, const char* name, float fallback,
                absl::Status* status) {
  absl::StatusOr<float> v = n.AttrOr<float>(name, fallback);
  if (!v.ok()) {
    *status = v.status();
    return fallback;
  }
  return *v;
}

// Activations reading float attributes.
LowerFn WithAttrs(
    std::vector<std::pair<const char*, float>> attrs,
    std::function<int32_t(Emitter&, int32_t, DType, const std::vector<float>&)>
        f) {
  return [attrs, f](Lowerer& L, const ir::Node& n) -> absl::Status {
    absl::Status st;
    std::vector<float> a;
    for (const auto& [name, def] : attrs) a.push_back(FloatAttr(n, name, def, &st));
    KILN_RETURN_IF_ERROR(st);
    return FloatUnary([&](Emitter& k, int32_t x, DType dt) {
      return f(k, x, dt, a);
    })(L, n);
  };
}

absl::Status LowerRelu(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  if (!ir::IsFloat(x.dtype) && !ir::IsSigned(x.dtype)) {
    return L.Error("does not accept ", ir::DTypeName(x.dtype));
  }
  return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    return k.Bin(OpCode::kMax, v[0], k.Const(x.dtype, 0));
  });
}

absl::Status LowerPRelu(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand slope, L.Input(1));
  if (slope.dtype != x.dtype) return L.Error("slope dtype differs from X");
  if (L.opset() < 7 && slope.shape.size() == 1 && x.shape.size() >= 2 &&
      slope.shape[0] == x.shape[1] && slope.shape[0] != 1) {
    // Per-channel slope: view it as [C, 1, ..., 1].
    Shape per_channel(x.shape.size() - 1, 1);
    per_channel[0] = slope.shape[0];
    auto inner = slope.index;
    slope.shape = per_channel;
    slope.index = [inner](const Coords& c) { return inner({c[0]}); };
  }
  return Elementwise(L, {x, slope}, [&](Emitter& k, const std::vector<int32_t>& v)
                                        -> absl::StatusOr<int32_t> {
    const int32_t neg = k.Bin(OpCode::kLt, v[0], k.Const(x.dtype, 0));
    return k.Sel(neg, k.Bin(OpCode::kMul, v[1], v[0]), v[0]);
  });
}

absl::Status LowerClip(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  std::vector<Operand> ins = {x};
  int lo = -1, hi = -1;
  if (L.opset() < 11) {
    KILN_RETURN_IF_ERROR(RequireFloat(L, x));
    KILN_ASSIGN_OR_RETURN(float a, n.AttrOr<float>("min", std::numeric_limits<float>::lowest()));
    KILN_ASSIGN_OR_RETURN(float b, n.AttrOr<float>("max", std::numeric_limits<float>::max()));
    Operand ca, cb;
    ca.dtype = cb.dtype = x.dtype;
    ca.splat = a;
    cb.splat = b;
    ins.push_back(ca);
    ins.push_back(cb);
    lo = 1;
    hi = 2;
  } else {
    for (int i = 1; i <= 2; ++i) {
      if (!L.HasInput(i)) continue;
      KILN_ASSIGN_OR_RETURN(Operand bound, L.Input(i));
      if (bound.dtype != x.dtype) return L.Error("bound dtype differs from input");
      if (ir::NumElements(bound.shape) != 1) return L.Error("bounds must be scalars");
      // A one-element bound of any rank is read at its only element.
      auto inner = bound.index;
      const size_t rank = bound.shape.size();
      bound.shape = {};
      bound.index = [inner, rank](const Coords&) {
        return inner(Coords(rank, ir::loop::Const(0)));
      };
      (i == 1 ? lo : hi) = static_cast<int>(ins.size());
      ins.push_back(bound);
    }
  }
  return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    int32_t y = v[0];
    if (lo >= 0) y = k.Sel(k.Bin(OpCode::kLt, y, v[lo]), v[lo], y);
    if (hi >= 0) y = k.Sel(k.Bin(OpCode::kGt, y, v[hi]), v[hi], y);
    return y;
  });
}

absl::Status LowerMod(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(int64_t fmod, n.AttrOr<int64_t>("fmod", 0));
  KILN_ASSIGN_OR_RETURN(Operand a, L.Input(0));
  if (fmod == 0 && ir::IsFloat(a.dtype)) {
    return L.Error("fmod must be 1 for floating-point inputs");
  }
  return SimpleBinary(fmod != 0 ? OpCode::kFmod : OpCode::kMod)(L, n);
}

absl::Status LowerPow(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand b, L.Input(0));
  KILN_ASSIGN_OR_RETURN(Operand e, L.Input(1));
  const DType bd = b.dtype, ed = e.dtype;
  if (!ir::IsFloat(bd) && bd != DType::kI32 && bd != DType::kI64) {
    return L.Error("does not accept ", ir::DTypeName(bd));
  }
  if (ed == DType::kBool) return L.Error("does not accept a bool exponent");
  return Elementwise(L, {b, e}, [&](Emitter& k, const std::vector<int32_t>& v)
                                    -> absl::StatusOr<int32_t> {
    if (ir::IsFloat(bd) || !ir::IsInteger(ed)) {
      // Computed in double like the reference, then converted.
      const int32_t x = k.Cast(v[0], DType::kF64);
      const int32_t y = k.Cast(v[1], DType::kF64);
      return k.Cast(k.Bin(OpCode::kPow, x, y), bd);
    }
    return k.Bin(OpCode::kPow, v[0], ed == bd ? v[1] : k.Cast(v[1], bd));
  });
}

absl::Status LowerComparison(Lowerer& L, const ir::Node& n, OpCode code) {
  KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
  if (ins.size() != 2) return L.Error("needs two inputs");
  KILN_RETURN_IF_ERROR(RequireSame(L, ins));
  if (ins[0].dtype == DType::kBool && code != OpCode::kEq) {
    return L.Error("does not accept bool inputs");
  }
  return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    if (ins[0].dtype == DType::kBool) {
      return k.Un(OpCode::kNot, k.Bin(OpCode::kXor, v[0], v[1]));
    }
    return k.Bin(code, v[0], v[1]);
  });
}

absl::Status LowerLogic(Lowerer& L, const ir::Node& n, OpCode code) {
  KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
  for (const Operand& op : ins) {
    if (op.dtype != DType::kBool) return L.Error("needs bool inputs");
  }
  return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    return v.size() == 1 ? k.Un(code, v[0]) : k.Bin(code, v[0], v[1]);
  });
}

absl::Status LowerWhere(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(std::vector<Operand> ins, AllInputs(L, n));
  if (ins.size() != 3) return L.Error("needs three inputs");
  if (ins[0].dtype != DType::kBool) return L.Error("condition must be bool");
  if (ins[1].dtype != ins[2].dtype) return L.Error("X and Y dtypes differ");
  return Elementwise(L, ins, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    return k.Sel(v[0], v[1], v[2]);
  });
}

absl::Status LowerCast(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  const DType to = L.OutputValue(0).dtype;
  if (x.dtype == to) {
    L.SetOutputView(0, x);
    return absl::OkStatus();
  }
  return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    return k.Cast(v[0], to);
  });
}

absl::Status LowerIsInf(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  KILN_RETURN_IF_ERROR(RequireFloat(L, x));
  KILN_ASSIGN_OR_RETURN(int64_t pos, n.AttrOr<int64_t>("detect_positive", 1));
  KILN_ASSIGN_OR_RETURN(int64_t neg, n.AttrOr<int64_t>("detect_negative", 1));
  return Elementwise(L, {x}, [&](Emitter& k, const std::vector<int32_t>& v)
                                 -> absl::StatusOr<int32_t> {
    const int32_t inf = k.Un(OpCode::kIsInf, v[0]);
    const int32_t gt = k.Bin(OpCode::kGt, v[0], k.Const(x.dtype, 0));
    const int32_t f = k.Const(DType::kBool, 0);
    const int32_t sign_ok = pos && neg ? k.Const(DType::kBool, 1)
                            : pos      ? gt
                            : neg      ? k.Un(OpCode::kNot, gt)
                                       : f;
    return k.Bin(OpCode::kAnd, inf, sign_ok);
  });
}

absl::Status LowerIdentity(Lowerer& L, const ir::Node& n) {
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  L.SetOutputView(0, x);
  return absl::OkStatus();
}

absl::Status LowerDropout(Lowerer& L, const ir::Node& n) {
  if (L.HasInput(2)) {
    const ir::Tensor* training = L.ConstantInput(2);
    if (training == nullptr || training->num_elements() != 1) {
      return L.Unimplemented("training_mode must be a constant scalar");
    }
    if (training->GetAsInt64(0) != 0) {
      return L.Unimplemented("training mode is not supported");
    }
  }
  KILN_ASSIGN_OR_RETURN(Operand x, L.Input(0));
  L.SetOutputView(0, x);
  if (L.HasOutput(1)) {
    ir::Tensor mask(DType::kBool, L.OutputValue(1).shape);
    for (int64_t i = 0; i < mask.num_elements(); ++i) mask.data<bool>()[i] = true;
    L.SetOutputConstant(1, std::move(mask));
  }
  return absl::OkStatus();
}

}  // namespace

void AddElementwiseLowerings(LowerTable& t) {
  const std::pair<const char*, OpCode> float_unary[] = {
      {"Exp", OpCode::kExp},     {"Log", OpCode::kLog},
      {"Sqrt", OpCode::kSqrt},   {"Tanh", OpCode::kTanh},
      {"Erf", OpCode::kErf},     {"Sigmoid", OpCode::kSigmoid},
      {"Floor", OpCode::kFloor}, {"Ceil", OpCode::kCeil},
      {"Round", OpCode::kRound}, {"Sin", OpCode::kSin},
      {"Cos", OpCode::kCos},     {"Tan", OpCode::kTan},
      {"Asin", OpCode::kAsin},   {"Acos", OpCode::kAcos},
      {"Atan", OpCode::kAtan},   {"Sinh", OpCode::kSinh},
      {"Cosh", OpCode::kCosh},   {"Asinh", OpCode::kAsinh},
      {"Acosh", OpCode::kAcosh}, {"Atanh", OpCode::kAtanh},
      {"Reciprocal", OpCode::kReciprocal}, {"IsNaN", OpCode::kIsNan},
  };
  for (const auto& [name, code] : float_unary) t[name] = SimpleUnary(code, true);
  t["Neg"] = SimpleUnary(OpCode::kNeg, false);
  t["Abs"] = SimpleUnary(OpCode::kAbs, false);
  t["Sign"] = SimpleUnary(OpCode::kSign, false);
  t["IsInf"] = LowerIsInf;

  t["Relu"] = LowerRelu;
  t["PRelu"] = LowerPRelu;
  t["LeakyRelu"] = WithAttrs({{"alpha", 0.01f}}, [](Emitter& k, int32_t x, DType dt,
                                                   const std::vector<float>& a) {
    const int32_t neg = k.Bin(OpCode::kLt, x, k.Const(dt, 0));
    return k.Sel(neg, k.Bin(OpCode::kMul, k.Const(dt, a[0]), x), x);
  });
  t["Elu"] = WithAttrs({{"alpha", 1.0f}}, [](Emitter& k, int32_t x, DType dt,
                                            const std::vector<float>& a) {
    const int32_t em1 = InF64(k, x, dt, [&](int32_t y) {
      return k.Bin(OpCode::kSub, k.Un(OpCode::kExp, y), k.Const(DType::kF64, 1));
    });
    const int32_t neg = k.Bin(OpCode::kLt, x, k.Const(dt, 0));
    return k.Sel(neg, k.Bin(OpCode::kMul, k.Const(dt, a[0]), em1), x);
  });
  t["Celu"] = WithAttrs({{"alpha", 1.0f}}, [](Emitter& k, int32_t x, DType dt,
                                             const std::vector<float>& a) {
    const int32_t scaled = k.Bin(OpCode::kDiv, x, k.Const(dt, a[0]));
    const int32_t em1 = InF64(k, scaled, dt, [&](int32_t y) {
      return k.Bin(OpCode::kSub, k.Un(OpCode::kExp, y), k.Const(DType::kF64, 1));
    });
    const int32_t pos = k.Bin(OpCode::kGt, x, k.Const(dt, 0));
    return k.Sel(pos, x, k.Bin(OpCode::kMul, k.Const(dt, a[0]), em1));
  });
  t["Selu"] = WithAttrs(
      {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}},
      [](Emitter& k, int32_t x, DType dt, const std::vector<float>& a) {
        const int32_t alpha = k.Const(dt, a[0]), gamma = k.Const(dt, a[1]);
        const int32_t le = k.Bin(OpCode::kLe, x, k.Const(dt, 0));
        const int32_t neg = k.Bin(
            OpCode::kMul, gamma,
            k.Bin(OpCode::kSub, k.Bin(OpCode::kMul, alpha, k.Un(OpCode::kExp, x)),
                  alpha));
        return k.Sel(le, neg, k.Bin(OpCode::kMul, gamma, x));
      });
  t["ThresholdedRelu"] = WithAttrs({{"alpha", 1.0f}}, [](Emitter& k, int32_t x, DType dt,
                                                        const std::vector<float>& a) {
    return k.Sel(k.Bin(OpCode::kGt, x, k.Const(dt, a[0])), x, k.Const(dt, 0));
  });
  t["HardSigmoid"] = WithAttrs({{"alpha", 0.2f}, {"beta", 0.5f}},
                               [](Emitter& k, int32_t x, DType dt,
                                  const std::vector<float>& a) {
    const int32_t y = k.Bin(OpCode::kAdd, k.Bin(OpCode::kMul, k.Const(dt, a[0]), x),
                            k.Const(dt, a[1]));
    return k.Bin(OpCode::kMax, k.Bin(OpCode::kMin, y, k.Const(dt, 1)), k.Const(dt, 0));
  });
  t["HardSwish"] = FloatUnary([](Emitter& k, int32_t x, DType dt) {
    const int32_t y = k.Bin(OpCode::kAdd, k.Bin(OpCode::kDiv, x, k.Const(dt, 6)),
                            k.Const(dt, 0.5));
    const int32_t c =
        k.Bin(OpCode::kMax, k.Bin(OpCode::kMin, y, k.Const(dt, 1)), k.Const(dt, 0));
    return k.Bin(OpCode::kMul, x, c);
  });
  t["Softplus"] = FloatUnary([](Emitter& k, int32_t x, DType dt) {
    return InF64(k, x, dt, [&](int32_t y) { return SoftplusF64(k, y); });
  });
  t["Softsign"] = FloatUnary([](Emitter& k, int32_t x, DType dt) {
    return k.Bin(OpCode::kDiv, x,
                 k.Bin(OpCode::kAdd, k.Const(dt, 1), k.Un(OpCode::kAbs, x)));
  });
  t["Mish"] = FloatUnary([](Emitter& k, int32_t x, DType dt) {
    return InF64(k, x, dt, [&](int32_t y) {
      return k.Bin(OpCode::kMul, y, k.Un(OpCode::kTanh, SoftplusF64(k, y)));
    });
  });
  t["Shrink"] = WithAttrs({{"lambd", 0.5f}, {"bias", 0.0f}},
                          [](Emitter& k, int32_t x, DType dt,
                             const std::vector<float>& a) {
    const int32_t lam = k.Const(dt, a[0]), bias = k.Const(dt, a[1]);
    const int32_t nlam = k.Const(dt, -a[0]);
    const int32_t lo = k.Bin(OpCode::kLt, x, nlam);
    const int32_t hi = k.Bin(OpCode::kGt, x, lam);
    const int32_t zero = k.Const(dt, 0);
    return k.Sel(lo, k.Bin(OpCode::kAdd, x, bias),
                 k.Sel(hi, k.Bin(OpCode::kSub, x, bias), zero));
  });
  t["Clip"] = LowerClip;

  t["Add"] = SimpleBinary(OpCode::kAdd);
  t["Sub"] = SimpleBinary(OpCode::kSub);
  t["Mul"] = SimpleBinary(OpCode::kMul);
  t["Div"] = SimpleBinary(OpCode::kDiv);
  t["Mod"] = LowerMod;
  t["Pow"] = LowerPow;
  t["Max"] = Variadic(OpCode::kMax, false);
  t["Min"] = Variadic(OpCode::kMin, false);
  t["Sum"] = Variadic(OpCode::kAdd, false);
  t["Mean"] = Variadic(OpCode::kAdd, true);

  t["Equal"] = [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kEq); };
  t["Less"] = [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kLt); };
  t["LessOrEqual"] = [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kLe); };
  t["Greater"] = [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kGt); };
  t["GreaterOrEqual"] = [](Lowerer& L, const ir::Node& n) { return LowerComparison(L, n, OpCode::kGe); };
  t["Not"] = [](Lowerer& L, const ir::Node& n) { return LowerLogic(L, n, OpCode::kNot); };
  t["And"] = [](Lowerer& L, const ir::Node& n) { return LowerLogic(L, n, OpCode::kAnd); };
  t["Or"] = [](Lowerer& L, const ir::Node& n) { return LowerLogic(L, n, OpCode::kOr); };
  t["Xor"] = [](Lowerer& L, const ir::Node& n) { return LowerLogic(L, n, OpCode::kXor); };
  t["Where"] = LowerWhere;
  t["Cast"] = LowerCast;
  t["CastLike"] = LowerCast;
  t["Identity"] = LowerIdentity;
  t["Dropout"] = LowerDropout;
}

}  // namespace kiln::lowering::internal
