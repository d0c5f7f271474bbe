// reduce_window and select_and_scatter_add: StableHLO's windowed reductions,
// and the pooling layers on them (drx/ops/windows.h).
//
// reduce_window[body, window, strides, low, high, base_dilation,
// window_dilation](x): body sum, max or min (of bool: any, all); padding and
// the holes of the base dilation are the body's identity, so the primitive
// needs no init operand (the public op with an init pads with it explicitly
// and folds it in after). select_and_scatter_add[select, window, strides, low,
// high](operand, source): StableHLO's select_and_scatter with an add scatter
// and init 0.
//
// Derivatives: sum is linear; its transpose is a pad of the cotangent and a
// reduce_window sum (JAX's reduce_window_sum transpose). max and min select
// one element per window (the first in window order under GE/LE, never
// padding): their jvp gathers the tangent there, their vjp is
// select_and_scatter_add of the cotangent (with dilations: a scatter_add at
// the same positions). select_and_scatter_add is linear in its source; the
// transpose gathers the cotangent at the selected positions.
#include "drx/ops/windows.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ir/param_view.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/window_loops.h"

DRX_PUBLIC_OPS_FILE(ops_windows);

namespace drx {
namespace windows {

namespace {
std::string list_str(const std::vector<int64_t>& v) { return shape_str(v); }

// The bodies by their names in the parameters and the public op.
struct NamedBody {
  const char* name;
  ReduceKind kind;
};
constexpr NamedBody kBodies[] = {
    {"sum", ReduceKind::sum}, {"max", ReduceKind::max}, {"min", ReduceKind::min}};
}  // namespace

std::optional<ReduceKind> body_kind(const std::string& body) {
  for (const NamedBody& b : kBodies)
    if (body == b.name) return b.kind;
  return std::nullopt;
}
std::string body_name(ReduceKind kind) {
  for (const NamedBody& b : kBodies)
    if (kind == b.kind) return b.name;
  return "";
}

WindowParams WindowParams::of(const Params& p, const std::string& op, bool scatter) {
  WindowParams w;
  if (scatter) {
    param_view::only_keys(p, op, {"select", "window", "strides", "low", "high"});
    w.body = p.get_string("select", op);
    select_of(w.body);  // checks it
  } else {
    param_view::only_keys(
        p, op, {"body", "window", "strides", "low", "high", "base_dilation", "window_dilation"});
    w.body = p.get_string("body", op);
    if (!body_kind(w.body)) throw TypeError(op + ": body '" + w.body + "' must be sum, max or min");
  }
  w.window = p.get_ints("window", op);
  w.strides = p.get_ints("strides", op);
  w.low = p.get_ints("low", op);
  w.high = p.get_ints("high", op);
  if (scatter) {
    w.base_dilation.assign(w.window.size(), 1);
    w.window_dilation.assign(w.window.size(), 1);
  } else {
    w.base_dilation = p.get_ints("base_dilation", op);
    w.window_dilation = p.get_ints("window_dilation", op);
  }
  return w;
}

Params WindowParams::to_params(bool scatter) const {
  Params p{{"window", window}, {"strides", strides}, {"low", low}, {"high", high}};
  if (scatter) {
    p.set("select", body);
  } else {
    p.set("body", body);
    p.set("base_dilation", base_dilation);
    p.set("window_dilation", window_dilation);
  }
  return p;
}

ReduceKind WindowParams::kind() const { return *body_kind(body); }

Shape WindowParams::output_shape(const std::string& op, const Type& x) const {
  const size_t r = x.shape.size();
  auto per_axis = [&](const char* attr, const std::vector<int64_t>& v, bool positive) {
    if (v.size() != r)
      throw TypeError(op + ": " + attr + " " + list_str(v) + " needs one entry per axis of " +
                      x.str() + " (" + std::to_string(r) + ")");
    if (positive)
      for (int64_t e : v)
        if (e < 1)
          throw TypeError(op + ": " + attr + " " + list_str(v) + " must all be >= 1 (operand " +
                          x.str() + ")");
  };
  per_axis("window_dimensions", window, true);
  per_axis("window_strides", strides, true);
  per_axis("padding low", low, false);
  per_axis("padding high", high, false);
  per_axis("base_dilations", base_dilation, true);
  per_axis("window_dilations", window_dilation, true);
  Shape out;
  for (size_t d = 0; d < r; ++d) {
    const int64_t padded = low[d] + high[d] + dilated(x.shape[d], base_dilation[d]);
    if (padded < 0)
      throw TypeError(op + ": padding (" + std::to_string(low[d]) + ", " + std::to_string(high[d]) +
                      ") crops more than axis " + std::to_string(d) + " of " + x.str() + " holds");
    const int64_t span = dilated(window[d], window_dilation[d]);
    out.push_back(padded < span ? 0 : (padded - span) / strides[d] + 1);
  }
  return out;
}

Select select_of(const std::string& dir) {
  if (dir == "GE") return Select::ge;
  if (dir == "GT") return Select::gt;
  if (dir == "LE") return Select::le;
  if (dir == "LT") return Select::lt;
  throw TypeError("select_and_scatter_add: select '" + dir + "' must be GE, GT, LE or LT");
}

Geometry::Geometry(const Shape& in_shape, const WindowParams& w)
    : in(in_shape), out(w.output_shape("window", Type(DType::f32, in_shape))), window(w.window) {
  for (int64_t k : window) window_count *= k;
  for (size_t d = 0; d < in.size(); ++d) {
    std::vector<int64_t> t(static_cast<size_t>(out[d] * window[d]), -1);
    for (int64_t o = 0; o < out[d]; ++o)
      for (int64_t k = 0; k < window[d]; ++k) {
        const int64_t q = o * w.strides[d] + k * w.window_dilation[d] - w.low[d];
        const int64_t b = w.base_dilation[d];
        if (q >= 0 && q % b == 0 && q / b < in[d])
          t[static_cast<size_t>(o * window[d] + k)] = q / b;
      }
    table.push_back(std::move(t));
  }
}

}  // namespace windows

namespace {

using windows::Geometry;
using windows::Select;
using windows::WindowParams;

int64_t count_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool all_ones(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t e) { return e == 1; });
}

