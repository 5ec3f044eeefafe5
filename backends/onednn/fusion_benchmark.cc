// Microbenchmark: what post-op fusion buys. A fused oneDNN call (conv+bias+
// relu, matmul+bias+gelu) against the same primitive followed by separate
// bias and activation passes over the output (oneDNN's JIT'ed binary and
// eltwise primitives), as an unfused runtime would run them.
//
//   bazel run //backends/onednn:fusion_benchmark --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/onednn/engine.h"
#include "backends/onednn/fused_call.h"
#include "backends/onednn/onednn_call.h"
#include "backends/onednn/threads.h"
#include "benchmark/benchmark.h"
#include "ir/graph/tensor.h"

namespace kiln::onednn {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

Tensor Random(Shape shape, uint32_t seed) {
  Tensor t(DType::kF32, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

TensorSpec Spec(Shape shape) { return TensorSpec{DType::kF32, std::move(shape), {}}; }

std::unique_ptr<OneDnnCall> MustCreate(const FusedCall& call, const Tensor& w,
                                       const Tensor* bias,
                                       const OneDnnCallOptions& options,
                                       benchmark::State& state) {
  absl::StatusOr<std::unique_ptr<OneDnnCall>> c =
      OneDnnCall::Create(call, &w, bias, options);
  if (!c.ok()) {
    state.SkipWithError(std::string(c.status().message()).c_str());
    return nullptr;
  }
  return std::move(*c);
}

std::string Describe(const OneDnnCall& c) {
  return absl::StrCat(c.impl_name(), " w=", c.weights_layout(), " src=",
                      c.src_layout(), " reorders=", c.reorders_per_call());
}

// The unfused epilogue as an unfused runtime with a vectorized library runs
// it (e.g. PyTorch eager on oneDNN): a binary-add primitive for the bias,
// then an eltwise primitive, each one JIT'ed pass over the output, in place.
class UnfusedEpilogue {
 public:
  // `dst` is the output's descriptor, `bias` the broadcastable bias's.
  UnfusedEpilogue(const dnnl::memory::desc& dst, const dnnl::memory::desc& bias,
                  dnnl::algorithm act)
      : add_(dnnl::binary::primitive_desc(
            dnnl::binary::desc(dnnl::algorithm::binary_add, dst, bias, dst),
            CpuEngine())),
        eltwise_(dnnl::eltwise_forward::primitive_desc(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, act,
                                        dst, 0.0f, 0.0f),
            CpuEngine())),
        dst_(dst),
        bias_(bias) {}

  void Run(void* out, const void* bias) {
    dnnl::memory y(dst_, CpuEngine(), out);
    dnnl::memory b(bias_, CpuEngine(), const_cast<void*>(bias));
    add_.execute(CpuStream(), {{DNNL_ARG_SRC_0, y}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, y}});
    eltwise_.execute(CpuStream(), {{DNNL_ARG_SRC, y}, {DNNL_ARG_DST, y}});
  }

 private:
  dnnl::binary add_;
  dnnl::eltwise_forward eltwise_;
  dnnl::memory::desc dst_, bias_;
};

// ---- conv 1x64x56x56, 3x3, 64 -> 64, pad 1.
// Layout variants (range(0)): the caller's buffers are NCHW (0, 1) or NHWC
// (2, 3); the primitive runs on them directly (0, 2) or on the layout it
// prefers, with reorders inside the call (1, 3).
constexpr int64_t kN = 1, kC = 64, kH = 56, kW = 56, kOC = 64;

FusedCall ConvDesc(int layout, bool fused) {
  FusedCall c;
  c.kind = CallKind::kConv;
  c.src = Spec({kN, kC, kH, kW});
  c.weights = Spec({kOC, kC, 3, 3});
  c.conv.pads_begin = c.conv.pads_end = {1, 1};
  c.dst = Spec({kN, kOC, kH, kW});
  if (layout >= 2) {
    c.src.strides = ChannelsLastStrides(c.src.shape);
    c.dst.strides = ChannelsLastStrides(c.dst.shape);
  }
  if (fused) {
    c.bias = Spec({kOC});
    c.post_ops = {PostOp::Relu()};
  }
  return c;
}

OneDnnCallOptions ConvOptions(int layout) {
  OneDnnCallOptions o;
  o.any_activation_layout = layout == 1 || layout == 3;
  return o;
}

void SetConvCounters(benchmark::State& state) {
  const double flops = 2.0 * kN * kOC * kH * kW * kC * 9;
  state.counters["GFLOPS"] = benchmark::Counter(
      flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

const char* kLayoutNames[] = {"nchw", "nchw_any", "nhwc", "nhwc_any"};

void BM_ConvBiasRelu_Fused(benchmark::State& state) {
  (void)SetNumThreads(1);
  const int layout = static_cast<int>(state.range(0));
  const Tensor w = Random({kOC, kC, 3, 3}, 1), b = Random({kOC}, 2);
  const Tensor x = Random({kN, kC, kH, kW}, 3);
  Tensor y(DType::kF32, {kN, kOC, kH, kW});
  std::unique_ptr<OneDnnCall> call =
      MustCreate(ConvDesc(layout, true), w, &b, ConvOptions(layout), state);
  if (!call) return;
  for (auto _ : state) {
    if (!call->Execute(x.raw_data(), {}, y.raw_data()).ok()) {
      state.SkipWithError("execute failed");
      break;
    }
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetLabel(absl::StrCat(kLayoutNames[layout], " ", Describe(*call)));
  SetConvCounters(state);
}

void BM_ConvBiasRelu_Unfused(benchmark::State& state) {
  (void)SetNumThreads(1);
  const int layout = static_cast<int>(state.range(0));
  const Tensor w = Random({kOC, kC, 3, 3}, 1), b = Random({kOC}, 2);
  const Tensor x = Random({kN, kC, kH, kW}, 3);
  Tensor y(DType::kF32, {kN, kOC, kH, kW});
  std::unique_ptr<OneDnnCall> call =
      MustCreate(ConvDesc(layout, false), w, nullptr, ConvOptions(layout), state);
  if (!call) return;
  using Tag = dnnl::memory::format_tag;
  UnfusedEpilogue epilogue(
      dnnl::memory::desc({kN, kOC, kH, kW}, dnnl::memory::data_type::f32,
                         layout >= 2 ? Tag::nhwc : Tag::nchw),
      dnnl::memory::desc({1, kOC, 1, 1}, dnnl::memory::data_type::f32, Tag::nchw),
      dnnl::algorithm::eltwise_relu);
  for (auto _ : state) {
    if (!call->Execute(x.raw_data(), {}, y.raw_data()).ok()) {
      state.SkipWithError("execute failed");
      break;
    }
    epilogue.Run(y.raw_data(), b.raw_data());
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetLabel(absl::StrCat(kLayoutNames[layout], " ", Describe(*call)));
  SetConvCounters(state);
}

BENCHMARK(BM_ConvBiasRelu_Fused)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ConvBiasRelu_Unfused)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

// ---- matmul 128x768 x 768x3072 + bias + gelu (erf).
constexpr int64_t kM = 128, kK = 768, kNN = 3072;

FusedCall MatMulDesc(bool fused) {
  FusedCall c;
  c.kind = CallKind::kMatMul;
  c.src = Spec({kM, kK});
  c.weights = Spec({kK, kNN});
  c.dst = Spec({kM, kNN});
  if (fused) {
    c.bias = Spec({kNN});
    c.post_ops = {PostOp::GeluErf()};
  }
  return c;
}

void SetMatMulCounters(benchmark::State& state) {
  state.counters["GFLOPS"] = benchmark::Counter(
      2.0 * kM * kK * kNN * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MatMulBiasGelu_Fused(benchmark::State& state) {
  (void)SetNumThreads(1);
  const Tensor w = Random({kK, kNN}, 4), b = Random({kNN}, 5);
  const Tensor x = Random({kM, kK}, 6);
  Tensor y(DType::kF32, {kM, kNN});
  std::unique_ptr<OneDnnCall> call = MustCreate(MatMulDesc(true), w, &b, {}, state);
  if (!call) return;
  for (auto _ : state) {
    if (!call->Execute(x.raw_data(), {}, y.raw_data()).ok()) {
      state.SkipWithError("execute failed");
      break;
    }
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetLabel(Describe(*call));
  SetMatMulCounters(state);
}

void BM_MatMulBiasGelu_Unfused(benchmark::State& state) {
  (void)SetNumThreads(1);
  const Tensor w = Random({kK, kNN}, 4), b = Random({kNN}, 5);
  const Tensor x = Random({kM, kK}, 6);
  Tensor y(DType::kF32, {kM, kNN});
  std::unique_ptr<OneDnnCall> call = MustCreate(MatMulDesc(false), w, nullptr, {}, state);
  if (!call) return;
  using Tag = dnnl::memory::format_tag;
  UnfusedEpilogue epilogue(
      dnnl::memory::desc({kM, kNN}, dnnl::memory::data_type::f32, Tag::ab),
      dnnl::memory::desc({1, kNN}, dnnl::memory::data_type::f32, Tag::ab),
      dnnl::algorithm::eltwise_gelu_erf);
  for (auto _ : state) {
    if (!call->Execute(x.raw_data(), {}, y.raw_data()).ok()) {
      state.SkipWithError("execute failed");
      break;
    }
    epilogue.Run(y.raw_data(), b.raw_data());
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetLabel(Describe(*call));
  SetMatMulCounters(state);
}

BENCHMARK(BM_MatMulBiasGelu_Fused)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MatMulBiasGelu_Unfused)->Unit(benchmark::kMicrosecond);

// ---- What each activation costs as a post-op (range(0) indexes kActs):
// the same call with bias only, then with bias + the activation. Shows
// which post-ops oneDNN applies in its JIT'ed epilogue (nearly free) and
// which it runs in a slow pass of its own - the matcher's policy
// (passes/graph/onednn_matcher.cc) follows these figures.
struct NamedAct {
  const char* name;
  PostOp op;
};
const NamedAct kActs[] = {
    {"bias only", PostOp::Linear(1.0f, 0.0f)},  // no post-op at all
    {"linear", PostOp::Linear(1.0f, 0.0f)},
    {"relu", PostOp::Relu()},
    {"gelu_erf", PostOp::GeluErf()},
    {"gelu_tanh", PostOp::GeluTanh()},
    {"swish", PostOp::Swish()},
    {"sigmoid", PostOp::Sigmoid()},
    {"tanh", PostOp::Tanh()},
    {"elu", PostOp::Elu(1.0f)},
    {"hardswish", PostOp::HardSwish()},
    {"clip", PostOp::Relu6()},
};
constexpr int kNumActs = sizeof(kActs) / sizeof(kActs[0]);

void BM_MatMulPostOp(benchmark::State& state) {
  (void)SetNumThreads(1);
  const NamedAct& act = kActs[state.range(0)];
  const Tensor w = Random({kK, kNN}, 4), b = Random({kNN}, 5);
  const Tensor x = Random({kM, kK}, 6);
  Tensor y(DType::kF32, {kM, kNN});
  FusedCall desc = MatMulDesc(true);
  desc.post_ops = {act.op};
  if (state.range(0) == 0) desc.post_ops.clear();
  std::unique_ptr<OneDnnCall> call = MustCreate(desc, w, &b, {}, state);
  if (!call) return;
  for (auto _ : state) {
    if (!call->Execute(x.raw_data(), {}, y.raw_data()).ok()) {
      state.SkipWithError("execute failed");
      break;
    }
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetLabel(absl::StrCat(act.name, " ", Describe(*call)));
  SetMatMulCounters(state);
}
BENCHMARK(BM_MatMulPostOp)->DenseRange(0, kNumActs - 1)->Unit(benchmark::kMicrosecond);

void BM_ConvPostOp(benchmark::State& state) {
  (void)SetNumThreads(1);
  const NamedAct& act = kActs[state.range(0)];
  const Tensor w = Random({kOC, kC, 3, 3}, 1), b = Random({kOC}, 2);
  const Tensor x = Random({kN, kC, kH, kW}, 3);
  Tensor y(DType::kF32, {kN, kOC, kH, kW});
  FusedCall desc = ConvDesc(/*layout=*/1, true);
  desc.post_ops = {act.op};
  if (state.range(0) == 0) desc.post_ops.clear();
  std::unique_ptr<OneDnnCall> call =
      MustCreate(desc, w, &b, ConvOptions(/*layout=*/1), state);
  if (!call) return;
  for (auto _ : state) {
    if (!call->Execute(x.raw_data(), {}, y.raw_data()).ok()) {
      state.SkipWithError("execute failed");
      break;
    }
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetLabel(absl::StrCat(act.name, " ", Describe(*call)));
  SetConvCounters(state);
}
BENCHMARK(BM_ConvPostOp)->DenseRange(0, kNumActs - 1)->Unit(benchmark::kMicrosecond);

// ---- Weights layout of a constant-weights matmul (BERT's projections at
// 128 tokens): range(0) = K, range(1) = N, range(2) = 0 for the weights as
// the model stores them ([K, N] row-major, no prepacking), 1 for kiln's
// prepacked layout.
void BM_MatMulWeightsLayout(benchmark::State& state) {
  (void)SetNumThreads(1);
  const int64_t k = state.range(0), n = state.range(1);
  const Tensor w = Random({k, n}, 7), b = Random({n}, 8);
  const Tensor x = Random({kM, k}, 9);
  Tensor y(DType::kF32, {kM, n});
  FusedCall desc;
  desc.kind = CallKind::kMatMul;
  desc.src = Spec({kM, k});
  desc.weights = Spec({k, n});
  desc.dst = Spec({kM, n});
  desc.bias = Spec({n});
  OneDnnCallOptions options;
  options.prepack_weights = state.range(2) == 1;
  std::unique_ptr<OneDnnCall> call = MustCreate(desc, w, &b, options, state);
  if (!call) return;
  for (auto _ : state) {
    if (!call->Execute(x.raw_data(), {}, y.raw_data()).ok()) {
      state.SkipWithError("execute failed");
      break;
    }
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetLabel(Describe(*call));
  state.counters["GFLOPS"] = benchmark::Counter(
      2.0 * kM * k * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatMulWeightsLayout)
    ->ArgsProduct({{768}, {3072}, {0, 1}})
    ->ArgsProduct({{3072}, {768}, {0, 1}})
    ->ArgsProduct({{768}, {768}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::onednn
