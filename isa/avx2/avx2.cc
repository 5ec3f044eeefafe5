// isa/avx2: x86 AVX2+FMA, Highway's HWY_AVX2. GCC 12 with Highway 1.0.3 needs
// -march=haswell plus -maes (its SSE4 baseline wants AES+PCLMUL), else the
// static target silently drops to SSSE3.
#include "hwy/detect_targets.h"
#include "isa/isa.h"

namespace kiln::isa {
namespace {

const bool kRegistered = RegisterIsa(VecIsa{
    .name = "avx2",
    .rank = 20,
    .vector_bytes = 32,
    .hwy_target = HWY_AVX2,
    .cxx = "g++",
    .cxx_flags = {"-march=haswell", "-maes", "-DHWY_COMPILE_ONLY_STATIC"},
    .emulator = "",
    .host_supports = [] { return HostHasHwyTarget(HWY_AVX2); },
    .transpose_tile = 8,
    .parallel_grain = 32768,
});

}  // namespace
}  // namespace kiln::isa
