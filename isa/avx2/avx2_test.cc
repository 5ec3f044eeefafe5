// Tests for the avx2 VecISA module: its row in the table, host detection
// checked against an independent source (GCC's cpuid builtins / the build
// target), and that the row's flags make Highway select the row's target.
#include <gtest/gtest.h>

#include "isa/avx2/avx2.h"
#include "isa/isa.h"
#include "isa/static_target.h"

namespace kiln::isa {
namespace {

bool HostReallyHas() {
  return
#if defined(__x86_64__)
    __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
#else
    false
#endif
      ;
}

TEST(avx2Isa, IsInTheTable) {
  const VecIsa* isa = FindIsa("avx2");
  ASSERT_NE(isa, nullptr);
  EXPECT_EQ(isa->name, "avx2");
  EXPECT_GT(isa->vector_bytes, 0);
  EXPECT_NE(isa->hwy_target, 0);
  EXPECT_EQ(isa->host_supports, &avx2::HostSupports);
}

TEST(avx2Isa, HostDetectionMatchesCpuid) {
  const VecIsa* isa = FindIsa("avx2");
  ASSERT_NE(isa, nullptr);
  EXPECT_EQ(isa->host_supports(), HostReallyHas());
  absl::StatusOr<const VecIsa*> selected = SelectIsa("avx2");
  EXPECT_EQ(selected.ok(), HostReallyHas()) << selected.status();
  if (!selected.ok()) {
    EXPECT_NE(selected.status().message().find("not supported by this CPU"),
              std::string::npos);
  }
}

TEST(avx2Isa, FlagsSelectTheHighwayTarget) {
  const VecIsa* isa = FindIsa("avx2");
  ASSERT_NE(isa, nullptr);
  absl::StatusOr<int64_t> target = StaticHwyTarget(*isa);
  if (absl::IsNotFound(target.status())) {
    GTEST_SKIP() << "SKIPPED: " << target.status().message();
  }
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(*target, isa->hwy_target);
}

}  // namespace
}  // namespace kiln::isa
