// The pointwise opcodes' C++ and Highway forms (see op_forms.h), one table
// per operand kind built from ir/loop/opcodes.def.
#include "backends/cpp/op_forms.h"

#include "absl/strings/str_cat.h"

namespace kiln::backends::cpp {
namespace {

using ir::loop::OpCode;
using ir::loop::OperandKind;

struct Row {
  OpCode code;
  OpForm form;
};

constexpr Row kFloatForms[] = {
#define KILN_FLOAT(Name, eval, scalar, vector) {OpCode::k##Name, {scalar, vector}},
#include "ir/loop/opcodes.def"
};

constexpr Row kIntForms[] = {
#define KILN_INT(Name, eval, scalar, vector) {OpCode::k##Name, {scalar, vector}},
#include "ir/loop/opcodes.def"
};

constexpr Row kBoolForms[] = {
#define KILN_BOOL(Name, eval, scalar, vector) {OpCode::k##Name, {scalar, vector}},
#include "ir/loop/opcodes.def"
};

template <size_t N>
const OpForm* Find(const Row (&rows)[N], OpCode code) {
  for (const Row& row : rows) {
    if (row.code == code) return &row.form;
  }
  return nullptr;
}

}  // namespace

const OpForm* FindOpForm(OpCode code, OperandKind kind) {
  switch (kind) {
    case OperandKind::kFloat: return Find(kFloatForms, code);
    case OperandKind::kInt: return Find(kIntForms, code);
    case OperandKind::kBool: return Find(kBoolForms, code);
  }
  return nullptr;
}

std::string ExpandForm(absl::string_view form, absl::Span<const std::string> args,
                       absl::string_view type) {
  std::string out;
  for (size_t i = 0; i < form.size(); ++i) {
    const char c = form[i];
    const char next = i + 1 < form.size() ? form[i + 1] : '\0';
    if (c == '$' && next == 'T') {
      absl::StrAppend(&out, type);
      ++i;
    } else if (c == '$' && next >= '0' && next <= '9' &&
               static_cast<size_t>(next - '0') < args.size()) {
      absl::StrAppend(&out, args[next - '0']);
      ++i;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace kiln::backends::cpp
