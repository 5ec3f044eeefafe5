// File: backends/cpp/op_forms.h — the scalar C++ and Highway forms of the
// pointwise loop opcodes, read from their rows in ir/loop/opcodes.def: the
// emitter writes them, the vectorization checker reads which ops have no
// vector instruction.
//
//   const OpForm* f = FindOpForm(OpCode::kAdd, OperandKind::kFloat);
//   ExpandForm(f->scalar, {"s0", "s1"}, "float");  // "(s0 + s1)"
#ifndef KILN_BACKENDS_CPP_OP_FORMS_H_
#define KILN_BACKENDS_CPP_OP_FORMS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ir/loop/loop_ir.h"

namespace kiln::backends::cpp {

// One form of a row (opcodes.def explains the templates).
struct OpForm {
  const char* scalar;  // C++ expression template
  // Highway expression template for f32 / i32 / bool operands; nullptr: the
  // scalar form lane by lane (no vector instruction).
  const char* vector;
  bool lanewise() const { return vector == nullptr; }
};

// The form of pointwise op `code` for operands of `kind`; nullptr when the
// op is not pointwise or has no such form.
const OpForm* FindOpForm(ir::loop::OpCode code, ir::loop::OperandKind kind);

// `form` with $0, $1 replaced by args[0], args[1] and $T by `type`.
std::string ExpandForm(absl::string_view form, absl::Span<const std::string> args,
                       absl::string_view type);

}  // namespace kiln::backends::cpp

#endif  // KILN_BACKENDS_CPP_OP_FORMS_H_
