// Tests of index expressions: evaluation (floor semantics), value ranges,
// strides, printing and parsing (round trip, errors, robustness).
#include "ir/loop/index_expr.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::ir::loop {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

IndexExpr P(const std::string& text) {
  absl::StatusOr<IndexExpr> e = ParseIndexExpr(text);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status();
  return e.ok() ? *e : Const(-999999);
}

TEST(IndexExprEvaluate, FloorSemantics) {
  EXPECT_EQ(FloorDivInt(-7, 2), -4);
  EXPECT_EQ(FloorModInt(-7, 2), 1);
  EXPECT_EQ(FloorDivInt(7, 2), 3);
  EXPECT_EQ(FloorModInt(7, 2), 1);
  EXPECT_EQ(FloorDivInt(-8, 2), -4);
  EXPECT_EQ(FloorModInt(-8, 2), 0);
  // i0 - 10 at i0 = 3 is -7.
  EXPECT_EQ(*Evaluate(FloorDiv(Var(0) - 10, 2), {3}), -4);
  EXPECT_EQ(*Evaluate(Mod(Var(0) - 10, 2), {3}), 1);
  EXPECT_EQ(*Evaluate(Var(0) * 768 + Var(1), {2, 5}), 2 * 768 + 5);
  EXPECT_EQ(*Evaluate(Min(Var(0), Var(1)) + Max(Var(0), 4 * Var(1)), {6, 2}),
            2 + 8);
}

TEST(IndexExprEvaluate, Errors) {
  EXPECT_THAT(Evaluate(Var(2), {1, 2}).status().message(),
              HasSubstr("variable 2 has no value"));
  EXPECT_THAT(Evaluate(FloorDiv(Var(0), Var(1)), {4, 0}).status().message(),
              HasSubstr("non-positive divisor 0"));
  EXPECT_THAT(Evaluate(Mod(Var(0), -3), {4}).status().message(),
              HasSubstr("non-positive divisor -3"));
  EXPECT_THAT(Evaluate(Var(0) * kMax, {2}).status().message(),
              HasSubstr("overflow"));
  EXPECT_THAT(Evaluate(Var(0) + kMax, {1}).status().message(),
              HasSubstr("overflow"));
}

TEST(IndexExprRange, Cases) {
  struct Case {
    std::string expr;
    std::vector<int64_t> extents;
    Interval expected;
  };
  const Case cases[] = {
      {"i0*768 + i1", {128, 768}, {0, 128 * 768 - 1}},
      {"i0 - i1", {4, 8}, {-7, 3}},
      {"(i1 + 5) // 4", {1, 8}, {1, 3}},    // [5, 12] // 4
      {"i1 % 4", {1, 8}, {0, 3}},
      {"i1 % 16", {1, 8}, {0, 7}},          // never wraps
      {"(i1 + 4) % 8", {1, 8}, {0, 7}},     // [4, 11] crosses 8
      {"(i0 + 4) % 8", {4}, {4, 7}},        // [4, 7] inside one block
      {"(i0 + 9) % 4", {2}, {1, 2}},        // [9, 10] -> [1, 2]
      {"min(i0, 2)", {4}, {0, 2}},
      {"max(i0, 2)", {4}, {2, 3}},
      {"i0*-3", {4}, {-9, 0}},
      {"i0*i1", {3, 5}, {0, 8}},
      {"i0 // (i1 + 1)", {4, 8}, {0, 3}},
      {"i0 % (i1 + 1)", {10, 4}, {0, 3}},
      {"i0 // i1", {4, 8}, {kMin, kMax}},   // i1 may be 0
      {"i3", {4}, {kMin, kMax}},            // no extent
      {"i0 + i3", {4}, {kMin, kMax}},
      {"i0*4611686018427387904*4", {3}, {0, kMax}},  // saturates
      {"i0", {0}, {0, 0}},                  // empty loop
      {"7", {}, {7, 7}},
  };
  for (const Case& c : cases) {
    const Interval r = ValueRange(P(c.expr), c.extents);
    EXPECT_EQ(r.lo, c.expected.lo) << c.expr;
    EXPECT_EQ(r.hi, c.expected.hi) << c.expr;
  }
}

