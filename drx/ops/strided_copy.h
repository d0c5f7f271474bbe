#pragma once
// The one data-movement loop of the shape primitives.
#include <cstdint>
#include <vector>

#include "drx/array/array.h"

namespace drx::detail {

// out[i] = in[offset + sum_k idx_k(i) * strides[k]]: serves transpose (permuted
// strides), slice (an offset), broadcast (zero strides) and reverse (negative
// strides from the far end).
Array strided_copy(const Array& in, const Shape& out_shape, int64_t offset,
                   const std::vector<int64_t>& strides);

}  // namespace drx::detail
