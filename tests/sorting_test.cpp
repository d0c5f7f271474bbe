// sort, argsort, top_k, argmax, argmin and cumsum: values against plain-loop
// references (ties, NaN, -0.0, integers), gradients against central
// differences, vmap against a loop, compiled against interpreted, and errors.
#include <limits>

#include "drx/exec/executable.h"
#include "transform_checks.h"

namespace drx::testing {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Rows of `shape` along `axis`: for each, the flat offsets of its elements.
std::vector<std::vector<int64_t>> rows_along(const Shape& shape, int64_t axis) {
  int64_t outer = 1, inner = 1, n = shape[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<std::vector<int64_t>> rows;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> r;
      for (int64_t j = 0; j < n; ++j) r.push_back((o * n + j) * inner + i);
      rows.push_back(r);
    }
  return rows;
}

// a strictly before b ascending, NaN after every number.
bool before(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

// Stable insertion sort of positions 0..n-1 by v (descending: by reversed order).
std::vector<int64_t> insertion_argsort(const std::vector<double>& v, bool descending) {
  std::vector<int64_t> p;
  for (int64_t j = 0; j < static_cast<int64_t>(v.size()); ++j) {
    auto pos = p.end();
    // Step left past every element the new one must precede (strictly).
    while (pos != p.begin()) {
      double prev = v[static_cast<size_t>(*(pos - 1))], cur = v[static_cast<size_t>(j)];
      if (descending ? before(prev, cur) : before(cur, prev))
        --pos;
      else
        break;
    }
    p.insert(pos, j);
  }
  return p;
}

struct Sorted {
  std::vector<double> values, indices;
};
Sorted sort_ref(const Array& x, int64_t axis, bool descending) {
  std::vector<double> xv = to_doubles(x);
  Sorted s{std::vector<double>(xv.size()), std::vector<double>(xv.size())};
  for (const auto& r : rows_along(x.shape(), axis)) {
    std::vector<double> row;
    for (int64_t k : r) row.push_back(xv[static_cast<size_t>(k)]);
    std::vector<int64_t> p = insertion_argsort(row, descending);
    for (size_t j = 0; j < r.size(); ++j) {
      s.values[static_cast<size_t>(r[j])] = row[static_cast<size_t>(p[j])];
      s.indices[static_cast<size_t>(r[j])] = static_cast<double>(p[j]);
    }
  }
  return s;
}

// Integers in [0, 4) as f64: many ties.
Array tied_array(const Shape& s, uint64_t seed) {
  Array a = random_array(s, i32, seed, 0, 4);
  std::vector<double> v = to_doubles(a);
  return f64_array(v, s);
}

// Exactly `want`, element by element (NaN matches NaN, infinities themselves).
::testing::AssertionResult SameValues(const Array& got, const std::vector<double>& want) {
  std::vector<double> g = to_doubles(got);
  if (g.size() != want.size()) return ::testing::AssertionFailure() << "size " << g.size();
  for (size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == want[i] || (std::isnan(g[i]) && std::isnan(want[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << got.str();
  return ::testing::AssertionSuccess();
}

// p compiled and p interpreted give the same bits on args.
::testing::AssertionResult CompiledIsInterpreted(const Program& p, const std::vector<Array>& args) {
  return BitwiseEqual(compile(p).run(args), interpret(p, args));
}

// ---- sort and argsort ------------------------------------------------------------

TEST(Sort, StableAgainstInsertionSortOnEveryAxis) {
  Array x = tied_array({3, 5, 4}, 1);
  for (int64_t axis : {0, 1, 2, -1})
    for (bool desc : {false, true}) {
      auto f = [axis, desc](Value v) -> std::vector<Value> {
        return {sort(v, axis, desc), argsort(v, axis, desc)};
      };
      std::vector<Array> got = jit(f)(x);
      Sorted want = sort_ref(x, axis < 0 ? axis + 3 : axis, desc);
      EXPECT_EQ(got[1].dtype(), i32);
      EXPECT_TRUE(ArrayNear(got[0], want.values, 0, 0)) << "axis " << axis << " desc " << desc;
      EXPECT_TRUE(ArrayNear(got[1], want.indices, 0, 0)) << "axis " << axis << " desc " << desc;
    }
}

TEST(Sort, IntegersAndBool) {
  Array x = Array::from_vector<int32_t>({5, -2, 5, 7, -2, 0}, {2, 3});
  auto f = [](Value v) -> std::vector<Value> {
    return {sort(v, 1), argsort(v, 1, true), sort(v, 0, true)};
  };
  std::vector<Array> r = jit(f)(x);
  EXPECT_EQ(r[0].to_vector<int32_t>(), (std::vector<int32_t>{-2, 5, 5, -2, 0, 7}));
  EXPECT_EQ(r[1].to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 1, 0, 2, 1}));
  EXPECT_EQ(r[2].to_vector<int32_t>(), (std::vector<int32_t>{7, -2, 5, 5, -2, 0}));
  Array i64s = Array::from_vector<int64_t>({3, std::numeric_limits<int64_t>::min(), 3}, {3});
  EXPECT_EQ(jit([](Value v) { return argsort(v); })(i64s).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 0, 2}));
  Array b = Array::from_vector<bool>({true, false, true, false}, {4});
  EXPECT_EQ(jit([](Value v) { return argsort(v); })(b).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 3, 0, 2}));
}

