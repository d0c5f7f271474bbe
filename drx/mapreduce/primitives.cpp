// The MapReduce building blocks as primitives. Their rules close over the
// family: the derivative of a MapReduce program is a MapReduce program.
#include "drx/mapreduce/primitives.h"

#include <cstring>
#include <functional>

#include "drx/core/canonical_tree.h"
#include "drx/core/interpret.h"
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/mapreduce/map_fn_params.h"
#include "drx/mapreduce/mapreduce.h"
#include "drx/ops/ops.h"
#include "drx/transforms/simplify.h"
#include "drx/transforms/transforms.h"

namespace drx {
namespace {

// One client's slice of a value placed at (the outer level of) a placement:
// f32[4,8,10]@groups.clients gives f32[8,10]@clients.
Type per_client(const Type& t) {
  return Type(t.dtype, Shape(t.shape.begin() + 1, t.shape.end()), inner_placement(t.placement));
}

// The building blocks name one placement each: the level they work on.
void require_single_level(const std::string& op, const std::string& placement) {
  if (placement.empty()) throw TypeError(op + ": the placement attribute is empty");
  if (placement.find('.') != std::string::npos)
    throw TypeError(op + ": placement attribute '" + placement +
                    "' names nested placements; it names one placement (the level it works on)");
}

}  // namespace

std::string nested_reduce_fix(const std::string& op, const Type& t) {
  const std::string outer = outer_placement(t.placement), inner = inner_placement(t.placement);
  Type per_group = per_client(t);
  per_group.shape.erase(per_group.shape.begin(), per_group.shape.begin() + placement_depth(inner));
  per_group.placement.clear();
  Type reduced(t.dtype, per_group.shape, outer);
  reduced.shape.insert(reduced.shape.begin(), t.shape[0]);
  return op + ": operand " + t.str() + " is placed at '" + inner + "' nested in '" + outer +
         "'; reduce over '" + inner + "' inside a map_fn over '" + outer +
         "', which gives one value for each of the " + std::to_string(t.shape[0]) + " " + outer +
         " (" + reduced.str() + "), then over '" + outer + "': drx::" + op +
         "(drx::map_fn([](drx::Value x) { return drx::" + op + "(x); }, v))";
}

namespace {

void require_placed(const std::string& op, const Type& t, const std::string& placement) {
  if (!t.placement.empty() && t.shape.empty())
    throw TypeError(op + ": operand " + t.str() + " is placed but has no leading (placement) axis");
  if (t.placement.empty())
    throw TypeError(op + ": operand " + t.str() +
                    " is not placed; reduce over a placement takes a placed value (from "
                    "drx::broadcast or drx::map_fn)");
  if (placement_depth(t.placement) > 1) throw TypeError(nested_reduce_fix(op, t));
  require_single_level(op, placement);
  if (t.placement != placement)
    throw TypeError(op + "[" + placement + "]: operand " + t.str() + " is placed at '" +
                    t.placement + "'");
}

// Rows of a placed array (one per client) as contiguous byte ranges.
size_t row_bytes(const Array& a) {
  return a.shape().empty() || a.shape()[0] == 0 ? 0
                                                : a.nbytes() / static_cast<size_t>(a.shape()[0]);
}

// ---- broadcast ------------------------------------------------------------
std::string already_placed(const Type& t, const std::string& target, int64_t size) {
  std::string msg = "broadcast: operand " + t.str() + " is already placed at '" + t.placement +
                    "'; broadcast takes a server (unplaced) value";
  if (placement_depth(t.placement) != 1 || target == t.placement) return msg;
  Type nested(t.dtype, t.shape, nested_placement(t.placement, target));
  nested.shape.insert(nested.shape.begin() + 1, size);
  return msg + ". To give the " + target + " of each of the " + std::to_string(t.shape[0]) + " " +
         t.placement + " a copy, broadcast inside a map_fn over '" + t.placement +
         "': drx::map_fn([](drx::Value x) { return drx::broadcast(x, \"" + target +
         "\"); }, v) gives " + nested.str();
}

class BroadcastPrim : public Primitive {
 public:
  BroadcastPrim() : Primitive("broadcast") {}
  // Every client gets the server value: a new leading axis, constrained to
  // the placement's mesh axis as DrJAX's broadcast does.
  void lower(StableHloEmitter& em, const Params&) const override {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < em.operand_type(0).ndim(); ++d) dims.push_back(d + 1);
    const std::string out =
        em.emit1("stablehlo.broadcast_in_dim", {em.operand(0)},
                 {{"broadcast_dimensions", mlir_i64_array(dims)}}, em.result_type(0));
    em.set_results({em.constrain_placed(out, em.result_type(0))});
  }
  bool placement_aware() const override { return true; }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (ins.size() != 1)
      throw TypeError("broadcast: takes one operand, got " + std::to_string(ins.size()));
    const std::string& placement = p.get_string("placement", name());
    int64_t n = p.get_int("size", name());
    require_single_level(name(), placement);
    if (!ins[0].placement.empty()) throw TypeError(already_placed(ins[0], placement, n));
    if (n < 0) throw TypeError("broadcast: negative placement size " + std::to_string(n));
    Shape s = ins[0].shape;
    s.insert(s.begin(), n);
    return {Type(ins[0].dtype, s, placement)};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    int64_t n = p.get_int("size", name());
    Shape s = ins[0].shape();
    s.insert(s.begin(), n);
    Array out(ins[0].dtype(), s);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(static_cast<std::byte*>(out.raw()) + static_cast<size_t>(i) * ins[0].nbytes(),
                  ins[0].raw(), ins[0].nbytes());
    return {out};
  }
  MaybeValues jvp(const Values&, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    return {emit1(*this, {*t[0]}, p)};
  }
  MaybeValues vjp(const Values&, const Values&, const MaybeValues& ct,
                  const Params& p) const override {
    return {emit1(prims::reduce_sum(), {*ct[0]}, Params{{"placement", p.at("placement", name())}})};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    // [B, ...] becomes [n, B, ...]: the batch lands at axis 1, as placed values carry it.
    return {{emit1(*this, {ins[0].value}, p), true}};
  }
};

