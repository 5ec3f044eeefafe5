// Losses (NLL, SoftmaxCrossEntropy), OneHot, GatherND, ReverseSequence,
// TopK, (De)Quantize, QLinearMatMul, windows, BitShift, TfIdfVectorizer,
// GridSample, RoiAlign, DFT, STFT and the extended Dropout / ReduceSum /
// MaxPool / BatchNorm / Pad lowered to loop kernels and compared with
// the reference interpreter; run-time index errors and lowering-time refusals.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "interp/interpreter.h"
#include "interp/loop_module.h"
#include "lowering/lower_graph.h"
#include "lowering/lowering_test_util.h"

namespace kiln::lowering {
namespace {

using ir::Tensor;
using testing::CheckLowering;
using testing::CheckOptions;

absl::StatusOr<ir::loop::LoopModule> Lower(const std::string& text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  return LowerGraph(*g);
}

bool AllLoopKernels(const ir::loop::LoopModule& lp) {
  for (const ir::loop::Kernel& k : lp.program.kernels) {
    if (k.kind != ir::loop::Kernel::Kind::kLoop) return false;
  }
  return true;
}

// Lowers `text` and runs it on `inputs` (loop interpreter).
absl::StatusOr<std::vector<Tensor>> LowerAndRun(const std::string& text,
                                                const std::vector<Tensor>& inputs) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(text);
  if (!lp.ok()) return lp.status();
  return interp::RunLoopModule(*lp, inputs);
}

// ---------------------------------------------------------------------------
// Losses.

std::string LossGraph(const std::string& op, const std::string& x_type,
                      const std::string& t_type, bool weight,
                      const std::string& attrs, const std::string& out_type,
                      bool log_prob = false) {
  return absl::StrCat(
      "graph g(%x: ", x_type, ", %t: ", t_type, weight ? ", %w: f32[4]" : "",
      ") -> (%y", log_prob ? ", %lp" : "", ") opset 13 {\n  %y", log_prob ? ", %lp" : "",
      " = ", op, "(%x, %t", weight ? ", %w" : "", ") ", attrs, " : ", out_type,
      log_prob ? absl::StrCat(", ", x_type) : "", "\n}\n");
}

struct LossCase {
  const char* x_type;
  const char* t_type;
  const char* none_type;
  std::vector<int64_t> t_shape;
};

class LossTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LossTest, ReductionsWeightsIgnoreIndexMatchReference) {
  const std::string op = GetParam();
  const LossCase cases[] = {
      {"f32[3,4]", "i64[3]", "f32[3]", {3}},
      {"f32[2,4,5]", "i64[2,5]", "f32[2,5]", {2, 5}},
      {"f32[2,4,3,2]", "i32[2,3,2]", "f32[2,3,2]", {2, 3, 2}},
  };
  for (const LossCase& c : cases) {
    const int64_t n = ir::NumElements(c.t_shape);
    std::vector<int64_t> t(n);
    // Classes 0..3, with -1 (ignored below when ignore_index=-1) and 3
    // (ignored with ignore_index=3).
    for (int64_t i = 0; i < n; ++i) t[i] = (i * 7 + 1) % 5 - 1;
    for (bool weight : {false, true}) {
      for (const char* reduction : {"none", "sum", "mean"}) {
        for (const char* ignore : {"", ", ignore_index=-1", ", ignore_index=3"}) {
          CheckOptions opts;
          const bool has_neg = std::string(ignore) != ", ignore_index=-1";
          std::vector<int64_t> tv = t;
          if (has_neg) {
            for (int64_t& v : tv) v = v < 0 ? 2 : v;
          }
          if (std::string(c.t_type).rfind("i32", 0) == 0) {
            opts.inputs[1] = Tensor::FromVector<int32_t>(
                c.t_shape, std::vector<int32_t>(tv.begin(), tv.end()));
          } else {
            opts.inputs[1] = Tensor::FromVector<int64_t>(c.t_shape, tv);
          }
          if (weight) {
            opts.inputs[2] = Tensor::FromVector<float>({4}, {0.5f, 2.0f, 1.5f, 0.25f});
          }
          const std::string attrs =
              absl::StrCat("{reduction=\"", reduction, "\"", ignore, "}");
          const bool none = std::string(reduction) == "none";
          const std::string g = LossGraph(op, c.x_type, c.t_type, weight, attrs,
                                          none ? c.none_type : "f32[]");
          absl::Status s = CheckLowering(g, opts);
          EXPECT_TRUE(s.ok()) << g << s;
          absl::StatusOr<ir::loop::LoopModule> lp = Lower(g);
          ASSERT_TRUE(lp.ok()) << lp.status();
          EXPECT_TRUE(AllLoopKernels(*lp));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Losses, LossTest,
                         ::testing::Values("NegativeLogLikelihoodLoss",
                                           "SoftmaxCrossEntropyLoss"));

TEST(LowerLoss, SoftmaxCrossEntropyLogProbOutput) {
  for (const char* reduction : {"none", "mean"}) {
    CheckOptions opts;
    opts.inputs[1] = Tensor::FromVector<int64_t>({2, 3}, {0, 3, 1, 2, 2, 0});
    const bool none = std::string(reduction) == "none";
    const std::string g = LossGraph(
        "SoftmaxCrossEntropyLoss", "f32[2,4,3]", "i64[2,3]", false,
        absl::StrCat("{reduction=\"", reduction, "\"}"), none ? "f32[2,3]" : "f32[]",
        /*log_prob=*/true);
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(LowerLoss, DefaultReductionIsMeanAndAllIgnoredIsNan) {
  const std::string g = LossGraph("NegativeLogLikelihoodLoss", "f32[2,4]", "i64[2]",
                                  false, "{ignore_index=1}", "f32[]");
  absl::StatusOr<std::vector<Tensor>> r =
      LowerAndRun(g, {Tensor::FromVector<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
                      Tensor::FromVector<int64_t>({2}, {1, 1})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::isnan((*r)[0].data<float>()[0]));  // 0 / 0, as the reference
  r = LowerAndRun(g, {Tensor::FromVector<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
                      Tensor::FromVector<int64_t>({2}, {0, 3})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ((*r)[0].data<float>()[0], -(1.0f + 8.0f) / 2);
}

TEST(LowerLoss, TargetOutOfRangeFailsAtRunTime) {
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    const std::string g = LossGraph(op, "f32[2,4]", "i64[2]", false,
                                    "{reduction=\"sum\", ignore_index=9}", "f32[]");
    for (int64_t bad : {4, -1, -5}) {
      absl::StatusOr<std::vector<Tensor>> r = LowerAndRun(
          g, {Tensor::FromVector<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
              Tensor::FromVector<int64_t>({2}, {0, bad})});
      EXPECT_FALSE(r.ok()) << op << " target " << bad;
    }
    // The ignored value itself may be out of range.
    absl::StatusOr<std::vector<Tensor>> r = LowerAndRun(
        g, {Tensor::FromVector<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
            Tensor::FromVector<int64_t>({2}, {0, 9})});
    EXPECT_TRUE(r.ok()) << r.status();
  }
}

TEST(LowerLoss, Errors) {
  // Target shape does not match.
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(LossGraph(
      "NegativeLogLikelihoodLoss", "f32[3,4]", "i64[4]", false, "", "f32[]"));
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  lp = Lower(LossGraph("SoftmaxCrossEntropyLoss", "f32[3,4]", "i64[3]", false,
                       "{reduction=\"avg\"}", "f32[]"));
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  // Float target.
  lp = Lower(LossGraph("NegativeLogLikelihoodLoss", "f32[3,4]", "f32[3]", false, "",
                       "f32[]"));
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

// ---------------------------------------------------------------------------
// OneHot.

TEST(LowerOneHot, AxesAndNegativeIndicesMatchReference) {
  for (int axis : {-1, 0, 1, -2}) {
    for (const char* itype : {"i64", "i32", "f32"}) {
      const std::string out_shape = axis == 0 || axis == -3 ? "[5,2,3]"
                                    : (axis == 1 || axis == -2) ? "[2,5,3]"
                                                                : "[2,3,5]";
      const std::string g = absl::StrCat(
          "graph g(%i: ", itype, "[2,3], %v: f32[2]) -> (%y) opset 11 {\n"
          "  %d = constant i64[] 5\n"
          "  %y = OneHot(%i, %d, %v) {axis=", axis, "} : f32", out_shape, "\n}\n");
      CheckOptions opts;
      opts.seed = 3 + axis;
      absl::Status s = CheckLowering(g, opts);
      EXPECT_TRUE(s.ok()) << g << s;
    }
  }
}

TEST(LowerOneHot, Errors) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(
graph g(%i: i64[3], %v: f32[3]) -> (%y) opset 11 {
  %d = constant i64[] 4
  %y = OneHot(%i, %d, %v) : f32[3,4]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  lp = Lower(R"(
graph g(%i: i64[3], %v: f32[2]) -> (%y) opset 11 {
  %d = constant i64[] 5
  %y = OneHot(%i, %d, %v) : f32[3,4]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

// ---------------------------------------------------------------------------
// GatherND.

TEST(LowerGatherNd, DepthsAndBatchDimsMatchReference) {
  struct Case {
    const char* data;
    const char* ind;
    std::vector<int64_t> ind_shape;
    std::vector<int64_t> ind_values;
    int batch_dims;
    const char* out;
  };
  const Case cases[] = {
      {"f32[3,4]", "i64[2,2]", {2, 2}, {0, 1, -1, 3}, 0, "f32[2]"},
      {"f32[3,4]", "i64[2,1]", {2, 1}, {2, -3}, 0, "f32[2,4]"},
      {"f32[2,3,4]", "i64[2,1,2]", {2, 1, 2}, {0, 2, 1, -1}, 0, "f32[2,1,4]"},
      {"f32[2,3,4]", "i64[2,1]", {2, 1}, {2, 0}, 1, "f32[2,4]"},
      {"f32[2,3,4]", "i64[2,2,2]", {2, 2, 2}, {0, 1, 2, 3, 1, -1, 0, 0}, 1,
       "f32[2,2]"},
  };
  for (const Case& c : cases) {
    const std::string g = absl::StrCat(
        "graph g(%x: ", c.data, ", %i: ", c.ind, ") -> (%y) opset 12 {\n"
        "  %y = GatherND(%x, %i) {batch_dims=", c.batch_dims, "} : ", c.out, "\n}\n");
    CheckOptions opts;
    opts.inputs[1] = Tensor::FromVector<int64_t>(c.ind_shape, c.ind_values);
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << g << s;
  }
}

TEST(LowerGatherNd, TransposedDataAndOutOfRangeIndex) {
  const std::string g = R"(
graph g(%x: f32[4,3], %i: i64[2,2]) -> (%y) opset 12 {
  %t = Transpose(%x) {perm=[1, 0]} : f32[3,4]
  %y = GatherND(%t, %i) : f32[2]
}
)";
  CheckOptions opts;
  opts.inputs[1] = Tensor::FromVector<int64_t>({2, 2}, {2, 3, 0, -4});
  absl::Status s = CheckLowering(g, opts);
  EXPECT_TRUE(s.ok()) << s;
  // Row 3 is out of range although the flattened offset 3*4+0 < 12 is not.
  for (std::vector<int64_t> bad : {std::vector<int64_t>{3, 0}, {0, 4}, {-4, 0}}) {
    absl::StatusOr<std::vector<Tensor>> r = LowerAndRun(
        g, {testing::RandomTensor(ir::DType::kF32, {4, 3}, 1),
            Tensor::FromVector<int64_t>({2, 2}, {0, 0, bad[0], bad[1]})});
    EXPECT_FALSE(r.ok()) << bad[0] << "," << bad[1];
  }
}

// ---------------------------------------------------------------------------
// ReverseSequence.

TEST(LowerReverseSequence, BothLayoutsMatchReference) {
  for (const bool batch_major : {false, true}) {
    const std::string g = absl::StrCat(
        "graph g(%x: f32[4,4,3], %l: i64[4]) -> (%y) opset 10 {\n"
        "  %y = ReverseSequence(%x, %l) {batch_axis=", batch_major ? 0 : 1,
        ", time_axis=", batch_major ? 1 : 0, "} : f32[4,4,3]\n}\n");
    CheckOptions opts;
    opts.inputs[1] = Tensor::FromVector<int64_t>({4}, {4, 0, 1, 3});
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << g << s;
    absl::StatusOr<std::vector<Tensor>> r = LowerAndRun(
        g, {testing::RandomTensor(ir::DType::kF32, {4, 4, 3}, 1),
            Tensor::FromVector<int64_t>({4}, {4, 5, 1, 3})});
    EXPECT_FALSE(r.ok()) << "length 5 > 4 must fail";
  }
}

// ---------------------------------------------------------------------------
// TopK.

TEST(LowerTopK, AxesLargestSmallestTiesAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* attrs;
    int64_t k;
    const char* out;
  };
  const Case cases[] = {
      {"{axis=1}", 3, "[3,3,4]"},
      {"{axis=-1}", 2, "[3,6,2]"},
      {"{axis=0, largest=0}", 2, "[2,6,4]"},
      {"{axis=-2, largest=0, sorted=1}", 6, "[3,6,4]"},
      {"{axis=-1}", 0, "[3,6,0]"},
  };
  // Ties (repeated values) and NaNs in the data.
  std::vector<float> x(3 * 6 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 5) % 7);
  x[5] = nan;
  x[30] = nan;
  for (const Case& c : cases) {
    for (const char* dt : {"f32", "i64"}) {
      const std::string g = absl::StrCat(
          "graph g(%x: ", dt, "[3,6,4]) -> (%v, %i) opset 11 {\n"
          "  %k = constant i64[1] [", c.k, "]\n"
          "  %v, %i = TopK(%x, %k) ", c.attrs, " : ", dt, c.out, ", i64", c.out,
          "\n}\n");
      CheckOptions opts;
      if (std::string(dt) == "f32") {
        opts.inputs[0] = Tensor::FromVector<float>({3, 6, 4}, x);
      } else {
        std::vector<int64_t> xi(x.size());
        for (size_t i = 0; i < x.size(); ++i) xi[i] = (i * 5) % 7;
        opts.inputs[0] = Tensor::FromVector<int64_t>({3, 6, 4}, xi);
      }
      absl::Status s = CheckLowering(g, opts);
      EXPECT_TRUE(s.ok()) << g << s;
    }
  }
}

TEST(LowerTopK, RunTimeKIsCheckedAgainstTheOutputShape) {
  const std::string g = R"(
graph g(%x: f32[3,4], %k: i64[1]) -> (%v, %i) opset 11 {
  %v, %i = TopK(%x, %k) : f32[3,2], i64[3,2]
}
)";
  CheckOptions opts;
  opts.inputs[1] = Tensor::FromVector<int64_t>({1}, {2});
  absl::Status s = CheckLowering(g, opts);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<std::vector<Tensor>> r =
      LowerAndRun(g, {testing::RandomTensor(ir::DType::kF32, {3, 4}, 1),
                      Tensor::FromVector<int64_t>({1}, {3})});
  EXPECT_FALSE(r.ok());
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(
graph g(%x: f32[3,4]) -> (%v, %i) opset 11 {
  %k = constant i64[1] [5]
  %v, %i = TopK(%x, %k) : f32[3,5], i64[3,5]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

// ---------------------------------------------------------------------------
// Quantization.

TEST(LowerQuantize, PerTensorPerAxisU8I8MatchReference) {
  const char* graphs[] = {
      R"(graph g(%x: f32[2,3,4]) -> (%y) opset 13 {
  %s = constant f32[] 0.05
  %z = constant u8[] 128
  %y = QuantizeLinear(%x, %s, %z) : u8[2,3,4]
})",
      R"(graph g(%x: f32[2,3,4]) -> (%y) opset 13 {
  %s = constant f32[3] [0.01, 0.1, 0.5]
  %z = constant i8[3] [-3, 0, 7]
  %y = QuantizeLinear(%x, %s, %z) {axis=1} : i8[2,3,4]
})",
      R"(graph g(%x: f32[2,3,4]) -> (%y) opset 13 {
  %s = constant f32[4] [0.01, 0.1, 0.5, 2.0]
  %y = QuantizeLinear(%x, %s) {axis=-1} : u8[2,3,4]
})",
      R"(graph g(%x: u8[2,3,4]) -> (%y) opset 13 {
  %s = constant f32[3] [0.01, 0.1, 0.5]
  %z = constant u8[3] [3, 0, 200]
  %y = DequantizeLinear(%x, %s, %z) {axis=1} : f32[2,3,4]
})",
      R"(graph g(%x: i8[2,3,4]) -> (%y) opset 13 {
  %s = constant f32[] 0.25
  %z = constant i8[] -5
  %y = DequantizeLinear(%x, %s, %z) : f32[2,3,4]
})",
      R"(graph g(%x: i32[5]) -> (%y) opset 13 {
  %s = constant f32[] 0.5
  %y = DequantizeLinear(%x, %s) : f32[5]
})",
  };
  for (const char* g : graphs) {
    CheckOptions opts;
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << g << s;
  }
}

