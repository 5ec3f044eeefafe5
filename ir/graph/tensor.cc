// Shape helpers and Tensor storage.
#include "ir/graph/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
    // Only a shape without elements can overflow here (a suffix product
    // never exceeds the element count): its strides address nothing, and
    // saturate to 0.
    if (__builtin_mul_overflow(strides[i + 1], shape[i + 1], &strides[i])) {
      strides[i] = 0;
    }
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
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

// At least one cache line, so data() is never null. Bytes past `zero_from`
// are zeroed (the padding always is).
uint8_t* AllocateAligned(size_t bytes, size_t zero_from = 0) {
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (rounded >= kHugePage) {
    // Big weights: 2 MiB pages where the kernel allows them, far fewer
    // page faults when the buffer is first written.
    const uintptr_t from = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
    const uintptr_t to = (reinterpret_cast<uintptr_t>(p) + rounded) & ~(kHugePage - 1);
    if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
  }
  zero_from = std::min(zero_from, rounded);
  std::memset(static_cast<uint8_t*>(p) + zero_from, 0, rounded - zero_from);
  return static_cast<uint8_t*>(p);
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  num_elements_ = NumElements(shape_);
  assert(num_elements_ >= 0 && "Tensor needs a static, non-negative shape");
  if (num_elements_ < 0) num_elements_ = 0;
  buffer_.reset(AllocateAligned(byte_size()), FreeDeleter());
}

Tensor::Tensor(DType dtype, Shape shape, Uninitialized)
    : dtype_(dtype), shape_(std::move(shape)) {
  num_elements_ = NumElements(shape_);
  if (num_elements_ < 0) num_elements_ = 0;
  buffer_.reset(AllocateAligned(byte_size(), byte_size()), FreeDeleter());
}

absl::Status OutOfMemoryError(absl::string_view what, int64_t bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory: ", what, " needs ", bytes, " bytes (",
      absl::StrFormat("%.2f", static_cast<double>(bytes) / (int64_t{1} << 30)), " GiB)"));
}

absl::StatusOr<Tensor> Tensor::Create(DType dtype, Shape shape, absl::string_view what) {
  const int64_t n = NumElements(shape);
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cannot allocate ", kiln::ir::TypeString(dtype, shape),
        " (a dynamic dim or a size past int64)"));
  }
  const int64_t esize = static_cast<int64_t>(DTypeSize(dtype));
  const std::string type = kiln::ir::TypeString(dtype, shape);
  if (esize > 0 && n > std::numeric_limits<int64_t>::max() / esize) {
    return OutOfMemoryError(absl::StrCat(what, " ", type), std::numeric_limits<int64_t>::max());
  }
  try {
    return Tensor(dtype, std::move(shape));
  } catch (const std::bad_alloc&) {
    return OutOfMemoryError(absl::StrCat(what, " ", type), n * esize);
  }
}

Tensor Tensor::FromBytes(DType dtype, Shape shape, const void* data) {
  Tensor t(dtype, std::move(shape), Uninitialized{});
  if (t.byte_size() > 0) std::memcpy(t.buffer_.get(), data, t.byte_size());
  return t;
}

Tensor::Tensor(const Tensor& other)
    : Tensor(other.dtype_, other.shape_, Uninitialized{}) {
  if (other.byte_size() > 0) {
    std::memcpy(buffer_.get(), other.buffer_.get(), other.byte_size());
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor Tensor::Borrow(DType dtype, Shape shape, const void* data) {
  Tensor t(DType::kF32, Shape{0}, Uninitialized{});
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = std::max<int64_t>(NumElements(t.shape_), 0);
  // Aliasing constructor over an empty owner: the bytes are not freed here.
  t.buffer_ = std::shared_ptr<uint8_t>(std::shared_ptr<uint8_t>(),
                                       static_cast<uint8_t*>(const_cast<void*>(data)));
  return t;
}

Tensor Tensor::Share() const {
  Tensor t(DType::kF32, Shape{0}, Uninitialized{});
  t.dtype_ = dtype_;
  t.shape_ = shape_;
  t.num_elements_ = num_elements_;
  t.buffer_ = buffer_;
  return t;
}

absl::StatusOr<Tensor> Tensor::ShareReshaped(Shape shape) const {
  if (NumElements(shape) != num_elements_) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", TypeString(), " to ",
                     ShapeToString(shape)));
  }
  Tensor t = Share();
  t.shape_ = std::move(shape);
  return t;
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
    case DType::kBF16: return BFloat16ToFloat(reinterpret_cast<const BFloat16*>(p)[i]);
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

std::string TypeString(DType dtype, absl::Span<const int64_t> shape) {
  return absl::StrCat(DTypeName(dtype), ShapeToString(shape));
}

std::string Tensor::TypeString() const { return ir::TypeString(dtype_, shape_); }

}  // namespace kiln::ir
