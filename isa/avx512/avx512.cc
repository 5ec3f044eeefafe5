// isa/avx512: x86 AVX-512 F/BW/DQ/VL, Highway's HWY_AVX3.
#include "hwy/detect_targets.h"
#include "isa/isa.h"

namespace kiln::isa {
namespace {

const bool kRegistered = RegisterIsa(VecIsa{
    .name = "avx512",
    .rank = 30,
    .vector_bytes = 64,
    .hwy_target = HWY_AVX3,
    .cxx = "g++",
    .cxx_flags = {"-march=skylake-avx512", "-DHWY_COMPILE_ONLY_STATIC"},
    .emulator = "",
    .host_supports = [] { return HostHasHwyTarget(HWY_AVX3); },
    .transpose_tile = 16,
    .parallel_grain = 65536,
});

}  // namespace
}  // namespace kiln::isa
