// File: compiler/test_util.h — helpers the compiler's tests share: options
// with a cache in the test's temporary directory, seeded random tensors, and
// graph text whose elided constants get seeded random data.
#ifndef KILN_COMPILER_TEST_UTIL_H_
#define KILN_COMPILER_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "compiler/compiler.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"

namespace kiln::compiler_testing {

// $TEST_TMPDIR/kiln_cache (/tmp/kiln_cache outside Bazel).
std::string CacheDir();

// Default CompileOptions with cache_dir = CacheDir().
CompileOptions Options();

// An f32 tensor of `shape` with N(0, 1) values from `seed`.
ir::Tensor Random(const ir::Shape& shape, uint32_t seed);

// Parses graph text; each `<elided>` f32 constant gets Random data seeded by
// 1000 + its value id. A parse error fails the calling test and returns an
// empty graph.
ir::Graph Parse(const char* text);

}  // namespace kiln::compiler_testing

#endif  // KILN_COMPILER_TEST_UTIL_H_
