// The split of a program over a placement into MapReduce stages.
//
// Every top-level value is a server value or a placed one. A server value has
// a level, the number of aggregations on its longest path from the inputs; a
// placed value has a stage, the highest level of the server values it was
// broadcast from (-1 when it needs none: the clients' data, constants, the
// client index). reduce_* of a placed value of stage s is aggregated in stage
// s and gives a server value of level s + 1. Stage s's client work is what its
// aggregations need, one client's rows of it: map_fn bodies inlined, per-client
// top-level equations on one row. A placed value an earlier stage computed is
// recomputed from the broadcasts and the data, unless a map_fn computed it:
// then it is client state, kept on the client between the stages.
#include "drx/export/mapreduce_form.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "drx/array/error.h"
#include "drx/core/primitive.h"
#include "drx/export/mapreduce_analysis.h"
#include "drx/mapreduce/map_fn_params.h"
#include "drx/mapreduce/primitives.h"
#include "drx/ops/primitives.h"
#include "drx/transforms/simplify.h"
#include "drx/transforms/transforms.h"

namespace drx {

const char* aggregation_name(Aggregation a) {
  switch (a) {
    case Aggregation::sum:
      return "sum";
    case Aggregation::mean:
      return "mean";
    case Aggregation::weighted_mean:
      return "weighted_mean";
    case Aggregation::max:
      return "max";
    case Aggregation::min:
      return "min";
  }
  return "?";
}

Aggregation aggregation_from_name(const std::string& name) {
  for (Aggregation a : {Aggregation::sum, Aggregation::mean, Aggregation::weighted_mean,
                        Aggregation::max, Aggregation::min})
    if (name == aggregation_name(a)) return a;
  throw Error("aggregation: '" + name + "' is not one of sum, mean, weighted_mean, max, min");
}

namespace {

using namespace mapreduce_detail;

// ---- building the parts --------------------------------------------------------

// A part under construction: a Program over named inputs, filled by copying
// equations of the split program (variable `var` of it maps to local[var]).
struct PartBuilder {
  const Analysis& a;
  bool client;  // client work: placed values are one client's rows
  Part part;
  std::map<int, int> local;
  std::map<std::string, int> named_inputs;

  PartBuilder(const Analysis& analysis, bool is_client, const std::string& name)
      : a(analysis), client(is_client) {
    part.program.name = name;
    for (const auto& [pl, size] : a.p.placements)
      if (pl != a.placement) part.program.placements.emplace_back(pl, size);
  }

  int input(const std::string& name, const Type& t) {
    auto it = named_inputs.find(name);
    if (it != named_inputs.end()) return it->second;
    const int v = part.program.add_var(t);
    part.program.inputs.push_back(v);
    part.inputs.push_back(name);
    named_inputs[name] = v;
    return v;
  }
  Type local_type(int var) const {
    const Type& t = a.p.type_of(var);
    return t.placement.empty() ? t : unplaced_row(t);
  }
  // A server value read here: copied if it is a constant, else an input.
  int server(int var) {
    if (auto it = local.find(var); it != local.end()) return it->second;
    if (a.rematerializable(var)) {
      copy(*a.eqn_of(var));
      return local.at(var);
    }
    return local[var] = input(server_name(var), a.p.type_of(var));
  }
  void copy(const Eqn& e) {
    std::vector<int> ins;
    for (int v : e.ins) ins.push_back(local.at(v));
    std::vector<int> outs = append(part.program, *e.prim, e.params, ins);
    for (size_t k = 0; k < outs.size(); ++k) local[e.outs[k]] = outs[k];
  }
  void output(const std::string& name, int local_var) {
    if (std::find(part.outputs.begin(), part.outputs.end(), name) != part.outputs.end()) return;
    part.program.outputs.push_back(local_var);
    part.outputs.push_back(name);
  }
};

// One client's row of placed value `var`, emitting whatever computes it into
// the client work b. `state` lists the placed values read as client state.
class ClientWork {
 public:
  ClientWork(const Analysis& a, PartBuilder& b, Stage& stage, const std::set<int>& state)
      : a_(a), b_(b), stage_(stage), state_(state) {}

