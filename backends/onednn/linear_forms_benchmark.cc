// Microbenchmark: which oneDNN 2.6 primitive runs a linear layer
// [M, K] x [K, N] + bias (constant weights, prepacked once) fastest on this
// host. The same product as kiln's OneDnnCall matmul (weights prepacked
// transposed, [N, K], when oneDNN picks its gemm-based kernel), matmul with
// [N, K] weights, matmul with `any` weights, inner_product with `any`
// weights, and a 1x1 convolution (batch 1, C = K, spatial M x 1, OC = N) on
// nhwc activations (the row-major matrices themselves), on oneDNN's blocked
// activations with the reorders from/to row-major included, and on blocked
// activations without those reorders (the kernel alone). The label names the
// implementation oneDNN picked (impl_info_str) and the layouts.
//
//   bazel run -c opt //backends/onednn:linear_forms_benchmark --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/onednn/engine.h"
#include "backends/onednn/fused_call.h"
#include "backends/onednn/onednn_call.h"
#include "backends/onednn/threads.h"
#include "benchmark/benchmark.h"
#include "ir/graph/tensor.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

enum Form {
  kKilnMatMul = 0,  // kiln's current form: OneDnnCall on a kMatMul FusedCall
  kMatMulTransposed,
  kMatMulAny,
  kInnerProductAny,
  kConvNhwc,
  kConvBlockedWithReorders,
  kConvBlockedKernelOnly,
  kNumForms
};
const char* kFormNames[] = {"kiln_matmul",      "matmul_wNK",       "matmul_wany",
                            "ip_wany",          "conv1x1_nhwc",
                            "conv1x1_blk+reord", "conv1x1_blk_only"};

std::vector<float> RandomData(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// One primitive with its arguments, plus optional activation reorders
// around it (row-major in, row-major out).
struct Linear {
  std::unique_ptr<OneDnnCall> kiln;
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  std::optional<dnnl::reorder> src_in, dst_out;
  memory user_src, user_dst;
  std::string label;
};

std::string FormatOf(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked) return "opaque";
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  std::string s = "strides[";
  for (int i = 0; i < d.ndims; ++i) absl::StrAppend(&s, i ? "," : "", b.strides[i]);
  s += "]";
  for (int i = 0; i < b.inner_nblks; ++i) {
    absl::StrAppend(&s, b.inner_blks[i], std::string(1, static_cast<char>('a' + b.inner_idxs[i])));
  }
  return s;
}

