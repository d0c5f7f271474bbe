// Binary arithmetic primitives: add sub mul div pow maximum minimum remainder.
//
// At the primitive level both operands have one type (dtype and shape); the
// public ops (elementwise_ops.cpp) broadcast before they get here, so the
// rules never need to sum a cotangent back down to a smaller shape.
#include <cmath>

#include "drx/core/lowering.h"
#include "drx/ops/elementwise_kernels.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

namespace drx::elementwise {
namespace {

// The partial derivative of op(a, b) with respect to operand `i` (0 or 1),
// applied to t (a tangent or a cotangent: the Jacobian is diagonal).
using Partial = Value (*)(int i, const Value& a, const Value& b, const Value& y, const Value& t);

// The constant that leaves the other operand unchanged (x + 0, 1 * x).
struct Neutral {
  std::optional<double> left, right;
};

template <class K>
class BinaryPrim : public Primitive {
 public:
  BinaryPrim(std::string name, std::string stablehlo, Partial partial, Neutral neutral = {})
      : Primitive(std::move(name)),
        stablehlo_(std::move(stablehlo)),
        partial_(partial),
        neutral_(neutral) {}

  // One StableHLO elementwise op on the two operands, whose types already agree.
  void lower(StableHloEmitter& em, const Params&) const override {
    em.set_results(em.emit(stablehlo_, {em.operand(0), em.operand(1)}, {}, {em.result_type(0)}));
  }

  const ScalarKernel* scalar_kernel() const override { return &kernel_; }

  std::optional<size_t> identity_operand(const std::vector<std::optional<double>>& splats,
                                         const Params&) const override {
    if (neutral_.right && splats[1] == neutral_.right) return 0;
    if (neutral_.left && splats[0] == neutral_.left) return 1;
    return std::nullopt;
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    check_arity(name(), ins, 2);
    if (ins[0].dtype != ins[1].dtype || ins[0].shape != ins[1].shape)
      throw TypeError(name() + ": operands must have the same dtype and shape, got " +
                      types_str(ins) + " (the public drx::" + name() +
                      " broadcasts shapes; convert dtypes with drx::astype)");
    if (!accepts(Domain::numeric, ins[0].dtype))
      throw TypeError(name() + ": expected numeric operands (f32, f64, i32, i64, u32 or u8), got " +
                      types_str(ins));
    return {ins[0]};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    Array out(ins[0].dtype(), ins[0].shape());
    dispatch<Domain::numeric>(ins[0].dtype(), [&](auto t) {
      using T = decltype(t);
      binary_loop<T, T>(ins[0], ins[1], out, [](T a, T b) { return static_cast<T>(K{}(a, b)); });
    });
    return {out};
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                  const Params&) const override {
    if (!is_floating(outs[0].dtype())) return {std::nullopt};
    MaybeValue result;
    for (int i = 0; i < 2; ++i) {
      const MaybeValue& t = tangents[static_cast<size_t>(i)];
      if (!t) continue;
      Value d = partial_(i, primals[0], primals[1], outs[0], *t);
      result = result ? add(*result, d) : d;
    }
    return {result};
  }

  MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& cts,
                  const Params&) const override {
    if (!cts[0] || !is_floating(outs[0].dtype())) return {std::nullopt, std::nullopt};
    return {partial_(0, primals[0], primals[1], outs[0], *cts[0]),
            partial_(1, primals[0], primals[1], outs[0], *cts[0])};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& params) const override {
    Values vs;
    bool batched = align_batched(ins, batch_size, vs);
    return {{emit1(*this, vs, params), batched}};
  }