TEST(Sort, NaNLastAscendingFirstDescendingAndSignedZerosTie) {
  Array x = f64_array({3, kNaN, 1, kNaN, -0.0, 0.0, -kInf}, {7});
  auto f = [](Value v) -> std::vector<Value> {
    return {sort(v), argsort(v), sort(v, 0, true), argsort(v, 0, true)};
  };
  std::vector<Array> r = jit(f)(x);
  EXPECT_TRUE(SameValues(r[0], {-kInf, 0, 0, 1, 3, kNaN, kNaN}));
  EXPECT_EQ(r[1].to_vector<int32_t>(), (std::vector<int32_t>{6, 4, 5, 2, 0, 1, 3}));
  EXPECT_TRUE(std::signbit(r[0].data<double>()[1]));  // -0.0 stays before 0.0
  EXPECT_EQ(r[3].to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 0, 2, 4, 5, 6}));
  EXPECT_TRUE(SameValues(r[2], {kNaN, kNaN, 3, 1, 0, 0, -kInf}));
  // Descending keeps tied elements in their order too (as jnp's argsort; jnp's
  // sort reverses the ascending result instead, so it gives 0.0 before -0.0).
  EXPECT_TRUE(std::signbit(r[2].data<double>()[4]));
  Sorted want = sort_ref(x, 0, true);
  EXPECT_TRUE(ArrayNear(r[3], want.indices, 0, 0));
}

TEST(Sort, EmptyAndLengthOneAxes) {
  auto f = [](Value v) -> std::vector<Value> { return {sort(v, 1), argsort(v, 0)}; };
  std::vector<Array> r = jit(f)(Array(f64, {0, 3}));
  EXPECT_EQ(r[0].shape(), (Shape{0, 3}));
  std::vector<Array> one = jit(f)(f64_array({2, 1}, {1, 2}));
  EXPECT_TRUE(ArrayNear(one[0], {1, 2}, 0, 0));
  EXPECT_TRUE(ArrayNear(one[1], {0, 0}, 0, 0));
}

// ---- top_k -----------------------------------------------------------------------

