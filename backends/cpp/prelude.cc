// The helper code at the top of every generated translation unit (see
// prelude.h). Semantics mirror ir/loop/interpreter.cc.
#include "backends/cpp/prelude.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace kiln::backends::cpp {
namespace {

// ir/graph/bf16_bits.inc as a string literal (a genrule wraps it): the
// interpreters' bf16 conversion, compiled into generated code as is.
constexpr char kBf16Bits[] =
#include "backends/cpp/bf16_bits_text.inc"
    ;

}  // namespace

absl::string_view ScalarPrelude() {
  static constexpr char kText[] = R"cc(#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace {
namespace kiln_rt {

inline int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t FloorMod(int64_t a, int64_t b) {
  const int64_t m = a % b;
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

template <class T>
inline T Wrap(uint64_t v) { return static_cast<T>(v); }
template <>
inline bool Wrap<bool>(uint64_t v) { return v != 0; }

template <class T>
inline T AddW(T a, T b) { return Wrap<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
template <class T>
inline T SubW(T a, T b) { return Wrap<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
template <class T>
inline T MulW(T a, T b) { return Wrap<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
template <class T>
inline T NegW(T a) { return Wrap<T>(uint64_t{0} - static_cast<uint64_t>(a)); }
template <class T>
inline T AbsW(T a) { return (std::is_signed<T>::value && a < T{0}) ? NegW(a) : a; }
template <class T>
inline T SignI(T a) { return static_cast<T>((a > T{0}) - (a < T{0})); }

template <class T>
inline T PowI(T base_t, T exp_t) {
  const int64_t base = base_t, exp = exp_t;
  if (exp < 0) {
    if (base == 1) return T{1};
    if (base == -1) return static_cast<T>((exp % 2 == 0) ? 1 : -1);
    return T{0};
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (int64_t e = exp; e > 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return Wrap<T>(result);
}

// A load_indirect index in [-extent, extent) normalized to [0, extent); any
// other value flags kErrorIndexOutOfRange and reads element 0 of the axis.
template <class T>
inline int64_t IndirectIndex(T v, int64_t extent, int* err) {
  const int64_t n = static_cast<int64_t>(v);
  if (n >= 0 && n < extent) return n;
  if (n < 0 && n >= -extent) return n + extent;
  *err |= 2;
  return 0;
}

// A store_indirect index normalized like IndirectIndex; any other value
// flags kErrorIndexOutOfRange and returns -1 (the store is skipped).
template <class T>
inline int64_t IndirectStoreIndex(T v, int64_t extent, int* err) {
  const int64_t n = static_cast<int64_t>(v);
  if (n >= 0 && n < extent) return n;
  if (n < 0 && n >= -extent) return n + extent;
  *err |= 2;
  return -1;
}

// store_indirect's max/min combine: std::max/std::min (NaN does not
// propagate), as ONNX's reference scatter.
template <class T>
inline T ScatterMax(T a, T b) { return a < b ? b : a; }
template <class T>
inline T ScatterMin(T a, T b) { return b < a ? b : a; }

template <class T>
inline bool IsMinusOne(T b) { return std::is_signed<T>::value && static_cast<int64_t>(b) == -1; }
template <class T>
inline T DivI(T a, T b, int* err) {
  if (b == T{0}) { *err |= 1; return T{0}; }
  if (IsMinusOne(b)) return NegW(a);
  return static_cast<T>(a / b);
}
template <class T>
inline T FmodI(T a, T b, int* err) {
  if (b == T{0}) { *err |= 1; return T{0}; }
  if (IsMinusOne(b)) return T{0};
  return static_cast<T>(a % b);
}
template <class T>
inline T ModI(T a, T b, int* err) {
  if (b == T{0}) { *err |= 1; return T{0}; }
  if (IsMinusOne(b)) return T{0};
  return static_cast<T>(FloorMod(a, b));
}

template <class T>
inline T FloatToInt(double v) {
  if (std::isnan(v)) return T{0};
  v = std::trunc(v);
  int64_t i;
  if (v <= -9223372036854775808.0) {
    i = std::numeric_limits<int64_t>::min();
  } else if (v >= 9223372036854775807.0) {
    i = std::numeric_limits<int64_t>::max();
  } else {
    i = static_cast<int64_t>(v);
  }
  return Wrap<T>(static_cast<uint64_t>(i));
}

template <class T>
inline T MaxF(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a < b ? b : a;
}
template <class T>
inline T MinF(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return b < a ? b : a;
}
template <class T>
inline T SignF(T x) { return std::isnan(x) ? x : static_cast<T>((x > 0) - (x < 0)); }
inline double ModF(double x, double y) {
  double r = std::fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}
inline uint16_t FloatToHalf(float x) {
  uint32_t f;
  memcpy(&f, &x, sizeof(f));
  const uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t a = f & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {
    float v;
    memcpy(&v, &a, sizeof(v));
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v * 16777216.0f)));
  }
  a += 0xc8000fffu + ((a >> 13) & 1u);
  return static_cast<uint16_t>(sign | (a >> 13));
}
inline float RoundHalf(float x) { return HalfToFloat(FloatToHalf(x)); }

}  // namespace kiln_rt
}  // namespace
)cc";
  return kText;
}

absl::string_view VectorPrelude() {
  static constexpr char kText[] = R"cc(
// Lanes of the widest vector of 32-bit lanes this target has.
constexpr size_t kKilnMaxLanes = HWY_MAX_BYTES / 4 > 0 ? HWY_MAX_BYTES / 4 : 1;

// Masked 32-bit loads/stores cannot fault on AVX2/AVX-512 (vmaskmov / k-masks).
#if HWY_TARGET == HWY_AVX2 || !HWY_MEM_OPS_MIGHT_FAULT
#define KILN_MASKED_32BIT_OPS 1
#else
#define KILN_MASKED_32BIT_OPS 0
#endif

template <class D, class T>
HWY_INLINE hn::Vec<D> KilnLoadN(D d, const T* HWY_RESTRICT p, size_t n) {
#if KILN_MASKED_32BIT_OPS
  return hn::MaskedLoad(hn::FirstN(d, n), d, p);
#else
  alignas(64) T tmp[kKilnMaxLanes] = {};
  memcpy(tmp, p, n * sizeof(T));
  return hn::Load(d, tmp);
#endif
}

template <class D, class T>
HWY_INLINE void KilnStoreN(hn::Vec<D> v, D d, T* HWY_RESTRICT p, size_t n) {
#if KILN_MASKED_32BIT_OPS
  hn::BlendedStore(v, hn::FirstN(d, n), d, p);
#else
  alignas(64) T tmp[kKilnMaxLanes];
  hn::Store(v, d, tmp);
  memcpy(p, tmp, n * sizeof(T));
#endif
}

// Contiguous bool buffers (one byte 0/1 per element) as masks of d, n valid
// lanes: byte vectors widened to 32-bit lanes, tails through a small copy.
template <class D>
HWY_INLINE hn::Mask<D> KilnLoadBool(D d, const uint8_t* HWY_RESTRICT p, size_t n) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, decltype(di)> du8;
  alignas(64) uint8_t tmp[kKilnMaxLanes] = {};
  const uint8_t* src = p;
  if (n != hn::Lanes(d)) {
    memcpy(tmp, p, n);
    src = tmp;
  }
  return hn::RebindMask(d, hn::PromoteTo(di, hn::LoadU(du8, src)) != hn::Zero(di));
}

template <class D>
HWY_INLINE void KilnStoreBool(D d, hn::Mask<D> m, uint8_t* HWY_RESTRICT p, size_t n) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, decltype(di)> du8;
  const auto b = hn::DemoteTo(du8, hn::IfThenElseZero(hn::RebindMask(di, m), hn::Set(di, 1)));
  if (n == hn::Lanes(d)) {
    hn::StoreU(b, du8, p);
    return;
  }
  alignas(64) uint8_t tmp[kKilnMaxLanes];
  hn::StoreU(b, du8, tmp);
  memcpy(p, tmp, n);
}

