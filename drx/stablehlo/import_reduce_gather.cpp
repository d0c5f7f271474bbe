// reduce (any body) and gather (its general form) as drx ops.
#include <algorithm>
#include <numeric>
#include <optional>

#include "drx/ops/ops.h"
#include "drx/stablehlo/import_internal.h"
#include "drx/transforms/loops.h"

namespace drx::stablehlo::detail {
namespace {

// The one op of a body `x = op(acc, elem); return x`, or nullptr.
const Operation* single_op_body(const Region& body) {
  if (body.blocks.size() != 1) return nullptr;
  const Block& b = body.blocks[0];
  if (b.ops.size() != 2 || b.arguments.size() != 2) return nullptr;
  const Operation& f = b.ops[0];
  const Operation& r = b.ops[1];
  if (r.operands.size() != 1 || f.results.size() != 1 || r.operands[0] != f.results[0])
    return nullptr;
  if (f.operands.size() != 2) return nullptr;
  const std::string &a0 = b.arguments[0].first, &a1 = b.arguments[1].first;
  const bool args =
      (f.operands[0] == a0 && f.operands[1] == a1) || (f.operands[0] == a1 && f.operands[1] == a0);
  return args ? &f : nullptr;
}

// x reduced over dims by a known combiner, then combined with init.
std::optional<Value> known_reduction(const std::string& name, const Value& x,
                                     const std::vector<int64_t>& dims, const Value& init) {
  const bool boolean = x.dtype() == DType::bool_;
  if (!boolean) {
    if (name == "stablehlo.add") return sum(x, dims) + init;
    if (name == "stablehlo.maximum") return maximum(max(x, dims), init);
    if (name == "stablehlo.minimum") return minimum(min(x, dims), init);
    return std::nullopt;
  }
  const Value as_int = astype(x, DType::i32);
  if (name == "stablehlo.or" || name == "stablehlo.maximum")
    return bitwise_or(astype(max(as_int, dims), DType::bool_), init);
  if (name == "stablehlo.and" || name == "stablehlo.minimum")
    return bitwise_and(astype(min(as_int, dims), DType::bool_), init);
  return std::nullopt;
}

}  // namespace

Values import_reduce(const Operation& op, const Values& operands, const RegionFn& run) {
  if (operands.empty() || operands.size() % 2 != 0 || op.regions.size() != 1)
    fail(op, "needs inputs, as many init values, and one body");
  const size_t n = operands.size() / 2;
  // The body computes in its element type Ei, the declared result's (C8),
  // which may be wider than the inputs' (C6: promotable): accumulate in it.
  // An Ei the inputs do not promote to is left for the result check to name.
  Values in = operands;
  if (op.result_types.size() == n)
    for (size_t k = 0; k < n; ++k) {
      const DType e = element_dtype(op.result_types[k].element, op.line);
      for (Value* v : {&in[k], &in[n + k]})
        if (v->dtype() != e && is_promotable(v->dtype(), e)) *v = astype(*v, e);
    }
  const std::vector<int64_t> dims = int_list(op, "dimensions");
  const Shape shape = in[0].shape();
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(shape.size()) ||
        std::find(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(i), dims[i]) !=
            dims.begin() + static_cast<std::ptrdiff_t>(i))
      fail(op, "dimensions must be distinct axes of the rank-" + std::to_string(shape.size()) +
                   " inputs");
  // An empty reduction is its init values.
  int64_t count = 1;
  for (int64_t d : dims) count *= shape[static_cast<size_t>(d)];
  if (n == 1 && count > 0)
    if (const Operation* f = single_op_body(op.regions[0]))
      if (auto r = known_reduction(f->name, in[0], dims, in[1])) return {*r};
  // The kept axes, in order, and the reduced ones moved to the front.
  std::vector<int64_t> perm = dims, kept;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(d), perm.push_back(d);
  Shape rest;
  for (int64_t d : kept) rest.push_back(shape[static_cast<size_t>(d)]);
  std::vector<Tree> carry, xs;
  for (size_t k = 0; k < n; ++k) {
    carry.emplace_back(broadcast_to(in[n + k], rest));
    Shape flat{count};
    flat.insert(flat.end(), rest.begin(), rest.end());
    xs.emplace_back(reshape(transpose(in[k], perm), flat));
  }
  if (count == 0) {
    Values out;
    for (const Tree& c : carry) out.push_back(c.value());
    return out;
  }
  // A fold in element order: a valid schedule of the spec's unspecified tree.
  auto step = [&](const Tree& acc, const Tree& x) -> std::pair<Tree, Tree> {
    Values args;
    for (const Tree& t : acc.children()) args.push_back(t.value());
    for (const Tree& t : x.children()) args.push_back(t.value());
    Values next = run(op.regions[0], args);
    if (next.size() != n) fail(op, "body returns " + std::to_string(next.size()) + " values");
    std::vector<Tree> c;
    for (size_t k = 0; k < n; ++k) {
      if (next[k].dtype() != in[n + k].dtype())
        fail(op, "body returns " + mlir_element(next[k].dtype()) + " for accumulator " +
                     std::to_string(k) + " of element type " + mlir_element(in[n + k].dtype()) +
                     " (spec C6: the body maps (E0.., E0..) to (E0..))");
      c.emplace_back(broadcast_to(next[k], rest));
    }
    return {Tree::list(c), Tree()};
  };
  Tree final_carry = scan(step, Tree::list(carry), Tree::list(xs)).first;
  Values out;
  for (const Tree& t : final_carry.children()) out.push_back(t.value());
  return out;
}

