// File: backends/onednn/integer_call_test.cc — ConvInteger, QLinearConv,
// MatMulInteger and QLinearMatMul as oneDNN int8 calls against the reference
// interpreter on seeded inputs: s32 outputs exactly, u8/i8 outputs within
// one quantization step (interp::Tolerance::integer_steps, the rule of
// docs/quantization.md), and the forms oneDNN 2.6 cannot run refused.
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/substitute.h"
#include "backends/onednn/extern_kernel.h"
#include "gtest/gtest.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"

namespace kiln::onednn {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

// Seeded values over the whole range of u8 / i8, or in [lo, hi].
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

Tensor RandomQuant(DType dtype, const Shape& shape, uint32_t seed) {
  return dtype == DType::kU8 ? RandomInts(dtype, shape, seed, 0, 255)
                             : RandomInts(dtype, shape, seed, -128, 127);
}

// s8 weights within [-64, 64]: exact on every CPU (oneDNN without VNNI adds
// u8 x s8 products pairwise in saturating 16 bits).
Tensor Weights7(const Shape& shape, uint32_t seed) {
  return RandomInts(DType::kI8, shape, seed, -64, 64);
}

// Whether oneDNN's int8 kernels here have VNNI (then full-range weights run
// exactly; without it they are refused, and an s8 src runs as u8).
bool Vnni() {
  const std::string isa = OneDnnCpuIsa();
  return absl::StrContains(isa, "vnni") || absl::StrContains(isa, "amx") ||
         absl::StrContains(isa, "bf16");
}

std::string Lit(const Tensor& t) { return ir::PrintTensor(t, ir::PrintOptions::Full()); }

struct Lowered {
  ir::Graph graph;
  ir::loop::LoopModule lp;
  const ir::loop::Kernel* ext = nullptr;
};

absl::StatusOr<Lowered> Lower(const std::string& text) {
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  if (!g.ok()) return g.status();
  Lowered l;
  l.graph = std::move(*g);
  absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(l.graph);
  if (!lp.ok()) return lp.status();
  l.lp = std::move(*lp);
  for (const ir::loop::Kernel& k : l.lp.program.kernels) {
    if (k.kind == ir::loop::Kernel::Kind::kExtern) l.ext = &k;
  }
  if (l.ext == nullptr) return absl::InternalError("no extern kernel");
  return l;
}

absl::Status CreateStatus(const std::string& text) {
  absl::StatusOr<Lowered> l = Lower(text);
  if (!l.ok()) return l.status();
  return OneDnnExternKernel::Create(l->lp.program, *l->ext, l->lp.constants, {}).status();
}

// Lowers `text` (one integer op reading graph input %x), runs its extern
// kernel on oneDNN over seeded x (or `given` inputs) and compares with
// interp::Run: exact for an s32 output, within `steps` quantization steps for
// u8/i8. Returns the call's description.
ExternKernelInfo CheckAgainstReference(const std::string& text, uint32_t seed = 7,
                                       int steps = 1, const std::vector<Tensor>* given = nullptr) {
  absl::StatusOr<Lowered> l = Lower(text);
  EXPECT_TRUE(l.ok()) << l.status() << "\n" << text;
  if (!l.ok()) return {};
  const ir::loop::Kernel& ext = *l->ext;
  std::vector<Tensor> inputs;
  std::map<int32_t, Tensor> storage;
  for (size_t i = 0; i < l->graph.inputs().size(); ++i) {
    const ir::Value& v = l->graph.value(l->graph.inputs()[i]);
    inputs.push_back(given ? (*given)[i] : RandomQuant(v.dtype, v.shape, seed * 31 + i));
    storage.emplace(l->lp.inputs[i], inputs.back());
  }
  for (const auto& [b, data] : l->lp.constants) storage.emplace(b, *data);
  const ir::loop::Buffer& out = l->lp.program.buffers[l->lp.outputs[0]];
  storage.emplace(l->lp.outputs[0], Tensor(out.dtype, out.shape));
  absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> k =
      OneDnnExternKernel::Create(l->lp.program, ext, l->lp.constants, {});
  EXPECT_TRUE(k.ok()) << k.status() << "\n" << text;
  if (!k.ok()) return {};
  std::vector<void*> in_ptrs, out_ptrs;
  for (int32_t b : ext.call.inputs) {
    EXPECT_TRUE(storage.count(b)) << "extern reads a buffer computed by a loop kernel";
    if (!storage.count(b)) return {};
    in_ptrs.push_back(storage.at(b).raw_data());
  }
  out_ptrs.push_back(storage.at(ext.call.outputs[0]).raw_data());
  for (int rep = 0; rep < 2; ++rep) {
    absl::Status s = (*k)->Run(in_ptrs, out_ptrs);
    EXPECT_TRUE(s.ok()) << s;
  }
  absl::StatusOr<std::vector<Tensor>> want = interp::Run(l->graph, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!want.ok()) return {};
  interp::Tolerance tol;
  tol.integer_steps = out.dtype == DType::kI32 ? 0 : steps;
  const Tensor& got = storage.at(l->lp.outputs[0]);
  interp::CompareResult r = interp::CompareTensors(got, (*want)[0], tol);
  EXPECT_TRUE(r.ok) << (*k)->info().call << " on " << (*k)->info().impl << ": " << r.message
                    << "\n" << text;
  // The one-step allowance is for rounding ties, not a systematic offset.
  if (out.dtype != DType::kI32) {
    int64_t off = 0;
    for (int64_t i = 0; i < got.num_elements(); ++i) {
      off += got.GetAsInt64(i) != (*want)[0].GetAsInt64(i);
    }
    EXPECT_LE(off * 20, got.num_elements()) << (*k)->info().call << ": " << off << " of "
                                            << got.num_elements() << " differ by a step";
  }
  return (*k)->info();
}

// ConvInteger(x, w, x_zero_point, w_zero_point) with constant w and zero points.
std::string ConvIntegerGraph(DType xt, DType wt, const Shape& x, const Shape& w,
                             const Shape& y, const std::string& attrs, int xzp,
                             const Tensor& wzp) {
  return absl::Substitute(R"(
graph main(%x: $0[$1]) -> (%y) opset 10 {
  %w = constant $2
  %xz = constant $0[] $3
  %wz = constant $4
  %y = ConvInteger(%x, %w, %xz, %wz) $5 : i32[$6]
}
)",
                          ir::DTypeName(xt), absl::StrJoin(x, ","),
                          Lit(wt == DType::kI8 ? Weights7(w, 3) : RandomQuant(wt, w, 3)),
                          xzp, Lit(wzp), attrs,
                          absl::StrJoin(y, ","));
}

