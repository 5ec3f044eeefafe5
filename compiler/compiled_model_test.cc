// End-to-end tests of kiln's public API: graphs compiled by kiln::Compiler
// (graph passes, lowering, emitted C++ through the JIT, library calls) give
// what the reference interpreter gives; bad inputs get clear errors; Run is
// safe from many threads; the report describes every kernel.
#include "compiler/compiler.h"
#include "compiler/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/graph/text.h"
#include "nlohmann/json.hpp"
#include "interp/compare.h"
#include "interp/interpreter.h"

namespace kiln {
namespace {

using compiler_testing::Options;
using compiler_testing::kPointwiseAndReductions;
using compiler_testing::Parse;
using compiler_testing::Random;

// Compiles `text` and checks the compiled outputs against the reference
// interpreter on the same (unoptimized) graph.
void ExpectMatchesReference(const char* text, const std::vector<ir::Tensor>& inputs,
                            CompileOptions options = Options()) {
  ir::Graph g = Parse(text);
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(options).CompileGraph(std::move(g));
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < got->size(); ++o) {
    interp::CompareResult r =
        interp::CompareTensors((*got)[o], (*want)[o], interp::Tolerance{1e-4, 1e-5, {}});
    EXPECT_TRUE(r.ok) << "output " << o << ": " << r.message << "\n"
                      << (*model)->report().ToText();
  }
}

// The report's QDQ line counts patterns left f32 by rule: the value that
// broke the rule in each ("here N") stays in the per-pattern list only.
TEST(CompileReport, QdqSummaryGroupsReasonsByRule) {
  CompileReport r;
  for (int v : {71, -100, 126}) {
    r.qdq_patterns.push_back({"mm", "MatMul", "",
                              absl::StrCat("weights outside [-64, 64] (here ", v,
                                           ") would overflow")});
  }
  r.qdq_patterns.push_back({"c", "Conv", "QLinearConv", ""});
  const std::string text = r.ToText();
  EXPECT_NE(text.find("QDQ patterns: 4, 1 as integer calls; in f32: 3x MatMul: weights "
                      "outside [-64, 64] would overflow\n"),
            std::string::npos)
      << text;
}

TEST(CompiledModel, PointwiseReductionsAndViewsMatchReference) {
  ExpectMatchesReference(kPointwiseAndReductions, {Random({3, 17}, 1), Random({17}, 2)});
}

TEST(CompiledModel, EagerModeMatchesReference) {
  CompileOptions o = Options();
  o.mode = CompileOptions::Mode::kEager;
  ExpectMatchesReference(kPointwiseAndReductions, {Random({3, 17}, 1), Random({17}, 2)}, o);
}

TEST(CompiledModel, ScalarIsaMatchesReference) {
  CompileOptions o = Options();
  o.isa = "scalar";
  ExpectMatchesReference(kPointwiseAndReductions, {Random({3, 17}, 3), Random({17}, 4)}, o);
}

constexpr char kConvBlock[] = R"(
graph g(%x: f32[1,3,9,9]) -> (%y) opset 13 {
  %w = constant f32[5,3,3,3] <elided>
  %bias = constant f32[5] <elided>
  %c = Conv(%x, %w, %bias) {pads=[1,1,1,1]} name="conv" : f32[1,5,9,9]
  %r = Relu(%c) name="relu" : f32[1,5,9,9]
  %p = MaxPool(%r) {kernel_shape=[2,2], strides=[2,2]} name="pool" : f32[1,5,4,4]
  %f = Flatten(%p) name="flat" : f32[1,80]
  %wm = constant f32[80,7] <elided>
  %m = MatMul(%f, %wm) name="mm" : f32[1,7]
  %y = Softmax(%m) {axis=1} name="sm" : f32[1,7]
}
)";

TEST(CompiledModel, ConvPoolMatMulBlockMatchesReference) {
  ExpectMatchesReference(kConvBlock, {Random({1, 3, 9, 9}, 5)});
}

TEST(CompiledModel, ConvBlockOnTheReferenceLibraryPathMatches) {
  CompileOptions o = Options();
  o.use_onednn = false;
  ExpectMatchesReference(kConvBlock, {Random({1, 3, 9, 9}, 6)}, o);
}

// A YOLO-style f32 block (C2f): conv 16 -> 40, split along channels at 20,
// conv on the second half, concat of the three 20-channel parts, swish as
// loop kernels, conv 60 -> 16. Channel offsets of 20 fit no channel block;
// where oneDNN's f32 convs run on NHWC (brgconv on AVX-512) the chain goes
// channels-last (docs/decisions/0063): the first two convs run without a
// per-call reorder, and the split, concat and swish kernels stay vectorized
// over the channel lanes. The output is the reference interpreter's.
constexpr char kSplitConcatChain[] = R"(
graph g(%x: f32[1,16,12,12]) -> (%y) opset 17 {
  %w1 = constant f32[40,16,3,3] <elided>
  %w2 = constant f32[20,20,3,3] <elided>
  %w3 = constant f32[16,60,1,1] <elided>
  %xr = Relu(%x) name="relu" : f32[1,16,12,12]
  %a = Conv(%xr, %w1) {pads=[1,1,1,1]} name="cv1" : f32[1,40,12,12]
  %s1, %s2 = Split(%a) {axis=1} name="split" : f32[1,20,12,12], f32[1,20,12,12]
  %b = Conv(%s2, %w2) {pads=[1,1,1,1]} name="cv2" : f32[1,20,12,12]
  %cat = Concat(%s1, %s2, %b) {axis=1} name="cat" : f32[1,60,12,12]
  %sg = Sigmoid(%cat) name="sig" : f32[1,60,12,12]
  %sw = Mul(%cat, %sg) name="swish" : f32[1,60,12,12]
  %y = Conv(%sw, %w3) name="cv3" : f32[1,16,12,12]
}
)";

TEST(CompiledModel, F32SplitConcatChainRunsChannelsLast) {
  ir::Graph g = Parse(kSplitConcatChain);
  const std::vector<ir::Tensor> inputs = {Random({1, 16, 12, 12}, 31)};
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(std::move(g));
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  interp::CompareResult c =
      interp::CompareTensors((*got)[0], (*want)[0], interp::Tolerance{0, 0, 1e-5});
  EXPECT_TRUE(c.ok) << c.message << "\n" << r.ToText();
  std::vector<const KernelReport*> calls;
  for (const KernelReport& k : r.kernels) {
    if (k.backend == "onednn") calls.push_back(&k);
    if (k.backend != "onednn") EXPECT_TRUE(k.vectorized) << k.name << "\n" << r.ToText();
  }
  ASSERT_EQ(calls.size(), 3u) << r.ToText();
  if (!absl::StrContains(calls[0]->reason, "brgconv")) {
    GTEST_SKIP() << "SKIPPED: oneDNN's f32 conv here is " << calls[0]->reason
                 << ", not brgconv on NHWC";
  }
  EXPECT_EQ(calls[0]->reorders_per_call, 0) << r.ToText();
  EXPECT_EQ(calls[1]->reorders_per_call, 0) << r.ToText();
}

// bf16 mode: Conv and MatMul compute in bf16 with f32 accumulation. oneDNN
// runs bf16 natively only with AVX512-BF16 or AMX; the test lets it use its
// reference kernels elsewhere, so the arithmetic is checked on any AVX-512
// CPU. oneDNN 2.6 has no bf16 kernel at all below AVX-512: there every call
// must fall back to f32, say why, and stay exact.
// The bound: bf16 rounds each input of a dot product to 8 significant bits
// (2^-9 relative), so these small chains stay within 2^-5 of max |ref|.
TEST(CompiledModel, Bf16ModeComputesLibraryCallsInBf16WithinItsBound) {
  CompileOptions o = Options();
  o.precision = CompileOptions::Precision::kBF16;
  o.allow_onednn_reference_impl = true;
  ir::Graph g = Parse(kConvBlock);
  const std::vector<ir::Tensor> inputs = {Random({1, 3, 9, 9}, 8)};
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(o).CompileGraph(std::move(g));
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  EXPECT_EQ(r.precision, "bf16");
  EXPECT_NE(r.ToText().find("precision: bf16"), std::string::npos) << r.ToText();
  int bf16_calls = 0, refused = 0;
  for (const KernelReport& k : r.kernels) {
    if (k.backend != "onednn") {
      EXPECT_EQ(k.precision, "f32") << k.name;
      continue;
    }
    if (k.precision == "bf16") {
      ++bf16_calls;
    } else {
      EXPECT_THAT(k.reason, ::testing::HasSubstr("f32, not bf16: ")) << k.name;
      ++refused;
    }
  }
  EXPECT_EQ(bf16_calls + refused, 2) << r.ToText();
  absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  if (refused > 0) {
    // This CPU's oneDNN has no bf16 kernel: f32 results, and a warning.
    EXPECT_EQ(bf16_calls, 0) << r.ToText();
    EXPECT_TRUE(interp::CompareTensors((*got)[0], (*want)[0], {1e-4, 1e-5, {}}).ok);
    EXPECT_THAT(absl::StrJoin(r.warnings, "\n"), ::testing::HasSubstr("without native bf16"));
    GTEST_SKIP() << "oneDNN has no bf16 kernel on this CPU (" << r.kernels[0].reason
                 << "): bf16 arithmetic not checked here, the f32 fallback was";
  }
  interp::Tolerance bound{0, 0, 1.0 / 32};
  interp::CompareResult c = interp::CompareTensors((*got)[0], (*want)[0], bound);
  EXPECT_TRUE(c.ok) << c.message;
  // Not merely f32 again: bf16 inputs move the result off the f32 one.
  EXPECT_GT(c.max_abs_error, 0.0);
}

