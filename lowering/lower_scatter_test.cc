// Tests of the lowerings that write at data-dependent places (ScatterElements,
// Scatter, ScatterND, MaxUnpool: store_indirect), CumSum and Slice with
// run-time parameters: golden loop IR, the loop interpreter against the
// reference interpreter (random shapes, negative and duplicate indices, every
// reduction), the same programs through generated C++ on this shard's ISA
// against the loop interpreter, and out-of-range indices / mismatched slice
// extents as errors on both.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpp/emitter.h"
#include "backends/cpp/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "lowering/lower_graph.h"
#include "lowering/lowering_test_util.h"
#include "compiler/jit/isa_test_util.h"
#include "testing/filecheck.h"

namespace kiln::lowering {
namespace {

using ::testing::HasSubstr;
using ir::DType;
using ir::Tensor;

struct GraphCase {
  std::string text;
  std::vector<Tensor> inputs;  // every graph input, in order
};

std::string ShapeText(const ir::Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ","), "]"); }

Tensor Data(DType dt, const ir::Shape& shape, uint32_t seed) {
  return testing::RandomTensor(dt, shape, seed);
}

// Indices in [lo, hi) (duplicates likely).
Tensor Indices(DType dt, const ir::Shape& shape, int64_t lo, int64_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> u(lo, hi - 1);
  std::vector<int64_t> v(ir::NumElements(shape));
  for (int64_t& x : v) x = u(rng);
  if (dt == DType::kI32) {
    return Tensor::FromVector<int32_t>(shape, std::vector<int32_t>(v.begin(), v.end()));
  }
  return Tensor::FromVector<int64_t>(shape, v);
}

absl::StatusOr<ir::loop::LoopModule> Lower(const std::string& text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  return LowerGraph(*g);
}

// Every case merged into one translation unit (one JIT build per test).
backends::cpp::RunOptions OneUnit() {
  backends::cpp::RunOptions o;
  o.merge = true;
  o.emit.kernels_per_unit = 100000;
  return o;
}

// Loop interpreter vs reference for every case, then the lowered programs
// through generated code on this shard's ISA vs the loop interpreter.
void CheckCases(const std::vector<GraphCase>& cases) {
  const jit::TestIsa t = jit::GetTestIsa();
  ASSERT_TRUE(t.error.empty()) << t.error;
  std::vector<backends::cpp::ProgramCase> pcs;
  for (const GraphCase& gc : cases) {
    testing::CheckOptions opts;
    for (size_t i = 0; i < gc.inputs.size(); ++i) opts.inputs[static_cast<int>(i)] = gc.inputs[i];
    absl::Status s = testing::CheckLowering(gc.text, opts);
    EXPECT_TRUE(s.ok()) << gc.text << "\n" << s;
    absl::StatusOr<ir::loop::LoopModule> lp = Lower(gc.text);
    ASSERT_TRUE(lp.ok()) << gc.text << "\n" << lp.status();
    backends::cpp::ProgramCase pc;
    pc.name = gc.text;
    pc.program = lp->program;
    for (size_t k = 0; k < lp->inputs.size(); ++k) {
      pc.inputs[lp->program.buffers[lp->inputs[k]].name] = gc.inputs[k];
    }
    for (const auto& [b, data] : lp->constants) pc.inputs[lp->program.buffers[b].name] = *data;
    pcs.push_back(std::move(pc));
  }
  if (!t.skip_reason.empty()) return;  // the interpreter checks ran
  absl::StatusOr<std::vector<backends::cpp::CaseResult>> r =
      backends::cpp::RunCases(t, pcs, OneUnit());
  ASSERT_TRUE(r.ok()) << r.status();
  for (size_t c = 0; c < pcs.size(); ++c) {
    EXPECT_EQ((*r)[c].error, "") << pcs[c].name;
    EXPECT_EQ((*r)[c].rc, 0) << pcs[c].name;
    backends::cpp::ExpectMatchesInterpreter(pcs[c], (*r)[c]);
  }
}