// Builds `form` for x[M,K] * w[K,N] + b[N] -> y[M,N], all row-major, the
// weights `w` reordered once into the primitive's layout.
Linear Build(Form form, int64_t m, int64_t k, int64_t n, float* x,
             const float* w, const float* b, float* y) {
  dnnl::engine& eng = CpuEngine();
  Linear L;
  if (form == kKilnMatMul) {
    FusedCall c;
    c.kind = CallKind::kMatMul;
    c.src = TensorSpec{ir::DType::kF32, {m, k}, {}};
    c.weights = TensorSpec{ir::DType::kF32, {k, n}, {}};
    c.dst = TensorSpec{ir::DType::kF32, {m, n}, {}};
    c.bias = TensorSpec{ir::DType::kF32, {n}, {}};
    ir::Tensor wt(ir::DType::kF32, {k, n}), bt(ir::DType::kF32, {n});
    std::copy(w, w + k * n, wt.data<float>());
    std::copy(b, b + n, bt.data<float>());
    absl::StatusOr<std::unique_ptr<OneDnnCall>> call = OneDnnCall::Create(c, &wt, &bt);
    if (!call.ok()) throw dnnl::error(dnnl_unimplemented, "OneDnnCall::Create failed");
    L.kiln = std::move(*call);
    L.label = absl::StrCat(kFormNames[form], " ", L.kiln->impl_name(), " w=",
                           L.kiln->weights_layout(), " src=", L.kiln->src_layout(),
                           " reorders=", L.kiln->reorders_per_call());
    return L;
  }
  const memory::desc x_rm({m, k}, DT::f32, Tag::ab);
  const memory::desc y_rm({m, n}, DT::f32, Tag::ab);
  const memory::desc w_kn({k, n}, DT::f32, Tag::ab);
  const memory::desc b_1n({1, n}, DT::f32, Tag::ab);
  const memory::desc b_n({n}, DT::f32, Tag::a);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::primitive_desc pd;
  // User weights descriptor over the [K, N] row-major buffer, in the
  // primitive's logical dims.
  memory::desc user_w;
  memory::desc user_b;
  memory::desc src_md, dst_md;  // primitive's activation descs
  memory::desc user_src_md = x_rm, user_dst_md = y_rm;
  switch (form) {
    case kMatMulTransposed:
    case kMatMulAny: {
      const memory::desc wmd =
          form == kMatMulAny ? memory::desc({k, n}, DT::f32, Tag::any)
                             : memory::desc({k, n}, DT::f32, Tag::ba);
      pd = dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(x_rm, wmd, b_1n, y_rm), attr, eng);
      user_w = w_kn;
      user_b = b_1n;
      break;
    }
    case kInnerProductAny: {
      // oneDNN's inner product weights are [OC, IC] = [N, K]; the [K, N]
      // buffer is that with strides {1, N}.
      user_w = memory::desc({n, k}, DT::f32, memory::dims{1, n});
      user_b = b_n;
      pd = dnnl::inner_product_forward::primitive_desc(
          dnnl::inner_product_forward::desc(
              dnnl::prop_kind::forward_inference, x_rm,
              memory::desc({n, k}, DT::f32, Tag::any), b_n, y_rm),
          attr, eng);
      break;
    }
    case kConvNhwc:
    case kConvBlockedWithReorders:
    case kConvBlockedKernelOnly: {
      // src [1, K, M, 1], weights [N, K, 1, 1], dst [1, N, M, 1].
      const memory::dims sd = {1, k, m, 1}, dd = {1, n, m, 1};
      user_src_md = memory::desc(sd, DT::f32, Tag::nhwc);
      user_dst_md = memory::desc(dd, DT::f32, Tag::nhwc);
      user_w = memory::desc({n, k, 1, 1}, DT::f32, memory::dims{1, n, 1, 1});
      user_b = b_n;
      const bool any = form != kConvNhwc;
      pd = dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(
              dnnl::prop_kind::forward_inference,
              dnnl::algorithm::convolution_direct,
              any ? memory::desc(sd, DT::f32, Tag::any) : user_src_md,
              memory::desc({n, k, 1, 1}, DT::f32, Tag::any), b_n,
              any ? memory::desc(dd, DT::f32, Tag::any) : user_dst_md,
              {1, 1}, {0, 0}, {0, 0}),
          attr, eng);
      break;
    }
    default:
      break;
  }
  src_md = pd.query_md(dnnl::query::src_md, 0);
  dst_md = pd.query_md(dnnl::query::dst_md, 0);
  const memory::desc w_md = pd.query_md(dnnl::query::weights_md, 0);
  memory packed(w_md, eng);
  memory user_w_mem(user_w, eng, const_cast<float*>(w));
  dnnl::reorder(user_w_mem, packed).execute(CpuStream(), user_w_mem, packed);
  CpuStream().wait();
  L.args[DNNL_ARG_WEIGHTS] = packed;
  L.args[DNNL_ARG_BIAS] = memory(user_b, eng, const_cast<float*>(b));
  L.user_src = memory(user_src_md, eng, x);
  L.user_dst = memory(user_dst_md, eng, y);
  if (src_md != user_src_md) {
    memory internal(src_md, eng);
    if (form == kConvBlockedWithReorders) L.src_in = dnnl::reorder(L.user_src, internal);
    L.args[DNNL_ARG_SRC] = internal;
  } else {
    L.args[DNNL_ARG_SRC] = L.user_src;
  }
  if (dst_md != user_dst_md) {
    memory internal(dst_md, eng);
    if (form == kConvBlockedWithReorders) L.dst_out = dnnl::reorder(internal, L.user_dst);
    L.args[DNNL_ARG_DST] = internal;
  } else {
    L.args[DNNL_ARG_DST] = L.user_dst;
  }
  L.args[DNNL_ARG_SCRATCHPAD] = memory(pd.scratchpad_desc(), eng);
  L.prim = dnnl::primitive(pd);
  L.label = absl::StrCat(kFormNames[form], " ", pd.impl_info_str(),
                         " src=", FormatOf(src_md), " w=", FormatOf(w_md),
                         " dst=", FormatOf(dst_md));
  return L;
}

void BM_Linear(benchmark::State& state) {
  (void)SetNumThreads(static_cast<int>(state.range(4)));
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const Form form = static_cast<Form>(state.range(3));
  std::vector<float> x = RandomData(m * k, 1), w = RandomData(k * n, 2),
                     b = RandomData(n, 3), y(static_cast<size_t>(m * n));
  std::optional<Linear> L;
  try {
    L = Build(form, m, k, n, x.data(), w.data(), b.data(), y.data());
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  dnnl::stream& s = CpuStream();
  for (auto _ : state) {
    if (L->kiln) {
      if (!L->kiln->Execute(x.data(), {}, y.data()).ok()) {
        state.SkipWithError("execute failed");
        break;
      }
      continue;
    }
    if (L->src_in) L->src_in->execute(s, L->user_src, L->args[DNNL_ARG_SRC]);
    L->prim.execute(s, L->args);
    if (L->dst_out) L->dst_out->execute(s, L->args[DNNL_ARG_DST], L->user_dst);
    s.wait();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(L->label);
  state.counters["GFLOPS"] = benchmark::Counter(
      2.0 * m * k * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  const int64_t shapes[][3] = {{197, 768, 768}, {197, 768, 3072}, {197, 3072, 768},
                               {128, 768, 768}, {128, 768, 3072}, {128, 3072, 768},
                               {50, 768, 2304},  {1, 768, 768},    {4, 768, 768},
                               {16, 768, 768},   {32, 768, 768}};
  for (const auto& s : shapes) {
    for (int f = 0; f < kNumForms; ++f) b->Args({s[0], s[1], s[2], f, 1});
  }
  b->ArgNames({"M", "K", "N", "form", "thr"});
}
BENCHMARK(BM_Linear)->Apply(Shapes)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::onednn
