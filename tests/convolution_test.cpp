// conv_general_dilated: values against a float64 reference written here (the spec's
// definition: dilate, pad, split into groups, slide the (dilated, reversed) window), the
// compiled im2col + gemm kernel against the interpreter, jvp and vjp (and their transpose
// relation), gradients and second derivatives against central differences, vmap against a
// loop, program text and StableHLO round trips, and the error messages.
#include "drx/ops/convolution.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "drx/core/trace.h"
#include "drx/drx.h"
#include "drx/exec/kernels_conv.h"
#include "drx/exec/onednn.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

using Fn = std::function<std::vector<Value>(const std::vector<Value>&)>;
using Pads = std::vector<std::pair<int64_t, int64_t>>;

std::vector<Array> run_fn(const Fn& fn, const std::vector<Array>& args, bool compiled = false) {
  std::vector<Type> types;
  for (const Array& a : args) types.emplace_back(a.dtype(), a.shape());
  Program p = trace_function(fn, types).program;
  return compiled ? compile(p).run(args) : run(p, args);
}

// Full params (every list filled), as the primitive holds them.
ConvParams full(ConvParams c, size_t rank) {
  const size_t S = rank - 2;
  ConvDimensionNumbers& d = c.dims;
  if (d.lhs_spatial.empty())
    for (int64_t k = 2; k < static_cast<int64_t>(rank); ++k) {
      d.lhs_spatial.push_back(k);
      d.rhs_spatial.push_back(k);
      d.out_spatial.push_back(k);
    }
  if (c.window_strides.empty()) c.window_strides.assign(S, 1);
  if (c.lhs_dilation.empty()) c.lhs_dilation.assign(S, 1);
  if (c.rhs_dilation.empty()) c.rhs_dilation.assign(S, 1);
  if (c.padding.empty()) c.padding.assign(S, {0, 0});
  if (c.window_reversal.empty()) c.window_reversal.assign(S, 0);
  return c;
}

int64_t flat(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t o = 0;
  for (size_t d = 0; d < shape.size(); ++d) o = o * shape[d] + idx[d];
  return o;
}

