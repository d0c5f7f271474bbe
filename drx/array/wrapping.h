#pragma once
// Two's-complement integer arithmetic (as XLA's), defined for every integer
// dtype. The operands are widened to an unsigned type of at least int's width
// first: i8/i16/u8/u16 would otherwise promote to (signed) int, where
// 65535 * 65535 overflows.
#include <type_traits>

namespace drx::wrapping {

template <class T>
using Unsigned =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
T add(T a, T b) {
  return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
}
template <class T>
T sub(T a, T b) {
  return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b));
}
template <class T>
T mul(T a, T b) {
  return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b));
}

}  // namespace drx::wrapping