TEST(LowerQuantize, RoundsHalfToEvenAndSaturates) {
  CheckOptions opts;
  opts.inputs[0] = Tensor::FromVector<float>(
      {8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300.0f, -300.0f, 127.5f});
  absl::Status s = CheckLowering(R"(graph g(%x: f32[8]) -> (%y, %w) opset 13 {
  %s = constant f32[] 1.0
  %z = constant i8[] 0
  %u = constant u8[] 0
  %y = QuantizeLinear(%x, %s, %z) : i8[8]
  %w = QuantizeLinear(%x, %s, %u) : u8[8]
})", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerQuantize, DynamicQuantizeLinear) {
  for (std::vector<float> x : {std::vector<float>{-1.5f, 0.25f, 3.0f, 2.9f, -0.1f, 1.0f},
                               std::vector<float>{0, 0, 0, 0, 0, 0},
                               std::vector<float>{1, 2, 3, 4, 5, 6},
                               std::vector<float>{-1, -2, -3, -4, -5, -6}}) {
    CheckOptions opts;
    opts.inputs[0] = Tensor::FromVector<float>({2, 3}, x);
    absl::Status s = CheckLowering(R"(graph g(%x: f32[2,3]) -> (%y, %s, %z) opset 11 {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[2,3], f32[], u8[]
})", opts);
    EXPECT_TRUE(s.ok()) << s;
  }
  // Axes of extent 1 (left out of the min/max reduction), and only such axes.
  CheckOptions opts;
  opts.inputs[0] = Tensor::FromVector<float>({1, 6, 1, 1}, {-1.5f, 0.25f, 3.0f, 2.9f, -0.1f, 1.0f});
  absl::Status s = CheckLowering(R"(graph g(%x: f32[1,6,1,1]) -> (%y, %s, %z) opset 11 {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[1,6,1,1], f32[], u8[]
})", opts);
  EXPECT_TRUE(s.ok()) << s;
  opts.inputs[0] = Tensor::FromVector<float>({1, 1}, {-2.5f});
  s = CheckLowering(R"(graph g(%x: f32[1,1]) -> (%y, %s, %z) opset 11 {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[1,1], f32[], u8[]
})", opts);
  EXPECT_TRUE(s.ok()) << s;
  opts.inputs[0] = Tensor::FromVector<float>({}, {0.75f});
  s = CheckLowering(R"(graph g(%x: f32[]) -> (%y, %s, %z) opset 11 {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[], f32[], u8[]
})", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerQuantize, QLinearMatMulShapesAndDtypesMatchReference) {
  const char* graphs[] = {
      R"(graph g(%a: u8[3,5], %b: u8[5,4]) -> (%y) opset 10 {
  %as = constant f32[] 0.05
  %az = constant u8[] 113
  %bs = constant f32[] 0.02
  %bz = constant u8[] 114
  %ys = constant f32[] 0.1
  %yz = constant u8[] 118
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[3,4]
})",
      R"(graph g(%a: i8[2,3,5], %b: i8[5,4]) -> (%y) opset 10 {
  %as = constant f32[] 0.5
  %az = constant i8[] -3
  %bs = constant f32[] 0.25
  %bz = constant i8[] 2
  %ys = constant f32[] 0.75
  %yz = constant i8[] 1
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : i8[2,3,4]
})",
      R"(graph g(%a: u8[5], %b: u8[2,5,3]) -> (%y) opset 10 {
  %as = constant f32[] 0.5
  %az = constant u8[] 3
  %bs = constant f32[] 0.25
  %bz = constant u8[] 2
  %ys = constant f32[] 0.75
  %yz = constant u8[] 100
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[2,3]
})",
  };
  for (const char* g : graphs) {
    absl::Status s = CheckLowering(g);
    EXPECT_TRUE(s.ok()) << g << s;
  }
}

