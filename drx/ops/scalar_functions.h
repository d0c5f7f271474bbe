#pragma once
// The scalar function of every elementwise primitive, shared by the reference
// kernels (drx/ops/elementwise*.cpp) and the compiled executor's kernels and
// fused loops (drx/exec), so that compiled results are bitwise those of
// Primitive::eval. Integer arithmetic wraps around (two's complement, as XLA
// does) instead of being undefined behaviour on overflow.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "drx/array/error.h"
#include "drx/array/wrapping.h"

namespace drx::scalar {

template <class T>
T wrap_add(T a, T b) {
  return wrapping::add(a, b);
}
template <class T>
T wrap_sub(T a, T b) {
  return wrapping::sub(a, b);
}
template <class T>
T wrap_mul(T a, T b) {
  return wrapping::mul(a, b);
}

// Integer division truncates toward zero like C++; the one overflowing case
// (min / -1) wraps to min instead of trapping.
template <class T>
T int_div(T a, T b) {
  if (b == 0) throw Error("div: integer division by zero");
  if constexpr (std::is_signed_v<T>)
    if (b == -1) return wrap_sub(T{0}, a);
  return static_cast<T>(a / b);
}

// Integer power by repeated squaring. A negative exponent gives the truncated
// reciprocal (0 unless |a| == 1), and 0 to a negative power is a division by
// zero.
template <class T>
T int_pow(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b < 0) {
      if (a == 0) throw Error("pow: integer 0 raised to a negative power (division by zero)");
      if (a == 1) return 1;
      if (a == -1) return (b % 2 == 0) ? 1 : -1;
      return 0;
    }
  }
  T result = 1;
  while (b > 0) {
    if (b & 1) result = wrap_mul(result, a);
    a = wrap_mul(a, a);
    b = static_cast<T>(b >> 1);
  }
  return result;
}

// NaN-propagating max/min (as jnp.maximum), unlike std::max.
template <class T>
T max_kernel(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a > b ? a : b;
}
template <class T>
T min_kernel(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a < b ? a : b;
}

template <class T>
T wrap_neg(T v) {
  if constexpr (std::is_integral_v<T>)
    return wrap_sub(T{0}, v);
  else
    return -v;
}

struct Neg {
  template <class T>
  T operator()(T v) const {
    return wrap_neg(v);
  }
};
inline float float_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// exp of a float by a branch-free formula that loops over arrays vectorise (libm's expf is
// one opaque call per element): x = n ln2 + r with n = round(x / ln2) and r reduced in two
// parts (ln2 = hi + lo, n hi exact), exp(r) by Cephes' degree-6 polynomial on |r| <= ln2 / 2,
// and 2^n as two factors of assembled exponent bits, so that subnormal results round once.
// Within 1 ulp of the correctly rounded exp(x) for every float (0.4% of them 1 ulp off;
// checked exhaustively by tests/scalar_functions_test.cpp); exp(-inf) = 0, exp(+inf) = inf,
// inf above 88.72, 0 below -103.97, NaN kept.
inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.428606765330187045e-06f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  // Below -104 (-inf included) the result is 0: those lanes compute exp(0) and are replaced
  // at the end, because arithmetic that rounds to a subnormal costs a microcode assist of
  // a hundred cycles, and causal attention's masked scores are all -inf.
  const bool in_range = x >= -104.0f;  // false for NaN too
  float c = x > 88.8f ? 88.8f : x;
  c = in_range ? c : 0.0f;
  const float n = (c * kLog2e + kRound) - kRound;
  const float r = (c - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * (r * r) + r + 1.0f;
  const auto k = static_cast<int32_t>(n);
  const int32_t k1 = k / 2, k2 = k - k1;  // each in [-75, 65]: normal scale factors
  const float y = (p * float_from_bits(static_cast<uint32_t>(k1 + 127) << 23)) *
                  float_from_bits(static_cast<uint32_t>(k2 + 127) << 23);
  return in_range ? y : (x == x ? 0.0f : x);
}

