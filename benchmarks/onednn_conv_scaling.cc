// Time of plain oneDNN f32 forward convs (weights reordered once, as kiln
// prepacks them; activations channel-blocked, as kiln's layout pass leaves
// them) at given shapes and thread counts: what the library alone reaches,
// to hold a model's per-call times and 2-thread scaling against.
//
//   onednn_conv_scaling --shapes=ic64oc64_ih56kh3sh1ph1,ic512oc128_ih28kh1sh1ph0:relu
//                       --threads=1,2 [--block=16|any|nhwc] [--benchmark_min_time=0.2]
//
// A shape is benchdnn's problem text (keys mb ic oc ih iw kh kw sh sw ph pw;
// square when only the h form is given; mb 1 by default), optionally
// ":relu" (a fused relu post-op) or ":sum" (a fused residual add and relu).
// The `seq` benchmark runs every shape once per iteration, in order, each on
// its own buffers: the weights and activations leave the cache between
// calls as they do in a model.
#include <omp.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
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

using dnnl::memory;

struct Shape {
  int64_t mb = 1, ic = 0, oc = 0, ih = 0, iw = 0, kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0;
  std::string post;  // "", "relu" or "sum"
  std::string text;
  int64_t oh() const { return (ih + 2 * ph - kh) / sh + 1; }
  int64_t ow() const { return (iw + 2 * pw - kw) / sw + 1; }
  double flops() const { return 2.0 * mb * oc * oh() * ow() * ic * kh * kw; }
};

bool ParseShape(absl::string_view s, Shape* out) {
  out->text = std::string(s);
  std::vector<absl::string_view> parts = absl::StrSplit(s, ':');
  if (parts.size() > 2) return false;
  if (parts.size() == 2) {
    if (parts[1] != "relu" && parts[1] != "sum") return false;
    out->post = std::string(parts[1]);
  }
  std::map<std::string, int64_t> kv;
  absl::string_view t = parts[0];
  size_t i = 0;
  while (i < t.size()) {
    if (t[i] == '_') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < t.size() && std::isalpha(static_cast<unsigned char>(t[j]))) ++j;
    size_t k = j;
    while (k < t.size() && std::isdigit(static_cast<unsigned char>(t[k]))) ++k;
    if (j == i || k == j) return false;
    int64_t v = 0;
    if (!absl::SimpleAtoi(t.substr(j, k - j), &v) || v > (1 << 16)) return false;
    kv[std::string(t.substr(i, j - i))] = v;
    i = k;
  }
  auto get = [&](const char* key, int64_t fallback) {
    auto it = kv.find(key);
    return it == kv.end() ? fallback : it->second;
  };
  out->mb = get("mb", 1);
  out->ic = get("ic", 0);
  out->oc = get("oc", 0);
  out->ih = get("ih", 0);
  out->iw = get("iw", out->ih);
  out->kh = get("kh", 1);
  out->kw = get("kw", out->kh);
  out->sh = get("sh", 1);
  out->sw = get("sw", out->sh);
  out->ph = get("ph", 0);
  out->pw = get("pw", out->ph);
  return out->mb > 0 && out->ic > 0 && out->oc > 0 && out->ih > 0 && out->iw > 0 &&
         out->kh > 0 && out->kw > 0 && out->sh > 0 && out->sw > 0 && out->oh() > 0 &&
         out->ow() > 0;
}