// QLinearMatMul with constant B: a library call when the library runs it
// (LoweringOptions::library_call says so), else its loop kernel, whose
// result is the reference interpreter's.
TEST(LowerQuantize, QLinearMatMulLibraryCallOrLoopKernel) {
  const char* text = R"(graph g(%a: u8[3,5]) -> (%y) opset 10 {
  %as = constant f32[] 0.05
  %az = constant u8[] 113
  %b = constant i8[5,4] [-128, 127, 3, -90, 100, -7, 0, 1, 55, 66, -66, 2, 9, -100, 120, -1, 4, 5, 6, 7]
  %bs = constant f32[] 0.02
  %bz = constant i8[] 0
  %ys = constant f32[] 0.1
  %yz = constant u8[] 118
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[3,4]
})";
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  int asked = 0;
  for (const bool runs : {true, false}) {
    LoweringOptions o;
    o.library_call = [&](const ir::loop::LoopModule& lp, const ir::loop::Kernel& k) {
      ++asked;
      // The oracle sees the call with its constant B bound.
      EXPECT_EQ(k.call.op, "onnx.QLinearMatMul");
      EXPECT_EQ(lp.constants.count(k.call.inputs.at(3)), 1u);
      return runs ? absl::OkStatus() : absl::UnimplementedError("refused for the test");
    };
    absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*g, o);
    ASSERT_TRUE(lp.ok()) << lp.status();
    if (runs) {
      ASSERT_EQ(lp->program.kernels.size(), 1u);
      EXPECT_EQ(lp->program.kernels[0].kind, ir::loop::Kernel::Kind::kExtern);
      continue;
    }
    EXPECT_TRUE(AllLoopKernels(*lp));
    // No buffer or kernel of the refused call is left behind.
    for (const ir::loop::Kernel& k : lp->program.kernels) {
      EXPECT_FALSE(absl::StrContains(k.name, "qlinearmatmul") && k.kind != ir::loop::Kernel::Kind::kLoop);
    }
    Tensor a(ir::DType::kU8, {3, 5});
    for (int64_t i = 0; i < 15; ++i) a.data<uint8_t>()[i] = static_cast<uint8_t>(i * 17 + 3);
    absl::StatusOr<std::vector<Tensor>> got = interp::RunLoopModule(*lp, {a});
    absl::StatusOr<std::vector<Tensor>> want = interp::Run(*g, {a});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got->size(), 1u);
    for (int64_t i = 0; i < 12; ++i) {
      EXPECT_EQ((*got)[0].data<uint8_t>()[i], (*want)[0].data<uint8_t>()[i]) << i;
    }
  }
  EXPECT_EQ(asked, 2);
}

