// Indexing primitives: take (gather along one axis), its transpose
// scatter_add, and scatter (x.at[indices].set(updates)), plus the one_hot and
// at(...) composites.
//
// Index semantics (all three): an index i along an axis of size n is valid
// for -n <= i < n; negative indices wrap numpy-style (i + n). Anything else
// throws drx::Error at evaluation, naming the index and the axis size.
// scatter and scatter_add take updates of the shape take would give:
// x.shape[:axis] + indices.shape + x.shape[axis+1:].
#include <algorithm>
#include <limits>
#include <numeric>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_indexing);

namespace drx {
namespace {

void check_indices_type(const std::string& op, const Type& t) {
  if (t.dtype != DType::i32 && t.dtype != DType::i64)
    throw TypeError(op + ": indices must be i32 or i64, got " + t.str());
}

int64_t check_axis(const std::string& op, const Type& x, const Params& p) {
  const int64_t axis = p.get_int("axis", op);
  if (axis < 0 || axis >= x.ndim())
    throw TypeError(op + ": axis " + std::to_string(axis) + " is out of range for operand " +
                    x.str());
  return axis;
}

// x.shape[:axis] + indices.shape + x.shape[axis+1:]
Shape gathered_shape(const Shape& x, const Shape& idx, int64_t axis) {
  Shape s(x.begin(), x.begin() + axis);
  s.insert(s.end(), idx.begin(), idx.end());
  s.insert(s.end(), x.begin() + axis + 1, x.end());
  return s;
}

// Indices as validated, wrapped int64 positions along an axis of size n.
std::vector<int64_t> read_indices(const std::string& op, const Array& idx, int64_t n,
                                  int64_t axis) {
  std::vector<int64_t> out(static_cast<size_t>(idx.size()));
  auto convert = [&](auto t) {
    using T = decltype(t);
    const T* src = idx.data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t v = static_cast<int64_t>(src[i]);
      if (v < -n || v >= n)
        throw Error(op + ": index " + std::to_string(v) + " is out of range for axis " +
                    std::to_string(axis) + " of size " + std::to_string(n) + " (valid: -" +
                    std::to_string(n) + " <= index < " + std::to_string(n) + ")");
      out[i] = v < 0 ? v + n : v;
    }
  };
  if (idx.dtype() == DType::i32)
    convert(int32_t{});
  else
    convert(int64_t{});
  return out;
}

// outer = prod(x.shape[:axis]), inner = prod(x.shape[axis+1:])
std::pair<int64_t, int64_t> outer_inner(const Shape& x, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) inner *= x[d];
  return {outer, inner};
}

// Zeros of v's type. Copies the shape first: Value::shape() refers into the
// trace, which emitting may reallocate.
Value zeros_of(const Value& v) {
  Shape s = v.shape();
  return fill(s, 0.0, v.dtype());
}

Value batch_broadcast(const Batched& v, int64_t b) {
  if (v.batched) return v.value;
  const Shape vs = v.value.shape();
  Shape s{b};
  s.insert(s.end(), vs.begin(), vs.end());
  std::vector<int64_t> dims(vs.size());
  std::iota(dims.begin(), dims.end(), 1);
  return broadcast_in_dim(v.value, s, dims);
}

// Batched x [B, ..., n, ...] and batched indices [B, ...] folded into one
// unbatched gather/scatter: the batch axis of x moves next to `axis` and merges
// with it (size B*n), and batch b's indices are offset by b*n. Indices that are
// out of range for n are mapped to B*n so that evaluation still rejects them
// (the message then names the merged axis).
struct Folded {
  Value x;        // x.shape[:axis] + [B*n] + x.shape[axis+1:]
  Value indices;  // same shape as the batched indices
};
Folded fold_batch(const Value& xb, const Value& ib, int64_t axis, int64_t b) {
  const int64_t n = xb.shape()[static_cast<size_t>(axis + 1)];
  Value xm = move_axis(xb, 0, axis);
  Shape s = xm.shape();
  s[static_cast<size_t>(axis)] = b * n;
  s.erase(s.begin() + axis + 1);
  xm = reshape(xm, s);
  DType it = ib.dtype();
  const Shape is = ib.shape();
  Value nn = scalar_like(ib, static_cast<double>(n));
  Value valid = where(greater_equal(ib, -nn), less(ib, nn), fill(is, 0.0, DType::bool_));
  Value wrapped = where(less(ib, scalar_like(ib, 0.0)), ib + nn, ib);
  Value offset = iota(is, 0, it) * nn;
  Value idx = where(valid, wrapped + offset, fill(is, static_cast<double>(b * n), it));
  return {xm, idx};
}

