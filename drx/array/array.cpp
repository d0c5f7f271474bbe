#include "drx/array/array.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

#include "drx/array/half.h"

namespace drx {

namespace {
std::atomic<int64_t> live_buffers{0};
}  // namespace

Array::Array() : Array(DType::f32, {}) {}

Array::Array(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0) throw Error("Array: negative dimension in shape " + shape_str(shape_));
  // calloc, not new[]() and its memset: the pages of a large buffer come zeroed from the
  // system and stay unmapped until written, so an array mostly of zeros (a placement's
  // argument on one rank of drx/dist, which fills only its own rows) costs only what is
  // written.
  const std::string what = std::string(dtype_name(dtype_)) + shape_str(shape_);
  size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(num_elements(shape_)), dtype_size(dtype_), &bytes))
    throw Error("Array: " + what + " needs more bytes than a size_t can count (2^64 - 1)");
  // No check against the machine's memory: the untouched rows of a rank's placed arrays may
  // legitimately exceed it (see above); only a failed allocation is an error.
  auto* p = static_cast<std::byte*>(std::calloc(std::max<size_t>(bytes, 1), 1));
  if (!p)
    throw Error("Array: cannot allocate " + std::to_string(bytes) + " bytes for " + what +
                " (out of memory)");
  live_buffers.fetch_add(1, std::memory_order_relaxed);
  buffer_ = std::shared_ptr<std::byte[]>(p, [](std::byte* q) {
    std::free(q);
    live_buffers.fetch_sub(1, std::memory_order_relaxed);
  });
}

Array Array::external(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner) {
  for (int64_t d : shape)
    if (d < 0) throw Error("Array::external: negative dimension in shape " + shape_str(shape));
  if (!data || reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) != 0)
    throw Error("Array::external: the memory of a " + std::string(dtype_name(dtype)) +
                shape_str(shape) + " array is not aligned for its dtype");
  return Array(dtype, std::move(shape),
               std::shared_ptr<std::byte[]>(std::move(owner), static_cast<std::byte*>(data)));
}

int64_t live_array_buffers() { return live_buffers.load(std::memory_order_relaxed); }

void Array::check_dtype(DType expected, const char* op) const {
  if (expected != dtype_)
    throw Error(std::string(op) + ": array has dtype " + std::string(dtype_name(dtype_)) +
                ", requested " + std::string(dtype_name(expected)));
}

double Array::element_as_double(int64_t i) const {
  if (is_half(dtype_)) return half_to_double(dtype_, data<uint16_t>()[i]);
  if (is_narrow_integer(dtype_))  // the byte holds the value, sign- or zero-extended
    return is_unsigned(dtype_) ? data<uint8_t>()[i] : data<int8_t>()[i];
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
    if (dtype_ == DType::f32 || is_half(dtype_))
      std::snprintf(buf, sizeof buf, "%.9g", element_as_double(i));
    else if (dtype_ == DType::f32)
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(data<float>()[i]));
    else if (dtype_ == DType::f64)
      std::snprintf(buf, sizeof buf, "%.17g", data<double>()[i]);
    else
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(element_as_double(i)));
    out += buf;
  }
  return out + "}";
}