// The spec's definition, step by step, in float64: the input dilated and padded explicitly,
// the kernel reversed explicitly, then each group's plain dilated sliding window.
Array ref_conv(const Array& L, const Array& R, const ConvParams& c) {
  const ConvDimensionNumbers& d = c.dims;
  const size_t S = c.window_strides.size();
  const int64_t N = L.shape()[size_t(d.lhs_batch)], C = L.shape()[size_t(d.lhs_feature)];
  const int64_t O = R.shape()[size_t(d.rhs_out_feature)], I = R.shape()[size_t(d.rhs_in_feature)];
  std::vector<int64_t> X(S), K(S), P(S), Y(S);
  for (size_t k = 0; k < S; ++k) {
    X[k] = L.shape()[size_t(d.lhs_spatial[k])];
    K[k] = R.shape()[size_t(d.rhs_spatial[k])];
    const int64_t dil = X[k] == 0 ? 0 : (X[k] - 1) * c.lhs_dilation[k] + 1;
    P[k] = c.padding[k].first + dil + c.padding[k].second;
    const int64_t dk = K[k] == 0 ? 0 : (K[k] - 1) * c.rhs_dilation[k] + 1;
    Y[k] = (P[k] <= 0 || dk > P[k]) ? 0 : (P[k] - dk) / c.window_strides[k] + 1;
  }
  // Padded, dilated input [N, C, P...] in canonical layout.
  int64_t psize = N * C;
  for (int64_t p : P) psize *= std::max<int64_t>(p, 0);
  std::vector<double> padded(static_cast<size_t>(std::max<int64_t>(psize, 0)), 0.0);
  Shape pshape{N, C};
  for (int64_t p : P) pshape.push_back(std::max<int64_t>(p, 0));
  {
    std::vector<int64_t> idx(L.shape().size(), 0);
    for (int64_t i = 0; i < L.size(); ++i) {
      std::vector<int64_t> at{idx[size_t(d.lhs_batch)], idx[size_t(d.lhs_feature)]};
      bool inside = true;
      for (size_t k = 0; k < S; ++k) {
        const int64_t q = c.padding[k].first + idx[size_t(d.lhs_spatial[k])] * c.lhs_dilation[k];
        inside = inside && q >= 0 && q < P[k];
        at.push_back(q);
      }
      if (inside) padded[size_t(flat(pshape, at))] = L.element_as_double(i);
      for (size_t a = idx.size(); a-- > 0;)
        if (++idx[a] < L.shape()[a])
          break;
        else
          idx[a] = 0;
    }
  }
  // Kernel [O, I, K...] canonical, reversed where flagged.
  Shape kshape{O, I};
  for (int64_t k : K) kshape.push_back(k);
  std::vector<double> kern(static_cast<size_t>(R.size()));
  {
    std::vector<int64_t> idx(R.shape().size(), 0);
    for (int64_t i = 0; i < R.size(); ++i) {
      std::vector<int64_t> at{idx[size_t(d.rhs_out_feature)], idx[size_t(d.rhs_in_feature)]};
      for (size_t k = 0; k < S; ++k) {
        const int64_t w = idx[size_t(d.rhs_spatial[k])];
        at.push_back(c.window_reversal[k] ? K[k] - 1 - w : w);
      }
      kern[size_t(flat(kshape, at))] = R.element_as_double(i);
      for (size_t a = idx.size(); a-- > 0;)
        if (++idx[a] < R.shape()[a])
          break;
        else
          idx[a] = 0;
    }
  }
  const int64_t G = c.feature_group_count, B = c.batch_group_count, Nb = N / B;
  Shape os(S + 2);
  os[size_t(d.out_batch)] = Nb;
  os[size_t(d.out_feature)] = O;
  for (size_t k = 0; k < S; ++k) os[size_t(d.out_spatial[k])] = Y[k];
  std::vector<double> out(size_t(num_elements(os)), 0.0);
  int64_t ny = 1, nw = 1;
  for (size_t k = 0; k < S; ++k) ny *= Y[k], nw *= K[k];
  for (int64_t n = 0; n < Nb; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t fg = o / (O / G), bg = o / (O / B);
      for (int64_t yi = 0; yi < ny; ++yi) {
        std::vector<int64_t> y(S);
        for (size_t k = S, r = size_t(yi); k-- > 0;)
          y[k] = int64_t(r % size_t(Y[k])), r /= size_t(Y[k]);
        double acc = 0;
        for (int64_t i = 0; i < I; ++i)
          for (int64_t wi = 0; wi < nw; ++wi) {
            std::vector<int64_t> w(S);
            for (size_t k = S, r = size_t(wi); k-- > 0;)
              w[k] = int64_t(r % size_t(K[k])), r /= size_t(K[k]);
            std::vector<int64_t> pa{bg * Nb + n, fg * I + i}, ka{o, i};
            for (size_t k = 0; k < S; ++k) {
              pa.push_back(y[k] * c.window_strides[k] + w[k] * c.rhs_dilation[k]);
              ka.push_back(w[k]);
            }
            acc += padded[size_t(flat(pshape, pa))] * kern[size_t(flat(kshape, ka))];
          }
        std::vector<int64_t> oa(S + 2);
        oa[size_t(d.out_batch)] = n;
        oa[size_t(d.out_feature)] = o;
        for (size_t k = 0; k < S; ++k) oa[size_t(d.out_spatial[k])] = y[k];
        out[size_t(flat(os, oa))] = acc;
      }
    }
  (void)C;
  return f64_array(out, os);
}

struct Case {
  std::string name;
  Shape ls, rs;
  ConvParams c;
};

