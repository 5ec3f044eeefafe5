// Element type names, sizes and f16/bf16 conversion.
#include "ir/graph/dtype.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln::ir {
namespace bf16_bits {
#include "ir/graph/bf16_bits.inc"
}  // namespace bf16_bits

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kF64: return "f64";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
    case DType::kBF16: return "bf16";
    case DType::kInvalid: break;
  }
  return "invalid";
}

std::optional<DType> DTypeFromName(absl::string_view name) {
  for (DType d : {DType::kF32, DType::kF16, DType::kF64, DType::kI64,
                  DType::kI32, DType::kI8, DType::kU8, DType::kBool, DType::kBF16}) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kF64: return 8;
    case DType::kI64: return 8;
    case DType::kI32: return 4;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
    case DType::kBool: return 1;
    case DType::kBF16: return 2;
    case DType::kInvalid: break;
  }
  return 0;
}

bool IsFloat(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 ||
         d == DType::kF64;
}
bool IsLowPrecisionFloat(DType d) { return d == DType::kF16 || d == DType::kBF16; }
bool IsInteger(DType d) {
  return d == DType::kI64 || d == DType::kI32 || d == DType::kI8 ||
         d == DType::kU8;
}
bool IsSigned(DType d) { return IsFloat(d) || (IsInteger(d) && d != DType::kU8); }

float HalfToFloat(Float16 h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1f;
  const uint32_t mant = h.bits & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -f : f;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

Float16 FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  Float16 h;
  if (abs >= 0x7f800000u) {  // inf or nan
    h.bits = sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);
    return h;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    h.bits = sign | 0x7c00u;
    return h;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal
    // value in units of 2^-24, rounded to nearest even.
    float a;
    std::memcpy(&a, &abs, sizeof(a));
    float scaled = a * 16777216.0f;  // 2^24
    h.bits = sign | static_cast<uint16_t>(std::nearbyint(scaled));
    return h;
  }
  // Normal: rebias exponent, round mantissa to nearest even.
  uint32_t mant = abs & 0x7fffffu;
  uint32_t exp = (abs >> 23) - 112;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  h.bits = sign | static_cast<uint16_t>(half);
  return h;
}

float BFloat16ToFloat(BFloat16 b) { return bf16_bits::Bf16BitsToFloat(b.bits); }

BFloat16 FloatToBFloat16(float f) {
  BFloat16 b;
  b.bits = bf16_bits::FloatToBf16Bits(f);
  return b;
}

}  // namespace kiln::ir
