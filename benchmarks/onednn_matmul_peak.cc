// GFLOP/s of a plain oneDNN f32 matmul (constant weights reordered once, as
// kiln prepacks them) at given GEMM shapes and thread counts: the ceiling
// benchmarks/peer_bench.py holds GEMM-bound models against, in the same run.
//
//   onednn_matmul_peak --shapes=1024x1024x1024,128x3072x768,12x128x128x64:plain
//                      --threads=1,2 [--benchmark_min_time=0.1]
//                      [--benchmark_format=json]
//
// A shape is MxNxK or BxMxNxK (B batches of [M,K] x [K,N]); ":plain" keeps the
// second operand in its row-major layout (an activation, as in attention's
// batched matmuls) instead of oneDNN's blocked weight layout.
#include <omp.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "benchmark/benchmark.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace {

constexpr absl::string_view kDefaultShapes =
    "1024x1024x1024,128x768x768,128x3072x768,128x768x3072,12x128x128x64:plain";

struct Shape {
  int64_t b = 1, m = 0, n = 0, k = 0;
  bool plain_weights = false;
  std::string text;
};

bool ParseShape(absl::string_view s, Shape* out) {
  out->text = std::string(s);
  std::vector<absl::string_view> parts = absl::StrSplit(s, ':');
  if (parts.size() > 2) return false;
  if (parts.size() == 2) {
    if (parts[1] != "plain") return false;
    out->plain_weights = true;
  }
  std::vector<absl::string_view> dims = absl::StrSplit(parts[0], 'x');
  if (dims.size() != 3 && dims.size() != 4) return false;
  std::vector<int64_t> v;
  for (absl::string_view d : dims) {
    int64_t x = 0;
    if (!absl::SimpleAtoi(d, &x) || x < 1 || x > (int64_t{1} << 20)) return false;
    v.push_back(x);
  }
  if (v.size() == 4) out->b = v[0];
  out->m = v[v.size() - 3];
  out->n = v[v.size() - 2];
  out->k = v[v.size() - 1];
  // Keep one operand under 2 GiB of floats.
  return out->b * out->m * out->k < (int64_t{1} << 29) &&
         out->b * out->k * out->n < (int64_t{1} << 29) &&
         out->b * out->m * out->n < (int64_t{1} << 29);
}

std::vector<float> RandomData(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

void BM_Matmul(benchmark::State& state, Shape s, int threads) {
  using dnnl::memory;
  // oneDNN's GNU OpenMP primitives take the team size current at creation.
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const bool batched = s.b > 1;
  const memory::dims src_dims = batched ? memory::dims{s.b, s.m, s.k} : memory::dims{s.m, s.k};
  const memory::dims wei_dims = batched ? memory::dims{s.b, s.k, s.n} : memory::dims{s.k, s.n};
  const memory::dims dst_dims = batched ? memory::dims{s.b, s.m, s.n} : memory::dims{s.m, s.n};
  const memory::format_tag row_major = batched ? memory::format_tag::abc : memory::format_tag::ab;
  const memory::desc src_md(src_dims, memory::data_type::f32, row_major);
  const memory::desc wei_plain_md(wei_dims, memory::data_type::f32, row_major);
  const memory::desc wei_md(wei_dims, memory::data_type::f32,
                            s.plain_weights ? row_major : memory::format_tag::any);
  const memory::desc dst_md(dst_dims, memory::data_type::f32, row_major);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), eng);

  std::vector<float> a = RandomData(s.b * s.m * s.k, 1);
  std::vector<float> w = RandomData(s.b * s.k * s.n, 2);
  std::vector<float> c(static_cast<size_t>(s.b * s.m * s.n));
  memory src(src_md, eng, a.data());
  memory wei_user(wei_plain_md, eng, w.data());
  memory dst(dst_md, eng, c.data());
  memory wei = wei_user;
  if (pd.weights_desc() != wei_plain_md) {
    wei = memory(pd.weights_desc(), eng);
    dnnl::reorder(wei_user, wei).execute(strm, wei_user, wei);
    strm.wait();
  }
  dnnl::matmul prim(pd);
  const std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  prim.execute(strm, args);
  strm.wait();
  for (auto _ : state) {
    prim.execute(strm, args);
    strm.wait();
  }
  const double flops = 2.0 * static_cast<double>(s.b * s.m * s.n * s.k);
  state.counters["flops"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
  state.SetLabel(absl::StrCat(s.text, " ", pd.impl_info_str()));
}

// Removes --name=VALUE from argv and returns VALUE (or `fallback`).
std::string TakeFlag(int* argc, char** argv, absl::string_view name,
                     absl::string_view fallback) {
  const std::string prefix = absl::StrCat("--", name, "=");
  std::string value(fallback);
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (absl::string_view(argv[i]).substr(0, prefix.size()) == prefix) {
      value = std::string(argv[i] + prefix.size());
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string shapes_flag = TakeFlag(&argc, argv, "shapes", kDefaultShapes);
  const std::string threads_flag = TakeFlag(&argc, argv, "threads", "1");
  std::vector<Shape> shapes;
  for (absl::string_view text : absl::StrSplit(shapes_flag, ',', absl::SkipEmpty())) {
    Shape s;
    if (!ParseShape(text, &s)) {
      std::fprintf(stderr,
                   "onednn_matmul_peak: bad shape '%.*s' (want MxNxK or BxMxNxK, "
                   "optionally :plain)\n",
                   static_cast<int>(text.size()), text.data());
      return 2;
    }
    shapes.push_back(s);
  }
  std::vector<int> thread_counts;
  for (absl::string_view text : absl::StrSplit(threads_flag, ',', absl::SkipEmpty())) {
    int t = 0;
    if (!absl::SimpleAtoi(text, &t) || t < 1 || t > 1024) {
      std::fprintf(stderr, "onednn_matmul_peak: bad thread count '%.*s'\n",
                   static_cast<int>(text.size()), text.data());
      return 2;
    }
    thread_counts.push_back(t);
  }
  if (shapes.empty() || thread_counts.empty()) {
    std::fprintf(stderr, "onednn_matmul_peak: --shapes and --threads must not be empty\n");
    return 2;
  }
  for (int t : thread_counts) {
    for (const Shape& s : shapes) {
      benchmark::RegisterBenchmark(absl::StrCat("matmul/", s.text, "/threads:", t).c_str(),
                                   BM_Matmul, s, t)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
