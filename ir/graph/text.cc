// The graph IR text printer and parser (grammar in text.h).
#include "ir/graph/text.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::ir {
namespace {

// ---------------------------------------------------------------------------
// Lexical classes shared by the printer and the lexer.

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c); }
bool IsBareValueChar(char c) { return IsIdentChar(c) || c == '.'; }
bool IsHexDigit(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// [A-Za-z_][A-Za-z0-9_]*
bool IsPlainIdent(absl::string_view s) {
  if (s.empty() || !IsIdentStart(s[0])) return false;
  return std::all_of(s.begin(), s.end(), IsIdentChar);
}

// A plain identifier followed by any number of ".[A-Za-z0-9_]+" parts: what
// the lexer reads as one identifier token.
bool IsDottedIdent(absl::string_view s) {
  if (s.empty() || !IsIdentStart(s[0])) return false;
  bool after_dot = false;
  for (char c : s) {
    if (c == '.') {
      if (after_dot) return false;
      after_dot = true;
    } else if (IsIdentChar(c)) {
      after_dot = false;
    } else {
      return false;
    }
  }
  return !after_dot;
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
          out += ch;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
  return out;
}

// Graph and attribute names: bare when the lexer reads them back as one
// identifier, quoted otherwise.
std::string NameText(absl::string_view s) {
  return IsDottedIdent(s) ? std::string(s) : Quote(s);
}

std::string ValueNameText(absl::string_view name) {
  if (!name.empty() && std::all_of(name.begin(), name.end(), IsBareValueChar)) {
    return absl::StrCat("%", name);
  }
  return absl::StrCat("%", Quote(name));
}

std::string OpText(const Node& node) {
  const bool plain_op = IsPlainIdent(node.op) && node.op != "_";
  if (node.domain.empty()) return plain_op ? node.op : Quote(node.op);
  return absl::StrCat(NameText(node.domain), ".",
                      plain_op ? node.op : Quote(node.op));
}

// ---------------------------------------------------------------------------
// Numbers.

// Floats always look like floats, so `1.0` never reads back as an int64.
std::string FloatLooking(const char* s) {
  std::string out = s;
  if (out.find_first_of(".eni") == std::string::npos) out += ".0";
  return out;
}

// strtof / strtod of a number as the printer and the lexer write it (an
// optional sign, digits, a fraction, an exponent): std::from_chars, which
// rounds as correctly and is several times faster, or the C function where
// from_chars declines (a value out of range, whose overflow to inf and
// underflow to 0 callers rely on).
float ReadF32(const char* text) {
  const char* begin = text[0] == '+' ? text + 1 : text;
  const char* end = begin + std::strlen(begin);
  float f = 0;
  const std::from_chars_result r = std::from_chars(begin, end, f);
  return r.ec == std::errc() && r.ptr == end ? f : std::strtof(text, nullptr);
}
double ReadF64(const char* text) {
  const char* begin = text[0] == '+' ? text + 1 : text;
  const char* end = begin + std::strlen(begin);
  double d = 0;
  const std::from_chars_result r = std::from_chars(begin, end, d);
  return r.ec == std::errc() && r.ptr == end ? d : std::strtod(text, nullptr);
}

// printf's "%.*g" of `value` into `buf` (64 bytes), NUL-terminated:
// std::to_chars with a precision is specified to print exactly that, and is
// several times faster than snprintf.
void FormatG(char* buf, double value, int precision) {
  const std::to_chars_result r =
      std::to_chars(buf, buf + 63, value, std::chars_format::general, precision);
  *r.ptr = '\0';
}

// The significant digits of the shortest decimal that reads back as `value`
// (std::to_chars' shortest form). No "%.*g" with fewer digits reads back as
// `value`, so Shortest may start there.
template <typename T>
int ShortestDigits(T value) {
  char buf[64];
  const std::to_chars_result r =
      std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  int digits = 0;
  for (const char* p = buf; p < r.ptr && *p != 'e'; ++p) digits += IsDigit(*p) ? 1 : 0;
  return digits;
}

// The shortest "%.*g" form of `value` that `round_trips` accepts, trying
// precisions from `min_precision` on, without an exponent for magnitudes in
// [1, 1e16) (so 10 prints "10", not "1e+01").
template <typename RoundTrips>
std::string Shortest(double value, int min_precision, int max_precision,
                     RoundTrips round_trips) {
  char buf[64];
  int precision = std::max(1, min_precision);
  for (; precision < max_precision; ++precision) {
    FormatG(buf, value, precision);
    if (round_trips(buf)) break;
  }
  const double magnitude = std::fabs(value);
  for (; precision <= 17; ++precision) {
    FormatG(buf, value, precision);
    if (magnitude < 1 || magnitude >= 1e16 || !std::strchr(buf, 'e')) break;
  }
  return FloatLooking(buf);
}

std::string HexBits(uint64_t bits, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "nan(0x%0*llx)", digits,
                static_cast<unsigned long long>(bits));
  return buf;
}

std::string FormatF32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if (std::isnan(f)) {
    if (bits == 0x7fc00000u) return "nan";
    if (bits == 0xffc00000u) return "-nan";
    return HexBits(bits, 8);
  }
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  return Shortest(f, ShortestDigits(f), 9, [f](const char* text) {
    const float back = ReadF32(text);
    return std::memcmp(&back, &f, sizeof(f)) == 0;
  });
}

std::string FormatF64(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  if (std::isnan(d)) {
    if (bits == 0x7ff8000000000000ull) return "nan";
    if (bits == 0xfff8000000000000ull) return "-nan";
    return HexBits(bits, 16);
  }
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // One below: where the exponent grows to three digits, the form with the
  // fewest characters may have one digit more than the fewest digits.
  return Shortest(d, ShortestDigits(d) - 1, 17, [d](const char* text) {
    const double back = ReadF64(text);
    return std::memcmp(&back, &d, sizeof(d)) == 0;
  });
}

std::string FormatF16(Float16 h) {
  const bool is_nan = (h.bits & 0x7c00u) == 0x7c00u && (h.bits & 0x3ffu) != 0;
  if (is_nan) {
    if (h.bits == 0x7e00u) return "nan";
    if (h.bits == 0xfe00u) return "-nan";
    return HexBits(h.bits, 4);
  }
  if (h.bits == 0x7c00u) return "inf";
  if (h.bits == 0xfc00u) return "-inf";
  return Shortest(HalfToFloat(h), 1, 9, [h](const char* text) {
    return FloatToHalf(ReadF32(text)).bits == h.bits;
  });
}

std::string FormatBF16(BFloat16 b) {
  const bool is_nan = (b.bits & 0x7f80u) == 0x7f80u && (b.bits & 0x7fu) != 0;
  if (is_nan) {
    if (b.bits == 0x7fc0u) return "nan";
    if (b.bits == 0xffc0u) return "-nan";
    return HexBits(b.bits, 4);
  }
  if (b.bits == 0x7f80u) return "inf";
  if (b.bits == 0xff80u) return "-inf";
  return Shortest(BFloat16ToFloat(b), 1, 9, [b](const char* text) {
    return FloatToBFloat16(ReadF32(text)).bits == b.bits;
  });
}

