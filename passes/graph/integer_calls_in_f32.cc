// Pass integer-calls-in-f32 (passes/graph/integer_calls_in_f32.h says which
// nodes and why the results are exact or within a step).
#include "passes/graph/integer_calls_in_f32.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/status_macros.h"
#include "passes/graph/rewrite_util.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;
using ir::ValueId;

constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxInt32 = 6;
constexpr double kExactLimit = 16777216.0;  // 2^24: f32 holds every integer below
// The float-reader rule: (K-1) * 2^-24 <= 2^-10.
constexpr int64_t kMaxFloatReaderTerms = (int64_t{1} << 14) + 1;

struct Range {
  int64_t lo = 0, hi = 0;
};

std::optional<Range> RangeOf(DType t) {
  if (t == DType::kU8) return Range{0, 255};
  if (t == DType::kI8) return Range{-128, 127};
  return std::nullopt;
}

// max |v - z| over v in x's type range and z the zero point: its constant
// values, or its whole range when it is a runtime value; absent: z = 0.
int64_t MaxShift(const Range& x, const ir::Graph& g, const ir::Node& n, int zp_slot) {
  if (!n.has_input(zp_slot)) return std::max(std::abs(x.lo), std::abs(x.hi));
  const Tensor* z = g.constant(n.inputs[zp_slot]);
  if (z == nullptr) return x.hi - x.lo;
  int64_t m = 0;
  for (int64_t i = 0; i < z->num_elements(); ++i) {
    const int64_t v = z->GetAsInt64(i);
    m = std::max({m, std::abs(x.lo - v), std::abs(x.hi - v)});
  }
  return m;
}

// One value per channel of `count` channels from a constant with one value
// or `count` values; nullopt for another size.
std::optional<std::vector<double>> PerChannel(const Tensor* t, int64_t count, double absent) {
  if (t == nullptr) return std::vector<double>(count, absent);
  if (t->num_elements() == 1) return std::vector<double>(count, t->GetAsDouble(0));
  if (t->num_elements() != count) return std::nullopt;
  std::vector<double> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = t->GetAsDouble(i);
  return v;
}

class Rewriter {
 public:
  Rewriter(ir::Graph* graph, const IntegerCallOracle& oracle)
      : g_(*graph), oracle_(oracle), uses_(CountUses(*graph)) {
    for (int i = 0; i < static_cast<int>(g_.nodes().size()); ++i) {
      for (ValueId v : g_.nodes()[i].inputs) {
        if (v != ir::kNoValue) readers_[v].push_back(i);
      }
    }
  }

