// sort and scatter as drx ops. Their regions are not run but read: matched
// against the forms JAX and drx's exporter write, and mapped to drx's sort,
// scatter and scatter_add. Any other form throws naming the op and its line.
//
// sort: one or more operands of one shape, sorted along `dimension` by a
// comparator that is one compare LT or GT of one operand's (lhs, rhs)
// elements, each side as written or canonicalised as jnp.sort writes it
// (select(x == 0, 0, x) and select(x != x, NaN, x)), of compare type FLOAT,
// TOTALORDER, SIGNED or UNSIGNED. The sort is stable (a valid order where
// is_stable is false too). A FLOAT compare leaves NaN unordered, which the
// spec leaves to the implementation: drx's order puts NaNs last (ascending)
// or first (descending), as jnp. A TOTALORDER compare of canonical keys is
// drx's order exactly; of other keys it sorts their total-order bit keys.
//
// scatter: one input, its indices and its updates, writing whole slices along
// one axis (inserted_window_dims = scatter_dims_to_operand_dims = [axis], no
// batching dims, windows as large as the input's other axes), with an update
// computation that returns the update (drx's scatter) or adds it (drx's
// scatter_add; on i1 add is or). The spec leaves the order of updates to one
// position open: drx applies them in index order (row-major over the
// indices), so the last one wins, or they sum in that order. An index out of
// range skips its update (the spec's rule).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "drx/array/error.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"
#include "drx/stablehlo/import_internal.h"

