// Unary elementwise primitives, and the helpers the whole family shares.
//
// Every elementwise op has a diagonal Jacobian, so one "derivative applied to
// a tangent" function serves both jvp (applied to t) and vjp (applied to the
// cotangent).
#include <cmath>

#include "drx/core/lowering.h"
#include "drx/ops/elementwise_kernels.h"
#include "drx/ops/erf_inv.h"
#include "drx/ops/ops.h"

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

// The error function, as the GELU activation and Gaussian CDFs need it.
struct Erf {
  template <class T>
  T operator()(T v) const {
    return std::erf(v);
  }
};

template <class K, Domain D>
class UnaryPrim : public Primitive {
 public:
  // `stablehlo`: the StableHLO op of the same semantics ("" where the spec
  // has none, e.g. erf: the lowering then throws).
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

}  // namespace

DRX_PRIMITIVE_FAMILY(elementwise_unary) {
  using D = Domain;
  registry.add(std::make_unique<UnaryPrim<Neg, D::numeric>>(
      "neg", "stablehlo.negate", [](const Value&, const Value&, const Value& t) { return -t; }));
  registry.add(std::make_unique<UnaryPrim<Exp, D::floating>>(
      "exp", "stablehlo.exponential",
      [](const Value&, const Value& y, const Value& t) { return t * y; }));
  registry.add(std::make_unique<UnaryPrim<Log, D::floating>>(
      "log", "stablehlo.log", [](const Value& x, const Value&, const Value& t) { return t / x; }));
  registry.add(std::make_unique<UnaryPrim<Log1p, D::floating>>(
      "log1p", "stablehlo.log_plus_one",
      [](const Value& x, const Value&, const Value& t) { return t / (1.0 + x); }));
  registry.add(std::make_unique<UnaryPrim<Tanh, D::floating>>(
      "tanh", "stablehlo.tanh",
      [](const Value&, const Value& y, const Value& t) { return t * (1.0 - y * y); }));
  registry.add(std::make_unique<UnaryPrim<Logistic, D::floating>>(
      "logistic", "stablehlo.logistic",
      [](const Value&, const Value& y, const Value& t) { return t * (y * (1.0 - y)); }));
  registry.add(std::make_unique<UnaryPrim<Sqrt, D::floating>>(
      "sqrt", "stablehlo.sqrt",
      [](const Value&, const Value& y, const Value& t) { return t * (0.5 / y); }));
  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y / x
  registry.add(std::make_unique<UnaryPrim<Rsqrt, D::floating>>(
      "rsqrt", "stablehlo.rsqrt",
      [](const Value& x, const Value& y, const Value& t) { return t * (-0.5 * y / x); }));
  registry.add(std::make_unique<UnaryPrim<Abs, D::numeric>>(
      "abs", "stablehlo.abs",
      [](const Value& x, const Value&, const Value& t) { return t * sign(x); }));
  registry.add(std::make_unique<UnaryPrim<Sign, D::numeric>>("sign", "stablehlo.sign", nullptr));
  registry.add(std::make_unique<UnaryPrim<Sin, D::floating>>(
      "sin", "stablehlo.sine",
      [](const Value& x, const Value&, const Value& t) { return t * cos(x); }));
  registry.add(std::make_unique<UnaryPrim<Erf, D::floating>>(
      "erf", "", [](const Value& x, const Value&, const Value& t) {
        return t * (M_2_SQRTPI * exp(-(x * x)));  // d erf(x) = 2/sqrt(pi) exp(-x^2)
      }));
  // d erfinv(x) = sqrt(pi)/2 exp(erfinv(x)^2)
  registry.add(std::make_unique<UnaryPrim<ErfInv, D::floating>>(
      "erf_inv", "", [](const Value&, const Value& y, const Value& t) {
        return t * ((1.0 / M_2_SQRTPI) * exp(y * y));
      }));
  // d cbrt(x) = 1 / (3 cbrt(x)^2)
  registry.add(std::make_unique<UnaryPrim<Cbrt, D::floating>>(
      "cbrt", "stablehlo.cbrt",
      [](const Value&, const Value& y, const Value& t) { return t / (3.0 * y * y); }));
  registry.add(std::make_unique<UnaryPrim<Expm1, D::floating>>(
      "expm1", "stablehlo.exponential_minus_one",
      [](const Value&, const Value& y, const Value& t) { return t * (y + 1.0); }));
  // Piecewise constant: the derivative is zero.
  registry.add(std::make_unique<UnaryPrim<RoundHalfAway, D::floating>>(
      "round_away", "stablehlo.round_nearest_afz", nullptr));
  registry.add(
      std::make_unique<UnaryPrim<Floor, D::floating>>("floor", "stablehlo.floor", nullptr));
  registry.add(std::make_unique<UnaryPrim<Ceil, D::floating>>("ceil", "stablehlo.ceil", nullptr));
  registry.add(std::make_unique<UnaryPrim<RoundHalfEven, D::floating>>(
      "round", "stablehlo.round_nearest_even", nullptr));
  registry.add(std::make_unique<UnaryPrim<Cos, D::floating>>(
      "cos", "stablehlo.cosine",
      [](const Value& x, const Value&, const Value& t) { return -(t * sin(x)); }));
}

}  // namespace elementwise

}  // namespace drx
