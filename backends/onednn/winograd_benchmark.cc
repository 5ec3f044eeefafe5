// Microbenchmark: 3x3 stride-1 convs on kiln's Winograd conv (winograd.h)
// against oneDNN's direct kernel, through OneDnnCall on nChw8c buffers as
// the layout pass leaves them on AVX2 (decision 0080), plus the Winograd
// conv's own Run (transforms and matmul, no bias or post-ops).
//
//   bazel run -c opt //backends/onednn:winograd_benchmark --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/onednn/fused_call.h"
#include "backends/onednn/onednn_call.h"
#include "backends/onednn/threads.h"
#include "backends/onednn/winograd.h"
#include "benchmark/benchmark.h"
#include "ir/graph/tensor.h"

namespace kiln::onednn {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : v) x = dist(gen);
  return v;
}

Tensor ToTensor(Shape shape, const std::vector<float>& v) {
  Tensor t(DType::kF32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// Args: in channels, out channels, size (H = W), algorithm (0 direct,
// 1 Winograd), threads. conv + bias + relu on nChw8c src and dst.
void BM_Conv3x3(benchmark::State& state) {
  const int64_t ic = state.range(0), oc = state.range(1), hw = state.range(2);
  const bool wino = state.range(3) != 0;
  if (!SetNumThreads(static_cast<int>(state.range(4))).ok()) return;
  FusedCall call;
  call.kind = CallKind::kConv;
  call.src = TensorSpec{DType::kF32, {1, ic, hw, hw}, {}};
  call.src.channel_block = 8;
  call.weights = TensorSpec{DType::kF32, {oc, ic, 3, 3}, {}};
  call.bias = TensorSpec{DType::kF32, {oc}, {}};
  call.dst = TensorSpec{DType::kF32, {1, oc, hw, hw}, {}};
  call.dst.channel_block = 8;
  call.conv.strides = {1, 1};
  call.conv.pads_begin = call.conv.pads_end = {1, 1};
  call.post_ops = {PostOp::Relu()};
  const Tensor w = ToTensor({oc, ic, 3, 3}, Random(oc * ic * 9, 1));
  const Tensor b = ToTensor({oc}, Random(oc, 2));
  OneDnnCallOptions options;
  options.conv_algorithm = wino ? OneDnnCallOptions::ConvAlgorithm::kWinograd
                                : OneDnnCallOptions::ConvAlgorithm::kDirect;
  absl::StatusOr<std::unique_ptr<OneDnnCall>> c = OneDnnCall::Create(call, &w, &b, options);
  if (!c.ok()) {
    state.SkipWithError(std::string(c.status().message()).c_str());
    return;
  }
  std::vector<float> src = Random(ic * hw * hw, 3), dst(static_cast<size_t>(oc * hw * hw));
  for (auto _ : state) {
    absl::Status s = (*c)->Execute(src.data(), {}, dst.data());
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(dst.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * ic * oc * 9 * hw * hw,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  state.SetLabel((*c)->impl_name());
}

// Same shapes, WinogradConv::Run alone.
void BM_WinogradRun(benchmark::State& state) {
  const int64_t ic = state.range(0), oc = state.range(1), hw = state.range(2);
  if (!SetNumThreads(static_cast<int>(state.range(4))).ok()) return;
  WinogradShape s;
  s.in_channels = ic;
  s.out_channels = oc;
  s.in_h = s.in_w = s.out_h = s.out_w = hw;
  s.pad_top = s.pad_left = 1;
  const std::vector<float> w = Random(oc * ic * 9, 1);
  absl::StatusOr<std::unique_ptr<WinogradConv>> c = WinogradConv::Create(s, w.data());
  if (!c.ok()) {
    state.SkipWithError(std::string(c.status().message()).c_str());
    return;
  }
  std::vector<float> src = Random(ic * hw * hw, 3), dst(static_cast<size_t>(oc * hw * hw));
  for (auto _ : state) {
    (*c)->Run(src.data(), dst.data());
    benchmark::DoNotOptimize(dst.data());
  }
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (const auto& [ic, oc, hw] : std::vector<std::tuple<int, int, int>>{
             {64, 64, 56}, {128, 128, 28}, {256, 256, 14}, {512, 512, 7},
             {96, 96, 52}, {96, 96, 26}, {48, 48, 52}, {192, 192, 13},
             {64, 64, 20}, {128, 128, 10}, {64, 64, 40}, {256, 256, 7}}) {
      for (int alg : {0, 1}) b->Args({ic, oc, hw, alg, threads});
    }
  }
  b->ArgNames({"ic", "oc", "hw", "wino", "threads"})->UseRealTime();
}
BENCHMARK(BM_Conv3x3)->Apply(Shapes);
BENCHMARK(BM_WinogradRun)->Apply(Shapes);

}  // namespace
}  // namespace kiln::onednn
