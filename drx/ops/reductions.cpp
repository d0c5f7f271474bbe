// Reductions over a set of axes: sum, max, min, and the public wrappers
// (negative axes, keepdims, mean), and the compositions prod, var and std.
//
// The primitives take `axes`: distinct, sorted, non-negative axes that the
// result no longer has. Keeping the primitive this narrow means one canonical
// form in the IR; keepdims is a reshape on top.
#include <algorithm>
#include <cmath>
#include <limits>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"

DRX_PUBLIC_OPS_FILE(ops_reductions);

namespace drx {
namespace {

// The dims of `shape` that survive reducing `axes` (sorted, distinct).
std::vector<int64_t> kept_dims(int64_t ndim, const std::vector<int64_t>& axes) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < ndim; ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) kept.push_back(d);
  return kept;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes) {
  Shape out;
  for (int64_t d : kept_dims(static_cast<int64_t>(shape.size()), axes))
    out.push_back(shape[static_cast<size_t>(d)]);
  return out;
}

// Out-of-place reduction kernel. Every output element receives at least one
// input element unless the output is empty (infer rejects empty max/min).
template <class T, ReduceKind K>
void reduce_kernel(const Array& x, const std::vector<int64_t>& axes, Array& out) {
  const Shape& shape = x.shape();
  const size_t nd = shape.size();
  // Output offset contributed by each input dim (0 for reduced dims).
  std::vector<int64_t> out_step(nd, 0);
  {
    std::vector<int64_t> ost = strides_of(out.shape());
    size_t k = 0;
    for (size_t d = 0; d < nd; ++d)
      if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d)))
        out_step[d] = ost[k++];
  }
  // Sums accumulate in double (floats) or 64-bit integers of the operand's
  // signedness (u64's range is not int64's), then round once.
  using Wide = std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>;
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double,
                                 std::conditional_t<std::is_same_v<T, uint8_t>, T, Wide>>;
  std::vector<Acc> acc(static_cast<size_t>(out.size()), reduce_identity<T, Acc>(K));
  const T* in = x.data<T>();
  std::vector<int64_t> idx(nd, 0);
  int64_t o = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    reduce_fold<K>(acc[static_cast<size_t>(o)], static_cast<Acc>(in[i]));
    // Advance the row-major multi-index and the output offset with it.
    for (size_t d = nd; d-- > 0;) {
      o += out_step[d];
      if (++idx[d] < shape[d]) break;
      o -= out_step[d] * shape[d];
      idx[d] = 0;
    }
  }
  T* dst = out.data<T>();
  for (size_t j = 0; j < acc.size(); ++j) dst[j] = static_cast<T>(acc[j]);
}

// The sum, max or min primitive object.
const Primitive& reduction_primitive(ReduceKind kind);

class ReducePrim : public Primitive {
 public:
  ReducePrim(std::string name, ReduceKind kind) : Primitive(std::move(name)), kind_(kind) {}

  void lower(StableHloEmitter& em, const Params& p) const override {
    em.set_results(
        {emit_reduce(em, kind_, em.operand(0), em.operand_type(0), p.get_ints("axes", name()))});
  }

