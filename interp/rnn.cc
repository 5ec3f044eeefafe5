// File: interp/rnn.cc — reference kernels of ONNX's rnn family (onnx/defs/rnn):
// LSTM, GRU and RNN, following the operator definitions for opsets 7 to 18.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "interp/kernel_util.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"
#include "ir/status_macros.h"

namespace kiln::interp {
namespace {

using ir::DType;
using ir::Shape;

// One activation function of an RNN cell with its alpha/beta, as named in the
// `activations` attribute.
struct Activation {
  enum class Kind {
    kSigmoid, kTanh, kRelu, kHardSigmoid, kAffine, kLeakyRelu,
    kThresholdedRelu, kScaledTanh, kElu, kSoftsign, kSoftplus,
  };
  Kind kind = Kind::kSigmoid;
  double alpha = 0;
  double beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case Kind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
      case Kind::kTanh: return std::tanh(x);
      case Kind::kRelu: return std::max(0.0, x);
      case Kind::kHardSigmoid:
        return std::max(0.0, std::min(1.0, alpha * x + beta));
      case Kind::kAffine: return alpha * x + beta;
      case Kind::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case Kind::kThresholdedRelu: return x > alpha ? x : 0.0;
      case Kind::kScaledTanh: return alpha * std::tanh(beta * x);
      case Kind::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case Kind::kSoftsign: return x / (1.0 + std::fabs(x));
      case Kind::kSoftplus: return std::log1p(std::exp(x));
    }
    return x;
  }
};

struct ActivationSpec {
  const char* name;
  Activation::Kind kind;
  bool uses_alpha;
  bool uses_beta;
  double default_alpha;
  double default_beta;
};

constexpr ActivationSpec kActivationSpecs[] = {
    {"sigmoid", Activation::Kind::kSigmoid, false, false, 0, 0},
    {"tanh", Activation::Kind::kTanh, false, false, 0, 0},
    {"relu", Activation::Kind::kRelu, false, false, 0, 0},
    {"hardsigmoid", Activation::Kind::kHardSigmoid, true, true, 0.2, 0.5},
    {"affine", Activation::Kind::kAffine, true, true, 1.0, 0.0},
    {"leakyrelu", Activation::Kind::kLeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", Activation::Kind::kThresholdedRelu, true, false, 1.0,
     0},
    {"scaledtanh", Activation::Kind::kScaledTanh, true, true, 1.0, 1.0},
    {"elu", Activation::Kind::kElu, true, false, 1.0, 0},
    {"softsign", Activation::Kind::kSoftsign, false, false, 0, 0},
    {"softplus", Activation::Kind::kSoftplus, false, false, 0, 0},
};

// The node's activations, `per_dir` for each of `dirs` directions. Explicit
// alphas and betas are consumed in order by the activations that take them.
absl::StatusOr<std::vector<Activation>> ParseActivations(
    const OpContext& ctx, int64_t dirs,
    const std::vector<std::string>& defaults) {
  const size_t per_dir = defaults.size();
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names,
                        ctx.node.AttrOr<std::vector<std::string>>(
                            "activations", {}));
  KILN_ASSIGN_OR_RETURN(
      std::vector<float> alphas,
      ctx.node.AttrOr<std::vector<float>>("activation_alpha", {}));
  KILN_ASSIGN_OR_RETURN(
      std::vector<float> betas,
      ctx.node.AttrOr<std::vector<float>>("activation_beta", {}));
  if (names.empty()) names = defaults;
  if (names.size() != per_dir && names.size() != per_dir * dirs) {
    return ctx.Error("expected ", per_dir, " activations per direction (",
                     per_dir * dirs, " in all), got ", names.size());
  }
  std::vector<Activation> acts;
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    std::string lower = name;
    for (char& ch : lower) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    const ActivationSpec* spec = nullptr;
    for (const ActivationSpec& s : kActivationSpecs) {
      if (lower == s.name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          ctx.node.Describe(), ": unsupported activation '", name, "'"));
    }
    Activation a{spec->kind, spec->default_alpha, spec->default_beta};
    if (spec->uses_alpha && next_alpha < alphas.size()) {
      a.alpha = alphas[next_alpha++];
    }
    if (spec->uses_beta && next_beta < betas.size()) {
      a.beta = betas[next_beta++];
    }
    acts.push_back(a);
  }
  while (acts.size() < per_dir * dirs) {
    const Activation repeated = acts[acts.size() - per_dir];
    acts.push_back(repeated);
  }
  return acts;
}

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = t.GetAsDouble(i);
  return v;
}