std::vector<int64_t> with_batch(int64_t first, std::vector<int64_t> v) {
  v.insert(v.begin(), first);
  return v;
}

WindowParams batched_params(WindowParams w) {
  w.window = with_batch(1, w.window);
  w.strides = with_batch(1, w.strides);
  w.low = with_batch(0, w.low);
  w.high = with_batch(0, w.high);
  w.base_dilation = with_batch(1, w.base_dilation);
  w.window_dilation = with_batch(1, w.window_dilation);
  return w;
}

// For each window of x, the flat index of the element it selects (the first
// non-padding element, replaced by each later one c while !select(current, c),
// as select_and_scatter_loop does), or -1 where the window is all padding.
Value selected_positions(const Value& x, Select s, const WindowParams& w) {
  const Geometry g(x.shape(), w);
  const int64_t n_out = count_of(g.out), wc = g.window_count;
  std::vector<std::vector<int64_t>> pos(static_cast<size_t>(wc),
                                        std::vector<int64_t>(static_cast<size_t>(n_out), -1));
  g.for_each([&](int64_t oi, int64_t wi, int64_t at) {
    pos[static_cast<size_t>(wi)][static_cast<size_t>(oi)] = at;
  });
  const Value flat = reshape(stop_gradient(x), {x.type().size()});
  std::optional<Value> sel, cur, have;
  for (int64_t wi = 0; wi < wc; ++wi) {
    const std::vector<int64_t>& p = pos[static_cast<size_t>(wi)];
    if (std::all_of(p.begin(), p.end(), [](int64_t a) { return a < 0; })) continue;
    std::vector<int64_t> clamped(p.size());
    Array valid_a(DType::bool_, g.out);
    for (size_t i = 0; i < p.size(); ++i) {
      clamped[i] = std::max<int64_t>(p[i], 0);
      valid_a.data<uint8_t>()[i] = p[i] >= 0;
    }
    const Value at = constant(Array::from_vector<int64_t>(p, g.out));
    const Value valid = constant(valid_a);
    const Value cand = take(flat, constant(Array::from_vector<int64_t>(clamped, g.out)), 0);
    if (!sel) {
      sel = at, cur = cand, have = valid;
      continue;
    }
    Value keep;
    switch (s) {
      case Select::ge:
        keep = greater_equal(*cur, cand);
        break;
      case Select::gt:
        keep = greater(*cur, cand);
        break;
      case Select::le:
        keep = less_equal(*cur, cand);
        break;
      case Select::lt:
        keep = less(*cur, cand);
        break;
    }
    const Value take_it = bitwise_and(valid, bitwise_not(bitwise_and(*have, keep)));
    sel = where(take_it, at, *sel);
    cur = where(take_it, cand, *cur);
    have = bitwise_or(*have, valid);
  }
  return sel ? *sel : fill(g.out, -1.0, DType::i64);
}

