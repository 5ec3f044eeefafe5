// The loop IR text printer and parser (grammar in text.h).
#include "ir/loop/text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/loop/text_lexer.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::ir::loop {
namespace {

using text_internal::Cursor;
using text_internal::ErrorAt;
using text_internal::IsIdentifier;
using text_internal::Quote;
using text_internal::Tok;
using text_internal::Token;

// ---------------------------------------------------------------------------
// Printer.

// Shortest "%.*g" that reads back as the same double, always float-looking.
std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string out = buf;
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string BufferRef(const LoopProgram& p, int32_t b) {
  if (b < 0 || b >= static_cast<int32_t>(p.buffers.size())) {
    return absl::StrCat("%<invalid buffer ", b, ">");
  }
  return absl::StrCat("%", p.buffers[b].name);
}

std::string IntList(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

std::string AttrText(const ExternAttr& attr) {
  if (const auto* i = std::get_if<int64_t>(&attr)) return absl::StrCat(*i);
  if (const auto* f = std::get_if<double>(&attr)) return FormatDouble(*f);
  if (const auto* s = std::get_if<std::string>(&attr)) return Quote(*s);
  if (const auto* is = std::get_if<std::vector<int64_t>>(&attr)) {
    return IntList(*is);
  }
  const auto& fs = std::get<std::vector<double>>(attr);
  std::vector<std::string> parts;
  for (double f : fs) parts.push_back(FormatDouble(f));
  return absl::StrCat("floats[", absl::StrJoin(parts, ", "), "]");
}

void PrintOpsAndVec(const Kernel& k, std::string* out) {
  if (!k.ops.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& s : k.ops) quoted.push_back(Quote(s));
    absl::StrAppend(out, " ops=[", absl::StrJoin(quoted, ", "), "]");
  }
  if (k.vec.kind != VecStatus::Kind::kUnchecked || !k.vec.reason.empty()) {
    absl::StrAppend(out, " vec=", VecKindName(k.vec.kind));
    if (!k.vec.reason.empty()) absl::StrAppend(out, "(", Quote(k.vec.reason), ")");
  }
}

void PrintRanges(const std::vector<int64_t>& ranges, char prefix,
                 std::string* out) {
  out->append("(");
  for (size_t v = 0; v < ranges.size(); ++v) {
    if (v > 0) out->append(", ");
    absl::StrAppend(out, std::string(1, prefix), v, ": ", ranges[v]);
  }
  out->append(")");
}

void PrintLoopKernel(const LoopProgram& p, const Kernel& k, std::string* out) {
  absl::StrAppend(out, "kernel ", k.name);
  if (!k.description.empty()) absl::StrAppend(out, " ", Quote(k.description));
  out->append(" over ");
  PrintRanges(k.ranges, 'i', out);
  if (!k.reduction_ranges.empty()) {
    out->append(" reduce ");
    PrintRanges(k.reduction_ranges, 'r', out);
  }
  PrintOpsAndVec(k, out);
  out->append(" {\n");
  const VarNamer namer = [&k](int v) { return k.VarName(v); };
  std::vector<int> number(k.body.size(), -1);
  int next = 0;
  for (size_t i = 0; i < k.body.size(); ++i) {
    if (k.body[i].has_result()) number[i] = next++;
  }
  auto value = [&](int32_t a) -> std::string {
    if (a < 0 || a >= static_cast<int32_t>(k.body.size()) || number[a] < 0) {
      return absl::StrCat("%<invalid ", a, ">");
    }
    return absl::StrCat("%", number[a]);
  };
  for (size_t i = 0; i < k.body.size(); ++i) {
    const Op& op = k.body[i];
    out->append("  ");
    if (op.has_result()) absl::StrAppend(out, "%", number[i], " = ");
    absl::StrAppend(out, OpCodeName(op.code));
    switch (op.code) {
      case OpCode::kLoad:
        absl::StrAppend(out, " ", BufferRef(p, op.buffer), "[",
                        ToString(op.index, namer), "]");
        break;
      case OpCode::kStore:
        absl::StrAppend(out, " ", BufferRef(p, op.buffer), "[",
                        ToString(op.index, namer), "], ",
                        op.args.empty() ? "%<missing>" : value(op.args[0]));
        break;
      case OpCode::kLoadIndirect:
        absl::StrAppend(out, " ", BufferRef(p, op.buffer), "[",
                        ToString(op.index, namer), "], ",
                        op.args.empty() ? "%<missing>" : value(op.args[0]),
                        ", stride ", op.stride, ", extent ", op.extent);
        break;
      case OpCode::kStoreIndirect:
        absl::StrAppend(out, " ", BufferRef(p, op.buffer), "[",
                        ToString(op.index, namer), "], ",
                        op.args.size() < 2 ? "%<missing>" : value(op.args[1]),
                        ", stride ", op.stride, ", extent ", op.extent,
                        ", combine ", StoreCombineName(op.combine), ", ",
                        op.args.empty() ? "%<missing>" : value(op.args[0]));
        break;
      case OpCode::kConstant:
        absl::StrAppend(out, " ",
                        IsFloat(op.dtype) ? FormatDouble(op.fvalue)
                                          : absl::StrCat(op.ivalue),
                        " : ", DTypeName(op.dtype));
        break;
      case OpCode::kIndex:
        absl::StrAppend(out, " [", ToString(op.index, namer), "] : ",
                        DTypeName(op.dtype));
        break;
      case OpCode::kCast:
        absl::StrAppend(out, " ",
                        op.args.empty() ? "%<missing>" : value(op.args[0]),
                        " : ", DTypeName(op.dtype));
        break;
      case OpCode::kReduce:
        absl::StrAppend(out, " ", ReduceKindName(op.reduce), " ",
                        op.args.empty() ? "%<missing>" : value(op.args[0]));
        break;
      default:
        for (size_t a = 0; a < op.args.size(); ++a) {
          absl::StrAppend(out, a == 0 ? " " : ", ", value(op.args[a]));
        }
    }
    out->append("\n");
  }
  out->append("}\n");
}

void PrintExternKernel(const LoopProgram& p, const Kernel& k,
                       std::string* out) {
  absl::StrAppend(out, "extern ", k.name);
  if (!k.description.empty()) absl::StrAppend(out, " ", Quote(k.description));
  absl::StrAppend(out, " call ", Quote(k.call.op), "(");
  for (size_t i = 0; i < k.call.inputs.size(); ++i) {
    absl::StrAppend(out, i == 0 ? "" : ", ", BufferRef(p, k.call.inputs[i]));
  }
  out->append(") -> (");
  for (size_t i = 0; i < k.call.outputs.size(); ++i) {
    absl::StrAppend(out, i == 0 ? "" : ", ", BufferRef(p, k.call.outputs[i]));
  }
  out->append(")");
  if (!k.call.attrs.empty()) {
    out->append(" {");
    bool first = true;
    for (const auto& [key, attr] : k.call.attrs) {
      absl::StrAppend(out, first ? "" : ", ",
                      IsIdentifier(key) ? key : Quote(key), "=",
                      AttrText(attr));
      first = false;
    }
    out->append("}");
  }
  PrintOpsAndVec(k, out);
  out->append("\n");
}

// ---------------------------------------------------------------------------
// Parser.

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : c_(std::move(tokens)) {}

