// File: ir/loop/text_lexer.h — the tokenizer and token cursor shared by the
// index-expression parser and the loop-program parser (package-internal).
#ifndef KILN_IR_LOOP_TEXT_LEXER_H_
#define KILN_IR_LOOP_TEXT_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/loop/index_expr.h"

namespace kiln::ir::loop::text_internal {

// kPunct is one of ()[]{},=:<>*%+- or the two-character "//" and "->".
enum class Tok { kEof, kIdent, kValue, kString, kInt, kFloat, kPunct };

struct Token {
  Tok kind = Tok::kEof;
  // Identifier, number or punctuation as written; the decoded name of a
  // %value (without '%') or of a "string".
  std::string text;
  int line = 1;
  int col = 1;
};

// `//` is an operator here, so comments start with '#' and run to the end of
// the line.
absl::StatusOr<std::vector<Token>> Lex(absl::string_view text);

// [A-Za-z_][A-Za-z0-9_]*
bool IsIdentifier(absl::string_view s);
// A double-quoted string with \" \\ \n \t \r \xHH escapes.
std::string Quote(absl::string_view s);

absl::Status ErrorAt(const Token& t, absl::string_view msg);

// Reads a token vector that always ends with kEof.
class Cursor {
 public:
  explicit Cursor(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  const Token& Peek(size_t k = 0) const;
  const Token& Next();
  bool IsPunct(absl::string_view p, size_t k = 0) const;
  bool IsIdent(absl::string_view s, size_t k = 0) const;
  bool TryPunct(absl::string_view p);
  bool TryIdent(absl::string_view s);
  absl::Status ExpectPunct(absl::string_view p, absl::string_view context);
  // "LINE:COL: expected WHAT, got ..." at the next token.
  absl::Status Expected(absl::string_view what) const;
  static std::string Describe(const Token& t);

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

// An index expression starting at the cursor (grammar in index_expr.h). It
// stops before the first token that cannot continue the expression.
absl::StatusOr<IndexExpr> ParseIndexExprAt(Cursor& cursor,
                                           const VarResolver& resolver);

// Deepest parenthesis nesting the parsers accept (stack safety).
inline constexpr int kMaxNesting = 200;

}  // namespace kiln::ir::loop::text_internal

#endif  // KILN_IR_LOOP_TEXT_LEXER_H_
