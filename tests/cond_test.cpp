// cond: the chosen branch's values (hand-computed), only that branch runs (a
// branch that would fail is never evaluated), captured values, errors,
// derivatives against central finite differences in float64 (first and
// second order, through captures), vmap against a loop with batched and
// unbatched predicates, and cond inside map_fn bodies, compiled and interpreted.
#include "tests/test_util.h"

namespace drx::testing {
namespace {

Type f64t(Shape s) { return Type(DType::f64, std::move(s)); }

Value positive(const Value& x) { return greater(sum(x), scalar_like(x, 0.0)); }

// sum(x^2) * c if sum(x) > 0, else sum(sin(x)) - c.
Value branchy(Value x, Value c) {
  return cond(
             positive(x), [&](const Tree& t) { return Tree(sum(square(t.value())) * c); },
             [&](const Tree& t) { return Tree(sum(sin(t.value())) - c); }, Tree(x))
      .value();
}

double branchy_ref(const std::vector<double>& x, double c) {
  double s = 0, sq = 0, sn = 0;
  for (double v : x) s += v, sq += v * v, sn += std::sin(v);
  return s > 0 ? sq * c : sn - c;
}

TEST(Cond, ChoosesTheBranchByThePredicate) {
  auto f = jit(branchy);
  for (const std::vector<double>& x :
       {std::vector<double>{0.5, 1.0, -0.2}, std::vector<double>{-0.5, 0.1, -0.2}}) {
    Array xs = f64_array(x, {3}), c = Array::scalar(1.5);
    EXPECT_NEAR(f(xs, c).item<double>(), branchy_ref(x, 1.5), 1e-12);
    Program p = trace(branchy, {f64t({3}), f64t({})});
    EXPECT_NEAR(run(p, {xs, c})[0].item<double>(), branchy_ref(x, 1.5), 1e-12);
  }
}

TEST(Cond, OnlyTheChosenBranchRuns) {
  // The false branch gathers index 7 of a 3-element vector: an error if it ran.
  auto f = [](Value x, Value pick) {
    return cond(
               pick, [](const Tree& t) { return Tree(t.value() * 2.0); },
               [](const Tree& t) {
                 return Tree(
                     take(t.value(), constant(Array::from_vector<int32_t>({7, 7, 7}, {3})), 0));
               },
               Tree(x))
        .value();
  };
  Array x = f64_array({1, 2, 3}, {3});
  Program p = trace(f, {f64t({3}), Type(DType::bool_, {})});
  Array yes = Array::from_vector<bool>({true}, {}), no = Array::from_vector<bool>({false}, {});
  auto jf = jit(f);
  EXPECT_EQ(jf(x, yes).to_vector<double>(), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(run(p, {x, yes})[0].to_vector<double>(), (std::vector<double>{2, 4, 6}));
  EXPECT_THROW(jf(x, no), Error);
  EXPECT_THROW(run(p, {x, no}), Error);
}

TEST(Cond, BranchesMayUseOuterValuesAndTrees) {
  auto f = [](Value a, Value b, Value k) {
    Tree ops = Tree::dict({{"u", Tree(a)}, {"v", Tree(b)}});
    Tree r = cond(
        positive(k),
        [&](const Tree& t) {
          return Tree::list({Tree(t["u"].value() + k), Tree(b)});
        },
        [&](const Tree& t) {
          return Tree::list({Tree(t["v"].value() * a), Tree(k * 3.0)});
        },
        ops);
    return std::vector<Value>{r[0].value(), r[1].value()};
  };
  auto jf = jit(f);
  Array a = f64_array({1, 2}, {2}), b = f64_array({3, 4}, {2});
  std::vector<Array> t = jf(a, b, f64_array({2, 2}, {2}));
  EXPECT_TRUE(ArrayNear(t[0], {3, 4}));
  EXPECT_TRUE(ArrayNear(t[1], {3, 4}));
  std::vector<Array> e = jf(a, b, f64_array({-1, -1}, {2}));
  EXPECT_TRUE(ArrayNear(e[0], {3, 8}));
  EXPECT_TRUE(ArrayNear(e[1], {-3, -3}));
}

TEST(Cond, ErrorsNameWhatIsWrong) {
  auto mismatch = [](Value x) {
    return cond(
               positive(x), [](const Tree& t) { return Tree(sum(t.value())); },
               [](const Tree& t) { return t; }, Tree(x))
        .value();
  };
  try {
    trace(mismatch, {f64t({3})});
    FAIL() << "branches of different types were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cond: the branches return different types"),
              std::string::npos)
        << e.what();
  }
  auto not_bool = [](Value x) {
    return cond(
               sum(x), [](const Tree& t) { return t; }, [](const Tree& t) { return t; }, Tree(x))
        .value();
  };
  try {
    trace(not_bool, {f64t({3})});
    FAIL() << "a float predicate was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected a bool scalar"), std::string::npos) << e.what();
  }
  auto structures = [](Value x) {
    return cond(
               positive(x), [](const Tree& t) { return Tree::list({t}); },
               [](const Tree& t) { return t; }, Tree(x))
        .value();
  };
  EXPECT_THROW(trace(structures, {f64t({3})}), Error);
}

