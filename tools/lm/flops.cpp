#include "tools/lm/flops.h"

#include <algorithm>
#include <memory>
#include <variant>

#include "drx/mapreduce/primitives.h"
#include "drx/ops/convolution.h"
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
    if (e.prim == &prims::conv_general_dilated()) {
      // Each result element is a sum over the kernel's input features (already C / feature
      // groups; batch groups split only the output features) and its window: 2 flops a
      // kernel element, the window's padding and the dilated input's holes included.
      const ConvDimensionNumbers d = ConvParams::of(e).dims;
      const Type& rhs = program.var_types[static_cast<size_t>(e.ins[1])];
      double window = static_cast<double>(rhs.shape[static_cast<size_t>(d.rhs_in_feature)]);
      for (int64_t s : d.rhs_spatial)
        window *= static_cast<double>(rhs.shape[static_cast<size_t>(s)]);
      const Type& out = program.var_types[static_cast<size_t>(e.outs[0])];
      total += 2.0 * static_cast<double>(num_elements(out.shape)) * window;
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
