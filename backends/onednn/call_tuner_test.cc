// The library-call tuner: which convs it measures, that every activation
// form it may choose computes what the reference interpreter does, and that
// its choice is one of the candidates it timed.
#include "backends/onednn/call_tuner.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/substitute.h"
#include "backends/onednn/extern_kernel.h"
#include "backends/onednn/onednn_call.h"
#include "gtest/gtest.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "ir/graph/text.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/module.h"
#include "lowering/lower_graph.h"

namespace kiln::onednn {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

Tensor Random(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::kF32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

std::string C(const Shape& shape, uint32_t seed) {
  return ir::PrintTensor(Random(shape, seed), ir::PrintOptions::Full());
}

// One node: `op`(x, constant w, constant b) with `attrs`.
std::string ConvGraph(const std::string& op, const Shape& x, const Shape& w, int64_t c_out,
                      const Shape& y, const std::string& attrs) {
  return absl::Substitute(R"(
graph main(%x: f32[$0]) -> (%y) opset 17 {
  %w = constant $1
  %b = constant $2
  %y = $3(%x, %w, %b) $4 : f32[$5]
}
)",
                          absl::StrJoin(x, ","), C(w, 2), C({c_out}, 3), op, attrs,
                          absl::StrJoin(y, ","));
}

// A text detector's head: 2x2 stride-2 ConvTranspose to few channels (two:
// a one-element bias would be lowered as a fill kernel, not a constant).
std::string DetectorHead() {
  return ConvGraph("ConvTranspose", {1, 24, 20, 30}, {24, 2, 2, 2}, 2, {1, 2, 40, 60},
                   "{strides=[2, 2]}");
}
// A conv wide enough for the rule: 16 -> 32 channels, 3x3.
std::string WideConv() {
  return ConvGraph("Conv", {1, 16, 12, 12}, {32, 16, 3, 3}, 32, {1, 32, 12, 12},
                   "{pads=[1, 1, 1, 1]}");
}
// Odd channels: 3 -> 5.
std::string OddConv() {
  return ConvGraph("Conv", {1, 3, 9, 9}, {5, 3, 3, 3}, 5, {1, 5, 9, 9}, "{pads=[1, 1, 1, 1]}");
}

struct Lowered {
  ir::Graph graph;
  ir::loop::LoopModule lp;
  int ext = -1;
};

Lowered Lower(const std::string& text) {
  Lowered l;
  absl::StatusOr<ir::Graph> g = ir::ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  l.graph = std::move(*g);
  absl::StatusOr<ir::loop::LoopModule> lp = lowering::LowerGraph(l.graph);
  EXPECT_TRUE(lp.ok()) << lp.status();
  l.lp = std::move(*lp);
  for (size_t k = 0; k < l.lp.program.kernels.size(); ++k) {
    if (l.lp.program.kernels[k].kind == ir::loop::Kernel::Kind::kExtern) l.ext = k;
  }
  EXPECT_GE(l.ext, 0);
  return l;
}

TEST(DoubtfulCall, FewOddOrTransposedChannelsOnly) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {DetectorHead(), "C_out 2 <= 4"},
           {OddConv(), "C_in 3 <= 4"},
           {WideConv(), ""}}) {
    Lowered l = Lower(text);
    const std::optional<std::string> why =
        DoubtfulCall(l.lp.program, l.lp.program.kernels[l.ext], 16);
    EXPECT_EQ(why.value_or(""), want) << text;
  }
  // 24 channels are whole 8-channel blocks but not 16-channel ones.
  Lowered l = Lower(ConvGraph("Conv", {1, 24, 8, 8}, {24, 24, 3, 3}, 24, {1, 24, 8, 8},
                              "{pads=[1, 1, 1, 1]}"));
  EXPECT_EQ(DoubtfulCall(l.lp.program, l.lp.program.kernels[l.ext], 16).value_or(""),
            "C_out 24 not a multiple of 16");
  EXPECT_FALSE(DoubtfulCall(l.lp.program, l.lp.program.kernels[l.ext], 8).has_value());
}

// Every form the tuner may write runs the call correctly (or is refused
// with Unimplemented, and then the rule's form runs).
TEST(CallForm, EveryFormMatchesTheReference) {
  for (const std::string& text : {DetectorHead(), OddConv(), WideConv()}) {
    for (const char* form : {"caller", "any", "nhwc", "blocked8", "blocked16"}) {
      Lowered l = Lower(text);
      ir::loop::Kernel& ext = l.lp.program.kernels[l.ext];
      ext.call.attrs[ir::loop::kAttrCallForm] = std::string(form);
      absl::StatusOr<std::unique_ptr<OneDnnExternKernel>> k =
          OneDnnExternKernel::Create(l.lp.program, ext, l.lp.constants, {});
      ASSERT_TRUE(k.ok()) << form << ": " << k.status();
      const ExternKernelInfo& info = (*k)->info();
      EXPECT_TRUE(info.form == form || !info.form_refused.empty()) << form;
      const ir::Value& xv = l.graph.value(l.graph.inputs()[0]);
      Tensor x = Random(xv.shape, 7);
      const ir::loop::Buffer& out = l.lp.program.buffers[l.lp.outputs[0]];
      Tensor y(out.dtype, out.shape);
      std::vector<void*> in;
      for (int32_t b : ext.call.inputs) {
        in.push_back(b == l.lp.inputs[0]
                         ? x.raw_data()
                         : const_cast<void*>(l.lp.constants.at(b)->raw_data()));
      }
      ASSERT_TRUE((*k)->Run(in, {y.raw_data()}).ok());
      absl::StatusOr<std::vector<Tensor>> want = interp::Run(l.graph, {x});
      ASSERT_TRUE(want.ok()) << want.status();
      interp::Tolerance tol;
      tol.rtol = 1e-4;
      tol.atol = 1e-5;
      interp::CompareResult r = interp::CompareTensors(y, (*want)[0], tol);
      EXPECT_TRUE(r.ok) << form << " (" << info.impl << "): " << r.message << "\n" << text;
    }
  }
}

TEST(CallForm, UnknownFormIsAnError) {
  Lowered l = Lower(OddConv());
  ir::loop::Kernel& ext = l.lp.program.kernels[l.ext];
  ext.call.attrs[ir::loop::kAttrCallForm] = std::string("diagonal");
  EXPECT_EQ(OneDnnExternKernel::Create(l.lp.program, ext, l.lp.constants, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TuneCall, TimesTheRuleFirstAndChoosesACandidate) {
  Lowered l = Lower(DetectorHead());
  CallTuningOptions o;
  o.threads = 1;
  o.repetitions = 3;
  absl::StatusOr<CallTuning> t =
      TuneCall(l.lp.program, l.lp.program.kernels[l.ext], l.lp.constants, o);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->candidates.size(), 6u);
  EXPECT_EQ(t->candidates[0].form, "rule");
  EXPECT_GT(t->candidates[0].median_ms, 0);
  bool chosen_timed = t->chosen == "rule";
  for (const CallTuning::Candidate& c : t->candidates) {
    if (c.form == t->chosen) chosen_timed = c.median_ms > 0;
  }
  EXPECT_TRUE(chosen_timed) << DescribeTuning(*t);
  EXPECT_EQ(DescribeTuning(*t).rfind(t->chosen + " (rule ", 0), 0u) << DescribeTuning(*t);
}

}  // namespace
}  // namespace kiln::onednn