// t (x's shape) at the selected positions, 0 where a window selects nothing.
Value gather_selected(const Value& t, const Value& sel) {
  if (t.type().size() == 0) return fill(sel.shape(), 0.0, t.dtype());
  const Value flat = reshape(t, {t.type().size()});
  const Value got = take(flat, maximum(sel, 0.0), 0);
  return where(greater_equal(sel, scalar_like(sel, 0.0)), got, zeros_like(got));
}

// ct (one value per window) added into x's shape at the selected positions.
Value scatter_selected(const Value& ct, const Value& sel, const Shape& x_shape) {
  const int64_t n = count_of(x_shape);
  if (n == 0 || ct.type().size() == 0) return fill(x_shape, 0.0, ct.dtype());
  const int64_t m = ct.type().size();
  const Value idx = reshape(maximum(sel, 0.0), {m});
  const Value upd =
      reshape(where(greater_equal(sel, scalar_like(sel, 0.0)), ct, zeros_like(ct)), {m});
  return reshape(scatter_add(fill({n}, 0.0, ct.dtype()), idx, upd, 0), x_shape);
}

Select chooser(ReduceKind k) { return k == ReduceKind::max ? Select::ge : Select::le; }

std::string mlir_padding(const std::vector<int64_t>& low, const std::vector<int64_t>& high) {
  std::string s = "dense<[";
  for (size_t d = 0; d < low.size(); ++d)
    s += (d ? ", [" : "[") + std::to_string(low[d]) + ", " + std::to_string(high[d]) + "]";
  return s + "]> : tensor<" + std::to_string(low.size()) + "x2xi64>";
}

double identity_of(ReduceKind kind, DType d) {
  if (kind == ReduceKind::sum) return 0;
  const double sign = kind == ReduceKind::max ? -1.0 : 1.0;
  return d == DType::bool_ ? (sign > 0 ? 1.0 : 0.0)
         : is_floating(d)  ? sign * INFINITY
                           : sign * 1e300;  // full() saturates to the dtype's range
}

