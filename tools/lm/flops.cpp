#include "tools/lm/flops.h"

#include <algorithm>
#include <memory>
#include <variant>

#include "drx/mapreduce/primitives.h"
#include "drx/ops/dot_general_params.h"
#include "drx/ops/primitives.h"
#include "drx/transforms/loops.h"
#include "drx/transforms/scan_params.h"

namespace drx::tool::lm {

double dot_flops(const Program& program) {
  double total = 0;
  for (const Eqn& e : program.eqns) {
    if (e.prim == &prims::dot_general()) {
      const Type& lhs = program.var_types[static_cast<size_t>(e.ins[0])];
      double contracted = 1;
      for (int64_t d : DotGeneralParams::of(e).lhs_contracting)
        contracted *= static_cast<double>(lhs.shape[static_cast<size_t>(d)]);
      const Type& out = program.var_types[static_cast<size_t>(e.outs[0])];
      total += 2.0 * static_cast<double>(num_elements(out.shape)) * contracted;
      continue;
    }
    double times = 1, sub = 0;
    if (e.prim == &prims::scan()) times = static_cast<double>(ScanParams::of(e).length);
    if (e.prim == &prims::map_fn() && !e.outs.empty()) {
      const Type& out = program.var_types[static_cast<size_t>(e.outs[0])];
      if (!out.shape.empty()) times = static_cast<double>(out.shape[0]);
    }
    for (const auto& [key, value] : e.params.items())
      if (auto* p = std::get_if<std::shared_ptr<const Program>>(&value))
        sub = std::max(sub, dot_flops(**p));
    total += times * sub;
  }
  return total;
}

}  // namespace drx::tool::lm