struct Exp {
  template <class T>
  T operator()(T v) const {
    if constexpr (std::is_same_v<T, float>)
      return exp_f32(v);
    else
      return std::exp(v);
  }
};
struct Log {
  template <class T>
  T operator()(T v) const {
    return std::log(v);
  }
};
struct Log1p {
  template <class T>
  T operator()(T v) const {
    return std::log1p(v);
  }
};
struct Tanh {
  template <class T>
  T operator()(T v) const {
    return std::tanh(v);
  }
};
// Written so that exp never overflows: for large |v| the result saturates
// cleanly at 0 or 1 instead of producing inf/inf.
struct Logistic {
  template <class T>
  T operator()(T v) const {
    if (v >= 0) return T{1} / (T{1} + std::exp(-v));
    T e = std::exp(v);
    return e / (T{1} + e);
  }
};
struct Sqrt {
  template <class T>
  T operator()(T v) const {
    return std::sqrt(v);
  }
};
struct Rsqrt {
  template <class T>
  T operator()(T v) const {
    return T{1} / std::sqrt(v);
  }
};
// abs(min int) wraps to min int, as in XLA.
struct Abs {
  template <class T>
  T operator()(T v) const {
    if constexpr (std::is_unsigned_v<T>)
      return v;
    else if constexpr (std::is_integral_v<T>)
      return v < 0 ? wrap_neg(v) : v;
    else
      return std::abs(v);
  }
};
// sign keeps 0, -0 and NaN as they are (as jnp.sign).
struct Sign {
  template <class T>
  T operator()(T v) const {
    if (v > 0) return T{1};
    if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>)
      if (v < 0) return T{-1};
    return v;
  }
};
struct Sin {
  template <class T>
  T operator()(T v) const {
    return std::sin(v);
  }
};
struct Cos {
  template <class T>
  T operator()(T v) const {
    return std::cos(v);
  }
};

struct Add {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrap_add(a, b);
    else
      return a + b;
  }
};
struct Sub {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrap_sub(a, b);
    else
      return a - b;
  }
};
struct Mul {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return wrap_mul(a, b);
    else
      return a * b;
  }
};
struct Div {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return int_div(a, b);
    else
      return a / b;
  }
};
// The sign of the dividend (fmod, C++'s %); min % -1 is 0 instead of trapping.
struct Rem {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) throw Error("remainder: integer remainder by zero");
      if constexpr (std::is_signed_v<T>)
        if (b == -1) return T{0};
      return static_cast<T>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};
struct Floor {
  template <class T>
  T operator()(T v) const {
    return std::floor(v);
  }
};
struct Ceil {
  template <class T>
  T operator()(T v) const {
    return std::ceil(v);
  }
};
// Half to even (the default rounding mode), as jnp.round and stablehlo.round_nearest_even.
struct RoundHalfAway {
  template <class T>
  T operator()(T v) const {
    return std::round(v);
  }
};
struct Cbrt {
  template <class T>
  T operator()(T v) const {
    return std::cbrt(v);
  }
};
struct Expm1 {
  template <class T>
  T operator()(T v) const {
    return std::expm1(v);
  }
};
struct Atan2 {
  template <class T>
  T operator()(T a, T b) const {
    return static_cast<T>(std::atan2(a, b));
  }
};
struct RoundHalfEven {
  template <class T>
  T operator()(T v) const {
    return std::nearbyint(v);
  }
};
struct Pow {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return int_pow(a, b);
    else
      return std::pow(a, b);
  }
};
struct Max {
  template <class T>
  T operator()(T a, T b) const {
    return max_kernel(a, b);
  }
};
struct Min {
  template <class T>
  T operator()(T a, T b) const {
    return min_kernel(a, b);
  }
};

struct Less {
  template <class T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct LessEqual {
  template <class T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct Greater {
  template <class T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterEqual {
  template <class T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct Equal {
  template <class T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct NotEqual {
  template <class T>
  bool operator()(T a, T b) const {
    return a != b;
  }
};

}  // namespace drx::scalar
