// File: isa/avx2/avx2.h — the avx2 VecISA module's host detection; its
// row (name, flags, Highway target, tuning) is in isa/isas.bzl.
#ifndef KILN_ISA_AVX2_AVX2_H_
#define KILN_ISA_AVX2_AVX2_H_

namespace kiln::isa::avx2 {

// May code built with the avx2 row's flags run on this CPU?
bool HostSupports();

}  // namespace kiln::isa::avx2

#endif  // KILN_ISA_AVX2_AVX2_H_
