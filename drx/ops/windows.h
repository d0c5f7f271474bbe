#pragma once
// Windowed reductions with StableHLO's semantics (stablehlo.reduce_window,
// stablehlo.select_and_scatter) and the pooling layers built on them.
//
// A window configuration has one entry per operand axis. The operand is first
// dilated (base_dilation[d] - 1 holes between neighbours) and padded
// (padding[d] = (low, high); negative crops), then each output element reduces
// the window of `dimensions` elements, themselves window_dilation apart, that
// starts at output index * strides.
#include <string>
#include <utility>
#include <vector>

#include "drx/core/value.h"

namespace drx {

struct WindowConfig {
  std::vector<int64_t> dimensions;                   // the window's size per axis
  std::vector<int64_t> strides;                      // empty: all 1
  std::vector<std::pair<int64_t, int64_t>> padding;  // (low, high) per axis; empty: none
  std::vector<int64_t> base_dilation;                // empty: all 1
  std::vector<int64_t> window_dilation;              // empty: all 1
};

// Each window of x reduced by `body`: "sum", "max", "min", or of bool "any"
// (logical or) and "all" (logical and); padding and holes are the body's
// identity (0, -inf, +inf, false, true).
Value reduce_window(const Value& x, const std::string& body, const WindowConfig& window);
// The same with StableHLO's init value (a scalar of x's dtype): it pads x and
// starts every window's fold.
Value reduce_window(const Value& x, const Value& init, const std::string& body,
                    const WindowConfig& window);

// The transpose of max (select "GE") or min ("LE") pooling: a result of
// operand's shape, zero but where each window of operand (no dilations)
// selects an element, which receives the sum of the source elements of the
// windows that select it. Ties select the first element in window order
// under GE and LE ("GT" and "LT": the last); padding is never selected.
Value select_and_scatter_add(const Value& operand, const Value& source, const WindowConfig& window,
                             const std::string& select = "GE");

}  // namespace drx

namespace drx::nn {

// Pooling over the spatial axes of x in flax's layout, (batch, spatial...,
// features) or (spatial..., features): `window` and `strides` (empty: 1)
// name the spatial axes; padding "VALID" (none) or "SAME" (the output has
// ceil(size / stride) elements; the lower side gets the smaller half, as
// jax.lax.padtype_to_pads).
Value max_pool(const Value& x, const std::vector<int64_t>& window,
               const std::vector<int64_t>& strides = {}, const std::string& padding = "VALID");
// The mean over each window; count_include_pad false divides by the number of
// elements that are not padding.
Value avg_pool(const Value& x, const std::vector<int64_t>& window,
               const std::vector<int64_t>& strides = {}, const std::string& padding = "VALID",
               bool count_include_pad = true);

}  // namespace drx::nn