TEST(TopK, LargestFirstTiesByLowerIndexAgainstSort) {
  Array x = tied_array({3, 2, 6}, 2);
  for (int64_t k : {0, 1, 4, 6}) {
    auto f = [k](Value v) -> std::vector<Value> {
      TopK t = top_k(v, k);
      return {t.values, t.indices};
    };
    std::vector<Array> r = jit(f)(x);
    ASSERT_EQ(r[0].shape(), (Shape{3, 2, k}));
    EXPECT_EQ(r[1].dtype(), i32);
    Sorted s = sort_ref(x, 2, true);
    std::vector<double> values, indices;
    for (size_t row = 0; row < 6; ++row)
      for (size_t j = 0; j < static_cast<size_t>(k); ++j) {
        values.push_back(s.values[row * 6 + j]);
        indices.push_back(s.indices[row * 6 + j]);
      }
    EXPECT_TRUE(ArrayNear(r[0], values, 0, 0)) << "k " << k;
    EXPECT_TRUE(ArrayNear(r[1], indices, 0, 0)) << "k " << k;
  }
  // By hand: ties lower index first, NaN largest.
  auto f = [](Value v) -> std::vector<Value> {
    TopK t = top_k(v, 3);
    return {t.values, t.indices};
  };
  std::vector<Array> r = jit(f)(f64_array({1, 4, 2, 4, kNaN, 4}, {6}));
  EXPECT_TRUE(ArrayNear(r[0], {kNaN, 4, 4}, 0, 0));
  EXPECT_EQ(r[1].to_vector<int32_t>(), (std::vector<int32_t>{4, 1, 3}));
  std::vector<Array> ri = jit(f)(Array::from_vector<int32_t>({1, 9, 9, -3}, {4}));
  EXPECT_EQ(ri[0].to_vector<int32_t>(), (std::vector<int32_t>{9, 9, 1}));
  EXPECT_EQ(ri[1].to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 0}));
}

// ---- argmax, argmin --------------------------------------------------------------

std::vector<double> arg_ref(const Array& x, int64_t axis, bool max) {
  std::vector<double> xv = to_doubles(x), out;
  for (const auto& r : rows_along(x.shape(), axis)) {
    size_t best = 0;
    for (size_t j = 0; j < r.size(); ++j) {
      double v = xv[static_cast<size_t>(r[j])], b = xv[static_cast<size_t>(r[best])];
      if (std::isnan(v)) {
        best = j;
        break;
      }
      if (max ? v > b : v < b) best = j;
    }
    out.push_back(static_cast<double>(best));
  }
  return out;
}

TEST(ArgMaxMin, FirstOccurrenceOnEveryAxisAndKeepdims) {
  Array x = tied_array({3, 4, 5}, 3);
  for (int64_t axis : {0, 1, 2}) {
    auto f = [axis](Value v) -> std::vector<Value> {
      return {argmax(v, axis), argmin(v, axis), argmax(v, axis - 3, true)};
    };
    std::vector<Array> r = jit(f)(x);
    EXPECT_EQ(r[0].dtype(), i32);
    EXPECT_TRUE(ArrayNear(r[0], arg_ref(x, axis, true), 0, 0)) << axis;
    EXPECT_TRUE(ArrayNear(r[1], arg_ref(x, axis, false), 0, 0)) << axis;
    Shape kept = x.shape();
    kept[static_cast<size_t>(axis)] = 1;
    EXPECT_EQ(r[2].shape(), kept);
    EXPECT_TRUE(ArrayNear(r[2], arg_ref(x, axis, true), 0, 0));
  }
}

TEST(ArgMaxMin, NaNPropagatesAndIntegers) {
  auto f = [](Value v) -> std::vector<Value> { return {argmax(v, 0), argmin(v, 0)}; };
  std::vector<Array> r = jit(f)(f64_array({1, 5, kNaN, 5, kNaN, -1}, {6}));
  EXPECT_EQ(r[0].item<int32_t>(), 2);
  EXPECT_EQ(r[1].item<int32_t>(), 2);
  r = jit(f)(f64_array({1, 5, 5, -1, -1}, {5}));
  EXPECT_EQ(r[0].item<int32_t>(), 1);
  EXPECT_EQ(r[1].item<int32_t>(), 3);
  r = jit(f)(f64_array({-0.0, 0.0, -kInf, kInf}, {4}));
  EXPECT_EQ(r[0].item<int32_t>(), 3);
  EXPECT_EQ(r[1].item<int32_t>(), 2);
  r = jit(f)(Array::from_vector<int64_t>({-7, 3, 3, -7}, {4}));
  EXPECT_EQ(r[0].item<int32_t>(), 1);
  EXPECT_EQ(r[1].item<int32_t>(), 0);
}

