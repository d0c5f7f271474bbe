// Unary elementwise primitives, and the helpers the whole family shares.
//
// Every elementwise op has a diagonal Jacobian, so one "derivative applied to
// a tangent" function serves both jvp (applied to t) and vjp (applied to the
// cotangent).
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "drx/core/lowering.h"
#include "drx/ops/elementwise_kernels.h"
#include "drx/ops/erf_inv.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

namespace drx {
namespace elementwise {

bool accepts(Domain d, DType t) {
  switch (d) {
    case Domain::floating:
      return is_floating(t);
    case Domain::numeric:
      return t != DType::bool_;
    case Domain::any:
      break;
  }
  return true;
}

std::string domain_str(Domain d) {
  switch (d) {
    case Domain::floating:
      return "a floating-point operand (f32 or f64)";
    case Domain::numeric:
      return "a numeric operand (f32, f64, i32, i64, u32 or u8)";
    case Domain::any:
      break;
  }
  return "an operand of any dtype";
}

bool align_batched(const std::vector<Batched>& ins, int64_t batch_size, Values& out) {
  bool any = false;
  for (const Batched& b : ins) any = any || b.batched;
  out.clear();
  for (const Batched& b : ins) {
    if (!any || b.batched) {
      out.push_back(b.value);
      continue;
    }
    Shape shape{batch_size};
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < b.value.ndim(); ++i) {
      shape.push_back(b.value.shape()[static_cast<size_t>(i)]);
      dims.push_back(i + 1);
    }
    out.push_back(broadcast_in_dim(b.value, shape, dims));
  }
  return any;
}

namespace {

// d op(x) applied to t, given x, y = op(x) and t. nullptr: the derivative is zero.
using UnaryDerivative = Value (*)(const Value& x, const Value& y, const Value& t);

template <class K, Domain D>
class UnaryPrim : public Primitive {
 public:
  // `stablehlo`: the StableHLO op of the same semantics ("" where the spec
  // has none: a derived class then states the lowering, as ErfPrim).
  UnaryPrim(std::string name, std::string stablehlo, UnaryDerivative d)
      : Primitive(std::move(name)), stablehlo_(std::move(stablehlo)), deriv_(d) {}

  void lower(StableHloEmitter& em, const Params& params) const override {
    if (stablehlo_.empty()) Primitive::lower(em, params);
    em.set_results({em.emit1(stablehlo_, {em.operand(0)}, {}, em.result_type(0))});
  }

  const ScalarKernel* scalar_kernel() const override { return &kernel_; }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    check_arity(name(), ins, 1);
    if (!accepts(D, ins[0].dtype))
      throw TypeError(name() + ": expected " + domain_str(D) + ", got " + ins[0].str() +
                      (D == Domain::floating ? "; convert it first with drx::astype" : ""));
    return {ins[0]};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    const Array& x = ins[0];
    Array out(x.dtype(), x.shape());
    dispatch<D>(x.dtype(), [&](auto t) {
      using T = decltype(t);
      unary_loop<T, T>(x, out, [](T v) { return static_cast<T>(K{}(v)); });
    });
    return {out};
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                  const Params&) const override {
    return {apply(primals[0], outs[0], tangents[0])};
  }

  MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& cts,
                  const Params&) const override {
    return {apply(primals[0], outs[0], cts[0])};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& params) const override {
    return {{emit1(*this, {ins[0].value}, params), ins[0].batched}};
  }

 private:
  // Integer values carry no derivative, whatever the op.
  MaybeValue apply(const Value& x, const Value& y, const MaybeValue& t) const {
    if (!t || !deriv_ || !is_floating(x.dtype())) return std::nullopt;
    return deriv_(x, y, *t);
  }
  std::string stablehlo_;
  UnaryDerivative deriv_;
  inline static const ScalarKernel kernel_ = ScalarKernel::unary<K>();
};

// ---- erf and erf_inv as StableHLO arithmetic ----------------------------------
// The spec has neither function, so their lowerings expand them into ops of
// one floating type (f32 or f64; bf16 and f16 compute in f32, as their
// kernels do, and round once at the end).

// Emits elementwise ops on tensors of one floating type.
class FloatOps {
 public:
  FloatOps(StableHloEmitter& em, const Type& t) : em_(em), t_(t.dtype, t.shape) {}

