// Every row of ir/loop/opcodes.def through generated code, stamped once per
// ISA by kiln_isa_test: one kernel per row and operand dtype, emitted as
// vector code (f32 / f16 / bf16 / i32 / bool) and as scalar code, built with
// the JIT and compared with the loop interpreter; the vectorization checker's decision
// for the op follows the row (per-lane exactly when it has no vector form);
// a form that can fail returns kErrorIntegerDivByZero where the interpreter
// fails.
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "backends/cpp/emitter.h"
#include "backends/cpp/op_forms.h"
#include "backends/cpp/test_util.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/kernel_abi.h"
#include "ir/loop/loop_ir.h"
#include "compiler/jit/isa_test_util.h"

namespace kiln::backends::cpp {
namespace {

using ir::DType;
using ir::Tensor;
using ir::loop::BufferKind;
using ir::loop::KernelBuilder;
using ir::loop::LoopProgram;
using ir::loop::OpCode;
using ir::loop::OperandKind;
using ir::loop::VecStatus;

struct Row {
  OpCode code;
  const char* token;
  int arity;
};

constexpr Row kRows[] = {
#define KILN_OP(Name, token, arity, result) {OpCode::k##Name, token, arity},
#include "ir/loop/opcodes.def"
};

// Operand dtypes per kind: the vectorized one first. f16 and bf16 rows
// compute in f32 lanes and round at the store: their own case, compared
// within one ulp of their dtype.
const DType kFloatDTypes[] = {DType::kF32, DType::kF64};
const DType kLowPrecisionDTypes[] = {DType::kF16, DType::kBF16};
const DType kIntDTypes[] = {DType::kI32, DType::kI64, DType::kI8, DType::kU8};
const DType kBoolDTypes[] = {DType::kBool};

constexpr int64_t kN = 131;  // full vector steps and a tail on every target

// Floats: half the elements in [-12, 12], half in [-1, 1] (the domain of
// asin, acos, atanh), with NaN, +-inf and +-0 planted.
Tensor FloatInput(DType dt, uint32_t seed) {
  Tensor wide = RandomTensor(DType::kF64, {kN}, seed, -12, 12);
  Tensor unit = RandomTensor(DType::kF64, {kN}, seed + 1, -1, 1);
  Tensor t(dt, {kN});
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), -0.0, 0.0};
  for (int64_t i = 0; i < kN; ++i) {
    double v = (i % 2 == 0 ? wide : unit).GetAsDouble(i);
    if (i % 29 == 3) v = specials[(i / 29) % 5];
    if (dt == DType::kF32) t.data<float>()[i] = static_cast<float>(v);
    if (dt == DType::kF64) t.data<double>()[i] = v;
    if (dt == DType::kF16) t.data<ir::Float16>()[i] = ir::FloatToHalf(static_cast<float>(v));
    if (dt == DType::kBF16) {
      t.data<ir::BFloat16>()[i] = ir::FloatToBFloat16(static_cast<float>(v));
    }
  }
  return t;
}

// Integers over the dtype's range (left operand) or small and never zero
// (right operand: divisors, exponents, shift-like amounts).
Tensor IntInput(DType dt, uint32_t seed, bool right) {
  double lo = -2e9, hi = 2e9;
  if (dt == DType::kI8) lo = -128, hi = 127;
  if (dt == DType::kU8) lo = 0, hi = 255;
  if (right) lo = dt == DType::kU8 ? 1 : -9, hi = 9;
  Tensor t = RandomTensor(dt, {kN}, seed, lo, hi);
  for (int64_t i = 0; right && i < kN; ++i) {
    if (t.GetAsInt64(i) != 0) continue;
    switch (dt) {
      case DType::kI64: t.data<int64_t>()[i] = 3; break;
      case DType::kI32: t.data<int32_t>()[i] = 3; break;
      case DType::kI8: t.data<int8_t>()[i] = 3; break;
      default: t.data<uint8_t>()[i] = 3; break;
    }
  }
  return t;
}

std::string KernelName(const Row& row, DType dt) {
  return absl::StrCat(row.token, "_", ir::DTypeName(dt));
}

