#include "drx/core/trace.h"
#include "drx/core/walk.h"
#include "drx/ops/ops.h"
#include "drx/transforms/transforms.h"

namespace drx {

namespace {
// A value of the program being differentiated, and its tangent.
struct Dual {
  Value primal;
  MaybeValue tangent;
};
}  // namespace

Values jvp_emit(const Program& p, const Values& primals, const MaybeValues& tangents,
                MaybeValues& out_tangents) {
  std::vector<Dual> args;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    args.push_back(
        {primals[i], carries_derivative(p.type_of(p.inputs[i])) ? tangents[i] : std::nullopt});
  Values ins;
  MaybeValues tins;
  std::vector<Dual> results =
      walk_program(p, args, [&](size_t, const Eqn& e, const std::vector<Dual>& in) {
        ins.clear();
        tins.clear();
        bool any_tangent = false;
        for (const Dual& d : in) {
          ins.push_back(d.primal);
          tins.push_back(d.tangent);
          any_tangent = any_tangent || d.tangent.has_value();
        }
        std::optional<std::pair<Values, MaybeValues>> joint;
        if (any_tangent) joint = e.prim->joint_jvp(ins, tins, e.params);
        Values outs = joint ? joint->first : emit(*e.prim, ins, e.params);
        std::vector<Dual> duals;
        for (const Value& o : outs) duals.push_back({o, std::nullopt});
        if (!any_tangent) return duals;
        MaybeValues touts = joint ? joint->second : e.prim->jvp(ins, tins, outs, e.params);
        if (touts.size() != outs.size())
          throw Error("internal: jvp rule of " + e.prim->name() + " returned " +
                      std::to_string(touts.size()) + " tangents for " +
                      std::to_string(outs.size()) + " outputs");
        for (size_t i = 0; i < outs.size(); ++i)
          if (carries_derivative(outs[i].type())) duals[i].tangent = touts[i];
        return duals;
      });
  Values result;
  out_tangents.clear();
  for (const Dual& d : results) {
    result.push_back(d.primal);
    out_tangents.push_back(d.tangent);
  }
  return result;
}

Program jvp_program(const Program& p, const std::vector<bool>& has_tangent, bool tangents_only) {
  TraceScope scope;
  Values primals;
  MaybeValues tangents;
  for (int v : p.inputs) primals.push_back(scope.add_input(p.type_of(v)));
  for (size_t i = 0; i < p.inputs.size(); ++i)
    tangents.push_back(has_tangent[i] ? MaybeValue(scope.add_input(p.type_of(p.inputs[i])))
                                      : std::nullopt);
  MaybeValues out_tangents;
  Values outs = jvp_emit(p, primals, tangents, out_tangents);
  Values results = tangents_only ? Values{} : outs;
  for (size_t i = 0; i < out_tangents.size(); ++i)
    results.push_back(out_tangents[i] ? *out_tangents[i] : zeros_like(outs[i]));
  Program r = scope.finish(results);
  r.name = p.name + "_jvp";
  r.placements = p.placements;
  return r;
}

Program jvp_program(const Program& p) {
  return jvp_program(p, std::vector<bool>(p.inputs.size(), true), false);
}

BodyDerivativeArgs body_jvp_args(const Values& primals, const MaybeValues& tangents, size_t first) {
  BodyDerivativeArgs r{{}, {}, primals};
  for (size_t i = first; i < tangents.size(); ++i) {
    r.with.push_back(tangents[i].has_value() && carries_derivative(primals[i].type()));
    if (r.with.back()) r.args.push_back(*tangents[i]);
  }
  return r;
}

MaybeValues result_tangents(const Values& tangents, const Values& outs) {
  MaybeValues r(tangents.begin(), tangents.end());
  for (size_t i = 0; i < outs.size(); ++i)
    if (!carries_derivative(outs[i].type())) r[i] = std::nullopt;
  return r;
}

}  // namespace drx