  // A splat constant (one per value).
  const std::string& k(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    auto it = constants_.find(bits);
    if (it == constants_.end())
      it = constants_.emplace(bits, em_.splat(v, t_.dtype, t_.shape)).first;
    return it->second;
  }
  std::string op(const char* name, const std::string& a) { return em_.emit1(name, {a}, {}, t_); }
  std::string op(const char* name, const std::string& a, const std::string& b) {
    return em_.emit1(name, {a, b}, {}, t_);
  }
  std::string add(const std::string& a, const std::string& b) { return op("stablehlo.add", a, b); }
  std::string sub(const std::string& a, const std::string& b) {
    return op("stablehlo.subtract", a, b);
  }
  std::string mul(const std::string& a, const std::string& b) {
    return op("stablehlo.multiply", a, b);
  }
  std::string div(const std::string& a, const std::string& b) {
    return op("stablehlo.divide", a, b);
  }
  std::string neg(const std::string& a) { return op("stablehlo.negate", a); }
  // An i1 tensor: a `dir` b (LT, GE, EQ, ...).
  std::string compare(const char* dir, const std::string& a, const std::string& b) {
    return emit_compare(em_, dir, a, b, t_);
  }
  std::string select(const std::string& pred, const std::string& a, const std::string& b) {
    return em_.emit1("stablehlo.select", {pred, a, b}, {}, t_);
  }
  // Horner's rule with the highest power first: p = c[0]; p = c[k] + p * x,
  // the order of the C++ kernels.
  template <class C, size_t N>
  std::string horner(const C (&c)[N], const std::string& x) {
    std::string p = k(static_cast<double>(c[0]));
    for (size_t i = 1; i < N; ++i) p = add(k(static_cast<double>(c[i])), mul(p, x));
    return p;
  }

 private:
  StableHloEmitter& em_;
  Type t_;
  std::map<uint64_t, std::string> constants_;
};

using FloatExpansion = std::function<std::string(FloatOps&, const std::string&)>;

// Sets the equation's result to f32(x) or f64(x), by the operand's dtype.
void lower_expansion(StableHloEmitter& em, const FloatExpansion& f32, const FloatExpansion& f64) {
  const Type& in = em.operand_type(0);
  const bool half = in.dtype == DType::bf16 || in.dtype == DType::f16;
  const Type t(half ? DType::f32 : in.dtype, in.shape);
  std::string x = em.operand(0);
  if (half) x = em.emit1("stablehlo.convert", {x}, {}, t);
  FloatOps f(em, t);
  std::string y = t.dtype == DType::f64 ? f64(f, x) : f32(f, x);
  if (half) y = em.emit1("stablehlo.convert", {y}, {}, Type(in.dtype, in.shape));
  em.set_results({y});
}

// erf, f32: erf(x) = x + x q(x^2) for |x| < 1, and 1 - exp(-x^2) R(|x|) with
// R ~ exp(x^2) erfc(x) for |x| >= 1 (|x| clamped to 4, beyond which erf
// rounds to +-1). q is a degree-6 polynomial, R a (3,3) rational function;
// both are minimax fits of relative error derived for drx (the Remez
// algorithm in scripts/fit_erf.py: q to 1.2e-9, R to 2.4e-8, which the
// 1 - erfc form shrinks below 0.1 ulp of erf). Evaluated in float with
// drx's exp (erf_f32 below, drx's own erf), the result is within 1 ulp of
// std::erf (tests/scalar_exp_test.cpp sweeps the floats; erf is odd and so is
// this form); a backend's exp may add its own.
constexpr float kErfSmallF32[7] = {7.85386146e-05f, -0.000801019371f, 0.00518832775f,
                                   -0.0268538129f,  0.112835854f,     -0.37612626f,
                                   0.128379166f};
constexpr float kErfcxNumF32[4] = {-6.52881427e-05f, 0.249308079f, 0.756346226f, 1.00155306f};
constexpr float kErfcxDenF32[4] = {0.439591348f, 1.36063564f, 1.89392447f, 1.0f};

