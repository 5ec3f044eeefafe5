// File: compiler/specializing_model.cc — kiln::compiler::SpecializingModel
// (compiler/specializing_model.h): shape checks, the LRU of specializations.
#include "compiler/specializing_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ir/message.h"
#include "ir/status_macros.h"

namespace kiln::compiler {
namespace {

// "[batch,4,sequence]": a declared shape with its symbols ("?" for a
// dynamic dim without one).
std::string DeclaredText(const TensorInfo& info) {
  std::vector<std::string> dims;
  for (size_t d = 0; d < info.declared_shape.size(); ++d) {
    if (info.declared_shape[d] != ir::kDynamicDim) {
      dims.push_back(absl::StrCat(info.declared_shape[d]));
    } else if (d < info.dim_params.size() && !info.dim_params[d].empty()) {
      dims.push_back(EscapeForMessage(info.dim_params[d], 64));
    } else {
      dims.push_back("?");
    }
  }
  return absl::StrCat(ir::DTypeName(info.dtype), "[", absl::StrJoin(dims, ","), "]");
}

bool IsDynamic(const TensorInfo& info) { return !info.declared_shape.empty() ||
                                                !info.dim_params.empty(); }

}  // namespace

absl::StatusOr<std::unique_ptr<CompiledModel>> SpecializingModel::Create(
    std::vector<frontend::DeclaredInput> declared, std::unique_ptr<CompiledModel> first,
    double first_compile_ms, int capacity, SpecializeFn specialize) {
  if (first == nullptr || capacity <= 0 || !specialize) {
    return absl::InternalError("SpecializingModel needs a model, a capacity and a compiler");
  }
  std::vector<TensorInfo> inputs = first->inputs();
  if (declared.size() != inputs.size()) {
    return absl::InternalError(absl::StrCat("the model declares ", declared.size(),
                                            " inputs, its compiled form has ", inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const frontend::DeclaredInput& d = declared[i];
    const bool dynamic = d.ranked && std::find(d.shape.begin(), d.shape.end(),
                                               ir::kDynamicDim) != d.shape.end();
    if (!dynamic) continue;  // one shape: the compiled one
    if (d.name != inputs[i].name || d.shape.size() != inputs[i].shape.size()) {
      return absl::InternalError(absl::StrCat("declared input ", i, " '", d.name,
                                              "' does not match its compiled form"));
    }
    inputs[i].declared_shape = d.shape;
    inputs[i].dim_params = d.dim_params;
  }
  CompileReport report = first->report();
  Key key;
  for (const TensorInfo& in : inputs) key.push_back(in.shape);
  std::vector<TensorInfo> outputs = first->outputs();
  auto* model = new SpecializingModel(std::move(inputs), std::move(outputs), std::move(report),
                                      capacity, std::move(specialize));
  std::unique_ptr<SpecializingModel> owned(model);
  model->first_key_ = key;
  CompileReport::ShapeSpecialization s;
  s.shapes = model->KeyText(key);
  s.compile_ms = first_compile_ms;
  s.jit_cache_hit = first->report().jit_cache_hit;
  {
    runtime::MutexLock lock(&model->mu_);
    model->report_.specializations.push_back(std::move(s));
    model->report_.live_specializations = 1;
    model->lru_.push_front(Entry{key, std::shared_ptr<const CompiledModel>(std::move(first)), 0});
    model->index_[key] = model->lru_.begin();
  }
  return std::unique_ptr<CompiledModel>(std::move(owned));
}

std::string SpecializingModel::KeyText(const Key& key) const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < key.size() && i < inputs_.size(); ++i) {
    parts.push_back(absl::StrCat(EscapeForMessage(inputs_[i].name, 64), ": ",
                                 ir::ShapeToString(key[i])));
  }
  return absl::StrJoin(parts, ", ");
}

absl::Status SpecializingModel::Check(absl::Span<const ir::Tensor> inputs) const {
  if (inputs.size() != inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model takes ", inputs_.size(), " inputs, got ", inputs.size()));
  }
  // symbol -> (size, the input that set it)
  std::map<std::string, std::pair<int64_t, size_t>> symbols;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& want = inputs_[i];
    const ir::Tensor& got = inputs[i];
    const std::string name = EscapeForMessage(want.name);
    if (got.dtype() != want.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", i, " '", name, "': expected ",
          IsDynamic(want) ? DeclaredText(want) : ir::TypeString(want.dtype, want.shape),
          ", got ", got.TypeString()));
    }
    if (!IsDynamic(want)) {
      if (got.shape() != want.shape) {
        return absl::InvalidArgumentError(
            absl::StrCat("input ", i, " '", name, "': expected ",
                         ir::TypeString(want.dtype, want.shape), ", got ", got.TypeString()));
      }
      continue;
    }
    const ir::Shape& declared = want.declared_shape;
    if (got.shape().size() != declared.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", i, " '", name, "': the model declares ", DeclaredText(want), " (rank ",
          declared.size(), "), got ", got.TypeString(), " (rank ", got.shape().size(), ")"));
    }
    for (size_t d = 0; d < declared.size(); ++d) {
      const int64_t size = got.shape()[d];
      if (declared[d] != ir::kDynamicDim) {
        if (size != declared[d]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "input ", i, " '", name, "': the model declares ", DeclaredText(want), ", got ",
              got.TypeString(), " (dim ", d, " must be ", declared[d], ")"));
        }
        continue;
      }
      const std::string& symbol = d < want.dim_params.size() ? want.dim_params[d] : "";
      if (symbol.empty()) continue;
      auto [it, inserted] = symbols.emplace(symbol, std::make_pair(size, i));
      if (!inserted && it->second.first != size) {
        const size_t j = it->second.second;
        return absl::InvalidArgumentError(absl::StrCat(
            "input ", i, " '", name, "': the model declares ", DeclaredText(want), ", got ",
            got.TypeString(), ", but input ", j, " '", EscapeForMessage(inputs_[j].name),
            "' (declared ", DeclaredText(inputs_[j]), ") is ", inputs[j].TypeString(),
            ": dim '", EscapeForMessage(symbol, 64), "' must be one size"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const CompiledModel>> SpecializingModel::For(
    absl::Span<const ir::Tensor> inputs) const {
  KILN_RETURN_IF_ERROR(Check(inputs));
  Key key;
  for (const ir::Tensor& t : inputs) key.push_back(t.shape());
  auto lookup = [&]() -> std::shared_ptr<const CompiledModel> {
    runtime::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->model;
  };
  if (std::shared_ptr<const CompiledModel> m = lookup()) return m;
  runtime::MutexLock compiling(&compile_mu_);
  // Another thread may have compiled this shape while this one waited.
  if (std::shared_ptr<const CompiledModel> m = lookup()) return m;
  std::map<std::string, ir::Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) shapes[inputs_[i].name] = key[i];
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<CompiledModel>> made = specialize_(shapes);
  const double compile_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!made.ok()) {
    return absl::Status(made.status().code(),
                        absl::StrCat("compiling the model for input shapes ", KeyText(key), ": ",
                                     made.status().message()));
  }
  std::shared_ptr<const CompiledModel> model(*std::move(made));
  runtime::MutexLock lock(&mu_);
  CompileReport::ShapeSpecialization s;
  s.shapes = KeyText(key);
  s.compile_ms = compile_ms;
  s.jit_cache_hit = model->report().jit_cache_hit;
  report_.specializations.push_back(std::move(s));
  lru_.push_front(Entry{key, model, static_cast<int>(report_.specializations.size()) - 1});
  index_[key] = lru_.begin();
  while (static_cast<int>(lru_.size()) > capacity_) {
    // Runs still holding the evicted model finish with it.
    report_.specializations[lru_.back().index].live = false;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  report_.live_specializations = static_cast<int>(lru_.size());
  return model;
}

absl::StatusOr<std::vector<ir::Tensor>> SpecializingModel::Run(
    absl::Span<const ir::Tensor> inputs) const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledModel> model, For(inputs));
  return model->Run(inputs);
}

