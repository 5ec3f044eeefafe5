// The index-expression simplifier: normalizes sums and products into a
// polynomial over "atoms" (variables, divisions, modulos, min/max), applies
// the division rules with the help of value ranges, and rebuilds a canonical
// tree (rules listed at Simplify in index_expr.h).
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "ir/loop/index_expr.h"

namespace kiln::ir::loop {
namespace {

using Kind = IndexExpr::Kind;

// A product of atoms, sorted; empty for the constant term.
using Monomial = std::vector<IndexExpr>;

struct MonomialLess {
  bool operator()(const Monomial& a, const Monomial& b) const {
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
      const int c = IndexExpr::Compare(a[i], b[i]);
      if (c != 0) return c < 0;
    }
    return a.size() < b.size();
  }
};

// Most terms a product of sums may expand to before the simplifier leaves it
// alone.
constexpr size_t kMaxTerms = 256;

// sum(coefficient * monomial); `failed` when coefficients overflow int64 or
// an expansion is too large (the expression is then kept as it is).
struct Poly {
  std::map<Monomial, int64_t, MonomialLess> terms;  // the constant under {}
  bool failed = false;

  void Add(const Monomial& m, int64_t coefficient) {
    if (coefficient == 0) return;
    auto [it, inserted] = terms.emplace(m, coefficient);
    if (inserted) return;
    if (__builtin_add_overflow(it->second, coefficient, &it->second)) {
      failed = true;
    } else if (it->second == 0) {
      terms.erase(it);
    }
  }
  void AddPoly(const Poly& p, int64_t scale) {
    failed |= p.failed;
    for (const auto& [m, c] : p.terms) {
      int64_t scaled;
      if (__builtin_mul_overflow(c, scale, &scaled)) {
        failed = true;
        return;
      }
      Add(m, scaled);
    }
  }
  int64_t Constant() const {
    auto it = terms.find(Monomial{});
    return it == terms.end() ? 0 : it->second;
  }
  int64_t Coefficient(const Monomial& m) const {
    auto it = terms.find(m);
    return it == terms.end() ? 0 : it->second;
  }
};

Poly ConstPoly(int64_t c) {
  Poly p;
  p.Add({}, c);
  return p;
}

Poly Multiply(const Poly& a, const Poly& b) {
  Poly out;
  out.failed = a.failed || b.failed;
  if (out.failed) return out;
  if (a.terms.size() * b.terms.size() > kMaxTerms) {
    out.failed = true;
    return out;
  }
  for (const auto& [ma, ca] : a.terms) {
    for (const auto& [mb, cb] : b.terms) {
      int64_t c;
      if (__builtin_mul_overflow(ca, cb, &c)) {
        out.failed = true;
        return out;
      }
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      out.Add(m, c);
    }
  }
  return out;
}

// `p` as a canonical tree: terms in monomial order, each a product of its
// atoms with the coefficient last (omitted when 1), the constant last.
IndexExpr FromPoly(const Poly& p) {
  std::vector<IndexExpr> terms;
  for (const auto& [m, c] : p.terms) {
    if (m.empty()) continue;
    std::vector<IndexExpr> factors = m;
    if (c != 1) factors.push_back(Const(c));
    terms.push_back(IndexExpr::Product(std::move(factors)));
  }
  const int64_t constant = p.Constant();
  if (constant != 0) terms.push_back(Const(constant));
  return IndexExpr::Sum(std::move(terms));
}

int64_t Gcd(int64_t a, int64_t b) {
  // Magnitudes as unsigned so INT64_MIN does not overflow.
  uint64_t x = a < 0 ? 0 - static_cast<uint64_t>(a) : a;
  uint64_t y = b < 0 ? 0 - static_cast<uint64_t>(b) : b;
  while (y != 0) {
    const uint64_t t = x % y;
    x = y;
    y = t;
  }
  return x > static_cast<uint64_t>(INT64_MAX) ? 1 : static_cast<int64_t>(x);
}

class Simplifier {
 public:
  explicit Simplifier(absl::Span<const int64_t> extents) : extents_(extents) {}

