// conv_transpose (hand-computed values; with transpose_kernel, the input gradient of the
// forward convolution), nn::conv2d, nn::batch_norm and nn::group_norm against float64 loops
// written here, their gradients against central differences, and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "drx/core/trace.h"
#include "drx/drx.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

using Fn = std::function<std::vector<Value>(const std::vector<Value>&)>;

std::vector<Array> run_fn(const Fn& fn, const std::vector<Array>& args, bool compiled = false) {
  std::vector<Type> types;
  for (const Array& a : args) types.emplace_back(a.dtype(), a.shape());
  Program p = trace_function(fn, types).program;
  return compiled ? compile(p).run(args) : run(p, args);
}

Array one_d(const std::vector<double>& v) {  // [1, W, 1]: one example, one feature
  return f64_array(v, {1, static_cast<int64_t>(v.size()), 1});
}

// x = [1, 2] dilated by stride 2 is [1, 0, 2]; each input element leaves a copy of the kernel
// scaled by it, reversed (a correlation) unless transpose_kernel flips it back.
TEST(ConvTranspose, HandComputedOneDimensional) {
  const Array x = one_d({1, 2}), k = f64_array({1, 10, 100}, {3, 1, 1});  // [W, I, O]
  auto ct = [](const std::string& padding, bool flip) {
    return [=](const std::vector<Value>& in) -> std::vector<Value> {
      return {conv_transpose(in[0], in[1], {2}, padding, {}, std::nullopt, flip)};
    };
  };
  EXPECT_TRUE(ArrayNear(run_fn(ct("VALID", false), {x, k})[0], {100, 10, 201, 20, 2}, 0, 0));
  EXPECT_TRUE(ArrayNear(run_fn(ct("VALID", true), {x, k})[0], {1, 10, 102, 20, 200}, 0, 0));
  // SAME keeps in * stride = 4 outputs: padding (2, 1) of the dilated [1, 0, 2].
  EXPECT_TRUE(ArrayNear(run_fn(ct("SAME", false), {x, k})[0], {100, 10, 201, 20}, 0, 0));
  EXPECT_TRUE(ArrayNear(run_fn(ct("SAME", true), {x, k}, true)[0], {1, 10, 102, 20}, 0, 0));
}

// With transpose_kernel, conv_transpose of y by the forward kernel is the forward convolution's
// input gradient for cotangent y (as jax.lax.conv_transpose's own tests check).
TEST(ConvTranspose, TransposedKernelGivesTheConvolutionsInputGradient) {
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, dilation;
    std::string padding;
  };
  const std::vector<Case> cases = {
      {{2, 7, 7, 3}, {3, 3, 3, 4}, {2, 2}, {}, "VALID"},
      {{1, 6, 8, 2}, {3, 3, 2, 3}, {2, 2}, {}, "SAME"},
      {{2, 5, 9, 2}, {2, 3, 2, 2}, {1, 2}, {}, "VALID"},
      {{1, 9, 7, 2}, {2, 2, 2, 3}, {2, 1}, {2, 1}, "VALID"},
      {{1, 8, 6, 1}, {3, 1, 1, 2}, {1, 1}, {2, 1}, "SAME"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.x) + " " + c.padding);
    const ConvDimensionNumbers nhwc = ConvDimensionNumbers::channels_last(2);
    ConvParams fwd;
    fwd.window_strides = c.strides;
    fwd.rhs_dilation = c.dilation;
    fwd.dims = nhwc;
    std::vector<int64_t> window;
    for (size_t k = 0; k < 2; ++k)
      window.push_back((c.w[k] - 1) * (c.dilation.empty() ? 1 : c.dilation[k]) + 1);
    fwd.padding = padtype_to_pads({c.x[1], c.x[2]}, window, c.strides, c.padding);
    const Array x = random_array(c.x, DType::f64, 1), w = random_array(c.w, DType::f64, 2);
    const Array y = run_fn(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          return {conv_general_dilated(in[0], in[1], fwd)};
        },
        {x, w})[0];
    const Array u = random_array(y.shape(), DType::f64, 3);
    const Array want = run_fn(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          return {grad([&](Value xx) { return sum(conv_general_dilated(xx, in[1], fwd) * in[2]); })(
              in[0])};
        },
        {x, w, u})[0];
    const Array got = run_fn(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          return {
              conv_transpose(in[0], in[1], c.strides, c.padding, c.dilation, std::nullopt, true)};
        },
        {u, w}, true)[0];
    ASSERT_EQ(got.shape(), c.x);
    EXPECT_TRUE(ArrayNear(got, to_doubles(want), 1e-12, 1e-12));
  }
}

