// File: interp/quant_util.h — helpers shared by the reference kernels of
// quantized ops (QuantizeLinear and friends, ConvInteger, QLinearConv,
// QLinearMatMul): integer ranges, zero points, requantization.
#ifndef KILN_INTERP_QUANT_UTIL_H_
#define KILN_INTERP_QUANT_UTIL_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "interp/op_registry.h"
#include "ir/graph/dtype.h"
#include "ir/graph/tensor.h"

namespace kiln::interp {

// Integer range of a quantized dtype.
absl::StatusOr<std::pair<double, double>> QuantRange(const OpContext& ctx,
                                                     ir::DType d);

// Subtracts a zero point that is per tensor or, when `per_channel_dim` > 0,
// one per slice along dim 0 of size `per_channel_dim`.
absl::Status SubtractZeroPoint(const OpContext& ctx, const Tensor* zp,
                               ir::DType data_dtype, int64_t per_channel_dim,
                               std::vector<int64_t>* v, absl::string_view what);

// InvalidArgument unless `t` is u8 or i8.
absl::Status RequireQuantized(const OpContext& ctx, const Tensor& t,
                              absl::string_view what);

// Requantizes an int accumulator: round(acc * scale + zero_point), clamped.
absl::StatusOr<Tensor> Requantize(const OpContext& ctx, ir::Shape shape,
                                  const std::vector<int64_t>& acc,
                                  const std::vector<double>& scale,
                                  int64_t scale_inner, const Tensor* y_zp);

// Input i, which must hold exactly one value (a per-tensor parameter).
absl::StatusOr<const Tensor*> ScalarParam(const OpContext& ctx, int i,
                                          absl::string_view what);

}  // namespace kiln::interp

#endif  // KILN_INTERP_QUANT_UTIL_H_