// Splits the merged axis of a folded result back into [B, n] and moves B to the front.
Value unfold_batch(const Value& y, int64_t axis, int64_t b, int64_t n) {
  Shape s = y.shape();
  s[static_cast<size_t>(axis)] = n;
  s.insert(s.begin() + axis, b);
  return move_axis(reshape(y, s), axis, 0);
}

// The type of scatter and scatter_add: x's, once the indices and the updates
// are checked against it.
Type scatter_type(const std::string& op, const std::vector<Type>& ins, const Params& p) {
  if (ins.size() != 3)
    throw TypeError(op + ": expected 3 operands (x, indices, updates), got " +
                    std::to_string(ins.size()));
  const Type &x = ins[0], &idx = ins[1], &upd = ins[2];
  check_indices_type(op, idx);
  int64_t axis = check_axis(op, x, p);
  Shape want = gathered_shape(x.shape, idx.shape, axis);
  if (upd.dtype != x.dtype || upd.shape != want)
    throw TypeError(op + ": updates " + upd.str() + " do not fit operand " + x.str() +
                    " and indices " + idx.str() + " along axis " + std::to_string(axis) +
                    " (expected " + Type(x.dtype, want).str() + ")");
  return x;
}

// ---- StableHLO ---------------------------------------------------------------
// take lowers to stablehlo.gather and scatter/scatter_add to stablehlo.scatter,
// one slice along `axis` per index (index_vector_dim = the indices' rank).
// Indices are first wrapped as read_indices wraps them (i < 0 becomes i + n),
// so every index drx accepts is in [0, n), where the spec's gather and
// scatter read and write exactly the slices eval does. Indices outside
// [-n, n), which eval rejects, have no drx result to keep: the exported
// gather clamps them and the exported scatter skips them (the spec's rules).

// i < 0 ? i + n : i, elementwise, for indices `idx` of type t.
std::string wrapped_indices(StableHloEmitter& em, std::string idx, const Type& indices, int64_t n) {
  Type t(indices.dtype, indices.shape);
  if (t.dtype == DType::i32 && n > std::numeric_limits<int32_t>::max()) {
    t.dtype = DType::i64;  // i + n would not fit
    idx = em.emit1("stablehlo.convert", {idx}, {}, t);
  }
  const std::string negative = emit_compare(em, "LT", idx, em.splat(0, t.dtype, t.shape), t);
  const std::string shifted =
      em.emit1("stablehlo.add", {idx, em.splat(static_cast<double>(n), t.dtype, t.shape)}, {}, t);
  return em.emit1("stablehlo.select", {negative, shifted, idx}, {}, t);
}

// The positions of x's axes other than `axis` in the gathered shape
// x.shape[:axis] + indices.shape + x.shape[axis+1:].
std::vector<int64_t> window_dims(int64_t rank, int64_t axis, int64_t index_rank) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) dims.push_back(d < axis ? d : d - 1 + index_rank);
  return dims;
}

// `key = [1, 2]`, or nothing for an empty list (as StableHLO prints them).
std::string dims_field(const char* key, const std::vector<int64_t>& v) {
  if (v.empty()) return "";
  std::string s = std::string(key) + " = [";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "], ";
}

