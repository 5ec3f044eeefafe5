// Tests for the VecISA registry: ordering, selection and refusal.
#include <gtest/gtest.h>

#include "isa/isa.h"

namespace kiln::isa {
namespace {

TEST(Registry, AllModulesBestFirst) {
  std::vector<const VecIsa*> all = AllIsas();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0]->name, "avx512");
  EXPECT_EQ(all[1]->name, "avx2");
  EXPECT_EQ(all[2]->name, "neon");
  EXPECT_EQ(all[3]->name, "scalar");
}

TEST(Registry, DefaultIsTheBestSupported) {
  absl::StatusOr<const VecIsa*> best = SelectIsa("");
  ASSERT_TRUE(best.ok());
  EXPECT_TRUE((*best)->host_supports());
  for (const VecIsa* i : AllIsas()) {
    if (i->rank > (*best)->rank) {
      EXPECT_FALSE(i->host_supports()) << i->name;
    }
  }
}

TEST(Registry, ScalarAlwaysSelectable) {
  ASSERT_TRUE(SelectIsa("scalar").ok());
}

TEST(Registry, UnknownIsaIsRefusedWithTheList) {
  absl::StatusOr<const VecIsa*> r = SelectIsa("sse9");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("known: avx512, avx2, neon, scalar"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace kiln::isa