#if HWY_TARGET != HWY_SCALAR
// 4x4 transposes inside every 128-bit block of r0..r3 (32-bit lanes).
template <class D, class V>
HWY_INLINE void KilnTranspose4x4Blocks(D d, V& r0, V& r1, V& r2, V& r3) {
  const hn::Repartition<uint64_t, D> d64;
  const V t0 = hn::InterleaveLower(d, r0, r1);
  const V t1 = hn::InterleaveLower(d, r2, r3);
  const V t2 = hn::InterleaveUpper(d, r0, r1);
  const V t3 = hn::InterleaveUpper(d, r2, r3);
  r0 = hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, t0), hn::BitCast(d64, t1)));
  r1 = hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, t0), hn::BitCast(d64, t1)));
  r2 = hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, t2), hn::BitCast(d64, t3)));
  r3 = hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, t2), hn::BitCast(d64, t3)));
}
#endif

// A 2-D tile transposed through registers: tile[c * L + r] = src[r *
// row_stride + c] for r < nrows, c < ncols (L = Lanes(d); other entries 0).
// Rows are contiguous loads, tile columns are aligned vectors; 4-, 8- and
// (x86 AVX-512) 16-lane targets transpose in registers, others element by
// element.
template <class D, class T>
HWY_INLINE void KilnTransposeTile(D d, const T* HWY_RESTRICT src, int64_t row_stride,
                                  size_t nrows, size_t ncols, T* HWY_RESTRICT tile) {
  const size_t L = hn::Lanes(d);
#if HWY_TARGET != HWY_SCALAR
  if (L == 4 || L == 8) {
    auto row = [&](size_t r) {
      if (r >= nrows) return hn::Zero(d);
      const T* p = src + static_cast<int64_t>(r) * row_stride;
      return ncols == L ? hn::LoadU(d, p) : KilnLoadN(d, p, ncols);
    };
    auto r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3);
    KilnTranspose4x4Blocks(d, r0, r1, r2, r3);
    if (L == 4) {
      hn::Store(r0, d, tile);
      hn::Store(r1, d, tile + L);
      hn::Store(r2, d, tile + 2 * L);
      hn::Store(r3, d, tile + 3 * L);
      return;
    }
    auto r4 = row(4), r5 = row(5), r6 = row(6), r7 = row(7);
    KilnTranspose4x4Blocks(d, r4, r5, r6, r7);
    hn::Store(hn::ConcatLowerLower(d, r4, r0), d, tile);
    hn::Store(hn::ConcatLowerLower(d, r5, r1), d, tile + L);
    hn::Store(hn::ConcatLowerLower(d, r6, r2), d, tile + 2 * L);
    hn::Store(hn::ConcatLowerLower(d, r7, r3), d, tile + 3 * L);
    hn::Store(hn::ConcatUpperUpper(d, r4, r0), d, tile + 4 * L);
    hn::Store(hn::ConcatUpperUpper(d, r5, r1), d, tile + 5 * L);
    hn::Store(hn::ConcatUpperUpper(d, r6, r2), d, tile + 6 * L);
    hn::Store(hn::ConcatUpperUpper(d, r7, r3), d, tile + 7 * L);
    return;
  }
