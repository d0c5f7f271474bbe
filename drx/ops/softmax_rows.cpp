// softmax's row loops for float, compiled for AVX2 as well as baseline x86-64 (the CPU picks):
// the exp pass is the cost of attention's softmax, and it vectorises twice as wide there.
// Both compilations perform the same IEEE operations per element, so results are the same bits.
#include "drx/core/scalar_kernel.h"
#include "drx/ops/axis_loops.h"

namespace drx::axis_loops {

template <>
DRX_VECTOR_CLONES void softmax<float>(const float* x, const AxisLayout& l, float* out) {
  softmax_all_rows(x, l, out);
}

}  // namespace drx::axis_loops