std::string FormatElement(const Tensor& t, int64_t i) {
  const void* p = t.raw_data();
  switch (t.dtype()) {
    case DType::kF32: return FormatF32(static_cast<const float*>(p)[i]);
    case DType::kF16: return FormatF16(static_cast<const Float16*>(p)[i]);
    case DType::kBF16: return FormatBF16(static_cast<const BFloat16*>(p)[i]);
    case DType::kF64: return FormatF64(static_cast<const double*>(p)[i]);
    case DType::kI64: return absl::StrCat(static_cast<const int64_t*>(p)[i]);
    case DType::kI32: return absl::StrCat(static_cast<const int32_t*>(p)[i]);
    case DType::kI8: return absl::StrCat(static_cast<const int8_t*>(p)[i]);
    case DType::kU8: return absl::StrCat(static_cast<const uint8_t*>(p)[i]);
    case DType::kBool:
      return static_cast<const uint8_t*>(p)[i] != 0 ? "true" : "false";
    case DType::kInvalid: break;
  }
  return "?";
}

std::string TypeText(DType dtype, absl::Span<const int64_t> shape,
                     bool shape_known) {
  std::string out(dtype == DType::kInvalid ? "?" : DTypeName(dtype));
  if (!shape_known) return out + "[*]";
  return out + ShapeToString(shape);
}

// ---------------------------------------------------------------------------
// Printer.

// The printed name of every value of one graph: the model's name when it is
// non-empty and unique, otherwise a fresh one, so the text always parses.
class NameTable {
 public:
  explicit NameTable(const Graph& g) : num_values_(g.num_values()) {
    std::vector<ValueId> order;
    std::vector<bool> seen(num_values_, false);
    auto add = [&](ValueId id) {
      if (id >= 0 && id < num_values_ && !seen[id]) {
        seen[id] = true;
        order.push_back(id);
      }
    };
    for (ValueId id : g.inputs()) add(id);
    for (const Graph::Capture& c : g.captures()) add(c.inner);
    for (ValueId id : SortedConstants(g)) add(id);
    for (const Node& n : g.nodes()) {
      for (ValueId id : n.outputs) add(id);
    }
    for (ValueId id = 0; id < num_values_; ++id) add(id);

    names_.resize(num_values_);
    absl::flat_hash_set<std::string> taken;
    std::vector<ValueId> unnamed;
    for (ValueId id : order) {
      const std::string& name = g.value(id).name;
      if (!name.empty() && taken.insert(name).second) {
        names_[id] = ValueNameText(name);
      } else {
        unnamed.push_back(id);
      }
    }
    for (ValueId id : unnamed) {
      const std::string& name = g.value(id).name;
      std::string base = name.empty() ? absl::StrCat("v", id) : name;
      std::string candidate = base;
      for (int k = 1; !taken.insert(candidate).second; ++k) {
        candidate = absl::StrCat(base, ".", k);
      }
      names_[id] = ValueNameText(candidate);
    }
  }

  static std::vector<ValueId> SortedConstants(const Graph& g) {
    std::vector<ValueId> ids;
    for (const auto& [id, tensor] : g.constants()) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  std::string operator()(ValueId id) const {
    if (id == kNoValue) return "_";
    if (id < 0 || id >= num_values_) {
      return absl::StrCat("%<invalid id ", id, ">");
    }
    return names_[id];
  }

 private:
  int num_values_;
  std::vector<std::string> names_;
};

class Printer {
 public:
  explicit Printer(const PrintOptions& options) : options_(options) {}