  absl::StatusOr<LoopProgram> Run() {
    while (c_.Peek().kind != Tok::kEof) {
      if (c_.TryIdent("buffer")) {
        KILN_RETURN_IF_ERROR(ParseBuffer());
      } else if (c_.TryIdent("kernel")) {
        KILN_RETURN_IF_ERROR(ParseKernel(Kernel::Kind::kLoop));
      } else if (c_.TryIdent("extern")) {
        KILN_RETURN_IF_ERROR(ParseKernel(Kernel::Kind::kExtern));
      } else {
        return c_.Expected("'buffer', 'kernel' or 'extern'");
      }
    }
    return std::move(program_);
  }

 private:
  absl::StatusOr<int64_t> ParseInt(absl::string_view what) {
    bool negative = c_.TryPunct("-");
    const Token& t = c_.Peek();
    if (t.kind != Tok::kInt) return c_.Expected(what);
    int64_t v;
    if (!absl::SimpleAtoi(absl::StrCat(negative ? "-" : "", t.text), &v)) {
      return ErrorAt(t, absl::StrCat("integer out of range: ", t.text));
    }
    c_.Next();
    return v;
  }

  // INT, FLOAT, inf or nan, with an optional '-'.
  absl::StatusOr<double> ParseFloat() {
    const bool negative = c_.TryPunct("-");
    const Token& t = c_.Peek();
    double v;
    if (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan")) {
      v = t.text == "inf" ? HUGE_VAL : std::nan("");
    } else if (t.kind == Tok::kInt || t.kind == Tok::kFloat) {
      v = std::strtod(t.text.c_str(), nullptr);
    } else {
      return c_.Expected("a number");
    }
    c_.Next();
    return negative ? -v : v;
  }

  absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view what) {
    KILN_RETURN_IF_ERROR(c_.ExpectPunct("[", absl::StrCat("to open ", what)));
    std::vector<int64_t> out;
    if (c_.TryPunct("]")) return out;
    do {
      KILN_ASSIGN_OR_RETURN(int64_t v, ParseInt("an integer"));
      out.push_back(v);
    } while (c_.TryPunct(","));
    KILN_RETURN_IF_ERROR(c_.ExpectPunct("]", absl::StrCat("to close ", what)));
    return out;
  }

  absl::StatusOr<DType> ParseDType() {
    const Token& t = c_.Peek();
    if (t.kind == Tok::kIdent) {
      if (std::optional<DType> d = DTypeFromName(t.text)) {
        c_.Next();
        return *d;
      }
    }
    return c_.Expected("a dtype (f32, f16, bf16, f64, i64, i32, i8, u8, bool)");
  }

  absl::StatusOr<std::string> ParseIdent(absl::string_view what) {
    if (c_.Peek().kind != Tok::kIdent) return c_.Expected(what);
    return c_.Next().text;
  }

  absl::StatusOr<int32_t> ParseBufferRef() {
    const Token& t = c_.Peek();
    if (t.kind != Tok::kValue) return c_.Expected("a buffer (%name)");
    auto it = buffer_ids_.find(t.text);
    if (it == buffer_ids_.end()) {
      return ErrorAt(t, absl::StrCat("unknown buffer '%", t.text, "'"));
    }
    c_.Next();
    return it->second;
  }

  absl::Status ParseBuffer() {
    const Token& name = c_.Peek();
    if (name.kind != Tok::kValue) return c_.Expected("a buffer name (%name)");
    if (!IsIdentifier(name.text)) {
      return ErrorAt(name, absl::StrCat("buffer name '%", name.text,
                                        "' is not an identifier"));
    }
    if (buffer_ids_.contains(name.text)) {
      return ErrorAt(name, absl::StrCat("buffer '%", name.text,
                                        "' is already defined"));
    }
    const Token name_tok = c_.Next();
    Buffer b;
    b.name = name_tok.text;
    KILN_RETURN_IF_ERROR(c_.ExpectPunct(":", "after the buffer name"));
    KILN_ASSIGN_OR_RETURN(b.dtype, ParseDType());
    KILN_ASSIGN_OR_RETURN(b.shape, ParseIntList("the shape"));
    if (c_.TryIdent("strides")) {
      KILN_RETURN_IF_ERROR(c_.ExpectPunct("=", "after 'strides'"));
      KILN_ASSIGN_OR_RETURN(b.strides, ParseIntList("the strides"));
    } else {
      std::optional<std::vector<int64_t>> strides =
          CheckedRowMajorStrides(b.shape);
      if (!strides.has_value()) {
        return ErrorAt(name_tok, absl::StrCat("buffer '%", b.name,
                                              "' has a negative or too large "
                                              "shape"));
      }
      b.strides = std::move(*strides);
    }
    const Token& kind_tok = c_.Peek();
    std::optional<BufferKind> kind;
    if (kind_tok.kind == Tok::kIdent) kind = BufferKindFromName(kind_tok.text);
    if (!kind.has_value()) {
      return c_.Expected("a buffer kind (input, output, intermediate, constant)");
    }
    c_.Next();
    b.kind = *kind;
    buffer_ids_[b.name] = static_cast<int32_t>(program_.buffers.size());
    program_.buffers.push_back(std::move(b));
    return absl::OkStatus();
  }

  absl::Status ParseRanges(std::vector<int64_t>* extents,
                           absl::flat_hash_map<std::string, int>* vars,
                           int first_var) {
    KILN_RETURN_IF_ERROR(c_.ExpectPunct("(", "to open the loop variables"));
    if (c_.TryPunct(")")) return absl::OkStatus();
    do {
      const Token& t = c_.Peek();
      if (t.kind != Tok::kIdent) return c_.Expected("a loop variable name");
      if (t.text == "min" || t.text == "max") {
        return ErrorAt(t, "'min' and 'max' cannot name loop variables");
      }
      if (!vars->emplace(t.text, first_var + extents->size()).second) {
        return ErrorAt(t, absl::StrCat("loop variable '", t.text,
                                       "' is already defined"));
      }
      c_.Next();
      KILN_RETURN_IF_ERROR(c_.ExpectPunct(":", "after the loop variable"));
      KILN_ASSIGN_OR_RETURN(int64_t extent, ParseInt("the loop extent"));
      extents->push_back(extent);
    } while (c_.TryPunct(","));
    return c_.ExpectPunct(")", "to close the loop variables");
  }

  absl::Status ParseOpsAndVec(Kernel* k) {
    if (c_.TryIdent("ops")) {
      KILN_RETURN_IF_ERROR(c_.ExpectPunct("=", "after 'ops'"));
      KILN_RETURN_IF_ERROR(c_.ExpectPunct("[", "to open the op names"));
      if (!c_.TryPunct("]")) {
        do {
          if (c_.Peek().kind != Tok::kString) {
            return c_.Expected("an op name string");
          }
          k->ops.push_back(c_.Next().text);
        } while (c_.TryPunct(","));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct("]", "to close the op names"));
      }
    }
    if (c_.TryIdent("vec")) {
      KILN_RETURN_IF_ERROR(c_.ExpectPunct("=", "after 'vec'"));
      const Token& t = c_.Peek();
      bool found = false;
      for (VecStatus::Kind kind :
           {VecStatus::Kind::kUnchecked, VecStatus::Kind::kVectorized,
            VecStatus::Kind::kTiled, VecStatus::Kind::kScalar}) {
        if (t.kind == Tok::kIdent && t.text == VecKindName(kind)) {
          k->vec.kind = kind;
          found = true;
        }
      }
      if (!found) {
        return c_.Expected("unchecked, vectorized, tiled or scalar");
      }
      c_.Next();
      if (c_.TryPunct("(")) {
        if (c_.Peek().kind != Tok::kString) return c_.Expected("a reason string");
        k->vec.reason = c_.Next().text;
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(")", "after the reason"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseKernel(Kernel::Kind kind) {
    Kernel k;
    k.kind = kind;
    const Token& name = c_.Peek();
    KILN_ASSIGN_OR_RETURN(k.name, ParseIdent("a kernel name"));
    if (!kernel_names_.insert(k.name).second) {
      return ErrorAt(name, absl::StrCat("kernel '", k.name,
                                        "' is already defined"));
    }
    if (c_.Peek().kind == Tok::kString) k.description = c_.Next().text;
    if (kind == Kernel::Kind::kExtern) {
      KILN_RETURN_IF_ERROR(ParseExternCall(&k));
      KILN_RETURN_IF_ERROR(ParseOpsAndVec(&k));
      program_.kernels.push_back(std::move(k));
      return absl::OkStatus();
    }
    if (!c_.TryIdent("over")) return c_.Expected("'over'");
    absl::flat_hash_map<std::string, int> vars;
    KILN_RETURN_IF_ERROR(ParseRanges(&k.ranges, &vars, 0));
    if (c_.TryIdent("reduce")) {
      KILN_RETURN_IF_ERROR(ParseRanges(&k.reduction_ranges, &vars,
                                       static_cast<int>(k.ranges.size())));
    }
    KILN_RETURN_IF_ERROR(ParseOpsAndVec(&k));
    KILN_RETURN_IF_ERROR(c_.ExpectPunct("{", "to open the kernel body"));
    const VarResolver resolver =
        [&vars](absl::string_view n) -> std::optional<int> {
      auto it = vars.find(n);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
    absl::flat_hash_map<std::string, int32_t> values;
    while (!c_.TryPunct("}")) {
      KILN_RETURN_IF_ERROR(ParseOp(&k, resolver, &values));
    }
    program_.kernels.push_back(std::move(k));
    return absl::OkStatus();
  }

  absl::Status ParseExternCall(Kernel* k) {
    if (!c_.TryIdent("call")) return c_.Expected("'call'");
    if (c_.Peek().kind != Tok::kString) return c_.Expected("the callee string");
    k->call.op = c_.Next().text;
    auto buffer_list = [&](std::vector<int32_t>* out) -> absl::Status {
      KILN_RETURN_IF_ERROR(c_.ExpectPunct("(", "to open the buffer list"));
      if (c_.TryPunct(")")) return absl::OkStatus();
      do {
        KILN_ASSIGN_OR_RETURN(int32_t b, ParseBufferRef());
        out->push_back(b);
      } while (c_.TryPunct(","));
      return c_.ExpectPunct(")", "to close the buffer list");
    };
    KILN_RETURN_IF_ERROR(buffer_list(&k->call.inputs));
    KILN_RETURN_IF_ERROR(c_.ExpectPunct("->", "before the outputs"));
    KILN_RETURN_IF_ERROR(buffer_list(&k->call.outputs));
    if (!c_.TryPunct("{")) return absl::OkStatus();
    if (c_.TryPunct("}")) return absl::OkStatus();
    do {
      const Token& key_tok = c_.Peek();
      if (key_tok.kind != Tok::kIdent && key_tok.kind != Tok::kString) {
        return c_.Expected("an attribute name");
      }
      std::string key = c_.Next().text;
      if (k->call.attrs.count(key) > 0) {
        return ErrorAt(key_tok, absl::StrCat("attribute '", key,
                                             "' is repeated"));
      }
      KILN_RETURN_IF_ERROR(c_.ExpectPunct("=", "after the attribute name"));
      KILN_ASSIGN_OR_RETURN(ExternAttr attr, ParseAttr());
      k->call.attrs.emplace(std::move(key), std::move(attr));
    } while (c_.TryPunct(","));
    return c_.ExpectPunct("}", "to close the attributes");
  }

  absl::StatusOr<ExternAttr> ParseAttr() {
    const Token& t = c_.Peek();
    if (t.kind == Tok::kString) return ExternAttr(c_.Next().text);
    if (c_.IsPunct("[")) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, ParseIntList("the list"));
      return ExternAttr(std::move(v));
    }
    if (c_.TryIdent("floats")) {
      KILN_RETURN_IF_ERROR(c_.ExpectPunct("[", "after 'floats'"));
      std::vector<double> v;
      if (!c_.TryPunct("]")) {
        do {
          KILN_ASSIGN_OR_RETURN(double f, ParseFloat());
          v.push_back(f);
        } while (c_.TryPunct(","));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct("]", "to close the floats"));
      }
      return ExternAttr(std::move(v));
    }
    const Token& n = c_.IsPunct("-") ? c_.Peek(1) : t;
    if (n.kind == Tok::kInt) {
      KILN_ASSIGN_OR_RETURN(int64_t v, ParseInt("an integer"));
      return ExternAttr(v);
    }
    KILN_ASSIGN_OR_RETURN(double f, ParseFloat());
    return ExternAttr(f);
  }

  absl::StatusOr<int32_t> ParseValueRef(
      const Kernel& k, const absl::flat_hash_map<std::string, int32_t>& values) {
    const Token& t = c_.Peek();
    if (t.kind != Tok::kValue) return c_.Expected("a value (%name)");
    auto it = values.find(t.text);
    if (it == values.end()) {
      return ErrorAt(t, absl::StrCat("value '%", t.text,
                                     "' is not defined before this use"));
    }
    c_.Next();
    return it->second;
  }

  absl::StatusOr<IndexExpr> ParseBracketedIndex(const VarResolver& resolver) {
    KILN_RETURN_IF_ERROR(c_.ExpectPunct("[", "to open the index"));
    KILN_ASSIGN_OR_RETURN(IndexExpr e,
                          text_internal::ParseIndexExprAt(c_, resolver));
    KILN_RETURN_IF_ERROR(c_.ExpectPunct("]", "to close the index"));
    return e;
  }

  absl::Status ParseOp(Kernel* k, const VarResolver& resolver,
                       absl::flat_hash_map<std::string, int32_t>* values) {
    Op op;
    std::optional<Token> result;
    if (c_.Peek().kind == Tok::kValue) {
      result = c_.Next();
      if (values->contains(result->text)) {
        return ErrorAt(*result, absl::StrCat("value '%", result->text,
                                             "' is already defined"));
      }
      KILN_RETURN_IF_ERROR(c_.ExpectPunct("=", "after the value name"));
    }
    const Token& op_tok = c_.Peek();
    if (op_tok.kind != Tok::kIdent) return c_.Expected("an op name");
    std::optional<OpCode> code = OpCodeFromName(op_tok.text);
    if (!code.has_value()) {
      return ErrorAt(op_tok, absl::StrCat("unknown op '", op_tok.text, "'"));
    }
    op.code = *code;
    c_.Next();
    if (op.is_store() == result.has_value()) {
      return ErrorAt(op_tok, op.is_store()
                                 ? absl::StrCat("'", op_tok.text, "' has no result")
                                 : "this op needs a result (%name = ...)");
    }
    switch (op.code) {
      case OpCode::kLoad:
      case OpCode::kStore: {
        KILN_ASSIGN_OR_RETURN(op.buffer, ParseBufferRef());
        KILN_ASSIGN_OR_RETURN(op.index, ParseBracketedIndex(resolver));
        if (op.code == OpCode::kStore) {
          KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before the stored value"));
          KILN_ASSIGN_OR_RETURN(int32_t v, ParseValueRef(*k, *values));
          op.args.push_back(v);
        }
        break;
      }
      case OpCode::kLoadIndirect: {
        KILN_ASSIGN_OR_RETURN(op.buffer, ParseBufferRef());
        KILN_ASSIGN_OR_RETURN(op.index, ParseBracketedIndex(resolver));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before the index value"));
        KILN_ASSIGN_OR_RETURN(int32_t v, ParseValueRef(*k, *values));
        op.args.push_back(v);
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before 'stride'"));
        if (!c_.TryIdent("stride")) return c_.Expected("'stride'");
        KILN_ASSIGN_OR_RETURN(op.stride, ParseInt("the stride"));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before 'extent'"));
        if (!c_.TryIdent("extent")) return c_.Expected("'extent'");
        KILN_ASSIGN_OR_RETURN(op.extent, ParseInt("the extent"));
        break;
      }
      case OpCode::kStoreIndirect: {
        KILN_ASSIGN_OR_RETURN(op.buffer, ParseBufferRef());
        KILN_ASSIGN_OR_RETURN(op.index, ParseBracketedIndex(resolver));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before the index value"));
        KILN_ASSIGN_OR_RETURN(int32_t n, ParseValueRef(*k, *values));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before 'stride'"));
        if (!c_.TryIdent("stride")) return c_.Expected("'stride'");
        KILN_ASSIGN_OR_RETURN(op.stride, ParseInt("the stride"));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before 'extent'"));
        if (!c_.TryIdent("extent")) return c_.Expected("'extent'");
        KILN_ASSIGN_OR_RETURN(op.extent, ParseInt("the extent"));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before 'combine'"));
        if (!c_.TryIdent("combine")) return c_.Expected("'combine'");
        const Token& t = c_.Peek();
        std::optional<StoreCombine> combine;
        if (t.kind == Tok::kIdent) combine = StoreCombineFromName(t.text);
        if (!combine.has_value()) {
          return c_.Expected("a combine mode (none, add, mul, max, min)");
        }
        c_.Next();
        op.combine = *combine;
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "before the stored value"));
        KILN_ASSIGN_OR_RETURN(int32_t v, ParseValueRef(*k, *values));
        op.args = {v, n};
        break;
      }
      case OpCode::kConstant: {
        const bool negative = c_.IsPunct("-");
        const Token& lit = c_.Peek(negative ? 1 : 0);
        const bool is_int = lit.kind == Tok::kInt;
        int64_t i = 0;
        double f = 0;
        if (is_int) {
          KILN_ASSIGN_OR_RETURN(i, ParseInt("an integer"));
          f = std::strtod(lit.text.c_str(), nullptr) * (negative ? -1 : 1);
        } else {
          KILN_ASSIGN_OR_RETURN(f, ParseFloat());
        }
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(":", "before the constant's dtype"));
        KILN_ASSIGN_OR_RETURN(op.dtype, ParseDType());
        if (IsFloat(op.dtype)) {
          op.fvalue = f;
        } else if (!is_int) {
          return ErrorAt(lit, absl::StrCat("a ", DTypeName(op.dtype),
                                           " constant must be an integer"));
        } else {
          op.ivalue = i;
        }
        break;
      }
      case OpCode::kIndex: {
        KILN_ASSIGN_OR_RETURN(op.index, ParseBracketedIndex(resolver));
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(":", "before the index dtype"));
        KILN_ASSIGN_OR_RETURN(op.dtype, ParseDType());
        break;
      }
      case OpCode::kCast: {
        KILN_ASSIGN_OR_RETURN(int32_t v, ParseValueRef(*k, *values));
        op.args.push_back(v);
        KILN_RETURN_IF_ERROR(c_.ExpectPunct(":", "before the cast's dtype"));
        KILN_ASSIGN_OR_RETURN(op.dtype, ParseDType());
        break;
      }
      case OpCode::kReduce: {
        const Token& t = c_.Peek();
        std::optional<ReduceKind> kind;
        if (t.kind == Tok::kIdent) kind = ReduceKindFromName(t.text);
        if (!kind.has_value()) {
          return c_.Expected(
              "a reduction (sum, prod, max, min, argmax, argmin, argmax_last, "
              "argmin_last, welford_mean, welford_var)");
        }
        c_.Next();
        op.reduce = *kind;
        KILN_ASSIGN_OR_RETURN(int32_t v, ParseValueRef(*k, *values));
        op.args.push_back(v);
        break;
      }
      default: {
        const int arity = OpArity(op.code);
        for (int a = 0; a < arity; ++a) {
          if (a > 0) {
            KILN_RETURN_IF_ERROR(c_.ExpectPunct(",", "between operands"));
          }
          KILN_ASSIGN_OR_RETURN(int32_t v, ParseValueRef(*k, *values));
          op.args.push_back(v);
        }
      }
    }
    if (op.code != OpCode::kConstant && op.code != OpCode::kIndex &&
        op.code != OpCode::kCast) {
      std::vector<DType> arg_dtypes;
      for (int32_t a : op.args) arg_dtypes.push_back(k->body[a].dtype);
      const Buffer* buffer =
          op.buffer >= 0 ? &program_.buffers[op.buffer] : nullptr;
      absl::StatusOr<DType> dtype = InferResultDType(op, arg_dtypes, buffer);
      op.dtype = dtype.ok() ? *dtype : DType::kInvalid;
    }
    if (result.has_value()) {
      (*values)[result->text] = static_cast<int32_t>(k->body.size());
    }
    k->body.push_back(std::move(op));
    return absl::OkStatus();
  }

  Cursor c_;
  LoopProgram program_;
  absl::flat_hash_map<std::string, int32_t> buffer_ids_;
  absl::flat_hash_set<std::string> kernel_names_;
};

}  // namespace