// #stablehlo.gather<...> or #stablehlo.scatter<...> for slices along `axis`
// of an operand of rank `rank`, indexed by indices of rank `index_rank`.
std::string dimension_numbers(bool gather, int64_t rank, int64_t axis, int64_t index_rank) {
  const std::vector<int64_t> windows = window_dims(rank, axis, index_rank);
  const std::string a = "[" + std::to_string(axis) + "], ";
  const std::string ivd = "index_vector_dim = " + std::to_string(index_rank) + ">";
  if (gather)
    return "#stablehlo.gather<" + dims_field("offset_dims", windows) +
           "collapsed_slice_dims = " + a + "start_index_map = " + a + ivd;
  return "#stablehlo.scatter<" + dims_field("update_window_dims", windows) +
         "inserted_window_dims = " + a + "scatter_dims_to_operand_dims = " + a + ivd;
}

// stablehlo.scatter of the equation's (x, indices, updates) along `axis`; its
// update computation returns the update (Set) or adds it. The spec leaves the
// order of updates to one position open; drx applies them in index order
// (row-major over the indices), so a repeated index keeps the last update
// (Set) or sums in that order, and the importer maps this form back to drx's
// scatter and scatter_add.
void lower_scatter(StableHloEmitter& em, bool set, int64_t axis) {
  const Type &x = em.operand_type(0), &indices = em.operand_type(1);
  if (num_elements(x.shape) == 0 || num_elements(em.operand_type(2).shape) == 0) {
    em.set_results({em.operand(0)});  // nothing is written
    return;
  }
  const std::string idx =
      wrapped_indices(em, em.operand(1), indices, x.shape[static_cast<size_t>(axis)]);
  const Type scalar(x.dtype, {});
  MlirRegion body{
      {scalar, scalar}, [set, scalar](StableHloEmitter& b, const std::vector<std::string>& args) {
        if (set) return std::vector<std::string>{args[1]};
        return std::vector<std::string>{b.emit1("stablehlo.add", {args[0], args[1]}, {}, scalar)};
      }};
  em.set_results({em.emit1(
      "stablehlo.scatter", {em.operand(0), idx, em.operand(2)},
      {{"indices_are_sorted", "false"},
       {"scatter_dimension_numbers", dimension_numbers(false, x.ndim(), axis, indices.ndim())},
       {"unique_indices", "false"}},
      Type(x.dtype, x.shape), {body})});
}

