// File: compiler/aot_writer.h — the build-time half of kiln's ahead-of-time
// path (`kilnc aot`, run by tools/aot.bzl's kiln_aot_library): one model
// imported, then through the pipeline (compiler/pipeline.h) once per ISA,
// and the files a cc_library needs to carry the result (runtime/aot.h
// loads it):
//
//   <name>.h                 the factory: <name>::Create(options), <name>::Artifact()
//   <name>_table.cc          the Artifact: every ISA's table and description
//   <name>_data.S            .incbin of the weights
//   <name>_weights.inc       the constants' bytes, each 64-byte aligned
// and per ISA:
//   <name>_<isa>_program.inc the description (JSON): the loop program after
//                            the pass pipeline (ir/loop/text.h), the
//                            interface, the constants' places in the weights
//                            file, each loop kernel's arguments and report
//   <name>_<isa>_table.cc    the ISA's kernel entries by kernel index
//   <name>_<isa>_data.S      .incbin of its description
//   <name>_<isa>_<s>.cc      its loop kernels, shard s of `shards`
//
// Each ISA has its own program: the propagate-layout pass asks oneDNN for
// the channel block its convs want, which depends on the CPU oneDNN runs
// on, so tools/aot.bzl writes each ISA's part in its own kilnc run with
// oneDNN capped at that ISA (DNNL_MAX_CPU_ISA) and the shared files in a
// "glue" run.
//
// An If's branches and a Loop's or Scan's body are compiled as programs of
// their own (as the JIT does, compiler/control_flow.h): the description
// lists them as `subprograms`, and their kernels share the ISA's units.
//
// Reference fallback calls (nodes lowering leaves to the interpreter) need
// the interpreter at run time, which the library links only with
// `reference_calls`; without it such a model is refused here.
//
// Only kiln-made identifiers (the emitter's sanitized symbols, the checked
// `name`) and numbers reach the C++ and assembler files; model strings live
// in the description, which is data.
#ifndef KILN_COMPILER_AOT_WRITER_H_
#define KILN_COMPILER_AOT_WRITER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/compiled_model.h"

namespace kiln::aot {

struct WriterOptions {
  // A C++ identifier: the namespace, the symbol prefix and the file stem.
  std::string name;
  // VecISA modules to compile for (registered ones; the build host need not
  // run them).
  std::vector<std::string> isas = {"scalar", "avx2", "avx512"};
  // Translation units per ISA (>= 1); every shard file is written, empty
  // ones hold no kernels.
  int shards = 1;
  // How the table includes the header ("aot/tiny_cnn_aot.h").
  std::string header_include;
  // Where the assembler finds the data files (.incbin, relative to the
  // assembler's working directory: Bazel's execroot).
  std::string data_dir;
  // Which files: "" all; "glue" the header, the Artifact table and the
  // weights; an ISA of `isas` that ISA's files.
  std::string part;
  // part = an ISA: the glue run's weights file, which must hold this run's
  // constants byte for byte (checked; empty: not checked).
  std::string weights_file;
  // Link the reference interpreter (//runtime:reference_calls): the
  // generated Artifact passes runtime::CreateReferenceStep, and models with
  // reference fallback calls are accepted. False: such a model is
  // FailedPrecondition naming its nodes.
  bool reference_calls = false;
};

struct GeneratedFile {
  std::string name;  // file name, no directory
  std::string contents;
};

// `options` are the compile options the model is built with (input_shapes,
// disabled_passes, reference_fallback; isa is ignored). InvalidArgument for
// a bad name, ISA, path or shard count, and whatever compiling the model
// returns.
absl::StatusOr<std::vector<GeneratedFile>> WriteAotLibrary(const std::string& model_path,
                                                           const CompileOptions& options,
                                                           const WriterOptions& writer);

// The file names WriteAotLibrary produces (what the Bazel macro declares).
std::vector<std::string> AotFileNames(const WriterOptions& writer);

}  // namespace kiln::aot

#endif  // KILN_COMPILER_AOT_WRITER_H_