// erf, f64: the same form with q of degree 13 (minimax on |x| <= 1.25, 9.2e-19
// relative) and R an (8,8) rational on [0.45, 6] (1.2e-17 relative), |x|
// clamped to 6, where erf rounds to +-1. Within 1 ulp of std::erf (glibc) on
// 10^8 sampled points (tests/stablehlo_export_numeric_test.cpp checks 10^6).
constexpr double kErfSmallF64[14] = {
    -3.2618733060056685e-12, 7.936798319873774e-11,   -1.1888109540719571e-09,
    1.4733916958720991e-08,  -1.6356550268356934e-07, 1.6461280007490947e-06,
    -1.4925597291227164e-05, 0.00012055330619531316,  -0.00085483269518191315,
    0.0052239776240303381,   -0.026866170644964008,   0.11283791670954088,
    -0.37612638903183726,    0.12837916709551259};
constexpr double kErfcxNumF64[9] = {
    4.2412027071622896e-12, 0.00059995920443957926, 0.0089419873677152543,
    0.063677670487011423,   0.27690285159782274,    0.79064546221924181,
    1.487453931535373,      1.7289934612257636,     0.99999999996379119};
constexpr double kErfcxDenF64[9] = {0.0010634004563715624, 0.015849246890435348, 0.1133976705864554,
                                    0.49871905281901158,   1.4573144456827485,   2.8736782807793646,
                                    3.7116536818506916,    2.8573726277270626,   1.0};

// x + x q(x^2): erf(x) for |x| <= 1.25, with the leading term exact.
template <class C, size_t N>
std::string erf_near_zero(FloatOps& f, const C (&q)[N], const std::string& x) {
  return f.add(x, f.mul(x, f.horner(q, f.mul(x, x))));
}

// exp(x^2) erfc(x), x in [0.45, 6] (f64) or [1, 4] (f32).
template <class C, size_t N>
std::string erfcx(FloatOps& f, const C (&num)[N], const C (&den)[N], const std::string& x) {
  return f.div(f.horner(num, x), f.horner(den, x));
}

template <class C, size_t N, size_t M>
std::string erf_expansion(FloatOps& f, const C (&q)[N], const C (&num)[M], const C (&den)[M],
                          double clamp, const std::string& x) {
  const std::string ax = f.op("stablehlo.abs", x);
  const std::string small = erf_near_zero(f, q, x);
  const std::string c = f.op("stablehlo.minimum", ax, f.k(clamp));
  const std::string erfc =
      f.mul(f.op("stablehlo.exponential", f.neg(f.mul(c, c))), erfcx(f, num, den, c));
  const std::string big = f.sub(f.k(1.0), erfc);
  const std::string signed_big = f.select(f.compare("LT", x, f.k(0.0)), f.neg(big), big);
  return f.select(f.compare("LT", ax, f.k(1.0)), small, signed_big);
}

// erf_expansion's f32 form op for op in C++, with drx's exp (scalar::exp_f32): branch-free,
// so loops over arrays vectorise where libm's erff is one call per element, and bitwise what
// the exported expansion computes when run by drx. Within 1 ulp of std::erf over the floats
// (tests/scalar_exp_test.cpp). |x| is clamped to 4 NaN-propagating, as stablehlo.minimum.
// erf_f32(x) given e = exp_f32(-(x * x)), which GeluGrad needs too. Where |x| >= 4, erf_f32
// uses exp(-16) instead and rounds to +-1 either way (1 - exp(-16) R(4) is within half an ulp
// of 1, and e is smaller), so the bits are erf_f32's everywhere.
inline float erf_f32_given(float x, float e) {
  auto horner = [](const auto& c, float y) {
    float p = c[0];
    for (size_t i = 1; i < std::size(c); ++i) p = c[i] + p * y;
    return p;
  };
  const float ax = std::fabs(x);
  const float small = x + x * horner(kErfSmallF32, x * x);
  const float c = (ax < 4.0f || ax != ax) ? ax : 4.0f;
  const float erfc = e * (horner(kErfcxNumF32, c) / horner(kErfcxDenF32, c));
  const float big = 1.0f - erfc;
  const float signed_big = x < 0.0f ? -big : big;
  return ax < 1.0f ? small : signed_big;
}

inline float erf_f32(float x) {
  const float ax = std::fabs(x);
  const float c = (ax < 4.0f || ax != ax) ? ax : 4.0f;
  return erf_f32_given(x, scalar::exp_f32(-(c * c)));
}