#endif
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if (L == 16) {
    // 4x4 transposes inside each group of 4 rows leave column 4j+i, rows
    // 4g..4g+3, in block j of row 4g+i; a 4x4 transpose of 128-bit blocks
    // across rows i, 4+i, 8+i, 12+i gathers column 4j+i.
    auto row = [&](size_t r) {
      if (r >= nrows) return hn::Zero(d);
      const T* p = src + static_cast<int64_t>(r) * row_stride;
      return ncols == L ? hn::LoadU(d, p) : KilnLoadN(d, p, ncols);
    };
    hn::Vec<D> r[16];
    for (size_t g = 0; g < 4; ++g) {
      for (size_t i = 0; i < 4; ++i) r[4 * g + i] = row(4 * g + i);
      KilnTranspose4x4Blocks(d, r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]);
    }
    for (size_t i = 0; i < 4; ++i) {
      const hn::Vec<D> x0 = hn::ConcatLowerLower(d, r[8 + i], r[i]);    // A0 A1 C0 C1
      const hn::Vec<D> x1 = hn::ConcatUpperUpper(d, r[8 + i], r[i]);    // A2 A3 C2 C3
      const hn::Vec<D> y0 = hn::ConcatLowerLower(d, r[12 + i], r[4 + i]);  // B0 B1 D0 D1
      const hn::Vec<D> y1 = hn::ConcatUpperUpper(d, r[12 + i], r[4 + i]);  // B2 B3 D2 D3
      hn::Store(hn::OddEvenBlocks(hn::SwapAdjacentBlocks(y0), x0), d, tile + i * L);
      hn::Store(hn::OddEvenBlocks(y0, hn::SwapAdjacentBlocks(x0)), d, tile + (4 + i) * L);
      hn::Store(hn::OddEvenBlocks(hn::SwapAdjacentBlocks(y1), x1), d, tile + (8 + i) * L);
      hn::Store(hn::OddEvenBlocks(y1, hn::SwapAdjacentBlocks(x1)), d, tile + (12 + i) * L);
    }
    return;
  }
