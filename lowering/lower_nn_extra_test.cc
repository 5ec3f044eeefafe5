// LRN, Einsum, Trilu, EyeLike and MeanVarianceNormalization lowered
// to loop kernels (not extern calls), compared with the reference
// interpreter; error paths.
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

absl::StatusOr<ir::loop::LoopModule> Lower(const std::string& text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  return LowerGraph(*g);
}

bool HasExtern(const ir::loop::LoopModule& lp) {
  for (const ir::loop::Kernel& k : lp.program.kernels) {
    if (k.kind == ir::loop::Kernel::Kind::kExtern) return true;
  }
  return false;
}

TEST(LowerLrn, MatchesReferenceAsLoopKernel) {
  for (const char* attrs : {"{size=3}", "{size=4, alpha=0.02, beta=0.5, bias=2.0}",
                            "{size=1}", "{size=9, alpha=0.1}"}) {
    const std::string g = absl::StrCat(
        "graph g(%x: f32[2,5,3,4]) -> (%y) opset 13 {\n  %y = LRN(%x) ", attrs,
        " : f32[2,5,3,4]\n}\n");
    absl::Status st = CheckLowering(g);
    EXPECT_TRUE(st.ok()) << attrs << ": " << st;
    absl::StatusOr<ir::loop::LoopModule> lp = Lower(g);
    ASSERT_TRUE(lp.ok()) << lp.status();
    EXPECT_FALSE(HasExtern(*lp));
  }
}

TEST(LowerLrn, RankTwo) {
  EXPECT_TRUE(CheckLowering(R"(
graph g(%x: f32[3,6]) -> (%y) opset 13 {
  %y = LRN(%x) {size=3} : f32[3,6]
}
)").ok());
}

TEST(LowerLrn, Errors) {
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(
graph g(%x: f32[1,4,2,2]) -> (%y) opset 13 {
  %y = LRN(%x) {size=0} : f32[1,4,2,2]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  lp = Lower(R"(
graph g(%x: f32[1,4,2,2]) -> (%y) opset 13 {
  %y = LRN(%x) : f32[1,4,2,2]
}
)");
  EXPECT_FALSE(lp.ok());
}

struct EinsumCase {
  const char* equation;
  const char* inputs;  // graph inputs
  const char* args;
  const char* out;
};

TEST(LowerEinsum, EquationsMatchReference) {
  const EinsumCase cases[] = {
      {"ij,jk->ik", "%a: f32[3,4], %b: f32[4,5]", "%a, %b", "f32[3,5]"},
      {"bij,bjk->bik", "%a: f32[2,3,4], %b: f32[2,4,5]", "%a, %b", "f32[2,3,5]"},
      {"ij->ji", "%a: f32[3,4]", "%a", "f32[4,3]"},
      {"ii->i", "%a: f32[4,4]", "%a", "f32[4]"},
      {"ii", "%a: f32[4,4]", "%a", "f32[]"},
      {"i,i", "%a: f32[5], %b: f32[5]", "%a, %b", "f32[]"},
      {"ij->", "%a: f32[3,4]", "%a", "f32[]"},
      {"...ii->...i", "%a: f32[2,3,4,4]", "%a", "f32[2,3,4]"},
      {"...ij,...jk", "%a: f32[2,1,3,4], %b: f32[3,4,2]", "%a, %b", "f32[2,3,3,2]"},
      {"i,j->ij", "%a: f32[3], %b: f32[4]", "%a, %b", "f32[3,4]"},
      {"bhqd,bhkd->bhqk", "%a: f32[1,2,3,4], %b: f32[1,2,5,4]", "%a, %b",
       "f32[1,2,3,5]"},
      {"ij,jk,kl->il", "%a: f32[2,3], %b: f32[3,4], %c: f32[4,2]", "%a, %b, %c",
       "f32[2,2]"},
      {"ba", "%a: f32[3,4]", "%a", "f32[4,3]"},
  };
  for (const EinsumCase& c : cases) {
    const std::string g = absl::StrCat("graph g(", c.inputs, ") -> (%y) opset 13 {\n",
                                       "  %y = Einsum(", c.args, ") {equation=\"",
                                       c.equation, "\"} : ", c.out, "\n}\n");
    absl::Status st = CheckLowering(g);
    EXPECT_TRUE(st.ok()) << c.equation << ": " << st;
    absl::StatusOr<ir::loop::LoopModule> lp = Lower(g);
    ASSERT_TRUE(lp.ok()) << c.equation << ": " << lp.status();
    EXPECT_FALSE(HasExtern(*lp)) << c.equation;
  }
}

TEST(LowerEinsum, Integers) {
  EXPECT_TRUE(CheckLowering(R"(
graph g(%a: i64[3,4], %b: i64[4,2]) -> (%y) opset 13 {
  %y = Einsum(%a, %b) {equation="ij,jk->ik"} : i64[3,2]
}
)").ok());
}

TEST(LowerEinsum, Errors) {
  const char* bad[] = {
      // Label sizes disagree.
      R"(graph g(%a: f32[3,4], %b: f32[5,2]) -> (%y) opset 13 {
  %y = Einsum(%a, %b) {equation="ij,jk->ik"} : f32[3,2]
})",
      // Operand count differs from the equation's.
      R"(graph g(%a: f32[3,4]) -> (%y) opset 13 {
  %y = Einsum(%a) {equation="ij,jk->ik"} : f32[3,4]
})",
      // Bad character.
      R"(graph g(%a: f32[3,4]) -> (%y) opset 13 {
  %y = Einsum(%a) {equation="i$->i"} : f32[3]
})",
      // Output label not in the inputs.
      R"(graph g(%a: f32[3,4]) -> (%y) opset 13 {
  %y = Einsum(%a) {equation="ij->k"} : f32[3]
})",
  };
  for (const char* text : bad) {
    absl::StatusOr<ir::loop::LoopModule> lp = Lower(text);
    EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument)
        << text << "\n" << lp.status();
  }
}