  IndexExpr Run(const IndexExpr& e) {
    switch (e.kind()) {
      case Kind::kConst:
      case Kind::kVar:
        return e;
      case Kind::kAdd:
      case Kind::kMul: {
        std::vector<IndexExpr> ops;
        ops.reserve(e.operands().size());
        for (const IndexExpr& op : e.operands()) ops.push_back(Run(op));
        Poly p;
        if (e.kind() == Kind::kAdd) {
          for (const IndexExpr& op : ops) p.AddPoly(ToPoly(op), 1);
        } else {
          p = ConstPoly(1);
          for (const IndexExpr& op : ops) p = Multiply(p, ToPoly(op));
        }
        if (p.failed) {
          return e.kind() == Kind::kAdd ? IndexExpr::Sum(std::move(ops))
                                        : IndexExpr::Product(std::move(ops));
        }
        return FromPoly(Recombine(std::move(p)));
      }
      case Kind::kFloorDiv:
      case Kind::kMod:
        return DivMod(e.kind(), Run(e.operand(0)), Run(e.operand(1)));
      case Kind::kMin:
      case Kind::kMax:
        return MinMax(e.kind(), Run(e.operand(0)), Run(e.operand(1)));
    }
    return e;
  }

 private:
  // A simplified expression as a polynomial.
  Poly ToPoly(const IndexExpr& e) {
    switch (e.kind()) {
      case Kind::kConst:
        return ConstPoly(e.value());
      case Kind::kAdd: {
        Poly p;
        for (const IndexExpr& op : e.operands()) p.AddPoly(ToPoly(op), 1);
        return p;
      }
      case Kind::kMul: {
        Poly p = ConstPoly(1);
        for (const IndexExpr& op : e.operands()) p = Multiply(p, ToPoly(op));
        return p;
      }
      default: {
        Poly p;
        p.Add({e}, 1);
        return p;
      }
    }
  }

  // (x//c)*k*c + (x%c)*k -> x*k, until nothing matches.
  Poly Recombine(Poly p) {
    bool changed = true;
    while (changed && !p.failed) {
      changed = false;
      for (const auto& [m, k] : p.terms) {
        if (m.size() != 1 || m[0].kind() != Kind::kMod ||
            !m[0].operand(1).is_const() || m[0].operand(1).value() <= 0) {
          continue;
        }
        const IndexExpr x = m[0].operand(0);  // m dies with the erase below
        const int64_t c = m[0].operand(1).value();
        const IndexExpr div = DivMod(Kind::kFloorDiv, x, Const(c));
        if (div.is_const() || div.kind() == Kind::kAdd ||
            div.kind() == Kind::kMul) {
          continue;
        }
        int64_t kc;
        if (__builtin_mul_overflow(k, c, &kc)) continue;
        const Monomial div_m = {div};
        if (p.Coefficient(div_m) != kc) continue;
        const Monomial mod_m = m;
        const int64_t mod_k = k;
        p.terms.erase(mod_m);
        p.terms.erase(div_m);
        p.AddPoly(ToPoly(x), mod_k);
        changed = true;
        break;
      }
    }
    return p;
  }

  // x // c and x % c for simplified x and a constant c > 0.
  IndexExpr DivModConst(Kind kind, const IndexExpr& x, int64_t c) {
    const bool div = kind == Kind::kFloorDiv;
    if (c == 1) return div ? x : Const(0);
    if (x.is_const()) {
      return Const(div ? FloorDivInt(x.value(), c) : FloorModInt(x.value(), c));
    }
    const Interval r = ValueRange(x, extents_);
    const int64_t k = FloorDivInt(r.lo, c);
    if (k == FloorDivInt(r.hi, c)) {
      if (div) return Const(k);
      int64_t kc;
      if (!__builtin_mul_overflow(k, c, &kc)) {
        if (kc == 0) return x;
        return Run(x - Const(kc));
      }
    }
    Poly p = ToPoly(x);
    if (!p.failed) {
      // x = q*c + rest, with every coefficient of rest not a multiple of c
      // and its constant in [0, c).
      Poly q, rest;
      for (const auto& [m, coef] : p.terms) {
        const int64_t qc = FloorDivInt(coef, c);
        const int64_t rc = FloorModInt(coef, c);
        if (m.empty()) {
          q.Add(m, qc);
          rest.Add(m, rc);
        } else if (rc == 0) {
          q.Add(m, qc);
        } else {
          rest.Add(m, coef);
        }
      }
      if (!q.terms.empty()) {
        const IndexExpr rest_e = FromPoly(rest);
        if (!div) return DivModConst(kind, rest_e, c);
        return Run(FromPoly(q) + DivModConst(kind, rest_e, c));
      }
      int64_t g = c;
      for (const auto& [m, coef] : p.terms) g = Gcd(g, coef);
      if (g > 1) {
        Poly reduced;
        for (const auto& [m, coef] : p.terms) reduced.Add(m, coef / g);
        const IndexExpr inner = DivModConst(kind, FromPoly(reduced), c / g);
        return div ? inner : Run(inner * Const(g));
      }
      if (std::optional<IndexExpr> split = SplitDivisor(kind, p, c)) {
        return *split;
      }
    }
    if (x.kind() == Kind::kFloorDiv && x.operand(1).is_const() &&
        x.operand(1).value() > 0 && div) {
      int64_t dc;
      if (!__builtin_mul_overflow(x.operand(1).value(), c, &dc)) {
        return DivModConst(kind, x.operand(0), dc);
      }
    }
    if (x.kind() == Kind::kMod && x.operand(1).is_const() &&
        x.operand(1).value() > 0 && x.operand(1).value() % c == 0) {
      const int64_t m = x.operand(1).value();
      if (!div) return DivModConst(kind, x.operand(0), c);
      // (y % (a*c)) // c == (y // c) % a
      return DivModConst(Kind::kMod,
                         DivModConst(Kind::kFloorDiv, x.operand(0), c), m / c);
    }
    return IndexExpr::Binary(kind, x, Const(c));
  }

