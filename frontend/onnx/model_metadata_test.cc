// File: frontend/onnx/model_metadata_test.cc — ReadModelMetadata against the
// fields a ModelProto was built with.
#include "frontend/onnx/model_metadata.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln::frontend {
namespace {

onnx::ModelProto Described() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("exporter");
  model.set_producer_version("1.2.3");
  model.set_domain("ai.example");
  model.set_model_version(42);
  model.set_doc_string("a model");
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("main_graph");
  g->set_doc_string("the graph");
  // A large initializer after the name, and a node: both are skipped.
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(1 << 16);
  w->set_raw_data(std::string(4 << 16, '\1'));
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Relu");
  n->set_doc_string("not the graph's");
  for (auto [k, v] : {std::pair{"author", "someone"}, {"labels", "a,b"}, {"author", "again"}}) {
    onnx::StringStringEntryProto* e = model.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
  return model;
}

void ExpectDescribed(const ModelMetadata& m) {
  EXPECT_EQ(m.producer_name, "exporter");
  EXPECT_EQ(m.producer_version, "1.2.3");
  EXPECT_EQ(m.domain, "ai.example");
  EXPECT_EQ(m.version, 42);
  EXPECT_EQ(m.description, "a model");
  EXPECT_EQ(m.graph_name, "main_graph");
  EXPECT_EQ(m.graph_description, "the graph");
  ASSERT_EQ(m.custom_metadata.size(), 3u);
  EXPECT_EQ(m.custom_metadata[0], (std::pair<std::string, std::string>{"author", "someone"}));
  EXPECT_EQ(m.custom_metadata[1], (std::pair<std::string, std::string>{"labels", "a,b"}));
  EXPECT_EQ(m.custom_metadata[2], (std::pair<std::string, std::string>{"author", "again"}));
}

TEST(ModelMetadata, FromBytes) {
  absl::StatusOr<ModelMetadata> m = ReadModelMetadata(Described().SerializeAsString());
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectDescribed(*m);
}

TEST(ModelMetadata, FromFile) {
  const std::string path = ::testing::TempDir() + "/described.onnx";
  const std::string bytes = Described().SerializeAsString();
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  absl::StatusOr<ModelMetadata> m = ReadModelMetadataFile(path);
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectDescribed(*m);
  EXPECT_EQ(ReadModelMetadataFile(path + ".missing").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ModelMetadata, EmptyFieldsAndBadBytes) {
  absl::StatusOr<ModelMetadata> empty = ReadModelMetadata("");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->producer_name, "");
  EXPECT_EQ(empty->version, 0);
  const std::string bytes = Described().SerializeAsString();
  // Cut inside the graph's initializer, and a length running past the end.
  EXPECT_EQ(ReadModelMetadata(bytes.substr(0, bytes.size() / 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadModelMetadata(std::string("\x3a\xff\xff\xff\x07", 5)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::frontend
