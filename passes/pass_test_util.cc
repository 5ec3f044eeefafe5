// Text-IR pass test driver: parse, run, verify, FileCheck, and compare the
// reference interpreter's results before and after.
#include "passes/pass_test_util.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "ir/graph/text.h"
#include "ir/graph/verifier.h"
#include "ir/status_macros.h"
#include "interp/compare.h"
#include "testing/filecheck.h"
#include "interp/interpreter.h"

namespace kiln::passes {

absl::StatusOr<PassCheckResult> RunPassAndCheck(GraphPass& pass,
                                                const std::string& test_text,
                                                const interp::Tolerance& tolerance) {
  KILN_ASSIGN_OR_RETURN(ir::Graph before, ir::ParseGraph(test_text));
  KILN_RETURN_IF_ERROR(ir::VerifyGraph(before, ir::Blame::kModel));
  KILN_ASSIGN_OR_RETURN(ir::Graph after, ir::ParseGraph(test_text));
  PassCheckResult result;
  KILN_ASSIGN_OR_RETURN(result.changed, pass.Run(&after));
  KILN_RETURN_IF_ERROR(ir::VerifyGraph(after));
  result.output = ir::PrintGraph(after);
  absl::Status check = testing::RunFileCheck(result.output, test_text);
  if (!check.ok()) {
    return absl::Status(check.code(), absl::StrCat(check.message(),
                                                   "\n--- whole output ---\n",
                                                   result.output));
  }

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<ir::Tensor> inputs;
  for (ir::ValueId in : before.inputs()) {
    const ir::Value& v = before.value(in);
    if ((v.dtype != ir::DType::kF32 && v.dtype != ir::DType::kF16) || !v.shape_known ||
        ir::NumElements(v.shape) < 0) {
      return result;  // numeric check only for static float inputs
    }
    ir::Tensor t(v.dtype, v.shape);
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if (v.dtype == ir::DType::kF16) {
        t.data<ir::Float16>()[i] = ir::FloatToHalf(dist(rng));
      } else {
        t.data<float>()[i] = dist(rng);
      }
    }
    inputs.push_back(std::move(t));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> want, interp::Run(before, inputs));
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> got, interp::Run(after, inputs));
  if (want.size() != got.size()) {
    return absl::FailedPreconditionError("the pass changed the number of outputs");
  }
  for (size_t i = 0; i < want.size(); ++i) {
    interp::CompareResult c = interp::CompareTensors(got[i], want[i], tolerance);
    if (!c.ok) {
      return absl::FailedPreconditionError(
          absl::StrCat("output ", i, " changed numerically: ", c.message));
    }
  }
  return result;
}

}  // namespace kiln::passes
