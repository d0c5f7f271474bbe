#pragma once
// bf16 <-> f32 over arrays, compiled for AVX-512 and AVX2 as well as baseline x86-64 (the CPU
// picks, as for the elementwise loops): the same integer operations per element in each, so the
// bits are those of bf16_to_float and float_to_bf16 (drx/array/half.h) on every machine.
#include <cstdint>

namespace drx::exec {

// y[j] = bf16_to_float(x[j]), exactly.
void widen_bf16(const uint16_t* x, float* y, int64_t n);
// y[j] = float_to_bf16(x[j]): to nearest, ties to even; NaN stays NaN.
void narrow_to_bf16(const float* x, uint16_t* y, int64_t n);
// x[j] = bf16_to_float(float_to_bf16(x[j])): the value a bf16 result holds, kept in f32.
void round_to_bf16(float* x, int64_t n);

}  // namespace drx::exec