// Two convolutions and a matmul with loop kernels between them (Sin,
// pooling and Softmax are no oneDNN post-ops): in bf16 mode the activations the calls
// read and write are stored in bf16 (store-activations-in-bf16), so the
// calls after the first read them without a conversion, the loop kernels
// read and write bf16 and compute in f32, and Softmax still normalizes in f32.
constexpr char kConvChain[] = R"(
graph g(%x: f32[1,8,10,10]) -> (%y) opset 13 {
  %w1 = constant f32[16,8,3,3] <elided>
  %w2 = constant f32[16,16,3,3] <elided>
  %wm = constant f32[16,10] <elided>
  %c1 = Conv(%x, %w1) {pads=[1,1,1,1]} name="conv1" : f32[1,16,10,10]
  %s = Sin(%c1) name="sin" : f32[1,16,10,10]
  %c2 = Conv(%s, %w2) {pads=[1,1,1,1]} name="conv2" : f32[1,16,10,10]
  %g = GlobalAveragePool(%c2) name="gap" : f32[1,16,1,1]
  %shape = constant i64[2] [1, 16]
  %f = Reshape(%g, %shape) name="flat" : f32[1,16]
  %m = MatMul(%f, %wm) name="mm" : f32[1,10]
  %y = Softmax(%m) {axis=1} name="sm" : f32[1,10]
}
)";

// The bound is the one of Bf16ModeComputesLibraryCallsInBf16WithinItsBound:
// each bf16 rounding (a call's inputs, a stored activation) is at most 2^-8
// relative, and these short chains stay within 2^-5 of max |ref|.
TEST(CompiledModel, Bf16ModeStoresActivationsBetweenCallsInBf16) {
  CompileOptions o = Options();
  o.precision = CompileOptions::Precision::kBF16;
  ir::Graph g = Parse(kConvChain);
  const std::vector<ir::Tensor> inputs = {Random({1, 8, 10, 10}, 21)};
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(o).CompileGraph(std::move(g));
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  std::vector<const KernelReport*> calls;
  for (const KernelReport& k : r.kernels) {
    if (k.backend == "onednn") calls.push_back(&k);
  }
  ASSERT_EQ(calls.size(), 3u) << r.ToText();
  // Without native bf16 (an AVX2 CPU, or a DNNL_MAX_CPU_ISA cap) the calls
  // run in f32 or emulated bf16, and the activations stay f32.
  if (calls[0]->precision != "bf16" ||
      absl::StrContains(absl::StrJoin(r.warnings, "\n"), "without native bf16")) {
    GTEST_SKIP() << "SKIPPED: oneDNN runs no native bf16 here (" << calls[0]->reason
                 << "): activations stay f32";
  }
  // The first conv converts the graph's f32 input; the second conv reads
  // the Sin kernel's bf16 output and writes bf16 for the pooling kernel,
  // whose bf16 output the matmul reads, all as they are.
  EXPECT_EQ(calls[1]->reorders_per_call, 0) << r.ToText();
  EXPECT_EQ(calls[2]->reorders_per_call, 0) << r.ToText();
  // The report counts those buffers (conv1's, Sin's, conv2's and the
  // pooling's outputs at least), and the Sin and pooling kernels say they
  // load and store bf16.
  EXPECT_GE(r.bf16_activation_buffers, 4) << r.ToText();
  EXPECT_GE(r.bf16_activation_bytes, 4 * 2) << r.ToText();
  int narrow_loop_kernels = 0;
  for (const KernelReport& k : r.kernels) {
    narrow_loop_kernels += k.backend == "loop" && std::find(k.storage.begin(), k.storage.end(),
                                                            "bf16") != k.storage.end();
  }
  EXPECT_GE(narrow_loop_kernels, 2) << r.ToText();
  EXPECT_THAT(r.ToText(), ::testing::HasSubstr("stored in bf16")) << r.ToText();
  absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  interp::CompareResult c =
      interp::CompareTensors((*got)[0], (*want)[0], interp::Tolerance{0, 0, 1.0 / 32});
  EXPECT_TRUE(c.ok) << c.message << "\n" << r.ToText();
  // The Softmax sums to 1 in f32 (its output is the graph's, stored f32).
  double sum = 0;
  for (int64_t i = 0; i < (*got)[0].num_elements(); ++i) sum += (*got)[0].data<float>()[i];
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

// Integer calls oneDNN's int8 path refuses (full-range u8 weights, a runtime
// src zero point) run as f32 oneDNN calls on integer-valued operands
// (integer-calls-in-f32, docs/decisions/0039), not on the interpreter.
ir::Tensor SeededU8(const ir::Shape& shape, uint32_t seed) {
  ir::Tensor t(ir::DType::kU8, shape);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, 255);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.data<uint8_t>()[i] = static_cast<uint8_t>(dist(rng));
  }
  return t;
}

std::string U8Literal(const ir::Shape& shape, uint32_t seed) {
  return ir::PrintTensor(SeededU8(shape, seed), ir::PrintOptions::Full());
}

int OneDnnCalls(const CompileReport& r) {
  int n = 0;
  for (const KernelReport& k : r.kernels) n += k.backend == "onednn";
  return n;
}

// K = 4 * 3 * 3 = 36 terms of at most 255 * 255: every sum is exact in f32,
// so the i32 result equals the reference bit for bit, in f32 and in bf16
// mode (bf16 holds integers up to 256 exactly).
TEST(CompiledModel, RefusedConvIntegerRunsExactlyAsAnF32Call) {
  const std::string text = "graph g(%x: u8[1,4,6,6], %xz: u8[]) -> (%y) opset 10 {\n"
                           "  %w = constant " + U8Literal({3, 4, 3, 3}, 1) + "\n"
                           "  %wz = constant " + U8Literal({3}, 2) + "\n"
                           "  %y = ConvInteger(%x, %w, %xz, %wz) {pads=[1, 1, 1, 1]} "
                           ": i32[1,3,6,6]\n}\n";
  for (CompileOptions::Precision p :
       {CompileOptions::Precision::kF32, CompileOptions::Precision::kBF16}) {
    CompileOptions o = Options();
    o.precision = p;
    absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
    ASSERT_TRUE(g.ok()) << g.status();
    const std::vector<ir::Tensor> inputs = {SeededU8({1, 4, 6, 6}, 3), SeededU8({}, 4)};
    absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(*g, inputs);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(o).CompileGraph(*g);
    ASSERT_TRUE(model.ok()) << model.status();
    const CompileReport& r = (*model)->report();
    EXPECT_EQ(r.reference_calls, 0) << r.ToText();
    EXPECT_EQ(OneDnnCalls(r), 1) << r.ToText();
    absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    interp::CompareResult c =
        interp::CompareTensors((*got)[0], (*want)[0], interp::Tolerance{0, 0, {}});
    EXPECT_TRUE(c.ok) << c.message << "\n" << r.ToText();
  }
}