// ---------------------------------------------------------------------------
class TakePrim : public Primitive {
 public:
  TakePrim() : Primitive("take") {}
  // stablehlo.gather of one slice of x per (wrapped) index.
  void lower(StableHloEmitter& em, const Params& p) const override {
    const int64_t axis = p.get_int("axis", name());
    const Type &x = em.operand_type(0), &indices = em.operand_type(1);
    const Type out(em.result_type(0).dtype, em.result_type(0).shape);
    if (num_elements(out.shape) == 0) {  // (x may be empty along the axis: no valid slice)
      em.set_results({em.constant(Array(out.dtype, out.shape))});
      return;
    }
    Shape sizes = x.shape;
    sizes[static_cast<size_t>(axis)] = 1;
    const std::string idx =
        wrapped_indices(em, em.operand(1), indices, x.shape[static_cast<size_t>(axis)]);
    em.set_results(
        {em.emit1("stablehlo.gather", {em.operand(0), idx},
                  {{"dimension_numbers", dimension_numbers(true, x.ndim(), axis, indices.ndim())},
                   {"indices_are_sorted", "false"},
                   {"slice_sizes", mlir_i64_array(sizes)}},
                  out)});
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (ins.size() != 2)
      throw TypeError("take: expected 2 operands (x, indices), got " + std::to_string(ins.size()));
    check_indices_type(name(), ins[1]);
    int64_t axis = check_axis(name(), ins[0], p);
    return {Type(ins[0].dtype, gathered_shape(ins[0].shape, ins[1].shape, axis), ins[0].placement)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Array& x = ins[0];
    const int64_t axis = p.get_int("axis", name());
    const int64_t n = x.shape()[static_cast<size_t>(axis)];
    std::vector<int64_t> idx = read_indices(name(), ins[1], n, axis);
    Array out(x.dtype(), gathered_shape(x.shape(), ins[1].shape(), axis));
    // Not a structured binding: clang before 16 cannot capture one in the lambda below.
    const std::pair<int64_t, int64_t> oi = outer_inner(x.shape(), axis);
    const int64_t outer = oi.first, inner = oi.second;
    const auto m = static_cast<int64_t>(idx.size());
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      const T* src = x.data<T>();
      T* dst = out.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < m; ++j) {
          const T* s = src + (o * n + idx[static_cast<size_t>(j)]) * inner;
          std::copy(s, s + inner, dst + (o * m + j) * inner);
        }
    });
    return {out};
  }
  MaybeValues jvp(const Values& in, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0]) return {std::nullopt};
    return {take(*t[0], in[1], p.get_int("axis", name()))};
  }
  MaybeValues vjp(const Values& in, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !is_floating(in[0].dtype())) return {std::nullopt, std::nullopt};
    return {scatter_add(zeros_of(in[0]), in[1], *ct[0], p.get_int("axis", name())), std::nullopt};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t b,
                            const Params& p) const override {
    const int64_t axis = p.get_int("axis", name());
    const Batched &x = ins[0], &idx = ins[1];
    if (!idx.batched) return {{take(x.value, idx.value, x.batched ? axis + 1 : axis), x.batched}};
    if (!x.batched) {
      // The batch of the indices lands at position `axis` of the result.
      return {{move_axis(take(x.value, idx.value, axis), axis, 0), true}};
    }
    Folded f = fold_batch(x.value, idx.value, axis, b);
    return {{move_axis(take(f.x, f.indices, axis), axis, 0), true}};
  }
};

// The result of scatter (Set) or scatter_add: x with each update combined
// into its position, in index order (row-major over the indices).
template <bool Set>
Array scattered(const std::string& op, const std::vector<Array>& ins, const Params& p) {
  const Array &x = ins[0], &upd = ins[2];
  const int64_t axis = p.get_int("axis", op);
  const int64_t n = x.shape()[static_cast<size_t>(axis)];
  std::vector<int64_t> idx = read_indices(op, ins[1], n, axis);
  Array out(x.dtype(), x.shape());
  // Not a structured binding: clang before 16 cannot capture one in the lambda below.
  const std::pair<int64_t, int64_t> oi = outer_inner(x.shape(), axis);
  const int64_t outer = oi.first, inner = oi.second;
  const auto m = static_cast<int64_t>(idx.size());
  dispatch_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    T* dst = out.data<T>();
    std::copy(x.data<T>(), x.data<T>() + x.size(), dst);
    const T* u = upd.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < m; ++j) {
        T* d = dst + (o * n + idx[static_cast<size_t>(j)]) * inner;
        const T* s = u + (o * m + j) * inner;
        if constexpr (Set)
          std::copy(s, s + inner, d);
        else
          for (int64_t k = 0; k < inner; ++k) d[k] = static_cast<T>(d[k] + s[k]);
      }
  });
  return out;
}

// vmap of scatter or scatter_add (`prim`): an unbatched operand is broadcast
// over the batch; batched indices fold the batch into the axis, so each
// batch writes its own positions in its own index order.
Value batched_scatter(const Primitive& prim, const std::vector<Batched>& ins, int64_t b,
                      int64_t axis) {
  const Batched &x = ins[0], &idx = ins[1], &upd = ins[2];
  auto apply = [&](const Value& xv, const Value& iv, const Value& uv, int64_t a) {
    return emit1(prim, {xv, iv, uv}, Params{{"axis", a}});
  };
  Value xb = batch_broadcast(x, b), ub = batch_broadcast(upd, b);
  if (!idx.batched) return apply(xb, idx.value, ub, axis + 1);
  // Updates [B] + x[:axis] + I + rest become x[:axis] + [B] + I + rest, which is
  // exactly the gathered shape of the folded operand with indices [B] + I.
  Folded f = fold_batch(xb, idx.value, axis, b);
  Value y = apply(f.x, f.indices, move_axis(ub, 0, axis), axis);
  return unfold_batch(y, axis, b, xb.shape()[static_cast<size_t>(axis + 1)]);
}