namespace {
// An element converted without undefined behaviour: to bool, nonzero; from a
// float to an integer, saturating at the integer's range with NaN as 0; else
// as C++ converts (integers wrap modulo 2^bits).
template <class D, class S>
D converted(S v) {
  if constexpr (std::is_same_v<D, uint8_t>) {
    return v != S{0} ? 1 : 0;
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    if (std::isnan(v)) return D{0};
    const double lo = static_cast<double>(std::numeric_limits<D>::min());
    const double hi = static_cast<double>(std::numeric_limits<D>::max()) + 1.0;
    const auto x = static_cast<double>(v);
    if (x <= lo) return std::numeric_limits<D>::min();
    if (x >= hi) return std::numeric_limits<D>::max();
    return static_cast<D>(x);
  } else {
    return static_cast<D>(v);
  }
}
// A narrow integer's byte: v wrapped modulo 2^bits, sign-extended for i2/i4.
uint8_t narrow_wrapped(int64_t v, DType d) {
  const int bits = integer_bits(d);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  const uint64_t low = static_cast<uint64_t>(v) & mask;
  if (is_unsigned(d)) return static_cast<uint8_t>(low);
  const uint64_t sign = uint64_t{1} << (bits - 1);
  return static_cast<uint8_t>(
      static_cast<int8_t>(static_cast<int64_t>(low ^ sign) - static_cast<int64_t>(sign)));
}

// A float into a narrow integer, as into the wider ones: saturating, NaN as 0.
uint8_t narrow_saturated(double v, DType d) {
  const int bits = integer_bits(d);
  const double hi = is_unsigned(d) ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
  const double lo = is_unsigned(d) ? 0.0 : -std::ldexp(1.0, bits - 1);
  if (std::isnan(v)) return 0;
  return narrow_wrapped(static_cast<int64_t>(std::trunc(std::clamp(v, lo, hi))), d);
}

}  // namespace

Array full(const Shape& shape, double value, DType dtype) {
  Array a(dtype, shape);
  if (is_half(dtype)) {
    const uint16_t bits = half_from_double(dtype, value);
    for (int64_t i = 0; i < a.size(); ++i) a.data<uint16_t>()[i] = bits;
    return a;
  }
  if (is_narrow_integer(dtype)) {
    std::memset(a.raw(), narrow_saturated(value, dtype), static_cast<size_t>(a.size()));
    return a;
  }
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    T* p = a.data<T>();
    const T v = converted<T>(value);
    for (int64_t i = 0; i < a.size(); ++i) p[i] = v;
  });
  return a;
}
Array zeros(const Shape& shape, DType dtype) { return Array(dtype, shape); }
Array ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Array convert_array(const Array& a, DType dtype) {
  // Narrow integers: from floats saturating, from integers wrapping, as the
  // wider integers convert; read back, their bytes are already i8 or u8 values.
  if (is_narrow_integer(dtype)) {
    Array out(dtype, a.shape());
    auto* o = out.data<uint8_t>();
    if (is_floating(a.dtype())) {
      const Array wide = convert_array(a, DType::f64);
      for (int64_t i = 0; i < a.size(); ++i) o[i] = narrow_saturated(wide.data<double>()[i], dtype);
    } else {
      const Array wide = convert_array(a, DType::i64);
      for (int64_t i = 0; i < a.size(); ++i) o[i] = narrow_wrapped(wide.data<int64_t>()[i], dtype);
    }
    return out;
  }
  if (is_narrow_integer(a.dtype())) {
    Array wide(compute_dtype(a.dtype()), a.shape());
    if (a.nbytes() > 0) std::memcpy(wide.raw(), a.raw(), a.nbytes());
    return convert_array(wide, dtype);
  }
  // Half precision goes through f64, which holds every bf16, f16, f32 and
  // i32 exactly (i64 beyond 2^53 rounds twice), and is rounded once into it.
  if (is_half(dtype)) {
    const Array wide = convert_array(a, DType::f64);
    Array out(dtype, a.shape());
    for (int64_t i = 0; i < a.size(); ++i)
      out.data<uint16_t>()[i] = half_from_double(dtype, wide.data<double>()[i]);
    return out;
  }
  if (is_half(a.dtype())) {
    Array wide(DType::f64, a.shape());
    for (int64_t i = 0; i < a.size(); ++i)
      wide.data<double>()[i] = half_to_double(a.dtype(), a.data<uint16_t>()[i]);
    return dtype == DType::f64 ? wide : convert_array(wide, dtype);
  }
  Array out(dtype, a.shape());
  dispatch_dtype(a.dtype(), [&](auto s) {
    using S = decltype(s);
    dispatch_dtype(dtype, [&](auto d) {
      using D = decltype(d);
      const S* in = a.data<S>();
      D* o = out.data<D>();
      for (int64_t i = 0; i < a.size(); ++i) o[i] = converted<D>(in[i]);
    });
  });
  return out;
}

}  // namespace drx