ConvDimensionNumbers nhwc() {  // lhs NHWC, rhs HWIO, out NHWC
  return {0, 3, {1, 2}, 3, 2, {0, 1}, 0, 3, {1, 2}};
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](std::string name, Shape ls, Shape rs, ConvParams c) {
    v.push_back({std::move(name), ls, rs, full(std::move(c), ls.size())});
  };
  add("plain2d", {2, 3, 5, 6}, {4, 3, 3, 2}, {});
  add("strides", {1, 2, 7, 8}, {3, 2, 3, 3}, {.window_strides = {2, 3}});
  add("odd_padding", {1, 2, 5, 5}, {2, 2, 3, 2}, {.padding = {{2, 1}, {0, 3}}});
  add("negative_padding", {2, 1, 6, 7}, {2, 1, 2, 2}, {.padding = {{-1, 2}, {1, -2}}});
  add("lhs_dilation", {1, 2, 4, 3}, {2, 2, 3, 2},
      {.window_strides = {2, 1}, .padding = {{1, 1}, {0, 1}}, .lhs_dilation = {2, 3}});
  add("rhs_dilation", {1, 2, 8, 7}, {3, 2, 3, 2}, {.rhs_dilation = {2, 3}});
  add("reversal", {1, 2, 5, 4}, {2, 2, 3, 2},
      {.padding = {{1, 0}, {0, 1}}, .window_reversal = {1, 0}});
  add("nhwc_hwio", {2, 5, 4, 3}, {3, 2, 3, 4},
      {.window_strides = {1, 2}, .padding = {{1, 1}, {0, 0}}, .dims = nhwc()});
  add("odd_layout", {4, 3, 2, 5}, {2, 3, 4, 4},
      {.padding = {{1, 0}, {0, 1}},
       .window_reversal = {0, 1},
       .dims = {2, 0, {3, 1}, 1, 3, {2, 0}, 1, 0, {2, 3}}});
  add("feature_groups", {2, 6, 5, 4}, {4, 3, 2, 2},
      {.window_strides = {2, 1}, .feature_group_count = 2});
  add("depthwise", {1, 3, 5, 5}, {6, 1, 3, 3},
      {.padding = {{1, 1}, {1, 1}}, .rhs_dilation = {1, 2}, .feature_group_count = 3});
  add("batch_groups", {4, 2, 4, 5}, {6, 2, 2, 3},
      {.padding = {{0, 1}, {1, 0}}, .batch_group_count = 2});
  add("conv1d", {3, 2, 9}, {4, 2, 3},
      {.window_strides = {2}, .padding = {{1, 2}}, .lhs_dilation = {2}, .rhs_dilation = {2}});
  add("conv3d", {1, 2, 4, 3, 5}, {2, 2, 2, 2, 3},
      {.window_strides = {1, 2, 1},
       .padding = {{0, 1}, {1, 0}, {-1, 1}},
       .window_reversal = {0, 1, 1}});
  // Windows larger than the output, as the weight gradients the vjp emits: oneDNN's
  // backward-weights convolution with batch and features swapped (the CNN's layout, and NCHW
  // with strides, rhs dilation and right padding the output does not reach).
  add("weight_gradient", {3, 6, 6, 4}, {3, 6, 6, 5},
      {.padding = {{2, 2}, {2, 2}}, .dims = {3, 0, {1, 2}, 3, 0, {1, 2}, 2, 3, {0, 1}}});
  add("weight_gradient_strided", {2, 3, 10, 10}, {4, 3, 5, 5},
      {.window_strides = {2, 1}, .padding = {{1, 1}, {0, 2}}, .rhs_dilation = {1, 2}});
  // A stride-2 convolution's input gradient: the output's gradient dilated, the window
  // reversed (oneDNN's backward-data convolution).
  add("input_gradient", {2, 4, 3, 3}, {3, 4, 3, 3},
      {.padding = {{1, 2}, {2, 0}}, .lhs_dilation = {2, 2}, .window_reversal = {1, 1}});
  add("every_attribute", {4, 4, 5, 3}, {4, 2, 2, 2},
      {.window_strides = {2, 1},
       .padding = {{1, -1}, {2, 0}},
       .lhs_dilation = {1, 2},
       .rhs_dilation = {2, 1},
       .window_reversal = {1, 1},
       .feature_group_count = 2});
  return v;
}

Value conv_of(const Value& l, const Value& r, const ConvParams& c) {
  return conv_general_dilated(l, r, c);
}

TEST(Conv, InterpreterAndKernelMatchTheFloat64Reference) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const Array l = random_array(k.ls, DType::f64, 1), r = random_array(k.rs, DType::f64, 2);
    const Array want = ref_conv(l, r, k.c);
    auto fn = [&](const std::vector<Value>& in) -> std::vector<Value> {
      return {conv_of(in[0], in[1], k.c)};
    };
    const Array got = run_fn(fn, {l, r})[0];
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_TRUE(ArrayNear(got, to_doubles(want), 1e-13, 1e-13));
    const Array jit64 = run_fn(fn, {l, r}, true)[0];
    EXPECT_TRUE(ArrayNear(jit64, to_doubles(want), 1e-12, 1e-12));
    // f32: the kernel's sgemm accumulates in float, the reference in double.
    const Array lf = convert_array(l, DType::f32), rf = convert_array(r, DType::f32);
    const Array i32 = run_fn(fn, {lf, rf})[0], c32 = run_fn(fn, {lf, rf}, true)[0];
    EXPECT_EQ(i32.dtype(), DType::f32);
    EXPECT_TRUE(ArrayNear(c32, to_doubles(i32), 1e-5, 1e-5));
    EXPECT_TRUE(ArrayNear(i32, to_doubles(want), 1e-5, 1e-5));
  }
}