  int row(int var) {
    if (auto it = b_.local.find(var); it != b_.local.end()) return it->second;
    if (state_.count(var)) return b_.local[var] = b_.input(client_name(var), b_.local_type(var));
    if (a_.is_input[static_cast<size_t>(var)]) return data(var);
    const Eqn& e = *a_.eqn_of(var);
    if (e.prim == &prims::broadcast()) {
      const int v = b_.server(e.ins[0]);
      note_broadcast(e.ins[0]);
      return b_.local[var] = v;
    }
    if (e.prim == &prims::place()) return placed_row(e);
    std::vector<int> ins;
    for (int v : e.ins) ins.push_back(row(v));
    std::vector<int> outs;
    if (e.prim == &prims::map_fn()) {
      outs = inline_body(*MapFnParams::of(e).body, ins);
    } else {
      outs = append(b_.part.program, *e.prim, *per_client_params(e, a_.p), ins);
    }
    for (size_t k = 0; k < outs.size(); ++k) b_.local[e.outs[k]] = outs[k];
    return b_.local.at(var);
  }

 private:
  int data(int var) {
    const std::string name = client_name(var);
    if (std::find(stage_.client_data.begin(), stage_.client_data.end(), name) ==
        stage_.client_data.end())
      stage_.client_data.push_back(name);
    return b_.local[var] = b_.input(name, b_.local_type(var));
  }
  void note_broadcast(int server_var) {
    if (a_.rematerializable(server_var)) return;
    const std::string name = server_name(server_var);
    if (std::find(stage_.broadcast.begin(), stage_.broadcast.end(), name) == stage_.broadcast.end())
      stage_.broadcast.push_back(name);
  }
  int client_index() { return b_.input(kClientIndex, Type(DType::i32, {})); }
  int take_row(int full) {
    return append1(b_.part.program, prims::take(), Params{{"axis", int64_t{0}}},
                   {full, client_index()});
  }
  // place(x) of a server value x: client i holds row i of x.
  int placed_row(const Eqn& e) {
    const int out = e.outs[0], x = e.ins[0];
    if (a_.is_input[static_cast<size_t>(x)]) return data(out);
    const Type& t = a_.p.type_of(x);
    if (a_.rematerializable(x)) {
      const Eqn& src = *a_.eqn_of(x);
      if (src.prim == &prims::iota() && t.ndim() == 1 &&
          src.params.get_int("dimension", "iota") == 0)
        return b_.local[out] = t.dtype == DType::i32
                                   ? client_index()
                                   : append1(b_.part.program, prims::convert(),
                                             Params{{"dtype", t.dtype}}, {client_index()});
      if (src.prim == &prims::constant()) {
        const Array& value = src.params.get_array("value", "constant");
        const Array first = client_row(value, 0);
        bool uniform = true;
        for (int64_t i = 1; i < t.shape[0] && uniform; ++i)
          uniform = client_row(value, i).bitwise_equal(first);
        if (uniform)
          return b_.local[out] =
                     append1(b_.part.program, prims::constant(), Params{{"value", first}}, {});
      }
    }
    const int full = b_.server(x);
    note_broadcast(x);
    return b_.local[out] = take_row(full);
  }
  std::vector<int> inline_body(const Program& body, const std::vector<int>& ins) {
    std::map<int, int> m;
    for (size_t k = 0; k < body.inputs.size(); ++k) m[body.inputs[k]] = ins[k];
    for (const Eqn& e : body.eqns) {
      std::vector<int> args;
      for (int v : e.ins) args.push_back(m.at(v));
      std::vector<int> outs = append(b_.part.program, *e.prim, e.params, args);
      for (size_t k = 0; k < outs.size(); ++k) m[e.outs[k]] = outs[k];
    }
    std::vector<int> outs;
    for (int v : body.outputs) outs.push_back(m.at(v));
    return outs;
  }