std::vector<float> RandomData(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

memory::format_tag ActivationTag(const std::string& block) {
  if (block == "any") return memory::format_tag::any;
  if (block == "nhwc") return memory::format_tag::nhwc;
  if (block == "8") return memory::format_tag::nChw8c;
  return memory::format_tag::nChw16c;
}

// One conv, created under the current team size, with its own buffers.
struct Conv {
  Conv(const Shape& s, const std::string& block, const dnnl::engine& eng, dnnl::stream& strm) {
    const memory::format_tag act = ActivationTag(block);
    // A few-channel input (an image) stays plain, as a model's input does.
    const memory::desc src_md({s.mb, s.ic, s.ih, s.iw}, memory::data_type::f32,
                              s.ic < 8 ? memory::format_tag::nchw : act);
    const memory::desc wei_md({s.oc, s.ic, s.kh, s.kw}, memory::data_type::f32,
                              memory::format_tag::any);
    const memory::desc bia_md({s.oc}, memory::data_type::f32, memory::format_tag::a);
    const memory::desc dst_md({s.mb, s.oc, s.oh(), s.ow()}, memory::data_type::f32, act);
    dnnl::post_ops ops;
    if (s.post == "sum") ops.append_sum(1.f);
    if (!s.post.empty()) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, src_md, wei_md,
                                        bia_md, dst_md, {s.sh, s.sw}, {s.ph, s.pw}, {s.ph, s.pw}),
        attr, eng);
    impl = pd.impl_info_str();
    const memory::desc wei_plain({s.oc, s.ic, s.kh, s.kw}, memory::data_type::f32,
                                 memory::format_tag::oihw);
    std::vector<float> w = RandomData(s.oc * s.ic * s.kh * s.kw, 2);
    memory wei_user(wei_plain, eng, w.data());
    memory wei(pd.weights_desc(), eng);
    dnnl::reorder(wei_user, wei).execute(strm, wei_user, wei);
    memory src(pd.src_desc(), eng);
    memory dst(pd.dst_desc(), eng);
    std::vector<float> x = RandomData(static_cast<int64_t>(pd.src_desc().get_size() / 4), 1);
    std::memcpy(src.get_data_handle(), x.data(), pd.src_desc().get_size());
    std::memset(dst.get_data_handle(), 0, pd.dst_desc().get_size());
    memory bia(bia_md, eng);
    std::memset(bia.get_data_handle(), 0, bia_md.get_size());
    strm.wait();
    prim = dnnl::convolution_forward(pd);
    args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bia},
            {DNNL_ARG_DST, dst}};
  }
  void Run(dnnl::stream& strm) { prim.execute(strm, args); }
  std::string impl;
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
};

void BM_Convs(benchmark::State& state, std::vector<Shape> shapes, int threads,
              std::string block) {
  omp_set_num_threads(threads);  // primitives take the team size at creation
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::vector<std::unique_ptr<Conv>> convs;
  double flops = 0;
  for (const Shape& s : shapes) {
    convs.push_back(std::make_unique<Conv>(s, block, eng, strm));
    flops += s.flops();
  }
  for (auto& c : convs) c->Run(strm);
  strm.wait();
  for (auto _ : state) {
    for (auto& c : convs) c->Run(strm);
    strm.wait();
  }
  state.counters["flops"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
  state.SetLabel(shapes.size() == 1 ? absl::StrCat(shapes[0].text, " ", convs[0]->impl)
                                    : absl::StrCat(shapes.size(), " convs"));
}

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
  const std::string shapes_flag = TakeFlag(&argc, argv, "shapes", "ic64oc64_ih56kh3sh1ph1");
  const std::string threads_flag = TakeFlag(&argc, argv, "threads", "1");
  const std::string block = TakeFlag(&argc, argv, "block", "16");
  const bool seq_only = TakeFlag(&argc, argv, "seq_only", "0") == "1";
  std::vector<Shape> shapes;
  for (absl::string_view text : absl::StrSplit(shapes_flag, ',', absl::SkipEmpty())) {
    Shape s;
    if (!ParseShape(text, &s)) {
      std::fprintf(stderr, "onednn_conv_scaling: bad shape '%.*s'\n",
                   static_cast<int>(text.size()), text.data());
      return 2;
    }
    shapes.push_back(s);
  }
  std::vector<int> thread_counts;
  for (absl::string_view text : absl::StrSplit(threads_flag, ',', absl::SkipEmpty())) {
    int t = 0;
    if (!absl::SimpleAtoi(text, &t) || t < 1 || t > 1024) {
      std::fprintf(stderr, "onednn_conv_scaling: bad thread count '%.*s'\n",
                   static_cast<int>(text.size()), text.data());
      return 2;
    }
    thread_counts.push_back(t);
  }
  if (shapes.empty() || thread_counts.empty()) {
    std::fprintf(stderr, "onednn_conv_scaling: --shapes and --threads must not be empty\n");
    return 2;
  }
  for (int t : thread_counts) {
    if (!seq_only) {
      for (const Shape& s : shapes) {
        benchmark::RegisterBenchmark(absl::StrCat("conv/", s.text, "/threads:", t).c_str(),
                                     BM_Convs, std::vector<Shape>{s}, t, block)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
    if (shapes.size() > 1) {
      benchmark::RegisterBenchmark(absl::StrCat("seq/threads:", t).c_str(), BM_Convs, shapes,
                                   t, block)
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