// What quantize_dynamic writes: DynamicQuantizeLinear, then ConvInteger with a
// runtime zero point read through Cast(float) and scaled. K = 32 * 3 * 3 = 288
// terms: sums may pass 2^24, so only the float reader allows the rewrite;
// |acc - exact| <= (K-1) * 2^-24 * S_c with S_c <= K * 255 * 255, scaled by
// x_scale * w_scale.
TEST(CompiledModel, DynamicallyQuantizedConvWithinItsBound) {
  const std::string text = "graph g(%x: f32[1,32,5,5]) -> (%y) opset 11 {\n"
                           "  %w = constant " + U8Literal({4, 32, 3, 3}, 5) + "\n"
                           "  %wz = constant u8[] 128\n"
                           "  %ws = constant f32[] 0.01\n"
                           "  %xq, %xs, %xz = DynamicQuantizeLinear(%x) : u8[1,32,5,5], f32[], u8[]\n"
                           "  %acc = ConvInteger(%xq, %w, %xz, %wz) : i32[1,4,3,3]\n"
                           "  %f = Cast(%acc) {to=1} : f32[1,4,3,3]\n"
                           "  %s = Mul(%xs, %ws) : f32[]\n"
                           "  %y = Mul(%f, %s) : f32[1,4,3,3]\n}\n";
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<ir::Tensor> inputs = {Random({1, 32, 5, 5}, 9)};
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(*g, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(Options()).CompileGraph(*g);
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  EXPECT_EQ(r.reference_calls, 0) << r.ToText();
  EXPECT_EQ(OneDnnCalls(r), 1) << r.ToText();
  absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  float x_scale = 0.0f;
  {
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < inputs[0].num_elements(); ++i) {
      lo = std::min(lo, inputs[0].data<float>()[i]);
      hi = std::max(hi, inputs[0].data<float>()[i]);
    }
    x_scale = (hi - lo) / 255.0f;
  }
  const double k = 288, s_c = k * 255 * 255;
  // The accumulation bound, the Cast's and the two Muls' roundings (a few
  // ulps of the largest possible value), in output units.
  const double bound = (std::ldexp((k - 1) * s_c, -24) + std::ldexp(4 * s_c, -24)) *
                       x_scale * 0.01;
  interp::CompareResult c =
      interp::CompareTensors((*got)[0], (*want)[0], interp::Tolerance{0, bound, {}});
  EXPECT_TRUE(c.ok) << c.message << "\n" << r.ToText();
}

TEST(CompiledModel, AutoPrecisionIsBf16OnlyWhereOneDnnRunsItFasterThanF32) {
  // bf16_test_avx2 runs this with DNNL_MAX_CPU_ISA=AVX2, bf16_test_avx512_core
  // with AVX512_CORE: f32 even on an AMX CPU. Without a cap, bf16 exactly
  // where the CPU has AMX-BF16: with AVX512-BF16 alone oneDNN's bf16 kernels
  // are slower than its f32 ones, and auto stays f32 (docs/decisions/0059).
  CompileOptions o = Options();
  o.precision = CompileOptions::Precision::kAuto;
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(o).CompileGraph(Parse(kConvBlock));
  ASSERT_TRUE(model.ok()) << model.status();
  const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
  const bool capped_below_amx =
      cap != nullptr && (std::string(cap) == "AVX2" || std::string(cap) == "AVX512_CORE" ||
                         std::string(cap) == "AVX512_CORE_BF16");
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string info((std::istreambuf_iterator<char>(cpuinfo)),
                         std::istreambuf_iterator<char>());
  const bool cpu_amx_bf16 = info.find("amx_bf16") != std::string::npos;
  EXPECT_EQ((*model)->report().precision, cpu_amx_bf16 && !capped_below_amx ? "bf16" : "f32")
      << "DNNL_MAX_CPU_ISA=" << (cap ? cap : "(unset)");
  // f32 (the default) never computes in bf16.
  absl::StatusOr<std::unique_ptr<CompiledModel>> f32 =
      Compiler(Options()).CompileGraph(Parse(kConvBlock));
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ((*f32)->report().precision, "f32");
  for (const KernelReport& k : (*f32)->report().kernels) EXPECT_EQ(k.precision, "f32");
}

TEST(CompiledModel, RunIsSafeFromManyThreads) {
  ir::Graph g = Parse(kPointwiseAndReductions);
  std::vector<std::vector<ir::Tensor>> inputs, want;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back({Random({3, 17}, 100 + i), Random({17}, 200 + i)});
    absl::StatusOr<std::vector<ir::Tensor>> w = interp::Run(g, inputs.back());
    ASSERT_TRUE(w.ok()) << w.status();
    want.push_back(*std::move(w));
  }
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(Options()).CompileGraph(g);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 50; ++rep) {
        absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs[t]);
        if (!got.ok()) {
          ++mismatches[t];
          continue;
        }
        for (size_t o = 0; o < got->size(); ++o) {
          if (!interp::CompareTensors((*got)[o], want[t][o], {1e-4, 1e-5, {}}).ok) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(CompiledModel, NamedInputsAndCallerOwnedOutputs) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kPointwiseAndReductions));
  ASSERT_TRUE(model.ok()) << model.status();
  const ir::Tensor x = Random({3, 17}, 7), b = Random({17}, 8);
  absl::StatusOr<std::vector<ir::Tensor>> positional = (*model)->Run(std::vector<ir::Tensor>{x, b});
  ASSERT_TRUE(positional.ok()) << positional.status();
  absl::StatusOr<std::vector<ir::Tensor>> named = (*model)->RunNamed({{"b", b}, {"x", x}});
  ASSERT_TRUE(named.ok()) << named.status();
  ir::Tensor y(ir::DType::kF32, {17, 3}), s(ir::DType::kF32, {3});
  ASSERT_TRUE((*model)->RunInto({x, b}, {&y, &s}).ok());
  for (size_t o = 0; o < 2; ++o) {
    EXPECT_TRUE(interp::CompareTensors((*named)[o], (*positional)[o], {0, 0, {}}).ok);
  }
  EXPECT_TRUE(interp::CompareTensors(y, (*positional)[0], {0, 0, {}}).ok);
  EXPECT_TRUE(interp::CompareTensors(s, (*positional)[1], {0, 0, {}}).ok);
  ASSERT_EQ((*model)->inputs().size(), 2u);
  EXPECT_EQ((*model)->inputs()[0].name, "x");
  EXPECT_EQ((*model)->outputs()[1].shape, (ir::Shape{3}));
}

TEST(CompiledModel, CompileBytesMatchesCompileFileAndRunsOnBorrowedInputs) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  const std::string path = absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kiln",
                                        "/models/tiny_cnn/model.onnx");
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Compiler compiler(Options());
  absl::StatusOr<std::unique_ptr<CompiledModel>> from_file = compiler.CompileFile(path);
  absl::StatusOr<std::unique_ptr<CompiledModel>> from_bytes =
      compiler.CompileBytes(bytes, "tiny_cnn bytes");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status();
  EXPECT_EQ((*from_bytes)->report().model, "tiny_cnn bytes");
  ASSERT_EQ((*from_bytes)->inputs().size(), 1u);
  const ir::Tensor x = Random((*from_bytes)->inputs()[0].shape, 11);
  // The same bytes as a caller's buffer at an address that is not 64-byte
  // aligned, borrowed rather than copied.
  std::vector<float> storage(x.num_elements() + 1);
  std::copy_n(x.data<float>(), x.num_elements(), storage.data() + 1);
  const ir::Tensor borrowed = ir::Tensor::Borrow(x.dtype(), x.shape(), storage.data() + 1);
  absl::StatusOr<std::vector<ir::Tensor>> a = (*from_file)->Run(std::vector<ir::Tensor>{x});
  absl::StatusOr<std::vector<ir::Tensor>> b =
      (*from_bytes)->Run(std::vector<ir::Tensor>{borrowed});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(interp::CompareTensors((*b)[0], (*a)[0], {0, 0, {}}).ok);
  EXPECT_TRUE(std::equal(storage.begin() + 1, storage.end(), x.data<float>()));

  absl::Status bad = compiler.CompileBytes("not a model", "junk").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_THAT(std::string(bad.message()), ::testing::HasSubstr("junk")) << bad;
}