  absl::StatusOr<bool> Run(std::vector<std::string>* kept, int* rewritten) {
    const std::vector<ir::Node>& nodes = g_.nodes();
    bool changed = false;
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      if (skip_.count(i) != 0) continue;
      const ir::Node& n = nodes[i];
      const bool integer_op =
          n.domain.empty() && (n.op == "ConvInteger" || n.op == "MatMulInteger" ||
                               n.op == "QLinearConv" || n.op == "QLinearMatMul");
      if (!integer_op) {
        out_.push_back(n);
        continue;
      }
      const absl::Status taken = oracle_(g_, n);
      if (taken.ok() || !absl::IsUnimplemented(taken)) {
        out_.push_back(n);
        continue;
      }
      const std::string why = n.op == "ConvInteger"     ? ConvInteger(n)
                              : n.op == "MatMulInteger" ? MatMulInteger(n)
                              : n.op == "QLinearConv"   ? QLinearConv(n)
                                                        : QLinearMatMul(n);
      if (!why.empty()) {
        out_.push_back(n);
        kept->push_back(absl::StrCat(n.Describe(), ": ", why, " (library: ",
                                     taken.message(), ")"));
        continue;
      }
      ++*rewritten;
      changed = true;
    }
    if (changed) g_.mutable_nodes() = std::move(out_);
    return changed;
  }

 private:
  ValueId NewValue(const std::string& base, DType t, const Shape& shape) {
    return g_.AddValue(UniqueName(g_, base), t, shape);
  }
  ValueId NewConstant(const std::string& base, Tensor t) {
    const ValueId v = NewValue(base, t.dtype(), t.shape());
    g_.SetConstant(v, std::move(t));
    return v;
  }
  void Emit(const ir::Node& origin, std::string op, std::vector<ValueId> in,
            std::vector<ValueId> out, ir::AttributeMap attrs = {}) {
    ir::Node n;
    n.op = std::move(op);
    n.name = origin.name.empty() ? "" : absl::StrCat(origin.name, ".", n.op);
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attrs = std::move(attrs);
    out_.push_back(std::move(n));
  }

  // Cast(input, f32) minus its zero point (node input zp_slot, may be
  // absent), shared by every rewritten node reading the same pair: a
  // constant when both are, else Cast and Sub (a runtime zero point through
  // its own Cast; kiln's DequantizeLinear subtracts in i64, not vectorized).
  // `channels_first`: a zero point with several values is per index of the
  // input's first axis (conv weights), else of its last (MatMul's B).
  ValueId ShiftedF32(const ir::Node& n, int slot, int zp_slot, bool channels_first = false) {
    const ValueId x = n.inputs[slot];
    const ValueId z = n.has_input(zp_slot) ? n.inputs[zp_slot] : ir::kNoValue;
    auto cached = shifted_.find({x, z});
    if (cached != shifted_.end()) return cached->second;
    const ir::Value xv = g_.value(x);
    ValueId f = ir::kNoValue;
    if (const Tensor* c = g_.constant(x); c != nullptr) {
      Tensor t(DType::kF32, c->shape());
      const Tensor* zc = z == ir::kNoValue ? nullptr : g_.constant(z);
      if (z == ir::kNoValue || (zc != nullptr && zc->num_elements() == 1)) {
        const double zv = zc == nullptr ? 0.0 : zc->GetAsDouble(0);
        for (int64_t i = 0; i < c->num_elements(); ++i) {
          t.data<float>()[i] = static_cast<float>(c->GetAsDouble(i) - zv);
        }
        f = NewConstant(xv.name + ".f32", std::move(t));
        shifted_[{x, z}] = f;
        return f;
      }
    }
    const ValueId cast = NewValue(xv.name + ".f32", DType::kF32, xv.shape);
    Emit(n, "Cast", {x}, {cast}, {{"to", kOnnxFloat}});
    f = cast;
    if (z != ir::kNoValue) {
      const ir::Value zv = g_.value(z);
      ValueId zf = ir::kNoValue;
      if (const Tensor* zc = g_.constant(z); zc != nullptr) {
        bool all_zero = true;
        Shape shape = zc->shape();
        if (channels_first && zc->num_elements() > 1) {
          shape.assign(xv.shape.size(), 1);
          shape[0] = zc->num_elements();
        }
        Tensor t(DType::kF32, shape);
        for (int64_t i = 0; i < zc->num_elements(); ++i) {
          t.data<float>()[i] = static_cast<float>(zc->GetAsDouble(i));
          all_zero = all_zero && zc->GetAsInt64(i) == 0;
        }
        if (!all_zero) zf = NewConstant(zv.name + ".f32", std::move(t));
      } else {
        zf = NewValue(zv.name + ".f32", DType::kF32, zv.shape);
        Emit(n, "Cast", {z}, {zf}, {{"to", kOnnxFloat}});
      }
      if (zf != ir::kNoValue) {
        f = NewValue(xv.name + ".shifted", DType::kF32, xv.shape);
        Emit(n, "Sub", {cast, zf}, {f});
      }
    }
    shifted_[{x, z}] = f;
    return f;
  }

  // The only reader of `v` when it is a Cast to f32 and `v` is no graph
  // output: its node index, else -1.
  int FloatReader(ValueId v) const {
    if (IsGraphOutput(g_, v) || uses_[v] != 1) return -1;
    auto it = readers_.find(v);
    if (it == readers_.end() || it->second.size() != 1) return -1;
    const ir::Node& r = g_.nodes()[it->second[0]];
    if (r.op != "Cast" || !r.domain.empty() || r.outputs.size() != 1 ||
        r.outputs[0] == ir::kNoValue || g_.value(r.outputs[0]).dtype != DType::kF32) {
      return -1;
    }
    return it->second[0];
  }

  // Whether the f32 call may replace node `n`: "" or why not. `exact`:
  // every partial sum is below 2^24; `terms`: the length of each sum.
  std::string Allowed(const ir::Node& n, bool exact, int64_t terms) const {
    const int reader = FloatReader(n.outputs[0]);
    if (exact || (reader >= 0 && terms <= kMaxFloatReaderTerms)) return std::string();
    if (reader >= 0) {
      return absl::StrCat("a sum of ", terms, " terms in f32 may round by more than 2^-10 of "
                          "its bound (at most ", kMaxFloatReaderTerms, " terms)");
    }
    return "partial sums may reach 2^24 (inexact in f32) and the i32 result is read as an "
           "integer";
  }

  // Writes the f32 call's result: into the float reader's output (the reader
  // is dropped) or through Cast(to i32) into the node's own output.
  void Finish(const ir::Node& n, const std::string& op, std::vector<ValueId> in,
              ir::AttributeMap attrs) {
    const ValueId y = n.outputs[0];
    const int reader = FloatReader(y);
    if (reader >= 0) {
      skip_.insert(reader);
      Emit(n, op, std::move(in), {g_.nodes()[reader].outputs[0]}, std::move(attrs));
      return;
    }
    const ir::Value yv = g_.value(y);
    const ValueId acc = NewValue(yv.name + ".f32", DType::kF32, yv.shape);
    Emit(n, op, std::move(in), {acc}, std::move(attrs));
    Emit(n, "Cast", {acc}, {y}, {{"to", kOnnxInt32}});
  }

  // w - w_zero_point (per output channel along `axis` of w: 0 for conv
  // weights, the last for MatMul's B) as an f32 constant, and each channel's
  // sum of |w - zp|.
  struct Weights {
    Tensor data;
    std::vector<double> abs_sum;
    int64_t terms = 0;  // K: the length of each channel's sum
  };
  static std::optional<Weights> FoldWeights(const Tensor& w, const Tensor* zp, bool last_axis) {
    if (w.rank() < 1) return std::nullopt;
    const int64_t channels = last_axis ? w.shape().back() : w.shape()[0];
    std::optional<std::vector<double>> z = PerChannel(zp, channels, 0.0);
    if (!z.has_value() || channels == 0) return std::nullopt;
    Weights out;
    out.abs_sum.assign(channels, 0.0);
    Tensor f(DType::kF32, w.shape());
    const int64_t inner = w.num_elements() / channels;
    for (int64_t i = 0; i < w.num_elements(); ++i) {
      const int64_t c = last_axis ? i % channels : i / inner;
      const double d = w.GetAsDouble(i) - (*z)[c];
      f.data<float>()[i] = static_cast<float>(d);
      out.abs_sum[c] += std::abs(d);
    }
    out.terms = last_axis ? (w.rank() >= 2 ? w.shape()[w.rank() - 2] : 1) : inner;
    out.data = std::move(f);
    return out;
  }

  std::string ConvInteger(const ir::Node& n) {
    const ValueId x = n.inputs[0], w = n.inputs[1];
    const std::optional<Range> xr = RangeOf(g_.value(x).dtype);
    const std::optional<Range> wr = RangeOf(g_.value(w).dtype);
    if (!xr.has_value() || !wr.has_value()) return "x and w are not u8/i8";
    const Shape wsh = g_.value(w).shape;
    if (wsh.size() < 3) return "w has rank < 3";
    const Tensor* wc = g_.constant(w);
    const Tensor* wzp = n.has_input(3) ? g_.constant(n.inputs[3]) : nullptr;
    const double xmax = static_cast<double>(MaxShift(*xr, g_, n, 2));
    if (wc == nullptr || (n.has_input(3) && wzp == nullptr)) {
      // Runtime weights (or zero point): shifted at run time; the bound from
      // the types' ranges.
      if (n.has_input(3) && wzp == nullptr &&
          ir::NumElements(g_.value(n.inputs[3]).shape) != 1) {
        return "a runtime per-channel weight zero point";
      }
      const int64_t k = ir::NumElements(wsh) / std::max<int64_t>(1, wsh[0]);
      const double wmax = static_cast<double>(MaxShift(*wr, g_, n, 3));
      const std::string why = Allowed(n, static_cast<double>(k) * wmax * xmax < kExactLimit, k);
      if (!why.empty()) return why;
      const ValueId wf = ShiftedF32(n, 1, 3, /*channels_first=*/true);
      Finish(n, "Conv", {ShiftedF32(n, 0, 2), wf}, n.attrs);
      return std::string();
    }
    std::optional<Weights> wf = FoldWeights(*wc, wzp, /*last_axis=*/false);
    if (!wf.has_value()) return "a weight zero point of another size than M";
    bool exact = true;
    for (double s : wf->abs_sum) exact = exact && s * xmax < kExactLimit;
    std::string why = Allowed(n, exact, wf->terms);
    if (!why.empty()) return why;
    const ValueId wv = NewConstant(g_.value(w).name + ".f32", std::move(wf->data));
    Finish(n, "Conv", {ShiftedF32(n, 0, 2), wv}, n.attrs);
    return std::string();
  }

  std::string MatMulInteger(const ir::Node& n) {
    const ValueId a = n.inputs[0], b = n.inputs[1];
    const std::optional<Range> ar = RangeOf(g_.value(a).dtype);
    const std::optional<Range> br = RangeOf(g_.value(b).dtype);
    if (!ar.has_value() || !br.has_value()) return "A and B are not u8/i8";
    const Shape ash = g_.value(a).shape;
    const Shape bsh = g_.value(b).shape;
    if (ash.size() < 2 || bsh.size() < 2) return "a 1-D operand";
    if (n.has_input(2) && ir::NumElements(g_.value(n.inputs[2]).shape) != 1) {
      return "a per-row A zero point";
    }
    if (n.has_input(3)) {
      const int64_t count = ir::NumElements(g_.value(n.inputs[3]).shape);
      if (count != 1 && count != bsh.back()) return "a B zero point of another size than N";
    }
    const double amax = static_cast<double>(MaxShift(*ar, g_, n, 2));
    const int64_t k = bsh[bsh.size() - 2];
    const Tensor* bc = g_.constant(b);
    const Tensor* bzp = n.has_input(3) ? g_.constant(n.inputs[3]) : nullptr;
    std::optional<Weights> wf;
    bool exact = true;
    if (bc != nullptr && bsh.size() == 2 && (!n.has_input(3) || bzp != nullptr)) {
      wf = FoldWeights(*bc, bzp, /*last_axis=*/true);
      if (!wf.has_value()) return "a B zero point of another size than N";
      for (double s : wf->abs_sum) exact = exact && s * amax < kExactLimit;
    } else {
      // B is shifted at run time, like A.
      const double bmax = static_cast<double>(MaxShift(*br, g_, n, 3));
      exact = static_cast<double>(k) * amax * bmax < kExactLimit;
    }
    std::string why = Allowed(n, exact, k);
    if (!why.empty()) return why;
    const ValueId bf = wf.has_value()
                           ? NewConstant(g_.value(b).name + ".f32", std::move(wf->data))
                           : ShiftedF32(n, 1, 3);
    Finish(n, "MatMul", {ShiftedF32(n, 0, 2), bf}, {});
    return std::string();
  }

  // A scale input as f32 constant data, or nullptr when it is a runtime value.
  const Tensor* ConstantInput(const ir::Node& n, int slot) const {
    return n.has_input(slot) ? g_.constant(n.inputs[slot]) : nullptr;
  }

  std::string QLinearConv(const ir::Node& n) {
    const ValueId x = n.inputs[0], w = n.inputs[3];
    const std::optional<Range> xr = RangeOf(g_.value(x).dtype);
    const std::optional<Range> wr = RangeOf(g_.value(w).dtype);
    const ir::Value yv = g_.value(n.outputs[0]);
    if (!xr.has_value() || !wr.has_value() || !RangeOf(yv.dtype).has_value()) {
      return "x, w and y are not u8/i8";
    }
    if (!n.has_input(1) || !n.has_input(4) || !n.has_input(6)) return "a scale is missing";
    const Shape wsh = g_.value(w).shape;
    if (wsh.size() < 3) return "w has rank < 3";
    const int64_t m = wsh[0];
    auto count = [&](int slot) {
      return n.has_input(slot) ? ir::NumElements(g_.value(n.inputs[slot]).shape) : 1;
    };
    if (count(1) != 1 || count(6) != 1 || count(7) != 1) {
      return "per-channel input or output parameters";
    }
    const int64_t ws_count = count(4);
    if (ws_count != 1 && ws_count != m) return "a weight scale of another size than M";
    if (count(5) != 1 && count(5) != m) return "a weight zero point of another size than M";
    const Tensor* bias = ConstantInput(n, 8);
    if (n.has_input(8) && bias == nullptr) return "a runtime bias";
    const Tensor* wc = g_.constant(w);
    const Tensor* wzp = ConstantInput(n, 5);
    const bool constant_w = wc != nullptr && (!n.has_input(5) || wzp != nullptr);
    if (!constant_w && n.has_input(5) && wzp == nullptr && count(5) != 1) {
      return "a runtime per-channel weight zero point";
    }
    const double xmax = static_cast<double>(MaxShift(*xr, g_, n, 2));
    std::optional<Weights> wf;
    std::vector<double> bound(m);
    int64_t terms = ir::NumElements(wsh) / std::max<int64_t>(1, m);
    if (constant_w) {
      wf = FoldWeights(*wc, wzp, /*last_axis=*/false);
      if (!wf.has_value()) return "a weight zero point of another size than M";
      for (int64_t c = 0; c < m; ++c) bound[c] = wf->abs_sum[c] * xmax;
    } else {
      const double wmax = static_cast<double>(MaxShift(*wr, g_, n, 5));
      bound.assign(m, static_cast<double>(terms) * wmax * xmax);
    }
    for (int64_t c = 0; c < m; ++c) {
      if (bias != nullptr) bound[c] += std::abs(bias->GetAsDouble(c));
    }
    const Tensor* xs = ConstantInput(n, 1);
    const Tensor* ws = ConstantInput(n, 4);
    const Tensor* ys = ConstantInput(n, 6);
    const bool constant_scales = xs != nullptr && ws != nullptr && ys != nullptr;
    // Per channel: [1, M, 1, ...] against the conv's output.
    Shape scale_shape;
    if (ws_count > 1) {
      scale_shape.assign(wsh.size(), 1);
      scale_shape[1] = m;
    }
    Tensor qscale(DType::kF32, scale_shape);
    for (int64_t c = 0; c < m; ++c) {
      if (bound[c] < kExactLimit) {
        if (!constant_scales) continue;
      } else if (!constant_scales) {
        return "runtime scales and partial sums that may reach 2^24: the rounding cannot be "
               "bounded in output steps at compile time";
      }
      const double step =
          xs->GetAsDouble(0) * ws->GetAsDouble(ws_count > 1 ? c : 0) / ys->GetAsDouble(0);
      if (bound[c] >= kExactLimit &&
          static_cast<double>(terms) * std::ldexp(bound[c], -24) * std::abs(step) > 0.5) {
        return absl::StrCat("channel ", c, "'s f32 accumulation may round by more than half "
                            "an output step");
      }
      qscale.data<float>()[ws_count > 1 ? c : 0] = static_cast<float>(step);
    }
    const ValueId wv = constant_w
                           ? NewConstant(g_.value(w).name + ".f32", std::move(wf->data))
                           : ShiftedF32(n, 3, 5, /*channels_first=*/true);
    std::vector<ValueId> conv_in = {ShiftedF32(n, 0, 2), wv};
    if (bias != nullptr) {
      Tensor bf(DType::kF32, bias->shape());
      for (int64_t i = 0; i < bias->num_elements(); ++i) {
        bf.data<float>()[i] = static_cast<float>(bias->GetAsDouble(i));
      }
      conv_in.push_back(NewConstant(g_.value(n.inputs[8]).name + ".f32", std::move(bf)));
    }
    const ValueId acc = NewValue(yv.name + ".f32", DType::kF32, yv.shape);
    Emit(n, "Conv", std::move(conv_in), {acc}, n.attrs);
    ValueId qs = ir::kNoValue;
    if (constant_scales) {
      qs = NewConstant(yv.name + ".requant_scale", std::move(qscale));
    } else {
      // x_scale * w_scale / y_scale at run time, per channel on axis 1.
      const Shape ws_shape = g_.value(n.inputs[4]).shape;
      const ValueId prod = NewValue(yv.name + ".xw_scale", DType::kF32, ws_shape);
      Emit(n, "Mul", {n.inputs[1], n.inputs[4]}, {prod});
      qs = NewValue(yv.name + ".requant_scale", DType::kF32, ws_shape);
      Emit(n, "Div", {prod, n.inputs[6]}, {qs});
      if (ws_count > 1) {
        Tensor dims(DType::kI64, {static_cast<int64_t>(scale_shape.size())});
        for (size_t d = 0; d < scale_shape.size(); ++d) dims.data<int64_t>()[d] = scale_shape[d];
        const ValueId shape = NewConstant(yv.name + ".scale_shape", std::move(dims));
        const ValueId per_channel = NewValue(yv.name + ".requant_scale", DType::kF32, scale_shape);
        Emit(n, "Reshape", {qs, shape}, {per_channel});
        qs = per_channel;
      }
    }
    Requantize(n, acc, qs, 7);
    return std::string();
  }

  // The quantized output: QuantizeLinear(acc * scale, 1, y_zero_point) into
  // the node's output 0, per tensor (so any opset with the QLinear ops has
  // it). `zp_slot`: the node input holding y_zero_point (may be absent).
  void Requantize(const ir::Node& n, ValueId acc, ValueId scale, int zp_slot) {
    const ir::Value yv = g_.value(n.outputs[0]);
    const ValueId scaled = NewValue(yv.name + ".scaled", DType::kF32, yv.shape);
    Emit(n, "Mul", {acc, scale}, {scaled});
    ValueId qz = n.has_input(zp_slot) ? n.inputs[zp_slot] : ir::kNoValue;
    if (qz == ir::kNoValue) {
      Tensor zp(yv.dtype, Shape{});
      if (yv.dtype == DType::kU8) {
        zp.data<uint8_t>()[0] = 0;
      } else {
        zp.data<int8_t>()[0] = 0;
      }
      qz = NewConstant(yv.name + ".zero_point", std::move(zp));
    }
    Tensor unit(DType::kF32, g_.value(qz).shape);
    for (int64_t i = 0; i < unit.num_elements(); ++i) unit.data<float>()[i] = 1.0f;
    const ValueId one = NewConstant(yv.name + ".unit_scale", std::move(unit));
    Emit(n, "QuantizeLinear", {scaled, one, qz}, {n.outputs[0]});
  }

  // QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): the
  // MatMulInteger form, then requantized like QLinearConv (b's parameters
  // per tensor or per column of a 2-D B).
  std::string QLinearMatMul(const ir::Node& n) {
    const ValueId a = n.inputs[0], b = n.inputs[3];
    const std::optional<Range> ar = RangeOf(g_.value(a).dtype);
    const std::optional<Range> br = RangeOf(g_.value(b).dtype);
    const ir::Value yv = g_.value(n.outputs[0]);
    if (!ar.has_value() || !br.has_value() || !RangeOf(yv.dtype).has_value()) {
      return "a, b and y are not u8/i8";
    }
    for (int slot : {1, 2, 4, 5, 6, 7}) {
      if (!n.has_input(slot)) return "a scale or zero point is missing";
    }
    const Shape ash = g_.value(a).shape;
    const Shape bsh = g_.value(b).shape;
    if (ash.size() < 2 || bsh.size() < 2) return "a 1-D operand";
    auto count = [&](int slot) { return ir::NumElements(g_.value(n.inputs[slot]).shape); };
    if (count(1) != 1 || count(2) != 1 || count(6) != 1 || count(7) != 1) {
      return "per-row a or per-channel y parameters";
    }
    const int64_t cols = bsh.back(), k = bsh[bsh.size() - 2];
    if ((count(4) != 1 && (count(4) != cols || bsh.size() != 2)) ||
        (count(5) != 1 && (count(5) != cols || bsh.size() != 2))) {
      return "b parameters neither per tensor nor per column of a 2-D B";
    }
    const double amax = static_cast<double>(MaxShift(*ar, g_, n, 2));
    const Tensor* bc = g_.constant(b);
    const Tensor* bzp = g_.constant(n.inputs[5]);
    std::optional<Weights> wf;
    std::vector<double> bound(cols);
    if (bc != nullptr && bzp != nullptr && bsh.size() == 2) {
      wf = FoldWeights(*bc, bzp, /*last_axis=*/true);
      if (!wf.has_value()) return "a B zero point of another size than N";
      for (int64_t c = 0; c < cols; ++c) bound[c] = wf->abs_sum[c] * amax;
    } else {
      const double bmax = static_cast<double>(MaxShift(*br, g_, n, 5));
      bound.assign(cols, static_cast<double>(k) * bmax * amax);
    }
    const Tensor* as = g_.constant(n.inputs[1]);
    const Tensor* bs = g_.constant(n.inputs[4]);
    const Tensor* ys = g_.constant(n.inputs[6]);
    const bool constant_scales = as != nullptr && bs != nullptr && ys != nullptr;
    const bool per_column = count(4) > 1;
    Tensor qscale(DType::kF32, per_column ? Shape{cols} : Shape{});
    for (int64_t c = 0; c < cols; ++c) {
      if (!constant_scales) {
        if (bound[c] >= kExactLimit) {
          return "runtime scales and partial sums that may reach 2^24: the rounding cannot "
                 "be bounded in output steps at compile time";
        }
        continue;
      }
      const double step =
          as->GetAsDouble(0) * bs->GetAsDouble(per_column ? c : 0) / ys->GetAsDouble(0);
      if (bound[c] >= kExactLimit &&
          static_cast<double>(k) * std::ldexp(bound[c], -24) * std::abs(step) > 0.5) {
        return absl::StrCat("column ", c, "'s f32 accumulation may round by more than half "
                            "an output step");
      }
      qscale.data<float>()[per_column ? c : 0] = static_cast<float>(step);
    }
    const ValueId bf = wf.has_value()
                           ? NewConstant(g_.value(b).name + ".f32", std::move(wf->data))
                           : ShiftedF32(n, 3, 5);
    const ValueId acc = NewValue(yv.name + ".f32", DType::kF32, yv.shape);
    Emit(n, "MatMul", {ShiftedF32(n, 0, 2), bf}, {acc});
    ValueId qs = ir::kNoValue;
    if (constant_scales) {
      qs = NewConstant(yv.name + ".requant_scale", std::move(qscale));
    } else {
      const Shape bs_shape = g_.value(n.inputs[4]).shape;
      const ValueId prod = NewValue(yv.name + ".ab_scale", DType::kF32, bs_shape);
      Emit(n, "Mul", {n.inputs[1], n.inputs[4]}, {prod});
      qs = NewValue(yv.name + ".requant_scale", DType::kF32, bs_shape);
      Emit(n, "Div", {prod, n.inputs[6]}, {qs});
    }
    Requantize(n, acc, qs, 7);
    return std::string();
  }

  ir::Graph& g_;
  const IntegerCallOracle& oracle_;
  std::vector<int> uses_;
  std::map<ValueId, std::vector<int>> readers_;
  std::set<int> skip_;
  std::map<std::pair<ValueId, ValueId>, ValueId> shifted_;
  std::vector<ir::Node> out_;
};

}  // namespace

absl::StatusOr<bool> IntegerCallsInF32::Run(ir::Graph* graph) {
  kept_.clear();
  rewritten_ = 0;
  if (!oracle_) return false;
  Rewriter r(graph, oracle_);
  return r.Run(&kept_, &rewritten_);
}

}  // namespace kiln::passes
