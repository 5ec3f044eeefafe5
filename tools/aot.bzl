"""kiln_aot_library: an ONNX model compiled at build time into a cc_library.

    load("//tools:aot.bzl", "kiln_aot_library")
    kiln_aot_library(
        name = "tiny_cnn_aot",
        model = "//models:tiny_cnn/model.onnx",
    )

    #include "aot/tiny_cnn_aot.h"
    absl::StatusOr<std::unique_ptr<kiln::CompiledModel>> m =
        tiny_cnn_aot::Create(kiln::CompileOptions{});  // best ISA of this CPU

A genrule runs `kilnc aot` (runtime/aot_writer.h) on the model. Per ISA its
loop kernels become a cc_library compiled with that VecISA module's flags
(`<name>_<isa>`); `<name>` holds the per-ISA kernel tables, the compiled
program's description and the weights (linked in with .incbin from two data
files, see ARCHITECTURE.md) and the generated header `<name>.h`. At run time
runtime/aot.h picks the best ISA the CPU runs, or the one CompileOptions::isa
names, refusing one the CPU lacks.

The copts below must make Highway's static target the one isa/<name>/
registers: every generated unit checks HWY_STATIC_TARGET with #error.
"""

KILN_AOT_ISAS = ["scalar", "avx2", "avx512"]

# VecIsa::cxx_flags of each module (isa/<name>/<name>.cc).
KILN_AOT_ISA_COPTS = {
    "scalar": ["-DHWY_COMPILE_ONLY_SCALAR"],
    "avx2": ["-march=haswell", "-maes", "-DHWY_COMPILE_ONLY_STATIC"],
    "avx512": ["-march=skylake-avx512", "-DHWY_COMPILE_ONLY_STATIC"],
}

# oneDNN's ISA (DNNL_MAX_CPU_ISA) while kilnc compiles for the best ISA
# listed: the propagate-layout pass asks oneDNN which channel block its
# convs want, and the answer must be for the CPUs the library targets, not
# for a build host above them (runtime/aot.cc warns at Create when the
# running CPU's oneDNN class differs).
_ONEDNN_CAP = {
    "avx512": "AVX512_CORE",
    "avx2": "AVX2",
    "scalar": "SSE41",
}

# runtime/jit's optimization flags (JitOptions::optimization_flags); -w:
# warnings in generated code are not the user's to fix.
_KERNEL_COPTS = ["-O3", "-fopenmp", "-w"]

def _aot_file_names(name, isas, shards):
    # Keep in step with aot::AotFileNames (runtime/aot_writer.cc).
    names = [
        name + ".h",
        name + "_table.cc",
        name + "_data.S",
        name + "_program.inc",
        name + "_weights.inc",
    ]
    for isa in isas:
        for s in range(shards):
            names.append("%s_%s_%d.cc" % (name, isa, s))
    return names

def kiln_aot_library(
        name,
        model,
        isas = KILN_AOT_ISAS,
        shards = 1,
        kilnc_flags = [],
        gen_test = False,
        visibility = None,
        testonly = False,
        tags = []):
    """An ONNX model as a cc_library with kernels for every ISA in `isas`.

    Args:
      name: the cc_library, the C++ namespace of its header and the file stem.
      model: label of the .onnx file.
      isas: VecISA modules to compile kernels for (keys of KILN_AOT_ISA_COPTS).
      shards: translation units per ISA (big models build faster in parallel).
      kilnc_flags: compile flags for `kilnc aot` (--shape=..., --disable-pass=...).
      gen_test: also a cc_test `<name>_test` (tools/aot_test_main.cc): seeded
        random inputs on every ISA this CPU runs against the reference
        interpreter on `model`, refusal of the others.
      visibility: of the cc_library.
      testonly: as for any rule.
      tags: of every rule.
    """
    for isa in isas:
        if isa not in KILN_AOT_ISA_COPTS:
            fail("kiln_aot_library: unknown ISA '%s' (known: %s)" % (isa, ", ".join(KILN_AOT_ISA_COPTS.keys())))
    outs = _aot_file_names(name, isas, shards)
    best = [isa for isa in ["avx512", "avx2", "scalar"] if isa in isas][0]
    pkg = native.package_name()
    header = (pkg + "/" if pkg else "") + name + ".h"
    kilnc = str(Label("//tools:kilnc"))
    native.genrule(
        name = name + "_gen",
        srcs = [model],
        outs = outs,
        tools = [kilnc],
        cmd = " ".join([
            "DNNL_MAX_CPU_ISA=%s" % _ONEDNN_CAP[best],
            "$(location %s) aot $(location %s)" % (kilnc, model),
            "--out-dir=$(RULEDIR) --data-dir=$(RULEDIR)",
            "--name=%s --isas=%s --shards=%d --header=%s" % (name, ",".join(isas), shards, header),
        ] + kilnc_flags + ["> /dev/null"]),
        testonly = testonly,
        tags = tags,
        visibility = ["//visibility:private"],
    )
    isa_libs = []
    for isa in isas:
        native.cc_library(
            name = "%s_%s" % (name, isa),
            srcs = ["%s_%s_%d.cc" % (name, isa, s) for s in range(shards)],
            copts = _KERNEL_COPTS + KILN_AOT_ISA_COPTS[isa],
            linkopts = ["-fopenmp"],
            deps = [str(Label("@system//:hwy"))],
            testonly = testonly,
            tags = tags,
            visibility = ["//visibility:private"],
        )
        isa_libs.append(":%s_%s" % (name, isa))
    native.cc_library(
        name = name,
        srcs = [name + "_table.cc", name + "_data.S"],
        hdrs = [name + ".h"],
        # Read by the assembler's .incbin, not by the C++ compiler.
        textual_hdrs = [name + "_program.inc", name + "_weights.inc"],
        deps = isa_libs + [
            str(Label("//runtime:kiln")),
            str(Label("@system//:absl")),
        ],
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
            tags = tags,
        )
