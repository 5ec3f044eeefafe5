"""kiln_dependencies(): the repositories kiln's build needs, for kiln's own
WORKSPACE and for any workspace that uses kiln's targets.

    local_repository(name = "kiln", path = "path/to/kiln")
    load("@kiln//:deps.bzl", "kiln_dependencies")
    kiln_dependencies()

Everything is local: Debian's system libraries under /usr (@system, with
kiln's BUILD file), Debian's Bazel rules (@platforms, @rules_java) and two
offline shims from kiln's third_party/ (@rules_cc, @remote_coverage_tools).
Bazel 4 appends its own declarations of rules_cc, platforms, rules_java and
remote_coverage_tools to every WORKSPACE, which would download them; the
first declaration of a name wins, so calling this first keeps the build
offline. A name the caller declared before the call is left alone.
@system_python (Python's and pybind11's headers, for //python:kiln.so) is
looked up only when a target that needs it is built.
"""

load("//third_party:python.bzl", "system_python")

def _third_party_repository_impl(rctx):
    # kiln's third_party/<dir>, found through a file of kiln's so that the
    # path holds wherever kiln is checked out.
    third_party = rctx.path(Label("//third_party:system.BUILD")).dirname
    src = third_party.get_child(rctx.attr.dir)
    if not src.exists:
        fail("kiln_dependencies: %s is missing from kiln's third_party/" % rctx.attr.dir)
    for child in src.readdir():
        rctx.symlink(child, child.basename)

_third_party_repository = repository_rule(
    implementation = _third_party_repository_impl,
    attrs = {"dir": attr.string(mandatory = True)},
    local = True,
)

def kiln_dependencies():
    """Declares @system, @system_python, @rules_cc, @platforms, @rules_java, @remote_coverage_tools."""
    existing = native.existing_rules()
    if "rules_cc" not in existing:
        _third_party_repository(name = "rules_cc", dir = "rules_cc")
    if "remote_coverage_tools" not in existing:
        _third_party_repository(name = "remote_coverage_tools", dir = "remote_coverage_tools")
    if "platforms" not in existing:
        native.local_repository(name = "platforms", path = "/usr/share/bazel/tools/platforms")
    if "rules_java" not in existing:
        native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")

    # Debian's oneDNN, Highway, abseil, protobuf, ONNX, googletest, benchmark.
    if "system" not in existing:
        native.new_local_repository(
            name = "system",
            path = "/usr",
            build_file = str(Label("//third_party:system.BUILD")),
        )

    # Debian's Python and pybind11 headers, for the Python module (python/).
    if "system_python" not in existing:
        system_python(name = "system_python")