  // Header at the current position, statements at indent + 2, the closing
  // brace at indent.
  void PrintGraph(const Graph& g, int indent,
                  std::optional<int64_t> parent_opset, std::string* out) {
    const NameTable names(g);
    absl::StrAppend(out, "graph ", NameText(g.name()), "(");
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      if (i > 0) out->append(", ");
      absl::StrAppend(out, names(g.inputs()[i]), ": ",
                      TypeOf(g, g.inputs()[i]));
    }
    out->append(")");
    if (!g.captures().empty()) {
      out->append(" captures(");
      for (size_t i = 0; i < g.captures().size(); ++i) {
        const Graph::Capture& c = g.captures()[i];
        if (i > 0) out->append(", ");
        absl::StrAppend(out, names(c.inner), ": ", TypeOf(g, c.inner), " = ",
                        ValueNameText(c.outer_name));
      }
      out->append(")");
    }
    out->append(" -> (");
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      if (i > 0) out->append(", ");
      out->append(names(g.outputs()[i]));
    }
    out->append(")");
    if (!parent_opset.has_value() || *parent_opset != g.opset()) {
      absl::StrAppend(out, " opset ", g.opset());
    }
    out->append(" {\n");
    const std::string pad(indent + 2, ' ');
    for (ValueId id : NameTable::SortedConstants(g)) {
      absl::StrAppend(out, pad, names(id), " = constant ");
      const Tensor* t = g.constant(id);
      if (t == nullptr) {
        out->append("<null>\n");
        continue;
      }
      out->append(FormatTensor(*t));
      if (id >= 0 && id < g.num_values()) {
        const Value& v = g.value(id);
        if (v.dtype != t->dtype() || !v.shape_known || v.shape != t->shape()) {
          absl::StrAppend(out, " : ", PrintValueType(v));
        }
      }
      out->append("\n");
    }
    for (const Node& node : g.nodes()) {
      out->append(pad);
      PrintNode(g, names, node, indent + 2, out);
      out->append("\n");
    }
    absl::StrAppend(out, std::string(indent, ' '), "}");
  }

  void PrintNode(const Graph& g, const NameTable& names, const Node& node,
                 int indent, std::string* out) {
    if (!node.outputs.empty()) {
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (i > 0) out->append(", ");
        out->append(names(node.outputs[i]));
      }
      out->append(" = ");
    }
    absl::StrAppend(out, OpText(node), "(");
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (i > 0) out->append(", ");
      out->append(names(node.inputs[i]));
    }
    out->append(")");
    if (!node.attrs.empty()) {
      bool multiline = false;
      for (const auto& [key, attr] : node.attrs) {
        multiline |= std::holds_alternative<std::shared_ptr<const Graph>>(attr);
      }
      out->append(multiline ? " {\n" : " {");
      bool first = true;
      for (const auto& [key, attr] : node.attrs) {
        if (!first) out->append(multiline ? ",\n" : ", ");
        first = false;
        if (multiline) out->append(indent + 2, ' ');
        absl::StrAppend(out, NameText(key), "=");
        PrintAttr(g, attr, indent + 2, out);
      }
      if (multiline) absl::StrAppend(out, "\n", std::string(indent, ' '));
      out->append("}");
    }
    if (!node.name.empty()) absl::StrAppend(out, " name=", Quote(node.name));
    bool first = true;
    for (ValueId id : node.outputs) {
      if (id == kNoValue) continue;
      out->append(first ? " : " : ", ");
      first = false;
      out->append(TypeOf(g, id));
    }
  }

  std::string FormatTensor(const Tensor& t) {
    std::string out = TypeText(t.dtype(), t.shape(), true);
    const int64_t n = t.num_elements();
    if (t.dtype() == DType::kInvalid) return out + " <elided>";
    if (n == 0) return out + " []";
    if (t.rank() == 0) return absl::StrCat(out, " ", FormatElement(t, 0));
    const size_t size = DTypeSize(t.dtype());
    const auto* bytes = static_cast<const uint8_t*>(t.raw_data());
    bool splat = n > 1;
    for (int64_t i = 1; splat && i < n; ++i) {
      splat = std::memcmp(bytes, bytes + i * size, size) == 0;
    }
    if (splat) return absl::StrCat(out, " splat(", FormatElement(t, 0), ")");
    if (options_.max_constant_elements >= 0 &&
        n > options_.max_constant_elements) {
      return out + " <elided>";
    }
    out += " [";
    for (int64_t i = 0; i < n; ++i) {
      if (i > 0) out += ", ";
      out += FormatElement(t, i);
    }
    return out + "]";
  }

 private:
  static std::string TypeOf(const Graph& g, ValueId id) {
    if (id < 0 || id >= g.num_values()) return "?[*]";
    return PrintValueType(g.value(id));
  }

  template <typename T>
  static std::string List(const std::vector<T>& v, absl::string_view type,
                          std::string (*format)(const T&)) {
    if (v.empty()) return absl::StrCat(type, "[]");
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      out += format(v[i]);
    }
    return out + "]";
  }

  void PrintAttr(const Graph& g, const AttrValue& attr, int indent,
                 std::string* out) {
    if (const auto* i = std::get_if<int64_t>(&attr)) {
      absl::StrAppend(out, *i);
    } else if (const auto* f = std::get_if<float>(&attr)) {
      out->append(FormatF32(*f));
    } else if (const auto* s = std::get_if<std::string>(&attr)) {
      out->append(Quote(*s));
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(&attr)) {
      out->append(List<int64_t>(
          *is, "ints", [](const int64_t& v) { return absl::StrCat(v); }));
    } else if (const auto* fs = std::get_if<std::vector<float>>(&attr)) {
      out->append(List<float>(*fs, "floats",
                              [](const float& v) { return FormatF32(v); }));
    } else if (const auto* ss = std::get_if<std::vector<std::string>>(&attr)) {
      out->append(List<std::string>(
          *ss, "strings", [](const std::string& v) { return Quote(v); }));
    } else if (const auto* t = std::get_if<Tensor>(&attr)) {
      absl::StrAppend(out, "tensor ", FormatTensor(*t));
    } else if (const auto* sub =
                   std::get_if<std::shared_ptr<const Graph>>(&attr)) {
      if (*sub == nullptr) {
        out->append("graph <null>");
      } else {
        PrintGraph(**sub, indent, g.opset(), out);
      }
    }
  }

  const PrintOptions& options_;
};

// ---------------------------------------------------------------------------
// Lexer.

enum class Tok { kEof, kIdent, kValue, kString, kInt, kFloat, kPunct, kArrow };

struct Token {
  Tok kind = Tok::kEof;
  // Identifier, number or punctuation text as written; the decoded name of
  // a %value or "string".
  std::string text;
  int line = 1;
  int col = 1;
};

std::string Where(int line, int col) { return absl::StrCat(line, ":", col); }

