// File: runtime/aot.h — the run-time half of kiln's ahead-of-time path: a
// model compiled at build time by `kilnc aot` (tools/aot.bzl's
// kiln_aot_library) becomes a CompiledModel without a JIT. Generated code
// fills an `aot::Artifact` (the weights and, per ISA, its program's
// description, both linked in with .incbin, and its kernel table) and calls
// CreateModel; users call the generated `<namespace>::Create(options)`.
// Each ISA has its own program (its layouts were chosen for that ISA's
// CPUs), with the programs of its If branches and Loop/Scan bodies, which
// run as runtime/control_flow.h's steps; the weights are shared.
//
//   absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> m =
//       tiny_cnn_aot::Create(kiln::CompileOptions{});   // best ISA of this CPU
//
// ISA choice: CompileOptions::isa empty picks the best ISA that is both
// compiled into the library and run by this CPU (isa/ registry detection);
// a named ISA the library lacks, or the CPU lacks, is refused with
// InvalidArgument before any of its code can run. The other honoured
// options are threads, prepack_weights, use_onednn, precision (library
// calls are built at Create, so bf16 is chosen there) and deterministic
// (which calls run on one thread is decided there too); what was fixed when
// the library was built (input_shapes, mode, disabled_passes,
// reference_fallback) is refused when it differs from that build.
#ifndef KILN_RUNTIME_AOT_H_
#define KILN_RUNTIME_AOT_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/loop/kernel_abi.h"
#include "runtime/compiled_model.h"
#include "runtime/extern_step.h"

namespace kiln::aot {

// One loop kernel's entry in one ISA's table.
struct KernelEntry {
  int kernel;  // index into the program's kernels
  ir::loop::KernelFn fn;
};

// One ISA's program: its description and its loop kernels, compiled with
// that ISA module's flags.
struct IsaTable {
  const char* isa;  // the VecISA module name ("avx2")
  const KernelEntry* entries;
  int num_entries;
  const unsigned char* description;  // JSON (aot_writer.h), not NUL-terminated
  size_t description_size;
};

// What a kiln_aot_library links in.
struct Artifact {
  const char* name;              // the library's name
  const unsigned char* weights;  // the constants' bytes, shared by every ISA
  size_t weights_size;
  const IsaTable* isas;
  int num_isas;
  // runtime/reference_calls.h's CreateReferenceStep when the library was
  // built with reference_calls = True, else null: Create then refuses a
  // library call that needs the interpreter, naming its kernel.
  runtime::ReferenceStepFactory reference_steps;
};

// Whether this CPU runs an ISA module's code (the registry's detection).
using HostSupports = std::function<bool(absl::string_view isa)>;

// The model of `artifact` on the ISA `options` asks for (see above).
// `host_supports` replaces the CPU detection (tests: a CPU without AVX-512);
// empty uses the registry's.
absl::StatusOr<std::unique_ptr<CompiledModel>> CreateModel(const Artifact& artifact,
                                                           const CompileOptions& options,
                                                           const HostSupports& host_supports = {});

}  // namespace kiln::aot

#endif  // KILN_RUNTIME_AOT_H_