TEST(IntegerCall, ConvIntegerU8S8WithPaddingAndZeroPoints) {
  const ExternKernelInfo info = CheckAgainstReference(ConvIntegerGraph(
      DType::kU8, DType::kI8, {1, 3, 7, 7}, {4, 3, 3, 3}, {1, 4, 7, 7},
      "{pads=[1, 1, 1, 1]}", 100, Tensor::Scalar<int8_t>(0)));
  EXPECT_EQ(info.call, "conv[3x3 s1 g1 p1 u8s8->s32]");
  EXPECT_EQ(info.precision, "int8");
  EXPECT_GT(info.prepacked_bytes, 0);
  EXPECT_FALSE(absl::StartsWith(info.impl, "ref")) << info.impl;
}

TEST(IntegerCall, ConvIntegerU8WeightsShiftedByTheirZeroPoint) {
  // u8 weights in [100, 200] with zero point 150: w - 150 fits in s8.
  const std::string text = absl::Substitute(R"(
graph main(%x: u8[2,4,6,5]) -> (%y) opset 10 {
  %w = constant $0
  %xz = constant u8[] 7
  %wz = constant u8[] 150
  %y = ConvInteger(%x, %w, %xz, %wz) {strides=[2, 1]} : i32[2,6,3,3]
}
)", Lit(RandomInts(DType::kU8, {6, 4, 2, 3}, 5, 100, 200)));
  EXPECT_EQ(CheckAgainstReference(text).call, "conv[2x3 s2x1 g1 u8s8->s32]");
}

