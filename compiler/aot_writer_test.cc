// compiler/aot_writer: the files `kilnc aot` writes for models/tiny_cnn
// (names, shards, the per-ISA target guard, a description that reads back
// as the program) and the refusal of names, ISAs and paths that must not
// reach generated C++ or assembler text; reference fallback calls only
// with reference_calls.
#include "compiler/aot_writer.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/loop/text.h"
#include "isa/isa.h"
#include "nlohmann/json.hpp"
#include "onnx/onnx_pb.h"

namespace kiln::aot {
namespace {

using ::testing::HasSubstr;

std::string TinyCnn() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", ws ? ws : "kiln",
                      "/models/tiny_cnn/model.onnx");
}

WriterOptions Options() {
  WriterOptions w;
  w.name = "tiny";
  w.isas = {"scalar", "avx2", "avx512"};
  w.shards = 3;
  w.header_include = "pkg/tiny.h";
  w.data_dir = "bazel-out/k8-opt/bin/pkg";
  return w;
}

TEST(AotWriterTest, WritesEveryDeclaredFile) {
  const WriterOptions w = Options();
  absl::StatusOr<std::vector<GeneratedFile>> files = WriteAotLibrary(TinyCnn(), {}, w);
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, std::string> by_name;
  for (const GeneratedFile& f : *files) by_name[f.name] = f.contents;
  std::vector<std::string> expected = AotFileNames(w);
  ASSERT_EQ(by_name.size(), expected.size());
  for (const std::string& name : expected) EXPECT_TRUE(by_name.count(name)) << name;

  // Every shard, empty or not, fails to compile under another ISA's flags.
  int shards_with_kernels = 0;
  for (const std::string& isa : w.isas) {
    for (int s = 0; s < w.shards; ++s) {
      const std::string& text = by_name[absl::StrCat("tiny_", isa, "_", s, ".cc")];
      EXPECT_THAT(text, HasSubstr(absl::StrCat("#if HWY_STATIC_TARGET != ",
                                               isa::FindIsa(isa)->hwy_target, "LL")));
      if (absl::StrContains(text, "extern \"C\" int kiln_aot_tiny_" + isa + "_k")) {
        ++shards_with_kernels;
      }
    }
  }
  // tiny_cnn has 4 loop kernels: 2 per unit, so 2 of 3 shards per ISA.
  EXPECT_EQ(shards_with_kernels, 6);

  EXPECT_THAT(by_name["tiny.h"], HasSubstr("namespace tiny {"));
  EXPECT_THAT(by_name["tiny.h"],
              HasSubstr("absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> Create("));
  EXPECT_THAT(by_name["tiny_table.cc"], HasSubstr("#include \"pkg/tiny.h\""));
  EXPECT_THAT(by_name["tiny_data.S"],
              HasSubstr(".incbin \"bazel-out/k8-opt/bin/pkg/tiny_weights.inc\""));

  // Per ISA, a description that reads back as the program, with its kernels.
  for (const std::string& isa : w.isas) {
    const nlohmann::json desc = nlohmann::json::parse(by_name["tiny_" + isa + "_program.inc"]);
    absl::StatusOr<ir::loop::LoopProgram> program =
        ir::loop::ParseProgram(desc.at("program").get<std::string>());
    ASSERT_TRUE(program.ok()) << program.status();
    EXPECT_EQ(desc.at("isa").get<std::string>(), isa);
    EXPECT_EQ(desc.at("kernels").size(), 4u) << isa;
    EXPECT_EQ(desc.at("weights_bytes").get<size_t>(), by_name["tiny_weights.inc"].size());
    EXPECT_THAT(by_name["tiny_" + isa + "_data.S"],
                HasSubstr(absl::StrCat(".incbin \"bazel-out/k8-opt/bin/pkg/tiny_", isa,
                                       "_program.inc\"")));
    EXPECT_THAT(by_name["tiny_" + isa + "_table.cc"],
                HasSubstr(absl::StrCat("kiln_aot_tiny_", isa, "_kernels_count = 4;")));
  }
  EXPECT_GT(by_name["tiny_weights.inc"].size(), 0u);
}

