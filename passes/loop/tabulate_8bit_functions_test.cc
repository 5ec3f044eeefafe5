// tabulate-8bit-functions on QDQ patterns lowered from graph text and fused:
// DequantizeLinear -> f -> QuantizeLinear for many elementwise f, u8 and i8,
// the QDQ SiLU chain and squeeze-excitation multiply. Every one of the 256
// inputs must give the graph reference interpreter's output exactly, and the
// function must be gone from the kernel (a table lookup in its place).
#include "passes/loop/tabulate_8bit_functions.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "gtest/gtest.h"
#include "interp/interpreter.h"
#include "interp/loop_module.h"
#include "ir/graph/text.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "lowering/lower_graph.h"
#include "passes/loop/fuse_vertical.h"

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Tensor;
using ir::loop::LoopModule;
using ir::loop::OpCode;

// All 256 values of an 8-bit dtype, shape [2, 128].
Tensor AllValues(DType t) {
  Tensor x(t, {2, 128});
  for (int b = 0; b < 256; ++b) static_cast<uint8_t*>(x.raw_data())[b] = static_cast<uint8_t>(b);
  return x;
}

struct Counts {
  int lookups = 0;
  int float_ops = 0;  // elementwise ops computing in floats
};

Counts Count(const LoopModule& m) {
  Counts c;
  for (const ir::loop::Kernel& k : m.program.kernels) {
    for (const ir::loop::Op& op : k.body) {
      c.lookups += op.code == OpCode::kLoadIndirect;
      c.float_ops += ir::loop::IsElementwise(op.code) && ir::IsFloat(op.dtype);
    }
  }
  return c;
}

// Lowers `text`, fuses, tabulates; checks every output against the graph
// reference interpreter bit for bit on `inputs`. Returns the module.
LoopModule CheckExact(const std::string& text, const std::vector<Tensor>& inputs) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  if (!g.ok()) return {};
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(*g, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  absl::StatusOr<LoopModule> m = lowering::LowerGraph(*g);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!want.ok() || !m.ok()) return {};
  EXPECT_TRUE(FuseVertical().Run(&*m).ok());
  absl::StatusOr<bool> changed = Tabulate8BitFunctions().Run(&*m);
  EXPECT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(changed.ok() && *changed) << ir::loop::PrintProgram(m->program);
  absl::StatusOr<std::vector<Tensor>> got = interp::RunLoopModule(*m, inputs);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return *std::move(m);
  EXPECT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size() && i < want->size(); ++i) {
    const Tensor& a = (*got)[i];
    const Tensor& b = (*want)[i];
    EXPECT_EQ(a.dtype(), b.dtype());
    if (a.dtype() != b.dtype() || a.num_elements() != b.num_elements()) continue;
    for (int64_t e = 0; e < a.num_elements(); ++e) {
      EXPECT_EQ(a.GetAsDouble(e), b.GetAsDouble(e))
          << "output " << i << " element " << e << " (input bits " << e % 256 << ")\n"
          << text << "\n" << ir::loop::PrintProgram(m->program);
    }
  }
  return *std::move(m);
}

struct Unary {
  std::string op;     // ONNX op
  std::string token;  // the loop opcode it lowers to that must disappear ("" none)
  std::string attrs = "";
};

// Scales and zero points of efficientnet_b0.qdq7's QDQ conversion, a larger
// input scale, and i8.
struct Params {
  DType t;
  std::string x_scale;
  int x_zp;
  std::string y_scale;
  int y_zp;
};

TEST(Tabulate8BitFunctions, UnaryQdqPatternsEqualTheReference) {
  const std::vector<Unary> unaries = {
      {"Sigmoid", "sigmoid"},         {"Tanh", "tanh"},
      {"Exp", "exp"},                 {"Erf", "erf"},
      {"Softplus", ""},               {"HardSwish", ""},
      {"HardSigmoid", "", " {alpha=0.2, beta=0.5}"},
      {"LeakyRelu", "", " {alpha=0.1}"},  {"Elu", "", " {alpha=1.0}"},
      {"Abs", ""},                    {"Neg", ""},
  };
  const std::vector<Params> params = {
      {DType::kU8, "0.06719470769166946", 127, "0.003920858260244131", 0},
      {DType::kU8, "0.0031967784743756056", 126, "0.0023597758263349533", 0},
      // A squeeze-excitation sigmoid (efficientnet_b0.qdq) whose input 87
      // lands on a tie: the correctly rounded f32 sigmoid / scale is 226.5 in
      // f32 (226 after rounding to even), the f32 formula's one ulp more
      // 226.50002 (227). The table must compute as the reference does.
      {DType::kU8, "0.001504455809481442", 90, "0.002202523872256279", 0},
      {DType::kU8, "0.25", 3, "0.05", 128},
      {DType::kI8, "0.04", -5, "0.02", 3},
  };
  for (const Params& p : params) {
    const std::string t(ir::DTypeName(p.t));
    for (const Unary& u : unaries) {
      const std::string text = absl::Substitute(R"(
graph g(%x: $0[2,128]) -> (%y) opset 13 {
  %xs = constant f32[] $1
  %xz = constant $0[] $2
  %ys = constant f32[] $3
  %yz = constant $0[] $4
  %d = DequantizeLinear(%x, %xs, %xz) : f32[2,128]
  %f = $5(%d)$6 : f32[2,128]
  %y = QuantizeLinear(%f, %ys, %yz) : $0[2,128]
}
)",
                                                t, p.x_scale, p.x_zp, p.y_scale, p.y_zp, u.op, u.attrs);
      SCOPED_TRACE(absl::StrCat(u.op, " ", t, " x_scale ", p.x_scale));
      LoopModule m = CheckExact(text, {AllValues(p.t)});
      const Counts c = Count(m);
      EXPECT_EQ(c.lookups, 1);
      EXPECT_EQ(c.float_ops, 0) << ir::loop::PrintProgram(m.program);
      if (!u.token.empty()) {
        EXPECT_EQ(ir::loop::PrintProgram(m.program).find(" " + u.token + " "), std::string::npos);
      }
    }
  }
}