TEST(LowerQuantize, Errors) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(graph g(%x: f32[2,3]) -> (%y) opset 13 {
  %s = constant f32[2] [0.5, 0.25]
  %y = QuantizeLinear(%x, %s) {axis=1} : u8[2,3]
})");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  lp = Lower(R"(graph g(%x: f32[2,3]) -> (%y) opset 13 {
  %s = constant f32[] 0.5
  %z = constant i8[] 0
  %y = QuantizeLinear(%x, %s, %z) : u8[2,3]
})");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

// ---------------------------------------------------------------------------
// Windows and BitShift.

TEST(LowerWindows, PeriodicSymmetricAndSizeOne) {
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    for (int size : {1, 2, 10}) {
      for (int periodic : {0, 1}) {
        const std::string g = absl::StrCat(
            "graph g() -> (%w) opset 17 {\n  %n = constant i64[] ", size,
            "\n  %w = ", op, "(%n) {periodic=", periodic, "} : f32[", size, "]\n}\n");
        absl::Status s = CheckLowering(g);
        EXPECT_TRUE(s.ok()) << g << s;
      }
    }
  }
}

TEST(LowerWindows, RunTimeSizeMustMatchTheOutputShape) {
  const std::string g = R"(graph g(%n: i64[]) -> (%w) opset 17 {
  %w = HammingWindow(%n) {periodic=0} : f32[5]
})";
  CheckOptions opts;
  opts.inputs[0] = Tensor::Scalar<int64_t>(5);
  absl::Status s = CheckLowering(g, opts);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<std::vector<Tensor>> r = LowerAndRun(g, {Tensor::Scalar<int64_t>(6)});
  EXPECT_FALSE(r.ok());
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(graph g() -> (%w) opset 17 {
  %n = constant i64[] 4
  %w = HannWindow(%n) : f32[5]
})");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

