// Elementwise kernels: one tight loop per op and dtype over raw pointers, which
// the compiler vectorises. Each scalar function computes exactly what the
// reference primitive does (same expression, same NaN rules), so results are
// bitwise equal to Primitive::eval. Dtypes not covered here fall back.
#include <cmath>
#include <cstring>
#include <limits>

#include "drx/exec/kernels.h"

namespace drx::exec {
namespace {

// ---- scalar functions (as in drx/ops/elementwise*.cpp, floating point) ----
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

// ---- kernels ---------------------------------------------------------------
template <class T, class F>
class UnaryKernel : public Kernel {
 public:
  UnaryKernel(const Eqn& e, int64_t n) : x_(e.ins[0]), y_(e.outs[0]), n_(n) {}
  void run(Frame& f) const override {
    const T* x = f.in<T>(x_);
    T* y = f.out<T>(y_);
    for (int64_t i = 0; i < n_; ++i) y[i] = F{}(x[i]);
  }

 private:
  int x_, y_;
  int64_t n_;
};

template <class T, class Out, class F>
class BinaryKernel : public Kernel {
 public:
  BinaryKernel(const Eqn& e, int64_t n) : a_(e.ins[0]), b_(e.ins[1]), y_(e.outs[0]), n_(n) {}
  void run(Frame& f) const override {
    const T* a = f.in<T>(a_);
    const T* b = f.in<T>(b_);
    Out* y = f.out<Out>(y_);
    for (int64_t i = 0; i < n_; ++i) y[i] = static_cast<Out>(F{}(a[i], b[i]));
  }

 private:
  int a_, b_, y_;
  int64_t n_;
};

// Branches are copied as bit patterns of their element size.
template <class T>
class SelectKernel : public Kernel {
 public:
  SelectKernel(const Eqn& e, int64_t n)
      : p_(e.ins[0]), a_(e.ins[1]), b_(e.ins[2]), y_(e.outs[0]), n_(n) {}
  void run(Frame& f) const override {
    const uint8_t* p = f.in<uint8_t>(p_);
    const T* a = f.in<T>(a_);
    const T* b = f.in<T>(b_);
    T* y = f.out<T>(y_);
    for (int64_t i = 0; i < n_; ++i) y[i] = p[i] ? a[i] : b[i];
  }

 private:
  int p_, a_, b_, y_;
  int64_t n_;
};

template <class S, class D>
class ConvertKernel : public Kernel {
 public:
  ConvertKernel(const Eqn& e, int64_t n) : x_(e.ins[0]), y_(e.outs[0]), n_(n) {}
  void run(Frame& f) const override {
    const S* x = f.in<S>(x_);
    D* y = f.out<D>(y_);
    for (int64_t i = 0; i < n_; ++i) y[i] = static_cast<D>(x[i]);
  }

 private:
  int x_, y_;
  int64_t n_;
};

int64_t size_of(const Eqn& e, const std::vector<VarInfo>& vars) {
  return num_elements(var(vars, e.outs[0]).shape);
}

template <class F>
std::optional<KernelSpec> unary(const Eqn& e, const std::vector<VarInfo>& vars) {
  const int64_t n = size_of(e, vars);
  switch (var(vars, e.ins[0]).dtype) {
    case DType::f32:
      return spec<UnaryKernel<float, F>>(Alias::elementwise, e, n);
    case DType::f64:
      return spec<UnaryKernel<double, F>>(Alias::elementwise, e, n);
    default:
      return std::nullopt;
  }
}

template <class F>
std::optional<KernelSpec> binary(const Eqn& e, const std::vector<VarInfo>& vars) {
  const int64_t n = size_of(e, vars);
  switch (var(vars, e.ins[0]).dtype) {
    case DType::f32:
      return spec<BinaryKernel<float, float, F>>(Alias::elementwise, e, n);
    case DType::f64:
      return spec<BinaryKernel<double, double, F>>(Alias::elementwise, e, n);
    default:
      return std::nullopt;
  }
}

// Comparisons of any dtype the primitive accepts: the reference applies the
// C++ operator to the stored values, as this does.
template <class F>
std::optional<KernelSpec> compare(const Eqn& e, const std::vector<VarInfo>& vars) {
  const int64_t n = size_of(e, vars);
  return dispatch_dtype(var(vars, e.ins[0]).dtype, [&](auto t) {
    using T = decltype(t);
    return spec<BinaryKernel<T, uint8_t, F>>(Alias::elementwise, e, n);
  });
}

std::optional<KernelSpec> select(const Eqn& e, const std::vector<VarInfo>& vars) {
  const int64_t n = size_of(e, vars);
  switch (dtype_size(var(vars, e.outs[0]).dtype)) {
    case 1:
      return spec<SelectKernel<uint8_t>>(Alias::elementwise, e, n);
    case 4:
      return spec<SelectKernel<uint32_t>>(Alias::elementwise, e, n);
    case 8:
      return spec<SelectKernel<uint64_t>>(Alias::elementwise, e, n);
    default:
      return std::nullopt;
  }
}

// To a float type from anything is a plain static_cast in the reference
// (convert_element); conversions to integers or bool saturate and fall back.
std::optional<KernelSpec> convert(const Eqn& e, const std::vector<VarInfo>& vars) {
  const DType from = var(vars, e.ins[0]).dtype, to = var(vars, e.outs[0]).dtype;
  const int64_t n = size_of(e, vars);
  if (from == to)
    return KernelSpec{copy_kernel(e, var(vars, e.outs[0]).nbytes), Alias::elementwise};
  if (!is_floating(to)) return std::nullopt;
  return dispatch_dtype(from, [&](auto s) {
    using S = decltype(s);
    if (to == DType::f32) return spec<ConvertKernel<S, float>>(Alias::elementwise, e, n);
    return spec<ConvertKernel<S, double>>(Alias::elementwise, e, n);
  });
}

}  // namespace

void add_elementwise_kernels(KernelTable& t) {
  t["neg"] = unary<Neg>;
  t["exp"] = unary<Exp>;
  t["log"] = unary<Log>;
  t["log1p"] = unary<Log1p>;
  t["tanh"] = unary<Tanh>;
  t["logistic"] = unary<Logistic>;
  t["sqrt"] = unary<Sqrt>;
  t["rsqrt"] = unary<Rsqrt>;
  t["abs"] = unary<Abs>;
  t["sign"] = unary<Sign>;
  t["sin"] = unary<Sin>;
  t["cos"] = unary<Cos>;
  t["add"] = binary<Add>;
  t["sub"] = binary<Sub>;
  t["mul"] = binary<Mul>;
  t["div"] = binary<Div>;
  t["pow"] = binary<Pow>;
  t["maximum"] = binary<Max>;
  t["minimum"] = binary<Min>;
  t["less"] = compare<Less>;
  t["less_equal"] = compare<LessEqual>;
  t["greater"] = compare<Greater>;
  t["greater_equal"] = compare<GreaterEqual>;
  t["equal"] = compare<Equal>;
  t["not_equal"] = compare<NotEqual>;
  t["select"] = select;
  t["convert"] = convert;
}

}  // namespace drx::exec