// The cpu backend's kernel for each convolution of `p` (in program order).
std::vector<std::string> routes_of(const Program& p) {
  std::vector<std::string> v;
  for (const Eqn& e : p.eqns)
    if (e.prim == &prims::conv_general_dilated())
      v.push_back(exec::conv_kernel_route(ConvParams::of(e), p.type_of(e.ins[0]),
                                          p.type_of(e.ins[1]), p.type_of(e.outs[0])));
  return v;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// f32 convolutions run on oneDNN's forward or backward-weights convolution wherever oneDNN can
// state them (so the other tests here check its results), on drx's im2col + gemm otherwise.
TEST(Conv, EachCaseRunsOnTheKernelItsAttributesAllow) {
  if (!exec::onednn::available()) {
    std::printf("[ SKIPPED  ] built without oneDNN: convolutions run on im2col + gemm\n");
    GTEST_SKIP();
  }
  const std::map<std::string, std::string> want = {
      {"plain2d", "oneDNN forward"},
      {"strides", "oneDNN"},
      {"odd_padding", "oneDNN forward"},
      {"negative_padding", "im2col"},
      {"lhs_dilation", "im2col"},
      {"rhs_dilation", "oneDNN forward"},
      {"reversal", "oneDNN forward"},
      {"nhwc_hwio", "oneDNN forward"},
      {"odd_layout", "oneDNN forward"},
      {"feature_groups", "oneDNN forward"},
      {"depthwise", "oneDNN forward"},
      {"batch_groups", "im2col"},
      {"conv1d", "im2col"},
      {"conv3d", "im2col"},
      {"weight_gradient", "oneDNN weight gradient"},
      {"weight_gradient_strided", "oneDNN weight gradient"},
      {"input_gradient", "oneDNN input gradient"},
      {"every_attribute", "im2col"}};
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const Program p = trace_function(
                          [&](const std::vector<Value>& in) -> std::vector<Value> {
                            return {conv_of(in[0], in[1], k.c)};
                          },
                          {Type(DType::f32, k.ls), Type(DType::f32, k.rs)})
                          .program;
    const std::vector<std::string> r = routes_of(p);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(starts_with(r[0], want.at(k.name))) << r[0];
    EXPECT_EQ(r[0].find("ref"), std::string::npos) << r[0];
  }
}

// The CNN layer's gradients (NHWC, HWIO, SAME; stride 1 as McMahan's CNN, and stride 2, whose
// input gradient dilates the output's) run on oneDNN, f32 and bf16, and agree with float64.
TEST(Conv, TheCnnLayersGradientRunsOnOnednn) {
  for (int64_t stride : {1, 2})
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + ", stride " + std::to_string(stride));
      ConvParams c = full(
          {.window_strides = {stride, stride}, .padding = {{2, 2}, {2, 2}}, .dims = nhwc()}, 4);
      if (dt == DType::bf16) c.preferred_element_type = DType::f32;
      auto loss = [c, dt](Value x, Value w, Value ct) {
        return sum(conv_of(astype(x, dt), astype(w, dt), c) * ct);
      };
      const int64_t y = stride == 1 ? 7 : 4;
      const Shape xs{4, 7, 7, 6}, ws{5, 5, 6, 8}, ys{4, y, y, 8};
      const Program g =
          simplify(trace(grad(loss, std::vector<int>{0, 1}),
                         {Type(DType::f32, xs), Type(DType::f32, ws), Type(DType::f32, ys)}));
      const std::vector<std::string> r = routes_of(g);
      ASSERT_EQ(r.size(), 2u);  // the input and weight gradients (the forward value is unused)
      const bool native_bf16 =
          exec::onednn::isa() == "avx512_core_bf16" || exec::onednn::isa() == "avx512_core_amx";
      if (exec::onednn::available() && (dt == DType::f32 || native_bf16)) {
        // Stride 1: the input gradient is a forward convolution of the reversed kernel and the
        // weight gradient's window (7 x 7) outgrows its output (5 x 5); stride 2 dilates the
        // output's gradient (backward-data), whose 4 x 4 window the forward convolution takes.
        const std::string input = stride == 1 ? "oneDNN forward" : "oneDNN input gradient";
        const std::string weight = stride == 1 ? "oneDNN weight gradient" : "oneDNN forward";
        EXPECT_TRUE(starts_with(r[0], input) || starts_with(r[1], input)) << r[0] << "; " << r[1];
        EXPECT_TRUE(starts_with(r[0], weight) || starts_with(r[1], weight)) << r[0] << "; " << r[1];
      }
      // Operands exact in dt, so that float64 sees the same numbers.
      const Array x = convert_array(random_array(xs, dt, 11), DType::f32),
                  w = convert_array(random_array(ws, dt, 12), DType::f32),
                  ct = convert_array(random_array(ys, dt, 13), DType::f32);
      const std::vector<Array> got = compile(g).run({x, w, ct});
      // float64: drx's im2col kernel in f64.
      ConvParams c64 = c;
      c64.preferred_element_type = std::nullopt;
      auto loss64 = [c64](Value x, Value w, Value ct) { return sum(conv_of(x, w, c64) * ct); };
      const std::vector<Array> want = jit(grad(loss64, std::vector<int>{0, 1}))(
          convert_array(x, DType::f64), convert_array(w, DType::f64),
          convert_array(ct, DType::f64));
      // bf16: the gradients are bf16 products, rounded once to bf16.
      const double tol = dt == DType::f32 ? 1e-4 : 1e-2;
      for (size_t i = 0; i < 2; ++i)
        EXPECT_TRUE(ArrayNear(got[i], to_doubles(want[i]), tol, tol)) << "gradient " << i;
    }
}