#endif
  for (size_t c = 0; c < L; ++c) {
    for (size_t r = 0; r < L; ++r) {
      tile[c * L + r] = (r < nrows && c < ncols) ? src[static_cast<int64_t>(r) * row_stride + c] : T{0};
    }
  }
}

// Lanes where `bad` holds are recomputed with the scalar function `f`: the
// fast path for in-range inputs, exact libm results at the edges (NaN, inf,
// outside the Highway function's valid range).
template <class D, class M, class F>
HWY_NOINLINE hn::Vec<D> KilnPatchLanes(D d, hn::Vec<D> x, hn::Vec<D> r, M bad, F f) {
  alignas(64) float xs[kKilnMaxLanes], rs[kKilnMaxLanes], ms[kKilnMaxLanes];
  hn::Store(x, d, xs);
  hn::Store(r, d, rs);
  hn::Store(hn::IfThenElseZero(bad, hn::Set(d, 1.0f)), d, ms);
  for (size_t l = 0; l < hn::Lanes(d); ++l) {
    if (ms[l] != 0.0f) rs[l] = f(xs[l]);
  }
  return hn::Load(d, rs);
}
template <class D, class M, class F>
HWY_INLINE hn::Vec<D> KilnPatch(D d, hn::Vec<D> x, hn::Vec<D> r, M bad, F f) {
  if (HWY_LIKELY(hn::AllFalse(d, bad))) return r;
  return KilnPatchLanes(d, x, r, bad, f);
}

template <class D, class F>
HWY_INLINE hn::Vec<D> KilnLanewise1(D d, hn::Vec<D> a, size_t n, F f) {
  using T = hn::TFromD<D>;
  alignas(64) T as[kKilnMaxLanes];
  alignas(64) T rs[kKilnMaxLanes] = {};
  hn::Store(a, d, as);
  for (size_t l = 0; l < n; ++l) rs[l] = f(as[l]);
  return hn::Load(d, rs);
}

template <class D, class F>
HWY_INLINE hn::Vec<D> KilnLanewise2(D d, hn::Vec<D> a, hn::Vec<D> b, size_t n, F f) {
  using T = hn::TFromD<D>;
  alignas(64) T as[kKilnMaxLanes], bs[kKilnMaxLanes];
  alignas(64) T rs[kKilnMaxLanes] = {};
  hn::Store(a, d, as);
  hn::Store(b, d, bs);
  for (size_t l = 0; l < n; ++l) rs[l] = f(as[l], bs[l]);
  return hn::Load(d, rs);
}

template <class D>
HWY_NOINLINE hn::Vec<D> KilnExp(D d, hn::Vec<D> x) {
  // Highway's Exp is exact to 1 ULP on [-87, 88] and returns exactly 0
  // below -104 (also for -inf), where float exp underflows to 0 anyway:
  // only NaN, overflow and the subnormal results in between go to libm.
  // (Masked attention scores sit far below -104: they stay vectorized.)
  const auto ok = hn::Or(hn::And(x >= hn::Set(d, -87.0f), x <= hn::Set(d, 88.0f)),
                         x < hn::Set(d, -104.0f));
  return KilnPatch(d, x, hn::Exp(d, x), hn::Not(ok),
                   [](float v) { return static_cast<float>(std::exp(static_cast<double>(v))); });
}
template <class D>
HWY_NOINLINE hn::Vec<D> KilnLog(D d, hn::Vec<D> x) {
  const auto ok = hn::And(x >= hn::Set(d, std::numeric_limits<float>::min()),
                          x < hn::Set(d, std::numeric_limits<float>::infinity()));
  return KilnPatch(d, x, hn::Log(d, x), hn::Not(ok),
                   [](float v) { return static_cast<float>(std::log(static_cast<double>(v))); });
}
template <class D>
HWY_NOINLINE hn::Vec<D> KilnSigmoid(D d, hn::Vec<D> x) {
  const auto one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, KilnExp(d, hn::Neg(x))));
}
template <class D>
HWY_NOINLINE hn::Vec<D> KilnTanh(D d, hn::Vec<D> x) {
  return KilnPatch(d, x, hn::Tanh(d, x), hn::IsNaN(x),
                   [](float v) { return static_cast<float>(std::tanh(static_cast<double>(v))); });
}

