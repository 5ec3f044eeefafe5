// ReorderOnce: the packed copy holds the source's values (checked by
// reading every element back through its blocked layout) and the caller's
// OpenMP team size is left as it was.
#include "backends/onednn/engine.h"

#include <vector>

#include "backends/onednn/threads.h"
#include "gtest/gtest.h"

namespace kiln::onednn {
namespace {

using Tag = dnnl::memory::format_tag;

TEST(ReorderOnce, PacksIntoABlockedLayoutAndKeepsTheTeamSize) {
  ASSERT_TRUE(SetNumThreads(2).ok());
  // OIhw weights 16x3x2x2 into OIhw8i8o-like blocking (Ohwi8o here).
  const dnnl::memory::dims dims = {16, 3, 2, 2};
  std::vector<float> src(16 * 3 * 2 * 2);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7.0f;
  dnnl::memory plain({dims, dnnl::memory::data_type::f32, Tag::oihw}, CpuEngine(), src.data());
  dnnl::memory packed({dims, dnnl::memory::data_type::f32, Tag::Ohwi8o}, CpuEngine());
  ReorderOnce(plain, packed);
  EXPECT_EQ(NumThreads(), 2);
  const float* p = static_cast<const float*>(packed.get_data_handle());
  // Ohwi8o: [O/8][h][w][i][8 o].
  for (int o = 0; o < 16; ++o) {
    for (int i = 0; i < 3; ++i) {
      for (int h = 0; h < 2; ++h) {
        for (int w = 0; w < 2; ++w) {
          const size_t plain_at = ((o * 3 + i) * 2 + h) * 2 + w;
          const size_t packed_at = ((((o / 8) * 2 + h) * 2 + w) * 3 + i) * 8 + o % 8;
          EXPECT_EQ(p[packed_at], src[plain_at]) << o << "," << i << "," << h << "," << w;
        }
      }
    }
  }
  ASSERT_TRUE(SetNumThreads(1).ok());
  ReorderOnce(plain, packed);
  EXPECT_EQ(NumThreads(), 1);
}

}  // namespace
}  // namespace kiln::onednn