class ReduceWindowPrim : public Primitive {
 public:
  ReduceWindowPrim() : Primitive("reduce_window") {}

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 1);
    const WindowParams w = WindowParams::of(p, name(), false);
    if (w.kind() == ReduceKind::sum && ins[0].dtype == DType::bool_)
      throw TypeError(name() + ": a sum of bool operand " + ins[0].str() +
                      "; convert it first, e.g. astype(x, i32), or use body any");
    return {Type(ins[0].dtype, w.output_shape(name(), ins[0]), ins[0].placement)};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const WindowParams w = WindowParams::of(p, name(), false);
    const Geometry g(ins[0].shape(), w);
    Array out(ins[0].dtype(), g.out);
    dispatch_dtype(ins[0].dtype(), [&](auto t) {
      using T = decltype(t);
      dispatch_reduce(w.kind(), [&](auto k) {
        windows::reduce_window_loop<T, k()>(ins[0].data<T>(), out.data<T>(), g);
      });
    });
    return {out};
  }

  MaybeValues jvp(const Values& x, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[0] || !is_floating(x[0].dtype())) return {std::nullopt};
    const WindowParams w = WindowParams::of(p, name(), false);
    if (w.kind() == ReduceKind::sum) return {emit1(*this, {*t[0]}, p)};
    return {gather_selected(*t[0], selected_positions(x[0], chooser(w.kind()), w))};
  }

  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !is_floating(x[0].dtype())) return {std::nullopt};
    const WindowParams w = WindowParams::of(p, name(), false);
    const Shape in = x[0].shape();
    if (w.kind() == ReduceKind::sum) {
      // Each cotangent element is added to its window's elements: the
      // cotangent dilated by the strides and padded so that a window sum with
      // strides base_dilation lands on the operand's elements.
      std::vector<int64_t> lo, hi, interior;
      const Shape cs = ct[0]->shape();
      for (size_t d = 0; d < in.size(); ++d) {
        const int64_t span = windows::dilated(w.window[d], w.window_dilation[d]);
        const int64_t before = span - w.low[d] - 1;
        lo.push_back(before);
        hi.push_back(windows::dilated(in[d], w.base_dilation[d]) + span - 1 -
                     windows::dilated(cs[d], w.strides[d]) - before);
        interior.push_back(w.strides[d] - 1);
      }
      const Value padded = pad(*ct[0], fill({}, 0.0, ct[0]->dtype()), lo, hi, interior);
      WindowParams back = w;
      back.strides = w.base_dilation;
      back.low.assign(in.size(), 0);
      back.high.assign(in.size(), 0);
      back.base_dilation.assign(in.size(), 1);
      return {emit1(*this, {padded}, back.to_params(false))};
    }
    const Select s = chooser(w.kind());
    if (all_ones(w.base_dilation) && all_ones(w.window_dilation)) {
      WindowParams sw = w;
      sw.body = s == Select::ge ? "GE" : "LE";
      return {emit1(prims::select_and_scatter_add(), {x[0], *ct[0]}, sw.to_params(true))};
    }
    return {scatter_selected(*ct[0], selected_positions(x[0], s, w), in)};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    if (!ins[0].batched) return {{emit1(*this, {ins[0].value}, p), false}};
    const WindowParams w = batched_params(WindowParams::of(p, name(), false));
    return {{emit1(*this, {ins[0].value}, w.to_params(false)), true}};
  }

  void lower(StableHloEmitter& em, const Params& p) const override {
    const WindowParams w = WindowParams::of(p, name(), false);
    const Type& t = em.operand_type(0);
    const ReduceKind kind = w.kind();
    const std::string init = em.constant(full({}, identity_of(kind, t.dtype), t.dtype));
    const Type scalar(t.dtype, {});
    MlirRegion body{{scalar, scalar},
                    [kind, scalar](StableHloEmitter& b, const std::vector<std::string>& args) {
                      return std::vector<std::string>{
                          b.emit1(reduce_combiner(kind), {args[0], args[1]}, {}, scalar)};
                    }};
    MlirAttributes attrs = {{"window_dimensions", mlir_i64_array(w.window)},
                            {"window_strides", mlir_i64_array(w.strides)},
                            {"base_dilations", mlir_i64_array(w.base_dilation)},
                            {"window_dilations", mlir_i64_array(w.window_dilation)}};
    if (!w.low.empty()) attrs.push_back({"padding", mlir_padding(w.low, w.high)});
    em.set_results({em.emit1("stablehlo.reduce_window", {em.operand(0), init}, attrs,
                             em.result_type(0), {body})});
  }
};