absl::Status LexError(int line, int col, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(Where(line, col), ": ", msg));
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
        tokens.push_back(t);
        return tokens;
      }
      KILN_RETURN_IF_ERROR(Lex(t));
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

  void SkipSpaceAndComments() {
    while (pos_ < text_.size()) {
      const char c = Cur();
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        Advance();
      } else if (c == '/' && At(pos_ + 1) == '/') {
        while (pos_ < text_.size() && Cur() != '\n') Advance();
      } else {
        return;
      }
    }
  }

  absl::Status Error(absl::string_view msg) const {
    return LexError(line_, col_, msg);
  }

  absl::Status Lex(Token& t) {
    const char c = Cur();
    if (c == '%') {
      Advance();
      t.kind = Tok::kValue;
      if (Cur() == '"') return LexString(&t.text);
      while (IsBareValueChar(Cur())) {
        t.text += Cur();
        Advance();
      }
      if (t.text.empty()) {
        return LexError(t.line, t.col,
                        "expected a value name after '%' (%name or %\"name\")");
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
      while (Cur() == '.' && IsIdentChar(At(pos_ + 1))) {
        t.text += Cur();
        Advance();
        while (IsIdentChar(Cur())) {
          t.text += Cur();
          Advance();
        }
      }
      return absl::OkStatus();
    }
    if (c == '-' && At(pos_ + 1) == '>') {
      t.kind = Tok::kArrow;
      t.text = "->";
      Advance();
      Advance();
      return absl::OkStatus();
    }
    if (IsDigit(c) || c == '-' || c == '+') return LexNumber(t);
    if (std::strchr("()[]{},=:<>?*.", c) != nullptr && c != '\0') {
      t.kind = Tok::kPunct;
      t.text = std::string(1, c);
      Advance();
      return absl::OkStatus();
    }
    return Error(absl::StrCat("unexpected character ",
                              Quote(absl::string_view(&text_[pos_], 1))));
  }

  absl::Status LexNumber(Token& t) {
    if (Cur() == '-' || Cur() == '+') {
      t.text += Cur();
      Advance();
      if (IsIdentStart(Cur())) {
        std::string word;
        while (IsIdentChar(Cur())) {
          word += Cur();
          Advance();
        }
        if (word != "inf" && word != "nan") {
          return LexError(t.line, t.col,
                          absl::StrCat("malformed number '", t.text, word,
                                       "'"));
        }
        t.kind = Tok::kFloat;
        t.text += word;
        return absl::OkStatus();
      }
      if (!IsDigit(Cur())) {
        return LexError(t.line, t.col,
                        absl::StrCat("expected a digit after '", t.text, "'"));
      }
    }
    t.kind = Tok::kInt;
    if (t.text.empty() && Cur() == '0' && (At(pos_ + 1) == 'x' ||
                                           At(pos_ + 1) == 'X')) {
      t.text = "0x";
      Advance();
      Advance();
      while (IsHexDigit(Cur())) {
        t.text += Cur();
        Advance();
      }
      if (t.text.size() == 2) {
        return LexError(t.line, t.col, "expected hex digits after '0x'");
      }
    } else {
      while (IsDigit(Cur())) {
        t.text += Cur();
        Advance();
      }
      if (Cur() == '.') {
        t.kind = Tok::kFloat;
        t.text += Cur();
        Advance();
        while (IsDigit(Cur())) {
          t.text += Cur();
          Advance();
        }
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
        while (IsDigit(Cur())) {
          t.text += Cur();
          Advance();
        }
      }
    }
    if (IsIdentChar(Cur()) || Cur() == '.') {
      return LexError(t.line, t.col,
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
      if (pos_ >= text_.size()) {
        return LexError(line, col, "unterminated string");
      }
      const char c = Cur();
      if (c == '"') {
        Advance();
        return absl::OkStatus();
      }
      if (c == '\n') {
        return LexError(line, col,
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
      const char e = Cur();
      switch (e) {
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
// Parser.

constexpr int kMaxGraphNesting = 64;

struct ParsedType {
  DType dtype = DType::kInvalid;
  Shape shape;
  bool shape_known = false;
};

// A float literal before it is converted to a dtype.
struct FloatLiteral {
  enum Kind { kNumber, kInf, kNan, kNanBits } kind = kNumber;
  bool negative = false;
  std::string text;  // kNumber: for strtof / strtod
  uint64_t bits = 0;  // kNanBits
  Token token;
};

// Values of the graph being parsed, by name.
struct GraphScope {
  Graph* graph;
  absl::flat_hash_map<std::string, ValueId> ids;
  std::vector<bool> defined;
  std::vector<Token> first_mention;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, const ParseOptions& options)
      : tokens_(std::move(tokens)), options_(options) {}

  absl::StatusOr<Graph> ParseTop() {
    if (!IsIdent(Peek(), "graph")) return Expected("'graph'");
    Next();
    KILN_ASSIGN_OR_RETURN(Graph g, ParseGraphAfterKeyword(std::nullopt));
    if (Peek().kind != Tok::kEof) return Expected("end of input");
    return g;
  }

 private:
  // ---- Token helpers.
  const Token& Peek(size_t k = 0) const {
    return tokens_[std::min(pos_ + k, tokens_.size() - 1)];
  }
  const Token& Next() {
    const Token& t = Peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  static bool IsPunct(const Token& t, char c) {
    return t.kind == Tok::kPunct && t.text[0] == c;
  }
  static bool IsIdent(const Token& t, absl::string_view s) {
    return t.kind == Tok::kIdent && t.text == s;
  }
  bool TryPunct(char c) {
    if (!IsPunct(Peek(), c)) return false;
    Next();
    return true;
  }
  // A token as an error quotes it: long ones cut after 40 bytes.
  static std::string Describe(const Token& t) {
    constexpr size_t kMax = 40;
    const absl::string_view text = absl::string_view(t.text).substr(0, kMax);
    const char* more = t.text.size() > kMax ? "..." : "";
    switch (t.kind) {
      case Tok::kEof: return "end of input";
      case Tok::kValue: return absl::StrCat(ValueNameText(text), more);
      case Tok::kString: return absl::StrCat(Quote(text), more);
      default: return absl::StrCat("'", EscapeForMessage(text), more, "'");
    }
  }
  static absl::Status ErrorAt(const Token& t, absl::string_view msg) {
    return LexError(t.line, t.col, msg);
  }
  absl::Status Expected(absl::string_view what) const {
    return ErrorAt(Peek(),
                   absl::StrCat("expected ", what, ", got ", Describe(Peek())));
  }
  absl::Status ExpectPunct(char c, absl::string_view context) {
    if (TryPunct(c)) return absl::OkStatus();
    return Expected(absl::StrCat("'", std::string(1, c), "' ", context));
  }
  // An identifier or a quoted string.
  absl::StatusOr<std::string> ParseName(absl::string_view what) {
    if (Peek().kind != Tok::kIdent && Peek().kind != Tok::kString) {
      return Expected(what);
    }
    return Next().text;
  }

  // ---- Values.
  ValueId Mention(GraphScope& s, const Token& t) {
    auto it = s.ids.find(t.text);
    if (it != s.ids.end()) return it->second;
    const ValueId id = s.graph->AddUnshapedValue(t.text, DType::kInvalid);
    s.ids.emplace(t.text, id);
    s.defined.push_back(false);
    s.first_mention.push_back(t);
    return id;
  }
  absl::StatusOr<ValueId> Define(GraphScope& s, const Token& t) {
    const ValueId id = Mention(s, t);
    if (s.defined[id]) {
      return ErrorAt(t, absl::StrCat("value ", ValueNameText(t.text),
                                     " is defined twice (first at ",
                                     Where(s.first_mention[id].line,
                                           s.first_mention[id].col),
                                     ")"));
    }
    s.defined[id] = true;
    s.first_mention[id] = t;
    return id;
  }
  static void SetType(GraphScope& s, ValueId id, const ParsedType& type) {
    Value& v = s.graph->mutable_value(id);
    v.dtype = type.dtype;
    v.shape = type.shape;
    v.shape_known = type.shape_known;
  }
  absl::StatusOr<ValueId> ParseDefinedValue(GraphScope& s,
                                            absl::string_view what) {
    if (Peek().kind != Tok::kValue) return Expected(what);
    return Define(s, Next());
  }

  // ---- Numbers.
  absl::StatusOr<int64_t> ParseInt(int64_t lo, int64_t hi,
                                   absl::string_view what) {
    const Token& t = Peek();
    if (t.kind != Tok::kInt || absl::StartsWith(t.text, "0x")) {
      return Expected(what);
    }
    int64_t v;
    if (!absl::SimpleAtoi(t.text, &v) || v < lo || v > hi) {
      return ErrorAt(t, absl::StrCat("integer ", t.text, " is out of range [",
                                     lo, ", ", hi, "] for ", what));
    }
    Next();
    return v;
  }

  absl::StatusOr<FloatLiteral> ParseFloatLiteral() {
    FloatLiteral lit;
    lit.token = Peek();
    const Token& t = Peek();
    if ((t.kind == Tok::kInt && !absl::StartsWith(t.text, "0x")) ||
        (t.kind == Tok::kFloat && t.text.find_first_of("in") ==
                                      std::string::npos)) {
      lit.text = t.text;
      Next();
      return lit;
    }
    std::string word;
    if (t.kind == Tok::kFloat) {
      lit.negative = t.text[0] == '-';
      word = t.text.substr(1);
    } else if (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan")) {
      word = t.text;
    } else {
      return Expected("a number");
    }
    Next();
    if (word == "inf") {
      lit.kind = FloatLiteral::kInf;
      return lit;
    }
    lit.kind = FloatLiteral::kNan;
    if (!IsPunct(Peek(), '(')) return lit;
    Next();
    const Token& bits = Peek();
    if (bits.kind != Tok::kInt || !absl::StartsWith(bits.text, "0x") ||
        bits.text.size() > 18) {
      return Expected("the NaN's bits as hex (nan(0x7fc00001))");
    }
    lit.kind = FloatLiteral::kNanBits;
    for (char c : bits.text.substr(2)) {
      lit.bits = lit.bits * 16 +
                 (IsDigit(c) ? c - '0' : ((c | 0x20) - 'a' + 10));
    }
    Next();
    KILN_RETURN_IF_ERROR(ExpectPunct(')', "after the NaN's bits"));
    if (lit.negative) {
      return ErrorAt(lit.token, "nan(0x...) carries its sign in its bits");
    }
    return lit;
  }

  absl::Status OutOfRange(const FloatLiteral& lit, DType dtype) {
    return ErrorAt(lit.token, absl::StrCat("'", lit.text, "' is out of range for ",
                                           DTypeName(dtype)));
  }
  absl::Status BadNan(const FloatLiteral& lit, DType dtype) {
    return ErrorAt(lit.token, absl::StrCat("nan(0x", absl::Hex(lit.bits),
                                           ") is not a ", DTypeName(dtype),
                                           " NaN bit pattern"));
  }

  absl::StatusOr<float> ToF32(const FloatLiteral& lit) {
    uint32_t bits = 0;
    switch (lit.kind) {
      case FloatLiteral::kNumber: {
        const float f = ReadF32(lit.text.c_str());
        if (std::isinf(f)) return OutOfRange(lit, DType::kF32);
        return f;
      }
      case FloatLiteral::kInf:
        return lit.negative ? -HUGE_VALF : HUGE_VALF;
      case FloatLiteral::kNan:
        bits = lit.negative ? 0xffc00000u : 0x7fc00000u;
        break;
      case FloatLiteral::kNanBits:
        if (lit.bits > 0xffffffffu || (lit.bits & 0x7f800000u) != 0x7f800000u ||
            (lit.bits & 0x7fffffu) == 0) {
          return BadNan(lit, DType::kF32);
        }
        bits = static_cast<uint32_t>(lit.bits);
        break;
    }
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }

  absl::StatusOr<double> ToF64(const FloatLiteral& lit) {
    uint64_t bits = 0;
    switch (lit.kind) {
      case FloatLiteral::kNumber: {
        const double d = ReadF64(lit.text.c_str());
        if (std::isinf(d)) return OutOfRange(lit, DType::kF64);
        return d;
      }
      case FloatLiteral::kInf:
        return lit.negative ? -HUGE_VAL : HUGE_VAL;
      case FloatLiteral::kNan:
        bits = lit.negative ? 0xfff8000000000000ull : 0x7ff8000000000000ull;
        break;
      case FloatLiteral::kNanBits:
        if ((lit.bits & 0x7ff0000000000000ull) != 0x7ff0000000000000ull ||
            (lit.bits & 0xfffffffffffffull) == 0) {
          return BadNan(lit, DType::kF64);
        }
        bits = lit.bits;
        break;
    }
    double d;
    std::memcpy(&d, &bits, sizeof(d));
    return d;
  }

  absl::StatusOr<Float16> ToF16(const FloatLiteral& lit) {
    switch (lit.kind) {
      case FloatLiteral::kNumber: {
        const Float16 h = FloatToHalf(ReadF32(lit.text.c_str()));
        if ((h.bits & 0x7fffu) == 0x7c00u) return OutOfRange(lit, DType::kF16);
        return h;
      }
      case FloatLiteral::kInf:
        return Float16{static_cast<uint16_t>(lit.negative ? 0xfc00u : 0x7c00u)};
      case FloatLiteral::kNan:
        return Float16{static_cast<uint16_t>(lit.negative ? 0xfe00u : 0x7e00u)};
      case FloatLiteral::kNanBits:
        if (lit.bits > 0xffffu || (lit.bits & 0x7c00u) != 0x7c00u ||
            (lit.bits & 0x3ffu) == 0) {
          return BadNan(lit, DType::kF16);
        }
        return Float16{static_cast<uint16_t>(lit.bits)};
    }
    return Float16{};
  }

  absl::StatusOr<BFloat16> ToBF16(const FloatLiteral& lit) {
    switch (lit.kind) {
      case FloatLiteral::kNumber: {
        const BFloat16 b = FloatToBFloat16(ReadF32(lit.text.c_str()));
        if ((b.bits & 0x7fffu) == 0x7f80u) return OutOfRange(lit, DType::kBF16);
        return b;
      }
      case FloatLiteral::kInf:
        return BFloat16{static_cast<uint16_t>(lit.negative ? 0xff80u : 0x7f80u)};
      case FloatLiteral::kNan:
        return BFloat16{static_cast<uint16_t>(lit.negative ? 0xffc0u : 0x7fc0u)};
      case FloatLiteral::kNanBits:
        if (lit.bits > 0xffffu || (lit.bits & 0x7f80u) != 0x7f80u ||
            (lit.bits & 0x7fu) == 0) {
          return BadNan(lit, DType::kBF16);
        }
        return BFloat16{static_cast<uint16_t>(lit.bits)};
    }
    return BFloat16{};
  }

  absl::StatusOr<float> ParseF32() {
    KILN_ASSIGN_OR_RETURN(FloatLiteral lit, ParseFloatLiteral());
    return ToF32(lit);
  }

  // One element of a tensor literal, stored at index i.
  absl::Status ParseElement(Tensor& t, int64_t i) {
    void* p = t.raw_data();
    switch (t.dtype()) {
      case DType::kF32: {
        KILN_ASSIGN_OR_RETURN(static_cast<float*>(p)[i], ParseF32());
        return absl::OkStatus();
      }
      case DType::kF64: {
        KILN_ASSIGN_OR_RETURN(FloatLiteral lit, ParseFloatLiteral());
        KILN_ASSIGN_OR_RETURN(static_cast<double*>(p)[i], ToF64(lit));
        return absl::OkStatus();
      }
      case DType::kF16: {
        KILN_ASSIGN_OR_RETURN(FloatLiteral lit, ParseFloatLiteral());
        KILN_ASSIGN_OR_RETURN(static_cast<Float16*>(p)[i], ToF16(lit));
        return absl::OkStatus();
      }
      case DType::kBF16: {
        KILN_ASSIGN_OR_RETURN(FloatLiteral lit, ParseFloatLiteral());
        KILN_ASSIGN_OR_RETURN(static_cast<BFloat16*>(p)[i], ToBF16(lit));
        return absl::OkStatus();
      }
      case DType::kI64: {
        KILN_ASSIGN_OR_RETURN(
            static_cast<int64_t*>(p)[i],
            ParseInt(INT64_MIN, INT64_MAX, "an i64 element"));
        return absl::OkStatus();
      }
      case DType::kI32: {
        KILN_ASSIGN_OR_RETURN(int64_t v,
                              ParseInt(INT32_MIN, INT32_MAX, "an i32 element"));
        static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
        return absl::OkStatus();
      }
      case DType::kI8: {
        KILN_ASSIGN_OR_RETURN(int64_t v, ParseInt(-128, 127, "an i8 element"));
        static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
        return absl::OkStatus();
      }
      case DType::kU8: {
        KILN_ASSIGN_OR_RETURN(int64_t v, ParseInt(0, 255, "a u8 element"));
        static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
        return absl::OkStatus();
      }
      case DType::kBool: {
        if (IsIdent(Peek(), "true") || IsIdent(Peek(), "false")) {
          static_cast<bool*>(p)[i] = Next().text == "true";
          return absl::OkStatus();
        }
        return Expected("true or false");
      }
      case DType::kInvalid: break;
    }
    return Expected("a known dtype");
  }

  // ---- Types and tensors.
  absl::StatusOr<DType> ParseDType() {
    if (TryPunct('?')) return DType::kInvalid;
    if (Peek().kind == Tok::kIdent) {
      if (std::optional<DType> d = DTypeFromName(Peek().text)) {
        Next();
        return *d;
      }
    }
    return Expected("a dtype (f32, f16, bf16, f64, i64, i32, i8, u8, bool or ?)");
  }

  absl::StatusOr<ParsedType> ParseType() {
    ParsedType type;
    KILN_ASSIGN_OR_RETURN(type.dtype, ParseDType());
    KILN_RETURN_IF_ERROR(ExpectPunct('[', "to start the shape"));
    if (TryPunct('*')) {
      KILN_RETURN_IF_ERROR(ExpectPunct(']', "after '*' (unknown rank)"));
      return type;
    }
    type.shape_known = true;
    if (TryPunct(']')) return type;
    while (true) {
      if (TryPunct('?')) {
        type.shape.push_back(kDynamicDim);
      } else {
        KILN_ASSIGN_OR_RETURN(
            int64_t d, ParseInt(INT64_MIN, INT64_MAX, "a dimension or '?'"));
        type.shape.push_back(d);
      }
      if (TryPunct(']')) return type;
      KILN_RETURN_IF_ERROR(ExpectPunct(',', "or ']' in the shape"));
    }
  }

  absl::StatusOr<Tensor> ParseTensor() {
    const Token start = Peek();
    KILN_ASSIGN_OR_RETURN(ParsedType type, ParseType());
    const std::string type_text =
        TypeText(type.dtype, type.shape, type.shape_known);
    if (type.dtype == DType::kInvalid) {
      return ErrorAt(start, "a constant needs a known dtype");
    }
    if (!type.shape_known) {
      return ErrorAt(start, "a constant needs a known shape, not [*]");
    }
    const int64_t n = NumElements(type.shape);
    if (n < 0) {
      return ErrorAt(start, absl::StrCat("constant shape ", type_text,
                                         " must be static, non-negative and "
                                         "not overflow"));
    }
    const int64_t size = static_cast<int64_t>(DTypeSize(type.dtype));
    if (n > options_.max_constant_bytes / size) {
      return ErrorAt(start,
                     absl::StrCat("constant ", type_text, " is over the ",
                                  options_.max_constant_bytes,
                                  "-byte limit (ParseOptions::"
                                  "max_constant_bytes)"));
    }
    Tensor t(type.dtype, type.shape);
    if (IsPunct(Peek(), '[')) {
      Next();
      int64_t i = 0;
      if (!TryPunct(']')) {
        while (true) {
          if (i >= n) {
            return ErrorAt(Peek(), absl::StrCat("too many elements for ",
                                                type_text, " (it has ", n,
                                                ")"));
          }
          KILN_RETURN_IF_ERROR(ParseElement(t, i++));
          if (TryPunct(']')) break;
          KILN_RETURN_IF_ERROR(ExpectPunct(',', "or ']' between elements"));
        }
      }
      if (i != n) {
        return ErrorAt(start, absl::StrCat(type_text, " has ", n,
                                           " elements, the literal ", i));
      }
      return t;
    }
    if (IsIdent(Peek(), "splat")) {
      Next();
      KILN_RETURN_IF_ERROR(ExpectPunct('(', "after 'splat'"));
      Tensor one(type.dtype, {});
      KILN_RETURN_IF_ERROR(ParseElement(one, 0));
      KILN_RETURN_IF_ERROR(ExpectPunct(')', "after the splat element"));
      auto* dst = static_cast<uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(dst + i * size, one.raw_data(), size);
      }
      return t;
    }
    if (IsPunct(Peek(), '<')) {
      Next();
      if (!IsIdent(Peek(), "elided")) return Expected("'elided' after '<'");
      Next();
      KILN_RETURN_IF_ERROR(ExpectPunct('>', "after '<elided'"));
      if (!options_.allow_elided_constants) {
        return ErrorAt(start,
                       absl::StrCat("the data of constant ", type_text,
                                    " is elided; print with PrintOptions::"
                                    "Full(), or set ParseOptions::"
                                    "allow_elided_constants to read zeros"));
      }
      return t;
    }
    const Token elem = Peek();
    if (elem.kind != Tok::kInt && elem.kind != Tok::kFloat &&
        elem.kind != Tok::kIdent) {
      return Expected("constant data ([...], splat(x), <elided> or a scalar)");
    }
    if (n != 1) {
      return ErrorAt(elem, absl::StrCat("a bare element needs a one-element "
                                        "type, ", type_text, " has ", n,
                                        "; write [...] or splat(x)"));
    }
    KILN_RETURN_IF_ERROR(ParseElement(t, 0));
    return t;
  }

  // ---- Attributes.
  enum class ListKind { kInts, kFloats, kStrings };

  // Decides the element type of an untyped list by looking ahead to its ']'.
  absl::StatusOr<ListKind> ClassifyList() {
    bool any_float = false, any_string = false, any_number = false;
    size_t k = 1;
    for (;; ++k) {
      const Token& t = Peek(k);
      if (t.kind == Tok::kEof || IsPunct(t, ']')) break;
      if (t.kind == Tok::kString) any_string = true;
      if (t.kind == Tok::kInt) any_number = true;
      if (t.kind == Tok::kFloat || IsIdent(t, "inf") || IsIdent(t, "nan")) {
        any_float = true;
      }
    }
    if (k == 1) {
      return ErrorAt(Peek(), "an empty list needs its type: write ints[], "
                             "floats[] or strings[]");
    }
    if (any_string && (any_number || any_float)) {
      return ErrorAt(Peek(), "a list mixes strings and numbers");
    }
    if (any_string) return ListKind::kStrings;
    return any_float ? ListKind::kFloats : ListKind::kInts;
  }

  absl::StatusOr<AttrValue> ParseList(ListKind kind) {
    KILN_RETURN_IF_ERROR(ExpectPunct('[', "to start the list"));
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::vector<std::string> strings;
    if (!TryPunct(']')) {
      while (true) {
        switch (kind) {
          case ListKind::kInts: {
            KILN_ASSIGN_OR_RETURN(
                int64_t v, ParseInt(INT64_MIN, INT64_MAX, "an integer"));
            ints.push_back(v);
            break;
          }
          case ListKind::kFloats: {
            KILN_ASSIGN_OR_RETURN(float v, ParseF32());
            floats.push_back(v);
            break;
          }
          case ListKind::kStrings:
            if (Peek().kind != Tok::kString) return Expected("a string");
            strings.push_back(Next().text);
            break;
        }
        if (TryPunct(']')) break;
        KILN_RETURN_IF_ERROR(ExpectPunct(',', "or ']' in the list"));
      }
    }
    switch (kind) {
      case ListKind::kInts: return AttrValue(std::move(ints));
      case ListKind::kFloats: return AttrValue(std::move(floats));
      case ListKind::kStrings: break;
    }
    return AttrValue(std::move(strings));
  }

  absl::StatusOr<AttrValue> ParseAttrValue(int64_t opset) {
    const Token& t = Peek();
    if (t.kind == Tok::kInt && !absl::StartsWith(t.text, "0x")) {
      KILN_ASSIGN_OR_RETURN(int64_t v,
                            ParseInt(INT64_MIN, INT64_MAX, "an integer"));
      return AttrValue(v);
    }
    if (t.kind == Tok::kFloat || IsIdent(t, "inf") || IsIdent(t, "nan")) {
      KILN_ASSIGN_OR_RETURN(float v, ParseF32());
      return AttrValue(v);
    }
    if (t.kind == Tok::kString) return AttrValue(Next().text);
    if (IsPunct(t, '[')) {
      KILN_ASSIGN_OR_RETURN(ListKind kind, ClassifyList());
      return ParseList(kind);
    }
    if (IsPunct(Peek(1), '[')) {
      std::optional<ListKind> kind;
      if (IsIdent(t, "ints")) kind = ListKind::kInts;
      if (IsIdent(t, "floats")) kind = ListKind::kFloats;
      if (IsIdent(t, "strings")) kind = ListKind::kStrings;
      if (kind.has_value()) {
        Next();
        return ParseList(*kind);
      }
    }
    if (IsIdent(t, "tensor")) {
      Next();
      KILN_ASSIGN_OR_RETURN(Tensor tensor, ParseTensor());
      return AttrValue(std::move(tensor));
    }
    if (IsIdent(t, "graph")) {
      Next();
      if (TryPunct('<')) {
        if (!IsIdent(Peek(), "null")) return Expected("'null' after 'graph <'");
        Next();
        KILN_RETURN_IF_ERROR(ExpectPunct('>', "after 'graph <null'"));
        return AttrValue(std::shared_ptr<const Graph>());
      }
      KILN_ASSIGN_OR_RETURN(Graph sub, ParseGraphAfterKeyword(opset));
      return AttrValue(std::make_shared<const Graph>(std::move(sub)));
    }
    return Expected(
        "an attribute value (int, float, \"string\", [list], ints[], "
        "floats[], strings[], tensor ..., graph ...)");
  }

  absl::StatusOr<AttributeMap> ParseAttrs(int64_t opset) {
    AttributeMap attrs;
    while (!TryPunct('}')) {
      const Token key_token = Peek();
      KILN_ASSIGN_OR_RETURN(std::string key, ParseName("an attribute name"));
      KILN_RETURN_IF_ERROR(ExpectPunct('=', "after the attribute name"));
      KILN_ASSIGN_OR_RETURN(AttrValue value, ParseAttrValue(opset));
      if (!attrs.emplace(key, std::move(value)).second) {
        return ErrorAt(key_token,
                       absl::StrCat("attribute ", Quote(key), " given twice"));
      }
      if (TryPunct('}')) break;
      KILN_RETURN_IF_ERROR(ExpectPunct(',', "or '}' between attributes"));
    }
    return attrs;
  }

  // ---- Statements.
  absl::Status ParseOp(Node& node) {
    const Token& first = Peek();
    if (first.kind != Tok::kIdent && first.kind != Tok::kString) {
      return Expected("an op name (Relu, com.microsoft.Foo, \"any op\")");
    }
    const bool quoted = first.kind == Tok::kString;
    std::string name = Next().text;
    if (TryPunct('.')) {
      node.domain = std::move(name);
      KILN_ASSIGN_OR_RETURN(node.op, ParseName("an op name after '.'"));
      return absl::OkStatus();
    }
    const size_t dot = quoted ? std::string::npos : name.rfind('.');
    if (dot == std::string::npos) {
      node.op = std::move(name);
    } else {
      node.domain = name.substr(0, dot);
      node.op = name.substr(dot + 1);
    }
    return absl::OkStatus();
  }

  absl::Status ParseNode(GraphScope& s, std::vector<ValueId> outputs) {
    Node node;
    node.outputs = std::move(outputs);
    KILN_RETURN_IF_ERROR(ParseOp(node));
    KILN_RETURN_IF_ERROR(ExpectPunct('(', "after the op name"));
    if (!TryPunct(')')) {
      while (true) {
        if (IsIdent(Peek(), "_")) {
          Next();
          node.inputs.push_back(kNoValue);
        } else if (Peek().kind == Tok::kValue) {
          node.inputs.push_back(Mention(s, Next()));
        } else {
          return Expected("an input (%value or _)");
        }
        if (TryPunct(')')) break;
        KILN_RETURN_IF_ERROR(ExpectPunct(',', "or ')' between inputs"));
      }
    }
    if (TryPunct('{')) {
      KILN_ASSIGN_OR_RETURN(node.attrs, ParseAttrs(s.graph->opset()));
    }
    if (IsIdent(Peek(), "name") && IsPunct(Peek(1), '=')) {
      Next();
      Next();
      if (Peek().kind != Tok::kString) return Expected("the node name string");
      node.name = Next().text;
    }
    if (IsPunct(Peek(), ':')) {
      const Token colon = Next();
      std::vector<ValueId> present;
      for (ValueId id : node.outputs) {
        if (id != kNoValue) present.push_back(id);
      }
      size_t i = 0;
      do {
        KILN_ASSIGN_OR_RETURN(ParsedType type, ParseType());
        if (i >= present.size()) {
          return ErrorAt(colon, absl::StrCat("more types than the node's ",
                                             present.size(), " outputs"));
        }
        SetType(s, present[i++], type);
      } while (TryPunct(','));
      if (i != present.size()) {
        return ErrorAt(colon, absl::StrCat(i, " types for ", present.size(),
                                           " outputs ('_' outputs take none)"));
      }
    }
    s.graph->mutable_nodes().push_back(std::move(node));
    return absl::OkStatus();
  }

  absl::Status ParseStatement(GraphScope& s) {
    const Token start = Peek();
    if (start.kind != Tok::kValue && !IsIdent(start, "_")) {
      if (start.kind == Tok::kIdent || start.kind == Tok::kString) {
        return ParseNode(s, {});
      }
      return Expected("a statement (%v = ..., an op, or '}')");
    }
    std::vector<ValueId> outputs;
    while (true) {
      if (IsIdent(Peek(), "_")) {
        Next();
        outputs.push_back(kNoValue);
      } else if (Peek().kind == Tok::kValue) {
        KILN_ASSIGN_OR_RETURN(ValueId id, Define(s, Next()));
        outputs.push_back(id);
      } else {
        return Expected("an output (%value or _)");
      }
      if (!TryPunct(',')) break;
    }
    KILN_RETURN_IF_ERROR(ExpectPunct('=', "after the outputs"));
    if (IsIdent(Peek(), "constant") && !IsPunct(Peek(1), '(') &&
        !IsPunct(Peek(1), '.')) {
      if (outputs.size() != 1 || outputs[0] == kNoValue) {
        return ErrorAt(start, "a constant defines exactly one %value");
      }
      Next();
      if (IsPunct(Peek(), '<') && IsIdent(Peek(1), "null")) {
        return ErrorAt(Peek(), "a constant needs data, not <null>");
      }
      KILN_ASSIGN_OR_RETURN(Tensor t, ParseTensor());
      ParsedType type{t.dtype(), t.shape(), true};
      if (TryPunct(':')) {
        KILN_ASSIGN_OR_RETURN(type, ParseType());
      }
      SetType(s, outputs[0], type);
      s.graph->SetConstant(outputs[0], std::move(t));
      return absl::OkStatus();
    }
    return ParseNode(s, std::move(outputs));
  }

  // After the 'graph' keyword.
  absl::StatusOr<Graph> ParseGraphAfterKeyword(
      std::optional<int64_t> parent_opset) {
    if (++depth_ > kMaxGraphNesting) {
      return ErrorAt(Peek(), absl::StrCat("graphs nest deeper than ",
                                          kMaxGraphNesting));
    }
    KILN_ASSIGN_OR_RETURN(std::string name, ParseName("a graph name"));
    Graph g(std::move(name));
    if (parent_opset.has_value()) g.set_opset(*parent_opset);
    GraphScope s{&g, {}, {}, {}};

    KILN_RETURN_IF_ERROR(ExpectPunct('(', "to start the graph inputs"));
    if (!TryPunct(')')) {
      while (true) {
        KILN_ASSIGN_OR_RETURN(ValueId id,
                              ParseDefinedValue(s, "a graph input %value"));
        KILN_RETURN_IF_ERROR(ExpectPunct(':', "before the input's type"));
        KILN_ASSIGN_OR_RETURN(ParsedType type, ParseType());
        SetType(s, id, type);
        g.AddInput(id);
        if (TryPunct(')')) break;
        KILN_RETURN_IF_ERROR(ExpectPunct(',', "or ')' between inputs"));
      }
    }
    if (IsIdent(Peek(), "captures")) {
      Next();
      KILN_RETURN_IF_ERROR(ExpectPunct('(', "after 'captures'"));
      while (true) {
        KILN_ASSIGN_OR_RETURN(ValueId id,
                              ParseDefinedValue(s, "a captured %value"));
        KILN_RETURN_IF_ERROR(ExpectPunct(':', "before the capture's type"));
        KILN_ASSIGN_OR_RETURN(ParsedType type, ParseType());
        SetType(s, id, type);
        KILN_RETURN_IF_ERROR(ExpectPunct('=', "before the enclosing value"));
        if (Peek().kind != Tok::kValue) {
          return Expected("the enclosing graph's %value");
        }
        g.AddCapture(id, Next().text);
        if (TryPunct(')')) break;
        KILN_RETURN_IF_ERROR(ExpectPunct(',', "or ')' between captures"));
      }
    }
    if (Peek().kind != Tok::kArrow) return Expected("'->' before the outputs");
    Next();
    KILN_RETURN_IF_ERROR(ExpectPunct('(', "to start the graph outputs"));
    std::vector<Token> outputs;
    if (!TryPunct(')')) {
      while (true) {
        if (Peek().kind != Tok::kValue && !IsIdent(Peek(), "_")) {
          return Expected("a graph output (%value or _)");
        }
        outputs.push_back(Next());
        if (TryPunct(')')) break;
        KILN_RETURN_IF_ERROR(ExpectPunct(',', "or ')' between outputs"));
      }
    }
    if (IsIdent(Peek(), "opset")) {
      Next();
      KILN_ASSIGN_OR_RETURN(int64_t opset,
                            ParseInt(1, INT64_MAX, "the opset version"));
      g.set_opset(opset);
    }
    KILN_RETURN_IF_ERROR(ExpectPunct('{', "to start the graph body"));
    while (!TryPunct('}')) {
      if (Peek().kind == Tok::kEof) return Expected("'}' to end the graph");
      KILN_RETURN_IF_ERROR(ParseStatement(s));
    }

    for (const Token& t : outputs) {
      if (t.kind != Tok::kValue) {
        g.AddOutput(kNoValue);
        continue;
      }
      auto it = s.ids.find(t.text);
      if (it == s.ids.end() || !s.defined[it->second]) {
        return ErrorAt(t, absl::StrCat("graph output ", ValueNameText(t.text),
                                       " is never defined"));
      }
      g.AddOutput(it->second);
    }
    for (ValueId id = 0; id < g.num_values(); ++id) {
      if (!s.defined[id]) {
        return ErrorAt(s.first_mention[id],
                       absl::StrCat("value ", ValueNameText(g.value(id).name),
                                    " is used but never defined"));
      }
    }
    --depth_;
    return g;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const ParseOptions& options_;
  int depth_ = 0;
};

}  // namespace

std::string PrintGraph(const Graph& graph, const PrintOptions& options) {
  std::string out;
  Printer(options).PrintGraph(graph, 0, std::nullopt, &out);
  out += "\n";
  return out;
}

std::string PrintNode(const Graph& graph, const Node& node,
                      const PrintOptions& options) {
  std::string out;
  Printer(options).PrintNode(graph, NameTable(graph), node, 0, &out);
  return out;
}

std::string PrintValueType(const Value& value) {
  return TypeText(value.dtype, value.shape, value.shape_known);
}

std::string PrintTensor(const Tensor& tensor, const PrintOptions& options) {
  return Printer(options).FormatTensor(tensor);
}

std::string PrintValueName(absl::string_view name) {
  return ValueNameText(name);
}

absl::StatusOr<Graph> ParseGraph(absl::string_view text,
                                 const ParseOptions& options) {
  absl::StatusOr<std::vector<Token>> tokens = Lexer(text).Run();
  absl::StatusOr<Graph> graph =
      tokens.ok() ? Parser(*std::move(tokens), options).ParseTop() : tokens.status();
  // Names from the text in an error: escaped, each line capped.
  if (!graph.ok()) return SanitizedStatus(graph.status(), /*keep_line_breaks=*/false);
  return graph;
}

}  // namespace kiln::ir