// ---- cumsum ----------------------------------------------------------------------

std::vector<double> cumsum_ref(const Array& x, int64_t axis, bool reverse) {
  std::vector<double> xv = to_doubles(x), out(xv.size());
  for (auto r : rows_along(x.shape(), axis)) {
    if (reverse) std::reverse(r.begin(), r.end());
    double acc = 0;
    for (int64_t k : r) out[static_cast<size_t>(k)] = acc += xv[static_cast<size_t>(k)];
  }
  return out;
}

TEST(Cumsum, EveryAxisBothDirectionsF64AndIntegers) {
  Array x = random_array({3, 4, 5}, f64, 4);
  Array xi = random_array({3, 4, 5}, i32, 5, -100, 100);
  for (int64_t axis : {0, 1, 2})
    for (bool rev : {false, true}) {
      auto f = [axis, rev](Value v) { return cumsum(v, axis, rev); };
      EXPECT_TRUE(ArrayNear(jit(f)(x), cumsum_ref(x, axis, rev), 1e-14, 1e-14)) << axis << rev;
      Array yi = jit(f)(xi);
      EXPECT_EQ(yi.dtype(), i32);
      EXPECT_TRUE(ArrayNear(yi, cumsum_ref(xi, axis, rev), 0, 0)) << axis << rev;
    }
  // Integers wrap around.
  Array big = Array::from_vector<int32_t>({std::numeric_limits<int32_t>::max(), 1}, {2});
  EXPECT_EQ(jit([](Value v) { return cumsum(v, 0); })(big).to_vector<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min()}));
}

TEST(Cumsum, LastRunningSumIsBitwiseTheSumReduction) {
  // f32 sums accumulate in double in both, so the last running sum is sum().
  Array x = random_array({4, 1000}, f32, 6, -1e3, 1e3);
  auto f = [](Value v) -> std::vector<Value> {
    return {slice(cumsum(v, 1), {0, 999}, {4, 1000}), sum(v, {1}, true)};
  };
  std::vector<Array> r = jit(f)(x);
  EXPECT_TRUE(r[0].bitwise_equal(r[1]));
}

// ---- derivatives and batching ----------------------------------------------------

std::vector<OpCase> differentiable_cases() {
  std::vector<OpCase> cs;
  cs.push_back(
      {"sort axis 1", [](const std::vector<Value>& a) { return sort(a[0], 1); }, {{3, 5}}});
  cs.push_back({"sort axis 0 descending",
                [](const std::vector<Value>& a) { return sort(a[0], 0, true); },
                {{4, 2, 3}}});
  cs.push_back({"sort 1-D squared",
                [](const std::vector<Value>& a) { return sort(a[0] * a[0]) * a[0]; },
                {{6}}});
  cs.push_back(
      {"top_k", [](const std::vector<Value>& a) { return top_k(a[0], 3).values; }, {{2, 3, 5}}});
  cs.push_back({"top_k of a product",
                [](const std::vector<Value>& a) { return exp(top_k(a[0] * a[1], 2).values); },
                {{4, 4}, {4, 4}}});
  cs.push_back(
      {"cumsum axis 1", [](const std::vector<Value>& a) { return cumsum(a[0], 1); }, {{3, 4, 2}}});
  cs.push_back({"cumsum reverse, nonlinear",
                [](const std::vector<Value>& a) { return tanh(cumsum(a[0] * a[0], 0, true)); },
                {{5, 2}}});
  // The integer positions carry no derivative; what is gathered at them does.
  cs.push_back({"take at argmax",
                [](const std::vector<Value>& a) { return take(a[1], argmax(a[0], 0), 0) * a[0]; },
                {{4}, {4}}});
  return cs;
}

TEST(SortingTransforms, GradientsMatchFiniteDifferencesAndVjpMatchesJvp) {
  for (const OpCase& c : differentiable_cases()) {
    EXPECT_TRUE(GradMatchesFiniteDifferences(c, 11));
    EXPECT_TRUE(VjpMatchesJvp(c, 12));
  }
}