#define KILN_RANGE_CHECKED(NAME, HWYFN, LIBM, OK)                                         \
  template <class D>                                                                      \
  HWY_NOINLINE hn::Vec<D> NAME(D d, hn::Vec<D> x) {                                       \
    const auto ax = hn::Abs(x);                                                           \
    (void)ax;                                                                             \
    return KilnPatch(d, x, hn::HWYFN(d, x), hn::Not(OK), [](float v) {                    \
      return static_cast<float>(std::LIBM(static_cast<double>(v)));                       \
    });                                                                                   \
  }
KILN_RANGE_CHECKED(KilnSin, Sin, sin, ax <= hn::Set(d, 39000.0f))
KILN_RANGE_CHECKED(KilnCos, Cos, cos, ax <= hn::Set(d, 39000.0f))
KILN_RANGE_CHECKED(KilnAsin, Asin, asin, ax <= hn::Set(d, 1.0f))
KILN_RANGE_CHECKED(KilnAcos, Acos, acos, ax <= hn::Set(d, 1.0f))
KILN_RANGE_CHECKED(KilnAtan, Atan, atan, ax <= hn::Set(d, 1e30f))
KILN_RANGE_CHECKED(KilnSinh, Sinh, sinh, ax <= hn::Set(d, 88.0f))
KILN_RANGE_CHECKED(KilnAsinh, Asinh, asinh, ax <= hn::Set(d, 1e18f))
KILN_RANGE_CHECKED(KilnAcosh, Acosh, acosh,
                   hn::And(x >= hn::Set(d, 1.0f), x <= hn::Set(d, 1e18f)))
KILN_RANGE_CHECKED(KilnAtanh, Atanh, atanh, ax < hn::Set(d, 1.0f))
#undef KILN_RANGE_CHECKED

template <class D>
HWY_NOINLINE hn::Vec<D> KilnErf(D d, hn::Vec<D> x) {
  const auto ax = hn::Abs(x);
  // |x| < 0.875: x + x * P(x^2).
  const auto x2 = hn::Mul(x, x);
  auto p = hn::Set(d, 8.7376281672367883e-05f);
  p = hn::MulAdd(p, x2, hn::Set(d, -8.2258736029141991e-04f));
  p = hn::MulAdd(p, x2, hn::Set(d, 5.2080755779143886e-03f));
  p = hn::MulAdd(p, x2, hn::Set(d, -2.6862144509465564e-02f));
  p = hn::MulAdd(p, x2, hn::Set(d, 1.1283743999789085e-01f));
  p = hn::MulAdd(p, x2, hn::Set(d, -3.7612636912750291e-01f));
  p = hn::MulAdd(p, x2, hn::Set(d, 1.2837916701052962e-01f));
  const auto small = hn::MulAdd(x, p, x);
  // 0.875 <= |x| < 4: 1 - erfc(|x|), erfc a polynomial in t = |x| - 2.4375.
  const auto t = hn::Sub(hn::Min(ax, hn::Set(d, 4.0f)), hn::Set(d, 2.4375f));
  auto q = hn::Set(d, 3.5602601053622327e-08f);
  q = hn::MulAdd(q, t, hn::Set(d, 3.0372080418293866e-07f));
  q = hn::MulAdd(q, t, hn::Set(d, -1.5124311407456687e-06f));
  q = hn::MulAdd(q, t, hn::Set(d, -2.1638611184232500e-06f));
  q = hn::MulAdd(q, t, hn::Set(d, 1.9151450385662528e-05f));
  q = hn::MulAdd(q, t, hn::Set(d, -2.1698654113199225e-05f));
  q = hn::MulAdd(q, t, hn::Set(d, -7.3163911425524886e-05f));
  q = hn::MulAdd(q, t, hn::Set(d, 3.0345828433359291e-04f));
  q = hn::MulAdd(q, t, hn::Set(d, -4.1351869654271666e-04f));
  q = hn::MulAdd(q, t, hn::Set(d, -3.7881924056811563e-04f));
  q = hn::MulAdd(q, t, hn::Set(d, 3.0012338214336072e-03f));
  q = hn::MulAdd(q, t, hn::Set(d, -7.2055943658021968e-03f));
  q = hn::MulAdd(q, t, hn::Set(d, 1.0702499339271582e-02f));
  q = hn::MulAdd(q, t, hn::Set(d, -1.0758861024640210e-02f));
  q = hn::MulAdd(q, t, hn::Set(d, 7.2290114406885391e-03f));
  q = hn::MulAdd(q, t, hn::Set(d, -2.9657397662443789e-03f));
  q = hn::MulAdd(q, t, hn::Set(d, 5.6654345656451111e-04f));
  const auto one = hn::Set(d, 1.0f);
  auto large = hn::Sub(one, q);
  large = hn::IfThenElse(ax >= hn::Set(d, 4.0f), one, large);
  large = hn::CopySign(large, x);
  const auto r = hn::IfThenElse(ax < hn::Set(d, 0.875f), small, large);
  return KilnPatch(d, x, r, hn::IsNaN(x),
                   [](float v) { return static_cast<float>(std::erf(static_cast<double>(v))); });
}

