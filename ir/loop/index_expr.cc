// Index expressions: construction, ordering, evaluation, value ranges, stride
// extraction and printing (the simplifier is in simplify.cc).
#include "ir/loop/index_expr.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ir/loop/text_lexer.h"
#include "ir/status_macros.h"

namespace kiln::ir::loop {
namespace {

constexpr int64_t kMinI64 = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

size_t Mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

}  // namespace

// ---------------------------------------------------------------------------
// Construction.

IndexExpr::IndexExpr() : IndexExpr(Constant(0)) {}

IndexExpr IndexExpr::Make(Kind kind, int64_t value,
                          std::vector<IndexExpr> operands) {
  auto node = std::make_shared<Node>();
  node->kind = kind;
  node->value = value;
  size_t h = Mix(static_cast<size_t>(kind) + 1, static_cast<size_t>(value));
  for (const IndexExpr& op : operands) h = Mix(h, op.hash());
  node->hash = h;
  node->operands = std::move(operands);
  return IndexExpr(std::move(node));
}

IndexExpr IndexExpr::Constant(int64_t value) {
  return Make(Kind::kConst, value, {});
}

IndexExpr IndexExpr::Variable(int var) { return Make(Kind::kVar, var, {}); }

IndexExpr IndexExpr::Sum(std::vector<IndexExpr> operands) {
  if (operands.empty()) return Constant(0);
  if (operands.size() == 1) return std::move(operands[0]);
  return Make(Kind::kAdd, 0, std::move(operands));
}

IndexExpr IndexExpr::Product(std::vector<IndexExpr> operands) {
  if (operands.empty()) return Constant(1);
  if (operands.size() == 1) return std::move(operands[0]);
  return Make(Kind::kMul, 0, std::move(operands));
}

IndexExpr IndexExpr::Binary(Kind kind, IndexExpr lhs, IndexExpr rhs) {
  if (kind == Kind::kAdd) return Sum({std::move(lhs), std::move(rhs)});
  if (kind == Kind::kMul) return Product({std::move(lhs), std::move(rhs)});
  return Make(kind, 0, {std::move(lhs), std::move(rhs)});
}

IndexExpr operator+(const IndexExpr& a, const IndexExpr& b) {
  return IndexExpr::Sum({a, b});
}
IndexExpr operator*(const IndexExpr& a, const IndexExpr& b) {
  return IndexExpr::Product({a, b});
}
IndexExpr operator-(const IndexExpr& a, const IndexExpr& b) {
  return IndexExpr::Sum({a, IndexExpr::Product({b, Const(-1)})});
}
IndexExpr operator-(const IndexExpr& a) {
  return IndexExpr::Product({a, Const(-1)});
}
IndexExpr FloorDiv(const IndexExpr& a, const IndexExpr& b) {
  return IndexExpr::Binary(IndexExpr::Kind::kFloorDiv, a, b);
}
IndexExpr Mod(const IndexExpr& a, const IndexExpr& b) {
  return IndexExpr::Binary(IndexExpr::Kind::kMod, a, b);
}
IndexExpr Min(const IndexExpr& a, const IndexExpr& b) {
  return IndexExpr::Binary(IndexExpr::Kind::kMin, a, b);
}
IndexExpr Max(const IndexExpr& a, const IndexExpr& b) {
  return IndexExpr::Binary(IndexExpr::Kind::kMax, a, b);
}

int64_t FloorDivInt(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return a == kMinI64 ? kMinI64 : -a;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorModInt(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// ---------------------------------------------------------------------------
// Queries.

bool operator==(const IndexExpr& a, const IndexExpr& b) {
  if (a.node_ == b.node_) return true;
  if (a.hash() != b.hash() || a.kind() != b.kind() ||
      a.node_->value != b.node_->value ||
      a.operands().size() != b.operands().size()) {
    return false;
  }
  for (size_t i = 0; i < a.operands().size(); ++i) {
    if (a.operand(i) != b.operand(i)) return false;
  }
  return true;
}

int IndexExpr::Compare(const IndexExpr& a, const IndexExpr& b) {
  if (a.node_ == b.node_) return 0;
  if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
  if (a.node_->value != b.node_->value) {
    return a.node_->value < b.node_->value ? -1 : 1;
  }
  const size_t n = std::min(a.operands().size(), b.operands().size());
  for (size_t i = 0; i < n; ++i) {
    const int c = Compare(a.operand(i), b.operand(i));
    if (c != 0) return c;
  }
  if (a.operands().size() != b.operands().size()) {
    return a.operands().size() < b.operands().size() ? -1 : 1;
  }
  return 0;
}

int IndexExpr::MaxVar() const {
  if (is_var()) return var();
  int m = -1;
  for (const IndexExpr& op : operands()) m = std::max(m, op.MaxVar());
  return m;
}

bool IndexExpr::UsesVar(int v) const {
  if (is_var()) return var() == v;
  for (const IndexExpr& op : operands()) {
    if (op.UsesVar(v)) return true;
  }
  return false;
}

int64_t IndexExpr::NodeCount() const {
  int64_t n = 1;
  for (const IndexExpr& op : operands()) n += op.NodeCount();
  return n;
}

// ---------------------------------------------------------------------------
// Evaluation.

absl::StatusOr<int64_t> Evaluate(const IndexExpr& e,
                                 absl::Span<const int64_t> values) {
  using Kind = IndexExpr::Kind;
  switch (e.kind()) {
    case Kind::kConst:
      return e.value();
    case Kind::kVar:
      if (e.var() < 0 || static_cast<size_t>(e.var()) >= values.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("index variable ", e.var(), " has no value"));
      }
      return values[e.var()];
    case Kind::kAdd:
    case Kind::kMul: {
      const bool add = e.kind() == Kind::kAdd;
      int64_t acc = add ? 0 : 1;
      for (const IndexExpr& op : e.operands()) {
        KILN_ASSIGN_OR_RETURN(int64_t v, Evaluate(op, values));
        const bool overflow = add ? __builtin_add_overflow(acc, v, &acc)
                                  : __builtin_mul_overflow(acc, v, &acc);
        if (overflow) {
          return absl::InvalidArgumentError(
              absl::StrCat("int64 overflow evaluating ", ToString(e)));
        }
      }
      return acc;
    }
    default:
      break;
  }
  KILN_ASSIGN_OR_RETURN(int64_t a, Evaluate(e.operand(0), values));
  KILN_ASSIGN_OR_RETURN(int64_t b, Evaluate(e.operand(1), values));
  switch (e.kind()) {
    case Kind::kFloorDiv:
    case Kind::kMod:
      if (b <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "non-positive divisor ", b, " evaluating ", ToString(e)));
      }
      return e.kind() == Kind::kFloorDiv ? FloorDivInt(a, b)
                                         : FloorModInt(a, b);
    case Kind::kMin: return std::min(a, b);
    case Kind::kMax: return std::max(a, b);
    default: break;
  }
  return InternalError("unknown index expression kind");
}

