// bf16 products with f32 accumulation (drx/exec/kernels_dot_bf16.cpp, through
// oneDNN or drx's own loops): against float64 references within the bound of
// f32 accumulation, compiled against interpreted, bitwise across threads and
// devices, their derivatives, and their StableHLO form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "drx/array/half.h"
#include "drx/drx.h"
#include "drx/exec/onednn.h"
#include "drx/export/stablehlo.h"
#include "drx/stablehlo/import.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

// Uniform in [-1, 1) rounded to bf16; no denormals (the bf16 units flush them).
Array bf16_random(const Shape& shape, uint64_t seed) {
  return random_array(shape, DType::bf16, seed, -1.0, 1.0);
}

// C = op(A) op(B) in float64 from the exact bf16 values, and the bound on an
// f32-accumulated result: K u sum|a b| (u = 2^-24), plus one bf16 rounding
// (2^-8 |c|) where the result is bf16.
struct Reference {
  std::vector<double> c, bound;
};

Reference reference(const Array& a, const Array& b, bool trans_a, bool trans_b, DType out) {
  const int64_t m = a.shape()[trans_a ? 1 : 0], k = a.shape()[trans_a ? 0 : 1];
  const int64_t n = b.shape()[trans_b ? 0 : 1];
  Reference r;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double x = a.element_as_double(trans_a ? q * m + i : i * k + q);
        const double y = b.element_as_double(trans_b ? j * k + q : q * n + j);
        sum += x * y;
        abs_sum += std::abs(x * y);
      }
      double bound = static_cast<double>(k) * std::ldexp(1.0, -24) * abs_sum;
      if (out == DType::bf16) bound += std::ldexp(std::abs(sum) + bound, -8);
      r.c.push_back(sum);
      r.bound.push_back(bound + 1e-30);
    }
  return r;
}

::testing::AssertionResult WithinBound(const Array& got, const Reference& want) {
  if (got.size() != static_cast<int64_t>(want.c.size()))
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.c.size();
  for (int64_t i = 0; i < got.size(); ++i) {
    const double g = got.element_as_double(i), w = want.c[static_cast<size_t>(i)];
    if (!(std::abs(g - w) <= want.bound[static_cast<size_t>(i)]))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << g << " vs " << w << " (bound "
             << want.bound[static_cast<size_t>(i)] << ")";
  }
  return ::testing::AssertionSuccess();
}

DotDims dims_for(bool trans_a, bool trans_b, DType out) {
  DotDims d{{trans_a ? 0 : 1}, {trans_b ? 1 : 0}, {}, {}};
  if (out == DType::f32) d.preferred_element_type = DType::f32;
  return d;
}

TEST(ExecBf16, FloatToBf16RoundsAsFromDouble) {
  // Every sign and exponent with a spread of mantissas, each bf16 tie and its
  // neighbours, infinities and NaNs.
  std::vector<uint32_t> bits;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65521) bits.push_back(static_cast<uint32_t>(u));
  for (uint32_t top = 0; top <= 0xffffu; top += 7)
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x0u, 0xffffu})
      bits.push_back((top << 16) | low);
  for (uint32_t special :
       {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f7fffffu, 0x00000001u, 0x807fffffu})
    bits.push_back(special);
  for (uint32_t u : bits) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    ASSERT_EQ(float_to_bf16(f), half_from_double(DType::bf16, static_cast<double>(f)))
        << std::hex << u;
  }
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const double want = half_to_double(DType::bf16, static_cast<uint16_t>(h));
    const float got = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got));
    else
      EXPECT_EQ(static_cast<double>(got), want);
  }
}

