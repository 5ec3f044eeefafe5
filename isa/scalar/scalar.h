// File: isa/scalar/scalar.h — the scalar VecISA module's host detection; its
// row (name, flags, Highway target, tuning) is in isa/isas.bzl.
#ifndef KILN_ISA_SCALAR_SCALAR_H_
#define KILN_ISA_SCALAR_SCALAR_H_

namespace kiln::isa::scalar {

// May code built with the scalar row's flags run on this CPU?
bool HostSupports();

}  // namespace kiln::isa::scalar

#endif  // KILN_ISA_SCALAR_SCALAR_H_