class SelectAndScatterAddPrim : public Primitive {
 public:
  SelectAndScatterAddPrim() : Primitive("select_and_scatter_add") {}

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    check_arity(name(), ins, 2);
    const WindowParams w = WindowParams::of(p, name(), true);
    const Type &x = ins[0], &src = ins[1];
    if (x.dtype != src.dtype)
      throw TypeError(name() + ": operand " + x.str() + " and source " + src.str() +
                      " must have one dtype");
    if (x.dtype == DType::bool_)
      throw TypeError(name() + ": operand " + x.str() + " is bool (the scatter adds)");
    const Shape out = w.output_shape(name(), x);
    if (src.shape != out)
      throw TypeError(name() + ": source " + src.str() + " must have the window output shape " +
                      shape_str(out) + " of operand " + x.str() + " (window_dimensions " +
                      shape_str(w.window) + ", window_strides " + shape_str(w.strides) + ")");
    return {x};
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const WindowParams w = WindowParams::of(p, name(), true);
    const Geometry g(ins[0].shape(), w);
    Array out(ins[0].dtype(), ins[0].shape());
    dispatch_dtype(ins[0].dtype(), [&](auto t) {
      using T = decltype(t);
      windows::select_and_scatter_loop<T>(ins[0].data<T>(), ins[1].data<T>(), out.data<T>(),
                                          out.size(), g, windows::select_of(w.body));
    });
    return {out};
  }

  MaybeValues jvp(const Values& x, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    if (!t[1] || !is_floating(x[0].dtype())) return {std::nullopt};
    return {emit1(*this, {x[0], *t[1]}, p)};
  }

  MaybeValues vjp(const Values& x, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    if (!ct[0] || !is_floating(x[0].dtype())) return {std::nullopt, std::nullopt};
    const WindowParams w = WindowParams::of(p, name(), true);
    return {std::nullopt,
            gather_selected(*ct[0], selected_positions(x[0], windows::select_of(w.body), w))};
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch,
                            const Params& p) const override {
    if (!ins[0].batched && !ins[1].batched)
      return {{emit1(*this, {ins[0].value, ins[1].value}, p), false}};
    auto batched = [batch](const Batched& b) {
      if (b.batched) return b.value;
      Shape s = b.value.shape();
      s.insert(s.begin(), batch);
      return broadcast_to(expand_dims(b.value, 0), s);
    };
    const WindowParams w = batched_params(WindowParams::of(p, name(), true));
    return {{emit1(*this, {batched(ins[0]), batched(ins[1])}, w.to_params(true)), true}};
  }

  void lower(StableHloEmitter& em, const Params& p) const override {
    const WindowParams w = WindowParams::of(p, name(), true);
    const Type& t = em.operand_type(0);
    const Type scalar(t.dtype, {});
    const std::string init = em.constant(full({}, 0.0, t.dtype));
    const std::string dir = w.body;
    MlirRegion select{
        {scalar, scalar}, [dir, scalar](StableHloEmitter& b, const std::vector<std::string>& args) {
          return std::vector<std::string>{emit_compare(b, dir, args[0], args[1], scalar)};
        }};
    MlirRegion scatter{
        {scalar, scalar}, [scalar](StableHloEmitter& b, const std::vector<std::string>& args) {
          return std::vector<std::string>{b.emit1("stablehlo.add", {args[0], args[1]}, {}, scalar)};
        }};
    MlirAttributes attrs = {{"window_dimensions", mlir_i64_array(w.window)},
                            {"window_strides", mlir_i64_array(w.strides)}};
    if (!w.low.empty()) attrs.push_back({"padding", mlir_padding(w.low, w.high)});
    em.set_results({em.emit1("stablehlo.select_and_scatter", {em.operand(0), em.operand(1), init},
                             attrs, em.result_type(0), {select, scatter})});
  }
};

