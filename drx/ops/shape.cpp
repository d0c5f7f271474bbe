// Shape primitives: reshape, transpose, broadcast_in_dim, concatenate, slice.
// They only move data, so every rule is another shape op (all linear).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"
#include "drx/ops/strided_copy.h"

DRX_PUBLIC_OPS_FILE(ops_shape);

namespace drx {
namespace {

using detail::strided_copy;

std::string ints_str(const std::vector<int64_t>& v) { return shape_str(v); }

Shape with_front(int64_t b, const Shape& s) {
  Shape r{b};
  r.insert(r.end(), s.begin(), s.end());
  return r;
}

Type out_type(const Type& first, Shape shape) {
  return Type(first.dtype, std::move(shape), first.placement);
}

void check_dims_nonneg(const std::string& op, const Shape& s) {
  for (int64_t d : s)
    if (d < 0) throw TypeError(op + ": negative dimension in shape " + shape_str(s));
}

bool differentiable(const Value& v) { return is_floating(v.dtype()); }

// Zeros of v's type. Copies the shape first: Value::shape() refers into the
// trace, which emitting may reallocate.
Value zeros_of(const Value& v) {
  Shape s = v.shape();
  return fill(s, 0.0, v.dtype());
}

// ---------------------------------------------------------------------------
class ReshapePrim : public Primitive {
 public:
  ReshapePrim() : Primitive("reshape") {}
  void lower(StableHloEmitter& em, const Params&) const override {
    em.set_results({em.emit1("stablehlo.reshape", {em.operand(0)}, {}, em.result_type(0))});
  }
  // A no-op when the result has the operand's type (the caller checks).
  std::optional<size_t> identity_operand(const std::vector<std::optional<double>>&,
                                         const Params&) const override {
    return 0;
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const Shape& shape = p.get_ints("shape", name());
    check_dims_nonneg(name(), shape);
    // Unlike a type's shape, an attribute's is unbounded (parsed text): -1 when its element
    // count overflows int64.
    int64_t elements = std::count(shape.begin(), shape.end(), 0) ? 0 : 1;
    for (int64_t d : shape)
      if (elements > 0 && __builtin_mul_overflow(elements, d, &elements)) elements = -1;
    if (elements != ins[0].size())
      throw TypeError("reshape: cannot reshape " + ins[0].str() + " (" +
                      std::to_string(ins[0].size()) + " elements) to shape " + shape_str(shape) +
                      " (" + (elements < 0 ? "more than 2^63" : std::to_string(elements)) +
                      " elements)");
    return {out_type(ins[0], shape)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    Array out(ins[0].dtype(), p.get_ints("shape", name()));
    if (out.nbytes() != 0) std::memcpy(out.raw(), ins[0].raw(), out.nbytes());
    return {out};
  }
  MaybeValues jvp(const Values&, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0]) return {std::nullopt};
    return {reshape(*t[0], p.get_ints("shape", name()))};
  }
  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params&) const override {
    if (!ct[0] || !differentiable(x[0])) return {std::nullopt};
    return {reshape(*ct[0], x[0].shape())};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t b,
                            const Params& p) const override {
    const Shape& shape = p.get_ints("shape", name());
    if (!ins[0].batched) return {{reshape(ins[0].value, shape), false}};
    return {{reshape(ins[0].value, with_front(b, shape)), true}};
  }
};

// ---------------------------------------------------------------------------
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

