#include "drx/ops/strided_copy.h"

namespace drx::detail {

Array strided_copy(const Array& in, const Shape& out_shape, int64_t offset,
                   const std::vector<int64_t>& strides) {
  Array out(in.dtype(), out_shape);
  const int64_t n = out.size();
  if (n == 0) return out;
  const size_t rank = out_shape.size();
  dispatch_dtype(in.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    std::vector<int64_t> idx(rank, 0);
    int64_t pos = offset;
    for (int64_t i = 0; i < n; ++i) {
      dst[i] = src[pos];
      for (size_t k = rank; k-- > 0;) {
        pos += strides[k];
        if (++idx[k] < out_shape[k]) break;
        pos -= strides[k] * idx[k];
        idx[k] = 0;
      }
    }
  });
  return out;
}

}  // namespace drx::detail
