"""kiln_opt_test: one Bazel test of a `kilnc opt` test file.

    load("//tools:opt.bzl", "kiln_opt_test")
    kiln_opt_test(name = "fuse_vertical_test", src = "testdata/fuse_vertical.txt")

The file is text IR with RUN lines (kilnc opt's flags) and CHECK lines,
split into cases at `// -----` / `# -----` lines (tools/opt_file_test.h).
The test runs every case in-process, as `kilnc opt` would, and FileCheck.
"""

def kiln_opt_test(name, src, size = "small", **kwargs):
    native.cc_test(
        name = name,
        size = size,
        args = ["$(rootpath %s)" % src],
        data = [src],
        deps = [str(Label("//tools:opt_file_test_main"))],
        **kwargs
    )
