// File: testing/fuzz/aot_description_fuzzer.cc — fuzz target: an AOT
// library's program description (the JSON `kilnc aot` writes, with the loop
// program text inside) -> runtime::aot::CreateModel, with 4 KiB of weights
// and a no-op entry for each of the first 64 loop kernels (Create builds the
// step list and the library calls; nothing runs). A broken description gives an error naming the
// library; never a crash, a hang or an allocation past the memory limit.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/aot.h"
#include "runtime/compiled_model.h"
#include "testing/fuzz/fuzz_checks.h"

namespace {

int NoOpKernel(void* const* /*args*/) { return 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using absl::StatusCode;
  alignas(64) static const unsigned char kWeights[4096] = {};
  static const std::vector<kiln::aot::KernelEntry> kEntries = [] {
    std::vector<kiln::aot::KernelEntry> e;
    for (int k = 0; k < 64; ++k) e.push_back({k, &NoOpKernel});
    return e;
  }();
  kiln::aot::IsaTable table{"scalar", kEntries.data(), static_cast<int>(kEntries.size()), data,
                            size};
  kiln::aot::Artifact artifact{"fuzz", kWeights, sizeof(kWeights), &table, 1,
                               /*reference_steps=*/nullptr};
  kiln::CompileOptions options;
  options.threads = 1;
  options.memory_limit_bytes = int64_t{64} << 20;
  absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> m = kiln::aot::CreateModel(
      artifact, options, [](absl::string_view isa) { return isa == "scalar"; });
  // A description is kiln's own build output, so a broken one is kiln's
  // error (Internal); what it asks of the options or the memory is not.
  kiln::fuzz::CheckStatus(m.status(),
                          {StatusCode::kInternal, StatusCode::kInvalidArgument,
                           StatusCode::kUnimplemented, StatusCode::kResourceExhausted,
                           StatusCode::kFailedPrecondition},
                          "CreateModel");
  return 0;
}
