// Convolution and pooling against PyTorch in float64: the values of torch.nn.functional's
// conv2d, max_pool2d and avg_pool2d and the gradients of sum(y * u) with respect to the input,
// weight and bias, for a fixed cotangent u, written by bench/torch_conv_fixture.py into
// tests/fixtures/torch_conv_fixture.h (no torch needed here). Each case runs through every
// drx spelling that expresses it (conv_general_dilated's ConvParams; conv with (low, high)
// pairs and with "VALID" / "SAME"; nn::max_pool / nn::avg_pool in flax's NHWC layout;
// reduce_window with torch's padding and dilation), both interpreted and compiled, and agrees
// to 1e-12. The max pools include ties, where torch and drx's select_and_scatter_add ("GE")
// both send the gradient to the first maximum of the window.
#include "tests/fixtures/torch_conv_fixture.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "drx/core/trace.h"
#include "drx/drx.h"
#include "drx/ops/convolution.h"
#include "drx/ops/windows.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace fx = torch_conv_fixture;

constexpr double kTol = 1e-12;

Shape shape_of(const int64_t (&s)[4]) { return {s[0], s[1], s[2], s[3]}; }

std::vector<double> values(const double* p, const Shape& s) {
  return std::vector<double>(p, p + num_elements(s));
}
Array array(const double* p, const Shape& s) { return f64_array(values(p, s), s); }

using Fn = std::function<std::vector<Value>(const std::vector<Value>&)>;

// fn's program run by the interpreter and by the compiled executable.
std::vector<std::vector<Array>> run_both_ways(const Fn& fn, const std::vector<Array>& args) {
  std::vector<Type> types;
  for (const Array& a : args) types.emplace_back(a.dtype(), a.shape());
  const Program p = trace_function(fn, types).program;
  return {run(p, args), compile(p).run(args)};
}

// ---- conv2d -------------------------------------------------------------------------------

using ConvOp = std::function<Value(const Value&, const Value&)>;

// Every drx spelling of the case's convolution (x NCHW, w OIHW), by name.
std::vector<std::pair<std::string, ConvOp>> conv_spellings(const fx::Conv2dCase& k) {
  const std::vector<int64_t> strides{k.stride[0], k.stride[1]};
  const std::vector<std::pair<int64_t, int64_t>> pads{{k.padding[0][0], k.padding[0][1]},
                                                      {k.padding[1][0], k.padding[1][1]}};
  const int64_t groups = k.groups;
  ConvParams c;
  c.window_strides = strides;
  c.padding = pads;
  c.rhs_dilation = {k.dilation[0], k.dilation[1]};
  c.feature_group_count = groups;
  std::vector<std::pair<std::string, ConvOp>> out;
  out.emplace_back("conv_general_dilated",
                   [c](const Value& x, const Value& w) { return conv_general_dilated(x, w, c); });
  if (k.dilation[0] == 1 && k.dilation[1] == 1) {
    out.emplace_back("conv, (low, high) pairs", [=](const Value& x, const Value& w) {
      return conv(x, w, strides, pads, groups);
    });
    const std::string name = k.padding_name;
    if (!name.empty())
      out.emplace_back("conv, " + name, [=](const Value& x, const Value& w) {
        return conv(x, w, strides, name, groups);
      });
  }
  return out;
}

