"""kiln_layering_test: the design's "may depend on" column as a Bazel test.

kiln_layering_test(name = "runtime_layering_test", target = "//runtime:runtime",
                   forbidden = ["//frontend", "@system//:onnx"])
runs a genquery of deps(target) (hermetic: evaluated by Bazel at build time)
and fails, naming the labels, when any of them lies under a forbidden prefix.
"""

def kiln_layering_test(name, target, forbidden):
    query = name + "_deps"
    native.genquery(
        name = query,
        expression = "deps(%s)" % target,
        scope = [target],
        testonly = True,
    )
    native.sh_test(
        name = name,
        srcs = ["//testing/layering:check_deps.sh"],
        args = ["$(location :%s)" % query, target] + forbidden,
        data = [":" + query],
    )