std::vector<int64_t> dimension_list(const Attribute& numbers, const char* key, const Operation& op,
                                    bool optional) {
  for (const auto& [k, v] : numbers.dict)
    if (k == key) {
      std::vector<int64_t> out;
      for (const Attribute& e : v.list) out.push_back(e.i);
      if (v.kind == Attribute::Kind::integer) out.push_back(v.i);
      return out;
    }
  if (optional) return {};
  fail(op, std::string("dimension numbers lack ") + key);
}

namespace {
// Component c of the index vectors along idx's last axis.
Value index_component(const Value& idx, int64_t c) {
  std::vector<int64_t> starts(static_cast<size_t>(idx.ndim()), 0);
  Shape limits = idx.shape();
  starts.back() = c;
  limits.back() = c + 1;
  return reshape(slice(idx, starts, limits), Shape(limits.begin(), limits.end() - 1));
}
bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
// Whether v holds distinct values in [0, n).
bool distinct_below(const std::vector<int64_t>& v, int64_t n) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] >= n || std::count(v.begin(), v.end(), v[i]) != 1) return false;
  return true;
}
}  // namespace

// out[b..., o...] = operand[clamp(start(b)) + offset(o)], computed as one
// take of the linearised operand indices (differentiable like take).
Value import_gather(const Operation& op, const Value& operand, const Value& indices) {
  const Attribute& dn = required(op, "dimension_numbers");
  const auto offset_dims = dimension_list(dn, "offset_dims", op);
  const auto collapsed = dimension_list(dn, "collapsed_slice_dims", op);
  const auto operand_batching = dimension_list(dn, "operand_batching_dims", op, true);
  const auto indices_batching = dimension_list(dn, "start_indices_batching_dims", op, true);
  const auto start_index_map = dimension_list(dn, "start_index_map", op);
  const auto index_vector = dimension_list(dn, "index_vector_dim", op);
  const auto slice_sizes = int_list(op, "slice_sizes");
  if (op.result_types.size() != 1) fail(op, "must declare one result type");
  const Shape out_shape = op.result_types[0].shape;
  const Shape xs = operand.shape();
  const int64_t out_rank = static_cast<int64_t>(out_shape.size());
  // The spec's constraints on the dimension numbers, which the code below relies on.
  const int64_t rank = operand.ndim(), irank = indices.ndim();
  if (index_vector.size() != 1 || index_vector[0] < 0 || index_vector[0] > irank)
    fail(op, "index_vector_dim must be an axis of the indices, or their rank");
  const int64_t index_vector_dim = index_vector[0];
  const int64_t index_size =
      index_vector_dim == irank ? 1 : indices.shape()[static_cast<size_t>(index_vector_dim)];
  if (static_cast<int64_t>(slice_sizes.size()) != rank)
    fail(op, "slice_sizes needs one size per operand axis");
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = slice_sizes[static_cast<size_t>(d)];
    if (size < 0 || size > xs[static_cast<size_t>(d)] ||
        ((contains(collapsed, d) || contains(operand_batching, d)) && size > 1))
      fail(op, "slice_sizes do not fit the operand (or a collapsed/batching size is over 1)");
  }
  if (!distinct_below(offset_dims, out_rank) ||
      !std::is_sorted(offset_dims.begin(), offset_dims.end()) || !distinct_below(collapsed, rank) ||
      !distinct_below(operand_batching, rank) || !distinct_below(indices_batching, irank) ||
      contains(indices_batching, index_vector_dim) ||
      indices_batching.size() != operand_batching.size() ||
      !distinct_below(start_index_map, rank) ||
      static_cast<int64_t>(start_index_map.size()) != index_size)
    fail(op, "invalid dimension_numbers");
  for (int64_t d : collapsed)
    if (contains(operand_batching, d)) fail(op, "invalid dimension_numbers");
  for (int64_t d : start_index_map)
    if (contains(operand_batching, d)) fail(op, "invalid dimension_numbers");
  if (static_cast<int64_t>(offset_dims.size() + collapsed.size() + operand_batching.size()) !=
          rank ||
      out_rank !=
          irank - (index_vector_dim < irank ? 1 : 0) + static_cast<int64_t>(offset_dims.size()))
    fail(op, "the result's rank does not follow from the dimension_numbers");
  {  // The result's shape: the indices' batch dims, and the windowed slice sizes at offset_dims.
    Shape expect(static_cast<size_t>(out_rank));
    for (int64_t d = 0, b = 0, w = 0; d < out_rank; ++d) {
      if (contains(offset_dims, d)) {
        while (contains(collapsed, w) || contains(operand_batching, w)) ++w;
        expect[static_cast<size_t>(d)] = slice_sizes[static_cast<size_t>(w++)];
      } else {
        if (b == index_vector_dim) ++b;
        expect[static_cast<size_t>(d)] = indices.shape()[static_cast<size_t>(b++)];
      }
    }
    if (expect != out_shape)
      fail(op, "declares result shape " + to_string(op.result_types[0]) +
                   ", but the dimension_numbers give another");
  }
  // Index vectors along the last axis.
  Value idx = astype(indices, DType::i64);
  if (index_vector_dim == idx.ndim()) idx = expand_dims(idx, idx.ndim());
  idx = move_axis(idx, index_vector_dim, -1);
  // Output batch dims, in order, are the indices' dims without the index vector.
  std::vector<int64_t> batch_out;
  for (int64_t d = 0; d < out_rank; ++d)
    if (!contains(offset_dims, d)) batch_out.push_back(d);
  // indices dim (original numbering) -> output dim.
  std::vector<int64_t> indices_to_out;
  for (int64_t d = 0, b = 0; d < indices.ndim() + (index_vector_dim == indices.ndim() ? 1 : 0);
       ++d) {
    if (d == index_vector_dim) {
      indices_to_out.push_back(-1);
      continue;
    }
    indices_to_out.push_back(batch_out.at(static_cast<size_t>(b++)));
  }
  // Operand dims that are windowed (offset dims), in order.
  std::vector<int64_t> windowed;
  for (int64_t d = 0; d < static_cast<int64_t>(xs.size()); ++d)
    if (!contains(collapsed, d) && !contains(operand_batching, d)) windowed.push_back(d);
  const std::vector<int64_t> strides = strides_of(xs);
  Value flat = fill(out_shape, 0.0, DType::i64);
  for (int64_t d = 0; d < static_cast<int64_t>(xs.size()); ++d) {
    Value at = fill(out_shape, 0.0, DType::i64);
    auto k = std::find(start_index_map.begin(), start_index_map.end(), d);
    if (k != start_index_map.end()) {
      const int64_t c = k - start_index_map.begin();
      Value comp = index_component(idx, c);
      comp = minimum(maximum(comp, 0.0), static_cast<double>(xs[static_cast<size_t>(d)] -
                                                             slice_sizes[static_cast<size_t>(d)]));
      at = at + broadcast_in_dim(comp, out_shape, batch_out);
    }
    auto j = std::find(operand_batching.begin(), operand_batching.end(), d);
    if (j != operand_batching.end()) {
      const int64_t idim = indices_batching.at(static_cast<size_t>(j - operand_batching.begin()));
      at = at + iota(out_shape, indices_to_out.at(static_cast<size_t>(idim)), DType::i64);
    }
    auto w = std::find(windowed.begin(), windowed.end(), d);
    if (w != windowed.end()) {
      const int64_t o = offset_dims.at(static_cast<size_t>(w - windowed.begin()));
      at = at + iota(out_shape, o, DType::i64);
    }
    flat = flat + at * static_cast<double>(strides[static_cast<size_t>(d)]);
  }
  return take(reshape(operand, {operand.type().size()}), flat, 0);
}

}  // namespace drx::stablehlo::detail