// A float tensor of `dtype` holding `values`.
Tensor FromDoubles(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t(dtype, std::move(shape));
  DispatchDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (ir::kIsLowPrecision<T>) {
        out[i] = ir::FromFloat<T>(static_cast<float>(values[i]));
      } else {
        out[i] = static_cast<T>(values[i]);
      }
    }
  });
  return t;
}

// The inputs and attributes shared by LSTM, GRU and RNN, validated, in
// double precision and in layout 0 (time-major).
struct RnnProblem {
  DType dtype;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  int64_t layout = 0;
  std::string direction;
  std::vector<double> x;         // [seq][batch][input]
  std::vector<double> w;         // [dirs][gates*hidden][input]
  std::vector<double> r;         // [dirs][gates*hidden][hidden]
  std::vector<double> b;         // [dirs][2*gates*hidden], zeros if absent
  std::vector<int64_t> seq_lens;  // [batch]
  std::vector<double> init_h;    // [dirs][batch][hidden]
  std::vector<double> init_c;    // [dirs][batch][hidden] (LSTM only)
  std::vector<Activation> acts;  // per direction, in the op's order
  double clip = 0;               // 0: no clipping

  double Clip(double v) const {
    return clip > 0 ? std::max(-clip, std::min(clip, v)) : v;
  }
};

// Reads a [dirs, batch, hidden] state (layout 0) or [batch, dirs, hidden]
// (layout 1) into layout 0; zeros when absent.
absl::StatusOr<std::vector<double>> ReadState(const OpContext& ctx, int index,
                                              const RnnProblem& p,
                                              const char* what) {
  std::vector<double> state(p.dirs * p.batch * p.hidden, 0.0);
  if (!ctx.has_input(index)) return state;
  const Tensor& t = *ctx.inputs[index];
  Shape want = p.layout == 0 ? Shape{p.dirs, p.batch, p.hidden}
                             : Shape{p.batch, p.dirs, p.hidden};
  if (t.shape() != want) {
    return ctx.Error(what, " has shape ", ir::ShapeToString(t.shape()),
                     ", expected ", ir::ShapeToString(want));
  }
  if (t.dtype() != p.dtype) {
    return ctx.Error(what, " is ", ir::DTypeName(t.dtype()), ", expected ",
                     ir::DTypeName(p.dtype));
  }
  for (int64_t d = 0; d < p.dirs; ++d) {
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t j = 0; j < p.hidden; ++j) {
        int64_t src = p.layout == 0 ? (d * p.batch + b) * p.hidden + j
                                    : (b * p.dirs + d) * p.hidden + j;
        state[(d * p.batch + b) * p.hidden + j] = t.GetAsDouble(src);
      }
    }
  }
  return state;
}

absl::Status CheckWeight(const OpContext& ctx, const Tensor& t,
                         const char* what, const Shape& want, DType dtype) {
  if (t.shape() != want) {
    return ctx.Error(what, " has shape ", ir::ShapeToString(t.shape()),
                     ", expected ", ir::ShapeToString(want));
  }
  if (t.dtype() != dtype) {
    return ctx.Error(what, " is ", ir::DTypeName(t.dtype()), ", expected ",
                     ir::DTypeName(dtype));
  }
  return absl::OkStatus();
}