  const Analysis& a_;
  PartBuilder& b_;
  Stage& stage_;
  const std::set<int>& state_;
};

// The placed values stage t reads from earlier stages as client state: those
// a map_fn of an earlier stage computed, found walking back from the roots.
std::set<int> state_reads(const Analysis& a, const std::vector<int>& roots, int t) {
  std::set<int> state, seen;
  std::function<void(int)> walk = [&](int var) {
    if (!seen.insert(var).second || a.role[static_cast<size_t>(var)] != Role::placed) return;
    const Eqn* e = a.eqn_of(var);
    if (!e) return;
    const int s = a.stage[static_cast<size_t>(var)];
    if (e->prim == &prims::map_fn() && s >= 0 && s < t) {
      state.insert(var);
      return;
    }
    for (int v : e->ins) walk(v);
  };
  for (int r : roots) walk(r);
  return state;
}

// Server equations of each part: level 0 -> stage 0's prepare; level l >= 1
// -> stage l's prepare when stage l's broadcasts need it (or it reads what
// those need), else stage l-1's update; level `stages` -> the last update.
// Returns, per equation, 2 * stage for a prepare and 2 * stage + 1 for an
// update (-1: not a server equation or a constant).
std::vector<int> server_parts(const Analysis& a,
                              const std::vector<std::vector<std::string>>& bcast) {
  const Program& p = a.p;
  std::vector<int> part(p.eqns.size(), -1);
  std::vector<bool> for_broadcast(p.var_types.size(), false);
  for (const auto& names : bcast)
    for (const std::string& n : names) for_broadcast[std::stoul(n.substr(1))] = true;
  for (size_t i = p.eqns.size(); i-- > 0;) {
    const Eqn& e = p.eqns[i];
    if (e.outs.empty() || a.role[static_cast<size_t>(e.outs[0])] != Role::server ||
        is_reduction(e.prim))
      continue;
    bool feeds = false;
    for (int v : e.outs) feeds = feeds || for_broadcast[static_cast<size_t>(v)];
    if (feeds)
      for (int v : e.ins)
        if (a.level[static_cast<size_t>(v)] == a.level[static_cast<size_t>(e.outs[0])])
          for_broadcast[static_cast<size_t>(v)] = true;
  }
  std::vector<bool> in_prepare(p.var_types.size(), false);
  for (size_t i = 0; i < p.eqns.size(); ++i) {
    const Eqn& e = p.eqns[i];
    if (e.outs.empty() || a.role[static_cast<size_t>(e.outs[0])] != Role::server ||
        is_reduction(e.prim) || a.rematerializable(e.outs[0]) || a.is_mean_division[i])
      continue;
    const int l = a.level[static_cast<size_t>(e.outs[0])];
    bool prepare = l == 0;
    if (l >= 1 && l < a.stages) {
      for (int v : e.outs) prepare = prepare || for_broadcast[static_cast<size_t>(v)];
      for (int v : e.ins) prepare = prepare || in_prepare[static_cast<size_t>(v)];
    }
    for (int v : e.outs) in_prepare[static_cast<size_t>(v)] = prepare;
    part[i] = prepare ? 2 * l : 2 * (l - 1) + 1;
  }
  return part;
}

}  // namespace

Array client_row(const Array& a, int64_t i) {
  return prims::take().evaluate({a, full({}, static_cast<double>(i), DType::i32)},
                                Params{{"axis", int64_t{0}}})[0];
}

MapReduceForm mapreduce_form(const Program& program) {
  const Program p = simplify(program);
  Analysis a(p);
  analyse(a);
  find_means(a);
  MapReduceForm form;
  form.placement = a.placement;
  form.clients = a.clients;
  form.stages.resize(static_cast<size_t>(a.stages));
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const int v = p.inputs[k];
    const bool placed = a.role[static_cast<size_t>(v)] == Role::placed;
    form.inputs.push_back(placed ? client_name(v) : server_name(v));
    if (placed) form.client_data[client_name(v)] = k;
  }
  // Inputs placed by a place equation are client data under the place's name.
  for (const Eqn& e : p.eqns)
    if (e.prim == &prims::place() && a.is_input[static_cast<size_t>(e.ins[0])])
      for (size_t k = 0; k < p.inputs.size(); ++k)
        if (p.inputs[k] == e.ins[0]) form.client_data[client_name(e.outs[0])] = k;