TEST(LowerBitShift, LeftRightWithOverflowAndBroadcast) {
  for (const char* dir : {"LEFT", "RIGHT"}) {
    const std::string g = absl::StrCat(
        "graph g(%x: u8[2,5], %s: u8[5]) -> (%y) opset 11 {\n"
        "  %y = BitShift(%x, %s) {direction=\"", dir, "\"} : u8[2,5]\n}\n");
    CheckOptions opts;
    opts.inputs[0] =
        Tensor::FromVector<uint8_t>({2, 5}, {1, 255, 16, 200, 7, 3, 128, 0, 9, 64});
    opts.inputs[1] = Tensor::FromVector<uint8_t>({5}, {0, 1, 3, 7, 8});
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << dir << s;
  }
}

// ---------------------------------------------------------------------------
// Extensions of other families' lowerings.

TEST(LowerDropout, RunTimeTrainingModeIsCheckedInTheKernel) {
  const std::string g = R"(graph g(%x: f32[3,4], %r: f32[], %t: bool[]) -> (%y, %m) opset 13 {
  %y, %m = Dropout(%x, %r, %t) : f32[3,4], bool[3,4]
})";
  for (const auto& [ratio, training] :
       std::vector<std::pair<float, bool>>{{0.5f, false}, {0.0f, true}, {0.0f, false}}) {
    CheckOptions opts;
    opts.inputs[1] = Tensor::Scalar<float>(ratio);
    opts.inputs[2] = Tensor::Scalar<bool>(training);
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << ratio << " " << training << ": " << s;
  }
  // Training with a ratio > 0 would be random: the kernel refuses.
  absl::StatusOr<std::vector<Tensor>> r =
      LowerAndRun(g, {testing::RandomTensor(ir::DType::kF32, {3, 4}, 1),
                      Tensor::Scalar<float>(0.5f), Tensor::Scalar<bool>(true)});
  EXPECT_FALSE(r.ok());
}

TEST(LowerReduceSum, RunTimeAxesMatchReference) {
  struct Case {
    const char* attrs;
    std::vector<int64_t> axes;
    const char* out;
  };
  const Case cases[] = {
      {"{keepdims=1}", {1}, "[3,1,4]"},
      {"{keepdims=1}", {-1, 0}, "[1,2,1]"},
      {"{keepdims=0}", {-2}, "[3,4]"},
      {"{keepdims=0}", {2, 0}, "[2]"},
      {"{keepdims=1, noop_with_empty_axes=1}", {}, "[3,2,4]"},
      {"{keepdims=0}", {}, "[]"},
  };
  for (const Case& c : cases) {
    const int64_t na = c.axes.size();
    const std::string g = absl::StrCat(
        "graph g(%x: f32[3,2,4], %a: i64[", na, "]) -> (%y) opset 13 {\n"
        "  %y = ReduceSum(%x, %a) ", c.attrs, " : f32", c.out, "\n}\n");
    CheckOptions opts;
    opts.inputs[1] = Tensor::FromVector<int64_t>({na}, c.axes);
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << g << s;
  }
  // Unit dims may be named or not.
  const std::string unit = R"(graph g(%x: f32[3,1,4], %a: i64[2]) -> (%y) opset 13 {
  %y = ReduceSum(%x, %a) {keepdims=1} : f32[1,1,4]
})";
  for (std::vector<int64_t> axes : {std::vector<int64_t>{0, 1}, {-3, 1}}) {
    CheckOptions opts;
    opts.inputs[1] = Tensor::FromVector<int64_t>({2}, axes);
    absl::Status s = CheckLowering(unit, opts);
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(LowerReduceSum, RunTimeAxesContradictingShapesFailOrAreRefused) {
  const std::string g = R"(graph g(%x: f32[3,2,4], %a: i64[1]) -> (%y) opset 13 {
  %y = ReduceSum(%x, %a) {keepdims=1} : f32[3,1,4]
})";
  for (int64_t bad : {0, 2, 3, -4}) {
    absl::StatusOr<std::vector<Tensor>> r =
        LowerAndRun(g, {testing::RandomTensor(ir::DType::kF32, {3, 2, 4}, 1),
                        Tensor::FromVector<int64_t>({1}, {bad})});
    EXPECT_FALSE(r.ok()) << bad;
  }
  // Two axes must differ.
  absl::StatusOr<std::vector<Tensor>> r = LowerAndRun(
      R"(graph g(%x: f32[3,2,4], %a: i64[2]) -> (%y) opset 13 {
  %y = ReduceSum(%x, %a) {keepdims=1} : f32[1,2,1]
})",
      {testing::RandomTensor(ir::DType::kF32, {3, 2, 4}, 1),
       Tensor::FromVector<int64_t>({2}, {0, 0})});
  EXPECT_FALSE(r.ok());
  // [3,4,4] -> [3,4] could reduce dim 1 or dim 2.
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(graph g(%x: f32[3,4,4], %a: i64[1]) -> (%y) opset 13 {
  %y = ReduceSum(%x, %a) {keepdims=0} : f32[3,4]
})");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kUnimplemented) << lp.status();
  lp = Lower(R"(graph g(%x: f32[3,4,4], %a: i64[1]) -> (%y) opset 13 {
  %y = ReduceSum(%x, %a) {keepdims=1} : f32[3,5,4]
})");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