// The error function, as the GELU activation and Gaussian CDFs need it.
struct Erf {
  template <class T>
  T operator()(T v) const {
    if constexpr (std::is_same_v<T, float>)
      return erf_f32(v);
    else
      return std::erf(v);
  }
};

class ErfPrim : public UnaryPrim<Erf, Domain::floating> {
 public:
  ErfPrim()
      : UnaryPrim("erf", "", [](const Value& x, const Value&, const Value& t) {
          return t * (M_2_SQRTPI * exp(-(x * x)));  // d erf(x) = 2/sqrt(pi) exp(-x^2)
        }) {}
  void lower(StableHloEmitter& em, const Params&) const override {
    lower_expansion(
        em,
        [](FloatOps& f, const std::string& x) {
          return erf_expansion(f, kErfSmallF32, kErfcxNumF32, kErfcxDenF32, 4.0, x);
        },
        [](FloatOps& f, const std::string& x) {
          return erf_expansion(f, kErfSmallF64, kErfcxNumF64, kErfcxDenF64, 6.0, x);
        });
  }
};

// ---- GELU (exact form) and its derivative ------------------------------------
// One primitive each, as PyTorch's and oneDNN's kernels are, so that reverse mode keeps x
// alone for the backward pass rather than the four intermediates of the composition
// 0.5 x (1 + erf(x / sqrt 2)). gelu computes that composition's ops in the same order and
// precision, so its bits are the composition's (in f32 and f64; bf16 rounds once).
constexpr double kInvSqrt2Pi = 0.398942280401432677940;  // 1 / sqrt(2 pi)

struct Gelu {
  template <class T>
  T operator()(T v) const {
    const T e = Erf{}(static_cast<T>(v * static_cast<T>(M_SQRT1_2)));
    return static_cast<T>(static_cast<T>(0.5) * v) * static_cast<T>(T{1} + e);
  }
};

// d gelu(x) = Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi).
// In f32 the one exp(-a^2) serves erf and phi (erf_f32_given: the same bits as erf_f32).
struct GeluGrad {
  template <class T>
  T operator()(T v) const {
    const T a = static_cast<T>(v * static_cast<T>(M_SQRT1_2));
    const T e = Exp{}(static_cast<T>(-(a * a)));
    T erf_a;
    if constexpr (std::is_same_v<T, float>)
      erf_a = erf_f32_given(a, e);
    else
      erf_a = Erf{}(a);
    const T cdf = static_cast<T>(static_cast<T>(0.5) * static_cast<T>(T{1} + erf_a));
    const T pdf = static_cast<T>(e * static_cast<T>(kInvSqrt2Pi));
    return static_cast<T>(cdf + static_cast<T>(v * pdf));
  }
};

// Both in one pass (f32): the exp(-a^2) and erf(a) that each computes, once.
DRX_VECTOR_CLONES void gelu_and_grad_loop(const float* x, float* gelu, float* grad, int64_t n) {
  constexpr float k = static_cast<float>(M_SQRT1_2);
  for (int64_t j = 0; j < n; ++j) {
    const float v = x[j];
    const float a = v * k;
    const float e = scalar::exp_f32(-(a * a));
    const float one_plus_erf = 1.0f + erf_f32_given(a, e);
    gelu[j] = (0.5f * v) * one_plus_erf;
    grad[j] = 0.5f * one_plus_erf + v * (e * static_cast<float>(kInvSqrt2Pi));
  }
}

// The same ops as StableHLO, with erf expanded as ErfPrim lowers it.
std::string erf_of(FloatOps& f, const std::string& x, bool f64) {
  return f64 ? erf_expansion(f, kErfSmallF64, kErfcxNumF64, kErfcxDenF64, 6.0, x)
             : erf_expansion(f, kErfSmallF32, kErfcxNumF32, kErfcxDenF32, 4.0, x);
}
std::string gelu_expansion(FloatOps& f, const std::string& x, bool f64) {
  const std::string e = erf_of(f, f.mul(x, f.k(M_SQRT1_2)), f64);
  return f.mul(f.mul(f.k(0.5), x), f.add(f.k(1.0), e));
}
std::string gelu_grad_expansion(FloatOps& f, const std::string& x, bool f64) {
  const std::string a = f.mul(x, f.k(M_SQRT1_2));
  const std::string cdf = f.mul(f.k(0.5), f.add(f.k(1.0), erf_of(f, a, f64)));
  const std::string pdf =
      f.mul(f.op("stablehlo.exponential", f.neg(f.mul(a, a))), f.k(kInvSqrt2Pi));
  return f.add(cdf, f.mul(x, pdf));
}