TEST(ExecBf16, ProductsAreWithinTheBoundOfF32Accumulation) {
  struct Case {
    int64_t m, k, n;
  };
  // Several row blocks and a tail, a long contraction, one column.
  for (const Case& c : {Case{300, 64, 96}, Case{5, 1000, 7}, Case{128, 33, 1}})
    for (bool trans_a : {false, true})
      for (bool trans_b : {false, true})
        for (DType out : {DType::f32, DType::bf16}) {
          SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) +
                       (trans_a ? " A^T" : "") + (trans_b ? " B^T" : "") + " -> " +
                       std::string(dtype_name(out)));
          const Array a = bf16_random(trans_a ? Shape{c.k, c.m} : Shape{c.m, c.k}, 1);
          const Array b = bf16_random(trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n}, 2);
          const DotDims d = dims_for(trans_a, trans_b, out);
          auto f = [d](Value x, Value y) { return dot_general(x, y, d); };
          const Program p = trace(f, {Type(DType::bf16, a.shape()), Type(DType::bf16, b.shape())});
          const Executable exe = compile(p);
          EXPECT_EQ(exe.stats().fallbacks, 0u) << "the product ran on the reference loop";
          const Array compiled = exe.run({a, b})[0];
          const Array interpreted = interpret(p, {a, b})[0];
          EXPECT_EQ(compiled.dtype(), out);
          const Reference ref = reference(a, b, trans_a, trans_b, out);
          EXPECT_TRUE(WithinBound(compiled, ref));
          EXPECT_TRUE(WithinBound(interpreted, ref));
        }
}

TEST(ExecBf16, TransposedProductsAreOneProduct) {
  // transpose(x^T y) as reverse mode writes weight gradients: one product into the transposed
  // result (the product's own equation is absorbed), bf16 and f32 results.
  const Array x = bf16_random({300, 40}, 7), y = bf16_random({300, 24}, 8);
  for (DType out : {DType::f32, DType::bf16}) {
    const DotDims d = {
        {0}, {0}, {}, {}, out == DType::f32 ? std::optional(DType::f32) : std::nullopt};
    auto f = [d](Value a, Value b) { return transpose(dot_general(a, b, d), {1, 0}); };
    const Program p = trace(f, {Type(DType::bf16, x.shape()), Type(DType::bf16, y.shape())});
    const Executable exe = compile(p);
    EXPECT_EQ(exe.stats().dropped, 1u) << "the product was not folded into its transpose";
    const Array got = exe.run({x, y})[0];
    ASSERT_EQ(got.shape(), (Shape{24, 40}));
    EXPECT_TRUE(WithinBound(got, reference(y, x, true, false, out)));
  }
}

TEST(ExecBf16, BatchedProductsMatchTheirBatches) {
  const Array a = bf16_random({3, 150, 40}, 5), b = bf16_random({3, 40, 20}, 6);
  auto f = [](Value x, Value y) { return matmul(x, y, DType::f32); };
  const Array c = jit(f)(a, b);
  ASSERT_EQ(c.shape(), (Shape{3, 150, 20}));
  for (int64_t i = 0; i < 3; ++i) {
    const Array ai = jit([i](Value x) {
      return squeeze(slice(x, {i, 0, 0}, {i + 1, 150, 40}), {0});
    })(a);
    const Array bi = jit([i](Value x) {
      return squeeze(slice(x, {i, 0, 0}, {i + 1, 40, 20}), {0});
    })(b);
    const Reference ref = reference(ai, bi, false, false, DType::f32);
    const Array ci = jit([i](Value x) {
      return squeeze(slice(x, {i, 0, 0}, {i + 1, 150, 20}), {0});
    })(c);
    EXPECT_TRUE(WithinBound(ci, ref)) << "batch " << i;
  }
}

// The reference plus an f32 bias row, with one more f32 rounding in the bound.
Reference with_bias(Reference r, const Array& bias) {
  const int64_t n = bias.size();
  for (size_t i = 0; i < r.c.size(); ++i) {
    r.c[i] += bias.element_as_double(static_cast<int64_t>(i) % n);
    r.bound[i] += std::ldexp(std::abs(r.c[i]) + r.bound[i], -24);
  }
  return r;
}

