// Microbenchmark: an LSTM's RnnSequence over f32 recurrent weights against
// the same LSTM over 8-bit recurrent weights (QuantizedRecurrence, int8,
// per-direction scales; the f32 form gets their dequantized values). The
// two are timed in alternation (rounds x {f32, s8}, each sample the median
// of `reps` runs) and the median of the per-round ratios is printed, with
// the largest difference between their outputs.
//
//   bazel run -c opt //backends/onednn:rnn_int8_benchmark -- [rounds]
//       [threads,..] [seq,batch,input,hidden,dirs]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/onednn/rnn_sequence.h"
#include "backends/onednn/threads.h"

namespace kiln::onednn {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  std::vector<int> threads = {1, 2};
  if (argc > 2) {
    threads.clear();
    for (absl::string_view t : absl::StrSplit(argv[2], ',')) {
      int n = 0;
      if (!absl::SimpleAtoi(t, &n)) return 2;
      threads.push_back(n);
    }
  }
  RnnSequenceShape shape;  // ddddocr-common-old's LSTM at the test width
  shape.seq = 32;
  shape.batch = 1;
  shape.input = 512;
  shape.hidden = 512;
  shape.dirs = 2;
  if (argc > 3) {
    std::vector<std::string> f = absl::StrSplit(argv[3], ',');
    if (f.size() != 5) return 2;
    int64_t* dst[] = {&shape.seq, &shape.batch, &shape.input, &shape.hidden, &shape.dirs};
    for (int i = 0; i < 5; ++i) {
      if (!absl::SimpleAtoi(f[i], dst[i])) return 2;
    }
  }
  const int64_t T = shape.seq, N = shape.batch, I = shape.input, H = shape.hidden,
                D = shape.dirs;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(D * 4 * H * I), b(D * 8 * H), x(T * N * I);
  for (float& v : w) v = 0.05f * dist(gen);
  for (float& v : b) v = 0.1f * dist(gen);
  for (float& v : x) v = dist(gen);
  std::vector<int8_t> q(D * 4 * H * H);
  for (int8_t& v : q) v = static_cast<int8_t>(static_cast<int>(gen() % 255) - 127);
  std::vector<float> scale(D);
  // Scales that keep the recurrent gain below 1: with random weights and a
  // larger gain the recurrence is chaotic, and any two roundings diverge.
  for (int64_t d = 0; d < D; ++d) scale[d] = 0.0004f + 0.0001f * static_cast<float>(d);
  std::vector<float> r(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    r[i] = static_cast<float>(q[i]) * scale[i / (4 * H * H)];
  }
  QuantizedRecurrence rq;
  rq.q = q.data();
  rq.scale = scale.data();
  auto f32 = RnnSequence::Create(shape, w.data(), r.data(), b.data(), nullptr, true, "f32");
  auto s8 = RnnSequence::Create(shape, w.data(), rq, b.data(), nullptr, true, "s8");
  if (!f32.ok() || !s8.ok()) {
    std::fprintf(stderr, "%s %s\n", f32.status().ToString().c_str(),
                 s8.status().ToString().c_str());
    return 1;
  }
  std::printf("shape seq %ld batch %ld input %ld hidden %ld dirs %ld\nf32: %s\ns8:  %s\n",
              static_cast<long>(T), static_cast<long>(N), static_cast<long>(I),
              static_cast<long>(H), static_cast<long>(D), (*f32)->impl().c_str(),
              (*s8)->impl().c_str());
  std::vector<float> y_f(T * D * N * H), y_q(y_f.size());
  for (int nt : threads) {
    if (!SetNumThreads(nt).ok()) return 1;
    auto time = [&](RnnSequence& s, std::vector<float>& y) {
      std::vector<double> ms;
      for (int rep = 0; rep < 9; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        if (!s.Run(x.data(), nullptr, nullptr, y.data(), nullptr, nullptr).ok()) std::abort();
        ms.push_back(std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - t0).count());
      }
      return Median(ms);
    };
    std::vector<double> tf, tq, ratio;
    for (int round = 0; round < rounds; ++round) {
      tf.push_back(time(**f32, y_f));
      tq.push_back(time(**s8, y_q));
      ratio.push_back(tf.back() / tq.back());
    }
    double diff = 0, maxabs = 0;
    for (size_t i = 0; i < y_f.size(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(y_f[i] - y_q[i])));
      maxabs = std::max(maxabs, static_cast<double>(std::fabs(y_f[i])));
    }
    std::printf("threads %d: f32 %.3f ms, s8 %.3f ms, f32/s8 %.2fx (median of %d rounds); "
                "max|y_f32 - y_s8| %.2e of max|y| %.3f\n",
                nt, Median(tf), Median(tq), Median(ratio), rounds, diff, maxabs);
  }
  return 0;
}

}  // namespace
}  // namespace kiln::onednn

int main(int argc, char** argv) { return kiln::onednn::Main(argc, argv); }
