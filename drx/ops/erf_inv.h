#pragma once
// The inverse error function, as normal random numbers need it
// (normal = sqrt(2) erfinv(u) for u uniform in (-1, 1)).
//
// f32 evaluates the single-precision polynomial of M. Giles, "Approximating
// the erfinv function" (GPU Computing Gems, 2011) in float, the form XLA uses
// on CPU, so drx's normals match JAX's to the last few ulps. f64 starts from
// the same polynomial and refines it by Newton's method on erf (or on erfc
// near +-1, where 1 - |y| is exact), which converges to full precision.
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

namespace drx {

// Giles' coefficients, highest power first: the central branch (w < 5, in
// w - 2.5) and the tail branch (in sqrt(w) - 3), w = -log(1 - x^2). The
// StableHLO lowering (drx/ops/elementwise.cpp) evaluates the same ones.
inline constexpr float kErfInvCentral[9] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                            -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                            -0.00417768164f,  0.246640727f,    1.50140941f};
inline constexpr float kErfInvTail[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                                         -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                                         0.00943887047f,   1.00167406f,     2.83297682f};

// p = c[0]; p = c[k] + p * w for k = 1, 2, ...: Horner's rule in this order.
template <class T, size_t N>
T erf_inv_horner(const float (&c)[N], T w) {
  T p = c[0];
  for (size_t k = 1; k < N; ++k) p = static_cast<T>(c[k]) + p * w;
  return p;
}

inline float erf_inv_f32(float x) {
  if (std::fabs(x) == 1.0f) return x * std::numeric_limits<float>::infinity();
  float w = -std::log1p(-x * x);
  float p;
  if (w < 5.0f) {
    p = erf_inv_horner(kErfInvCentral, w - 2.5f);
  } else {
    p = erf_inv_horner(kErfInvTail, std::sqrt(w) - 3.0f);
  }
  return p * x;
}

inline double erf_inv_f64(double y) {
  if (std::isnan(y) || std::fabs(y) > 1.0) return std::numeric_limits<double>::quiet_NaN();
  if (std::fabs(y) == 1.0) return y * std::numeric_limits<double>::infinity();
  const double a = std::fabs(y);
  // Start from the float polynomial (~1e-7 relative); where float cannot
  // hold a below 1, from the leading term of the asymptotic expansion.
  const float af = static_cast<float>(a);
  double x = af < 1.0f ? static_cast<double>(erf_inv_f32(af))
                       : std::sqrt(-std::log((1.0 - a) * (1.0 + a)));
  const double tail = 1.0 - a;  // exact for a >= 0.5 (Sterbenz)
  for (int i = 0; i < 30; ++i) {
    const double slope = M_2_SQRTPI * std::exp(-x * x);
    if (slope == 0) break;
    const double step = (a < 0.5 ? std::erf(x) - a : tail - std::erfc(x)) / slope;
    x -= step;
    if (std::fabs(step) <= 1e-17 * std::fabs(x)) break;
  }
  return y < 0 ? -x : x;
}

struct ErfInv {
  template <class T>
  T operator()(T v) const {
    if constexpr (std::is_same_v<T, float>)
      return erf_inv_f32(v);
    else
      return static_cast<T>(erf_inv_f64(static_cast<double>(v)));
  }
};

}  // namespace drx
