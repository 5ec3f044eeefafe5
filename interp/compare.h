// File: interp/compare.h — compares an actual tensor with an expected one the
// way ONNX's backend tests do (numpy.testing.assert_allclose:
// |actual - expected| <= atol + rtol * |expected|, NaN equals NaN; exact
// equality for integers and bools), or norm-wise (max error relative to the
// output's largest magnitude), and reports the error metrics. The conformance
// runner, `kilnc check` and pass/codegen tests all judge results with it.
#ifndef KILN_INTERP_COMPARE_H_
#define KILN_INTERP_COMPARE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "ir/graph/tensor.h"

namespace kiln::interp {

struct Tolerance {
  double rtol = 1e-3;  // ONNX backend test defaults
  double atol = 1e-7;
  // Set: pass when max|actual - expected| <= max_rel * max|expected| over
  // the tensor, instead of the per-element rule (for whole models, where
  // values near zero make elementwise relative error meaningless).
  std::optional<double> max_rel;
  // Per-element rule with atol in units of the output's scale: an element
  // passes when |got-ref| <= atol * max(1, max|ref|) + rtol * |ref|. A
  // whole fp32 model's absolute error grows with the magnitude of the values
  // it computes (GPT-2's logits reach ~500, where one float ulp is 3e-5), so
  // an absolute atol meant for unit-scale outputs fails elements near zero
  // that are as accurate as the rest; outputs within [-1, 1] keep the plain
  // rule. `kilnc check` uses this by default; ONNX's per-op cases do not.
  bool atol_scaled = false;
  // Integer outputs: pass when |got-ref| <= integer_steps. A quantized (u8 /
  // i8) output may differ from the reference by one quantization step where
  // the requantization rounds an intermediate differently: oneDNN computes
  // scale * acc in f32 and rounds after adding the zero point (ONNX before),
  // and a QDQ pattern run as one integer call rounds its bias once. kiln's
  // rule for quantized outputs is integer_steps = 1 (docs/quantization.md);
  // 0, the default, is exact equality.
  int64_t integer_steps = 0;
};

// "|got-ref| <= 1e-07 + 0.001*|ref| per element" or the max_rel form.
std::string DescribeTolerance(const Tolerance& tol);

struct CompareResult {
  bool ok = false;
  bool dtype_match = false;
  bool shape_match = false;
  int64_t num_elements = 0;
  double max_abs_error = 0;    // inf where NaN/inf disagree
  int64_t max_abs_index = -1;  // flat index of the largest error
  double max_abs_ref = 0;      // max |expected| over finite elements
  // max_abs_error / max_abs_ref (0 when both are 0, inf when only the
  // reference is all zero): the error relative to the output's scale.
  double rel_to_max = 0;
  // max |a - e| / |e| over elements with |e| > atol (atol_used); nullopt if
  // none.
  std::optional<double> max_elementwise_rel;
  int64_t mismatches = 0;       // elements outside the per-element rule
  int64_t first_mismatch = -1;
  // The mismatch farthest outside the rule (largest |got-ref| / allowed).
  int64_t worst_mismatch = -1;
  double atol_used = 0;         // atol, times max(1, max|ref|) when scaled
  std::string message;          // empty when ok; else what differs and where
};

CompareResult CompareTensors(const ir::Tensor& actual,
                             const ir::Tensor& expected,
                             const Tolerance& tol = {});

}  // namespace kiln::interp

#endif  // KILN_INTERP_COMPARE_H_