class TransposePrim : public Primitive {
 public:
  TransposePrim() : Primitive("transpose") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    em.set_results({em.emit1("stablehlo.transpose", {em.operand(0)},
                             {{"permutation", mlir_i64_array(p.get_ints("perm", name()))}},
                             em.result_type(0))});
  }
  std::optional<size_t> identity_operand(const std::vector<std::optional<double>>&,
                                         const Params& p) const override {
    const std::vector<int64_t>& perm = p.get_ints("perm", name());
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i)) return std::nullopt;
    return 0;
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const auto& perm = p.get_ints("perm", name());
    const int64_t r = ins[0].ndim();
    bool ok = static_cast<int64_t>(perm.size()) == r;
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (int64_t a : perm) {
      if (!ok) break;
      if (a < 0 || a >= r || seen[static_cast<size_t>(a)])
        ok = false;
      else
        seen[static_cast<size_t>(a)] = true;
    }
    if (!ok)
      throw TypeError("transpose: perm " + ints_str(perm) + " is not a permutation of the " +
                      std::to_string(r) + " axes of " + ins[0].str());
    Shape out;
    for (int64_t a : perm) out.push_back(ins[0].shape[static_cast<size_t>(a)]);
    return {out_type(ins[0], out)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const auto& perm = p.get_ints("perm", name());
    std::vector<int64_t> in_st = strides_of(ins[0].shape());
    Shape out_shape;
    std::vector<int64_t> st;
    for (int64_t a : perm) {
      out_shape.push_back(ins[0].shape()[static_cast<size_t>(a)]);
      st.push_back(in_st[static_cast<size_t>(a)]);
    }
    return {strided_copy(ins[0], out_shape, 0, st)};
  }
  MaybeValues jvp(const Values&, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0]) return {std::nullopt};
    return {transpose(*t[0], p.get_ints("perm", name()))};
  }
  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !differentiable(x[0])) return {std::nullopt};
    return {transpose(*ct[0], inverse_perm(p.get_ints("perm", name())))};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    const auto& perm = p.get_ints("perm", name());
    if (!ins[0].batched) return {{transpose(ins[0].value, perm), false}};
    std::vector<int64_t> bp{0};
    for (int64_t a : perm) bp.push_back(a + 1);
    return {{transpose(ins[0].value, bp), true}};
  }
};

// ---------------------------------------------------------------------------
class BroadcastInDimPrim : public Primitive {
 public:
  BroadcastInDimPrim() : Primitive("broadcast_in_dim") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    em.set_results({em.emit1("stablehlo.broadcast_in_dim", {em.operand(0)},
                             {{"broadcast_dimensions", mlir_i64_array(p.get_ints("dims", name()))}},
                             em.result_type(0))});
  }
  // A no-op when the result has the operand's type (the caller checks).
  std::optional<size_t> identity_operand(const std::vector<std::optional<double>>&,
                                         const Params&) const override {
    return 0;
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const Shape& shape = p.get_ints("shape", name());
    const auto& dims = p.get_ints("dims", name());
    check_dims_nonneg(name(), shape);
    const Type& x = ins[0];
    auto fail = [&](const std::string& why) {
      throw TypeError("broadcast_in_dim: cannot broadcast " + x.str() + " to shape " +
                      shape_str(shape) + " with dims " + ints_str(dims) + ": " + why);
    };
    if (static_cast<int64_t>(dims.size()) != x.ndim())
      fail("need one dim per operand axis (" + std::to_string(x.ndim()) + ")");
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(shape.size()))
        fail("dim " + std::to_string(dims[i]) + " is out of range");
      if (i > 0 && dims[i] <= dims[i - 1]) fail("dims must be strictly increasing");
      int64_t xd = x.shape[i], od = shape[static_cast<size_t>(dims[i])];
      if (xd != 1 && xd != od)
        fail("operand axis " + std::to_string(i) + " has size " + std::to_string(xd) +
             ", expected 1 or " + std::to_string(od));
    }
    return {out_type(x, shape)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Shape& shape = p.get_ints("shape", name());
    const auto& dims = p.get_ints("dims", name());
    return {strided_copy(ins[0], shape, 0, broadcast_strides(ins[0].shape(), shape.size(), dims))};
  }
  MaybeValues jvp(const Values&, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0]) return {std::nullopt};
    return {broadcast_in_dim(*t[0], p.get_ints("shape", name()), p.get_ints("dims", name()))};
  }
  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !differentiable(x[0])) return {std::nullopt};
    const Shape& shape = p.get_ints("shape", name());
    const auto& dims = p.get_ints("dims", name());
    // Sum every output axis that is new or was expanded from size 1; what is left
    // is the operand's non-expanded axes in order, and reshape restores the 1s.
    std::vector<int64_t> axes;
    size_t j = 0;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (j < dims.size() && dims[j] == d) {
        if (x[0].shape()[j] == 1 && shape[static_cast<size_t>(d)] != 1) axes.push_back(d);
        ++j;
      } else {
        axes.push_back(d);
      }
    }
    Value g = axes.empty() ? *ct[0] : sum(*ct[0], axes, false);
    return {reshape(g, x[0].shape())};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t b,
                            const Params& p) const override {
    const Shape& shape = p.get_ints("shape", name());
    const auto& dims = p.get_ints("dims", name());
    if (!ins[0].batched) return {{broadcast_in_dim(ins[0].value, shape, dims), false}};
    std::vector<int64_t> bd{0};
    for (int64_t d : dims) bd.push_back(d + 1);
    return {{broadcast_in_dim(ins[0].value, with_front(b, shape), bd), true}};
  }
};

