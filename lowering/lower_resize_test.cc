// Resize / Upsample lowering against the reference interpreter: every mode
// and coordinate transformation with constant scales or sizes (fitted
// index expressions, nearest as a view) and with scales / roi given at run
// time (one-hot reduction); error paths.
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"
#include "lowering/lowering_test_util.h"

namespace kiln::lowering {
namespace {

using testing::CheckLowering;
using testing::CheckOptions;

// Resize of x f32[2,3,in_h,in_w] with constant sizes to [2,3,oh,ow].
std::string SizesGraph(int in_h, int in_w, int oh, int ow, const std::string& attrs) {
  return absl::StrCat(
      "graph g(%x: f32[2,3,", in_h, ",", in_w, "]) -> (%y) opset 13 {\n"
      "  %sz = constant i64[4] [2, 3, ", oh, ", ", ow, "]\n"
      "  %y = Resize(%x, _, _, %sz) ", attrs, " : f32[2,3,", oh, ",", ow, "]\n}\n");
}

// Resize of x f32[1,2,in_h,in_w] with constant scales [1, 1, sh, sw].
std::string ScalesGraph(int in_h, int in_w, const std::string& sh,
                        const std::string& sw, int oh, int ow,
                        const std::string& attrs) {
  return absl::StrCat(
      "graph g(%x: f32[1,2,", in_h, ",", in_w, "]) -> (%y) opset 13 {\n"
      "  %sc = constant f32[4] [1.0, 1.0, ", sh, ", ", sw, "]\n"
      "  %y = Resize(%x, _, %sc) ", attrs, " : f32[1,2,", oh, ",", ow, "]\n}\n");
}

absl::StatusOr<ir::loop::LoopModule> Lower(const std::string& text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  return LowerGraph(*g);
}

int NumKernels(const std::string& text) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(text);
  return lp.ok() ? static_cast<int>(lp->program.kernels.size()) : -1;
}

class ResizeSizesTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ResizeSizesTest, UpAndDownMatchReference) {
  const int shapes[][4] = {{4, 4, 9, 10}, {5, 7, 3, 4}, {3, 5, 7, 2},
                           {4, 4, 8, 8}, {6, 9, 6, 9}, {1, 3, 4, 1}};
  for (const auto& s : shapes) {
    const std::string g = SizesGraph(s[0], s[1], s[2], s[3], GetParam());
    absl::Status st = CheckLowering(g);
    EXPECT_TRUE(st.ok()) << GetParam() << " " << s[0] << "x" << s[1] << " -> "
                         << s[2] << "x" << s[3] << ": " << st;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ResizeSizesTest,
    ::testing::Values(
        "{mode=\"nearest\"}",
        "{mode=\"nearest\", nearest_mode=\"round_prefer_ceil\"}",
        "{mode=\"nearest\", nearest_mode=\"floor\", coordinate_transformation_mode=\"align_corners\"}",
        "{mode=\"nearest\", nearest_mode=\"ceil\", coordinate_transformation_mode=\"asymmetric\"}",
        "{mode=\"nearest\", coordinate_transformation_mode=\"tf_half_pixel_for_nn\"}",
        "{mode=\"nearest\", coordinate_transformation_mode=\"pytorch_half_pixel\"}",
        "{mode=\"linear\"}",
        "{mode=\"linear\", coordinate_transformation_mode=\"align_corners\"}",
        "{mode=\"linear\", coordinate_transformation_mode=\"pytorch_half_pixel\"}",
        "{mode=\"linear\", coordinate_transformation_mode=\"asymmetric\"}",
        "{mode=\"linear\", coordinate_transformation_mode=\"half_pixel_symmetric\"}",
        "{mode=\"cubic\"}",
        "{mode=\"cubic\", cubic_coeff_a=-0.5, exclude_outside=1}",
        "{mode=\"cubic\", coordinate_transformation_mode=\"align_corners\"}",
        "{mode=\"cubic\", coordinate_transformation_mode=\"asymmetric\"}"));

TEST(LowerResize, ConstantScalesMatchReference) {
  for (const char* attrs : {"{mode=\"nearest\"}", "{mode=\"linear\"}",
                            "{mode=\"cubic\"}",
                            "{mode=\"linear\", coordinate_transformation_mode=\"align_corners\"}"}) {
    for (const auto& g :
         {ScalesGraph(4, 4, "0.8", "0.8", 3, 3, attrs),
          ScalesGraph(2, 4, "0.6", "0.6", 1, 2, attrs),
          ScalesGraph(2, 2, "2.0", "3.0", 4, 6, attrs),
          ScalesGraph(3, 5, "1.7", "2.3", 5, 11, attrs)}) {
      absl::Status st = CheckLowering(g);
      EXPECT_TRUE(st.ok()) << attrs << ": " << st;
    }
  }
}

TEST(LowerResize, NearestWithConstantScalesIsAView) {
  const std::string g = ScalesGraph(2, 2, "2.0", "3.0", 4, 6, "{mode=\"nearest\"}");
  // The only kernel copies the view into the graph output.
  EXPECT_EQ(NumKernels(g), 1);
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(g);
  ASSERT_TRUE(lp.ok()) << lp.status();
  EXPECT_TRUE(lp->program.kernels[0].reduction_ranges.empty());
}

TEST(LowerResize, BilinearUpsampleIsFourLoads) {
  const std::string g = ScalesGraph(4, 4, "2.0", "2.0", 8, 8, "{mode=\"linear\"}");
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(g);
  ASSERT_TRUE(lp.ok()) << lp.status();
  ASSERT_EQ(lp->program.kernels.size(), 1u);
  int loads = 0;
  for (const ir::loop::Op& op : lp->program.kernels[0].body) {
    loads += op.code == ir::loop::OpCode::kLoad;
  }
  EXPECT_EQ(loads, 4);
  EXPECT_TRUE(lp->program.kernels[0].reduction_ranges.empty());
}

TEST(LowerResize, TfCropAndResizeConstantRoi) {
  for (const char* mode : {"linear", "nearest", "cubic"}) {
    const std::string g = absl::StrCat(
        "graph g(%x: f32[1,1,4,4]) -> (%y) opset 13 {\n"
        "  %roi = constant f32[8] [0.0, 0.0, 0.4, 0.6, 1.0, 1.0, 1.2, 1.7]\n"
        "  %sz = constant i64[4] [1, 1, 3, 3]\n"
        "  %y = Resize(%x, %roi, _, %sz) {mode=\"", mode,
        "\", coordinate_transformation_mode=\"tf_crop_and_resize\", "
        "extrapolation_value=10.0} : f32[1,1,3,3]\n}\n");
    absl::Status st = CheckLowering(g);
    EXPECT_TRUE(st.ok()) << mode << ": " << st;
  }
}

TEST(LowerResize, RuntimeScalesAndRoi) {
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    CheckOptions opts;
    opts.inputs[1] = ir::Tensor::FromVector<float>({4}, {1.0f, 1.0f, 0.8f, 1.7f});
    const std::string g = absl::StrCat(
        "graph g(%x: f32[1,2,4,4], %sc: f32[4]) -> (%y) opset 13 {\n"
        "  %y = Resize(%x, _, %sc) {mode=\"", mode, "\"} : f32[1,2,3,6]\n}\n");
    absl::Status st = CheckLowering(g, opts);
    EXPECT_TRUE(st.ok()) << mode << ": " << st;
  }
  CheckOptions opts;
  opts.inputs[1] = ir::Tensor::FromVector<float>(
      {8}, {0.0f, 0.0f, 0.4f, 0.6f, 1.0f, 1.0f, 1.2f, 1.7f});
  absl::Status st = CheckLowering(R"(
graph g(%x: f32[1,1,4,4], %roi: f32[8]) -> (%y) opset 13 {
  %sz = constant i64[4] [1, 1, 3, 3]
  %y = Resize(%x, %roi, _, %sz) {mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0} : f32[1,1,3,3]
}
)", opts);
  EXPECT_TRUE(st.ok()) << st;
}

