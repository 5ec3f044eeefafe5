"""kiln_aot_library: an ONNX model compiled at build time into a cc_library.

    load("//tools:aot.bzl", "kiln_aot_library")
    kiln_aot_library(
        name = "tiny_cnn_aot",
        model = "//models:tiny_cnn/model.onnx",
    )

    #include "aot/tiny_cnn_aot.h"
    absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> m =
        tiny_cnn_aot::Create(kiln::CompileOptions{});  // best ISA of this CPU

Genrules run `kilnc aot` (compiler/aot_writer.h) on the model: one per ISA
(its program, compiled with oneDNN capped at that ISA, and its loop kernels,
which become a cc_library compiled with that VecISA module's flags,
`<name>_<isa>`) and one for the weights and the header. `<name>` holds the
per-ISA kernel tables and program descriptions, the weights (linked in with
.incbin, see docs/decisions/0032) and the generated header `<name>.h`. At run time
runtime/aot.h picks the best ISA the CPU runs, or the one CompileOptions::isa
names, refusing one the CPU lacks.

An ISA's row in isa/isas.bzl gives its kernel library's copts (the flags
the JIT uses for it; every generated unit checks HWY_STATIC_TARGET with
#error) and oneDNN's ISA while kilnc compiles its program; the default
`isas` is every row kiln_aot_library can build.
"""

load("//isa:isas.bzl", "KILN_AOT_ISAS", "kiln_isa_row")

# compiler/jit's optimization flags (JitOptions::optimization_flags); -w:
# warnings in generated code are not the user's to fix.
_KERNEL_COPTS = ["-O3", "-fopenmp", "-w"]

def _glue_files(name):
    # Keep in step with aot::AotFileNames (compiler/aot_writer.cc).
    return [name + ".h", name + "_table.cc", name + "_data.S", name + "_weights.inc"]

def _isa_files(name, isa, shards):
    return ["%s_%s%s" % (name, isa, suffix) for suffix in ["_table.cc", "_data.S", "_program.inc"]] + [
        "%s_%s_%d.cc" % (name, isa, s)
        for s in range(shards)
    ]

