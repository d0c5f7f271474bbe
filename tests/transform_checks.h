#pragma once
// Reference checks for transformations, shared by the per-primitive tables:
// gradients against central finite differences, vjp against jvp, vmap against
// a loop. All in float64.
#include <gtest/gtest.h>

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

// Each case's gradient against finite differences, vjp against jvp, and vmap against a loop
// at the first and the last axis.
inline void ExpectRulesMatchReferences(const std::vector<OpCase>& cases) {
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(GradMatchesFiniteDifferences(c, 3, 1e-6));
    EXPECT_TRUE(VjpMatchesJvp(c, 4));
    EXPECT_TRUE(VmapMatchesLoop(c, 5, 0));
    EXPECT_TRUE(VmapMatchesLoop(c, 6, -1));
  }
}

}  // namespace drx::testing