TEST(SortingTransforms, VmapMatchesLoopOnBothEnds) {
  std::vector<OpCase> cs = differentiable_cases();
  cs.push_back(
      {"argsort", [](const std::vector<Value>& a) { return argsort(a[0], 0, true); }, {{5, 2}}});
  cs.push_back({"argmax", [](const std::vector<Value>& a) { return argmax(a[0], 1); }, {{3, 4}}});
  cs.push_back({"argmin keepdims",
                [](const std::vector<Value>& a) { return argmin(a[0], 0, true); },
                {{3, 4}}});
  cs.push_back(
      {"top_k indices", [](const std::vector<Value>& a) { return top_k(a[0], 2).indices; }, {{6}}});
  for (const OpCase& c : cs)
    for (int64_t axis : {0, -1}) EXPECT_TRUE(VmapMatchesLoop(c, 13, axis)) << "axis " << axis;
}

TEST(SortingTransforms, GradientsByHand) {
  // d/dx sum(w * sort(x)) puts w[j] at the position the j-th smallest came from.
  Array x = f64_array({0.5, -1, 2, 0}, {4}), w = f64_array({1, 10, 100, 1000}, {4});
  auto loss = [w](Value v) { return sum(sort(v) * constant(w)); };
  EXPECT_TRUE(ArrayNear(jit(grad(loss))(x), {100, 1, 1000, 10}, 0, 0));
  auto top = [w](Value v) { return sum(top_k(v, 2).values * slice(constant(w), {0}, {2})); };
  EXPECT_TRUE(ArrayNear(jit(grad(top))(x), {10, 0, 1, 0}, 0, 0));
  // Second order through sort: f = sum(sort(x)^3), H v = 6 x v.
  auto cube = [](Value v) {
    Value s = sort(v, 0, true);
    return sum(s * s * s);
  };
  auto hv = [cube, w](Value v) { return sum(grad(cube)(v) * constant(w)); };
  EXPECT_TRUE(ArrayNear(jit(grad(hv))(x), {6 * 0.5 * 1, 6 * -1 * 10, 6 * 2 * 100, 0}, 1e-12));
  // Positions have no derivative: x is used only through an integer result.
  auto through_int = [](Value v) { return sum(astype(argmax(v, 0) + argsort(v), f64)); };
  EXPECT_TRUE(ArrayNear(jit(grad(through_int))(x), {0, 0, 0, 0}, 0, 0));
  // cumsum's vjp is the reverse cumsum of the cotangent.
  auto cs = [w](Value v) { return sum(cumsum(v, 0) * constant(w)); };
  EXPECT_TRUE(ArrayNear(jit(grad(cs))(x), {1111, 1110, 1100, 1000}, 0, 0));
}

TEST(SortingTransforms, PerExampleGradientsThroughSortAndTopK) {
  auto loss = [](Value x) {
    return sum(sort(x, 1, true) * x) + sum(exp(top_k(x, 2).values)) + sum(cumsum(x * x, 0));
  };
  Array xs = random_array({3, 2, 5}, f64, 18);
  Array got = jit(vmap(grad(loss)))(xs);
  auto single = jit(grad(loss));
  for (int64_t b = 0; b < 3; ++b)
    EXPECT_TRUE(ArrayNear(batch_row(got, b), to_doubles(single(batch_row(xs, b))), 1e-15, 0)) << b;
}

TEST(SortingTransforms, SortOfPlacedValuesDifferentiates) {
  // Top-level ops on placed values keep the placement; the derivative rules'
  // flattened gathers work on them unplaced.
  auto f = program({{"clients", 3}},
                   [](Value w, Value xs) {
                     auto loss = [&](Value v) {
                       return reduce_sum(sum(sort(xs * broadcast(v), 1), {1}));
                     };
                     return grad(loss)(w);
                   },
                   {"", "clients"});
  Array w = f64_array({0.5, -2, 1}, {3}), xs = random_array({3, 3}, f64, 14);
  // sum(sort(.)) is the plain sum, so the gradient is sum over clients of xs.
  std::vector<double> want(3, 0.0);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t j = 0; j < 3; ++j) want[static_cast<size_t>(j)] += xs.data<double>()[c * 3 + j];
  EXPECT_TRUE(ArrayNear(jit(f)(w, xs), want, 1e-14, 1e-14));
}