def kiln_aot_library(
        name,
        model,
        isas = KILN_AOT_ISAS,
        shards = 1,
        kilnc_flags = [],
        reference_calls = False,
        gen_test = False,
        visibility = None,
        testonly = False,
        tags = []):
    """An ONNX model as a cc_library with kernels for every ISA in `isas`.

    Args:
      name: the cc_library, the C++ namespace of its header and the file stem.
      model: label of the .onnx file.
      isas: VecISA modules to compile kernels for (rows of isa/isas.bzl with
        an onednn_max_isa; default: all of them).
      shards: translation units per ISA (big models build faster in parallel).
      kilnc_flags: compile flags for `kilnc aot` (--shape=..., --disable-pass=...).
      reference_calls: link kiln's reference interpreter
        (//runtime:reference_calls) for nodes lowering cannot compile and
        library calls oneDNN cannot run; without it `kilnc aot` refuses a
        model with such nodes and Create refuses such a call, naming it.
      gen_test: also a cc_test `<name>_test` (tools/aot_test_main.cc): seeded
        random inputs on every ISA this CPU runs against the reference
        interpreter on `model`, refusal of the others.
      visibility: of the cc_library.
      testonly: as for any rule.
      tags: of every rule.
    """
    rows = {}
    for isa in isas:
        if isa not in KILN_AOT_ISAS:
            fail("kiln_aot_library: unknown ISA '%s' (known: %s)" % (isa, ", ".join(KILN_AOT_ISAS)))
        rows[isa] = kiln_isa_row(isa)

    # oneDNN's ISA (DNNL_MAX_CPU_ISA) while kilnc compiles an ISA's program
    # (its row's onednn_max_isa): the propagate-layout pass asks oneDNN which
    # channel block its convs want, and the answer must be for the CPUs that
    # run that ISA, not for the build host (runtime/aot.cc warns at Create
    # when the running CPU's oneDNN class differs, e.g. an ISA forced below
    # the CPU's). The glue run (weights, which do not depend on it) uses the
    # best ISA's.
    best = isas[0]
    for isa in isas:
        if rows[isa].rank > rows[best].rank:
            best = isa
    pkg = native.package_name()
    header = (pkg + "/" if pkg else "") + name + ".h"
    kilnc = str(Label("//tools:kilnc"))
    common = " ".join([
        "$(location %s) aot $(location %s)" % (kilnc, model),
        "--out-dir=$(RULEDIR) --data-dir=$(RULEDIR)",
        "--name=%s --isas=%s --shards=%d --header=%s" % (name, ",".join(isas), shards, header),
    ] + (["--reference-calls"] if reference_calls else []) + kilnc_flags)

    # The header, the Artifact table and the weights.
    native.genrule(
        name = name + "_gen",
        srcs = [model],
        outs = _glue_files(name),
        tools = [kilnc],
        cmd = "DNNL_MAX_CPU_ISA=%s %s --part=glue > /dev/null" % (rows[best].onednn_max_isa, common),
        testonly = testonly,
        tags = tags,
        visibility = ["//visibility:private"],
    )

    # Per ISA: its program (layouts chosen by oneDNN capped at that ISA), its
    # kernel table and its kernels, compiled with its flags.
    isa_libs = []
    isa_srcs = []
    isa_data = []
    for isa in isas:
        native.genrule(
            name = "%s_%s_gen" % (name, isa),
            srcs = [model, name + "_weights.inc"],
            outs = _isa_files(name, isa, shards),
            tools = [kilnc],
            cmd = "DNNL_MAX_CPU_ISA=%s %s --part=%s --weights=$(location %s) > /dev/null" % (
                rows[isa].onednn_max_isa,
                common,
                isa,
                name + "_weights.inc",
            ),
            testonly = testonly,
            tags = tags,
            visibility = ["//visibility:private"],
        )
        native.cc_library(
            name = "%s_%s" % (name, isa),
            srcs = ["%s_%s_%d.cc" % (name, isa, s) for s in range(shards)],
            copts = _KERNEL_COPTS + rows[isa].cxx_flags,
            linkopts = ["-fopenmp"],
            deps = [str(Label("@system//:hwy"))],
            testonly = testonly,
            tags = tags,
            visibility = ["//visibility:private"],
        )
        isa_libs.append(":%s_%s" % (name, isa))
        isa_srcs += ["%s_%s_table.cc" % (name, isa), "%s_%s_data.S" % (name, isa)]
        isa_data.append("%s_%s_program.inc" % (name, isa))
    native.cc_library(
        name = name,
        srcs = [name + "_table.cc", name + "_data.S"] + isa_srcs,
        hdrs = [name + ".h"],
        # Read by the assembler's .incbin, not by the C++ compiler.
        textual_hdrs = [name + "_weights.inc"] + isa_data,
        # The runtime only: no compiler, no ONNX (//aot:aot_link_test).
        deps = isa_libs + [
            str(Label("//runtime:aot")),
            str(Label("//runtime:compiled_model")),
            str(Label("@system//:absl")),
        ] + ([str(Label("//runtime:reference_calls"))] if reference_calls else []),
        testonly = testonly,
        tags = tags,
        visibility = visibility,
    )
    if gen_test:
        native.cc_test(
            name = name + "_test",
            size = "medium",
            srcs = [str(Label("//tools:aot_test_main.cc"))],
            copts = [
                "-include",
                header,
                "-DKILN_AOT_NAMESPACE=" + name,
            ],
            args = ["$(rootpath %s)" % model],
            data = [model],
            deps = [
                ":" + name,
                str(Label("//tools:aot_test_deps")),
            ],
            # kiln's libraries are linked in statically, as in a cc_binary,
            # whatever --dynamic_mode the workspace builds with:
            # @system//:absl's --as-needed needs them before it.
            linkstatic = True,
            tags = tags,
        )