TEST(LowerScatter, ScatterElementsBecomesCopyThenStoreIndirect) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(
graph g(%x: f32[3,5], %i: i64[2,4], %u: f32[2,4]) -> (%y) opset 18 {
  %y = ScatterElements(%x, %i, %u) {axis=1, reduction="add"} name="sc" : f32[3,5]
}
)");
  ASSERT_TRUE(lp.ok()) << lp.status();
  const std::string out = ir::loop::PrintProgram(lp->program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: kernel k0_scatterelements "ScatterElements" over (i0: 3, i1: 5) ops=["sc"] {
    CHECK-NEXT:   %0 = load %x[i0*5 + i1]
    CHECK-NEXT:   store %y[i0*5 + i1], %0
    CHECK-NEXT: }
    CHECK: kernel k1_scatterelements "ScatterElements" over (i0: 2, i1: 4) ops=["sc"] {
    CHECK-NEXT:   %0 = load %i[i0*4 + i1]
    CHECK-NEXT:   %1 = load %u[i0*4 + i1]
    CHECK-NEXT:   store_indirect %y[i0*5], %0, stride 1, extent 5, combine add, %1
    CHECK-NEXT: }
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

TEST(LowerScatter, ScatterElementsMatchesReference) {
  std::vector<GraphCase> cases;
  std::mt19937 rng(7);
  uint32_t seed = 100;
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    for (int axis : {0, 1, 2, -1}) {
      const ir::Shape data = {2 + static_cast<int64_t>(rng() % 3), 3 + static_cast<int64_t>(rng() % 3),
                              1 + static_cast<int64_t>(rng() % 4)};
      const int a = axis < 0 ? axis + 3 : axis;
      ir::Shape ind = data;
      for (int d = 0; d < 3; ++d) {
        ind[d] = d == a ? 1 + static_cast<int64_t>(rng() % 6) : 1 + static_cast<int64_t>(rng() % data[d]);
      }
      const DType it = (seed % 2) ? DType::kI32 : DType::kI64;
      GraphCase c;
      c.text = absl::StrCat("graph g(%x: f32", ShapeText(data), ", %i: ", ir::DTypeName(it),
                            ShapeText(ind), ", %u: f32", ShapeText(ind), ") -> (%y) opset 18 {\n",
                            "  %y = ScatterElements(%x, %i, %u) {axis=", axis, ", reduction=\"",
                            red, "\"} : f32", ShapeText(data), "\n}\n");
      c.inputs = {Data(DType::kF32, data, seed), Indices(it, ind, -data[a], data[a], seed + 1),
                  Data(DType::kF32, ind, seed + 2)};
      seed += 3;
      cases.push_back(std::move(c));
    }
  }
  // Integers, the opset 10 alias, and a duplicate-heavy 1-D case.
  cases.push_back({R"(graph g(%x: i32[4,6], %i: i64[3,6], %u: i32[3,6]) -> (%y) opset 18 {
  %y = ScatterElements(%x, %i, %u) {axis=0, reduction="add"} : i32[4,6]
})",
                   {Data(DType::kI32, {4, 6}, 1), Indices(DType::kI64, {3, 6}, -4, 4, 2),
                    Data(DType::kI32, {3, 6}, 3)}});
  cases.push_back({R"(graph g(%x: f32[4,6], %i: i64[4,2], %u: f32[4,2]) -> (%y) opset 10 {
  %y = Scatter(%x, %i, %u) {axis=1} : f32[4,6]
})",
                   {Data(DType::kF32, {4, 6}, 4), Indices(DType::kI64, {4, 2}, -6, 6, 5),
                    Data(DType::kF32, {4, 2}, 6)}});
  cases.push_back({R"(graph g(%x: f32[3], %i: i64[12], %u: f32[12]) -> (%y) opset 18 {
  %y = ScatterElements(%x, %i, %u) : f32[3]
})",
                   {Data(DType::kF32, {3}, 7), Indices(DType::kI64, {12}, -3, 3, 8),
                    Data(DType::kF32, {12}, 9)}});
  CheckCases(cases);
}

TEST(LowerScatter, ScatterNDMatchesReference) {
  std::vector<GraphCase> cases;
  uint32_t seed = 300;
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    for (int m : {1, 2, 3}) {
      const ir::Shape data = {4, 3, 5};
      const ir::Shape ind = {2, 3, m};
      ir::Shape upd = {2, 3};
      upd.insert(upd.end(), data.begin() + m, data.end());
      GraphCase c;
      c.text = absl::StrCat("graph g(%x: f32", ShapeText(data), ", %i: i64", ShapeText(ind),
                            ", %u: f32", ShapeText(upd), ") -> (%y) opset 18 {\n",
                            "  %y = ScatterND(%x, %i, %u) {reduction=\"", red, "\"} : f32",
                            ShapeText(data), "\n}\n");
      // Components in [-3, 3): valid on every axis, duplicates likely.
      c.inputs = {Data(DType::kF32, data, seed), Indices(DType::kI64, ind, -3, 3, seed + 1),
                  Data(DType::kF32, upd, seed + 2)};
      seed += 3;
      cases.push_back(std::move(c));
    }
  }
  cases.push_back({R"(graph g(%x: i64[5,2], %i: i32[4,1], %u: i64[4,2]) -> (%y) opset 18 {
  %y = ScatterND(%x, %i, %u) {reduction="mul"} : i64[5,2]
})",
                   {Data(DType::kI64, {5, 2}, 1), Indices(DType::kI32, {4, 1}, -5, 5, 2),
                    Data(DType::kI64, {4, 2}, 3)}});
  CheckCases(cases);
}

