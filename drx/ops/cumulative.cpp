// Cumulative primitives: cumsum, the running sum along one axis.
//
// cumsum is linear, so its rules are cumsums too: the tangent's cumsum, and
// the cotangent's cumsum in the other direction (the transpose of a lower
// triangular matrix of ones is an upper triangular one).
#include "drx/core/primitive.h"
#include "drx/ops/axis_loops.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

namespace drx {
namespace {

// cumsum[axis, reverse](x): y[..., j, ...] = sum of x[..., i, ...] for i <= j
// (for i >= j when reverse). See axis_loops::cumsum for the accumulation.
class CumsumPrim : public Primitive {
 public:
  CumsumPrim() : Primitive("cumsum") {}
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const Type& x = ins[0];
    const int64_t axis = p.get_int("axis", name());
    p.get_int("reverse", name());
    if (axis < 0 || axis >= x.ndim())
      throw TypeError("cumsum: axis " + std::to_string(axis) + " is out of range for operand " +
                      x.str() + " (expected 0 <= axis < " + std::to_string(x.ndim()) + ")");
    if (x.dtype == DType::bool_)
      throw TypeError("cumsum: operand " + x.str() +
                      " is bool; convert it first, e.g. cumsum(astype(x, i32), axis)");
    return {x};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Array& x = ins[0];
    Array out(x.dtype(), x.shape());
    const axis_loops::AxisLayout l = axis_loops::layout_along(x.shape(), p.get_int("axis", name()));
    const bool reverse = p.get_int("reverse", name()) != 0;
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      axis_loops::cumsum<T>(x.data<T>(), l, reverse, out.data<T>());
    });
    return {out};
  }
  MaybeValues jvp(const Values& in, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0] || !is_floating(in[0].dtype())) return {std::nullopt};
    return {emit1(*this, {*t[0]}, p)};
  }
  MaybeValues vjp(const Values& in, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !is_floating(in[0].dtype())) return {std::nullopt};
    Params flipped = p;
    flipped.set("reverse", int64_t{p.get_int("reverse", name()) == 0});
    return {emit1(*this, {*ct[0]}, flipped)};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    Params q = p;
    if (ins[0].batched) q.set("axis", p.get_int("axis", name()) + 1);
    return {{emit1(*this, {ins[0].value}, q), ins[0].batched}};
  }
};

}  // namespace

namespace prims {
const Primitive& cumsum() {
  static const CumsumPrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(cumulative) { registry.add(prims::cumsum()); }

Value cumsum(const Value& x, int64_t axis, bool reverse) {
  if (x.ndim() == 0) throw TypeError("cumsum: operand " + x.type().str() + " is a scalar");
  const int64_t a = normalize_axis(axis, x.ndim(), "cumsum");
  return emit1(prims::cumsum(), {x}, Params{{"axis", a}, {"reverse", int64_t{reverse}}});
}

}  // namespace drx
