// Every row of ir/loop/opcodes.def, on the IR side: its token names it in
// both directions, its typing accepts exactly the operand kinds it has forms
// for, a kernel using each form survives the verifier and a text round trip,
// and the interpreter evaluates it. (backends/cpp/op_rows_test compares the
// generated code with the interpreter per row.)
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "ir/graph/tensor.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/text.h"
#include "ir/loop/verifier.h"

namespace kiln::ir::loop {
namespace {

using ::testing::HasSubstr;

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

const DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64,
                            DType::kI32, DType::kI8,  DType::kU8,   DType::kBool};

void SetElement(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF32: t.data<float>()[i] = static_cast<float>(v); break;
    case DType::kF16: t.data<Float16>()[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBF16:
      t.data<ir::BFloat16>()[i] = ir::FloatToBFloat16(static_cast<float>(v));
      break;
    case DType::kF64: t.data<double>()[i] = v; break;
    case DType::kI64: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::kI8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case DType::kBool: t.data<bool>()[i] = v > 0; break;
    case DType::kInvalid: break;
  }
}

void PrintTo(const Row& row, std::ostream* os) { *os << row.token; }

std::string RowName(const ::testing::TestParamInfo<Row>& info) {
  return info.param.token;
}

class OpRow : public ::testing::TestWithParam<Row> {};

TEST_P(OpRow, TokenNamesTheOpcode) {
  const Row& row = GetParam();
  EXPECT_EQ(OpCodeName(row.code), row.token);
  EXPECT_EQ(OpCodeFromName(row.token), row.code);
  EXPECT_TRUE(IsElementwise(row.code));
  EXPECT_EQ(OpArity(row.code), row.arity);
  EXPECT_TRUE(HasForm(row.code, OperandKind::kFloat) || HasForm(row.code, OperandKind::kInt) ||
              HasForm(row.code, OperandKind::kBool))
      << "a row without a form";
}

// Operands of every dtype: accepted exactly when the row has a form for
// their kind; the result has the operands' dtype or is bool.
TEST_P(OpRow, TypingFollowsTheForms) {
  const Row& row = GetParam();
  for (DType d : kAllDTypes) {
    Op op;
    op.code = row.code;
    const std::vector<DType> args(row.arity, d);
    absl::StatusOr<DType> r = InferResultDType(op, args, nullptr);
    const bool has_form = HasForm(row.code, OperandKindOf(d));
    ASSERT_EQ(r.ok(), has_form) << DTypeName(d) << ": " << r.status();
    if (r.ok()) {
      EXPECT_EQ(*r, row.bool_result ? DType::kBool : d) << DTypeName(d);
    } else {
      EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("'", row.token, "': needs ")));
    }
  }
  if (row.arity == 2 && HasForm(row.code, OperandKind::kFloat)) {
    Op op;
    op.code = row.code;
    EXPECT_FALSE(InferResultDType(op, {DType::kF32, DType::kF64}, nullptr).ok());
  }
}

// A program with one kernel per accepted operand dtype: it verifies, prints
// and parses back to the same text, and the interpreter runs it.
TEST_P(OpRow, KernelsRoundTripAndRun) {
  const Row& row = GetParam();
  constexpr int64_t kN = 6;
  LoopProgram p;
  std::map<std::string, Tensor> inputs;
  for (DType d : kAllDTypes) {
    if (!HasForm(row.code, OperandKindOf(d))) continue;
    const std::string dn(DTypeName(d));
    const int a = p.AddBuffer("a_" + dn, d, {kN}, BufferKind::kInput);
    const int b = p.AddBuffer("b_" + dn, d, {kN}, BufferKind::kInput);
    const int y = p.AddBuffer("y_" + dn, row.bool_result ? DType::kBool : d, {kN},
                              BufferKind::kOutput);
    KernelBuilder k(&p, absl::StrCat(row.token, "_", dn), {kN});
    const int x0 = k.Load(a, k.i(0));
    const int v = row.arity == 1 ? k.Unary(row.code, x0)
                                 : k.Binary(row.code, x0, k.Load(b, k.i(0)));
    k.Store(y, k.i(0), v);
    // Values every form accepts: no zero divisor, bools both ways.
    const std::vector<double> av = {-3, -1, 0, 1, 2, 5};
    const std::vector<double> bv = {2, -1, 3, 1, 7, -2};
    Tensor ta(d, {kN}), tb(d, {kN});
    for (int64_t i = 0; i < kN; ++i) {
      const bool u8 = d == DType::kU8;
      SetElement(ta, i, u8 ? av[i] + 3 : av[i]);
      SetElement(tb, i, u8 ? bv[i] + 3 : bv[i]);
    }
    inputs["a_" + dn] = ta;
    inputs["b_" + dn] = tb;
  }
  ASSERT_FALSE(p.kernels.empty());
  ASSERT_TRUE(VerifyProgram(p).ok()) << VerifyProgram(p);
  const std::string text = PrintProgram(p);
  absl::StatusOr<LoopProgram> parsed = ParseProgram(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(PrintProgram(*parsed), text);
  for (const Kernel& k : parsed->kernels) {
    EXPECT_EQ(k.body[k.body.size() - 2].code, row.code) << k.name;
  }
  absl::StatusOr<std::map<std::string, Tensor>> out = RunLoopProgram(*parsed, inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->size(), p.kernels.size());
}

INSTANTIATE_TEST_SUITE_P(Rows, OpRow, ::testing::ValuesIn(kRows), RowName);

// Tokens are unique over every opcode, rows and special ops alike.
TEST(OpCodes, TokensAreUnique) {
  std::set<std::string> seen;
  for (int c = 0; c <= static_cast<int>(OpCode::kStoreIndirect); ++c) {
    const std::string name(OpCodeName(static_cast<OpCode>(c)));
    EXPECT_NE(name, "?") << c;
    EXPECT_TRUE(seen.insert(name).second) << name;
    EXPECT_EQ(OpCodeFromName(name), static_cast<OpCode>(c)) << name;
  }
}

// The failing forms: integer division and modulo by zero.
TEST(OpCodes, CheckedFormsFailOnZeroDivisors) {
  for (const Row& row : kRows) {
    if (!MayFail(row.code, DType::kI32)) continue;
    EXPECT_FALSE(MayFail(row.code, DType::kF32)) << row.token;
    LoopProgram p;
    const int a = p.AddBuffer("a", DType::kI32, {2}, BufferKind::kInput);
    const int y = p.AddBuffer("y", DType::kI32, {2}, BufferKind::kOutput);
    KernelBuilder k(&p, row.token, {2});
    k.Store(y, k.i(0), k.Binary(row.code, k.Constant(DType::kI32, 7), k.Load(a, k.i(0))));
    absl::StatusOr<std::map<std::string, Tensor>> out =
        RunLoopProgram(p, {{"a", Tensor::FromVector<int32_t>({2}, {3, 0})}});
    ASSERT_FALSE(out.ok()) << row.token;
    EXPECT_THAT(out.status().message(), HasSubstr("integer division by zero"));
  }
  EXPECT_TRUE(MayFail(OpCode::kDiv, DType::kI64));
  EXPECT_FALSE(MayFail(OpCode::kAdd, DType::kI64));
  EXPECT_FALSE(MayFail(OpCode::kLoad, DType::kI64));
}

}  // namespace
}  // namespace kiln::ir::loop