TEST(IntegerCall, ConvIntegerPerChannelWeightZeroPoints) {
  Tensor wzp(DType::kI8, {4});
  for (int i = 0; i < 4; ++i) wzp.data<int8_t>()[i] = static_cast<int8_t>(i - 2);
  // Weights within [-60, 60]: w - zp stays within [-64, 64].
  const std::string text = absl::Substitute(R"(
graph main(%x: $0[1,3,5,5]) -> (%y) opset 10 {
  %w = constant $1
  %xz = constant $0[] $2
  %wz = constant $3
  %y = ConvInteger(%x, %w, %xz, %wz) {pads=[0, 1, 2, 1]} : i32[1,4,5,5]
}
)", "u8", Lit(RandomInts(DType::kI8, {4, 3, 3, 3}, 9, -60, 60)), 5, Lit(wzp));
  EXPECT_EQ(CheckAgainstReference(text).call, "conv[3x3 s1 g1 p0,1/2,1 u8s8->s32]");
  // An s8 src: without VNNI the call runs it as u8 (x + 128, zero point
  // + 128), exactly.
  const std::string s8 = absl::StrReplaceAll(text, {{"u8", "i8"}});
  EXPECT_EQ(CheckAgainstReference(s8).call, Vnni() ? "conv[3x3 s1 g1 p0,1/2,1 s8s8->s32]"
                                                   : "conv[3x3 s1 g1 p0,1/2,1 u8s8->s32]");
}

TEST(IntegerCall, FullRangeWeightsRunOnlyWithVnni) {
  const std::string text = ConvIntegerGraph(DType::kU8, DType::kU8, {1, 4, 6, 6},
                                            {3, 4, 3, 3}, {1, 3, 4, 4}, "", 3,
                                            Tensor::Scalar<uint8_t>(128));
  if (Vnni()) {
    CheckAgainstReference(text);
  } else {
    absl::Status s = CreateStatus(text);
    EXPECT_TRUE(absl::IsUnimplemented(s) && absl::StrContains(s.message(), "saturating"))
        << s;
  }
}

TEST(IntegerCall, ConvIntegerRefusesWeightsThatDoNotFitS8) {
  // u8 weights over [0, 255] with zero point 0: w - 0 exceeds 127.
  absl::Status s = CreateStatus(ConvIntegerGraph(DType::kU8, DType::kU8, {1, 2, 5, 5},
                                                 {3, 2, 3, 3}, {1, 3, 3, 3}, "", 0,
                                                 Tensor::Scalar<uint8_t>(0)));
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "do not fit in s8")) << s;
}

// QLinearConv with constant parameters; `wscale` one value or per channel.
std::string QLinearConvGraph(DType xt, DType yt, const Shape& x, const Shape& w,
                             const Shape& y, const std::string& attrs,
                             const std::string& wscale, bool bias) {
  const std::string bias_lit = Lit(RandomInts(DType::kI32, {w[0]}, 11, -2000, 2000));
  const std::string op = absl::StrCat(
      "  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz", bias ? ", %b" : "", ") ",
      attrs, " : ", ir::DTypeName(yt), "[", absl::StrJoin(y, ","), "]\n");
  return absl::Substitute(R"(
graph main(%x: $0[$1]) -> (%y) opset 10 {
  %xs = constant f32[] 0.0173
  %xz = constant $0[] $2
  %w = constant $3
  %ws = constant $4
  %wz = constant i8[] 0
  %ys = constant f32[] 0.0931
  %yz = constant $5[] $6
  %b = constant $7
$8}
)",
                          ir::DTypeName(xt), absl::StrJoin(x, ","),
                          xt == DType::kU8 ? 128 : -3, Lit(Weights7(w, 4)),
                          wscale, ir::DTypeName(yt), yt == DType::kU8 ? 120 : 5,
                          bias_lit, op);
}

TEST(IntegerCall, QLinearConvU8PerTensorWithBias) {
  const ExternKernelInfo info = CheckAgainstReference(
      QLinearConvGraph(DType::kU8, DType::kU8, {1, 8, 9, 9}, {16, 8, 3, 3}, {1, 16, 9, 9},
                       "{pads=[1, 1, 1, 1]}", "f32[] 0.0042", true));
  EXPECT_EQ(info.call, "conv[3x3 s1 g1 p1 u8s8->u8]+bias");
  EXPECT_FALSE(absl::StartsWith(info.impl, "ref")) << info.impl;
}

