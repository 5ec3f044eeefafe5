// File: lowering/lowerer.h — internal to lowering/: the state shared by the
// per-family op lowerings (math.cc, nn.cc, tensor.cc, ...): how a graph value
// is read (Operand), buffer allocation, kernel creation and the op table.
#ifndef KILN_LOWERING_LOWERER_H_
#define KILN_LOWERING_LOWERER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"
#include "ir/loop/index_expr.h"
#include "ir/loop/loop_ir.h"
#include "ir/loop/module.h"
#include "ir/message.h"
#include "lowering/lower_graph.h"

namespace kiln::lowering::internal {

using ir::DType;
using ir::Shape;
using ir::ValueId;
using ir::loop::IndexExpr;
using ir::loop::KernelBuilder;
using ir::loop::OpCode;
using ir::loop::ReduceKind;
using Coords = std::vector<IndexExpr>;

// How to read a graph value inside a kernel: the logical coordinates of an
// element map to a flat offset in the storage of `root` (a value that owns a
// buffer). View ops compose `index` instead of copying; a value whose
// elements are all equal may have no storage at all (`splat`).
struct Operand {
  DType dtype = DType::kInvalid;
  Shape shape;
  ValueId root = ir::kNoValue;
  std::function<IndexExpr(const Coords&)> index;
  std::optional<double> splat;
};

// Row-major flat offset of `coords` in `shape`.
IndexExpr LinearIndex(const Shape& shape, const Coords& coords);
// Coordinates in `shape` of the row-major flat offset `linear`.
Coords Delinearize(const Shape& shape, const IndexExpr& linear);
// The coordinates `in_shape` reads at for output coordinates `out`, with
// numpy broadcasting (right-aligned; size-1 dims read at 0).
Coords BroadcastCoords(const Shape& in_shape, const Coords& out);
// Axis in [-rank, rank) normalized to [0, rank); nullopt when out of range.
std::optional<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

// Builds one loop kernel; iteration variable coordinates are i(0..n-1).
class Emitter {
 public:
  Emitter(class Lowerer* lowerer, std::vector<int64_t> ranges,
         std::vector<int64_t> reduction_ranges, std::string description);

  KernelBuilder& b() { return builder_; }
  // i0, i1, ... as coordinates.
  Coords IterCoords() const;
  IndexExpr i(int k) const { return builder_.i(k); }
  IndexExpr r(int k) const { return builder_.r(k); }
  // Loads `op` at its own logical coordinates (simplified index).
  absl::StatusOr<int32_t> Load(const Operand& op, const Coords& coords);
  // Loads `op` broadcast to output coordinates `out`.
  absl::StatusOr<int32_t> LoadBroadcast(const Operand& op, const Coords& out);
  // Stores `value` into `buffer` (row-major of `shape`) at `coords`.
  void Store(int32_t buffer, const Shape& shape, const Coords& coords,
             int32_t value);
  int32_t Const(DType dtype, double v) { return builder_.Constant(dtype, v); }
  int32_t Bin(OpCode code, int32_t a, int32_t b) {
    return builder_.Binary(code, a, b);
  }
  int32_t Un(OpCode code, int32_t a) { return builder_.Unary(code, a); }
  int32_t Sel(int32_t c, int32_t a, int32_t b) { return builder_.Select(c, a, b); }
  int32_t Cast(int32_t v, DType d) { return builder_.Cast(v, d); }
  DType DTypeOf(int32_t v) { return builder_.kernel().body[v].dtype; }
  IndexExpr Simplify(const IndexExpr& e) const;

 private:
  class Lowerer* lowerer_;
  KernelBuilder builder_;
  std::vector<int64_t> extents_;
  int num_ranges_ = 0;
};

class Lowerer;
using LowerFn = std::function<absl::Status(Lowerer&, const ir::Node&)>;

// The op table: each op type has exactly one lowering. Every family file
// (math.cc, nn.cc, tensor.cc, ... named after the onnx/defs folder that
// defines the op) adds its ops; adding an op twice is a kiln bug, reported by
// status() (LowerGraph returns it), never resolved by registration order.
class LowerTable {
 public:
  void Add(absl::string_view op, LowerFn lowering);
  // Adds `op` lowered to one extern kernel (LowerExternCall).
  void AddExternCall(absl::string_view op);
  // The same, unless `loop_form` lowers the node itself (returns true).
  void AddExternCallWithLoopForm(
      absl::string_view op, std::function<absl::StatusOr<bool>(Lowerer&, const ir::Node&)> loop_form);
  // The same after `check` (the node's own consistency checks, which return
  // InvalidArgument naming the node) passed.
  void AddExternCall(absl::string_view op, LowerFn check);

  // nullptr when `op` has no lowering.
  const LowerFn* Find(absl::string_view op) const;
  // Whether `op` was added with AddExternCall.
  bool IsExternCall(absl::string_view op) const;
  // OK, or an internal error naming the first op added twice.
  const absl::Status& status() const { return status_; }

