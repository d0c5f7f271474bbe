#include "drx/transforms/program_split.h"

#include <algorithm>
#include <functional>
#include <set>

#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/ops/primitives.h"
#include "drx/transforms/transforms.h"

namespace drx {

std::vector<bool> outputs_depending_on(const Program& p, const std::vector<bool>& from) {
  std::vector<char> dep(p.var_types.size(), 0);
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (from[i]) dep[static_cast<size_t>(p.inputs[i])] = 1;
  for (const Eqn& e : p.eqns) {
    bool any = false;
    for (int v : e.ins) any = any || dep[static_cast<size_t>(v)];
    if (any)
      for (int o : e.outs) dep[static_cast<size_t>(o)] = 1;
  }
  std::vector<bool> r;
  for (int v : p.outputs) r.push_back(dep[static_cast<size_t>(v)] != 0);
  return r;
}

std::vector<bool> flag_carries(const Program& body, std::vector<bool>& flags, size_t first,
                               const std::vector<bool>& can_flag) {
  for (;;) {
    std::vector<bool> dep = outputs_depending_on(body, flags);
    bool changed = false;
    for (size_t j = 0; j < can_flag.size(); ++j)
      if (dep[j] && can_flag[j] && !flags[first + j]) flags[first + j] = changed = true;
    if (!changed) return dep;
  }
}

namespace {

// Whether a later stage should compute e's result again instead of importing it from stage
// `from`: a broadcast_in_dim, whose operand is smaller and whose readers usually read it in
// place (an elementwise op reads a broadcast scalar, row or column without a copy), and an
// equation of no operands (a constant). From stage 0 (computed once, outside a loop) only
// broadcasts of one element and constants are worth it, as anything else would be copied
// per iteration where it was computed once; from a per-iteration stage, a broadcast
// imported by the backward pass is a stacked residual, copied per iteration anyway.
bool cheaper_again(const Program& p, const Eqn& e, int from) {
  if (!e.prim->is_pure() || e.outs.size() != 1) return false;
  if (e.ins.empty()) return true;
  if (e.prim != &prims::broadcast_in_dim()) return false;
  return from > 0 || p.type_of(e.ins[0]).size() <= 1;
}

}  // namespace

StageSplit split_stages(const Program& p, const std::vector<int>& input_stage,
                        const std::vector<int>& output_stage, int stages) {
  StageSplit r;
  r.stage.assign(p.var_types.size(), 0);
  std::vector<char> is_input(p.var_types.size(), 0);
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    r.stage[static_cast<size_t>(p.inputs[i])] = input_stage[i];
    is_input[static_cast<size_t>(p.inputs[i])] = 1;
  }
  std::vector<int> eqn_stage;
  for (const Eqn& e : p.eqns) {
    int s = 0;
    for (int v : e.ins) s = std::max(s, r.stage[static_cast<size_t>(v)]);
    eqn_stage.push_back(s);
    for (int o : e.outs) r.stage[static_cast<size_t>(o)] = s;
  }
  std::vector<int> producer(p.var_types.size(), -1);
  for (size_t k = 0; k < p.eqns.size(); ++k)
    for (int o : p.eqns[k].outs) producer[static_cast<size_t>(o)] = static_cast<int>(k);
  std::vector<std::set<int>> imports(static_cast<size_t>(stages));
  // remat[s]: equations of earlier stages that stage s computes again rather than import.
  std::vector<std::set<size_t>> remat(static_cast<size_t>(stages));
  std::function<void(int, int)> need = [&](int v, int s) {
    const int from = r.stage[static_cast<size_t>(v)];
    if (from > s)
      throw Error("internal: split_stages: stage " + std::to_string(s) +
                  " reads a value of stage " + std::to_string(from));
    if (from == s) return;
    const int k = producer[static_cast<size_t>(v)];
    if (k >= 0 && cheaper_again(p, p.eqns[static_cast<size_t>(k)], from)) {
      if (remat[static_cast<size_t>(s)].insert(static_cast<size_t>(k)).second)
        for (int u : p.eqns[static_cast<size_t>(k)].ins) need(u, s);
      return;
    }
    imports[static_cast<size_t>(s)].insert(v);
  };
  for (size_t k = 0; k < p.eqns.size(); ++k)
    for (int v : p.eqns[k].ins) need(v, eqn_stage[k]);
  for (size_t k = 0; k < p.outputs.size(); ++k) need(p.outputs[k], output_stage[k]);
  std::vector<std::set<int>> exports(static_cast<size_t>(stages));
  for (const std::set<int>& in : imports)
    for (int v : in)
      if (!is_input[static_cast<size_t>(v)])
        exports[static_cast<size_t>(r.stage[static_cast<size_t>(v)])].insert(v);