class ScatterAddPrim : public Primitive {
 public:
  ScatterAddPrim() : Primitive("scatter_add") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    lower_scatter(em, false, p.get_int("axis", name()));
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    Type x = scatter_type(name(), ins, p);
    if (x.dtype == DType::bool_)
      throw TypeError("scatter_add: operand " + x.str() + " must be numeric, not bool");
    return {x};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    return {scattered<false>(name(), ins, p)};
  }
  MaybeValues jvp(const Values& in, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    const int64_t axis = p.get_int("axis", name());
    if (!t[2]) return {t[0]};
    return {scatter_add(t[0] ? *t[0] : zeros_of(in[0]), in[1], *t[2], axis)};
  }
  MaybeValues vjp(const Values& in, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !is_floating(in[0].dtype())) return {std::nullopt, std::nullopt, std::nullopt};
    return {ct[0], std::nullopt, take(*ct[0], in[1], p.get_int("axis", name()))};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t b,
                            const Params& p) const override {
    const int64_t axis = p.get_int("axis", name());
    if (!ins[0].batched && !ins[1].batched && !ins[2].batched)
      return {{scatter_add(ins[0].value, ins[1].value, ins[2].value, axis), false}};
    return {{batched_scatter(*this, ins, b, axis), true}};
  }
};

// Which updates of a scatter land: where an index repeats, only the last one
// in index order. A bool mask of the updates' shape: position j of the
// indices wins iff it is the last writer at its index, found by scattering
// the positions themselves.
Value winning_updates(const Value& indices, int64_t n, int64_t axis, const Shape& updates) {
  const Shape is = indices.shape();
  Value order = reshape(arange(num_elements(is), DType::i64), is);
  Value last_writer = scatter(fill({n}, -1.0, DType::i64), indices, order, 0);
  Value wins = equal(take(last_writer, indices, 0), order);
  std::vector<int64_t> dims(is.size());
  std::iota(dims.begin(), dims.end(), axis);
  return broadcast_in_dim(wins, updates, dims);
}

// scatter(x, indices, updates): x.at[indices].set(updates) along `axis`.
// Repeated indices: the last update in index order wins (deterministically;
// that update alone gets the gradient).
class ScatterPrim : public Primitive {
 public:
  ScatterPrim() : Primitive("scatter") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    lower_scatter(em, true, p.get_int("axis", name()));
  }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    return {scatter_type(name(), ins, p)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    return {scattered<true>(name(), ins, p)};
  }
  MaybeValues jvp(const Values& in, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if ((!t[0] && !t[2]) || !is_floating(in[0].dtype())) return {std::nullopt};
    return {scatter(t[0] ? *t[0] : zeros_like(in[0]), in[1], t[2] ? *t[2] : zeros_like(in[2]),
                    p.get_int("axis", name()))};
  }
  // x's cotangent is ct where nothing was written; the updates' is ct at
  // their positions, for the updates that landed.
  MaybeValues vjp(const Values& in, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !is_floating(in[0].dtype())) return {std::nullopt, std::nullopt, std::nullopt};
    const int64_t axis = p.get_int("axis", name());
    Value ct_x = scatter(*ct[0], in[1], zeros_like(in[2]), axis);
    Value ct_u = take(*ct[0], in[1], axis);
    if (in[1].size() > 1) {
      const Shape us = ct_u.shape();
      Value wins = winning_updates(in[1], in[0].shape()[static_cast<size_t>(axis)], axis, us);
      ct_u = where(wins, ct_u, zeros_like(ct_u));
    }
    return {ct_x, std::nullopt, ct_u};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t b,
                            const Params& p) const override {
    const int64_t axis = p.get_int("axis", name());
    if (!ins[0].batched && !ins[1].batched && !ins[2].batched)
      return {{scatter(ins[0].value, ins[1].value, ins[2].value, axis), false}};
    return {{batched_scatter(*this, ins, b, axis), true}};
  }
};

}  // namespace

