// Numeric tests of OneDnnCall against kiln's reference interpreter: each call
// is also written as the equivalent ONNX nodes (Conv/ConvTranspose/MatMul/
// Gemm + the post-op ops), run by interp::Run, and compared.
#include "backends/onednn/onednn_call.h"

#include <algorithm>
#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/onednn/fused_call.h"
#include "backends/onednn/threads.h"
#include "gtest/gtest.h"
#include "interp/interpreter.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/loop/blocked_layout.h"
#include "ir/status_macros.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn {
namespace {

using ir::AttributeMap;
using ir::DType;
using ir::Shape;
using ir::Tensor;
using ir::ValueId;

Tensor Random(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

TensorSpec Spec(Shape shape) { return TensorSpec{DType::kF32, std::move(shape), {}}; }

// A reference graph under construction: graph inputs carry their data.
class RefGraph {
 public:
  ValueId Input(const Tensor& t) {
    ValueId id = graph_.AddValue(Name(), DType::kF32, t.shape());
    graph_.AddInput(id);
    inputs_.push_back(t);
    return id;
  }
  ValueId Const(const Tensor& t) {
    ValueId id = graph_.AddValue(Name(), t.dtype(), t.shape());
    graph_.SetConstant(id, t);
    return id;
  }
  ValueId Scalar(float v) { return Const(Tensor::Scalar<float>(v)); }
  ValueId Node(std::string op, std::vector<ValueId> inputs, AttributeMap attrs = {}) {
    ValueId out = graph_.AddUnshapedValue(Name(), DType::kF32);
    graph_.AddNode(std::move(op), std::move(inputs), {out}, std::move(attrs));
    return out;
  }
  Tensor Run(ValueId out) {
    graph_.AddOutput(out);
    absl::StatusOr<std::vector<Tensor>> r = interp::Run(graph_, inputs_);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || r->size() != 1) return Tensor();
    return (*r)[0];
  }

 private:
  std::string Name() { return absl::StrCat("v", next_++); }
  ir::Graph graph_;
  std::vector<Tensor> inputs_;
  int next_ = 0;
};

// ONNX nodes computing post-op `p` on `x`; `operand` is the binary operand's
// graph input (binary post-ops) or the residual's (sum).
ValueId AppendPostOp(RefGraph& g, ValueId x, const PostOp& p, ValueId operand) {
  switch (p.kind) {
    case PostOpKind::kRelu: return g.Node("Relu", {x});
    case PostOpKind::kLeakyRelu: return g.Node("LeakyRelu", {x}, {{"alpha", p.alpha}});
    case PostOpKind::kElu: return g.Node("Elu", {x}, {{"alpha", p.alpha}});
    case PostOpKind::kGeluErf: {
      ValueId e = g.Node("Erf", {g.Node("Div", {x, g.Scalar(std::sqrt(2.0f))})});
      ValueId half = g.Node("Mul", {g.Scalar(0.5f), g.Node("Add", {g.Scalar(1.0f), e})});
      return g.Node("Mul", {x, half});
    }
    case PostOpKind::kGeluTanh: {
      ValueId x3 = g.Node("Mul", {x, g.Node("Mul", {x, x})});
      ValueId inner = g.Node("Add", {x, g.Node("Mul", {g.Scalar(0.044715f), x3})});
      ValueId t = g.Node(
          "Tanh", {g.Node("Mul", {g.Scalar(0.7978845608f /* sqrt(2/pi) */), inner})});
      ValueId half = g.Node("Mul", {g.Scalar(0.5f), g.Node("Add", {g.Scalar(1.0f), t})});
      return g.Node("Mul", {x, half});
    }
    case PostOpKind::kSwish: return g.Node("Mul", {x, g.Node("Sigmoid", {x})});
    case PostOpKind::kSigmoid: return g.Node("Sigmoid", {x});
    case PostOpKind::kTanh: return g.Node("Tanh", {x});
    case PostOpKind::kHardSwish: return g.Node("HardSwish", {x});
    case PostOpKind::kHardSigmoid:
      return g.Node("HardSigmoid", {x}, {{"alpha", p.alpha}, {"beta", p.beta}});
    case PostOpKind::kClip:
      return g.Node("Clip", {x, g.Scalar(p.alpha), g.Scalar(p.beta)});
    case PostOpKind::kLinear:
      return g.Node("Add", {g.Node("Mul", {x, g.Scalar(p.alpha)}), g.Scalar(p.beta)});
    case PostOpKind::kAdd: return g.Node("Add", {x, operand});
    case PostOpKind::kSub: return g.Node("Sub", {x, operand});
    case PostOpKind::kMul: return g.Node("Mul", {x, operand});
    case PostOpKind::kSum:
      return g.Node("Add", {x, g.Node("Mul", {operand, g.Scalar(p.alpha)})});
  }
  return x;
}

void ExpectNear(const Tensor& want, const float* got, const std::string& what) {
  int bad = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const float w = want.data<float>()[i];
    const float tol = 1e-4f * std::fabs(w) + 1e-4f;
    if (!(std::fabs(got[i] - w) <= tol) && bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i]
                    << ", reference " << w;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.num_elements()
                    << " elements differ";
}

// One test case: the call, its data, and the main op as ONNX nodes.
struct Case {
  FusedCall call;
  Tensor src;      // the src buffer as laid out in memory
  std::optional<Tensor> weights;  // constant weights buffer (nullopt: runtime)
  Tensor runtime_weights;         // kMatMul without constant weights
  std::optional<Tensor> bias;
  std::vector<Tensor> operands;   // one per binary post-op, in order
  std::optional<Tensor> residual; // for a sum post-op
  // Builds the op (+ bias) from the src input, the weights value and the
  // bias constant (kNoValue when absent).
  std::function<ValueId(RefGraph&, ValueId src, ValueId weights, ValueId bias)> onnx;
};

Tensor Reference(const Case& c) {
  RefGraph g;
  ValueId x = g.Input(c.src);
  ValueId w = c.weights ? g.Const(*c.weights) : g.Input(c.runtime_weights);
  ValueId b = c.bias ? g.Const(*c.bias) : ir::kNoValue;
  std::vector<ValueId> operands;
  for (const Tensor& t : c.operands) operands.push_back(g.Input(t));
  ValueId residual = c.residual ? g.Input(*c.residual) : ir::kNoValue;
  ValueId y = c.onnx(g, x, w, b);
  size_t next_operand = 0;
  for (const PostOp& p : c.call.post_ops) {
    ValueId operand = ir::kNoValue;
    if (p.is_binary()) operand = operands[next_operand++];
    if (p.kind == PostOpKind::kSum) operand = residual;
    y = AppendPostOp(g, y, p, operand);
  }
  return g.Run(y);
}

// Runs `c` through OneDnnCall; returns the dst buffer.
absl::StatusOr<Tensor> RunOneDnn(const Case& c, const OneDnnCallOptions& options,
                                 std::unique_ptr<OneDnnCall>* out_call = nullptr) {
  const Tensor* bias = c.bias ? &*c.bias : nullptr;
  const Tensor* weights = c.weights ? &*c.weights : nullptr;
  absl::StatusOr<std::unique_ptr<OneDnnCall>> call =
      OneDnnCall::Create(c.call, weights, bias, options);
  if (!call.ok()) return call.status();
  Tensor dst(DType::kF32, c.call.dst.shape);
  if (c.residual) {
    std::memcpy(dst.raw_data(), c.residual->raw_data(), dst.byte_size());
  }
  std::vector<const void*> operands;
  for (const Tensor& t : c.operands) operands.push_back(t.raw_data());
  absl::Status s = weights ? (*call)->Execute(c.src.raw_data(), operands, dst.raw_data())
                           : (*call)->Execute(c.src.raw_data(),
                                              c.runtime_weights.raw_data(), operands,
                                              dst.raw_data());
  if (!s.ok()) return s;
  if (out_call) *out_call = std::move(*call);
  return dst;
}

// Checks `c` against the reference with prepacking on and off, with oneDNN
// choosing the activation layouts and on the caller's layouts.
void Check(const Case& c) {
  SCOPED_TRACE(c.call.ToString());
  const Tensor want = Reference(c);
  ASSERT_EQ(want.shape(), c.call.dst.shape);
  // Numerics of every implementation oneDNN picks, the reference one included.
  using LAC = OneDnnCallOptions::LinearAsConv;
  std::vector<OneDnnCallOptions> configs = {
      {true, true, true},  {true, false, true},         {false, true, true},
      {false, false, true}, {true, true, true, LAC::kAlways}, {true, true, true, LAC::kNever}};
  for (const OneDnnCallOptions& o : configs) {
    const std::string what = absl::StrCat(
        c.call.ToString(), o.prepack_weights ? " prepacked" : " plain weights",
        o.any_activation_layout ? " any layout" : "",
        o.linear_as_conv == LAC::kAlways   ? " linear as conv"
        : o.linear_as_conv == LAC::kNever ? " linear as matmul"
                                          : "");
    std::unique_ptr<OneDnnCall> call;
    absl::StatusOr<Tensor> got = RunOneDnn(c, o, &call);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    ExpectNear(want, got->data<float>(), what);
    if (c.weights && o.prepack_weights) {
      EXPECT_GT(call->prepacked_bytes(), 0) << what;
    } else {
      EXPECT_EQ(call->prepacked_bytes(), 0) << what;
    }
    EXPECT_FALSE(call->weights_layout().empty());
    if (!o.any_activation_layout) {
      EXPECT_EQ(call->reorders_per_call(), 0) << what;
    }
  }
}

// ---- Conv.

struct ConvSetup {
  Shape src;            // N, C, spatial...
  int64_t out_channels;
  Shape kernel;
  ConvParams params;
  bool bias = true;
};

Case ConvCase(const ConvSetup& s, std::vector<PostOp> post_ops, uint32_t seed) {
  Case c;
  c.call.kind = CallKind::kConv;
  c.call.src = Spec(s.src);
  Shape w = {s.out_channels, s.src[1] / s.params.groups};
  w.insert(w.end(), s.kernel.begin(), s.kernel.end());
  c.call.weights = Spec(w);
  if (s.bias) c.call.bias = Spec({s.out_channels});
  c.call.conv = s.params;
  c.call.post_ops = std::move(post_ops);
  absl::StatusOr<Shape> dst = ComputeDstShape(c.call);
  EXPECT_TRUE(dst.ok()) << dst.status();
  c.call.dst = Spec(dst.ok() ? *dst : Shape{});
  c.src = Random(s.src, seed);
  c.weights = Random(w, seed + 1);
  if (s.bias) c.bias = Random({s.out_channels}, seed + 2);
  const int spatial = static_cast<int>(s.src.size()) - 2;
  ConvParams p = *NormalizeConvParams(s.params, spatial);
  c.onnx = [p](RefGraph& g, ValueId x, ValueId w, ValueId b) {
    std::vector<int64_t> pads = p.pads_begin;
    pads.insert(pads.end(), p.pads_end.begin(), p.pads_end.end());
    std::vector<ValueId> in = {x, w};
    if (b != ir::kNoValue) in.push_back(b);
    return g.Node("Conv", in,
                  {{"strides", p.strides}, {"dilations", p.dilations},
                   {"pads", pads}, {"group", p.groups}});
  };
  return c;
}

// Gives each binary post-op of `c` a random operand and a sum a residual.
void AddPostOpData(Case& c, uint32_t seed) {
  for (const PostOp& p : c.call.post_ops) {
    if (p.is_binary()) c.operands.push_back(Random(p.operand.shape, seed++));
    if (p.kind == PostOpKind::kSum) c.residual = Random(c.call.dst.shape, seed++);
  }
}

ConvParams Params(std::vector<int64_t> strides, std::vector<int64_t> pads_begin,
                  std::vector<int64_t> pads_end, int64_t groups = 1,
                  std::vector<int64_t> dilations = {}) {
  ConvParams p;
  p.strides = std::move(strides);
  p.pads_begin = std::move(pads_begin);
  p.pads_end = std::move(pads_end);
  p.groups = groups;
  p.dilations = std::move(dilations);
  return p;
}

TEST(OneDnnCallConv, OddChannels3x3BiasRelu) {
  Check(ConvCase({{2, 3, 9, 7}, 5, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                 {PostOp::Relu()}, 10));
}

TEST(OneDnnCallConv, GroupedStride2LeakyRelu) {
  Check(ConvCase({{1, 6, 11, 11}, 9, {3, 3}, Params({2, 2}, {1, 1}, {1, 1}, 3)},
                 {PostOp::LeakyRelu(0.1f)}, 20));
}

TEST(OneDnnCallConv, DepthwiseRelu6) {
  Check(ConvCase({{1, 16, 10, 10}, 16, {3, 3}, Params({1, 1}, {1, 1}, {1, 1}, 16)},
                 {PostOp::Relu6()}, 30));
}

TEST(OneDnnCallConv, DilatedAsymmetricPadsElu) {
  Check(ConvCase({{1, 4, 12, 9}, 6, {3, 2},
                  Params({1, 2}, {0, 1}, {2, 0}, 1, {2, 3})},
                 {PostOp::Elu(0.5f)}, 40));
}

TEST(OneDnnCallConv, OneByOneNoBiasSigmoid) {
  ConvSetup s{{2, 32, 5, 5}, 17, {1, 1}, Params({1, 1}, {0, 0}, {0, 0})};
  s.bias = false;
  Check(ConvCase(s, {PostOp::Sigmoid()}, 50));
}

TEST(OneDnnCallConv, Conv1dTanh) {
  Check(ConvCase({{2, 5, 20}, 7, {5}, Params({2}, {2}, {1})}, {PostOp::Tanh()}, 60));
}

TEST(OneDnnCallConv, Conv3dHardSwish) {
  Check(ConvCase({{1, 3, 5, 6, 7}, 4, {3, 3, 3}, Params({1, 1, 1}, {1, 1, 1}, {1, 1, 1})},
                 {PostOp::HardSwish()}, 70));
}

// A 3-D conv over one depth slice (rivagan's [1, 32, 1, 128, 128] with
// 1x11x11 kernels) with a full-size binary mul: at rank 5 on one thread
// oneDNN 2.6 has only its reference implementation for it; without the unit
// depth the call is a 2-D conv, which its gemm-based kernel runs.
TEST(OneDnnCallConv, UnitDepthConvWithFullMulRunsOptimized) {
  const int threads = NumThreads();
  ASSERT_TRUE(SetNumThreads(1).ok());
  Case c = ConvCase({{1, 16, 1, 24, 24}, 16, {1, 11, 11},
                     Params({1, 1, 1}, {0, 5, 5}, {0, 5, 5})},
                    {PostOp::Mul(Spec({1, 16, 1, 24, 24}))}, 95);
  AddPostOpData(c, 96);
  Check(c);
  std::unique_ptr<OneDnnCall> call;
  absl::StatusOr<Tensor> got = RunOneDnn(c, {}, &call);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(absl::StartsWith(call->impl_name(), "ref")) << call->impl_name();
  ExpectNear(Reference(c), got->data<float>(), c.call.ToString());
  ASSERT_TRUE(SetNumThreads(threads).ok());
}

// [N, C, H, 1] with a kx1 kernel (magika's 5x1 conv): the call runs as the
// 1-D conv over H, whose kernels block over its 508 output points instead
// of over a width of 1; its layouts then have three dims.
TEST(OneDnnCallConv, WidthOneConvRunsAsConv1d) {
  Case c = ConvCase({{1, 32, 40, 1}, 48, {5, 1}, Params({1, 1}, {0, 0}, {0, 0})},
                    {PostOp::Relu()}, 97);
  Check(c);
  for (const bool any : {true, false}) {
    OneDnnCallOptions o;
    o.any_activation_layout = any;
    std::unique_ptr<OneDnnCall> call;
    ASSERT_TRUE(RunOneDnn(c, o, &call).ok());
    // "nCw16c" / "nwc": the dims before the inner block.
    const std::string layout = call->src_layout();
    EXPECT_EQ(std::min(layout.size(), layout.find_first_of("0123456789")), 3u)
        << layout << " on " << call->impl_name();
    EXPECT_FALSE(absl::StartsWith(call->impl_name(), "ref")) << call->impl_name();
  }
  // The layout pass's question gets the 1-D conv's blocks (or channels-last
  // on AVX-512, brgconv's nwc), which are the same bytes in the 4-D buffers.
  absl::StatusOr<ActivationBlocks> blocks = OneDnnCall::PreferredActivationBlocks(c.call);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_NE(blocks->dst, 0);
}

TEST(OneDnnCallConv, ResidualSumThenRelu) {
  Case c = ConvCase({{1, 16, 8, 8}, 16, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Sum(), PostOp::Relu()}, 80);
  AddPostOpData(c, 81);
  EXPECT_EQ(c.call.ToString(), "conv[3x3 s1 g1 p1]+bias+sum+relu");
  Check(c);
}

// Runs `c` with its src and dst (and the residual) stored nChw16c, as the
// layout pass leaves them for kiln's convs; returns the dst in NCHW.
absl::StatusOr<Tensor> RunBlocked16(Case c, const OneDnnCallOptions& options,
                                    std::unique_ptr<OneDnnCall>* out_call) {
  const int64_t out_channels = c.call.dst.shape[1];
  c.call.src.channel_block = c.call.dst.channel_block = 16;
  KILN_ASSIGN_OR_RETURN(c.src, ir::loop::ToBlocked(c.src, 16));
  if (c.residual) {
    KILN_ASSIGN_OR_RETURN(*c.residual, ir::loop::ToBlocked(*c.residual, 16));
  }
  const Tensor* bias = c.bias ? &*c.bias : nullptr;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<OneDnnCall> call,
                        OneDnnCall::Create(c.call, &*c.weights, bias, options));
  KILN_ASSIGN_OR_RETURN(Tensor dst, c.residual
                                         ? absl::StatusOr<Tensor>(*c.residual)
                                         : ir::loop::ToBlocked(Tensor(DType::kF32, c.call.dst.shape), 16));
  KILN_RETURN_IF_ERROR(call->Execute(c.src.raw_data(), {}, dst.raw_data()));
  *out_call = std::move(call);
  return ir::loop::FromBlocked(dst, out_channels);
}

// Whether this CPU (under any ISA cap) has oneDNN 2.6's Winograd kernels:
// AVX-512 (avx512_core and above); AVX2 has none.
bool CpuHasWinograd() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
}