// A bias add on a bf16 product's f32 result is part of the product (oneDNN adds it as it
// writes): one kernel, within the bound.
TEST(ExecBf16, BiasAddsFoldIntoTheProduct) {
  const Array x = bf16_random({300, 48}, 31), w = bf16_random({48, 40}, 32);
  const Array bias = random_array({40}, DType::f32, 33, -1, 1);
  const Program p = simplify(trace(
      [](Value a, Value b, Value c) {
        return matmul(a, b, DType::f32) + broadcast_in_dim(c, {300, 40}, {1});
      },
      {Type(DType::bf16, x.shape()), Type(DType::bf16, w.shape()), Type(DType::f32, {40})}));
  const Executable exe = compile(p);
  EXPECT_EQ(exe.stats().kernels, 1u);
  const Reference ref = with_bias(reference(x, w, false, false, DType::f32), bias);
  EXPECT_TRUE(WithinBound(exe.run({x, w, bias})[0], ref));
  EXPECT_TRUE(WithinBound(interpret(p, {x, w, bias})[0], ref));
  // Rounded to bf16 for the next product (a layer's q, k and v): one product writing bf16.
  const Program q = simplify(trace(
      [](Value a, Value b, Value c) {
        return astype(matmul(a, b, DType::f32) + broadcast_in_dim(c, {300, 40}, {1}), DType::bf16);
      },
      {Type(DType::bf16, x.shape()), Type(DType::bf16, w.shape()), Type(DType::f32, {40})}));
  const Executable rounded = compile(q);
  EXPECT_EQ(rounded.stats().kernels, 1u);
  Reference ref16 = ref;
  for (size_t i = 0; i < ref16.c.size(); ++i)
    ref16.bound[i] += std::ldexp(std::abs(ref16.c[i]) + ref16.bound[i], -8);
  EXPECT_TRUE(WithinBound(rounded.run({x, w, bias})[0], ref16));
  EXPECT_TRUE(WithinBound(interpret(q, {x, w, bias})[0], ref16));
}

// In a client's body a batch of products (attention's, per head) is one call, and a biased
// product one call: each client's results within the bound, bitwise on 1-3 devices.
TEST(ExecBf16, ClientBatchesAndBiasesAreOneCallEach) {
  constexpr int64_t kClients = 5;
  auto round = program(
      {{"clients", kClients}},
      [](Value w, Value bias, Value xs, Value ys) -> std::vector<Value> {
        return map_fn(
            [](Value wi, Value bi, Value xi, Value yi) -> std::vector<Value> {
              Value biased = matmul(xi, wi, DType::f32) + broadcast_in_dim(bi, {70, 24}, {1});
              DotDims batched{{2}, {1}, {0}, {0}};
              batched.preferred_element_type = DType::f32;
              return {biased, dot_general(yi, yi, batched)};
            },
            broadcast(w), broadcast(bias), xs, ys);
      },
      {"", "", "clients", "clients"});
  const Array w = bf16_random({32, 24}, 41), bias = random_array({24}, DType::f32, 42, -1, 1);
  const Array xs = bf16_random({kClients, 70, 32}, 43), ys = bf16_random({kClients, 6, 9, 9}, 44);
  const Program p = trace(round, {Type(DType::bf16, w.shape()), Type(DType::f32, bias.shape()),
                                  Type(DType::bf16, xs.shape()), Type(DType::bf16, ys.shape())});
  const std::vector<Array> one = compile(p, Mesh({{"clients", 1}})).run({w, bias, xs, ys});
  for (int64_t c = 0; c < kClients; ++c) {
    const Array xc = jit([c](Value v) {
      return squeeze(slice(v, {c, 0, 0}, {c + 1, 70, 32}), {0});
    })(xs);
    const Array got = jit([c](Value v) {
      return squeeze(slice(v, {c, 0, 0}, {c + 1, 70, 24}), {0});
    })(one[0]);
    EXPECT_TRUE(WithinBound(got, with_bias(reference(xc, w, false, false, DType::f32), bias)))
        << "client " << c;
    for (int64_t h = 0; h < 6; ++h) {
      const Array yh = jit([c, h](Value v) {
        return reshape(slice(v, {c, h, 0, 0}, {c + 1, h + 1, 9, 9}), {9, 9});
      })(ys);
      const Array gh = jit([c, h](Value v) {
        return reshape(slice(v, {c, h, 0, 0}, {c + 1, h + 1, 9, 9}), {9, 9});
      })(one[1]);
      EXPECT_TRUE(WithinBound(gh, reference(yh, yh, false, false, DType::f32)))
          << "client " << c << " product " << h;
    }
  }
  for (int devices : {2, 3})
    EXPECT_TRUE(BitwiseEqual(compile(p, Mesh({{"clients", devices}})).run({w, bias, xs, ys}), one))
        << devices << " devices";
}