TEST(LowerMaxPool, IndicesOutputMatchesReference) {
  const char* graphs[] = {
      R"(graph g(%x: f32[2,3,5,5]) -> (%y, %i) opset 12 {
  %y, %i = MaxPool(%x) {kernel_shape=[2, 2]} : f32[2,3,4,4], i64[2,3,4,4]
})",
      R"(graph g(%x: f32[1,2,5,5]) -> (%y, %i) opset 12 {
  %y, %i = MaxPool(%x) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,2,3,3], i64[1,2,3,3]
})",
      R"(graph g(%x: f32[1,2,5,6]) -> (%y, %i) opset 12 {
  %y, %i = MaxPool(%x) {kernel_shape=[2, 3], storage_order=1, dilations=[2, 1]} : f32[1,2,3,4], i64[1,2,3,4]
})",
      R"(graph g(%x: f32[2,2,7]) -> (%y, %i) opset 12 {
  %y, %i = MaxPool(%x) {kernel_shape=[3], auto_pad="SAME_UPPER"} : f32[2,2,7], i64[2,2,7]
})",
      R"(graph g(%x: f32[1,1,3,4,4]) -> (%y, %i) opset 12 {
  %y, %i = MaxPool(%x) {kernel_shape=[2, 2, 2], storage_order=1} : f32[1,1,2,3,3], i64[1,1,2,3,3]
})",
  };
  for (const char* g : graphs) {
    absl::Status s = CheckLowering(g);
    EXPECT_TRUE(s.ok()) << g << s;
  }
  // Ties: the first maximum in the window wins.
  CheckOptions opts;
  opts.inputs[0] = Tensor::FromVector<float>({1, 1, 3, 3}, {1, 5, 5, 5, 5, 0, 2, 5, 1});
  absl::Status s = CheckLowering(R"(graph g(%x: f32[1,1,3,3]) -> (%y, %i) opset 12 {
  %y, %i = MaxPool(%x) {kernel_shape=[2, 2]} : f32[1,1,2,2], i64[1,1,2,2]
})", opts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerBatchNorm, TrainingModeMatchesReference) {
  for (const char* x_type : {"f32[2,3,4,5]", "f32[4,3]"}) {
    const std::string g = absl::StrCat(
        "graph g(%x: ", x_type, ", %s: f32[3], %b: f32[3], %m: f32[3], %v: f32[3]) "
        "-> (%y, %rm, %rv) opset 15 {\n"
        "  %y, %rm, %rv = BatchNormalization(%x, %s, %b, %m, %v) "
        "{training_mode=1, momentum=0.7, epsilon=0.01} : ", x_type, ", f32[3], f32[3]\n}\n");
    CheckOptions opts;
    opts.inputs[4] = Tensor::FromVector<float>({3}, {0.5f, 1.0f, 2.0f});
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << g << s;
  }
  // Only Y requested.
  absl::Status s = CheckLowering(R"(graph g(%x: f32[2,3,4], %s: f32[3], %b: f32[3], %m: f32[3], %v: f32[3]) -> (%y) opset 15 {
  %y, _, _ = BatchNormalization(%x, %s, %b, %m, %v) {training_mode=1} : f32[2,3,4]
})");
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerPad, RunTimePadsAllModesMatchReference) {
  for (const char* mode : {"constant", "edge", "reflect", "wrap"}) {
    for (std::vector<int64_t> pads : {std::vector<int64_t>{1, 2, 0, 2, 0, 1},
                                      std::vector<int64_t>{0, 0, 3, 3, 2, -1}}) {
      const std::string g = absl::StrCat(
          "graph g(%x: f32[3,4,5], %p: i64[6], %v: f32[]) -> (%y) opset 13 {\n"
          "  %y = Pad(%x, %p, %v) {mode=\"", mode, "\"} : f32[", 3 + pads[0] + pads[3],
          ",", 4 + pads[1] + pads[4], ",", 5 + pads[2] + pads[5], "]\n}\n");
      CheckOptions opts;
      opts.inputs[1] = Tensor::FromVector<int64_t>({6}, pads);
      opts.inputs[2] = Tensor::Scalar<float>(1.5f);
      absl::Status s = CheckLowering(g, opts);
      EXPECT_TRUE(s.ok()) << g << s;
    }
  }
  const std::string g = R"(graph g(%x: f32[3,4], %p: i64[4]) -> (%y) opset 13 {
  %y = Pad(%x, %p) : f32[5,4]
})";
  absl::StatusOr<std::vector<Tensor>> r =
      LowerAndRun(g, {testing::RandomTensor(ir::DType::kF32, {3, 4}, 1),
                      Tensor::FromVector<int64_t>({4}, {1, 1, 1, 0})});
  EXPECT_FALSE(r.ok()) << "pads giving [5,5] for a declared [5,4] must fail";
}

TEST(LowerGridSample, ModesPaddingsAlignAndRanksMatchReference) {
  struct Shapes {
    const char* x;
    const char* grid;
    const char* out;
  };
  const Shapes shapes[] = {
      {"f32[2,3,4,5]", "f32[2,3,6,2]", "f32[2,3,3,6]"},
      {"f32[1,2,1,4]", "f32[1,2,3,2]", "f32[1,2,2,3]"},
      {"f32[1,2,6]", "f32[1,5,1]", "f32[1,2,5]"},
      {"f32[1,1,3,4,2]", "f32[1,2,2,3,3]", "f32[1,1,2,2,3]"},
  };
  for (const Shapes& sh : shapes) {
    for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
      for (const char* pad : {"zeros", "border", "reflection"}) {
        for (int align : {0, 1}) {
          const std::string g = absl::StrCat(
              "graph g(%x: ", sh.x, ", %g: ", sh.grid, ") -> (%y) opset 16 {\n"
              "  %y = GridSample(%x, %g) {mode=\"", mode, "\", padding_mode=\"", pad,
              "\", align_corners=", align, "} : ", sh.out, "\n}\n");
          absl::Status s = CheckLowering(g);
          EXPECT_TRUE(s.ok()) << g << s;
        }
      }
    }
  }
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(graph g(%x: f32[1,1,4,4], %g: f32[1,2,2,2]) -> (%y) opset 16 {
  %y = GridSample(%x, %g) {mode="area"} : f32[1,1,2,2]
})");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