class GeluPrim : public UnaryPrim<Gelu, Domain::floating> {
 public:
  GeluPrim()
      : UnaryPrim("gelu", "", [](const Value& x, const Value&, const Value& t) {
          return t * emit1(prims::gelu_grad(), {x});
        }) {}
  void lower(StableHloEmitter& em, const Params&) const override {
    lower_expansion(
        em, [](FloatOps& f, const std::string& x) { return gelu_expansion(f, x, false); },
        [](FloatOps& f, const std::string& x) { return gelu_expansion(f, x, true); });
  }
};

// d^2 gelu(x) = phi(x) (2 - x^2).
class GeluGradPrim : public UnaryPrim<GeluGrad, Domain::floating> {
 public:
  GeluGradPrim()
      : UnaryPrim("gelu_grad", "", [](const Value& x, const Value&, const Value& t) {
          return t * ((kInvSqrt2Pi * exp(-0.5 * (x * x))) * (2.0 - x * x));
        }) {}
  void lower(StableHloEmitter& em, const Params&) const override {
    lower_expansion(
        em, [](FloatOps& f, const std::string& x) { return gelu_grad_expansion(f, x, false); },
        [](FloatOps& f, const std::string& x) { return gelu_grad_expansion(f, x, true); });
  }
};

// erf_inv, f32: erf_inv_f32 (drx/ops/erf_inv.h) op for op, so it is bitwise
// the kernel's: both branches of Giles' polynomial, chosen by w < 5.
std::string erf_inv_f32_expansion(FloatOps& f, const std::string& x) {
  const std::string w = f.neg(f.op("stablehlo.log_plus_one", f.mul(f.neg(x), x)));
  const std::string central = f.horner(kErfInvCentral, f.sub(w, f.k(2.5)));
  const std::string tail = f.horner(kErfInvTail, f.sub(f.op("stablehlo.sqrt", w), f.k(3.0)));
  const std::string p = f.select(f.compare("LT", w, f.k(5.0)), central, tail);
  const std::string one = f.compare("EQ", f.op("stablehlo.abs", x), f.k(1.0));
  return f.select(one, f.mul(x, f.k(INFINITY)), f.mul(p, x));
}

