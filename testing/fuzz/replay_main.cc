// File: testing/fuzz/replay_main.cc — a fuzz target's corpus as a test: each
// file of the folder argv[1] (relative to the runfiles root) goes through
// LLVMFuzzerTestOneInput. A finding aborts the test; a seed that passes
// returns normally. The corpus holds every past finding, so this is also the
// regression test of each fix. An input that raises the process's peak RSS by
// more than 1 GiB is a finding too, as tools/fuzz.sh's -rss_limit_mb makes it:
// a hang that is a huge allocation fails here by its size, not its time.
#include <sys/resource.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::string g_corpus_dir;

constexpr int64_t kMaxPeakGrowthBytes = int64_t{1} << 30;

// The process's peak resident set size so far, in bytes.
int64_t PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return int64_t{usage.ru_maxrss} * 1024;  // Linux reports KiB
}

std::filesystem::path CorpusDir() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  std::filesystem::path dir(g_corpus_dir);
  if (srcdir != nullptr && workspace != nullptr) {
    dir = std::filesystem::path(srcdir) / workspace / g_corpus_dir;
  }
  return dir;
}

TEST(FuzzCorpusReplay, EveryCorpusFileRuns) {
  const std::filesystem::path dir = CorpusDir();
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "empty corpus " << dir;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path;
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    // A finding aborts inside the call, and the test log names the file.
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.filename().c_str(), bytes.size());
    const int64_t peak_before = PeakRssBytes();
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                                     bytes.size()),
              0)
        << path;
    const int64_t growth = PeakRssBytes() - peak_before;
    EXPECT_LE(growth, kMaxPeakGrowthBytes)
        << path << " raised the peak RSS by " << (growth >> 20) << " MiB";
  }
  std::printf("replayed %zu corpus files from %s\n", files.size(), dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  g_corpus_dir = argv[1];
  return RUN_ALL_TESTS();
}