TEST(IntegerCall, QLinearConvPerChannelScales) {
  std::vector<std::string> scales;
  for (int i = 0; i < 6; ++i) scales.push_back(absl::StrCat(0.002 + 0.001 * i));
  const std::string wscale = "f32[6] [" + absl::StrJoin(scales, ", ") + "]";
  CheckAgainstReference(QLinearConvGraph(DType::kU8, DType::kI8, {2, 4, 6, 6}, {6, 4, 1, 1},
                                         {2, 6, 6, 6}, "", wscale, false));
  const std::string s8 = QLinearConvGraph(DType::kI8, DType::kI8, {2, 4, 6, 6},
                                          {6, 4, 1, 1}, {2, 6, 6, 6}, "", wscale, false);
  CheckAgainstReference(s8);
}

TEST(IntegerCall, QLinearConvU8InI8Out) {
  CheckAgainstReference(QLinearConvGraph(DType::kU8, DType::kI8, {1, 3, 8, 8}, {5, 3, 3, 3},
                                         {1, 5, 4, 4}, "{strides=[2, 2], pads=[1, 1, 1, 1]}",
                                         "f32[] 0.003", true));
}

TEST(IntegerCall, MatMulIntegerU8S8) {
  const std::string text = absl::Substitute(R"(
graph main(%x: u8[2,5,12]) -> (%y) opset 10 {
  %w = constant $0
  %xz = constant u8[] 77
  %y = MatMulInteger(%x, %w, %xz) : i32[2,5,7]
}
)", Lit(Weights7({12, 7}, 2)));
  const ExternKernelInfo info = CheckAgainstReference(text);
  EXPECT_EQ(info.op, "matmul");
  EXPECT_FALSE(absl::StartsWith(info.impl, "ref")) << info.impl;
}

TEST(IntegerCall, MatMulIntegerPerColumnWeightZeroPoints) {
  Tensor bz(DType::kU8, {3});
  for (int i = 0; i < 3; ++i) bz.data<uint8_t>()[i] = static_cast<uint8_t>(120 + 5 * i);
  const std::string text = absl::Substitute(R"(
graph main(%x: u8[4,6]) -> (%y) opset 10 {
  %w = constant $0
  %xz = constant u8[] 3
  %wz = constant $1
  %y = MatMulInteger(%x, %w, %xz, %wz) : i32[4,3]
}
)", Lit(RandomInts(DType::kU8, {6, 3}, 8, 70, 180)), Lit(bz));
  EXPECT_EQ(CheckAgainstReference(text).call, "matmul[4x6x3 u8s8->s32]");
}

TEST(IntegerCall, MatMulIntegerRefusesPerRowInputZeroPoints) {
  const std::string text = absl::Substitute(R"(
graph main(%x: u8[4,6]) -> (%y) opset 10 {
  %w = constant $0
  %xz = constant u8[4] [1, 2, 3, 4]
  %y = MatMulInteger(%x, %w, %xz) : i32[4,3]
}
)", Lit(RandomQuant(DType::kI8, {6, 3}, 8)));
  absl::Status s = CreateStatus(text);
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
}

TEST(IntegerCall, QLinearMatMulU8) {
  const std::string text = absl::Substitute(R"(
graph main(%a: u8[3,5,16]) -> (%y) opset 10 {
  %as = constant f32[] 0.05
  %az = constant u8[] 113
  %b = constant $0
  %bs = constant f32[] 0.02
  %bz = constant u8[] 128
  %ys = constant f32[] 0.1
  %yz = constant u8[] 118
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[3,5,8]
}
)", Lit(RandomInts(DType::kU8, {16, 8}, 6, 70, 190)));
  EXPECT_EQ(CheckAgainstReference(text).call, "matmul[3*5x16x8 u8s8->u8]");
}

TEST(IntegerCall, QLinearMatMulU8InS8Out) {
  const std::string text = absl::Substitute(R"(
graph main(%a: u8[6,10]) -> (%y) opset 10 {
  %as = constant f32[] 0.05
  %az = constant u8[] 100
  %b = constant $0
  %bs = constant f32[] 0.03
  %bz = constant i8[] 0
  %ys = constant f32[] 0.75
  %yz = constant i8[] 1
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : i8[6,4]
}
)", Lit(Weights7({10, 4}, 6)));
  EXPECT_EQ(CheckAgainstReference(text).call, "matmul[6x10x4 u8s8->s8]");
}

