// Order primitives: sort (its values and the permutation that sorts them,
// which argsort returns), top_k, and the arg reductions argmax and argmin.
//
// Order, as jnp: numbers compare with <, NaN comes after every number and
// ties with every NaN, -0.0 ties with 0.0 (drx/ops/axis_loops.h). Every sort
// is stable: equal elements keep their original order, in descending sorts
// and top_k too (so ties give the lower index first). Ascending sorts put
// NaNs last; descending sorts and top_k put them first. argmax and argmin
// give the first position of the extreme value, or of the first NaN (both
// propagate NaN, as jnp).
//
// Indices are i32 (jnp's default), so a sorted or reduced axis is at most
// 2^31 - 1 long. Derivatives flow through the values only: sort's and
// top_k's to the elements they select (a gather of the tangent, a scatter-add
// of the cotangent); integer results have none.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/axis_loops.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_sorting);

namespace drx {
namespace {

using axis_loops::AxisLayout;
using axis_loops::before_ascending;
using axis_loops::layout_along;

int64_t checked_axis(const std::string& op, const Type& x, const Params& p) {
  const int64_t axis = p.get_int("axis", op);
  if (axis < 0 || axis >= x.ndim())
    throw TypeError(op + ": axis " + std::to_string(axis) + " is out of range for operand " +
                    x.str() + " (expected 0 <= axis < " + std::to_string(x.ndim()) + ")");
  return axis;
}

void check_fits_i32(const std::string& op, const Type& x, int64_t n) {
  if (n > std::numeric_limits<int32_t>::max())
    throw TypeError(op + ": axis of size " + std::to_string(n) + " of " + x.str() +
                    " is too long for i32 indices (expected at most 2^31 - 1)");
}

Shape without_axis(const Shape& s, int64_t axis) {
  Shape r = s;
  r.erase(r.begin() + axis);
  return r;
}

// ---- gathers and scatters along an axis, for the derivative rules ----------
// idx has x's shape except along `axis`, where it holds k positions in
// [0, n) per row: out[..., j, ...] = x[..., idx[..., j, ...], ...]. Written as
// one take over the flattened operand (the axis moved last, row r's
// positions offset by r * n), so every transformation of take applies.
struct Flattened {
  Value flat;   // [rows * n]
  Shape moved;  // the shape with `axis` moved last
};

Flattened flatten_along(const Value& x, int64_t axis) {
  Value m = move_axis(x, axis, x.ndim() - 1);
  Shape ms = m.shape();
  return {reshape(m, {num_elements(ms)}), ms};
}

Value unflatten_along(const Value& flat, const Shape& moved, int64_t axis) {
  return move_axis(reshape(flat, moved), static_cast<int64_t>(moved.size()) - 1, axis);
}

// idx's positions in the operand flattened along `axis` (of size n), as i64.
Value flat_positions(const Flattened& idx, int64_t n) {
  const Shape rows_by_k = {num_elements(Shape(idx.moved.begin(), idx.moved.end() - 1)),
                           idx.moved.back()};
  Value offsets =
      reshape(iota(rows_by_k, 0, DType::i64) * static_cast<double>(n), {num_elements(idx.moved)});
  return astype(idx.flat, DType::i64) + offsets;
}

// Placed operands (all of one placement) are handled unplaced: flattening
// would drop their placement axes. `placement` is a copy: emitting may move
// the trace's types, which Value::placement() refers into.
template <class F>
Value unplaced(std::string placement, F f) {
  if (placement.empty()) return f([](const Value& v) { return v; });
  return place(f([](const Value& v) { return place(v, ""); }), placement);
}

Value take_along_axis(const Value& x, const Value& idx, int64_t axis) {
  return unplaced(x.placement(), [&](auto strip) {
    Flattened fx = flatten_along(strip(x), axis), fi = flatten_along(strip(idx), axis);
    Value picked = take(fx.flat, flat_positions(fi, fx.moved.back()), 0);
    return unflatten_along(picked, fi.moved, axis);
  });
}

// base with `updates` (idx's shape) added at idx along `axis`.
Value scatter_add_along_axis(const Value& base, const Value& idx, const Value& updates,
                             int64_t axis) {
  return unplaced(base.placement(), [&](auto strip) {
    Flattened fb = flatten_along(strip(base), axis), fi = flatten_along(strip(idx), axis);
    Value fu = flatten_along(strip(updates), axis).flat;
    Value sums = scatter_add(fb.flat, flat_positions(fi, fb.moved.back()), fu, 0);
    return unflatten_along(sums, fb.moved, axis);
  });
}

// ---- StableHLO ---------------------------------------------------------------
// sort and top_k lower to a stable stablehlo.sort of (x, iota) whose
// comparator is drx's order in the form JAX writes for jnp.sort: float keys
// canonicalised (-0.0 becomes 0.0, every NaN +NaN) and compared in total
// order (TOTALORDER), which on canonical keys is exactly before_ascending:
// numbers by <, -0.0 tied with 0.0, NaN after every number and tied with
// every NaN. Integers and bool compare directly. Descending compares GT; the
// sort is stable, so equal keys keep their order (lower index first), as
// drx's stable sorts and top_k's (value, index) order do.

// `v` (a scalar of type `scalar`) as its sort key.
std::string sort_key(StableHloEmitter& b, const std::string& v, const Type& scalar) {
  if (!is_floating(scalar.dtype)) return v;
  const std::string zero = b.constant(full({}, 0.0, scalar.dtype));
  const std::string is_zero = emit_compare(b, "EQ", v, zero, scalar);
  const std::string no_negative_zero = b.emit1("stablehlo.select", {is_zero, zero, v}, {}, scalar);
  const std::string nan =
      b.constant(full({}, std::numeric_limits<double>::quiet_NaN(), scalar.dtype));
  const std::string is_nan = emit_compare(b, "NE", v, v, scalar);
  return b.emit1("stablehlo.select", {is_nan, nan, no_negative_zero}, {}, scalar);
}

// The comparator of a sort of (values of dtype d, i32 positions): "lhs before rhs".
MlirRegion order_comparator(DType d, bool descending) {
  const Type scalar(d, {}), index(DType::i32, {});
  return {{scalar, scalar, index, index},
          [scalar, descending](StableHloEmitter& b, const std::vector<std::string>& args) {
            const std::string lhs = sort_key(b, args[0], scalar);
            const std::string rhs = sort_key(b, args[1], scalar);
            const std::string type = is_floating(scalar.dtype)
                                         ? "#stablehlo<comparison_type TOTALORDER>"
                                         : mlir_comparison_type(scalar.dtype);
            return std::vector<std::string>{b.emit1(
                "stablehlo.compare", {lhs, rhs},
                {{"comparison_direction", mlir_comparison_direction(descending ? "GT" : "LT")},
                 {"compare_type", type}},
                Type(DType::bool_, {}))};
          }};
}

// x (of type t) sorted along `axis`, and the i32 positions its values came from.
std::vector<std::string> emit_sort_with_positions(StableHloEmitter& em, const std::string& x,
                                                  const Type& t, int64_t axis, bool descending) {
  const Type values(t.dtype, t.shape), positions(DType::i32, t.shape);
  const std::string dim = std::to_string(axis) + " : i64";
  const std::string iota = em.emit1("stablehlo.iota", {}, {{"iota_dimension", dim}}, positions);
  return em.emit("stablehlo.sort", {x, iota}, {{"dimension", dim}, {"is_stable", "true"}},
                 {values, positions}, {order_comparator(t.dtype, descending)});
}

// ---------------------------------------------------------------------------
// sort[axis, descending](x) -> (values, i32 indices): values = x reordered
// along the axis, indices = where each value came from.
template <class T>
void sort_along(const T* x, const AxisLayout& l, bool descending, T* values, int32_t* indices) {
  std::vector<int32_t> perm(static_cast<size_t>(l.n));
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      const T* row = x + o * l.n * l.inner + i;
      auto at = [&](int32_t j) { return row[j * l.inner]; };
      std::iota(perm.begin(), perm.end(), 0);
      if (descending)
        std::stable_sort(perm.begin(), perm.end(),
                         [&](int32_t a, int32_t b) { return before_ascending(at(b), at(a)); });
      else
        std::stable_sort(perm.begin(), perm.end(),
                         [&](int32_t a, int32_t b) { return before_ascending(at(a), at(b)); });
      for (int64_t j = 0; j < l.n; ++j) {
        const int64_t out = (o * l.n + j) * l.inner + i;
        values[out] = at(perm[static_cast<size_t>(j)]);
        indices[out] = perm[static_cast<size_t>(j)];
      }
    }
}

class SortPrim : public Primitive {
 public:
  SortPrim() : Primitive("sort") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    em.set_results(emit_sort_with_positions(em, em.operand(0), em.operand_type(0),
                                            p.get_int("axis", name()),
                                            p.get_int("descending", name()) != 0));
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const Type& x = ins[0];
    const int64_t axis = checked_axis(name(), x, p);
    p.get_int("descending", name());
    check_fits_i32(name(), x, x.shape[static_cast<size_t>(axis)]);
    return {x, Type(DType::i32, x.shape, x.placement)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Array& x = ins[0];
    const AxisLayout l = layout_along(x.shape(), p.get_int("axis", name()));
    const bool descending = p.get_int("descending", name()) != 0;
    Array values(x.dtype(), x.shape()), indices(DType::i32, x.shape());
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      sort_along<T>(x.data<T>(), l, descending, values.data<T>(), indices.data<int32_t>());
    });
    return {values, indices};
  }
  MaybeValues jvp(const Values& in, const MaybeValues& t, const Values& outs,
                  const Params& p) const override {
    if (!t[0] || !is_floating(in[0].dtype())) return {std::nullopt, std::nullopt};
    return {take_along_axis(*t[0], outs[1], p.get_int("axis", name())), std::nullopt};
  }
  MaybeValues vjp(const Values& in, const Values& outs, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !is_floating(in[0].dtype())) return {std::nullopt};
    return {scatter_add_along_axis(zeros_like(in[0]), outs[1], *ct[0], p.get_int("axis", name()))};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    Params q = p;
    if (ins[0].batched) q.set("axis", p.get_int("axis", name()) + 1);
    Values outs = emit(*this, {ins[0].value}, q);
    return {{outs[0], ins[0].batched}, {outs[1], ins[0].batched}};
  }
};