TEST(LowerDft, AxesInverseOnesidedAndLengthMatchReference) {
  struct Case {
    const char* x;
    const char* attrs;
    const char* length;  // "" or a constant dft_length
    const char* out;
  };
  const Case cases[] = {
      {"f32[2,6,3,1]", "{axis=1}", "", "f32[2,6,3,2]"},
      {"f32[2,6,3,2]", "{axis=-2}", "", "f32[2,6,3,2]"},
      {"f32[2,6,3,2]", "{axis=1, inverse=1}", "", "f32[2,6,3,2]"},
      {"f32[2,7,1]", "{axis=1, onesided=1}", "", "f32[2,4,2]"},
      {"f32[2,5,2]", "{axis=1}", "8", "f32[2,8,2]"},
      {"f32[2,5,2]", "{axis=1}", "3", "f32[2,3,2]"},
  };
  for (const Case& c : cases) {
    const bool has_len = std::string(c.length).size() > 0;
    const std::string g = absl::StrCat(
        "graph g(%x: ", c.x, ") -> (%y) opset 17 {\n",
        has_len ? absl::StrCat("  %n = constant i64[] ", c.length, "\n") : "",
        "  %y = DFT(%x", has_len ? ", %n" : "", ") ", c.attrs, " : ", c.out, "\n}\n");
    CheckOptions opts;
    opts.atol = 1e-5;
    absl::Status s = CheckLowering(g, opts);
    EXPECT_TRUE(s.ok()) << g << s;
  }
}

TEST(LowerTfIdf, ModesSkipsAndGramLengthsMatchReference) {
  const std::vector<int32_t> row = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};
  std::vector<int32_t> two_rows = row;
  two_rows.insert(two_rows.end(), {6, 7, 5, 6, 8, 7, 3, 1, 2, 5, 4, 5});
  for (const char* mode : {"TF", "IDF", "TFIDF"}) {
    for (int min_n : {1, 2}) {
      for (int skip : {0, 2}) {
        for (bool batched : {false, true}) {
          const std::string x_type = batched ? "i32[2,12]" : "i32[12]";
          const std::string y_type = batched ? "f32[2,7]" : "f32[7]";
          const std::string g = absl::StrCat(
              "graph g(%x: ", x_type, ") -> (%y) opset 9 {\n  %y = TfIdfVectorizer(%x) {"
              "min_gram_length=", min_n, ", max_gram_length=2, max_skip_count=", skip,
              ", mode=\"", mode, "\", ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6], "
              "pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7], "
              "weights=[1.0, 0.5, 2.0, 1.5, 0.25, 3.0, 1.0]} : ", y_type, "\n}\n");
          CheckOptions opts;
          opts.inputs[0] = batched ? Tensor::FromVector<int32_t>({2, 12}, two_rows)
                                   : Tensor::FromVector<int32_t>({12}, row);
          absl::Status s = CheckLowering(g, opts);
          EXPECT_TRUE(s.ok()) << g << s;
        }
      }
    }
  }
}

TEST(LowerStft, RunTimeStepAndLengthWithAndWithoutWindow) {
  const std::string no_window = R"(graph g(%x: f32[2,40,1], %s: i64[], %l: i64[]) -> (%y) opset 17 {
  %y = STFT(%x, %s, _, %l) : f32[2,7,5,2]
})";
  CheckOptions opts;
  opts.atol = 1e-5;
  opts.inputs[1] = Tensor::Scalar<int64_t>(5);
  opts.inputs[2] = Tensor::Scalar<int64_t>(8);
  absl::Status s = CheckLowering(no_window, opts);
  EXPECT_TRUE(s.ok()) << s;
  // Length 9 also gives 5 bins: (40 - 9) / 5 + 1 = 7 frames.
  opts.inputs[2] = Tensor::Scalar<int64_t>(9);
  s = CheckLowering(no_window, opts);
  EXPECT_TRUE(s.ok()) << s;
  // Step 4 gives 9 frames, not 7.
  absl::StatusOr<std::vector<Tensor>> r = LowerAndRun(
      no_window, {testing::RandomTensor(ir::DType::kF32, {2, 40, 1}, 1),
                  Tensor::Scalar<int64_t>(4), Tensor::Scalar<int64_t>(8)});
  EXPECT_FALSE(r.ok());
  const std::string window = R"(graph g(%x: f32[1,30,2], %s: i64[], %w: f32[6]) -> (%y) opset 17 {
  %y = STFT(%x, %s, %w) {onesided=0} : f32[1,7,6,2]
})";
  CheckOptions wopts;
  wopts.atol = 1e-5;
  wopts.inputs[1] = Tensor::Scalar<int64_t>(4);
  s = CheckLowering(window, wopts);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LowerRoiAlign, ModesAndCoordinateTransformsMatchReference) {
  // Rois inside, straddling and outside the 6x7 image; batch 1 and 0.
  const std::vector<float> rois = {0.5f, 1.0f, 4.0f, 5.0f,  -2.0f, -1.5f, 3.0f, 2.0f,
                                   5.5f, 4.0f, 9.0f, 8.0f,  1.0f, 1.0f, 1.2f, 1.1f};
  for (const char* mode : {"avg", "max"}) {
    for (const char* ctm : {"half_pixel", "output_half_pixel"}) {
      const std::string g = absl::StrCat(
          "graph g(%x: f32[2,3,6,7], %r: f32[4,4], %b: i64[4]) -> (%y) opset 16 {\n"
          "  %y = RoiAlign(%x, %r, %b) {mode=\"", mode, "\", coordinate_transformation_mode=\"",
          ctm, "\", output_height=3, output_width=2, sampling_ratio=2, spatial_scale=0.9} "
          ": f32[4,3,3,2]\n}\n");
      CheckOptions opts;
      opts.inputs[1] = Tensor::FromVector<float>({4, 4}, rois);
      opts.inputs[2] = Tensor::FromVector<int64_t>({4}, {1, 0, 1, 0});
      absl::Status s = CheckLowering(g, opts);
      EXPECT_TRUE(s.ok()) << g << s;
    }
  }
  const std::string g = R"(graph g(%x: f32[2,1,4,4], %r: f32[1,4], %b: i64[1]) -> (%y) opset 16 {
  %y = RoiAlign(%x, %r, %b) {sampling_ratio=1} : f32[1,1,1,1]
})";
  absl::StatusOr<std::vector<Tensor>> r =
      LowerAndRun(g, {testing::RandomTensor(ir::DType::kF32, {2, 1, 4, 4}, 1),
                      Tensor::FromVector<float>({1, 4}, {0, 0, 2, 2}),
                      Tensor::FromVector<int64_t>({1}, {2})});
  EXPECT_FALSE(r.ok()) << "batch index 2 of 2 must fail";
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(graph g(%x: f32[2,1,4,4], %r: f32[1,4], %b: i64[1]) -> (%y) opset 16 {
  %y = RoiAlign(%x, %r, %b) : f32[1,1,1,1]
})");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kUnimplemented) << lp.status();
}