TEST(IndexExprStride, Cases) {
  const IndexExpr e = P("i0*768 + i1");
  EXPECT_EQ(StrideOf(e, 0), 768);
  EXPECT_EQ(StrideOf(e, 1), 1);
  EXPECT_EQ(StrideOf(e, 2), 0);  // broadcast
  EXPECT_EQ(StrideOf(P("3*(i0 + 2*i1) + i0"), 1), 6);
  EXPECT_EQ(StrideOf(P("3*(i0 + 2*i1) + i0"), 0), 4);
  EXPECT_EQ(StrideOf(P("i0 - i0"), 0), 0);
  EXPECT_EQ(StrideOf(P("i0*i1"), 0), std::nullopt);
  EXPECT_EQ(StrideOf(P("i0*i0"), 0), std::nullopt);
  EXPECT_EQ(StrideOf(P("min(i0, 3)"), 0), std::nullopt);
  EXPECT_EQ(StrideOf(P("min(i0, 3) + i1*2"), 1), 2);
  EXPECT_EQ(StrideOf(P("(i0*4 + i1) // 4"), 0), std::nullopt);
  // After simplification with i1 < 4 the division disappears.
  const IndexExpr s = Simplify(P("(i0*4 + i1) // 4 + i1 % 4"), {8, 4});
  EXPECT_EQ(ToString(s), "i0 + i1");
  EXPECT_EQ(StrideOf(s, 0), 1);
  EXPECT_EQ(StrideOf(s, 1), 1);
  EXPECT_EQ(StrideOf(P("i0*4611686018427387904*4"), 0), std::nullopt);
}

TEST(IndexExprText, PrintsReadably) {
  EXPECT_EQ(ToString(Var(0) * 768 + Var(1)), "i0*768 + i1");
  EXPECT_EQ(ToString(Mod(FloorDiv(Var(2), 3), 4)), "(i2 // 3) % 4");
  EXPECT_EQ(ToString(Var(0) + Var(1) * -3), "i0 - i1*3");
  EXPECT_EQ(ToString(Var(0) - Var(1) * 3), "i0 - (i1*3)");  // (i1*3)*-1
  EXPECT_EQ(ToString(Var(0) - Var(1)), "i0 - i1");
  EXPECT_EQ(ToString(Var(0) + Const(-5)), "i0 - 5");
  EXPECT_EQ(ToString(Const(-5) + Var(0)), "-5 + i0");
  EXPECT_EQ(ToString(Var(0) * (Var(1) + 1)), "i0*(i1 + 1)");
  EXPECT_EQ(ToString((Var(0) + 1) + Var(1)), "(i0 + 1) + i1");
  EXPECT_EQ(ToString(FloorDiv(Var(0) * 4, 2)), "(i0*4) // 2");
  EXPECT_EQ(ToString(Min(Var(0), Max(Var(1), 2)) * 2), "min(i0, max(i1, 2))*2");
  EXPECT_EQ(ToString(Var(0) * Const(kMin)), "i0*-9223372036854775808");
  EXPECT_EQ(ToString(Var(1), [](int v) { return v == 1 ? "r0" : "?"; }), "r0");
}

TEST(IndexExprText, ParsesOperatorsWithPythonPrecedence) {
  EXPECT_EQ(P("i0 + i1*2"), Var(0) + Var(1) * 2);
  EXPECT_EQ(P("i0*2 // 3"), FloorDiv(Var(0) * 2, 3));
  EXPECT_EQ(P("i0 // 3 * 2"), FloorDiv(Var(0), 3) * 2);
  EXPECT_EQ(P("i0 % 3 // 2"), FloorDiv(Mod(Var(0), 3), 2));
  EXPECT_EQ(P("-i0"), Var(0) * -1);
  EXPECT_EQ(P("i0 - 5"), Var(0) + -5);
  EXPECT_EQ(P("-9223372036854775808"), Const(kMin));
  EXPECT_EQ(P("  i10\n + 1 "), Var(10) + 1);
}

// Random trees of every kind: printing then parsing rebuilds the same tree.
IndexExpr RandomTree(std::mt19937& rng, int depth) {
  const int pick = depth <= 0 ? static_cast<int>(rng() % 2)
                              : static_cast<int>(rng() % 8);
  auto sub = [&] { return RandomTree(rng, depth - 1); };
  switch (pick) {
    case 0: {
      const int64_t special[] = {0, 1, -1, 7, -13, kMin, kMax};
      return Const(rng() % 3 == 0 ? special[rng() % 7]
                                  : static_cast<int64_t>(rng() % 41) - 20);
    }
    case 1: return Var(static_cast<int>(rng() % 4));
    case 2: {
      std::vector<IndexExpr> ops(2 + rng() % 3);
      for (IndexExpr& op : ops) op = sub();
      return IndexExpr::Sum(ops);
    }
    case 3: {
      std::vector<IndexExpr> ops(2 + rng() % 3);
      for (IndexExpr& op : ops) op = sub();
      return IndexExpr::Product(ops);
    }
    case 4: return FloorDiv(sub(), sub());
    case 5: return Mod(sub(), sub());
    case 6: return Min(sub(), sub());
    default: return Max(sub(), sub());
  }
}

