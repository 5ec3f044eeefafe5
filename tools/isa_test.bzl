"""kiln_isa_test: one cc_test per VecISA from one test source.

kiln_isa_test(name = "jit_test", srcs = [...], deps = [...]) compiles the
sources once (a testonly cc_library) and stamps `jit_test_scalar`,
`jit_test_avx2`, ... each tagged `isa_<isa>` and told its ISA through
KILN_TEST_ISA and --kiln_isa=<isa> (read with compiler/jit/isa_test_util.h),
plus a test_suite `name` over all of them. One shard alone:
    bazel test --test_tag_filters=isa_avx512 //...
A shard whose ISA the host cannot run (and cannot emulate) skips visibly.
The default shards are every row of isa/isas.bzl.
"""

load("//isa:isas.bzl", "KILN_ISA_NAMES")

def kiln_isa_test(
        name,
        srcs,
        deps = [],
        isas = KILN_ISA_NAMES,
        tags = [],
        args = [],
        env = {},
        copts = [],
        data = [],
        **kwargs):
    for isa in isas:
        if isa not in KILN_ISA_NAMES:
            fail("kiln_isa_test: unknown ISA '%s' (isa/isas.bzl has: %s)" % (isa, ", ".join(KILN_ISA_NAMES)))
    lib = name + "_lib"
    native.cc_library(
        name = lib,
        testonly = True,
        srcs = srcs,
        deps = deps,
        copts = copts,
        alwayslink = True,
        visibility = ["//visibility:private"],
    )
    tests = []
    for isa in isas:
        test_env = dict(env)
        test_env["KILN_TEST_ISA"] = isa
        native.cc_test(
            name = "%s_%s" % (name, isa),
            deps = [":" + lib],
            tags = tags + ["isa_" + isa],
            args = args + ["--kiln_isa=" + isa],
            env = test_env,
            data = data,
            **kwargs
        )
        tests.append(":%s_%s" % (name, isa))
    native.test_suite(
        name = name,
        tests = tests,
        tags = tags,
    )
