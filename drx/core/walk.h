#pragma once
// The one program walker. A program is evaluated forward over an environment
// that maps each variable to a V: an Array for the reference interpreter, a
// Value when a program is inlined into a trace, a (primal, tangent) pair for
// jvp, a batched Value for vmap. The interpreter and every transformation
// are a small `step` over this walk: step(index, equation, inputs) returns
// the equation's outputs.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "drx/core/primitive.h"

namespace drx {

template <class V, class Step>
std::vector<V> walk_program(const Program& p, const std::vector<V>& args, Step&& step) {
  if (args.size() != p.inputs.size())
    throw Error("@" + p.name + ": " + std::to_string(args.size()) +
                " arguments given, the program takes " + std::to_string(p.inputs.size()));
  std::vector<V> env(p.var_types.size());
  for (size_t i = 0; i < args.size(); ++i) env[static_cast<size_t>(p.inputs[i])] = args[i];
  std::vector<V> ins;
  for (size_t k = 0; k < p.eqns.size(); ++k) {
    const Eqn& e = p.eqns[k];
    ins.clear();
    for (int v : e.ins) ins.push_back(env[static_cast<size_t>(v)]);
    std::vector<V> outs = step(k, e, ins);
    if (outs.size() != e.outs.size())
      throw Error("internal: " + e.prim->name() + " gave " + std::to_string(outs.size()) +
                  " results for " + std::to_string(e.outs.size()) + " outputs");
    for (size_t i = 0; i < outs.size(); ++i)
      env[static_cast<size_t>(e.outs[i])] = std::move(outs[i]);
  }
  std::vector<V> result;
  result.reserve(p.outputs.size());
  for (int v : p.outputs) result.push_back(env[static_cast<size_t>(v)]);
  return result;
}

}  // namespace drx
