#include "drx/core/trace.h"
#include "drx/core/walk.h"
#include "drx/ops/ops.h"
#include "drx/transforms/transforms.h"

namespace drx {

namespace {
void accumulate(MaybeValue& slot, const MaybeValue& ct) {
  if (!ct) return;
  slot = slot ? add(*slot, *ct) : *ct;
}
}  // namespace

VjpTape vjp_forward_emit(const Program& p, const Values& primals, const std::vector<bool>& wrt) {
  VjpTape t;
  const size_t n = p.var_types.size();
  // Only values that depend on a requested input need cotangents.
  t.active.assign(n, 0);
  for (size_t i = 0; i < p.inputs.size(); ++i)
    t.active[static_cast<size_t>(p.inputs[i])] =
        wrt[i] && carries_derivative(p.type_of(p.inputs[i]));
  // The forward pass replays p and keeps each equation's operands and results
  // (the residuals the backward pass reads).
  t.eqn_ins.resize(p.eqns.size());
  t.eqn_outs.resize(p.eqns.size());
  t.forward.resize(p.eqns.size());
  std::vector<bool> active_ins;
  t.outs = walk_program(p, primals, [&](size_t k, const Eqn& e, const Values& ins) {
    bool any_active = false;
    active_ins.clear();
    for (int v : e.ins) {
      active_ins.push_back(t.active[static_cast<size_t>(v)] != 0);
      any_active = any_active || active_ins.back();
    }
    t.eqn_ins[k] = ins;
    if (any_active) t.forward[k] = e.prim->vjp_forward(ins, active_ins, e.params);
    t.eqn_outs[k] = t.forward[k] ? t.forward[k]->outs : emit(*e.prim, ins, e.params);
    for (int o : e.outs)
      t.active[static_cast<size_t>(o)] = any_active && carries_derivative(p.type_of(o));
    return t.eqn_outs[k];
  });
  return t;
}

MaybeValues vjp_backward_emit(const Program& p, const VjpTape& t, const MaybeValues& out_cotangents,
                              const std::vector<bool>& wrt) {
  std::vector<MaybeValue> ct(p.var_types.size());
  for (size_t i = 0; i < p.outputs.size(); ++i)
    if (t.active[static_cast<size_t>(p.outputs[i])])
      accumulate(ct[static_cast<size_t>(p.outputs[i])], out_cotangents[i]);
  for (size_t k = p.eqns.size(); k-- > 0;) {
    const Eqn& e = p.eqns[k];
    MaybeValues cts;
    bool any = false;
    for (int o : e.outs) {
      cts.push_back(ct[static_cast<size_t>(o)]);
      any = any || cts.back().has_value();
    }
    if (!any) continue;
    MaybeValues in_cts = t.forward[k]
                             ? e.prim->vjp_backward(t.eqn_ins[k], *t.forward[k], cts, e.params)
                             : e.prim->vjp(t.eqn_ins[k], t.eqn_outs[k], cts, e.params);
    if (in_cts.size() != e.ins.size())
      throw Error("internal: vjp rule of " + e.prim->name() + " returned " +
                  std::to_string(in_cts.size()) + " cotangents for " +
                  std::to_string(e.ins.size()) + " inputs");
    for (size_t i = 0; i < e.ins.size(); ++i)
      if (t.active[static_cast<size_t>(e.ins[i])])
        accumulate(ct[static_cast<size_t>(e.ins[i])], in_cts[i]);
  }
  MaybeValues result;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    result.push_back(wrt[i] ? ct[static_cast<size_t>(p.inputs[i])] : std::nullopt);
  return result;
}

MaybeValues vjp_emit(const Program& p, const Values& primals, const MaybeValues& out_cotangents,
                     const std::vector<bool>& wrt, Values& outs) {
  VjpTape t = vjp_forward_emit(p, primals, wrt);
  outs = t.outs;
  return vjp_backward_emit(p, t, out_cotangents, wrt);
}

Program vjp_program(const Program& p, const std::vector<bool>& wrt,
                    const std::vector<bool>& has_cotangent, bool cotangents_only) {
  TraceScope scope;
  Values primals;
  MaybeValues cts;
  for (int v : p.inputs) primals.push_back(scope.add_input(p.type_of(v)));
  for (size_t j = 0; j < p.outputs.size(); ++j)
    cts.push_back(has_cotangent[j] ? MaybeValue(scope.add_input(p.type_of(p.outputs[j])))
                                   : std::nullopt);
  Values outs;
  MaybeValues in_cts = vjp_emit(p, primals, cts, wrt, outs);
  Values results = cotangents_only ? Values{} : outs;
  for (size_t i = 0; i < in_cts.size(); ++i)
    if (wrt[i]) results.push_back(in_cts[i] ? *in_cts[i] : zeros_like(primals[i]));
  Program r = scope.finish(results);
  r.name = p.name + "_vjp";
  r.placements = p.placements;
  return r;
}

Program vjp_program(const Program& p) {
  return vjp_program(p, std::vector<bool>(p.inputs.size(), true),
                     std::vector<bool>(p.outputs.size(), true), false);
}

BodyDerivativeArgs body_vjp_args(const Values& primals, const MaybeValues& cotangents,
                                 size_t first) {
  BodyDerivativeArgs r{{}, {}, primals};
  for (size_t i = first; i < primals.size(); ++i)
    r.wrt.push_back(carries_derivative(primals[i].type()));
  for (const MaybeValue& c : cotangents) {
    r.with.push_back(c.has_value());
    if (c) r.args.push_back(*c);
  }
  return r;
}

}  // namespace drx
