// File: compiler/jit/sha256.h — a compact SHA-256 (FIPS 180-4) for the JIT
// cache key and cache-entry checksums, which must be stable across processes
// and machines (abseil's hash is seeded per process).
//
//   Sha256 h; h.Update(text); std::string hex = h.HexDigest();
#ifndef KILN_COMPILER_JIT_SHA256_H_
#define KILN_COMPILER_JIT_SHA256_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln::jit {

// Incremental SHA-256. Cheap to construct; HexDigest() finalizes a copy, so
// Update may continue afterwards.
class Sha256 {
 public:
  Sha256();
  void Update(absl::string_view data);
  std::array<uint8_t, 32> Digest() const;
  std::string HexDigest() const;

 private:
  void Block(const uint8_t* p);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  uint64_t length_ = 0;  // bytes hashed so far
};

// SHA-256 of `data` as 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view data);

}  // namespace kiln::jit

#endif  // KILN_COMPILER_JIT_SHA256_H_