// ---------------------------------------------------------------------------
class ConcatenatePrim : public Primitive {
 public:
  ConcatenatePrim() : Primitive("concatenate") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    std::vector<std::string> ins;
    for (size_t i = 0; i < em.num_operands(); ++i) ins.push_back(em.operand(i));
    em.set_results({em.emit1("stablehlo.concatenate", ins,
                             {{"dimension", std::to_string(p.get_int("axis", name())) + " : i64"}},
                             em.result_type(0))});
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (ins.empty()) throw TypeError("concatenate: needs at least one operand");
    const int64_t axis = p.get_int("axis", name());
    const Type& f = ins[0];
    if (axis < 0 || axis >= f.ndim())
      throw TypeError("concatenate: axis " + std::to_string(axis) + " is out of range for " +
                      f.str());
    Shape out = f.shape;
    out[static_cast<size_t>(axis)] = 0;
    for (const Type& t : ins) {
      bool ok = t.dtype == f.dtype && t.ndim() == f.ndim();
      for (int64_t d = 0; ok && d < f.ndim(); ++d)
        if (d != axis && t.shape[static_cast<size_t>(d)] != f.shape[static_cast<size_t>(d)])
          ok = false;
      if (!ok)
        throw TypeError("concatenate: operand " + t.str() + " does not match " + f.str() +
                        " (same dtype and shape expected, except along axis " +
                        std::to_string(axis) + ")");
      // Each operand's dim is bounded, but enough operands overflow the sum.
      if (__builtin_add_overflow(out[static_cast<size_t>(axis)], t.shape[static_cast<size_t>(axis)],
                                 &out[static_cast<size_t>(axis)]))
        throw TypeError("concatenate: " + std::to_string(ins.size()) + " operands like " + f.str() +
                        " have more than 2^63 elements along axis " + std::to_string(axis));
    }
    return {out_type(f, out)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const auto axis = static_cast<size_t>(p.get_int("axis", name()));
    Shape shape = ins[0].shape();
    shape[axis] = 0;
    for (const Array& a : ins) shape[axis] += a.shape()[axis];
    Array out(ins[0].dtype(), shape);
    const size_t es = dtype_size(out.dtype());
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    if (out.size() == 0) return {out};
    auto* dst = static_cast<std::byte*>(out.raw());
    for (int64_t o = 0; o < outer; ++o)
      for (const Array& a : ins) {
        size_t chunk = static_cast<size_t>(a.shape()[axis] * inner) * es;
        if (chunk == 0) continue;
        std::memcpy(dst, static_cast<const std::byte*>(a.raw()) + static_cast<size_t>(o) * chunk,
                    chunk);
        dst += chunk;
      }
    return {out};
  }
  MaybeValues jvp(const Values& x, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (std::none_of(t.begin(), t.end(), [](const MaybeValue& v) { return v.has_value(); }))
      return {std::nullopt};
    Values ts;
    for (size_t i = 0; i < x.size(); ++i) ts.push_back(t[i] ? *t[i] : zeros_of(x[i]));
    return {concatenate(ts, p.get_int("axis", name()))};
  }
  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    MaybeValues r(x.size());
    if (!ct[0]) return r;
    const auto axis = static_cast<size_t>(p.get_int("axis", name()));
    std::vector<int64_t> starts(x[0].shape().size(), 0);
    int64_t at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      Shape stops = x[i].shape();
      starts[axis] = at;
      at += stops[axis];
      stops[axis] = at;
      if (differentiable(x[i])) r[i] = slice(*ct[0], starts, stops);
    }
    return r;
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t b,
                            const Params& p) const override {
    const int64_t axis = p.get_int("axis", name());
    Values vs;
    bool any = std::any_of(ins.begin(), ins.end(), [](const Batched& v) { return v.batched; });
    for (const Batched& v : ins) {
      if (!any || v.batched) {
        vs.push_back(v.value);
        continue;
      }
      std::vector<int64_t> dims(v.value.shape().size());
      std::iota(dims.begin(), dims.end(), 1);
      vs.push_back(broadcast_in_dim(v.value, with_front(b, v.value.shape()), dims));
    }
    return {{concatenate(vs, any ? axis + 1 : axis), any}};
  }
};