absl::StatusOr<std::vector<ir::Tensor>> SpecializingModel::RunNamed(
    const std::map<std::string, ir::Tensor>& inputs) const {
  std::vector<ir::Tensor> ordered;
  for (const TensorInfo& in : inputs_) {
    auto it = inputs.find(in.name);
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", EscapeForMessage(in.name), "' not given"));
    }
    ordered.push_back(it->second);
  }
  if (inputs.size() != inputs_.size()) {
    for (const auto& [name, t] : inputs) {
      bool known = false;
      for (const TensorInfo& in : inputs_) known = known || in.name == name;
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("the model has no input '", EscapeForMessage(name), "'"));
      }
    }
  }
  return Run(ordered);
}

absl::Status SpecializingModel::RunInto(absl::Span<const ir::Tensor> inputs,
                                        absl::Span<ir::Tensor* const> outputs) const {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledModel> model, For(inputs));
  const std::vector<TensorInfo>& want = model->outputs();
  for (size_t o = 0; o < outputs.size() && o < want.size(); ++o) {
    ir::Tensor* t = outputs[o];
    if (t == nullptr || t->dtype() != want[o].dtype || !want[o].shape_known ||
        t->shape() == want[o].shape ||
        std::find(want[o].shape.begin(), want[o].shape.end(), ir::kDynamicDim) !=
            want[o].shape.end()) {
      continue;  // the specialization's own checks judge it
    }
    KILN_ASSIGN_OR_RETURN(*t, ir::Tensor::Create(want[o].dtype, want[o].shape,
                                                 absl::StrCat("output '", want[o].name, "'")));
  }
  return model->RunInto(inputs, outputs);
}

absl::StatusOr<std::vector<ir::Tensor>> SpecializingModel::Profile(
    absl::Span<const ir::Tensor> inputs, std::vector<KernelTiming>* timings) const {
  KILN_RETURN_IF_ERROR(Check(inputs));
  Key key;
  for (const ir::Tensor& t : inputs) key.push_back(t.shape());
  if (key != first_key_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Profile runs at the compile-time shapes (", KeyText(first_key_), "), got ", KeyText(key),
        "; compile with those shapes bound (CompileOptions::input_shapes) to profile them"));
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledModel> model, For(inputs));
  return model->Profile(inputs, timings);
}

}  // namespace kiln::compiler