// ONNX rounds scale * acc and then adds the zero point to an integer. With
// scale 0.5 - 2^-25 and acc = a, an odd a gives a/2 less one f32 ulp, which
// rounds down, but a/2 + 128 less that ulp is not an f32 and its sum rounds
// to the tie a/2 + 128, which half-to-even rounds up for half of the odd a.
// The call's round post-op keeps ONNX's order: equal to the reference on
// every u8 value, conv and matmul, u8 and s8 dst.
// Depthwise 3x3 weights [16,1,3,3] that are 1 at the centre, 0 elsewhere.
Tensor CenterTaps() {
  Tensor w(DType::kI8, {16, 1, 3, 3});
  for (int64_t i = 0; i < w.num_elements(); ++i) w.data<int8_t>()[i] = i % 9 == 4 ? 1 : 0;
  return w;
}

TEST(IntegerCall, RoundsBeforeAddingTheDstZeroPoint) {
  Tensor every_u8(DType::kU8, {1, 1, 16, 16});
  for (int v = 0; v < 256; ++v) every_u8.data<uint8_t>()[v] = static_cast<uint8_t>(v);
  for (const char* yt : {"u8", "i8"}) {
    const int yz = std::string(yt) == "u8" ? 128 : 100;
    const std::string conv = absl::Substitute(R"(
graph main(%x: u8[1,1,16,16]) -> (%y) opset 10 {
  %xs = constant f32[] 0.49999997
  %xz = constant u8[] 0
  %w = constant i8[1,1,1,1] [1]
  %ws = constant f32[] 1
  %wz = constant i8[] 0
  %ys = constant f32[] 1
  %yz = constant $0[] $1
  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz) : $0[1,1,16,16]
}
)", yt, yz);
    const std::vector<Tensor> x = {every_u8};
    CheckAgainstReference(conv, 0, /*steps=*/0, &x);
    // Depthwise (16 groups of one channel, 3x3 with one nonzero tap).
    const std::string dw = absl::Substitute(R"(
graph main(%x: u8[1,16,4,4]) -> (%y) opset 10 {
  %xs = constant f32[] 0.49999997
  %xz = constant u8[] 0
  %w = constant $2
  %ws = constant f32[] 1
  %wz = constant i8[] 0
  %ys = constant f32[] 1
  %yz = constant $0[] $1
  %y = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz) {group=16, pads=[1, 1, 1, 1]} : $0[1,16,4,4]
}
)", yt, yz, Lit(CenterTaps()));
    Tensor x16(DType::kU8, {1, 16, 4, 4});
    for (int v = 0; v < 256; ++v) x16.data<uint8_t>()[v] = static_cast<uint8_t>(v);
    const std::vector<Tensor> xd = {x16};
    CheckAgainstReference(dw, 0, /*steps=*/0, &xd);
    const std::string matmul = absl::Substitute(R"(
graph main(%a: u8[256,1]) -> (%y) opset 10 {
  %as = constant f32[] 0.49999997
  %az = constant u8[] 0
  %b = constant i8[1,1] [1]
  %bs = constant f32[] 1
  %bz = constant i8[] 0
  %ys = constant f32[] 1
  %yz = constant $0[] $1
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : $0[256,1]
}
)", yt, yz);
    Tensor a(DType::kU8, {256, 1});
    for (int v = 0; v < 256; ++v) a.data<uint8_t>()[v] = static_cast<uint8_t>(v);
    const std::vector<Tensor> av = {a};
    CheckAgainstReference(matmul, 0, /*steps=*/0, &av);
  }
}

