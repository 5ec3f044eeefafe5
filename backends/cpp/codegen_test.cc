// Emitted code vs. the loop interpreter, stamped once per ISA by
// kiln_isa_test: every program is emitted, built with the JIT for the shard's
// ISA (in process, or under qemu for neon) and its outputs compared with
// ir/loop's interpreter. Cases are batched so each TEST is one JIT build.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/cpp/emitter.h"
#include "backends/cpp/test_util.h"
#include "ir/graph/text.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "interp/loop_module.h"
#include "lowering/lower_graph.h"
#include "compiler/jit/isa_test_util.h"

namespace kiln::backends::cpp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ir::DType;
using ir::Tensor;
using ir::loop::BufferKind;
using ir::loop::FloorDiv;
using ir::loop::KernelBuilder;
using ir::loop::LoopProgram;
using ir::loop::OpCode;
using ir::loop::ReduceKind;
using ir::loop::VecStatus;

constexpr interp::Tolerance kExact{1e-6, 1e-7, {}};
constexpr interp::Tolerance kTranscendental{1e-5, 1e-6, {}};
// f32 accumulation (vector lanes) against the interpreter's double.
constexpr interp::Tolerance kReduction{1e-5, 1e-5, {}};

// The emulated shard (qemu) runs only the representative programs.
#define SKIP_IF_EMULATED(t)                                                      \
  if ((t).emulated) GTEST_SKIP() << "SKIPPED: emulated ISA '" << (t).isa->name \
                                 << "' runs the representative subset only"

void RunAndCompare(const jit::TestIsa& t, std::vector<ProgramCase>& cases,
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

// exp where float results are subnormal or underflow to 0 (masked
// attention scores): the vector path must match libm exactly there too.
ProgramCase ExpEdgesCase(int64_t n) {
  ProgramCase c;
  c.name = absl::StrCat("exp edges n=", n);
  c.tol = {1e-6, 0.0, {}};  // relative only: subnormals count
  LoopProgram& p = c.program;
  const int x = p.AddBuffer("x", DType::kF32, {n}, BufferKind::kInput);
  const int y = p.AddBuffer("y", DType::kF32, {n}, BufferKind::kOutput);
  KernelBuilder b(&p, "exp_edges", {n});
  b.Store(y, b.i(0), b.Unary(OpCode::kExp, b.Load(x, b.i(0))));
  Tensor edges(DType::kF32, {n});
  const float far[] = {-std::numeric_limits<float>::max(), -1e30f, -1e4f, -200.0f,
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN(), 88.5f, 89.0f, 100.0f};
  for (int64_t i = 0; i < n; ++i) {
    // A grid over [-110, -80] (results are subnormal from about -87.3 and
    // round to 0 below about -103.9), with the far values planted.
    edges.data<float>()[i] = i % 5 == 4 ? far[(i / 5) % 9]
                                        : -110.0f + 30.0f * static_cast<float>(i) / n;
  }
  c.inputs["x"] = std::move(edges);
  return c;
}

TEST(Codegen, EveryUnaryOp) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases = {UnaryCase(1023, 100), UnaryCase(7, 200),
                                    ExpEdgesCase(997)};
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

// ---------------------------------------------------------------------------
// Reductions.

// y[n, :] = softmax(x[n, :]) as one kernel: max-reduce, exp-sum-reduce,
// divide.
void AddSoftmax(ProgramCase& c, int64_t rows, int64_t cols, uint32_t seed) {
  LoopProgram& p = c.program;
  const std::string sfx = absl::StrCat("_", rows, "x", cols);
  const int x = p.AddBuffer("x" + sfx, DType::kF32, {rows, cols}, BufferKind::kInput);
  const int y = p.AddBuffer("y" + sfx, DType::kF32, {rows, cols}, BufferKind::kOutput);
  KernelBuilder b(&p, "softmax" + sfx, {rows, cols}, {cols});
  const int m = b.Reduce(ReduceKind::kMax, b.Load(x, b.i(0) * cols + b.r(0)));
  const int e = b.Unary(OpCode::kExp, b.Binary(OpCode::kSub, b.Load(x, b.i(0) * cols + b.r(0)), m));
  const int sum = b.Reduce(ReduceKind::kSum, e);
  const int num = b.Unary(OpCode::kExp, b.Binary(OpCode::kSub, b.Load(x, b.i(0) * cols + b.i(1)), m));
  b.Store(y, b.i(0) * cols + b.i(1), b.Binary(OpCode::kDiv, num, sum));
  c.inputs["x" + sfx] = RandomTensor(DType::kF32, {rows, cols}, seed, -8, 8);
}

TEST(Codegen, Softmax) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(1);
  cases[0].name = "softmax";
  cases[0].tol = kReduction;
  AddSoftmax(cases[0], 7, 33, 1);
  if (!t.emulated) AddSoftmax(cases[0], 2, 1023, 2);  // qemu: too slow
  AddSoftmax(cases[0], 2, 1, 3);
  AddSoftmax(cases[0], 1, 17, 4);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  const VecStatus& st = StatusOf(r[0], "softmax_7x33");
  EXPECT_EQ(st.kind, VecStatus::Kind::kVectorized);
  EXPECT_THAT(st.reason, HasSubstr("vectorized over i1"));
  EXPECT_THAT(st.reason, HasSubstr("reduce #1 vectorized over r0"));
  EXPECT_THAT(st.reason, HasSubstr("reduce #5 vectorized over r0"));
}

// Column reductions (the reduced dim is not contiguous): y[c] = red_r x[r, c]
// accumulates per lane over i0; row reductions of f32 and i32 vectorize
// along r0; two reduction variables; an empty reduction.
void AddReductions(ProgramCase& c, int64_t rows, int64_t cols, uint32_t seed) {
  LoopProgram& p = c.program;
  const std::string sfx = absl::StrCat("_", rows, "x", cols);
  const int x = p.AddBuffer("x" + sfx, DType::kF32, {rows, cols}, BufferKind::kInput);
  const int xi = p.AddBuffer("xi" + sfx, DType::kI32, {rows, cols}, BufferKind::kInput);
  for (ReduceKind rk : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin, ReduceKind::kProd}) {
    const std::string rn(ir::loop::ReduceKindName(rk));
    {
      const int y = p.AddBuffer("col_" + rn + sfx, DType::kF32, {cols}, BufferKind::kOutput);
      KernelBuilder b(&p, "col_" + rn + sfx, {cols}, {rows});
      b.Store(y, b.i(0), b.Reduce(rk, b.Load(x, b.r(0) * cols + b.i(0))));
    }
    {
      const int y = p.AddBuffer("row_" + rn + sfx, DType::kF32, {rows}, BufferKind::kOutput);
      KernelBuilder b(&p, "row_" + rn + sfx, {rows}, {cols});
      b.Store(y, b.i(0), b.Reduce(rk, b.Load(x, b.i(0) * cols + b.r(0))));
    }
    {
      const int y = p.AddBuffer("rowi_" + rn + sfx, DType::kI32, {rows}, BufferKind::kOutput);
      KernelBuilder b(&p, "rowi_" + rn + sfx, {rows}, {cols});
      b.Store(y, b.i(0), b.Reduce(rk, b.Load(xi, b.i(0) * cols + b.r(0))));
    }
    {
      const int y = p.AddBuffer("coli_" + rn + sfx, DType::kI32, {cols}, BufferKind::kOutput);
      KernelBuilder b(&p, "coli_" + rn + sfx, {cols}, {rows});
      b.Store(y, b.i(0), b.Reduce(rk, b.Load(xi, b.r(0) * cols + b.i(0))));
    }
  }
  {
    // Mean of squares over both dims (two reduction variables), then sqrt.
    const int y = p.AddBuffer("rms" + sfx, DType::kF32, {1}, BufferKind::kOutput);
    KernelBuilder b(&p, "rms" + sfx, {1}, {rows, cols});
    const int v = b.Load(x, b.r(0) * cols + b.r(1));
    const int sum = b.Reduce(ReduceKind::kSum, b.Binary(OpCode::kMul, v, v));
    const int n = b.Constant(DType::kF32, static_cast<double>(rows * cols));
    b.Store(y, b.i(0), b.Unary(OpCode::kSqrt, b.Binary(OpCode::kDiv, sum, n)));
  }
  c.inputs["x" + sfx] = RandomTensor(DType::kF32, {rows, cols}, seed, 0.5, 1.5);
  c.inputs["xi" + sfx] = RandomTensor(DType::kI32, {rows, cols}, seed + 1, -50, 50);
}

TEST(Codegen, ReductionsOverContiguousAndStridedDims) {
  KILN_TEST_ISA_OR_SKIP(t);
  SKIP_IF_EMULATED(t);
  std::vector<ProgramCase> cases(2);
  cases[0].name = "reductions a";
  cases[1].name = "reductions b";
  for (ProgramCase& c : cases) c.tol = kReduction;
  AddReductions(cases[0], 7, 17, 1);
  AddReductions(cases[0], 1, 1, 2);
  AddReductions(cases[1], 33, 5, 3);
  AddReductions(cases[1], 3, 1023, 4);
  // An empty reduction gives the identity.
  {
    LoopProgram& p = cases[1].program;
    const int x = p.AddBuffer("x_empty", DType::kF32, {4, 0}, BufferKind::kInput);
    const int y = p.AddBuffer("y_empty", DType::kF32, {4}, BufferKind::kOutput);
    KernelBuilder b(&p, "empty_max", {4}, {0});
    b.Store(y, b.i(0), b.Reduce(ReduceKind::kMax, b.Load(x, b.i(0) * 0 + b.r(0))));
    cases[1].inputs["x_empty"] = Tensor(DType::kF32, {4, 0});
  }
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(StatusOf(r[0], "col_sum_7x17").reason, HasSubstr("reduce #1 per lane over i0"));
  EXPECT_THAT(StatusOf(r[0], "row_sum_7x17").reason, HasSubstr("reduce #1 vectorized over r0"));
  EXPECT_THAT(StatusOf(r[0], "rowi_max_7x17").reason, HasSubstr("vectorized over r0"));
  EXPECT_THAT(StatusOf(r[0], "rms_7x17").reason, HasSubstr("vectorized over r1"));
}

// A short reduction along the contiguous dim whose outputs are contiguous in
// a wide iteration variable: a MaxPool over 4 columns fused with the
// transpose and reshape that follow it, y[w*C + c, t] = max_r x[c, t, 4w + r]
// (as in audio models: pool the frequency axis, move channels first). Per-
// lane accumulators over t with gathered loads, not a masked 4-lane step and
// a horizontal max per output; NaN and infinities propagate as in the
// interpreter.
TEST(Codegen, ShortReductionVectorizesOverWideOutputVariable) {
  KILN_TEST_ISA_OR_SKIP(t);
  SKIP_IF_EMULATED(t);
  std::vector<ProgramCase> cases(1);
  cases[0].name = "pool then transpose";
  cases[0].tol = kReduction;
  LoopProgram& p = cases[0].program;
  constexpr int64_t C = 6, T = 37, W = 4, K = 4;
  const int x = p.AddBuffer("x", DType::kF32, {C, T, W * K}, BufferKind::kInput);
  for (ReduceKind rk : {ReduceKind::kMax, ReduceKind::kSum}) {
    const std::string name = absl::StrCat("pool_t_", ir::loop::ReduceKindName(rk));
    const int y = p.AddBuffer(name + "_out", DType::kF32, {W * C, T}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {W * C, T}, {K});
    const auto at = ir::loop::Mod(b.i(0), C) * (T * W * K) + b.i(1) * (W * K) +
                    FloorDiv(b.i(0), C) * K + b.r(0);
    b.Store(y, b.i(0) * T + b.i(1), b.Reduce(rk, b.Load(x, at)));
  }
  cases[0].inputs["x"] =
      RandomTensor(DType::kF32, {C, T, W * K}, 11, -4, 4, /*specials=*/true);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  for (const char* k : {"pool_t_max", "pool_t_sum"}) {
    const VecStatus& st = StatusOf(r[0], k);
    EXPECT_EQ(st.kind, VecStatus::Kind::kVectorized) << k;
    EXPECT_THAT(st.reason, HasSubstr("vectorized over i1")) << k;
    EXPECT_THAT(st.reason, HasSubstr("reduce #1 per lane over i1")) << k;
  }
}

