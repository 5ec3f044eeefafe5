// Tokenizer, token cursor and index-expression parser for the loop IR's text
// form (see text_lexer.h and the grammar in index_expr.h).
#include "ir/loop/text_lexer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::ir::loop::text_internal {
namespace {

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c); }
bool IsHexDigit(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

absl::Status ErrorAtPos(int line, int col, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(line, ":", col, ": ", msg));
}

class Lexer {
 public:
  explicit Lexer(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::vector<Token>> Run() {
    std::vector<Token> tokens;
    while (true) {
      SkipSpaceAndComments();
      Token t;
      t.line = line_;
      t.col = col_;
      if (pos_ >= text_.size()) {
        tokens.push_back(std::move(t));
        return tokens;
      }
      KILN_RETURN_IF_ERROR(LexOne(t));
      tokens.push_back(std::move(t));
    }
  }

 private:
  char At(size_t i) const { return i < text_.size() ? text_[i] : '\0'; }
  char Cur() const { return At(pos_); }
  void Advance() {
    if (Cur() == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  absl::Status Error(absl::string_view msg) const {
    return ErrorAtPos(line_, col_, msg);
  }

  void SkipSpaceAndComments() {
    while (pos_ < text_.size()) {
      const char c = Cur();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        Advance();
      } else if (c == '#') {
        while (pos_ < text_.size() && Cur() != '\n') Advance();
      } else {
        return;
      }
    }
  }

  absl::Status LexOne(Token& t) {
    const char c = Cur();
    if (c == '%' && (IsIdentChar(At(pos_ + 1)) || At(pos_ + 1) == '.')) {
      Advance();
      t.kind = Tok::kValue;
      while (IsIdentChar(Cur()) || Cur() == '.') {
        t.text += Cur();
        Advance();
      }
      return absl::OkStatus();
    }
    if (c == '"') {
      t.kind = Tok::kString;
      return LexString(&t.text);
    }
    if (IsIdentStart(c)) {
      t.kind = Tok::kIdent;
      while (IsIdentChar(Cur())) {
        t.text += Cur();
        Advance();
      }
      return absl::OkStatus();
    }
    if (IsDigit(c)) return LexNumber(t);
    t.kind = Tok::kPunct;
    if ((c == '/' && At(pos_ + 1) == '/') || (c == '-' && At(pos_ + 1) == '>')) {
      t.text = std::string(text_.substr(pos_, 2));
      Advance();
      Advance();
      return absl::OkStatus();
    }
    if (c != '\0' && std::strchr("()[]{},=:<>*%+-", c) != nullptr) {
      t.text = std::string(1, c);
      Advance();
      return absl::OkStatus();
    }
    return Error(absl::StrCat("unexpected character ",
                              Quote(text_.substr(pos_, 1))));
  }

  absl::Status LexNumber(Token& t) {
    t.kind = Tok::kInt;
    auto digits = [&] {
      while (IsDigit(Cur())) {
        t.text += Cur();
        Advance();
      }
    };
    digits();
    if (Cur() == '.' && IsDigit(At(pos_ + 1))) {
      t.kind = Tok::kFloat;
      t.text += Cur();
      Advance();
      digits();
    }
    if ((Cur() == 'e' || Cur() == 'E') &&
        (IsDigit(At(pos_ + 1)) ||
         ((At(pos_ + 1) == '-' || At(pos_ + 1) == '+') &&
          IsDigit(At(pos_ + 2))))) {
      t.kind = Tok::kFloat;
      t.text += Cur();
      Advance();
      t.text += Cur();
      Advance();
      digits();
    }
    if (IsIdentChar(Cur()) || Cur() == '.') {
      return ErrorAtPos(t.line, t.col,
                        absl::StrCat("malformed number starting '", t.text,
                                     "'"));
    }
    return absl::OkStatus();
  }

  // At the opening quote.
  absl::Status LexString(std::string* out) {
    const int line = line_, col = col_;
    Advance();
    while (true) {
      if (pos_ >= text_.size()) return ErrorAtPos(line, col, "unterminated string");
      const char c = Cur();
      if (c == '"') {
        Advance();
        return absl::OkStatus();
      }
      if (c == '\n') {
        return ErrorAtPos(line, col,
                          "unterminated string (write a newline as \\n)");
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in a string (escape it as \\xHH)");
      }
      if (c != '\\') {
        *out += c;
        Advance();
        continue;
      }
      Advance();
      switch (Cur()) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case 'n': *out += '\n'; break;
        case 't': *out += '\t'; break;
        case 'r': *out += '\r'; break;
        case 'x': {
          if (!IsHexDigit(At(pos_ + 1)) || !IsHexDigit(At(pos_ + 2))) {
            return Error("expected two hex digits after \\x");
          }
          int v = 0;
          for (int k = 1; k <= 2; ++k) {
            const char h = At(pos_ + k);
            v = v * 16 + (IsDigit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          *out += static_cast<char>(v);
          Advance();
          Advance();
          break;
        }
        default:
          return Error(
              "unknown escape in string (use \\\" \\\\ \\n \\t \\r \\xHH)");
      }
      Advance();
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

// ---------------------------------------------------------------------------
// Index expressions.

struct Term {
  IndexExpr expr;
  int factors = 0;           // factors in the term
  bool only_products = true;  // no '//' or '%' in the term
  bool last_is_literal = false;  // the last factor is a bare INT token
};

class IndexParser {
 public:
  IndexParser(Cursor& c, const VarResolver& resolver)
      : c_(c), resolver_(resolver) {}

  absl::StatusOr<IndexExpr> ParseSum() {
    if (++depth_ > kMaxNesting) {
      return ErrorAt(c_.Peek(), absl::StrCat("index expression nests deeper than ",
                                             kMaxNesting));
    }
    std::vector<IndexExpr> terms;
    KILN_ASSIGN_OR_RETURN(Term first, ParseTerm());
    terms.push_back(first.expr);
    while (c_.IsPunct("+") || c_.IsPunct("-")) {
      const bool minus = c_.Next().text == "-";
      KILN_ASSIGN_OR_RETURN(Term t, ParseTerm());
      terms.push_back(minus ? Negated(t) : t.expr);
    }
    --depth_;
    return IndexExpr::Sum(std::move(terms));
  }

 private:
  // `- t` as index_expr.h describes it: a negated literal, a product whose
  // trailing literal is negated, or t*-1.
  static IndexExpr Negated(const Term& t) {
    if (t.factors == 1 && t.last_is_literal) return Const(-t.expr.value());
    if (t.factors >= 2 && t.only_products && t.last_is_literal) {
      std::vector<IndexExpr> ops = t.expr.operands();
      ops.back() = Const(-ops.back().value());
      return IndexExpr::Product(std::move(ops));
    }
    return IndexExpr::Product({t.expr, Const(-1)});
  }

  absl::StatusOr<Term> ParseTerm() {
    Term term;
    bool literal = false;
    KILN_ASSIGN_OR_RETURN(IndexExpr first, ParseFactor(&literal));
    std::vector<IndexExpr> run = {first};
    term.factors = 1;
    while (c_.IsPunct("*") || c_.IsPunct("//") || c_.IsPunct("%")) {
      const std::string op = c_.Next().text;
      KILN_ASSIGN_OR_RETURN(IndexExpr f, ParseFactor(&literal));
      ++term.factors;
      if (op == "*") {
        run.push_back(std::move(f));
        continue;
      }
      term.only_products = false;
      IndexExpr lhs = IndexExpr::Product(std::move(run));
      run = {IndexExpr::Binary(op == "//" ? IndexExpr::Kind::kFloorDiv
                                          : IndexExpr::Kind::kMod,
                               std::move(lhs), std::move(f))};
    }
    term.last_is_literal = literal;
    term.expr = IndexExpr::Product(std::move(run));
    return term;
  }

  absl::StatusOr<IndexExpr> ParseFactor(bool* literal) {
    *literal = false;
    const Token& t = c_.Peek();
    if (t.kind == Tok::kInt) {
      int64_t v;
      if (!absl::SimpleAtoi(t.text, &v)) {
        return ErrorAt(t, absl::StrCat("integer out of range: ", t.text));
      }
      c_.Next();
      *literal = true;
      return Const(v);
    }
    if (c_.IsPunct("-")) {
      c_.Next();
      const Token& n = c_.Peek();
      if (n.kind == Tok::kInt) {
        int64_t v;
        if (!absl::SimpleAtoi(absl::StrCat("-", n.text), &v)) {
          return ErrorAt(n, absl::StrCat("integer out of range: -", n.text));
        }
        c_.Next();
        return Const(v);
      }
      if (++depth_ > kMaxNesting) {
        return ErrorAt(n, absl::StrCat("index expression nests deeper than ",
                                       kMaxNesting));
      }
      bool ignored;
      KILN_ASSIGN_OR_RETURN(IndexExpr f, ParseFactor(&ignored));
      --depth_;
      return IndexExpr::Product({f, Const(-1)});
    }
    if (c_.TryPunct("(")) {
      KILN_ASSIGN_OR_RETURN(IndexExpr e, ParseSum());
      KILN_RETURN_IF_ERROR(c_.ExpectPunct(")", "to close '('"));
      return e;
    }
    if (t.kind == Tok::kIdent) {
      if ((t.text == "min" || t.text == "max") && c_.IsPunct("(", 1)) {
        const IndexExpr::Kind kind =
            t.text == "min" ? IndexExpr::Kind::kMin : IndexExpr::Kind::kMax;
        c_.Next();
        c_.Next();
        KILN_ASSIGN_OR_RETURN(IndexExpr a, ParseSum());
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "between min/max operands"));
        KILN_ASSIGN_OR_RETURN(IndexExpr b, ParseSum());
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(")", "to close min/max"));
        return IndexExpr::Binary(kind, std::move(a), std::move(b));
      }
      std::optional<int> var = resolver_ ? resolver_(t.text) : std::nullopt;
      if (!var.has_value()) {
        return ErrorAt(t, absl::StrCat("unknown loop variable '", t.text, "'"));
      }
      c_.Next();
      return Var(*var);
    }
    return c_.Expected("an index expression (integer, variable, '(', min, max)");
  }

  Cursor& c_;
  const VarResolver& resolver_;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(absl::string_view text) {
  return Lexer(text).Run();
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || !IsIdentStart(s[0])) return false;
  return std::all_of(s.begin(), s.end(), IsIdentChar);
}

std::string Quote(absl::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

absl::Status ErrorAt(const Token& t, absl::string_view msg) {
  return ErrorAtPos(t.line, t.col, msg);
}

const Token& Cursor::Peek(size_t k) const {
  return tokens_[std::min(pos_ + k, tokens_.size() - 1)];
}

const Token& Cursor::Next() {
  const Token& t = Peek();
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return t;
}

bool Cursor::IsPunct(absl::string_view p, size_t k) const {
  const Token& t = Peek(k);
  return t.kind == Tok::kPunct && t.text == p;
}

bool Cursor::IsIdent(absl::string_view s, size_t k) const {
  const Token& t = Peek(k);
  return t.kind == Tok::kIdent && t.text == s;
}

bool Cursor::TryPunct(absl::string_view p) {
  if (!IsPunct(p)) return false;
  Next();
  return true;
}

bool Cursor::TryIdent(absl::string_view s) {
  if (!IsIdent(s)) return false;
  Next();
  return true;
}

absl::Status Cursor::ExpectPunct(absl::string_view p,
                                 absl::string_view context) {
  if (TryPunct(p)) return absl::OkStatus();
  return Expected(absl::StrCat("'", p, "' ", context));
}

absl::Status Cursor::Expected(absl::string_view what) const {
  return ErrorAt(Peek(),
                 absl::StrCat("expected ", what, ", got ", Describe(Peek())));
}

std::string Cursor::Describe(const Token& t) {
  // Long tokens are cut after 40 bytes.
  constexpr size_t kMax = 40;
  const absl::string_view text = absl::string_view(t.text).substr(0, kMax);
  const char* more = t.text.size() > kMax ? "..." : "";
  switch (t.kind) {
    case Tok::kEof: return "end of input";
    case Tok::kValue: return absl::StrCat("'%", EscapeForMessage(text), more, "'");
    case Tok::kString: return absl::StrCat(Quote(text), more);
    default: return absl::StrCat("'", EscapeForMessage(text), more, "'");
  }
}

absl::StatusOr<IndexExpr> ParseIndexExprAt(Cursor& cursor,
                                           const VarResolver& resolver) {
  return IndexParser(cursor, resolver).ParseSum();
}

}  // namespace kiln::ir::loop::text_internal