// ---------------------------------------------------------------------------
class SlicePrim : public Primitive {
 public:
  SlicePrim() : Primitive("slice") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    const auto& starts = p.get_ints("starts", name());
    em.set_results({em.emit1("stablehlo.slice", {em.operand(0)},
                             {{"start_indices", mlir_i64_array(starts)},
                              {"limit_indices", mlir_i64_array(p.get_ints("limits", name()))},
                              {"strides", mlir_i64_array(std::vector<int64_t>(starts.size(), 1))}},
                             em.result_type(0))});
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const auto& starts = p.get_ints("starts", name());
    const auto& limits = p.get_ints("limits", name());
    const Type& x = ins[0];
    auto fail = [&](const std::string& why) {
      throw TypeError("slice: bad bounds starts=" + ints_str(starts) +
                      " limits=" + ints_str(limits) + " for " + x.str() + ": " + why);
    };
    if (static_cast<int64_t>(starts.size()) != x.ndim() ||
        static_cast<int64_t>(limits.size()) != x.ndim())
      fail("need one start and one limit per axis (" + std::to_string(x.ndim()) + ")");
    Shape out;
    for (size_t d = 0; d < starts.size(); ++d) {
      if (starts[d] < 0 || starts[d] > limits[d] || limits[d] > x.shape[d])
        fail("axis " + std::to_string(d) +
             " needs 0 <= start <= limit <= " + std::to_string(x.shape[d]));
      out.push_back(limits[d] - starts[d]);
    }
    return {out_type(x, out)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const auto& starts = p.get_ints("starts", name());
    const auto& limits = p.get_ints("limits", name());
    std::vector<int64_t> st = strides_of(ins[0].shape());
    Shape out;
    int64_t off = 0;
    for (size_t d = 0; d < starts.size(); ++d) {
      out.push_back(limits[d] - starts[d]);
      off += starts[d] * st[d];
    }
    return {strided_copy(ins[0], out, off, st)};
  }
  MaybeValues jvp(const Values&, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0]) return {std::nullopt};
    return {slice(*t[0], p.get_ints("starts", name()), p.get_ints("limits", name()))};
  }
  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !differentiable(x[0])) return {std::nullopt};
    const auto& starts = p.get_ints("starts", name());
    const auto& limits = p.get_ints("limits", name());
    // Pad with zero blocks one axis at a time (concatenate is linear, so this
    // stays differentiable and transposes back to slices).
    Value g = *ct[0];
    const Shape full = x[0].shape();
    for (size_t d = 0; d < full.size(); ++d) {
      int64_t lo = starts[d], hi = full[d] - limits[d];
      if (lo == 0 && hi == 0) continue;
      Values parts;
      Shape s = g.shape();
      if (lo > 0) {
        s[d] = lo;
        parts.push_back(fill(s, 0.0, g.dtype()));
      }
      parts.push_back(g);
      if (hi > 0) {
        s[d] = hi;
        parts.push_back(fill(s, 0.0, g.dtype()));
      }
      g = concatenate(parts, static_cast<int64_t>(d));
    }
    return {g};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t b,
                            const Params& p) const override {
    const auto& starts = p.get_ints("starts", name());
    const auto& limits = p.get_ints("limits", name());
    if (!ins[0].batched) return {{slice(ins[0].value, starts, limits), false}};
    return {{slice(ins[0].value, with_front(0, starts), with_front(b, limits)), true}};
  }
};

}  // namespace