TEST(LowerTrilu, UpperLowerWithConstantAndRuntimeK) {
  for (const char* upper : {"0", "1"}) {
    EXPECT_TRUE(CheckLowering(absl::StrCat(
        "graph g(%x: f32[2,4,5]) -> (%y) opset 14 {\n  %y = Trilu(%x) {upper=",
        upper, "} : f32[2,4,5]\n}\n")).ok());
    for (int64_t k : {-7, -1, 0, 2, 9}) {
      CheckOptions opts;
      opts.inputs[1] = ir::Tensor::Scalar<int64_t>(k);
      absl::Status st = CheckLowering(
          absl::StrCat("graph g(%x: f32[4,5], %k: i64[]) -> (%y) opset 14 {\n"
                       "  %y = Trilu(%x, %k) {upper=", upper, "} : f32[4,5]\n}\n"),
          opts);
      EXPECT_TRUE(st.ok()) << upper << " k=" << k << ": " << st;
    }
  }
  absl::StatusOr<ir::loop::LoopModule> lp = Lower(R"(
graph g(%x: f32[5]) -> (%y) opset 14 {
  %y = Trilu(%x) : f32[5]
}
)");
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
}

TEST(LowerEyeLike, DiagonalsAndDtypes) {
  EXPECT_TRUE(CheckLowering(R"(
graph g(%x: f32[3,4]) -> (%y, %z, %w) opset 9 {
  %y = EyeLike(%x) : f32[3,4]
  %z = EyeLike(%x) {k=1, dtype=7} : i64[3,4]
  %w = EyeLike(%x) {k=-2} : f32[3,4]
}
)").ok());
}

TEST(LowerMvn, DefaultAndExplicitAxes) {
  EXPECT_TRUE(CheckLowering(R"(
graph g(%x: f32[2,3,4,5]) -> (%y, %z) opset 13 {
  %y = MeanVarianceNormalization(%x) : f32[2,3,4,5]
  %z = MeanVarianceNormalization(%x) {axes=[1, -1]} : f32[2,3,4,5]
}
)").ok());
}

}  // namespace
}  // namespace kiln::lowering