TEST(CompiledModel, BadInputsAreClearErrors) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kPointwiseAndReductions));
  ASSERT_TRUE(model.ok()) << model.status();
  const ir::Tensor x = Random({3, 17}, 7), b = Random({17}, 8);
  auto message = [](const absl::Status& s) { return std::string(s.message()); };

  absl::Status s = (*model)->Run(std::vector<ir::Tensor>{x}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(message(s).find("takes 2 inputs, got 1"), std::string::npos) << s;

  s = (*model)->Run(std::vector<ir::Tensor>{x, Random({16}, 1)}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(message(s).find("'b'"), std::string::npos) << s;

  s = (*model)->Run({x, ir::Tensor(ir::DType::kI64, {17})}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  s = (*model)->RunNamed(std::map<std::string, ir::Tensor>{{"x", x}}).status();
  EXPECT_NE(message(s).find("missing input 'b'"), std::string::npos) << s;
  s = (*model)->RunNamed(std::map<std::string, ir::Tensor>{{"x", x}, {"b", b}, {"z", b}}).status();
  EXPECT_NE(message(s).find("no input named 'z'"), std::string::npos) << s;

  ir::Tensor wrong(ir::DType::kF32, {3, 17});
  ir::Tensor s_out(ir::DType::kF32, {3});
  s = (*model)->RunInto({x, b}, {&wrong, &s_out});
  EXPECT_NE(message(s).find("output 0 'y'"), std::string::npos) << s;
}

TEST(CompiledModel, IntegerDivisionByZeroNamesTheKernel) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(Options()).CompileGraph(Parse(R"(
graph g(%a: i32[4], %b: i32[4]) -> (%c) opset 13 {
  %c = Div(%a, %b) name="divide" : i32[4]
}
)"));
  ASSERT_TRUE(model.ok()) << model.status();
  ir::Tensor a = ir::Tensor::FromVector<int32_t>({4}, {8, 9, 10, 11});
  ir::Tensor b = ir::Tensor::FromVector<int32_t>({4}, {2, 3, 0, 1});
  absl::Status s = (*model)->Run(std::vector<ir::Tensor>{a, b}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("divide"), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("division"), std::string::npos) << s;
  b = ir::Tensor::FromVector<int32_t>({4}, {2, 3, 5, 1});
  absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(std::vector<ir::Tensor>{a, b});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].data<int32_t>()[2], 2);
}

TEST(CompiledModel, RefusesBadOptions) {
  CompileOptions o = Options();
  o.isa = "neon";
  EXPECT_FALSE(Compiler(o).CompileGraph(Parse(kPointwiseAndReductions)).ok());
  o = Options();
  o.isa = "mmx";
  EXPECT_EQ(Compiler(o).CompileGraph(Parse(kPointwiseAndReductions)).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options();
  o.disabled_passes = {"no-such-pass"};
  absl::Status s = Compiler(o).CompileGraph(Parse(kPointwiseAndReductions)).status();
  EXPECT_NE(std::string(s.message()).find("no-such-pass"), std::string::npos) << s;
  o = Options();
  o.threads = -1;
  EXPECT_EQ(Compiler(o).CompileGraph(Parse(kPointwiseAndReductions)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseMode("fast").ok());
  EXPECT_EQ(*ParseMode("eager"), CompileOptions::Mode::kEager);
}

// --deterministic (decision 0050): a conv (a direct jit kernel, parallel),
// a MatMul of two activations and one with constant weights whose long
// reductions oneDNN's gemm splits between threads, a long ReduceSum and a
// Softmax. Bit-identical at 1 and 2 threads and run to run; the gemm-based
// calls say in the report that they run on one thread.
constexpr char kDeterminism[] = R"(
graph g(%x: f32[1,8,16,16], %a: f32[4,16384], %b: f32[16384,16], %v: f32[1,16384], %r: f32[3,20000]) -> (%y, %m, %n, %s, %p) opset 13 {
  %w = constant f32[8,8,3,3] <elided>
  %bias = constant f32[8] <elided>
  %y = Conv(%x, %w, %bias) {pads=[1,1,1,1]} name="conv" : f32[1,8,16,16]
  %m = MatMul(%a, %b) name="mm_act" : f32[4,16]
  %wv = constant f32[16384,8] <elided>
  %n = MatMul(%v, %wv) name="mm_const" : f32[1,8]
  %s = ReduceSum(%r) {keepdims=0} name="sum" : f32[]
  %p = Softmax(%r) {axis=1} name="sm" : f32[3,20000]
}
)";

TEST(CompiledModel, DeterministicIsBitIdenticalAtOneAndTwoThreads) {
  const std::vector<ir::Tensor> inputs = {Random({1, 8, 16, 16}, 1), Random({4, 16384}, 2),
                                          Random({16384, 16}, 3), Random({1, 16384}, 4),
                                          Random({3, 20000}, 5)};
  auto run = [&](int threads, bool deterministic) {
    CompileOptions o = Options();
    o.threads = threads;
    o.deterministic = deterministic;
    absl::StatusOr<std::unique_ptr<CompiledModel>> model =
        Compiler(o).CompileGraph(Parse(kDeterminism));
    EXPECT_TRUE(model.ok()) << model.status();
    std::vector<std::vector<ir::Tensor>> outs;
    if (!model.ok()) return outs;
    for (int rep = 0; rep < 2; ++rep) {
      absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs);
      EXPECT_TRUE(got.ok()) << got.status();
      if (got.ok()) outs.push_back(*std::move(got));
    }
    if (deterministic) {
      int one_thread = 0;
      for (const KernelReport& k : (*model)->report().kernels) {
        const bool gemm = absl::StrContains(k.reason, "gemm");
        const bool one = absl::StrContains(k.reason, "one thread (deterministic");
        // gemm-based calls run on one thread; a direct jit conv measured
        // thread-count invariant (AVX2, SSE4.1) keeps its threads.
        if (gemm) EXPECT_TRUE(one) << k.name << ": " << k.reason;
        if (absl::StrContains(k.reason, "oneDNN jit:avx2") ||
            absl::StrContains(k.reason, "oneDNN jit:sse41")) {
          EXPECT_FALSE(one) << k.name << ": " << k.reason;
        }
        one_thread += one;
      }
      EXPECT_GE(one_thread, 1) << (*model)->report().ToText();
    }
    return outs;
  };
  auto same_bits = [](const std::vector<ir::Tensor>& a, const std::vector<ir::Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t o = 0; o < a.size(); ++o) {
      if (a[o].byte_size() != b[o].byte_size() ||
          std::memcmp(a[o].raw_data(), b[o].raw_data(), a[o].byte_size()) != 0) {
        return false;
      }
    }
    return true;
  };
  const auto one = run(1, true), two = run(2, true);
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_TRUE(same_bits(one[0], one[1])) << "run to run, 1 thread";
  EXPECT_TRUE(same_bits(two[0], two[1])) << "run to run, 2 threads";
  EXPECT_TRUE(same_bits(one[0], two[0])) << "1 vs 2 threads";
  // And right: against the reference interpreter.
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(Parse(kDeterminism), inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  for (size_t o = 0; o < want->size(); ++o) {
    interp::CompareResult r = interp::CompareTensors(two[0][o], (*want)[o], {1e-4, 1e-5, {}});
    EXPECT_TRUE(r.ok) << "output " << o << ": " << r.message;
  }
  // Without the option the gemm-based calls use both threads; whether
  // their bits differ is oneDNN's business (they do on oneDNN 2.6 AVX2).
  const auto free1 = run(1, false), free2 = run(2, false);
  if (free1.size() == 2 && free2.size() == 2) {
    std::printf("without deterministic, 1 vs 2 threads: %s\n",
                same_bits(free1[0], free2[0]) ? "bit-identical" : "differ");
  }
}

