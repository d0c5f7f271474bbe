#include "drx/exec/bf16_blocks.h"

#include "drx/array/half.h"
#include "drx/core/scalar_kernel.h"

namespace drx::exec {

DRX_VECTOR_CLONES void widen_bf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = bf16_to_float(x[j]);
}

DRX_VECTOR_CLONES void narrow_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = float_to_bf16(x[j]);
}

DRX_VECTOR_CLONES void round_to_bf16(float* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) x[j] = bf16_to_float(float_to_bf16(x[j]));
}

}  // namespace drx::exec