// An s8 A over the whole range (-128 and 127 included) with a negative and
// an extreme zero point: without VNNI the call flips it to u8 inside.
TEST(IntegerCall, S8SrcRunsExactlyOnEveryCpu) {
  for (const int az : {-128, -7, 127}) {
    const std::string mm = absl::Substitute(R"(
graph main(%x: i8[5,24]) -> (%y) opset 10 {
  %w = constant $0
  %xz = constant i8[] $1
  %y = MatMulInteger(%x, %w, %xz) : i32[5,6]
}
)", Lit(Weights7({24, 6}, 12)), az);
    EXPECT_EQ(CheckAgainstReference(mm, 3 + az).call,
              Vnni() ? "matmul[5x24x6 s8s8->s32]" : "matmul[5x24x6 u8s8->s32]");
    const std::string qmm = absl::Substitute(R"(
graph main(%a: i8[2,4,16]) -> (%y) opset 10 {
  %as = constant f32[] 0.05
  %az = constant i8[] $1
  %b = constant $0
  %bs = constant f32[] 0.01
  %bz = constant i8[] 0
  %ys = constant f32[] 0.2
  %yz = constant u8[] 120
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[2,4,8]
}
)", Lit(Weights7({16, 8}, 13)), az);
    CheckAgainstReference(qmm, 5 + az);
  }
  // An s8 QLinearConv with padding (padded elements are the zero point).
  CheckAgainstReference(QLinearConvGraph(DType::kI8, DType::kI8, {1, 5, 7, 7}, {4, 5, 3, 3},
                                         {1, 4, 7, 7}, "{pads=[1, 1, 1, 1]}", "f32[] 0.004",
                                         true));
}

// QLinearMatMul with a run-time B (attention in a QDQ model): batched 4-D,
// s8 B over its whole range with a nonzero zero point (oneDNN's weights
// zero point), nonzero src and dst zero points.
std::string RuntimeBGraph(DType at, DType yt, int az, int bz, int yz) {
  return absl::Substitute(R"(
graph main(%a: $0[1,3,20,40], %b: i8[1,3,40,24]) -> (%y) opset 10 {
  %as = constant f32[] 0.021
  %az = constant $0[] $2
  %bs = constant f32[] 0.02
  %bz = constant i8[] $3
  %ys = constant f32[] 0.11
  %yz = constant $1[] $4
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : $1[1,3,20,24]
}
)", at == DType::kU8 ? "u8" : "i8", yt == DType::kU8 ? "u8" : "i8", az, bz, yz);
}

TEST(IntegerCall, QLinearMatMulRuntimeBBatched) {
  if (!Vnni()) {
    EXPECT_TRUE(absl::IsUnimplemented(
        CreateStatus(RuntimeBGraph(DType::kU8, DType::kU8, 129, -3, 127))));
    GTEST_SKIP() << "a runtime B is refused without VNNI (" << OneDnnCpuIsa() << ")";
  }
  EXPECT_EQ(CheckAgainstReference(RuntimeBGraph(DType::kU8, DType::kU8, 129, -3, 127)).call,
            "matmul[3*20x40x24 u8s8->u8]");
  CheckAgainstReference(RuntimeBGraph(DType::kU8, DType::kU8, 0, 0, 0), 11);
  CheckAgainstReference(RuntimeBGraph(DType::kI8, DType::kI8, -7, 5, -2), 12);
  CheckAgainstReference(RuntimeBGraph(DType::kU8, DType::kI8, 200, -128, 3), 13);
}

// B broadcast over A's batch, and a 3-D call.
TEST(IntegerCall, QLinearMatMulRuntimeBBroadcast) {
  if (!Vnni()) GTEST_SKIP() << "a runtime B is refused without VNNI";
  CheckAgainstReference(R"(
graph main(%a: u8[4,6,32], %b: i8[1,32,9]) -> (%y) opset 10 {
  %as = constant f32[] 0.05
  %az = constant u8[] 113
  %bs = constant f32[] 0.01
  %bz = constant i8[] 17
  %ys = constant f32[] 0.3
  %yz = constant u8[] 118
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[4,6,9]
}
)");
}

// oneDNN 2.6 takes s8 weights only: a run-time u8 B is refused with the
// reason (fuse-qdq writes it as s8 where it is produced).
TEST(IntegerCall, QLinearMatMulRuntimeU8BIsRefused) {
  const absl::Status s = CreateStatus(R"(
graph main(%a: u8[2,4,8], %b: u8[2,8,3]) -> (%y) opset 10 {
  %as = constant f32[] 0.05
  %az = constant u8[] 113
  %bs = constant f32[] 0.01
  %bz = constant u8[] 128
  %ys = constant f32[] 0.3
  %yz = constant u8[] 118
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[2,4,3]
}
)");
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "runtime u8 B")) << s;
}

