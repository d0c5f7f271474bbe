#pragma once
// bf16 and f16: storage formats. drx computes with them as XLA's CPU backend
// does, in f32, rounding each result back to the format (see
// Primitive::evaluate); these are the conversions between the formats and
// doubles.
#include <cstdint>
#include <cstring>

#include "drx/array/dtype.h"

namespace drx {

bool is_half(DType d);  // bf16 or f16

// Exact: every bf16 and f16 value is a double (and a float).
double half_to_double(DType d, uint16_t bits);
// Correctly rounded to nearest, ties to even, straight from the double (no
// double rounding through f32); overflow gives ±inf; NaN stays NaN (quiet,
// sign kept).
uint16_t half_from_double(DType d, double v);

// bf16 from and to f32 bit patterns, for kernels: exact, and correctly rounded
// (for every float x, float_to_bf16(x) == half_from_double(DType::bf16, x)).
inline float bf16_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // to nearest even
  const uint32_t quiet_nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

}  // namespace drx