TEST(LowerScatter, MaxUnpoolMatchesReference) {
  // Indices are flat positions in the unpooled 1x2x5x5 (with output_shape:
  // placed into 1x2x6x7).
  const Tensor x = Data(DType::kF32, {1, 2, 2, 2}, 11);
  const Tensor i = Indices(DType::kI64, {1, 2, 2, 2}, 0, 50, 12);
  std::vector<GraphCase> cases;
  cases.push_back({R"(graph g(%x: f32[1,2,2,2], %i: i64[1,2,2,2]) -> (%y) opset 11 {
  %y = MaxUnpool(%x, %i) {kernel_shape=[3, 3], strides=[2, 2]} : f32[1,2,5,5]
})",
                   {x, i}});
  cases.push_back({R"(graph g(%x: f32[1,2,2,2], %i: i64[1,2,2,2], %s: i64[4]) -> (%y) opset 11 {
  %y = MaxUnpool(%x, %i, %s) {kernel_shape=[3, 3], strides=[2, 2]} : f32[1,2,6,7]
})",
                   {x, i, Tensor::FromVector<int64_t>({4}, {1, 2, 6, 7})}});
  cases.push_back({R"(graph g(%x: f32[1,2,2,2], %i: i64[1,2,2,2]) -> (%y) opset 11 {
  %s = constant i64[4] [1, 2, 6, 7]
  %y = MaxUnpool(%x, %i, %s) {kernel_shape=[3, 3], strides=[2, 2]} : f32[1,2,6,7]
})",
                   {x, i}});
  CheckCases(cases);
}

TEST(LowerScatter, CumSumMatchesReference) {
  std::vector<GraphCase> cases;
  uint32_t seed = 500;
  for (const char* attrs : {"", "{exclusive=1}", "{reverse=1}", "{exclusive=1, reverse=1}"}) {
    for (const char* dt : {"f32", "i32", "i64"}) {
      const DType t = *ir::DTypeFromName(dt);
      // Constant axis, short (triangular) and long (scan).
      for (const auto& [shape, axis] : std::vector<std::pair<ir::Shape, int>>{
               {{3, 4, 5}, 1}, {{3, 4, 5}, -1}, {{2, 100, 3}, 1}, {{130}, 0}, {{70, 2}, 0}}) {
        cases.push_back({absl::StrCat("graph g(%x: ", dt, ShapeText(shape), ") -> (%y) opset 14 {\n",
                                      "  %a = constant i64[] ", axis, "\n",
                                      "  %y = CumSum(%x, %a) ", attrs, " : ", dt, ShapeText(shape),
                                      "\n}\n"),
                         {Data(t, shape, seed++)}});
      }
      // Run-time axis.
      for (int axis : {0, 1, -1, -2}) {
        cases.push_back({absl::StrCat("graph g(%x: ", dt, "[3,5], %a: i32[]) -> (%y) opset 14 {\n",
                                      "  %y = CumSum(%x, %a) ", attrs, " : ", dt, "[3,5]\n}\n"),
                         {Data(t, {3, 5}, seed++), Tensor::FromVector<int32_t>({}, {axis})}});
      }
    }
  }
  CheckCases(cases);
}

TEST(LowerScatter, RuntimeSliceMatchesReference) {
  const Tensor x = Data(DType::kF32, {20, 10, 5}, 1);
  auto v = [](std::vector<int64_t> a) {
    const int64_t n = static_cast<int64_t>(a.size());
    return Tensor::FromVector<int64_t>({n}, a);
  };
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<GraphCase> cases;
  auto add = [&](const std::string& out, std::vector<int64_t> s, std::vector<int64_t> e,
                 std::vector<int64_t> a, std::vector<int64_t> st) {
    const int64_t n = static_cast<int64_t>(s.size());
    cases.push_back({absl::StrCat("graph g(%x: f32[20,10,5], %s: i64[", n, "], %e: i64[", n,
                                  "], %a: i64[", n, "], %t: i64[", n,
                                  "]) -> (%y) opset 13 {\n  %y = Slice(%x, %s, %e, %a, %t) : f32",
                                  out, "\n}\n"),
                     {x, v(s), v(e), v(a), v(st)}});
  };
  add("[3,10,5]", {0, 0}, {3, 10}, {0, 1}, {1, 1});
  add("[20,10,1]", {1000}, {1000}, {1}, {1});  // empty on dim 1? no: clamps to 10..10
  cases.pop_back();
  add("[20,9,5]", {1}, {1000}, {1}, {1});
  add("[20,10,3]", {-3}, {kMax}, {-1}, {1});
  add("[19,3,2]", {20, 10, 4}, {0, 0, 1}, {0, 1, 2}, {-1, -3, -2});
  add("[20,5,5]", {-1}, {-kMax}, {1}, {-2});
  add("[20,10,5]", {0, 0, 0}, {kMax, kMax, kMax}, {2, 0, 1}, {1, 1, 1});
  // Default axes and steps.
  cases.push_back({R"(graph g(%x: f32[20,10,5], %s: i64[2], %e: i64[2]) -> (%y) opset 13 {
  %y = Slice(%x, %s, %e) : f32[20,8,5]
})",
                   {x, v({0, 2}), v({20, 10})}});
  CheckCases(cases);
}