TEST(ConvTranspose, ErrorsNameTheOperands) {
  auto try_ct = [](Shape ls, Shape rs, std::vector<int64_t> strides, std::string padding) {
    trace_function(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          return {conv_transpose(in[0], in[1], strides, padding)};
        },
        {Type(DType::f32, ls), Type(DType::f32, rs)});
  };
  expect_error(
      [&] {
        try_ct({1, 4, 4, 2}, {3, 3, 2}, {1, 1}, "SAME");
      },
      {"conv_transpose", "f32[1,4,4,2]", "f32[3,3,2]"});
  expect_error(
      [&] {
        try_ct({1, 4, 4, 2}, {3, 3, 2, 2}, {1}, "SAME");
      },
      {"conv_transpose", "strides [1]", "spatial dim"});
  expect_error(
      [&] {
        try_ct({1, 4, 4, 2}, {3, 3, 2, 2}, {1, 0}, "SAME");
      },
      {"conv_transpose", "must be positive"});
  expect_error(
      [&] {
        try_ct({1, 4, 4, 2}, {3, 3, 2, 2}, {1, 1}, "FULL");
      },
      {"conv_transpose", "'FULL'", "SAME or VALID"});
  // A kernel whose input features do not match lhs's is the convolution's error.
  expect_error(
      [&] {
        try_ct({1, 4, 4, 2}, {3, 3, 3, 2}, {1, 1}, "SAME");
      },
      {"conv_general_dilated", "input features"});
}

// NHWC / HWIO convolution with bias, by loops; pads from "SAME" worked out by hand per case.
Array ref_conv2d(const Array& x, const Array& w, const Array& b, int64_t sh, int64_t sw,
                 int64_t pad_top, int64_t pad_left, int64_t out_h, int64_t out_w, int64_t groups) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  const int64_t KH = ws[0], KW = ws[1], I = ws[2], O = ws[3];
  const int64_t per_group = O / groups;
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < out_h; ++i)
      for (int64_t j = 0; j < out_w; ++j)
        for (int64_t o = 0; o < O; ++o) {
          double s = b.element_as_double(o);
          const int64_t g = o / per_group;
          for (int64_t a = 0; a < KH; ++a)
            for (int64_t c = 0; c < KW; ++c)
              for (int64_t f = 0; f < I; ++f) {
                const int64_t r = i * sh + a - pad_top, q = j * sw + c - pad_left;
                if (r < 0 || r >= H || q < 0 || q >= W) continue;
                s += x.element_as_double(((n * H + r) * W + q) * C + g * I + f) *
                     w.element_as_double(((a * KW + c) * I + f) * O + o);
              }
          out.push_back(s);
        }
  return f64_array(out, {N, out_h, out_w, O});
}

TEST(Conv2d, MatchesLoopsWithBiasStridesAndGroups) {
  const Array x = random_array({2, 5, 6, 4}, DType::f64, 1);
  const Array w = random_array({3, 2, 4, 3}, DType::f64, 2), b = random_array({3}, DType::f64, 3);
  auto layer = [](std::vector<int64_t> strides, std::string padding, int64_t groups) {
    return [=](const std::vector<Value>& in) -> std::vector<Value> {
      return {nn::conv2d(in[0], in[1], in[2], strides, padding, groups)};
    };
  };
  // SAME, strides (2, 1): out 3 x 6; rows pad (1, 1) of total 2, columns (0, 1) of total 1.
  Array got = run_fn(layer({2, 1}, "SAME", 1), {x, w, b}, true)[0];
  EXPECT_TRUE(ArrayNear(got, to_doubles(ref_conv2d(x, w, b, 2, 1, 1, 0, 3, 6, 1)), 1e-12, 1e-12));
  got = run_fn(layer({}, "VALID", 1), {x, w, b})[0];
  EXPECT_TRUE(ArrayNear(got, to_doubles(ref_conv2d(x, w, b, 1, 1, 0, 0, 3, 5, 1)), 1e-12, 1e-12));
  // Two groups of 2 input features, each to 2 of the 4 outputs.
  const Array wg = random_array({3, 3, 2, 4}, DType::f64, 4), bg = random_array({4}, DType::f64, 5);
  got = run_fn(layer({1, 1}, "SAME", 2), {x, wg, bg}, true)[0];
  EXPECT_TRUE(ArrayNear(got, to_doubles(ref_conv2d(x, wg, bg, 1, 1, 1, 1, 5, 6, 2)), 1e-12, 1e-12));
}

