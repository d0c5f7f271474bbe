// is_finite: the bool predicate "neither infinite nor NaN" (StableHLO's
// is_finite), elementwise on floats. Piecewise constant: no derivative.
#include <cmath>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/no_derivative.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_is_finite);

namespace drx {
namespace {

class IsFinitePrim : public NoDerivativeUnary {
 public:
  IsFinitePrim() : NoDerivativeUnary("is_finite") {}
  void lower(StableHloEmitter& em, const Params&) const override {
    em.set_results({em.emit1("stablehlo.is_finite", {em.operand(0)}, {}, em.result_type(0))});
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    check_arity(name(), ins, 1);
    if (!is_floating(ins[0].dtype))
      throw TypeError("is_finite: expected a floating-point operand, got " + ins[0].str());
    return {Type(DType::bool_, ins[0].shape, ins[0].placement)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    const Array& x = ins[0];
    Array out(DType::bool_, x.shape());
    auto* o = out.data<uint8_t>();
    for (int64_t i = 0; i < x.size(); ++i) o[i] = std::isfinite(x.element_as_double(i)) ? 1 : 0;
    return {out};
  }
};

}  // namespace

namespace prims {
const Primitive& is_finite() {
  static const IsFinitePrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(is_finite) { registry.add(prims::is_finite()); }

DRX_PUBLIC_OP("is_finite", "(x: Value) -> Value (bool)", "Elementwise: neither inf nor NaN.");
Value is_finite(const Value& x) { return emit1(prims::is_finite(), {x}); }

}  // namespace drx