// Subnormal floats (decision 0067): by default a run flushes them to 0 on
// every thread that computes (a loop kernel split over two threads, a
// oneDNN matmul), leaves normal results alone, and puts the caller's
// floating-point mode back; `keep` gives IEEE 754's subnormals, as the
// reference interpreter does.
TEST(CompiledModel, DenormalsAreFlushedUnlessKept) {
  constexpr char kText[] = R"(
graph g(%a: f32[64,1024], %b: f32[64,1024], %p: f32[8,64], %q: f32[64,64]) -> (%y, %z) opset 13 {
  %y = Mul(%a, %b) name="mul" : f32[64,1024]
  %z = MatMul(%p, %q) name="mm" : f32[8,64]
}
)";
  // Odd elements / rows: 1e-20 * 1e-20 = 1e-40, subnormal (below 2^-126);
  // even ones: 2 * 1e-20, normal.
  std::vector<float> a(64 * 1024), b(64 * 1024, 1e-20f), p(8 * 64), q(64 * 64, 1e-20f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = i % 2 ? 1e-20f : 2.0f;
  for (size_t i = 0; i < p.size(); ++i) p[i] = (i / 64) % 2 ? 1e-20f : 2.0f;
  const std::vector<ir::Tensor> inputs = {
      ir::Tensor::FromVector<float>({64, 1024}, a), ir::Tensor::FromVector<float>({64, 1024}, b),
      ir::Tensor::FromVector<float>({8, 64}, p), ir::Tensor::FromVector<float>({64, 64}, q)};
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(Parse(kText), inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(std::fpclassify((*want)[0].data<float>()[1]), FP_SUBNORMAL);
  ASSERT_EQ(std::fpclassify((*want)[1].data<float>()[64]), FP_SUBNORMAL);
  for (CompileOptions::Denormals mode :
       {CompileOptions::Denormals::kFlush, CompileOptions::Denormals::kKeep}) {
    SCOPED_TRACE(DenormalsName(mode));
    CompileOptions o = Options();
    o.threads = 2;
    o.denormals = mode;
    absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(o).CompileGraph(Parse(kText));
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(inputs);
    ASSERT_TRUE(got.ok()) << got.status();
    const bool flush = mode == CompileOptions::Denormals::kFlush;
    const float* y = (*got)[0].data<float>();
    const float* y_ref = (*want)[0].data<float>();
    int64_t wrong = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      wrong += y[i] != (flush && i % 2 ? 0.0f : y_ref[i]);
    }
    EXPECT_EQ(wrong, 0) << "of " << a.size() << " products";
    const float* z = (*got)[1].data<float>();
    const float* z_ref = (*want)[1].data<float>();
    for (int r = 0; r < 8; ++r) {
      for (int c = 0; c < 64; ++c) {
        const float v = z[r * 64 + c], ref = z_ref[r * 64 + c];
        if (r % 2 == 0) {
          EXPECT_NEAR(v, ref, 1e-5f * std::abs(ref)) << r << "," << c;
        } else if (flush) {
          EXPECT_EQ(v, 0.0f) << r << "," << c;
        } else {
          EXPECT_EQ(std::fpclassify(v), FP_SUBNORMAL) << r << "," << c << ": " << v;
        }
      }
    }
    // The caller's thread computes subnormals again after the run.
    volatile float tiny = 1e-20f;
    EXPECT_NE(tiny * tiny, 0.0f);
  }
}

TEST(CompiledModel, DeterministicRefusesTimedCallTuning) {
  CompileOptions o = Options();
  o.deterministic = true;
  for (CompileOptions::CallTuning t :
       {CompileOptions::CallTuning::kOn, CompileOptions::CallTuning::kCached}) {
    o.call_tuning = t;
    absl::Status s = Compiler(o).CompileGraph(Parse(kPointwiseAndReductions)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("deterministic")) << s;
  }
}

TEST(CompiledModel, ReportDescribesEveryKernel) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kConvBlock));
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  nlohmann::json j = nlohmann::json::parse(r.ToJson());
  ASSERT_TRUE(j["kernels"].is_array());
  EXPECT_EQ(j["kernels"].size(), r.kernels.size());
  int loops = 0, externs = 0;
  for (const auto& k : j["kernels"]) {
    EXPECT_TRUE(k["name"].is_string());
    EXPECT_TRUE(k["ops"].is_array());
    EXPECT_FALSE(k["ops"].empty());
    EXPECT_TRUE(k["vectorized"].is_boolean());
    EXPECT_TRUE(k["reason"].is_string());
    if (k["backend"] == "loop") ++loops; else ++externs;
  }
  // conv (+relu fused), matmul: two library calls; pool and softmax loops.
  EXPECT_EQ(externs, 2) << r.ToText();
  EXPECT_GE(loops, 2) << r.ToText();
  EXPECT_EQ(j["extern_calls"].size(), 2u);
  EXPECT_EQ(j["loop_kernels"], loops);
  EXPECT_GT(r.arena_bytes, 0);
  EXPECT_LE(r.arena_bytes, r.intermediate_bytes);
  EXPECT_NE(r.ToText().find("loop kernels"), std::string::npos);
}

// Recurrent ops run as oneDNN RNN primitives (backends/onednn/rnn_kernel.h);
// a form oneDNN would compute differently (clip) stays on the reference.
constexpr char kRecurrent[] = R"(
graph main(%x: f32[6,3,4], %h0: f32[2,3,5]) -> (%y, %yh, %yc, %gy, %ry) opset 17 {
  %w = constant f32[2,20,4] <elided>
  %r = constant f32[2,20,5] <elided>
  %b = constant f32[2,40] <elided>
  %p = constant f32[2,15] <elided>
  %y, %yh, %yc = LSTM(%x, %w, %r, %b, _, %h0, _, %p) {direction="bidirectional", hidden_size=5} : f32[6,2,3,5], f32[2,3,5], f32[2,3,5]
  %gw = constant f32[1,15,4] <elided>
  %gr = constant f32[1,15,5] <elided>
  %gb = constant f32[1,30] <elided>
  %gy = GRU(%x, %gw, %gr, %gb) {direction="reverse", hidden_size=5, linear_before_reset=1} : f32[6,1,3,5]
  %rw = constant f32[1,7,4] <elided>
  %rr = constant f32[1,7,7] <elided>
  %ry = RNN(%x, %rw, %rr) {hidden_size=7, clip=2.0} : f32[6,1,3,7]
}
)";

TEST(CompiledModel, RecurrentOpsRunOnOneDnn) {
  ExpectMatchesReference(kRecurrent, {Random({6, 3, 4}, 1), Random({2, 3, 5}, 2)});
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kRecurrent));
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  nlohmann::json j = nlohmann::json::parse(r.ToJson());
  EXPECT_EQ(j["reference_calls"], 1) << r.ToText();
  int lstm = 0, gru = 0, rnn = 0;
  for (const auto& x : j["extern_calls"]) {
    const std::string op = x["op"];
    if (absl::StartsWith(op, "lstm[") || absl::StartsWith(op, "gru[")) {
      (op[0] == 'l' ? lstm : gru)++;
      EXPECT_EQ(x["backend"], "onednn") << op;
      EXPECT_FALSE(x["weight_layout"].get<std::string>().empty()) << op;
      EXPECT_GT(x["prepacked_bytes"].get<int64_t>(), 0) << op;
    } else if (op == "onnx.RNN") {
      ++rnn;
      EXPECT_EQ(x["backend"], "reference");
      EXPECT_TRUE(absl::StrContains(x["reason"].get<std::string>(), "clip")) << x["reason"];
    }
  }
  EXPECT_EQ(lstm, 1) << r.ToText();
  EXPECT_EQ(gru, 1) << r.ToText();
  EXPECT_EQ(rnn, 1) << r.ToText();
}