// ---------------------------------------------------------------------------
// top_k[k](x) -> (values, i32 indices) along the last axis: the k largest
// elements, largest first; equal elements by lower index first; NaN largest.
template <class T>
void top_k_rows(const T* x, int64_t rows, int64_t n, int64_t k, T* values, int32_t* indices) {
  std::vector<int32_t> perm(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    std::iota(perm.begin(), perm.end(), 0);
    // A total order (value, then index), so the partial sort is deterministic.
    std::partial_sort(perm.begin(), perm.begin() + k, perm.end(), [&](int32_t a, int32_t b) {
      if (before_ascending(row[b], row[a])) return true;
      if (before_ascending(row[a], row[b])) return false;
      return a < b;
    });
    for (int64_t j = 0; j < k; ++j) {
      values[r * k + j] = row[perm[static_cast<size_t>(j)]];
      indices[r * k + j] = perm[static_cast<size_t>(j)];
    }
  }
}

class TopKPrim : public Primitive {
 public:
  TopKPrim() : Primitive("top_k") {}
  // A stable descending sort of the last axis, and its first k elements.
  void lower(StableHloEmitter& em, const Params& p) const override {
    const Type& x = em.operand_type(0);
    const int64_t k = p.get_int("k", name());
    std::vector<std::string> sorted =
        emit_sort_with_positions(em, em.operand(0), x, x.ndim() - 1, true);
    if (k == x.shape.back()) {
      em.set_results(sorted);
      return;
    }
    Shape limits = x.shape;
    limits.back() = k;
    const std::vector<int64_t> starts(x.shape.size(), 0), strides(x.shape.size(), 1);
    for (size_t j = 0; j < 2; ++j)
      sorted[j] = em.emit1("stablehlo.slice", {sorted[j]},
                           {{"start_indices", mlir_i64_array(starts)},
                            {"limit_indices", mlir_i64_array(limits)},
                            {"strides", mlir_i64_array(strides)}},
                           Type(em.result_type(j).dtype, limits));
    em.set_results(sorted);
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const Type& x = ins[0];
    const int64_t k = p.get_int("k", name());
    if (x.ndim() == 0) throw TypeError("top_k: operand " + x.str() + " is a scalar");
    const int64_t n = x.shape.back();
    if (k < 0 || k > n)
      throw TypeError("top_k: k = " + std::to_string(k) + " does not fit the last axis (size " +
                      std::to_string(n) + ") of " + x.str() +
                      " (expected 0 <= k <= " + std::to_string(n) + ")");
    check_fits_i32(name(), x, n);
    Shape s = x.shape;
    s.back() = k;
    return {Type(x.dtype, s, x.placement), Type(DType::i32, s, x.placement)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Array& x = ins[0];
    const int64_t k = p.get_int("k", name()), n = x.shape().back();
    Shape s = x.shape();
    s.back() = k;
    Array values(x.dtype(), s), indices(DType::i32, s);
    const int64_t rows = num_elements(Shape(s.begin(), s.end() - 1));
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      top_k_rows<T>(x.data<T>(), rows, n, k, values.data<T>(), indices.data<int32_t>());
    });
    return {values, indices};
  }
  MaybeValues jvp(const Values& in, const MaybeValues& t, const Values& outs,
                  const Params&) const override {
    if (!t[0] || !is_floating(in[0].dtype())) return {std::nullopt, std::nullopt};
    return {take_along_axis(*t[0], outs[1], in[0].ndim() - 1), std::nullopt};
  }
  MaybeValues vjp(const Values& in, const Values& outs, const MaybeValues& ct,
                  const Params&) const override {
    if (!ct[0] || !is_floating(in[0].dtype())) return {std::nullopt};
    return {scatter_add_along_axis(zeros_like(in[0]), outs[1], *ct[0], in[0].ndim() - 1)};
  }
  // The batch axis leads, and top_k works on the last: the rule is the primitive itself.
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    Values outs = emit(*this, {ins[0].value}, p);
    return {{outs[0], ins[0].batched}, {outs[1], ins[0].batched}};
  }
};