// The StableHLO interpreter's first case, by hand: stride 4 over a 2x-dilated 4x4 input.
TEST(Conv, Int8OperandsAccumulateInInt32) {
  std::vector<int8_t> x{1, 2, 5, 6, 3, 4, 7, 8, 10, 11, 14, 15, 12, 13, 16, 17};
  const Array l = Array::from_vector<int8_t>(x, {1, 4, 4, 1});
  const Array r = Array::from_vector<int8_t>(std::vector<int8_t>(9, 10), {3, 3, 1, 1});
  ConvParams c;
  c.window_strides = {4, 4};
  c.lhs_dilation = {2, 2};
  c.dims = {0, 3, {1, 2}, 3, 2, {0, 1}, 0, 3, {1, 2}};
  c.preferred_element_type = DType::i32;
  auto fn = [&](const std::vector<Value>& in) -> std::vector<Value> {
    return {conv_of(in[0], in[1], c)};
  };
  for (bool compiled : {false, true}) {
    const Array y = run_fn(fn, {l, r}, compiled)[0];
    EXPECT_EQ(y.dtype(), DType::i32);
    EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{100, 260, 460, 620}));
  }
  // Sums beyond i8's range, exact in i32.
  const Array big = random_array({2, 3, 5, 4}, DType::i8, 3, -128, 127);
  const Array kb = random_array({3, 3, 3, 2}, DType::i8, 4, -128, 127);
  ConvParams p;
  p.preferred_element_type = DType::i32;
  const Array y = run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        return {conv_of(in[0], in[1], p)};
      },
      {big, kb})[0];
  EXPECT_TRUE(ArrayNear(y, to_doubles(ref_conv(big, kb, full(p, 4))), 0, 0));
}

TEST(Conv, Bf16OperandsWithF32Result) {
  const Array l = random_array({2, 3, 5, 4}, DType::bf16, 5),
              r = random_array({2, 3, 3, 2}, DType::bf16, 6);
  ConvParams c;
  c.padding = {{1, 1}, {0, 1}};
  c.preferred_element_type = DType::f32;
  auto fn = [&](const std::vector<Value>& in) -> std::vector<Value> {
    return {conv_of(in[0], in[1], c)};
  };
  const Array want =
      ref_conv(convert_array(l, DType::f64), convert_array(r, DType::f64), full(c, 4));
  for (bool compiled : {false, true}) {
    const Array y = run_fn(fn, {l, r}, compiled)[0];
    EXPECT_EQ(y.dtype(), DType::f32);
    EXPECT_TRUE(ArrayNear(y, to_doubles(want), 1e-6, 1e-6));
  }
}

// Every case with bf16 operands, compiled (oneDNN's product where it has a native kernel,
// else widened to f32 for sgemm): f32 results to f32 accumulation, bf16 results rounded once.
TEST(Conv, Bf16KernelOnEveryCase) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const Array l = random_array(k.ls, DType::bf16, 1), r = random_array(k.rs, DType::bf16, 2);
    const Array want = ref_conv(convert_array(l, DType::f64), convert_array(r, DType::f64), k.c);
    ConvParams wide = k.c;
    wide.preferred_element_type = DType::f32;
    for (const ConvParams& c : {wide, k.c}) {
      const Array y = run_fn(
          [&](const std::vector<Value>& in) -> std::vector<Value> {
            return {conv_of(in[0], in[1], c)};
          },
          {l, r}, true)[0];
      EXPECT_EQ(y.dtype(), c.preferred_element_type ? DType::f32 : DType::bf16);
      const double tol = c.preferred_element_type ? 1e-5 : 1e-2;
      EXPECT_TRUE(ArrayNear(convert_array(y, DType::f64), to_doubles(want), tol, tol));
    }
  }
}