namespace prims {
const Primitive& reshape() {
  static const ReshapePrim p;
  return p;
}
const Primitive& transpose() {
  static const TransposePrim p;
  return p;
}
const Primitive& broadcast_in_dim() {
  static const BroadcastInDimPrim p;
  return p;
}
const Primitive& concatenate() {
  static const ConcatenatePrim p;
  return p;
}
const Primitive& slice() {
  static const SlicePrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(shape_ops) {
  registry.add(prims::reshape());
  registry.add(prims::transpose());
  registry.add(prims::broadcast_in_dim());
  registry.add(prims::concatenate());
  registry.add(prims::slice());
}

// ---- public ops -------------------------------------------------------------

DRX_PUBLIC_OP("reshape", "(x: Value, shape: Shape) -> Value",
              "x with a new shape of the same element count.");
Value reshape(const Value& x, const Shape& shape) {
  const Primitive& p = prims::reshape();
  Shape s = shape;
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1 && infer_at < 0) {
      infer_at = static_cast<int64_t>(i);
    } else if (s[i] < 0) {
      throw TypeError("reshape: bad target shape " + shape_str(shape) + " for " + x.type().str() +
                      " (dimensions must be >= 0, with at most one -1)");
    } else {
      known *= s[i];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || x.size() % known != 0)
      throw TypeError("reshape: cannot reshape " + x.type().str() + " (" +
                      std::to_string(x.size()) + " elements) to shape " + shape_str(shape));
    s[static_cast<size_t>(infer_at)] = x.size() / known;
  }
  if (s == x.shape()) return x;
  return emit1(p, {x}, Params{{"shape", s}});
}

DRX_PUBLIC_OP("transpose", "(x: Value, perm: vector<int64>) -> Value", "x with its axes permuted.");
Value transpose(const Value& x, const std::vector<int64_t>& perm) {
  const Primitive& p = prims::transpose();
  std::vector<int64_t> pm = perm;
  for (int64_t& a : pm)
    if (a < 0 && a >= -x.ndim()) a += x.ndim();
  bool identity = static_cast<int64_t>(pm.size()) == x.ndim();
  for (size_t i = 0; identity && i < pm.size(); ++i) identity = pm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  return emit1(p, {x}, Params{{"perm", pm}});
}

DRX_PUBLIC_OP("move_axis", "(x: Value, source: int64, destination: int64) -> Value",
              "Moves axis source of x to position destination.");
Value move_axis(const Value& x, int64_t from, int64_t to) {
  // Negative axes count from the end; out of range is an error, not a bad insert.
  from = normalize_axis(from, x.ndim(), "move_axis");
  to = normalize_axis(to, x.ndim(), "move_axis");
  if (from == to) return x;
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (i != from) perm.push_back(i);
  perm.insert(perm.begin() + to, from);
  return transpose(x, perm);
}

