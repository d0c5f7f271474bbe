#include "drx/transforms/simplify.h"

#include "drx/ops/primitive.h"

namespace drx {

Program eliminate_dead_code(const Program& p) {
  std::vector<char> live(p.var_types.size(), 0);
  for (int v : p.outputs) live[static_cast<size_t>(v)] = 1;
  std::vector<char> keep(p.eqns.size(), 0);
  for (size_t i = p.eqns.size(); i-- > 0;) {
    const Eqn& e = p.eqns[i];
    bool used = false;
    for (int o : e.outs) used = used || live[static_cast<size_t>(o)];
    if (!used) continue;
    keep[i] = 1;
    for (int v : e.ins) live[static_cast<size_t>(v)] = 1;
  }
  Program out = p;
  out.eqns.clear();
  for (size_t i = 0; i < p.eqns.size(); ++i)
    if (keep[i]) out.eqns.push_back(p.eqns[i]);
  return out;
}

Program simplify(const Program& p) { return eliminate_dead_code(p); }

}  // namespace drx