// erf_inv, f64: a start from Giles' polynomials evaluated in double (with
// w = -log((1 - a)(1 + a)) for a = |y| >= 0.84, where 1 - a is exact), or,
// where w >= 16 (beyond the range float's polynomial was fitted on), from the
// asymptotic erfc(x) ~ exp(-x^2) / (x sqrt(pi)) solved for x by two fixed-point
// steps; then two Halley steps on erf(x) - a = (x - a) + x q(x^2) (a < 0.84;
// x - a is exact) or on erfc(x) - (1 - a) (a >= 0.84), with f''/f' = -2x:
// x -= u / (1 + x u), u = f / f'. The start is within 4e-4 (relative), so two
// cubically convergent steps leave the rounding of the residual: within 3 ulp
// of erf_inv_f64 on 10^8 sampled points (the residual's rounding, amplified
// by erf_inv's condition number, up to 3 near a = 0.9).
std::string erf_inv_f64_expansion(FloatOps& f, const std::string& y) {
  constexpr double kHalfSqrtPi = 0.886226925452758013649;  // sqrt(pi) / 2
  const std::string a = f.op("stablehlo.abs", y);
  const std::string use_erfc = f.compare("GE", a, f.k(0.84));
  const std::string t = f.sub(f.k(1.0), a);
  const std::string w =
      f.select(use_erfc, f.neg(f.op("stablehlo.log", f.mul(t, f.add(f.k(1.0), a)))),
               f.neg(f.op("stablehlo.log_plus_one", f.mul(f.neg(a), a))));
  const std::string sqrt_w = f.op("stablehlo.sqrt", w);
  const std::string central = f.mul(f.horner(kErfInvCentral, f.sub(w, f.k(2.5))), a);
  const std::string tail = f.mul(f.horner(kErfInvTail, f.sub(sqrt_w, f.k(3.0))), a);
  // x^2 = w - log(x sqrt(pi) / 2) - 1 / (2 x^2) + ..., from x = sqrt(w).
  const std::string z1 =
      f.op("stablehlo.sqrt", f.sub(w, f.op("stablehlo.log", f.mul(sqrt_w, f.k(kHalfSqrtPi)))));
  const std::string z2 =
      f.op("stablehlo.sqrt", f.sub(f.sub(w, f.op("stablehlo.log", f.mul(z1, f.k(kHalfSqrtPi)))),
                                   f.div(f.k(0.5), f.mul(z1, z1))));
  std::string x = f.select(f.compare("LT", w, f.k(5.0)), central,
                           f.select(f.compare("LT", w, f.k(16.0)), tail, z2));
  for (int step = 0; step < 2; ++step) {
    const std::string xx = f.mul(x, x);
    const std::string ex = f.op("stablehlo.exponential", xx);
    // (erf(x) - a) / erf'(x), erf'(x) = exp(-x^2) / (sqrt(pi) / 2)
    const std::string u_erf = f.mul(
        f.mul(f.add(f.sub(x, a), f.mul(x, f.horner(kErfSmallF64, xx))), f.k(kHalfSqrtPi)), ex);
    // (erfc(x) - t) / erfc'(x) = (t exp(x^2) - erfcx(x)) sqrt(pi) / 2
    const std::string u_erfc =
        f.mul(f.sub(f.mul(t, ex), erfcx(f, kErfcxNumF64, kErfcxDenF64, x)), f.k(kHalfSqrtPi));
    const std::string u = f.select(use_erfc, u_erfc, u_erf);
    x = f.sub(x, f.div(u, f.add(f.k(1.0), f.mul(x, u))));
  }
  // As erf_inv_f64: -x for y < 0 (so erf_inv(-0) = +0), y * inf at |y| = 1.
  const std::string r = f.select(f.compare("LT", y, f.k(0.0)), f.neg(x), x);
  return f.select(f.compare("EQ", a, f.k(1.0)), f.mul(y, f.k(INFINITY)), r);
}

class ErfInvPrim : public UnaryPrim<ErfInv, Domain::floating> {
 public:
  // d erfinv(x) = sqrt(pi)/2 exp(erfinv(x)^2)
  ErfInvPrim()
      : UnaryPrim("erf_inv", "", [](const Value&, const Value& y, const Value& t) {
          return t * ((1.0 / M_2_SQRTPI) * exp(y * y));
        }) {}
  void lower(StableHloEmitter& em, const Params&) const override {
    lower_expansion(em, erf_inv_f32_expansion, erf_inv_f64_expansion);
  }
};

}  // namespace

DRX_PRIMITIVE_FAMILY(elementwise_unary) {
  registry.add(prims::neg());
  registry.add(prims::exp());
  registry.add(prims::log());
  registry.add(prims::log1p());
  registry.add(prims::tanh());
  registry.add(prims::logistic());
  registry.add(prims::sqrt());
  registry.add(prims::rsqrt());
  registry.add(prims::abs());
  registry.add(prims::sign());
  registry.add(prims::sin());
  registry.add(prims::erf());
  registry.add(prims::erf_inv());
  registry.add(prims::gelu());
  registry.add(prims::gelu_grad());
  registry.add(prims::cbrt());
  registry.add(prims::expm1());
  registry.add(prims::round_away());
  registry.add(prims::floor());
  registry.add(prims::ceil());
  registry.add(prims::round());
  registry.add(prims::cos());
}

}  // namespace elementwise

}  // namespace drx

