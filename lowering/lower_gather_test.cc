// Tests of Gather / GatherElements with runtime indices: they lower to a
// checked load_indirect (golden text), match the reference interpreter
// including negative indices and views of the data, and an out-of-range index
// is an error naming the kernel instead of a wrong or out-of-bounds read.
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "ir/loop/interpreter.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "lowering/lower_graph.h"
#include "lowering/lowering_test_util.h"
#include "testing/filecheck.h"

namespace kiln::lowering {
namespace {

using ::testing::HasSubstr;
using testing::CheckLowering;
using testing::CheckOptions;

absl::StatusOr<ir::loop::LoopModule> Lower(const char* text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  return LowerGraph(*g);
}

TEST(LowerGather, RuntimeIndicesBecomeLoadIndirect) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(
graph g(%x: f32[3,5,2], %i: i64[4], %j: i32[3,4,2]) -> (%a, %b) opset 13 {
  %a = Gather(%x, %i) {axis=1} name="gather" : f32[3,4,2]
  %b = GatherElements(%x, %j) {axis=1} name="ge" : f32[3,4,2]
}
)");
  ASSERT_TRUE(lp.ok()) << lp.status();
  const std::string out = ir::loop::PrintProgram(lp->program);
  absl::Status s = kiln::testing::RunFileCheck(out, R"(
    CHECK: kernel k0_gather "Gather" over (i0: 3, i1: 4, i2: 2) ops=["gather"] {
    CHECK-NEXT:   %0 = load %i[i1]
    CHECK-NEXT:   %1 = load_indirect %x[i0*10 + i2], %0, stride 2, extent 5
    CHECK-NEXT:   store %a[i0*8 + i1*2 + i2], %1
    CHECK-NEXT: }
    CHECK: kernel k1_gatherelements "GatherElements" over (i0: 3, i1: 4, i2: 2) ops=["ge"] {
    CHECK-NEXT:   %0 = load %j[i0*8 + i1*2 + i2]
    CHECK-NEXT:   %1 = load_indirect %x[i0*10 + i2], %0, stride 2, extent 5
    CHECK-NEXT:   store %b[i0*8 + i1*2 + i2], %1
    CHECK-NEXT: }
  )");
  EXPECT_TRUE(s.ok()) << s << "\n" << out;
}

TEST(LowerGather, MatchesReferenceWithNegativeIndices) {
  CheckOptions opts;
  opts.inputs[1] = ir::Tensor::FromVector<int64_t>({2, 3}, {4, -1, 0, -5, 2, -3});
  opts.inputs[2] = ir::Tensor::FromVector<int32_t>({2}, {-2, 1});
  opts.inputs[3] = ir::Tensor::FromVector<int64_t>(
      {3, 2, 2}, {-1, 0, 1, -2, 1, 1, 0, -1, -2, 1, 0, 0});
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[3,5,2], %i: i64[2,3], %k: i32[2], %e: i64[3,2,2]) -> (%a, %b, %c, %d, %f) opset 13 {
  %a = Gather(%x, %i) {axis=1} : f32[3,2,3,2]
  %b = Gather(%x, %k) {axis=-1} : f32[3,5,2]
  %c = GatherElements(%x, %e) {axis=-1} : f32[3,2,2]
  %t = Transpose(%x) {perm=[2, 0, 1]} : f32[2,3,5]
  %d = Gather(%t, %i) {axis=2} : f32[2,3,2,3]
  %s = constant i64[1] [30]
  %flat = Reshape(%t, %s) : f32[30]
  %f = Gather(%flat, %k) {axis=0} : f32[2]
}
)", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerGather, GatherElementsMatchesReferenceOnAxisZero) {
  CheckOptions opts;
  opts.inputs[1] = ir::Tensor::FromVector<int64_t>({2, 3}, {1, -3, 2, -1, 0, 1});
  absl::Status s = CheckLowering(R"(
graph g(%x: f32[3,4], %i: i64[2,3]) -> (%y) opset 13 {
  %y = GatherElements(%x, %i) {axis=0} : f32[2,3]
}
)", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerGather, OutOfRangeRuntimeIndexIsAnErrorNamingTheKernel) {
  for (const char* text : {
           R"(graph g(%x: f32[4,3], %i: i64[2]) -> (%y) opset 13 {
  %y = Gather(%x, %i) name="gather" : f32[2,3]
})",
           R"(graph g(%x: f32[4,3], %i: i64[2]) -> (%y) opset 13 {
  %u = Unsqueeze(%i) {axes=[1]} : i64[2,1]
  %y = GatherElements(%x, %u) name="gather" : f32[2,1]
})"}) {
    absl::StatusOr<ir::loop::LoopModule> lp = Lower(text);
    ASSERT_TRUE(lp.ok()) << lp.status();
    for (int64_t bad : {4, -5}) {
      std::map<std::string, ir::Tensor> in = {
          {"x", ir::Tensor::FromVector<float>({4, 3}, std::vector<float>(12, 1.0f))},
          {"i", ir::Tensor::FromVector<int64_t>({2}, {1, bad})}};
      auto out = ir::loop::RunLoopProgram(lp->program, in);
      ASSERT_FALSE(out.ok()) << text;
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(out.status().message(), HasSubstr("kernel 'k0_gather"));
      EXPECT_THAT(out.status().message(), HasSubstr("index " + std::to_string(bad) +
                                                    " is out of range [-4, 4)"));
    }
  }
}

TEST(LowerGather, OutOfRangeConstantIndexIsALoweringError) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(graph g(%x: f32[4,3]) -> (%y) opset 13 {
  %i = constant i64[2,3] [0, 1, 2, 3, 0, 4]
  %y = GatherElements(%x, %i) name="ge" : f32[2,3]
})");
  ASSERT_FALSE(lp.ok());
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lp.status().message(), HasSubstr("index 4 out of range"));
}

}  // namespace
}  // namespace kiln::lowering