// One kernel y = op(a, b) per row and operand dtype; `low_precision`: the
// float rows over f16 and bf16 only.
ProgramCase RowsCase(bool low_precision = false) {
  ProgramCase c;
  c.tol = {1e-5, 1e-6, {}};  // Highway's transcendentals against libm's
  // f32 results one f32 ulp apart can round to neighbouring bf16 values.
  if (low_precision) c.tol = {0x1p-7, 1e-6, {}};
  LoopProgram& p = c.program;
  std::vector<std::pair<OperandKind, std::vector<DType>>> kinds = {
      {OperandKind::kFloat, {std::begin(kFloatDTypes), std::end(kFloatDTypes)}},
      {OperandKind::kInt, {std::begin(kIntDTypes), std::end(kIntDTypes)}},
      {OperandKind::kBool, {std::begin(kBoolDTypes), std::end(kBoolDTypes)}}};
  if (low_precision) {
    kinds = {{OperandKind::kFloat,
              {std::begin(kLowPrecisionDTypes), std::end(kLowPrecisionDTypes)}}};
  }
  for (const auto& [kind, dtypes] : kinds) {
    for (DType dt : dtypes) {
      const std::string dn(ir::DTypeName(dt));
      const int a = p.AddBuffer("a_" + dn, dt, {kN}, BufferKind::kInput);
      const int b = p.AddBuffer("b_" + dn, dt, {kN}, BufferKind::kInput);
      const uint32_t seed = static_cast<uint32_t>(dt) * 10;
      switch (kind) {
        case OperandKind::kFloat:
          c.inputs["a_" + dn] = FloatInput(dt, seed);
          c.inputs["b_" + dn] = FloatInput(dt, seed + 5);
          break;
        case OperandKind::kInt:
          c.inputs["a_" + dn] = IntInput(dt, seed, false);
          c.inputs["b_" + dn] = IntInput(dt, seed + 5, true);
          break;
        case OperandKind::kBool:
          c.inputs["a_" + dn] = RandomTensor(dt, {kN}, seed, 0, 1);
          c.inputs["b_" + dn] = RandomTensor(dt, {kN}, seed + 5, 0, 1);
          break;
      }
      for (const Row& row : kRows) {
        if (!ir::loop::HasForm(row.code, kind)) continue;
        KernelBuilder k(&p, KernelName(row, dt), {kN});
        const int x = k.Load(a, k.i(0));
        const int v = row.arity == 1 ? k.Unary(row.code, x)
                                     : k.Binary(row.code, x, k.Load(b, k.i(0)));
        const DType out = k.kernel().body[v].dtype;
        const int y = p.AddBuffer("y_" + KernelName(row, dt), out, {kN}, BufferKind::kOutput);
        k.Store(y, k.i(0), v);
      }
    }
  }
  return c;
}

const EmittedKernel* FindKernel(const CaseResult& r, const std::string& name) {
  for (const EmittedKernel& k : r.emitted.kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

TEST(OpRows, VectorAndScalarCodeMatchTheInterpreter) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases = {RowsCase(), RowsCase(), RowsCase(true), RowsCase(true)};
  cases[0].name = "rows, vector code";
  cases[1].name = "rows, scalar code";
  cases[2].name = "f16 / bf16 rows, vector code";
  cases[3].name = "f16 / bf16 rows, scalar code";
  cases[1].options.vectorize = false;
  cases[3].options.vectorize = false;
  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  for (size_t c = 0; c < cases.size(); ++c) ExpectMatchesInterpreter(cases[c], (*r)[c]);
  int checked = 0;
  for (const Row& row : kRows) {
    for (DType dt :
         {DType::kF32, DType::kI32, DType::kBool, DType::kF16, DType::kBF16, DType::kF64}) {
      const OperandKind kind = ir::loop::OperandKindOf(dt);
      if (!ir::loop::HasForm(row.code, kind)) continue;
      // f64 kernels vectorize when every value is f64 (not a compare's bool).
      if (dt == DType::kF64) {
        bool bool_result = false;
        for (const ir::loop::Buffer& buf : cases[0].program.buffers) {
          bool_result |= buf.name == "y_" + KernelName(row, dt) && buf.dtype == DType::kBool;
        }
        if (bool_result) continue;
      }
      const std::string name = KernelName(row, dt);
      const size_t vc = ir::IsLowPrecisionFloat(dt) ? 2 : 0;
      const EmittedKernel* vk = FindKernel((*r)[vc], name);
      const EmittedKernel* sk = FindKernel((*r)[vc + 1], name);
      ASSERT_NE(vk, nullptr) << name;
      ASSERT_NE(sk, nullptr) << name;
      EXPECT_EQ(vk->vec.kind, VecStatus::Kind::kVectorized) << name << ": " << vk->vec.reason;
      EXPECT_EQ(sk->vec.kind, VecStatus::Kind::kScalar) << name;
      // The op: the body's op before the store.
      const size_t op = vk->ops.size() - 2;
      const bool lanewise = dt == DType::kF64 ? F64Lanewise(*FindOpForm(row.code, kind))
                                              : FindOpForm(row.code, kind)->lanewise();
      EXPECT_EQ(vk->ops[op].kind, lanewise ? OpVec::kPerLane : OpVec::kVector)
          << name << ": " << vk->ops[op].reason;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

// A form that can fail: a zero divisor makes the interpreter fail and the
// generated code (vector and scalar) return kErrorIntegerDivByZero.
TEST(OpRows, CheckedFormsFlagDivisionByZero) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases;
  for (const Row& row : kRows) {
    if (!ir::loop::MayFail(row.code, DType::kI32)) continue;
    for (bool vectorize : {true, false}) {
      ProgramCase c;
      c.name = absl::StrCat(row.token, vectorize ? " vector" : " scalar");
      c.options.vectorize = vectorize;
      LoopProgram& p = c.program;
      const int a = p.AddBuffer("a", DType::kI32, {kN}, BufferKind::kInput);
      const int y = p.AddBuffer("y", DType::kI32, {kN}, BufferKind::kOutput);
      KernelBuilder k(&p, row.token, {kN});
      k.Store(y, k.i(0), k.Binary(row.code, k.Constant(DType::kI32, 10), k.Load(a, k.i(0))));
      Tensor in = IntInput(DType::kI32, 7, true);
      in.data<int32_t>()[kN / 2] = 0;
      c.inputs["a"] = in;
      cases.push_back(std::move(c));
    }
  }
  ASSERT_FALSE(cases.empty());
  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ((*r)[i].rc, ir::loop::kErrorIntegerDivByZero) << cases[i].name;
    EXPECT_FALSE(ir::loop::RunLoopProgram(cases[i].program, cases[i].inputs).ok())
        << cases[i].name;
  }
}

}  // namespace
}  // namespace kiln::backends::cpp
