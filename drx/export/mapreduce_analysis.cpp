// The analysis behind drx::mapreduce_form: which top-level values are the
// server's and which are placed, their levels and stages, the per-client form
// of top-level equations on placed values, and mean aggregations.
#include "drx/export/mapreduce_analysis.h"

#include <optional>

#include "drx/array/error.h"
#include "drx/core/primitive.h"
#include "drx/mapreduce/primitives.h"
#include "drx/ops/primitives.h"
#include "drx/transforms/transforms.h"

namespace drx::mapreduce_detail {

Type unplaced_row(const Type& t) {
  return Type(t.dtype, Shape(t.shape.begin() + 1, t.shape.end()));
}

bool is_reduction(const Primitive* p) {
  return p == &prims::reduce_sum() || p == &prims::reduce_max() || p == &prims::reduce_min();
}
Aggregation reduction_kind(const Primitive* p) {
  if (p == &prims::reduce_sum()) return Aggregation::sum;
  return p == &prims::reduce_max() ? Aggregation::max : Aggregation::min;
}

// Whether e's sub-programs (loop bodies, branches) broadcast, map or reduce.
bool communicates(const Eqn& e) {
  for (const auto& [key, attr] : e.params.items())
    if (const auto* sub = std::get_if<std::shared_ptr<const Program>>(&attr))
      for (const Eqn& inner : (*sub)->eqns)
        if (is_reduction(inner.prim) || inner.prim == &prims::broadcast() ||
            inner.prim == &prims::map_fn() || inner.prim == &prims::place() || communicates(inner))
          return true;
  return false;
}

// Appends prim[params](ins) to q, typed by the primitive's rules.
std::vector<int> append(Program& q, const Primitive& prim, Params params, std::vector<int> ins) {
  std::vector<Type> in_types;
  for (int v : ins) in_types.push_back(q.type_of(v));
  Eqn e{&prim, std::move(params), std::move(ins), {}};
  for (const Type& t : prim.infer_types(in_types, e.params)) e.outs.push_back(q.add_var(t));
  q.eqns.push_back(e);
  return q.eqns.back().outs;
}
int append1(Program& q, const Primitive& prim, Params params, std::vector<int> ins) {
  return append(q, prim, std::move(params), std::move(ins)).at(0);
}

// ---- per-client forms of top-level equations on placed values ----------------

namespace {

// Candidate parameters for e's primitive on one client's rows: the same, or
// with the placement axis taken out of the axis lists (each list read as
// per-axis values, dropping the first, or as axis numbers, dropping 0 and
// renumbering). Each candidate is checked by batching it back with vmap.
std::vector<Params> candidate_params(const Params& params) {
  std::vector<std::string> lists, ints;
  for (const auto& [key, attr] : params.items()) {
    if (std::holds_alternative<std::vector<int64_t>>(attr)) lists.push_back(key);
    if (std::holds_alternative<int64_t>(attr)) ints.push_back(key);
  }
  std::vector<Params> out = {params};
  if (lists.size() + ints.size() > 6) return out;
  const size_t choices = size_t{1} << (2 * lists.size() + ints.size());
  for (size_t c = 1; c < choices; ++c) {
    Params q = params;
    bool valid = true;
    size_t bits = c;
    for (const std::string& key : lists) {
      const int mode = static_cast<int>(bits & 3);
      bits >>= 2;
      std::vector<int64_t> v = params.get_ints(key, "mapreduce_form");
      if (mode == 1) {
        if (v.empty())
          valid = false;
        else
          v.erase(v.begin());
      } else if (mode == 2) {
        std::vector<int64_t> w;
        for (int64_t a : v)
          if (a != 0) w.push_back(a - 1);
        v = w;
      } else if (mode == 3) {
        valid = false;
      }
      q.set(key, v);
    }
    for (const std::string& key : ints) {
      if (bits & 1) {
        const int64_t a = params.get_int(key, "mapreduce_form");
        if (a <= 0) valid = false;
        q.set(key, a - 1);
      }
      bits >>= 1;
    }
    if (valid) out.push_back(q);
  }
  return out;
}

}  // namespace

// The parameters that run e on one client's rows, if e works row by row:
// batching the one-row equation over the clients must give e back exactly.
std::optional<Params> per_client_params(const Eqn& e, const Program& p) {
  std::vector<Type> rows;
  for (int v : e.ins) rows.push_back(unplaced_row(p.type_of(v)));
  for (const Params& candidate : candidate_params(e.params)) {
    Program one;
    try {
      for (const Type& t : rows) one.inputs.push_back(one.add_var(t));
      one.outputs = append(one, *e.prim, candidate, one.inputs);
      const int64_t n = p.type_of(e.ins[0]).shape[0];
      Program batched = vmap_program(one, std::vector<bool>(rows.size(), true), n);
      if (batched.eqns.size() != 1) continue;
      const Eqn& b = batched.eqns[0];
      if (b.prim != e.prim || !(b.params == e.params) || b.ins != batched.inputs ||
          b.outs != batched.outputs)
        continue;
      bool same_types = true;
      for (size_t k = 0; k < e.outs.size(); ++k)
        same_types &= batched.type_of(b.outs[k]).shape == p.type_of(e.outs[k]).shape;
      if (same_types) return candidate;
    } catch (const Error&) {
    }
  }
  return std::nullopt;
}

// ---- the analysis ------------------------------------------------------------

namespace {

void check_placement(Analysis& a, const Type& t, const std::string& where) {
  if (t.placement.empty()) return;
  if (placement_depth(t.placement) != 1)
    throw Error("mapreduce_form: " + where + " has type " + t.str() +
                ", placed at nested placements; the form splits one placement level (move the "
                "inner levels into map_fn bodies)");
  if (a.placement.empty()) {
    a.placement = t.placement;
    a.clients = t.shape[0];
  } else if (t.placement != a.placement) {
    throw Error("mapreduce_form: " + where + " is placed at '" + t.placement +
                "', but the program also places values at '" + a.placement +
                "'; the form splits one placement");
  }
}

}  // namespace

void analyse(Analysis& a) {
  const Program& p = a.p;
  const size_t nv = p.var_types.size();
  a.producer.assign(nv, -1);
  a.role.assign(nv, Role::server);
  a.level.assign(nv, 0);
  a.stage.assign(nv, -1);
  a.is_input.assign(nv, false);
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const int v = p.inputs[k];
    a.is_input[static_cast<size_t>(v)] = true;
    check_placement(a, p.type_of(v), "input " + std::to_string(k));
    if (!p.type_of(v).placement.empty()) a.role[static_cast<size_t>(v)] = Role::placed;
  }
  for (size_t i = 0; i < p.eqns.size(); ++i) {
    const Eqn& e = p.eqns[i];
    for (int v : e.outs) {
      a.producer[static_cast<size_t>(v)] = static_cast<int>(i);
      check_placement(a, p.type_of(v), a.describe(i));
    }
    bool placed_in = false;
    int lvl = 0, stg = -1;
    for (int v : e.ins) {
      if (a.role[static_cast<size_t>(v)] == Role::placed) {
        placed_in = true;
        stg = std::max(stg, a.stage[static_cast<size_t>(v)]);
      } else {
        lvl = std::max(lvl, a.level[static_cast<size_t>(v)]);
      }
    }
    auto set_placed = [&](int s) {
      for (int v : e.outs) {
        a.role[static_cast<size_t>(v)] = Role::placed;
        a.stage[static_cast<size_t>(v)] = s;
      }
    };
    if (is_reduction(e.prim)) {
      const int s = std::max(stg, 0);
      a.level[static_cast<size_t>(e.outs[0])] = s + 1;
      a.stages = std::max(a.stages, s + 1);
    } else if (e.prim == &prims::broadcast()) {
      set_placed(lvl);
    } else if (e.prim == &prims::place()) {
      if (placed_in)
        throw Error("mapreduce_form: " + a.describe(i) +
                    " unplaces a placed value: the server would read every client's rows; "
                    "aggregate them with reduce_sum, reduce_mean or reduce_max instead");
      const int v = e.ins[0];
      set_placed(a.is_input[static_cast<size_t>(v)] || a.rematerializable(v) ? -1 : lvl);
    } else if (e.prim == &prims::map_fn()) {
      set_placed(stg);
    } else if (communicates(e)) {
      throw Error("mapreduce_form: " + a.describe(i) + " talks to the clients inside its body " +
                  "(a loop or branch over broadcasts and aggregations); the form needs each " +
                  "round of communication at the top level: unroll the rounds");
    } else if (placed_in) {
      if (!per_client_params(e, p))
        throw Error("mapreduce_form: " + a.describe(i) + " on " + p.type_of(e.ins[0]).str() +
                    " works across the clients' rows at the top level, so no client can run "
                    "its part alone; do per-client work inside map_fn");
      set_placed(stg);
    } else {
      for (int v : e.outs) a.level[static_cast<size_t>(v)] = lvl;
    }
  }
  if (a.placement.empty())
    throw Error("mapreduce_form: program @" + p.name +
                " places no values, so there is no client work to split out");
  for (size_t k = 0; k < p.outputs.size(); ++k)
    if (a.role[static_cast<size_t>(p.outputs[k])] == Role::placed)
      throw Error("mapreduce_form: output " + std::to_string(k) + " (" +
                  p.type_of(p.outputs[k]).str() +
                  ") is placed; program outputs are server values: aggregate it");
  if (a.stages == 0)
    throw Error("mapreduce_form: program @" + p.name +
                " never aggregates over its clients, so there is no communication to split");
}