  std::optional<ReduceKind> reduction() const override { return kind_; }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (ins.size() != 1)
      throw TypeError(name() + ": takes one operand, got " + std::to_string(ins.size()));
    const Type& x = ins[0];
    const std::vector<int64_t>& axes = p.get_ints("axes", name());
    for (size_t i = 0; i < axes.size(); ++i) {
      bool in_range = axes[i] >= 0 && axes[i] < x.ndim();
      bool increasing = i == 0 || axes[i] > axes[i - 1];
      if (!in_range || !increasing)
        throw TypeError(name() + ": axes " + shape_str(axes) + " are invalid for " + x.str() +
                        " (expected distinct, sorted axes in [0, " + std::to_string(x.ndim()) +
                        "))");
    }
    if (kind_ == ReduceKind::sum && x.dtype == DType::bool_)
      throw TypeError(name() + ": operand " + x.str() +
                      " is bool; convert it first, e.g. sum(astype(x, i32))");
    if (kind_ != ReduceKind::sum) {
      for (int64_t a : axes)
        if (x.shape[static_cast<size_t>(a)] == 0)
          throw Error(name() + ": reduction over zero-size axis " + std::to_string(a) + " of " +
                      x.str() + " has no identity (expected a non-empty axis)");
    }
    return {Type(x.dtype, reduced_shape(x.shape, axes), x.placement)};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const std::vector<int64_t>& axes = p.get_ints("axes", name());
    const Array& x = ins[0];
    Array out(x.dtype(), reduced_shape(x.shape(), axes));
    dispatch_dtype(x.dtype(), [&](auto t) {
      dispatch_reduce(kind_, [&](auto k) { reduce_kernel<decltype(t), k()>(x, axes, out); });
    });
    return {out};
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                  const Params& p) const override {
    if (!tangents[0] || !is_floating(primals[0].dtype())) return {std::nullopt};
    if (kind_ == ReduceKind::sum) return {emit1(*this, {*tangents[0]}, p)};
    auto [mask, count] = ties(primals[0], outs[0], p);
    Value picked = where(mask, *tangents[0], scalar_like(*tangents[0], 0.0));
    return {sum_prim(picked, p) / count};
  }

  MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& cotangents,
                  const Params& p) const override {
    const Value& x = primals[0];
    if (!cotangents[0] || !is_floating(x.dtype())) return {std::nullopt};
    std::vector<int64_t> kept = kept_dims(x.ndim(), p.get_ints("axes", name()));
    const Shape shape = x.shape();
    if (kind_ == ReduceKind::sum) return {broadcast_in_dim(*cotangents[0], shape, kept)};
    auto [mask, count] = ties(x, outs[0], p);
    Value share = broadcast_in_dim(*cotangents[0] / count, shape, kept);
    return {where(mask, share, scalar_like(share, 0.0))};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    if (!ins[0].batched) return {{emit1(*this, {ins[0].value}, p), false}};
    std::vector<int64_t> axes = p.get_ints("axes", name());
    for (int64_t& a : axes) ++a;
    Params shifted = p;
    shifted.set("axes", axes);
    return {{emit1(*this, {ins[0].value}, shifted), true}};
  }

 private:
  Value sum_prim(const Value& x, const Params& p) const {
    return emit1(reduction_primitive(ReduceKind::sum), {x}, p);
  }

  // Derivative of max/min: positions equal to the result, and how many there
  // are per result element. Ties split the derivative evenly (as JAX does),
  // which keeps max(x, x, ...) symmetric and makes the vjp the exact transpose
  // of the jvp.
  std::pair<Value, Value> ties(const Value& x, const Value& y, const Params& p) const {
    std::vector<int64_t> kept = kept_dims(x.ndim(), p.get_ints("axes", name()));
    const Shape shape = x.shape();
    Value mask = equal(x, broadcast_in_dim(y, shape, kept));
    Value count = sum_prim(astype(mask, x.dtype()), p);
    return {mask, count};
  }

  ReduceKind kind_;
};

const Primitive& reduction_primitive(ReduceKind kind) {
  static const ReducePrim sum_p("sum", ReduceKind::sum), max_p("max", ReduceKind::max),
      min_p("min", ReduceKind::min);
  return kind == ReduceKind::sum ? sum_p : kind == ReduceKind::max ? max_p : min_p;
}

// Public-side axes: negative allowed, any order, no duplicates; empty = all.
std::vector<int64_t> normalize_axes(const char* op, const Value& x,
                                    const std::vector<int64_t>& axes) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t d = 0; d < x.ndim(); ++d) out.push_back(d);
    return out;
  }
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + x.ndim() : a;
    if (n < 0 || n >= x.ndim())
      throw TypeError(std::string(op) + ": axis " + std::to_string(a) + " is out of range for " +
                      x.type().str() + " (expected -" + std::to_string(x.ndim()) + " <= axis < " +
                      std::to_string(x.ndim()) + ")");
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw TypeError(std::string(op) + ": axes " + shape_str(axes) + " name a dimension of " +
                    x.type().str() + " twice (expected distinct axes)");
  return out;
}

// `op` names the public op in errors; `kind` chooses the primitive.
Value reduce(ReduceKind kind, const char* op, const Value& x, const std::vector<int64_t>& axes,
             bool keepdims) {
  const Primitive& prim = reduction_primitive(kind);
  std::vector<int64_t> norm = normalize_axes(op, x, axes);
  Value y = emit1(prim, {x}, Params{{"axes", norm}});
  if (!keepdims) return y;
  Shape kept_shape = x.shape();
  for (int64_t a : norm) kept_shape[static_cast<size_t>(a)] = 1;
  return reshape(y, kept_shape);
}

}  // namespace

DRX_PRIMITIVE_FAMILY(reductions) {
  registry.add(reduction_primitive(ReduceKind::sum));
  registry.add(reduction_primitive(ReduceKind::max));
  registry.add(reduction_primitive(ReduceKind::min));
}

DRX_PUBLIC_OP(
    "sum", "(x: Value) -> Value | (x: Value, axes: vector<int64>, keepdims: bool = false) -> Value",
    "Sum over all elements or the given axes.");
// An empty `axes` list reduces every axis (as the header promises), so
// sum(x, {}, true) is the keepdims form of sum(x).
Value sum(const Value& x) { return reduce(ReduceKind::sum, "sum", x, {}, false); }
Value sum(const Value& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce(ReduceKind::sum, "sum", x, axes, keepdims);
}
DRX_PUBLIC_OP(
    "max", "(x: Value) -> Value | (x: Value, axes: vector<int64>, keepdims: bool = false) -> Value",
    "Maximum over all elements or the given axes.");
