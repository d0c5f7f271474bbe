#include "drx/array/half.h"

#include <cmath>

#include "drx/array/error.h"

namespace drx {
namespace {

struct Format {
  int mantissa_bits;
  int exponent_bits;
};

Format format_of(DType d) {
  if (d == DType::bf16) return {7, 8};
  if (d == DType::f16) return {10, 5};
  throw Error("half precision: " + std::string(dtype_name(d)) + " is not bf16 or f16");
}

}  // namespace

bool is_half(DType d) { return d == DType::bf16 || d == DType::f16; }

double half_to_double(DType d, uint16_t bits) {
  const Format f = format_of(d);
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const uint32_t mant_mask = (1u << f.mantissa_bits) - 1;
  const uint32_t exp_all = (1u << f.exponent_bits) - 1;
  const uint32_t mant = bits & mant_mask;
  const uint32_t exp = (bits >> f.mantissa_bits) & exp_all;
  const double sign = (bits >> 15) ? -1.0 : 1.0;
  if (exp == exp_all) return mant ? std::copysign(NAN, sign) : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), 1 - bias - f.mantissa_bits);
  return sign * std::ldexp(static_cast<double>(mant | (1u << f.mantissa_bits)),
                           static_cast<int>(exp) - bias - f.mantissa_bits);
}

uint16_t half_from_double(DType d, double v) {
  const Format f = format_of(d);
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const uint32_t exp_all = (1u << f.exponent_bits) - 1;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v))  // quiet NaN: the top mantissa bit set
    return static_cast<uint16_t>(sign | (exp_all << f.mantissa_bits) |
                                 (1u << (f.mantissa_bits - 1)));
  const double a = std::fabs(v);
  if (a == 0) return sign;
  if (std::isinf(a)) return static_cast<uint16_t>(sign | (exp_all << f.mantissa_bits));
  int e2 = 0;
  std::frexp(a, &e2);                               // a = m * 2^e2, m in [0.5, 1)
  const int exponent = std::max(e2 - 1, 1 - bias);  // subnormals share the least exponent
  // The significand in units of the format's last place; rint rounds to
  // nearest even. A carry to 2^(mantissa_bits+1) lands, by the encoding's
  // layout, on the next exponent (or on inf) by itself.
  const double units = std::rint(std::ldexp(a, f.mantissa_bits - exponent));
  const uint64_t significand = static_cast<uint64_t>(units);
  const uint64_t normal = significand >> f.mantissa_bits;  // 1 for normals, 0 for subnormals
  const uint64_t biased = normal ? static_cast<uint64_t>(exponent + bias) : 0;
  uint64_t body = (biased << f.mantissa_bits) + (significand - (normal << f.mantissa_bits));
  if (normal && significand >> (f.mantissa_bits + 1)) body = (biased + 1) << f.mantissa_bits;
  if (body >= (static_cast<uint64_t>(exp_all) << f.mantissa_bits))
    body = static_cast<uint64_t>(exp_all) << f.mantissa_bits;
  return static_cast<uint16_t>(sign | body);
}

}  // namespace drx
