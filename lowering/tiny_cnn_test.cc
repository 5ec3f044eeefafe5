// Whole-model test: models/tiny_cnn (Conv/BN/ReLU/MaxPool/residual Add/
// GlobalAveragePool/Flatten/Gemm/Softmax) imported, lowered, run (loop
// interpreter + reference for the Conv/Gemm externs) and checked against
// the ONNX test data shipped with the model.
#include <string>

#include "gtest/gtest.h"
#include "frontend/onnx/importer.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "interp/loop_module.h"
#include "lowering/lower_graph.h"
#include "interp/compare.h"

namespace kiln::lowering {
namespace {

constexpr char kDir[] = "models/tiny_cnn/";

TEST(TinyCnn, MatchesShippedOutput) {
  absl::StatusOr<frontend::ImportResult> model =
      frontend::ImportModelFile(std::string(kDir) + "model.onnx");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<ir::Tensor> input =
      frontend::LoadTensorFile(std::string(kDir) + "test_data_set_0/input_0.pb");
  absl::StatusOr<ir::Tensor> expected =
      frontend::LoadTensorFile(std::string(kDir) + "test_data_set_0/output_0.pb");
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_TRUE(expected.ok()) << expected.status();

  absl::StatusOr<ir::loop::LoopModule> lp = LowerGraph(model->graph);
  ASSERT_TRUE(lp.ok()) << lp.status();
  int externs = 0, loops = 0;
  for (const ir::loop::Kernel& k : lp->program.kernels) {
    (k.kind == ir::loop::Kernel::Kind::kExtern ? externs : loops)++;
    EXPECT_FALSE(k.ops.empty()) << k.name;
  }
  // 4 Conv + 1 Gemm; BN x4, Relu x4, MaxPool, Add, GAP, Softmax, and one
  // copy: Flatten is a view, and an extern call takes whole buffers of their
  // declared shape, so the flattened [1,16] operand of the Gemm is
  // materialized.
  EXPECT_EQ(externs, 5) << ir::loop::PrintProgram(lp->program);
  EXPECT_EQ(loops, 13) << ir::loop::PrintProgram(lp->program);

  absl::StatusOr<std::vector<ir::Tensor>> out = interp::RunLoopModule(*lp, {*input});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  interp::Tolerance tol;
  tol.rtol = 1e-4;
  tol.atol = 1e-6;
  interp::CompareResult r = interp::CompareTensors((*out)[0], *expected, tol);
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace kiln::lowering