TEST(ExecBf16, ProductsAreBitwiseTheSameUnderAnyThreadCount) {
  const Array a = bf16_random({700, 96}, 11), b = bf16_random({96, 130}, 12);
  auto f = [](Value x, Value y) {
    return std::vector<Value>{matmul(x, y, DType::f32), matmul(x, y)};
  };
  const int saved = num_threads();
  std::vector<Array> want;
  for (int threads : {1, 2, 3, 5}) {
    set_num_threads(threads);
    std::vector<Array> got = jit(f)(a, b);
    if (want.empty()) want = got;
    EXPECT_TRUE(BitwiseEqual(got, want)) << threads << " threads";
  }
  set_num_threads(saved);
}

TEST(ExecBf16, ClientProductsAreBitwiseTheSameOnOneToFourDevices) {
  // Each client multiplies its own rows by the broadcast weights, in bf16 with
  // f32 results and in bf16 throughout; sums and means over 7 clients.
  auto round =
      program({{"clients", 7}},
              [](Value w, Value xs) -> std::vector<Value> {
                std::vector<Value> r = map_fn(
                    [](Value wi, Value xi) -> std::vector<Value> {
                      return {matmul(xi, wi, DType::f32), astype(matmul(xi, wi), DType::f32)};
                    },
                    broadcast(w), xs);
                return {reduce_sum(r[0]), reduce_mean(r[1])};
              },
              {"", "clients"});
  const Array w = bf16_random({64, 32}, 21), xs = bf16_random({7, 200, 64}, 22);
  const Program p = trace(round, {Type(DType::bf16, w.shape()), Type(DType::bf16, xs.shape())});
  const std::vector<Array> one = compile(p, Mesh({{"clients", 1}})).run({w, xs});
  const std::vector<Array> interpreted = interpret(p, {w, xs});
  // Sums of 7 clients' products (bf16 results in the second): within a few bf16 roundings.
  for (size_t k = 0; k < one.size(); ++k)
    for (int64_t i = 0; i < one[k].size(); ++i) {
      const double g = one[k].element_as_double(i), want = interpreted[k].element_as_double(i);
      ASSERT_LE(std::abs(g - want), 0.02 * (1 + std::abs(want))) << "output " << k << " at " << i;
    }
  for (int devices : {2, 3, 4})
    EXPECT_TRUE(BitwiseEqual(compile(p, Mesh({{"clients", devices}})).run({w, xs}), one))
        << devices << " devices";
}

TEST(ExecBf16, GradientsOfBf16ProductsFollowTheFloat64Rule) {
  // loss = sum(w * (x @ y)) with an f32 product of bf16 operands: d/dx = (w @ y^T)
  // rounded once to bf16, as the cotangent w (f32) meets y as a bf16 product.
  // Here w is a bf16 value, so the rule's result is the f64 product rounded.
  const Array x = bf16_random({150, 48}, 31), y = bf16_random({48, 24}, 32);
  const Array w = convert_array(bf16_random({150, 24}, 33), DType::f32);
  auto loss = [](Value xv, Value yv, Value wv) { return sum(wv * matmul(xv, yv, DType::f32)); };
  auto g = grad(loss, {0, 1});
  const Program p = trace(
      [&](Value xv, Value yv, Value wv) { return g(xv, yv, wv); },
      {Type(DType::bf16, x.shape()), Type(DType::bf16, y.shape()), Type(DType::f32, w.shape())});
  const std::vector<Array> compiled = compile(p).run({x, y, w});
  const std::vector<Array> interpreted = interpret(p, {x, y, w});
  ASSERT_EQ(compiled[0].dtype(), DType::bf16);
  ASSERT_EQ(compiled[1].dtype(), DType::bf16);
  const Array wb = convert_array(w, DType::bf16);
  // d/dx = w y^T, d/dy = x^T w: both bf16 products of exact bf16 values.
  const Reference dx = reference(wb, y, false, true, DType::bf16);
  const Reference dy = reference(x, wb, true, false, DType::bf16);
  EXPECT_TRUE(WithinBound(compiled[0], dx));
  EXPECT_TRUE(WithinBound(interpreted[0], dx));
  EXPECT_TRUE(WithinBound(compiled[1], dy));
  EXPECT_TRUE(WithinBound(interpreted[1], dy));
}