  // x = d*y + rest with d dividing c (1 < d < c) and rest in [0, d) by range:
  // x // c -> y // (c/d) and x % c -> (y % (c/d))*d + rest. A reshape's
  // flattened offset divided by a multiple of one of its strides, e.g. the
  // channel shuffle's (i1*784 + i2*28 + i3) // 1568 -> i1 // 2 over a 28x28
  // plane. The largest d that fits is taken; nullopt when none does.
  std::optional<IndexExpr> SplitDivisor(Kind kind, const Poly& p, int64_t c) {
    std::vector<int64_t> candidates;
    for (const auto& [m, coef] : p.terms) {
      if (m.empty()) continue;
      const int64_t d = Gcd(coef, c);
      if (d > 1 && d < c) candidates.push_back(d);
    }
    std::sort(candidates.begin(), candidates.end(), std::greater<int64_t>());
    candidates.erase(std::unique(candidates.begin(), candidates.end()),
                     candidates.end());
    for (const int64_t d : candidates) {
      Poly y, rest;
      for (const auto& [m, coef] : p.terms) {
        if (m.empty()) {
          y.Add(m, FloorDivInt(coef, d));
          rest.Add(m, FloorModInt(coef, d));
        } else if (coef % d == 0) {
          y.Add(m, coef / d);
        } else {
          rest.Add(m, coef);
        }
      }
      if (y.failed || rest.failed) continue;
      const IndexExpr rest_e = FromPoly(rest);
      const Interval r = ValueRange(rest_e, extents_);
      if (r.lo < 0 || r.hi >= d) continue;
      const IndexExpr y_e = FromPoly(y);
      if (kind == Kind::kFloorDiv) {
        return DivModConst(Kind::kFloorDiv, y_e, c / d);
      }
      return Run(DivModConst(Kind::kMod, y_e, c / d) * Const(d) + rest_e);
    }
    return std::nullopt;
  }

  IndexExpr DivMod(Kind kind, const IndexExpr& a, const IndexExpr& b) {
    if (b.is_const() && b.value() > 0) return DivModConst(kind, a, b.value());
    if (!b.is_const()) {
      const Interval ra = ValueRange(a, extents_);
      const Interval rb = ValueRange(b, extents_);
      if (rb.lo >= 1 && ra.lo >= 0 && ra.hi < rb.lo) {
        return kind == Kind::kFloorDiv ? Const(0) : a;
      }
    }
    return IndexExpr::Binary(kind, a, b);
  }

  IndexExpr MinMax(Kind kind, const IndexExpr& a, const IndexExpr& b) {
    const bool is_min = kind == Kind::kMin;
    if (a.is_const() && b.is_const()) {
      return Const(is_min ? std::min(a.value(), b.value())
                          : std::max(a.value(), b.value()));
    }
    if (a == b) return a;
    const Interval ra = ValueRange(a, extents_);
    const Interval rb = ValueRange(b, extents_);
    if (ra.hi <= rb.lo) return is_min ? a : b;
    if (rb.hi <= ra.lo) return is_min ? b : a;
    return b < a ? IndexExpr::Binary(kind, b, a) : IndexExpr::Binary(kind, a, b);
  }

  absl::Span<const int64_t> extents_;
};

}  // namespace

IndexExpr Simplify(const IndexExpr& e, absl::Span<const int64_t> extents) {
  return Simplifier(extents).Run(e);
}

}  // namespace kiln::ir::loop