namespace drx::prims {
using namespace elementwise;  // the primitive classes, their scalar functions and rules

const Primitive& neg() {
  static const UnaryPrim<Neg, Domain::numeric> p(
      "neg", "stablehlo.negate", [](const Value&, const Value&, const Value& t) { return -t; });
  return p;
}

const Primitive& exp() {
  static const UnaryPrim<Exp, Domain::floating> p(
      "exp", "stablehlo.exponential",
      [](const Value&, const Value& y, const Value& t) { return t * y; });
  return p;
}

const Primitive& log() {
  static const UnaryPrim<Log, Domain::floating> p(
      "log", "stablehlo.log", [](const Value& x, const Value&, const Value& t) { return t / x; });
  return p;
}

const Primitive& log1p() {
  static const UnaryPrim<Log1p, Domain::floating> p(
      "log1p", "stablehlo.log_plus_one",
      [](const Value& x, const Value&, const Value& t) { return t / (1.0 + x); });
  return p;
}

const Primitive& tanh() {
  static const UnaryPrim<Tanh, Domain::floating> p(
      "tanh", "stablehlo.tanh",
      [](const Value&, const Value& y, const Value& t) { return t * (1.0 - y * y); });
  return p;
}

const Primitive& logistic() {
  static const UnaryPrim<Logistic, Domain::floating> p(
      "logistic", "stablehlo.logistic",
      [](const Value&, const Value& y, const Value& t) { return t * (y * (1.0 - y)); });
  return p;
}

const Primitive& sqrt() {
  static const UnaryPrim<Sqrt, Domain::floating> p(
      "sqrt", "stablehlo.sqrt",
      [](const Value&, const Value& y, const Value& t) { return t * (0.5 / y); });
  return p;
}

// d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y / x
const Primitive& rsqrt() {
  static const UnaryPrim<Rsqrt, Domain::floating> p(
      "rsqrt", "stablehlo.rsqrt",
      [](const Value& x, const Value& y, const Value& t) { return t * (-0.5 * y / x); });
  return p;
}

const Primitive& abs() {
  static const UnaryPrim<Abs, Domain::numeric> p(
      "abs", "stablehlo.abs",
      [](const Value& x, const Value&, const Value& t) { return t * sign(x); });
  return p;
}

const Primitive& sign() {
  static const UnaryPrim<Sign, Domain::numeric> p("sign", "stablehlo.sign", nullptr);
  return p;
}

const Primitive& sin() {
  static const UnaryPrim<Sin, Domain::floating> p(
      "sin", "stablehlo.sine",
      [](const Value& x, const Value&, const Value& t) { return t * cos(x); });
  return p;
}

const Primitive& erf() {
  static const ErfPrim p;
  return p;
}

const Primitive& erf_inv() {
  static const ErfInvPrim p;
  return p;
}

const Primitive& gelu() {
  static const GeluPrim p;
  return p;
}

const Primitive& gelu_grad() {
  static const GeluGradPrim p;
  return p;
}

void gelu_and_grad(const float* x, float* gelu, float* grad, int64_t n) {
  gelu_and_grad_loop(x, gelu, grad, n);
}

// d cbrt(x) = 1 / (3 cbrt(x)^2)
const Primitive& cbrt() {
  static const UnaryPrim<Cbrt, Domain::floating> p(
      "cbrt", "stablehlo.cbrt",
      [](const Value&, const Value& y, const Value& t) { return t / (3.0 * y * y); });
  return p;
}

const Primitive& expm1() {
  static const UnaryPrim<Expm1, Domain::floating> p(
      "expm1", "stablehlo.exponential_minus_one",
      [](const Value&, const Value& y, const Value& t) { return t * (y + 1.0); });
  return p;
}

// Rounding is piecewise constant: the derivative is zero.
const Primitive& round_away() {
  static const UnaryPrim<RoundHalfAway, Domain::floating> p("round_away",
                                                            "stablehlo.round_nearest_afz", nullptr);
  return p;
}

const Primitive& floor() {
  static const UnaryPrim<Floor, Domain::floating> p("floor", "stablehlo.floor", nullptr);
  return p;
}

const Primitive& ceil() {
  static const UnaryPrim<Ceil, Domain::floating> p("ceil", "stablehlo.ceil", nullptr);
  return p;
}

const Primitive& round() {
  static const UnaryPrim<RoundHalfEven, Domain::floating> p("round", "stablehlo.round_nearest_even",
                                                            nullptr);
  return p;
}

const Primitive& cos() {
  static const UnaryPrim<Cos, Domain::floating> p(
      "cos", "stablehlo.cosine",
      [](const Value& x, const Value&, const Value& t) { return -(t * sin(x)); });
  return p;
}

}  // namespace drx::prims
