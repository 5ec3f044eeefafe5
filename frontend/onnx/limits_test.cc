// File: frontend/onnx/limits_test.cc — each structural limit of an ONNX model
// (limits.h, README "Limits") is hit by a model just past it, and the import
// error names the limit and where the model exceeds it.
#include "frontend/onnx/limits.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {
namespace {

// Makes `v` the value `name` of type f32 with `rank` dims of `dim`.
void SetType(onnx::ValueInfoProto* v, const std::string& name, int rank, int64_t dim) {
  v->Clear();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < rank; ++i) tt->mutable_shape()->add_dim()->set_dim_value(dim);
}

// y = Relu(x) over f32[2]: within every limit.
onnx::ModelProto Model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  SetType(g->add_input(), "x", 1, 2);
  SetType(g->add_output(), "y", 1, 2);
  onnx::NodeProto* n = g->add_node();
  n->set_name("relu");
  n->set_op_type("Relu");
  n->add_input("x");
  n->add_output("y");
  return m;
}

absl::Status Import(const onnx::ModelProto& m, const ImportOptions& options = {}) {
  return ImportModelBytes(m.SerializeAsString(), options, "limits.onnx").status();
}

void ExpectRefused(const absl::Status& s, const std::string& limit, const std::string& where) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "over kiln's limit of " + limit)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), where)) << s;
}

TEST(ModelLimits, TheModelWithinThemImports) { EXPECT_TRUE(Import(Model()).ok()); }

TEST(ModelLimits, Rank) {
  onnx::ModelProto m = Model();
  SetType(m.mutable_graph()->mutable_input(0), "x", 65, 1);
  ExpectRefused(Import(m), "64 dims (rank)", "value 'x' of graph 'g' has rank 65");
}

TEST(ModelLimits, LargestDim) {
  onnx::ModelProto m = Model();
  onnx::TensorProto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::UINT8);
  w->add_dims(1);
  w->add_dims((int64_t{1} << 34) + 1);
  ExpectRefused(Import(m), "17179869184 elements per dim",
                "initializer 'w' of graph 'g': dim 1 is 17179869185");
}

TEST(ModelLimits, NodeCount) {
  EXPECT_EQ(ModelLimits().max_nodes, int64_t{1} << 20);
  onnx::ModelProto m = Model();
  for (int i = 1; i <= 3; ++i) {
    onnx::NodeProto* n = m.mutable_graph()->add_node();
    n->set_name(absl::StrCat("relu", i));
    n->set_op_type("Relu");
    n->add_input(i == 1 ? "y" : absl::StrCat("y", i - 1));
    n->add_output(absl::StrCat("y", i));
  }
  ImportOptions o;
  o.limits.max_nodes = 3;
  ExpectRefused(Import(m, o), "3 nodes", "node #3 'relu3' (Relu) of graph 'g'");
  o.limits.max_nodes = 4;
  EXPECT_TRUE(Import(m, o).ok());
}

TEST(ModelLimits, GraphOutputs) {
  onnx::ModelProto m = Model();
  for (int i = 0; i < (1 << 16); ++i) SetType(m.mutable_graph()->add_output(), "y", 1, 2);
  ExpectRefused(Import(m), "65536 graph outputs", "graph 'g' has 65537 outputs");
}

TEST(ModelLimits, SubgraphDepth) {
  // An If whose then-branch holds an If, 17 levels deep.
  onnx::ModelProto m = Model();
  onnx::GraphProto* g = m.mutable_graph();
  SetType(g->add_input(), "c", 0, 0);
  g->mutable_input(1)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::BOOL);
  for (int depth = 1; depth <= 17; ++depth) {
    onnx::NodeProto* n = g->add_node();
    n->set_name(absl::StrCat("if", depth));
    n->set_op_type("If");
    n->add_input("c");
    n->add_output(absl::StrCat("o", depth));
    for (const char* branch : {"then_branch", "else_branch"}) {
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name(branch);
      a->set_type(onnx::AttributeProto::GRAPH);
      a->mutable_g()->set_name(absl::StrCat(branch, depth));
    }
    g = n->mutable_attribute(0)->mutable_g();
  }
  ExpectRefused(Import(m), "16 subgraph nesting depth",
                "subgraph 'then_branch' of node #0 'if17' (If) of graph 'then_branch16'");
}

TEST(ModelLimits, NameLength) {
  onnx::ModelProto m = Model();
  m.mutable_graph()->mutable_node(0)->set_name(std::string(16385, 'n'));
  ExpectRefused(Import(m), "16384 bytes per name", "a node's name, op type or domain 'nnnn");
  m = Model();
  const std::string huge(1 << 20, 'v');
  SetType(m.mutable_graph()->mutable_input(0), huge, 1, 2);
  m.mutable_graph()->mutable_node(0)->set_input(0, huge);
  const absl::Status s = Import(m);
  ExpectRefused(s, "16384 bytes per name", "has 1048576 bytes");
  EXPECT_LT(s.message().size(), 1100u);
}

// External data is read only up to the per-tensor byte cap
// (ImportOptions::max_tensor_bytes, 16 GiB by default).
TEST(ModelLimits, ExternalDataSize) {
  EXPECT_EQ(ImportOptions().max_tensor_bytes, int64_t{16} << 30);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  {
    std::ofstream out(dir + "/w.bin", std::ios::binary);
    const float w[4] = {1, 2, 3, 4};
    out.write(reinterpret_cast<const char*>(w), sizeof(w));
  }
  onnx::ModelProto m = Model();
  onnx::GraphProto* g = m.mutable_graph();
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  g->mutable_node(0)->set_op_type("Add");
  g->mutable_node(0)->add_input("w");
  SetType(g->mutable_input(0), "x", 2, 2);
  SetType(g->mutable_output(0), "y", 2, 2);
  ImportOptions o;
  o.base_dir = dir;
  EXPECT_TRUE(Import(m, o).ok()) << Import(m, o);
  o.max_tensor_bytes = 15;
  const absl::Status s = Import(m, o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "'w'")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "exceeds the limit of 15")) << s;
}

}  // namespace
}  // namespace kiln::frontend