// Inputs X, W, R, B, sequence_lens, initial_h (indices 0-5) and the shared
// attributes; `gates` weight blocks per direction.
absl::StatusOr<RnnProblem> ParseRnnProblem(
    const OpContext& ctx, int64_t gates,
    const std::vector<std::string>& default_acts) {
  RnnProblem p;
  KILN_ASSIGN_OR_RETURN(const Tensor* x, ctx.Input(0));
  KILN_ASSIGN_OR_RETURN(const Tensor* w, ctx.Input(1));
  KILN_ASSIGN_OR_RETURN(const Tensor* r, ctx.Input(2));
  p.dtype = x->dtype();
  if (!ir::IsFloat(p.dtype)) {
    return ctx.Error("X must be a float tensor, got ", x->TypeString());
  }
  KILN_ASSIGN_OR_RETURN(p.layout, ctx.node.AttrOr<int64_t>("layout", 0));
  if (p.layout != 0 && p.layout != 1) {
    return ctx.Error("layout must be 0 or 1, got ", p.layout);
  }
  KILN_ASSIGN_OR_RETURN(p.direction, ctx.node.AttrOr<std::string>(
                                         "direction", "forward"));
  if (p.direction == "bidirectional") {
    p.dirs = 2;
  } else if (p.direction != "forward" && p.direction != "reverse") {
    return ctx.Error("unknown direction '", p.direction, "'");
  }
  if (x->rank() != 3) {
    return ctx.Error("X must have rank 3, got ", x->TypeString());
  }
  p.seq = x->dim(p.layout == 0 ? 0 : 1);
  p.batch = x->dim(p.layout == 0 ? 1 : 0);
  p.input = x->dim(2);
  if (r->rank() != 3) {
    return ctx.Error("R must have rank 3, got ", r->TypeString());
  }
  p.hidden = r->dim(2);
  if (ctx.node.HasAttr("hidden_size")) {
    KILN_ASSIGN_OR_RETURN(int64_t hs, ctx.node.Attr<int64_t>("hidden_size"));
    if (hs != p.hidden) {
      return ctx.Error("hidden_size is ", hs, " but R has shape ",
                       ir::ShapeToString(r->shape()));
    }
  }
  KILN_RETURN_IF_ERROR(CheckWeight(ctx, *w, "W",
                                   {p.dirs, gates * p.hidden, p.input},
                                   p.dtype));
  KILN_RETURN_IF_ERROR(CheckWeight(ctx, *r, "R",
                                   {p.dirs, gates * p.hidden, p.hidden},
                                   p.dtype));
  p.x.resize(p.seq * p.batch * p.input);
  for (int64_t t = 0; t < p.seq; ++t) {
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t k = 0; k < p.input; ++k) {
        int64_t src = p.layout == 0 ? (t * p.batch + b) * p.input + k
                                    : (b * p.seq + t) * p.input + k;
        p.x[(t * p.batch + b) * p.input + k] = x->GetAsDouble(src);
      }
    }
  }
  p.w = ToDoubles(*w);
  p.r = ToDoubles(*r);
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(CheckWeight(ctx, *ctx.inputs[3], "B",
                                     {p.dirs, 2 * gates * p.hidden}, p.dtype));
    p.b = ToDoubles(*ctx.inputs[3]);
  } else {
    p.b.assign(p.dirs * 2 * gates * p.hidden, 0.0);
  }
  p.seq_lens.assign(p.batch, p.seq);
  if (ctx.has_input(4)) {
    const Tensor& lens = *ctx.inputs[4];
    if (!ir::IsInteger(lens.dtype()) || lens.shape() != Shape{p.batch}) {
      return ctx.Error("sequence_lens must be an integer tensor of shape [",
                       p.batch, "], got ", lens.TypeString());
    }
    for (int64_t b = 0; b < p.batch; ++b) {
      p.seq_lens[b] = lens.GetAsInt64(b);
      if (p.seq_lens[b] < 0 || p.seq_lens[b] > p.seq) {
        return ctx.Error("sequence_lens[", b, "] = ", p.seq_lens[b],
                         " is outside [0, ", p.seq, "]");
      }
    }
  }
  KILN_ASSIGN_OR_RETURN(p.init_h, ReadState(ctx, 5, p, "initial_h"));
  if (ctx.node.HasAttr("clip")) {
    KILN_ASSIGN_OR_RETURN(float clip, ctx.node.Attr<float>("clip"));
    if (!(clip > 0)) return ctx.Error("clip must be positive, got ", clip);
    p.clip = clip;
  }
  KILN_ASSIGN_OR_RETURN(p.acts, ParseActivations(ctx, p.dirs, default_acts));
  return p;
}

// One time step of one direction for one batch row: updates h (and c).
using CellFn = std::function<void(int64_t dir, const double* x,
                                  std::vector<double>& h,
                                  std::vector<double>& c)>;