// ---------------------------------------------------------------------------
// Quantized ops: inconsistent zero points and scales are InvalidArgument
// naming the node, at lowering time.

TEST(LowerQuantize, BadParametersNameTheNode) {
  struct Case {
    const char* what;
    const char* body;  // graph body reading %x / %w
    const char* expect;  // substring of the message
  };
  const Case cases[] = {
      {"Q zero point of the other sign", R"(
  %s = constant f32[] 0.1
  %z = constant i8[] 3
  %y = QuantizeLinear(%xf, %s, %z) name="q0" : u8[2,3])",
       "zero point is i8 but y is u8"},
      {"Q integer scale", R"(
  %s = constant i32[] 2
  %y = QuantizeLinear(%xf, %s) name="q0" : u8[2,3])",
       "scale is i32"},
      {"Q per-axis scale of the wrong length", R"(
  %s = constant f32[4] [0.1, 0.2, 0.3, 0.4]
  %y = QuantizeLinear(%xf, %s) {axis=1} name="q0" : u8[2,3])",
       "scale has 4 values"},
      {"Q axis out of range", R"(
  %s = constant f32[3] [0.1, 0.2, 0.3]
  %y = QuantizeLinear(%xf, %s) {axis=5} name="q0" : u8[2,3])",
       "axis 5 out of range"},
      {"DQ zero point of the other sign", R"(
  %s = constant f32[] 0.1
  %z = constant i8[] 3
  %y = DequantizeLinear(%x, %s, %z) name="q0" : f32[2,3])",
       "zero point is i8 but x is u8"},
      {"DQ zero point and scale sizes differ", R"(
  %s = constant f32[3] [0.1, 0.2, 0.3]
  %z = constant u8[2] [1, 2]
  %y = DequantizeLinear(%x, %s, %z) {axis=1} name="q0" : f32[2,3])",
       "different sizes"},
      {"ConvInteger w zero point per channel of the wrong length", R"(
  %w = constant u8[4,1,1,1] [1, 2, 3, 4]
  %wz = constant u8[3] [1, 2, 3]
  %y = ConvInteger(%x4, %w, %xz, %wz) name="q0" : i32[1,4,2,3])",
       "w_zero_point has shape [3]"},
      {"ConvInteger x zero point of the other sign", R"(
  %w = constant u8[4,1,1,1] [1, 2, 3, 4]
  %xs8 = constant i8[] 1
  %y = ConvInteger(%x4, %w, %xs8) name="q0" : i32[1,4,2,3])",
       "x_zero_point is i8"},
      {"QLinearConv integer x_scale", R"(
  %w = constant i8[4,1,1,1] [1, 2, 3, 4]
  %xs = constant i32[] 1
  %ws = constant f32[] 0.5
  %wz = constant i8[] 0
  %ys = constant f32[] 0.5
  %yz = constant u8[] 0
  %y = QLinearConv(%x4, %xs, %xz, %w, %ws, %wz, %ys, %yz) name="q0" : u8[1,4,2,3])",
       "x_scale is i32"},
      {"QLinearConv y zero point of the other sign", R"(
  %w = constant i8[4,1,1,1] [1, 2, 3, 4]
  %xs = constant f32[] 1
  %ws = constant f32[] 0.5
  %wz = constant i8[] 0
  %ys = constant f32[] 0.5
  %yz = constant i8[] 0
  %y = QLinearConv(%x4, %xs, %xz, %w, %ws, %wz, %ys, %yz) name="q0" : u8[1,4,2,3])",
       "y_zero_point is i8"},
      {"QLinearConv bias of the wrong shape", R"(
  %w = constant i8[4,1,1,1] [1, 2, 3, 4]
  %xs = constant f32[] 1
  %ws = constant f32[4] [0.5, 0.5, 0.5, 0.5]
  %wz = constant i8[] 0
  %ys = constant f32[] 0.5
  %yz = constant u8[] 0
  %b = constant i32[3] [1, 2, 3]
  %y = QLinearConv(%x4, %xs, %xz, %w, %ws, %wz, %ys, %yz, %b) name="q0" : u8[1,4,2,3])",
       "B is i32[3], expected i32[4]"},
      {"MatMulInteger b zero point of the other sign", R"(
  %w = constant u8[3,2] [1, 2, 3, 4, 5, 6]
  %bz = constant i8[] 1
  %y = MatMulInteger(%x, %w, %xz, %bz) name="q0" : i32[2,2])",
       "b_zero_point is i8"},
      {"QLinearMatMul per-tensor a_scale of two values", R"(
  %as = constant f32[2] [0.1, 0.2]
  %w = constant u8[3,2] [1, 2, 3, 4, 5, 6]
  %bs = constant f32[] 0.1
  %bz = constant u8[] 0
  %ys = constant f32[] 0.1
  %yz = constant u8[] 0
  %y = QLinearMatMul(%x, %as, %xz, %w, %bs, %bz, %ys, %yz) name="q0" : u8[2,2])",
       "a_scale has shape [2]"},
  };
  for (const Case& c : cases) {
    const std::string text = absl::StrCat(R"(graph g(%x: u8[2,3], %xf: f32[2,3], %x4: u8[1,1,2,3]) -> (%y) opset 13 {
  %xz = constant u8[] 1)",
                                          c.body, "\n}");
    absl::StatusOr<ir::loop::LoopModule> lp = Lower(text);
    EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument)
        << c.what << ": " << lp.status();
    EXPECT_TRUE(absl::StrContains(lp.status().message(), "q0")) << c.what << ": " << lp.status();
    EXPECT_TRUE(absl::StrContains(lp.status().message(), c.expect))
        << c.what << ": " << lp.status();
  }
}

}  // namespace
}  // namespace kiln::lowering