TEST(Conv2d, Bf16PolicyComputesOnBf16OperandsIntoF32) {
  const Array x = random_array({2, 6, 6, 3}, DType::f32, 1);
  const Array w = random_array({3, 3, 3, 5}, DType::f32, 2), b = random_array({5}, DType::f32, 3);
  const Array got = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {nn::conv2d(in[0], in[1], in[2], {1, 1}, "SAME", nn::Policy::bf16())};
      },
      {x, w, b}, true)[0];
  EXPECT_EQ(got.dtype(), DType::f32);
  // The reference on the bf16-rounded operands, in float64.
  const Array xr = convert_array(convert_array(x, DType::bf16), DType::f64);
  const Array wr = convert_array(convert_array(w, DType::bf16), DType::f64);
  const Array want = ref_conv2d(xr, wr, convert_array(b, DType::f64), 1, 1, 1, 1, 6, 6, 1);
  EXPECT_TRUE(ArrayNear(got, to_doubles(want), 1e-5, 1e-5));
}

TEST(Conv2d, ErrorsNameTheLayer) {
  auto try_conv = [](Shape xs, Shape ws, Shape bs) {
    trace_function(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          return {nn::conv2d(in[0], in[1], in[2], {1, 1}, "SAME")};
        },
        {Type(DType::f32, xs), Type(DType::f32, ws), Type(DType::f32, bs)});
  };
  expect_error([&] { try_conv({1, 4, 4}, {3, 3, 1, 2}, {2}); }, {"conv2d", "f32[1,4,4]"});
  expect_error([&] { try_conv({1, 4, 4, 1}, {3, 3, 1, 2}, {3}); }, {"conv2d", "b f32[3]"});
  expect_error(
      [&] {
        try_conv({1, 4, 4, 2}, {3, 3, 1, 2}, {2});
      },
      {"conv_general_dilated", "input features"});
}

// Per feature (last axis) mean and population variance over every other axis, by loops.
void feature_stats(const Array& x, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t C = x.shape().back(), rows = x.size() / C;
  mean.assign(size_t(C), 0);
  var.assign(size_t(C), 0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < C; ++c) mean[size_t(c)] += x.element_as_double(i * C + c) / rows;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < C; ++c) {
      const double d = x.element_as_double(i * C + c) - mean[size_t(c)];
      var[size_t(c)] += d * d / rows;
    }
}

std::vector<double> normalise(const Array& x, const std::vector<double>& mean,
                              const std::vector<double>& var, const Array& scale, const Array& bias,
                              double eps) {
  const int64_t C = x.shape().back();
  std::vector<double> y;
  for (int64_t i = 0; i < x.size(); ++i) {
    const size_t c = size_t(i % C);
    y.push_back((x.element_as_double(i) - mean[c]) / std::sqrt(var[c] + eps) *
                    scale.element_as_double(int64_t(c)) +
                bias.element_as_double(int64_t(c)));
  }
  return y;
}

TEST(BatchNorm, TrainingUsesBatchStatisticsAndMovesTheRunningOnes) {
  const Array x = random_array({3, 4, 2, 5}, DType::f64, 1, -2.0, 3.0);
  const Array scale = random_array({5}, DType::f64, 2), bias = random_array({5}, DType::f64, 3);
  const Array rm = random_array({5}, DType::f64, 4), rv = random_array({5}, DType::f64, 5, 0.5, 2);
  auto bn = [](bool training) {
    return [=](const std::vector<Value>& in) -> std::vector<Value> {
      nn::BatchNormOutput o = nn::batch_norm(in[0], in[1], in[2], {in[3], in[4]}, training, 0.9);
      return {o.y, o.stats.mean, o.stats.var};
    };
  };
  std::vector<double> mean, var;
  feature_stats(x, mean, var);
  const std::vector<Array> t = run_fn(bn(true), {x, scale, bias, rm, rv}, true);
  EXPECT_TRUE(ArrayNear(t[0], normalise(x, mean, var, scale, bias, 1e-5), 1e-12, 1e-12));
  std::vector<double> next_mean, next_var;
  for (size_t c = 0; c < 5; ++c) {
    next_mean.push_back(0.9 * rm.element_as_double(int64_t(c)) + 0.1 * mean[c]);
    next_var.push_back(0.9 * rv.element_as_double(int64_t(c)) + 0.1 * var[c]);
  }
  EXPECT_TRUE(ArrayNear(t[1], next_mean, 1e-14, 1e-14));
  EXPECT_TRUE(ArrayNear(t[2], next_var, 1e-14, 1e-14));
  // Evaluation: the running statistics normalise, and come back as they were.
  const std::vector<Array> e = run_fn(bn(false), {x, scale, bias, rm, rv});
  EXPECT_TRUE(ArrayNear(e[0], normalise(x, to_doubles(rm), to_doubles(rv), scale, bias, 1e-5),
                        1e-12, 1e-12));
  EXPECT_TRUE(ArrayNear(e[1], to_doubles(rm), 0, 0));
  EXPECT_TRUE(ArrayNear(e[2], to_doubles(rv), 0, 0));
}

