// Cumulative primitives: cumsum, the running sum along one axis.
//
// cumsum is linear, so its rules are cumsums too: the tangent's cumsum, and
// the cotangent's cumsum in the other direction (the transpose of a lower
// triangular matrix of ones is an upper triangular one).
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/axis_loops.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_cumulative);

namespace drx {
namespace {

// cumsum[axis, reverse](x): y[..., j, ...] = sum of x[..., i, ...] for i <= j
// (for i >= j when reverse). See axis_loops::cumsum for the accumulation.
class CumsumPrim : public Primitive {
 public:
  CumsumPrim() : Primitive("cumsum") {}

  // A counted stablehlo.while over the axis, in eval's order: the running sum
  // (in f64 for floats, as axis_loops::cumsum accumulates; in the dtype itself
  // for integers, which wrap alike) gains one slice per step, and the step
  // writes it rounded to the dtype (bf16/f16 through f32, as evaluate rounds),
  // so the result is bitwise drx's and the program size does not grow with n.
  void lower(StableHloEmitter& em, const Params& p) const override {
    const Type x(em.operand_type(0).dtype, em.operand_type(0).shape);
    if (x.size() == 0) {
      em.set_results({em.operand(0)});
      return;
    }
    const size_t axis = static_cast<size_t>(p.get_int("axis", name()));
    const bool reverse = p.get_int("reverse", name()) != 0;
    const int64_t n = x.shape[axis];
    const bool half = x.dtype == DType::bf16 || x.dtype == DType::f16;
    Shape row = x.shape;
    row[axis] = 1;
    const Type row_t(x.dtype, row), acc_t(is_floating(x.dtype) ? DType::f64 : x.dtype, row);
    const Type index_t(DType::i64, {});
    auto index = [](StableHloEmitter& b, int64_t v) {
      return b.constant(full({}, static_cast<double>(v), DType::i64));
    };
    auto convert = [](StableHloEmitter& b, const std::string& v, const Type& t) {
      return b.emit1("stablehlo.convert", {v}, {}, t);
    };
    const std::string xs = em.operand(0);
    MlirRegion cond{
        {index_t, acc_t, x}, [&](StableHloEmitter& b, const std::vector<std::string>& a) {
          return std::vector<std::string>{emit_compare(b, "LT", a[0], index(b, n), index_t)};
        }};
    MlirRegion body{
        {index_t, acc_t, x}, [&](StableHloEmitter& b, const std::vector<std::string>& a) {
          const std::string j =
              reverse ? b.emit1("stablehlo.subtract", {index(b, n - 1), a[0]}, {}, index_t) : a[0];
          std::vector<std::string> starts(x.shape.size(), index(b, 0));
          starts[axis] = j;
          std::vector<std::string> slice_ops{xs};
          slice_ops.insert(slice_ops.end(), starts.begin(), starts.end());
          std::string xj = b.emit1("stablehlo.dynamic_slice", slice_ops,
                                   {{"slice_sizes", mlir_i64_array(row)}}, row_t);
          if (acc_t.dtype != x.dtype) xj = convert(b, xj, acc_t);
          const std::string acc = b.emit1("stablehlo.add", {a[1], xj}, {}, acc_t);
          std::string yj = acc;
          if (half) yj = convert(b, yj, Type(DType::f32, row));
          if (acc_t.dtype != x.dtype) yj = convert(b, yj, row_t);
          std::vector<std::string> update_ops{a[2], yj};
          update_ops.insert(update_ops.end(), starts.begin(), starts.end());
          const std::string out = b.emit1("stablehlo.dynamic_update_slice", update_ops, {}, x);
          const std::string next = b.emit1("stablehlo.add", {a[0], index(b, 1)}, {}, index_t);
          return std::vector<std::string>{next, acc, out};
        }};
    const std::vector<std::string> r =
        em.emit("stablehlo.while",
                {index(em, 0), em.splat(0, acc_t.dtype, row), em.splat(0, x.dtype, x.shape)}, {},
                {index_t, acc_t, x}, {cond, body});
    em.set_results({r[2]});
  }
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

DRX_PUBLIC_OP("cumsum", "(x: Value, axis: int64, reverse: bool = false) -> Value",
              "Running sums along axis.");
Value cumsum(const Value& x, int64_t axis, bool reverse) {
  if (x.ndim() == 0) throw TypeError("cumsum: operand " + x.type().str() + " is a scalar");
  const int64_t a = normalize_axis(axis, x.ndim(), "cumsum");
  return emit1(prims::cumsum(), {x}, Params{{"axis", a}, {"reverse", int64_t{reverse}}});
}

}  // namespace drx
