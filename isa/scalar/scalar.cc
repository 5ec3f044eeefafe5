// File: isa/scalar/scalar.cc — the portable fallback (Highway's HWY_SCALAR):
// every CPU runs it.
#include "isa/scalar/scalar.h"

namespace kiln::isa::scalar {

bool HostSupports() { return true; }

}  // namespace kiln::isa::scalar
