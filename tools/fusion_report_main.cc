// File: tools/fusion_report_main.cc — fusion_report: ONNX models in the
// test layout (model.onnx + test_data_set_0/) through kiln's graph passes
// (compiler::Compile up to the graph passes), reporting what
// fuse-onednn-post-ops did — anchors fused, post-ops per kind, why chains
// stopped — and whether the reference interpreter still matches the model's
// test data with and without the fusion.
//
//   bazel run //tools:fusion_report -- ~/.cache/kiln/zoo/resnet50 ...
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compiler/pipeline.h"
#include "frontend/onnx/importer.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "ir/status_macros.h"
#include "passes/graph/fuse_onednn_post_ops.h"

namespace kiln::tools {
namespace {

struct DataSet {
  std::vector<ir::Tensor> inputs;
  std::vector<ir::Tensor> outputs;
};

absl::StatusOr<DataSet> LoadDataSet(const std::string& dir, int num_inputs) {
  DataSet d;
  for (int k = 0; k < num_inputs; ++k) {
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, frontend::LoadTensorFile(absl::StrCat(
                                            dir, "/input_", k, ".pb")));
    d.inputs.push_back(std::move(t));
  }
  for (int k = 0;; ++k) {
    const std::string path = absl::StrCat(dir, "/output_", k, ".pb");
    if (!std::filesystem::exists(path)) break;
    KILN_ASSIGN_OR_RETURN(ir::Tensor t, frontend::LoadTensorFile(path));
    d.outputs.push_back(std::move(t));
  }
  return d;
}

// kilnc check's rule: max error within 1e-4 of the output's largest magnitude.
absl::StatusOr<std::string> Check(const ir::Graph& g, const DataSet& data,
                                  bool* ok) {
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> got, interp::Run(g, data.inputs));
  interp::Tolerance tol;
  tol.max_rel = 1e-4;
  std::string text;
  *ok = got.size() == data.outputs.size();
  for (size_t i = 0; i < got.size() && i < data.outputs.size(); ++i) {
    const interp::CompareResult c = interp::CompareTensors(got[i], data.outputs[i], tol);
    *ok = *ok && c.ok;
    absl::StrAppendFormat(&text, " out%d: max_abs %.3g rel_to_max %.3g %s;", i,
                          c.max_abs_error, c.rel_to_max, c.ok ? "ok" : "MISMATCH");
  }
  return text;
}

bool IsElementwise(const ir::Node& n) {
  static const char* kOps[] = {"Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "Elu",
                               "Sigmoid", "Tanh", "Erf", "Pow", "Sqrt", "Exp",
                               "Clip", "HardSwish", "HardSigmoid", "Where", "Neg"};
  if (!n.domain.empty()) return false;
  for (const char* op : kOps) {
    if (n.op == op) return true;
  }
  return false;
}

// The fusion pass's figures, read right after it ran.
class FusionStats final : public compiler::PipelineObserver {
 public:
  absl::Status AfterGraphPass(int index, const passes::GraphPass* pass, bool changed,
                              const ir::Graph& graph) override {
    if (const auto* fuse = dynamic_cast<const passes::FuseOneDnnPostOps*>(pass)) {
      stats = fuse->stats();
    }
    return absl::OkStatus();
  }
  passes::OneDnnFusionStats stats;
};

absl::Status Report(const std::string& dir) {
  const std::string model = dir + "/model.onnx";
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult first, frontend::ImportModelFile(model));
  KILN_ASSIGN_OR_RETURN(DataSet data,
                        LoadDataSet(dir + "/test_data_set_0",
                                    static_cast<int>(first.graph.inputs().size())));
  frontend::ImportOptions opts;  // bind dynamic dims to the data's shapes
  for (size_t k = 0; k < data.inputs.size(); ++k) {
    opts.input_shapes[first.graph.value(first.graph.inputs()[k]).name] =
        data.inputs[k].shape();
  }
  KILN_ASSIGN_OR_RETURN(frontend::ImportResult imported,
                        frontend::ImportModelFile(model, opts));
  const ir::Graph& original = imported.graph;

  // The graph passes as kiln runs them, and again without the fusion.
  compiler::PipelineOptions options;
  options.stop_after = compiler::Stage::kGraphPasses;
  FusionStats fusion;
  KILN_ASSIGN_OR_RETURN(compiler::CompiledProgram fused,
                        compiler::Compile(original, compiler::Target{}, options, &fusion));
  options.disabled_passes = {"fuse-onednn-post-ops"};
  KILN_ASSIGN_OR_RETURN(compiler::CompiledProgram unfused,
                        compiler::Compile(original, compiler::Target{}, options, nullptr));

  const passes::OneDnnFusionStats& s = fusion.stats;
  std::printf("== %s\n", dir.c_str());
  std::printf("nodes: %zu imported, %zu after weight folds, %zu after fusion\n",
              original.nodes().size(), unfused.graph.nodes().size(),
              fused.graph.nodes().size());
  std::printf("anchors: %d seen, %d supported, %d fused\n", s.anchors, s.supported,
              s.fused);
  std::map<std::string, int> by_op;
  for (const ir::Node& n : fused.graph.nodes()) {
    if (n.domain == "kiln") ++by_op[n.op];
  }
  for (const auto& [op, k] : by_op) std::printf("  kiln.%s: %d\n", op.c_str(), k);
  std::printf("post-ops:\n");
  for (const auto& [kind, k] : s.post_ops) std::printf("  %-12s %d\n", kind.c_str(), k);
  if (!s.unsupported.empty()) std::printf("anchors refused:\n");
  for (const auto& [why, k] : s.unsupported) std::printf("  %4d  %s\n", k, why.c_str());
  std::printf("chains stopped because:\n");
  for (const auto& [why, k] : s.chain_ends) std::printf("  %4d  %s\n", k, why.c_str());
  std::map<std::string, int> left;
  for (const ir::Node& n : fused.graph.nodes()) {
    if (IsElementwise(n)) ++left[n.op];
  }
  std::printf("element-wise nodes left in the graph:");
  for (const auto& [op, k] : left) std::printf(" %s %d", op.c_str(), k);
  std::printf("\n");

  bool ok_fused = false, ok_unfused = false;
  KILN_ASSIGN_OR_RETURN(std::string fused_text, Check(fused.graph, data, &ok_fused));
  KILN_ASSIGN_OR_RETURN(std::string unfused_text, Check(unfused.graph, data, &ok_unfused));
  std::printf("test_data_set_0 (max_rel 1e-4), fused:  %s%s\n",
              ok_fused ? "PASS" : "FAIL", fused_text.c_str());
  std::printf("test_data_set_0 (max_rel 1e-4), before fusion: %s%s\n",
              ok_unfused ? "PASS" : "FAIL", unfused_text.c_str());
  if (!ok_fused) return absl::InternalError("fusion changed the model");
  return absl::OkStatus();
}

}  // namespace
}  // namespace kiln::tools

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fusion_report MODEL_DIR...\n");
    return 2;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    absl::Status s = kiln::tools::Report(argv[i]);
    if (!s.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[i], std::string(s.message()).c_str());
      status = 1;
    }
  }
  return status;
}