Value max(const Value& x) { return reduce(ReduceKind::max, "max", x, {}, false); }
Value max(const Value& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce(ReduceKind::max, "max", x, axes, keepdims);
}
DRX_PUBLIC_OP(
    "min", "(x: Value) -> Value | (x: Value, axes: vector<int64>, keepdims: bool = false) -> Value",
    "Minimum over all elements or the given axes.");
Value min(const Value& x) { return reduce(ReduceKind::min, "min", x, {}, false); }
Value min(const Value& x, const std::vector<int64_t>& axes, bool keepdims) {
  return reduce(ReduceKind::min, "min", x, axes, keepdims);
}

DRX_PUBLIC_OP(
    "mean",
    "(x: Value) -> Value | (x: Value, axes: vector<int64>, keepdims: bool = false) -> Value",
    "Mean over all elements or the given axes.");
Value mean(const Value& x) { return mean(x, {}, false); }
// Floating point only: an integer mean would silently truncate. An empty
// reduction gives 0/0 = NaN, as numpy does.
Value mean(const Value& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (!is_floating(x.dtype()))
    throw TypeError("mean: operand " + x.type().str() +
                    " is not floating point; convert it first, e.g. mean(astype(x, f32))");
  int64_t count = 1;
  for (int64_t a : normalize_axes("mean", x, axes)) count *= x.shape()[static_cast<size_t>(a)];
  return sum(x, axes, keepdims) / static_cast<double>(count);
}

DRX_PUBLIC_OP(
    "prod",
    "(x: Value) -> Value | (x: Value, axes: vector<int64>, keepdims: bool = false) -> Value",
    "Product over all elements or the given axes; its derivative is exact where x has zeros.");
Value prod(const Value& x) { return prod(x, {}, false); }
// A tree of multiplications of halves of the reduced elements (padded with ones): only
// products, never a division by x, so every derivative is the product of the other elements,
// also at zeros, to any order.
Value prod(const Value& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (x.dtype() == DType::bool_)
    throw TypeError("prod: operand " + x.type().str() +
                    " is bool; convert it first, e.g. prod(astype(x, i32))");
  const std::vector<int64_t> norm = normalize_axes("prod", x, axes);
  const std::vector<int64_t> kept = kept_dims(x.ndim(), norm);
  std::vector<int64_t> perm = kept;
  perm.insert(perm.end(), norm.begin(), norm.end());
  Shape kept_shape = reduced_shape(x.shape(), norm), rows = kept_shape;
  int64_t n = 1;
  for (int64_t a : norm) n *= x.shape()[static_cast<size_t>(a)];
  rows.push_back(n);
  Value y = reshape(transpose(x, perm), rows);
  const size_t last = rows.size() - 1;
  std::vector<int64_t> zeros(rows.size(), 0), starts(rows.size(), 0), stops = rows;
  Value out;
  if (n == 0) {
    out = full_like(sum(y, {static_cast<int64_t>(last)}), 1.0);  // the empty product
  } else {
    while (n > 1) {
      if (n % 2) {
        std::vector<int64_t> high(rows.size(), 0);
        high[last] = 1;
        y = pad(y, 1.0, zeros, high);
        ++n;
      }
      stops = rows;
      stops[last] = n / 2;
      starts[last] = 0;
      Value lo = slice(y, starts, stops);
      starts[last] = n / 2;
      stops[last] = n;
      y = lo * slice(y, starts, stops);
      n /= 2;
      rows[last] = n;
      starts[last] = 0;
    }
    out = reshape(y, kept_shape);
  }
  if (!keepdims) return out;
  Shape with_ones = x.shape();
  for (int64_t a : norm) with_ones[static_cast<size_t>(a)] = 1;
  return reshape(out, with_ones);
}

DRX_PUBLIC_OP("var",
              "(x: Value, axes: vector<int64> = {}, keepdims: bool = false, ddof: int64 = 0) -> "
              "Value",
              "Variance over all elements or the given axes: sum((x - mean)^2) / (n - ddof).");
Value var(const Value& x, const std::vector<int64_t>& axes, bool keepdims, int64_t ddof) {
  if (!is_floating(x.dtype()))
    throw TypeError("var: operand " + x.type().str() +
                    " is not floating point; convert it first, e.g. var(astype(x, f32))");
  int64_t count = 1;
  for (int64_t a : normalize_axes("var", x, axes)) count *= x.shape()[static_cast<size_t>(a)];
  Value centered = x - mean(x, axes, true);
  // n - ddof <= 0 divides by zero (inf or NaN), as NumPy and JAX do.
  return sum(centered * centered, axes, keepdims) / static_cast<double>(count - ddof);
}

DRX_PUBLIC_OP("std",
              "(x: Value, axes: vector<int64> = {}, keepdims: bool = false, ddof: int64 = 0) -> "
              "Value",
              "Standard deviation: sqrt(var(x, axes, keepdims, ddof)).");
Value std(const Value& x, const std::vector<int64_t>& axes, bool keepdims, int64_t ddof) {
  return sqrt(var(x, axes, keepdims, ddof));
}

}  // namespace drx
