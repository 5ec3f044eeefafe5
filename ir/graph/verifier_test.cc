// Tests for the graph verifier: a valid graph passes, and each broken
// invariant gets its own message naming the graph, node and value.
#include "ir/graph/verifier.h"

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/graph/text.h"
#include "ir/message.h"

namespace kiln::ir {
namespace {

using ::testing::HasSubstr;

Graph Parse(const char* text) {
  absl::StatusOr<Graph> g = ParseGraph(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

// The kiln-bug error of VerifyGraph, with its code checked.
std::string KilnError(const Graph& g) {
  const absl::Status s = VerifyGraph(g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("this is a kiln bug")) << s;
  return std::string(s.message());
}

TEST(Verifier, ValidGraphWithNestedCapturesPasses) {
  const Graph g = Parse(R"(
graph main(%x: f32[2], %c: bool[]) -> (%y, %x) {
  %w = constant f32[2] [1.0, 2.0]
  %s = Add(%x, %w) : f32[2]
  %y, _ = If(%c, _) {
    then_branch=graph t() captures(%in: f32[2] = %s) -> (%o) {
      %o = Neg(%in) : f32[2]
    },
    else_branch=graph e() captures(%k: bool[] = %c) -> (%r) {
      %r = If(%k) {
        then_branch=graph tt() captures(%deep: f32[2] = %w) -> (%deep) {},
        else_branch=graph ee() captures(%d2: f32[2] = %x) -> (%d2) {}
      } : f32[2]
    }
  } : f32[2]
  Print(%y)
}
)");
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
  EXPECT_TRUE(VerifyGraph(g, Blame::kModel).ok());
}

TEST(Verifier, ValueIdOutOfRange) {
  Graph g("main");
  const ValueId x = g.AddValue("x", DType::kF32, {1});
  g.AddInput(x);
  const ValueId y = g.AddValue("y", DType::kF32, {1});
  g.AddNode("Relu", {x, 42}, {y}, {}, "r");
  g.AddOutput(y);
  EXPECT_THAT(KilnError(g),
              HasSubstr("graph verifier: graph 'main': node 0 'r' (Relu): "
                        "input 1 has invalid value id 42"));

  Graph out("main");
  out.AddOutput(3);
  EXPECT_THAT(KilnError(out),
              HasSubstr("graph 'main': graph output 0 has invalid value id 3"));

  Graph in("main");
  in.AddInput(kNoValue);
  EXPECT_THAT(KilnError(in),
              HasSubstr("graph 'main': graph input 0 has invalid value id -1"));

  Graph node_out("main");
  node_out.AddNode("Foo", {}, {7}, {}, "f");
  EXPECT_THAT(KilnError(node_out),
              HasSubstr("node 0 'f' (Foo): output 0 has invalid value id 7"));

  Graph constant("main");
  constant.SetConstant(5, Tensor::Scalar<float>(1.0f));
  EXPECT_THAT(KilnError(constant),
              HasSubstr("graph 'main': a constant has invalid value id 5"));
}

TEST(Verifier, ValueDefinedByTwoNodes) {
  Graph g("main");
  const ValueId x = g.AddValue("x", DType::kF32, {1});
  g.AddInput(x);
  const ValueId y = g.AddValue("y", DType::kF32, {1});
  g.AddNode("Relu", {x}, {y}, {}, "a");
  g.AddNode("Neg", {x}, {y}, {}, "b");
  g.AddOutput(y);
  EXPECT_THAT(KilnError(g),
              HasSubstr("node 1 'b' (Neg): value 'y' (#1) is defined twice: "
                        "as output 0 of node 0 and as output 0 of node 1"));
}

// Names are the model's: a message quoting several long ones with bytes
// that escape to four characters each stays one line of bounded length,
// with no control byte (a graph_text fuzz finding: 1,090 bytes).
TEST(Verifier, LongNamesKeepTheMessageLineBounded) {
  const std::string name = std::string(2048, '\x82') + std::string(2048, '\x1b');
  Graph g(name);
  const ValueId x = g.AddValue(name + "x", DType::kF32, {1});
  g.AddInput(x);
  const ValueId y = g.AddValue(name + "y", DType::kF32, {1});
  g.AddNode(name + "op", {x}, {y}, {}, name + "a");
  g.AddNode(name + "op", {x}, {y}, {}, name + "b");
  g.AddOutput(y);
  const absl::Status s = VerifyGraph(g, Blame::kModel);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const absl::string_view m = s.message();
  EXPECT_THAT(m, HasSubstr("is defined twice"));
  EXPECT_EQ(m.find('\n'), absl::string_view::npos) << m;
  EXPECT_LE(m.size(), kMaxMessageLineBytes + 64) << m;
  for (unsigned char c : m) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << static_cast<int>(c);
}

TEST(Verifier, ValueBothConstantAndNodeOutput) {
  Graph g("main");
  const ValueId x = g.AddValue("x", DType::kF32, {1});
  g.AddInput(x);
  const ValueId c = g.AddValue("c", DType::kF32, {1});
  g.SetConstant(c, Tensor::FromVector<float>({1}, {2.0f}));
  g.AddNode("Relu", {x}, {c}, {}, "r");
  g.AddOutput(c);
  EXPECT_THAT(KilnError(g),
              HasSubstr("node 0 'r' (Relu): value 'c' (#1) is defined twice: "
                        "as a constant and as output 0 of node 0"));
}

TEST(Verifier, GraphInputListedTwiceOrAlsoCaptured) {
  Graph g("main");
  const ValueId x = g.AddValue("x", DType::kF32, {1});
  g.AddInput(x);
  g.AddInput(x);
  EXPECT_THAT(KilnError(g),
              HasSubstr("graph 'main': value 'x' (#0) is defined twice: as "
                        "graph input 0 and as graph input 1"));
}

TEST(Verifier, InputUsedBeforeItsNode) {
  Graph g("main");
  const ValueId x = g.AddValue("x", DType::kF32, {1});
  g.AddInput(x);
  const ValueId a = g.AddValue("a", DType::kF32, {1});
  const ValueId b = g.AddValue("b", DType::kF32, {1});
  g.AddNode("Relu", {b}, {a}, {}, "first");
  g.AddNode("Neg", {x}, {b}, {}, "second");
  g.AddOutput(a);
  EXPECT_THAT(KilnError(g),
              HasSubstr("graph 'main': node 0 'first' (Relu): input 0 'b' "
                        "(#2) is used before it is defined (by node 1): nodes "
                        "are not in topological order"));
}

TEST(Verifier, NodeReadsItsOwnOutput) {
  const Graph g = Parse(
      "graph main() -> (%a) { %a = Relu(%a) name=\"self\" : f32[1] }");
  EXPECT_THAT(KilnError(g), HasSubstr("node 0 'self' (Relu): input 0 'a' (#0) "
                                      "is used before it is defined (by node "
                                      "0)"));
}

TEST(Verifier, InputNeverDefined) {
  Graph g("main");
  const ValueId ghost = g.AddValue("ghost", DType::kF32, {1});
  const ValueId y = g.AddValue("y", DType::kF32, {1});
  g.AddNode("Relu", {ghost}, {y}, {}, "r");
  g.AddOutput(y);
  EXPECT_THAT(KilnError(g), HasSubstr("node 0 'r' (Relu): input 0 'ghost' "
                                      "(#0) is never defined"));
}

TEST(Verifier, GraphOutputNeverDefined) {
  Graph g("main");
  const ValueId x = g.AddValue("x", DType::kF32, {1});
  g.AddInput(x);
  const ValueId y = g.AddValue("y", DType::kF32, {1});
  g.AddOutput(x);
  g.AddOutput(y);
  EXPECT_THAT(KilnError(g), HasSubstr("graph 'main': graph output 1 'y' (#1) "
                                      "is never defined"));
}

TEST(Verifier, ConstantTypeMismatch) {
  Graph shape("main");
  const ValueId w = shape.AddValue("w", DType::kF32, {3});
  shape.SetConstant(w, Tensor::FromVector<float>({2}, {1.0f, 2.0f}));
  shape.AddOutput(w);
  EXPECT_THAT(KilnError(shape),
              HasSubstr("graph 'main': constant 'w' (#0) holds f32[2] but the "
                        "value is declared f32[3]"));

  Graph dtype("main");
  const ValueId k = dtype.AddValue("k", DType::kI32, {});
  dtype.SetConstant(k, Tensor::Scalar<int64_t>(4));
  dtype.AddOutput(k);
  EXPECT_THAT(KilnError(dtype),
              HasSubstr("constant 'k' (#0) holds i64[] but the value is "
                        "declared i32[]"));

  Graph unshaped("main");
  const ValueId u = unshaped.AddUnshapedValue("u", DType::kF32);
  unshaped.SetConstant(u, Tensor::Scalar<float>(1.0f));
  unshaped.AddOutput(u);
  EXPECT_THAT(KilnError(unshaped),
              HasSubstr("constant 'u' (#0) holds f32[] but the value is "
                        "declared f32[*]"));

  Graph null_data("main");
  const ValueId n = null_data.AddValue("n", DType::kF32, {});
  null_data.SetConstant(n, std::shared_ptr<const Tensor>());
  null_data.AddOutput(n);
  EXPECT_THAT(KilnError(null_data), HasSubstr("constant 'n' (#0) has no data"));
}

TEST(Verifier, NodeOutputWithUnknownDtype) {
  const Graph g =
      Parse("graph main(%x: f32[1]) -> (%y) { %y = Relu(%x) name=\"r\" }");
  EXPECT_THAT(KilnError(g), HasSubstr("node 0 'r' (Relu): output 0 'y' (#1) "
                                      "has no known dtype"));
}

TEST(Verifier, EmptyOpName) {
  const Graph g = Parse(
      "graph main(%x: f32[1]) -> (%y) { %y = \"\"(%x) name=\"n\" : f32[1] }");
  EXPECT_THAT(KilnError(g), HasSubstr("node 0 'n' (): empty op name"));
}

TEST(Verifier, CaptureOfValueDefinedAfterTheNode) {
  const Graph g = Parse(R"(
graph main(%c: bool[]) -> (%y) {
  %y = If(%c) {
    then_branch=graph then() captures(%in: f32[1] = %later) -> (%in) {},
    else_branch=graph else() captures(%in: f32[1] = %later) -> (%in) {}
  } name="if0" : f32[1]
  %later = Neg(%y) : f32[1]
})");
  EXPECT_THAT(KilnError(g),
              HasSubstr("graph 'main': node 0 'if0' (If) attribute "
                        "'else_branch': graph 'else': capture 0 'in' (#0) "
                        "reads 'later', which no enclosing graph defines "
                        "before node 0"));
}

TEST(Verifier, CaptureOfUnknownName) {
  const Graph g = Parse(R"(
graph main(%c: bool[]) -> (%y) {
  %y = Loop(%c) {
    body=graph b(%c2: bool[]) -> (%o) {
      %o = If(%c2) {
        then_branch=graph t() captures(%z: f32[1] = %nowhere) -> (%z) {}
      } name="inner" : f32[1]
    }
  } name="loop" : f32[1]
})");
  EXPECT_THAT(KilnError(g),
              HasSubstr("graph 'main': node 0 'loop' (Loop) attribute 'body': "
                        "graph 'b': node 0 'inner' (If) attribute "
                        "'then_branch': graph 't': capture 0 'z' (#0) reads "
                        "'nowhere', which no enclosing graph defines"));
}

TEST(Verifier, TopLevelGraphCannotCapture) {
  const Graph g =
      Parse("graph main() captures(%a: f32[1] = %outer) -> (%a) {}");
  EXPECT_THAT(KilnError(g),
              HasSubstr("graph 'main': capture 0 'a' (#0) reads 'outer' but "
                        "the graph has no enclosing graph"));
}

TEST(Verifier, NullSubgraph) {
  const Graph g = Parse(
      "graph main(%c: bool[]) -> (%y) { %y = If(%c) {then_branch=graph <null>}"
      " name=\"if0\" : f32[1] }");
  EXPECT_THAT(KilnError(g), HasSubstr("node 0 'if0' (If) attribute "
                                      "'then_branch': null subgraph"));
}

TEST(Verifier, ErrorInsideSubgraphNamesThePath) {
  const Graph g = Parse(R"(
graph main(%c: bool[]) -> (%y) {
  %y = If(%c) {
    then_branch=graph t() -> (%o) { %o = Relu(%o) name="bad" : f32[1] }
  } name="if0" : f32[1]
})");
  EXPECT_THAT(KilnError(g),
              HasSubstr("graph 'main': node 0 'if0' (If) attribute "
                        "'then_branch': graph 't': node 0 'bad' (Relu): input "
                        "0 'o' (#0) is used before it is defined"));
}

TEST(Verifier, DuplicateValueNames) {
  Graph g("main");
  const ValueId a = g.AddValue("x", DType::kF32, {1});
  const ValueId b = g.AddValue("x", DType::kF32, {1});
  g.AddInput(a);
  g.AddNode("Relu", {a}, {b}, {}, "r");
  g.AddOutput(b);
  EXPECT_THAT(KilnError(g), HasSubstr("graph 'main': values 'x' (#0) and 'x' "
                                      "(#1) have the same name"));
}

TEST(Verifier, DomainAndEscapedNamesInMessages) {
  Graph g("main");
  const ValueId y = g.AddValue("y\n", DType::kInvalid, {1});
  Node& n = g.AddNode("Fused", {}, {y}, {}, "n'1");
  n.domain = "com.microsoft";
  EXPECT_THAT(KilnError(g),
              HasSubstr("node 0 'n'1' (com.microsoft.Fused): output 0 "
                        "'y\\n' (#0) has no known dtype"));
}

TEST(Verifier, ModelBlameIsInvalidArgument) {
  Graph g("main");
  const ValueId y = g.AddValue("y", DType::kF32, {1});
  g.AddOutput(y);
  const absl::Status s = VerifyGraph(g, Blame::kModel);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "invalid graph: graph 'main': graph output 0 'y' (#0) is never "
            "defined");
}

}  // namespace
}  // namespace kiln::ir
