#pragma once
// The one definition of each reduction: its identity, how a value is folded
// into an accumulator, and how two partial results combine. The reference
// semantics of sum/max/min and of reduce_sum/max/min (over a placement) and
// the compiled executor's kernels all use these, so they cannot drift apart.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "drx/array/wrapping.h"

namespace drx {

enum class ReduceKind { sum, max, min };

// What folding starts from for elements of type T accumulated in A: 0, or for
// max/min the lowest/highest value of T (-inf/+inf for floats).
template <class T, class A = T>
A reduce_identity(ReduceKind kind) {
  if (kind == ReduceKind::sum) return A{0};
  if constexpr (std::is_floating_point_v<T>) {
    const A inf = std::numeric_limits<A>::infinity();
    return kind == ReduceKind::max ? -inf : inf;
  } else if constexpr (std::is_same_v<T, uint8_t>) {  // bool: false < true
    return kind == ReduceKind::max ? A{0} : A{1};
  } else {
    return static_cast<A>(kind == ReduceKind::max ? std::numeric_limits<T>::lowest()
                                                  : std::numeric_limits<T>::max());
  }
}

// Folds v into the accumulator a. NaN propagates, as in numpy: a NaN v
// replaces a, and once a is NaN no comparison replaces it.
template <ReduceKind K, class A>
inline void reduce_fold(A& a, A v) {
  if constexpr (K == ReduceKind::sum && std::is_integral_v<A>) {
    a = wrapping::add(a, v);
  } else if constexpr (K == ReduceKind::sum) {
    a = static_cast<A>(a + v);
  } else if constexpr (K == ReduceKind::max) {
    if (v > a || v != v) a = v;
  } else {
    if (v < a || v != v) a = v;
  }
}

// Two partial reductions, left then right (the step of a reduction tree).
template <ReduceKind K, class T>
inline T reduce_combine(T left, T right) {
  reduce_fold<K>(left, right);
  return left;
}

// Calls fn(std::integral_constant<ReduceKind, K>{}) for the runtime kind.
template <class Fn>
decltype(auto) dispatch_reduce(ReduceKind kind, Fn&& fn) {
  switch (kind) {
    case ReduceKind::max:
      return fn(std::integral_constant<ReduceKind, ReduceKind::max>{});
    case ReduceKind::min:
      return fn(std::integral_constant<ReduceKind, ReduceKind::min>{});
    case ReduceKind::sum:
      break;
  }
  return fn(std::integral_constant<ReduceKind, ReduceKind::sum>{});
}

}  // namespace drx
