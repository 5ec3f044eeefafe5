// File: ir/graph/dtype.h — element types kiln understands, their names in the
// text IR ("f32", "i64", ...), byte sizes, C++ storage types, and f16 helpers.
#ifndef KILN_IR_GRAPH_DTYPE_H_
#define KILN_IR_GRAPH_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace kiln::ir {

// f16 is a storage type: loaded as f32, computed in f32, stored back.
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
};

// IEEE binary16 bits. Distinct type so f16 data is never mistaken for ints.
struct Float16 {
  uint16_t bits = 0;
};

// "f32", "f16", "f64", "i64", "i32", "i8", "u8", "bool"; "invalid" otherwise.
absl::string_view DTypeName(DType dtype);
// Inverse of DTypeName; nullopt for an unknown name.
std::optional<DType> DTypeFromName(absl::string_view name);
// Bytes per element (bool is one byte).
size_t DTypeSize(DType dtype);
bool IsFloat(DType dtype);    // f32, f16, f64
bool IsInteger(DType dtype);  // i64, i32, i8, u8
bool IsSigned(DType dtype);   // floats and signed integers

float HalfToFloat(Float16 h);
Float16 FloatToHalf(float f);  // round to nearest even, inf/nan preserved

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

}  // namespace kiln::ir

#endif  // KILN_IR_GRAPH_DTYPE_H_