// The compiled kernels' tasks (chunks of batch indices, and groups) may run on any thread: the
// bits are the same on one thread as on several.
TEST(Conv, KernelBitsDoNotDependOnTheThreadCount) {
  const int before = num_threads();
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    // 40 images of 32 x 32 x 32: oneDNN's forward convolution in three tasks of up to 14
    // images (2^28 flops each); f64 (and builds without oneDNN) on im2col, six tasks of up to
    // 7 images (2^21 im2col elements each).
    const Array l = random_array({40, 32, 32, 32}, dt, 3), r = random_array({3, 3, 32, 32}, dt, 4);
    ConvParams c = full({.padding = {{1, 1}, {1, 1}}, .dims = nhwc()}, 4);
    if (dt == DType::bf16) c.preferred_element_type = DType::f32;
    std::vector<Type> types{Type(dt, l.shape()), Type(dt, r.shape())};
    const Executable exe = compile(trace_function(
                                       [&](const std::vector<Value>& in) -> std::vector<Value> {
                                         return {conv_of(in[0], in[1], c)};
                                       },
                                       types)
                                       .program);
    set_num_threads(1);
    const Array one = exe.run({l, r})[0];
    set_num_threads(3);
    const Array three = exe.run({l, r})[0];
    EXPECT_EQ(0, std::memcmp(one.raw(), three.raw(), one.nbytes())) << dtype_name(dt);
  }
  set_num_threads(before);
}

double inner(const Array& a, const Array& b) {
  double s = 0;
  for (int64_t i = 0; i < a.size(); ++i) s += a.element_as_double(i) * b.element_as_double(i);
  return s;
}

// jvp is bilinear (checked against the reference), vjp its transpose.
TEST(Conv, JvpAndVjpAreTransposes) {
  const Primitive& p = prims::conv_general_dilated();
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const Array l = random_array(k.ls, DType::f64, 1), r = random_array(k.rs, DType::f64, 2);
    const Array tl = random_array(k.ls, DType::f64, 3), tr = random_array(k.rs, DType::f64, 4);
    const Array y0 = ref_conv(l, r, k.c);
    const Array u = random_array(y0.shape(), DType::f64, 5);
    std::vector<double> jv = to_doubles(ref_conv(tl, r, k.c));
    const std::vector<double> j2 = to_doubles(ref_conv(l, tr, k.c));
    for (size_t i = 0; i < jv.size(); ++i) jv[i] += j2[i];
    const Params params = k.c.to_params();
    auto out = run_fn(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          Value y = emit1(p, {in[0], in[1]}, params);
          auto tan = p.jvp({in[0], in[1]}, {in[2], in[3]}, {y}, params);
          auto ct = p.vjp({in[0], in[1]}, {y}, {in[4]}, params);
          return {*tan[0], *ct[0], *ct[1]};
        },
        {l, r, tl, tr, u});
    EXPECT_TRUE(ArrayNear(out[0], jv, 1e-12, 1e-12));
    ASSERT_EQ(out[1].shape(), k.ls);
    ASSERT_EQ(out[2].shape(), k.rs);
    const double lhs = inner(u, f64_array(jv, y0.shape()));
    const double rhs = inner(out[1], tl) + inner(out[2], tr);
    EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::abs(lhs)));
  }
}

// Central differences of a nonlinear loss, and of a directional derivative of its gradient
// (grad of grad), on a few cases covering groups, dilation, reversal and layouts.
TEST(Conv, GradientsAndSecondDerivativesMatchCentralDifferences) {
  for (const Case& k : cases()) {
    if (k.name != "every_attribute" && k.name != "batch_groups" && k.name != "odd_layout" &&
        k.name != "conv1d")
      continue;
    SCOPED_TRACE(k.name);
    const ConvParams c = k.c;
    auto loss = [c](Value l, Value r) {
      Value y = conv_general_dilated(l, r, c);
      return sum(y * y * y);
    };
    const Array l = random_array(k.ls, DType::f64, 11), r = random_array(k.rs, DType::f64, 12);
    auto g = jit(grad(loss, std::vector<int>{0, 1}));
    const std::vector<Array> got = g(l, r);
    const double h = 1e-5;
    auto value = [&](const Array& a, const Array& b) {
      double s = 0;
      for (double v : to_doubles(ref_conv(a, b, c))) s += v * v * v;
      return s;
    };
    auto bump = [](const Array& x, int64_t i, double by) {
      std::vector<double> v = to_doubles(x);
      v[size_t(i)] += by;
      return f64_array(v, x.shape());
    };
    for (int which = 0; which < 2; ++which) {
      const Array& x = which == 0 ? l : r;
      std::vector<double> fd;
      for (int64_t i = 0; i < x.size(); ++i) {
        const Array xp = bump(x, i, h), xm = bump(x, i, -h);
        fd.push_back(which == 0 ? (value(xp, r) - value(xm, r)) / (2 * h)
                                : (value(l, xp) - value(l, xm)) / (2 * h));
      }
      EXPECT_TRUE(ArrayNear(got[size_t(which)], fd, 1e-6, 1e-6)) << "operand " << which;
    }
    // h(l, r) = <dloss/dl, V>; its gradient in r against differences of the first gradient.
    const Array V = random_array(k.ls, DType::f64, 13);
    auto second = [loss](Value l, Value r, Value v) {
      Value gl = grad(loss, 0)(l, r);
      return sum(gl * v);
    };
    const Array g2 = jit(grad(second, 1))(l, r, V);
    std::vector<double> fd2;
    for (int64_t i = 0; i < r.size(); ++i) {
      const Array gp = g(l, bump(r, i, h))[0], gm = g(l, bump(r, i, -h))[0];
      fd2.push_back((inner(gp, V) - inner(gm, V)) / (2 * h));
    }
    EXPECT_TRUE(ArrayNear(g2, fd2, 1e-6, 1e-6));
  }
}