TEST(ExecBf16, ForwardDerivativesAndBatchingKeepThePreferredType) {
  const Array x = bf16_random({6, 5}, 41), y = bf16_random({5, 4}, 42);
  const Array tx = bf16_random({6, 5}, 43);
  auto f = [](Value a, Value b) { return matmul(a, b, DType::f32); };
  // jvp in x: the tangent's product, in f32, against f64.
  auto tangent = [&](Value a, Value b, Value t) {
    return jvp(f, {Tree(a), Tree(b)}, {Tree(t), Tree(zeros_like(b))}).second;
  };
  const Array t = jit(tangent)(x, y, tx);
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_TRUE(WithinBound(t, reference(tx, y, false, false, DType::f32)));
  // vmap over a leading axis: each row's product.
  const Array xs = bf16_random({3, 6, 5}, 44);
  const Array batched = jit(vmap(f, {0, std::nullopt}))(xs, y);
  EXPECT_EQ(batched.dtype(), DType::f32);
  EXPECT_EQ(batched.shape(), (Shape{3, 6, 4}));
  const Array looped = jit([](Value a, Value b) { return matmul(a, b, DType::f32); })(xs, y);
  EXPECT_TRUE(BitwiseEqual({batched}, {looped}));
}

TEST(ExecBf16, PreferredTypeIsCheckedAndNamed) {
  auto f = [](Value a, Value b) { return matmul(a, b, DType::f64); };
  expect_error(
      [&] {
        trace(f, {Type(DType::f32, {2, 3}), Type(DType::f32, {3, 4})});
      },
      {"dot_general", "preferred_element_type f64", "f32 operands",
       "expected f32 from bf16 or f16 operands"});
}

TEST(ExecBf16, StableHloProductsWithF32AccumulationImportAndExport) {
  // bf16 operands with an f32 result, and f32 operands under JAX's bf16 algorithm.
  const std::string text = R"(
func.func public @main(%a: tensor<3x8xbf16>, %b: tensor<8x2xbf16>, %c: tensor<3x8xf32>, %d: tensor<8x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<3x8xbf16>, tensor<8x2xbf16>) -> tensor<3x2xf32>
  %1 = stablehlo.dot_general %c, %d, contracting_dims = [1] x [0], algorithm = <lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32, lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, allow_imprecise_accumulation = false> : (tensor<3x8xf32>, tensor<8x2xf32>) -> tensor<3x2xf32>
  return %0, %1 : tensor<3x2xf32>, tensor<3x2xf32>
})";
  const Program p = from_stablehlo(text);
  const std::string printed = to_string(p);
  EXPECT_NE(printed.find("preferred_element_type"), std::string::npos) << printed;
  const Array a = bf16_random({3, 8}, 51), b = bf16_random({8, 2}, 52);
  const Array c = random_array({3, 8}, DType::f32, 53), d = random_array({8, 2}, DType::f32, 54);
  const std::vector<Array> got = compile(p).run({a, b, c, d});
  EXPECT_TRUE(WithinBound(got[0], reference(a, b, false, false, DType::f32)));
  // The algorithm rounds the f32 operands to bf16 first.
  const Array cb = convert_array(c, DType::bf16), db = convert_array(d, DType::bf16);
  EXPECT_TRUE(WithinBound(got[1], reference(cb, db, false, false, DType::f32)));
  // Exported, the products state their algorithm, and the module imports back to the same bits.
  const std::string exported = to_stablehlo(p);
  EXPECT_NE(exported.find("accumulation_type = f32"), std::string::npos) << exported;
  EXPECT_TRUE(BitwiseEqual(compile(from_stablehlo(exported)).run({a, b, c, d}), got));
  // An algorithm drx does not run is refused by name.
  std::string bad = text;
  bad.replace(bad.find("accumulation_type = f32"), 23, "accumulation_type = bf16");
  expect_error([&] { from_stablehlo(bad); }, {"algorithm", "bf16 x bf16", "bf16 accumulation"});
}

