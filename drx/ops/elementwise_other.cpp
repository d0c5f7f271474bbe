// Comparisons, select, convert and stop_gradient: the elementwise primitives
// whose output dtype or derivative is not simply that of their operands.
#include <map>

#include "drx/array/half.h"
#include "drx/core/lowering.h"
#include "drx/ops/elementwise_kernels.h"
#include "drx/ops/no_derivative.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

namespace drx::elementwise {
namespace {

// Comparisons output bool and have no derivative (piecewise constant).
template <class K, Domain D>
class ComparePrim : public Primitive {
 public:
  explicit ComparePrim(std::string name) : Primitive(std::move(name)) {}
  void lower(StableHloEmitter& em, const Params&) const override {
    static const std::map<std::string, std::string> kDirection = {
        {"less", "LT"},          {"less_equal", "LE"}, {"greater", "GT"},
        {"greater_equal", "GE"}, {"equal", "EQ"},      {"not_equal", "NE"}};
    em.set_results({emit_compare(em, kDirection.at(name()), em.operand(0), em.operand(1),
                                 em.operand_type(0))});
  }
  const ScalarKernel* scalar_kernel() const override { return &kernel_; }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    check_arity(name(), ins, 2);
    if (ins[0].dtype != ins[1].dtype || ins[0].shape != ins[1].shape)
      throw TypeError(name() + ": operands must have the same dtype and shape, got " +
                      types_str(ins) + " (the public drx::" + name() +
                      " broadcasts shapes; convert dtypes with drx::astype)");
    if (!accepts(D, ins[0].dtype))
      throw TypeError(name() + ": expected " + domain_str(D) + ", got " + types_str(ins));
    return {Type(DType::bool_, ins[0].shape, ins[0].placement)};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    Array out(DType::bool_, ins[0].shape());
    dispatch<D>(ins[0].dtype(), [&](auto t) {
      using T = decltype(t);
      binary_loop<T, uint8_t>(ins[0], ins[1], out,
                              [](T a, T b) { return static_cast<uint8_t>(K{}(a, b) ? 1 : 0); });
    });
    return {out};
  }

  MaybeValues jvp(const Values&, const MaybeValues&, const Values&, const Params&) const override {
    return {std::nullopt};
  }
  MaybeValues vjp(const Values&, const Values&, const MaybeValues&, const Params&) const override {
    return {std::nullopt, std::nullopt};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& params) const override {
    Values vs;
    bool batched = align_batched(ins, batch_size, vs);
    return {{emit1(*this, vs, params), batched}};
  }

 private:
  inline static const ScalarKernel kernel_ = ScalarKernel::compare<K>();
};

// select(pred, on_true, on_false): pred ? on_true : on_false, elementwise.
class SelectPrim : public Primitive {
 public:
  SelectPrim() : Primitive("select") {}
  void lower(StableHloEmitter& em, const Params&) const override {
    em.set_results({em.emit1("stablehlo.select", {em.operand(0), em.operand(1), em.operand(2)}, {},
                             em.result_type(0))});
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    check_arity(name(), ins, 3);
    if (ins[0].dtype != DType::bool_)
      throw TypeError("select: the predicate must be bool, got " + types_str(ins) +
                      " (compare with drx::less etc. or convert with drx::astype)");
    if (ins[1].dtype != ins[2].dtype)
      throw TypeError("select: both branches must have the same dtype, got " + types_str(ins));
    if (ins[0].shape != ins[1].shape || ins[1].shape != ins[2].shape)
      throw TypeError("select: predicate and branches must have the same shape, got " +
                      types_str(ins) + " (the public drx::where broadcasts them)");
    return {Type(ins[1].dtype, ins[1].shape, ins[0].placement)};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    Array out(ins[1].dtype(), ins[1].shape());
    const uint8_t* pred = ins[0].data<uint8_t>();
    dispatch_dtype(out.dtype(), [&](auto t) {
      using T = decltype(t);
      const T* a = ins[1].data<T>();
      const T* b = ins[2].data<T>();
      T* o = out.data<T>();
      const int64_t n = out.size();
      for (int64_t i = 0; i < n; ++i) o[i] = pred[i] ? a[i] : b[i];
    });
    return {out};
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                  const Params&) const override {
    const MaybeValue& tt = tangents[1];
    const MaybeValue& tf = tangents[2];
    if ((!tt && !tf) || !is_floating(outs[0].dtype())) return {std::nullopt};
    return {where(primals[0], tt ? *tt : full_like(*tf, 0.0), tf ? *tf : full_like(*tt, 0.0))};
  }

  MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& cts,
                  const Params&) const override {
    if (!cts[0] || !is_floating(outs[0].dtype())) return {std::nullopt, std::nullopt, std::nullopt};
    Value zero = full_like(*cts[0], 0.0);
    return {std::nullopt, where(primals[0], *cts[0], zero), where(primals[0], zero, *cts[0])};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& params) const override {
    Values vs;
    bool batched = align_batched(ins, batch_size, vs);
    return {{emit1(*this, vs, params), batched}};
  }
};

// convert[dtype]: elementwise dtype conversion (see convert_element).
class ConvertPrim : public Primitive {
 public:
  ConvertPrim() : Primitive("convert") {}
  // stablehlo.convert leaves float -> integer overflow to the implementation;
  // drx's saturation (NaN to 0) is what XLA's CPU and GPU backends do.
  void lower(StableHloEmitter& em, const Params&) const override {
    em.set_results({em.emit1("stablehlo.convert", {em.operand(0)}, {}, em.result_type(0))});
  }
  // A no-op when the result has the operand's type (the caller checks).
  std::optional<size_t> identity_operand(const std::vector<std::optional<double>>&,
                                         const Params&) const override {
    return 0;
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    return {Type(p.get_dtype("dtype", name()), ins[0].shape, ins[0].placement)};
  }

  // bf16 and f16 convert straight, rounded once (an f32 detour would round
  // f64 twice).
  bool computes_half_precision() const override { return true; }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Array& x = ins[0];
    const DType to = p.get_dtype("dtype", name());
    if (is_storage_format(x.dtype()) || is_storage_format(to)) return {convert_array(x, to)};
    Array out(to, x.shape());
    dispatch_dtype(x.dtype(), [&](auto s) {
      using S = decltype(s);
      dispatch_dtype(out.dtype(), [&](auto d) {
        using D = decltype(d);
        unary_loop<S, D>(x, out, [](S v) { return convert_element<D, S>(v); });
      });
    });
    return {out};
  }

  // Only a float -> float conversion carries a derivative; to or from an
  // integer or bool the result is piecewise constant.
  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                  const Params&) const override {
    if (!tangents[0] || !is_floating(primals[0].dtype()) || !is_floating(outs[0].dtype()))
      return {std::nullopt};
    return {astype(*tangents[0], outs[0].dtype())};
  }
  MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& cts,
                  const Params&) const override {
    if (!cts[0] || !is_floating(primals[0].dtype()) || !is_floating(outs[0].dtype()))
      return {std::nullopt};
    return {astype(*cts[0], primals[0].dtype())};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& params) const override {
    return {{emit1(*this, {ins[0].value}, params), ins[0].batched}};
  }
};

class StopGradientPrim : public NoDerivativeUnary {
 public:
  StopGradientPrim() : NoDerivativeUnary("stop_gradient") {}
  // Values pass through; a StableHLO program is not differentiated further.
  void lower(StableHloEmitter& em, const Params&) const override {
    em.set_results({em.operand(0)});
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    check_arity(name(), ins, 1);
    return {ins[0]};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    return {ins[0]};
  }
};

}  // namespace

DRX_PRIMITIVE_FAMILY(elementwise_other) {
  registry.add(prims::less());
  registry.add(prims::less_equal());
  registry.add(prims::greater());
  registry.add(prims::greater_equal());
  registry.add(prims::equal());
  registry.add(prims::not_equal());
  registry.add(prims::select());
  registry.add(prims::convert());
  registry.add(prims::stop_gradient());
}

}  // namespace drx::elementwise

namespace drx::prims {
const Primitive& select() {
  static const elementwise::SelectPrim p;
  return p;
}
const Primitive& convert() {
  static const elementwise::ConvertPrim p;
  return p;
}
const Primitive& stop_gradient() {
  static const elementwise::StopGradientPrim p;
  return p;
}
}  // namespace drx::prims

namespace drx::prims {
using namespace elementwise;  // the primitive classes, their scalar functions and rules

const Primitive& less() {
  static const ComparePrim<Less, Domain::numeric> p("less");
  return p;
}

const Primitive& less_equal() {
  static const ComparePrim<LessEqual, Domain::numeric> p("less_equal");
  return p;
}

const Primitive& greater() {
  static const ComparePrim<Greater, Domain::numeric> p("greater");
  return p;
}

const Primitive& greater_equal() {
  static const ComparePrim<GreaterEqual, Domain::numeric> p("greater_equal");
  return p;
}

const Primitive& equal() {
  static const ComparePrim<Equal, Domain::any> p("equal");
  return p;
}

const Primitive& not_equal() {
  static const ComparePrim<NotEqual, Domain::any> p("not_equal");
  return p;
}

}  // namespace drx::prims
