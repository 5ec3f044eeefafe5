// File: interp/op_registry_test.cc — the reference op registry: one kernel
// per op, a second registration refused.
#include "interp/op_registry.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::interp {
namespace {

absl::StatusOr<std::vector<Tensor>> NoOutputs(OpContext&) {
  return std::vector<Tensor>{};
}

TEST(OpRegistry, RefusesASecondKernelOfAnOp) {
  OpRegistry registry;
  registry.Register("Relu", NoOutputs);
  registry.Register("Tanh", NoOutputs);
  EXPECT_TRUE(registry.status().ok()) << registry.status();
  registry.Register("Relu", NoOutputs);
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(registry.status().message().find("op Relu has two reference kernels"),
            std::string::npos)
      << registry.status();
  EXPECT_EQ(registry.SupportedOps(), (std::vector<std::string>{"Relu", "Tanh"}));
}

TEST(OpRegistry, DefaultHasOneKernelPerOp) {
  const OpRegistry& registry = OpRegistry::Default();
  EXPECT_TRUE(registry.status().ok()) << registry.status();
  // One op of each family file, and kiln's own.
  for (const char* op :
       {"Relu", "Conv", "Reshape", "ReduceSum", "Equal", "Range",
        "QuantizeLinear", "NonMaxSuppression", "LSTM", "If", "kiln.FusedConv"}) {
    EXPECT_NE(registry.Find(op), nullptr) << op;
  }
}

}  // namespace
}  // namespace kiln::interp
