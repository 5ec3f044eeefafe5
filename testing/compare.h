// File: testing/compare.h — compares an actual tensor with an expected one the
// way ONNX's backend tests do (numpy.testing.assert_allclose:
// |actual - expected| <= atol + rtol * |expected|, NaN equals NaN; exact
// equality for integers and bools), and reports error metrics.
#ifndef KILN_TESTING_COMPARE_H_
#define KILN_TESTING_COMPARE_H_

#include <string>

#include "ir/graph/tensor.h"

namespace kiln::testing {

struct Tolerance {
  double rtol = 1e-3;  // ONNX backend test defaults
  double atol = 1e-7;
};

struct CompareResult {
  bool ok = false;
  double max_abs_error = 0;  // over all elements
  // max |a-b| / max|expected| over the tensor: scale-aware relative error.
  double max_rel_error = 0;
  int64_t mismatches = 0;   // elements outside tolerance
  int64_t first_mismatch = -1;
  std::string message;      // empty when ok; else what differs and where
};

CompareResult CompareTensors(const ir::Tensor& actual,
                             const ir::Tensor& expected,
                             const Tolerance& tol = {});

}  // namespace kiln::testing

#endif  // KILN_TESTING_COMPARE_H_
