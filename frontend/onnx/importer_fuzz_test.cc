// Robustness test: every prefix of a small serialized model and a few
// hundred seeded random byte flips must give a Status (ok or error), never
// a crash, an abort or an escaping exception.
#include <cstdint>
#include <random>
#include <string>

#include "frontend/onnx/importer.h"
#include "frontend/onnx/test_models.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {
namespace {

using TP = onnx::TensorProto;
using testing::AttrGraph;
using testing::AttrInts;
using testing::AttrTensor;
using testing::ModelBuilder;

// Exercises initializers, a Constant, attributes, a subgraph with a capture
// and a symbolic dim.
std::string SmallModel() {
  ModelBuilder m(/*opset=*/13);
  m.Input("x", TP::FLOAT, {std::string("N"), int64_t{4}});
  m.Input("cond", TP::BOOL, {});
  m.Initializer("w", {4}, {1, 2, 3, 4});
  testing::FillInt64s(AttrTensor(m.Node("Constant", {}, {"perm"}, "c"), "value"),
                      "", {1}, {1});
  m.Node("Add", {"x", "w"}, {"a"}, "add");
  AttrInts(m.Node("Transpose", {"a"}, {"t"}, "tr"), "perm", {1, 0});
  onnx::NodeProto* node = m.Node("If", {"cond"}, {"y"}, "if");
  onnx::GraphProto* then_g = AttrGraph(node, "then_branch");
  then_g->set_name("then");
  testing::AddNode(then_g, "Relu", {"t"}, {"r"}, "relu");
  testing::AddValueInfo(then_g->mutable_output(), "r", TP::FLOAT,
                        {int64_t{4}, std::string("N")});
  onnx::GraphProto* else_g = AttrGraph(node, "else_branch");
  else_g->set_name("else");
  testing::AddNode(else_g, "Neg", {"t"}, {"e"}, "neg");
  testing::AddValueInfo(else_g->mutable_output(), "e", TP::FLOAT,
                        {int64_t{4}, std::string("N")});
  m.Output("y", TP::FLOAT, {int64_t{4}, std::string("N")});
  m.Output("perm", TP::INT64, {int64_t{1}});
  return m.Bytes();
}

void ExpectStatusNamesSource(const absl::StatusOr<ImportResult>& r,
                             const std::string& what) {
  if (!r.ok()) {
    EXPECT_EQ(std::string(r.status().message()).rfind("fuzz.onnx: ", 0), 0u)
        << what << ": " << r.status();
  }
}

TEST(ImporterFuzzTest, TheUnmodifiedModelImports) {
  absl::StatusOr<ImportResult> r =
      ImportModelBytes(SmallModel(), {}, "fuzz.onnx");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.nodes().size(), 3u);
}

TEST(ImporterFuzzTest, EveryPrefixGivesAStatus) {
  const std::string bytes = SmallModel();
  int errors = 0;
  for (size_t len = 0; len < bytes.size(); ++len) {
    absl::StatusOr<ImportResult> r =
        ImportModelBytes(bytes.substr(0, len), {}, "fuzz.onnx");
    ExpectStatusNamesSource(r, "prefix " + std::to_string(len));
    if (!r.ok()) ++errors;
  }
  // Most prefixes cut a message in half; an empty prefix has no graph.
  EXPECT_GT(errors, static_cast<int>(bytes.size()) / 2);
}

TEST(ImporterFuzzTest, RandomByteFlipsGiveAStatus) {
  const std::string bytes = SmallModel();
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<size_t> pos(0, bytes.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> count(1, 4);
  for (int trial = 0; trial < 400; ++trial) {
    std::string mutated = bytes;
    for (int k = count(rng); k > 0; --k) {
      mutated[pos(rng)] = static_cast<char>(byte(rng));
    }
    ExpectStatusNamesSource(ImportModelBytes(mutated, {}, "fuzz.onnx"),
                            "trial " + std::to_string(trial));
  }
}

TEST(ImporterFuzzTest, RandomBytesGiveAStatus) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 200; ++trial) {
    std::string junk(1 + trial * 3, '\0');
    for (char& c : junk) c = static_cast<char>(byte(rng));
    ExpectStatusNamesSource(ImportModelBytes(junk, {}, "fuzz.onnx"),
                            "junk " + std::to_string(trial));
  }
}

}  // namespace
}  // namespace kiln::frontend
