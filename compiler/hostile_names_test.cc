// File: compiler/hostile_names_test.cc — model text (graph, value and node
// names, attribute values) with escape, BEL and newline bytes and a 1 MB name
// reaches no run-time message raw: the reference engine and the compiled Run
// path report bad feeds and failing ops with that text escaped and capped.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "compiler/compiler.h"
#include "compiler/test_util.h"
#include "gtest/gtest.h"
#include "interp/interpreter.h"
#include "ir/graph/graph.h"
#include "ir/message.h"

namespace kiln {
namespace {

using compiler_testing::Options;

const std::string kEvil = "evil\x1b]0;pwned\x07\nsecond line";
const std::string kHuge(1 << 20, 'n');

// The error a run gave, checked for what a terminal or a log line could
// suffer: no control byte, no line past the cap, and `what` (the reason)
// still in it.
void ExpectSafeError(const absl::Status& s, const std::string& what, const std::string& where) {
  ASSERT_FALSE(s.ok()) << where;
  const std::string m(s.message());
  for (unsigned char c : m) {
    ASSERT_FALSE(c < 0x20 || c == 0x7f)
        << where << ": control byte " << int{c} << " in " << m.substr(0, 300);
  }
  EXPECT_LE(m.size(), kMaxMessageLineBytes + 64) << where;
  EXPECT_TRUE(absl::StrContains(m, what)) << where << ": " << m;
}

// c = Div(a, b) over i32[4]; every name hostile, the graph's and the
// divisor's 1 MB long.
ir::Graph DivModel() {
  ir::Graph g(kEvil + kHuge);
  g.set_opset(13);
  const ir::ValueId a = g.AddValue(kEvil + "a", ir::DType::kI32, {4});
  const ir::ValueId b = g.AddValue(kHuge + kEvil, ir::DType::kI32, {4});
  const ir::ValueId c = g.AddValue(kEvil + "c", ir::DType::kI32, {4});
  g.AddInput(a);
  g.AddInput(b);
  g.AddNode("Div", {a, b}, {c}, {}, kEvil + kHuge);
  g.AddOutput(c);
  return g;
}

// y = Pad(x, pads) with a mode attribute that is no mode: hostile text.
ir::Graph PadModel() {
  ir::Graph g("pad");
  g.set_opset(13);
  const ir::ValueId x = g.AddValue("x", ir::DType::kF32, {4});
  const ir::ValueId pads = g.AddValue("pads", ir::DType::kI64, {2});
  g.SetConstant(pads, ir::Tensor::FromVector<int64_t>({2}, {1, 1}));
  const ir::ValueId y = g.AddValue(kEvil, ir::DType::kF32, {6});
  g.AddInput(x);
  g.AddNode("Pad", {x, pads}, {y}, {{"mode", kEvil + kHuge}}, kEvil);
  g.AddOutput(y);
  return g;
}

const ir::Tensor kA = ir::Tensor::FromVector<int32_t>({4}, {8, 9, 10, 11});
const ir::Tensor kZeros = ir::Tensor::FromVector<int32_t>({4}, {2, 3, 0, 1});

TEST(HostileNames, ReferenceEngineMessagesAreEscapedAndCapped) {
  const ir::Graph g = DivModel();
  // Bad feeds: a missing input, an input of the wrong dtype.
  ExpectSafeError(interp::Run(g, {kA}).status(), "takes 2 inputs, got 1", "missing input");
  ExpectSafeError(interp::Run(g, {kA, ir::Tensor(ir::DType::kF32, {4})}).status(), "Div",
                  "wrong dtype");
  // An op that fails.
  ExpectSafeError(interp::Run(g, {kA, kZeros}).status(), "integer division by zero",
                  "division by zero");
  // A hostile attribute value in the kernel's own message.
  ExpectSafeError(interp::Run(PadModel(), {ir::Tensor(ir::DType::kF32, {4})}).status(),
                  "unknown mode", "Pad mode");
}

TEST(HostileNames, CompiledRunMessagesAreEscapedAndCapped) {
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(DivModel());
  ASSERT_TRUE(model.ok()) << SanitizedStatus(model.status(), false);
  const CompiledModel& m = **model;
  // Bad feeds: the wrong shape, the wrong dtype, a missing named input.
  ExpectSafeError(m.Run(std::vector<ir::Tensor>{kA, ir::Tensor(ir::DType::kI32, {5})}).status(),
                  "expected i32[4]", "wrong shape");
  ExpectSafeError(m.Run(std::vector<ir::Tensor>{ir::Tensor(ir::DType::kF32, {4}), kA}).status(),
                  "expected i32[4]", "wrong dtype");
  ExpectSafeError(m.RunNamed({{kEvil + "a", kA}}).status(), "missing input", "missing input");
  ExpectSafeError(m.RunNamed({{kEvil + "a", kA}, {kHuge + kEvil, kA}, {kEvil, kA}}).status(),
                  "no input named", "unknown input");
  // An op that fails: the loop kernel's error names its ONNX nodes.
  ExpectSafeError(m.Run(std::vector<ir::Tensor>{kA, kZeros}).status(), "division", "div by zero");
  absl::StatusOr<std::vector<ir::Tensor>> good = m.Run(std::vector<ir::Tensor>{kA, kA});
  ASSERT_TRUE(good.ok()) << SanitizedStatus(good.status(), false);
  EXPECT_EQ((*good)[0].data<int32_t>()[3], 1);
}

TEST(HostileNames, CompiledRunOfABadAttributeFailsSafely) {
  // The compiler either refuses the mode or leaves the node to a reference
  // call that refuses it at run time; either message is safe.
  absl::StatusOr<std::unique_ptr<CompiledModel>> model =
      Compiler(Options()).CompileGraph(PadModel());
  if (!model.ok()) {
    ExpectSafeError(model.status(), "mode", "compile");
    return;
  }
  ExpectSafeError((*model)->Run(std::vector<ir::Tensor>{ir::Tensor(ir::DType::kF32, {4})}).status(),
                  "mode", "run");
}

}  // namespace
}  // namespace kiln
