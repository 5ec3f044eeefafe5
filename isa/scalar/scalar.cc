// isa/scalar: the portable fallback; Highway's HWY_SCALAR target, no SIMD.
#include "hwy/detect_targets.h"
#include "isa/isa.h"

namespace kiln::isa {
namespace {

const bool kRegistered = RegisterIsa(VecIsa{
    .name = "scalar",
    .rank = 0,
    .vector_bytes = 4,
    .hwy_target = HWY_SCALAR,
    .cxx = "g++",
    .cxx_flags = {"-DHWY_COMPILE_ONLY_SCALAR"},
    .emulator = "",
    .host_supports = [] { return true; },
    .transpose_tile = 1,
    .parallel_grain = 32768,
});

}  // namespace
}  // namespace kiln::isa
