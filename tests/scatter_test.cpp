// scatter (x.at[indices].set(updates)) and the at() sugar: values against
// plain loops (repeated indices: the last update wins), run-time index errors,
// type errors, gradients (only the winning update gets one), every vmap
// batching pattern, the compiled kernel, and per-client server state read
// with take and written back with scatter inside a federated program.
#include "drx/exec/executable.h"
#include "transform_checks.h"

namespace drx::testing {
namespace {

Array i32s(const std::vector<int32_t>& v, Shape s) {
  return Array::from_vector<int32_t>(v, std::move(s));
}

// Reference: x with updates written along `axis` in index order (the last of
// repeated indices wins). Updates: x.shape[:axis] + idx.shape + x.shape[axis+1:].
std::vector<double> scatter_ref(const Array& x, const std::vector<int64_t>& idx, const Array& u,
                                int64_t axis) {
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1, n = s[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  std::vector<double> out = to_doubles(x), uv = to_doubles(u);
  const auto m = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) {
      int64_t i = idx[static_cast<size_t>(j)];
      if (i < 0) i += n;
      for (int64_t k = 0; k < inner; ++k)
        out[static_cast<size_t>((o * n + i) * inner + k)] =
            uv[static_cast<size_t>((o * m + j) * inner + k)];
    }
  return out;
}

std::vector<int64_t> as_i64(const Array& a) {
  std::vector<int64_t> v;
  for (double d : to_doubles(a)) v.push_back(static_cast<int64_t>(d));
  return v;
}

TEST(Scatter, EveryAxisWithRepeatedAndNegativeIndices) {
  Array x = random_array({3, 4, 2}, f64, 1);
  for (int64_t axis : {0, 1, 2}) {
    const auto n = static_cast<int32_t>(x.shape()[static_cast<size_t>(axis)]);
    Array ia = i32s({1, -1, 1, 0, n - 1, -n}, {2, 3});  // 1 repeated; negatives wrap
    Shape us = x.shape();
    us[static_cast<size_t>(axis)] = 2;
    us.insert(us.begin() + axis + 1, 3);
    Array u = random_array(us, f64, 2 + static_cast<uint64_t>(axis));
    auto f = [axis](Value a, Value i, Value v) { return scatter(a, i, v, axis); };
    EXPECT_TRUE(ArrayNear(jit(f)(x, ia, u), scatter_ref(x, as_i64(ia), u, axis), 0, 0))
        << "axis " << axis;
  }
}

TEST(Scatter, LastUpdateWinsI64IndicesIntegerAndBoolData) {
  auto f = jit([](Value x, Value i, Value u) { return scatter(x, i, u); });
  Array y =
      f(f64_array({10, 20, 30, 40}, {4}), i32s({1, 3, 1, -3}, {4}), f64_array({1, 2, 3, 4}, {4}));
  EXPECT_TRUE(ArrayNear(y, {10, 4, 30, 2}, 0, 0));  // index 1 written by 1, 3, then 4 (-3)
  Array yi =
      f(Array::from_vector<int32_t>({1, 2, 3}, {3}), Array::from_vector<int64_t>({2, 2, 0}, {3}),
        Array::from_vector<int32_t>({7, 8, 9}, {3}));
  EXPECT_EQ(yi.to_vector<int32_t>(), (std::vector<int32_t>{9, 2, 8}));
  Array yb = f(Array::from_vector<bool>({false, false, false}, {3}), i32s({2}, {1}),
               Array::from_vector<bool>({true}, {1}));
  EXPECT_EQ(yb.to_vector<bool>(), (std::vector<bool>{false, false, true}));
  // A scalar index writes one row; no indices leave x as it is.
  auto g = jit([](Value x, Value i, Value u) { return scatter(x, i, u, 0); });
  Array x = f64_array({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(
      ArrayNear(g(x, Array::scalar<int32_t>(-1), f64_array({8, 9}, {2})), {1, 2, 8, 9}, 0, 0));
  EXPECT_TRUE(ArrayNear(g(x, i32s({}, {0}), Array(f64, {0, 2})), {1, 2, 3, 4}, 0, 0));
}

TEST(Scatter, AtSugarGetsSetsAndAdds) {
  auto f = [](Value x, Value i, Value u) -> std::vector<Value> {
    return {at(x, i, 1).get(), at(x, i, 1).set(u), at(x, i, 1).add(u)};
  };
  Array x = f64_array({1, 2, 3, 4, 5, 6}, {2, 3});
  std::vector<Array> r = jit(f)(x, i32s({2, 2}, {2}), f64_array({10, 20, 30, 40}, {2, 2}));
  EXPECT_TRUE(ArrayNear(r[0], {3, 3, 6, 6}, 0, 0));
  EXPECT_TRUE(ArrayNear(r[1], {1, 2, 20, 4, 5, 40}, 0, 0));
  EXPECT_TRUE(ArrayNear(r[2], {1, 2, 33, 4, 5, 76}, 0, 0));
}

TEST(Scatter, OutOfRangeIndicesThrowAtRunTimeCompiledAndInterpreted) {
  auto f = [](Value x, Value i, Value u) { return scatter(x, i, u, 1); };
  Program p = trace(f, {Type(f64, {2, 3}), Type(i32, {2}), Type(f64, {2, 2})});
  Array x = random_array({2, 3}, f64, 3), u = random_array({2, 2}, f64, 4);
  for (int32_t i : {3, -4}) {
    Array bad = i32s({0, i}, {2});
    const std::string index = "index " + std::to_string(i);
    expect_error([&] { compile(p).run({x, bad, u}); }, {"scatter", index, "size 3"});
    expect_error([&] { interpret(p, {x, bad, u}); }, {"scatter", index, "size 3"});
  }
  auto vf = jit(vmap([](Value a, Value i, Value v) { return scatter(a, i, v, 0); }, {0, 0, 0}));
  expect_error(
      [&] {
        vf(Array(f64, {2, 3}), i32s({3, 0}, {2, 1}), Array(f64, {2, 1}));
      },
      {"scatter", "out of range"});
}

TEST(Scatter, TypeErrorsNameTheOpTheTypesAndWhatWasExpected) {
  auto f = [](Value x, Value i, Value u) { return scatter(x, i, u, 0); };
  auto fails = [&](const std::vector<Type>& ts, const std::vector<std::string>& parts) {
    expect_error([&] { trace(f, ts); }, parts);
  };
  fails({Type(f32, {4, 2}), Type(i32, {3}), Type(f32, {3, 3})},
        {"scatter", "updates f32[3,3]", "f32[4,2]", "i32[3]", "expected f32[3,2]"});
  fails({Type(f32, {4}), Type(i32, {3}), Type(f64, {3})}, {"scatter", "f64[3]", "expected f32[3]"});
  fails({Type(f32, {4}), Type(f32, {3}), Type(f32, {3})}, {"scatter", "f32[3]", "i32 or i64"});
  fails({Type(f32, {}), Type(i32, {}), Type(f32, {})}, {"scatter", "f32[]", "scalar"});
  auto g = [](Value x, Value i, Value u) { return scatter(x, i, u, 2); };
  expect_error(
      [&] {
        trace(g, {Type(f32, {4, 2}), Type(i32, {1}), Type(f32, {4, 1})});
      },
      {"scatter", "axis 2"});
}

// ---- derivatives ------------------------------------------------------------------

TEST(ScatterTransforms, OnlyTheWinningUpdateGetsAGradient) {
  Array x = random_array({4, 2}, f64, 5), u = random_array({3, 2}, f64, 6);
  Array w = random_array({4, 2}, f64, 7);
  Array idx = i32s({3, 0, -1}, {3});  // row 3 written by update 0, then by update 2
  auto loss = [w](Value a, Value i, Value v) { return sum(scatter(a, i, v, 0) * constant(w)); };
  std::vector<Array> g = jit(grad(loss, std::vector<int>{0, 2}))(x, idx, u);
  std::vector<double> wv = to_doubles(w);
  // x: w where nothing was written (rows 1, 2).
  EXPECT_TRUE(ArrayNear(g[0], {0, 0, wv[2], wv[3], wv[4], wv[5], 0, 0}, 0, 0));
  // updates: w at their rows, for those that landed (not update 0).
  EXPECT_TRUE(ArrayNear(g[1], {0, 0, wv[0], wv[1], wv[6], wv[7]}, 0, 0));
}

std::vector<OpCase> scatter_cases() {
  Array dup = i32s({2, 0, 2, -1}, {2, 2});  // 2 and -1 are the same row of 3
  Array one = Array::scalar<int32_t>(1);
  std::vector<OpCase> cs;
  cs.push_back(
      {"scatter axis 0 repeated",
       [dup](const std::vector<Value>& a) { return scatter(a[0], constant(dup), a[1], 0); },
       {{3, 2}, {2, 2, 2}}});
  cs.push_back({"scatter axis 1, nonlinear",
                [dup](const std::vector<Value>& a) {
                  return exp(scatter(a[0] * a[0], constant(dup), tanh(a[1]), 1));
                },
                {{2, 3}, {2, 2, 2}}});
  cs.push_back(
      {"scatter scalar index",
       [one](const std::vector<Value>& a) { return scatter(a[0], constant(one), a[1], 1); },
       {{2, 3, 2}, {2, 2}}});
  cs.push_back({"read, update, write back",
                [dup](const std::vector<Value>& a) {
                  Value rows = take(a[0], constant(dup), 0);
                  return scatter(a[0], constant(dup), rows * rows + a[1], 0);
                },
                {{3, 2}, {2, 2, 2}}});
  return cs;
}

TEST(ScatterTransforms, GradientsMatchFiniteDifferencesVjpMatchesJvpAndVmapMatchesLoop) {
  for (const OpCase& c : scatter_cases()) {
    EXPECT_TRUE(GradMatchesFiniteDifferences(c, 21));
    EXPECT_TRUE(VjpMatchesJvp(c, 22));
    for (int64_t axis : {0, -1}) EXPECT_TRUE(VmapMatchesLoop(c, 23, axis)) << "axis " << axis;
  }
}

TEST(ScatterTransforms, VmapEveryBatchingPatternWithRepeatedIndices) {
  auto f = [](Value x, Value i, Value u) { return scatter(x, i, u, 1); };
  Array xs = random_array({3, 2, 4}, f64, 8);
  Array is = i32s({0, -1, 3, 1, 1, 2, 2, 0, -2}, {3, 3});
  Array us = random_array({3, 2, 3}, f64, 9);
  for (int mask = 1; mask < 8; ++mask) {
    bool bx = mask & 1, bi = mask & 2, bu = mask & 4;
    Array x = bx ? xs : batch_row(xs, 0), i = bi ? is : batch_row(is, 1),
          u = bu ? us : batch_row(us, 2);
    Axes axes = {bx ? std::optional<int64_t>(0) : std::nullopt,
                 bi ? std::optional<int64_t>(0) : std::nullopt,
                 bu ? std::optional<int64_t>(0) : std::nullopt};
    Array got = jit(vmap(f, axes))(x, i, u);
    ASSERT_EQ(got.shape(), (Shape{3, 2, 4})) << "mask " << mask;
    for (int64_t b = 0; b < 3; ++b) {
      Array xb = bx ? batch_row(x, b) : x, ib = bi ? batch_row(i, b) : i,
            ub = bu ? batch_row(u, b) : u;
      EXPECT_TRUE(ArrayNear(batch_row(got, b), scatter_ref(xb, as_i64(ib), ub, 1), 0, 0))
          << "mask " << mask << " row " << b;
    }
  }
}

TEST(ScatterTransforms, PerExampleGradientsWithBatchedIndices) {
  // vmap of grad: the winning-update mask is itself built from scatters and
  // takes, which batch like any other.
  auto loss = [](Value x, Value i, Value u) { return sum(exp(scatter(x, i, u * u, 0))); };
  auto per_example = jit(vmap(grad(loss, std::vector<int>{0, 2}), {0, 0, 0}));
  Array xs = random_array({3, 4}, f64, 24), us = random_array({3, 3}, f64, 25);
  Array is = i32s({1, 1, 2, 0, 3, 0, -1, 3, 3}, {3, 3});
  std::vector<Array> got = per_example(xs, is, us);
  auto single = jit(grad(loss, std::vector<int>{0, 2}));
  for (int64_t b = 0; b < 3; ++b) {
    std::vector<Array> want = single(batch_row(xs, b), batch_row(is, b), batch_row(us, b));
    EXPECT_TRUE(ArrayNear(batch_row(got[0], b), to_doubles(want[0]), 1e-15, 0)) << b;
    EXPECT_TRUE(ArrayNear(batch_row(got[1], b), to_doubles(want[1]), 1e-15, 0)) << b;
  }
  // Row 0 writes index 1 twice: only its second update has a gradient.
  EXPECT_EQ(got[1].data<double>()[0], 0.0);
  EXPECT_NE(got[1].data<double>()[1], 0.0);
}

// ---- the compiled kernel ---------------------------------------------------------

TEST(ScatterExec, KernelWritesInPlaceBitwiseTheInterpreter) {
  auto f = [](Value x, Value i, Value u) -> std::vector<Value> {
    // exp(x) dies at the first scatter, which then writes into its buffer
    // (an intermediate: program results get buffers of their own).
    return {neg(scatter(exp(x), i, u, 1)), scatter(x, i, u * 2.0, 1)};
  };
  Program p = trace(f, {Type(f32, {3, 5, 2}), Type(i64, {4}), Type(f32, {3, 4, 2})});
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().fallbacks, 0u);
  EXPECT_GE(exe.stats().in_place, 1u);
  Array x = random_array({3, 5, 2}, f32, 10), u = random_array({3, 4, 2}, f32, 11);
  Array idx = Array::from_vector<int64_t>({4, -1, 0, 2}, {4});
  std::vector<Array> got = exe.run({x, idx, u});
  EXPECT_TRUE(BitwiseEqual(got, interpret(p, {x, idx, u})));
  std::vector<float> twice;
  for (float v : u.to_vector<float>()) twice.push_back(v * 2.0f);
  EXPECT_TRUE(
      ArrayNear(got[1], scatter_ref(x, {4, -1, 0, 2}, f32_array(twice, {3, 4, 2}), 1), 0, 0));
  // A bad index leaves the workspace usable, and the inputs untouched.
  Array bad = Array::from_vector<int64_t>({0, 5, 1, 1}, {4});
  expect_error([&] { exe.run({x, bad, u}); }, {"scatter", "index 5", "size 5"});
  EXPECT_TRUE(BitwiseEqual(exe.run({x, idx, u}), got));
  EXPECT_TRUE(x.bitwise_equal(random_array({3, 5, 2}, f32, 10)));
}

// ---- per-client state on the server ---------------------------------------------

// SCAFFOLD-style control variates: the server holds one row per client
// (state [N, d]); each round, the cohort's rows are read with take, handed to
// the clients, updated there, and written back with scatter.
constexpr int64_t kN = 7, kCohort = 3, kDim = 4, kExamples = 5;

Value client_update(Value w, Value c, Value x) {
  // A local gradient-like step that depends on the client's own state row.
  Value g = mean(x, {0}) * tanh(w) - c;
  return c + 0.5 * g;
}

auto state_round() {
  return program({{"clients", kCohort}},
                 [](Value w, Value state, Value cohort, Value xs) -> std::vector<Value> {
                   Value rows = place(take(state, cohort, 0), "clients");  // [k, d]@clients
                   Value updated = map_fn(client_update, broadcast(w), rows, xs);
                   Value new_state = scatter(state, cohort, place(updated, ""), 0);
                   return {new_state, w - reduce_mean(updated)};
                 },
                 {"", "", "", "clients"});
}

TEST(ScatterProgram, PerClientServerStateReadWithTakeWrittenWithScatter) {
  Array w = random_array({kDim}, f64, 12), state = random_array({kN, kDim}, f64, 13);
  Array xs = random_array({kCohort, kExamples, kDim}, f64, 14);
  Array cohort = i32s({5, 0, 3}, {kCohort});
  std::vector<Array> got = jit(state_round())(w, state, cohort, xs);

  // The same round as a plain loop over the cohort.
  std::vector<double> want_state = to_doubles(state), mean_new(kDim, 0.0);
  for (int64_t j = 0; j < kCohort; ++j) {
    const int64_t row = cohort.data<int32_t>()[j];
    for (int64_t d = 0; d < kDim; ++d) {
      double m = 0;
      for (int64_t e = 0; e < kExamples; ++e)
        m += xs.data<double>()[(j * kExamples + e) * kDim + d];
      m /= kExamples;
      const double c = state.data<double>()[row * kDim + d];
      const double next = c + 0.5 * (m * std::tanh(w.data<double>()[d]) - c);
      want_state[static_cast<size_t>(row * kDim + d)] = next;
      mean_new[static_cast<size_t>(d)] += next / kCohort;
    }
  }
  std::vector<double> want_w;
  for (int64_t d = 0; d < kDim; ++d)
    want_w.push_back(w.data<double>()[d] - mean_new[static_cast<size_t>(d)]);
  EXPECT_TRUE(ArrayNear(got[0], want_state, 1e-14, 1e-14));
  EXPECT_TRUE(ArrayNear(got[1], want_w, 1e-14, 1e-14));

  // Compiled equals interpreted, with the scatter on its kernel.
  Program p = trace(state_round(), {Type(f64, {kDim}), Type(f64, {kN, kDim}), Type(i32, {kCohort}),
                                    Type(f64, {kCohort, kExamples, kDim})});
  EXPECT_TRUE(
      BitwiseEqual(compile(p).run({w, state, cohort, xs}), interpret(p, {w, state, cohort, xs})));

  // And it differentiates: d/dw of the new state against central differences.
  auto loss = [](Value wv, Value s, Value c, Value x) {
    std::vector<Value> r = state_round()(wv, s, c, x);
    return sum(r[0] * r[0]) + sum(r[1]);
  };
  Array g = jit(grad(loss))(w, state, cohort, xs);
  auto lj = jit(loss);
  auto shifted = [&](int64_t d, double h) {
    std::vector<double> v = to_doubles(w);
    v[static_cast<size_t>(d)] += h;
    return lj(f64_array(v, {kDim}), state, cohort, xs).item<double>();
  };
  for (int64_t d = 0; d < kDim; ++d) {
    const double fd = (shifted(d, 1e-6) - shifted(d, -1e-6)) / 2e-6;
    EXPECT_NEAR(g.data<double>()[d], fd, 1e-7 * std::max(1.0, std::abs(fd))) << d;
  }
}

}  // namespace
}  // namespace drx::testing
