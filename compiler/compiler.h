// File: compiler/compiler.h — kiln's public JIT API: compile an ONNX model
// into native code for this CPU and load it as a kiln::CompiledModel
// (runtime/compiled_model.h).
//
//   kiln::CompileOptions options;
//   options.threads = 1;
//   kiln::Compiler compiler(options);
//   absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> model =
//       compiler.CompileFile("resnet50.onnx");
//
// What a compile does: import (frontend/onnx) → compiler::Compile
// (compiler/pipeline.h: graph passes, lowering, loop passes, C++/Highway for
// the chosen ISA) → JIT build (compiler/jit, cached by content hash under
// the cache dir) and load → the runtime's step list (runtime/executable.h),
// with oneDNN primitives created and weights prepacked, and reference calls
// (runtime/reference_calls.h) for what runs on the interpreter.
#ifndef KILN_COMPILER_COMPILER_H_
#define KILN_COMPILER_COMPILER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"
#include "runtime/compiled_model.h"

namespace kiln {

class Compiler {
 public:
  explicit Compiler(CompileOptions options = {});

  // NotFound / InvalidArgument for an unreadable or invalid model,
  // Unimplemented naming the node for what kiln cannot compile yet.
  absl::StatusOr<std::unique_ptr<CompiledModel>> CompileFile(const std::string& path) const;
  // A serialized ModelProto in memory (a model without external data);
  // `name` stands for it in the report and in error messages. Dynamic input
  // dims specialize as for a file; the model then keeps a copy of `bytes`.
  absl::StatusOr<std::unique_ptr<CompiledModel>> CompileBytes(
      absl::string_view bytes, const std::string& name = "<memory>") const;
  // A graph already imported (tests, tools). Shapes must be static.
  absl::StatusOr<std::unique_ptr<CompiledModel>> CompileGraph(ir::Graph graph) const;
  // Several graphs with one JIT build (their kernels share translation
  // units, which keeps test suites fast); one result per graph, in order —
  // a graph that fails does not fail the others.
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> CompileGraphs(
      std::vector<ir::Graph> graphs) const;

  const CompileOptions& options() const { return options_; }

 private:
  // The entry points above without their std::bad_alloc catch.
  absl::StatusOr<std::unique_ptr<CompiledModel>> CompileFileImpl(const std::string& path) const;
  absl::StatusOr<std::unique_ptr<CompiledModel>> CompileBytesImpl(
      absl::string_view bytes, const std::string& name) const;
  std::vector<absl::StatusOr<std::unique_ptr<CompiledModel>>> CompileGraphsImpl(
      std::vector<ir::Graph> graphs) const;

  CompileOptions options_;
};

}  // namespace kiln

#endif  // KILN_COMPILER_COMPILER_H_
