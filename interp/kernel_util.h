// File: interp/kernel_util.h — small helpers shared by the
// reference kernels: axis normalization, broadcast index mapping, dtype
// dispatch. Kept deliberately simple: the reference favours clarity.
#ifndef KILN_INTERP_KERNEL_UTIL_H_
#define KILN_INTERP_KERNEL_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ir/graph/tensor.h"

namespace kiln::interp {

// Maps a possibly negative axis into [0, rank); InvalidArgument otherwise.
inline absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// Maps a flat index of a broadcast output to the flat index of one input.
//   BroadcastMap m(a.shape(), out_shape);
//   for (i...) out[i] = f(a[m(i)], b[mb(i)]);
class BroadcastMap {
 public:
  BroadcastMap(const ir::Shape& in, const ir::Shape& out)
      : out_dims_(out), in_strides_(out.size(), 0) {
    std::vector<int64_t> strides = ir::RowMajorStrides(in);
    const size_t offset = out.size() - in.size();
    for (size_t i = 0; i < in.size(); ++i) {
      in_strides_[offset + i] = in[i] == 1 ? 0 : strides[i];
    }
  }
  int64_t operator()(int64_t out_index) const {
    int64_t in_index = 0;
    for (int i = static_cast<int>(out_dims_.size()) - 1; i >= 0; --i) {
      const int64_t d = out_dims_[i];
      in_index += (out_index % d) * in_strides_[i];
      out_index /= d;
    }
    return in_index;
  }

 private:
  ir::Shape out_dims_;
  std::vector<int64_t> in_strides_;
};

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with T the storage type of `dtype` and returns what
// it returns. f16 dispatches as ir::Float16: kernels that compute convert
// with HalfToFloat / FloatToHalf.
template <typename F>
auto DispatchDType(ir::DType dtype, F&& f) {
  switch (dtype) {
    case ir::DType::kF32: return f(TypeTag<float>{});
    case ir::DType::kF16: return f(TypeTag<ir::Float16>{});
    case ir::DType::kF64: return f(TypeTag<double>{});
    case ir::DType::kI64: return f(TypeTag<int64_t>{});
    case ir::DType::kI32: return f(TypeTag<int32_t>{});
    case ir::DType::kI8: return f(TypeTag<int8_t>{});
    case ir::DType::kU8: return f(TypeTag<uint8_t>{});
    case ir::DType::kBool: return f(TypeTag<bool>{});
    case ir::DType::kInvalid: break;
  }
  return f(TypeTag<float>{});
}

}  // namespace kiln::interp

#endif  // KILN_INTERP_KERNEL_UTIL_H_