// The public attributes, defaults filled in and checked against x's rank.
WindowParams params_for(const char* op, const Value& x, const std::string& body,
                        const WindowConfig& c) {
  const size_t r = static_cast<size_t>(x.ndim());
  auto or_ones = [&](const std::vector<int64_t>& v) {
    return v.empty() ? std::vector<int64_t>(r, 1) : v;
  };
  WindowParams w;
  w.body = body;
  w.window = c.dimensions;
  w.strides = or_ones(c.strides);
  w.base_dilation = or_ones(c.base_dilation);
  w.window_dilation = or_ones(c.window_dilation);
  if (c.padding.empty()) {
    w.low.assign(r, 0);
    w.high.assign(r, 0);
  } else {
    for (const auto& [lo, hi] : c.padding) w.low.push_back(lo), w.high.push_back(hi);
  }
  w.output_shape(op, x.type());  // checks the attributes against x, naming the public op
  return w;
}

std::string kind_body(const std::string& body, const Value& x, const char* op) {
  const bool logical = body == "any" || body == "all";
  if (logical) {
    if (x.dtype() != DType::bool_)
      throw TypeError(std::string(op) + ": body " + body + " needs a bool operand, got " +
                      x.type().str());
    return windows::body_name(body == "any" ? ReduceKind::max : ReduceKind::min);
  }
  if (windows::body_kind(body)) return body;
  throw TypeError(std::string(op) + ": body '" + body + "' must be sum, max, min, any or all");
}

}  // namespace

