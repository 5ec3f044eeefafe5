// Tests for pass fuse-dequantize-lstm. RunPassAndCheck also runs the
// reference interpreter on the graph before (DequantizeLinear -> LSTM, the
// ONNX pattern) and after (kiln.FusedLSTM, or the folded f32 R) on seeded
// inputs: the outputs must agree to f32 rounding.
#include "passes/graph/fuse_dequantize_lstm.h"

#include <cmath>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "ir/graph/text.h"
#include "passes/pass_test_util.h"

namespace kiln::passes {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kH = 2, kI = 3;
// One direction's f32 R at hidden 2: 4H x H floats.
constexpr int64_t kRBytes = 4 * kH * kH * 4;

// `n` deterministic integers in [lo, hi], joined for a constant literal.
std::string Ints(int64_t n, int lo, int hi, int seed) {
  std::vector<std::string> v;
  for (int64_t i = 0; i < n; ++i) {
    const double r = std::sin(seed * 12.9898 + i * 78.233) * 43758.5453;
    v.push_back(absl::StrCat(lo + static_cast<int>((hi - lo + 1) * (r - std::floor(r)))));
  }
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

std::string Floats(int64_t n, double scale, int seed) {
  std::vector<std::string> v;
  for (int64_t i = 0; i < n; ++i) {
    const double r = std::sin(seed * 4.1414 + i * 91.7) * 1000.0;
    v.push_back(absl::StrCat(scale * (r - std::floor(r) - 0.5)));
  }
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

// An LSTM (hidden 2, input 3, 4 steps, batch 1) whose R is `r_text` (which
// defines %r); W, B and the initial states are f32.
std::string LstmGraph(int64_t dirs, int opset, const std::string& r_text) {
  const char* direction = dirs == 2 ? "bidirectional" : "forward";
  return absl::Substitute(R"(
graph main(%x: f32[4,1,3], %h0: f32[$0,1,2], %c0: f32[$0,1,2]) -> (%y, %yh) opset $1 {
  %w = constant f32[$0,8,3] $2
  %b = constant f32[$0,16] $3
$4
  %y, %yh = LSTM(%x, %w, %r, %b, _, %h0, %c0) {direction="$5", hidden_size=2} : f32[4,$0,1,2], f32[$0,1,2]
}
)",
                          dirs, opset, Floats(dirs * 8 * kI, 1.0, 1), Floats(dirs * 16, 0.5, 2),
                          r_text, direction);
}

TEST(FuseDequantizeLstm, PerTensorU8BecomesFusedLstmWithPerDirectionParameters) {
  FuseDequantizeLstm pass({}, 0);
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(
      pass, LstmGraph(1, 13, absl::StrCat("  %q = constant u8[1,8,2] ", Ints(16, 0, 255, 3), R"(
  %s = constant f32[] 0.01
  %z = constant u8[] 120
  %r = DequantizeLinear(%q, %s, %z) : f32[1,8,2])")) +
                R"(// CHECK: %y, %yh = kiln.FusedLSTM(%x, %w, %q, %b, _, %h0, %c0, _, %r.scale, %r.zero_point) {direction="forward", hidden_size=2}
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  EXPECT_THAT(r->output, HasSubstr("%r.scale = constant f32[1] [0.01]"));
  EXPECT_THAT(r->output, HasSubstr("%r.zero_point = constant u8[1] [120]"));
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_EQ(pass.patterns()[0].op, "FusedLSTM");
}

TEST(FuseDequantizeLstm, PerDirectionOnAxis0Bidirectional) {
  FuseDequantizeLstm pass({}, 0);
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(
      pass, LstmGraph(2, 13, absl::StrCat("  %q = constant i8[2,8,2] ", Ints(32, -128, 127, 4), R"(
  %s = constant f32[2] [0.01, 0.02]
  %z = constant i8[2] [0, 3]
  %r = DequantizeLinear(%q, %s, %z) {axis=0} : f32[2,8,2])")) +
                R"(// CHECK: kiln.FusedLSTM(%x, %w, %q, %b, _, %h0, %c0, _, %r.scale, %r.zero_point) {direction="bidirectional", hidden_size=2}
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->output, HasSubstr("%r.scale = constant f32[2] [0.01, 0.02]"));
}

TEST(FuseDequantizeLstm, PerColumnOfOneDirectionOnAxis1WithoutZeroPoint) {
  FuseDequantizeLstm pass({}, 0);
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(
      pass, LstmGraph(1, 13, absl::StrCat("  %q = constant i8[1,8,2] ", Ints(16, -128, 127, 5),
                                          "\n  %s = constant f32[8] ", Floats(8, 0.01, 6), R"(
  %r = DequantizeLinear(%q, %s) {axis=1} : f32[1,8,2])")) +
                R"(// CHECK: kiln.FusedLSTM(%x, %w, %q, %b, _, %h0, %c0, _, %r.scale)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->output, HasSubstr("%r.scale = constant f32[1,8]"));
}

// Below opset 13 the importer writes two directions as a Concat of
// per-tensor DequantizeLinear nodes.
std::string ConcatForm() {
  return absl::StrCat("  %q0 = constant u8[1,8,2] ", Ints(16, 0, 255, 7),
                      "\n  %q1 = constant u8[1,8,2] ", Ints(16, 0, 255, 8), R"(
  %s0 = constant f32[] 0.01
  %s1 = constant f32[] 0.02
  %z0 = constant u8[] 128
  %z1 = constant u8[] 100
  %r0 = DequantizeLinear(%q0, %s0, %z0) : f32[1,8,2]
  %r1 = DequantizeLinear(%q1, %s1, %z1) : f32[1,8,2]
  %r = Concat(%r0, %r1) {axis=0} : f32[2,8,2])");
}

TEST(FuseDequantizeLstm, ConcatOfPerTensorDirectionsBecomesOneQuantizedR) {
  FuseDequantizeLstm pass({}, 0);
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, LstmGraph(2, 12, ConcatForm()) + R"(
// CHECK: kiln.FusedLSTM(%x, %w, %r.quantized, %b, _, %h0, %c0, _, %r.scale, %r.zero_point)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->output, HasSubstr("%r.scale = constant f32[2] [0.01, 0.02]"));
  EXPECT_THAT(r->output, HasSubstr("%r.zero_point = constant u8[2] [128, 100]"));
  EXPECT_THAT(r->output, HasSubstr("%r.quantized = constant u8[2,8,2]"));
}

TEST(FuseDequantizeLstm, SmallRStaysF32AndTheConcatFormFolds) {
  // One direction's f32 R is exactly the bound: not above it.
  FuseDequantizeLstm pass({}, kRBytes);
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, LstmGraph(2, 12, ConcatForm()) + R"(
// CHECK: %r = constant f32[2,8,2]
// CHECK-NOT: Concat(
// CHECK: %y, %yh = LSTM(%x, %w, %r, %b, _, %h0, %c0)
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed);
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_EQ(pass.patterns()[0].op, "");
  EXPECT_THAT(pass.patterns()[0].reason, HasSubstr("stays f32"));
}

TEST(FuseDequantizeLstm, SmallOneNodeFormIsLeftToFoldDequantizeLinear) {
  FuseDequantizeLstm pass;  // the default bound: hidden 2 is far below it
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(
      pass, LstmGraph(1, 13, absl::StrCat("  %q = constant i8[1,8,2] ", Ints(16, -128, 127, 3), R"(
  %s = constant f32[] 0.01
  %r = DequantizeLinear(%q, %s) : f32[1,8,2])")) +
                R"(// CHECK: %r = DequantizeLinear(%q, %s)
// CHECK: LSTM(%x, %w, %r
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

TEST(FuseDequantizeLstm, OracleIsAskedAboutTheFusedNodeAndCanRefuse) {
  std::vector<std::string> asked;
  FuseDequantizeLstm pass(
      [&](const ir::Graph& g, const ir::Node& n) -> absl::Status {
        asked.push_back(absl::StrCat(n.domain, ".", n.op, " ", g.nodes().size()));
        // Its 8-bit R, scale and zero point reach the library as constants.
        for (int i : {2, 8, 9}) {
          if (!g.IsConstant(n.inputs[i])) return absl::InternalError("not constant");
        }
        return absl::UnimplementedError("refused for the test");
      },
      0);
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(pass, LstmGraph(2, 12, ConcatForm()) + R"(
// CHECK: LSTM(%x, %w, %r,
)");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(asked, ::testing::ElementsAre("kiln.FusedLSTM 1"));
  ASSERT_EQ(pass.patterns().size(), 1u);
  EXPECT_EQ(pass.patterns()[0].reason, "refused for the test");
}

TEST(FuseDequantizeLstm, OtherRAreLeftAlone) {
  FuseDequantizeLstm pass({}, 0);
  // R is f32; R is a DequantizeLinear of a run-time tensor.
  absl::StatusOr<PassCheckResult> r = RunPassAndCheck(
      pass, LstmGraph(1, 13, absl::StrCat("  %r = constant f32[1,8,2] ", Floats(16, 1.0, 9))) +
                "// CHECK: LSTM(%x, %w, %r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
  // R computed by another op from a DequantizeLinear.
  r = RunPassAndCheck(
      pass, LstmGraph(2, 12, absl::StrCat("  %q = constant i8[2,8,2] ", Ints(32, -128, 127, 4), R"(
  %s = constant f32[] 0.01
  %r2 = DequantizeLinear(%q, %s) : f32[2,8,2]
  %r = Relu(%r2) : f32[2,8,2])")) +
                "// CHECK: LSTM(%x, %w, %r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->changed);
}

}  // namespace
}  // namespace kiln::passes