// ---------------------------------------------------------------------------
// Value ranges. Bounds are computed in 128 bits and clamped to int64: every
// value an int64 evaluation can produce stays inside the clamped bounds.

namespace {

using Wide = __int128;

int64_t Clamp(Wide v) {
  if (v < kMinI64) return kMinI64;
  if (v > kMaxI64) return kMaxI64;
  return static_cast<int64_t>(v);
}

Interval Unbounded() { return {kMinI64, kMaxI64}; }

Interval MulIntervals(const Interval& a, const Interval& b) {
  const Wide c[4] = {Wide(a.lo) * b.lo, Wide(a.lo) * b.hi, Wide(a.hi) * b.lo,
                     Wide(a.hi) * b.hi};
  return {Clamp(*std::min_element(c, c + 4)), Clamp(*std::max_element(c, c + 4))};
}

}  // namespace

Interval VarRange(int var, absl::Span<const int64_t> extents) {
  if (var < 0 || static_cast<size_t>(var) >= extents.size()) return Unbounded();
  return {0, std::max<int64_t>(extents[var] - 1, 0)};
}

Interval ValueRange(const IndexExpr& e, absl::Span<const int64_t> extents) {
  using Kind = IndexExpr::Kind;
  switch (e.kind()) {
    case Kind::kConst:
      return {e.value(), e.value()};
    case Kind::kVar:
      return VarRange(e.var(), extents);
    case Kind::kAdd: {
      Wide lo = 0, hi = 0;
      for (const IndexExpr& op : e.operands()) {
        const Interval r = ValueRange(op, extents);
        lo = Clamp(lo + r.lo);
        hi = Clamp(hi + r.hi);
      }
      return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
    }
    case Kind::kMul: {
      Interval acc{1, 1};
      for (const IndexExpr& op : e.operands()) {
        acc = MulIntervals(acc, ValueRange(op, extents));
      }
      return acc;
    }
    default:
      break;
  }
  const Interval a = ValueRange(e.operand(0), extents);
  const Interval b = ValueRange(e.operand(1), extents);
  switch (e.kind()) {
    case Kind::kMin: return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    case Kind::kMax: return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    case Kind::kFloorDiv: {
      if (b.lo < 1) return Unbounded();
      const int64_t c[4] = {FloorDivInt(a.lo, b.lo), FloorDivInt(a.lo, b.hi),
                            FloorDivInt(a.hi, b.lo), FloorDivInt(a.hi, b.hi)};
      return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    case Kind::kMod: {
      if (b.lo < 1) return Unbounded();
      if (b.IsConstant()) {
        const int64_t k = FloorDivInt(a.lo, b.lo);
        if (k == FloorDivInt(a.hi, b.lo)) {
          const Wide base = Wide(k) * b.lo;
          return {Clamp(a.lo - base), Clamp(a.hi - base)};
        }
      }
      Interval r{0, b.hi - 1};
      if (a.lo >= 0) r.hi = std::min(r.hi, a.hi);
      return r;
    }
    default:
      break;
  }
  return Unbounded();
}

// ---------------------------------------------------------------------------
// Strides.

std::optional<int64_t> StrideOf(const IndexExpr& e, int var) {
  using Kind = IndexExpr::Kind;
  switch (e.kind()) {
    case Kind::kConst:
      return 0;
    case Kind::kVar:
      return e.var() == var ? 1 : 0;
    case Kind::kAdd: {
      int64_t sum = 0;
      for (const IndexExpr& op : e.operands()) {
        const std::optional<int64_t> s = StrideOf(op, var);
        if (!s.has_value() || __builtin_add_overflow(sum, *s, &sum)) {
          return std::nullopt;
        }
      }
      return sum;
    }
    case Kind::kMul: {
      int64_t constant = 1;
      std::optional<int64_t> stride;
      bool other_symbolic = false;
      for (const IndexExpr& op : e.operands()) {
        if (op.is_const()) {
          if (__builtin_mul_overflow(constant, op.value(), &constant)) {
            return std::nullopt;
          }
        } else if (op.UsesVar(var)) {
          if (stride.has_value()) return std::nullopt;  // var * var
          stride = StrideOf(op, var);
          if (!stride.has_value()) return std::nullopt;
        } else {
          other_symbolic = true;
        }
      }
      if (!stride.has_value() || *stride == 0) return 0;
      if (other_symbolic) return std::nullopt;  // the coefficient is symbolic
      int64_t result;
      if (__builtin_mul_overflow(*stride, constant, &result)) return std::nullopt;
      return result;
    }
    default:
      break;
  }
  if (!e.UsesVar(var)) return 0;
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Text.

namespace {

class ExprPrinter {
 public:
  explicit ExprPrinter(const VarNamer& namer) : namer_(namer) {}

  void Sum(const IndexExpr& e, std::string* out) {
    if (e.kind() != IndexExpr::Kind::kAdd) return Term(e, out);
    for (size_t i = 0; i < e.operands().size(); ++i) {
      const IndexExpr& t = e.operand(i);
      if (i == 0) {
        SumOperand(t, out);
      } else if (!MinusTerm(t, out)) {
        out->append(" + ");
        SumOperand(t, out);
      }
    }
  }

 private:
  void SumOperand(const IndexExpr& t, std::string* out) {
    if (t.kind() == IndexExpr::Kind::kAdd) {
      out->append("(");
      Sum(t, out);
      out->append(")");
    } else {
      Term(t, out);
    }
  }

  // The `a - b` forms that the parser reads back as the same tree.
  bool MinusTerm(const IndexExpr& t, std::string* out) {
    if (t.is_const()) {
      if (t.value() >= 0 || t.value() == kMinI64) return false;
      absl::StrAppend(out, " - ", -t.value());
      return true;
    }
    if (t.kind() != IndexExpr::Kind::kMul) return false;
    const IndexExpr& last = t.operands().back();
    if (!last.is_const() || last.value() >= 0 || last.value() == kMinI64) {
      return false;
    }
    const size_t n = t.operands().size();
    if (last.value() == -1) {
      if (n != 2 || t.operand(0).is_const()) return false;
      out->append(" - ");
      Factor(t.operand(0), out);
      return true;
    }
    out->append(" - ");
    for (size_t i = 0; i + 1 < n; ++i) {
      Factor(t.operand(i), out);
      out->append("*");
    }
    absl::StrAppend(out, -last.value());
    return true;
  }

  void Term(const IndexExpr& e, std::string* out) {
    switch (e.kind()) {
      case IndexExpr::Kind::kMul:
        for (size_t i = 0; i < e.operands().size(); ++i) {
          if (i > 0) out->append("*");
          Factor(e.operand(i), out);
        }
        return;
      case IndexExpr::Kind::kFloorDiv:
      case IndexExpr::Kind::kMod:
        Factor(e.operand(0), out);
        out->append(e.kind() == IndexExpr::Kind::kMod ? " % " : " // ");
        Factor(e.operand(1), out);
        return;
      default:
        Factor(e, out);
    }
  }

  void Factor(const IndexExpr& e, std::string* out) {
    switch (e.kind()) {
      case IndexExpr::Kind::kConst:
        absl::StrAppend(out, e.value());
        return;
      case IndexExpr::Kind::kVar:
        out->append(namer_(e.var()));
        return;
      case IndexExpr::Kind::kMin:
      case IndexExpr::Kind::kMax:
        out->append(e.kind() == IndexExpr::Kind::kMin ? "min(" : "max(");
        Sum(e.operand(0), out);
        out->append(", ");
        Sum(e.operand(1), out);
        out->append(")");
        return;
      default:
        out->append("(");
        Sum(e, out);
        out->append(")");
    }
  }

  const VarNamer& namer_;
};

}  // namespace

std::string DefaultVarName(int var) { return absl::StrCat("i", var); }

std::optional<int> DefaultVarResolver(absl::string_view name) {
  if (name.size() < 2 || name[0] != 'i') return std::nullopt;
  if (name.size() > 2 && name[1] == '0') return std::nullopt;
  int v;
  for (char c : name.substr(1)) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  if (!absl::SimpleAtoi(name.substr(1), &v)) return std::nullopt;
  return v;
}

std::string ToString(const IndexExpr& e, const VarNamer& namer) {
  std::string out;
  ExprPrinter(namer).Sum(e, &out);
  return out;
}

absl::StatusOr<IndexExpr> ParseIndexExpr(absl::string_view text,
                                         const VarResolver& resolver) {
  KILN_ASSIGN_OR_RETURN(std::vector<text_internal::Token> tokens,
                        text_internal::Lex(text));
  text_internal::Cursor cursor(std::move(tokens));
  KILN_ASSIGN_OR_RETURN(IndexExpr e,
                        text_internal::ParseIndexExprAt(cursor, resolver));
  if (cursor.Peek().kind != text_internal::Tok::kEof) {
    return cursor.Expected("'+', '-', '*', '//', '%' or end of input");
  }
  return e;
}

}  // namespace kiln::ir::loop