// ---------------------------------------------------------------------------
// argmax[axis](x), argmin[axis](x) -> i32 positions along the axis (removed).
template <bool Max>
class ArgReducePrim : public Primitive {
 public:
  ArgReducePrim() : Primitive(Max ? "argmax" : "argmin") {}
  // As JAX lowers jnp.argmax: a variadic stablehlo.reduce of (x, iota) whose
  // body keeps the accumulator (value a, position i) against (b, j) when
  // a > b (argmin: a < b) or a is NaN, and its position also when a == b and
  // i < j. Folded in any order this is axis_loops::arg_reduce: the first
  // position of the extreme value, or of the first NaN.
  void lower(StableHloEmitter& em, const Params& p) const override {
    const int64_t axis = p.get_int("axis", name());
    const Type x(em.operand_type(0).dtype, em.operand_type(0).shape);
    const Type positions(DType::i32, x.shape), value(x.dtype, {}), index(DType::i32, {});
    const std::string iota = em.emit1(
        "stablehlo.iota", {}, {{"iota_dimension", std::to_string(axis) + " : i64"}}, positions);
    // The init value: what every element beats or ties (ties keep the lower position).
    const double sign = Max ? -1.0 : 1.0;
    const double init = x.dtype == DType::bool_ ? (Max ? 0.0 : 1.0)
                        : is_floating(x.dtype)  ? sign * INFINITY
                                                : sign * 1e300;  // full() saturates
    const std::string init_value = em.constant(full({}, init, x.dtype));
    const std::string init_index = em.constant(full({}, 0.0, DType::i32));
    MlirRegion body{{value, index, value, index},
                    [value, index](StableHloEmitter& b, const std::vector<std::string>& a) {
                      const Type flag(DType::bool_, {});
                      std::string keep = emit_compare(b, Max ? "GT" : "LT", a[0], a[2], value);
                      if (is_floating(value.dtype))
                        keep = b.emit1("stablehlo.or",
                                       {keep, emit_compare(b, "NE", a[0], a[0], value)}, {}, flag);
                      const std::string tie = b.emit1("stablehlo.and",
                                                      {emit_compare(b, "EQ", a[0], a[2], value),
                                                       emit_compare(b, "LT", a[1], a[3], index)},
                                                      {}, flag);
                      const std::string keep_index = b.emit1("stablehlo.or", {keep, tie}, {}, flag);
                      return std::vector<std::string>{
                          b.emit1("stablehlo.select", {keep, a[0], a[2]}, {}, value),
                          b.emit1("stablehlo.select", {keep_index, a[1], a[3]}, {}, index)};
                    }};
    const Shape out = without_axis(x.shape, axis);
    std::vector<std::string> r =
        em.emit("stablehlo.reduce", {em.operand(0), iota, init_value, init_index},
                {{"dimensions", mlir_i64_array({axis})}},
                {Type(x.dtype, out), Type(DType::i32, out)}, {body});
    em.set_results({r[1]});
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const Type& x = ins[0];
    const int64_t axis = checked_axis(name(), x, p);
    const int64_t n = x.shape[static_cast<size_t>(axis)];
    if (n == 0)
      throw TypeError(name() + ": axis " + std::to_string(axis) + " of " + x.str() +
                      " is empty, so it has no " + (Max ? "largest" : "smallest") +
                      " element (expected a non-empty axis)");
    check_fits_i32(name(), x, n);
    return {Type(DType::i32, without_axis(x.shape, axis), x.placement)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Array& x = ins[0];
    const int64_t axis = p.get_int("axis", name());
    Array out(DType::i32, without_axis(x.shape(), axis));
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      axis_loops::arg_reduce<Max, T>(x.data<T>(), layout_along(x.shape(), axis),
                                     out.data<int32_t>());
    });
    return {out};
  }
  // Positions are piecewise constant: no derivative.
  MaybeValues jvp(const Values&, const MaybeValues&, const Values&, const Params&) const override {
    return {std::nullopt};
  }
  MaybeValues vjp(const Values&, const Values&, const MaybeValues&, const Params&) const override {
    return {std::nullopt};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    Params q = p;
    if (ins[0].batched) q.set("axis", p.get_int("axis", name()) + 1);
    return {{emit1(*this, {ins[0].value}, q), ins[0].batched}};
  }
};