TEST(IndexExprText, RandomTreesRoundTrip) {
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const IndexExpr e = RandomTree(rng, 4);
    const std::string text = ToString(e);
    absl::StatusOr<IndexExpr> back = ParseIndexExpr(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status();
    ASSERT_EQ(*back, e) << text << " reads back as " << ToString(*back);
  }
}

TEST(IndexExprText, ParseErrorsNameTheColumn) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"i0 +", "1:5: expected an index expression"},
      {"i0 * (i1", "1:9: expected ')' to close '('"},
      {"foo + 1", "1:1: unknown loop variable 'foo'"},
      {"99999999999999999999", "1:1: integer out of range"},
      {"-9223372036854775809", "integer out of range"},
      {"i0 $", "1:4: unexpected character"},
      {"i0 i1", "1:4: expected '+', '-', '*', '//', '%' or end of input"},
      {"min(i0)", "expected ',' between min/max operands"},
      {"i01", "unknown loop variable 'i01'"},
      {"1.5", "expected an index expression (integer, variable, '(', min, max), got '1.5'"},
      {"", "1:1: expected an index expression"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<IndexExpr> e = ParseIndexExpr(c.text);
    ASSERT_FALSE(e.ok()) << c.text;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(e.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(IndexExprText, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = std::string(100000, '(') + "i0";
  EXPECT_THAT(ParseIndexExpr(deep).status().message(),
              HasSubstr("nests deeper than"));
  const std::string minus(100000, '-');
  EXPECT_FALSE(ParseIndexExpr(minus + "i0").ok());
}

TEST(IndexExprText, CustomResolver) {
  auto resolver = [](absl::string_view name) -> std::optional<int> {
    if (name == "x") return 0;
    if (name == "r0") return 5;
    return std::nullopt;
  };
  absl::StatusOr<IndexExpr> e = ParseIndexExpr("x*3 + r0", resolver);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(*e, Var(0) * 3 + Var(5));
}

TEST(IndexExprText, EveryPrefixAndMutationIsHandled) {
  const std::string text = "min(i0*768, max(i1 - 3, 2)) + (i2 // 3) % 4 - i3*5";
  ASSERT_TRUE(ParseIndexExpr(text).ok());
  for (size_t n = 0; n < text.size(); ++n) {
    absl::StatusOr<IndexExpr> e = ParseIndexExpr(text.substr(0, n));
    if (e.ok()) {
      EXPECT_EQ(*ParseIndexExpr(ToString(*e)), *e);
    } else {
      EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
  std::mt19937 rng(3);
  const std::string alphabet = "()+-*/%,mi0123456789 ax";
  for (int i = 0; i < 2000; ++i) {
    std::string s = text;
    s[rng() % s.size()] = alphabet[rng() % alphabet.size()];
    absl::StatusOr<IndexExpr> e = ParseIndexExpr(s);
    if (!e.ok()) continue;
    absl::StatusOr<IndexExpr> back = ParseIndexExpr(ToString(*e));
    ASSERT_TRUE(back.ok()) << s;
    EXPECT_EQ(*back, *e) << s;
  }
}

TEST(IndexExpr, EqualityHashAndQueries) {
  const IndexExpr a = Var(0) * 3 + Var(2);
  const IndexExpr b = Var(0) * 3 + Var(2);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_NE(a, Var(2) + Var(0) * 3);
  EXPECT_EQ(IndexExpr::Compare(a, b), 0);
  EXPECT_EQ(a.MaxVar(), 2);
  EXPECT_TRUE(a.UsesVar(2));
  EXPECT_FALSE(a.UsesVar(1));
  EXPECT_EQ(a.NodeCount(), 5);
  EXPECT_EQ(Const(3).MaxVar(), -1);
  EXPECT_TRUE(Var(0) < Var(1));
  EXPECT_TRUE(Const(100) < Var(0));  // constants order before variables
  EXPECT_EQ(IndexExpr(), Const(0));
}

}  // namespace
}  // namespace kiln::ir::loop
