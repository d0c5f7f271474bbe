// Composition of transformations: second derivatives, vmap of grad, jit of
// everything, trees, symbolic zeros, program size after simplification.
#include <cstring>

#include "transform_checks.h"

namespace drx::testing {
namespace {

Tree mlp_params(int layers, int width, uint64_t seed) {
  std::vector<std::pair<std::string, Tree>> items;
  for (int l = 0; l < layers; ++l) {
    items.emplace_back("w" + std::to_string(l),
                       Tree(random_array({width, width}, f64, seed + l, -0.6, 0.6)));
    items.emplace_back("b" + std::to_string(l),
                       Tree(random_array({width}, f64, seed + 50 + l, -0.1, 0.1)));
  }
  return Tree::dict(items);
}

Value mlp_loss(const Tree& p, const Value& x, const Value& y) {
  Value h = x;
  int layers = static_cast<int>(p.size()) / 2;
  for (int l = 0; l < layers; ++l) {
    h = matmul(h, p["w" + std::to_string(l)].value()) + p["b" + std::to_string(l)].value();
    if (l + 1 < layers) h = tanh(h);
  }
  return mean(square(h - y));
}

Tree axpy(double alpha, const Tree& x, const Tree& y) {
  std::vector<Tree> lx = tree_leaves(x), ly = tree_leaves(y), out;
  for (size_t i = 0; i < lx.size(); ++i) {
    Array r(f64, lx[i].array().shape());
    for (int64_t k = 0; k < r.size(); ++k)
      r.data<double>()[k] =
          alpha * lx[i].array().element_as_double(k) + ly[i].array().element_as_double(k);
    out.emplace_back(r);
  }
  return tree_unflatten(x, out);
}

TEST(HigherOrder, HessianVectorProductsAgree) {
  const int width = 4;
  Tree params = mlp_params(2, width, 10);
  Tree v = mlp_params(2, width, 20);
  Array x = random_array({3, width}, f64, 30), y = random_array({3, width}, f64, 31);
  auto g = grad(mlp_loss);  // Tree gradient with respect to the parameters
  // Forward-over-reverse.
  auto hvp_fwd = jit([g](Tree p, Tree t, Value xs, Value ys) {
    return jvp(g, {p, xs, ys}, {t, zeros_like(xs), zeros_like(ys)}).second;
  });
  // Reverse-over-reverse: grad of <grad f, v>.
  auto hvp_rev = jit(grad(
      [g](Tree p, Tree t, Value xs, Value ys) {
        Tree gp = g(p, xs, ys);
        std::vector<Tree> lg = tree_leaves(gp), lt = tree_leaves(t);
        Value s = sum(lg[0].value() * lt[0].value());
        for (size_t i = 1; i < lg.size(); ++i) s = s + sum(lg[i].value() * lt[i].value());
        return s;
      },
      0));
  Tree h1 = hvp_fwd(params, v, x, y);
  Tree h2 = hvp_rev(params, v, x, y);
  auto gj = jit(g);
  const double h = 1e-5;
  Tree gp = gj(axpy(h, v, params), x, y), gm = gj(axpy(-h, v, params), x, y);
  std::vector<Tree> l1 = tree_leaves(h1), l2 = tree_leaves(h2), lp = tree_leaves(gp),
                    lm = tree_leaves(gm);
  ASSERT_EQ(l1.size(), 4u);
  for (size_t i = 0; i < l1.size(); ++i) {
    std::vector<double> fd;
    for (int64_t k = 0; k < lp[i].array().size(); ++k)
      fd.push_back((lp[i].array().element_as_double(k) - lm[i].array().element_as_double(k)) /
                   (2 * h));
    EXPECT_TRUE(ArrayNear(l1[i].array(), fd, 1e-6, 1e-7)) << "jvp of grad, leaf " << i;
    EXPECT_TRUE(ArrayNear(l2[i].array(), to_doubles(l1[i].array()), 1e-10, 1e-12))
        << "grad of grad, leaf " << i;
  }
}

TEST(HigherOrder, GradOfGradOfScalarFunction) {
  // f(x) = x^3 sin(x): f'' = 6x sin x + 6x^2 cos x - x^3 sin x
  auto f = [](Value x) { return x * x * x * sin(x); };
  auto d2 = jit(grad(grad(f)));
  auto d3 = jit(grad(grad(grad(f))));
  for (double x : {-1.3, 0.2, 2.0}) {
    double want2 = 6 * x * std::sin(x) + 6 * x * x * std::cos(x) - x * x * x * std::sin(x);
    double want3 =
        6 * std::sin(x) + 18 * x * std::cos(x) - 9 * x * x * std::sin(x) - x * x * x * std::cos(x);
    EXPECT_NEAR(d2(Array::scalar(x)).item<double>(), want2, 1e-12);
    EXPECT_NEAR(d3(Array::scalar(x)).item<double>(), want3, 1e-11);
  }
}

TEST(HigherOrder, VmapOfGradEqualsPerExampleGrads) {
  auto loss = [](Value w, Value x) { return sum(tanh(matmul(x, w))); };
  Array w = random_array({3, 2}, f64, 1), xs = random_array({4, 5, 3}, f64, 2);
  auto per_example = jit(vmap(grad(loss), {std::nullopt, 0}));
  Array g = per_example(w, xs);
  ASSERT_EQ(g.shape(), (Shape{4, 3, 2}));
  auto single = jit(grad(loss));
  for (int64_t b = 0; b < 4; ++b)
    EXPECT_TRUE(
        ArrayNear(slice_axis(g, 0, b), to_doubles(single(w, slice_axis(xs, 0, b))), 1e-12, 1e-12));
}

TEST(HigherOrder, NestedVmapAndJitOfVmapOfGrad) {
  auto f = [](Value a, Value b) { return sum(a * b) * sum(a); };
  Array a = random_array({2, 3, 4}, f64, 3), b = random_array({4}, f64, 4);
  auto nested = jit(vmap(vmap(grad(f), {0, std::nullopt}), {0, std::nullopt}));
  Array g = nested(a, b);
  auto single = jit(grad(f));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      Array want = single(slice_axis(slice_axis(a, 0, i), 0, j), b);
      EXPECT_TRUE(ArrayNear(slice_axis(slice_axis(g, 0, i), 0, j), to_doubles(want), 1e-12, 1e-12));
    }
}

TEST(HigherOrder, GradWithRespectToSeveralArgumentsAndValueAndGrad) {
  auto f = [](Value a, Value b, Value c) { return sum(a * b + c); };
  Array a = f64_array({1, 2}, {2}), b = f64_array({3, 4}, {2}), c = f64_array({5, 6}, {2});
  std::vector<Array> g = jit(grad(f, std::vector<int>{0, 2}))(a, b, c);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(ArrayNear(g[0], {3, 4}));
  EXPECT_TRUE(ArrayNear(g[1], {1, 1}));
  auto [val, gb] = jit(value_and_grad(f, 1))(a, b, c);
  EXPECT_DOUBLE_EQ(val.item<double>(), 1 * 3 + 2 * 4 + 5 + 6);
  EXPECT_TRUE(ArrayNear(gb, {1, 2}));
}

TEST(HigherOrder, IntegerInputsGetZeroGradientAndNoError) {
  auto f = [](Value x, Value idx) { return sum(take(x, idx, 0) * 2.0); };
  Array x = f64_array({1, 2, 3}, {3});
  Array idx = Array::from_vector<int32_t>({2, 2, 0}, {3});
  auto g = jit(grad(f, std::vector<int>{0, 1}, GradOptions{.allow_int = true}))(x, idx);
  EXPECT_TRUE(ArrayNear(g[0], {2, 0, 4}));
  EXPECT_EQ(g[1].dtype(), i32);
  EXPECT_TRUE(ArrayNear(g[1], {0, 0, 0}));
}

TEST(HigherOrder, StopGradientBlocksDerivative) {
  auto f = [](Value x) { return sum(x * stop_gradient(x)); };
  Array x = f64_array({1, -2}, {2});
  EXPECT_TRUE(ArrayNear(jit(grad(f))(x), {1, -2}));
}

TEST(HigherOrder, UnusedInputsCostNothing) {
  // The gradient with respect to `a` must not compute anything about `b`'s path.
  auto f = [](Value a, Value b) { return sum(exp(a)) + sum(sin(b) * cos(b)); };
  auto g = jit(grad(f, 0));
  Array a = f64_array({0, 1}, {2}), b = f64_array({2, 3}, {2});
  EXPECT_TRUE(ArrayNear(g(a, b), {1, std::exp(1.0)}, 1e-12));
  for (const Eqn& e : g.last_program().eqns) {
    EXPECT_NE(e.prim->name(), "sin");
    EXPECT_NE(e.prim->name(), "cos");
  }
}

TEST(HigherOrder, TreeGradientsHaveTheArgumentsStructure) {
  auto f = [](Tree p, Value x) { return sum(p["w"].value() * x) + sum(p["b"].value()); };
  Tree p = Tree::dict({{"w", Tree(f64_array({1, 2}, {2}))}, {"b", Tree(f64_array({3}, {1}))}});
  Tree g = jit(grad(f))(p, f64_array({5, 7}, {2}));
  EXPECT_EQ(g.structure(), p.structure());
  EXPECT_TRUE(ArrayNear(g["w"].array(), {5, 7}));
  EXPECT_TRUE(ArrayNear(g["b"].array(), {1}));
}

TEST(HigherOrder, ClosuresOverOuterValuesAreDifferentiated) {
  // d/dy [ d/dx (x*y)^2 at x ] = d/dy 2 x y^2 = 4 x y
  auto outer = [](Value x, Value y) {
    auto inner = [y](Value xi) { return square(xi * y); };
    return grad(inner)(x);
  };
  auto g = jit(grad(outer, 1));
  EXPECT_NEAR(g(Array::scalar(3.0), Array::scalar(2.0)).item<double>(), 4 * 3 * 2, 1e-12);
}

int gradient_equation_count(int layers) {
  const int width = 4;
  auto vg = jit(value_and_grad(mlp_loss));
  Tree p = mlp_params(layers, width, 1);
  vg(p, random_array({3, width}, f64, 2), random_array({3, width}, f64, 3));
  return static_cast<int>(vg.last_program().eqns.size());
}

TEST(HigherOrder, GradientProgramGrowsLinearlyWithDepth) {
  int e2 = gradient_equation_count(2), e4 = gradient_equation_count(4),
      e8 = gradient_equation_count(8);
  std::printf("value_and_grad(MLP) equations after simplification: L=2: %d, L=4: %d, L=8: %d\n", e2,
              e4, e8);
  int per_layer = (e4 - e2) / 2;
  EXPECT_LE(per_layer, 25);
  EXPECT_EQ(e8 - e4, 2 * (e4 - e2));  // exactly linear in depth
}

TEST(HigherOrder, ClearErrors) {
  auto vec_out = [](Value x) { return x * 2.0; };
  try {
    jit(grad(vec_out))(f64_array({1, 2}, {2}));
    FAIL() << "grad of a non-scalar output must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scalar"), std::string::npos) << e.what();
  }
  auto two = [](Value a, Value b) { return sum(a + b); };
  try {
    jit(vmap(two))(f64_array({1, 2, 3}, {3}), f64_array({1, 2}, {2}));
    FAIL() << "vmap over different sizes must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different sizes"), std::string::npos) << e.what();
  }
  try {
    jit(grad(two, 2))(f64_array({1}, {1}), f64_array({1}, {1}));
    FAIL() << "argnum out of range must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("argnum 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace drx::testing
