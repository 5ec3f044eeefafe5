"""kiln_isa_table: isa/isas.bzl's rows as the C++ table //isa:registry reads.

Writes `<name>.cc` (defines isa::internal::IsaTable(), declared in
isa/isa_table.h: one VecIsa per row, best first, each row's host detection
taken from its package, isa/<name>/<name>.h) and `<name>_rows.txt` (the rows
as they are in isa/isas.bzl, one per line, for isa/registry_test.cc).
"""

load(":isas.bzl", "KILN_ISAS")

def _neg_rank(row):
    return -row.rank

def _cc_string(s):
    return '"%s"' % s.replace("\\", "\\\\").replace('"', '\\"')

# A field of VecIsa; for a row with a cross toolchain, chosen by the build
# host's architecture.
def _cc_field(row, name, native, cross):
    if row.cross == None:
        return ["        .%s = %s," % (name, _cc_string(native))]
    return [
        "#if defined(%s)" % row.cross.native_macro,
        "        .%s = %s," % (name, _cc_string(native)),
        "#else",
        "        .%s = %s," % (name, _cc_string(cross)),
        "#endif",
    ]

def _cc_row(row):
    cross_cxx = row.cross.cxx if row.cross != None else None
    cross_emulator = row.cross.emulator if row.cross != None else None
    return "\n".join([
        "    VecIsa{",
        "        .name = %s," % _cc_string(row.name),
        "        .rank = %d," % row.rank,
        "        .vector_bytes = %d," % row.vector_bytes,
        "        .hwy_target = %s," % row.hwy_target,
    ] + _cc_field(row, "cxx", row.cxx, cross_cxx) + [
        "        .cxx_flags = {%s}," % ", ".join([_cc_string(f) for f in row.cxx_flags]),
    ] + _cc_field(row, "emulator", "", cross_emulator) + [
        "        .host_supports = &%s::HostSupports," % row.name,
        "        .transpose_tile = %d," % row.transpose_tile,
        "        .parallel_grain = %d," % row.parallel_grain,
        "    },",
    ])

def _table_cc(path, rows):
    return "\n".join([
        "// File: %s — the VecISA table, best first: one row per module." % path,
        "// Generated from isa/isas.bzl by kiln_isa_table (isa/isa_table.bzl). DO NOT EDIT.",
        '#include "hwy/detect_targets.h"',
        '#include "isa/isa_table.h"',
    ] + ['#include "isa/%s/%s.h"' % (row.name, row.name) for row in rows] + [
        "",
        "namespace kiln::isa::internal {",
        "",
        "const std::vector<VecIsa>& IsaTable() {",
        "  static const std::vector<VecIsa>* const table = new std::vector<VecIsa>{",
    ] + [_cc_row(row) for row in rows] + [
        "  };",
        "  return *table;",
        "}",
        "",
        "}  // namespace kiln::isa::internal",
        "",
    ])

def _rows_txt(rows):
    lines = [
        "# Generated from isa/isas.bzl by kiln_isa_table (isa/isa_table.bzl). DO NOT EDIT.",
        "# One row per line, tab-separated: name rank vector_bytes hwy_target cxx",
        "# cxx_flags(space-separated) cross_cxx cross_emulator transpose_tile parallel_grain",
        "# (cross_*: '-' for none).",
    ]
    for row in rows:
        lines.append("\t".join([
            row.name,
            str(row.rank),
            str(row.vector_bytes),
            row.hwy_target,
            row.cxx,
            " ".join(row.cxx_flags),
            row.cross.cxx if row.cross != None else "-",
            row.cross.emulator if row.cross != None else "-",
            str(row.transpose_tile),
            str(row.parallel_grain),
        ]))
    return "\n".join(lines) + "\n"

def _kiln_isa_table_impl(ctx):
    ctx.actions.write(
        ctx.outputs.cc,
        _table_cc(ctx.outputs.cc.short_path, sorted(KILN_ISAS, key = _neg_rank)),
    )
    ctx.actions.write(ctx.outputs.rows, _rows_txt(KILN_ISAS))

_kiln_isa_table = rule(
    implementation = _kiln_isa_table_impl,
    attrs = {
        "cc": attr.output(mandatory = True),
        "rows": attr.output(mandatory = True),
    },
)

def kiln_isa_table(name, **kwargs):
    _kiln_isa_table(name = name, cc = name + ".cc", rows = name + "_rows.txt", **kwargs)

# The package of every row: what the table's host detection links.
KILN_ISA_PACKAGES = ["//isa/%s" % row.name for row in KILN_ISAS]