namespace kiln::lowering {
namespace {

// ConvTranspose with kernel == stride to few channels, as a loop kernel
// (LoweringOptions::conv_transpose_loop_max_channels).
std::string ConvTransposeGraph(const std::string& op, int64_t c, int64_t o, int64_t k,
                               int64_t s, const std::string& extra_attrs) {
  const int64_t oh = (5 - 1) * s + k, ow = (7 - 1) * s + k;
  return absl::StrCat(R"(
graph g(%x: f32[2,)", c, R"(,5,7], %w: f32[)", c, ",", o, ",", k, ",", k, R"(], %b: f32[)", o,
                      R"(]) -> (%y) opset 17 {
  %y = )", op, R"((%x, %w, %b) {strides=[)", s, ", ", s, "]", extra_attrs, R"(} : f32[2,)", o,
                      ",", oh, ",", ow, R"(]
}
)");
}

// How many extern kernels lowering makes of `text` with the loop form on.
int Externs(const std::string& text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  LoweringOptions o;
  o.conv_transpose_loop_max_channels = 4;
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*g, o);
  EXPECT_TRUE(lp.ok()) << lp.status();
  int n = 0;
  for (const ir::loop::Kernel& k : lp->program.kernels) {
    n += k.kind == ir::loop::Kernel::Kind::kExtern;
  }
  return n;
}

TEST(LowerConvTransposeLoopForm, MatchesReference) {
  CheckOptions o;
  o.lowering.conv_transpose_loop_max_channels = 4;
  o.rtol = 1e-5;
  o.atol = 1e-5;
  for (int64_t channels : {1, 3}) {
    const std::string text = ConvTransposeGraph("ConvTranspose", 6, channels, 2, 2, "");
    EXPECT_EQ(Externs(text), 0) << text;
    EXPECT_TRUE(CheckLowering(text, o).ok()) << CheckLowering(text, o) << text;
  }
  // Wider on both sides, within a limit of 32.
  CheckOptions wide = o;
  wide.lowering.conv_transpose_loop_max_channels = 32;
  const std::string text = ConvTransposeGraph("ConvTranspose", 16, 12, 2, 2, "");
  EXPECT_TRUE(CheckLowering(text, wide).ok()) << CheckLowering(text, wide) << text;
  // kiln.FusedConvTranspose with a sigmoid, and a relu, after it.
  for (const char* post : {"sigmoid", "relu"}) {
    const std::string text = ConvTransposeGraph(
        "kiln.FusedConvTranspose", 5, 1, 3, 3,
        absl::StrCat(", post_ops=[\"", post, "\"], post_op_alphas=[0.0], ",
                     "post_op_betas=[0.0], post_op_inputs=[-1]"));
    EXPECT_EQ(Externs(text), 0) << text;
    EXPECT_TRUE(CheckLowering(text, o).ok()) << CheckLowering(text, o) << text;
  }
}

// kiln.FusedConvTranspose whose fused Add (a "sum" post-op) reads a
// same-shaped operand, input 3, between or after its activations.
std::string FusedSumGraph(const std::string& post_ops, const std::string& alphas,
                          const std::string& inputs) {
  return absl::StrCat(R"(
graph g(%x: f32[2,6,5,7], %w: f32[6,3,2,2], %b: f32[3], %r: f32[2,3,10,14]) -> (%y) opset 17 {
  %y = kiln.FusedConvTranspose(%x, %w, %b, %r) {strides=[2, 2], post_ops=)", post_ops,
                      ", post_op_alphas=", alphas, ", post_op_betas=[0.0, 0.0], post_op_inputs=",
                      inputs, R"(} : f32[2,3,10,14]
}
)");
}

TEST(LowerConvTransposeLoopForm, SumPostOpMatchesReference) {
  CheckOptions o;
  o.lowering.conv_transpose_loop_max_channels = 4;
  o.rtol = 1e-5;
  o.atol = 1e-5;
  for (const std::string& text :
       {FusedSumGraph(R"(["relu", "sum"])", "[0.0, 1.0]", "[-1, 3]"),
        FusedSumGraph(R"(["sum", "sigmoid"])", "[1.0, 0.0]", "[3, -1]")}) {
    EXPECT_EQ(Externs(text), 0) << text;
    EXPECT_TRUE(CheckLowering(text, o).ok()) << CheckLowering(text, o) << text;
  }
  // A scaled sum stays a library call.
  EXPECT_EQ(Externs(FusedSumGraph(R"(["relu", "sum"])", "[0.0, 0.5]", "[-1, 3]")), 1);
}

TEST(LowerConvTransposeLoopForm, OtherFormsStayLibraryCalls) {
  // Overlapping kernel, too many channels (5 out, and 6 in above the limit
  // of 4), padding.
  EXPECT_EQ(Externs(ConvTransposeGraph("ConvTranspose", 6, 1, 3, 2, "")), 1);
  EXPECT_EQ(Externs(ConvTransposeGraph("ConvTranspose", 6, 5, 2, 2, "")), 1);
  // Both sides within the limit.
  EXPECT_EQ(Externs(ConvTransposeGraph("ConvTranspose", 4, 4, 2, 2, "")), 0);
  const std::string padded = absl::StrCat(R"(
graph g(%x: f32[1,4,5,5], %w: f32[4,1,2,2]) -> (%y) opset 17 {
  %y = ConvTranspose(%x, %w) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,1,8,8]
}
)");
  EXPECT_EQ(Externs(padded), 1);
  // Off by default.
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(ConvTransposeGraph("ConvTranspose", 6, 1, 2, 2, ""));
  ASSERT_TRUE(g.ok());
  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(*g);
  ASSERT_TRUE(lp.ok());
  bool has_extern = false;
  for (const ir::loop::Kernel& k : lp->program.kernels) {
    has_extern |= k.kind == ir::loop::Kernel::Kind::kExtern;
  }
  EXPECT_TRUE(has_extern);
}

}  // namespace
}  // namespace kiln::lowering