std::string PrintKernel(const LoopProgram& program, const Kernel& kernel) {
  std::string out;
  if (kernel.kind == Kernel::Kind::kExtern) {
    PrintExternKernel(program, kernel, &out);
  } else {
    PrintLoopKernel(program, kernel, &out);
  }
  return out;
}

std::string PrintProgram(const LoopProgram& program) {
  std::string out;
  for (const Buffer& b : program.buffers) {
    absl::StrAppend(&out, "buffer %", b.name, ": ", DTypeName(b.dtype),
                    "[", absl::StrJoin(b.shape, ","), "]");
    if (!b.IsRowMajor()) absl::StrAppend(&out, " strides=", IntList(b.strides));
    absl::StrAppend(&out, " ", BufferKindName(b.kind), "\n");
  }
  for (const Kernel& k : program.kernels) out += PrintKernel(program, k);
  return out;
}

absl::StatusOr<LoopProgram> ParseProgram(absl::string_view text) {
  absl::StatusOr<std::vector<Token>> tokens = text_internal::Lex(text);
  absl::StatusOr<LoopProgram> program =
      tokens.ok() ? Parser(*std::move(tokens)).Run() : tokens.status();
  // Names from the text in an error: escaped, each line capped.
  if (!program.ok()) return SanitizedStatus(program.status(), /*keep_line_breaks=*/false);
  return program;
}

}  // namespace kiln::ir::loop