template <class D>
HWY_INLINE hn::Vec<D> KilnMaxF(D d, hn::Vec<D> a, hn::Vec<D> b) {
  const auto nan = hn::Or(hn::IsNaN(a), hn::IsNaN(b));
  return hn::IfThenElse(nan, hn::Set(d, std::numeric_limits<float>::quiet_NaN()), hn::Max(a, b));
}
template <class D>
HWY_INLINE hn::Vec<D> KilnMinF(D d, hn::Vec<D> a, hn::Vec<D> b) {
  const auto nan = hn::Or(hn::IsNaN(a), hn::IsNaN(b));
  return hn::IfThenElse(nan, hn::Set(d, std::numeric_limits<float>::quiet_NaN()), hn::Min(a, b));
}
template <class D>
HWY_INLINE hn::Vec<D> KilnSignF(D d, hn::Vec<D> x) {
  const auto s = hn::CopySign(hn::Set(d, 1.0f), x);
  const auto z = hn::IfThenElseZero(hn::Not(x == hn::Zero(d)), s);
  return hn::IfThenElse(hn::IsNaN(x), x, z);
}
template <class D>
HWY_INLINE hn::Vec<D> KilnSignI(D d, hn::Vec<D> x) {
  const auto z = hn::Zero(d);
  return hn::IfThenElse(x > z, hn::Set(d, 1), hn::IfThenElseZero(x < z, hn::Set(d, -1)));
}
// f32 -> i32 with the interpreter's semantics: NaN 0, saturate to int64, wrap.
template <class DI, class DF>
HWY_INLINE hn::Vec<DI> KilnF32ToI32(DI di, DF df, hn::Vec<DF> x) {
  const auto ok = hn::Abs(x) < hn::Set(df, 2147483520.0f);
  const auto r = hn::ConvertTo(di, hn::IfThenElseZero(ok, x));
  if (HWY_LIKELY(hn::AllTrue(df, ok))) return r;
  alignas(64) float xs[kKilnMaxLanes];
  alignas(64) int32_t rs[kKilnMaxLanes];
  hn::Store(x, df, xs);
  hn::Store(r, di, rs);
  for (size_t l = 0; l < hn::Lanes(df); ++l) {
    rs[l] = kiln_rt::FloatToInt<int32_t>(static_cast<double>(xs[l]));
  }
  return hn::Load(di, rs);
}
)cc";
  return kText;
}

absl::string_view LowPrecisionScalarPrelude() {
  static const std::string* const kText = new std::string(absl::StrCat(
      "\nnamespace {\nnamespace kiln_rt {\n\n", kBf16Bits, R"cc(
inline float BF16ToFloat(uint16_t b) { return Bf16BitsToFloat(b); }
inline uint16_t FloatToBF16(float x) { return FloatToBf16Bits(x); }
inline float RoundBF16(float x) { return Bf16BitsToFloat(FloatToBf16Bits(x)); }

// Float to i8 / u8: truncates, NaN 0, out-of-range values saturate.
template <class T>
inline T FloatToNarrowInt(double v) {
  if (std::isnan(v)) return T{0};
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) {
    return std::numeric_limits<T>::lowest();
  }
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
    return std::numeric_limits<T>::max();
  }
  return static_cast<T>(v);
}

}  // namespace kiln_rt
}  // namespace
)cc"));
  return *kText;
}

