// The convolutional network's layers: conv2d, batch and group normalisation (flax's layouts).
#include <string>
#include <vector>

#include "drx/nn/nn.h"
#include "drx/ops/convolution.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"

DRX_PUBLIC_OPS_FILE(nn_conv_layers);

namespace drx::nn {
namespace {

void check_conv2d(const Value& x, const Value& w, const Value& b) {
  if (x.ndim() != 4 || w.ndim() != 4 || b.ndim() != 1 || b.shape()[0] != w.shape()[3])
    throw TypeError("conv2d: expected x [N, H, W, C], w [kh, kw, C / groups, O], b [O], got x " +
                    x.type().str() + ", w " + w.type().str() + ", b " + b.type().str());
}

// The convolution of conv2d with its padding resolved against x and w.
ConvParams conv2d_params(const Value& x, const Value& w, const std::vector<int64_t>& strides,
                         const std::string& padding, int64_t feature_group_count) {
  ConvParams c;
  c.window_strides = strides.empty() ? std::vector<int64_t>{1, 1} : strides;
  if (c.window_strides.size() != 2)
    throw TypeError("conv2d: strides " + shape_str(strides) + " need one entry per spatial dim");
  c.padding = padtype_to_pads({x.shape()[1], x.shape()[2]}, {w.shape()[0], w.shape()[1]},
                              c.window_strides, padding);
  c.dims = ConvDimensionNumbers::channels_last(2);
  c.feature_group_count = feature_group_count;
  return c;
}

// The axes that normalisation reduces over, every one but the last.
std::vector<int64_t> leading_axes(const Value& x) {
  std::vector<int64_t> axes;
  for (int64_t a = 0; a + 1 < x.ndim(); ++a) axes.push_back(a);
  return axes;
}

void check_affine(const char* op, const Value& x, const Value& scale, const Value& bias) {
  if (x.ndim() < 2 || !is_floating(x.dtype()) || scale.shape() != Shape{x.shape().back()} ||
      bias.shape() != scale.shape() || scale.dtype() != x.dtype() || bias.dtype() != x.dtype())
    throw TypeError(std::string(op) +
                    ": expected floating x [N, ..., C] with scale [C] and bias [C] of its dtype, "
                    "got x " +
                    x.type().str() + ", scale " + scale.type().str() + ", bias " +
                    bias.type().str());
}

void check_eps(const char* op, double eps) {
  if (!(eps >= 0)) throw Error(std::string(op) + ": eps " + std::to_string(eps) + " is negative");
}

}  // namespace

DRX_PUBLIC_OP("nn::conv2d",
              "(x: Value, w: Value, b: Value, strides: vector<int64>, padding: string, "
              "feature_group_count: int64 = 1) -> Value | (x: Value, w: Value, b: Value, strides: "
              "vector<int64>, padding: string, policy: Policy, feature_group_count: int64 = 1) -> "
              "Value",
              "A 2-D convolution layer with bias: NHWC input, HWIO kernel, NHWC result.");
Value conv2d(const Value& x, const Value& w, const Value& b, const std::vector<int64_t>& strides,
             const std::string& padding, int64_t feature_group_count) {
  check_conv2d(x, w, b);
  return conv_general_dilated(x, w, conv2d_params(x, w, strides, padding, feature_group_count)) + b;
}

Value conv2d(const Value& x, const Value& w, const Value& b, const std::vector<int64_t>& strides,
             const std::string& padding, const Policy& policy, int64_t feature_group_count) {
  check_conv2d(x, w, b);
  ConvParams c = conv2d_params(x, w, strides, padding, feature_group_count);
  c.preferred_element_type = policy.output;
  return policy.to_output(conv_general_dilated(policy.to_compute(x), policy.to_compute(w), c)) +
         policy.to_output(b);
}

DRX_PUBLIC_OP("nn::batch_norm",
              "(x: Value, scale: Value, bias: Value, running: BatchNormStats, training: bool, "
              "momentum: double = 0.99, eps: double = 1e-5) -> BatchNormOutput",
              "Batch normalisation over all axes but the last; running statistics as state.");
BatchNormOutput batch_norm(const Value& x, const Value& scale, const Value& bias,
                           const BatchNormStats& running, bool training, double momentum,
                           double eps) {
  check_affine("batch_norm", x, scale, bias);
  check_eps("batch_norm", eps);
  if (running.mean.type() != scale.type() || running.var.type() != scale.type())
    throw TypeError("batch_norm: the running mean and var must be " + scale.type().str() +
                    " (one per feature of x " + x.type().str() + "), got " +
                    running.mean.type().str() + " and " + running.var.type().str());
  if (!(momentum >= 0 && momentum <= 1))
    throw Error("batch_norm: momentum " + std::to_string(momentum) + " is not in [0, 1]");
  BatchNormStats used = running, next = running;
  if (training) {
    const std::vector<int64_t> axes = leading_axes(x);
    used.mean = mean(x, axes);
    used.var = mean(square(x - used.mean), axes);
    next.mean = momentum * running.mean + (1 - momentum) * used.mean;
    next.var = momentum * running.var + (1 - momentum) * used.var;
  }
  Value y = (x - used.mean) * (rsqrt(used.var + eps) * scale) + bias;
  return {y, next};
}

DRX_PUBLIC_OP("nn::batch_norm_stats", "(features: int64, dtype: DType = f32) -> BatchNormStats",
              "Running statistics for batch_norm to start from: mean 0, variance 1.");
BatchNormStats batch_norm_stats(int64_t features, DType dtype) {
  if (features < 0 || !is_floating(dtype))
    throw Error("batch_norm_stats: expected features >= 0 and a floating dtype, got " +
                std::to_string(features) + " features of " + std::string(dtype_name(dtype)));
  return {constant(full({features}, 0.0, dtype)), constant(full({features}, 1.0, dtype))};
}

DRX_PUBLIC_OP("nn::group_norm",
              "(x: Value, num_groups: int64, scale: Value, bias: Value, eps: double = 1e-5) -> "
              "Value",
              "Group normalisation: per example, over the spatial axes and each group of "
              "features.");
Value group_norm(const Value& x, int64_t num_groups, const Value& scale, const Value& bias,
                 double eps) {
  check_affine("group_norm", x, scale, bias);
  check_eps("group_norm", eps);
  const int64_t features = x.shape().back();
  if (num_groups < 1 || features % num_groups != 0)
    throw TypeError("group_norm: num_groups " + std::to_string(num_groups) +
                    " must be positive and divide the " + std::to_string(features) +
                    " features of x " + x.type().str());
  Shape grouped = x.shape();
  grouped.back() = num_groups;
  grouped.push_back(features / num_groups);
  const Value g = reshape(x, grouped);
  // Per example and group: every axis but the batch (0) and the group's (the second last).
  std::vector<int64_t> axes;
  for (int64_t a = 1; a < g.ndim(); ++a)
    if (a != g.ndim() - 2) axes.push_back(a);
  const Value centred = g - mean(g, axes, true);
  const Value normalised = centred * rsqrt(mean(square(centred), axes, true) + eps);
  return reshape(normalised, x.shape()) * scale + bias;
}

}  // namespace drx::nn
