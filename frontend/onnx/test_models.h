// File: frontend/onnx/test_models.h — builds small onnx.ModelProtos in C++
// for the frontend's tests (no Python, no files checked in).
//
//   ModelBuilder m(/*opset=*/17);
//   m.Input("x", onnx::TensorProto::FLOAT, {"N", 3});
//   m.Node("Relu", {"x"}, {"y"}, "relu0");
//   m.Output("y", onnx::TensorProto::FLOAT, {"N", 3});
//   std::string bytes = m.Bytes();
#ifndef KILN_FRONTEND_ONNX_TEST_MODELS_H_
#define KILN_FRONTEND_ONNX_TEST_MODELS_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "onnx/onnx_pb.h"

namespace kiln::frontend::testing {

// A dim: a size, a symbolic name (dim_param), or "?" for neither.
using Dim = std::variant<int64_t, std::string>;

inline void SetType(onnx::TypeProto* type, int32_t elem,
                    const std::vector<Dim>& dims) {
  auto* tt = type->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const Dim& d : dims) {
    auto* dim = shape->add_dim();
    if (const int64_t* v = std::get_if<int64_t>(&d)) {
      dim->set_dim_value(*v);
    } else if (std::get<std::string>(d) != "?") {
      dim->set_dim_param(std::get<std::string>(d));
    }
  }
}

inline void AddValueInfo(
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
    const std::string& name, int32_t elem, const std::vector<Dim>& dims) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  SetType(v->mutable_type(), elem, dims);
}

inline onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                                const std::vector<std::string>& inputs,
                                const std::vector<std::string>& outputs,
                                const std::string& name) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

inline void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void AttrInts(onnx::NodeProto* n, const std::string& name,
                     const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void AttrString(onnx::NodeProto* n, const std::string& name,
                       const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline onnx::TensorProto* AttrTensor(onnx::NodeProto* n,
                                     const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::TENSOR);
  return a->mutable_t();
}
inline onnx::GraphProto* AttrGraph(onnx::NodeProto* n,
                                   const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  return a->mutable_g();
}

// A float tensor proto with float_data.
inline void FillFloats(onnx::TensorProto* t, const std::string& name,
                       const std::vector<int64_t>& dims,
                       const std::vector<float>& values) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}
inline void FillInt64s(onnx::TensorProto* t, const std::string& name,
                       const std::vector<int64_t>& dims,
                       const std::vector<int64_t>& values) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 17, int64_t ir_version = 8) {
    model_.set_ir_version(ir_version);
    model_.set_producer_name("kiln-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test_graph");
  }

  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }

  void Input(const std::string& name, int32_t elem,
             const std::vector<Dim>& dims) {
    AddValueInfo(graph()->mutable_input(), name, elem, dims);
  }
  void Output(const std::string& name, int32_t elem,
              const std::vector<Dim>& dims) {
    AddValueInfo(graph()->mutable_output(), name, elem, dims);
  }
  onnx::NodeProto* Node(const std::string& op,
                        const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs,
                        const std::string& name) {
    return AddNode(graph(), op, inputs, outputs, name);
  }
  onnx::TensorProto* Initializer(const std::string& name,
                                 const std::vector<int64_t>& dims,
                                 const std::vector<float>& values) {
    onnx::TensorProto* t = graph()->add_initializer();
    FillFloats(t, name, dims, values);
    return t;
  }
  void Opset(const std::string& domain, int64_t version) {
    auto* op = model_.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }

  std::string Bytes() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
};

}  // namespace kiln::frontend::testing

#endif  // KILN_FRONTEND_ONNX_TEST_MODELS_H_
