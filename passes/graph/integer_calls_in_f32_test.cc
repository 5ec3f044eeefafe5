// Tests for pass integer-calls-in-f32: each rewritten graph against the
// original on the reference interpreter over seeded full-range inputs —
// bit-exact i32 where the exactness rule holds, within the stated bound for a
// float reader, within one quantization step for QLinearConv — and the nodes
// the rules keep, with their reasons.
#include "passes/graph/integer_calls_in_f32.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "ir/graph/text.h"
#include "ir/graph/verifier.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

Tensor RandomInts(DType dtype, const Shape& shape, uint32_t seed, int lo, int hi) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const int v = dist(gen);
    if (dtype == DType::kU8) {
      t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    } else if (dtype == DType::kI8) {
      t.data<int8_t>()[i] = static_cast<int8_t>(v);
    } else {
      t.data<int32_t>()[i] = v;
    }
  }
  return t;
}

Tensor FullRange(DType dtype, const Shape& shape, uint32_t seed) {
  return dtype == DType::kU8 ? RandomInts(dtype, shape, seed, 0, 255)
                             : RandomInts(dtype, shape, seed, -128, 127);
}

std::string Lit(const Tensor& t) { return ir::PrintTensor(t, ir::PrintOptions::Full()); }

// The library refuses every integer call (oneDNN on a CPU without VNNI
// refuses full-range weights and runtime zero points).
absl::Status Refuse(const ir::Graph&, const ir::Node& n) {
  return absl::UnimplementedError(absl::StrCat(n.Describe(), ": refused"));
}

struct Rewritten {
  ir::Graph before{"before"}, after{"after"};
  bool changed = false;
  std::vector<std::string> kept;
};

Rewritten RunPass(const std::string& text, IntegerCallOracle oracle = Refuse) {
  Rewritten r;
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  if (!g.ok()) return r;
  r.before = *g;
  r.after = std::move(*g);
  IntegerCallsInF32 pass(std::move(oracle));
  absl::StatusOr<bool> changed = pass.Run(&r.after);
  EXPECT_TRUE(changed.ok()) << changed.status();
  r.changed = changed.ok() && *changed;
  r.kept = pass.kept();
  const absl::Status verified = ir::VerifyGraph(r.after);
  EXPECT_TRUE(verified.ok()) << verified << "\n" << ir::PrintGraph(r.after);
  return r;
}

bool HasOp(const ir::Graph& g, const std::string& op) {
  for (const ir::Node& n : g.nodes()) {
    if (n.op == op) return true;
  }
  return false;
}

// Both graphs on the same seeded full-range inputs; `tol` on every output.
void ExpectSameOutputs(const Rewritten& r, const interp::Tolerance& tol, int seeds = 3) {
  for (int seed = 1; seed <= seeds; ++seed) {
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < r.before.inputs().size(); ++i) {
      const ir::Value& v = r.before.value(r.before.inputs()[i]);
      inputs.push_back(FullRange(v.dtype, v.shape, seed * 101 + i));
    }
    absl::StatusOr<std::vector<Tensor>> want = interp::Run(r.before, inputs);
    absl::StatusOr<std::vector<Tensor>> got = interp::Run(r.after, inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << ir::PrintGraph(r.after);
    ASSERT_EQ(want->size(), got->size());
    for (size_t k = 0; k < want->size(); ++k) {
      const interp::CompareResult c = interp::CompareTensors((*got)[k], (*want)[k], tol);
      EXPECT_TRUE(c.ok) << "seed " << seed << " output " << k << ": " << c.message;
    }
  }
}

