// Shape helpers and Tensor storage.
#include "ir/graph/tensor.h"

#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::ir {

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat(
      "[",
      absl::StrJoin(shape, ",",
                    [](std::string* out, int64_t d) {
                      absl::StrAppend(out, d == kDynamicDim
                                               ? std::string("?")
                                               : absl::StrCat(d));
                    }),
      "]");
}

std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes ", ShapeToString(a), " and ", ShapeToString(b),
                       " do not broadcast (dim ", i, ": ", da, " vs ", db,
                       ")"));
    }
  }
  return out;
}

namespace {
uint8_t* AllocateAligned(size_t bytes) {
  // Always allocate at least one cache line so data() is never null.
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return static_cast<uint8_t*>(p);
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  num_elements_ = NumElements(shape_);
  assert(num_elements_ >= 0 && "Tensor needs a static, non-negative shape");
  if (num_elements_ < 0) num_elements_ = 0;
  buffer_.reset(AllocateAligned(byte_size()));
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      num_elements_(other.num_elements_),
      buffer_(AllocateAligned(other.byte_size())) {
  if (other.byte_size() > 0) {
    std::memcpy(buffer_.get(), other.buffer_.get(), other.byte_size());
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

absl::StatusOr<Tensor> Tensor::Reshaped(Shape shape) const {
  if (NumElements(shape) != num_elements_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", TypeString(), " to ",
                     ShapeToString(shape)));
  }
  Tensor t(*this);
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::CheckType(DType requested) const {
  assert(requested == dtype_ && "Tensor::data<T>() with the wrong T");
  (void)requested;
}

double Tensor::GetAsDouble(int64_t i) const {
  const uint8_t* p = buffer_.get();
  switch (dtype_) {
    case DType::kF32: return reinterpret_cast<const float*>(p)[i];
    case DType::kF16: return HalfToFloat(reinterpret_cast<const Float16*>(p)[i]);
    case DType::kF64: return reinterpret_cast<const double*>(p)[i];
    case DType::kI64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::kI32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kI8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kBool: return reinterpret_cast<const bool*>(p)[i] ? 1.0 : 0.0;
    case DType::kInvalid: break;
  }
  return 0.0;
}

int64_t Tensor::GetAsInt64(int64_t i) const {
  const uint8_t* p = buffer_.get();
  switch (dtype_) {
    case DType::kI64: return reinterpret_cast<const int64_t*>(p)[i];
    case DType::kI32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kI8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kBool: return reinterpret_cast<const bool*>(p)[i] ? 1 : 0;
    default: return static_cast<int64_t>(GetAsDouble(i));
  }
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  std::vector<int64_t> v(num_elements_);
  for (int64_t i = 0; i < num_elements_; ++i) v[i] = GetAsInt64(i);
  return v;
}

std::string Tensor::TypeString() const {
  return absl::StrCat(DTypeName(dtype_), ShapeToString(shape_));
}

}  // namespace kiln::ir