// The gradient of a nonlinear loss of the normalised output in x, scale and bias.
TEST(BatchNorm, GradientsMatchCentralDifferences) {
  const Array x = random_array({4, 3, 3}, DType::f64, 6), s = random_array({3}, DType::f64, 7);
  const Array b = random_array({3}, DType::f64, 8);
  auto loss = [](Value xx, Value ss, Value bb) {
    nn::BatchNormOutput o =
        nn::batch_norm(xx, ss, bb, nn::batch_norm_stats(3, DType::f64), true, 0.99, 1e-3);
    return sum(o.y * o.y * o.y);
  };
  const std::vector<Array> g = jit(grad(loss, std::vector<int>{0, 1, 2}))(x, s, b);
  auto value = [&](const Array& xx, const Array& ss, const Array& bb) {
    std::vector<double> mean, var;
    feature_stats(xx, mean, var);
    double v = 0;
    for (double y : normalise(xx, mean, var, ss, bb, 1e-3)) v += y * y * y;
    return v;
  };
  const double h = 1e-6;
  for (int which = 0; which < 3; ++which) {
    const Array& a = which == 0 ? x : which == 1 ? s : b;
    std::vector<double> fd;
    for (int64_t i = 0; i < a.size(); ++i) {
      std::vector<double> p = to_doubles(a), m = p;
      p[size_t(i)] += h;
      m[size_t(i)] -= h;
      const Array ap = f64_array(p, a.shape()), am = f64_array(m, a.shape());
      fd.push_back(which == 0   ? (value(ap, s, b) - value(am, s, b)) / (2 * h)
                   : which == 1 ? (value(x, ap, b) - value(x, am, b)) / (2 * h)
                                : (value(x, s, ap) - value(x, s, am)) / (2 * h));
    }
    EXPECT_TRUE(ArrayNear(g[size_t(which)], fd, 1e-5, 1e-5)) << "argument " << which;
  }
}

TEST(BatchNorm, ErrorsNameTheShapes) {
  auto try_bn = [](Shape xs, Shape ss, Shape rs, double momentum) {
    trace_function(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          return {nn::batch_norm(in[0], in[1], in[1], {in[2], in[2]}, true, momentum).y};
        },
        {Type(DType::f32, xs), Type(DType::f32, ss), Type(DType::f32, rs)});
  };
  expect_error([&] { try_bn({2, 3}, {2}, {2}, 0.9); }, {"batch_norm", "f32[2,3]", "scale f32[2]"});
  expect_error([&] { try_bn({2, 3}, {3}, {4}, 0.9); }, {"batch_norm", "running", "f32[4]"});
  expect_error([&] { try_bn({2, 3}, {3}, {3}, 1.5); }, {"batch_norm", "momentum", "[0, 1]"});
}

TEST(GroupNorm, MatchesLoopsPerExampleAndGroup) {
  const int64_t N = 2, H = 3, W = 2, C = 6, G = 3;
  const Array x = random_array({N, H, W, C}, DType::f64, 1, -1.0, 2.0);
  const Array scale = random_array({C}, DType::f64, 2), bias = random_array({C}, DType::f64, 3);
  const double eps = 1e-4;
  std::vector<double> want(size_t(x.size()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      std::vector<int64_t> at;  // the flat indices of example n's group g
      for (int64_t p = 0; p < H * W; ++p)
        for (int64_t c = g * (C / G); c < (g + 1) * (C / G); ++c)
          at.push_back((n * H * W + p) * C + c);
      double mean = 0, var = 0;
      for (int64_t i : at) mean += x.element_as_double(i) / double(at.size());
      for (int64_t i : at) var += std::pow(x.element_as_double(i) - mean, 2) / double(at.size());
      for (int64_t i : at)
        want[size_t(i)] = (x.element_as_double(i) - mean) / std::sqrt(var + eps) *
                              scale.element_as_double(i % C) +
                          bias.element_as_double(i % C);
    }
  const Array got = run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        return {nn::group_norm(in[0], G, in[1], in[2], eps)};
      },
      {x, scale, bias}, true)[0];
  EXPECT_TRUE(ArrayNear(got, want, 1e-12, 1e-12));
  expect_error(
      [&] {
        trace_function(
            [&](const std::vector<Value>& in) -> std::vector<Value> {
              return {nn::group_norm(in[0], 4, in[1], in[1])};
            },
            {Type(DType::f32, {2, 3, 6}), Type(DType::f32, {6})});
      },
      {"group_norm", "num_groups 4", "6 features", "f32[2,3,6]"});
}

}  // namespace
}  // namespace drx::testing
