#pragma once
// bf16 and f16: storage formats. drx computes with them as XLA's CPU backend
// does, in f32, rounding each result back to the format (see
// Primitive::evaluate); these are the conversions between the formats and
// doubles.
#include <cstdint>

#include "drx/array/dtype.h"

namespace drx {

bool is_half(DType d);  // bf16 or f16

// Exact: every bf16 and f16 value is a double (and a float).
double half_to_double(DType d, uint16_t bits);
// Correctly rounded to nearest, ties to even, straight from the double (no
// double rounding through f32); overflow gives ±inf; NaN stays NaN (quiet,
// sign kept).
uint16_t half_from_double(DType d, double v);

}  // namespace drx
