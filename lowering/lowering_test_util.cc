// Seeded random inputs and the lower-run-compare loop for lowering tests.
#include "lowering/lowering_test_util.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "interp/compare.h"
#include "interp/interpreter.h"
#include "interp/loop_module.h"
#include "ir/graph/text.h"
#include "ir/loop/module.h"
#include "ir/loop/text.h"
#include "ir/status_macros.h"

namespace kiln::lowering::testing {

ir::Tensor RandomTensor(ir::DType dtype, const ir::Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(-3.0, 3.0);
  std::uniform_int_distribution<int> integer(-5, 5);
  ir::Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (dtype) {
      case ir::DType::kF32: t.data<float>()[i] = static_cast<float>(real(rng)); break;
      case ir::DType::kF64: t.data<double>()[i] = real(rng); break;
      case ir::DType::kF16:
        t.data<ir::Float16>()[i] = ir::FloatToHalf(static_cast<float>(real(rng)));
        break;
      case ir::DType::kBF16:
        t.data<ir::BFloat16>()[i] = ir::FloatToBFloat16(static_cast<float>(real(rng)));
        break;
      case ir::DType::kI64: t.data<int64_t>()[i] = integer(rng); break;
      case ir::DType::kI32: t.data<int32_t>()[i] = integer(rng); break;
      case ir::DType::kI8: t.data<int8_t>()[i] = static_cast<int8_t>(integer(rng)); break;
      case ir::DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(integer(rng) + 5); break;
      case ir::DType::kBool: t.data<bool>()[i] = (rng() & 1) != 0; break;
      case ir::DType::kInvalid: break;
    }
  }
  return t;
}

absl::Status CheckLoweringOfGraph(const ir::Graph& graph,
                                  const CheckOptions& options) {
  std::vector<ir::Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    auto it = options.inputs.find(static_cast<int>(i));
    if (it != options.inputs.end()) {
      inputs.push_back(it->second);
      continue;
    }
    const ir::Value& v = graph.value(graph.inputs()[i]);
    inputs.push_back(RandomTensor(v.dtype, v.shape, options.seed * 7919 + i));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> expected,
                        interp::Run(graph, inputs));
  KILN_ASSIGN_OR_RETURN(ir::loop::LoopModule lowered, LowerGraph(graph, options.lowering));
  absl::StatusOr<std::vector<ir::Tensor>> actual =
      interp::RunLoopModule(lowered, inputs);
  const std::string program = ir::loop::PrintProgram(lowered.program);
  if (!actual.ok()) {
    return absl::Status(actual.status().code(),
                        absl::StrCat(actual.status().message(), "\n", program));
  }
  if (actual->size() != expected.size()) {
    return absl::InternalError("output counts differ");
  }
  interp::Tolerance tol;
  tol.rtol = options.rtol;
  tol.atol = options.atol;
  for (size_t i = 0; i < expected.size(); ++i) {
    interp::CompareResult r =
        interp::CompareTensors((*actual)[i], expected[i], tol);
    if (!r.ok) {
      return absl::InternalError(
          absl::StrCat("output ", i, ": ", r.message, "\n", program));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLowering(absl::string_view graph_text,
                           const CheckOptions& options) {
  KILN_ASSIGN_OR_RETURN(ir::Graph graph, ir::ParseGraph(graph_text));
  return CheckLoweringOfGraph(graph, options);
}

}  // namespace kiln::lowering::testing
