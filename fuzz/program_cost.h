#pragma once
// How much running a program would cost, for the fuzz targets that run what
// they parse: bounds keep one execution short and its memory small, since the
// bugs worth finding are in the handling of ops, shapes and parameters, not in
// the size of the data.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <variant>

#include "drx/drx.h"
#include "drx/transforms/loops.h"
#include "drx/transforms/scan_params.h"

namespace drx::fuzz {

struct CostLimits {
  int64_t max_elements;  // per value, in the program and in every sub-program
  int64_t max_cost;      // elements touched in all
  int max_depth = 16;
};

// Saturates instead of overflowing: a verified program may still declare dims
// whose product does not fit in int64.
inline int64_t capped_elements(const Shape& shape, const CostLimits& l) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return l.max_elements + 1;
    if (d == 0) return 0;
    if (n > l.max_elements / d) return l.max_elements + 1;
    n *= d;
  }
  return n;
}

// A rough count of the elements the executor touches, or -1 when it is too
// much to run. Sub-programs (map_fn bodies, cond branches, a reduce's fold) may
// run once per element of a leading axis, so their cost is scaled by the
// largest leading dimension among the equation's inputs (or a scan's length).
// A while_loop's trip count is unknown until it runs: never run.
inline int64_t program_cost(const Program& p, const CostLimits& l, int depth = 0) {
  if (depth > l.max_depth) return -1;
  for (const Type& t : p.var_types)
    if (capped_elements(t.shape, l) > l.max_elements) return -1;
  int64_t total = 0;
  for (const Eqn& e : p.eqns) {
    if (e.prim == &prims::while_loop()) return -1;
    int64_t reps = 1;
    if (e.prim == &prims::scan()) {
      const int64_t n = ScanParams::of(e).length;  // verified, so it reads
      if (n > l.max_cost) return -1;
      reps = std::max<int64_t>(reps, n);
    }
    for (int v : e.ins) {
      const Type& t = p.type_of(v);
      total += capped_elements(t.shape, l);
      reps = std::max(reps, t.shape.empty() ? int64_t{1} : t.shape[0]);
    }
    for (int v : e.outs) total += capped_elements(p.type_of(v).shape, l);
    for (const auto& [key, attr] : e.params.items()) {
      if (const auto* sub = std::get_if<std::shared_ptr<const Program>>(&attr)) {
        if (!*sub) continue;
        int64_t c = program_cost(**sub, l, depth + 1);
        if (c < 0 || c > l.max_cost / reps) return -1;
        total += c * reps;
      }
    }
    if (total > l.max_cost) return -1;
  }
  return total;
}

}  // namespace drx::fuzz