// Runs every direction over every batch row (honouring sequence_lens; rows
// past their length stay zero in Y) and returns Y, Y_h and, when
// `with_cell`, Y_c, in the node's layout, as many as the node declares.
std::vector<Tensor> RunRecurrence(const OpContext& ctx, const RnnProblem& p,
                                  bool with_cell, const CellFn& cell) {
  const int64_t S = p.seq, D = p.dirs, B = p.batch, H = p.hidden;
  std::vector<double> y(S * D * B * H, 0.0);  // [seq][dirs][batch][hidden]
  std::vector<double> yh(D * B * H, 0.0), yc(D * B * H, 0.0);
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse =
        p.direction == "reverse" || (p.direction == "bidirectional" && d == 1);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> h(p.init_h.begin() + (d * B + b) * H,
                            p.init_h.begin() + (d * B + b + 1) * H);
      std::vector<double> c(H, 0.0);
      if (!p.init_c.empty()) {
        c.assign(p.init_c.begin() + (d * B + b) * H,
                 p.init_c.begin() + (d * B + b + 1) * H);
      }
      const int64_t len = p.seq_lens[b];
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        cell(d, &p.x[(t * B + b) * p.input], h, c);
        std::copy(h.begin(), h.end(), y.begin() + ((t * D + d) * B + b) * H);
      }
      std::copy(h.begin(), h.end(), yh.begin() + (d * B + b) * H);
      std::copy(c.begin(), c.end(), yc.begin() + (d * B + b) * H);
    }
  }
  std::vector<Tensor> outs;
  if (p.layout == 0) {
    outs.push_back(FromDoubles(p.dtype, {S, D, B, H}, y));
    outs.push_back(FromDoubles(p.dtype, {D, B, H}, yh));
    if (with_cell) outs.push_back(FromDoubles(p.dtype, {D, B, H}, yc));
  } else {
    std::vector<double> y1(y.size()), yh1(yh.size()), yc1(yc.size());
    for (int64_t t = 0; t < S; ++t) {
      for (int64_t d = 0; d < D; ++d) {
        for (int64_t b = 0; b < B; ++b) {
          for (int64_t j = 0; j < H; ++j) {
            y1[((b * S + t) * D + d) * H + j] = y[((t * D + d) * B + b) * H + j];
          }
        }
      }
    }
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t j = 0; j < H; ++j) {
          yh1[(b * D + d) * H + j] = yh[(d * B + b) * H + j];
          yc1[(b * D + d) * H + j] = yc[(d * B + b) * H + j];
        }
      }
    }
    outs.push_back(FromDoubles(p.dtype, {B, S, D, H}, y1));
    outs.push_back(FromDoubles(p.dtype, {B, D, H}, yh1));
    if (with_cell) outs.push_back(FromDoubles(p.dtype, {B, D, H}, yc1));
  }
  if (outs.size() > static_cast<size_t>(ctx.num_outputs())) {
    outs.resize(ctx.num_outputs());
  }
  return outs;
}

// Row `row` of a [rows][n] matrix dotted with v.
double Dot(const double* m, int64_t row, int64_t n, const double* v) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += m[row * n + k] * v[k];
  return s;
}

// Gates i, o, f, c; peepholes i, o, f.
absl::StatusOr<std::vector<Tensor>> Lstm(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(RnnProblem p,
                        ParseRnnProblem(ctx, 4, {"Sigmoid", "Tanh", "Tanh"}));
  KILN_ASSIGN_OR_RETURN(p.init_c, ReadState(ctx, 6, p, "initial_c"));
  const int64_t H = p.hidden, I = p.input;
  std::vector<double> peep(p.dirs * 3 * H, 0.0);
  if (ctx.has_input(7)) {
    KILN_RETURN_IF_ERROR(
        CheckWeight(ctx, *ctx.inputs[7], "P", {p.dirs, 3 * H}, p.dtype));
    peep = ToDoubles(*ctx.inputs[7]);
  }
  KILN_ASSIGN_OR_RETURN(int64_t input_forget,
                        ctx.node.AttrOr<int64_t>("input_forget", 0));
  CellFn cell = [&](int64_t d, const double* x, std::vector<double>& h,
                    std::vector<double>& c) {
    const double* w = &p.w[d * 4 * H * I];
    const double* r = &p.r[d * 4 * H * H];
    const double* wb = &p.b[d * 8 * H];
    const double* rb = wb + 4 * H;
    const double* pe = &peep[d * 3 * H];
    const Activation& f = p.acts[d * 3];
    const Activation& g = p.acts[d * 3 + 1];
    const Activation& hact = p.acts[d * 3 + 2];
    auto pre = [&](int gate, int64_t j) {
      const int64_t row = gate * H + j;
      return Dot(w, row, I, x) + Dot(r, row, H, h.data()) + wb[row] + rb[row];
    };
    std::vector<double> new_h(H), new_c(H);
    for (int64_t j = 0; j < H; ++j) {
      const double i_gate = f(p.Clip(pre(0, j) + pe[j] * c[j]));
      const double f_gate = input_forget != 0
                                ? 1.0 - i_gate
                                : f(p.Clip(pre(2, j) + pe[2 * H + j] * c[j]));
      const double cand = g(p.Clip(pre(3, j)));
      new_c[j] = f_gate * c[j] + i_gate * cand;
      const double o_gate = f(p.Clip(pre(1, j) + pe[H + j] * new_c[j]));
      new_h[j] = o_gate * hact(new_c[j]);
    }
    h = std::move(new_h);
    c = std::move(new_c);
  };
  return RunRecurrence(ctx, p, /*with_cell=*/true, cell);
}

