// LayerNorm's normalisation over the last axis as one primitive, `layer_norm_normalize`:
// (y, r) with y = (x - mean(x)) * r and r = rsqrt(mean((x - mean(x))^2) + eps), r kept as a
// size-1 last dim. As a composite (two means, a square, rsqrt and three broadcasts) it is
// five passes over x forward and more backward; the transformer runs it twice per layer.
// One primitive runs one loop per block of rows (drx/ops/layer_norm_rows.h), bitwise the
// composite's, and its derivative rules need only its results (c = x - mean(x), n the axis
// length, means along it):
//   jvp: dc = t - mean(t);  dy = r (dc - y mean(y dc));  dr = -r^2 mean(y dc)
//   vjp: g = r (gy - y mean(y gy)) - r^2 gr y / n;  gx = g - mean(g)
// in primitives, so every order of derivative follows. nn::layer_norm scales and shifts y.
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/ops/layer_norm_rows.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

namespace drx {
namespace {

Value mean_last(const Value& x) { return mean(x, {x.ndim() - 1}, /*keepdims=*/true); }

class LayerNormPrim : public Primitive {
 public:
  LayerNormPrim() : Primitive("layer_norm_normalize") {}

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const Type& x = ins[0];
    const double eps = p.get_double("eps", name());
    if (x.dtype != DType::f32 && x.dtype != DType::f64)
      throw TypeError("layer_norm_normalize: operand " + x.str() +
                      " is not f32 or f64 (other floats use the composite nn::layer_norm)");
    if (x.ndim() < 1 || x.shape.back() < 1)
      throw TypeError("layer_norm_normalize: operand " + x.str() +
                      " needs a last axis of at least one element");
    if (!(eps >= 0))
      throw TypeError("layer_norm_normalize: eps " + std::to_string(eps) + " is negative");
    Type r = x;
    r.shape.back() = 1;
    return {x, r};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Array& x = ins[0];
    Shape rs = x.shape();
    rs.back() = 1;
    Array y(x.dtype(), x.shape()), r(x.dtype(), rs);
    const int64_t n = x.shape().back(), rows = x.size() / n;
    const double eps = p.get_double("eps", name());
    if (x.dtype() == DType::f64)
      layer_norm_rows::normalize<double>(x.data<double>(), rows, n, eps, y.data<double>(),
                                         r.data<double>());
    else
      layer_norm_rows::normalize<float>(x.data<float>(), rows, n, eps, y.data<float>(),
                                        r.data<float>());
    return {y, r};
  }

  MaybeValues jvp(const Values&, const MaybeValues& t, const Values& outs,
                  const Params&) const override {
    if (!t[0]) return {std::nullopt, std::nullopt};
    const Value &y = outs[0], &r = outs[1];
    const Value dc = *t[0] - mean_last(*t[0]);
    const Value ydc = mean_last(y * dc);
    return {r * (dc - y * ydc), -(r * r) * ydc};
  }

  MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& ct,
                  const Params&) const override {
    if (!ct[0] && !ct[1]) return {std::nullopt};
    const Value &y = outs[0], &r = outs[1];
    std::optional<Value> g;
    if (ct[0]) g = r * (*ct[0] - y * mean_last(y * *ct[0]));
    if (ct[1]) {
      const double n = static_cast<double>(primals[0].shape().back());
      const Value from_r = (r * r * *ct[1] / n) * y;
      g = g ? *g - from_r : -from_r;
    }
    return {*g - mean_last(*g)};
  }

  // The normalised axis is the last; a batch axis is the first, so it stays in place.
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    const Values out = emit(*this, {ins[0].value}, p);
    return {{out[0], ins[0].batched}, {out[1], ins[0].batched}};
  }

  // The composite, whose StableHLO is plain reductions and arithmetic.
  void lower(StableHloEmitter& em, const Params& p) const override {
    const double eps = p.get_double("eps", name());
    const Traced composite = trace_function(
        [eps](const std::vector<Value>& x) -> std::vector<Value> {
          const Value c = x[0] - mean_last(x[0]);
          const Value r = rsqrt(mean_last(square(c)) + eps);
          return {c * r, r};
        },
        {em.operand_type(0)}, "layer_norm_normalize");
    em.set_results(em.inline_program(composite.program, {em.operand(0)}));
  }
};

}  // namespace

namespace prims {
const Primitive& layer_norm_normalize() {
  static const LayerNormPrim p;
  return p;
}
}  // namespace prims

namespace detail {
Values layer_norm_normalize(const Value& x, double eps) {
  Params p;
  p.set("eps", eps);
  return emit(prims::layer_norm_normalize(), {x}, p);
}
}  // namespace detail

DRX_PRIMITIVE_FAMILY(layer_norm) { registry.add(prims::layer_norm_normalize()); }

}  // namespace drx
