// Emitted code vs. the loop interpreter, stamped once per ISA by
// kiln_isa_test: every program is emitted, built with the JIT for the shard's
// ISA (in process, or under qemu for neon) and its outputs compared with
// ir/loop's interpreter. Cases are batched so each TEST is one JIT build.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "backends/cpp/emitter.h"
#include "backends/cpp/test_util.h"
#include "ir/loop/loop_ir.h"
#include "runtime/jit/isa_test_util.h"

namespace kiln::backends::cpp {
namespace {

using ::testing::HasSubstr;
using ir::DType;
using ir::Tensor;
using ir::loop::BufferKind;
using ir::loop::KernelBuilder;
using ir::loop::LoopProgram;
using ir::loop::OpCode;
using ir::loop::ReduceKind;
using ir::loop::VecStatus;

constexpr testing::Tolerance kExact{1e-6, 1e-7, {}};
constexpr testing::Tolerance kTranscendental{1e-5, 1e-6, {}};
// f32 accumulation (vector lanes) against the interpreter's double.
constexpr testing::Tolerance kReduction{1e-5, 1e-5, {}};

// The emulated shard (qemu) runs only the representative programs.
#define SKIP_IF_EMULATED(t)                                                      \
  if ((t).emulated) GTEST_SKIP() << "SKIPPED: emulated ISA '" << (t).isa->name \
                                 << "' runs the representative subset only"

void RunAndCompare(const runtime::TestIsa& t, std::vector<ProgramCase>& cases,
                   std::vector<CaseResult>* out = nullptr) {
  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  for (size_t c = 0; c < cases.size(); ++c) ExpectMatchesInterpreter(cases[c], (*r)[c]);
  if (out != nullptr) *out = std::move(*r);
}

const ir::loop::VecStatus& StatusOf(const CaseResult& r, const std::string& kernel) {
  for (const EmittedKernel& k : r.emitted.kernels) {
    if (k.name == kernel) return k.vec;
  }
  static const VecStatus kNone;
  ADD_FAILURE() << "no kernel " << kernel;
  return kNone;
}

// ---------------------------------------------------------------------------
// Elementwise.

const OpCode kBinaryOps[] = {OpCode::kAdd, OpCode::kSub, OpCode::kMul,  OpCode::kDiv, OpCode::kMax,
                             OpCode::kMin, OpCode::kPow, OpCode::kMod, OpCode::kFmod};

// out_<op>[i0, i1] = op(x[i0, i1], row[i1]) (row broadcast: stride 0 in i0),
// plus column and scalar broadcasts; names end in _<rows>x<cols>.
void AddBinaryBroadcast(ProgramCase& c, int64_t rows, int64_t cols, uint32_t seed) {
  LoopProgram& p = c.program;
  const std::string sfx = absl::StrCat("_", rows, "x", cols);
  const int x = p.AddBuffer("x" + sfx, DType::kF32, {rows, cols}, BufferKind::kInput);
  const int row = p.AddBuffer("row" + sfx, DType::kF32, {cols}, BufferKind::kInput);
  const int col = p.AddBuffer("col" + sfx, DType::kF32, {rows, 1}, BufferKind::kInput);
  const int s = p.AddBuffer("s" + sfx, DType::kF32, {1}, BufferKind::kConstant);
  for (OpCode op : kBinaryOps) {
    const std::string name = absl::StrCat(ir::loop::OpCodeName(op), sfx);
    const int y = p.AddBuffer("out_" + name, DType::kF32, {rows, cols}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    b.Store(y, at, b.Binary(op, b.Load(x, at), b.Load(row, b.i(1))));
  }
  const int y2 = p.AddBuffer("out_col" + sfx, DType::kF32, {rows, cols}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "col_scalar" + sfx, {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    const int t = b.Binary(OpCode::kMul, b.Load(col, b.i(0)), b.Load(s, ir::loop::Const(0)));
    b.Store(y2, at, b.Binary(OpCode::kSub, b.Load(x, at), t));
  }
  c.inputs["x" + sfx] = RandomTensor(DType::kF32, {rows, cols}, seed, -4, 4, /*specials=*/true);
  c.inputs["row" + sfx] = RandomTensor(DType::kF32, {cols}, seed + 1, -3, 3);
  c.inputs["col" + sfx] = RandomTensor(DType::kF32, {rows, 1}, seed + 2, -3, 3);
  c.inputs["s" + sfx] = Tensor::FromVector<float>({1}, {0.75f});
}

TEST(Codegen, ElementwiseBinaryWithBroadcast) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(2);
  cases[0].name = "binary a";
  cases[1].name = "binary b";
  AddBinaryBroadcast(cases[0], 1, 1, 10);
  AddBinaryBroadcast(cases[0], 3, 17, 20);
  AddBinaryBroadcast(cases[0], 7, 1, 30);
  AddBinaryBroadcast(cases[1], 1, 1023, 40);
  AddBinaryBroadcast(cases[1], 2, 33, 50);
  if (t.emulated) cases.resize(1);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), cases.size());
  // 3x17: vectorized over i1 with the row contiguous; 7x1 has no inner
  // extent, so it vectorizes over i0; 1x1 has nothing to vectorize.
  EXPECT_EQ(StatusOf(r[0], "add_3x17").kind, VecStatus::Kind::kVectorized);
  EXPECT_THAT(StatusOf(r[0], "add_3x17").reason, HasSubstr("vectorized over i1"));
  EXPECT_THAT(StatusOf(r[0], "col_scalar_3x17").reason, HasSubstr("vectorized over i1"));
  EXPECT_THAT(StatusOf(r[0], "add_7x1").reason, HasSubstr("vectorized over i0"));
  EXPECT_EQ(StatusOf(r[0], "add_1x1").kind, VecStatus::Kind::kScalar);
}

struct UnaryInput {
  const char* buffer;
  double lo, hi;
};

UnaryInput InputFor(OpCode op) {
  switch (op) {
    case OpCode::kLog: case OpCode::kSqrt: case OpCode::kRsqrt: return {"pos", 1e-3, 100};
    case OpCode::kAsin: case OpCode::kAcos: case OpCode::kAtanh: return {"unit", -1, 1};
    case OpCode::kAcosh: return {"ge1", 1, 60};
    default: return {"wide", -12, 12};
  }
}

const OpCode kFloatUnaryOps[] = {
    OpCode::kExp,  OpCode::kLog,   OpCode::kSqrt,  OpCode::kRsqrt, OpCode::kTanh, OpCode::kErf,
    OpCode::kSigmoid, OpCode::kFloor, OpCode::kCeil, OpCode::kRound, OpCode::kSin, OpCode::kCos,
    OpCode::kTan,  OpCode::kAsin,  OpCode::kAcos,  OpCode::kAtan,  OpCode::kSinh, OpCode::kCosh,
    OpCode::kAsinh, OpCode::kAcosh, OpCode::kAtanh, OpCode::kReciprocal, OpCode::kNeg,
    OpCode::kAbs,  OpCode::kSign};

// One kernel per unary op, each on inputs in the op's domain (with NaN, +-inf
// and +-0 planted), plus integer and bool unary ops and NaN/inf tests.
ProgramCase UnaryCase(int64_t n, uint32_t seed) {
  ProgramCase c;
  c.name = absl::StrCat("unary n=", n);
  c.options.kernels_per_unit = 32;
  LoopProgram& p = c.program;
  for (const char* in : {"wide", "pos", "unit", "ge1"}) {
    p.AddBuffer(in, DType::kF32, {n}, BufferKind::kInput);
  }
  for (OpCode op : kFloatUnaryOps) {
    const std::string name(ir::loop::OpCodeName(op));
    const UnaryInput in = InputFor(op);
    const int y = p.AddBuffer("y_" + name, DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {n});
    b.Store(y, b.i(0), b.Unary(op, b.Load(p.FindBuffer(in.buffer), b.i(0))));
  }
  for (OpCode op : {OpCode::kIsNan, OpCode::kIsInf}) {
    const std::string name(ir::loop::OpCodeName(op));
    const int y = p.AddBuffer("y_" + name, DType::kBool, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {n});
    b.Store(y, b.i(0), b.Unary(op, b.Load(p.FindBuffer("wide"), b.i(0))));
  }
  for (DType dt : {DType::kI32, DType::kI64}) {
    const std::string dn(ir::DTypeName(dt));
    const int xi = p.AddBuffer("int_" + dn, dt, {n}, BufferKind::kInput);
    c.inputs["int_" + dn] = RandomTensor(dt, {n}, seed + 7, -1000, 1000);
    for (OpCode op : {OpCode::kNeg, OpCode::kAbs, OpCode::kSign}) {
      const std::string name = absl::StrCat(ir::loop::OpCodeName(op), "_", dn);
      const int y = p.AddBuffer("y_" + name, dt, {n}, BufferKind::kOutput);
      KernelBuilder b(&p, name, {n});
      b.Store(y, b.i(0), b.Unary(op, b.Load(xi, b.i(0))));
    }
  }
  const int xb = p.AddBuffer("flags", DType::kBool, {n}, BufferKind::kInput);
  const int yb = p.AddBuffer("y_not", DType::kBool, {n}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "not", {n});
    b.Store(yb, b.i(0), b.Unary(OpCode::kNot, b.Load(xb, b.i(0))));
  }
  c.inputs["wide"] = RandomTensor(DType::kF32, {n}, seed, -12, 12, /*specials=*/true);
  c.inputs["pos"] = RandomTensor(DType::kF32, {n}, seed + 1, 1e-3, 100, true);
  c.inputs["unit"] = RandomTensor(DType::kF32, {n}, seed + 2, -1, 1, true);
  c.inputs["ge1"] = RandomTensor(DType::kF32, {n}, seed + 3, 1, 60, true);
  c.inputs["flags"] = RandomTensor(DType::kBool, {n}, seed + 4, 0, 1);
  c.tol = kTranscendental;
  return c;
}

TEST(Codegen, EveryUnaryOp) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases = {UnaryCase(1023, 100), UnaryCase(7, 200)};
  if (t.emulated) cases.resize(1);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_FALSE(r.empty());
  for (OpCode op : kFloatUnaryOps) {
    EXPECT_EQ(StatusOf(r[0], std::string(ir::loop::OpCodeName(op))).kind,
              VecStatus::Kind::kVectorized)
        << ir::loop::OpCodeName(op);
  }
  EXPECT_EQ(StatusOf(r[0], "neg_i32").kind, VecStatus::Kind::kVectorized);
  EXPECT_EQ(StatusOf(r[0], "not").kind, VecStatus::Kind::kVectorized);
  EXPECT_EQ(StatusOf(r[0], "neg_i64").kind, VecStatus::Kind::kScalar);
  EXPECT_THAT(StatusOf(r[0], "neg_i64").reason, HasSubstr("i64"));
}

}  // namespace
}  // namespace kiln::backends::cpp
