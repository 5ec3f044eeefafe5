// Tests for OneDnnMatcher on its own: which anchors oneDNN refuses and why,
// and post-op matches the pass tests do not reach.
#include "passes/graph/onednn_matcher.h"

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/graph/text.h"

namespace kiln::passes {
namespace {

// The reason node `index` of `text` is refused as an anchor ("" if taken).
std::string AnchorRefusal(const std::string& text, int index) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return "parse error";
  OneDnnMatcher m(*g);
  std::string why;
  return m.IsAnchorSupported(g->nodes()[index], &why) ? "" : why;
}

TEST(OneDnnMatcher, AnchorsAndRefusals) {
  EXPECT_EQ(AnchorRefusal(R"(graph main(%a: f32[2,3]) -> (%y) {
    %w = constant f32[4,3] splat(1.0)
    %c = constant f32[1,4] splat(0.5)
    %y = Gemm(%a, %w, %c) {transB=1} : f32[2,4] })", 0),
            "");
  EXPECT_EQ(AnchorRefusal(R"(graph main(%a: f32[2,3]) -> (%y) {
    %w = constant f32[4,3] splat(1.0)
    %y = Gemm(%a, %w) {alpha=2.0, transB=1} : f32[2,4] })", 0),
            "Gemm alpha != 1");
  EXPECT_EQ(AnchorRefusal(R"(graph main(%a: f32[2,3]) -> (%y) {
    %w = constant f32[4,3] splat(1.0)
    %c = constant f32[2,4] splat(0.5)
    %y = Gemm(%a, %w, %c) {transB=1} : f32[2,4] })", 0),
            "Gemm C is not a per-column bias ([N] or [1,N])");
  EXPECT_EQ(AnchorRefusal(R"(graph main(%a: f32[3], %b: f32[3,4]) -> (%y) {
    %y = MatMul(%a, %b) : f32[4] })", 0),
            "1-D MatMul operands (oneDNN needs rank >= 2)");
  EXPECT_EQ(AnchorRefusal(R"(graph main(%a: f32[?,3], %b: f32[3,4]) -> (%y) {
    %y = MatMul(%a, %b) : f32[?,4] })", 0),
            "'a' is f32[?,3]: only static-shaped f32 is supported");
  EXPECT_EQ(AnchorRefusal(R"(graph main(%x: f32[1,2,3,3]) -> (%y) {
    %w = constant f32[2,2,1,1] splat(1.0)
    %y = ConvTranspose(%x, %w) {output_shape=[3, 3]} : f32[1,2,3,3] })", 0),
            "ConvTranspose output_shape (explicit pads needed)");
  EXPECT_EQ(AnchorRefusal(R"(graph main(%x: f32[1,2,3,3], %b: f32[2]) -> (%y) {
    %w = constant f32[2,2,1,1] splat(1.0)
    %y = Conv(%x, %w, %b) : f32[1,2,3,3] })", 0),
            "bias is not constant");
  EXPECT_EQ(AnchorRefusal(R"(graph main(%x: f32[1,2,3,3]) -> (%y) {
    %y = Relu(%x) : f32[1,2,3,3] })", 0),
            "Relu is not a oneDNN anchor");
}

TEST(OneDnnMatcher, PostOpMatchesAndRefusals) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(R"(
graph main(%a: f32[2,3], %b: f32[3,4]) -> (%y1, %y2, %y3, %y4) opset 18 {
  %k = constant f32[] 4.0
  %lo = constant f32[] 1.0
  %m = MatMul(%a, %b) : f32[2,4]
  %y1 = Div(%k, %m) : f32[2,4]
  %y2 = Clip(%m, %lo, %a) : f32[2,4]
  %y3 = Clip(%m, _, %k) : f32[2,4]
  %y4 = Sub(%m, %k) : f32[2,4]
}
)");
  ASSERT_TRUE(g.ok()) << g.status();
  OneDnnMatcher m(*g);
  const ir::ValueId x = *g->FindValue("m");
  EXPECT_EQ(m.Consumers(x), (std::vector<int>{1, 2, 3, 4}));
  std::string why;
  EXPECT_FALSE(m.MatchPostOp(1, x, true, &why).has_value());
  EXPECT_EQ(why, "Div of a constant by the result, or by zero");
  EXPECT_FALSE(m.MatchPostOp(2, x, true, &why).has_value());
  EXPECT_EQ(why, "Clip bounds are not scalar constants");

  std::optional<PostOpMatch> clip = m.MatchPostOp(3, x, true, &why);
  ASSERT_TRUE(clip.has_value()) << why;
  ASSERT_EQ(clip->post_ops.size(), 1u);
  EXPECT_EQ(clip->post_ops[0].kind, "clip");
  EXPECT_EQ(clip->post_ops[0].alpha, -std::numeric_limits<float>::max());
  EXPECT_EQ(clip->post_ops[0].beta, 4.0f);
  EXPECT_EQ(clip->nodes, (std::vector<int>{3}));
  EXPECT_EQ(clip->output, *g->FindValue("y3"));

  std::optional<PostOpMatch> sub = m.MatchPostOp(4, x, true, &why);
  ASSERT_TRUE(sub.has_value()) << why;
  EXPECT_EQ(sub->post_ops[0].kind, "linear");
  EXPECT_EQ(sub->post_ops[0].alpha, 1.0f);
  EXPECT_EQ(sub->post_ops[0].beta, -4.0f);
}

}  // namespace
}  // namespace kiln::passes
