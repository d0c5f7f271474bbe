// stablehlo.reduce_window and stablehlo.select_and_scatter as drx ops.
#include "drx/stablehlo/import_windows.h"

#include <algorithm>

#include "drx/ops/ops.h"
#include "drx/ops/window_loops.h"
#include "drx/ops/windows.h"
#include "drx/transforms/loops.h"

namespace drx::stablehlo::detail {
namespace {

// The one op of a body `r = op(a0, a1); return r` and whether it takes the
// block's arguments swapped (a1, a0); nullptr for any other body.
const Operation* one_op_body(const Region& body, bool* swapped = nullptr) {
  if (body.blocks.size() != 1) return nullptr;
  const Block& b = body.blocks[0];
  if (b.ops.size() != 2 || b.arguments.size() != 2) return nullptr;
  const Operation &f = b.ops[0], &r = b.ops[1];
  if (r.operands.size() != 1 || f.results.size() != 1 || r.operands[0] != f.results[0] ||
      f.operands.size() != 2)
    return nullptr;
  const std::string &a0 = b.arguments[0].first, &a1 = b.arguments[1].first;
  const bool straight = f.operands[0] == a0 && f.operands[1] == a1;
  const bool crossed = f.operands[0] == a1 && f.operands[1] == a0;
  if (swapped) *swapped = crossed && !straight;
  return straight || crossed ? &f : nullptr;
}

// An integer-list attribute with one entry per axis, `fill` when absent.
std::vector<int64_t> per_axis(const Operation& op, const char* name, size_t rank, int64_t fill) {
  if (!find_attribute(op.attributes, name)) return std::vector<int64_t>(rank, fill);
  return int_list(op, name);
}

WindowConfig config_of(const Operation& op, size_t rank, bool dilations) {
  WindowConfig c;
  c.dimensions = int_list(op, "window_dimensions");
  c.strides = per_axis(op, "window_strides", rank, 1);
  if (dilations) {
    c.base_dilation = per_axis(op, "base_dilations", rank, 1);
    c.window_dilation = per_axis(op, "window_dilations", rank, 1);
  }
  if (const Attribute* p = find_attribute(op.attributes, "padding")) {
    std::vector<int64_t> flat = int_list(op, "padding");
    if (p->kind == Attribute::Kind::dense && p->splat && flat.size() == 1)
      flat.assign(2 * rank, flat[0]);
    if (flat.size() != 2 * rank)
      fail(op, "padding needs a (low, high) pair per axis of the rank-" + std::to_string(rank) +
                   " operands, got " + std::to_string(flat.size()) + " numbers");
    for (size_t d = 0; d < rank; ++d) c.padding.push_back({flat[2 * d], flat[2 * d + 1]});
  }
  return c;
}

// The drx body of a one-op reduce_window body over x, or "".
std::string known_body(const std::string& name, DType d) {
  struct Known {
    const char* op;
    bool logical;
    const char* body;
  };
  static const Known known[] = {
      {"stablehlo.or", true, "any"},      {"stablehlo.maximum", true, "any"},
      {"stablehlo.and", true, "all"},     {"stablehlo.minimum", true, "all"},
      {"stablehlo.add", false, "sum"},    {"stablehlo.maximum", false, "max"},
      {"stablehlo.minimum", false, "min"}};
  for (const Known& k : known)
    if (name == k.op && k.logical == (d == DType::bool_)) return k.body;
  return "";
}

Values reduce_window_op(const Operation& op, const Values& operands, const RegionFn& run) {
  if (operands.empty() || operands.size() % 2 != 0 || op.regions.size() != 1)
    fail(op, "needs inputs, as many init values, and one body");
  const size_t n = operands.size() / 2;
  const Shape shape = operands[0].shape();
  for (size_t k = 0; k < n; ++k) {
    if (operands[k].shape() != shape)
      fail(op, "inputs " + mlir_type(operands[0]) + " and " + mlir_type(operands[k]) +
                   " must have one shape (spec C2)");
    if (!operands[n + k].shape().empty() || operands[n + k].dtype() != operands[k].dtype())
      fail(op, "init value " + std::to_string(k) + " " + mlir_type(operands[n + k]) +
                   " must be a scalar of input " + std::to_string(k) + "'s element type");
  }
  const WindowConfig c = config_of(op, shape.size(), true);
  if (n == 1)
    if (const Operation* f = one_op_body(op.regions[0])) {
      const std::string body = known_body(f->name, operands[0].dtype());
      if (!body.empty()) return {reduce_window(operands[0], operands[1], body, c)};
    }
  // Any other body: each input padded with its init value, its windows'
  // elements gathered as [window elements, outputs...], and the body folded
  // over them in window order from the init values.
  std::vector<int64_t> interior;
  for (int64_t b : c.base_dilation) interior.push_back(b - 1);
  std::vector<int64_t> low, high;
  for (const auto& [lo, hi] : c.padding) low.push_back(lo), high.push_back(hi);
  if (c.padding.empty()) low.assign(shape.size(), 0), high.assign(shape.size(), 0);
  std::vector<Value> padded;
  for (size_t k = 0; k < n; ++k)
    padded.push_back(pad(operands[k], operands[n + k], low, high, interior));
  windows::WindowParams w;
  w.body = windows::body_name(ReduceKind::sum);
  w.window = c.dimensions;
  w.strides = c.strides;
  w.window_dilation = c.window_dilation;
  const size_t r = shape.size();
  w.low.assign(r, 0), w.high.assign(r, 0), w.base_dilation.assign(r, 1);
  const Shape pshape = padded[0].shape();
  const windows::Geometry g(pshape, w);  // checks the attributes
  int64_t n_out = 1;
  for (int64_t s : g.out) n_out *= s;
  std::vector<int64_t> at(static_cast<size_t>(g.window_count * n_out), 0);
  g.for_each(
      [&](int64_t oi, int64_t wi, int64_t a) { at[static_cast<size_t>(wi * n_out + oi)] = a; });
  Shape ps{g.window_count};
  ps.insert(ps.end(), g.out.begin(), g.out.end());
  const Value idx = constant(Array::from_vector<int64_t>(at, ps));
  std::vector<Tree> carry, xs;
  for (size_t k = 0; k < n; ++k) {
    carry.emplace_back(broadcast_to(operands[n + k], g.out));
    if (n_out > 0) xs.emplace_back(take(reshape(padded[k], {padded[k].type().size()}), idx, 0));
  }
  if (n_out == 0 || g.window_count == 0) {
    Values out;
    for (const Tree& t : carry) out.push_back(t.value());
    return out;
  }
  auto step = [&](const Tree& acc, const Tree& x) -> std::pair<Tree, Tree> {
    Values args;
    for (const Tree& t : acc.children()) args.push_back(t.value());
    for (const Tree& t : x.children()) args.push_back(t.value());
    Values next = run(op.regions[0], args);
    if (next.size() != n) fail(op, "body returns " + std::to_string(next.size()) + " values");
    std::vector<Tree> out;
    for (size_t k = 0; k < n; ++k) {
      if (next[k].dtype() != operands[n + k].dtype())
        fail(op, "body returns " + mlir_element(next[k].dtype()) + " for accumulator " +
                     std::to_string(k) + " of element type " +
                     mlir_element(operands[n + k].dtype()));
      out.emplace_back(broadcast_to(next[k], g.out));
    }
    return {Tree::list(out), Tree()};
  };
  Tree final_carry = scan(step, Tree::list(carry), Tree::list(xs)).first;
  Values out;
  for (const Tree& t : final_carry.children()) out.push_back(t.value());
  return out;
}

Values select_and_scatter_op(const Operation& op, const Values& in) {
  if (in.size() != 3 || op.regions.size() != 2)
    fail(op, "takes an operand, a source and an init value, and select and scatter bodies");
  bool swapped = false;
  const Operation* sel = one_op_body(op.regions[0], &swapped);
  const Attribute* dir_attr = sel && sel->name == "stablehlo.compare"
                                  ? find_attribute(sel->attributes, "comparison_direction")
                                  : nullptr;
  std::string dir = dir_attr ? dir_attr->text : "";
  if (dir != "GE" && dir != "GT" && dir != "LE" && dir != "LT")
    fail(op, "supports a select body of one compare GE, GT, LE or LT of its arguments");
  if (swapped) dir = dir == "GE" ? "LE" : dir == "GT" ? "LT" : dir == "LE" ? "GE" : "GT";
  const Operation* scatter = one_op_body(op.regions[1]);
  if (!scatter || scatter->name != "stablehlo.add")
    fail(op, "supports a scatter body of one add (of its two arguments)");
  if (!in[2].shape().empty() || in[2].dtype() != in[0].dtype())
    fail(op, "init value " + mlir_type(in[2]) + " must be a scalar of the operand's element type");
  const WindowConfig c = config_of(op, in[0].shape().size(), false);
  return {select_and_scatter_add(in[0], in[1], c, dir) + in[2]};
}

}  // namespace

std::optional<Values> import_windowed(const Operation& op, const Values& operands,
                                      const RegionFn& run) {
  if (op.name == "stablehlo.reduce_window") return reduce_window_op(op, operands, run);
  if (op.name == "stablehlo.select_and_scatter") return select_and_scatter_op(op, operands);
  return std::nullopt;
}

}  // namespace drx::stablehlo::detail
