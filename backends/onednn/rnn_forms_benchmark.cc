// Microbenchmark: an ONNX LSTM or GRU (constant weights, forward, bias, no
// initial states) as oneDNN 2.6's RNN primitive and as an RnnSequence (projection
// matmul plus kiln's Highway recurrence), each built through
// OneDnnExternKernel::Create from a lowered one-node graph, as the runtime
// builds them. Per shape and thread count the two forms are timed in
// alternation (rounds x {primitive, sequence}, each sample the median of
// `reps` runs), and the median of the per-round ratios is printed: what
// UseRnnSequence's rule (decisions 0065, 0069) is read from.
//
//   bazel run -c opt //backends/onednn:rnn_forms_benchmark -- [rounds]
//       [threads,..] [seq,batch,input,hidden | all] [lstm | gru | lbr_gru]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/onednn_call.h"
#include "backends/onednn/threads.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"

namespace kiln::onednn {
namespace {

using Form = OneDnnCallOptions::RnnForm;

struct Shape {
  int64_t seq, batch, input, hidden;
};

std::string RandomConstant(const ir::Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-0.2f, 0.2f);
  ir::Tensor t(ir::DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(gen);
  return ir::PrintTensor(t, ir::PrintOptions::Full());
}

// cell: "lstm", "gru" or "lbr_gru" (linear_before_reset=1).
std::string RnnText(const Shape& s, const std::string& cell) {
  const int64_t H = s.hidden, G = cell == "lstm" ? 4 : 3;
  const std::string op =
      cell == "lstm" ? "LSTM"
                     : absl::StrCat("GRU(%x, %w, %r, %b) {linear_before_reset=",
                                    cell == "lbr_gru" ? 1 : 0, ", hidden_size=");
  return absl::StrCat("graph main(%x: f32[", s.seq, ",", s.batch, ",", s.input,
                      "]) -> (%y) opset 17 {\n  %w = constant ",
                      RandomConstant({1, G * H, s.input}, 2), "\n  %r = constant ",
                      RandomConstant({1, G * H, H}, 3), "\n  %b = constant ",
                      RandomConstant({1, 2 * G * H}, 4), "\n  %y = ",
                      cell == "lstm" ? "LSTM(%x, %w, %r, %b) {hidden_size=" : op, H,
                      "} : f32[", s.seq, ",1,", s.batch, ",", H, "]\n}\n");
}

struct Built {
  ir::loop::LoopModule lp;
  std::unique_ptr<OneDnnExternKernel> kernel[2];
  std::vector<std::vector<float>> storage;
  std::vector<void*> ins, outs;
};

std::unique_ptr<Built> Build(const Shape& s, const std::string& cell) {
  auto g = ir::ParseGraph(RnnText(s, cell));
  if (!g.ok()) { std::fprintf(stderr, "%s\n", g.status().ToString().c_str()); std::exit(1); }
  auto lp = lowering::LowerGraph(*g);
  if (!lp.ok()) { std::fprintf(stderr, "%s\n", lp.status().ToString().c_str()); std::exit(1); }
  auto b = std::make_unique<Built>();
  b->lp = std::move(*lp);
  const ir::loop::Kernel* ext = nullptr;
  for (const auto& k : b->lp.program.kernels) {
    if (k.kind == ir::loop::Kernel::Kind::kExtern) ext = &k;
  }
  for (int f = 0; f < 2; ++f) {
    OneDnnCallOptions o;
    o.rnn_form = f == 0 ? Form::kPrimitive : Form::kSequence;
    auto k = OneDnnExternKernel::Create(b->lp.program, *ext, b->lp.constants, o);
    if (!k.ok()) { std::fprintf(stderr, "%s\n", k.status().ToString().c_str()); std::exit(1); }
    b->kernel[f] = std::move(*k);
  }
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto add = [&](int32_t buf, std::vector<void*>& ptrs) {
    const ir::loop::Buffer& bb = b->lp.program.buffers[buf];
    auto it = b->lp.constants.find(buf);
    std::vector<float> v(static_cast<size_t>(ir::NumElements(bb.shape)));
    if (it != b->lp.constants.end()) {
      std::copy_n(it->second->data<float>(), v.size(), v.begin());
    } else {
      for (float& x : v) x = dist(gen);
    }
    b->storage.push_back(std::move(v));
    ptrs.push_back(b->storage.back().data());
  };
  b->storage.reserve(ext->call.inputs.size() + ext->call.outputs.size());
  for (int32_t i : ext->call.inputs) add(i, b->ins);
  for (int32_t o : ext->call.outputs) add(o, b->outs);
  return b;
}

// Median of `reps` timed runs, microseconds.
double Sample(OneDnnExternKernel& k, const Built& b, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status st = k.Run(b.ins, b.outs);
    const auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) { std::fprintf(stderr, "%s\n", st.ToString().c_str()); std::exit(1); }
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace kiln::onednn

int main(int argc, char** argv) {
  using namespace kiln::onednn;
  int rounds = 5;
  std::vector<int> threads = {1, 2};
  if (argc > 1 && !absl::SimpleAtoi(argv[1], &rounds)) return 2;
  if (argc > 2) {
    threads.clear();
    for (absl::string_view t : absl::StrSplit(argv[2], ',')) {
      int n = 0;
      if (!absl::SimpleAtoi(t, &n)) return 2;
      threads.push_back(n);
    }
  }
  std::vector<Shape> shapes = {
      {16, 1, 64, 128},   {16, 2, 64, 128},   {16, 4, 64, 128},   {16, 8, 64, 128},
      {16, 16, 64, 128},  {128, 1, 512, 512}, {128, 2, 512, 512}, {128, 4, 512, 512},
      {128, 8, 512, 512}, {128, 16, 512, 512}, {64, 1, 256, 256}, {64, 4, 256, 256},
      {64, 16, 256, 256}, {32, 1, 40, 64},    {32, 8, 40, 64},    {32, 32, 40, 64},
  };
  if (argc > 3 && std::string(argv[3]) != "all") {
    std::vector<int64_t> d;
    for (absl::string_view t : absl::StrSplit(argv[3], ',')) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(t, &n) || n < 1) return 2;
      d.push_back(n);
    }
    if (d.size() != 4) return 2;
    shapes = {{d[0], d[1], d[2], d[3]}};
  }
  const std::string cell = argc > 4 ? argv[4] : "lstm";
  if (cell != "lstm" && cell != "gru" && cell != "lbr_gru") return 2;
  std::printf("%s\n\n", cell.c_str());
  std::printf("| seq | batch | input | hidden | threads | primitive us | sequence us | "
              "primitive/sequence | primitive impl |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (const Shape& s : shapes) {
    for (int th : threads) {
      // oneDNN's RNN primitive fixes its thread count at creation.
      if (!SetNumThreads(th).ok()) return 2;
      auto b = Build(s, cell);
      // Work per run sets the repetitions: about 20 ms of primitive time.
      const double probe = Sample(*b->kernel[0], *b, 3);
      const int reps = std::max(3, std::min(200, static_cast<int>(20000.0 / probe)));
      std::vector<double> prim, seq, ratio;
      for (int r = 0; r < rounds; ++r) {
        prim.push_back(Sample(*b->kernel[0], *b, reps));
        seq.push_back(Sample(*b->kernel[1], *b, reps));
        ratio.push_back(prim.back() / seq.back());
      }
      std::printf("| %lld | %lld | %lld | %lld | %d | %.1f | %.1f | %.2f | %s |\n",
                  static_cast<long long>(s.seq), static_cast<long long>(s.batch),
                  static_cast<long long>(s.input), static_cast<long long>(s.hidden), th,
                  Median(prim), Median(seq), Median(ratio), b->kernel[0]->info().impl.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