// MatMulInteger on a run-time s8 B (the f32-result QDQ form): s32 exactly.
TEST(IntegerCall, MatMulIntegerRuntimeB) {
  if (!Vnni()) GTEST_SKIP() << "a runtime B is refused without VNNI";
  EXPECT_EQ(CheckAgainstReference(R"(
graph main(%a: u8[1,2,12,32], %b: i8[1,2,32,10]) -> (%y) opset 10 {
  %az = constant u8[] 129
  %bz = constant i8[] -3
  %y = MatMulInteger(%a, %b, %az, %bz) : i32[1,2,12,10]
}
)").call, "matmul[2*12x32x10 u8s8->s32]");
}

// The run-time src zero point DynamicQuantizeLinear computes (here a graph
// input, a seeded value over the whole type): oneDNN's run-time src zero
// point, read at each run. s32 results exactly, on every CPU for weights in
// [-64, 64]; full-range weights (u8 minus their zero point) with VNNI only.
TEST(IntegerCall, MatMulIntegerRuntimeSrcZeroPoint) {
  const std::string text = absl::Substitute(R"(
graph main(%x: u8[3,5,40], %xz: u8[]) -> (%y) opset 10 {
  %w = constant $0
  %y = MatMulInteger(%x, %w, %xz) : i32[3,5,24]
}
)", Lit(Weights7({40, 24}, 2)));
  for (uint32_t seed : {7u, 8u, 9u}) {
    const ExternKernelInfo info = CheckAgainstReference(text, seed);
    EXPECT_EQ(info.call, "matmul[3*5x40x24 u8s8->s32 zp:run]");
    EXPECT_EQ(info.precision, "int8");
    EXPECT_FALSE(absl::StartsWith(info.impl, "ref")) << info.impl;
  }
  // quantize_dynamic's defaults: u8 weights with a zero point (w - zp fits s8).
  const std::string u8w = absl::Substitute(R"(
graph main(%x: u8[7,64], %xz: u8[]) -> (%y) opset 10 {
  %w = constant $0
  %wz = constant u8[] 131
  %y = MatMulInteger(%x, %w, %xz, %wz) : i32[7,33]
}
)", Lit(RandomInts(DType::kU8, {64, 33}, 4, 3, 255)));
  if (Vnni()) {
    EXPECT_EQ(CheckAgainstReference(u8w, 5).call, "matmul[7x64x33 u8s8->s32 zp:run]");
  } else {
    absl::Status s = CreateStatus(u8w);
    EXPECT_TRUE(absl::IsUnimplemented(s) && absl::StrContains(s.message(), "saturating"))
        << s;
  }
}

// An s8 src with a run-time s8 zero point: without VNNI the call runs the src
// as u8 and adds 128 to the zero point it reads.
TEST(IntegerCall, MatMulIntegerRuntimeS8SrcZeroPoint) {
  const std::string text = absl::Substitute(R"(
graph main(%x: i8[6,20], %xz: i8[]) -> (%y) opset 10 {
  %w = constant $0
  %y = MatMulInteger(%x, %w, %xz) : i32[6,9]
}
)", Lit(Weights7({20, 9}, 6)));
  for (uint32_t seed : {3u, 4u}) {
    EXPECT_EQ(CheckAgainstReference(text, seed).call,
              Vnni() ? "matmul[6x20x9 s8s8->s32 zp:run]" : "matmul[6x20x9 u8s8->s32 zp:run]");
  }
}

TEST(IntegerCall, RuntimePerRowSrcZeroPointIsRefused) {
  const std::string text = absl::Substitute(R"(
graph main(%x: u8[4,6], %xz: u8[4]) -> (%y) opset 10 {
  %w = constant $0
  %y = MatMulInteger(%x, %w, %xz) : i32[4,3]
}
)", Lit(Weights7({6, 3}, 8)));
  absl::Status s = CreateStatus(text);
  EXPECT_TRUE(absl::IsUnimplemented(s) && absl::StrContains(s.message(), "per-row")) << s;
}

// ConvInteger with a run-time src zero point and padding (padded elements
// are the zero point: oneDNN compensates them from the run-time value).
TEST(IntegerCall, ConvIntegerRuntimeSrcZeroPoint) {
  const std::string text = absl::Substitute(R"(
graph main(%x: u8[1,8,9,9], %xz: u8[]) -> (%y) opset 10 {
  %w = constant $0
  %y = ConvInteger(%x, %w, %xz) {pads=[1, 1, 1, 1]} : i32[1,16,9,9]
}
)", Lit(Weights7({16, 8, 3, 3}, 3)));
  for (uint32_t seed : {7u, 21u}) {
    const ExternKernelInfo info = CheckAgainstReference(text, seed);
    EXPECT_EQ(info.call, "conv[3x3 s1 g1 p1 u8s8->s32 zp:run]");
    EXPECT_EQ(info.precision, "int8");
    EXPECT_FALSE(absl::StartsWith(info.impl, "ref")) << info.impl;
  }
  const std::string strided = absl::Substitute(R"(
graph main(%x: u8[2,4,7,6], %xz: u8[]) -> (%y) opset 10 {
  %w = constant $0
  %wz = constant u8[] 128
  %y = ConvInteger(%x, %w, %xz, %wz) {strides=[2, 1], pads=[0, 1, 2, 0]} : i32[2,5,4,6]
}
)", Lit(RandomQuant(DType::kU8, {5, 4, 3, 2}, 12)));
  if (Vnni()) {
    CheckAgainstReference(strided, 13);
  } else {
    absl::Status s = CreateStatus(strided);
    EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  }
}

// u8 weights (quantize_dynamic's default) whose difference from their zero
// point leaves s8 in a few places: with VNNI the call runs on the clamped
// weights and adds the residuals in s32, exactly; without VNNI it is refused.
TEST(IntegerCall, MatMulIntegerWeightsOutsideS8RunAsResiduals) {
  Tensor w = RandomInts(DType::kU8, {64, 33}, 14, 20, 240);
  Tensor wz(DType::kU8, {33});
  for (int n = 0; n < 33; ++n) wz.data<uint8_t>()[n] = n % 2 == 0 ? 120 : 140;
  // 255 - 120 = 135 and 0 - 140 = -140 leave s8.
  for (auto [k, n, v] : {std::tuple{3, 0, 255}, {10, 1, 0}, {63, 32, 255}, {0, 5, 0},
                         {40, 7, 0}}) {
    w.data<uint8_t>()[k * 33 + n] = static_cast<uint8_t>(v);
  }
  const std::string text = absl::Substitute(R"(
graph main(%x: u8[2,7,64], %xz: u8[]) -> (%y) opset 10 {
  %w = constant $0
  %wz = constant $1
  %y = MatMulInteger(%x, %w, %xz, %wz) : i32[2,7,33]
}
)", Lit(w), Lit(wz));
  if (Vnni()) {
    for (uint32_t seed : {15u, 16u}) {
      EXPECT_EQ(CheckAgainstReference(text, seed).call,
                "matmul[2*7x64x33 u8s8->s32 zp:run]+residuals[5]");
    }
    // A constant src zero point takes the same path.
    const std::string constant_zp = absl::StrReplaceAll(
        text, {{", %xz: u8[])", ")"}, {"  %wz =", "  %xz = constant u8[] 201\n  %wz ="}});
    EXPECT_EQ(CheckAgainstReference(constant_zp).call,
              "matmul[2*7x64x33 u8s8->s32]+residuals[5]");
  } else {
    absl::Status s = CreateStatus(text);
    EXPECT_TRUE(absl::IsUnimplemented(s) && absl::StrContains(s.message(), "do not fit in s8"))
        << s;
  }
  // More than one weight in 256 outside s8: refused everywhere.
  const std::string many = absl::Substitute(R"(
graph main(%x: u8[4,16], %xz: u8[]) -> (%y) opset 10 {
  %w = constant $0
  %y = MatMulInteger(%x, %w, %xz) : i32[4,16]
}
)", Lit(RandomQuant(DType::kU8, {16, 16}, 17)));
  absl::Status s = CreateStatus(many);
  EXPECT_TRUE(absl::IsUnimplemented(s) && absl::StrContains(s.message(), "do not fit in s8"))
      << s;
}

}  // namespace
}  // namespace kiln::onednn
