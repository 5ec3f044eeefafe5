# File: testing/fuzz/fuzz.bzl — kiln_fuzz_target: one fuzz entry point
# (LLVMFuzzerTestOneInput) as a libFuzzer binary and as a corpus replay test.
#
#   kiln_fuzz_target(
#       name = "loop_text",
#       srcs = ["loop_text_fuzzer.cc"],
#       deps = ["//ir/loop:text"],
#   )
#
# makes
#   :loop_text_fuzzer      the fuzzer (manual). Under --config=fuzz (clang,
#                          libFuzzer, ASan+UBSan) a libFuzzer binary; otherwise
#                          it runs the entry point once on each file it is given.
#   :loop_text_corpus_test a cc_test that replays corpus/loop_text/* (every
#                          seed and every past finding) on every build, with or
#                          without clang.
# tools/fuzz.sh TARGET SECONDS runs one fuzzer on a copy of its corpus.

def kiln_fuzz_target(name, srcs, deps, corpus = None, size = "small"):
    corpus = corpus or ("corpus/" + name)
    native.cc_library(
        name = name + "_entry",
        testonly = True,
        srcs = srcs,
        deps = deps + ["//testing/fuzz:fuzz_checks"],
        alwayslink = True,
    )
    native.cc_binary(
        name = name + "_fuzzer",
        testonly = True,
        tags = ["manual"],
        deps = [":" + name + "_entry"] + select({
            "//testing/fuzz:libfuzzer": [],
            "//conditions:default": ["//testing/fuzz:standalone_main"],
        }),
        linkopts = select({
            "//testing/fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = size,
        data = native.glob([corpus + "/*"]),
        args = [native.package_name() + "/" + corpus],
        deps = [
            ":" + name + "_entry",
            "//testing/fuzz:replay_main",
        ],
    )
