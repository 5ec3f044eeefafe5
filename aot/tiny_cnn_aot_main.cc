// File: aot/tiny_cnn_aot_main.cc — the smallest user of an AOT library:
// creates tiny_cnn_aot for the best ISA of this CPU and runs it once on
// zeros. aot_link_test checks what this binary links.
#include <iostream>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "aot/tiny_cnn_aot.h"
#include "runtime/compiled_model.h"

int main() {
  absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> model =
      tiny_cnn_aot::Create(kiln::CompileOptions{});
  if (!model.ok()) {
    std::cerr << model.status() << "\n";
    return 1;
  }
  std::vector<kiln::ir::Tensor> inputs;
  for (const kiln::TensorInfo& in : (*model)->inputs()) inputs.emplace_back(in.dtype, in.shape);
  absl::StatusOr<std::vector<kiln::ir::Tensor>> outputs = (*model)->Run(inputs);
  if (!outputs.ok()) {
    std::cerr << outputs.status() << "\n";
    return 1;
  }
  std::cout << "tiny_cnn_aot on " << (*model)->report().isa << ": " << outputs->size()
            << " output(s), " << (*outputs)[0].num_elements() << " elements\n";
  return 0;
}
