// File: ir/loop/index_expr.h — symbolic integer index expressions over loop
// variables: construction, a canonicalizing simplifier, value ranges,
// evaluation, stride extraction, and the text form (`i0*768 + i1`).
//
//   IndexExpr e = Var(0) * 768 + Var(1);
//   IndexExpr s = Simplify(FloorDiv(e, 768), /*extents=*/{128, 768});  // i0
//   std::optional<int64_t> stride = StrideOf(e, 1);                      // 1
//
// Variables are numbered (>= 0); a variable v ranges over [0, extents[v]).
// Floor division and modulo have floor semantics (Python's `//` and `%`);
// divisors are meant to be positive, and everything that reasons about a
// division (simplifier, ranges, strides, evaluation) proves that first.
#ifndef KILN_IR_LOOP_INDEX_EXPR_H_
#define KILN_IR_LOOP_INDEX_EXPR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kiln::ir::loop {

// An immutable expression tree with value semantics: copies share nodes,
// equality is structural (with a cached hash, so it is cheap to compare).
// Add and Mul are n-ary (>= 2 operands); FloorDiv, Mod, Min and Max binary.
// Construction never simplifies: Simplify() canonicalizes.
class IndexExpr {
 public:
  enum class Kind : uint8_t {
    kConst,
    kVar,
    kAdd,
    kMul,
    kFloorDiv,
    kMod,
    kMin,
    kMax,
  };

  // The constant 0.
  IndexExpr();

  static IndexExpr Constant(int64_t value);
  static IndexExpr Variable(int var);
  // n-ary nodes; fewer than two operands collapse (one: itself; none: the
  // identity 0 or 1).
  static IndexExpr Sum(std::vector<IndexExpr> operands);
  static IndexExpr Product(std::vector<IndexExpr> operands);
  static IndexExpr Binary(Kind kind, IndexExpr lhs, IndexExpr rhs);

  Kind kind() const { return node_->kind; }
  bool is_const() const { return kind() == Kind::kConst; }
  bool is_var() const { return kind() == Kind::kVar; }
  // kConst: the value; kVar: the variable number.
  int64_t value() const { return node_->value; }
  int var() const { return static_cast<int>(node_->value); }
  const std::vector<IndexExpr>& operands() const { return node_->operands; }
  const IndexExpr& operand(size_t i) const { return node_->operands[i]; }
  size_t hash() const { return node_->hash; }

  // Largest variable number used, -1 if none.
  int MaxVar() const;
  bool UsesVar(int var) const;
  // Number of nodes in the tree.
  int64_t NodeCount() const;

  friend bool operator==(const IndexExpr& a, const IndexExpr& b);
  friend bool operator!=(const IndexExpr& a, const IndexExpr& b) {
    return !(a == b);
  }
  // A total order (kind, then contents): the simplifier sorts with it.
  friend bool operator<(const IndexExpr& a, const IndexExpr& b) {
    return Compare(a, b) < 0;
  }
  static int Compare(const IndexExpr& a, const IndexExpr& b);

  template <typename H>
  friend H AbslHashValue(H h, const IndexExpr& e) {
    return H::combine(std::move(h), e.hash());
  }

 private:
  struct Node {
    Kind kind;
    int64_t value = 0;
    std::vector<IndexExpr> operands;
    size_t hash = 0;
  };
  explicit IndexExpr(std::shared_ptr<const Node> node)
      : node_(std::move(node)) {}
  static IndexExpr Make(Kind kind, int64_t value,
                        std::vector<IndexExpr> operands);

  std::shared_ptr<const Node> node_;
};

// Construction helpers (no simplification).
inline IndexExpr Var(int v) { return IndexExpr::Variable(v); }
inline IndexExpr Const(int64_t c) { return IndexExpr::Constant(c); }
IndexExpr operator+(const IndexExpr& a, const IndexExpr& b);
IndexExpr operator*(const IndexExpr& a, const IndexExpr& b);
// a + (-1)*b.
IndexExpr operator-(const IndexExpr& a, const IndexExpr& b);
IndexExpr operator-(const IndexExpr& a);
inline IndexExpr operator+(const IndexExpr& a, int64_t b) { return a + Const(b); }
inline IndexExpr operator+(int64_t a, const IndexExpr& b) { return Const(a) + b; }
inline IndexExpr operator*(const IndexExpr& a, int64_t b) { return a * Const(b); }
inline IndexExpr operator*(int64_t a, const IndexExpr& b) { return Const(a) * b; }
// a + (-b), so `i0 - 1` prints as written.
inline IndexExpr operator-(const IndexExpr& a, int64_t b) {
  return b == std::numeric_limits<int64_t>::min() ? a - Const(b) : a + Const(-b);
}
IndexExpr FloorDiv(const IndexExpr& a, const IndexExpr& b);
IndexExpr Mod(const IndexExpr& a, const IndexExpr& b);
IndexExpr Min(const IndexExpr& a, const IndexExpr& b);
IndexExpr Max(const IndexExpr& a, const IndexExpr& b);
inline IndexExpr FloorDiv(const IndexExpr& a, int64_t b) {
  return FloorDiv(a, Const(b));
}
inline IndexExpr Mod(const IndexExpr& a, int64_t b) { return Mod(a, Const(b)); }
inline IndexExpr Min(const IndexExpr& a, int64_t b) { return Min(a, Const(b)); }
inline IndexExpr Max(const IndexExpr& a, int64_t b) { return Max(a, Const(b)); }