DRX_PUBLIC_OP("broadcast_in_dim", "(x: Value, shape: Shape, dims: vector<int64>) -> Value",
              "Broadcast with operand dim i becoming output dim dims[i].");
Value broadcast_in_dim(const Value& x, const Shape& shape, const std::vector<int64_t>& dims) {
  const Primitive& p = prims::broadcast_in_dim();
  bool identity = shape == x.shape() && static_cast<int64_t>(dims.size()) == x.ndim();
  for (size_t i = 0; identity && i < dims.size(); ++i)
    identity = dims[i] == static_cast<int64_t>(i);
  if (identity) return x;
  return emit1(p, {x}, Params{{"shape", shape}, {"dims", dims}});
}

DRX_PUBLIC_OP("broadcast_to", "(x: Value, shape: Shape) -> Value",
              "numpy-style broadcast of x to shape.");
Value broadcast_to(const Value& x, const Shape& shape) {
  const int64_t r = x.ndim(), n = static_cast<int64_t>(shape.size());
  bool ok = r <= n;
  std::vector<int64_t> dims;
  for (int64_t i = 0; ok && i < r; ++i) {
    int64_t xd = x.shape()[static_cast<size_t>(i)], od = shape[static_cast<size_t>(n - r + i)];
    if (xd != 1 && xd != od) ok = false;
    dims.push_back(n - r + i);
  }
  for (int64_t d : shape)
    if (d < 0) ok = false;
  if (!ok)
    throw TypeError("broadcast_to: cannot broadcast shape " + shape_str(x.shape()) + " to shape " +
                    shape_str(shape) + " (numpy rules: trailing axes must match or be 1)");
  return broadcast_in_dim(x, shape, dims);
}

DRX_PUBLIC_OP("expand_dims", "(x: Value, axis: int64) -> Value", "Inserts a size-1 axis.");
Value expand_dims(const Value& x, int64_t axis) {
  int64_t a = normalize_axis(axis, x.ndim() + 1, "expand_dims");
  Shape s = x.shape();
  s.insert(s.begin() + a, 1);
  return reshape(x, s);
}

DRX_PUBLIC_OP("squeeze", "(x: Value, axis: int64) -> Value", "Removes a size-1 axis.");
Value squeeze(const Value& x, int64_t axis) {
  int64_t a = normalize_axis(axis, x.ndim(), "squeeze");
  Shape s = x.shape();
  if (s[static_cast<size_t>(a)] != 1)
    throw TypeError("squeeze: axis " + std::to_string(axis) + " of " + x.type().str() +
                    " has size " + std::to_string(s[static_cast<size_t>(a)]) + ", expected 1");
  s.erase(s.begin() + a);
  return reshape(x, s);
}

DRX_PUBLIC_OP("concatenate", "(xs: vector<Value>, axis: int64) -> Value",
              "Joins Values along an axis.");
Value concatenate(const std::vector<Value>& xs, int64_t axis) {
  const Primitive& p = prims::concatenate();
  if (xs.empty()) throw TypeError("concatenate: needs at least one operand");
  if (xs[0].ndim() == 0)
    throw TypeError("concatenate: cannot concatenate scalars (" + xs[0].type().str() + ")");
  int64_t a = normalize_axis(axis, xs[0].ndim(), "concatenate");
  if (xs.size() == 1) return xs[0];
  return emit1(p, xs, Params{{"axis", a}});
}

DRX_PUBLIC_OP("slice", "(x: Value, starts: vector<int64>, stops: vector<int64>) -> Value",
              "The elements from starts up to stops.");
Value slice(const Value& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& stops) {
  const Primitive& p = prims::slice();
  bool identity = stops == x.shape() && starts.size() == stops.size() &&
                  std::all_of(starts.begin(), starts.end(), [](int64_t s) { return s == 0; });
  if (identity) return x;
  return emit1(p, {x}, Params{{"starts", starts}, {"limits", stops}});
}

}  // namespace drx