// ---- the compiled executor -------------------------------------------------------

TEST(SortingExec, ArgReduceAndCumsumHaveKernelsBitwiseTheInterpreter) {
  auto f = [](Value x, Value i) -> std::vector<Value> {
    // cumsum(exp(x)) runs in exp(x)'s buffer, which dies there.
    return {argmax(x, 1),           argmin(x, 0), cumsum(x, 2, true),
            neg(cumsum(exp(x), 1)), argmax(i, 2), cumsum(i, 0)};
  };
  Program p = trace(f, {Type(f32, {3, 4, 50}), Type(i64, {3, 4, 50})});
  Executable exe = compile(p);
  EXPECT_EQ(exe.stats().fallbacks, 0u);
  EXPECT_GE(exe.stats().in_place, 1u);
  Array x = random_array({3, 4, 50}, f32, 15);
  x.data<float>()[7] = NAN;
  std::vector<Array> args = {x, random_array({3, 4, 50}, i64, 16, -3, 3)};
  EXPECT_TRUE(CompiledIsInterpreted(p, args));
  Program s = trace(
      [](Value v) -> std::vector<Value> {
        TopK t = top_k(v, 3);
        return {sort(v, 0), argsort(v, 1, true), t.values, t.indices};
      },
      {Type(f64, {5, 6})});
  EXPECT_TRUE(CompiledIsInterpreted(s, {tied_array({5, 6}, 17)}));
}

// ---- errors ----------------------------------------------------------------------

TEST(SortingErrors, NameTheOpTheTypesAndWhatWasExpected) {
  const Type m(f32, {2, 3});
  auto fails = [](const std::function<Value(Value)>& f, const Type& t,
                  const std::vector<std::string>& parts) {
    expect_error([&] { trace(f, {t}); }, parts);
  };
  fails([](Value v) { return sort(v, 2); }, m, {"sort", "axis 2", "rank 2"});
  fails([](Value v) { return argsort(v, -3); }, m, {"argsort", "axis -3"});
  fails([](Value v) { return sort(v); }, Type(f32, {}), {"sort", "f32[]", "scalar"});
  fails([](Value v) { return top_k(v, 4).values; }, m, {"top_k", "k = 4", "f32[2,3]", "k <= 3"});
  fails([](Value v) { return top_k(v, -1).values; }, m, {"top_k", "k = -1"});
  fails([](Value v) { return top_k(v, 1).values; }, Type(f32, {}), {"top_k", "scalar"});
  fails([](Value v) { return argmax(v, 5); }, m, {"argmax", "axis 5"});
  fails([](Value v) { return argmin(v, 1); }, Type(f32, {2, 0}),
        {"argmin", "f32[2,0]", "empty", "non-empty axis"});
  fails([](Value v) { return cumsum(v, 3); }, m, {"cumsum", "axis 3"});
  fails([](Value v) { return cumsum(v, 0); }, Type(bool_, {3}), {"cumsum", "bool[3]", "astype"});
  // Parsed programs reach the primitives' own checks.
  expect_error(
      [] {
        parse_program(
            "program @m (%0: f32[2,3]) -> (f32[2,3], i32[2,3]) {\n"
            "  %1, %2 = sort[axis=2, descending=0] %0 : f32[2,3], i32[2,3]\n"
            "  return %1, %2\n}");
      },
      {"sort", "axis 2", "f32[2,3]", "0 <= axis < 2"});
  expect_error(
      [] {
        parse_program(
            "program @m (%0: f32[3]) -> (f32[3]) {\n"
            "  %1 = cumsum[axis=0] %0 : f32[3]\n  return %1\n}");
      },
      {"cumsum", "reverse"});
}

}  // namespace
}  // namespace drx::testing
