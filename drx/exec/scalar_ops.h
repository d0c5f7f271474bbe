#pragma once
// Private to drx/exec: the scalar function of each elementwise primitive on
// floating-point values, written as the reference primitive computes it (same
// expression, same NaN rules), so compiled results are bitwise those of
// Primitive::eval.
#include <cmath>
#include <limits>

namespace drx::exec::scalar {

struct Neg {
  template <class T>
  T operator()(T v) const {
    return -v;
  }
};
struct Exp {
  template <class T>
  T operator()(T v) const {
    return std::exp(v);
  }
};
struct Log {
  template <class T>
  T operator()(T v) const {
    return std::log(v);
  }
};
struct Log1p {
  template <class T>
  T operator()(T v) const {
    return std::log1p(v);
  }
};
struct Tanh {
  template <class T>
  T operator()(T v) const {
    return std::tanh(v);
  }
};
struct Logistic {
  template <class T>
  T operator()(T v) const {
    if (v >= 0) return T{1} / (T{1} + std::exp(-v));
    T e = std::exp(v);
    return e / (T{1} + e);
  }
};
struct Sqrt {
  template <class T>
  T operator()(T v) const {
    return std::sqrt(v);
  }
};
struct Rsqrt {
  template <class T>
  T operator()(T v) const {
    return T{1} / std::sqrt(v);
  }
};
struct Abs {
  template <class T>
  T operator()(T v) const {
    return std::abs(v);
  }
};
struct Sign {
  template <class T>
  T operator()(T v) const {
    if (v > 0) return T{1};
    if (v < 0) return T{-1};
    return v;
  }
};
struct Sin {
  template <class T>
  T operator()(T v) const {
    return std::sin(v);
  }
};
struct Cos {
  template <class T>
  T operator()(T v) const {
    return std::cos(v);
  }
};

struct Add {
  template <class T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct Sub {
  template <class T>
  T operator()(T a, T b) const {
    return a - b;
  }
};
struct Mul {
  template <class T>
  T operator()(T a, T b) const {
    return a * b;
  }
};
struct Div {
  template <class T>
  T operator()(T a, T b) const {
    return a / b;
  }
};
struct Pow {
  template <class T>
  T operator()(T a, T b) const {
    return std::pow(a, b);
  }
};
// NaN-propagating, as jnp.maximum.
struct Max {
  template <class T>
  T operator()(T a, T b) const {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    return a > b ? a : b;
  }
};
struct Min {
  template <class T>
  T operator()(T a, T b) const {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    return a < b ? a : b;
  }
};

struct Less {
  template <class T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct LessEqual {
  template <class T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct Greater {
  template <class T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterEqual {
  template <class T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct Equal {
  template <class T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct NotEqual {
  template <class T>
  bool operator()(T a, T b) const {
    return a != b;
  }
};

}  // namespace drx::exec::scalar
