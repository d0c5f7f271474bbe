// softmax along one axis as one primitive. As a composite (max, shift, exp,
// sum, divide) it costs five passes forward and more backward, each with an
// intermediate the size of its operand; attention runs it on every score
// matrix. One primitive runs one loop per row (axis_loops::softmax), bitwise
// the composite's, and its derivative rules need only its own result y:
//   jvp: y * (t - sum(y * t))        vjp: y * (g - sum(g * y))
// (sums along the axis, kept as a size-1 dim), both in primitives, so every
// order of derivative follows.
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/ops/axis_loops.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

namespace drx {
namespace {

// y * (t - sum(y * t)) along the axis: the jvp and (y symmetric) the vjp.
Value softmax_linear(const Value& y, const Value& t, int64_t axis) {
  return y * (t - sum(y * t, {axis}, /*keepdims=*/true));
}

class SoftmaxPrim : public Primitive {
 public:
  SoftmaxPrim() : Primitive("softmax") {}

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const Type& x = ins[0];
    const int64_t axis = p.get_int("axis", name());
    if (!is_floating(x.dtype))
      throw TypeError("softmax: operand " + x.str() +
                      " is not floating point; convert it first with astype(x, f32)");
    if (axis < 0 || axis >= x.ndim())
      throw TypeError("softmax: axis " + std::to_string(axis) + " is out of range for operand " +
                      x.str() + " (expected 0 <= axis < " + std::to_string(x.ndim()) + ")");
    return {x};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Array& x = ins[0];
    Array out(x.dtype(), x.shape());
    const axis_loops::AxisLayout l = axis_loops::layout_along(x.shape(), p.get_int("axis", name()));
    if (x.dtype() == DType::f64)
      axis_loops::softmax<double>(x.data<double>(), l, out.data<double>());
    else
      axis_loops::softmax<float>(x.data<float>(), l, out.data<float>());
    return {out};
  }

  MaybeValues jvp(const Values&, const MaybeValues& t, const Values& outs,
                  const Params& p) const override {
    if (!t[0]) return {std::nullopt};
    return {softmax_linear(outs[0], *t[0], p.get_int("axis", name()))};
  }

  MaybeValues vjp(const Values&, const Values& outs, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0]) return {std::nullopt};
    return {softmax_linear(outs[0], *ct[0], p.get_int("axis", name()))};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    Params q = p;
    if (ins[0].batched) q.set("axis", p.get_int("axis", name()) + 1);
    return {{emit1(*this, {ins[0].value}, q), ins[0].batched}};
  }

  // The composite, whose StableHLO is plain reductions and arithmetic.
  void lower(StableHloEmitter& em, const Params& p) const override {
    const int64_t axis = p.get_int("axis", name());
    const Traced composite = trace_function(
        [axis](const std::vector<Value>& x) -> std::vector<Value> {
          return {detail::softmax_composite(x[0], axis)};
        },
        {em.operand_type(0)}, "softmax");
    em.set_results(em.inline_program(composite.program, {em.operand(0)}));
  }
};

}  // namespace

namespace prims {
const Primitive& softmax() {
  static const SoftmaxPrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(softmax) { registry.add(prims::softmax()); }

}  // namespace drx
