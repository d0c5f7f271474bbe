#pragma once
// Reference checks for transformations, shared by the per-primitive tables:
// gradients against central finite differences, vjp against jvp, vmap against
// a loop. All in float64.
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace drx::testing {

using ListFn = std::function<Value(const std::vector<Value>&)>;

struct OpCase {
  std::string name;
  ListFn f;
  std::vector<Shape> shapes;
  // Inputs are drawn uniformly from [lo, hi) (a domain where f is smooth).
  double lo = -1.0, hi = 1.0;
  bool differentiable = true;
};

std::vector<Array> random_inputs(const std::vector<Shape>& shapes, uint64_t seed, double lo,
                                 double hi);
// The sub-array at index b of `axis`.
Array slice_axis(const Array& a, int64_t axis, int64_t b);

::testing::AssertionResult GradMatchesFiniteDifferences(const OpCase& c, uint64_t seed,
                                                        double rtol = 1e-6);
::testing::AssertionResult VjpMatchesJvp(const OpCase& c, uint64_t seed, double rtol = 1e-10);
// vmap over a batch of 3 at `axis` (0 or -1) of every input, out_axes the same.
::testing::AssertionResult VmapMatchesLoop(const OpCase& c, uint64_t seed, int64_t axis);

}  // namespace drx::testing
