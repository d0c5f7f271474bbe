#include "drx/array/array.h"

#include <cstdio>

namespace drx {

Array::Array() : Array(DType::f32, {}) {}

Array::Array(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0) throw Error("Array: negative dimension in shape " + shape_str(shape_));
  size_t bytes = nbytes();
  buffer_ = std::shared_ptr<std::byte[]>(new std::byte[bytes == 0 ? 1 : bytes]());
}

void Array::check_dtype(DType expected, const char* op) const {
  if (expected != dtype_)
    throw Error(std::string(op) + ": array has dtype " + std::string(dtype_name(dtype_)) +
                ", requested " + std::string(dtype_name(expected)));
}

double Array::element_as_double(int64_t i) const {
  return dispatch_dtype(dtype_, [&](auto t) {
    using T = decltype(t);
    return static_cast<double>(data<T>()[i]);
  });
}

bool Array::bitwise_equal(const Array& other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ &&
         std::memcmp(raw(), other.raw(), nbytes()) == 0;
}

std::string Array::str() const {
  std::string out = std::string(dtype_name(dtype_)) + shape_str(shape_) + "{";
  char buf[64];
  for (int64_t i = 0; i < size(); ++i) {
    if (i) out += ", ";
    if (dtype_ == DType::f32)
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(data<float>()[i]));
    else if (dtype_ == DType::f64)
      std::snprintf(buf, sizeof buf, "%.17g", data<double>()[i]);
    else
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(element_as_double(i)));
    out += buf;
  }
  return out + "}";
}

Array full(const Shape& shape, double value, DType dtype) {
  Array a(dtype, shape);
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    T* p = a.data<T>();
    T v = static_cast<T>(value);
    for (int64_t i = 0; i < a.size(); ++i) p[i] = v;
  });
  return a;
}
Array zeros(const Shape& shape, DType dtype) { return Array(dtype, shape); }
Array ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Array convert_array(const Array& a, DType dtype) {
  Array out(dtype, a.shape());
  dispatch_dtype(a.dtype(), [&](auto s) {
    using S = decltype(s);
    dispatch_dtype(dtype, [&](auto d) {
      using D = decltype(d);
      const S* in = a.data<S>();
      D* o = out.data<D>();
      for (int64_t i = 0; i < a.size(); ++i) {
        if constexpr (std::is_same_v<D, uint8_t>)
          o[i] = in[i] != S{0} ? 1 : 0;
        else
          o[i] = static_cast<D>(in[i]);
      }
    });
  });
  return out;
}

}  // namespace drx