// ---- reductions over a placement -----------------------------------------
// Reduces rows [lo, hi) in drx's canonical tree (drx/core/canonical_tree.h), so any partition
// of the clients into aligned blocks reproduces the same bits.
template <ReduceKind K, class T>
void tree_reduce(const T* rows, int64_t lo, int64_t hi, int64_t width, T* out) {
  const auto w = static_cast<size_t>(width);
  const std::vector<T> all = canonical_tree::reduce(
      lo, hi, [&](int64_t i) { return std::vector<T>(rows + i * width, rows + (i + 1) * width); },
      [&](std::vector<T> left, const std::vector<T>& right) {
        for (size_t k = 0; k < w; ++k) left[k] = reduce_combine<K>(left[k], right[k]);
        return left;
      });
  std::memcpy(out, all.data(), w * sizeof(T));
}

class PlacementReducePrim : public Primitive {
 public:
  PlacementReducePrim(const char* name, ReduceKind k) : Primitive(name), kind_(k) {}
  // In drx's canonical tree over client indices (so the sums are drx's,
  // bitwise), or as one stablehlo.reduce over the placement axis.
  void lower(StableHloEmitter& em, const Params&) const override {
    const Type& x = em.operand_type(0);
    const Type& out = em.result_type(0);
    const int64_t n = x.shape[0];
    if (n == 0) {
      em.set_results({em.splat(0.0, out.dtype, out.shape)});
      return;
    }
    if (!em.canonical_placement_reductions()) {
      em.set_results({emit_reduce(em, kind_, em.operand(0), x, {0})});
      return;
    }
    const Type row(x.dtype, out.shape);
    const auto client_row = [&](int64_t i) {
      std::vector<int64_t> starts(x.shape.size(), 0), limits = x.shape;
      starts[0] = i, limits[0] = i + 1;
      Shape one = x.shape;
      one[0] = 1;
      const std::string slice =
          em.emit1("stablehlo.slice", {em.operand(0)},
                   {{"start_indices", mlir_i64_array(starts)},
                    {"limit_indices", mlir_i64_array(limits)},
                    {"strides", mlir_i64_array(std::vector<int64_t>(x.shape.size(), 1))}},
                   Type(x.dtype, one));
      return em.emit1("stablehlo.reshape", {slice}, {}, row);
    };
    const auto combine = [&](const std::string& left, const std::string& right) {
      return em.emit1(reduce_combiner(kind_), {left, right}, {}, row);
    };
    em.set_results({canonical_tree::reduce(0, n, client_row, combine)});
  }
  bool placement_aware() const override { return true; }
  std::optional<ReduceKind> reduction() const override { return kind_; }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (ins.size() != 1)
      throw TypeError(name() + ": takes one operand, got " + std::to_string(ins.size()));
    require_placed(name(), ins[0], p.get_string("placement", name()));
    if (ins[0].dtype == DType::bool_ && kind_ == ReduceKind::sum)
      throw TypeError(name() + ": operand " + ins[0].str() +
                      " is bool; convert it with astype first");
    if (kind_ != ReduceKind::sum && ins[0].shape[0] == 0)
      throw TypeError(name() + ": operand " + ins[0].str() + " has no clients to reduce");
    return {per_client(ins[0])};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    const Array& x = ins[0];
    Array out(x.dtype(), Shape(x.shape().begin() + 1, x.shape().end()));
    int64_t n = x.shape()[0], width = out.size();
    if (n == 0 || width == 0) return {out};
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      dispatch_reduce(kind_,
                      [&](auto k) { tree_reduce<k()>(x.data<T>(), 0, n, width, out.data<T>()); });
    });
    return {out};
  }
  MaybeValues jvp(const Values& x, const MaybeValues& t, const Values& outs,
                  const Params& p) const override {
    if (kind_ == ReduceKind::sum) return {emit1(*this, {*t[0]}, p)};
    Value mask = ties(x[0], outs[0]);
    Value picked = where(mask, *t[0], zeros_like(*t[0]));
    return {emit_reduce_sum(picked) / emit_reduce_sum(astype(mask, x[0].dtype()))};
  }
  MaybeValues vjp(const Values& x, const Values& outs, const MaybeValues& ct,
                  const Params& p) const override {
    int64_t n = x[0].shape()[0];
    Params bp{{"placement", p.at("placement", name())}, {"size", n}};
    Value spread = emit1(prims::broadcast(), {*ct[0]}, bp);
    if (kind_ == ReduceKind::sum) return {spread};
    Value mask = ties(x[0], outs[0]);
    Value count = emit1(prims::broadcast(), {emit_reduce_sum(astype(mask, x[0].dtype()))}, bp);
    return {where(mask, spread / count, zeros_like(spread))};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    // [n, B, ...] reduces to [B, ...]: the batch is back at axis 0.
    return {{emit1(*this, {ins[0].value}, p), true}};
  }

 private:
  // Where x attains the reduced value (derivatives are shared among ties).
  static Value ties(const Value& x, const Value& reduced) {
    Params bp{{"placement", x.type().placement}, {"size", x.shape()[0]}};
    return equal(x, emit1(prims::broadcast(), {reduced}, bp));
  }
  ReduceKind kind_;
};