Array slice_row(const Array& x, int64_t b) { return batch_row(x, b); }

TEST(Conv, VmapMatchesALoop) {
  const Primitive& p = prims::conv_general_dilated();
  const int64_t B = 3;
  for (const Case& k : cases()) {
    for (int mode = 0; mode < 3; ++mode) {  // both batched, lhs only, rhs only
      SCOPED_TRACE(k.name + " mode " + std::to_string(mode));
      const bool lb = mode != 2, rb = mode != 1;
      Shape ls = k.ls, rs = k.rs;
      if (lb) ls.insert(ls.begin(), B);
      if (rb) rs.insert(rs.begin(), B);
      const Array l = random_array(ls, DType::f64, 7), r = random_array(rs, DType::f64, 8);
      const Array got = run_fn(
          [&](const std::vector<Value>& in) -> std::vector<Value> {
            auto out = p.vmap({{in[0], lb}, {in[1], rb}}, B, k.c.to_params());
            EXPECT_TRUE(out[0].batched);
            return {out[0].value};
          },
          {l, r})[0];
      std::vector<double> want;
      Shape os;
      for (int64_t i = 0; i < B; ++i) {
        const Array w = ref_conv(lb ? slice_row(l, i) : l, rb ? slice_row(r, i) : r, k.c);
        os = w.shape();
        const std::vector<double> v = to_doubles(w);
        want.insert(want.end(), v.begin(), v.end());
      }
      os.insert(os.begin(), B);
      EXPECT_EQ(got.shape(), os);
      EXPECT_TRUE(ArrayNear(got, want, 1e-12, 1e-12));
    }
  }
}

TEST(Conv, ProgramTextAndStablehloRoundTrips) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const Program p = trace_function(
                          [&](const std::vector<Value>& in) -> std::vector<Value> {
                            return {conv_of(in[0], in[1], k.c)};
                          },
                          {Type(DType::f64, k.ls), Type(DType::f64, k.rs)})
                          .program;
    const std::string text = to_string(p);
    const Program q = parse_program(text);
    EXPECT_EQ(to_string(q), text);
    ASSERT_EQ(q.eqns.size(), p.eqns.size());
    EXPECT_TRUE(q.eqns[0].params == p.eqns[0].params);
    EXPECT_EQ(ConvParams::of(q.eqns[0]).dims, k.c.dims);
    const Array l = random_array(k.ls, DType::f64, 1), r = random_array(k.rs, DType::f64, 2);
    const std::vector<Array> want = run(p, {l, r});
    for (bool generic : {false, true}) {
      StableHloOptions o;
      o.generic = generic;
      const std::string mlir = to_stablehlo(p, Mesh(), o);
      EXPECT_NE(mlir.find("stablehlo.convolution"), std::string::npos);
      EXPECT_TRUE(BitwiseEqual(run(from_stablehlo(mlir), {l, r}), want)) << mlir;
    }
  }
}