// ConvInteger with full-range u8 weights (w - zero point spans [-200, 255],
// outside s8), a runtime x zero point and padding; K = 2 * 3 * 3 = 18 terms,
// S_c <= 18 * 255 * 255 < 2^24: exact.
TEST(IntegerCallsInF32, ConvIntegerRuntimeZeroPointIsBitExact) {
  Tensor wzp(DType::kU8, {3});
  for (int i = 0; i < 3; ++i) wzp.data<uint8_t>()[i] = static_cast<uint8_t>(0 + 100 * i);
  const Rewritten r = RunPass(absl::Substitute(R"(
graph main(%x: u8[2,2,6,5], %xz: u8[]) -> (%y) opset 10 {
  %w = constant $0
  %wz = constant $1
  %y = ConvInteger(%x, %w, %xz, %wz) {pads=[1, 0, 2, 1], strides=[2, 1]} : i32[2,3,4,5]
}
)", Lit(FullRange(DType::kU8, {3, 2, 3, 3}, 5)), Lit(wzp)));
  EXPECT_TRUE(r.changed);
  EXPECT_FALSE(HasOp(r.after, "ConvInteger")) << ir::PrintGraph(r.after);
  EXPECT_TRUE(HasOp(r.after, "Conv"));
  ExpectSameOutputs(r, interp::Tolerance{0, 0, std::nullopt});
}

// i8 x without a zero point, grouped, per-tensor i8 weight zero point.
TEST(IntegerCallsInF32, ConvIntegerI8GroupedIsBitExact) {
  const Rewritten r = RunPass(absl::Substitute(R"(
graph main(%x: i8[1,4,5,5]) -> (%y) opset 10 {
  %w = constant $0
  %wz = constant i8[] -3
  %y = ConvInteger(%x, %w, _, %wz) {group=2, pads=[1, 1, 1, 1]} : i32[1,4,5,5]
}
)", Lit(FullRange(DType::kI8, {4, 2, 3, 3}, 6))));
  EXPECT_TRUE(r.changed);
  ExpectSameOutputs(r, interp::Tolerance{0, 0, std::nullopt});
}

// MatMulInteger as quantize_dynamic writes it: runtime A zero point,
// constant u8 B with a per-column zero point; and one with a runtime B (the
// conformance cases' form), shifted at run time.
TEST(IntegerCallsInF32, MatMulIntegerIsBitExact) {
  Tensor bzp(DType::kU8, {4});
  for (int i = 0; i < 4; ++i) bzp.data<uint8_t>()[i] = static_cast<uint8_t>(60 * i);
  const Rewritten r = RunPass(absl::Substitute(R"(
graph main(%a: u8[2,3,16], %az: u8[]) -> (%y) opset 10 {
  %b = constant $0
  %bz = constant $1
  %y = MatMulInteger(%a, %b, %az, %bz) : i32[2,3,4]
}
)", Lit(FullRange(DType::kU8, {16, 4}, 8)), Lit(bzp)));
  EXPECT_TRUE(r.changed);
  EXPECT_TRUE(HasOp(r.after, "MatMul"));
  ExpectSameOutputs(r, interp::Tolerance{0, 0, std::nullopt});

  const Rewritten runtime_b = RunPass(R"(
graph main(%a: u8[4,3], %b: u8[3,2], %az: u8[], %bz: u8[]) -> (%y) opset 10 {
  %y = MatMulInteger(%a, %b, %az, %bz) : i32[4,2]
}
)");
  EXPECT_TRUE(runtime_b.changed);
  ExpectSameOutputs(runtime_b, interp::Tolerance{0, 0, std::nullopt});

  // A runtime zero point per column of B.
  const Rewritten per_column = RunPass(R"(
graph main(%a: u8[4,3], %b: u8[3,2], %bz: u8[2]) -> (%y) opset 10 {
  %y = MatMulInteger(%a, %b, _, %bz) : i32[4,2]
}
)");
  EXPECT_TRUE(per_column.changed);
  ExpectSameOutputs(per_column, interp::Tolerance{0, 0, std::nullopt});
}

// K = 64 * 3 * 3 = 576 terms of up to 255 * 255: S_c reaches ~3.7e7 > 2^24.
// Read as i32 the node is kept; read through Cast(float) it is rewritten,
// within (K-1) * 2^-24 * S_c of the exact result.
TEST(IntegerCallsInF32, InexactSumsOnlyForAFloatReader) {
  const std::string w = Lit(FullRange(DType::kU8, {2, 64, 3, 3}, 11));
  const Rewritten kept = RunPass(absl::Substitute(R"(
graph main(%x: u8[1,64,4,4], %xz: u8[]) -> (%y) opset 10 {
  %w = constant $0
  %wz = constant u8[] 0
  %y = ConvInteger(%x, %w, %xz, %wz) : i32[1,2,2,2]
}
)", w));
  EXPECT_FALSE(kept.changed);
  ASSERT_EQ(kept.kept.size(), 1u);
  EXPECT_TRUE(absl::StrContains(kept.kept[0], "read as an integer")) << kept.kept[0];

  const Rewritten r = RunPass(absl::Substitute(R"(
graph main(%x: u8[1,64,4,4], %xz: u8[]) -> (%f) opset 10 {
  %w = constant $0
  %wz = constant u8[] 0
  %y = ConvInteger(%x, %w, %xz, %wz) : i32[1,2,2,2]
  %f = Cast(%y) {to=1} : f32[1,2,2,2]
}
)", w));
  EXPECT_TRUE(r.changed);
  EXPECT_FALSE(HasOp(r.after, "Cast") && HasOp(r.after, "ConvInteger"));
  // S_c <= 576 * 255 * 255; the bound plus the Cast's own half ulp.
  const double s = 576.0 * 255 * 255;
  ExpectSameOutputs(r, interp::Tolerance{0, std::ldexp(575.0 * s, -24) + std::ldexp(s, -24),
                                         std::nullopt});
}

// QLinearConv with full-range u8 weights and a bias, per-channel weight
// scales: within one step, at most 5% of the elements off by one.
TEST(IntegerCallsInF32, QLinearConvWithinOneStep) {
  Tensor ws(DType::kF32, {3});
  for (int i = 0; i < 3; ++i) ws.data<float>()[i] = 0.002f * (i + 1);
  const Rewritten r = RunPass(absl::Substitute(R"(
graph main(%x: u8[1,4,6,6]) -> (%y) opset 10 {
  %xs = constant f32[] 0.02
  %xz = constant u8[] 128
  %w = constant $0
  %ws = constant $1
  %wz = constant u8[] 131
  %ys = constant f32[] 0.5
  %yz = constant u8[] 120
  %b = constant $2
  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %b) {pads=[1, 1, 1, 1]} : u8[1,3,6,6]
}
)", Lit(FullRange(DType::kU8, {3, 4, 3, 3}, 12)), Lit(ws),
                                              Lit(RandomInts(DType::kI32, {3}, 13, -3000, 3000))));
  EXPECT_TRUE(r.changed);
  EXPECT_TRUE(HasOp(r.after, "QuantizeLinear"));
  interp::Tolerance tol{0, 0, std::nullopt};
  tol.integer_steps = 1;
  ExpectSameOutputs(r, tol);
  std::vector<Tensor> in = {FullRange(DType::kU8, {1, 4, 6, 6}, 3)};
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(r.before, in);
  absl::StatusOr<std::vector<Tensor>> got = interp::Run(r.after, in);
  ASSERT_TRUE(want.ok() && got.ok());
  int64_t off = 0;
  for (int64_t i = 0; i < (*got)[0].num_elements(); ++i) {
    off += (*got)[0].GetAsInt64(i) != (*want)[0].GetAsInt64(i);
  }
  EXPECT_LE(off * 20, (*got)[0].num_elements());
}

// QLinearMatMul with a constant full-range B (the reference interpreter
// takes per-tensor parameters): within one step.
TEST(IntegerCallsInF32, QLinearMatMulWithinOneStep) {
  const Rewritten r = RunPass(absl::Substitute(R"(
graph main(%a: u8[2,5,24]) -> (%y) opset 10 {
  %as = constant f32[] 0.02
  %az = constant u8[] 120
  %b = constant $0
  %bs = constant f32[] 0.004
  %bz = constant u8[] 110
  %ys = constant f32[] 0.3
  %yz = constant i8[] -5
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : i8[2,5,3]
}
)", Lit(FullRange(DType::kU8, {24, 3}, 21))));
  EXPECT_TRUE(r.changed);
  EXPECT_TRUE(HasOp(r.after, "MatMul"));
  interp::Tolerance tol{0, 0, std::nullopt};
  tol.integer_steps = 1;
  ExpectSameOutputs(r, tol);
}

// A call the library takes, and a pass without an oracle, change nothing.
TEST(IntegerCallsInF32, TakenCallsStay) {
  const std::string text = R"(
graph main(%a: u8[4,3], %b: u8[3,2]) -> (%y) opset 10 {
  %y = MatMulInteger(%a, %b) : i32[4,2]
}
)";
  EXPECT_FALSE(RunPass(text, [](const ir::Graph&, const ir::Node&) {
                 return absl::OkStatus();
               }).changed);
  EXPECT_FALSE(RunPass(text, IntegerCallOracle()).changed);
}

// Runtime conv weights (the ONNX conformance cases' form) are shifted at run
// time: K = 3 * 2 * 2 = 12, 12 * 255 * 255 < 2^24, exact.
TEST(IntegerCallsInF32, RuntimeConvWeightsAreBitExact) {
  const Rewritten r = RunPass(R"(
graph main(%x: u8[1,3,4,4], %w: u8[2,3,2,2], %xz: u8[], %wz: u8[]) -> (%y) opset 10 {
  %y = ConvInteger(%x, %w, %xz, %wz) {pads=[1, 1, 0, 0]} : i32[1,2,4,4]
}
)");
  EXPECT_TRUE(r.changed);
  ExpectSameOutputs(r, interp::Tolerance{0, 0, std::nullopt});
  // A runtime zero point per output channel would need a reshape: kept.
  const Rewritten kept = RunPass(R"(
graph main(%x: u8[1,3,4,4], %w: u8[2,3,2,2], %wz: u8[2]) -> (%y) opset 10 {
  %y = ConvInteger(%x, %w, _, %wz) : i32[1,2,3,3]
}
)");
  EXPECT_FALSE(kept.changed);
  ASSERT_EQ(kept.kept.size(), 1u);
  EXPECT_TRUE(absl::StrContains(kept.kept[0], "per-channel")) << kept.kept[0];
}

// QLinearConv with every parameter a graph input (test_qlinearconv's form):
// exact sums, so the scales are applied at run time; per-channel scales are
// reshaped onto axis 1.
TEST(IntegerCallsInF32, QLinearConvRuntimeParameters) {
  const Rewritten r = RunPass(R"(
graph main(%x: u8[1,2,5,5], %xs: f32[], %xz: u8[], %w: u8[3,2,1,1], %ws: f32[3],
           %wz: u8[], %ys: f32[], %yz: u8[]) -> (%y) opset 10 {
  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz) : u8[1,3,5,5]
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_TRUE(HasOp(r.after, "Reshape"));
  // Positive scales: seeded f32 inputs are not full-range integers, so the
  // scales are given explicitly.
  std::vector<Tensor> in = {FullRange(DType::kU8, {1, 2, 5, 5}, 1), Tensor::Scalar<float>(0.05f),
                            FullRange(DType::kU8, {}, 2), FullRange(DType::kU8, {3, 2, 1, 1}, 3),
                            Tensor::FromVector<float>({3}, {0.01f, 0.02f, 0.03f}),
                            FullRange(DType::kU8, {}, 4), Tensor::Scalar<float>(2.0f),
                            FullRange(DType::kU8, {}, 5)};
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(r.before, in);
  absl::StatusOr<std::vector<Tensor>> got = interp::Run(r.after, in);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  interp::Tolerance tol{0, 0, std::nullopt};
  tol.integer_steps = 1;
  const interp::CompareResult c = interp::CompareTensors((*got)[0], (*want)[0], tol);
  EXPECT_TRUE(c.ok) << c.message;
}

}  // namespace
}  // namespace kiln::passes