// Every elementwise arithmetic primitive on bf16, compiled: bitwise the
// interpreter (computed in f32, rounded once), on operands read in full and as
// broadcast scalars, over a size that is not a multiple of the kernels' blocks.
TEST(ExecBf16, EveryElementwiseOpIsBitwiseTheInterpreter) {
  const Shape shape{3, 347};
  const Array positive = random_array(shape, DType::bf16, 61, 0.05, 4.0);
  const Array mixed = random_array(shape, DType::bf16, 62, -6.0, 6.0);
  const Array scalar = random_array({}, DType::bf16, 63, 0.5, 2.0);
  int checked = 0;
  for (const Primitive* prim : registered_primitives()) {
    const ScalarKernel* k = prim->scalar_kernel();
    if (!k || k->predicate() || !k->covers(DType::f32)) continue;
    SCOPED_TRACE(prim->name());
    for (const Array* x : {&positive, &mixed}) {
      Program p;
      try {
        if (k->arity() == 1) {
          p = trace([&](Value a) { return emit1(*prim, {a}); }, {Type(DType::bf16, shape)});
        } else {
          p = trace(
              [&](Value a, Value b, Value c) {
                Value s = broadcast_to(c, shape);
                return std::vector<Value>{emit1(*prim, {a, b}), emit1(*prim, {a, s}),
                                          emit1(*prim, {s, b})};
              },
              {Type(DType::bf16, shape), Type(DType::bf16, shape), Type(DType::bf16, {})});
        }
      } catch (const Error&) {
        continue;  // takes parameters or other dtypes
      }
      std::vector<Array> args{*x};
      if (k->arity() == 2) args = {*x, x == &positive ? mixed : positive, scalar};
      const Executable exe = compile(p);
      EXPECT_EQ(exe.stats().fallbacks, 0u);
      EXPECT_TRUE(BitwiseEqual(exe.run(args), interpret(p, args)));
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
}

TEST(ExecBf16, FusedChainsAndDataMovementAreBitwiseTheInterpreter) {
  // A GELU-like chain with a residual, a transpose and slices, and conversions from
  // and to f32 on either side: rounded to bf16 after every op, as the interpreter.
  auto f = [](Value x, Value r, Value h) {
    Value y = 0.5f * x * (1.0f + tanh(0.7978846f * (x + 0.044715f * x * x * x)));
    Value z = transpose(y + r, {1, 0});
    Value parts = concatenate({slice(z, {0, 0}, {100, 3}), slice(z, {200, 0}, {300, 3})}, 0);
    Value wide = astype(parts, DType::f32) * 3.0f;
    Value back = astype(wide + astype(h, DType::f32), DType::bf16);
    return std::vector<Value>{where(greater(back, zeros_like(back)), back, -back), wide};
  };
  const Program p = trace(
      f, {Type(DType::bf16, {3, 300}), Type(DType::bf16, {3, 300}), Type(DType::bf16, {200, 3})});
  const std::vector<Array> args{random_array({3, 300}, DType::bf16, 71, -3, 3),
                                random_array({3, 300}, DType::bf16, 72, -1, 1),
                                random_array({200, 3}, DType::bf16, 73, -1, 1)};
  const Executable exe = compile(simplify(p));
  EXPECT_GT(exe.stats().fused, 3u) << "the chain was not fused";
  EXPECT_TRUE(BitwiseEqual(exe.run(args), interpret(p, args)));
  // Only the comparison (a predicate on bf16) runs on the reference loop.
  EXPECT_LE(exe.stats().fallbacks, 1u);
}

TEST(ExecBf16, TheKernelIsNamed) {
  const std::string fp = exec::onednn::kernel_fingerprint();
  if (exec::onednn::available()) {
    EXPECT_EQ(fp.rfind("onednn 2.", 0), 0u) << fp;
    EXPECT_NE(exec::onednn::isa(), "none");
    const exec::onednn::Matmul mm(
        exec::onednn::MatmulShape::rows_of(4, 3, 2, false, false, 4, DType::f32));
    EXPECT_FALSE(mm.implementation().empty());
    std::printf("[ bf16     ] oneDNN %s, ISA %s, a 4x2x3 product runs on %s\n",
                exec::onednn::version().c_str(), exec::onednn::isa().c_str(),
                mm.implementation().c_str());
  } else {
    EXPECT_EQ(fp, "drx loops");
    std::printf("[ bf16     ] built without oneDNN: bf16 products run on drx's own loops\n");
  }
}

}  // namespace
}  // namespace drx::testing
