// File: backends/onednn/kernel_reader.h — reading a loop-IR extern kernel's
// attributes and constant inputs, with errors that name the kernel. Shared
// by OneDnnExternKernel's translator (Conv/Gemm/MatMul) and the RNN kernel.
// Internal to backends/onednn.
#ifndef KILN_BACKENDS_ONEDNN_KERNEL_READER_H_
#define KILN_BACKENDS_ONEDNN_KERNEL_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ir/graph/tensor.h"
#include "ir/loop/extern_schema.h"
#include "ir/loop/loop_ir.h"
#include "ir/status_macros.h"

namespace kiln::onednn::internal {

using ir::loop::kListSeparator;

class KernelReader {
 public:
  KernelReader(const ir::loop::LoopProgram& program, const ir::loop::Kernel& kernel,
               const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants)
      : p_(program), k_(kernel), constants_(constants) {}

  template <typename... Args>
  absl::Status Unimplemented(const Args&... args) const {
    return absl::UnimplementedError(absl::StrCat(Where(), ": ", args...));
  }
  template <typename... Args>
  absl::Status Invalid(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(), ": ", args...));
  }
  std::string Where() const {
    return absl::StrCat("extern kernel '", k_.name, "' (", k_.call.op, ")");
  }

  bool HasAttr(const char* name) const { return k_.call.attrs.count(name) > 0; }
  absl::StatusOr<int64_t> Int(const char* name, int64_t fallback) const {
    auto it = k_.call.attrs.find(name);
    if (it == k_.call.attrs.end()) return fallback;
    if (const auto* v = std::get_if<int64_t>(&it->second)) return *v;
    return Invalid("attribute '", name, "' is not an int");
  }
  absl::StatusOr<double> Float(const char* name, double fallback) const {
    auto it = k_.call.attrs.find(name);
    if (it == k_.call.attrs.end()) return fallback;
    if (const auto* v = std::get_if<double>(&it->second)) return *v;
    if (const auto* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
    return Invalid("attribute '", name, "' is not a float");
  }
  absl::StatusOr<std::string> String(const char* name, std::string fallback) const {
    auto it = k_.call.attrs.find(name);
    if (it == k_.call.attrs.end()) return fallback;
    if (const auto* v = std::get_if<std::string>(&it->second)) return *v;
    return Invalid("attribute '", name, "' is not a string");
  }
  absl::StatusOr<std::vector<std::string>> StringList(const char* name) const {
    KILN_ASSIGN_OR_RETURN(std::string joined, String(name, ""));
    if (joined.empty()) return std::vector<std::string>{};
    return std::vector<std::string>(absl::StrSplit(joined, kListSeparator));
  }
  absl::StatusOr<std::vector<int64_t>> Ints(const char* name) const {
    auto it = k_.call.attrs.find(name);
    if (it == k_.call.attrs.end()) return std::vector<int64_t>{};
    if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
    return Invalid("attribute '", name, "' is not a list of ints");
  }
  absl::StatusOr<std::vector<double>> Floats(const char* name) const {
    auto it = k_.call.attrs.find(name);
    if (it == k_.call.attrs.end()) return std::vector<double>{};
    if (const auto* v = std::get_if<std::vector<double>>(&it->second)) return *v;
    if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) {
      return std::vector<double>(v->begin(), v->end());
    }
    return Invalid("attribute '", name, "' is not a list of floats");
  }

  // The constant data of call input `j` when it matches its dense
  // row-major buffer, or nullptr.
  const ir::Tensor* ConstantOfInput(int j) const {
    const int32_t index = k_.call.inputs[j];
    auto it = constants_.find(index);
    if (it == constants_.end() || it->second == nullptr) return nullptr;
    const ir::Tensor& t = *it->second;
    const ir::loop::Buffer& b = p_.buffers[index];
    if (t.dtype() != b.dtype || t.shape() != b.shape || !b.IsRowMajor()) return nullptr;
    return &t;
  }

 protected:
  const ir::loop::LoopProgram& p_;
  const ir::loop::Kernel& k_;
  const std::map<int32_t, std::shared_ptr<const ir::Tensor>>& constants_;
};

}  // namespace kiln::onednn::internal

#endif  // KILN_BACKENDS_ONEDNN_KERNEL_READER_H_
