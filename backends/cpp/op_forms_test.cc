// Every row of ir/loop/opcodes.def, on the emitter's side: each form the IR
// accepts has a scalar C++ template, uses exactly the operands the op has,
// and a vector template or the lane-by-lane fallback; ExpandForm fills them.
#include "backends/cpp/op_forms.h"

#include <cstring>
#include <ostream>
#include <string>

#include "gtest/gtest.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ir/loop/loop_ir.h"

namespace kiln::backends::cpp {
namespace {

using ir::loop::OpCode;
using ir::loop::OperandKind;

struct Row {
  OpCode code;
  const char* token;
  int arity;
  bool bool_result;
};

constexpr Row kRows[] = {
#define KILN_OP(Name, token, arity, result) \
  {OpCode::k##Name, token, arity, std::strcmp(#result, "kBool") == 0},
#include "ir/loop/opcodes.def"
};

void PrintTo(const Row& row, std::ostream* os) { *os << row.token; }

class OpFormRow : public ::testing::TestWithParam<Row> {};

// Placeholders of `tmpl` are $0..$<arity-1> (each used) and $T.
void ExpectPlaceholders(const char* tmpl, int arity, const std::string& what) {
  ASSERT_NE(tmpl, nullptr) << what;
  for (int j = 0; j < arity; ++j) {
    EXPECT_TRUE(absl::StrContains(tmpl, "$" + std::to_string(j))) << what << ": " << tmpl;
  }
  for (const char* p = std::strchr(tmpl, '$'); p != nullptr; p = std::strchr(p + 1, '$')) {
    const char c = p[1];
    EXPECT_TRUE(c == 'T' || (c >= '0' && c < '0' + arity)) << what << ": " << tmpl;
  }
}

TEST_P(OpFormRow, FormsMatchTheIrTyping) {
  const Row& row = GetParam();
  for (OperandKind kind : {OperandKind::kFloat, OperandKind::kInt, OperandKind::kBool}) {
    const std::string what = absl::StrCat(row.token, " kind ", static_cast<int>(kind));
    const OpForm* form = FindOpForm(row.code, kind);
    ASSERT_EQ(form != nullptr, ir::loop::HasForm(row.code, kind)) << what;
    if (form == nullptr) continue;
    ExpectPlaceholders(form->scalar, row.arity, what + " scalar");
    if (form->lanewise()) {
      // KilnLanewise1/2 give a vector of the operands' type.
      EXPECT_FALSE(row.bool_result) << what;
      EXPECT_NE(kind, OperandKind::kBool) << what << ": bool lanes are masks";
    } else {
      ExpectPlaceholders(form->vector, row.arity, what + " vector");
      EXPECT_FALSE(absl::StrContains(form->vector, "$T")) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, OpFormRow, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& info) {
                           return std::string(info.param.token);
                         });

TEST(OpForms, ExpandForm) {
  EXPECT_EQ(ExpandForm("static_cast<$T>(std::pow($0, $1))", {"s1", "s2"}, "float"),
            "static_cast<float>(std::pow(s1, s2))");
  EXPECT_EQ(ExpandForm("($0 $ $2)", {"a"}, "int"), "(a $ $2)");
  EXPECT_EQ(ExpandForm("$", {}, "int"), "$");
}

TEST(OpForms, NonPointwiseOpsHaveNone) {
  for (OpCode code : {OpCode::kLoad, OpCode::kStore, OpCode::kSelect, OpCode::kCast,
                      OpCode::kReduce, OpCode::kLoadIndirect}) {
    EXPECT_EQ(FindOpForm(code, OperandKind::kFloat), nullptr);
  }
}

}  // namespace
}  // namespace kiln::backends::cpp
