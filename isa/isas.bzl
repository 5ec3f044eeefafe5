"""The VecISA modules, one row each: what //isa:registry's C++ table, the
per-ISA test macro (tools/isa_test.bzl) and the AOT macro (tools/aot.bzl) read.

A new ISA `foo` is a row here plus the package isa/foo/, whose library
`//isa/foo` has header isa/foo/foo.h declaring
`namespace kiln::isa::foo { bool HostSupports(); }` (may generated code for
it run on this CPU?) and whose test checks that detection against an
independent source and that the row's flags select the row's Highway target
(isa/avx2/ is the model). Detection is the package's function, not a row
field: most are one Highway bit test, but an ISA Highway 1.0.3 has no target
for (AVX-512 BF16/FP16, AMX and its OS permission) needs its own.
Rows may be in any order; rank decides preference.

    load("//isa:isas.bzl", "KILN_ISA_NAMES")

Fields of a row (isa/isa.h's VecIsa says how the C++ side uses them):
  name: the --isa= token, the package isa/<name>, the C++ namespace of its
    HostSupports, and the test shard tag isa_<name>.
  rank: higher is preferred when the CPU runs several; unique.
  vector_bytes: f32 lanes = vector_bytes / 4.
  hwy_target: the Highway macro (hwy/detect_targets.h) naming the static
    target `cxx_flags` select; generated kernels #error on any other.
  cxx: the compiler for generated code on a build host of this ISA's
    architecture.
  cxx_flags: ISA flags; the JIT puts them first on its command line (and
    so in its cache key), kiln_aot_library makes them the copts of the
    ISA's kernel cc_library after the JIT's -O3 -fopenmp.
  cross: None, or how a build host of another architecture builds and runs
    this ISA's code: struct(native_macro, cxx, emulator). Where the C++
    macro `native_macro` is not defined, generated code is built with
    `cxx` and runs only under `emulator` (tests only).
  onednn_max_isa: DNNL_MAX_CPU_ISA while `kilnc aot` compiles this ISA's
    program (its oneDNN layouts are then those of CPUs running this ISA);
    None: kiln_aot_library cannot build this ISA.
  transpose_tile: elements per side of a 2-D transpose tile.
  parallel_grain: the smallest number of elements worth a parallel loop.
"""

KILN_ISAS = [
    # The portable fallback; Highway's HWY_SCALAR target, no SIMD.
    struct(
        name = "scalar",
        rank = 0,
        vector_bytes = 4,
        hwy_target = "HWY_SCALAR",
        cxx = "g++",
        cxx_flags = ["-DHWY_COMPILE_ONLY_SCALAR"],
        cross = None,
        onednn_max_isa = "SSE41",
        transpose_tile = 1,
        parallel_grain = 32768,
    ),
    # x86 AVX2+FMA, Highway's HWY_AVX2. GCC 12 with Highway 1.0.3 needs
    # -march=haswell plus -maes (its SSE4 baseline wants AES+PCLMUL), else
    # the static target silently drops to SSSE3.
    struct(
        name = "avx2",
        rank = 20,
        vector_bytes = 32,
        hwy_target = "HWY_AVX2",
        cxx = "g++",
        cxx_flags = ["-march=haswell", "-maes", "-DHWY_COMPILE_ONLY_STATIC"],
        cross = None,
        onednn_max_isa = "AVX2",
        transpose_tile = 8,
        parallel_grain = 32768,
    ),
    # x86 AVX-512 F/BW/DQ/VL, Highway's HWY_AVX3.
    struct(
        name = "avx512",
        rank = 30,
        vector_bytes = 64,
        hwy_target = "HWY_AVX3",
        cxx = "g++",
        cxx_flags = ["-march=skylake-avx512", "-DHWY_COMPILE_ONLY_STATIC"],
        cross = None,
        onednn_max_isa = "AVX512_CORE",
        transpose_tile = 16,
        parallel_grain = 65536,
    ),
    # AArch64 Advanced SIMD, Highway's HWY_NEON; -march=armv8-a+crypto
    # because Highway's NEON target wants AES. On an x86 host its code is
    # built with the aarch64 cross compiler and run under qemu-aarch64.
    struct(
        name = "neon",
        rank = 10,
        vector_bytes = 16,
        hwy_target = "HWY_NEON",
        cxx = "g++",
        cxx_flags = ["-march=armv8-a+crypto", "-DHWY_COMPILE_ONLY_STATIC"],
        cross = struct(
            native_macro = "__aarch64__",
            cxx = "aarch64-linux-gnu-g++",
            emulator = "qemu-aarch64 -L /usr/aarch64-linux-gnu",
        ),
        onednn_max_isa = None,
        transpose_tile = 8,
        parallel_grain = 32768,
    ),
]

def _rank(row):
    return row.rank

def _check(rows):
    names = {}
    ranks = {}
    for row in rows:
        if not row.name.isalnum() or row.name != row.name.lower() or not row.name[0].isalpha():
            fail("isa/isas.bzl: ISA name '%s' must be a lower-case identifier" % row.name)
        if row.name in names:
            fail("isa/isas.bzl: two rows named '%s'" % row.name)
        if row.rank in ranks:
            fail("isa/isas.bzl: '%s' and '%s' have the same rank" % (ranks[row.rank], row.name))
        names[row.name] = True
        ranks[row.rank] = row.name

_check(KILN_ISAS)

# Every ISA, in row order: kiln_isa_test's default shards.
KILN_ISA_NAMES = [row.name for row in KILN_ISAS]

# Built by the host's compiler and run in the compiling process on this
# project's x86-64 hosts: the ISAs kiln::Compiler's compiled engine runs.
KILN_IN_PROCESS_ISAS = [row.name for row in KILN_ISAS if row.cross == None]

# Cross-built and run under an emulator on an x86-64 host (neon).
KILN_EMULATED_ISAS = [row.name for row in KILN_ISAS if row.cross != None]

# What kiln_aot_library builds by default: every ISA it can build, worst
# first (the order of `kilnc aot --isas=` and of the library's ISA table).
KILN_AOT_ISAS = [row.name for row in sorted(KILN_ISAS, key = _rank) if row.onednn_max_isa != None]

def kiln_isa_row(name):
    """The row of ISA `name`, or None."""
    for row in KILN_ISAS:
        if row.name == name:
            return row
    return None
