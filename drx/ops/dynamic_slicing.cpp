// dynamic_slice and dynamic_update_slice: windows at run-time offsets, with
// StableHLO's clamping (each start is clamped so that the window fits).
//
// Operands: dynamic_slice(x, start_0, ..., start_{r-1}) [sizes];
// dynamic_update_slice(x, update, start_0, ..., start_{r-1}). The starts are
// integer scalars and carry no derivative; the rules are each other's
// transposes. Under vmap with batched starts, the window is a gather per axis
// (dynamic_slice) or a select under a window mask (dynamic_update_slice).
#include <algorithm>
#include <cstring>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_dynamic_slicing);

namespace drx {
namespace {

void check_starts(const std::string& op, const std::vector<Type>& ins, size_t first,
                  const Type& x) {
  if (ins.size() != first + x.shape.size())
    throw TypeError(op + ": " + x.str() + " needs " + std::to_string(x.shape.size()) +
                    " start indices, got " + std::to_string(ins.size() - first));
  for (size_t i = first; i < ins.size(); ++i)
    if (!is_integer(ins[i].dtype) || !ins[i].shape.empty() || !ins[i].placement.empty())
      throw TypeError(op + ": start index " + std::to_string(i - first) +
                      " must be an integer scalar, got " + ins[i].str());
}

// The clamped starts of a window of `sizes` in `shape`.
std::vector<int64_t> clamped_starts(const std::vector<Array>& ins, size_t first, const Shape& shape,
                                    const Shape& sizes) {
  std::vector<int64_t> s;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t v = static_cast<int64_t>(ins[first + d].element_as_double(0));
    s.push_back(std::clamp<int64_t>(v, 0, shape[d] - sizes[d]));
  }
  return s;
}

// Calls fn(flat index into `big`, flat index into the window) for every window element.
template <class Fn>
void for_window(const Shape& big, const Shape& window, const std::vector<int64_t>& start, Fn fn) {
  const int64_t n = num_elements(window);
  const std::vector<int64_t> st = strides_of(big);
  std::vector<int64_t> idx(window.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = 0;
    for (size_t d = 0; d < window.size(); ++d) at += (start[d] + idx[d]) * st[d];
    fn(at, i);
    for (size_t d = window.size(); d-- > 0;)
      if (++idx[d] < window[d])
        break;
      else
        idx[d] = 0;
  }
}

Values starts_of(const Values& ins, size_t first) { return Values(ins.begin() + first, ins.end()); }

Value as_batched(const Batched& b, int64_t batch) {
  if (b.batched) return b.value;
  Shape s = b.value.shape();
  s.insert(s.begin(), batch);
  std::vector<int64_t> dims;
  for (int64_t d = 1; d <= b.value.ndim(); ++d) dims.push_back(d);
  return broadcast_in_dim(b.value, s, dims);
}

// Per-example starts [B] as i64, clamped so that a window of size fits in n.
Value batched_start(const Batched& s, int64_t batch, int64_t n, int64_t size) {
  Value v = astype(as_batched(s, batch), DType::i64);
  return minimum(maximum(v, 0.0), static_cast<double>(n - size));
}

// xb [B, ...] sliced per example: window of sizes at per-example starts [B].
Value gather_windows(Value xb, const std::vector<Value>& starts, const Shape& sizes) {
  const int64_t batch = xb.shape()[0];
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t axis = static_cast<int64_t>(d) + 1, n = xb.shape()[static_cast<size_t>(axis)];
    Value moved = move_axis(xb, axis, 1);
    Shape flat = moved.shape();
    flat.erase(flat.begin());
    flat[0] = batch * n;
    Value rows = expand_dims(starts[d] + iota({batch}, 0, DType::i64) * static_cast<double>(n), 1);
    Value idx = rows + expand_dims(iota({sizes[d]}, 0, DType::i64), 0);  // [B, size]
    xb = move_axis(take(reshape(moved, flat), idx, 0), 1, axis);
  }
  return xb;
}

