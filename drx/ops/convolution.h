#pragma once
// conv_general_dilated: StableHLO's `convolution` (lax.conv_general_dilated) as one primitive,
// and lax.conv's convenience form. The parameters are one typed view, ConvParams (read with
// ConvParams::of, built with to_params; each key is spelled once, in convolution.cpp).
//
// Semantics (StableHLO's spec): the input is dilated by lhs_dilation (lhs_dilation - 1 zeros
// between neighbours), padded by padding (low, high; negative crops), and a window of the
// kernel's spatial sizes, dilated by rhs_dilation and flipped along the dims window_reversal
// flags, slides over it by window_strides. feature_group_count splits the input features and
// the kernel's output features into groups convolved separately (depthwise: one group per
// input feature); batch_group_count splits the input batch the same way against the kernel's
// output features.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drx/core/value.h"
#include "drx/ir/params.h"
#include "drx/ir/program.h"

namespace drx {

class Primitive;

// Which dimension of each operand plays which role. Spatial lists run in the same order on all
// three (spatial dim k of the input meets spatial dim k of the kernel and gives spatial dim k of
// the output). Empty spatial lists (all three) stand for "every other dim, in order", so the
// defaults are lax's NCHW / OIHW / NCHW for any number of spatial dims.
struct ConvDimensionNumbers {
  int64_t lhs_batch = 0, lhs_feature = 1;
  std::vector<int64_t> lhs_spatial = {};
  int64_t rhs_out_feature = 0, rhs_in_feature = 1;
  std::vector<int64_t> rhs_spatial = {};
  int64_t out_batch = 0, out_feature = 1;
  std::vector<int64_t> out_spatial = {};
  bool operator==(const ConvDimensionNumbers&) const = default;

  // flax's and TensorFlow's layout: input and output (N, spatial..., C), kernel
  // (spatial..., I, O) ("NHWC", "HWIO", "NHWC" in 2-D).
  static ConvDimensionNumbers channels_last(int64_t num_spatial);
};

// Every attribute of StableHLO's convolution. In the public op, empty lists mean the
// defaults (strides and dilations 1, padding 0, no reversal); the primitive's params always
// hold one entry per spatial dim.
struct ConvParams {
  std::vector<int64_t> window_strides = {};
  std::vector<std::pair<int64_t, int64_t>> padding = {};  // (low, high) per spatial dim
  std::vector<int64_t> lhs_dilation = {}, rhs_dilation = {};
  std::vector<int64_t> window_reversal = {};  // 0 or 1 per spatial dim
  ConvDimensionNumbers dims = {};
  int64_t feature_group_count = 1, batch_group_count = 1;
  // The result's element type where it is not the operands': a wider type of the same kind
  // ((i8, i8) -> i32, (bf16, bf16) -> f32), accumulated in it.
  std::optional<DType> preferred_element_type = std::nullopt;

  // Throws drx::TypeError naming conv_general_dilated and the key for a missing, mistyped or
  // unknown parameter (sizes are checked against the operands by the primitive's infer).
  static ConvParams of(const Params& p);
  // Also throws when `e` is not a conv_general_dilated equation.
  static ConvParams of(const Eqn& e);
  Params to_params() const;
  // The spatial dims' count (window_strides' size).
  size_t num_spatial() const { return window_strides.size(); }
};

// JAX's padtype_to_pads: the (low, high) padding of "SAME" (output size ceil(in / stride), the
// extra element at the end), "SAME_LOWER" (at the start) or "VALID" (none) for spatial sizes
// `in`, (dilated) window sizes `window` and `strides`.
std::vector<std::pair<int64_t, int64_t>> padtype_to_pads(const std::vector<int64_t>& in,
                                                         const std::vector<int64_t>& window,
                                                         const std::vector<int64_t>& strides,
                                                         const std::string& padding);

// StableHLO's convolution of lhs (input) and rhs (kernel).
Value conv_general_dilated(const Value& lhs, const Value& rhs, const ConvParams& params);

// lax.conv: lhs [N, C, spatial...], rhs [O, C / groups, window...], result [N, O, spatial...];
// padding "SAME", "SAME_LOWER", "VALID" or (low, high) pairs; empty strides are 1s.
Value conv(const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
           const std::string& padding, int64_t feature_group_count = 1);
Value conv(const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
           const std::vector<std::pair<int64_t, int64_t>>& padding,
           int64_t feature_group_count = 1);

// lax.conv_transpose: the gradient of a strided convolution with respect to its input, as a
// convolution of lhs dilated by `strides`. Layouts default to channels-last (NHWC, HWIO, NHWC:
// JAX's defaults for conv_transpose); padding "SAME" (the result is in * stride), "VALID"
// (in * stride + max(window - stride, 0)) or (low, high) pairs applied to the dilated input;
// empty rhs_dilation is 1s. transpose_kernel flips the kernel's spatial dims and swaps its
// input and output feature dims, so a kernel of the forward convolution (O from I) can be
// passed as it is and the result is exactly that convolution's input gradient.
Value conv_transpose(const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
                     const std::string& padding, const std::vector<int64_t>& rhs_dilation = {},
                     const std::optional<ConvDimensionNumbers>& dims = std::nullopt,
                     bool transpose_kernel = false);
Value conv_transpose(const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
                     const std::vector<std::pair<int64_t, int64_t>>& padding,
                     const std::vector<int64_t>& rhs_dilation = {},
                     const std::optional<ConvDimensionNumbers>& dims = std::nullopt,
                     bool transpose_kernel = false);

namespace prims {
const Primitive& conv_general_dilated();
}  // namespace prims

}  // namespace drx
