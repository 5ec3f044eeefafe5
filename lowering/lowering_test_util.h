// File: lowering/lowering_test_util.h — checks a lowered graph against the
// reference interpreter on seeded random inputs (loop interpreter for loop
// kernels, the reference for externs).
#ifndef KILN_LOWERING_LOWERING_TEST_UTIL_H_
#define KILN_LOWERING_LOWERING_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ir/graph/graph.h"
#include "ir/graph/tensor.h"
#include "lowering/lower_graph.h"

namespace kiln::lowering::testing {

// A tensor of `dtype`/`shape` with seeded values: floats uniform in
// [-3, 3], integers in [-5, 5], bools fair coins.
ir::Tensor RandomTensor(ir::DType dtype, const ir::Shape& shape, uint32_t seed);

struct CheckOptions {
  // Inputs by position; the others are random.
  std::map<int, ir::Tensor> inputs;
  uint32_t seed = 1;
  double rtol = 1e-5;
  double atol = 1e-6;
  // How the graph is lowered.
  LoweringOptions lowering;
};

// Parses `graph_text`, lowers it, runs both and compares every output. OK or
// an error saying what differs (with the lowered program).
absl::Status CheckLowering(absl::string_view graph_text,
                           const CheckOptions& options = {});
absl::Status CheckLoweringOfGraph(const ir::Graph& graph,
                                  const CheckOptions& options = {});

}  // namespace kiln::lowering::testing

#endif  // KILN_LOWERING_LOWERING_TEST_UTIL_H_
