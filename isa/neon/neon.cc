// isa/neon: AArch64 Advanced SIMD, Highway's HWY_NEON. On an x86 host its code
// is built with the aarch64 cross compiler and run under qemu-aarch64 (tests
// only); -march=armv8-a+crypto because Highway's NEON target wants AES.
#include "hwy/detect_targets.h"
#include "isa/isa.h"

namespace kiln::isa {
namespace {

const bool kRegistered = RegisterIsa(VecIsa{
    .name = "neon",
    .rank = 10,
    .vector_bytes = 16,
    .hwy_target = HWY_NEON,
    .cxx =
#if defined(__aarch64__)
        "g++",
#else
        "aarch64-linux-gnu-g++",
#endif
    .cxx_flags = {"-march=armv8-a+crypto", "-DHWY_COMPILE_ONLY_STATIC"},
    .emulator =
#if defined(__aarch64__)
        "",
#else
        "qemu-aarch64 -L /usr/aarch64-linux-gnu",
#endif
    .host_supports = [] { return HostHasHwyTarget(HWY_NEON); },
    .transpose_tile = 8,
    .parallel_grain = 32768,
});

}  // namespace
}  // namespace kiln::isa
