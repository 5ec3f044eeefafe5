// File: isa/registry_test.cc — the generated VecISA table against the rows of
// isa/isas.bzl (isa_table_rows.txt), ordering, selection and refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hwy/targets.h"
#include "isa/isa.h"

namespace kiln::isa {
namespace {

// One line of isa_table_rows.txt, as written in isa/isas.bzl.
struct Row {
  std::string name;
  int rank = 0;
  int vector_bytes = 0;
  std::string hwy_target;  // the macro's name, "HWY_AVX2"
  std::string cxx;
  std::vector<std::string> cxx_flags;
  std::string cross_cxx;       // "-": none
  std::string cross_emulator;  // "-": none
  int transpose_tile = 0;
  int64_t parallel_grain = 0;
};

std::vector<Row> ReadRows() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  const std::string path = absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kiln",
                                        "/isa/isa_table_rows.txt");
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = absl::StrSplit(line, '\t');
    EXPECT_EQ(f.size(), 10u) << line;
    if (f.size() != 10) continue;
    Row r;
    r.name = f[0];
    EXPECT_TRUE(absl::SimpleAtoi(f[1], &r.rank)) << line;
    EXPECT_TRUE(absl::SimpleAtoi(f[2], &r.vector_bytes)) << line;
    r.hwy_target = f[3];
    r.cxx = f[4];
    r.cxx_flags = absl::StrSplit(f[5], ' ', absl::SkipEmpty());
    r.cross_cxx = f[6];
    r.cross_emulator = f[7];
    EXPECT_TRUE(absl::SimpleAtoi(f[8], &r.transpose_tile)) << line;
    EXPECT_TRUE(absl::SimpleAtoi(f[9], &r.parallel_grain)) << line;
    rows.push_back(r);
  }
  return rows;
}

// The rows, best first: the order AllIsas must have.
std::vector<Row> RowsBestFirst() {
  std::vector<Row> rows = ReadRows();
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.rank > b.rank; });
  return rows;
}

TEST(Registry, TableIsTheRowsBestFirst) {
  const std::vector<Row> rows = RowsBestFirst();
  const std::vector<const VecIsa*> all = AllIsas();
  ASSERT_FALSE(rows.empty());
  ASSERT_EQ(all.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const VecIsa& isa = *all[i];
    SCOPED_TRACE(row.name);
    EXPECT_EQ(isa.name, row.name);
    EXPECT_EQ(isa.rank, row.rank);
    EXPECT_EQ(isa.vector_bytes, row.vector_bytes);
    EXPECT_EQ(isa.cxx_flags, row.cxx_flags);
    EXPECT_EQ(isa.transpose_tile, row.transpose_tile);
    EXPECT_EQ(isa.parallel_grain, row.parallel_grain);
    ASSERT_NE(isa.host_supports, nullptr);
    // Highway names the targets of this build's architecture only.
    const std::string hwy_name = hwy::TargetName(isa.hwy_target);
    if (hwy_name != "Unknown") {
      EXPECT_EQ(absl::StrCat("HWY_", hwy_name), row.hwy_target);
    }
    if (row.cross_cxx == "-") {
      EXPECT_EQ(isa.cxx, row.cxx);
      EXPECT_EQ(isa.emulator, "");
    } else if (isa.emulator.empty()) {
      EXPECT_EQ(isa.cxx, row.cxx);  // a build host of the ISA's architecture
    } else {
      EXPECT_EQ(isa.cxx, row.cross_cxx);
      EXPECT_EQ(isa.emulator, row.cross_emulator);
      EXPECT_FALSE(isa.host_supports()) << "an emulated ISA the CPU runs";
    }
  }
}

TEST(Registry, RanksStrictlyDecrease) {
  const std::vector<const VecIsa*> all = AllIsas();
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_GT(all[i - 1]->rank, all[i]->rank) << all[i]->name;
  }
}

TEST(Registry, FindsEveryRowByName) {
  for (const Row& row : ReadRows()) {
    const VecIsa* isa = FindIsa(row.name);
    ASSERT_NE(isa, nullptr) << row.name;
    EXPECT_EQ(isa->name, row.name);
  }
  EXPECT_EQ(FindIsa("sse9"), nullptr);
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
  std::vector<std::string> names;
  for (const Row& row : RowsBestFirst()) names.push_back(row.name);
  absl::StatusOr<const VecIsa*> r = SelectIsa("sse9");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            absl::StrCat("unknown ISA 'sse9'; known: ", absl::StrJoin(names, ", ")));
}

}  // namespace
}  // namespace kiln::isa