TEST(LowerScatter, OutOfRangeIndicesAndBadSlicesAreErrors) {
  struct Bad {
    const char* text;
    std::vector<Tensor> inputs;
    const char* message;
  };
  const Tensor x = Data(DType::kF32, {4, 3}, 1);
  auto i64 = [](ir::Shape s, std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(s, v); };
  const std::vector<Bad> bad = {
      {R"(graph g(%x: f32[4,3], %i: i64[1,3], %u: f32[1,3]) -> (%y) opset 18 {
  %y = ScatterElements(%x, %i, %u) {axis=0} : f32[4,3]
})",
       {x, i64({1, 3}, {0, 4, 1}), Data(DType::kF32, {1, 3}, 2)}, "index 4 is out of range [-4, 4)"},
      {R"(graph g(%x: f32[4,3], %i: i64[2,1], %u: f32[2,3]) -> (%y) opset 18 {
  %y = ScatterND(%x, %i, %u) {reduction="add"} : f32[4,3]
})",
       {x, i64({2, 1}, {-5, 1}), Data(DType::kF32, {2, 3}, 3)}, "index -5 is out of range [-4, 4)"},
      {R"(graph g(%x: f32[4,3], %i: i64[1,2], %u: f32[1]) -> (%y) opset 18 {
  %y = ScatterND(%x, %i, %u) : f32[4,3]
})",
       {x, i64({1, 2}, {1, 3}), Data(DType::kF32, {1}, 4)}, "out of range [-12, 12)"},
      {R"(graph g(%x: f32[1,1,2,2], %i: i64[1,1,2,2]) -> (%y) opset 11 {
  %y = MaxUnpool(%x, %i) {kernel_shape=[2, 2], strides=[2, 2]} : f32[1,1,4,4]
})",
       {Data(DType::kF32, {1, 1, 2, 2}, 5), i64({1, 1, 2, 2}, {0, 5, 16, 3})},
       "out of range [-16, 16)"},
      {R"(graph g(%x: f32[4,3], %s: i64[1], %e: i64[1]) -> (%y) opset 13 {
  %y = Slice(%x, %s, %e) : f32[2,3]
})",
       {x, i64({1}, {0}), i64({1}, {3})}, "out of range [-12, 12)"},
  };
  std::vector<backends::cpp::ProgramCase> pcs;
  for (const Bad& b : bad) {
    absl::StatusOr<ir::loop::LoopModule> lp = Lower(b.text);
    ASSERT_TRUE(lp.ok()) << b.text << "\n" << lp.status();
    backends::cpp::ProgramCase pc;
    pc.name = b.text;
    pc.program = lp->program;
    for (size_t k = 0; k < lp->inputs.size(); ++k) {
      pc.inputs[lp->program.buffers[lp->inputs[k]].name] = b.inputs[k];
    }
    absl::Status s = ir::loop::RunLoopProgram(pc.program, pc.inputs).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.text << "\n" << s;
    EXPECT_THAT(s.message(), HasSubstr(b.message)) << b.text;
    EXPECT_THAT(s.message(), HasSubstr("kernel 'k")) << b.text;
    pcs.push_back(std::move(pc));
  }
  const jit::TestIsa t = jit::GetTestIsa();
  ASSERT_TRUE(t.error.empty()) << t.error;
  if (!t.skip_reason.empty()) return;
  absl::StatusOr<std::vector<backends::cpp::CaseResult>> r =
      backends::cpp::RunCases(t, pcs, OneUnit());
  ASSERT_TRUE(r.ok()) << r.status();
  for (size_t c = 0; c < pcs.size(); ++c) {
    EXPECT_EQ((*r)[c].rc, ir::loop::kErrorIndexOutOfRange) << pcs[c].name;
  }
}

TEST(LowerScatter, ConstantOutOfRangeIndexIsALoweringError) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(graph g(%x: f32[4,3], %u: f32[1,3]) -> (%y) opset 18 {
  %i = constant i64[1,3] [0, 4, 1]
  %y = ScatterElements(%x, %i, %u) name="sc" : f32[4,3]
})");
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lp.status().message(), HasSubstr("index 4 out of range"));
}

}  // namespace
}  // namespace kiln::lowering