// Floor division and modulo of integers (b > 0 expected; b == 0 gives 0).
int64_t FloorDivInt(int64_t a, int64_t b);
int64_t FloorModInt(int64_t a, int64_t b);

// ---------------------------------------------------------------------------
// Value ranges.

// A closed interval. The int64 extremes stand for "unbounded".
struct Interval {
  int64_t lo = 0;
  int64_t hi = 0;

  bool IsConstant() const { return lo == hi; }
  bool Contains(const Interval& o) const { return lo <= o.lo && o.hi <= hi; }
  friend bool operator==(const Interval& a, const Interval& b) {
    return a.lo == b.lo && a.hi == b.hi;
  }
};

// The range of each variable: [0, extents[v] - 1]. A variable without an
// extent (v >= extents.size()) is unbounded; an extent <= 0 (an empty loop,
// never executed) counts as [0, 0].
Interval VarRange(int var, absl::Span<const int64_t> extents);

// An interval containing every value `e` takes while each variable stays in
// its range (sound, not always tight). Unbounded when the expression might
// divide by a non-positive number.
Interval ValueRange(const IndexExpr& e, absl::Span<const int64_t> extents);

// ---------------------------------------------------------------------------
// Simplification.

// Canonical form: constants folded; sums flattened, like terms combined,
// constant multiplication distributed, terms sorted (constant last);
// products sorted with the constant last; x*1, x+0, x//1, x%1 removed;
// (a*c + b)//c -> a + b//c and (a*c + b)%c -> b%c; common factors of a
// division cancelled; nested divisions by constants merged;
// (x//c)*c + x%c -> x; x//c -> k and x%c -> x - k*c when the range of x
// lies in [k*c, k*c + c) (so x//c -> 0 and x%c -> x for 0 <= x < c);
// (d*y + r)//c -> y//(c/d) and (d*y + r)%c -> (y%(c/d))*d + r for d | c
// and r in [0, d) (a reshape's flat offset over a multiple of a stride);
// min/max decided by disjoint ranges. The value is preserved for every
// assignment of the variables within their ranges (given no int64 overflow
// in the original). Idempotent.
IndexExpr Simplify(const IndexExpr& e, absl::Span<const int64_t> extents = {});

// ---------------------------------------------------------------------------
// Evaluation and strides.

// The value of `e` with variable v set to values[v]. InvalidArgument for a
// variable without a value, a non-positive divisor, or int64 overflow.
absl::StatusOr<int64_t> Evaluate(const IndexExpr& e,
                                 absl::Span<const int64_t> values);

// The coefficient of `var` if `e` is affine in it (e == k*var + terms not
// using var); nullopt when it is not (var inside a division, min/max, or
// multiplied by another variable). 0 means `e` does not use var (broadcast),
// 1 contiguous. Simplify first: FloorDiv(i0*4 + i1, 4) is affine in i0 only
// after simplification.
std::optional<int64_t> StrideOf(const IndexExpr& e, int var);

// ---------------------------------------------------------------------------
// Text form.
//
//   sum    := term (('+' | '-') term)*
//   term   := factor (('*' | '//' | '%') factor)*     (left-associative)
//   factor := INT | '-' INT | '-' factor | VAR | '(' sum ')'
//           | ('min' | 'max') '(' sum ',' sum ')'
// Printing is faithful to the tree, so Parse(Print(e)) == e structurally:
// nested sums and products are parenthesized, and `a - b*3` stands for the
// term b*-3 (a product whose last factor is a negative constant).

// Names of variables in the text form.
using VarNamer = std::function<std::string(int var)>;
// Variable number of a name, nullopt if the name is not a variable.
using VarResolver = std::function<std::optional<int>(absl::string_view name)>;

// "i<v>", and its inverse (accepts i0, i1, ...).
std::string DefaultVarName(int var);
std::optional<int> DefaultVarResolver(absl::string_view name);

std::string ToString(const IndexExpr& e, const VarNamer& namer = DefaultVarName);

// Parses a whole string. Errors are InvalidArgument "1:COL: ...".
absl::StatusOr<IndexExpr> ParseIndexExpr(
    absl::string_view text, const VarResolver& resolver = DefaultVarResolver);

}  // namespace kiln::ir::loop

#endif  // KILN_IR_LOOP_INDEX_EXPR_H_
