// File: backends/cpp/prelude.h — the helper code every generated translation
// unit starts with: scalar semantics of the loop IR (wrapping integers, floor
// division, NaN-propagating max, f16 conversion) and Highway vector helpers
// (masked tails, range-checked math with a scalar patch, erf).
#ifndef KILN_BACKENDS_CPP_PRELUDE_H_
#define KILN_BACKENDS_CPP_PRELUDE_H_

#include "absl/strings/string_view.h"

namespace kiln::backends::cpp {

// Includes and namespace-scope scalar helpers (namespace kiln_rt, internal
// linkage).
absl::string_view ScalarPrelude();

// Vector helpers; emitted inside `namespace HWY_NAMESPACE` after
// `namespace hn = hwy::HWY_NAMESPACE;` in units with vectorized kernels,
// which also include hwy/contrib/math/math-inl.h.
//
// KilnErf: erf(x) in f32, |x| < 0.875: x + x*P6(x^2); 0.875 <= |x| < 4:
// sign(x)*(1 - P16(|x| - 2.4375)) (Chebyshev fits of erf(x)/x - 1 and erfc);
// |x| >= 4: +-1 (erf(4) rounds to 1 in f32); NaN via std::erf. Max abs error
// against std::erf 8.3e-8 on AVX2 (<= 1.5 ulp of values near 1), checked over a
// dense grid by codegen_test.
absl::string_view VectorPrelude();

// What units of programs with f16, bf16, i8 or u8 values add (and only
// they, so f32 programs' code does not change): after ScalarPrelude, bf16
// conversion in kiln_rt (ir/graph/bf16_bits.inc, the interpreters' own);
// after VectorPrelude in vector units, loads and stores of narrow buffers
// into f32 / i32 lanes (KilnLoadF16, KilnStoreBF16, KilnLoadInt8, ...), the
// rounding of a cast (KilnRoundF16, KilnRoundBF16), float to i8 / u8 casts
// that saturate (kiln_rt::FloatToNarrowInt, KilnF32ToI8, KilnF32ToU8) and
// the integer wraps (KilnWrapI8, KilnWrapU8).
absl::string_view LowPrecisionScalarPrelude();
absl::string_view LowPrecisionVectorPrelude();

}  // namespace kiln::backends::cpp

#endif  // KILN_BACKENDS_CPP_PRELUDE_H_
