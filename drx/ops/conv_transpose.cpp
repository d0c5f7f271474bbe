// lax.conv_transpose as a convolution of the input dilated by the strides.
#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "drx/ops/convolution.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"

DRX_PUBLIC_OPS_FILE(ops_conv_transpose);

namespace drx {
namespace {

// JAX's _conv_transpose_padding: the padding of the stride-dilated input that gives SAME's
// in * stride outputs, or VALID's in * stride + max(window - stride, 0), for a (dilated) window.
std::pair<int64_t, int64_t> transpose_padding(int64_t window, int64_t stride,
                                              const std::string& padding) {
  int64_t total = 0, low = 0;
  if (padding == "SAME") {
    total = window + stride - 2;
    low = stride > window - 1 ? window - 1 : (total + 1) / 2;
  } else if (padding == "VALID") {
    total = window + stride - 2 + std::max<int64_t>(window - stride, 0);
    low = window - 1;
  } else {
    throw TypeError("conv_transpose: unknown padding '" + padding + "' (expected SAME or VALID)");
  }
  return {low, total - low};
}

ConvDimensionNumbers dims_for(const Value& lhs, const Value& rhs,
                              const std::optional<ConvDimensionNumbers>& dims) {
  if (lhs.ndim() < 2 || rhs.ndim() != lhs.ndim())
    throw TypeError("conv_transpose: lhs " + lhs.type().str() + " and rhs " + rhs.type().str() +
                    " must be of one rank >= 2 (batch, features and the spatial dims)");
  return dims ? *dims : ConvDimensionNumbers::channels_last(lhs.ndim() - 2);
}

// The spatial dims of `rhs` under `d`, explicit where d leaves them implied.
std::vector<int64_t> kernel_spatial(const ConvDimensionNumbers& d, int64_t rank) {
  if (!d.rhs_spatial.empty()) return d.rhs_spatial;
  std::vector<int64_t> out;
  for (int64_t x = 0; x < rank; ++x)
    if (x != d.rhs_out_feature && x != d.rhs_in_feature) out.push_back(x);
  return out;
}

std::vector<int64_t> ones_if_empty(const std::vector<int64_t>& v, size_t n, const char* what,
                                   const Value& lhs) {
  if (v.empty()) return std::vector<int64_t>(n, 1);
  if (v.size() != n)
    throw TypeError(std::string("conv_transpose: ") + what + " " + shape_str(v) +
                    " need one entry per spatial dim of " + lhs.type().str());
  return v;
}

}  // namespace

DRX_PUBLIC_OP("conv_transpose",
              "(lhs: Value, rhs: Value, strides: vector<int64>, padding: string, rhs_dilation: "
              "vector<int64> = {}, dims: optional<ConvDimensionNumbers> = nullopt, "
              "transpose_kernel: bool = false) -> Value | (lhs: Value, rhs: Value, strides: "
              "vector<int64>, padding: vector<pair<int64, int64>>, rhs_dilation: vector<int64> = "
              "{}, dims: optional<ConvDimensionNumbers> = nullopt, transpose_kernel: bool = "
              "false) -> Value",
              "lax.conv_transpose: a convolution of the stride-dilated input (NHWC, HWIO "
              "defaults; transpose_kernel flips and swaps the kernel).");
Value conv_transpose(const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
                     const std::string& padding, const std::vector<int64_t>& rhs_dilation,
                     const std::optional<ConvDimensionNumbers>& dims, bool transpose_kernel) {
  const ConvDimensionNumbers d = dims_for(lhs, rhs, dims);
  const std::vector<int64_t> spatial = kernel_spatial(d, rhs.ndim());
  const size_t S = static_cast<size_t>(lhs.ndim() - 2);
  const std::vector<int64_t> st = ones_if_empty(strides, S, "strides", lhs);
  const std::vector<int64_t> dil = ones_if_empty(rhs_dilation, S, "rhs_dilation", lhs);
  if (spatial.size() != S)
    throw TypeError("conv_transpose: the dimension numbers name " + std::to_string(spatial.size()) +
                    " spatial dims of rhs " + rhs.type().str() + ", expected " + std::to_string(S));
  std::vector<std::pair<int64_t, int64_t>> pads;
  for (size_t k = 0; k < S; ++k) {
    if (spatial[k] < 0 || spatial[k] >= rhs.ndim() || st[k] < 1 || dil[k] < 1)
      throw TypeError("conv_transpose: strides " + shape_str(st) + " and rhs_dilation " +
                      shape_str(dil) + " must be positive, the kernel's spatial dims " +
                      shape_str(spatial) + " dims of rhs " + rhs.type().str());
    const int64_t window = (rhs.shape()[spatial[k]] - 1) * dil[k] + 1;
    pads.push_back(transpose_padding(window, st[k], padding));
  }
  return conv_transpose(lhs, rhs, st, pads, dil, d, transpose_kernel);
}

Value conv_transpose(const Value& lhs, const Value& rhs, const std::vector<int64_t>& strides,
                     const std::vector<std::pair<int64_t, int64_t>>& padding,
                     const std::vector<int64_t>& rhs_dilation,
                     const std::optional<ConvDimensionNumbers>& dims, bool transpose_kernel) {
  const ConvDimensionNumbers d = dims_for(lhs, rhs, dims);
  Value kernel = rhs;
  if (transpose_kernel) {
    if (d.rhs_out_feature < 0 || d.rhs_out_feature >= rhs.ndim() || d.rhs_in_feature < 0 ||
        d.rhs_in_feature >= rhs.ndim() || d.rhs_out_feature == d.rhs_in_feature)
      throw TypeError("conv_transpose: the kernel's feature dims (" +
                      std::to_string(d.rhs_in_feature) + ", " + std::to_string(d.rhs_out_feature) +
                      ") are not two dims of rhs " + rhs.type().str());
    std::vector<int64_t> perm(static_cast<size_t>(rhs.ndim()));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[static_cast<size_t>(d.rhs_out_feature)],
              perm[static_cast<size_t>(d.rhs_in_feature)]);
    kernel = transpose(reverse(rhs, kernel_spatial(d, rhs.ndim())), perm);
  }
  ConvParams c;
  c.padding = padding;
  c.lhs_dilation = strides;
  c.rhs_dilation = rhs_dilation;
  c.dims = d;
  return conv_general_dilated(lhs, kernel, c);
}

}  // namespace drx
