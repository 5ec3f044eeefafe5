#include "backends/onednn/winograd.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "backends/onednn/threads.h"
#include "gtest/gtest.h"

namespace kiln::onednn {
namespace {

// Offset of (n, c, y, x) in a [N][C/B][H][W][B] or [N][H][W][C] buffer.
int64_t At(const WinogradShape& s, int64_t c_count, int64_t h, int64_t w, int64_t n,
           int64_t c, int64_t y, int64_t x) {
  if (s.channels_last) return ((n * h + y) * w + x) * c_count + c;
  const int64_t b = s.block;
  return (((n * (c_count / b) + c / b) * h + y) * w + x) * b + c % b;
}

// The direct 3x3 conv in double on buffers laid out as WinogradConv::Run
// takes them, zero padding `pad_top`/`pad_left` in front.
std::vector<double> DirectConv(const WinogradShape& s, const std::vector<float>& src,
                               const std::vector<float>& w) {
  std::vector<double> dst(static_cast<size_t>(s.batch * s.out_channels * s.out_h * s.out_w));
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t o = 0; o < s.out_channels; ++o) {
      for (int64_t y = 0; y < s.out_h; ++y) {
        for (int64_t x = 0; x < s.out_w; ++x) {
          double acc = 0;
          for (int64_t i = 0; i < s.in_channels; ++i) {
            for (int64_t ky = 0; ky < 3; ++ky) {
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = y + ky - s.pad_top, ix = x + kx - s.pad_left;
                if (iy < 0 || iy >= s.in_h || ix < 0 || ix >= s.in_w) continue;
                const float v = src[At(s, s.in_channels, s.in_h, s.in_w, n, i, iy, ix)];
                acc += static_cast<double>(v) * w[((o * s.in_channels + i) * 3 + ky) * 3 + kx];
              }
            }
          }
          dst[At(s, s.out_channels, s.out_h, s.out_w, n, o, y, x)] = acc;
        }
      }
    }
  }
  return dst;
}

void ExpectMatchesDirect(const WinogradShape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> src(static_cast<size_t>(s.batch * s.in_channels * s.in_h * s.in_w));
  std::vector<float> w(static_cast<size_t>(s.out_channels * s.in_channels * 9));
  for (float& v : src) v = dist(rng);
  for (float& v : w) v = dist(rng);
  absl::StatusOr<std::unique_ptr<WinogradConv>> conv = WinogradConv::Create(s, w.data());
  ASSERT_TRUE(conv.ok()) << conv.status();
  // Poisoned, so an output the transform misses shows.
  std::vector<float> got(static_cast<size_t>(s.batch * s.out_channels * s.out_h * s.out_w),
                         NAN);
  (*conv)->Run(src.data(), got.data());
  const std::vector<double> want = DirectConv(s, src, w);
  // Each output sums 9 * in_channels products of magnitude <= 1; f32
  // accumulation in a different order (and the transforms' additions) stays
  // within a few ulps of that sum's scale.
  const double tol = 1e-5 * std::sqrt(9.0 * s.in_channels) * 4;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "output " << i << " not written";
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  EXPECT_LE(worst, tol) << s.in_channels << "->" << s.out_channels << " " << s.in_h << "x"
                        << s.in_w << " block " << s.block;
}

TEST(WinogradConv, SamePaddingMatchesDirect) {
  WinogradShape s;
  s.in_channels = 16;
  s.out_channels = 24;
  s.in_h = s.out_h = 12;
  s.in_w = s.out_w = 10;
  s.pad_top = s.pad_left = 1;
  ExpectMatchesDirect(s, 1);
}

// Odd output sizes leave half-empty tiles at the bottom and right.
TEST(WinogradConv, OddSizesAndBatch) {
  WinogradShape s;
  s.batch = 2;
  s.in_channels = 8;
  s.out_channels = 8;
  s.in_h = s.out_h = 7;
  s.in_w = s.out_w = 9;
  s.pad_top = s.pad_left = 1;
  ExpectMatchesDirect(s, 2);
}

TEST(WinogradConv, NoPaddingAndWidePadding) {
  WinogradShape s;
  s.in_channels = 8;
  s.out_channels = 16;
  s.in_h = 9;
  s.in_w = 11;
  s.out_h = 7;
  s.out_w = 9;
  ExpectMatchesDirect(s, 3);
  s.pad_top = s.pad_left = 2;  // and 2 at the end: 9 + 4 - 2
  s.out_h = 11;
  s.out_w = 13;
  ExpectMatchesDirect(s, 4);
}

TEST(WinogradConv, Block16AndTwoThreads) {
  WinogradShape s;
  s.in_channels = 32;
  s.out_channels = 16;
  s.in_h = s.out_h = 13;
  s.in_w = s.out_w = 6;
  s.pad_top = s.pad_left = 1;
  s.block = 16;
  ASSERT_TRUE(SetNumThreads(2).ok());
  ExpectMatchesDirect(s, 5);
  ASSERT_TRUE(SetNumThreads(1).ok());
  ExpectMatchesDirect(s, 6);
}

// Enough tile rows (2 x 29) for several chunks, the last one shorter.
TEST(WinogradConv, ManyChunksWithATail) {
  WinogradShape s;
  s.batch = 2;
  s.in_channels = 8;
  s.out_channels = 8;
  s.in_h = s.out_h = 58;
  s.in_w = s.out_w = 40;
  s.pad_top = s.pad_left = 1;
  for (int threads : {1, 2}) {
    ASSERT_TRUE(SetNumThreads(threads).ok());
    ExpectMatchesDirect(s, 8 + threads);
  }
  ASSERT_TRUE(SetNumThreads(1).ok());
}

TEST(WinogradConv, ChannelsLast) {
  WinogradShape s;
  s.batch = 2;
  s.in_channels = 24;
  s.out_channels = 16;
  s.in_h = s.out_h = 9;
  s.in_w = s.out_w = 8;
  s.pad_top = s.pad_left = 1;
  s.channels_last = true;
  ExpectMatchesDirect(s, 7);
}

TEST(WinogradConv, RejectsUnsupportedShapes) {
  std::vector<float> w(16 * 12 * 9, 0.f);
  WinogradShape s;
  s.in_channels = 12;  // not a multiple of the block
  s.out_channels = 16;
  s.in_h = s.out_h = 8;
  s.in_w = s.out_w = 8;
  s.pad_top = s.pad_left = 1;
  EXPECT_EQ(WinogradConv::Create(s, w.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  s.in_channels = 16;
  s.block = 4;
  EXPECT_EQ(WinogradConv::Create(s, w.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::onednn
