// File: testing/fuzz/onnx_import_fuzzer.cc — fuzz target: ONNX model bytes
// -> frontend import (checker, shape inference, folding) -> graph verifier
// (Blame::kModel, as the compile pipeline's first stage), and the same bytes
// -> ReadModelMetadata. Each gives OK or an error that blames the model;
// never a crash, a hang or an internal error; a model that imports has
// readable metadata.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/onnx/importer.h"
#include "frontend/onnx/model_metadata.h"
#include "ir/graph/verifier.h"
#include "testing/fuzz/fuzz_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using absl::StatusCode;
  kiln::frontend::ImportOptions options;
  // Room for real small models, not for the fuzzer's RSS limit to be the
  // thing that stops a huge initializer.
  options.max_tensor_bytes = int64_t{64} << 20;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kiln::frontend::ImportResult> r =
      kiln::frontend::ImportModelBytes(bytes, options, "fuzz.onnx");
  kiln::fuzz::CheckStatus(r.status(),
                          {StatusCode::kInvalidArgument, StatusCode::kUnimplemented,
                           StatusCode::kResourceExhausted, StatusCode::kNotFound,
                           StatusCode::kDataLoss, StatusCode::kOutOfRange},
                          "ImportModelBytes");
  absl::StatusOr<kiln::frontend::ModelMetadata> meta = kiln::frontend::ReadModelMetadata(bytes);
  kiln::fuzz::CheckStatus(meta.status(), {StatusCode::kInvalidArgument}, "ReadModelMetadata");
  if (!r.ok()) return 0;
  if (!meta.ok()) {
    kiln::fuzz::Fail("ReadModelMetadata refused a model ImportModelBytes took",
                     meta.status().ToString());
  }
  // As compiler::Compile's first stage does: an imported graph may still be
  // one kiln cannot compile (a value shape inference could not type), which
  // is the model's error.
  kiln::fuzz::CheckStatus(kiln::ir::VerifyGraph(r->graph, kiln::ir::Blame::kModel),
                          {StatusCode::kInvalidArgument}, "VerifyGraph");
  return 0;
}