// The pretty form StableHLO prints, imported.
TEST(Conv, ImportsThePrettyForm) {
  const std::string text =
      R"(func.func @main(%lhs: tensor<1x4x4x1xf32>, %rhs: tensor<3x3x1x1xf32>) -> tensor<1x2x2x1xf32> {
  %0 = stablehlo.convolution(%lhs, %rhs)
    dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
    window = {stride = [4, 4], pad = [[1, 1], [1, 1]], lhs_dilate = [2, 2], rhs_dilate = [1, 1], reverse = [false, true]}
    {batch_group_count = 1 : i64, feature_group_count = 1 : i64}
    : (tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>) -> tensor<1x2x2x1xf32>
  func.return %0 : tensor<1x2x2x1xf32>
})";
  const Program p = from_stablehlo(text);
  ConvParams c;
  c.window_strides = {4, 4};
  c.padding = {{1, 1}, {1, 1}};
  c.lhs_dilation = {2, 2};
  c.window_reversal = {0, 1};
  c.dims = nhwc();
  c.dims.rhs_in_feature = 2;
  c.dims.rhs_out_feature = 3;
  const Array l = random_array({1, 4, 4, 1}, DType::f32, 1),
              r = random_array({3, 3, 1, 1}, DType::f32, 2);
  const Array want =
      ref_conv(convert_array(l, DType::f64), convert_array(r, DType::f64), full(c, 4));
  EXPECT_TRUE(ArrayNear(run(p, {l, r})[0], to_doubles(want), 1e-6, 1e-6));
}

TEST(Conv, LaxConvWithSameAndValidPadding) {
  EXPECT_EQ(padtype_to_pads({5, 6}, {3, 2}, {2, 1}, "SAME"), (Pads{{1, 1}, {0, 1}}));
  EXPECT_EQ(padtype_to_pads({5, 6}, {3, 2}, {2, 1}, "SAME_LOWER"), (Pads{{1, 1}, {1, 0}}));
  EXPECT_EQ(padtype_to_pads({5, 6}, {3, 2}, {2, 1}, "VALID"), (Pads{{0, 0}, {0, 0}}));
  const Array l = random_array({2, 4, 5, 6}, DType::f64, 1),
              r = random_array({6, 2, 3, 2}, DType::f64, 2);
  const Array y = run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        return {conv(in[0], in[1], {2, 1}, "SAME", 2)};
      },
      {l, r})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 6, 3, 6}));
  ConvParams c;
  c.window_strides = {2, 1};
  c.padding = {{1, 1}, {0, 1}};
  c.feature_group_count = 2;
  EXPECT_TRUE(ArrayNear(y, to_doubles(ref_conv(l, r, full(c, 4))), 1e-13, 1e-13));
}

TEST(Conv, ErrorsNameTheAttributeAndShapes) {
  auto try_conv = [](Shape ls, Shape rs, ConvParams c, DType dt = DType::f32) {
    trace_function(
        [&](const std::vector<Value>& in) -> std::vector<Value> {
          return {conv_general_dilated(in[0], in[1], c)};
        },
        {Type(dt, ls), Type(dt, rs)});
  };
  expect_error(
      [&] {
        try_conv({1, 2, 5, 5}, {3, 2, 3, 3}, {.window_strides = {1}});
      },
      {"conv_general_dilated", "window_strides", "f32[1,2,5,5]", "f32[3,2,3,3]"});
  expect_error(
      [&] {
        try_conv({1, 2, 5, 5}, {3, 2, 3, 3}, {.window_strides = {1, 0}});
      },
      {"window_strides", "must be positive"});
  expect_error(
      [&] {
        try_conv({1, 2, 5, 5}, {3, 2, 3, 3}, {.padding = {{0, 0}}});
      },
      {"padding", "1 entries, expected 2"});
  expect_error(
      [&] {
        try_conv({1, 4, 5, 5}, {3, 2, 3, 3}, {.feature_group_count = 2});
      },
      {"kernel output features 3", "feature_group_count 2"});
  expect_error(
      [&] {
        try_conv({1, 4, 5, 5}, {4, 3, 3, 3}, {.feature_group_count = 2});
      },
      {"kernel input features 3", "input features 4"});
  expect_error(
      [&] {
        try_conv({3, 2, 5, 5}, {4, 2, 3, 3}, {.batch_group_count = 2});
      },
      {"batch 3", "batch_group_count 2"});
  expect_error(
      [&] {
        try_conv({1, 2, 5, 5}, {2, 2, 3, 3}, {.dims = {0, 0, {2, 3}, 0, 1, {2, 3}, 0, 1, {2, 3}}});
      },
      {"dimension numbers", "lhs", "must name each dim"});
  expect_error(
      [&] {
        try_conv({1, 2, 5, 5}, {2, 2, 3, 3}, {.feature_group_count = 2, .batch_group_count = 2});
      },
      {"at most one"});
  expect_error(
      [&] {
        ConvParams c;
        c.preferred_element_type = DType::i32;
        try_conv({1, 2, 5, 5}, {2, 2, 3, 3}, c);
      },
      {"preferred_element_type i32"});
}

}  // namespace
}  // namespace drx::testing