TEST(AotWriterTest, PartsWriteTheirFilesAndShareTheWeights) {
  WriterOptions w = Options();
  w.part = "glue";
  absl::StatusOr<std::vector<GeneratedFile>> glue = WriteAotLibrary(TinyCnn(), {}, w);
  ASSERT_TRUE(glue.ok()) << glue.status();
  std::vector<std::string> names;
  std::string weights;
  for (const GeneratedFile& f : *glue) {
    names.push_back(f.name);
    if (f.name == "tiny_weights.inc") weights = f.contents;
  }
  EXPECT_EQ(names, AotFileNames(w));
  EXPECT_EQ(names.size(), 4u);

  const std::string weights_file = absl::StrCat(std::getenv("TEST_TMPDIR"), "/w.inc");
  {
    std::ofstream out(weights_file, std::ios::binary);
    out << weights;
  }
  w.part = "avx2";
  w.weights_file = weights_file;
  absl::StatusOr<std::vector<GeneratedFile>> avx2 = WriteAotLibrary(TinyCnn(), {}, w);
  ASSERT_TRUE(avx2.ok()) << avx2.status();
  names.clear();
  for (const GeneratedFile& f : *avx2) names.push_back(f.name);
  std::sort(names.begin(), names.end());
  std::vector<std::string> expected = AotFileNames(w);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
  EXPECT_EQ(names.size(), 3u + 3u);  // table, data, program + 3 shards

  // Weights that are not this program's constants: refused.
  {
    std::ofstream out(weights_file, std::ios::binary | std::ios::trunc);
    out << weights.substr(0, weights.size() / 2);
  }
  absl::StatusOr<std::vector<GeneratedFile>> bad = WriteAotLibrary(TinyCnn(), {}, w);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("differ from the shared weights file"));

  w.part = "neon";
  w.weights_file = "";
  absl::StatusOr<std::vector<GeneratedFile>> other = WriteAotLibrary(TinyCnn(), {}, w);
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("neither 'glue' nor one of the ISAs"));
}

TEST(AotWriterTest, RefusesWhatMustNotReachGeneratedCode) {
  struct Case {
    WriterOptions w;
    std::string message;
  };
  std::vector<Case> cases;
  for (const char* bad : {"", "9lives", "a-b", "x;y", "name space"}) {
    WriterOptions w = Options();
    w.name = bad;
    cases.push_back({w, "is not a C++ identifier"});
  }
  for (const char* bad : {"int", "namespace", "std", "kiln", "__x", "_Foo"}) {
    WriterOptions w = Options();
    w.name = bad;
    cases.push_back({w, "cannot be its namespace"});
  }
  WriterOptions w = Options();
  w.isas = {"sse9"};
  cases.push_back({w, "unknown ISA 'sse9'"});
  w = Options();
  w.isas = {"avx2", "avx2"};
  cases.push_back({w, "listed twice"});
  w = Options();
  w.isas = {};
  cases.push_back({w, "no ISA"});
  w = Options();
  w.shards = 0;
  cases.push_back({w, "shards must be in [1, 1024]"});
  w = Options();
  w.header_include = "../../etc/x.h";
  cases.push_back({w, "is not a plain relative path"});
  w = Options();
  w.data_dir = "out\"\n.byte 1";
  cases.push_back({w, "is not a plain relative path"});
  if (const isa::VecIsa* neon = isa::FindIsa("neon"); neon != nullptr && !neon->emulator.empty()) {
    w = Options();
    w.isas = {"neon"};
    cases.push_back({w, "needs its own toolchain"});
  }
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<GeneratedFile>> files = WriteAotLibrary(TinyCnn(), {}, c.w);
    ASSERT_FALSE(files.ok()) << c.message;
    EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(files.status().message(), HasSubstr(c.message));
  }
}

// x: f32[3, 3] -> Det -> y: f32[]. Lowering has no Det: it becomes a
// reference fallback call.
std::string DetModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("det");
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Det");
  n->set_name("det0");
  n->add_input("x");
  n->add_output("y");
  auto type = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = t->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  };
  type(g->add_input(), "x", {3, 3});
  type(g->add_output(), "y", {});
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/det.onnx");
  std::ofstream out(path, std::ios::binary);
  m.SerializeToOstream(&out);
  return path;
}

TEST(AotWriterTest, ReferenceCallsOnlyWhenAsked) {
  WriterOptions w = Options();
  w.name = "det";
  w.header_include = "pkg/det.h";
  absl::StatusOr<std::vector<GeneratedFile>> refused = WriteAotLibrary(DetModel(), {}, w);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("'det0' (Det: "));
  EXPECT_THAT(refused.status().message(), HasSubstr("reference_calls = True"));

  w.reference_calls = true;
  absl::StatusOr<std::vector<GeneratedFile>> files = WriteAotLibrary(DetModel(), {}, w);
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, std::string> by_name;
  for (const GeneratedFile& f : *files) by_name[f.name] = f.contents;
  EXPECT_THAT(by_name["det_table.cc"], HasSubstr("#include \"runtime/reference_calls.h\""));
  EXPECT_THAT(by_name["det_table.cc"], HasSubstr("&kiln::runtime::CreateReferenceStep,"));

  // Without the option the Artifact has no reference steps.
  absl::StatusOr<std::vector<GeneratedFile>> tiny = WriteAotLibrary(TinyCnn(), {}, Options());
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  for (const GeneratedFile& f : *tiny) {
    if (f.name != "tiny_table.cc") continue;
    EXPECT_THAT(f.contents, HasSubstr("nullptr  // no reference_calls"));
    EXPECT_THAT(f.contents, ::testing::Not(HasSubstr("reference_calls.h")));
  }
}