namespace prims {
const Primitive& take() {
  static const TakePrim p;
  return p;
}
const Primitive& scatter_add() {
  static const ScatterAddPrim p;
  return p;
}
const Primitive& scatter() {
  static const ScatterPrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(indexing) {
  registry.add(prims::take());
  registry.add(prims::scatter_add());
  registry.add(prims::scatter());
}

DRX_PUBLIC_OP("take", "(x: Value, indices: Value, axis: int64 = 0) -> Value",
              "Gathers x along axis at integer indices.");
Value take(const Value& x, const Value& indices, int64_t axis) {
  const Primitive& p = prims::take();
  if (x.ndim() == 0) throw TypeError("take: operand " + x.type().str() + " is a scalar");
  int64_t a = normalize_axis(axis, x.ndim(), "take");
  return emit1(p, {x, indices}, Params{{"axis", a}});
}

DRX_PUBLIC_OP("scatter_add", "(x: Value, indices: Value, updates: Value, axis: int64 = 0) -> Value",
              "Adds updates into x at indices along axis (the transpose of take).");
Value scatter_add(const Value& x, const Value& indices, const Value& updates, int64_t axis) {
  const Primitive& p = prims::scatter_add();
  if (x.ndim() == 0) throw TypeError("scatter_add: operand " + x.type().str() + " is a scalar");
  int64_t a = normalize_axis(axis, x.ndim(), "scatter_add");
  return emit1(p, {x, indices, updates}, Params{{"axis", a}});
}

DRX_PUBLIC_OP("scatter", "(x: Value, indices: Value, updates: Value, axis: int64 = 0) -> Value",
              "x with updates written at indices along axis; the last of repeated indices wins.");
Value scatter(const Value& x, const Value& indices, const Value& updates, int64_t axis) {
  const Primitive& p = prims::scatter();
  if (x.ndim() == 0) throw TypeError("scatter: operand " + x.type().str() + " is a scalar");
  int64_t a = normalize_axis(axis, x.ndim(), "scatter");
  return emit1(p, {x, indices, updates}, Params{{"axis", a}});
}

Value IndexedUpdate::get() const { return take(x, indices, axis); }
Value IndexedUpdate::set(const Value& updates) const { return scatter(x, indices, updates, axis); }
Value IndexedUpdate::add(const Value& updates) const {
  return scatter_add(x, indices, updates, axis);
}
DRX_PUBLIC_OP("at", "(x: Value, indices: Value, axis: int64 = 0) -> IndexedUpdate",
              "x.at[indices] along axis: .get() is take, .set(u) scatter, .add(u) scatter_add.");
IndexedUpdate at(const Value& x, const Value& indices, int64_t axis) { return {x, indices, axis}; }

DRX_PUBLIC_OP("one_hot", "(labels: Value, n: int64, dtype: DType = f32) -> Value",
              "One-hot encoding of integer labels over n classes.");
Value one_hot(const Value& labels, int64_t n, DType dtype) {
  if (!is_integer(labels.dtype()))
    throw TypeError("one_hot: labels must be integer, got " + labels.type().str());
  if (n < 0) throw TypeError("one_hot: number of classes " + std::to_string(n) + " is negative");
  Shape s = labels.shape();
  s.push_back(n);
  // Labels outside [0, n) match no class and give an all-zero row (as JAX).
  Value classes = iota(s, labels.ndim(), labels.dtype());
  return astype(equal(expand_dims(labels, -1), classes), dtype);
}

}  // namespace drx