class DynamicSlicePrim : public Primitive {
 public:
  DynamicSlicePrim() : Primitive("dynamic_slice") {}
  void lower(StableHloEmitter& em, const Params& p) const override {
    std::vector<std::string> ins;
    for (size_t i = 0; i < em.num_operands(); ++i) ins.push_back(em.operand(i));
    em.set_results({em.emit1("stablehlo.dynamic_slice", ins,
                             {{"slice_sizes", mlir_i64_array(p.get_ints("sizes", name()))}},
                             em.result_type(0))});
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (ins.empty()) throw TypeError("dynamic_slice: needs an operand");
    const Type& x = ins[0];
    check_starts(name(), ins, 1, x);
    const auto& sizes = p.get_ints("sizes", name());
    if (sizes.size() != x.shape.size())
      throw TypeError("dynamic_slice: sizes " + shape_str(sizes) + " need one entry per axis of " +
                      x.str());
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] < 0 || sizes[d] > x.shape[d])
        throw TypeError("dynamic_slice: size " + std::to_string(sizes[d]) + " of axis " +
                        std::to_string(d) + " must be in [0, " + std::to_string(x.shape[d]) +
                        "] for " + x.str());
    return {Type(x.dtype, sizes, x.placement)};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Shape sizes = p.get_ints("sizes", name());
    const Array& x = ins[0];
    Array out(x.dtype(), sizes);
    const size_t bytes = dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out.raw());
    for_window(
        x.shape(), sizes, clamped_starts(ins, 1, x.shape(), sizes),
        [&](int64_t at, int64_t i) { std::memcpy(dst + i * bytes, src + at * bytes, bytes); });
    return {out};
  }

  MaybeValues jvp(const Values& ins, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    MaybeValues out{std::nullopt};
    if (t[0]) out[0] = dynamic_slice(*t[0], starts_of(ins, 1), p.get_ints("sizes", name()));
    return out;
  }

  MaybeValues vjp(const Values& ins, const Values&, const MaybeValues& ct,
                  const Params&) const override {
    MaybeValues out(ins.size(), std::nullopt);
    if (ct[0] && is_floating(ins[0].dtype()))
      out[0] = dynamic_update_slice(zeros_like(ins[0]), *ct[0], starts_of(ins, 1));
    return out;
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch,
                            const Params& p) const override {
    const Shape sizes = p.get_ints("sizes", name());
    bool starts_batched = false;
    for (size_t i = 1; i < ins.size(); ++i) starts_batched = starts_batched || ins[i].batched;
    if (!starts_batched) {
      Values starts;
      for (size_t i = 1; i < ins.size(); ++i) starts.push_back(ins[i].value);
      if (!ins[0].batched) return {{dynamic_slice(ins[0].value, starts, sizes), false}};
      starts.insert(starts.begin(), fill({}, 0, ins[1].value.dtype()));
      Shape s = sizes;
      s.insert(s.begin(), batch);
      return {{dynamic_slice(ins[0].value, starts, s), true}};
    }
    Value xb = as_batched(ins[0], batch);
    std::vector<Value> starts;
    for (size_t d = 0; d < sizes.size(); ++d)
      starts.push_back(batched_start(ins[d + 1], batch, xb.shape()[d + 1], sizes[d]));
    return {{gather_windows(xb, starts, sizes), true}};
  }
};

class DynamicUpdateSlicePrim : public Primitive {
 public:
  DynamicUpdateSlicePrim() : Primitive("dynamic_update_slice") {}
  void lower(StableHloEmitter& em, const Params&) const override {
    std::vector<std::string> ins;
    for (size_t i = 0; i < em.num_operands(); ++i) ins.push_back(em.operand(i));
    em.set_results({em.emit1("stablehlo.dynamic_update_slice", ins, {}, em.result_type(0))});
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    if (ins.size() < 2) throw TypeError("dynamic_update_slice: needs an operand and an update");
    const Type &x = ins[0], &u = ins[1];
    check_starts(name(), ins, 2, x);
    bool fits = u.dtype == x.dtype && u.shape.size() == x.shape.size() && u.placement.empty();
    for (size_t d = 0; fits && d < u.shape.size(); ++d) fits = u.shape[d] <= x.shape[d];
    if (!fits)
      throw TypeError("dynamic_update_slice: the update " + u.str() +
                      " must be an unplaced array of the operand's dtype and rank that fits in " +
                      x.str());
    return {x};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    const Array &x = ins[0], &u = ins[1];
    Array out(x.dtype(), x.shape());
    if (out.nbytes() > 0) std::memcpy(out.raw(), x.raw(), out.nbytes());
    const size_t bytes = dtype_size(x.dtype());
    const char* src = static_cast<const char*>(u.raw());
    char* dst = static_cast<char*>(out.raw());
    for_window(
        x.shape(), u.shape(), clamped_starts(ins, 2, x.shape(), u.shape()),
        [&](int64_t at, int64_t i) { std::memcpy(dst + at * bytes, src + i * bytes, bytes); });
    return {out};
  }