// Gates z, r, h.
absl::StatusOr<std::vector<Tensor>> Gru(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(RnnProblem p,
                        ParseRnnProblem(ctx, 3, {"Sigmoid", "Tanh"}));
  KILN_ASSIGN_OR_RETURN(int64_t linear_before_reset,
                        ctx.node.AttrOr<int64_t>("linear_before_reset", 0));
  const int64_t H = p.hidden, I = p.input;
  CellFn cell = [&](int64_t d, const double* x, std::vector<double>& h,
                    std::vector<double>&) {
    const double* w = &p.w[d * 3 * H * I];
    const double* r = &p.r[d * 3 * H * H];
    const double* wb = &p.b[d * 6 * H];
    const double* rb = wb + 3 * H;
    const Activation& f = p.acts[d * 2];
    const Activation& g = p.acts[d * 2 + 1];
    std::vector<double> z(H), rg(H), rh(H), new_h(H);
    for (int64_t j = 0; j < H; ++j) {
      z[j] = f(p.Clip(Dot(w, j, I, x) + Dot(r, j, H, h.data()) + wb[j] +
                      rb[j]));
      const int64_t rr = H + j;
      rg[j] = f(p.Clip(Dot(w, rr, I, x) + Dot(r, rr, H, h.data()) + wb[rr] +
                       rb[rr]));
    }
    for (int64_t j = 0; j < H; ++j) rh[j] = rg[j] * h[j];
    for (int64_t j = 0; j < H; ++j) {
      const int64_t row = 2 * H + j;
      const double recur =
          linear_before_reset != 0
              ? rg[j] * (Dot(r, row, H, h.data()) + rb[row])
              : Dot(r, row, H, rh.data()) + rb[row];
      const double cand = g(p.Clip(Dot(w, row, I, x) + wb[row] + recur));
      new_h[j] = (1.0 - z[j]) * cand + z[j] * h[j];
    }
    h = std::move(new_h);
  };
  return RunRecurrence(ctx, p, /*with_cell=*/false, cell);
}

absl::StatusOr<std::vector<Tensor>> Rnn(OpContext& ctx) {
  KILN_ASSIGN_OR_RETURN(RnnProblem p, ParseRnnProblem(ctx, 1, {"Tanh"}));
  const int64_t H = p.hidden, I = p.input;
  CellFn cell = [&](int64_t d, const double* x, std::vector<double>& h,
                    std::vector<double>&) {
    const double* w = &p.w[d * H * I];
    const double* r = &p.r[d * H * H];
    const double* wb = &p.b[d * 2 * H];
    const double* rb = wb + H;
    std::vector<double> new_h(H);
    for (int64_t j = 0; j < H; ++j) {
      new_h[j] = p.acts[d](p.Clip(Dot(w, j, I, x) + Dot(r, j, H, h.data()) +
                                  wb[j] + rb[j]));
    }
    h = std::move(new_h);
  };
  return RunRecurrence(ctx, p, /*with_cell=*/false, cell);
}

}  // namespace

void RegisterRnnOps(OpRegistry* r) {
  r->Register("LSTM", Lstm);
  r->Register("GRU", Gru);
  r->Register("RNN", Rnn);
}

}  // namespace kiln::interp