namespace drx::stablehlo::detail {
namespace {

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The op of block `b` that defines `name`, or nullptr.
const Operation* defining(const Block& b, const std::string& name) {
  for (const Operation& op : b.ops)
    for (const std::string& r : op.results)
      if (r == name) return &op;
  return nullptr;
}

int64_t argument_index(const Block& b, const std::string& name) {
  for (size_t i = 0; i < b.arguments.size(); ++i)
    if (b.arguments[i].first == name) return static_cast<int64_t>(i);
  return -1;
}

std::string text_of(const Operation& op, const char* name) {
  const Attribute* a = find_attribute(op.attributes, name);
  return a ? a->text : "";
}

// The value of a one-element constant (also broadcast or reshaped), or nullopt.
std::optional<double> scalar_constant(const Block& b, const std::string& name) {
  const Operation* op = defining(b, name);
  while (op && (op->name == "stablehlo.broadcast_in_dim" || op->name == "stablehlo.reshape") &&
         op->operands.size() == 1)
    op = defining(b, op->operands[0]);
  if (!op || op->name != "stablehlo.constant" || op->result_types.size() != 1) return std::nullopt;
  const Attribute* v = find_attribute(op->attributes, "value");
  if (!v || v->kind != Attribute::Kind::dense) return std::nullopt;
  const Array a = dense_array(*v, op->result_types[0], op->line);
  if (a.size() != 1) return std::nullopt;
  return a.element_as_double(0);
}

// ---- sort ------------------------------------------------------------------

// How a comparator sees one side of a compare: block argument `arg`, with
// zeros made one zero (`zero`: -0.0 ties with 0.0) and NaNs made one NaN of
// sign `nan` (+1 or -1; 0 where NaNs are kept).
struct Key {
  int64_t arg = -1;
  bool zero = false;
  int nan = 0;
};

std::optional<Key> key_of(const Block& b, const std::string& name, int depth = 0) {
  if (const int64_t k = argument_index(b, name); k >= 0) return Key{k};
  const Operation* op = defining(b, name);
  if (depth > 8 || !op || op->name != "stablehlo.select" || op->operands.size() != 3)
    return std::nullopt;
  std::optional<Key> inner = key_of(b, op->operands[2], depth + 1);
  const Operation* cond = defining(b, op->operands[0]);
  const std::optional<double> replacement = scalar_constant(b, op->operands[1]);
  if (!inner || !replacement || !cond || cond->name != "stablehlo.compare" ||
      cond->operands.size() != 2)
    return std::nullopt;
  // Whether `v` is the same operand's element (as written or canonicalised).
  auto same = [&](const std::string& v) {
    const std::optional<Key> k = key_of(b, v, depth + 1);
    return k && k->arg == inner->arg;
  };
  const std::string dir = text_of(*cond, "comparison_direction");
  const std::string &c0 = cond->operands[0], &c1 = cond->operands[1];
  if (dir == "EQ" && *replacement == 0.0 &&
      ((same(c0) && scalar_constant(b, c1) == 0.0) ||
       (same(c1) && scalar_constant(b, c0) == 0.0))) {
    inner->zero = true;  // select(x == 0, 0, x)
    return inner;
  }
  if (dir == "NE" && std::isnan(*replacement) && same(c0) && same(c1)) {
    inner->nan = std::signbit(*replacement) ? -1 : 1;  // select(x != x, NaN, x)
    return inner;
  }
  return std::nullopt;
}

// What a comparator orders by.
struct Order {
  size_t operand = 0;  // whose elements are the keys
  bool descending = false;
  std::string type;  // compare_type: FLOAT, TOTALORDER, SIGNED, UNSIGNED, or "" (not written)
  Key key;           // how both sides are canonicalised
};

std::optional<Order> comparator_order(const Operation& op, size_t operands) {
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return std::nullopt;
  const Block& b = op.regions[0].blocks[0];
  if (b.arguments.size() != 2 * operands || b.ops.empty()) return std::nullopt;
  const Operation& ret = b.ops.back();
  if (ret.name != "stablehlo.return" || ret.operands.size() != 1) return std::nullopt;
  const Operation* cmp = defining(b, ret.operands[0]);
  if (!cmp || cmp->name != "stablehlo.compare" || cmp->operands.size() != 2) return std::nullopt;
  const std::string dir = text_of(*cmp, "comparison_direction");
  if (dir != "LT" && dir != "GT") return std::nullopt;
  const std::optional<Key> lhs = key_of(b, cmp->operands[0]), rhs = key_of(b, cmp->operands[1]);
  if (!lhs || !rhs || lhs->zero != rhs->zero || lhs->nan != rhs->nan) return std::nullopt;
  // Block arguments 2k and 2k+1 are operand k's lhs and rhs elements.
  const bool swapped = lhs->arg % 2 == 1;
  if (rhs->arg != (swapped ? lhs->arg - 1 : lhs->arg + 1)) return std::nullopt;
  Order o;
  o.operand = static_cast<size_t>(std::min(lhs->arg, rhs->arg) / 2);
  o.descending = (dir == "GT") != swapped;
  o.type = text_of(*cmp, "compare_type");
  o.key = *lhs;
  return o;
}

// out[..., j, ...] = x[..., perm[..., j, ...], ...] along `axis`: one take of
// the operand flattened with the axis last (row r's positions offset by r * n).
Value take_along(const Value& x, const Value& perm, int64_t axis) {
  const int64_t last = x.ndim() - 1;
  const Value xm = move_axis(x, axis, last), pm = move_axis(perm, axis, last);
  const Shape ms = xm.shape();
  const int64_t n = ms.back(), count = num_elements(ms);
  const Value offsets = reshape(iota({count / n, n}, 0, DType::i64) * static_cast<double>(n), ms);
  const Value flat = reshape(astype(pm, DType::i64) + offsets, {count});
  return move_axis(reshape(take(reshape(xm, {count}), flat, 0), ms), last, axis);
}

DType same_width(DType d, bool to_unsigned) {
  static const std::map<DType, DType> to_u = {{DType::i8, DType::u8},
                                              {DType::i16, DType::u16},
                                              {DType::i32, DType::u32},
                                              {DType::i64, DType::u64}};
  for (const auto& [s, u] : to_u)
    if (d == (to_unsigned ? s : u)) return to_unsigned ? u : s;
  return d;
}

Values sort_op(const Operation& op, const Values& in) {
  if (in.empty()) fail(op, "needs operands");
  const Shape shape = in[0].shape();
  for (const Value& v : in)
    if (v.shape() != shape) fail(op, "operands must have one shape");
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t dim = int_value(op, "dimension");
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank)
    fail(op, "dimension " + std::to_string(int_value(op, "dimension")) +
                 " is not an axis of the rank-" + std::to_string(rank) + " operands");
  const std::optional<Order> order = comparator_order(op, in.size());
  if (!order)
    fail(op,
         "with this comparator is not supported (expected one compare LT or GT of one operand's "
         "lhs and rhs elements, as written or canonicalised as jnp.sort does)");
  if (num_elements(shape) == 0) return in;
  const Value& x = in[order->operand];
  const std::string& type = order->type;
  const std::string dtype(dtype_name(x.dtype()));
  Value keys = x;
  bool keys_are_x = true;
  if (is_floating(x.dtype())) {
    if (type == "TOTALORDER" && !(order->key.zero && order->key.nan == 1)) {
      // Keys other than drx's order: sort their total-order bit patterns.
      Value c = x;
      if (order->key.zero) c = where(equal(c, scalar_like(c, 0.0)), zeros_like(c), c);
      if (order->key.nan)
        c = where(not_equal(c, c),
                  scalar_like(c, std::copysign(std::numeric_limits<double>::quiet_NaN(),
                                               static_cast<double>(order->key.nan))),
                  c);
      keys = total_order_key(c);
      keys_are_x = false;
    } else if (type != "TOTALORDER" && type != "FLOAT" && !type.empty()) {
      fail(op, "compares " + dtype + " keys as " + type);
    }
  } else {
    if (type == "FLOAT" || type == "TOTALORDER") fail(op, "compares " + dtype + " keys as " + type);
    const DType as = same_width(x.dtype(), type == "UNSIGNED");
    if ((type == "UNSIGNED" || type == "SIGNED") && as != x.dtype()) {
      keys = bitcast_convert(x, as);  // the other reading of the same bits
      keys_are_x = false;
    }
  }
  const Values sorted = emit(prims::sort(), {keys},
                             Params{{"axis", dim}, {"descending", int64_t{order->descending}}});
  Values out;
  for (size_t j = 0; j < in.size(); ++j)
    out.push_back(j == order->operand && keys_are_x ? sorted[0]
                                                    : take_along(in[j], sorted[1], dim));
  return out;
}

// ---- scatter -----------------------------------------------------------------

enum class Combine { set, add };

// The update computation: return the update, or add it to the current value.
std::optional<Combine> update_computation(const Operation& op) {
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return std::nullopt;
  const Block& b = op.regions[0].blocks[0];
  if (b.arguments.size() != 2 || b.ops.empty()) return std::nullopt;
  const Operation& ret = b.ops.back();
  if (ret.name != "stablehlo.return" || ret.operands.size() != 1) return std::nullopt;
  const std::string &current = b.arguments[0].first, &update = b.arguments[1].first;
  if (b.ops.size() == 1 && ret.operands[0] == update) return Combine::set;
  if (b.ops.size() != 2) return std::nullopt;
  const Operation& f = b.ops[0];
  const bool args =
      f.operands.size() == 2 && ((f.operands[0] == current && f.operands[1] == update) ||
                                 (f.operands[0] == update && f.operands[1] == current));
  if (f.name == "stablehlo.add" && args && f.results.size() == 1 && f.results[0] == ret.operands[0])
    return Combine::add;
  return std::nullopt;
}

Values scatter_op(const Operation& op, const Values& in) {
  if (in.size() != 3)
    fail(op, "with " + std::to_string(in.size()) +
                 " operands is not supported (only one input, its indices and its updates)");
  const std::optional<Combine> combine = update_computation(op);
  if (!combine)
    fail(op,
         "with this update computation is not supported (only one that returns the update, or "
         "adds it)");
  // The update computation's element type E, the declared result's (C25),
  // may be wider than the input's (C23: promotable): scatter in it. An E the
  // input does not promote to is left for the result check to name.
  Value x = in[0], updates = in[2];
  const Value& indices = in[1];
  if (op.result_types.size() == 1) {
    const DType e = element_dtype(op.result_types[0].element, op.line);
    if (x.dtype() != e && is_promotable(x.dtype(), e)) x = astype(x, e);
    if (updates.dtype() != e && is_promotable(updates.dtype(), e)) updates = astype(updates, e);
  }
  const Attribute& dn = required(op, "scatter_dimension_numbers");
  const auto window = dimension_list(dn, "update_window_dims", op);
  const auto inserted = dimension_list(dn, "inserted_window_dims", op);
  const auto input_batching = dimension_list(dn, "input_batching_dims", op);
  const auto indices_batching = dimension_list(dn, "scatter_indices_batching_dims", op);
  const auto to_operand = dimension_list(dn, "scatter_dims_to_operand_dims", op);
  const auto index_vector = dimension_list(dn, "index_vector_dim", op);
  const int64_t rank = x.ndim(), irank = indices.ndim(), urank = updates.ndim();
  auto unsupported = [&](const std::string& what) {
    fail(op, "with " + what +
                 " is not supported (only whole slices along one axis: inserted_window_dims = "
                 "scatter_dims_to_operand_dims = [axis], no batching dims, full windows)");
  };
  if (!input_batching.empty() || !indices_batching.empty()) unsupported("batching dims");
  if (inserted.size() != 1 || to_operand != inserted)
    unsupported("inserted_window_dims " + shape_str(inserted) +
                " and scatter_dims_to_operand_dims " + shape_str(to_operand));
  const int64_t axis = inserted[0];
  if (axis < 0 || axis >= rank) fail(op, "inserted_window_dims is not an axis of the input");
  if (index_vector.size() != 1 || index_vector[0] < 0 || index_vector[0] > irank)
    fail(op, "index_vector_dim must be an axis of the indices, or their rank");
  const int64_t ivd = index_vector[0];
  if (ivd < irank && indices.shape()[static_cast<size_t>(ivd)] != 1)
    unsupported("index vectors of " + std::to_string(indices.shape()[static_cast<size_t>(ivd)]) +
                " elements");
  Shape batch = indices.shape();
  if (ivd < irank) batch.erase(batch.begin() + ivd);
  const int64_t nbatch = static_cast<int64_t>(batch.size());
  bool valid = static_cast<int64_t>(window.size()) == rank - 1 && urank == nbatch + rank - 1 &&
               std::is_sorted(window.begin(), window.end());
  for (size_t w = 0; valid && w < window.size(); ++w)
    valid = window[w] >= 0 && window[w] < urank && (w == 0 || window[w] != window[w - 1]);
  if (!valid) fail(op, "invalid scatter_dimension_numbers for the operands' shapes");
  // The window dims hold the input's axes but `axis`, in order: they must be whole.
  for (int64_t w = 0; w < rank - 1; ++w) {
    const int64_t d = w < axis ? w : w + 1;
    if (updates.shape()[static_cast<size_t>(window[static_cast<size_t>(w)])] !=
        x.shape()[static_cast<size_t>(d)])
      unsupported("partial windows");
  }
  // The other dims of the updates are the indices' batch dims, in order.
  std::vector<int64_t> scattered;
  for (int64_t d = 0; d < urank; ++d)
    if (!contains(window, d)) scattered.push_back(d);
  for (int64_t k = 0; k < nbatch; ++k)
    if (updates.shape()[static_cast<size_t>(scattered[static_cast<size_t>(k)])] !=
        batch[static_cast<size_t>(k)])
      fail(op, "the updates' shape does not fit the indices");
  if (x.size() == 0 || updates.size() == 0) return {x};
  // drx's layout of the updates: x.shape[:axis] + batch + x.shape[axis+1:].
  std::vector<int64_t> perm(window.begin(), window.begin() + axis);
  perm.insert(perm.end(), scattered.begin(), scattered.end());
  perm.insert(perm.end(), window.begin() + axis, window.end());
  Value u = updates;
  std::vector<int64_t> identity(perm.size());
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int64_t>(i);
  if (perm != identity) u = transpose(u, perm);
  // An index out of range writes to an extra slot past the end, dropped after.
  const int64_t n = x.shape()[static_cast<size_t>(axis)];
  Value idx = reshape(astype(indices, DType::i64), batch);
  const Value size = scalar_like(idx, static_cast<double>(n));
  idx = where(bitwise_and(greater_equal(idx, scalar_like(idx, 0.0)), less(idx, size)), idx, size);
  Shape slot = x.shape();
  slot[static_cast<size_t>(axis)] = 1;
  const Value padded = concatenate({x, fill(slot, 0.0, x.dtype())}, axis);
  Value r;
  if (*combine == Combine::set)
    r = scatter(padded, idx, u, axis);
  else if (x.dtype() == DType::bool_)  // or: any update true
    r = astype(scatter_add(astype(padded, DType::i32), idx, astype(u, DType::i32), axis),
               DType::bool_);
  else
    r = scatter_add(padded, idx, u, axis);
  return {slice(r, std::vector<int64_t>(static_cast<size_t>(rank), 0), x.shape())};
}

const std::map<std::string, Lowering>& table() {
  static const std::map<std::string, Lowering> t = {
      {"stablehlo.sort", sort_op},
      {"stablehlo.scatter", scatter_op},
  };
  return t;
}

}  // namespace

const Lowering* find_region_lowering(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

}  // namespace drx::stablehlo::detail