// Welford mean/variance vectorized along the last reduction variable (two
// vector passes): one and two reduction variables, rows with a tail, a large
// common offset (where a one-pass sum of squares would lose the variance),
// a LayerNorm-style epilogue, and a row holding NaN.
TEST(Codegen, WelfordReductionsVectorized) {
  KILN_TEST_ISA_OR_SKIP(t);
  SKIP_IF_EMULATED(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "welford";
  // One float ulp of a mean near 1000 is 6e-5; times 1/std (~1.7) that is
  // up to ~1.1e-4 absolute on the normalized output, whichever of two
  // correct sums rounds it: rtol 1e-3 (ONNX's) and atol 2e-4 for that.
  c.tol = interp::Tolerance{1e-3, 2e-4, {}};
  LoopProgram& p = c.program;
  const int64_t rows = 6, cols = 45, inner = 3;
  const int x = p.AddBuffer("x", DType::kF32, {rows, inner, cols}, BufferKind::kInput);
  for (ReduceKind rk : {ReduceKind::kWelfordMean, ReduceKind::kWelfordVar}) {
    const std::string rn(ir::loop::ReduceKindName(rk));
    const int y = p.AddBuffer("row_" + rn, DType::kF32, {rows}, BufferKind::kOutput);
    KernelBuilder b(&p, "row_" + rn, {rows}, {inner, cols});
    b.Store(y, b.i(0),
            b.Reduce(rk, b.Load(x, b.i(0) * (inner * cols) + b.r(0) * cols + b.r(1))));
  }
  {
    // LayerNorm over the last dim: (x - mean) * rsqrt(var + eps).
    const int y = p.AddBuffer("ln", DType::kF32, {rows * inner, cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "ln", {rows * inner, cols}, {cols});
    const int mean = b.Reduce(ReduceKind::kWelfordMean, b.Load(x, b.i(0) * cols + b.r(0)));
    const int var = b.Reduce(ReduceKind::kWelfordVar, b.Load(x, b.i(0) * cols + b.r(0)));
    const int inv = b.Unary(OpCode::kRsqrt,
                            b.Binary(OpCode::kAdd, var, b.Constant(DType::kF32, 1e-5)));
    const auto at = b.i(0) * cols + b.i(1);
    b.Store(y, at, b.Binary(OpCode::kMul, b.Binary(OpCode::kSub, b.Load(x, at), mean), inv));
  }
  Tensor xt = RandomTensor(DType::kF32, {rows, inner, cols}, 7, -1, 1);
  for (int64_t i = 0; i < inner * cols; ++i) xt.data<float>()[2 * inner * cols + i] += 1000.0f;
  xt.data<float>()[4 * inner * cols + 11] = std::numeric_limits<float>::quiet_NaN();
  c.inputs["x"] = xt;
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  for (const char* name : {"row_welford_mean", "row_welford_var", "ln"}) {
    EXPECT_EQ(StatusOf(r[0], name).kind, VecStatus::Kind::kVectorized) << name;
  }
  EXPECT_THAT(StatusOf(r[0], "row_welford_var").reason,
              HasSubstr("welford_var as vector passes (sum, then squared deviations"));
}

// Long f32 sums (decision 0050) against double sums computed here, not by
// the code under test. Plain f32 lane accumulators go wrong at these sizes:
// a sum of ones stops at 2^24 per lane (3 * 2^27 ones gave 2^27 on 8
// lanes), and a sum of values below 1 loses them once a lane passes 2^24.
// Rows of 64 (or 67: masked tail steps) values repeated over a second
// reduction variable give 3 * 2^24 points per lane from a few bytes of
// input; one real 2^25-element buffer too. Row sums are vector accumulators along r1,
// column sums one accumulator per lane over both reduction variables,
// Welford mean/variance two vector passes.
TEST(Codegen, LongF32SumsMatchDoubleSums) {
  KILN_TEST_ISA_OR_SKIP(t);
  SKIP_IF_EMULATED(t);
  // 3 * 2^24 points per lane (a row of 64 repeated), 2^25 per column.
  const int64_t lanes = std::max(1, t.isa->vector_bytes / 4);
  const int64_t reps = (int64_t{3} << 18) * lanes;
  const int64_t flat = int64_t{1} << 25;
  const int64_t cols = 8, col_reps = int64_t{1} << 19;
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "long sums";
  LoopProgram& p = c.program;
  const int ones = p.AddBuffer("ones", DType::kF32, {67}, BufferKind::kInput);
  const int row = p.AddBuffer("row", DType::kF32, {64}, BufferKind::kInput);
  const int off = p.AddBuffer("off", DType::kF32, {64}, BufferKind::kInput);
  const int grid = p.AddBuffer("grid", DType::kF32, {64, cols}, BufferKind::kInput);
  const int big = p.AddBuffer("big", DType::kF32, {flat}, BufferKind::kInput);
  auto row_kernel = [&](const std::string& name, int buffer, int64_t width, ReduceKind rk) {
    const int y = p.AddBuffer(name, DType::kF32, {1}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {1}, {reps, width});
    b.Store(y, b.i(0), b.Reduce(rk, b.Load(buffer, b.r(1))));
  };
  row_kernel("sum_ones", ones, 64, ReduceKind::kSum);
  row_kernel("sum_ones_tail", ones, 67, ReduceKind::kSum);
  row_kernel("sum_row", row, 64, ReduceKind::kSum);
  row_kernel("mean_off", off, 64, ReduceKind::kWelfordMean);
  row_kernel("var_off", off, 64, ReduceKind::kWelfordVar);
  {
    const int y = p.AddBuffer("sum_cols", DType::kF32, {cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "sum_cols", {cols}, {col_reps, 64});
    b.Store(y, b.i(0), b.Reduce(ReduceKind::kSum, b.Load(grid, b.r(1) * cols + b.i(0))));
  }
  {
    const int y = p.AddBuffer("sum_big", DType::kF32, {1}, BufferKind::kOutput);
    KernelBuilder b(&p, "sum_big", {1}, {flat});
    b.Store(y, b.i(0), b.Reduce(ReduceKind::kSum, b.Load(big, b.r(0))));
  }
  c.inputs["ones"] = Tensor::FromVector<float>({67}, std::vector<float>(67, 1.0f));
  c.inputs["row"] = RandomTensor(DType::kF32, {64}, 31, 0, 1);
  Tensor offt = RandomTensor(DType::kF32, {64}, 32, -1, 1);
  for (int64_t k = 0; k < 64; ++k) offt.data<float>()[k] += 1000.0f;
  c.inputs["off"] = offt;
  c.inputs["grid"] = RandomTensor(DType::kF32, {64, cols}, 33, 0, 1);
  c.inputs["big"] = RandomTensor(DType::kF32, {flat}, 34, 0, 1);

  // The expected values, in double.
  auto dsum = [](const Tensor& x) {
    double s = 0;
    for (int64_t k = 0; k < x.num_elements(); ++k) s += x.data<float>()[k];
    return s;
  };
  const double d = static_cast<double>(reps);
  const double off_mean = dsum(offt) / 64;
  double off_var = 0;
  for (int64_t k = 0; k < 64; ++k) {
    const double dev = offt.data<float>()[k] - off_mean;
    off_var += dev * dev / 64;
  }
  std::vector<double> col_sums(cols, 0);
  for (int64_t k = 0; k < 64; ++k) {
    for (int64_t j = 0; j < cols; ++j) {
      col_sums[j] += c.inputs["grid"].data<float>()[k * cols + j];
    }
  }
  struct Expected {
    std::string name;
    int64_t element;
    double value;
    double rel;  // relative tolerance
  };
  std::vector<Expected> expected = {
      {"sum_ones", 0, 64 * d, 0},  // exact: every block and partial is exact
      {"sum_ones_tail", 0, 67 * d, 0},
      {"sum_row", 0, d * dsum(c.inputs["row"]), 1e-5},
      {"mean_off", 0, off_mean, 1e-5},
      {"var_off", 0, off_var, 1e-4},
      {"sum_big", 0, dsum(c.inputs["big"]), 1e-6},
  };
  for (int64_t j = 0; j < cols; ++j) {
    expected.push_back({"sum_cols", j, static_cast<double>(col_reps) * col_sums[j], 1e-5});
  }

  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  const CaseResult& res = (*r)[0];
  ASSERT_TRUE(res.error.empty()) << res.error;
  ASSERT_EQ(res.rc, 0);
  for (const Expected& e : expected) {
    auto it = res.outputs.find(e.name);
    ASSERT_NE(it, res.outputs.end()) << e.name;
    const double got = it->second.data<float>()[e.element];
    // The f32 output itself is rounded: half an f32 ulp more.
    const double tol = e.rel * std::fabs(e.value) + std::fabs(e.value) * 0x1p-24;
    EXPECT_NEAR(got, e.value, tol) << e.name << "[" << e.element << "]";
  }
  EXPECT_THAT(StatusOf(res, "sum_cols").reason, HasSubstr("per lane over i0"));
  EXPECT_THAT(StatusOf(res, "sum_big").reason, HasSubstr("vectorized over r0"));
}

// Index arithmetic as demote-index leaves it (i32): a pooling padding mask
// with a valid-position count along a 3-tap reduction (the form pool
// lowering used before its counts became closed forms) and along 45 taps,
// an iota with stride 3 cast to f32, an f32 iota, an index cast to a bool
// mask and one past int32 range (kept per lane). The in-range ones are Iota
// vectors, nothing per lane.
TEST(Codegen, DemotedIndexArithmeticVectorized) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "demoted index";
  LoopProgram& p = c.program;
  // 1-D max pool, kernel 3, stride 2, pad 1, over 5 channels-last lanes
  // (the vector variable) and 37 positions: a tail on every ISA.
  const int64_t w = 37, ch = 19, ow = 19;
  const int x = p.AddBuffer("x", DType::kF32, {w, ch}, BufferKind::kInput);
  {
    const int y = p.AddBuffer("pool", DType::kF32, {ow, ch}, BufferKind::kOutput);
    KernelBuilder b(&p, "pool", {ow, ch}, {3});
    const auto pos = b.i(0) * 2 + b.r(0) - 1;
    const int at = b.Index(pos, DType::kI32);
    const int valid = b.Binary(OpCode::kAnd,
                               b.Binary(OpCode::kGe, at, b.Constant(DType::kI32, 0)),
                               b.Binary(OpCode::kLt, at, b.Constant(DType::kI32, w)));
    const int v = b.Load(x, ir::loop::Max(ir::loop::Min(pos, w - 1), 0) * ch + b.i(1));
    const int count = b.Reduce(ReduceKind::kSum,
                               b.Select(valid, b.Constant(DType::kF32, 1), b.Constant(DType::kF32, 0)));
    const int m = b.Reduce(ReduceKind::kMax,
                           b.Select(valid, v, b.Constant(DType::kF32, -1e30)));
    b.Store(y, b.i(0) * ch + b.i(1), b.Binary(OpCode::kAdd, m, count));
  }
  {
    // The count alone over a reduction of 45 (vectorized along r0).
    const int y = p.AddBuffer("count", DType::kF32, {ow}, BufferKind::kOutput);
    KernelBuilder b(&p, "count", {ow}, {45});
    const int at = b.Index(b.i(0) * 3 + b.r(0) - 20, DType::kI32);
    const int valid = b.Binary(OpCode::kAnd,
                               b.Binary(OpCode::kGe, at, b.Constant(DType::kI32, 0)),
                               b.Binary(OpCode::kLt, at, b.Constant(DType::kI32, 50)));
    b.Store(y, b.i(0), b.Reduce(ReduceKind::kSum, b.Select(valid, b.Constant(DType::kF32, 1),
                                                            b.Constant(DType::kF32, 0))));
  }
  {
    const int64_t n = 101;
    const int y = p.AddBuffer("iota3", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, "iota3", {n});
    b.Store(y, b.i(0), b.Cast(b.Index(b.i(0) * 3 - 150, DType::kI32), DType::kF32));
    const int z = p.AddBuffer("iota_f", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder bf(&p, "iota_f", {n});
    bf.Store(z, bf.i(0), bf.Index(bf.i(0) * -7 + 5, DType::kF32));
    const int m = p.AddBuffer("iota_mask", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder bm(&p, "iota_mask", {n});
    bm.Store(m, bm.i(0), bm.Select(bm.Cast(bm.Index(bm.i(0) - 50, DType::kI32), DType::kBool), bm.Constant(DType::kF32, 2),
                                   bm.Constant(DType::kF32, 3)));
    const int big = p.AddBuffer("iota_big", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder bb(&p, "iota_big", {n});
    bb.Store(big, bb.i(0), bb.Index(bb.i(0) * 100000000, DType::kF32));
  }
  c.inputs["x"] = RandomTensor(DType::kF32, {w, ch}, 5, -3, 3);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  for (const char* name : {"pool", "count", "iota3", "iota_f", "iota_mask"}) {
    const VecStatus s = StatusOf(r[0], name);
    EXPECT_EQ(s.kind, VecStatus::Kind::kVectorized) << name << ": " << s.reason;
    EXPECT_THAT(s.reason, Not(HasSubstr("computed per lane"))) << name;
    if (std::string(name) != "pool") EXPECT_THAT(s.reason, Not(HasSubstr("scalar"))) << name;
  }
  // The 3-tap count does not depend on the vector variable: one scalar loop
  // per row beats a masked 3-lane vector step and a horizontal combine.
  EXPECT_THAT(StatusOf(r[0], "pool").reason,
              HasSubstr("scalar: does not depend on i1, computed once per row"));
  EXPECT_THAT(StatusOf(r[0], "iota_big").reason, HasSubstr("index op #0 computed per lane"));
}

// Argmax/argmin (first and last) and Welford mean/variance: the scalar
// path, with the reason recorded; f16 buffers beside them are vectorized.
TEST(Codegen, ScalarReductionsAndHalfBuffers) {
  KILN_TEST_ISA_OR_SKIP(t);
  SKIP_IF_EMULATED(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "scalar reductions";
  c.tol = kReduction;
  LoopProgram& p = c.program;
  const int64_t rows = 5, cols = 37;
  const int x = p.AddBuffer("x", DType::kF32, {rows, cols}, BufferKind::kInput);
  const int q = p.AddBuffer("q", DType::kF32, {rows, cols}, BufferKind::kInput);
  for (ReduceKind rk : {ReduceKind::kArgMax, ReduceKind::kArgMin, ReduceKind::kArgMaxLast,
                        ReduceKind::kArgMinLast}) {
    const std::string rn(ir::loop::ReduceKindName(rk));
    const int y = p.AddBuffer("y_" + rn, DType::kI64, {rows}, BufferKind::kOutput);
    KernelBuilder b(&p, rn, {rows}, {cols});
    b.Store(y, b.i(0), b.Reduce(rk, b.Load(q, b.i(0) * cols + b.r(0))));
  }
  for (ReduceKind rk : {ReduceKind::kWelfordMean, ReduceKind::kWelfordVar}) {
    const std::string rn(ir::loop::ReduceKindName(rk));
    const int y = p.AddBuffer("y_" + rn, DType::kF32, {rows}, BufferKind::kOutput);
    KernelBuilder b(&p, rn, {rows}, {cols});
    b.Store(y, b.i(0), b.Reduce(rk, b.Load(x, b.i(0) * cols + b.r(0))));
  }
  const int h = p.AddBuffer("h", DType::kF16, {rows, cols}, BufferKind::kInput);
  const int yh = p.AddBuffer("y_half", DType::kF16, {rows, cols}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "half_scale", {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    b.Store(yh, at, b.Binary(OpCode::kMul, b.Load(h, at), b.Constant(DType::kF16, 3.0)));
  }
  c.inputs["x"] = RandomTensor(DType::kF32, {rows, cols}, 1, -2, 2);
  // Ties and NaN for the arg reductions: values from a small set.
  Tensor qt = RandomTensor(DType::kI32, {rows, cols}, 2, 0, 4);
  Tensor qf(DType::kF32, {rows, cols});
  for (int64_t i = 0; i < qt.num_elements(); ++i) {
    qf.data<float>()[i] = static_cast<float>(qt.data<int32_t>()[i]);
  }
  qf.data<float>()[cols + 5] = std::numeric_limits<float>::quiet_NaN();
  qf.data<float>()[cols + 9] = std::numeric_limits<float>::quiet_NaN();
  c.inputs["q"] = qf;
  c.inputs["h"] = RandomTensor(DType::kF16, {rows, cols}, 3, -100, 100);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(StatusOf(r[0], "argmax").kind, VecStatus::Kind::kScalar);
  EXPECT_THAT(StatusOf(r[0], "argmax").reason, HasSubstr("dtype i64 is not vectorized"));
  EXPECT_EQ(StatusOf(r[0], "half_scale").kind, VecStatus::Kind::kVectorized);
}

// ---------------------------------------------------------------------------
// f16 / bf16 / i8 / u8 buffers: loads, stores and casts in vector code (f32
// and i32 lanes) against scalar code and the interpreter, bit for bit, on
// the rounding edges: ties to even, overflow to inf, subnormals, NaN, +-inf,
// +-0; float -> i8 / u8 out of range (truncate, saturate to int64, wrap).

// f32 values where f16 and bf16 rounding is decided: ties, overflow,
// subnormals and specials, then uniform values.
Tensor RoundingEdges(int64_t n, uint32_t seed) {
  Tensor t = RandomTensor(DType::kF32, {n}, seed, -70000, 70000);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> edges = {
      std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(), inf, -inf,
      0.0f, -0.0f,
      // f16: 65504 is the largest; 65520 is the tie above it (rounds to inf).
      65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e6f,
      // f16 ties at 1 (ulp 2^-10): down to even, up to even.
      1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-11f + 0x1p-20f,
      // f16 subnormals (unit 2^-24): half a unit ties to 0, 1.5 units to 2.
      0x1p-24f, 0x1p-25f, 3 * 0x1p-25f, 5 * 0x1p-25f, 0x1p-14f, 0x1.ff8p-15f, 1e-10f, -0x1p-25f,
      // bf16 ties at 1 (ulp 2^-7), the largest bf16, f32's max (rounds to
      // inf), an f32 subnormal.
      1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0x1.fep127f, std::numeric_limits<float>::max(),
      -std::numeric_limits<float>::max(), 1e-40f, 0x1.0101p0f,
      // float -> i8 / u8: truncation, out of range, beyond int32 and int64.
      127.9f, -128.9f, 128.0f, 255.5f, 256.0f, -1.5f, 300.7f, -300.2f, 3e9f, -5e18f, 1e20f};
  for (size_t i = 0; i < edges.size() && static_cast<int64_t>(i) < n; ++i) {
    t.data<float>()[i] = edges[i];
  }
  return t;
}

void AddNarrowBufferKernels(ProgramCase& c, int64_t n) {
  LoopProgram& p = c.program;
  const int x = p.AddBuffer("x", DType::kF32, {n}, BufferKind::kInput);
  const int h = p.AddBuffer("h", DType::kF16, {n}, BufferKind::kInput);
  const int bf = p.AddBuffer("bf", DType::kBF16, {n}, BufferKind::kInput);
  const int i8 = p.AddBuffer("i8", DType::kI8, {n}, BufferKind::kInput);
  const int u8 = p.AddBuffer("u8", DType::kU8, {n}, BufferKind::kInput);
  const int w = p.AddBuffer("w", DType::kI32, {n}, BufferKind::kInput);
  const int src[] = {x, h, bf, i8, u8, w};
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8, DType::kU8,
                         DType::kI32};
  // Every cast between these dtypes (and bool), each stored as its own
  // dtype: a load, a cast and a store per kernel.
  for (int a = 0; a < 6; ++a) {
    for (DType to : {DType::kF32, DType::kF16, DType::kBF16, DType::kI8, DType::kU8, DType::kI32,
                     DType::kBool}) {
      const std::string name =
          absl::StrCat("cast_", ir::DTypeName(types[a]), "_", ir::DTypeName(to));
      const int y = p.AddBuffer("y_" + name, to, {n}, BufferKind::kOutput);
      KernelBuilder b(&p, name, {n});
      b.Store(y, b.i(0), b.Cast(b.Load(src[a], b.i(0)), to));
    }
  }
  // f16 / bf16 arithmetic computes in f32, rounds once at the store.
  for (int a : {1, 2}) {
    const std::string name = absl::StrCat("scale_", ir::DTypeName(types[a]));
    const int y = p.AddBuffer("y_" + name, types[a], {n}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {n});
    const int v = b.Load(src[a], b.i(0));
    b.Store(y, b.i(0), b.Binary(OpCode::kAdd, b.Binary(OpCode::kMul, v, b.Constant(types[a], 3.0)),
                                b.Constant(types[a], 0.1)));
  }
  // A select on u8 and i8 values, stored narrow.
  for (int a : {3, 4}) {
    const std::string name = absl::StrCat("select_", ir::DTypeName(types[a]));
    const int y = p.AddBuffer("y_" + name, types[a], {n}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {n});
    const int pos = b.Binary(OpCode::kGt, b.Load(x, b.i(0)), b.Constant(DType::kF32, 0));
    b.Store(y, b.i(0), b.Select(pos, b.Load(src[a], b.i(0)), b.Cast(b.Load(w, b.i(0)), types[a])));
  }
  c.inputs["x"] = RoundingEdges(n, 21);
  // The narrow inputs hold the edges rounded by the interpreter's own
  // conversion (ties, NaN, inf, subnormals as their dtype has them).
  Tensor ht(DType::kF16, {n}), bt(DType::kBF16, {n});
  const Tensor& xt = c.inputs["x"];
  for (int64_t i = 0; i < n; ++i) {
    ht.data<ir::Float16>()[i] = ir::FloatToHalf(xt.data<float>()[i]);
    bt.data<ir::BFloat16>()[i] = ir::FloatToBFloat16(xt.data<float>()[i]);
  }
  ht.data<ir::Float16>()[n - 1].bits = 0x0001;  // the smallest f16 subnormal
  ht.data<ir::Float16>()[n - 2].bits = 0x7c01;  // a signaling NaN
  bt.data<ir::BFloat16>()[n - 1].bits = 0x0001;
  c.inputs["h"] = ht;
  c.inputs["bf"] = bt;
  c.inputs["i8"] = RandomTensor(DType::kI8, {n}, 22, -128, 127);
  c.inputs["u8"] = RandomTensor(DType::kU8, {n}, 23, 0, 255);
  Tensor wt = RandomTensor(DType::kI32, {n}, 24, -100000, 100000);
  wt.data<int32_t>()[0] = std::numeric_limits<int32_t>::min();
  wt.data<int32_t>()[1] = std::numeric_limits<int32_t>::max();
  wt.data<int32_t>()[2] = 16777217;  // rounds in f32
  c.inputs["w"] = wt;
}

TEST(Codegen, NarrowBuffersLoadStoreAndCastExactly) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(2);
  const int64_t n = 131;  // full vector steps and a tail on every target
  for (int v = 0; v < 2; ++v) {
    cases[v].name = v == 0 ? "narrow buffers, vector code" : "narrow buffers, scalar code";
    cases[v].options.vectorize = v == 0;
    cases[v].tol = interp::Tolerance{0, 0, {}};
    AddNarrowBufferKernels(cases[v], n);
  }
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 2u);
  int vectorized = 0;
  for (const EmittedKernel& k : r[0].emitted.kernels) {
    EXPECT_EQ(k.vec.kind, VecStatus::Kind::kVectorized) << k.name << ": " << k.vec.reason;
    for (const OpDecision& d : k.ops) {
      EXPECT_EQ(d.kind == OpVec::kPerLane, false) << k.name << ": " << d.reason;
    }
    vectorized += k.vec.kind == VecStatus::Kind::kVectorized;
  }
  EXPECT_EQ(vectorized, 6 * 7 + 4);
  // The vector and scalar runs agree bit for bit (NaN payloads included
  // where both round the same NaN).
  for (const auto& [name, got] : r[0].outputs) {
    const Tensor& scalar = r[1].outputs.at(name);
    ASSERT_EQ(got.byte_size(), scalar.byte_size()) << name;
    if (ir::IsLowPrecisionFloat(got.dtype())) {
      for (int64_t i = 0; i < n; ++i) {
        const double a = got.GetAsDouble(i), b = scalar.GetAsDouble(i);
        EXPECT_TRUE((std::isnan(a) && std::isnan(b)) ||
                    std::memcmp(static_cast<const char*>(got.raw_data()) + 2 * i,
                                static_cast<const char*>(scalar.raw_data()) + 2 * i, 2) == 0)
            << name << "[" << i << "]: vector " << a << ", scalar " << b;
      }
    }
  }
}

// QuantizeLinear (per axis u8, per tensor i8), DequantizeLinear (per axis
// u8, per tensor i8) and DynamicQuantizeLinear (on a [1,C,1,1] tensor too),
// lowered: every kernel vectorized with no per-lane op, vector and scalar
// code equal to the loop interpreter bit for bit (ties, saturation, a zero
// scale).
TEST(Codegen, QuantizationKernelsVectorized) {
  KILN_TEST_ISA_OR_SKIP(t);
  const char* text = R"(
graph g(%x: f32[2,3,37], %q: u8[2,3,37], %r: i8[2,3,37], %e: f32[1,40,1,1], %z: f32[3,5])
    -> (%qu, %qi, %du, %di, %ey, %es, %ez, %zy, %zs, %zz) opset 13 {
  %s3 = constant f32[3] [0.05, 0.5, 0.003]
  %u3 = constant u8[3] [128, 0, 255]
  %s1 = constant f32[] 0.25
  %i1 = constant i8[] -7
  %qu = QuantizeLinear(%x, %s3, %u3) {axis=1} : u8[2,3,37]
  %qi = QuantizeLinear(%x, %s1, %i1) : i8[2,3,37]
  %du = DequantizeLinear(%q, %s3, %u3) {axis=1} : f32[2,3,37]
  %di = DequantizeLinear(%r, %s1, %i1) : f32[2,3,37]
  %ey, %es, %ez = DynamicQuantizeLinear(%e) : u8[1,40,1,1], f32[], u8[]
  %zy, %zs, %zz = DynamicQuantizeLinear(%z) : u8[3,5], f32[], u8[]
}
)";
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<ir::loop::LoopModule> m = lowering::LowerGraph(*g);
  ASSERT_TRUE(m.ok()) << m.status();
  // x: ties of x / scale (0.5 * scale steps), values past both ends of u8 and
  // i8, infinities; the rest random.
  Tensor x = RandomTensor(DType::kF32, {2, 3, 37}, 31, -40, 40);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> edges = {0.125f, -0.125f, 0.375f, 2.5f * 0.05f, 3.5f * 0.05f, 1e6f,
                                    -1e6f, inf, -inf, 127.5f * 0.25f, -130 * 0.25f, 0};
  for (size_t i = 0; i < edges.size(); ++i) {
    x.data<float>()[i] = edges[i];
    x.data<float>()[111 + i] = edges[i];
    x.data<float>()[148 + i] = edges[i];
  }
  std::vector<Tensor> in = {x, RandomTensor(DType::kU8, {2, 3, 37}, 32, 0, 255),
                            RandomTensor(DType::kI8, {2, 3, 37}, 33, -128, 127),
                            RandomTensor(DType::kF32, {1, 40, 1, 1}, 34, -3, 5),
                            Tensor(DType::kF32, {3, 5})};  // all zero: scale 0
  std::memset(in[4].raw_data(), 0, in[4].byte_size());
  std::vector<ProgramCase> cases(2);
  for (int v = 0; v < 2; ++v) {
    cases[v].name = v == 0 ? "quantization, vector code" : "quantization, scalar code";
    cases[v].options.vectorize = v == 0;
    cases[v].tol = interp::Tolerance{0, 0, {}};
    cases[v].program = m->program;
    for (size_t j = 0; j < m->inputs.size(); ++j) {
      cases[v].inputs[m->program.buffers[m->inputs[j]].name] = in[j];
    }
    for (const auto& [b, data] : m->constants) {
      cases[v].inputs[m->program.buffers[b].name] = *data;
    }
  }
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_FALSE(r[0].emitted.kernels.empty());
  for (const EmittedKernel& k : r[0].emitted.kernels) {
    EXPECT_EQ(k.vec.kind, VecStatus::Kind::kVectorized) << k.name << ": " << k.vec.reason;
    for (const OpDecision& d : k.ops) {
      EXPECT_NE(d.kind, OpVec::kPerLane) << k.name << ": " << d.reason;
    }
  }
  for (const auto& [name, got] : r[0].outputs) {
    const Tensor& scalar = r[1].outputs.at(name);
    ASSERT_EQ(got.byte_size(), scalar.byte_size()) << name;
    EXPECT_EQ(std::memcmp(got.raw_data(), scalar.raw_data(), got.byte_size()), 0) << name;
  }
}

// Table lookups (what tabulate-8bit-functions writes): load_indirect of an
// i32 / f32 table at an index computed per lane, one hardware gather per
// vector step: u8 and i8 indices (negative ones wrap), a strided table at a
// per-row offset, a lookup inside a reduction. Vector and scalar code equal
// the loop interpreter bit for bit (a max reduction: exact in any order);
// an index outside [-extent, extent) in a vector step fails the entry as the
// scalar code does.
void AddTableLookups(LoopProgram& p, std::map<std::string, Tensor>& in, int64_t index_offset) {
  const int64_t rows = 3, cols = 67;
  const int xu = p.AddBuffer("xu", DType::kU8, {rows, cols}, BufferKind::kInput);
  const int xi = p.AddBuffer("xi", DType::kI8, {rows, cols}, BufferKind::kInput);
  const int tbl = p.AddBuffer("tbl", DType::kI32, {256}, BufferKind::kConstant);
  const int ftbl = p.AddBuffer("ftbl", DType::kF32, {300}, BufferKind::kConstant);
  {
    const int y = p.AddBuffer("y_u8", DType::kU8, {rows, cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "lookup_u8", {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    int n = b.Cast(b.Load(xu, at), DType::kI32);
    if (index_offset != 0) n = b.Binary(OpCode::kAdd, n, b.Constant(DType::kI32, index_offset));
    b.Store(y, at, b.Cast(b.LoadIndirect(tbl, ir::loop::Const(0), n, 256, 1), DType::kU8));
  }
  {
    const int y = p.AddBuffer("y_i8", DType::kI8, {rows, cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "lookup_i8", {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    const int n = b.Cast(b.Load(xi, at), DType::kI32);
    b.Store(y, at, b.Cast(b.LoadIndirect(tbl, ir::loop::Const(0), n, 256, 1), DType::kI8));
  }
  {
    // Row i0 reads ftbl[i0 + 2 * n], n in [-128, 128) wrapped to [0, 128).
    const int y = p.AddBuffer("y_f", DType::kF32, {rows, cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "lookup_f32_strided", {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    const int n = b.Cast(b.Load(xi, at), DType::kI32);
    b.Store(y, at, b.LoadIndirect(ftbl, b.i(0), n, 128, 2));
  }
  {
    const int y = p.AddBuffer("y_max", DType::kF32, {cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "lookup_max", {cols}, {rows});
    const int n = b.Cast(b.Load(xu, b.r(0) * cols + b.i(0)), DType::kI32);
    b.Store(y, b.i(0),
            b.Reduce(ReduceKind::kMax, b.LoadIndirect(ftbl, ir::loop::Const(0), n, 256, 1)));
  }
  in["xu"] = RandomTensor(DType::kU8, {rows, cols}, 51, 0, 255);
  in["xi"] = RandomTensor(DType::kI8, {rows, cols}, 52, -128, 127);
  in["tbl"] = RandomTensor(DType::kI32, {256}, 53, -1000, 1000);
  in["ftbl"] = RandomTensor(DType::kF32, {300}, 54, -3, 3);
}

TEST(Codegen, TableLookupsGatherInHardware) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(3);
  for (int v = 0; v < 2; ++v) {
    cases[v].name = v == 0 ? "table lookups, vector code" : "table lookups, scalar code";
    cases[v].options.vectorize = v == 0;
    cases[v].tol = interp::Tolerance{0, 0, {}};
    AddTableLookups(cases[v].program, cases[v].inputs, 0);
  }
  cases[2].name = "table index out of range";
  AddTableLookups(cases[2].program, cases[2].inputs, 100);  // xu + 100 reaches 355
  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectMatchesInterpreter(cases[0], (*r)[0]);
  ExpectMatchesInterpreter(cases[1], (*r)[1]);
  EXPECT_EQ((*r)[0].rc, 0);
  EXPECT_EQ((*r)[1].rc, 0);
  EXPECT_EQ((*r)[2].rc, ir::loop::kErrorIndexOutOfRange);
  EXPECT_EQ(ir::loop::RunLoopProgram(cases[2].program, cases[2].inputs).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const EmittedKernel& k : (*r)[0].emitted.kernels) {
    EXPECT_EQ(k.vec.kind, VecStatus::Kind::kVectorized) << k.name << ": " << k.vec.reason;
    EXPECT_THAT(k.vec.reason, HasSubstr("gathered in hardware")) << k.name;
    int gathers = 0;
    for (const OpDecision& d : k.ops) {
      EXPECT_NE(d.kind, OpVec::kPerLane) << k.name << ": " << d.reason;
      gathers += d.kind == OpVec::kVector && absl::StrContains(d.reason, "hardware gather");
    }
    EXPECT_EQ(gathers, 1) << k.name;
  }
  for (const auto& [name, got] : (*r)[0].outputs) {
    const Tensor& scalar = (*r)[1].outputs.at(name);
    ASSERT_EQ(got.byte_size(), scalar.byte_size()) << name;
    EXPECT_EQ(std::memcmp(got.raw_data(), scalar.raw_data(), got.byte_size()), 0) << name;
  }
}

// f64 kernels (every value f64, as exporters' ReduceMean / LayerNorm
// statistics): f64 lanes, f32-only math lane by lane, reductions along the
// row and across rows; a kernel mixing f64 and f32 stays scalar.
TEST(Codegen, F64KernelsVectorized) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "f64 kernels";
  c.tol = interp::Tolerance{1e-12, 1e-12, {}};  // f64 sums in another order
  LoopProgram& p = c.program;
  const int64_t rows = 5, cols = 67;
  const int x = p.AddBuffer("x", DType::kF64, {rows, cols}, BufferKind::kInput);
  const int xf = p.AddBuffer("xf", DType::kF32, {rows, cols}, BufferKind::kInput);
  for (ReduceKind rk : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin, ReduceKind::kProd}) {
    const std::string name(ir::loop::ReduceKindName(rk));
    const int y = p.AddBuffer("row_" + name, DType::kF64, {rows}, BufferKind::kOutput);
    KernelBuilder b(&p, "row_" + name, {rows}, {cols});
    b.Store(y, b.i(0), b.Reduce(rk, b.Load(x, b.i(0) * cols + b.r(0))));
    const int yc = p.AddBuffer("col_" + name, DType::kF64, {cols}, BufferKind::kOutput);
    KernelBuilder bc(&p, "col_" + name, {cols}, {rows});
    bc.Store(yc, bc.i(0), bc.Reduce(rk, bc.Load(x, bc.r(0) * cols + bc.i(0))));
  }
  {  // mean and centred square, the ReduceMean / LayerNorm pattern
    const int y = p.AddBuffer("centred", DType::kF64, {rows, cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "centred", {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    const int d = b.Binary(OpCode::kSub, b.Load(x, at), b.Constant(DType::kF64, 0.25));
    const int e = b.Unary(OpCode::kExp, b.Binary(OpCode::kMul, d, d));
    b.Store(y, at, b.Binary(OpCode::kDiv, e, b.Unary(OpCode::kSqrt, b.Unary(OpCode::kAbs, d))));
  }
  {  // f32 in, f32 out, f64 in between: f32 values on f64 lanes
    const int y = p.AddBuffer("f32_f64", DType::kF32, {rows, cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "f32_f64", {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    const int s = b.Binary(OpCode::kAdd, b.Load(x, at), b.Cast(b.Load(xf, at), DType::kF64));
    const int f = b.Binary(OpCode::kMul, b.Cast(s, DType::kF32), b.Load(xf, at));
    b.Store(y, at, b.Unary(OpCode::kExp, f));
  }
  {  // ReduceMean in f64 of an f32 input, as some exporters write it
    const int y = p.AddBuffer("mean_f32", DType::kF32, {rows}, BufferKind::kOutput);
    KernelBuilder b(&p, "mean_f32", {rows}, {cols});
    const int v = b.Cast(b.Load(xf, b.i(0) * cols + b.r(0)), DType::kF64);
    const int m = b.Binary(OpCode::kDiv, b.Reduce(ReduceKind::kSum, v),
                           b.Constant(DType::kF64, static_cast<double>(cols)));
    b.Store(y, b.i(0), b.Cast(m, DType::kF32));
  }
  {
    const int w = p.AddBuffer("w", DType::kI32, {rows, cols}, BufferKind::kInput);
    const int y = p.AddBuffer("mixed", DType::kF64, {rows, cols}, BufferKind::kOutput);
    KernelBuilder b(&p, "mixed", {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    b.Store(y, at, b.Binary(OpCode::kAdd, b.Load(x, at), b.Cast(b.Load(w, at), DType::kF64)));
    c.inputs["w"] = RandomTensor(DType::kI32, {rows, cols}, 43, -100, 100);
  }
  c.inputs["x"] = RandomTensor(DType::kF64, {rows, cols}, 41, -1.5, 1.5, /*specials=*/false);
  Tensor& xt = c.inputs["x"];
  xt.data<double>()[3] = std::numeric_limits<double>::quiet_NaN();
  xt.data<double>()[cols + 4] = std::numeric_limits<double>::infinity();
  c.inputs["xf"] = RandomTensor(DType::kF32, {rows, cols}, 42, -1, 1);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  for (const EmittedKernel& k : r[0].emitted.kernels) {
    if (k.name == "mixed") {
      EXPECT_EQ(k.vec.kind, VecStatus::Kind::kScalar) << k.name;
      EXPECT_THAT(k.vec.reason, HasSubstr("f64 is not vectorized beside other dtypes"));
      continue;
    }
    EXPECT_EQ(k.vec.kind, VecStatus::Kind::kVectorized) << k.name << ": " << k.vec.reason;
  }
}

// i8 / u8 element-wise arithmetic in i32 lanes (Add/Sub/Mul/Div/Mod/Neg/
// Abs/Sign/Max/Min, Clip and Relu patterns, comparisons), every result
// wrapped to its dtype: vectorized, and vector and scalar code equal the
// interpreter bit for bit on the whole range (overflow, -128, division).
TEST(Codegen, NarrowIntegerArithmeticVectorized) {
  KILN_TEST_ISA_OR_SKIP(t);
  const int64_t n = 259;  // full vector steps and a tail on every target
  std::vector<ProgramCase> cases(2);
  int kernels = 0;
  for (int v = 0; v < 2; ++v) {
    ProgramCase& c = cases[v];
    c.name = v == 0 ? "i8/u8 arithmetic, vector code" : "i8/u8 arithmetic, scalar code";
    c.options.vectorize = v == 0;
    c.tol = interp::Tolerance{0, 0, {}};
    LoopProgram& p = c.program;
    kernels = 0;
    for (DType dt : {DType::kI8, DType::kU8}) {
      const std::string dn(ir::DTypeName(dt));
      const int a = p.AddBuffer("a_" + dn, dt, {n}, BufferKind::kInput);
      const int bb = p.AddBuffer("b_" + dn, dt, {n}, BufferKind::kInput);
      for (OpCode op : {OpCode::kAdd, OpCode::kSub, OpCode::kMul, OpCode::kDiv, OpCode::kMod,
                        OpCode::kMax, OpCode::kMin}) {
        const std::string name = absl::StrCat(ir::loop::OpCodeName(op), "_", dn);
        const int y = p.AddBuffer("y_" + name, dt, {n}, BufferKind::kOutput);
        KernelBuilder b(&p, name, {n});
        b.Store(y, b.i(0), b.Binary(op, b.Load(a, b.i(0)), b.Load(bb, b.i(0))));
        ++kernels;
      }
      for (OpCode op : {OpCode::kNeg, OpCode::kAbs, OpCode::kSign}) {
        const std::string name = absl::StrCat(ir::loop::OpCodeName(op), "_", dn);
        const int y = p.AddBuffer("y_" + name, dt, {n}, BufferKind::kOutput);
        KernelBuilder b(&p, name, {n});
        b.Store(y, b.i(0), b.Unary(op, b.Load(a, b.i(0))));
        ++kernels;
      }
      {  // Clip(a + b, 3, 100), Relu(a - b), chained: every op wraps
        const std::string name = absl::StrCat("clip_relu_", dn);
        const int y = p.AddBuffer("y_" + name, dt, {n}, BufferKind::kOutput);
        KernelBuilder b(&p, name, {n});
        const int x = b.Load(a, b.i(0)), w = b.Load(bb, b.i(0));
        const int clip = b.Binary(OpCode::kMin,
                                  b.Binary(OpCode::kMax, b.Binary(OpCode::kAdd, x, w),
                                           b.Constant(dt, 3)),
                                  b.Constant(dt, 100));
        const int relu = b.Binary(OpCode::kMax, b.Binary(OpCode::kSub, x, w), b.Constant(dt, 0));
        b.Store(y, b.i(0), b.Binary(OpCode::kMul, b.Binary(OpCode::kAdd, clip, relu), w));
        ++kernels;
      }
      {  // a comparison of wrapped values selects between them
        const std::string name = absl::StrCat("cmp_", dn);
        const int y = p.AddBuffer("y_" + name, dt, {n}, BufferKind::kOutput);
        KernelBuilder b(&p, name, {n});
        const int s = b.Binary(OpCode::kAdd, b.Load(a, b.i(0)), b.Load(bb, b.i(0)));
        b.Store(y, b.i(0), b.Select(b.Binary(OpCode::kLt, s, b.Load(a, b.i(0))), s,
                                    b.Load(bb, b.i(0))));
        ++kernels;
      }
      const double lo = dt == DType::kI8 ? -128 : 0, hi = dt == DType::kI8 ? 127 : 255;
      Tensor at = RandomTensor(dt, {n}, 61, lo, hi);
      Tensor bt = RandomTensor(dt, {n}, 62, lo, hi);
      for (int64_t i = 0; i < n; ++i) {  // no division by zero
        if (bt.GetAsInt64(i) == 0) {
          if (dt == DType::kI8) bt.data<int8_t>()[i] = 7; else bt.data<uint8_t>()[i] = 7;
        }
      }
      if (dt == DType::kI8) {  // -128 / -1, -128 * -1, |-128|, 127 + 127
        at.data<int8_t>()[0] = -128; bt.data<int8_t>()[0] = -1;
        at.data<int8_t>()[1] = 127; bt.data<int8_t>()[1] = 127;
        at.data<int8_t>()[2] = -128; bt.data<int8_t>()[2] = -128;
      } else {
        at.data<uint8_t>()[0] = 255; bt.data<uint8_t>()[0] = 255;
        at.data<uint8_t>()[1] = 0; bt.data<uint8_t>()[1] = 1;
      }
      c.inputs["a_" + dn] = at;
      c.inputs["b_" + dn] = bt;
    }
  }
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(static_cast<int>(r[0].emitted.kernels.size()), kernels);
  for (const EmittedKernel& k : r[0].emitted.kernels) {
    EXPECT_EQ(k.vec.kind, VecStatus::Kind::kVectorized) << k.name << ": " << k.vec.reason;
  }
  for (const auto& [name, got] : r[0].outputs) {
    const Tensor& scalar = r[1].outputs.at(name);
    ASSERT_EQ(got.byte_size(), scalar.byte_size()) << name;
    EXPECT_EQ(std::memcmp(got.raw_data(), scalar.raw_data(), got.byte_size()), 0) << name;
  }
}

// Kernels computing in f64 beside index, integer and bool ops and f16 /
// bf16 values (a Resize's f64 weights of an fp16 or quantized model): the
// ops that depend on the vector variable run on f64 lanes (iota and per-lane
// index ops, gathered loads, f16 / bf16 loads, casts and stores, scattered
// stores), the others as scalars; equal to the interpreter and to scalar
// code bit for bit.
TEST(Codegen, MixedF64KernelsOnF64Lanes) {
  KILN_TEST_ISA_OR_SKIP(t);
  const int64_t rows = 3, cols = 67;
  std::vector<ProgramCase> cases(2);
  for (int v = 0; v < 2; ++v) {
    ProgramCase& c = cases[v];
    c.name = v == 0 ? "mixed f64, vector code" : "mixed f64, scalar code";
    c.options.vectorize = v == 0;
    c.tol = interp::Tolerance{0, 0, {}};
    LoopProgram& p = c.program;
    const int x = p.AddBuffer("x", DType::kF32, {rows, cols}, BufferKind::kInput);
    const int h = p.AddBuffer("h", DType::kF16, {rows, cols}, BufferKind::kInput);
    const int bh = p.AddBuffer("bh", DType::kBF16, {rows, cols}, BufferKind::kInput);
    // The linear-resize pattern: weights from index ops in f64, taps at
    // floor(3 * i1 / 4) (a per-lane index) and i1, rounded to f32, then f16.
    auto resize_like = [&](KernelBuilder& b, int32_t row_weight) {
      const int w = b.Binary(OpCode::kMul, b.Cast(b.Index(b.i(1)), DType::kF64),
                             b.Constant(DType::kF64, 0.015625));
      const int tap = b.Cast(b.Index(FloorDiv(b.i(1) * 3, 4)), DType::kF64);
      const int a = b.Cast(b.Load(x, b.i(0) * cols + FloorDiv(b.i(1) * 3, 4)), DType::kF64);
      const int c0 = b.Cast(b.Load(x, b.i(0) * cols + b.i(1)), DType::kF64);
      int sum = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMul, w, a),
                         b.Binary(OpCode::kMul, b.Binary(OpCode::kSub, b.Constant(DType::kF64, 1), w), c0));
      sum = b.Binary(OpCode::kAdd, b.Binary(OpCode::kMul, sum, row_weight),
                     b.Binary(OpCode::kMul, tap, b.Constant(DType::kF64, 1e-3)));
      return b.Cast(sum, DType::kF32);
    };
    {
      const int y = p.AddBuffer("y_f16", DType::kF16, {rows, cols}, BufferKind::kOutput);
      KernelBuilder b(&p, "resize_f16", {rows, cols});
      // A lane-invariant bool select and i64 arithmetic on the row.
      const int r = b.Binary(OpCode::kAdd, b.Index(b.i(0)), b.Constant(DType::kI64, 1));
      const int first = b.Binary(OpCode::kLt, r, b.Constant(DType::kI64, 2));
      const int rw = b.Select(first, b.Constant(DType::kF64, 0.75), b.Cast(r, DType::kF64));
      b.Store(y, b.i(0) * cols + b.i(1), b.Cast(resize_like(b, rw), DType::kF16));
    }
    {
      const int y = p.AddBuffer("y_bf16", DType::kBF16, {rows, cols}, BufferKind::kOutput);
      KernelBuilder b(&p, "resize_bf16", {rows, cols});
      const int rw = b.Cast(b.Index(b.i(0) * 2 + 1, DType::kI32), DType::kF64);
      b.Store(y, b.i(0) * cols + b.i(1), b.Cast(resize_like(b, rw), DType::kBF16));
    }
    {  // f16 and bf16 loads on f64 lanes, f16 stored transposed (scattered)
      const int y = p.AddBuffer("y_t", DType::kF16, {cols, rows}, BufferKind::kOutput);
      KernelBuilder b(&p, "narrow_in_scatter", {rows, cols});
      const auto at = b.i(0) * cols + b.i(1);
      const int s = b.Binary(OpCode::kMul, b.Cast(b.Load(h, at), DType::kF64),
                             b.Cast(b.Load(bh, at), DType::kF64));
      const int q = b.Binary(OpCode::kDiv, s, b.Cast(b.Index(b.i(0) + 1), DType::kF64));
      b.Store(y, b.i(1) * rows + b.i(0), b.Cast(q, DType::kF16));
    }
    c.inputs["x"] = RandomTensor(DType::kF32, {rows, cols}, 51, -4, 4);
    c.inputs["x"].data<float>()[5] = 70000.0f;  // beyond f16: inf
    c.inputs["x"].data<float>()[6] = 1e-6f;     // an f16 subnormal
    c.inputs["h"] = RandomTensor(DType::kF16, {rows, cols}, 52, -2, 2);
    c.inputs["bh"] = RandomTensor(DType::kBF16, {rows, cols}, 53, -300, 300);
  }
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].emitted.kernels.size(), 3u);
  for (const EmittedKernel& k : r[0].emitted.kernels) {
    EXPECT_EQ(k.vec.kind, VecStatus::Kind::kVectorized) << k.name << ": " << k.vec.reason;
    EXPECT_THAT(k.vec.reason, HasSubstr("on f64 lanes")) << k.name;
  }
  for (const auto& [name, got] : r[0].outputs) {
    const Tensor& scalar = r[1].outputs.at(name);
    ASSERT_EQ(got.byte_size(), scalar.byte_size()) << name;
    EXPECT_EQ(std::memcmp(got.raw_data(), scalar.raw_data(), got.byte_size()), 0) << name;
  }
}

// Reductions over f16 and bf16 rows (a ReduceMean / LayerNorm statistic of
// an fp16 model) vectorized along the row, accumulating in f32 lanes.
TEST(Codegen, HalfAndBFloat16ReductionsVectorized) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "f16 / bf16 reductions";
  c.tol = interp::Tolerance{1e-5, 1e-5, {}};
  LoopProgram& p = c.program;
  const int64_t rows = 3, cols = 77;
  for (DType dt : {DType::kF16, DType::kBF16}) {
    const std::string dn(ir::DTypeName(dt));
    const int x = p.AddBuffer("x_" + dn, dt, {rows, cols}, BufferKind::kInput);
    for (ReduceKind rk : {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kWelfordVar}) {
      const std::string name = absl::StrCat(ir::loop::ReduceKindName(rk), "_", dn);
      const int y = p.AddBuffer("y_" + name, DType::kF32, {rows}, BufferKind::kOutput);
      KernelBuilder b(&p, name, {rows}, {cols});
      const int v = b.Cast(b.Load(x, b.i(0) * cols + b.r(0)), DType::kF32);
      b.Store(y, b.i(0), b.Reduce(rk, v));
    }
    c.inputs["x_" + dn] = RandomTensor(dt, {rows, cols}, 31, -3, 3);
  }
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  for (const EmittedKernel& k : r[0].emitted.kernels) {
    EXPECT_NE(k.vec.kind, VecStatus::Kind::kScalar) << k.name << ": " << k.vec.reason;
  }
}

// ---------------------------------------------------------------------------
// Memory access patterns.

TEST(Codegen, TransposeAndGatherLikeLoads) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "access patterns";
  LoopProgram& p = c.program;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{17, 33}, {1, 7}, {64, 3}}) {
    const std::string sfx = absl::StrCat("_", rows, "x", cols);
    const int x = p.AddBuffer("x" + sfx, DType::kF32, {rows, cols}, BufferKind::kInput);
    const int y = p.AddBuffer("t" + sfx, DType::kF32, {cols, rows}, BufferKind::kOutput);
    KernelBuilder b(&p, "transpose" + sfx, {cols, rows});
    b.Store(y, b.i(0) * rows + b.i(1), b.Load(x, b.i(1) * cols + b.i(0)));
    c.inputs["x" + sfx] = RandomTensor(DType::kF32, {rows, cols}, 5, -1, 1);
  }
  // Non-affine loads: a permutation (i*7 mod 101) and an upsample (i // 3).
  const int64_t n = 101;
  const int src = p.AddBuffer("src", DType::kF32, {n}, BufferKind::kInput);
  const int perm = p.AddBuffer("perm", DType::kF32, {n}, BufferKind::kOutput);
  const int up = p.AddBuffer("up", DType::kF32, {3 * n}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "permute", {n});
    b.Store(perm, b.i(0), b.Unary(OpCode::kNeg, b.Load(src, ir::loop::Mod(b.i(0) * 7, n))));
  }
  {
    KernelBuilder b(&p, "upsample", {3 * n});
    b.Store(up, b.i(0), b.Load(src, ir::loop::FloorDiv(b.i(0), 3)));
  }
  // A kernel reading the buffer it writes stays scalar (in-place update).
  const int acc = p.AddBuffer("acc", DType::kF32, {n}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "init", {n});
    b.Store(acc, b.i(0), b.Load(src, b.i(0)));
  }
  {
    KernelBuilder b(&p, "in_place", {n});
    b.Store(acc, b.i(0), b.Binary(OpCode::kMul, b.Load(acc, b.i(0)), b.Load(acc, b.i(0))));
  }
  c.inputs["src"] = RandomTensor(DType::kF32, {n}, 6, -1, 1);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  // The 2-D transposes are tiled (the 1x7 one has nothing to tile with).
  EXPECT_EQ(StatusOf(r[0], "transpose_17x33").kind, VecStatus::Kind::kTiled);
  EXPECT_THAT(StatusOf(r[0], "transpose_17x33").reason,
              HasSubstr("load of 'x_17x33' transposed in lanes x lanes tiles over i0 x i1"));
  EXPECT_EQ(StatusOf(r[0], "transpose_64x3").kind, VecStatus::Kind::kTiled);
  const VecStatus& g = StatusOf(r[0], "permute");
  EXPECT_EQ(g.kind, VecStatus::Kind::kVectorized);
  EXPECT_THAT(g.reason, HasSubstr("gathered load of 'src' (not affine in i0)"));
  EXPECT_THAT(StatusOf(r[0], "upsample").reason, HasSubstr("not affine in i0"));
  EXPECT_EQ(StatusOf(r[0], "in_place").kind, VecStatus::Kind::kScalar);
  EXPECT_THAT(StatusOf(r[0], "in_place").reason, HasSubstr("reads buffer 'acc' that it writes"));
}

// Loads and stores with a constant stride in the vector variable are
// hardware gathers / scatters (GatherIndex / ScatterIndex): strides 3, -2
// (a reversal) and 3136 (NCHW channel stride), an i32 buffer, extents with
// tails, a strided load inside a reduction along its own variable, and a
// strided store with a tail.
TEST(Codegen, StridedGathersAndScatters) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "strided";
  LoopProgram& p = c.program;
  const int64_t n = 37;
  const int x = p.AddBuffer("x", DType::kF32, {n, 3}, BufferKind::kInput);
  const int xi = p.AddBuffer("xi", DType::kI32, {n, 3}, BufferKind::kInput);
  const int big = p.AddBuffer("big", DType::kF32, {19, 3136}, BufferKind::kInput);
  {
    const int y = p.AddBuffer("stride3", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, "stride3", {n});
    b.Store(y, b.i(0), b.Unary(OpCode::kExp, b.Load(x, b.i(0) * 3 + 1)));
  }
  {
    const int y = p.AddBuffer("reverse", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, "reverse", {n});
    b.Store(y, b.i(0), b.Load(x, b.i(0) * -3 + ((n - 1) * 3 + 2)));
  }
  {
    const int y = p.AddBuffer("int_stride", DType::kI32, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, "int_stride", {n});
    b.Store(y, b.i(0), b.Binary(OpCode::kAdd, b.Load(xi, b.i(0) * 3), b.Load(xi, b.i(0) * 3 + 2)));
  }
  {
    // Channel sum of an NCHW-like buffer along the strided dim, 3 columns.
    const int y = p.AddBuffer("channel_sum", DType::kF32, {3}, BufferKind::kOutput);
    KernelBuilder b(&p, "channel_sum", {3}, {19});
    b.Store(y, b.i(0), b.Reduce(ReduceKind::kSum, b.Load(big, b.r(0) * 3136 + b.i(0) * 7)));
  }
  {
    const int y = p.AddBuffer("scatter", DType::kF32, {n, 3}, BufferKind::kOutput);
    KernelBuilder b(&p, "scatter", {3, n});
    b.Store(y, b.i(1) * 3 + b.i(0), b.Unary(OpCode::kNeg, b.Load(x, b.i(1) * 3 + b.i(0))));
  }
  c.inputs["x"] = RandomTensor(DType::kF32, {n, 3}, 8, -2, 2);
  c.inputs["xi"] = RandomTensor(DType::kI32, {n, 3}, 9, -1000, 1000);
  c.inputs["big"] = RandomTensor(DType::kF32, {19, 3136}, 10, -1, 1);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  for (const char* name : {"stride3", "reverse", "int_stride", "channel_sum", "scatter"}) {
    EXPECT_EQ(StatusOf(r[0], name).kind, VecStatus::Kind::kVectorized)
        << name << ": " << StatusOf(r[0], name).reason;
  }
}

// ---------------------------------------------------------------------------
// Integers, bools, casts, selects.

TEST(Codegen, IntegerBoolAndCastOps) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "integers";
  LoopProgram& p = c.program;
  const int64_t n = 259;
  for (DType dt : {DType::kI32, DType::kI64}) {
    const std::string dn(ir::DTypeName(dt));
    const int a = p.AddBuffer("a_" + dn, dt, {n}, BufferKind::kInput);
    const int bb = p.AddBuffer("b_" + dn, dt, {n}, BufferKind::kInput);
    for (OpCode op : {OpCode::kAdd, OpCode::kSub, OpCode::kMul, OpCode::kDiv, OpCode::kMod,
                      OpCode::kFmod, OpCode::kPow, OpCode::kMax, OpCode::kMin}) {
      const std::string name = absl::StrCat(ir::loop::OpCodeName(op), "_", dn);
      const int y = p.AddBuffer("y_" + name, dt, {n}, BufferKind::kOutput);
      KernelBuilder b(&p, name, {n});
      b.Store(y, b.i(0), b.Binary(op, b.Load(a, b.i(0)), b.Load(bb, b.i(0))));
    }
    for (OpCode op : {OpCode::kEq, OpCode::kNe, OpCode::kLt, OpCode::kLe, OpCode::kGt, OpCode::kGe}) {
      const std::string name = absl::StrCat(ir::loop::OpCodeName(op), "_", dn);
      const int y = p.AddBuffer("y_" + name, dt, {n}, BufferKind::kOutput);
      KernelBuilder b(&p, name, {n});
      const int cond = b.Binary(op, b.Load(a, b.i(0)), b.Load(bb, b.i(0)));
      b.Store(y, b.i(0), b.Select(cond, b.Load(a, b.i(0)), b.Index(b.i(0), dt)));
    }
    c.inputs["a_" + dn] = RandomTensor(dt, {n}, 11, -2000000000.0, 2000000000.0);
    Tensor bt = RandomTensor(dt, {n}, 12, -9, 9);
    for (int64_t i = 0; i < n; ++i) {  // no division by zero here
      if (bt.GetAsInt64(i) == 0) {
        if (dt == DType::kI32) bt.data<int32_t>()[i] = 3; else bt.data<int64_t>()[i] = 3;
      }
    }
    c.inputs["b_" + dn] = bt;
  }
  // Float compares to bool, bool logic, casts f32 <-> i32 / i64 / bool.
  const int f = p.AddBuffer("f", DType::kF32, {n}, BufferKind::kInput);
  const int g = p.AddBuffer("g", DType::kF32, {n}, BufferKind::kInput);
  for (OpCode op : {OpCode::kEq, OpCode::kNe, OpCode::kLt, OpCode::kLe, OpCode::kGt, OpCode::kGe}) {
    const std::string name = absl::StrCat("f", ir::loop::OpCodeName(op));
    const int y = p.AddBuffer("y_" + name, DType::kBool, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {n});
    b.Store(y, b.i(0), b.Binary(op, b.Load(f, b.i(0)), b.Load(g, b.i(0))));
  }
  for (OpCode op : {OpCode::kAnd, OpCode::kOr, OpCode::kXor}) {
    const std::string name = absl::StrCat("b", ir::loop::OpCodeName(op));
    const int y = p.AddBuffer("y_" + name, DType::kBool, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {n});
    const int lt = b.Binary(OpCode::kLt, b.Load(f, b.i(0)), b.Constant(DType::kF32, 0));
    const int gt = b.Binary(OpCode::kGt, b.Load(g, b.i(0)), b.Constant(DType::kF32, 0));
    b.Store(y, b.i(0), b.Binary(op, lt, gt));
  }
  for (DType to : {DType::kI32, DType::kI64, DType::kBool, DType::kF32}) {
    const std::string name = absl::StrCat("cast_f32_", ir::DTypeName(to));
    const int y = p.AddBuffer("y_" + name, to, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, name, {n});
    b.Store(y, b.i(0), b.Cast(b.Load(f, b.i(0)), to));
  }
  {
    const int y = p.AddBuffer("y_cast_back", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, "cast_back", {n});
    const int as_int = b.Cast(b.Load(g, b.i(0)), DType::kI32);
    const int as_bool = b.Cast(as_int, DType::kBool);
    const int back = b.Binary(OpCode::kAdd, b.Cast(as_int, DType::kF32), b.Cast(as_bool, DType::kF32));
    b.Store(y, b.i(0), back);
  }
  Tensor ft = RandomTensor(DType::kF32, {n}, 13, -10, 10, /*specials=*/true);
  ft.data<float>()[1] = 3e9f;  // out of i32 range: saturates to int64, wraps
  ft.data<float>()[2] = -5e18f;
  ft.data<float>()[4] = 2.5f;
  c.inputs["f"] = ft;
  Tensor gt = RandomTensor(DType::kF32, {n}, 14, -10, 10);
  gt.data<float>()[4] = 2.5f;  // equal pair
  c.inputs["g"] = gt;
  // Integer division by zero: the entry returns an error code.
  std::vector<ProgramCase> cases2(1);
  ProgramCase& z = cases2[0];
  z.name = "div by zero";
  {
    LoopProgram& q = z.program;
    const int a = q.AddBuffer("a", DType::kI32, {9}, BufferKind::kInput);
    const int y = q.AddBuffer("y", DType::kI32, {9}, BufferKind::kOutput);
    KernelBuilder b(&q, "div", {9});
    b.Store(y, b.i(0), b.Binary(OpCode::kDiv, b.Constant(DType::kI32, 10), b.Load(a, b.i(0))));
    z.inputs["a"] = Tensor::FromVector<int32_t>({9}, {1, 2, 3, 4, 0, 5, 6, 7, 8});
  }
  cases.push_back(std::move(z));
  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectMatchesInterpreter(cases[0], (*r)[0]);
  EXPECT_EQ((*r)[1].rc, ir::loop::kErrorIntegerDivByZero);
  EXPECT_FALSE(ir::loop::RunLoopProgram(cases[1].program, cases[1].inputs).ok());
  EXPECT_EQ(StatusOf((*r)[0], "div_i32").kind, VecStatus::Kind::kVectorized);
  EXPECT_EQ(StatusOf((*r)[0], "add_i64").kind, VecStatus::Kind::kScalar);
  EXPECT_EQ(StatusOf((*r)[0], "cast_back").kind, VecStatus::Kind::kVectorized);
  EXPECT_EQ(StatusOf((*r)[0], "band").kind, VecStatus::Kind::kVectorized);
}

// ---------------------------------------------------------------------------
// Erf accuracy, parallel loops, degenerate shapes.

TEST(Codegen, VectorErfMatchesStdErfOnADenseGrid) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "erf grid";
  const int64_t n = t.emulated ? 20001 : 400001;
  LoopProgram& p = c.program;
  const int x = p.AddBuffer("x", DType::kF32, {n}, BufferKind::kInput);
  const int y = p.AddBuffer("y", DType::kF32, {n}, BufferKind::kOutput);
  KernelBuilder b(&p, "erf", {n});
  b.Store(y, b.i(0), b.Unary(OpCode::kErf, b.Load(x, b.i(0))));
  Tensor xt(DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) {
    xt.data<float>()[i] = static_cast<float>(-5.0 + 10.0 * static_cast<double>(i) / (n - 1));
  }
  xt.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  xt.data<float>()[1] = -std::numeric_limits<float>::infinity();
  xt.data<float>()[2] = std::numeric_limits<float>::infinity();
  xt.data<float>()[3] = 1e-30f;
  c.inputs["x"] = xt;
  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(StatusOf((*r)[0], "erf").kind, VecStatus::Kind::kVectorized);
  const Tensor& out = (*r)[0].outputs.at("y");
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = xt.data<float>()[i];
    const double want = std::erf(static_cast<double>(v));
    const double got = out.data<float>()[i];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << v;
      continue;
    }
    max_err = std::max(max_err, std::fabs(got - want));
    if (std::fabs(want) < 1e-3) {
      EXPECT_LE(std::fabs(got - want), 4e-7 * std::fabs(want) + 1e-38) << "x=" << v;
    }
  }
  EXPECT_LE(max_err, 1.5e-7);
  std::fprintf(stderr, "max |erf error| = %.3g over %lld points\n", max_err,
               static_cast<long long>(n));
}

TEST(Codegen, ParallelLoopsAndDegenerateShapes) {
  KILN_TEST_ISA_OR_SKIP(t);
  SKIP_IF_EMULATED(t);
  std::vector<ProgramCase> cases(1);
  ProgramCase& c = cases[0];
  c.name = "parallel";
  c.tol = kReduction;
  c.options.parallel_grain = 1000;
  LoopProgram& p = c.program;
  const int64_t rows = 64, cols = 129;
  const int x = p.AddBuffer("x", DType::kF32, {rows, cols}, BufferKind::kInput);
  const int y = p.AddBuffer("y", DType::kF32, {rows, cols}, BufferKind::kOutput);
  const int s = p.AddBuffer("s", DType::kF32, {rows}, BufferKind::kOutput);
  const int big = p.AddBuffer("big", DType::kF32, {rows * cols}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "sigmoid_2d", {rows, cols});
    const auto at = b.i(0) * cols + b.i(1);
    b.Store(y, at, b.Unary(OpCode::kSigmoid, b.Load(x, at)));
  }
  {
    KernelBuilder b(&p, "row_sum", {rows}, {cols});
    b.Store(s, b.i(0), b.Reduce(ReduceKind::kSum, b.Load(x, b.i(0) * cols + b.r(0))));
  }
  {
    KernelBuilder b(&p, "flat_tanh", {rows * cols});
    b.Store(big, b.i(0), b.Unary(OpCode::kTanh, b.Load(x, b.i(0))));
  }
  // Zero-size and unit extents.
  const int e = p.AddBuffer("e", DType::kF32, {0, 3}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "empty", {0, 3});
    b.Store(e, b.i(0) * 3 + b.i(1), b.Constant(DType::kF32, 1));
  }
  const int one = p.AddBuffer("one", DType::kF32, {1, 1, 1}, BufferKind::kOutput);
  {
    KernelBuilder b(&p, "unit", {1, 1, 1});
    b.Store(one, b.i(0) + b.i(1) + b.i(2), b.Unary(OpCode::kExp, b.Load(x, b.i(2))));
  }
  c.inputs["x"] = RandomTensor(DType::kF32, {rows, cols}, 21, -5, 5);
  std::vector<CaseResult> r;
  RunAndCompare(t, cases, &r);
  ASSERT_EQ(r.size(), 1u);
  for (const EmittedKernel& k : r[0].emitted.kernels) {
    const bool want = k.name == "sigmoid_2d" || k.name == "row_sum" || k.name == "flat_tanh";
    EXPECT_EQ(k.parallel, want) << k.name;
  }
  EXPECT_THAT(r[0].emitted.sources[0].text, HasSubstr("#pragma omp parallel for"));
}

// ---------------------------------------------------------------------------
// Data-dependent loads (load_indirect) and 2-D transposes.

// Gathers with runtime indices in [-extent, extent): embedding rows (index
// invariant along the vector variable: contiguous), per-element indices
// (GatherElements: lane by lane), column gathers, bool data, and a gather
// inside a reduction.
void AddIndirectLoads(ProgramCase& c, uint32_t seed) {
  LoopProgram& p = c.program;
  const int w = p.AddBuffer("w", DType::kF32, {7, 19}, BufferKind::kConstant);
  const int rows = p.AddBuffer("rows", DType::kI64, {5}, BufferKind::kInput);
  const int each = p.AddBuffer("each", DType::kI64, {7, 19}, BufferKind::kInput);
  const int cols = p.AddBuffer("cols", DType::kI32, {12}, BufferKind::kInput);
  const int flags = p.AddBuffer("flags", DType::kBool, {7, 19}, BufferKind::kInput);
  {
    const int y = p.AddBuffer("y_rows", DType::kF32, {5, 19}, BufferKind::kOutput);
    KernelBuilder b(&p, "embed_rows", {5, 19});
    b.Store(y, b.i(0) * 19 + b.i(1), b.LoadIndirect(w, b.i(1), b.Load(rows, b.i(0)), 7, 19));
  }
  {
    const int y = p.AddBuffer("y_each", DType::kF32, {7, 19}, BufferKind::kOutput);
    KernelBuilder b(&p, "gather_elements", {7, 19});
    const auto at = b.i(0) * 19 + b.i(1);
    const int v = b.LoadIndirect(w, b.i(1), b.Load(each, at), 7, 19);
    b.Store(y, at, b.Binary(OpCode::kMul, v, b.Load(w, at)));
  }
  {
    const int y = p.AddBuffer("y_cols", DType::kF32, {7, 12}, BufferKind::kOutput);
    KernelBuilder b(&p, "gather_cols", {7, 12});
    b.Store(y, b.i(0) * 12 + b.i(1), b.LoadIndirect(w, b.i(0) * 19, b.Load(cols, b.i(1)), 19, 1));
  }
  {
    const int y = p.AddBuffer("y_flags", DType::kBool, {5, 19}, BufferKind::kOutput);
    KernelBuilder b(&p, "gather_bool", {5, 19});
    const int f = b.LoadIndirect(flags, b.i(1), b.Load(rows, b.i(0)), 7, 19);
    b.Store(y, b.i(0) * 19 + b.i(1), b.Unary(OpCode::kNot, f));
  }
  {
    const int y = p.AddBuffer("y_bag", DType::kF32, {19}, BufferKind::kOutput);
    KernelBuilder b(&p, "embedding_bag", {19}, {5});
    const int v = b.LoadIndirect(w, b.i(0), b.Load(rows, b.r(0)), 7, 19);
    b.Store(y, b.i(0), b.Reduce(ReduceKind::kSum, v));
  }
  c.inputs["w"] = RandomTensor(DType::kF32, {7, 19}, seed, -3, 3);
  c.inputs["rows"] = Tensor::FromVector<int64_t>({5}, {6, -1, 0, -7, 3});
  c.inputs["each"] = RandomTensor(DType::kI64, {7, 19}, seed + 1, -7, 6);
  c.inputs["cols"] = RandomTensor(DType::kI32, {12}, seed + 2, -19, 18);
  c.inputs["flags"] = RandomTensor(DType::kBool, {7, 19}, seed + 3, 0, 1);
}

// y = x transposed over its last two dims (plus a bias along the stored
// contiguous dim for `bias`): the store is contiguous in one variable, the
// load in another, so the kernel is tiled.
void AddTranspose(ProgramCase& c, DType dt, int64_t batch, int64_t rows, int64_t cols,
                  bool bias, uint32_t seed) {
  LoopProgram& p = c.program;
  const std::string sfx = absl::StrCat("_", ir::DTypeName(dt), "_", batch, "x", rows, "x", cols);
  const int x = p.AddBuffer("x" + sfx, dt, {batch, rows, cols}, BufferKind::kInput);
  const int y = p.AddBuffer("y" + sfx, dt, {batch, cols, rows}, BufferKind::kOutput);
  const int bb = p.AddBuffer("b" + sfx, dt, {rows}, BufferKind::kInput);
  KernelBuilder b(&p, "transpose" + sfx, {batch, cols, rows});
  int v = b.Load(x, b.i(0) * (rows * cols) + b.i(2) * cols + b.i(1));
  if (bias) v = b.Binary(OpCode::kAdd, v, b.Load(bb, b.i(2)));
  b.Store(y, b.i(0) * (rows * cols) + b.i(1) * rows + b.i(2), v);
  c.inputs["x" + sfx] = RandomTensor(dt, {batch, rows, cols}, seed, -100, 100);
  c.inputs["b" + sfx] = RandomTensor(dt, {rows}, seed + 1, -100, 100);
}

// Masks and flattened views: a bool mask and a u8 mask (cast to bool)
// feeding Select, an i64 attention mask cast to f32, and attention heads
// merged by a flattening view ((i1 // 64) * 320 + i0 * 64 + i1 % 64).
void AddMasksAndViews(ProgramCase& c, uint32_t seed) {
  LoopProgram& p = c.program;
  const int64_t n = 37;
  const int x = p.AddBuffer("mx", DType::kF32, {n}, BufferKind::kInput);
  const int bm = p.AddBuffer("bmask", DType::kBool, {n}, BufferKind::kInput);
  const int um = p.AddBuffer("umask", DType::kU8, {n}, BufferKind::kInput);
  const int im = p.AddBuffer("imask", DType::kI64, {n}, BufferKind::kInput);
  {
    const int y = p.AddBuffer("y_bsel", DType::kF32, {n}, BufferKind::kOutput);
    const int yb = p.AddBuffer("y_bnot", DType::kBool, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, "bool_select", {n});
    const int m = b.Load(bm, b.i(0));
    b.Store(y, b.i(0), b.Select(m, b.Load(x, b.i(0)), b.Constant(DType::kF32, -1e9)));
    b.Store(yb, b.i(0), b.Unary(OpCode::kNot, m));
  }
  {
    const int y = p.AddBuffer("y_usel", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, "u8_select", {n});
    const int m = b.Cast(b.Load(um, b.i(0)), DType::kBool);
    b.Store(y, b.i(0), b.Select(m, b.Load(x, b.i(0)), b.Constant(DType::kF32, 0)));
  }
  {
    const int y = p.AddBuffer("y_imask", DType::kF32, {n}, BufferKind::kOutput);
    KernelBuilder b(&p, "i64_mask", {n});
    const int f = b.Cast(b.Load(im, b.i(0)), DType::kF32);
    b.Store(y, b.i(0), b.Binary(OpCode::kMul, b.Binary(OpCode::kSub, b.Constant(DType::kF32, 1), f),
                                b.Constant(DType::kF32, -10000)));
  }
  const int heads = p.AddBuffer("heads", DType::kF32, {2, 5, 64}, BufferKind::kInput);
  {
    const int y = p.AddBuffer("y_merged", DType::kF32, {5, 128}, BufferKind::kOutput);
    KernelBuilder b(&p, "merge_heads", {5, 128});
    const auto at = ir::loop::FloorDiv(b.i(1), 64) * 320 + b.i(0) * 64 + ir::loop::Mod(b.i(1), 64);
    b.Store(y, b.i(0) * 128 + b.i(1), b.Load(heads, at));
  }
  c.inputs["mx"] = RandomTensor(DType::kF32, {n}, seed, -3, 3);
  c.inputs["bmask"] = RandomTensor(DType::kBool, {n}, seed + 1, 0, 1);
  c.inputs["umask"] = RandomTensor(DType::kU8, {n}, seed + 2, 0, 3);
  c.inputs["imask"] = RandomTensor(DType::kI64, {n}, seed + 3, 0, 1);
  c.inputs["heads"] = RandomTensor(DType::kF32, {2, 5, 64}, seed + 4, -3, 3);
}

TEST(Codegen, IndirectLoadsAndTiledTransposes) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(2);
  cases[0].name = "indirect loads and transposes";
  cases[0].tol = kReduction;
  AddIndirectLoads(cases[0], 300);
  AddTranspose(cases[0], DType::kF32, 1, 13, 21, false, 310);
  AddTranspose(cases[0], DType::kI32, 1, 8, 8, false, 320);
  AddTranspose(cases[0], DType::kF32, 3, 10, 17, true, 330);
  AddTranspose(cases[0], DType::kF32, 8, 16, 9, false, 340);
  if (!t.emulated) AddTranspose(cases[0], DType::kF32, 1, 300, 203, true, 350);
  AddMasksAndViews(cases[0], 360);
  // An index outside [-7, 7): the entry fails, nothing outside w is read.
  cases[1].name = "index out of range";
  {
    LoopProgram& q = cases[1].program;
    const int w = q.AddBuffer("w", DType::kF32, {7, 19}, BufferKind::kInput);
    const int rows = q.AddBuffer("rows", DType::kI64, {3}, BufferKind::kInput);
    const int y = q.AddBuffer("y", DType::kF32, {3, 19}, BufferKind::kOutput);
    KernelBuilder b(&q, "embed_rows", {3, 19});
    b.Store(y, b.i(0) * 19 + b.i(1), b.LoadIndirect(w, b.i(1), b.Load(rows, b.i(0)), 7, 19));
    cases[1].inputs["w"] = RandomTensor(DType::kF32, {7, 19}, 9, -1, 1);
    cases[1].inputs["rows"] = Tensor::FromVector<int64_t>({3}, {0, 7, -1});
  }
  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectMatchesInterpreter(cases[0], (*r)[0]);
  EXPECT_EQ((*r)[0].rc, 0);
  EXPECT_EQ((*r)[1].rc, ir::loop::kErrorIndexOutOfRange);
  absl::Status interp = ir::loop::RunLoopProgram(cases[1].program, cases[1].inputs).status();
  EXPECT_EQ(interp.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(interp.message(), HasSubstr("kernel 'embed_rows'"));
  const auto& rows_status = StatusOf((*r)[0], "embed_rows");
  EXPECT_EQ(rows_status.kind, VecStatus::Kind::kVectorized);
  EXPECT_THAT(rows_status.reason, HasSubstr("load_indirect op #1 contiguous in i1"));
  const auto& each_status = StatusOf((*r)[0], "gather_elements");
  EXPECT_EQ(each_status.kind, VecStatus::Kind::kVectorized);
  EXPECT_THAT(each_status.reason, HasSubstr("load_indirect op #1 computed per lane"));
  EXPECT_THAT(StatusOf((*r)[0], "gather_cols").reason, HasSubstr("computed per lane"));
  EXPECT_EQ(StatusOf((*r)[0], "embedding_bag").kind, VecStatus::Kind::kVectorized);
  for (const char* name : {"transpose_f32_1x13x21", "transpose_i32_1x8x8",
                           "transpose_f32_3x10x17", "transpose_f32_8x16x9"}) {
    const VecStatus& st = StatusOf((*r)[0], name);
    EXPECT_EQ(st.kind, VecStatus::Kind::kTiled) << name << ": " << st.reason;
    EXPECT_THAT(st.reason, HasSubstr("transposed in lanes x lanes tiles over i1 x i2")) << name;
  }
  for (const char* name : {"bool_select", "u8_select", "i64_mask", "merge_heads"}) {
    EXPECT_EQ(StatusOf((*r)[0], name).kind, VecStatus::Kind::kVectorized) << name;
  }
  EXPECT_THAT(StatusOf((*r)[0], "bool_select").reason, Not(HasSubstr("gathered")));
  // The u8 mask loads as a vector (bytes widened to i32 lanes); the i64
  // one is still converted lane by lane inside its cast.
  EXPECT_THAT(StatusOf((*r)[0], "u8_select").reason, Not(HasSubstr("lane by lane")));
  EXPECT_THAT(StatusOf((*r)[0], "merge_heads").reason,
              HasSubstr("load of 'heads' contiguous within vector steps of i1 (not affine)"));
}

// Scatters (store_indirect) after a copy of `data`, every combine mode, with
// duplicate and negative indices: rows (the scattered axis is the outer loop,
// so the kernel stays sequential), columns (rows are disjoint: parallel),
// i32 / f16 / bool buffers; and a scan that reads the element it wrote at the
// previous point (parallel over rows only).
const EmittedKernel* KernelOf(const CaseResult& r, const std::string& name) {
  for (const EmittedKernel& k : r.emitted.kernels) {
    if (k.name == name) return &k;
  }
  ADD_FAILURE() << "no kernel " << name;
  return nullptr;
}

void AddScatters(ProgramCase& c, uint32_t seed) {
  LoopProgram& p = c.program;
  c.options.parallel_grain = 1;
  const int64_t R = 9, C = 37, U = 23;
  const int rows = p.AddBuffer("rows", DType::kI64, {U}, BufferKind::kInput);
  const int cols = p.AddBuffer("cols", DType::kI32, {R, U}, BufferKind::kInput);
  auto copy = [&](int from, int to, DType dt, int64_t n) {
    KernelBuilder b(&p, absl::StrCat("copy_", p.buffers[to].name), {n});
    b.Store(to, b.i(0), b.Load(from, b.i(0)));
    (void)dt;
  };
  const char* modes[] = {"none", "add", "mul", "max", "min"};
  for (int m = 0; m < 5; ++m) {
    const auto combine = static_cast<ir::loop::StoreCombine>(m);
    for (DType dt : {DType::kF32, DType::kI32, DType::kF16}) {
      if (dt != DType::kF32 && m == 2) continue;  // products overflow / round away
      const std::string sfx = absl::StrCat(modes[m], "_", ir::DTypeName(dt));
      const int d = p.AddBuffer("d_" + sfx, dt, {R, C}, BufferKind::kInput);
      const int u = p.AddBuffer("u_" + sfx, dt, {U, C}, BufferKind::kInput);
      const int ur = p.AddBuffer("ur_" + sfx, dt, {R, U}, BufferKind::kInput);
      const int yr = p.AddBuffer("yr_" + sfx, dt, {R, C}, BufferKind::kOutput);
      const int yc = p.AddBuffer("yc_" + sfx, dt, {R, C}, BufferKind::kOutput);
      copy(d, yr, dt, R * C);
      copy(d, yc, dt, R * C);
      {
        KernelBuilder b(&p, "scatter_rows_" + sfx, {U, C});
        b.StoreIndirect(yr, b.i(1), b.Load(u, b.i(0) * C + b.i(1)), b.Load(rows, b.i(0)), R, C,
                        combine);
      }
      {
        KernelBuilder b(&p, "scatter_cols_" + sfx, {R, U});
        b.StoreIndirect(yc, b.i(0) * C, b.Load(ur, b.i(0) * U + b.i(1)),
                        b.Load(cols, b.i(0) * U + b.i(1)), C, 1, combine);
      }
      const double lo = dt == DType::kI32 ? -1000 : -4, hi = -lo;
      c.inputs["d_" + sfx] = RandomTensor(dt, {R, C}, seed + m * 10 + 1, lo, hi);
      c.inputs["u_" + sfx] = RandomTensor(dt, {U, C}, seed + m * 10 + 2, lo, hi);
      c.inputs["ur_" + sfx] = RandomTensor(dt, {R, U}, seed + m * 10 + 3, lo, hi);
    }
  }
  {
    const int d = p.AddBuffer("d_bool", DType::kBool, {R, C}, BufferKind::kInput);
    const int y = p.AddBuffer("y_bool", DType::kBool, {R, C}, BufferKind::kOutput);
    copy(d, y, DType::kBool, R * C);
    KernelBuilder b(&p, "scatter_bool", {R, U});
    const int v = b.Binary(OpCode::kGt, b.Load(cols, b.i(0) * U + b.i(1)),
                           b.Constant(DType::kI32, 0));
    b.StoreIndirect(y, b.i(0) * C, v, b.Load(cols, b.i(0) * U + b.i(1)), C, 1);
    c.inputs["d_bool"] = RandomTensor(DType::kBool, {R, C}, seed + 90, 0, 1);
  }
  {
    // y[i0, i1] = y[i0, i1 - 1] + x[i0, i1]: a prefix sum along rows.
    const int x = p.AddBuffer("x_scan", DType::kF32, {R, C}, BufferKind::kInput);
    const int y = p.AddBuffer("y_scan", DType::kF32, {R, C}, BufferKind::kOutput);
    KernelBuilder b(&p, "scan_rows", {R, C});
    const int prev = b.Load(y, b.i(0) * C + ir::loop::Max(b.i(1) - 1, ir::loop::Const(0)));
    const int first = b.Binary(OpCode::kEq, b.Index(b.i(1)), b.Constant(DType::kI64, 0));
    const int acc = b.Select(first, b.Constant(DType::kF32, 0), prev);
    b.Store(y, b.i(0) * C + b.i(1), b.Binary(OpCode::kAdd, acc, b.Load(x, b.i(0) * C + b.i(1))));
    c.inputs["x_scan"] = RandomTensor(DType::kF32, {R, C}, seed + 91, -1, 1);
  }
  std::vector<int64_t> rv(U);
  for (int64_t i = 0; i < U; ++i) rv[i] = (i * 5) % (2 * R) - R;  // [-R, R), repeats
  c.inputs["rows"] = Tensor::FromVector<int64_t>({U}, rv);
  c.inputs["cols"] = RandomTensor(DType::kI32, {R, U}, seed + 92, -C, C - 1);
}

TEST(Codegen, ScattersAndScans) {
  KILN_TEST_ISA_OR_SKIP(t);
  std::vector<ProgramCase> cases(2);
  cases[0].name = "scatters";
  cases[0].tol = kExact;
  AddScatters(cases[0], 400);
  // An index outside [-5, 5): the entry fails.
  cases[1].name = "scatter index out of range";
  {
    LoopProgram& q = cases[1].program;
    const int u = q.AddBuffer("u", DType::kF32, {3}, BufferKind::kInput);
    const int n = q.AddBuffer("n", DType::kI64, {3}, BufferKind::kInput);
    const int y = q.AddBuffer("y", DType::kF32, {5}, BufferKind::kOutput);
    KernelBuilder b(&q, "scatter", {3});
    b.StoreIndirect(y, ir::loop::Const(0), b.Load(u, b.i(0)), b.Load(n, b.i(0)), 5, 1,
                    ir::loop::StoreCombine::kAdd);
    cases[1].inputs["u"] = Tensor::FromVector<float>({3}, {1, 2, 4});
    cases[1].inputs["n"] = Tensor::FromVector<int64_t>({3}, {0, 5, -1});
  }
  absl::StatusOr<std::vector<CaseResult>> r = RunCases(t, cases);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectMatchesInterpreter(cases[0], (*r)[0]);
  EXPECT_EQ((*r)[0].rc, 0);
  EXPECT_EQ((*r)[1].rc, ir::loop::kErrorIndexOutOfRange);
  absl::Status interp = ir::loop::RunLoopProgram(cases[1].program, cases[1].inputs).status();
  EXPECT_EQ(interp.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(interp.message(), HasSubstr("kernel 'scatter'"));
  const VecStatus& st = StatusOf((*r)[0], "scatter_rows_add_f32");
  EXPECT_EQ(st.kind, VecStatus::Kind::kScalar);
  EXPECT_THAT(st.reason, HasSubstr("store_indirect op #2: data-dependent store"));
  if (const EmittedKernel* k = KernelOf((*r)[0], "scatter_rows_add_f32")) {
    EXPECT_FALSE(k->parallel);
  }
  if (const EmittedKernel* k = KernelOf((*r)[0], "scatter_cols_add_f32")) {
    EXPECT_TRUE(k->parallel);
  }
  if (const EmittedKernel* k = KernelOf((*r)[0], "scan_rows")) {
    EXPECT_TRUE(k->parallel);
  }
}

// ---------------------------------------------------------------------------
// Lowered programs with extern kernels (RunLoweredCases): loop segments as
// generated code, extern kernels on the host's reference, against
// interp::RunLoopModule (loop interpreter + the same reference).

TEST(Codegen, LoweredProgramsRunLoopSegmentsAroundExternKernels) {
  KILN_TEST_ISA_OR_SKIP(t);
  // Loop, Gemm, loop, MatMul, loop: three loop segments; %g (an extern
  // output) is also a graph output and read by two later segments.
  const char* text = R"(
graph g(%x: f32[4,6], %w: f32[5,6], %v: f32[5,3]) -> (%y, %g, %z) opset 13 {
  %r = Relu(%x) : f32[4,6]
  %g = Gemm(%r, %w) {transB=1, alpha=0.5} : f32[4,5]
  %t = Tanh(%g) : f32[4,5]
  %m = MatMul(%t, %v) : f32[4,3]
  %y = Sigmoid(%m) : f32[4,3]
  %z = Add(%g, %t) : f32[4,5]
}
)";
  // Only externs: nothing runs as generated code.
  const char* extern_only = R"(
graph g(%a: f32[3,4], %b: f32[4,2]) -> (%c) opset 13 {
  %c = MatMul(%a, %b) : f32[3,2]
}
)";
  std::vector<ir::loop::LoopModule> programs;
  for (const char* graph : {text, extern_only}) {
    absl::StatusOr<ir::Graph> g = ir::ParseGraph(graph);
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(*g);
    ASSERT_TRUE(lp.ok()) << lp.status();
    programs.push_back(*std::move(lp));
  }
  std::vector<LoweredCase> cases;
  for (uint32_t seed : {1u, 7u}) {
    cases.push_back({absl::StrCat("three segments, seed ", seed), &programs[0],
                     {RandomTensor(DType::kF32, {4, 6}, seed, -2, 2),
                      RandomTensor(DType::kF32, {5, 6}, seed + 1, -1, 1),
                      RandomTensor(DType::kF32, {5, 3}, seed + 2, -1, 1)}});
  }
  cases.push_back({"extern only", &programs[1],
                   {RandomTensor(DType::kF32, {3, 4}, 3, -1, 1),
                    RandomTensor(DType::kF32, {4, 2}, 4, -1, 1)}});
  cases.push_back({"wrong input count", &programs[1], {RandomTensor(DType::kF32, {3, 4}, 3, -1, 1)}});
  RunOptions options;
  // At most two cases per build and run (the extern-only one needs none).
  absl::StatusOr<std::vector<LoweredResult>> results = RunLoweredCases(t, cases, options, 2);
  ASSERT_TRUE(results.ok()) << results.status();
  const int expected_segments[] = {3, 3, 0};
  const int expected_externs[] = {2, 2, 1};
  for (size_t c = 0; c < 3; ++c) {
    const LoweredResult& r = (*results)[c];
    ASSERT_TRUE(r.error.empty()) << cases[c].name << ": " << r.error;
    EXPECT_EQ(r.rc, 0) << cases[c].name;
    EXPECT_EQ(r.loop_segments, expected_segments[c]) << cases[c].name;
    EXPECT_EQ(r.extern_calls, expected_externs[c]) << cases[c].name;
    absl::StatusOr<std::vector<Tensor>> ref =
        interp::RunLoopModule(*cases[c].lowered, cases[c].inputs);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_EQ(r.outputs.size(), ref->size()) << cases[c].name;
    for (size_t o = 0; o < ref->size(); ++o) {
      interp::CompareResult cmp = interp::CompareTensors(r.outputs[o], (*ref)[o], kTranscendental);
      EXPECT_TRUE(cmp.ok) << cases[c].name << " output " << o << ": " << cmp.message;
    }
  }
  EXPECT_THAT((*results)[3].error, HasSubstr("1 inputs for a program of 2"));
  EXPECT_EQ(RunLoweredCases(t, cases, options, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::backends::cpp