 private:
  std::map<std::string, LowerFn, std::less<>> lowerings_;
  std::set<std::string, std::less<>> extern_calls_;
  absl::Status status_;
};

// One per family file.
void AddMathLowerings(LowerTable& table);
void AddNnLowerings(LowerTable& table);
void AddTensorLowerings(LowerTable& table);
void AddReductionLowerings(LowerTable& table);
void AddLogicalLowerings(LowerTable& table);
void AddGeneratorLowerings(LowerTable& table);
void AddQuantizationLowerings(LowerTable& table);
void AddObjectDetectionLowerings(LowerTable& table);
void AddRnnLowerings(LowerTable& table);
// kiln's own ops (domain "kiln"): the fused library calls.
void AddFusedLowerings(LowerTable& table);

// Every family's lowerings, built once.
const LowerTable& OpLowerings();

// Lowers the current node to one extern kernel: the op and its attributes,
// inputs materialized as row-major buffers (extern_call.cc).
absl::Status LowerExternCall(Lowerer& L, const ir::Node& n);

// ConvTranspose / kiln.FusedConvTranspose as one reduction loop kernel when
// LoweringOptions::conv_transpose_loop_max_channels admits it (nn.cc): true
// when it lowered the node, false to leave it to the library call.
absl::StatusOr<bool> LowerConvTransposeLoopForm(Lowerer& L, const ir::Node& n);

class Lowerer {
 public:
  Lowerer(const ir::Graph& graph, const LoweringOptions& options);

  absl::StatusOr<ir::loop::LoopModule> Run();

  const ir::Graph& graph() const { return graph_; }
  int64_t opset() const { return graph_.opset(); }
  const LoweringOptions& options() const { return options_; }
  const ir::Node& node() const { return *node_; }
  ir::loop::LoopProgram& program() { return result_.program; }

  // ---- Reading inputs of the current node.
  bool HasInput(int i) const { return node_->has_input(i); }
  absl::StatusOr<Operand> Input(int i);
  // The input's data when known at lowering time (graph constant or folded),
  // else nullptr.
  const ir::Tensor* ConstantInput(int i) const;
  // Reads a constant integer vector input (axes, pads, ...); InvalidArgument
  // if absent, Unimplemented if not constant.
  absl::StatusOr<std::vector<int64_t>> ConstantInts(int i, const char* what);

  // ---- Outputs of the current node.
  bool HasOutput(int i) const {
    return i < static_cast<int>(node_->outputs.size()) &&
           node_->outputs[i] != ir::kNoValue;
  }
  const ir::Value& OutputValue(int i) const {
    return graph_.value(node_->outputs[i]);
  }
  // A fresh row-major buffer holding output i (an output buffer when the
  // value is a graph output); the value reads from it.
  int32_t OutputBuffer(int i);
  // Output i is a view (or splat) of other storage.
  void SetOutputView(int i, Operand op);
  // Output i is operand `op` itself (Identity, a Cast to its own dtype, a
  // no-op reduction): InvalidArgument when the output's type, as the model
  // declares it, is not the operand's shape, since the view would then be
  // read with coordinates of another shape.
  absl::Status SetOutputSame(int i, Operand op);
  // Output i is known at lowering time.
  void SetOutputConstant(int i, ir::Tensor t);

  // ---- Kernels and buffers.
  // A new kernel that records the current node.
  std::unique_ptr<Emitter> NewKernel(std::vector<int64_t> ranges,
                                    std::vector<int64_t> reduction_ranges = {});
  std::string NewKernelName(absl::string_view what);
  // Buffer index of a value that owns storage (created on first use for
  // constants).
  absl::StatusOr<int32_t> BufferOf(ValueId root);
  // A row-major buffer holding `op` (itself when it already is one; else a
  // copy kernel into a new intermediate buffer).
  absl::StatusOr<int32_t> Materialize(const Operand& op);
  std::string NodeLabel() const;
  // Lowers the current node to one extern kernel (LowerExternCall) when
  // options().library_call (if set) says the library runs it: true. False
  // when it does not (why: `*why`), with everything the attempt added
  // undone, so the caller lowers the node's loop form instead.
  absl::StatusOr<bool> TryLibraryCall(const ir::Node& node, std::string* why = nullptr);

  // An InvalidArgument error naming the node; string arguments (attribute
  // values, names) are escaped and capped (ir/message.h's MessageArg).
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(
        absl::StrCat(node_->Describe(), ": ", kiln::MessageArg(args)...));
  }
  template <typename... Args>
  absl::Status Unimplemented(const Args&... args) const {
    return absl::UnimplementedError(
        absl::StrCat(node_->Describe(), ": ", args...));
  }

 private:
  // What lowering one node adds, to undo a lowering that was refused.
  struct Checkpoint {
    size_t buffers = 0;
    size_t kernels = 0;
    int kernel_counter = 0;
  };
  Checkpoint Mark() const;
  void Rollback(const Checkpoint& mark, const ir::Node& node);
  absl::Status CheckStaticShapes() const;
  absl::Status LowerNode(const ir::Node& node);
  absl::Status BindOutputs();
  int32_t AddBuffer(ValueId value, ir::loop::BufferKind kind);
  std::string UniqueBufferName(const std::string& model_name);
  Operand OwnedOperand(ValueId v) const;
  bool IsRowMajorIdentity(const Operand& op);
  std::optional<double> SplatOf(const ir::Tensor& t) const;
  void CopyKernel(const Operand& src, int32_t dst, const Shape& shape);

  const ir::Graph& graph_;
  const LoweringOptions& options_;
  ir::loop::LoopModule result_;
  const ir::Node* node_ = nullptr;
  int node_index_ = 0;
  absl::flat_hash_map<ValueId, Operand> operands_;
  absl::flat_hash_map<ValueId, int32_t> buffers_;  // values owning storage
  absl::flat_hash_map<ValueId, std::shared_ptr<const ir::Tensor>> folded_;
  std::set<ValueId> graph_outputs_;
  std::set<std::string> used_names_;
  int kernel_counter_ = 0;
};

}  // namespace kiln::lowering::internal

#endif  // KILN_LOWERING_LOWERER_H_
