// File: isa/neon/neon.h — the neon VecISA module's host detection; its
// row (name, flags, Highway target, tuning) is in isa/isas.bzl.
#ifndef KILN_ISA_NEON_NEON_H_
#define KILN_ISA_NEON_NEON_H_

namespace kiln::isa::neon {

// May code built with the neon row's flags run on this CPU?
bool HostSupports();

}  // namespace kiln::isa::neon

#endif  // KILN_ISA_NEON_NEON_H_