 private:
  std::string stablehlo_;
  Partial partial_;
  Neutral neutral_;
  inline static const ScalarKernel kernel_ = ScalarKernel::binary<K>();
};

// The share of the gradient that max/min routes to `a`: 1 where a alone is
// the result, 0 where b alone is, and 1/2 on ties (as JAX does, so that
// maximum(x, x) has derivative 1 and symmetric uses stay symmetric).
Value share_of_a(const Value& wins, const Value& a, const Value& b) {
  DType dt = a.dtype();
  return astype(wins, dt) + 0.5 * astype(equal(a, b), dt);
}

Value max_partial(int i, const Value& a, const Value& b, const Value&, const Value& t) {
  Value share = share_of_a(greater(a, b), a, b);
  return t * (i == 0 ? share : 1.0 - share);
}

Value min_partial(int i, const Value& a, const Value& b, const Value&, const Value& t) {
  Value share = share_of_a(less(a, b), a, b);
  return t * (i == 0 ? share : 1.0 - share);
}

// As JAX: d/da = b a^(b-1), taken as 0 where b == 0 (so 0^0 does not give
// 0 * inf); d/db = log(a) a^b with log(0) replaced by 0 (the limit where the
// a^b factor is 0).
Value pow_partial(int i, const Value& a, const Value& b, const Value& y, const Value& t) {
  if (i == 0) {
    Value zero = full_like(b, 0.0);
    Value safe_b = where(equal(b, zero), full_like(b, 1.0), b);
    return t * where(equal(b, zero), zero, safe_b * pow(a, b - 1.0));
  }
  Value safe_a = where(equal(a, full_like(a, 0.0)), full_like(a, 1.0), a);
  return t * (log(safe_a) * y);
}

// r = a - b trunc(a / b), and trunc(a / b) = (a - r) / b: dr/da = 1, dr/db = -trunc(a / b).
Value rem_partial(int i, const Value& a, const Value& b, const Value& y, const Value& t) {
  return i == 0 ? t : -(t * ((a - y) / b));
}

// d atan2(a, b) = (b da - a db) / (a^2 + b^2)
Value atan2_partial(int i, const Value& a, const Value& b, const Value&, const Value& t) {
  Value r2 = a * a + b * b;
  return i == 0 ? t * (b / r2) : -(t * (a / r2));
}

Value add_partial(int, const Value&, const Value&, const Value&, const Value& t) { return t; }
Value sub_partial(int i, const Value&, const Value&, const Value&, const Value& t) {
  return i == 0 ? t : -t;
}
Value mul_partial(int i, const Value& a, const Value& b, const Value&, const Value& t) {
  return t * (i == 0 ? b : a);
}
// d(a/b) = ta / b - tb a / b^2 = (ta - tb y) / b
Value div_partial(int i, const Value&, const Value& b, const Value& y, const Value& t) {
  return i == 0 ? t / b : -(t * y) / b;
}

}  // namespace

DRX_PRIMITIVE_FAMILY(elementwise_binary) {
  registry.add(prims::add());
  registry.add(prims::sub());
  registry.add(prims::mul());
  registry.add(prims::div());
  registry.add(prims::pow());
  registry.add(prims::maximum());
  registry.add(prims::minimum());
  registry.add(prims::remainder());
  registry.add(prims::atan2());
}

}  // namespace drx::elementwise

namespace drx::prims {
using elementwise::BinaryPrim;
using elementwise::Neutral;

const Primitive& add() {
  static const BinaryPrim<scalar::Add> p("add", "stablehlo.add", elementwise::add_partial,
                                         Neutral{0.0, 0.0});
  return p;
}
const Primitive& sub() {
  static const BinaryPrim<scalar::Sub> p("sub", "stablehlo.subtract", elementwise::sub_partial,
                                         Neutral{{}, 0.0});
  return p;
}
const Primitive& mul() {
  static const BinaryPrim<scalar::Mul> p("mul", "stablehlo.multiply", elementwise::mul_partial,
                                         Neutral{1.0, 1.0});
  return p;
}
const Primitive& div() {
  static const BinaryPrim<scalar::Div> p("div", "stablehlo.divide", elementwise::div_partial,
                                         Neutral{{}, 1.0});
  return p;
}

}  // namespace drx::prims

namespace drx::prims {
using namespace elementwise;  // the primitive classes, their scalar functions and rules

const Primitive& pow() {
  static const BinaryPrim<Pow> p("pow", "stablehlo.power", pow_partial);
  return p;
}

const Primitive& maximum() {
  static const BinaryPrim<Max> p("maximum", "stablehlo.maximum", max_partial);
  return p;
}

const Primitive& minimum() {
  static const BinaryPrim<Min> p("minimum", "stablehlo.minimum", min_partial);
  return p;
}

const Primitive& remainder() {
  static const BinaryPrim<Rem> p("remainder", "stablehlo.remainder", rem_partial);
  return p;
}

const Primitive& atan2() {
  static const BinaryPrim<Atan2> p("atan2", "stablehlo.atan2", atan2_partial);
  return p;
}

}  // namespace drx::prims