// A 3x3 stride-1 conv with 28x28 outputs and 64 to 80 channels (like
// resnet's second stage) on nChw16c buffers runs on a Winograd kernel by the
// rule (oneDNN's where the CPU has one, else kiln's), within the same
// tolerance of the reference as the direct kernel; kDirect keeps it direct;
// fewer channels are Winograd only when asked; a 1x1 conv never.
TEST(OneDnnCallConv, Winograd3x3AtLargeOutputsByRule) {
  using Algo = OneDnnCallOptions::ConvAlgorithm;
  Case c = ConvCase({{1, 64, 28, 28}, 80, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Sum(), PostOp::Relu()}, 87);
  AddPostOpData(c, 88);
  Case small = ConvCase({{1, 16, 8, 8}, 16, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                        {PostOp::Relu()}, 89);
  Case narrow = ConvCase({{1, 128, 28, 28}, 32, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                         {}, 91);
  for (const Case* k : {&c, &small, &narrow}) {
    const bool large = k == &c;
    const Tensor want = Reference(*k);
    for (const Algo algo : {Algo::kRule, Algo::kDirect, Algo::kWinograd}) {
      OneDnnCallOptions o;
      o.conv_algorithm = algo;
      std::unique_ptr<OneDnnCall> call;
      absl::StatusOr<Tensor> got = RunBlocked16(*k, o, &call);
      ASSERT_TRUE(got.ok()) << got.status();
      const bool wino = absl::StrContains(call->impl_name(), "wino");
      const bool want_wino = algo == Algo::kWinograd || (algo == Algo::kRule && large);
      if (wino) {
        EXPECT_EQ(absl::StartsWith(call->impl_name(), "kiln:wino"), !CpuHasWinograd())
            << call->impl_name();
      }
      EXPECT_EQ(wino, want_wino) << call->impl_name() << " " << k->call.ToString() << " "
                                 << k->call.weights.shape[0] << "x" << k->call.weights.shape[1];
      // nChw16c is AVX-512's own block (AVX2 kernels reorder it to nChw8c).
      if (CpuHasWinograd()) EXPECT_EQ(call->reorders_per_call(), 0) << call->impl_name();
      ExpectNear(want, got->data<float>(), call->impl_name());
    }
  }
  Case one = ConvCase({{1, 16, 28, 28}, 16, {1, 1}, Params({1, 1}, {0, 0}, {0, 0})}, {}, 90);
  OneDnnCallOptions o;
  o.conv_algorithm = Algo::kWinograd;
  std::unique_ptr<OneDnnCall> call;
  EXPECT_EQ(RunBlocked16(one, o, &call).status().code(), absl::StatusCode::kUnimplemented);
}

// A wide-padded conv to few channels with a full-size operand (rivagan's
// last conv: 32->3 11x11, tanh, then + the input frame), its src blocked by
// the caller and its dst plain: the direct kernel takes it on a padded src
// and a blocked dst only with the operand in the dst's layout, so the call
// reorders the operand per call, reading it afresh each time.
TEST(OneDnnCallConv, WidePaddingWithAFullSizeOperandRunsOnADirectKernel) {
  Case c = ConvCase({{1, 32, 20, 20}, 3, {11, 11}, Params({1, 1}, {5, 5}, {5, 5})},
                    {PostOp::Tanh(), PostOp::Add(Spec({1, 3, 20, 20}))}, 97);
  AddPostOpData(c, 98);
  Check(c);
  c.call.src.channel_block = 8;
  absl::StatusOr<Tensor> src8 = ir::loop::ToBlocked(c.src, 8);
  ASSERT_TRUE(src8.ok()) << src8.status();
  absl::StatusOr<std::unique_ptr<OneDnnCall>> call =
      OneDnnCall::Create(c.call, &*c.weights, &*c.bias);
  ASSERT_TRUE(call.ok()) << call.status();
  const std::string impl = (*call)->impl_name();
  EXPECT_FALSE(absl::StrContains(impl, "gemm") || absl::StartsWith(impl, "ref")) << impl;
  for (uint32_t round = 0; round < 2; ++round) {
    if (round == 1) c.operands[0] = Random({1, 3, 20, 20}, 99);
    const Tensor want = Reference(c);
    Tensor dst(DType::kF32, c.call.dst.shape);
    const void* operand = c.operands[0].raw_data();
    ASSERT_TRUE((*call)->Execute(src8->raw_data(), {&operand, 1}, dst.raw_data()).ok());
    ExpectNear(want, dst.data<float>(), impl);
  }
}

// Wide padding: oneDNN 2.6's direct AVX2 kernel refuses a left pad wider
// than its register block (rivagan's 11x11 convs with pad 5, basic-pitch's
// 3x39 with pad 19, a dilated 3x3 with pad 4); the call then pads a copy of
// its src explicitly and runs the unpadded conv on a direct kernel, never
// the gemm-based one. Checked against the reference interpreter with a
// sum, on the caller's layout and on nChw16c buffers.
TEST(OneDnnCallConv, WidePaddingRunsOnADirectKernel) {
  Case wide = ConvCase({{1, 8, 20, 24}, 16, {11, 11}, Params({1, 1}, {5, 5}, {5, 5})},
                       {PostOp::Tanh()}, 92);
  Case strip = ConvCase({{1, 8, 12, 50}, 8, {3, 39}, Params({1, 1}, {1, 19}, {1, 19})},
                        {PostOp::Sum(), PostOp::Relu()}, 93);
  AddPostOpData(strip, 94);
  Case dilated = ConvCase(
      {{1, 16, 18, 18}, 16, {3, 3}, Params({1, 1}, {4, 4}, {4, 4}, 1, {4, 4})},
      {PostOp::Relu()}, 95);
  Case asymmetric = ConvCase({{1, 8, 16, 16}, 8, {7, 7}, Params({2, 2}, {4, 2}, {2, 4})},
                             {}, 96);
  for (const Case* c : {&wide, &strip, &dilated, &asymmetric}) {
    SCOPED_TRACE(c->call.ToString());
    Check(*c);
    const Tensor want = Reference(*c);
    std::unique_ptr<OneDnnCall> call;
    absl::StatusOr<Tensor> got = RunOneDnn(*c, OneDnnCallOptions{}, &call);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(want, got->data<float>(), call->impl_name());
    EXPECT_FALSE(absl::StrContains(call->impl_name(), "gemm") ||
                 absl::StartsWith(call->impl_name(), "ref"))
        << call->impl_name();
    // Again on the same call, after a src of large values: the padded
    // copy's border stays zero.
    Tensor big = c->src;
    for (int64_t i = 0; i < big.num_elements(); ++i) big.data<float>()[i] = 1e3f;
    Tensor dst(DType::kF32, c->call.dst.shape);
    std::vector<const void*> operands;
    for (const Tensor& t : c->operands) operands.push_back(t.raw_data());
    ASSERT_TRUE(call->Execute(big.raw_data(), operands, dst.raw_data()).ok());
    if (c->residual) std::memcpy(dst.raw_data(), c->residual->raw_data(), dst.byte_size());
    ASSERT_TRUE(call->Execute(c->src.raw_data(), operands, dst.raw_data()).ok());
    ExpectNear(want, dst.data<float>(), call->impl_name());
    absl::StatusOr<Tensor> blocked = RunBlocked16(*c, OneDnnCallOptions{}, &call);
    ASSERT_TRUE(blocked.ok()) << blocked.status();
    ExpectNear(want, blocked->data<float>(), call->impl_name());
  }
}

TEST(OneDnnCallConv, ScaledSum) {
  Case c = ConvCase({{1, 8, 6, 6}, 8, {1, 1}, Params({1, 1}, {0, 0}, {0, 0})},
                    {PostOp::Sum(0.5f)}, 85);
  AddPostOpData(c, 86);
  Check(c);
}

TEST(OneDnnCallConv, ChainBroadcastAddSwishFullMul) {
  Case c = ConvCase({{2, 8, 7, 7}, 12, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Add(Spec({1, 12, 1, 1})), PostOp::Swish(),
                     PostOp::Mul(Spec({2, 12, 7, 7}))},
                    90);
  AddPostOpData(c, 91);
  Check(c);
}

TEST(OneDnnCallConv, ChannelsLastBuffers) {
  // The caller's src/dst are NHWC: the same logical conv, described by strides.
  const Shape x = {2, 16, 6, 5};
  Case c = ConvCase({x, 24, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Relu()}, 100);
  const Tensor nchw = c.src;
  c.call.src.strides = ChannelsLastStrides(x);
  c.call.dst.strides = ChannelsLastStrides(c.call.dst.shape);
  // The buffer holds x in NHWC order.
  Tensor nhwc(DType::kF32, {2, 6, 5, 16});
  for (int n = 0; n < 2; ++n)
    for (int ch = 0; ch < 16; ++ch)
      for (int h = 0; h < 6; ++h)
        for (int w = 0; w < 5; ++w)
          nhwc.data<float>()[((n * 6 + h) * 5 + w) * 16 + ch] =
              nchw.data<float>()[((n * 16 + ch) * 6 + h) * 5 + w];
  c.src = nhwc;
  auto conv = c.onnx;
  c.onnx = [conv](RefGraph& g, ValueId xin, ValueId w, ValueId b) {
    ValueId as_nchw = g.Node("Transpose", {xin}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
    ValueId y = conv(g, as_nchw, w, b);
    return g.Node("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  };
  // Compare in NHWC: the reference output is transposed back, and its shape
  // is the NHWC buffer's.
  const Tensor want = Reference(c);
  for (bool prepack : {true, false}) {
    OneDnnCallOptions o;
    o.prepack_weights = prepack;
    o.allow_reference_impl = true;  // plain oihw weights on nhwc: ref only
    absl::StatusOr<Tensor> got = RunOneDnn(c, o);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectNear(want, got->data<float>(), "nhwc conv");
  }
}

// Every eltwise post-op kind on one small conv.
class EltwisePostOpTest : public ::testing::TestWithParam<PostOp> {};

TEST_P(EltwisePostOpTest, MatchesReference) {
  Check(ConvCase({{1, 5, 6, 6}, 7, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                 {GetParam()}, 110));
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, EltwisePostOpTest,
    ::testing::Values(PostOp::Relu(), PostOp::LeakyRelu(0.2f), PostOp::Elu(1.0f),
                      PostOp::GeluErf(), PostOp::GeluTanh(), PostOp::Swish(),
                      PostOp::Sigmoid(), PostOp::Tanh(), PostOp::HardSwish(),
                      PostOp::HardSigmoid(0.2f, 0.5f), PostOp::Clip(-0.5f, 0.25f),
                      PostOp::Relu6(), PostOp::Linear(2.0f, -0.5f)),
    [](const ::testing::TestParamInfo<PostOp>& info) {
      std::string name;
      for (char ch : info.param.ToString()) {
        if (std::isalnum(static_cast<unsigned char>(ch))) name.push_back(ch);
      }
      return absl::StrCat(info.index, "_", name);
    });

// Binary post-ops with every broadcast pattern a rewriter will produce.
TEST(OneDnnCallConv, BinaryBroadcasts) {
  Case c = ConvCase({{2, 6, 5, 5}, 6, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Sub(Spec({6, 1, 1})), PostOp::Add(Spec({1})),
                     PostOp::Mul(Spec({2, 6, 5, 5})), PostOp::Add(Spec({1, 1, 1, 5}))},
                    120);
  AddPostOpData(c, 121);
  Check(c);
}

// ---- ConvTranspose.

Case DeconvCase(Shape src, int64_t out_channels, Shape kernel, ConvParams params,
                std::vector<PostOp> post_ops, uint32_t seed) {
  Case c;
  c.call.kind = CallKind::kConvTranspose;
  c.call.src = Spec(src);
  Shape w = {src[1], out_channels / params.groups};
  w.insert(w.end(), kernel.begin(), kernel.end());
  c.call.weights = Spec(w);
  c.call.bias = Spec({out_channels});
  c.call.conv = params;
  c.call.post_ops = std::move(post_ops);
  absl::StatusOr<Shape> dst = ComputeDstShape(c.call);
  EXPECT_TRUE(dst.ok()) << dst.status();
  c.call.dst = Spec(dst.ok() ? *dst : Shape{});
  c.src = Random(src, seed);
  c.weights = Random(w, seed + 1);
  c.bias = Random({out_channels}, seed + 2);
  ConvParams p = *NormalizeConvParams(params, static_cast<int>(src.size()) - 2);
  c.onnx = [p](RefGraph& g, ValueId x, ValueId w, ValueId b) {
    std::vector<int64_t> pads = p.pads_begin;
    pads.insert(pads.end(), p.pads_end.begin(), p.pads_end.end());
    return g.Node("ConvTranspose", {x, w, b},
                  {{"strides", p.strides}, {"dilations", p.dilations},
                   {"pads", pads}, {"group", p.groups},
                   {"output_padding", p.output_padding}});
  };
  return c;
}

TEST(OneDnnCallConvTranspose, Stride2OutputPaddingRelu) {
  ConvParams p = Params({2, 2}, {1, 1}, {1, 1});
  p.output_padding = {1, 1};
  Case c = DeconvCase({1, 5, 6, 6}, 3, {3, 3}, p, {PostOp::Relu()}, 200);
  EXPECT_EQ(c.call.dst.shape, (Shape{1, 3, 12, 12}));
  Check(c);
}

TEST(OneDnnCallConvTranspose, GroupedDilatedGeluTanh) {
  Case c = DeconvCase({2, 4, 5, 7}, 6, {2, 3},
                      Params({1, 2}, {0, 1}, {1, 0}, 2, {2, 1}),
                      {PostOp::GeluTanh()}, 210);
  Check(c);
}

// Unit dims of a ConvTranspose drop the same way; a stride on a unit dim
// changes nothing there.
TEST(OneDnnCallConvTranspose, UnitHeightStride2) {
  Case c = DeconvCase({1, 6, 1, 7}, 5, {1, 2}, Params({3, 2}, {0, 0}, {0, 0}),
                      {PostOp::Sigmoid()}, 225);
  EXPECT_EQ(c.call.dst.shape, (Shape{1, 5, 1, 14}));
  Check(c);
}

TEST(OneDnnCallConvTranspose, ResidualSum) {
  Case c = DeconvCase({1, 8, 4, 4}, 8, {2, 2}, Params({2, 2}, {0, 0}, {0, 0}),
                      {PostOp::Sum(), PostOp::Tanh()}, 220);
  AddPostOpData(c, 221);
  Check(c);
}

// ---- MatMul.

// src [..., M, K] x weights [..., K, N]; either stored transposed when asked.
Case MatMulCase(Shape a, Shape b, bool transpose_a, bool transpose_b,
                bool constant_weights, std::optional<Shape> bias,
                std::vector<PostOp> post_ops, uint32_t seed) {
  Case c;
  c.call.kind = CallKind::kMatMul;
  c.call.src = Spec(a);
  c.call.weights = Spec(b);
  if (transpose_a) c.call.src.strides = TransposedLastTwoStrides(a);
  if (transpose_b) c.call.weights.strides = TransposedLastTwoStrides(b);
  if (bias) c.call.bias = Spec(*bias);
  c.call.post_ops = std::move(post_ops);
  absl::StatusOr<Shape> dst = ComputeDstShape(c.call);
  EXPECT_TRUE(dst.ok()) << dst.status();
  c.call.dst = Spec(dst.ok() ? *dst : Shape{});
  auto stored = [](Shape s, bool t) {
    if (t) std::swap(s[s.size() - 1], s[s.size() - 2]);
    return s;
  };
  c.src = Random(stored(a, transpose_a), seed);
  Tensor w = Random(stored(b, transpose_b), seed + 1);
  if (constant_weights) {
    c.weights = w;
  } else {
    c.runtime_weights = w;
  }
  if (bias) c.bias = Random(*bias, seed + 2);
  auto perm = [](size_t rank) {
    std::vector<int64_t> p(rank);
    for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(i);
    std::swap(p[rank - 1], p[rank - 2]);
    return p;
  };
  c.onnx = [=](RefGraph& g, ValueId x, ValueId w, ValueId bv) {
    if (transpose_a) x = g.Node("Transpose", {x}, {{"perm", perm(a.size())}});
    if (transpose_b) w = g.Node("Transpose", {w}, {{"perm", perm(b.size())}});
    ValueId y = g.Node("MatMul", {x, w});
    return bv == ir::kNoValue ? y : g.Node("Add", {y, bv});
  };
  return c;
}

TEST(OneDnnCallMatMul, PlainBiasGeluErf) {
  Case c = MatMulCase({33, 48}, {48, 40}, false, false, true, Shape{40},
                      {PostOp::GeluErf()}, 300);
  EXPECT_EQ(c.call.ToString(), "matmul[33x48x40]+bias+gelu_erf");
  Check(c);
}

TEST(OneDnnCallMatMul, BatchedBroadcastWeightsHardSigmoid) {
  Case c = MatMulCase({2, 3, 4, 5}, {3, 5, 6}, false, false, true, Shape{1, 6},
                      {PostOp::HardSigmoid(0.3f, 0.4f)}, 310);
  EXPECT_EQ(c.call.dst.shape, (Shape{2, 3, 4, 6}));
  Check(c);
}

TEST(OneDnnCallMatMul, TransposedOperandsLinear) {
  Case c = MatMulCase({2, 7, 9}, {2, 9, 5}, true, true, true, std::nullopt,
                      {PostOp::Linear(2.0f, -1.0f)}, 320);
  EXPECT_EQ(c.call.ToString(), "matmul[2*7x9x5 tA tB]+linear(2,-1)");
  Check(c);
}

TEST(OneDnnCallMatMul, RuntimeWeightsBroadcastSrc) {
  // Activation x activation (attention-like): src broadcasts over the batch.
  Case c = MatMulCase({1, 4, 8}, {3, 8, 5}, false, true, false, std::nullopt,
                      {PostOp::Swish()}, 330);
  Check(c);
}

TEST(OneDnnCallMatMul, FullAddAndRowBroadcastSub) {
  Case c = MatMulCase({2, 6, 10}, {10, 12}, false, false, true, Shape{12},
                      {PostOp::Add(Spec({2, 6, 12})), PostOp::Sub(Spec({12})),
                       PostOp::Relu()},
                      340);
  AddPostOpData(c, 341);
  Check(c);
}

TEST(OneDnnCallMatMul, ResidualSum) {
  Case c = MatMulCase({16, 32}, {32, 24}, false, false, true, Shape{24},
                      {PostOp::Sum()}, 350);
  AddPostOpData(c, 351);
  Check(c);
}

// Weights without a batch over a batched src: one 2-D matmul with the batch
// folded into the rows (2-D src/dst), whatever the operands do as
// long as they broadcast over all rows or span them like the dst; weights
// with a batch keep the batched form. Both are right.
TEST(OneDnnCallMatMul, BatchFoldsIntoRowsWhenOperandsAllow) {
  struct Form {
    Shape weights;
    bool transpose_b;
    std::vector<PostOp> post_ops;
    bool folds;
  };
  const std::vector<Form> forms = {
      {{6, 7}, false, {PostOp::Add(Spec({2, 3, 5, 7})), PostOp::Mul(Spec({1, 1, 1, 7}))}, true},
      {{1, 6, 7}, true, {PostOp::Sum(), PostOp::GeluErf()}, true},
      {{3, 6, 7}, false, {PostOp::Relu()}, false}};
  uint32_t seed = 360;
  for (const Form& f : forms) {
    Case c = MatMulCase({2, 3, 5, 6}, f.weights, false, f.transpose_b, true, Shape{7},
                        f.post_ops, seed);
    AddPostOpData(c, seed + 5);
    seed += 10;
    SCOPED_TRACE(c.call.ToString());
    Check(c);
    std::unique_ptr<OneDnnCall> call;
    absl::StatusOr<Tensor> got = RunOneDnn(c, {}, &call);
    ASSERT_TRUE(got.ok()) << got.status();
    // Folded: a 2-D matmul ("ab"), or on gemm hosts its 1x1-conv form.
    if (f.folds) {
      EXPECT_TRUE(call->src_layout() == "ab" || call->src_layout() == "nhwc")
          << call->src_layout();
    } else {
      EXPECT_EQ(call->src_layout(), "abcd");
    }
    EXPECT_EQ(call->call().ToString(), c.call.ToString()) << "the caller's call is kept";
  }
  // A transposed src ([..., K, M] stored) does not nest: batched, and right.
  Case t = MatMulCase({2, 5, 6}, {6, 7}, true, false, true, Shape{7}, {}, 400);
  Check(t);
  std::unique_ptr<OneDnnCall> call;
  ASSERT_TRUE(RunOneDnn(t, {}, &call).ok());
  EXPECT_EQ(call->src_layout().size(), 3u) << call->src_layout();
}

// ---- Inner product (Gemm / Linear).

Case LinearCase(int64_t n, int64_t ic, int64_t oc, bool weights_oi,
                std::vector<PostOp> post_ops, uint32_t seed) {
  Case c;
  c.call.kind = CallKind::kInnerProduct;
  c.call.src = Spec({n, ic});
  c.call.weights = Spec({oc, ic});
  // Gemm transB=0 stores [IC, OC]: the logical [OC, IC] seen transposed.
  if (!weights_oi) c.call.weights.strides = {1, oc};
  c.call.bias = Spec({oc});
  c.call.dst = Spec({n, oc});
  c.call.post_ops = std::move(post_ops);
  c.src = Random({n, ic}, seed);
  c.weights = Random(weights_oi ? Shape{oc, ic} : Shape{ic, oc}, seed + 1);
  c.bias = Random({oc}, seed + 2);
  c.onnx = [weights_oi](RefGraph& g, ValueId x, ValueId w, ValueId b) {
    return g.Node("Gemm", {x, w, b}, {{"transB", int64_t{weights_oi ? 1 : 0}}});
  };
  return c;
}

TEST(OneDnnCallLinear, TransBClip) {
  Case c = LinearCase(5, 37, 19, true, {PostOp::Clip(-0.5f, 0.5f)}, 400);
  EXPECT_EQ(c.call.ToString(), "linear[37->19]+bias+clip(-0.5,0.5)");
  Check(c);
}

TEST(OneDnnCallLinear, NoTransBReluThenMul) {
  Case c = LinearCase(4, 64, 48, false, {PostOp::Relu(), PostOp::Mul(Spec({1, 48}))},
                      410);
  AddPostOpData(c, 411);
  Check(c);
}

// ---- Linear layers run as 1x1 convolutions (OneDnnCallOptions::linear_as_conv).

// Checks `c` like Check, and that kAlways runs it on oneDNN's 1x1 conv
// (`as_conv`) or keeps the matmul / inner product (the conv form cannot
// express the call).
void CheckLinearAsConv(const Case& c, bool as_conv) {
  Check(c);
  SCOPED_TRACE(c.call.ToString());
  OneDnnCallOptions o;
  o.linear_as_conv = OneDnnCallOptions::LinearAsConv::kAlways;
  std::unique_ptr<OneDnnCall> call;
  absl::StatusOr<Tensor> got = RunOneDnn(c, o, &call);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(absl::StrContains(call->impl_name(), "as 1x1 conv"), as_conv)
      << call->impl_name();
  if (as_conv) {
    EXPECT_EQ(call->reorders_per_call(), 0);
    EXPECT_EQ(call->src_layout(), "nhwc");
    EXPECT_EQ(call->dst_layout(), "nhwc");
    // Prepacked into a blocked conv weights layout (OIhw8i8o, Ohwi16o...).
    EXPECT_EQ(call->weights_layout().substr(0, 1), "O") << call->weights_layout();
    EXPECT_GT(call->prepacked_bytes(), 0);
  }
}

struct LinearShape {
  int64_t m, k, n;
};

class LinearAsConvTest : public ::testing::TestWithParam<LinearShape> {};

TEST_P(LinearAsConvTest, MatMulBiasGeluErf) {
  const LinearShape s = GetParam();
  Case c = MatMulCase({s.m, s.k}, {s.k, s.n}, false, false, true, Shape{s.n},
                      {PostOp::GeluErf()}, 600);
  CheckLinearAsConv(c, true);
}

TEST_P(LinearAsConvTest, BatchedMatMulBiasGeluTanhResidualAdd) {
  // [B, S, K] x [K, N] with a bias and a residual [B, S, N]: M = B * S.
  const LinearShape s = GetParam();
  Case c = MatMulCase({1, s.m, s.k}, {s.k, s.n}, false, false, true, Shape{s.n},
                      {PostOp::GeluTanh(), PostOp::Add(Spec({1, s.m, s.n}))}, 610);
  AddPostOpData(c, 611);
  CheckLinearAsConv(c, true);
}

TEST_P(LinearAsConvTest, LinearResidualSum) {
  const LinearShape s = GetParam();
  Case c = LinearCase(s.m, s.k, s.n, true, {PostOp::Sum()}, 620);
  AddPostOpData(c, 621);
  CheckLinearAsConv(c, true);
}

INSTANTIATE_TEST_SUITE_P(
    OddSizes, LinearAsConvTest,
    ::testing::Values(LinearShape{1, 5, 3}, LinearShape{7, 768, 3},
                      LinearShape{197, 5, 3072}, LinearShape{7, 768, 3072},
                      LinearShape{197, 768, 3}),
    [](const ::testing::TestParamInfo<LinearShape>& info) {
      return absl::StrCat("M", info.param.m, "K", info.param.k, "N", info.param.n);
    });

TEST(OneDnnCallLinearAsConv, BatchRowsWithBroadcastOperands) {
  // M = 2 * 7 rows; operands per column, per row and full, and a scalar.
  Case c = MatMulCase({2, 7, 5}, {5, 3}, false, false, true, Shape{1, 1, 3},
                      {PostOp::Mul(Spec({3})), PostOp::Add(Spec({2, 7, 3})),
                       PostOp::Sub(Spec({1})), PostOp::Relu()},
                      630);
  AddPostOpData(c, 631);
  CheckLinearAsConv(c, true);
}

TEST(OneDnnCallLinearAsConv, BatchedRowsRunAsOneMatMul) {
  // [9, 1, 16] x [16, 8] (ViT's in-projection is [197, 1, 768] x [768, 2304]):
  // one 2-D matmul over the 9 rows, not 9 matrix-vector products.
  Case c = MatMulCase({9, 1, 16}, {16, 8}, false, false, true, Shape{8},
                      {PostOp::Add(Spec({9, 1, 8}))}, 690);
  AddPostOpData(c, 691);
  Check(c);
  OneDnnCallOptions o;
  o.linear_as_conv = OneDnnCallOptions::LinearAsConv::kNever;
  std::unique_ptr<OneDnnCall> call;
  ASSERT_TRUE(RunOneDnn(c, o, &call).ok());
  EXPECT_EQ(call->src_layout(), "ab") << call->impl_name();
  EXPECT_EQ(call->dst_layout(), "ab") << call->impl_name();
  // A partly broadcast operand keeps the batched form.
  Case p = MatMulCase({2, 7, 5}, {5, 3}, false, false, true, Shape{3},
                      {PostOp::Add(Spec({2, 1, 3}))}, 692);
  AddPostOpData(p, 693);
  ASSERT_TRUE(RunOneDnn(p, o, &call).ok());
  EXPECT_EQ(call->src_layout(), "abc") << call->impl_name();
}

TEST(OneDnnCallLinearAsConv, LinearWeightsStoredKN) {
  // Gemm transB=0: [K, N] weights read as [N, K] with strides.
  Case c = LinearCase(33, 40, 24, false, {PostOp::GeluErf()}, 640);
  CheckLinearAsConv(c, true);
}

TEST(OneDnnCallLinearAsConv, TwoLinearPostOpsStayMatMul) {
  // oneDNN 2.6 miscomputes this chain on the gemm-based matmul (the extern
  // kernel refuses it by that impl name) and on the 1x1 conv alike: no conv.
  Case c = MatMulCase({20, 16}, {16, 12}, false, false, true, Shape{12},
                      {PostOp::Linear(1.0f / 3, 0.5f), PostOp::Relu(),
                       PostOp::Linear(3.0f, -1.0f)},
                      650);
  OneDnnCallOptions o;
  o.linear_as_conv = OneDnnCallOptions::LinearAsConv::kAlways;
  std::unique_ptr<OneDnnCall> call;
  ASSERT_TRUE(RunOneDnn(c, o, &call).ok());
  EXPECT_FALSE(absl::StrContains(call->impl_name(), "as 1x1 conv")) << call->impl_name();
}

TEST(OneDnnCallLinearAsConv, PartlyBroadcastOperandStaysMatMul) {
  // An operand varying over the batch but not the sequence ([2, 1, N]) has
  // no 1x1-conv form: the call stays a matmul.
  Case c = MatMulCase({2, 7, 5}, {5, 3}, false, false, true, Shape{3},
                      {PostOp::Add(Spec({2, 1, 3}))}, 660);
  AddPostOpData(c, 661);
  CheckLinearAsConv(c, false);
}

TEST(OneDnnCallLinearAsConv, TransposedSrcAndBatchedWeightsStayMatMul) {
  Case t = MatMulCase({9, 6}, {6, 4}, true, false, true, Shape{4}, {}, 670);
  CheckLinearAsConv(t, false);
  Case b = MatMulCase({2, 9, 6}, {2, 6, 4}, false, false, true, std::nullopt, {}, 680);
  CheckLinearAsConv(b, false);
}

// ---- Properties and errors.

TEST(OneDnnCall, PrepackedWeightsUseBlockedLayoutForWideConv) {
  Case c = ConvCase({{1, 64, 14, 14}, 64, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Relu()}, 500);
  std::unique_ptr<OneDnnCall> packed, plain;
  OneDnnCallOptions direct;  // (Winograd weights are 16/9 the bytes.)
  direct.conv_algorithm = OneDnnCallOptions::ConvAlgorithm::kDirect;
  ASSERT_TRUE(RunOneDnn(c, direct, &packed).ok());
  ASSERT_TRUE(RunOneDnn(c, {false, false}, &plain).ok());
  EXPECT_EQ(packed->prepacked_bytes(), 64 * 64 * 9 * 4);  // 64 is a block multiple
  EXPECT_EQ(plain->weights_layout(), "oihw");
  EXPECT_NE(packed->weights_layout(), "oihw") << packed->impl_name();
  EXPECT_EQ(plain->src_layout(), "nchw");
  EXPECT_FALSE(absl::StartsWith(packed->impl_name(), "ref")) << packed->impl_name();
  EXPECT_FALSE(absl::StartsWith(plain->impl_name(), "ref")) << plain->impl_name();
}

TEST(OneDnnCall, ChannelsLastConvRunsWithoutReorders) {
  Case c = ConvCase({{1, 32, 10, 10}, 32, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Relu()}, 520);
  c.call.src.strides = ChannelsLastStrides(c.call.src.shape);
  c.call.dst.strides = ChannelsLastStrides(c.call.dst.shape);
  absl::StatusOr<std::unique_ptr<OneDnnCall>> call =
      OneDnnCall::Create(c.call, &*c.weights, &*c.bias, {true, false});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ((*call)->src_layout(), "nhwc");
  EXPECT_EQ((*call)->reorders_per_call(), 0);
}

// A call only oneDNN's reference implementation runs is Unimplemented by
// default (the rewriter then fuses less); allowed explicitly, the reference
// implementation computes the right thing. A binary post-op operand that
// broadcasts over the batch but not the rows ([1,3,5,7] onto [4,3,5,7], the
// Swin attention mask pattern) has only the reference kernel on every ISA.
// A sum after an eltwise post-op has no optimized kernel on AVX2 but has
// brgemm ones on AVX-512: either refused, or optimized and right.
TEST(OneDnnCall, PostOpOnlyTheReferenceImplRunsIsUnimplemented) {
  const TensorSpec mask = Spec({1, 3, 5, 7});
  std::vector<Case> cases = {
      MatMulCase({4, 3, 5, 6}, {4, 3, 6, 7}, false, false, false, std::nullopt,
                 {PostOp::Add(mask)}, 529),
      ConvCase({{1, 16, 8, 8}, 16, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
               {PostOp::Relu(), PostOp::Sum()}, 530),
      MatMulCase({16, 32}, {32, 24}, false, false, true, Shape{24},
                 {PostOp::Relu(), PostOp::Sum()}, 530)};
  int refused_count = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    AddPostOpData(c, 531);
    std::unique_ptr<OneDnnCall> optimized;
    absl::StatusOr<Tensor> first = RunOneDnn(c, {}, &optimized);
    if (first.ok()) {
      EXPECT_NE(i, 0u) << "the broadcast mask ran on " << optimized->impl_name();
      EXPECT_FALSE(absl::StartsWith(optimized->impl_name(), "ref")) << optimized->impl_name();
      ExpectNear(Reference(c), first->data<float>(), c.call.ToString());
      continue;
    }
    ++refused_count;
    EXPECT_EQ(first.status().code(), absl::StatusCode::kUnimplemented) << first.status();
    EXPECT_NE(first.status().message().find(c.call.ToString()), std::string::npos)
        << first.status();
    OneDnnCallOptions allow;
    allow.allow_reference_impl = true;
    std::unique_ptr<OneDnnCall> call;
    absl::StatusOr<Tensor> got = RunOneDnn(c, allow, &call);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(absl::StartsWith(call->impl_name(), "ref")) << call->impl_name();
    ExpectNear(Reference(c), got->data<float>(), c.call.ToString());
  }
  EXPECT_GE(refused_count, 1);
}


TEST(OneDnnCall, AnyLayoutCountsReorders) {
  Case c = ConvCase({{1, 32, 8, 8}, 32, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Sum()}, 510);
  AddPostOpData(c, 511);
  std::unique_ptr<OneDnnCall> call;
  ASSERT_TRUE(RunOneDnn(c, {true, true, true}, &call).ok());
  // Plain in/out, blocked inside: src in, dst in (for the sum) and dst out,
  // or nothing when oneDNN keeps nchw.
  if (call->src_layout() == "nchw") {
    EXPECT_EQ(call->reorders_per_call(), call->dst_layout() == "nchw" ? 0 : 2);
  } else {
    EXPECT_EQ(call->reorders_per_call(), 3) << call->src_layout();
  }
}

TEST(OneDnnCall, NonF32IsUnimplemented) {
  Case c = ConvCase({{1, 3, 5, 5}, 4, {3, 3}, Params({1, 1}, {0, 0}, {0, 0})}, {}, 600);
  c.call.src.dtype = DType::kI64;
  absl::StatusOr<Tensor> r = RunOneDnn(c, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
}

// Activations stored in bf16 (bf16 mode, docs/decisions/0055): a call with
// bf16 src and dst, built in f32 (a call bf16 is refused for) or in bf16,
// reads the bf16 src and writes a bf16 dst. The reference runs in f32 on
// the bf16 src widened exactly. bf16 keeps 8 significant bits: rounding to
// it is off by at most 2^-8 relative. Per element, with S = sum |w| |x| (the
// same conv on absolute values): the f32 call differs by the dst's rounding
// to bf16, 2^-8 |y|, plus f32 accumulation (1e-5 S); the bf16 call also by
// its weights rounded to bf16, 2^-8 relative per product, so 2^-8 S more
// (relu, 1-Lipschitz, grows none of it).
// Whether oneDNN here has any bf16 conv (even its reference one needs
// AVX-512; the _onednn_avx2 shard caps it below).
bool OneDnnHasBf16Convs() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
    case dnnl::cpu_isa::avx:
    case dnnl::cpu_isa::avx2:
    case dnnl::cpu_isa::avx2_vnni:
      return false;
    default:
      return true;
  }
}

TEST(OneDnnCall, Bf16SrcAndDstRunInF32AndInBf16) {
  Case c = ConvCase({{1, 3, 6, 6}, 4, {3, 3}, Params({1, 1}, {1, 1}, {1, 1})},
                    {PostOp::Relu()}, 610);
  Tensor src_bf16(DType::kBF16, c.src.shape());
  for (int64_t i = 0; i < c.src.num_elements(); ++i) {
    const ir::BFloat16 b = ir::FloatToBFloat16(c.src.data<float>()[i]);
    src_bf16.data<ir::BFloat16>()[i] = b;
    c.src.data<float>()[i] = ir::BFloat16ToFloat(b);  // the reference's input
  }
  const Tensor want = Reference(c);
  Case magnitude = c;
  magnitude.call.post_ops.clear();
  magnitude.bias.reset();
  for (Tensor* t : {&magnitude.src, &*magnitude.weights}) {
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      t->data<float>()[i] = std::fabs(t->data<float>()[i]);
    }
  }
  const Tensor sums = Reference(magnitude);
  ASSERT_EQ(sums.num_elements(), want.num_elements());
  FusedCall call = c.call;
  call.src.dtype = DType::kBF16;
  call.dst.dtype = DType::kBF16;
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 call" : "f32 call");
    OneDnnCallOptions options;
    options.bf16 = bf16;
    options.allow_reference_impl = true;  // bf16 kernels need AVX-512
    absl::StatusOr<std::unique_ptr<OneDnnCall>> made =
        OneDnnCall::Create(call, &*c.weights, c.bias ? &*c.bias : nullptr, options);
    if (bf16 && !OneDnnHasBf16Convs()) {
      // Refused, not wrong: bf16 mode stores activations in bf16 only where
      // oneDNN runs bf16 natively (docs/decisions/0055), never here.
      EXPECT_EQ(made.status().code(), absl::StatusCode::kUnimplemented) << made.status();
      continue;
    }
    ASSERT_TRUE(made.ok()) << made.status();
    if (!bf16) {
      EXPECT_FALSE((*made)->bf16());
      // The f32 primitive converts the src in and the dst out.
      EXPECT_EQ((*made)->reorders_per_call(), 2);
    }
    Tensor dst(DType::kBF16, call.dst.shape);
    ASSERT_TRUE((*made)->Execute(src_bf16.raw_data(), {}, dst.raw_data()).ok());
    int bad = 0;
    for (int64_t i = 0; i < dst.num_elements(); ++i) {
      const float got = ir::BFloat16ToFloat(dst.data<ir::BFloat16>()[i]);
      const float w = want.data<float>()[i];
      const double s_i = sums.data<float>()[i];
      const double bound = std::ldexp(std::fabs(w), -8) + 1e-5 * s_i +
                           ((*made)->bf16() ? std::ldexp(s_i, -8) : 0.0);
      if (!(std::fabs(got - w) <= bound) && bad++ < 5) {
        ADD_FAILURE() << "element " << i << " is " << got << ", reference " << w
                      << ", bound " << bound;
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(OneDnnCall, TwoSumsAreUnimplemented) {
  Case c = ConvCase({{1, 3, 5, 5}, 4, {3, 3}, Params({1, 1}, {0, 0}, {0, 0})},
                    {PostOp::Sum(), PostOp::Relu(), PostOp::Sum()}, 610);
  absl::StatusOr<Tensor> r = RunOneDnn(c, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
}

TEST(OneDnnCall, WrongDstShapeIsInvalid) {
  Case c = ConvCase({{1, 3, 5, 5}, 4, {3, 3}, Params({1, 1}, {0, 0}, {0, 0})}, {}, 620);
  c.call.dst.shape = {1, 4, 5, 5};
  absl::StatusOr<Tensor> r = RunOneDnn(c, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("conv[3x3"), std::string::npos) << r.status();
}

TEST(OneDnnCall, WeightsTensorMustMatchDescription) {
  Case c = ConvCase({{1, 3, 5, 5}, 4, {3, 3}, Params({1, 1}, {0, 0}, {0, 0})}, {}, 630);
  Tensor wrong = Random({4, 3, 2, 2}, 1);
  EXPECT_EQ(OneDnnCall::Create(c.call, &wrong, &*c.bias).status().code(),
            absl::StatusCode::kInvalidArgument);
  // No weights: a conv whose weights come at Execute time.
  absl::StatusOr<std::unique_ptr<OneDnnCall>> runtime =
      OneDnnCall::Create(c.call, nullptr, &*c.bias);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_EQ((*runtime)->prepacked_bytes(), 0);
  EXPECT_EQ(OneDnnCall::Create(c.call, &*c.weights, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OneDnnCall, ExecuteChecksOperands) {
  Case c = ConvCase({{1, 3, 5, 5}, 4, {3, 3}, Params({1, 1}, {0, 0}, {0, 0})},
                    {PostOp::Add(Spec({1, 4, 1, 1}))}, 640);
  absl::StatusOr<std::unique_ptr<OneDnnCall>> call =
      OneDnnCall::Create(c.call, &*c.weights, &*c.bias);
  ASSERT_TRUE(call.ok()) << call.status();
  Tensor dst(DType::kF32, c.call.dst.shape);
  EXPECT_EQ((*call)->Execute(c.src.raw_data(), {}, dst.raw_data()).code(),
            absl::StatusCode::kInvalidArgument);
  const void* null_operand = nullptr;
  EXPECT_EQ((*call)->Execute(c.src.raw_data(), {&null_operand, 1}, dst.raw_data()).code(),
            absl::StatusCode::kInvalidArgument);
  const void* operand = c.src.raw_data();
  EXPECT_EQ((*call)->Execute(c.src.raw_data(), c.src.raw_data(), {&operand, 1},
                             dst.raw_data()).code(),
            absl::StatusCode::kInvalidArgument);  // has constant weights
}

TEST(Threads, SetAndQuery) {
  ASSERT_TRUE(SetNumThreads(1).ok());
  EXPECT_EQ(NumThreads(), 1);
  ASSERT_TRUE(SetNumThreads(2).ok());
  EXPECT_EQ(NumThreads(), 2);
  EXPECT_EQ(SetNumThreads(0).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::onednn