TEST(LowerResize, LegacyUpsampleAndOpset10) {
  EXPECT_TRUE(CheckLowering(R"(
graph g(%x: f32[1,2,3,3]) -> (%y) opset 7 {
  %y = Upsample(%x) {mode="nearest", scales=floats[1.0, 1.0, 2.0, 1.5]} : f32[1,2,6,4]
}
)").ok());
  EXPECT_TRUE(CheckLowering(R"(
graph g(%x: f32[1,2,3,3]) -> (%y) opset 7 {
  %y = Upsample(%x) {mode="linear", scales=floats[1.0, 1.0, 2.0, 0.7]} : f32[1,2,6,2]
}
)").ok());
  EXPECT_TRUE(CheckLowering(R"(
graph g(%x: f32[1,2,4,4]) -> (%y) opset 10 {
  %sc = constant f32[4] [1.0, 1.0, 0.6, 2.0]
  %y = Resize(%x, %sc) {mode="nearest"} : f32[1,2,2,8]
}
)").ok());
}

TEST(LowerResize, IntegerNearest) {
  absl::Status st = CheckLowering(R"(
graph g(%x: i64[1,1,3,3]) -> (%y) opset 13 {
  %sz = constant i64[4] [1, 1, 5, 7]
  %y = Resize(%x, _, _, %sz) {mode="nearest"} : i64[1,1,5,7]
}
)");
  EXPECT_TRUE(st.ok()) << st;
}

TEST(LowerResize, Errors) {
  // Output shape disagrees with the sizes.
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(
graph g(%x: f32[1,1,3,3]) -> (%y) opset 13 {
  %sz = constant i64[4] [1, 1, 5, 7]
  %y = Resize(%x, _, _, %sz) {mode="nearest"} : f32[1,1,5,6]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  // Both scales and sizes.
  lp = Lower(R"(
graph g(%x: f32[1,1,3,3]) -> (%y) opset 13 {
  %sc = constant f32[4] [1.0, 1.0, 2.0, 2.0]
  %sz = constant i64[4] [1, 1, 6, 6]
  %y = Resize(%x, _, %sc, %sz) : f32[1,1,6,6]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  // Unknown mode.
  lp = Lower(R"(
graph g(%x: f32[1,1,3,3]) -> (%y) opset 13 {
  %sc = constant f32[4] [1.0, 1.0, 2.0, 2.0]
  %y = Resize(%x, _, %sc) {mode="area"} : f32[1,1,6,6]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  EXPECT_NE(lp.status().message().find("area"), std::string::npos);
  // Antialias is refused clearly.
  lp = Lower(R"(
graph g(%x: f32[1,1,4,4]) -> (%y) opset 18 {
  %sc = constant f32[4] [1.0, 1.0, 0.5, 0.5]
  %y = Resize(%x, _, %sc) {mode="linear", antialias=1} : f32[1,1,2,2]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kUnimplemented) << lp.status();
  EXPECT_NE(lp.status().message().find("antialias"), std::string::npos);
  // Non-positive scale.
  lp = Lower(R"(
graph g(%x: f32[1,1,4,4]) -> (%y) opset 13 {
  %sc = constant f32[4] [1.0, 1.0, 0.0, 1.0]
  %y = Resize(%x, _, %sc) : f32[1,1,0,4]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

}  // namespace
}  // namespace kiln::lowering
