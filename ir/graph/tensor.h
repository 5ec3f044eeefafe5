// File: ir/graph/tensor.h — Shape helpers and Tensor, a dense row-major
// array with an owned, 64-byte aligned buffer. Constants in the graph, the
// reference interpreter's values and test data are all Tensors. Copies are
// deep; Share() aliases the bytes of a read-only tensor instead.
//
//   Tensor t(DType::kF32, {2, 3});        // zero-filled
//   t.data<float>()[4] = 1.0f;
//   Tensor s = Tensor::Scalar<int64_t>(7);
#ifndef KILN_IR_GRAPH_TENSOR_H_
#define KILN_IR_GRAPH_TENSOR_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ir/graph/dtype.h"

namespace kiln::ir {

// Dimension sizes, outermost first. A scalar has rank 0.
using Shape = std::vector<int64_t>;

// A dimension known only at run time (data-dependent output sizes).
inline constexpr int64_t kDynamicDim = -1;

// Product of dims (1 for a scalar); -1 if any dim is dynamic or the product
// overflows int64.
int64_t NumElements(absl::Span<const int64_t> shape);
// "[1,3,224,224]"; dynamic dims print as "?".
std::string ShapeToString(absl::Span<const int64_t> shape);
// "f32[2,?]": a dtype and a shape (dynamic dims as ?), as Tensor::TypeString
// prints them, for a type no tensor has (a model's interface).
std::string TypeString(DType dtype, absl::Span<const int64_t> shape);
// Row-major strides in elements. Where a shape without elements makes the
// product overflow, the strides are 0 (they address nothing).
std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> shape);
// Numpy-style multidirectional broadcast of two shapes; InvalidArgument when
// they do not broadcast.
absl::StatusOr<Shape> BroadcastShapes(absl::Span<const int64_t> a,
                                      absl::Span<const int64_t> b);

// ResourceExhausted: "out of memory: <what> needs <bytes> bytes (<GiB>)",
// the one wording of a failed allocation (tensors, arenas, constants).
absl::Status OutOfMemoryError(absl::string_view what, int64_t bytes);

class Tensor {
 public:
  // An empty f32 tensor of shape [0].
  Tensor() : Tensor(DType::kF32, Shape{0}) {}
  // Zero-filled. Dims must be static and non-negative.
  Tensor(DType dtype, Shape shape);

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept = default;
  Tensor& operator=(Tensor&& other) noexcept = default;

  template <typename T>
  static Tensor Scalar(T v) {
    Tensor t(DTypeOf<T>(), {});
    t.data<T>()[0] = v;
    return t;
  }
  template <typename T>
  static Tensor FromVector(Shape shape, const std::vector<T>& values) {
    Tensor t(DTypeOf<T>(), std::move(shape));
    for (size_t i = 0; i < values.size() && i < size_t(t.num_elements()); ++i)
      t.data<T>()[i] = values[i];
    return t;
  }

  // Tensor(dtype, shape) with the allocation checked: ResourceExhausted
  // naming `what` ("input 'X'", "output 'Y'") with the type and bytes when
  // memory runs out, where the constructor throws std::bad_alloc. Use it
  // wherever the size comes from a model or a user (run-time shapes).
  static absl::StatusOr<Tensor> Create(DType dtype, Shape shape, absl::string_view what);

  // A tensor holding a copy of byte_size() bytes at `data` (no zero-fill
  // first: cheaper than Tensor(dtype, shape) + memcpy for big weights).
  static Tensor FromBytes(DType dtype, Shape shape, const void* data);

  // A tensor over byte_size() bytes at `data` that the caller owns and keeps
  // alive while any tensor uses them (nothing copied; copies of the result
  // are deep as usual). Row-major; `data` need only be aligned for the
  // element type. For handing a caller's array (a numpy array) to
  // CompiledModel::Run without a copy.
  static Tensor Borrow(DType dtype, Shape shape, const void* data);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t num_elements() const { return num_elements_; }
  size_t byte_size() const { return num_elements_ * DTypeSize(dtype_); }

  // Typed access; T must be the C++ storage type of dtype() (checked in debug
  // builds).
  template <typename T>
  T* data() {
    CheckType(DTypeOf<T>());
    return reinterpret_cast<T*>(buffer_.get());
  }
  template <typename T>
  const T* data() const {
    CheckType(DTypeOf<T>());
    return reinterpret_cast<const T*>(buffer_.get());
  }
  void* raw_data() { return buffer_.get(); }
  const void* raw_data() const { return buffer_.get(); }

  // Same bytes, new shape with the same element count.
  absl::StatusOr<Tensor> Reshaped(Shape shape) const;

  // A tensor over the same bytes (ownership shared, nothing copied), for
  // holding on to data nobody writes any more, such as a graph constant:
  // writes through either tensor are seen by both. Copying the result
  // deep-copies as usual.
  Tensor Share() const;
  // Share() under a new shape with the same element count.
  absl::StatusOr<Tensor> ShareReshaped(Shape shape) const;
  // True when both tensors use one buffer (Share()).
  bool SharesBufferWith(const Tensor& other) const {
    return buffer_ == other.buffer_;
  }

  // Element i converted to double / int64 (any dtype). Handy in tests and for
  // shape-like inputs (Reshape's shape, Slice's starts).
  double GetAsDouble(int64_t i) const;
  int64_t GetAsInt64(int64_t i) const;
  // All elements as int64 (for small shape-like tensors).
  std::vector<int64_t> ToInt64Vector() const;

  // "f32[2,3]".
  std::string TypeString() const;

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct Uninitialized {};
  // Allocated but not zero-filled (the caller writes every byte).
  Tensor(DType dtype, Shape shape, Uninitialized);
  void CheckType(DType requested) const;

  DType dtype_;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<uint8_t> buffer_;
};

}  // namespace kiln::ir

#endif  // KILN_IR_GRAPH_TENSOR_H_