absl::string_view LowPrecisionVectorPrelude() {
  static constexpr char kText[] = R"cc(
// f16 / bf16 / i8 / u8 buffers: narrow lanes in memory, f32 (i32) lanes in
// registers. Tails go through a zeroed copy (no masked 8/16-bit loads).
template <class D, class T>
HWY_INLINE hn::Vec<D> KilnLoadNarrow(D d, const T* HWY_RESTRICT p, size_t n) {
  if (n == hn::Lanes(d)) return hn::LoadU(d, p);
  alignas(64) T tmp[kKilnMaxLanes] = {};
  memcpy(tmp, p, n * sizeof(T));
  return hn::Load(d, tmp);
}
template <class D, class T>
HWY_INLINE void KilnStoreNarrow(hn::Vec<D> v, D d, T* HWY_RESTRICT p, size_t n) {
  if (n == hn::Lanes(d)) return hn::StoreU(v, d, p);
  alignas(64) T tmp[kKilnMaxLanes];
  hn::Store(v, d, tmp);
  memcpy(p, tmp, n * sizeof(T));
}

// f16: F16C / NEON conversions (round to nearest even, subnormals, inf and
// NaN exact). HWY_SCALAR's software DemoteTo truncates: there, kiln_rt's.
template <class DF>
HWY_INLINE hn::Vec<DF> KilnLoadF16(DF df, const uint16_t* HWY_RESTRICT p, size_t n) {
#if HWY_TARGET == HWY_SCALAR
  (void)n;
  return hn::Set(df, kiln_rt::HalfToFloat(p[0]));
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, KilnLoadNarrow(dh, reinterpret_cast<const hwy::float16_t*>(p), n));
#endif
}
template <class DF>
HWY_INLINE void KilnStoreF16(DF df, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p, size_t n) {
#if HWY_TARGET == HWY_SCALAR
  (void)df;
  (void)n;
  p[0] = kiln_rt::FloatToHalf(hn::GetLane(v));
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  KilnStoreNarrow(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p), n);
#endif
}
// An f32 value rounded to the nearest f16 (a cast to f16).
template <class DF>
HWY_INLINE hn::Vec<DF> KilnRoundF16(DF df, hn::Vec<DF> v) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(df, kiln_rt::RoundHalf(hn::GetLane(v)));
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::DemoteTo(dh, v));
#endif
}

// bf16 is the upper half of an f32: widening shifts left by 16; narrowing
// first rounds the f32 bits to nearest even at bit 16 (NaN quieted), as
// kiln_rt::FloatToBf16Bits does (Highway 1.0's DemoteTo truncates).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> KilnBF16Bits(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::Add(bits, hn::Add(hn::Set(du, 0x7fffu), lsb));
  const auto quiet = hn::Or(bits, hn::Set(du, 0x00400000u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, rounded);
}
template <class DF>
HWY_INLINE hn::Vec<DF> KilnLoadBF16(DF df, const uint16_t* HWY_RESTRICT p, size_t n) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, KilnLoadNarrow(du16, p, n))));
}
template <class DF>
HWY_INLINE void KilnStoreBF16(DF df, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p, size_t n) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const auto top = hn::BitCast(di, hn::ShiftRight<16>(KilnBF16Bits(df, v)));
  KilnStoreNarrow(hn::DemoteTo(du16, top), du16, p, n);
}
template <class DF>
HWY_INLINE hn::Vec<DF> KilnRoundBF16(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du;
  return hn::BitCast(df, hn::And(KilnBF16Bits(df, v), hn::Set(du, 0xffff0000u)));
}