  for (int s = 0; s < stages; ++s) {
    const size_t su = static_cast<size_t>(s);
    r.imports.emplace_back(imports[su].begin(), imports[su].end());
    r.exports.emplace_back(exports[su].begin(), exports[su].end());
    TraceScope scope;
    std::vector<Value> env(p.var_types.size());
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (input_stage[i] == s)
        env[static_cast<size_t>(p.inputs[i])] = scope.add_input(p.type_of(p.inputs[i]));
    for (int v : r.imports[su]) env[static_cast<size_t>(v)] = scope.add_input(p.type_of(v));
    Values ins;
    for (size_t k = 0; k < p.eqns.size(); ++k) {
      if (eqn_stage[k] != s && !remat[su].count(k)) continue;
      const Eqn& e = p.eqns[k];
      ins.clear();
      for (int v : e.ins) ins.push_back(env[static_cast<size_t>(v)]);
      Values outs = emit(*e.prim, ins, e.params);
      for (size_t i = 0; i < outs.size(); ++i) env[static_cast<size_t>(e.outs[i])] = outs[i];
    }
    Values results;
    for (size_t k = 0; k < p.outputs.size(); ++k)
      if (output_stage[k] == s) results.push_back(env[static_cast<size_t>(p.outputs[k])]);
    for (int v : r.exports[su]) results.push_back(env[static_cast<size_t>(v)]);
    Program q = scope.finish(results);
    q.name = p.name + "_stage" + std::to_string(s);
    q.placements = p.placements;
    r.programs.push_back(std::move(q));
  }
  return r;
}

Program batched_program(const Program& body, const std::vector<bool>& in,
                        const std::vector<bool>& out, int64_t batch_size) {
  TraceScope scope;
  std::vector<Batched> args;
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    Type t = body.type_of(body.inputs[i]);
    // Placed values keep their placement axes first and take the batch after them.
    if (in[i]) t.shape.insert(t.shape.begin() + placement_depth(t.placement), batch_size);
    args.push_back({scope.add_input(t), in[i]});
  }
  Values outs;
  std::vector<Batched> r = vmap_emit(body, args, batch_size);
  for (size_t k = 0; k < r.size(); ++k) {
    if (r[k].batched && !out[k])
      throw Error("internal: batched_program: output " + std::to_string(k) + " of @" + body.name +
                  " is batched unexpectedly");
    outs.push_back(out[k] && !r[k].batched ? broadcast_batch(r[k].value, batch_size) : r[k].value);
  }
  Program b = scope.finish(outs);
  b.name = body.name + "_vmap";
  b.placements = body.placements;
  return b;
}

Program reordered(Program p, const std::vector<size_t>& inputs,
                  const std::vector<size_t>& outputs) {
  std::vector<int> in, out;
  for (size_t i : inputs) in.push_back(p.inputs.at(i));
  for (size_t k : outputs) out.push_back(p.outputs.at(k));
  p.inputs = std::move(in);
  p.outputs = std::move(out);
  return p;
}

Program inputs_rotated(Program p, size_t first) {
  std::rotate(p.inputs.begin(), p.inputs.begin() + static_cast<long>(first), p.inputs.end());
  return p;
}

}  // namespace drx