  MaybeValues jvp(const Values& ins, const MaybeValues& t, const Values&,
                  const Params&) const override {
    if (!t[0] && !t[1]) return {std::nullopt};
    return {dynamic_update_slice(t[0] ? *t[0] : zeros_like(ins[0]),
                                 t[1] ? *t[1] : zeros_like(ins[1]), starts_of(ins, 2))};
  }

  MaybeValues vjp(const Values& ins, const Values&, const MaybeValues& ct,
                  const Params&) const override {
    MaybeValues out(ins.size(), std::nullopt);
    if (!ct[0] || !is_floating(ins[0].dtype())) return out;
    const Values starts = starts_of(ins, 2);
    out[0] = dynamic_update_slice(*ct[0], zeros_like(ins[1]), starts);
    out[1] = dynamic_slice(*ct[0], starts, ins[1].shape());
    return out;
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch,
                            const Params&) const override {
    bool starts_batched = false;
    for (size_t i = 2; i < ins.size(); ++i) starts_batched = starts_batched || ins[i].batched;
    if (!ins[0].batched && !ins[1].batched && !starts_batched) {
      Values starts;
      for (size_t i = 2; i < ins.size(); ++i) starts.push_back(ins[i].value);
      return {{dynamic_update_slice(ins[0].value, ins[1].value, starts), false}};
    }
    Value xb = as_batched(ins[0], batch), ub = as_batched(ins[1], batch);
    if (!starts_batched) {
      Values starts{fill({}, 0, ins[2].value.dtype())};
      for (size_t i = 2; i < ins.size(); ++i) starts.push_back(ins[i].value);
      return {{dynamic_update_slice(xb, ub, starts), true}};
    }
    // The update placed at each example's start (a window of the update padded by n - u
    // on both sides), kept where the window mask is true.
    const Shape xs = xb.shape(), us = ub.shape();
    std::vector<int64_t> lo{0}, zero(xs.size(), 0);
    std::vector<Value> shifted;
    Value mask;
    for (size_t d = 1; d < xs.size(); ++d) {
      const int64_t n = xs[d], u = us[d];
      lo.push_back(n - u);
      Value s = batched_start(ins[d + 1], batch, n, u);  // [B]
      shifted.push_back(scalar_like(s, static_cast<double>(n - u)) - s);
      Value pos = iota(xs, static_cast<int64_t>(d), DType::i64);
      Value sb = broadcast_in_dim(s, xs, {0});
      Value in = bitwise_and(greater_equal(pos, sb), less(pos, sb + static_cast<double>(u)));
      mask = d == 1 ? in : bitwise_and(mask, in);
    }
    Value padded = pad(ub, fill({}, 0.0, ub.dtype()), lo, lo, zero);
    Shape window(xs.begin() + 1, xs.end());
    Value placed = gather_windows(padded, shifted, window);
    return {{where(mask, placed, xb), true}};
  }
};

}  // namespace

namespace prims {
const Primitive& dynamic_slice() {
  static const DynamicSlicePrim p;
  return p;
}
const Primitive& dynamic_update_slice() {
  static const DynamicUpdateSlicePrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(dynamic_slicing) {
  registry.add(prims::dynamic_slice());
  registry.add(prims::dynamic_update_slice());
}

DRX_PUBLIC_OP("dynamic_slice", "(x: Value, start: vector<Value>, sizes: vector<int64>) -> Value",
              "sizes[d] elements from scalar start[d], each start clamped into range.");
Value dynamic_slice(const Value& x, const std::vector<Value>& start,
                    const std::vector<int64_t>& sizes) {
  Values ins{x};
  ins.insert(ins.end(), start.begin(), start.end());
  return emit1(prims::dynamic_slice(), ins, Params{{"sizes", sizes}});
}

DRX_PUBLIC_OP("dynamic_update_slice", "(x: Value, update: Value, start: vector<Value>) -> Value",
              "x with update written at start (clamped into range).");
Value dynamic_update_slice(const Value& x, const Value& update, const std::vector<Value>& start) {
  Values ins{x, update};
  ins.insert(ins.end(), start.begin(), start.end());
  return emit1(prims::dynamic_update_slice(), ins);
}

}  // namespace drx
