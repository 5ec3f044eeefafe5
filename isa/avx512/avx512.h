// File: isa/avx512/avx512.h — the avx512 VecISA module's host detection; its
// row (name, flags, Highway target, tuning) is in isa/isas.bzl.
#ifndef KILN_ISA_AVX512_AVX512_H_
#define KILN_ISA_AVX512_AVX512_H_

namespace kiln::isa::avx512 {

// May code built with the avx512 row's flags run on this CPU?
bool HostSupports();

}  // namespace kiln::isa::avx512

#endif  // KILN_ISA_AVX512_AVX512_H_
