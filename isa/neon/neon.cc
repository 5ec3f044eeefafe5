// File: isa/neon/neon.cc — AArch64 Advanced SIMD: host detection through
// Highway (HWY_NEON).
#include "isa/neon/neon.h"

#include "hwy/targets.h"

namespace kiln::isa::neon {

bool HostSupports() { return (hwy::SupportedTargets() & HWY_NEON) != 0; }

}  // namespace kiln::isa::neon