// Central differences of branchy in x and c, away from the branch boundary.
TEST(Cond, GradientsMatchFiniteDifferences) {
  auto gx = jit(grad(branchy, 0)), gc = jit(grad(branchy, 1));
  auto ggc = jit(grad(grad(branchy, 1), 1));
  auto hess = jit(grad([](Value x, Value c) { return sum(grad(branchy, 0)(x, c)); }, 0));
  const double h = 1e-6;
  for (const std::vector<double>& x :
       {std::vector<double>{0.5, 1.0, -0.2}, std::vector<double>{-0.5, 0.1, -0.2}}) {
    const double c = 1.5;
    std::vector<double> want(3);
    for (size_t i = 0; i < 3; ++i) {
      std::vector<double> up = x, down = x;
      up[i] += h, down[i] -= h;
      want[i] = (branchy_ref(up, c) - branchy_ref(down, c)) / (2 * h);
    }
    Array xs = f64_array(x, {3}), cs = Array::scalar(c);
    EXPECT_TRUE(ArrayNear(gx(xs, cs), want, 1e-6, 1e-8));
    const double dc = (branchy_ref(x, c + h) - branchy_ref(x, c - h)) / (2 * h);
    EXPECT_NEAR(gc(xs, cs).item<double>(), dc, 1e-6);
    EXPECT_NEAR(ggc(xs, cs).item<double>(), 0.0, 1e-12);  // linear in c on both branches
    // d/dx_i of sum_j d/dx_j: 2c per element on the true branch, -sin(x_i) on the false one.
    double s = x[0] + x[1] + x[2];
    std::vector<double> second;
    for (double v : x) second.push_back(s > 0 ? 2 * c : -std::sin(v));
    EXPECT_TRUE(ArrayNear(hess(xs, cs), second, 1e-9, 1e-9));
  }
}

TEST(Cond, JvpMatchesFiniteDifferences) {
  const std::vector<double> x = {-0.3, 0.2, -0.4}, v = {0.7, -1.1, 0.4};
  const double c = 0.8, h = 1e-6;
  std::vector<double> up = x, down = x;
  for (size_t i = 0; i < 3; ++i) up[i] += h * v[i], down[i] -= h * v[i];
  const double want = (branchy_ref(up, c) - branchy_ref(down, c)) / (2 * h);
  auto f = [c](Value xs) { return branchy(xs, scalar_like(xs, c) * 1.0); };
  auto tangent = jit([f](Value xs, Value vs) { return jvp(f, {xs}, {vs}).second; });
  EXPECT_NEAR(tangent(f64_array(x, {3}), f64_array(v, {3})).item<double>(), want, 1e-7);
}

TEST(Cond, VmapMatchesALoop) {
  // Batched predicate (per row) and batched operands.
  auto rows = jit(vmap([](Value x, Value c) { return branchy(x, c); }, {0, std::nullopt}));
  Array xs = random_array({5, 3}, f64, 3), c = Array::scalar(0.7);
  Array got = rows(xs, c);
  std::vector<double> want;
  for (int64_t r = 0; r < 5; ++r) {
    std::vector<double> x(xs.data<double>() + 3 * r, xs.data<double>() + 3 * r + 3);
    want.push_back(branchy_ref(x, 0.7));
  }
  EXPECT_TRUE(ArrayNear(got, want, 1e-12, 1e-12));
  // Unbatched predicate, batched operand: the cond stays a cond.
  auto shared_pred = jit(vmap(
      [](Value x, Value k) {
        return cond(
                   positive(k), [](const Tree& t) { return Tree(t.value() * 2.0); },
                   [](const Tree& t) { return Tree(t.value() - 1.0); }, Tree(x))
            .value();
      },
      {0, std::nullopt}));
  Array m = random_array({4, 2}, f64, 5);
  Array doubled = shared_pred(m, f64_array({1.0}, {1}));
  Array shifted = shared_pred(m, f64_array({-1.0}, {1}));
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_DOUBLE_EQ(doubled.data<double>()[i], 2 * m.data<double>()[i]);
    EXPECT_DOUBLE_EQ(shifted.data<double>()[i], m.data<double>()[i] - 1);
  }
  bool has_cond = false;
  for (const Eqn& e : shared_pred.last_program().eqns)
    has_cond = has_cond || e.prim->name() == "cond";
  EXPECT_TRUE(has_cond);
}

TEST(Cond, InsideMapFnBodiesPerClient) {
  // Each client skips its update when its data sum is not positive.
  auto round = program({{"clients", 6}},
                       [](Value w, Value xs) {
                         Value updated = map_fn(
                             [](Value wi, Value x) {
                               return cond(
                                          positive(x),
                                          [&](const Tree& t) { return Tree(t.value() - 0.1 * x); },
                                          [](const Tree& t) { return t; }, Tree(wi))
                                   .value();
                             },
                             broadcast(w), xs);
                         return reduce_sum(updated);
                       },
                       {"", "clients"});
  Array w = random_array({3}, f64, 1), xs = random_array({6, 3}, f64, 2);
  std::vector<double> want(3, 0.0);
  for (int64_t k = 0; k < 6; ++k) {
    const double* x = xs.data<double>() + 3 * k;
    const bool step = x[0] + x[1] + x[2] > 0;
    for (int j = 0; j < 3; ++j)
      want[static_cast<size_t>(j)] += w.data<double>()[j] - (step ? 0.1 * x[j] : 0.0);
  }
  EXPECT_TRUE(ArrayNear(jit(round)(w, xs), want, 1e-12, 1e-12));
  Program p = trace(round, {f64t({3}), f64t({6, 3})});
  EXPECT_TRUE(ArrayNear(run(p, {w, xs})[0], want, 1e-12, 1e-12));
  // And its gradient with respect to the server weights: one per client.
  auto g = jit(grad([&](Value wv, Value x) { return sum(round(wv, x)); }, 0));
  EXPECT_TRUE(ArrayNear(g(w, xs), {6, 6, 6}, 1e-12, 1e-12));
}

}  // namespace
}  // namespace drx::testing
