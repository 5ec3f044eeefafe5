// File: isa/avx512/avx512.cc — x86 AVX-512 F/BW/DQ/VL: host detection
// through Highway (HWY_AVX3).
#include "isa/avx512/avx512.h"

#include "hwy/targets.h"

namespace kiln::isa::avx512 {

bool HostSupports() { return (hwy::SupportedTargets() & HWY_AVX3) != 0; }

}  // namespace kiln::isa::avx512