int64_t public_axis(const Value& x, int64_t axis, const char* op) {
  if (x.ndim() == 0)
    throw TypeError(std::string(op) + ": operand " + x.type().str() + " is a scalar");
  return normalize_axis(axis, x.ndim(), op);
}

Values emit_sort(const Value& x, int64_t axis, bool descending, const char* op) {
  const int64_t a = public_axis(x, axis, op);
  return emit(prims::sort(), {x}, Params{{"axis", a}, {"descending", int64_t{descending}}});
}

Value arg_reduce(const Primitive& p, const Value& x, int64_t axis, bool keepdims) {
  const int64_t a = public_axis(x, axis, p.name().c_str());
  Value y = emit1(p, {x}, Params{{"axis", a}});
  return keepdims ? expand_dims(y, a) : y;
}

}  // namespace

namespace prims {
const Primitive& sort() {
  static const SortPrim p;
  return p;
}
const Primitive& top_k() {
  static const TopKPrim p;
  return p;
}
const Primitive& argmax() {
  static const ArgReducePrim<true> p;
  return p;
}
const Primitive& argmin() {
  static const ArgReducePrim<false> p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(sorting) {
  registry.add(prims::sort());
  registry.add(prims::top_k());
  registry.add(prims::argmax());
  registry.add(prims::argmin());
}

DRX_PUBLIC_OP("sort", "(x: Value, axis: int64 = -1, descending: bool = false) -> Value",
              "Stable sort along axis; NaN after every number.");
Value sort(const Value& x, int64_t axis, bool descending) {
  return emit_sort(x, axis, descending, "sort")[0];
}

DRX_PUBLIC_OP("argsort", "(x: Value, axis: int64 = -1, descending: bool = false) -> Value",
              "The i32 positions that sort x along axis.");
Value argsort(const Value& x, int64_t axis, bool descending) {
  return emit_sort(x, axis, descending, "argsort")[1];
}

DRX_PUBLIC_OP(
    "top_k", "(x: Value, k: int64) -> TopK{values, indices}",
    "The k largest elements along the last axis, largest first, and their i32 positions.");
TopK top_k(const Value& x, int64_t k) {
  Values outs = emit(prims::top_k(), {x}, Params{{"k", k}});
  return {outs[0], outs[1]};
}

DRX_PUBLIC_OP("argmax", "(x: Value, axis: int64, keepdims: bool = false) -> Value",
              "The first position of the largest element along axis, as i32.");
Value argmax(const Value& x, int64_t axis, bool keepdims) {
  return arg_reduce(prims::argmax(), x, axis, keepdims);
}

DRX_PUBLIC_OP("argmin", "(x: Value, axis: int64, keepdims: bool = false) -> Value",
              "The first position of the smallest element along axis, as i32.");
Value argmin(const Value& x, int64_t axis, bool keepdims) {
  return arg_reduce(prims::argmin(), x, axis, keepdims);
}

}  // namespace drx
