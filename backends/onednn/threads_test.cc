// ScopedFlushDenormals (backends/onednn/threads.h): every thread of the
// OpenMP team flushes subnormals inside the scope, none after it, and a
// nested scope leaves the enclosing one in charge. What a thread does with
// a subnormal is checked by computing one: 1e-20f * 1e-20f is 1e-40, below
// FLT_MIN (1.18e-38), so IEEE 754 gives a subnormal and FTZ gives 0.
#include "backends/onednn/threads.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::onednn {
namespace {

// Per thread of a `team`-thread OpenMP team: whether 1e-20f * 1e-20f is 0.
std::vector<int> TeamFlushes(int team) {
  std::vector<int> flushes(team, -1);
#pragma omp parallel num_threads(team)
  {
    volatile float tiny = 1e-20f;
    const float product = tiny * tiny;
    flushes[omp_get_thread_num()] = product == 0.0f;
  }
  return flushes;
}

TEST(ScopedFlushDenormals, FlushesOnEveryTeamThreadAndRestores) {
  ASSERT_TRUE(SetNumThreads(2).ok());
  ASSERT_EQ(TeamFlushes(2), (std::vector<int>{0, 0}));
  EXPECT_FALSE(FlushesDenormals());
  {
    ScopedFlushDenormals flush(true);
    EXPECT_TRUE(FlushesDenormals());
    EXPECT_EQ(TeamFlushes(2), (std::vector<int>{1, 1}));
    {
      ScopedFlushDenormals nested(true);
      EXPECT_EQ(TeamFlushes(2), (std::vector<int>{1, 1}));
    }
    // The nested scope did not restore the enclosing one's mode.
    EXPECT_EQ(TeamFlushes(2), (std::vector<int>{1, 1}));
  }
  EXPECT_FALSE(FlushesDenormals());
  EXPECT_EQ(TeamFlushes(2), (std::vector<int>{0, 0}));
}

TEST(ScopedFlushDenormals, DisabledAndOneThreadScopes) {
  ASSERT_TRUE(SetNumThreads(1).ok());
  {
    ScopedFlushDenormals off(false);
    EXPECT_FALSE(FlushesDenormals());
  }
  {
    ScopedFlushDenormals flush(true);
    EXPECT_TRUE(FlushesDenormals());
    EXPECT_EQ(TeamFlushes(1), (std::vector<int>{1}));
  }
  EXPECT_FALSE(FlushesDenormals());
}

TEST(ParallelFor, EveryIndexOnceOnAtMostTheTeam) {
  const int before = NumThreads();
  for (int threads : {1, 2, 3}) {
    ASSERT_TRUE(SetNumThreads(threads).ok());
    for (int64_t n : {0, 1, 2, 5}) {
      std::vector<int> calls(static_cast<size_t>(n), 0);
      std::vector<int> thread_of(static_cast<size_t>(n), -1);
      ParallelFor(n, [&](int64_t i) {
        ++calls[static_cast<size_t>(i)];
        thread_of[static_cast<size_t>(i)] = omp_get_thread_num();
      });
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(calls[static_cast<size_t>(i)], 1) << threads << " threads, n " << n;
        // Index i runs on thread i % team, the team min(n, threads).
        const int64_t team = std::min<int64_t>(n, threads);
        EXPECT_EQ(thread_of[static_cast<size_t>(i)], i % team) << threads << " threads";
      }
    }
  }
  ASSERT_TRUE(SetNumThreads(before).ok());
}

}  // namespace
}  // namespace kiln::onednn
