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

// Loop kernels only, on f32[3,17] and f32[17]: pointwise ops, a transpose,
// a softmax and a reduction.
inline constexpr char kPointwiseAndReductions[] = R"(
graph g(%x: f32[3,17], %b: f32[17]) -> (%y, %s) opset 13 {
  %a = Add(%x, %b) name="add" : f32[3,17]
  %r = Relu(%a) name="relu" : f32[3,17]
  %t = Transpose(%r) {perm=[1, 0]} name="tr" : f32[17,3]
  %y = Softmax(%t) {axis=0} name="sm" : f32[17,3]
  %s = ReduceMax(%x) {axes=[1], keepdims=0} name="rmax" : f32[3]
}
)";

}  // namespace kiln::compiler_testing

#endif  // KILN_COMPILER_TEST_UTIL_H_
