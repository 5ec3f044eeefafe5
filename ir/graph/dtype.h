// File: ir/graph/dtype.h — element types kiln understands, their names in the
// text IR ("f32", "i64", ...), byte sizes, C++ storage types, and f16/bf16
// helpers.
#ifndef KILN_IR_GRAPH_DTYPE_H_
#define KILN_IR_GRAPH_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace kiln::ir {

// f16 and bf16 are storage types: loaded as f32, computed in f32, rounded
// (to nearest even) only where stored or cast to them.
enum class DType : uint8_t {
  kInvalid = 0,
  kF32,
  kF16,
  kF64,
  kI64,
  kI32,
  kI8,
  kU8,
  kBool,
  kBF16,
};

// IEEE binary16 bits. Distinct type so f16 data is never mistaken for ints.
struct Float16 {
  uint16_t bits = 0;
};

// bfloat16 bits (the upper half of an IEEE binary32). Distinct from Float16.
struct BFloat16 {
  uint16_t bits = 0;
};

// "f32", "f16", "bf16", "f64", "i64", "i32", "i8", "u8", "bool"; "invalid"
// otherwise.
absl::string_view DTypeName(DType dtype);
// Inverse of DTypeName; nullopt for an unknown name.
std::optional<DType> DTypeFromName(absl::string_view name);
// Bytes per element (bool is one byte).
size_t DTypeSize(DType dtype);
bool IsFloat(DType dtype);    // f32, f16, bf16, f64
bool IsInteger(DType dtype);  // i64, i32, i8, u8
bool IsSigned(DType dtype);   // floats and signed integers

float HalfToFloat(Float16 h);
Float16 FloatToHalf(float f);  // round to nearest even, inf/nan preserved
// bf16 <-> f32 (ir/graph/bf16_bits.inc, the conversion generated code uses
// too): exact widening; narrowing rounds to nearest even, overflow to inf,
// NaN stays a quiet NaN.
float BFloat16ToFloat(BFloat16 b);
BFloat16 FloatToBFloat16(float f);
// Whether a value of `dtype` is stored narrower than it computes (f16, bf16:
// f32 arithmetic, rounded at stores and casts).
bool IsLowPrecisionFloat(DType dtype);

// The storage structs of f16 and bf16, and generic access to them for code
// templated on the element type: kIsLowPrecision<T>, ToFloat(v),
// FromFloat<T>(f) (the conversions above).
template <typename T>
inline constexpr bool kIsLowPrecision = false;
template <> inline constexpr bool kIsLowPrecision<Float16> = true;
template <> inline constexpr bool kIsLowPrecision<BFloat16> = true;
inline float ToFloat(Float16 h) { return HalfToFloat(h); }
inline float ToFloat(BFloat16 b) { return BFloat16ToFloat(b); }
template <typename T>
T FromFloat(float f);
template <> inline Float16 FromFloat<Float16>(float f) { return FloatToHalf(f); }
template <> inline BFloat16 FromFloat<BFloat16>(float f) { return FloatToBFloat16(f); }

// The C++ type that stores one element of each dtype.
template <DType D>
struct CTypeOf;
template <> struct CTypeOf<DType::kF32> { using type = float; };
template <> struct CTypeOf<DType::kF16> { using type = Float16; };
template <> struct CTypeOf<DType::kF64> { using type = double; };
template <> struct CTypeOf<DType::kI64> { using type = int64_t; };
template <> struct CTypeOf<DType::kI32> { using type = int32_t; };
template <> struct CTypeOf<DType::kI8> { using type = int8_t; };
template <> struct CTypeOf<DType::kU8> { using type = uint8_t; };
template <> struct CTypeOf<DType::kBool> { using type = bool; };
template <> struct CTypeOf<DType::kBF16> { using type = BFloat16; };

template <typename T>
constexpr DType DTypeOf();
template <> constexpr DType DTypeOf<float>() { return DType::kF32; }
template <> constexpr DType DTypeOf<Float16>() { return DType::kF16; }
template <> constexpr DType DTypeOf<double>() { return DType::kF64; }
template <> constexpr DType DTypeOf<int64_t>() { return DType::kI64; }
template <> constexpr DType DTypeOf<int32_t>() { return DType::kI32; }
template <> constexpr DType DTypeOf<int8_t>() { return DType::kI8; }
template <> constexpr DType DTypeOf<uint8_t>() { return DType::kU8; }
template <> constexpr DType DTypeOf<bool>() { return DType::kBool; }
template <> constexpr DType DTypeOf<BFloat16>() { return DType::kBF16; }

}  // namespace kiln::ir

#endif  // KILN_IR_GRAPH_DTYPE_H_