TEST(AotWriterTest, MissingModelIsAnError) {
  absl::StatusOr<std::vector<GeneratedFile>> files =
      WriteAotLibrary("/nonexistent/model.onnx", {}, Options());
  EXPECT_FALSE(files.ok());
}

// cond: bool[], x: f32[3, 3] -> If(then: Det(x), else: ReduceMax(x)) -> y:
// f32[]. The branches are compiled programs of the library; the then
// branch's Det stays a reference call inside it.
std::string IfDetModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("if_det");
  auto type = [](onnx::ValueInfoProto* v, const std::string& name, int elem,
                 std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* shape = t->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  };
  auto branch = [&](const char* name, const char* op, const char* out) {
    onnx::GraphProto b;
    b.set_name(name);
    onnx::NodeProto* n = b.add_node();
    n->set_op_type(op);
    n->set_name(absl::StrCat(name, "_", op));
    n->add_input("x");
    n->add_output(out);
    if (std::string(op) == "ReduceMax") {
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name("keepdims");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(0);
    }
    type(b.add_output(), out, onnx::TensorProto::FLOAT, {});
    return b;
  };
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("If");
  n->set_name("if0");
  n->add_input("cond");
  n->add_output("y");
  for (auto [attr, b] : {std::pair{"then_branch", branch("then", "Det", "det_y")},
                         std::pair{"else_branch", branch("else", "ReduceMax", "max_y")}}) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = b;
  }
  type(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
  type(g->add_input(), "x", onnx::TensorProto::FLOAT, {3, 3});
  type(g->add_output(), "y", onnx::TensorProto::FLOAT, {});
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/if_det.onnx");
  std::ofstream out(path, std::ios::binary);
  m.SerializeToOstream(&out);
  return path;
}

TEST(AotWriterTest, IfBranchesAreSubprogramsAndTheirReferenceCallsCount) {
  WriterOptions w = Options();
  w.name = "if_det";
  w.header_include = "pkg/if_det.h";
  w.isas = {"scalar"};
  // The Det inside the then branch is a reference call of the library: refused.
  absl::StatusOr<std::vector<GeneratedFile>> refused = WriteAotLibrary(IfDetModel(), {}, w);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("(Det: "));
  EXPECT_THAT(refused.status().message(), ::testing::Not(HasSubstr("(If: ")));

  w.reference_calls = true;
  absl::StatusOr<std::vector<GeneratedFile>> files = WriteAotLibrary(IfDetModel(), {}, w);
  ASSERT_TRUE(files.ok()) << files.status();
  std::map<std::string, std::string> by_name;
  for (const GeneratedFile& f : *files) by_name[f.name] = f.contents;
  const nlohmann::json desc = nlohmann::json::parse(by_name["if_det_scalar_program.inc"]);
  // Then and else branch, each a program of its own before the model's.
  ASSERT_EQ(desc.at("subprograms").size(), 2u);
  ASSERT_EQ(desc.at("control_flow").size(), 1u);
  const nlohmann::json& call = desc.at("control_flow")[0];
  EXPECT_EQ(call.at("op"), "If");
  EXPECT_EQ(call.at("models"), nlohmann::json({0, 1}));
  // The else branch's loop kernel: its entry in the table, its arguments in
  // its own program's buffers.
  const nlohmann::json& else_kernels = desc.at("subprograms")[1].at("kernels");
  ASSERT_EQ(else_kernels.size(), 1u);
  const int entry = else_kernels[0].at("entry").get<int>();
  EXPECT_THAT(by_name["if_det_scalar_table.cc"], HasSubstr(absl::StrCat("{", entry, ", &")));
  absl::StatusOr<ir::loop::LoopProgram> else_program =
      ir::loop::ParseProgram(desc.at("subprograms")[1].at("program").get<std::string>());
  ASSERT_TRUE(else_program.ok()) << else_program.status();
  for (int a : else_kernels[0].at("args").get<std::vector<int>>()) {
    EXPECT_GE(a, 0);
    EXPECT_LT(a, static_cast<int>(else_program->buffers.size()));
  }
}

}  // namespace
}  // namespace kiln::aot
