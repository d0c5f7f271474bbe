// Primitives with no inputs: literal constants and iota.
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_constants);

namespace drx {
namespace {

class ConstantPrim : public Primitive {
 public:
  ConstantPrim() : Primitive("constant") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    em.set_results({em.constant(p.get_array("value", name()))});
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (!ins.empty())
      throw TypeError("constant: takes no operands, got " + std::to_string(ins.size()));
    const Array& a = p.get_array("value", name());
    return {Type(a.dtype(), a.shape())};
  }
  std::vector<Array> eval(const std::vector<Array>&, const Params& p) const override {
    return {p.get_array("value", name())};
  }
  MaybeValues jvp(const Values&, const MaybeValues&, const Values&, const Params&) const override {
    return {std::nullopt};
  }
  MaybeValues vjp(const Values&, const Values&, const MaybeValues&, const Params&) const override {
    return {};
  }
  std::vector<Batched> vmap(const std::vector<Batched>&, int64_t, const Params& p) const override {
    return {{constant(p.get_array("value", name())), false}};
  }
};

class IotaPrim : public Primitive {
 public:
  IotaPrim() : Primitive("iota") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    const std::string dim = std::to_string(p.get_int("dimension", name())) + " : i64";
    em.set_results({em.emit1("stablehlo.iota", {}, {{"iota_dimension", dim}}, em.result_type(0))});
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (!ins.empty()) throw TypeError("iota: takes no operands, got " + std::to_string(ins.size()));
    const Shape& shape = p.get_ints("shape", name());
    int64_t dim = p.get_int("dimension", name());
    for (int64_t d : shape)
      if (d < 0) throw TypeError("iota: negative dimension in shape " + shape_str(shape));
    if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
      throw TypeError("iota: dimension " + std::to_string(dim) + " out of range for shape " +
                      shape_str(shape));
    DType dt = p.get_dtype("dtype", name());
    if (dt == DType::bool_) throw TypeError("iota: dtype bool is not numeric");
    return {Type(dt, shape)};
  }
  std::vector<Array> eval(const std::vector<Array>&, const Params& p) const override {
    const Shape& shape = p.get_ints("shape", name());
    int64_t dim = p.get_int("dimension", name());
    Array out(p.get_dtype("dtype", name()), shape);
    std::vector<int64_t> st = strides_of(shape);
    dispatch_dtype(out.dtype(), [&](auto t) {
      using T = decltype(t);
      T* o = out.data<T>();
      for (int64_t i = 0; i < out.size(); ++i) o[i] = static_cast<T>((i / st[dim]) % shape[dim]);
    });
    return {out};
  }
  MaybeValues jvp(const Values&, const MaybeValues&, const Values&, const Params&) const override {
    return {std::nullopt};
  }
  MaybeValues vjp(const Values&, const Values&, const MaybeValues&, const Params&) const override {
    return {};
  }
  std::vector<Batched> vmap(const std::vector<Batched>&, int64_t, const Params& p) const override {
    return {{emit1(*this, {}, p), false}};
  }
};

}  // namespace

namespace prims {
const Primitive& constant() {
  static const ConstantPrim p;
  return p;
}
const Primitive& iota() {
  static const IotaPrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(constants) {
  registry.add(prims::constant());
  registry.add(prims::iota());
}

DRX_PUBLIC_OP("constant", "(value: Array) -> Value", "A constant Value holding a host Array.");
Value constant(const Array& value) {
  const Primitive& p = prims::constant();
  return emit1(p, {}, Params{{"value", value}});
}

DRX_PUBLIC_OP("scalar_like", "(x: Value, v: double) -> Value",
              "A scalar constant of x's dtype (placed like x for a placed x).");
Value scalar_like(const Value& x, double v) {
  const Type& t = x.type();
  if (t.placement.empty()) return constant(full({}, v, t.dtype));
  // A number next to a placed value is a server constant broadcast to every client.
  return full_like(x, v);
}

DRX_PUBLIC_OP("fill", "(shape: Shape, value: double, dtype: DType) -> Value",
              "A scalar of dtype broadcast to shape.");
Value fill(const Shape& shape, double value, DType dtype) {
  Value s = constant(drx::full({}, value, dtype));
  return shape.empty() ? s : broadcast_in_dim(s, shape, {});
}

DRX_PUBLIC_OP("full_like", "(x: Value, value: double) -> Value",
              "x's type (placement included), every element value.");
Value full_like(const Value& x, double value) {
  Type t = x.type();
  Value v = fill(t.shape, value, t.dtype);
  return t.placement.empty() ? v : place(v, t.placement);
}
DRX_PUBLIC_OP("zeros_like", "(x: Value) -> Value", "Zeros of x's type.");
Value zeros_like(const Value& x) { return full_like(x, 0.0); }
DRX_PUBLIC_OP("ones_like", "(x: Value) -> Value", "Ones of x's type.");
Value ones_like(const Value& x) { return full_like(x, 1.0); }

DRX_PUBLIC_OP("iota", "(shape: Shape, dimension: int64, dtype: DType = i32) -> Value",
              "The index along dimension, for an array of shape.");
Value iota(const Shape& shape, int64_t dimension, DType dtype) {
  const Primitive& p = prims::iota();
  return emit1(p, {}, Params{{"shape", shape}, {"dimension", dimension}, {"dtype", dtype}});
}

DRX_PUBLIC_OP("arange", "(n: int64, dtype: DType = i32) -> Value", "[0, 1, ..., n-1].");
Value arange(int64_t n, DType dtype) { return iota({n}, 0, dtype); }

}  // namespace drx