  // Client work, last stage first: a stage's state reads become roots of the
  // stage that computes them.
  std::vector<std::vector<int>> roots(form.stages.size());
  for (const Eqn& e : p.eqns)
    if (is_reduction(e.prim))
      roots[static_cast<size_t>(std::max(a.stage[static_cast<size_t>(e.ins[0])], 0))].push_back(
          e.ins[0]);
  std::vector<std::set<int>> exports(form.stages.size());
  for (int t = a.stages - 1; t >= 0; --t) {
    Stage& stage = form.stages[static_cast<size_t>(t)];
    std::vector<int> want = roots[static_cast<size_t>(t)];
    want.insert(want.end(), exports[static_cast<size_t>(t)].begin(),
                exports[static_cast<size_t>(t)].end());
    const std::set<int> state = state_reads(a, want, t);
    for (int v : state) exports[static_cast<size_t>(a.stage[static_cast<size_t>(v)])].insert(v);
    PartBuilder b(a, true, client_work_name(t));
    ClientWork work(a, b, stage, state);
    for (size_t i = 0; i < p.eqns.size(); ++i) {
      const Eqn& e = p.eqns[i];
      if (!is_reduction(e.prim) || std::max(a.stage[static_cast<size_t>(e.ins[0])], 0) != t)
        continue;
      b.output(client_name(e.ins[0]), work.row(e.ins[0]));
      const int mean = a.mean_division[i];
      stage.aggregations.push_back(
          {client_name(e.ins[0]), mean >= 0 ? Aggregation::mean : reduction_kind(e.prim), "",
           server_name(mean >= 0 ? p.eqns[static_cast<size_t>(mean)].outs[0] : e.outs[0])});
    }
    for (int v : exports[static_cast<size_t>(t)]) {
      b.output(client_name(v), work.row(v));
      stage.state_out.push_back(client_name(v));
    }
    for (int v : state) stage.state_in.push_back(client_name(v));
    stage.client_work = std::move(b.part);
  }

  // Server parts.
  std::vector<std::vector<std::string>> bcast;
  for (const Stage& s : form.stages) bcast.push_back(s.broadcast);
  const std::vector<int> part_of = server_parts(a, bcast);
  std::vector<PartBuilder> builders;
  for (size_t t = 0; t < form.stages.size(); ++t) {
    builders.emplace_back(a, false, "stage" + std::to_string(t) + "_server_prepare");
    builders.emplace_back(a, false, "stage" + std::to_string(t) + "_server_update");
  }
  for (size_t i = 0; i < p.eqns.size(); ++i) {
    if (part_of[i] < 0) continue;
    PartBuilder& b = builders[static_cast<size_t>(part_of[i])];
    for (int v : p.eqns[i].ins) b.server(v);
    b.copy(p.eqns[i]);
  }
  // What each part computes that other parts, the clients or the outputs read.
  std::set<std::string> read;
  for (const PartBuilder& b : builders) read.insert(b.part.inputs.begin(), b.part.inputs.end());
  for (const Stage& s : form.stages) read.insert(s.broadcast.begin(), s.broadcast.end());
  PartBuilder& last = builders.back();
  for (int v : p.outputs) {
    if (a.rematerializable(v)) last.output(server_name(v), last.server(v));
    form.outputs.push_back(server_name(v));
    read.insert(server_name(v));
  }
  for (PartBuilder& b : builders)
    for (const auto& [var, local] : b.local)
      if (read.count(server_name(var)) && !a.rematerializable(var) &&
          !b.named_inputs.count(server_name(var)))
        b.output(server_name(var), local);
  for (size_t t = 0; t < form.stages.size(); ++t) {
    form.stages[t].server_prepare = std::move(builders[2 * t].part);
    form.stages[t].server_update = std::move(builders[2 * t + 1].part);
  }
  for (Stage& s : form.stages)
    for (Part* part : {&s.server_prepare, &s.client_work, &s.server_update})
      part->program = simplify(part->program);

  // The types of every name.
  auto record = [&](const Part& part) {
    for (size_t k = 0; k < part.inputs.size(); ++k)
      form.types[part.inputs[k]] = part.program.type_of(part.program.inputs[k]);
    for (size_t k = 0; k < part.outputs.size(); ++k)
      form.types[part.outputs[k]] = part.program.type_of(part.program.outputs[k]);
  };
  for (const Stage& s : form.stages) {
    record(s.server_prepare);
    record(s.client_work);
    record(s.server_update);
  }
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const Type& t = p.type_of(p.inputs[k]);
    form.types[form.inputs[k]] = form.inputs[k][0] == 'c' ? unplaced_row(t) : t;
  }
  for (const auto& [name, k] : form.client_data)
    form.types[name] = unplaced_row(p.type_of(p.inputs[k]));
  for (size_t k = 0; k < p.outputs.size(); ++k)
    form.types[form.outputs[k]] = p.type_of(p.outputs[k]);
  return form;
}

}  // namespace drx