// A mean aggregation where the program divides a reduce_sum, read by nothing
// else, by a constant that is the number of clients everywhere.
void find_means(Analysis& a) {
  const Program& p = a.p;
  a.mean_division.assign(p.eqns.size(), -1);
  a.is_mean_division.assign(p.eqns.size(), false);
  std::vector<int> uses(p.var_types.size(), 0), user(p.var_types.size(), -1);
  for (size_t i = 0; i < p.eqns.size(); ++i)
    for (int v : p.eqns[i].ins) {
      ++uses[static_cast<size_t>(v)];
      user[static_cast<size_t>(v)] = static_cast<int>(i);
    }
  for (int v : p.outputs) uses[static_cast<size_t>(v)] += 2;
  for (size_t i = 0; i < p.eqns.size(); ++i) {
    const Eqn& e = p.eqns[i];
    if (e.prim != &prims::reduce_sum() || uses[static_cast<size_t>(e.outs[0])] != 1) continue;
    const int j = user[static_cast<size_t>(e.outs[0])];
    const Eqn& d = p.eqns[static_cast<size_t>(j)];
    if (d.prim != &prims::div() || d.ins[0] != e.outs[0] || d.ins[1] == e.outs[0] ||
        !a.rematerializable(d.ins[1]) || a.eqn_of(d.ins[1])->prim != &prims::constant())
      continue;
    const Array& n = a.eqn_of(d.ins[1])->params.get_array("value", "constant");
    bool all_n = n.shape() == p.type_of(e.outs[0]).shape;
    for (int64_t k = 0; k < n.size() && all_n; ++k)
      all_n = n.element_as_double(k) == static_cast<double>(a.clients);
    if (!all_n) continue;
    a.mean_division[i] = j;
    a.is_mean_division[static_cast<size_t>(j)] = true;
  }
}

}  // namespace drx::mapreduce_detail
