"""copts_file: the copts attribute of each of `libs`, as Bazel has it, in a
text file a test reads (aot_test checks kiln_aot_library's per-ISA kernel
libraries against the JIT's flags for the same ISA).

    copts_file(name = "x_copts", libs = [":x_avx2"])   # writes x_copts.txt
"""

_Copts = provider(fields = ["copts"])

def _copts_aspect_impl(target, ctx):
    return [_Copts(copts = ctx.rule.attr.copts)]

_copts_aspect = aspect(implementation = _copts_aspect_impl)

def _copts_file_impl(ctx):
    # One line per library: its name, a tab, its copts separated by spaces.
    lines = ["%s\t%s" % (lib.label.name, " ".join(lib[_Copts].copts)) for lib in ctx.attr.libs]
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    ctx.actions.write(out, "\n".join(lines) + "\n")
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

copts_file = rule(
    implementation = _copts_file_impl,
    attrs = {"libs": attr.label_list(aspects = [_copts_aspect])},
)