// ---- map_fn ---------------------------------------------------------------
std::shared_ptr<const Program> simplified(Program p) {
  return std::make_shared<const Program>(simplify(p));
}

class MapFnPrim : public Primitive {
 public:
  MapFnPrim() : Primitive("map_fn") {}
  // As DrJAX: operands and results constrained to the placement's mesh axis,
  // the body batched over the placement axis (drx's vmap of the body) and
  // inlined as vmap(spmd_axis_name=placement). A body's placed inputs and
  // outputs (nested placements) carry the batch after their own placement
  // axes, so those are transposed.
  void lower(StableHloEmitter& em, const Params& p) const override {
    const MapFnParams m = MapFnParams::of(p);
    const Program& body = *m.body;
    const std::string& placement = m.placement;
    const int64_t n = em.operand_type(0).shape[0];
    const Program batched = vmap_program(body, std::vector<bool>(body.inputs.size(), true), n);
    // Moves axis `from` of x (type t) to `to`, giving a value of type `want`.
    auto move = [&](const std::string& x, const Type& t, int64_t from, int64_t to,
                    const Type& want) {
      if (from == to) return x;
      std::vector<int64_t> perm;
      for (int64_t d = 0; d < t.ndim(); ++d)
        if (d != from) perm.push_back(d);
      perm.insert(perm.begin() + to, from);
      Shape shape;
      for (int64_t d : perm) shape.push_back(t.shape[static_cast<size_t>(d)]);
      if (shape != want.shape)
        throw Error("map_fn: cannot arrange " + t.str() + " as " + want.str());
      return em.emit1("stablehlo.transpose", {x}, {{"permutation", mlir_i64_array(perm)}}, want);
    };
    std::vector<std::string> args;
    for (size_t i = 0; i < em.num_operands(); ++i) {
      const int64_t depth = placement_depth(body.type_of(body.inputs[i]).placement);
      const std::string operand = em.constrain_placed(em.operand(i), em.operand_type(i));
      args.push_back(
          move(operand, em.operand_type(i), 0, depth, batched.type_of(batched.inputs[i])));
    }
    std::vector<std::string> outs = em.inline_batched(batched, args, placement);
    for (size_t k = 0; k < outs.size(); ++k) {
      const int64_t depth = placement_depth(body.type_of(body.outputs[k]).placement);
      outs[k] = move(outs[k], batched.type_of(batched.outputs[k]), depth, 0, em.result_type(k));
      outs[k] = em.constrain_placed(outs[k], em.result_type(k));
    }
    em.set_results(outs);
  }
  bool placement_aware() const override { return true; }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    const MapFnParams m = MapFnParams::of(p);
    const std::string& placement = m.placement;
    require_single_level(name(), placement);
    const Program& body = *m.body;
    if (ins.size() != body.inputs.size())
      throw TypeError("map_fn: " + std::to_string(ins.size()) + " operands for a body @" +
                      body.name + " of " + std::to_string(body.inputs.size()) + " inputs");
    if (ins.empty()) throw TypeError("map_fn: needs at least one placed operand");
    int64_t n = -1;
    for (size_t i = 0; i < ins.size(); ++i) {
      const Type& t = ins[i];
      if (t.placement.empty())
        throw TypeError("map_fn: operand " + std::to_string(i) + " (" + t.str() +
                        ") is not placed; broadcast server values with drx::broadcast before "
                        "mapping");
      if (t.shape.empty())
        throw TypeError("map_fn: operand " + std::to_string(i) + " (" + t.str() +
                        ") is placed but has no leading (placement) axis");
      if (outer_placement(t.placement) != placement)
        throw TypeError("map_fn[" + placement + "]: operand " + std::to_string(i) + " (" + t.str() +
                        ") is placed at '" + t.placement + "'");
      if (n >= 0 && t.shape[0] != n)
        throw TypeError("map_fn: placed operands have different sizes: " + std::to_string(n) +
                        " and " + std::to_string(t.shape[0]) + " (operand " + std::to_string(i) +
                        ", " + t.str() + ")");
      n = t.shape[0];
      const Type& want = body.type_of(body.inputs[i]);
      if (per_client(t) != want)
        throw TypeError("map_fn: operand " + std::to_string(i) + " (" + t.str() +
                        ") gives per-client values of type " + per_client(t).str() + ", body @" +
                        body.name + " expects " + want.str());
    }
    std::vector<Type> outs;
    for (int v : body.outputs) {
      Type t = body.type_of(v);
      t.shape.insert(t.shape.begin(), n);
      t.placement = nested_placement(placement, t.placement);
      if (std::string problem = placement_path_problem(t.placement); !problem.empty())
        throw TypeError("map_fn[" + placement + "]: body @" + body.name + " returns a value " +
                        "placed at '" + body.type_of(v).placement + "': " + problem);
      outs.push_back(t);
    }
    return outs;
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const Program& body = *MapFnParams::of(p).body;
    int64_t n = ins[0].shape()[0];
    std::vector<Array> outs;
    for (int v : body.outputs) {
      Shape s = body.type_of(v).shape;
      s.insert(s.begin(), n);
      outs.emplace_back(body.type_of(v).dtype, s);
    }
    std::vector<Array> slice(ins.size());
    for (int64_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < ins.size(); ++k) {
        slice[k] = Array(ins[k].dtype(), per_client(Type(ins[k].dtype(), ins[k].shape())).shape);
        std::memcpy(slice[k].raw(),
                    static_cast<const std::byte*>(ins[k].raw()) +
                        static_cast<size_t>(i) * row_bytes(ins[k]),
                    row_bytes(ins[k]));
      }
      std::vector<Array> r = interpret(body, slice);
      for (size_t k = 0; k < outs.size(); ++k)
        std::memcpy(static_cast<std::byte*>(outs[k].raw()) + static_cast<size_t>(i) * r[k].nbytes(),
                    r[k].raw(), r[k].nbytes());
    }
    return outs;
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                  const Params& p) const override {
    BodyDerivativeArgs d = body_jvp_args(primals, tangents);
    const MapFnParams m = MapFnParams::of(p);
    const Params bp = m.with_body(simplified(jvp_program(*m.body, d.with, true))).to_params();
    return result_tangents(emit(*this, d.args, bp), outs);
  }

  MaybeValues vjp(const Values& primals, const Values&, const MaybeValues& cts,
                  const Params& p) const override {
    BodyDerivativeArgs d = body_vjp_args(primals, cts);
    const MapFnParams m = MapFnParams::of(p);
    const Params bp =
        m.with_body(simplified(vjp_program(*m.body, d.wrt, d.with, true))).to_params();
    Values r = emit(*this, d.args, bp);
    MaybeValues result;
    size_t k = 0;
    for (bool w : d.wrt) result.push_back(w ? MaybeValue(r[k++]) : std::nullopt);
    return result;
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& p) const override {
    std::vector<bool> batched;
    Values args;
    for (const Batched& b : ins) {
      batched.push_back(b.batched);
      args.push_back(b.value);
    }
    const MapFnParams m = MapFnParams::of(p);
    const Params bp =
        m.with_body(std::make_shared<const Program>(vmap_program(*m.body, batched, batch_size)))
            .to_params();
    std::vector<Batched> r;
    for (const Value& v : emit(*this, args, bp)) r.push_back({v, true});
    return r;
  }
};

}  // namespace

namespace prims {
const Primitive& broadcast() {
  static const BroadcastPrim p;
  return p;
}
const Primitive& map_fn() {
  static const MapFnPrim p;
  return p;
}
const Primitive& reduce_sum() {
  static const PlacementReducePrim p("reduce_sum", ReduceKind::sum);
  return p;
}
const Primitive& reduce_max() {
  static const PlacementReducePrim p("reduce_max", ReduceKind::max);
  return p;
}
const Primitive& reduce_min() {
  static const PlacementReducePrim p("reduce_min", ReduceKind::min);
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(mapreduce) {
  registry.add(prims::broadcast());
  registry.add(prims::reduce_sum());
  registry.add(prims::reduce_max());
  registry.add(prims::reduce_min());
  registry.add(prims::map_fn());
}

}  // namespace drx
