#pragma once
// Private to the elementwise family (drx/ops/elementwise*.cpp): the dtype
// dispatch, the loops every kernel shares, the scalar kernels, and the
// pieces of the primitive classes that the family's files have in common.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/primitive.h"
#include "drx/ops/ops.h"
#include "drx/ops/scalar_functions.h"

namespace drx::elementwise {

using namespace drx::scalar;

// Which dtypes an operation accepts. The kernels are instantiated only for
// these, so a float-only kernel never has to make sense of integers.
enum class Domain { floating, numeric, any };

template <Domain D, class Fn>
decltype(auto) dispatch(DType d, Fn&& fn) {
  if constexpr (D == Domain::floating) {
    if (d == DType::f64) return fn(double{});
    return fn(float{});
  } else if constexpr (D == Domain::numeric) {
    // f32, bool and the storage formats (which evaluate widens before kernels see them) as f32.
    if (d == DType::bool_ || is_storage_format(d)) return fn(float{});
    return dispatch_dtype(d, fn);
  } else {
    return dispatch_dtype(d, std::forward<Fn>(fn));
  }
}

bool accepts(Domain d, DType t);
// "floating-point (f32, f64)" and so on, for error messages.
std::string domain_str(Domain d);

// out[i] = f(x[i]); the storage types are fixed before the loop so that the
// loop body is a plain inlined call.
template <class In, class Out, class F>
void unary_loop(const Array& x, Array& out, F f) {
  const In* in = x.data<In>();
  Out* o = out.data<Out>();
  const int64_t n = x.size();
  for (int64_t i = 0; i < n; ++i) o[i] = f(in[i]);
}

template <class In, class Out, class F>
void binary_loop(const Array& a, const Array& b, Array& out, F f) {
  const In* x = a.data<In>();
  const In* y = b.data<In>();
  Out* o = out.data<Out>();
  const int64_t n = a.size();
  for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
}

// Element conversion that never invokes undefined behaviour: float -> int
// saturates at the integer range and maps NaN to 0; anything -> bool is
// "nonzero" (NaN is nonzero).
template <class D, class S>
D convert_element(S v) {
  if constexpr (std::is_same_v<D, uint8_t>) {
    return v != S{0} ? 1 : 0;
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    if (std::isnan(v)) return 0;
    // Both limits are exactly representable as doubles (powers of two); the
    // upper one is exclusive.
    const double lo = static_cast<double>(std::numeric_limits<D>::min());
    const double hi = static_cast<double>(std::numeric_limits<D>::max()) + 1.0;
    const double x = static_cast<double>(v);
    if (x <= lo) return std::numeric_limits<D>::min();
    if (x >= hi) return std::numeric_limits<D>::max();
    return static_cast<D>(x);
  } else {
    return static_cast<D>(v);
  }
}

// ---- shared pieces of the primitive classes ----------------------------------
// The batched form of operands for a vmap rule: if any is batched, the
// unbatched ones are broadcast to carry the batch at axis 0 too. Returns
// whether the result is batched.
bool align_batched(const std::vector<Batched>& ins, int64_t batch_size, Values& out);

}  // namespace drx::elementwise
