// Tests of the index-expression simplifier: a table of hand-derived
// canonical forms, and a randomized check that simplification preserves the
// value (by evaluating both forms, independent of the simplifier's reasoning).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/loop/index_expr.h"

namespace kiln::ir::loop {
namespace {

struct Case {
  std::string input;
  std::vector<int64_t> extents;  // empty: variables unbounded
  std::string expected;
};

// Extents used below: i0 < 4, i1 < 8, i2 < 12, i3 < 3.
const std::vector<int64_t> kE = {4, 8, 12, 3};

TEST(Simplify, HandDerivedTable) {
  const Case cases[] = {
      // Constant folding, identities, flattening, sorting, like terms.
      {"2 + 3*4", {}, "14"},
      {"i0 + 0", {}, "i0"},
      {"i0*1", {}, "i0"},
      {"1*i0*1", {}, "i0"},
      {"i1 + i0", {}, "i0 + i1"},
      {"5 + i0", {}, "i0 + 5"},
      {"i0 + 5 + i0", {}, "i0*2 + 5"},
      {"(i0 + i1) + (i1 + 1)", {}, "i0 + i1*2 + 1"},
      {"i0 - i0", {}, "0"},
      {"i0*i1*0 + 7", {}, "7"},
      {"i1*3*i0", {}, "i0*i1*3"},
      {"i3 - 5", {}, "i3 - 5"},
      {"-(i0 - i1)", {}, "i0*-1 + i1"},
      {"i0 - i1*3", {}, "i0 - i1*3"},
      // Distribution of constant multiplication (and of small products).
      {"3*(i0 + 2*i1)", {}, "i0*3 + i1*6"},
      {"(i0 + 1)*(i0 + 1)", {}, "i0*2 + i0*i0 + 1"},
      {"2*(i0 // 4)*3", {}, "(i0 // 4)*6"},
      // Division and modulo by 1, by constants, (a*c)//c.
      {"i2 // 1", {}, "i2"},
      {"i2 % 1", {}, "0"},
      {"17 // 5", {}, "3"},
      {"-17 // 5", {}, "-4"},
      {"-17 % 5", {}, "3"},
      {"i0*4 // 4", {}, "i0"},
      {"i0*4 % 4", {}, "0"},
      {"(i0*6 + i1*4) // 2", {}, "i0*3 + i1*2"},
      // (a*c + b)//c -> a + b//c; b//c -> 0 when 0 <= b < c.
      {"(i0*4 + i3) // 4", kE, "i0"},
      {"(i0*4 + i3) % 4", kE, "i3"},
      {"(i0*4 + i1) // 4", {}, "i0 + i1 // 4"},
      {"(i0*4 + i1) % 4", {}, "i1 % 4"},
      {"(i0 + 9) // 4", {}, "(i0 + 1) // 4 + 2"},
      {"(i0 + 9) % 4", {}, "(i0 + 1) % 4"},
      {"(i0*768 + i1) // 768", {128, 768}, "i0"},
      {"(i0*768 + i1) % 768", {128, 768}, "i1"},
      // Common factors: (2*i1) % 4 -> (i1 % 2)*2; (2*i1 + 1)//4 -> i1 // 2
      // (the constant 1 lies below the factor 2).
      {"(i1*2 + 1) // 4", {}, "i1 // 2"},
      {"(i1*2 + 1) % 4", {}, "(i1 % 2)*2 + 1"},
      {"(i1*2 + 3) // 4", {}, "(i1 + 1) // 2"},
      {"(i1*2) % 4", {}, "(i1 % 2)*2"},
      {"(i1*2) // 4", {}, "i1 // 2"},
      // Nested divisions.
      {"(i2 // 3) // 2", {}, "i2 // 6"},
      {"(i2 % 12) % 4", {}, "i2 % 4"},
      {"(i2 % 12) // 3", {}, "(i2 // 3) % 4"},
      // (x//c)*c + x%c -> x, also through nested decompositions.
      {"(i2 // 3)*3 + i2 % 3", {}, "i2"},
      {"i2 % 3 + 3*(i2 // 3)", {}, "i2"},
      {"((i0 + i1) // 5)*10 + ((i0 + i1) % 5)*2", {}, "i0*2 + i1*2"},
      {"(i2 // 12)*12 + ((i2 // 3) % 4)*3 + i2 % 3", {}, "i2"},
      {"(i2 // 3)*3 + i2 % 4", {}, "(i2 // 3)*3 + i2 % 4"},  // no match
      // Range rules.
      {"i1 // 8", kE, "0"},
      {"i1 % 8", kE, "i1"},
      {"i2 // 16", kE, "0"},
      {"(i3 + 3) // 3", kE, "1"},
      {"(i3 + 3) % 3", kE, "i3"},
      {"i1 // 4", kE, "i1 // 4"},
      {"i0 // (i1 + 5)", kE, "0"},
      {"i0 % (i1 + 5)", kE, "i0"},
      // A divisor that is a multiple of a stride, the rest of the sum below
      // that stride: (i1*12 + i2) // 24 -> i1 // 2 since 0 <= i2 < 12.
      {"(i1*12 + i2) // 24", kE, "i1 // 2"},
      {"(i1*12 + i2) % 24", kE, "i2 + (i1 % 2)*12"},
      {"(i1*36 + i2*3 + i3) // 72", kE, "i1 // 2"},
      {"(i1*36 + i2*3 + i3) % 72", kE, "i2*3 + i3 + (i1 % 2)*36"},
      {"(i0*24 + i1*12 + i2 + 24) // 48", kE, "(i0*2 + i1 + 2) // 4"},
      {"(i1*12 + i2 + 1) // 24", kE, "(i1*12 + i2 + 1) // 24"},  // rest hits 12
      {"(i1*12 + i2) // 24", {}, "(i1*12 + i2) // 24"},  // i2 unbounded
      // min / max.
      {"min(3, 8)", {}, "3"},
      {"max(i0, i0)", {}, "i0"},
      {"min(i0, 10)", kE, "i0"},
      {"max(i0, i1 + 8)", kE, "i1 + 8"},
      {"min(i1, i0)", {}, "min(i0, i1)"},
      {"max(i1 + 0, 2*i0 - i0)", {}, "max(i0, i1)"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<IndexExpr> e = ParseIndexExpr(c.input);
    ASSERT_TRUE(e.ok()) << c.input << ": " << e.status();
    const IndexExpr s = Simplify(*e, c.extents);
    EXPECT_EQ(ToString(s), c.expected) << "simplifying " << c.input;
    EXPECT_EQ(Simplify(s, c.extents), s) << "not idempotent on " << c.input;
  }
}

// Random expressions over four variables with constant (mostly positive)
// divisors, occasionally a symbolic divisor.
IndexExpr RandomExpr(std::mt19937& rng, int depth) {
  auto sub = [&] { return RandomExpr(rng, depth - 1); };
  const int pick = depth <= 0 ? static_cast<int>(rng() % 3)
                              : static_cast<int>(rng() % 11);
  switch (pick) {
    case 0:
    case 1: return Var(static_cast<int>(rng() % 4));
    case 2: return Const(static_cast<int64_t>(rng() % 21) - 6);
    case 3:
    case 4: return sub() + sub();
    case 5: return sub() * Const(static_cast<int64_t>(rng() % 9) - 3);
    case 6: return sub() * sub();
    case 7: {
      const int64_t divisors[] = {1, 2, 3, 4, 6, 8, 12, 16};
      return FloorDiv(sub(), Const(divisors[rng() % 8]));
    }
    case 8: {
      if (rng() % 5 == 0) return Mod(sub(), Var(static_cast<int>(rng() % 4)) + 1);
      const int64_t divisors[] = {1, 2, 3, 4, 6, 8, 12, 16};
      return Mod(sub(), Const(divisors[rng() % 8]));
    }
    case 9: return Min(sub(), sub());
    default: return Max(sub(), sub());
  }
}

TEST(Simplify, PreservesValueOnRandomExpressions) {
  std::mt19937 rng(2024);
  int compared = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<int64_t> extents(4);
    for (int64_t& x : extents) x = 1 + static_cast<int64_t>(rng() % 20);
    const bool use_ranges = rng() % 4 != 0;
    const IndexExpr e = RandomExpr(rng, 1 + static_cast<int>(rng() % 4));
    const IndexExpr s =
        use_ranges ? Simplify(e, extents) : Simplify(e);
    ASSERT_EQ(Simplify(s, use_ranges ? absl::Span<const int64_t>(extents)
                                     : absl::Span<const int64_t>()),
              s)
        << "not idempotent: " << ToString(e) << " -> " << ToString(s);
    for (int point = 0; point < 12; ++point) {
      std::vector<int64_t> values(4);
      for (int v = 0; v < 4; ++v) {
        values[v] = use_ranges
                        ? static_cast<int64_t>(rng() % extents[v])
                        : static_cast<int64_t>(rng() % 41) - 20;
      }
      absl::StatusOr<int64_t> want = Evaluate(e, values);
      if (!want.ok()) continue;  // e.g. a symbolic divisor that is 0
      absl::StatusOr<int64_t> got = Evaluate(s, values);
      ASSERT_TRUE(got.ok()) << got.status() << " for " << ToString(s);
      ASSERT_EQ(*got, *want)
          << ToString(e) << " simplified to " << ToString(s) << " at ("
          << values[0] << ", " << values[1] << ", " << values[2] << ", "
          << values[3] << ") extents (" << extents[0] << ", " << extents[1]
          << ", " << extents[2] << ", " << extents[3] << ")";
      ++compared;
    }
  }
  EXPECT_GT(compared, 20000);
}

TEST(Simplify, RangesStayWithinTheOriginal) {
  // The simplified form is never looser than the evaluated values allow:
  // every evaluated value lies inside ValueRange of the simplified form.
  std::mt19937 rng(99);
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<int64_t> extents(4);
    for (int64_t& x : extents) x = 1 + static_cast<int64_t>(rng() % 10);
    const IndexExpr e = RandomExpr(rng, 3);
    const IndexExpr s = Simplify(e, extents);
    const Interval r = ValueRange(s, extents);
    for (int point = 0; point < 8; ++point) {
      std::vector<int64_t> values(4);
      for (int v = 0; v < 4; ++v) values[v] = rng() % extents[v];
      absl::StatusOr<int64_t> got = Evaluate(s, values);
      if (!got.ok()) continue;
      ASSERT_GE(*got, r.lo) << ToString(s);
      ASSERT_LE(*got, r.hi) << ToString(s);
    }
  }
}

TEST(Simplify, OverflowingCoefficientsAreLeftAlone) {
  const IndexExpr big = Var(0) * 4611686018427387904 + Var(0) * 4611686018427387904;
  const IndexExpr s = Simplify(big);
  // Combining the terms would overflow, so the sum stays a sum.
  EXPECT_EQ(ToString(s), "i0*4611686018427387904 + i0*4611686018427387904");
  EXPECT_EQ(Simplify(s), s);
}

}  // namespace
}  // namespace kiln::ir::loop
