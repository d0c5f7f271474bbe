#include "drx/core/trace.h"
#include "drx/ops/ops.h"
#include "drx/transforms/transforms.h"

namespace drx {

Values jvp_emit(const Program& p, const Values& primals, const MaybeValues& tangents,
                MaybeValues& out_tangents) {
  std::vector<Value> env(p.var_types.size());
  std::vector<MaybeValue> tan(p.var_types.size());
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    env[static_cast<size_t>(p.inputs[i])] = primals[i];
    if (carries_derivative(p.type_of(p.inputs[i])))
      tan[static_cast<size_t>(p.inputs[i])] = tangents[i];
  }
  Values ins;
  MaybeValues tins;
  for (const Eqn& e : p.eqns) {
    ins.clear();
    tins.clear();
    bool any_tangent = false;
    for (int v : e.ins) {
      ins.push_back(env[static_cast<size_t>(v)]);
      tins.push_back(tan[static_cast<size_t>(v)]);
      any_tangent = any_tangent || tins.back().has_value();
    }
    Values outs = emit(*e.prim, ins, e.params);
    for (size_t i = 0; i < outs.size(); ++i) env[static_cast<size_t>(e.outs[i])] = outs[i];
    if (!any_tangent) continue;
    MaybeValues touts = e.prim->jvp(ins, tins, outs, e.params);
    if (touts.size() != outs.size())
      throw Error("internal: jvp rule of " + e.prim->name() + " returned " +
                  std::to_string(touts.size()) + " tangents for " + std::to_string(outs.size()) +
                  " outputs");
    for (size_t i = 0; i < outs.size(); ++i)
      if (carries_derivative(outs[i].type())) tan[static_cast<size_t>(e.outs[i])] = touts[i];
  }
  Values result;
  out_tangents.clear();
  for (int v : p.outputs) {
    result.push_back(env[static_cast<size_t>(v)]);
    out_tangents.push_back(tan[static_cast<size_t>(v)]);
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
