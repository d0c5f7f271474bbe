#pragma once
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "drx/array/dtype.h"
#include "drx/array/error.h"

namespace drx {

// A dense, row-major host array. Copies share the buffer; treat an Array as
// immutable once it has been handed to anyone else (kernels write only into
// arrays they have just created).
class Array {
 public:
  Array();                          // an f32 scalar 0
  Array(DType dtype, Shape shape);  // zero-initialised
  // An array over memory drx did not allocate (a NumPy array's): `data` holds the elements,
  // row-major, aligned for `dtype`, and stays valid while `owner` lives. drx never writes an
  // array it did not just create, so the memory is only read; its owner must not change it
  // while drx may read it.
  static Array external(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner);

  template <class T>
  static Array from_vector(const std::vector<T>& values, Shape shape) {
    Array a(dtype_of<T>, std::move(shape));
    if (static_cast<int64_t>(values.size()) != a.size())
      throw Error("Array::from_vector: " + std::to_string(values.size()) +
                  " values do not fill shape " + shape_str(a.shape()) + " (" +
                  std::to_string(a.size()) + " elements expected)");
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size(); ++i) a.data<uint8_t>()[i] = values[i] ? 1 : 0;
    } else if (!values.empty()) {
      std::memcpy(a.raw(), values.data(), values.size() * sizeof(T));
    }
    return a;
  }
  template <class T>
  static Array scalar(T v) {
    return from_vector<T>({v}, {});
  }

  template <class T>
  std::vector<T> to_vector() const {
    check_dtype(dtype_of<T>, "Array::to_vector");
    std::vector<T> out(static_cast<size_t>(size()));
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = data<uint8_t>()[i] != 0;
    } else if (!out.empty()) {
      std::memcpy(out.data(), raw(), out.size() * sizeof(T));
    }
    return out;
  }
  // The single element of a size-1 array.
  template <class T>
  T item() const {
    if (size() != 1)
      throw Error("Array::item: array of shape " + shape_str(shape_) + " has " +
                  std::to_string(size()) + " elements (expected exactly 1)");
    return to_vector<T>()[0];
  }

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t size() const { return num_elements(shape_); }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  size_t nbytes() const { return static_cast<size_t>(size()) * dtype_size(dtype_); }

  // Typed element access; T is the storage type (uint8_t for bool).
  template <class T>
  T* data() {
    return static_cast<T*>(raw());
  }
  template <class T>
  const T* data() const {
    return static_cast<const T*>(raw());
  }
  void* raw() { return buffer_.get(); }
  const void* raw() const { return buffer_.get(); }

  // Element i converted to double (for printing and tests).
  double element_as_double(int64_t i) const;
  // Same dtype, shape and bytes.
  bool bitwise_equal(const Array& other) const;
  std::string str() const;  // "f32[2,3]{1, 2, 3, 4, 5, 6}"

 private:
  Array(DType dtype, Shape shape, std::shared_ptr<std::byte[]> buffer)
      : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)) {}
  void check_dtype(DType expected, const char* op) const;
  DType dtype_ = DType::f32;
  Shape shape_;
  std::shared_ptr<std::byte[]> buffer_;
};

// Buffers drx has allocated that are still alive (for leak checks of embedding layers).
int64_t live_array_buffers();

Array zeros(const Shape& shape, DType dtype = DType::f32);
Array ones(const Shape& shape, DType dtype = DType::f32);
Array full(const Shape& shape, double value, DType dtype = DType::f32);
// Element-wise dtype conversion (bool: nonzero -> true).
Array convert_array(const Array& a, DType dtype);

}  // namespace drx
