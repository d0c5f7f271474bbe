// Tree arithmetic (drx/trace/tree_math.h) and the n-ary tree_map, on Values inside jit and on
// host Arrays, against hand-computed values; and their errors.
#include <cmath>
#include <string>

#include "test_util.h"

namespace drx::testing {
namespace {

Array vec(std::vector<double> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return f64_array(v, s);
}

// {"b": [1, -2], "w": [[0.5, 1, 2], [3, -1, 0]]} and a second tree of the same structure.
Tree params_a() {
  return Tree::dict(
      {{"b", Tree(vec({1, -2}))}, {"w", Tree(f64_array({0.5, 1, 2, 3, -1, 0}, {2, 3}))}});
}
Tree params_b() {
  return Tree::dict(
      {{"b", Tree(vec({4, 0.25}))}, {"w", Tree(f64_array({2, -2, 1, 0, 5, 1}, {2, 3}))}});
}

void expect_leaves(const Tree& t, const std::vector<std::vector<double>>& want,
                   double tol = 1e-15) {
  std::vector<Tree> leaves = tree_leaves(t);
  ASSERT_EQ(leaves.size(), want.size());
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_TRUE(ArrayNear(leaves[i].array(), want[i], tol, tol)) << "leaf " << i;
}

// Runs fn(a, b) both on the host Arrays and inside jit, expecting the same leaves.
void expect_both(const std::function<Tree(const Tree&, const Tree&)>& fn, const Tree& a,
                 const Tree& b, const std::vector<std::vector<double>>& want) {
  SCOPED_TRACE("host");
  expect_leaves(fn(a, b), want);
  SCOPED_TRACE("jit");
  expect_leaves(jit([&](Tree x, Tree y) { return fn(x, y); })(a, b), want);
}

TEST(TreeMath, AddSubScaleAxpyMatchHandComputedValues) {
  Tree a = params_a(), b = params_b();
  expect_both([](const Tree& x, const Tree& y) { return tree_add(x, y); }, a, b,
              {{5, -1.75}, {2.5, -1, 3, 3, 4, 1}});
  expect_both([](const Tree& x, const Tree& y) { return tree_sub(x, y); }, a, b,
              {{-3, -2.25}, {-1.5, 3, 1, 3, -6, -1}});
  expect_both([](const Tree& x, const Tree&) { return tree_scale(x, -0.5); }, a, b,
              {{-0.5, 1}, {-0.25, -0.5, -1, -1.5, 0.5, 0}});
  // 2 * a + b
  expect_both([](const Tree& x, const Tree& y) { return tree_axpy(2.0, x, y); }, a, b,
              {{6, -3.75}, {3, 0, 5, 6, 3, 1}});
}

TEST(TreeMath, FullZerosOnesKeepDtypesAndShapes) {
  Tree t = Tree::list({Tree(f32_array({1, 2, 3}, {3})), Tree(Array::scalar<int32_t>(7))});
  Tree z = tree_zeros_like(t), o = tree_ones_like(t), f = tree_full_like(t, 2.5);
  EXPECT_EQ(z.structure(), "[*,*]");
  EXPECT_EQ(z[0].array().dtype(), f32);
  EXPECT_EQ(z[1].array().dtype(), i32);
  EXPECT_EQ(z[0].array().shape(), (Shape{3}));
  EXPECT_TRUE(ArrayNear(z[0].array(), {0, 0, 0}, 0, 0));
  EXPECT_TRUE(ArrayNear(o[1].array(), {1}, 0, 0));
  EXPECT_TRUE(ArrayNear(f[0].array(), {2.5, 2.5, 2.5}, 0, 0));
  // Inside a trace they are Values of the same types.
  Tree traced = jit([](Tree x) { return tree_full_like(x, -1.0); })(t);
  EXPECT_EQ(traced[0].array().dtype(), f32);
  EXPECT_TRUE(ArrayNear(traced[0].array(), {-1, -1, -1}, 0, 0));
  EXPECT_TRUE(ArrayNear(traced[1].array(), {-1}, 0, 0));
}

TEST(TreeMath, VdotNormAndSize) {
  Tree a = params_a(), b = params_b();
  // a.b = (4 - 0.5) + (1 - 2 + 2 + 0 - 5 + 0) = 3.5 - 4 = -0.5
  // |a|^2 = 1 + 4 + 0.25 + 1 + 4 + 9 + 1 + 0 = 20.25, |a| = 4.5
  Tree host_dot = tree_vdot(a, b);
  EXPECT_EQ(host_dot.array().dtype(), f64);
  EXPECT_EQ(host_dot.array().item<double>(), -0.5);
  EXPECT_EQ(tree_l2_norm(a).array().item<double>(), 4.5);
  EXPECT_EQ(tree_size(a), 8);
  auto traced = jit([](Tree x, Tree y) {
    return Tree::list(
        {tree_vdot(x, y), tree_l2_norm(x), Tree(fill({}, double(tree_size(x)), f64))});
  });
  Tree r = traced(a, b);
  EXPECT_NEAR(r[0].array().item<double>(), -0.5, 1e-15);
  EXPECT_NEAR(r[1].array().item<double>(), 4.5, 1e-15);
  EXPECT_EQ(r[2].array().item<double>(), 8);
  // In f32 the traced result keeps the leaves' dtype.
  Tree a32 = tree_map([](const Array& x) { return convert_array(x, f32); }, a);
  Array n32 = jit([](Tree x) { return tree_l2_norm(x).value(); })(a32);
  EXPECT_EQ(n32.dtype(), f32);
  EXPECT_EQ(n32.item<float>(), 4.5f);
}

TEST(TreeMath, NaryTreeMapOverValuesAndArrays) {
  Tree a = params_a(), b = params_b(), c = tree_full_like(params_a(), 10.0);
  // a * b + c, leaf by leaf.
  Tree host = tree_map(
      [](const std::vector<Array>& l) {
        Array out(f64, l[0].shape());
        for (int64_t i = 0; i < out.size(); ++i)
          out.data<double>()[i] =
              l[0].element_as_double(i) * l[1].element_as_double(i) + l[2].element_as_double(i);
        return out;
      },
      {a, b, c});
  std::vector<std::vector<double>> want = {{14, 9.5}, {11, 8, 12, 10, 5, 10}};
  expect_leaves(host, want);
  auto traced = jit([](Tree x, Tree y, Tree z) {
    return tree_map([](const std::vector<Value>& l) { return l[0] * l[1] + l[2]; }, {x, y, z});
  });
  expect_leaves(traced(a, b, c), want);
  // The two-tree Array form.
  expect_leaves(tree_map([](const Array& x, const Array&) { return x; }, a, b),
                {{1, -2}, {0.5, 1, 2, 3, -1, 0}});
  // Structures must agree; the error names both.
  Tree other = Tree::dict({{"b", Tree(vec({1, 2}))}, {"v", Tree(vec({3}))}});
  expect_error(
      [&] {
        tree_map([](const std::vector<Array>& l) { return l[0]; }, {a, b, other});
      },
      {"tree_map", "{b:*,w:*}", "{b:*,v:*}", "tree 2"});
  expect_error([&] { tree_map([](const std::vector<Array>& l) { return l[0]; }, {}); },
               {"tree_map", "no trees"});
  // A Value map over Array leaves is an error naming the leaf kind.
  expect_error([&] { tree_map([](const std::vector<Value>& l) { return l[0]; }, {a}); },
               {"Array leaf"});
}

TEST(TreeMath, LeafPathsIndexTheTree) {
  Tree t = Tree::dict({{"layer0", Tree::dict({{"b", Tree(vec({1}))}, {"w", Tree(vec({2}))}})},
                       {"extra", Tree::list({Tree(vec({3})), Tree(vec({4}))})}});
  EXPECT_EQ(tree_leaf_paths(t),
            (std::vector<std::string>{"[\"extra\"][0]", "[\"extra\"][1]", "[\"layer0\"][\"b\"]",
                                      "[\"layer0\"][\"w\"]"}));
  EXPECT_EQ(tree_leaf_paths(Tree(vec({1}))), std::vector<std::string>{""});
}

TEST(TreeMath, ArrayLeavesInATracedTreeBecomeConstants) {
  Tree b = params_b();
  auto f = jit([b](Tree x) { return tree_add(x, b); });  // b's leaves are Arrays
  expect_leaves(f(params_a()), {{5, -1.75}, {2.5, -1, 3, 3, 4, 1}});
  Tree v = jit([b](Tree x) {
    Tree vb = tree_values(b);
    EXPECT_EQ(tree_leaves(vb)[0].kind(), Tree::Kind::value);
    return tree_sub(vb, x);
  })(params_a());
  expect_leaves(v, {{3, 2.25}, {1.5, -3, -1, -3, 6, 1}});
}

TEST(TreeMath, EmptyTreesAndMismatchesAreClearErrors) {
  EXPECT_EQ(tree_add(Tree(), Tree()).structure(), "[]");
  EXPECT_EQ(tree_size(Tree()), 0);
  expect_error([] { tree_vdot(Tree(), Tree()); }, {"tree_vdot", "no leaves"});
  expect_error([] { tree_l2_norm(Tree::list({Tree()})); }, {"tree_l2_norm", "no leaves"});

  Tree a = params_a();
  Tree other = Tree::dict({{"b", Tree(vec({1, 2}))}});
  expect_error([&] { tree_add(a, other); },
               {"tree_add", "differ in structure", "{b:*,w:*}", "{b:*}"});
  expect_error([&] { tree_vdot(a, other); }, {"tree_vdot", "{b:*,w:*}", "{b:*}"});
  expect_error([&] { tree_axpy(1.0, other, a); }, {"tree_axpy", "{b:*}", "{b:*,w:*}"});
  // Same structure, another shape or dtype: the leaf is named by its path.
  Tree wrong_shape = Tree::dict({{"b", Tree(vec({1, 2, 3}))}, {"w", a["w"]}});
  expect_error([&] { tree_sub(a, wrong_shape); }, {"tree_sub", "[\"b\"]", "f64[2]", "f64[3]"});
  Tree wrong_dtype = Tree::dict({{"b", Tree(f32_array({1, 2}, {2}))}, {"w", a["w"]}});
  expect_error([&] { tree_add(a, wrong_dtype); }, {"tree_add", "[\"b\"]", "f64[2]", "f32[2]"});
  // Scaling needs floating-point leaves; vdot of a traced tree needs one dtype.
  Tree ints = Tree::list({Tree(Array::scalar<int32_t>(3))});
  expect_error([&] { tree_scale(ints, 2.0); }, {"tree_scale", "i32[]", "floating-point"});
  EXPECT_EQ(tree_add(ints, ints)[0].array().item<int32_t>(), 6);
  Tree mixed = Tree::list({Tree(vec({1})), Tree(f32_array({2}, {1}))});
  expect_error([&] { jit([](Tree x) { return tree_vdot(x, x); })(mixed); },
               {"tree_vdot", "f64[1]", "f32[1]", "astype"});
}

}  // namespace
}  // namespace drx::testing