TEST(CompiledModel, DumpDirGetsIrAndSources) {
  CompileOptions o = Options();
  o.dump_dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
               "/kiln_dump";
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(o).CompileGraph(Parse(kPointwiseAndReductions));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(std::filesystem::exists(o.dump_dir + "/loop/00-input.txt"));
  EXPECT_TRUE(std::filesystem::exists(o.dump_dir + "/graph"));
  EXPECT_TRUE(std::filesystem::exists(o.dump_dir + "/cpp"));
  EXPECT_FALSE(std::filesystem::is_empty(o.dump_dir + "/cpp"));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CompiledModel, ProfileTimesEveryKernelAndMatchesRun) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kPointwiseAndReductions));
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<ir::Tensor> in = {Random({3, 17}, 9), Random({17}, 10)};
  std::vector<CompiledModel::KernelTiming> timings;
  absl::StatusOr<std::vector<ir::Tensor>> profiled = (*model)->Profile(in, &timings);
  ASSERT_TRUE(profiled.ok()) << profiled.status();
  absl::StatusOr<std::vector<ir::Tensor>> plain = (*model)->Run(in);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(timings.size(), (*model)->report().kernels.size());
  double last_start = -1;
  for (size_t k = 0; k < timings.size(); ++k) {
    EXPECT_EQ(timings[k].kernel, static_cast<int>(k));
    EXPECT_GE(timings[k].duration_us, 0);
    EXPECT_GE(timings[k].start_us, last_start);
    last_start = timings[k].start_us;
  }
  for (size_t o = 0; o < plain->size(); ++o) {
    EXPECT_TRUE(interp::CompareTensors((*profiled)[o], (*plain)[o], {0, 0, {}}).ok);
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CompiledModel, BatchCompileBuildsEachGraphAndIsolatesFailures) {
  std::vector<ir::Graph> graphs;
  graphs.push_back(Parse(kPointwiseAndReductions));
  graphs.push_back(Parse(R"(
graph h(%a: f32[5]) -> (%b) opset 13 {
  %b = Sigmoid(%a) name="sig" : f32[5]
}
)"));
  // Not static-shape: refused by lowering, alone.
  graphs.push_back(Parse(R"(
graph bad(%a: f32[?]) -> (%b) opset 13 {
  %b = Exp(%a) name="e" : f32[?]
}
)"));
  const std::vector<std::vector<ir::Tensor>> inputs = {
      {Random({3, 17}, 21), Random({17}, 22)}, {Random({5}, 23)}};
  std::vector<std::vector<ir::Tensor>> want;
  for (int g = 0; g < 2; ++g) {
    absl::StatusOr<std::vector<ir::Tensor>> w = interp::Run(graphs[g], inputs[g]);
    ASSERT_TRUE(w.ok()) << w.status();
    want.push_back(*std::move(w));
  }
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> models =
      Compiler(Options()).CompileGraphs(std::move(graphs));
  ASSERT_EQ(models.size(), 3u);
  EXPECT_FALSE(models[2].ok());
  for (int g = 0; g < 2; ++g) {
    ASSERT_TRUE(models[g].ok()) << models[g].status();
    absl::StatusOr<std::vector<ir::Tensor>> got = (*models[g])->Run(inputs[g]);
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t o = 0; o < got->size(); ++o) {
      EXPECT_TRUE(interp::CompareTensors((*got)[o], want[g][o], {1e-4, 1e-5, {}}).ok)
          << "graph " << g << " output " << o;
    }
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// GELU in the Erf form exporters emit, after a bias add, then a residual.
constexpr char kBiasGelu[] = R"(
graph g(%x: f32[4,33], %b: f32[33]) -> (%y) opset 13 {
  %sqrt2 = constant f32[] 1.4142135
  %one = constant f32[] 1.0
  %half = constant f32[] 0.5
  %a = Add(%x, %b) name="bias" : f32[4,33]
  %d = Div(%a, %sqrt2) name="div" : f32[4,33]
  %e = Erf(%d) name="erf" : f32[4,33]
  %p = Add(%e, %one) name="plus1" : f32[4,33]
  %m = Mul(%a, %p) name="mul" : f32[4,33]
  %g = Mul(%m, %half) name="half" : f32[4,33]
  %y = Add(%g, %x) name="residual" : f32[4,33]
}
)";

TEST(CompiledModel, LoopFusionMakesOneKernelWhereEagerRunsOnePerOp) {
  const std::vector<ir::Tensor> in = {Random({4, 33}, 31), Random({33}, 32)};
  ExpectMatchesReference(kBiasGelu, in);
  CompileOptions eager = Options();
  eager.mode = CompileOptions::Mode::kEager;
  ExpectMatchesReference(kBiasGelu, in, eager);
  absl::StatusOr<std::unique_ptr<CompiledModel>> fused =
      Compiler(Options()).CompileGraph(Parse(kBiasGelu));
  absl::StatusOr<std::unique_ptr<CompiledModel>> unfused =
      Compiler(eager).CompileGraph(Parse(kBiasGelu));
  ASSERT_TRUE(fused.ok() && unfused.ok());
  EXPECT_EQ((*fused)->report().loop_kernels, 1) << (*fused)->report().ToText();
  EXPECT_EQ((*unfused)->report().loop_kernels, 7) << (*unfused)->report().ToText();
  EXPECT_EQ((*fused)->report().kernels[0].ops.size(), 7u);
  EXPECT_EQ((*fused)->report().arena_bytes, 0);
  EXPECT_GT((*unfused)->report().arena_bytes, 0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CompiledModel, OutOfRangeGatherIndexIsAnErrorNotARead) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(Options()).CompileGraph(Parse(R"(
graph g(%x: f32[5,3], %i: i64[4]) -> (%y) opset 13 {
  %y = Gather(%x, %i) {axis=0} name="pick" : f32[4,3]
}
)"));
  ASSERT_TRUE(model.ok()) << model.status();
  const ir::Tensor x = Random({5, 3}, 41);
  ir::Tensor ok_idx = ir::Tensor::FromVector<int64_t>({4}, {0, 4, -1, -5});
  absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(std::vector<ir::Tensor>{x, ok_idx});
  ASSERT_TRUE(got.ok()) << got.status();
  // Rows 0, 4, 4 (= -1 + 5), 0 (= -5 + 5).
  const int rows[] = {0, 4, 4, 0};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ((*got)[0].data<float>()[r * 3 + c], x.data<float>()[rows[r] * 3 + c]);
    }
  }
  for (int64_t bad : {5, -6, 1000}) {
    ir::Tensor idx = ir::Tensor::FromVector<int64_t>({4}, {0, 1, bad, 2});
    absl::Status s = (*model)->Run(std::vector<ir::Tensor>{x, idx}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(s.message()).find("out of range"), std::string::npos) << s;
    EXPECT_NE(std::string(s.message()).find("pick"), std::string::npos) << s;
  }
}

// A Gather along the last axis reads one index per output column: the
// column loop is the vector variable, so the load_indirect (and the index
// load feeding it) is computed lane by lane, which the report lists per op;
// a Relu on another input has no such op.
constexpr char kColumnGather[] = R"(
graph g(%x: f32[4,37], %i: i64[16], %z: f32[8,24]) -> (%y, %r) opset 13 {
  %y = Gather(%x, %i) {axis=1} name="cols" : f32[4,16]
  %r = Relu(%z) name="relu" : f32[8,24]
}
)";

TEST(CompiledModel, ReportListsOpsWithoutVectorForm) {
  std::vector<int64_t> idx;
  for (int c = 0; c < 16; ++c) idx.push_back((c * 7) % 37 - (c % 3 == 0 ? 37 : 0));
  ExpectMatchesReference(kColumnGather, {Random({4, 37}, 5), ir::Tensor::FromVector<int64_t>({16}, idx),
                                         Random({8, 24}, 6)});
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kColumnGather));
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  nlohmann::json j = nlohmann::json::parse(r.ToJson());
  int gathers = 0, relus = 0;
  for (const auto& k : j["kernels"]) {
    ASSERT_EQ(k["backend"], "loop") << k.dump();
    ASSERT_TRUE(k["unvectorized_ops"].is_array()) << k.dump();
    const std::vector<std::string> ops = k["ops"];
    if (ops == std::vector<std::string>{"cols"}) {
      ++gathers;
      EXPECT_TRUE(k["vectorized"].get<bool>()) << k.dump();
      bool per_lane_gather = false;
      for (const auto& n : k["unvectorized_ops"]) {
        EXPECT_EQ(n["decision"], "per-lane") << n.dump();
        EXPECT_TRUE(n["op"].is_number_integer()) << n.dump();
        if (n["opcode"] == "load_indirect") {
          per_lane_gather = true;
          EXPECT_TRUE(absl::StrContains(n["reason"].get<std::string>(), "data-dependent index"))
              << n.dump();
        }
      }
      EXPECT_TRUE(per_lane_gather) << k.dump();
    } else if (ops == std::vector<std::string>{"relu"}) {
      ++relus;
      EXPECT_TRUE(k["vectorized"].get<bool>()) << k.dump();
      EXPECT_TRUE(k["unvectorized_ops"].empty()) << k.dump();
    }
  }
  EXPECT_EQ(gathers, 1) << r.ToText();
  EXPECT_EQ(relus, 1) << r.ToText();
}

// ---- Reference fallback calls and outputs of data-dependent shape.

// Det has no lowering; the If's branches capture values loop kernels
// compute. Both run on the reference between compiled kernels.
constexpr char kFallbackBetweenKernels[] = R"(
graph g(%x: f32[2,3,3], %c: bool[]) -> (%y, %z) opset 13 {
  %r = Relu(%x) name="relu" : f32[2,3,3]
  %t = Transpose(%r) {perm=[0, 2, 1]} name="tr" : f32[2,3,3]
  %d = Det(%t) name="det" : f32[2]
  %e = Exp(%d) name="exp" : f32[2]
  %w = constant f32[2] <elided>
  %i = If(%c) {
    then_branch=graph t() captures(%p: f32[2] = %e, %q: f32[2] = %w) -> (%o) {
      %o = Add(%p, %q) : f32[2]
    },
    else_branch=graph f() captures(%p: f32[2] = %d) -> (%o) {
      %o = Neg(%p) : f32[2]
    }
  } name="if" : f32[2]
  %y = Mul(%i, %e) name="mul" : f32[2]
  %z = Sigmoid(%x) name="sig" : f32[2,3,3]
}
)";