TEST(TorchConvFixture, Conv2dValuesAndGradientsMatchTorch) {
  for (const fx::Conv2dCase& k : fx::kConv2dCases) {
    const Shape xs = shape_of(k.x_shape), ws = shape_of(k.w_shape), ys = shape_of(k.y_shape);
    const bool bias = k.b != nullptr;
    const Shape bs{ws[0]};
    std::vector<Array> args{array(k.x, xs), array(k.w, ws), array(k.u, ys)};
    if (bias) args.push_back(array(k.b, bs));
    for (const auto& [spelling, op] : conv_spellings(k)) {
      SCOPED_TRACE(std::string(k.name) + ": " + spelling);
      // y = op(x, w) (+ b along the feature dim); the loss sum(y * u), u not differentiated.
      const ConvOp f = op;
      const Fn fn = [f, bias, ys](const std::vector<Value>& in) -> std::vector<Value> {
        if (bias) {
          auto forward = [f, ys](Value x, Value w, Value b) {
            return f(x, w) + broadcast_in_dim(b, ys, {1});
          };
          auto loss = [forward](Value x, Value w, Value b, Value u) {
            return sum(forward(x, w, b) * u);
          };
          std::vector<Value> g = grad(loss, std::vector<int>{0, 1, 2})(in[0], in[1], in[3], in[2]);
          return {forward(in[0], in[1], in[3]), g[0], g[1], g[2]};
        }
        auto loss = [f](Value x, Value w, Value u) { return sum(f(x, w) * u); };
        std::vector<Value> g = grad(loss, std::vector<int>{0, 1})(in[0], in[1], in[2]);
        return {f(in[0], in[1]), g[0], g[1]};
      };
      const auto runs = run_both_ways(fn, args);
      for (size_t r = 0; r < runs.size(); ++r) {
        SCOPED_TRACE(r == 0 ? "interpreted" : "compiled");
        const std::vector<Array>& got = runs[r];
        ASSERT_EQ(got.size(), bias ? 4u : 3u);
        EXPECT_EQ(got[0].shape(), ys);
        EXPECT_TRUE(ArrayNear(got[0], values(k.y, ys), kTol, kTol)) << "y";
        EXPECT_TRUE(ArrayNear(got[1], values(k.dx, xs), kTol, kTol)) << "dx";
        EXPECT_TRUE(ArrayNear(got[2], values(k.dw, ws), kTol, kTol)) << "dw";
        if (bias) {
          EXPECT_TRUE(ArrayNear(got[3], values(k.db, bs), kTol, kTol)) << "db";
        }
      }
    }
  }
}

// ---- pooling ------------------------------------------------------------------------------

using PoolOp = std::function<Value(const Value&)>;

// NCHW -> NHWC, the pool in flax's layout, and back.
PoolOp channels_last(const PoolOp& pool) {
  return [pool](const Value& x) {
    return transpose(pool(transpose(x, {0, 2, 3, 1})), {0, 3, 1, 2});
  };
}

// Every drx spelling of the case's pool (x NCHW), by name.
std::vector<std::pair<std::string, PoolOp>> pool_spellings(const fx::Pool2dCase& k) {
  const std::vector<int64_t> window{k.window[0], k.window[1]}, strides{k.stride[0], k.stride[1]};
  const std::string flax = k.flax_padding;
  const bool include = k.count_include_pad;
  std::vector<std::pair<std::string, PoolOp>> out;
  if (!flax.empty()) {
    if (k.max)
      out.emplace_back("nn::max_pool " + flax, channels_last([=](const Value& x) {
                         return nn::max_pool(x, window, strides, flax);
                       }));
    else
      out.emplace_back("nn::avg_pool " + flax, channels_last([=](const Value& x) {
                         return nn::avg_pool(x, window, strides, flax, include);
                       }));
  }
  if (k.max) {
    // reduce_window with torch's own padding and dilation, in NCHW.
    const WindowConfig c{
        {1, 1, k.window[0], k.window[1]},
        {1, 1, k.stride[0], k.stride[1]},
        {{0, 0}, {0, 0}, {k.padding[0][0], k.padding[0][1]}, {k.padding[1][0], k.padding[1][1]}},
        {},
        {1, 1, k.dilation[0], k.dilation[1]}};
    out.emplace_back("reduce_window max",
                     [c](const Value& x) { return reduce_window(x, "max", c); });
  }
  return out;
}

TEST(TorchConvFixture, Pool2dValuesAndGradientsMatchTorch) {
  for (const fx::Pool2dCase& k : fx::kPool2dCases) {
    const Shape xs = shape_of(k.x_shape), ys = shape_of(k.y_shape);
    const auto spellings = pool_spellings(k);
    ASSERT_FALSE(spellings.empty()) << k.name;
    for (const auto& [spelling, op] : spellings) {
      SCOPED_TRACE(std::string(k.name) + ": " + spelling);
      const PoolOp f = op;
      const Fn fn = [f](const std::vector<Value>& in) -> std::vector<Value> {
        auto loss = [f](Value x, Value u) { return sum(f(x) * u); };
        return {f(in[0]), grad(loss, 0)(in[0], in[1])};
      };
      const auto runs = run_both_ways(fn, {array(k.x, xs), array(k.u, ys)});
      for (size_t r = 0; r < runs.size(); ++r) {
        SCOPED_TRACE(r == 0 ? "interpreted" : "compiled");
        const std::vector<Array>& got = runs[r];
        ASSERT_EQ(got.size(), 2u);
        EXPECT_EQ(got[0].shape(), ys);
        EXPECT_TRUE(ArrayNear(got[0], values(k.y, ys), kTol, kTol)) << "y";
        EXPECT_TRUE(ArrayNear(got[1], values(k.dx, xs), kTol, kTol)) << "dx";
      }
    }
  }
}

}  // namespace
}  // namespace drx::testing
