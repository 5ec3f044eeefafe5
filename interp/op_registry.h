// File: interp/op_registry.h — how reference kernels plug in.
// Each ONNX operator family (the onnx/defs folder defining the op: math, nn,
// tensor, ...) has one file of that name defining its kernels and a
// Register<Family>Ops(OpRegistry*) function; interpreter.cc calls them all.
//
//   absl::StatusOr<std::vector<Tensor>> Relu(OpContext& ctx) { ... }
//   void RegisterMathOps(OpRegistry* r) { r->Register("Relu", Relu); }
#ifndef KILN_INTERP_OP_REGISTRY_H_
#define KILN_INTERP_OP_REGISTRY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/graph/graph.h"
#include "ir/message.h"

namespace kiln::interp {

using ir::Tensor;

// What a kernel sees: its node, its inputs (nullptr for an omitted optional
// input) and a way to run subgraphs (If) in the current scope.
struct OpContext {
  const ir::Node& node;
  const ir::Graph& graph;       // the graph the node belongs to
  int64_t opset;                // default-domain opset version of the model
  std::vector<const Tensor*> inputs;
  // Runs a subgraph attribute with the given formal inputs; its captures are
  // resolved in the scope of this node.
  std::function<absl::StatusOr<std::vector<Tensor>>(
      const ir::Graph& subgraph, absl::Span<const Tensor> inputs)>
      run_subgraph;
  // RunOptions::max_result_elements of this run (0: none); CheckResultShape
  // and CheckOutputSize enforce it.
  int64_t max_result_elements = 0;

  int num_inputs() const { return static_cast<int>(inputs.size()); }
  bool has_input(int i) const {
    return i < num_inputs() && inputs[i] != nullptr;
  }
  // Input i, or InvalidArgument naming the node if it is missing.
  absl::StatusOr<const Tensor*> Input(int i) const;
  // Number of outputs the node declares (including omitted optional ones).
  int num_outputs() const { return static_cast<int>(node.outputs.size()); }
  // An InvalidArgument error prefixed with the node's description; string
  // arguments (names, attribute values) are escaped and capped (MessageArg).
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(
        absl::StrCat(node.Describe(), ": ", kiln::MessageArg(args)...));
  }
};

// Returns the node's outputs in order. Kernels may return fewer tensors than
// the node declares only when the missing trailing outputs are omitted, and
// more when the node omits trailing optional outputs (the extras are dropped).
using OpKernel = std::function<absl::StatusOr<std::vector<Tensor>>(OpContext&)>;

// Each op has exactly one kernel: registering an op twice is a kiln bug,
// reported by status() (Run returns it), never resolved by registration order.
class OpRegistry {
 public:
  void Register(std::string op, OpKernel kernel);
  // nullptr if the op has no kernel.
  const OpKernel* Find(absl::string_view op) const {
    auto it = kernels_.find(op);
    return it == kernels_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> SupportedOps() const;
  // OK, or an internal error naming the first op registered twice.
  const absl::Status& status() const { return status_; }

  // The registry with every reference kernel.
  static const OpRegistry& Default();

 private:
  absl::flat_hash_map<std::string, OpKernel> kernels_;
  absl::Status status_;
};

// One per family file.
void RegisterMathOps(OpRegistry* registry);
void RegisterNnOps(OpRegistry* registry);
void RegisterTensorOps(OpRegistry* registry);
void RegisterReductionOps(OpRegistry* registry);
void RegisterLogicalOps(OpRegistry* registry);
void RegisterGeneratorOps(OpRegistry* registry);
void RegisterQuantizationOps(OpRegistry* registry);
void RegisterObjectDetectionOps(OpRegistry* registry);
void RegisterRnnOps(OpRegistry* registry);
void RegisterControlFlowOps(OpRegistry* registry);
// kiln's own ops (domain "kiln"), registered as "kiln.<Op>": the fused
// library calls FusedConv, FusedConvTranspose, FusedMatMul, FusedGemm and
// FusedLSTM.
void RegisterFusedOps(OpRegistry* registry);

}  // namespace kiln::interp

#endif  // KILN_INTERP_OP_REGISTRY_H_