// QDQ SiLU as onnxruntime's quantize_static writes it: the sigmoid is
// quantized, then the product: one table from x to y.
TEST(Tabulate8BitFunctions, QdqSiluIsOneTable) {
  const std::string text = R"(
graph g(%x: u8[2,128]) -> (%y) opset 13 {
  %xs = constant f32[] 0.07632753252983093
  %xz = constant u8[] 129
  %ss = constant f32[] 0.00392130808904767
  %sz = constant u8[] 0
  %ys = constant f32[] 0.03880859911441803
  %yz = constant u8[] 7
  %d = DequantizeLinear(%x, %xs, %xz) : f32[2,128]
  %s = Sigmoid(%d) : f32[2,128]
  %sq = QuantizeLinear(%s, %ss, %sz) : u8[2,128]
  %sd = DequantizeLinear(%sq, %ss, %sz) : f32[2,128]
  %m = Mul(%d, %sd) : f32[2,128]
  %y = QuantizeLinear(%m, %ys, %yz) : u8[2,128]
}
)";
  LoopModule m = CheckExact(text, {AllValues(DType::kU8)});
  const Counts c = Count(m);
  EXPECT_EQ(c.lookups, 1);
  EXPECT_EQ(c.float_ops, 0) << ir::loop::PrintProgram(m.program);
}

// The squeeze-excitation multiply: y = Q(SiLU(x) * sigmoid(s)) with s per
// channel. Both 8-bit factors become lookups (SiLU of x, the quantized
// sigmoid of s); the product of two values and its Q stay computed.
TEST(Tabulate8BitFunctions, SqueezeExcitationMultiplyTabulatesBothFactors) {
  const std::string text = R"(
graph g(%x: u8[1,2,128], %s: u8[1,2,1]) -> (%y) opset 13 {
  %xs = constant f32[] 0.07632753252983093
  %xz = constant u8[] 129
  %ss = constant f32[] 0.00392130808904767
  %sz = constant u8[] 0
  %ms = constant f32[] 0.03880859911441803
  %mz = constant u8[] 7
  %es = constant f32[] 0.0031967784743756056
  %ez = constant u8[] 126
  %ys = constant f32[] 0.021556252613663673
  %yz = constant u8[] 8
  %d = DequantizeLinear(%x, %xs, %xz) : f32[1,2,128]
  %sg = Sigmoid(%d) : f32[1,2,128]
  %sq = QuantizeLinear(%sg, %ss, %sz) : u8[1,2,128]
  %sd = DequantizeLinear(%sq, %ss, %sz) : f32[1,2,128]
  %m = Mul(%d, %sd) : f32[1,2,128]
  %mq = QuantizeLinear(%m, %ms, %mz) : u8[1,2,128]
  %md = DequantizeLinear(%mq, %ms, %mz) : f32[1,2,128]
  %e = DequantizeLinear(%s, %es, %ez) : f32[1,2,1]
  %eg = Sigmoid(%e) : f32[1,2,1]
  %eq = QuantizeLinear(%eg, %ss, %sz) : u8[1,2,1]
  %ed = DequantizeLinear(%eq, %ss, %sz) : f32[1,2,1]
  %p = Mul(%md, %ed) : f32[1,2,128]
  %y = QuantizeLinear(%p, %ys, %yz) : u8[1,2,128]
}
)";
  Tensor x = AllValues(DType::kU8);
  x = Tensor::FromBytes(DType::kU8, {1, 2, 128}, x.raw_data());
  LoopModule m = CheckExact(text, {x, Tensor::FromVector<uint8_t>({1, 2, 1}, {3, 250})});
  EXPECT_EQ(Count(m).lookups, 2) << ir::loop::PrintProgram(m.program);
  EXPECT_EQ(ir::loop::PrintProgram(m.program).find(" sigmoid "), std::string::npos);
}

// No float arithmetic between the 8-bit values, or more than one 8-bit
// source, or a float result: nothing to tabulate.
TEST(Tabulate8BitFunctions, LeavesOtherKernelsAlone) {
  const std::string text = R"(
graph g(%x: u8[2,128], %z: u8[2,128], %f: f32[2,128]) -> (%a, %b, %c) opset 13 {
  %xs = constant f32[] 0.1
  %xz = constant u8[] 3
  %d = DequantizeLinear(%x, %xs, %xz) : f32[2,128]
  %e = DequantizeLinear(%z, %xs, %xz) : f32[2,128]
  %s = Add(%d, %e) : f32[2,128]
  %a = QuantizeLinear(%s, %xs, %xz) : u8[2,128]
  %b = Sigmoid(%d) : f32[2,128]
  %c = Sigmoid(%f) : f32[2,128]
}
)";
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<LoopModule> m = lowering::LowerGraph(*g);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(FuseVertical().Run(&*m).ok());
  const std::string before = ir::loop::PrintProgram(m->program);
  absl::StatusOr<bool> changed = Tabulate8BitFunctions().Run(&*m);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
  EXPECT_EQ(ir::loop::PrintProgram(m->program), before);
}

}  // namespace
}  // namespace kiln::passes
