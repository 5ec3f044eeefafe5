// Golden tests of the vectorization checker's plan (kernel header and one
// decision per op) on loop IR text. Expected decisions follow the rules in
// emitter.h ("Vectorization") and vec_checker.h; every case also checks that
// the emitter reports the plan's status and writes a lane loop exactly for
// the ops decided per-lane.
#include "backends/cpp/vec_checker.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "backends/cpp/emitter.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/text.h"
#include "ir/loop/verifier.h"
#include "testing/filecheck.h"

namespace kiln::backends::cpp {
namespace {

using ir::loop::LoopProgram;
using ir::loop::OpCode;

// The emitted statements `const auto v<i> = ...;` of op i of kernel ki
// (main step and tail), trimmed.
std::vector<std::string> VectorStatements(const std::string& code, int ki, int i) {
  std::vector<std::string> out;
  const std::string kernel = absl::StrCat("// kernel ", ki, ":");
  const std::string head = absl::StrCat("const auto v", i, " = ");
  bool in_kernel = false;
  for (absl::string_view line : absl::StrSplit(code, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (absl::StartsWith(line, "// kernel ")) in_kernel = absl::StartsWith(line, kernel);
    if (in_kernel && absl::StartsWith(line, head)) out.emplace_back(line);
  }
  return out;
}

bool LaneByLane(const std::string& stmt) {
  return absl::StrContains(stmt, "for (size_t kl") || absl::StrContains(stmt, "KilnLanewise");
}

// The emitter agrees with `plan` for kernel ki: same status, and every op
// with a vector value is computed lane by lane iff it is decided per-lane.
void ExpectEmitterAgrees(const LoopProgram& p, int ki, const VecPlan& plan,
                         const EmittedKernel& ek, const std::string& code) {
  EXPECT_EQ(ek.vec.kind, plan.status.kind) << ek.name;
  EXPECT_EQ(ek.vec.reason, plan.status.reason) << ek.name;
  const ir::loop::Kernel& k = p.kernels[ki];
  for (size_t i = 0; i < k.body.size(); ++i) {
    const OpDecision& d = plan.ops[i];
    if (k.body[i].code == OpCode::kReduce) continue;  // accumulators, not `v<i> =`
    const std::vector<std::string> stmts = VectorStatements(code, ki, static_cast<int>(i));
    if (d.kind == OpVec::kVector) {
      EXPECT_FALSE(stmts.empty() && k.body[i].has_result())
          << ek.name << " op #" << i << " decided vector has no vector statement";
    }
    if (d.kind == OpVec::kBroadcast || d.kind == OpVec::kScalar) {
      EXPECT_TRUE(stmts.empty()) << ek.name << " op #" << i << ": " << stmts[0];
    }
    for (const std::string& s : stmts) {
      EXPECT_EQ(LaneByLane(s), d.kind == OpVec::kPerLane)
          << ek.name << " op #" << i << " (" << OpVecName(d.kind) << "): " << s;
    }
  }
}

// Parses, verifies, plans every kernel and prints the plans; checks each
// plan against the emitted code.
std::string Plans(const char* text, const VecCheckOptions& options = {}) {
  absl::StatusOr<LoopProgram> p = ir::loop::ParseProgram(text);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return "";
  absl::Status valid = ir::loop::VerifyProgram(*p);
  EXPECT_TRUE(valid.ok()) << valid;
  EmitOptions eo;
  eo.vectorize = options.vectorize;
  eo.parallel_grain = options.parallel_grain;
  absl::StatusOr<EmittedProgram> emitted = EmitCpp(*p, eo);
  EXPECT_TRUE(emitted.ok()) << emitted.status();
  std::string code;
  if (emitted.ok()) {
    for (const auto& s : emitted->sources) code += s.text;
  }
  std::string out;
  for (int ki = 0; ki < static_cast<int>(p->kernels.size()); ++ki) {
    const VecPlan plan = CheckVectorization(*p, ki, options);
    EXPECT_EQ(plan.ops.size(), p->kernels[ki].body.size());
    out += PrintVecPlan(*p, ki, plan);
    if (emitted.ok()) ExpectEmitterAgrees(*p, ki, plan, emitted->kernels[ki], code);
  }
  return out;
}

void ExpectPlans(const char* text, const char* checks, const VecCheckOptions& options = {}) {
  const std::string out = Plans(text, options);
  absl::Status st = testing::RunFileCheck(out, checks);
  EXPECT_TRUE(st.ok()) << st << "\n" << out;
}

// Stride 1 in i1 for every access: i1 is the vector variable (innermost,
// contiguous store), every op vector.
TEST(VecChecker, ContiguousPointwise) {
  ExpectPlans(R"(
buffer %x: f32[4,37] input
buffer %b: f32[37] constant
buffer %y: f32[4,37] output
kernel exp_add over (i0: 4, i1: 37) {
  %0 = load %x[i0*37 + i1]
  %1 = exp %0
  %2 = load %b[i1]
  %3 = add %1, %2
  store %y[i0*37 + i1], %3
}
)", R"(
CHECK: kernel 0 exp_add: vectorized, vector i1, loops (i0, i1) -- vectorized over i1
CHECK-NEXT:   #0 load x: vector
CHECK-NEXT:   #1 exp: vector
CHECK-NEXT:   #2 load b: vector
CHECK-NEXT:   #3 add: vector
CHECK-NEXT:   #4 store y: vector
)");
}

// A per-row scale (stride 0 in i1) and a constant do not depend on the
// vector variable: computed once per i0 and broadcast.
TEST(VecChecker, StrideZeroOperandIsBroadcast) {
  ExpectPlans(R"(
buffer %x: f32[8,64] input
buffer %s: f32[8] input
buffer %y: f32[8,64] output
kernel scale over (i0: 8, i1: 64) {
  %0 = load %x[i0*64 + i1]
  %1 = load %s[i0]
  %2 = mul %0, %1
  %3 = constant 2 : f32
  %4 = add %2, %3
  store %y[i0*64 + i1], %4
}
)", R"(
CHECK: kernel 0 scale: vectorized, vector i1, loops (i0, i1) -- vectorized over i1
CHECK-NEXT:   #0 load x: vector
CHECK-NEXT:   #1 load s: broadcast
CHECK-NEXT:   #2 mul: vector
CHECK-NEXT:   #3 constant: broadcast
CHECK-NEXT:   #4 add: vector
CHECK-NEXT:   #5 store y: vector
)");
}

// y = x^T: the store is contiguous in i1 (score 4 - 1 beats 2 - 3 for i0),
// the load strided in i1 but contiguous in i0, so i0 is blocked by the
// vector width and the load reads transposed tiles.
TEST(VecChecker, TransposeIsTiled) {
  ExpectPlans(R"(
buffer %x: f32[33,17] input
buffer %y: f32[17,33] output
kernel transpose over (i0: 17, i1: 33) {
  %0 = load %x[i1*17 + i0]
  store %y[i0*33 + i1], %0
}
)", R"(
CHECK: kernel 0 transpose: tiled, vector i1, tile i0, loops (i0, i1) -- tiled: vectorized over i1; load of 'x' transposed in lanes x lanes tiles over i0 x i1
CHECK-NEXT:   #0 load x: vector -- transposed tiles over i0 x i1
CHECK-NEXT:   #1 store y: vector
)");
}

// Row sum: vectorizing i0 scores 0 (store +4, the load strided by 64 in i0
// at every reduction point -4), no vector variable scores 8 (the load
// contiguous in r0, x4 as reduction-varying): the reduce is vectorized along
// r0 and the store runs once per row.
TEST(VecChecker, ReductionAlongLastDimIsVectorizedInside) {
  ExpectPlans(R"(
buffer %x: f32[8,64] input
buffer %y: f32[8] output
kernel row_sum over (i0: 8) reduce (r0: 64) {
  %0 = load %x[i0*64 + r0]
  %1 = reduce sum %0
  store %y[i0], %1
}
)", R"(
CHECK: kernel 0 row_sum: vectorized, loops (i0) -- reductions vectorized; reduce #1 vectorized over r0
CHECK-NEXT:   #0 load x: vector
CHECK-NEXT:   #1 reduce sum: vector -- vectorized over r0
CHECK-NEXT:   #2 store y: broadcast
)");
}

// A row max over 4 contiguous elements: no vector variable would score 8
// (the load contiguous in r0), but a reduction that short is a masked step
// and a horizontal combine per output (kMinInnerReduceExtent), so i0 is the
// vector variable, its loads gathered with stride 4, one accumulator per
// lane.
TEST(VecChecker, ShortRowReductionAccumulatesPerLaneOfTheOutputs) {
  ExpectPlans(R"(
buffer %x: f32[64,4] input
buffer %y: f32[64] output
kernel row_max over (i0: 64) reduce (r0: 4) {
  %0 = load %x[i0*4 + r0]
  %1 = reduce max %0
  store %y[i0], %1
}
)", R"(
CHECK: kernel 0 row_max: vectorized, vector i0, loops (i0) -- vectorized over i0; gathered load of 'x' (stride 4 in i0); reduce #1 per lane over i0
CHECK-NEXT:   #0 load x: vector -- hardware gather (stride 4 in i0)
CHECK-NEXT:   #1 reduce max: vector -- one accumulator per lane of i0
CHECK-NEXT:   #2 store y: vector
)");
}

// A global average pool over 13x13 in NCHW: 169 elements per output are
// 13 masked steps along r1 and one combine, cheaper than 169 gathers with
// stride 169 per 16 channels, so the reduction keeps its own vector pass.
TEST(VecChecker, LongReductionWithShortLastExtentVectorizesInside) {
  ExpectPlans(R"(
buffer %x: f32[1,64,13,13] input
buffer %y: f32[1,64,1,1] output
kernel gap over (i0: 1, i1: 64) reduce (r0: 13, r1: 13) {
  %0 = load %x[i1*169 + r0*13 + r1]
  %1 = reduce sum %0
  store %y[i1], %1
}
)", R"(
CHECK: kernel 0 gap: vectorized, loops (i0, i1) -- reductions vectorized; reduce #1 vectorized over r1
)");
}

// Without a wide iteration variable, a short reduction still vectorizes
// along its own variable (the last resort).
TEST(VecChecker, ShortReductionWithoutVectorVariableVectorizesInside) {
  ExpectPlans(R"(
buffer %x: f32[1,4] input
buffer %y: f32[1] output
kernel row_max over (i0: 1) reduce (r0: 4) {
  %0 = load %x[i0*4 + r0]
  %1 = reduce max %0
  store %y[i0], %1
}
)", R"(
CHECK: kernel 0 row_max: vectorized, loops (i0) -- reductions vectorized; reduce #1 vectorized over r0
)");
}

// Column sum: the load is contiguous in i0 and strided in r0, so i0 is the
// vector variable (8 + 4 against -4) and the reduce keeps one accumulator
// per lane.
TEST(VecChecker, ReductionAlongStridedDimAccumulatesPerLane) {
  ExpectPlans(R"(
buffer %x: f32[8,64] input
buffer %y: f32[64] output
kernel col_sum over (i0: 64) reduce (r0: 8) {
  %0 = load %x[r0*64 + i0]
  %1 = reduce sum %0
  store %y[i0], %1
}
)", R"(
CHECK: kernel 0 col_sum: vectorized, vector i0, loops (i0) -- vectorized over i0; reduce #1 per lane over i0
CHECK-NEXT:   #0 load x: vector
CHECK-NEXT:   #1 reduce sum: vector -- one accumulator per lane of i0
CHECK-NEXT:   #2 store y: vector
)");
}

// GatherElements-like: the index varies with the vector variable, so the
// load_indirect (and its i64 index load) run lane by lane; a row gather
// (index per i0) reads contiguous rows with the index checked once.
TEST(VecChecker, DataDependentGatherIsPerLane) {
  ExpectPlans(R"(
buffer %x: f32[10,16] input
buffer %idx: i64[4,16] input
buffer %ridx: i64[4] input
buffer %y: f32[4,16] output
buffer %z: f32[4,16] output
kernel gather_elements over (i0: 4, i1: 16) {
  %0 = load %idx[i0*16 + i1]
  %1 = load_indirect %x[i1], %0, stride 16, extent 10
  store %y[i0*16 + i1], %1
}
kernel gather_rows over (i0: 4, i1: 16) {
  %0 = load %ridx[i0]
  %1 = load_indirect %x[i1], %0, stride 16, extent 10
  store %z[i0*16 + i1], %1
}
)", R"(
CHECK: kernel 0 gather_elements: vectorized, vector i1, loops (i0, i1) -- vectorized over i1; load_indirect op #1 computed per lane (data-dependent index in i1)
CHECK-NEXT:   #0 load idx: per-lane -- read lane by lane as a load_indirect index
CHECK-NEXT:   #1 load_indirect x: per-lane -- data-dependent index in i1
CHECK-NEXT:   #2 store y: vector
CHECK: kernel 1 gather_rows: vectorized, vector i1, loops (i0, i1) -- vectorized over i1; load_indirect op #1 contiguous in i1 (index checked once per row)
CHECK-NEXT:   #0 load ridx: broadcast
CHECK-NEXT:   #1 load_indirect x: vector -- index checked once per row
CHECK-NEXT:   #2 store z: vector
)");
}

// store_indirect: the whole kernel is scalar (points in row-major order);
// the scatter names why, the other ops that the kernel is scalar.
TEST(VecChecker, StoreIndirectMakesKernelScalar) {
  ExpectPlans(R"(
buffer %upd: f32[4] input
buffer %sidx: i64[4] input
buffer %out: f32[10] output
kernel scatter over (i0: 4) {
  %0 = load %upd[i0]
  %1 = load %sidx[i0]
  store_indirect %out[0], %1, stride 1, extent 10, combine none, %0
}
)", R"(
CHECK: kernel 0 scatter: scalar, loops (i0) -- store_indirect op #2: data-dependent store computed point by point in iteration order
CHECK-NEXT:   #0 load upd: scalar -- kernel is scalar
CHECK-NEXT:   #1 load sidx: scalar -- kernel is scalar
CHECK-NEXT:   #2 store_indirect out: scalar -- data-dependent store computed point by point in iteration order
)");
}

// i64 arithmetic has no vector form: the kernel is scalar and every op
// that fails names its dtype. An i64 load read only by a cast to f32 is
// converted lane by lane instead (the kernel stays vectorized).
TEST(VecChecker, I64OpsAreScalarAndI64CastsPerLane) {
  ExpectPlans(R"(
buffer %a: i64[16] input
buffer %c: i64[16] output
buffer %f: f32[16] output
kernel neg_i64 over (i0: 16) {
  %0 = load %a[i0]
  %1 = neg %0
  store %c[i0], %1
}
kernel cast_i64 over (i0: 16) {
  %0 = load %a[i0]
  %1 = cast %0 : f32
  store %f[i0], %1
}
)", R"(
CHECK: kernel 0 neg_i64: scalar, loops (i0) -- vectorizing i0: op #0 (load): buffer dtype i64 is not vectorized
CHECK-NEXT:   #0 load a: scalar -- buffer dtype i64 is not vectorized
CHECK-NEXT:   #1 neg: scalar -- dtype i64 is not vectorized
CHECK-NEXT:   #2 store c: scalar -- buffer dtype i64 is not vectorized
CHECK: kernel 1 cast_i64: vectorized, vector i0, loops (i0) -- vectorized over i0; cast op #1 converts i64 buffer 'a' lane by lane
CHECK-NEXT:   #0 load a: per-lane -- i64 read lane by lane by its cast
CHECK-NEXT:   #1 cast f32: per-lane -- converts i64 lane by lane
CHECK-NEXT:   #2 store f: vector
)");
}

// A bool mask (a u8 buffer widened to a mask, and a comparison) feeding
// select is vector throughout; the constant is broadcast.
TEST(VecChecker, BoolMaskFeedingSelect) {
  ExpectPlans(R"(
buffer %m: bool[4,32] input
buffer %x: f32[4,32] input
buffer %y: f32[4,32] output
kernel masked over (i0: 4, i1: 32) {
  %0 = load %m[i0*32 + i1]
  %1 = load %x[i0*32 + i1]
  %2 = constant 0 : f32
  %3 = gt %1, %2
  %4 = and %0, %3
  %5 = select %4, %1, %2
  store %y[i0*32 + i1], %5
}
)", R"(
CHECK: kernel 0 masked: vectorized, vector i1, loops (i0, i1) -- vectorized over i1
CHECK-NEXT:   #0 load m: vector
CHECK-NEXT:   #1 load x: vector
CHECK-NEXT:   #2 constant: broadcast
CHECK-NEXT:   #3 gt: vector
CHECK-NEXT:   #4 and: vector
CHECK-NEXT:   #5 select: vector
CHECK-NEXT:   #6 store y: vector
)");
}

// Inside a vectorized kernel: an index op that is not affine in the vector
// variable, math without a vector instruction (tan) and a load that is not
// affine are computed lane by lane; an affine index op is an Iota vector
// and a load with a constant stride a hardware gather.
TEST(VecChecker, PerLaneOpsInAVectorKernel) {
  ExpectPlans(R"(
buffer %x: f32[16,3] input
buffer %w: f32[256] input
buffer %y: f32[16] output
kernel lanes over (i0: 16) {
  %0 = index [i0 // 3] : f32
  %1 = tan %0
  %2 = load %x[i0*3]
  %3 = add %1, %2
  %4 = index [i0*2 + 1] : f32
  %5 = add %3, %4
  %6 = load %w[i0*i0]
  %7 = add %5, %6
  store %y[i0], %7
}
)", R"(
CHECK: kernel 0 lanes: vectorized, vector i0, loops (i0) -- vectorized over i0; index op #0 computed per lane; gathered load of 'x' (stride 3 in i0); gathered load of 'w' (not affine in i0)
CHECK-NEXT:   #0 index: per-lane -- index computed lane by lane
CHECK-NEXT:   #1 tan: per-lane -- no vector instruction for f32 tan
CHECK-NEXT:   #2 load x: vector -- hardware gather (stride 3 in i0)
CHECK-NEXT:   #3 add: vector
CHECK-NEXT:   #4 index: vector -- iota
CHECK-NEXT:   #5 add: vector
CHECK-NEXT:   #6 load w: per-lane -- gathered (not affine in i0)
CHECK-NEXT:   #7 add: vector
CHECK-NEXT:   #8 store y: vector
)");
}

// A store with a constant stride in the vector variable is a hardware
// scatter in full steps (its tail stays lane by lane).
TEST(VecChecker, StridedStoreIsAHardwareScatter) {
  ExpectPlans(R"(
buffer %x: f32[37] input
buffer %y: f32[37,3] output
kernel scatter over (i0: 37) {
  %0 = load %x[i0]
  %1 = exp %0
  store %y[i0*3], %1
}
)", R"(
CHECK: kernel 0 scatter: vectorized, vector i0, loops (i0) -- vectorized over i0; scattered store to 'y' (stride 3 in i0)
CHECK-NEXT:   #0 load x: vector
CHECK-NEXT:   #1 exp: vector
CHECK-NEXT:   #2 store y: vector -- hardware scatter (stride 3 in i0; tail lane by lane)
)");
}

// argmax yields i64: vectorizing i0 fails on the reduce itself (and on the
// i64 store); no candidate remains, so the kernel is scalar.
TEST(VecChecker, ArgmaxKernelIsScalar) {
  ExpectPlans(R"(
buffer %x: f32[8,64] input
buffer %y: i64[8] output
kernel row_argmax over (i0: 8) reduce (r0: 64) {
  %0 = load %x[i0*64 + r0]
  %1 = neg %0
  %2 = reduce argmax %1
  store %y[i0], %2
}
)", R"(
CHECK: kernel 0 row_argmax: scalar, loops (i0) -- vectorizing i0: op #2 (reduce): dtype i64 is not vectorized
CHECK-NEXT:   #0 load x: scalar -- kernel is scalar
CHECK-NEXT:   #1 neg: scalar -- kernel is scalar
CHECK-NEXT:   #2 reduce argmax: scalar -- dtype i64 is not vectorized
CHECK-NEXT:   #3 store y: scalar -- buffer dtype i64 is not vectorized
)");
}

// Two row sums: the one over an i64 computation cannot be vectorized along
// r0 (its i64 load), so it and its cone are scalar with the reason; the f32
// one is vectorized along r0; the ops after both run once per row.
TEST(VecChecker, ScalarReductionInAVectorizedKernel) {
  ExpectPlans(R"(
buffer %x: f32[8,64] input
buffer %q: i64[8,64] input
buffer %y: f32[8] output
kernel two_sums over (i0: 8) reduce (r0: 64) {
  %0 = load %q[i0*64 + r0]
  %1 = neg %0
  %2 = cast %1 : f32
  %3 = reduce sum %2
  %4 = load %x[i0*64 + r0]
  %5 = reduce sum %4
  %6 = add %3, %5
  store %y[i0], %6
}
)", R"(
CHECK: kernel 0 two_sums: vectorized, loops (i0) -- reductions vectorized; reduce #3 scalar: op #0 (load): buffer dtype i64 is not vectorized; reduce #5 vectorized over r0
CHECK-NEXT:   #0 load q: scalar -- buffer dtype i64 is not vectorized
CHECK-NEXT:   #1 neg: scalar -- in scalar reduce #3
CHECK-NEXT:   #2 cast f32: scalar -- in scalar reduce #3
CHECK-NEXT:   #3 reduce sum: scalar -- op #0 (load): buffer dtype i64 is not vectorized
CHECK-NEXT:   #4 load x: vector
CHECK-NEXT:   #5 reduce sum: vector -- vectorized over r0
CHECK-NEXT:   #6 add: broadcast
CHECK-NEXT:   #7 store y: broadcast
)");
}

TEST(VecChecker, DisabledMakesEveryOpScalar) {
  VecCheckOptions o;
  o.vectorize = false;
  ExpectPlans(R"(
buffer %x: f32[16] input
buffer %y: f32[16] output
kernel neg over (i0: 16) {
  %0 = load %x[i0]
  %1 = neg %0
  store %y[i0], %1
}
)", R"(
CHECK: kernel 0 neg: scalar, loops (i0) -- vectorization disabled
CHECK-NEXT:   #0 load x: scalar -- kernel is scalar
CHECK-NEXT:   #1 neg: scalar -- kernel is scalar
CHECK-NEXT:   #2 store y: scalar -- kernel is scalar
)", o);
}

}  // namespace
}  // namespace kiln::backends::cpp
