// Tensor comparison with ONNX backend-test semantics.
#include "interp/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kiln::interp {

std::string DescribeTolerance(const Tolerance& tol) {
  if (tol.max_rel.has_value()) {
    return absl::StrCat("max|got-ref| <= ", *tol.max_rel, " * max|ref| per output");
  }
  if (tol.integer_steps > 0) {
    return absl::StrCat("|got-ref| <= ", tol.atol, tol.atol_scaled ? "*max(1,max|ref|)" : "",
                        " + ", tol.rtol, "*|ref| per element, integers within ",
                        tol.integer_steps, " step(s)");
  }
  return absl::StrCat("|got-ref| <= ", tol.atol, tol.atol_scaled ? "*max(1,max|ref|)" : "", " + ",
                      tol.rtol, "*|ref| per element");
}

CompareResult CompareTensors(const ir::Tensor& actual,
                             const ir::Tensor& expected, const Tolerance& tol) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  CompareResult r;
  r.dtype_match = actual.dtype() == expected.dtype();
  r.shape_match = actual.shape() == expected.shape();
  r.num_elements = expected.num_elements();
  if (!r.shape_match) {
    r.message = absl::StrCat("shape ", ir::ShapeToString(actual.shape()),
                             ", expected ", ir::ShapeToString(expected.shape()));
    return r;
  }
  const bool exact = !ir::IsFloat(expected.dtype()) && !ir::IsFloat(actual.dtype());
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    const double e = expected.GetAsDouble(i);
    if (std::isfinite(e)) r.max_abs_ref = std::max(r.max_abs_ref, std::abs(e));
  }
  const double atol = tol.atol_scaled ? tol.atol * std::max(1.0, r.max_abs_ref) : tol.atol;
  r.atol_used = atol;
  double worst_excess = 0;
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    const double a = actual.GetAsDouble(i);
    const double e = expected.GetAsDouble(i);
    bool good;
    double err;
    if (exact) {
      const int64_t diff = actual.GetAsInt64(i) - expected.GetAsInt64(i);
      good = diff <= tol.integer_steps && -diff <= tol.integer_steps;
      err = diff == 0 ? 0 : std::abs(a - e);
    } else if (std::isnan(e) || std::isnan(a)) {
      good = std::isnan(e) && std::isnan(a);
      err = good ? 0 : kInf;
    } else if (std::isinf(e) || std::isinf(a)) {
      good = a == e;
      err = good ? 0 : kInf;
    } else {
      err = std::abs(a - e);
      good = err <= atol + tol.rtol * std::abs(e);
    }
    if (!good) {
      if (r.mismatches == 0) r.first_mismatch = i;
      ++r.mismatches;
      const double allowed =
          exact ? static_cast<double>(tol.integer_steps) : atol + tol.rtol * std::abs(e);
      const double excess = allowed > 0 ? err / allowed : kInf;
      if (r.worst_mismatch < 0 || excess > worst_excess) {
        r.worst_mismatch = i;
        worst_excess = excess;
      }
    }
    if (err > r.max_abs_error) {
      r.max_abs_error = err;
      r.max_abs_index = i;
    }
    if (std::isfinite(e) && std::abs(e) > atol) {
      const double rel = err / std::abs(e);
      if (!r.max_elementwise_rel || rel > *r.max_elementwise_rel) {
        r.max_elementwise_rel = rel;
      }
    }
  }
  r.rel_to_max = r.max_abs_ref > 0 ? r.max_abs_error / r.max_abs_ref
                                   : (r.max_abs_error > 0 ? kInf : 0);
  const bool values_ok = tol.max_rel.has_value() ? r.rel_to_max <= *tol.max_rel
                                                 : r.mismatches == 0;
  r.ok = r.dtype_match && values_ok;
  if (!r.dtype_match) {
    r.message = absl::StrCat("dtype ", ir::DTypeName(actual.dtype()),
                             ", expected ", ir::DTypeName(expected.dtype()));
  } else if (!r.ok) {
    const int64_t i = tol.max_rel ? r.max_abs_index : r.first_mismatch;
    r.message = absl::StrCat(
        r.mismatches, " of ", expected.num_elements(),
        " elements outside tolerance; ", tol.max_rel ? "worst" : "first",
        " at flat index ", i, ": got ", actual.GetAsDouble(i), ", expected ",
        expected.GetAsDouble(i), " (max abs error ", r.max_abs_error,
        ", relative to max|ref| ", r.rel_to_max, ")");
  }
  return r;
}

}  // namespace kiln::interp