// f32 buffers and values in kernels on f64 lanes: widened exactly, and
// rounded to f32 after every op that makes an f32 value.
template <class DD>
HWY_INLINE hn::Vec<DD> KilnLoadF32AsF64(DD dd, const float* HWY_RESTRICT p, size_t n) {
  const hn::Rebind<float, DD> df32;
  return hn::PromoteTo(dd, KilnLoadNarrow(df32, p, n));
}
template <class DD>
HWY_INLINE void KilnStoreF64AsF32(DD dd, hn::Vec<DD> v, float* HWY_RESTRICT p, size_t n) {
  const hn::Rebind<float, DD> df32;
  KilnStoreNarrow(hn::DemoteTo(df32, v), df32, p, n);
}
template <class DD>
HWY_INLINE hn::Vec<DD> KilnRoundF32(DD dd, hn::Vec<DD> v) {
  const hn::Rebind<float, DD> df32;
  return hn::PromoteTo(dd, hn::DemoteTo(df32, v));
}
// f16 / bf16 buffers and casts on f64 lanes: through f32 (exact for loads
// and stores of values already rounded; a cast rounds to f32, then to f16 /
// bf16, as the interpreter does).
template <class DD>
HWY_INLINE hn::Vec<DD> KilnLoadF16AsF64(DD dd, const uint16_t* HWY_RESTRICT p, size_t n) {
  const hn::Rebind<float, DD> df32;
  return hn::PromoteTo(dd, KilnLoadF16(df32, p, n));
}
template <class DD>
HWY_INLINE hn::Vec<DD> KilnLoadBF16AsF64(DD dd, const uint16_t* HWY_RESTRICT p, size_t n) {
  const hn::Rebind<float, DD> df32;
  return hn::PromoteTo(dd, KilnLoadBF16(df32, p, n));
}
template <class DD>
HWY_INLINE void KilnStoreF64AsF16(DD dd, hn::Vec<DD> v, uint16_t* HWY_RESTRICT p, size_t n) {
  const hn::Rebind<float, DD> df32;
  KilnStoreF16(df32, hn::DemoteTo(df32, v), p, n);
}
template <class DD>
HWY_INLINE void KilnStoreF64AsBF16(DD dd, hn::Vec<DD> v, uint16_t* HWY_RESTRICT p, size_t n) {
  const hn::Rebind<float, DD> df32;
  KilnStoreBF16(df32, hn::DemoteTo(df32, v), p, n);
}
template <class DD>
HWY_INLINE hn::Vec<DD> KilnRoundF16OnF64(DD dd, hn::Vec<DD> v) {
  const hn::Rebind<float, DD> df32;
  return hn::PromoteTo(dd, KilnRoundF16(df32, hn::DemoteTo(df32, v)));
}
template <class DD>
HWY_INLINE hn::Vec<DD> KilnRoundBF16OnF64(DD dd, hn::Vec<DD> v) {
  const hn::Rebind<float, DD> df32;
  return hn::PromoteTo(dd, KilnRoundBF16(df32, hn::DemoteTo(df32, v)));
}

// i8 / u8 buffers in i32 lanes. Their values are already in range (every
// op of those dtypes wraps), so the saturating DemoteTo stores them exactly.
template <class DI, class T>
HWY_INLINE hn::Vec<DI> KilnLoadInt8(DI di, const T* HWY_RESTRICT p, size_t n) {
  const hn::Rebind<T, DI> d8;
  return hn::PromoteTo(di, KilnLoadNarrow(d8, p, n));
}
template <class DI, class T>
HWY_INLINE void KilnStoreInt8(DI di, hn::Vec<DI> v, T* HWY_RESTRICT p, size_t n) {
  const hn::Rebind<T, DI> d8;
  KilnStoreNarrow(hn::DemoteTo(d8, v), d8, p, n);
}
// f32 lanes to i8 / u8 values in i32 lanes (kiln_rt::FloatToNarrowInt):
// clamped in f32, then truncated; NaN 0.
template <class DI, class DF>
HWY_INLINE hn::Vec<DI> KilnF32ToI8(DI di, DF df, hn::Vec<DF> x) {
  const auto c = hn::Min(hn::Max(x, hn::Set(df, -128.0f)), hn::Set(df, 127.0f));
  return hn::ConvertTo(di, hn::IfThenZeroElse(hn::IsNaN(x), c));
}
template <class DI, class DF>
HWY_INLINE hn::Vec<DI> KilnF32ToU8(DI di, DF df, hn::Vec<DF> x) {
  const auto c = hn::Min(hn::Max(x, hn::Zero(df)), hn::Set(df, 255.0f));
  return hn::ConvertTo(di, hn::IfThenZeroElse(hn::IsNaN(x), c));
}
// Two's-complement wrap of i32 lanes to i8 / u8 (kiln_rt::Wrap).
template <class DI>
HWY_INLINE hn::Vec<DI> KilnWrapI8(DI di, hn::Vec<DI> v) {
  (void)di;
  return hn::ShiftRight<24>(hn::ShiftLeft<24>(v));
}
template <class DI>
HWY_INLINE hn::Vec<DI> KilnWrapU8(DI di, hn::Vec<DI> v) {
  return hn::And(v, hn::Set(di, 0xff));
}
)cc";
  return kText;
}

}  // namespace kiln::backends::cpp