ir::Tensor Bool(bool v) {
  ir::Tensor t(ir::DType::kBool, {});
  t.data<bool>()[0] = v;
  return t;
}

TEST(CompiledModel, NodesWithoutLoweringRunOnTheReferenceAmongKernels) {
  for (bool cond : {true, false}) {
    ExpectMatchesReference(kFallbackBetweenKernels, {Random({2, 3, 3}, 40), Bool(cond)});
  }
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kFallbackBetweenKernels));
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  // Det runs on the reference; the If runs its branches as compiled code.
  EXPECT_EQ(r.fallback_calls, 1);
  EXPECT_EQ(r.reference_calls, 1);
  EXPECT_GE(r.loop_kernels, 2);
  std::vector<std::string> calls;
  for (const KernelReport& k : r.kernels) {
    if (k.backend == "reference") {
      calls.push_back(k.call);
      EXPECT_EQ(k.status, "library");
      EXPECT_EQ(k.reason, "node 'det' (Det): no lowering for op Det");
      EXPECT_EQ(k.ops, std::vector<std::string>{"det"});
    }
    if (k.backend == "compiled") {
      EXPECT_EQ(k.call, "If");
      EXPECT_EQ(k.reason,
                "then: 1 loop kernels (1 vectorized), 0 library calls (0 reference); "
                "else: 1 loop kernels (1 vectorized), 0 library calls (0 reference)");
    }
  }
  EXPECT_EQ(calls, (std::vector<std::string>{"kiln.Reference(Det)"}));
  EXPECT_TRUE(absl::StrContains(r.ToText(), "-- node 'det' (Det): no lowering for op Det"));
  const nlohmann::json j = nlohmann::json::parse(r.ToJson());
  EXPECT_EQ(j["fallback_calls"], 1);
  EXPECT_EQ(j["reference_calls"], 1);
}

// An If on data whose then branch holds another If on data; the branches
// read outer values (a graph input, a loop kernel's result, a constant).
constexpr char kNestedIfs[] = R"(
graph g(%x: f32[4,8], %a: bool[], %b: bool[]) -> (%y, %s) opset 13 {
  %r = Relu(%x) name="relu" : f32[4,8]
  %w = constant f32[8] <elided>
  %i = If(%a) {
    then_branch=graph t() captures(%r: f32[4,8] = %r, %b: bool[] = %b, %w: f32[8] = %w) -> (%o) {
      %m = Mul(%r, %w) : f32[4,8]
      %o = If(%b) {
        then_branch=graph tt() captures(%m: f32[4,8] = %m) -> (%q) {
          %q = Sigmoid(%m) : f32[4,8]
        },
        else_branch=graph tf() captures(%r: f32[4,8] = %r) -> (%q2) {
          %q2 = Tanh(%r) : f32[4,8]
        }
      } : f32[4,8]
    },
    else_branch=graph f() captures(%x: f32[4,8] = %x) -> (%o2) {
      %o2 = Neg(%x) : f32[4,8]
    }
  } name="if" : f32[4,8]
  %y = Add(%i, %x) name="add" : f32[4,8]
  %s = ReduceSum(%i) {keepdims=0} name="sum" : f32[]
}
)";

TEST(CompiledModel, IfsOnDataRunCompiledBranches) {
  for (bool a : {true, false}) {
    for (bool b : {true, false}) {
      ExpectMatchesReference(kNestedIfs, {Random({4, 8}, 41), Bool(a), Bool(b)});
    }
  }
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kNestedIfs));
  ASSERT_TRUE(model.ok()) << model.status();
  const CompileReport& r = (*model)->report();
  EXPECT_EQ(r.reference_calls, 0) << r.ToText();
  int compiled = 0;
  for (const KernelReport& k : r.kernels) compiled += k.backend == "compiled";
  EXPECT_EQ(compiled, 1) << r.ToText();
  // One model, run again and again with changing conditions.
  const ir::Graph g = Parse(kNestedIfs);
  for (int round = 0; round < 3; ++round) {
    for (bool a : {false, true}) {
      const std::vector<ir::Tensor> in = {Random({4, 8}, 50 + round), Bool(a), Bool(round % 2)};
      absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, in);
      absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(in);
      ASSERT_TRUE(want.ok() && got.ok());
      for (size_t o = 0; o < got->size(); ++o) {
        interp::CompareResult c = interp::CompareTensors((*got)[o], (*want)[o]);
        EXPECT_TRUE(c.ok) << "output " << o << ": " << c.message;
      }
    }
  }
}

// Branches of different shapes: the If's output has a data-dependent shape.
constexpr char kIfOfTwoShapes[] = R"(
graph g(%x: f32[2,3], %c: bool[]) -> (%i, %n) opset 13 {
  %e = Exp(%x) name="exp" : f32[2,3]
  %i = If(%c) {
    then_branch=graph t() captures(%e: f32[2,3] = %e) -> (%a) {
      %a = Relu(%e) : f32[2,3]
    },
    else_branch=graph f() captures(%x: f32[2,3] = %x) -> (%b) {
      %b = ReduceMax(%x) {axes=[1], keepdims=1} : f32[2,1]
    }
  } name="if" : f32[2,?]
  %n = Neg(%x) name="neg" : f32[2,3]
}
)";

TEST(CompiledModel, IfWithBranchesOfDifferentShapesRunsCompiled) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(Parse(kIfOfTwoShapes));
  ASSERT_TRUE(model.ok()) << model.status();
  int compiled = 0;
  for (const KernelReport& k : (*model)->report().kernels) compiled += k.backend == "compiled";
  EXPECT_EQ(compiled, 1) << (*model)->report().ToText();
  const ir::Graph g = Parse(kIfOfTwoShapes);
  std::vector<ir::Tensor> outs = NewOutputTensors(**model);
  std::vector<ir::Tensor*> ptrs;
  for (ir::Tensor& t : outs) ptrs.push_back(&t);
  for (bool c : {true, false, false, true}) {
    const std::vector<ir::Tensor> in = {Random({2, 3}, 60), Bool(c)};
    absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, in);
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(in);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE((*model)->RunInto(in, ptrs).ok());
    EXPECT_EQ((*got)[0].shape(), (ir::Shape{2, c ? 3 : 1}));
    for (size_t o = 0; o < got->size(); ++o) {
      EXPECT_TRUE(interp::CompareTensors((*got)[o], (*want)[o]).ok) << "output " << o;
      EXPECT_TRUE(interp::CompareTensors(outs[o], (*want)[o]).ok) << "output " << o;
    }
  }
}

TEST(CompiledModel, WithoutReferenceFallbackNodesWithoutLoweringAreRefused) {
  CompileOptions o = Options();
  o.reference_fallback = false;
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(o).CompileGraph(Parse(kFallbackBetweenKernels));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(model.status().message(), "node 'det' (Det): no lowering for op Det");
}

// NonZero and Unique have outputs whose shape depends on the data; the
// Transpose reading NonZero's result follows it onto the reference.
constexpr char kDataDependent[] = R"(
graph g(%x: f32[2,3]) -> (%n, %t, %u, %s) opset 13 {
  %n = NonZero(%x) name="nz" : i64[2,?]
  %t = Transpose(%n) name="tr" : i64[?,2]
  %u, %idx, %inv, %cnt = Unique(%x) {sorted=1} name="uq" : f32[?], i64[?], i64[6], i64[?]
  %s = Sigmoid(%x) name="sig" : f32[2,3]
}
)";

