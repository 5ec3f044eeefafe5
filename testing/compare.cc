// Tensor comparison with ONNX backend-test semantics.
#include "testing/compare.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kiln::testing {

CompareResult CompareTensors(const ir::Tensor& actual,
                             const ir::Tensor& expected, const Tolerance& tol) {
  CompareResult r;
  if (actual.dtype() != expected.dtype()) {
    r.message = absl::StrCat("dtype ", ir::DTypeName(actual.dtype()),
                             ", expected ", ir::DTypeName(expected.dtype()));
    return r;
  }
  if (actual.shape() != expected.shape()) {
    r.message = absl::StrCat("shape ", ir::ShapeToString(actual.shape()),
                             ", expected ", ir::ShapeToString(expected.shape()));
    return r;
  }
  const bool is_float = ir::IsFloat(expected.dtype());
  double max_ref = 0;
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    double e = expected.GetAsDouble(i);
    if (std::isfinite(e)) max_ref = std::max(max_ref, std::abs(e));
  }
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    bool good;
    double err = 0;
    if (is_float) {
      const double a = actual.GetAsDouble(i);
      const double e = expected.GetAsDouble(i);
      if (std::isnan(e) || std::isnan(a)) {
        good = std::isnan(e) && std::isnan(a);
        err = good ? 0 : INFINITY;
      } else if (std::isinf(e) || std::isinf(a)) {
        good = a == e;
        err = good ? 0 : INFINITY;
      } else {
        err = std::abs(a - e);
        good = err <= tol.atol + tol.rtol * std::abs(e);
      }
    } else {
      const int64_t a = actual.GetAsInt64(i);
      const int64_t e = expected.GetAsInt64(i);
      good = a == e;
      err = std::abs(static_cast<double>(a) - static_cast<double>(e));
    }
    r.max_abs_error = std::max(r.max_abs_error, err);
    if (!good) {
      if (r.mismatches == 0) r.first_mismatch = i;
      ++r.mismatches;
    }
  }
  r.max_rel_error = max_ref > 0 ? r.max_abs_error / max_ref
                                : (r.max_abs_error > 0 ? INFINITY : 0);
  r.ok = r.mismatches == 0;
  if (!r.ok) {
    const int64_t i = r.first_mismatch;
    r.message = absl::StrCat(r.mismatches, " of ", expected.num_elements(),
                             " elements differ; first at flat index ", i,
                             ": got ", actual.GetAsDouble(i), ", expected ",
                             expected.GetAsDouble(i), " (max abs error ",
                             r.max_abs_error, ")");
  }
  return r;
}

}  // namespace kiln::testing
