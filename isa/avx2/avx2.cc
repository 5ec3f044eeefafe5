// File: isa/avx2/avx2.cc — x86 AVX2+FMA: host detection through Highway
// (HWY_AVX2).
#include "isa/avx2/avx2.h"

#include "hwy/targets.h"

namespace kiln::isa::avx2 {

bool HostSupports() { return (hwy::SupportedTargets() & HWY_AVX2) != 0; }

}  // namespace kiln::isa::avx2