ir::Tensor Data2x3(std::vector<float> v) {
  ir::Tensor t(ir::DType::kF32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = v[i];
  return t;
}

TEST(CompiledModel, OutputsOfDataDependentShapeComeWithRunTimeShapes) {
  ir::Graph g = Parse(kDataDependent);
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(Options()).CompileGraph(g);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<TensorInfo>& outs = (*model)->outputs();
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(outs[0].shape, (ir::Shape{2, ir::kDynamicDim}));
  EXPECT_EQ(outs[3].shape, (ir::Shape{2, 3}));
  EXPECT_EQ((*model)->report().fallback_calls, 3);
  // Two runs on one context: each gets its own shapes.
  for (const ir::Tensor& x : {Data2x3({0, 1, 0, 2, 2, 0}), Data2x3({1, 1, 3, 1, 0, 1}),
                              Data2x3({0, 0, 0, 0, 0, 0})}) {
    absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, {x});
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run({x});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) {
      EXPECT_EQ((*got)[o].shape(), (*want)[o].shape()) << "output " << o;
      interp::CompareResult c = interp::CompareTensors((*got)[o], (*want)[o]);
      EXPECT_TRUE(c.ok) << "output " << o << ": " << c.message;
    }
  }
}

TEST(CompiledModel, RunIntoTakesOutputsOfDataDependentShape) {
  ir::Graph g = Parse(kDataDependent);
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(Options()).CompileGraph(g);
  ASSERT_TRUE(model.ok()) << model.status();
  const ir::Tensor x = Data2x3({0, 1, 0, 2, 2, 0});  // 3 non-zeros, 3 unique values
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(g, {x});
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ((*want)[0].shape(), (ir::Shape{2, 3}));
  auto expect_want = [&](const std::vector<ir::Tensor>& outs, const std::vector<ir::Tensor>& w) {
    ASSERT_EQ(outs.size(), w.size());
    for (size_t o = 0; o < outs.size(); ++o) {
      EXPECT_EQ(outs[o].shape(), w[o].shape()) << "output " << o;
      interp::CompareResult c = interp::CompareTensors(outs[o], w[o]);
      EXPECT_TRUE(c.ok) << "output " << o << ": " << c.message;
    }
  };

  // Tensors as outputs() describes them (data-dependent dims empty): each
  // takes its run-time shape.
  std::vector<ir::Tensor> outs = NewOutputTensors(**model);
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(outs[0].shape(), (ir::Shape{2, 0}));
  EXPECT_EQ(outs[3].shape(), (ir::Shape{2, 3}));
  std::vector<ir::Tensor*> ptrs;
  for (ir::Tensor& t : outs) ptrs.push_back(&t);
  ASSERT_TRUE((*model)->RunInto({x}, ptrs).ok());
  expect_want(outs, *want);

  // Already of the run-time shape: written in place, no new storage.
  const void* storage = outs[0].raw_data();
  for (int i = 0; i < 6; ++i) outs[0].data<int64_t>()[i] = -7;
  ASSERT_TRUE((*model)->RunInto({x}, ptrs).ok());
  EXPECT_EQ(outs[0].raw_data(), storage);
  expect_want(outs, *want);

  // Another input, other shapes: the same tensors follow.
  const ir::Tensor x2 = Data2x3({5, 0, 0, 0, 0, 0});
  absl::StatusOr<std::vector<ir::Tensor>> want2 = interp::Run(g, {x2});
  ASSERT_TRUE(want2.ok()) << want2.status();
  ASSERT_EQ((*want2)[0].shape(), (ir::Shape{2, 1}));
  ASSERT_TRUE((*model)->RunInto({x2}, ptrs).ok());
  expect_want(outs, *want2);

  // RunNamed and Profile return them with their run-time shapes too.
  absl::StatusOr<std::vector<ir::Tensor>> named = (*model)->RunNamed({{"x", x}});
  ASSERT_TRUE(named.ok()) << named.status();
  expect_want(*named, *want);
  std::vector<CompiledModel::KernelTiming> timings;
  absl::StatusOr<std::vector<ir::Tensor>> profiled = (*model)->Profile({x2}, &timings);
  ASSERT_TRUE(profiled.ok()) << profiled.status();
  expect_want(*profiled, *want2);
  EXPECT_EQ(timings.size(), (*model)->report().kernels.size());

  // The wrong dtype is refused before the run, the tensor untouched.
  ir::Tensor wrong_type(ir::DType::kF32, {2, 3});
  ptrs[0] = &wrong_type;
  absl::Status s = (*model)->RunInto({x}, ptrs);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong_type.shape(), (ir::Shape{2, 3}));
}

TEST(CompiledModel, DataDependentShapeIntoALoopKernelIsRefused) {
  // Without fallback, NonZero's result cannot reach the Cast's loop kernel.
  constexpr char kText[] = R"(
graph g(%x: f32[4]) -> (%y) opset 13 {
  %n = NonZero(%x) name="nz" : i64[1,?]
  %c = Cast(%n) {to=1} name="cast" : f32[1,?]
  %y = ReduceSum(%c) {keepdims=0} name="sum" : f32[]
}
)";
  CompileOptions o = Options();
  o.reference_fallback = false;
  absl::StatusOr<std::unique_ptr<CompiledModel>> model = Compiler(o).CompileGraph(Parse(kText));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(),
            "value 'n' (produced by node 'nz' (NonZero)) has dynamic shape [1,?]; lowering "
            "needs static shapes");
  // With fallback, the only dynamic value a loop kernel could read is a
  // graph input: refused the same way.
  constexpr char kDynamicInput[] = R"(
graph g(%x: f32[?]) -> (%y) opset 13 {
  %y = Relu(%x) name="relu" : f32[?]
}
)";
  model = Compiler(Options()).CompileGraph(Parse(kDynamicInput));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(),
            "value 'x' (a graph input) has dynamic shape [?]; lowering needs static shapes");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Two residual blocks: each block's input is last read by the conv its Add
// fuses into (a sum post-op), so the memory plan gives the residual and the
// conv's output one place (decision 0073) and the call accumulates in place.
TEST(CompiledModel, ResidualSumsAccumulateInPlaceAndMatchTheReference) {
  auto w = [](uint32_t seed) {
    ir::Tensor t = Random({16, 16, 3, 3}, seed);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] *= 0.08f;  // ~1 / sqrt(fan-in)
    return ir::PrintTensor(t, ir::PrintOptions::Full());
  };
  std::string text = "graph g(%x: f32[1,16,8,8]) -> (%y) opset 13 {\n";
  for (int i = 0; i < 6; ++i) {
    absl::StrAppend(&text, "  %w", i, " = constant ", w(60 + i), "\n");
  }
  absl::StrAppend(&text, R"(
  %a = Conv(%x, %w0) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
  %h0 = Relu(%a) : f32[1,16,8,8]
  %c1 = Conv(%h0, %w1) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
  %r1 = Relu(%c1) : f32[1,16,8,8]
  %c2 = Conv(%r1, %w2) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
  %s1 = Add(%c2, %h0) : f32[1,16,8,8]
  %h1 = Relu(%s1) : f32[1,16,8,8]
  %c3 = Conv(%h1, %w3) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
  %r3 = Relu(%c3) : f32[1,16,8,8]
  %c4 = Conv(%r3, %w4) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
  %s2 = Add(%h1, %c4) : f32[1,16,8,8]
  %h2 = Relu(%s2) : f32[1,16,8,8]
  %y = Conv(%h2, %w5) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
}
)");
  // Parsed as written (the test Parse would replace the scaled weights).
  auto parse = [&] {
    absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
    EXPECT_TRUE(g.ok()) << g.status();
    return *std::move(g);
  };
  const std::vector<ir::Tensor> in = {Random({1, 16, 8, 8}, 59)};
  absl::StatusOr<std::vector<ir::Tensor>> want = interp::Run(parse(), in);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int threads : {1, 2}) {
    CompileOptions options = Options();
    options.threads = threads;
    absl::StatusOr<std::unique_ptr<CompiledModel>> model =
        Compiler(options).CompileGraph(parse());
    ASSERT_TRUE(model.ok()) << model.status();
    for (int run = 0; run < 2; ++run) {
      absl::StatusOr<std::vector<ir::Tensor>> got = (*model)->Run(in);
      ASSERT_TRUE(got.ok()) << got.status();
      interp::CompareResult r =
          interp::CompareTensors((*got)[0], (*want)[0], interp::Tolerance{1e-4, 1e-5, {}});
      EXPECT_TRUE(r.ok) << threads << " thread(s), run " << run << ": " << r.message << "\n"
                        << (*model)->report().ToText();
    }
    int sums = 0;
    for (const KernelReport& k : (*model)->report().kernels) {
      sums += std::count(k.post_ops.begin(), k.post_ops.end(), "sum");
    }
    EXPECT_EQ(sums, 2) << (*model)->report().ToText();
  }
}

}  // namespace
}  // namespace kiln