namespace prims {
const Primitive& reduce_window() {
  static const ReduceWindowPrim p;
  return p;
}
const Primitive& select_and_scatter_add() {
  static const SelectAndScatterAddPrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(windows) {
  registry.add(prims::reduce_window());
  registry.add(prims::select_and_scatter_add());
}

DRX_PUBLIC_OP("reduce_window",
              "(x: Value, body: string, window: WindowConfig) -> Value | (x: Value, init: Value, "
              "body: string, window: WindowConfig) -> Value",
              "StableHLO's reduce_window: each (strided, padded, dilated) window reduced by sum, "
              "max, min, any or all.");
Value reduce_window(const Value& x, const std::string& body, const WindowConfig& window) {
  const WindowParams w =
      params_for("reduce_window", x, kind_body(body, x, "reduce_window"), window);
  return emit1(prims::reduce_window(), {x}, w.to_params(false));
}

Value reduce_window(const Value& x, const Value& init, const std::string& body,
                    const WindowConfig& window) {
  const std::string kind = kind_body(body, x, "reduce_window");
  if (init.dtype() != x.dtype() || !init.shape().empty())
    throw TypeError("reduce_window: init " + init.type().str() +
                    " must be a scalar of x's dtype (" + x.type().str() + ")");
  WindowParams w = params_for("reduce_window", x, kind, window);
  Value padded = x;
  if (!all_ones(w.base_dilation) ||
      std::any_of(w.low.begin(), w.low.end(), [](int64_t v) { return v != 0; }) ||
      std::any_of(w.high.begin(), w.high.end(), [](int64_t v) { return v != 0; })) {
    std::vector<int64_t> interior;
    for (int64_t b : w.base_dilation) interior.push_back(b - 1);
    padded = pad(x, init, w.low, w.high, interior);
    w.low.assign(w.low.size(), 0);
    w.high.assign(w.high.size(), 0);
    w.base_dilation.assign(w.base_dilation.size(), 1);
  }
  const Value y = emit1(prims::reduce_window(), {padded}, w.to_params(false));
  if (x.dtype() == DType::bool_)
    return w.kind() == ReduceKind::max ? bitwise_or(y, init) : bitwise_and(y, init);
  switch (w.kind()) {
    case ReduceKind::sum:
      return y + init;
    case ReduceKind::max:
      return maximum(y, init);
    case ReduceKind::min:
      break;
  }
  return minimum(y, init);
}

DRX_PUBLIC_OP("select_and_scatter_add",
              "(operand: Value, source: Value, window: WindowConfig, select: string = \"GE\") -> "
              "Value",
              "StableHLO's select_and_scatter with an add scatter: the transpose of max (GE) or "
              "min (LE) pooling; ties select the first element in window order.");
Value select_and_scatter_add(const Value& operand, const Value& source, const WindowConfig& window,
                             const std::string& select) {
  if (!all_ones(window.base_dilation) || !all_ones(window.window_dilation))
    throw TypeError("select_and_scatter_add: base_dilations and window_dilations must be 1 (got " +
                    shape_str(window.base_dilation) + ", " + shape_str(window.window_dilation) +
                    ")");
  windows::select_of(select);
  WindowParams w = params_for("select_and_scatter_add", operand, select, window);
  w.body = select;
  return emit1(prims::select_and_scatter_add(), {operand, source}, w.to_params(true));
}

namespace nn {
namespace {

// The window over all of x's axes for pooling its spatial axes (flax's layout).
WindowConfig pool_window(const char* op, const Value& x, const std::vector<int64_t>& window,
                         const std::vector<int64_t>& strides, const std::string& padding) {
  const int64_t ns = static_cast<int64_t>(window.size());
  if (x.ndim() != ns + 2 && x.ndim() != ns + 1)
    throw TypeError(std::string(op) + ": x " + x.type().str() + " must be (batch, spatial..., " +
                    "features) or (spatial..., features) for the " + std::to_string(ns) +
                    " spatial axes of window " + shape_str(window));
  const std::vector<int64_t> st =
      strides.empty() ? std::vector<int64_t>(window.size(), 1) : strides;
  if (st.size() != window.size())
    throw TypeError(std::string(op) + ": strides " + shape_str(strides) +
                    " need one entry per window axis " + shape_str(window));
  std::string mode = padding;
  for (char& c : mode) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (mode != "SAME" && mode != "VALID")
    throw TypeError(std::string(op) + ": padding '" + padding + "' must be SAME or VALID");
  const int64_t lead = x.ndim() - ns - 1;
  WindowConfig c;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    const bool spatial = d >= lead && d < lead + ns;
    const size_t s = static_cast<size_t>(d - lead);
    const int64_t win = spatial ? window[s] : 1, stride = spatial ? st[s] : 1;
    if (win < 1 || stride < 1)
      throw TypeError(std::string(op) + ": window " + shape_str(window) + " and strides " +
                      shape_str(st) + " must be >= 1");
    int64_t total = 0;
    if (mode == "SAME") {
      const int64_t n = x.shape()[static_cast<size_t>(d)];
      const int64_t out = (n + stride - 1) / stride;
      total = std::max<int64_t>((out - 1) * stride + win - n, 0);
    }
    c.dimensions.push_back(win);
    c.strides.push_back(stride);
    c.padding.push_back({total / 2, total - total / 2});
  }
  return c;
}

}  // namespace

DRX_PUBLIC_OP("nn::max_pool",
              "(x: Value, window: vector<int64>, strides: vector<int64> = {}, padding: string = "
              "\"VALID\") -> Value",
              "Max pooling over the spatial axes of (batch, spatial..., features), as flax.");
Value max_pool(const Value& x, const std::vector<int64_t>& window,
               const std::vector<int64_t>& strides, const std::string& padding) {
  return reduce_window(x, "max", pool_window("max_pool", x, window, strides, padding));
}

DRX_PUBLIC_OP("nn::avg_pool",
              "(x: Value, window: vector<int64>, strides: vector<int64> = {}, padding: string = "
              "\"VALID\", count_include_pad: bool = true) -> Value",
              "Average pooling over the spatial axes of (batch, spatial..., features), as flax.");
Value avg_pool(const Value& x, const std::vector<int64_t>& window,
               const std::vector<int64_t>& strides, const std::string& padding,
               bool count_include_pad) {
  if (!is_floating(x.dtype()))
    throw TypeError("avg_pool: x " + x.type().str() + " is not floating point");
  const WindowConfig c = pool_window("avg_pool", x, window, strides, padding);
  const Value s = reduce_window(x, "sum", c);
  if (count_include_pad) {
    int64_t n = 1;
    for (int64_t w : window) n *= w;
    return s / static_cast<double>(n);
  }
  return s / reduce_window(ones_like(x), "sum", c);
}

}  // namespace nn
}  // namespace drx
