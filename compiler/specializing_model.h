// File: compiler/specializing_model.h — a compiled model whose inputs take any
// size of their dynamic dims: one shape-specialized program per combination
// of input shapes, compiled on first sight, kept in a bounded LRU cache.
//
//   KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model,
//       compiler::SpecializingModel::Create(declared, std::move(first),
//                                           /*capacity=*/4, specialize));
//   model->Run({ids_1x16, mask_1x16});  // compiles [1,16] on first sight
//   model->Run({ids_1x32, mask_1x32});  // another specialization
//
// kiln::Compiler::CompileFile makes one for a model with dynamic input dims
// left unbound (CompileOptions::max_shape_specializations).
#ifndef KILN_COMPILER_SPECIALIZING_MODEL_H_
#define KILN_COMPILER_SPECIALIZING_MODEL_H_

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "frontend/onnx/importer.h"
#include "ir/graph/tensor.h"
#include "runtime/compiled_model.h"
#include "runtime/mutex.h"

namespace kiln::compiler {

// Compiles the model with every input bound to a static shape (input name
// -> shape; every input given).
using SpecializeFn = std::function<absl::StatusOr<std::unique_ptr<CompiledModel>>(
    const std::map<std::string, ir::Shape>& shapes)>;

class SpecializingModel final : public CompiledModel {
 public:
  // `declared`: the model's inputs as declared, in order (frontend::
  // ImportResult::declared_inputs), with the inputs the compile bound
  // (CompileOptions::input_shapes) given their bound shape. `first`: the
  // specialization at the shapes its inputs() say, compiled in
  // `first_compile_ms`. `capacity` (> 0): live specializations at most.
  static absl::StatusOr<std::unique_ptr<CompiledModel>> Create(
      std::vector<frontend::DeclaredInput> declared, std::unique_ptr<CompiledModel> first,
      double first_compile_ms, int capacity, SpecializeFn specialize);

  // Inputs whose shapes break the declared ones (rank, a static dim, dims
  // of one symbol that disagree) are InvalidArgument naming the input and
  // both shapes; a new combination of shapes is compiled first (its
  // compile error, if any, is returned naming the shapes). Outputs have the
  // shapes of that specialization.
  absl::StatusOr<std::vector<ir::Tensor>> Run(absl::Span<const ir::Tensor> inputs) const override;
  absl::StatusOr<std::vector<ir::Tensor>> RunNamed(
      const std::map<std::string, ir::Tensor>& inputs) const override;
  // An output tensor whose shape is not this specialization's is replaced
  // by one of its shape (repeated runs of one shape allocate only once).
  absl::Status RunInto(absl::Span<const ir::Tensor> inputs,
                       absl::Span<ir::Tensor* const> outputs) const override;
  // Timings index report().kernels, which are the first specialization's:
  // Profile runs at the shapes inputs() says; other shapes are
  // InvalidArgument.
  absl::StatusOr<std::vector<ir::Tensor>> Profile(
      absl::Span<const ir::Tensor> inputs, std::vector<KernelTiming>* timings) const override;

  // The first specialization's, inputs with declared_shape and dim_params.
  const std::vector<TensorInfo>& inputs() const override { return inputs_; }
  const std::vector<TensorInfo>& outputs() const override { return outputs_; }
  // The first specialization's report with CompileReport::specializations;
  // read it when no Run compiling a new shape is in flight.
  const CompileReport& report() const override { return report_; }

 private:
  using Key = std::vector<ir::Shape>;  // one shape per input, in order
  struct Entry {
    Key key;
    std::shared_ptr<const CompiledModel> model;
    int index = -1;  // into report_.specializations
  };

  SpecializingModel(std::vector<TensorInfo> inputs, std::vector<TensorInfo> outputs,
                    CompileReport report, int capacity, SpecializeFn specialize)
      : inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        capacity_(capacity),
        specialize_(std::move(specialize)),
        report_(std::move(report)) {}

  // InvalidArgument when `inputs` do not fit the declared shapes.
  absl::Status Check(absl::Span<const ir::Tensor> inputs) const;
  // The specialization for `inputs`' shapes, compiled if new.
  absl::StatusOr<std::shared_ptr<const CompiledModel>> For(
      absl::Span<const ir::Tensor> inputs) const;
  std::string KeyText(const Key& key) const;

  std::vector<TensorInfo> inputs_, outputs_;
  Key first_key_;
  const int capacity_;
  const SpecializeFn specialize_;
  // One compile at a time; runs of known shapes go on meanwhile. kiln's
  // Mutex, not absl::Mutex, so the thread sanitizer sees both (runtime/mutex.h).
  mutable runtime::Mutex compile_mu_;
  mutable runtime::Mutex mu_;
  // Most recently used first; at most capacity_ entries.
  mutable std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);
  mutable std::map<Key, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  mutable CompileReport report_;  // specializations updated under mu_
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_SPECIALIZING_MODEL_H_
