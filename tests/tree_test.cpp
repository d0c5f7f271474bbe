// Trees: construction, access and its errors, structure strings, flattening,
// tree_map, and Trees through jit and grad.
#include <string>

#include "test_util.h"

namespace drx::testing {
namespace {

// The message of the drx::Error that `fn` throws ("" if it throws nothing).
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_MENTIONS(stmt, text)                                 \
  do {                                                                    \
    std::string msg_ = error_of([&] { (void)(stmt); });                   \
    EXPECT_FALSE(msg_.empty()) << #stmt " did not throw drx::Error";      \
    EXPECT_NE(msg_.find(text), std::string::npos) << "message: " << msg_; \
  } while (0)

Array a64(std::vector<double> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return f64_array(v, s);
}

// The first element of an Array leaf (leaves in these tests are tagged by it).
double tag(const Tree& t) { return t.array().element_as_double(0); }

TEST(Tree, LeafListAndDictConstruction) {
  Tree leaf(a64({1, 2}));
  EXPECT_TRUE(leaf.is_leaf());
  EXPECT_EQ(leaf.kind(), Tree::Kind::array);
  EXPECT_EQ(leaf.size(), 0u);
  EXPECT_TRUE(ArrayNear(leaf.array(), {1, 2}));

  Tree empty;
  EXPECT_EQ(empty.kind(), Tree::Kind::list);
  EXPECT_FALSE(empty.is_leaf());
  EXPECT_EQ(empty.size(), 0u);

  Tree l = Tree::list({Tree(a64({1})), Tree(a64({2})), Tree::list({})});
  EXPECT_EQ(l.kind(), Tree::Kind::list);
  EXPECT_EQ(l.size(), 3u);
  EXPECT_EQ(tag(l[1]), 2);

  // A vector of Arrays is a list of leaves.
  Tree from_vector(std::vector<Array>{a64({5}), a64({6})});
  EXPECT_EQ(from_vector.structure(), "[*,*]");
  EXPECT_EQ(tag(from_vector[0]), 5);

  Tree d = Tree::dict({{"w", Tree(a64({1}))}, {"b", Tree(a64({2}))}});
  EXPECT_EQ(d.kind(), Tree::Kind::dict);
  EXPECT_EQ(d.size(), 2u);
  EXPECT_TRUE(d.contains("w"));
  EXPECT_FALSE(d.contains("x"));
  EXPECT_FALSE(l.contains("w"));
}

TEST(Tree, DictKeysAreSortedAndIndexAccessFollowsThem) {
  Tree d =
      Tree::dict({{"zeta", Tree(a64({3}))}, {"alpha", Tree(a64({1}))}, {"mid", Tree(a64({2}))}});
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"alpha", "mid", "zeta"}));
  EXPECT_EQ(tag(d[0]), 1);
  EXPECT_EQ(tag(d[2]), 3);
  EXPECT_EQ(tag(d["zeta"]), 3);
  EXPECT_EQ(tag(d["alpha"]), 1);
  // Insertion order does not matter: same keys, same structure.
  Tree e =
      Tree::dict({{"mid", Tree(a64({0}))}, {"alpha", Tree(a64({0}))}, {"zeta", Tree(a64({0}))}});
  EXPECT_EQ(d.structure(), e.structure());
}

TEST(Tree, DuplicateDictKeysAreRejected) {
  EXPECT_THROW(Tree::dict({{"w", Tree(a64({1}))}, {"w", Tree(a64({2}))}}), Error);
  EXPECT_ERROR_MENTIONS(Tree::dict({{"b", Tree(a64({1}))}, {"w", Tree()}, {"w", Tree(a64({2}))}}),
                        "duplicate key 'w'");
}

TEST(Tree, AccessErrorsNameTheIndexOrKey) {
  Tree l = Tree::list({Tree(a64({1})), Tree(a64({2}))});
  Tree d = Tree::dict({{"w", Tree(a64({1}))}, {"b", Tree(a64({2}))}});
  Tree leaf(a64({1}));
  EXPECT_ERROR_MENTIONS(l[2], "Tree[2]");
  EXPECT_ERROR_MENTIONS(l[2], "2 children");
  EXPECT_ERROR_MENTIONS(d[5], "Tree[5]");
  EXPECT_ERROR_MENTIONS(d["bias"], "\"bias\"");
  EXPECT_ERROR_MENTIONS(d["bias"], "{b:*,w:*}");  // and what is there instead
  EXPECT_ERROR_MENTIONS(l["w"], "\"w\"");
  EXPECT_ERROR_MENTIONS(l["w"], "not a dict");
  EXPECT_ERROR_MENTIONS(leaf[0], "leaf");
  EXPECT_ERROR_MENTIONS(leaf["w"], "not a dict");
  // Leaf accessors say what they found.
  EXPECT_ERROR_MENTIONS(l.array(), "[*,*]");
  EXPECT_ERROR_MENTIONS(leaf.value(), "Array leaf");
}

TEST(Tree, StructureStrings) {
  Tree x(a64({1}));
  EXPECT_EQ(x.structure(), "*");
  EXPECT_EQ(Tree().structure(), "[]");
  EXPECT_EQ(Tree::dict({}).structure(), "{}");
  EXPECT_EQ(Tree::list({x, x}).structure(), "[*,*]");
  Tree nested = Tree::dict(
      {{"w", Tree::list({x, Tree::list({x})})}, {"b", x}, {"opt", Tree::dict({{"m", x}})}});
  EXPECT_EQ(nested.structure(), "{b:*,opt:{m:*},w:[*,[*]]}");
  // A list and a dict with the same leaves differ in structure, as do lists of
  // different lengths and differently nested lists.
  EXPECT_NE(Tree::list({x}).structure(), Tree::dict({{"a", x}}).structure());
  EXPECT_NE(Tree::list({x}).structure(), Tree::list({x, x}).structure());
  EXPECT_NE(Tree::list({Tree::list({x}), x}).structure(),
            Tree::list({x, Tree::list({x})}).structure());
}

Tree tagged_nested() {
  // Leaves tagged so that canonical order reads 1, 2, ..., 6.
  return Tree::dict({
      {"z", Tree(a64({6}))},
      {"a",
       Tree::list({Tree(a64({1})), Tree::dict({{"y", Tree(a64({3}))}, {"x", Tree(a64({2}))}})})},
      {"m", Tree::list({Tree::list({Tree(a64({4}))}), Tree(), Tree(a64({5}))})},
  });
}

TEST(Tree, LeavesComeInCanonicalOrder) {
  std::vector<Tree> leaves = tree_leaves(tagged_nested());
  ASSERT_EQ(leaves.size(), 6u);
  for (size_t i = 0; i < leaves.size(); ++i) EXPECT_EQ(tag(leaves[i]), static_cast<double>(i + 1));
  // A leaf is its own only leaf; an empty container has none.
  EXPECT_EQ(tree_leaves(Tree(a64({9}))).size(), 1u);
  EXPECT_TRUE(tree_leaves(Tree()).empty());
  EXPECT_TRUE(tree_leaves(Tree::dict({{"e", Tree()}})).empty());
}

TEST(Tree, UnflattenRoundTripsAndChecksTheLeafCount) {
  Tree t = tagged_nested();
  std::vector<Tree> leaves = tree_leaves(t);
  // Replace every leaf by 10 * its tag, then rebuild.
  std::vector<Tree> scaled;
  for (const Tree& l : leaves) scaled.emplace_back(a64({10 * tag(l)}));
  Tree r = tree_unflatten(t, scaled);
  EXPECT_EQ(r.structure(), t.structure());
  EXPECT_EQ(tag(r["a"][1]["x"]), 20);
  EXPECT_EQ(tag(r["m"][0][0]), 40);
  EXPECT_EQ(tag(r["z"]), 60);
  Tree same = tree_unflatten(t, leaves);
  std::vector<Tree> again = tree_leaves(same);
  ASSERT_EQ(again.size(), leaves.size());
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(tag(again[i]), tag(leaves[i]));

  std::vector<Tree> five(leaves.begin(), leaves.end() - 1);
  EXPECT_ERROR_MENTIONS(tree_unflatten(t, five), "too few leaves");
  std::vector<Tree> seven = leaves;
  seven.push_back(leaves[0]);
  EXPECT_ERROR_MENTIONS(tree_unflatten(t, seven), "7 leaves given");
  EXPECT_ERROR_MENTIONS(tree_unflatten(t, seven), "has 6");
  // A leaf structure takes exactly one leaf.
  EXPECT_ERROR_MENTIONS(tree_unflatten(Tree(a64({0})), {}), "too few leaves");
}

TEST(Tree, MapOverArrays) {
  Tree t = tagged_nested();
  Tree doubled = tree_map(
      [](const Array& a) {
        Array r(f64, a.shape());
        for (int64_t i = 0; i < a.size(); ++i) r.data<double>()[i] = 2 * a.element_as_double(i);
        return r;
      },
      t);
  EXPECT_EQ(doubled.structure(), t.structure());
  std::vector<Tree> leaves = tree_leaves(doubled);
  for (size_t i = 0; i < leaves.size(); ++i)
    EXPECT_EQ(tag(leaves[i]), 2.0 * static_cast<double>(i + 1));
  // Array leaves are not Values: a Value map over them is an error, not a crash.
  EXPECT_ERROR_MENTIONS(tree_map([](const Value& v) { return v; }, t), "Array leaf");
}

TEST(Tree, MapOverValuesInsideJit) {
  auto f = jit([](Tree p) { return tree_map([](const Value& v) { return v * v + 1.0; }, p); });
  Tree p = Tree::dict(
      {{"w", Tree::list({Tree(a64({1, 2})), Tree(a64({-3}))})}, {"b", Tree(a64({0.5}))}});
  Tree r = f(p);
  EXPECT_EQ(r.structure(), "{b:*,w:[*,*]}");
  EXPECT_TRUE(ArrayNear(r["w"][0].array(), {2, 5}));
  EXPECT_TRUE(ArrayNear(r["w"][1].array(), {10}));
  EXPECT_TRUE(ArrayNear(r["b"].array(), {1.25}));
}

TEST(Tree, TwoTreeMapPairsLeavesAndRejectsMismatchedStructures) {
  auto f = jit([](Tree a, Tree b) {
    return tree_map([](const Value& x, const Value& y) { return x - 2.0 * y; }, a, b);
  });
  Tree a = Tree::dict({{"w", Tree(a64({1, 2}))}, {"b", Tree(a64({3}))}});
  Tree b = Tree::dict({{"b", Tree(a64({10}))}, {"w", Tree(a64({0.5, 0.25}))}});
  Tree r = f(a, b);
  EXPECT_TRUE(ArrayNear(r["w"].array(), {0, 1.5}));
  EXPECT_TRUE(ArrayNear(r["b"].array(), {-17}));

  Tree wrong_key = Tree::dict({{"w", Tree(a64({1, 2}))}, {"c", Tree(a64({3}))}});
  std::string msg = error_of([&] { f(a, wrong_key); });
  EXPECT_NE(msg.find("differ in structure"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{b:*,w:*}"), std::string::npos) << msg;
  EXPECT_NE(msg.find("{c:*,w:*}"), std::string::npos) << msg;
  Tree as_list = Tree::list({Tree(a64({3})), Tree(a64({1, 2}))});
  EXPECT_ERROR_MENTIONS(f(a, as_list), "[*,*]");
}

TEST(Tree, JitTakesAndReturnsTrees) {
  // An SGD step over a dict of lists, returning new parameters and the loss.
  auto step = jit([](Tree params, Value x) {
    Value w0 = params["layers"][0];
    Value w1 = params["layers"][1];
    Value loss = sum(square(w0 * x + w1));
    Tree g = grad([x](Tree p) {
      return sum(square(p["layers"][0].value() * x + p["layers"][1].value()));
    })(params);
    Tree updated =
        tree_map([](const Value& p, const Value& gp) { return p - 0.1 * gp; }, params, g);
    return Tree::dict({{"params", updated}, {"loss", loss}, {"fixed", Tree(a64({42}))}});
  });
  Tree params = Tree::dict({{"layers", Tree::list({Tree(a64({1, 2})), Tree(a64({0.5, -1}))})}});
  Array x = a64({3, -1});
  Tree out = step(params, x);
  EXPECT_EQ(out.structure(), "{fixed:*,loss:*,params:{layers:[*,*]}}");
  // r = w0*x + w1 = (3.5, -3); loss = 12.25 + 9; dL/dw0 = 2 r x, dL/dw1 = 2 r.
  EXPECT_TRUE(ArrayNear(out["loss"].array(), {21.25}, 1e-12));
  EXPECT_TRUE(ArrayNear(out["params"]["layers"][0].array(), {1 - 0.1 * 21, 2 - 0.1 * 6}, 1e-12));
  EXPECT_TRUE(ArrayNear(out["params"]["layers"][1].array(), {0.5 - 0.1 * 7, -1 + 0.1 * 6}, 1e-12));
  // An Array leaf of the result comes back as an Array.
  EXPECT_TRUE(ArrayNear(out["fixed"].array(), {42}));
  EXPECT_EQ(step.trace_count(), 1);
  step(params, a64({1, 1}));
  EXPECT_EQ(step.trace_count(), 1);  // same structure and types: cached
  Tree three = Tree::dict(
      {{"layers", Tree::list({Tree(a64({1, 2})), Tree(a64({0.5, -1})), Tree(a64({0, 0}))})}});
  step(three, x);
  EXPECT_EQ(step.trace_count(), 2);  // another structure: traced again
}

TEST(Tree, GradOfNestedDictOfListsHasTheSameStructure) {
  // f(p, x) = sum(tanh(A x) * c) + s * sum(B[0]^2) + sum(B[1]) * s
  auto f = [](Tree p, Value x) {
    Value a = p["enc"]["A"];
    Value c = p["enc"]["c"];
    Value b0 = p["head"][0];
    Value b1 = p["head"][1];
    Value s = p["head"][2]["scale"];
    return sum(tanh(matmul(a, x)) * c) + s * sum(square(b0)) + sum(b1) * s;
  };
  Array A = f64_array({0.1, -0.2, 0.3, 0.4, 0.5, -0.6}, {2, 3});
  Array c = a64({2, -1});
  Array b0 = a64({1, -2, 3});
  Array b1 = a64({0.5, 0.25});
  Array s = Array::scalar(1.5);
  Array x = a64({1, 2, -1});
  Tree p = Tree::dict({
      {"head", Tree::list({Tree(b0), Tree(b1), Tree::dict({{"scale", Tree(s)}})})},
      {"enc", Tree::dict({{"c", Tree(c)}, {"A", Tree(A)}})},
  });
  Tree g = jit(grad(f))(p, x);
  EXPECT_EQ(g.structure(), p.structure());
  EXPECT_EQ(g.structure(), "{enc:{A:*,c:*},head:[*,*,{scale:*}]}");
  // Reference in plain loops.
  double xs[3] = {1, 2, -1}, Av[6] = {0.1, -0.2, 0.3, 0.4, 0.5, -0.6}, cv[2] = {2, -1};
  std::vector<double> dA, dc;
  double z[2];
  for (int i = 0; i < 2; ++i) {
    z[i] = 0;
    for (int j = 0; j < 3; ++j) z[i] += Av[i * 3 + j] * xs[j];
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      dA.push_back(cv[i] * (1 - std::tanh(z[i]) * std::tanh(z[i])) * xs[j]);
  for (int i = 0; i < 2; ++i) dc.push_back(std::tanh(z[i]));
  EXPECT_TRUE(ArrayNear(g["enc"]["A"].array(), dA, 1e-12, 1e-14));
  EXPECT_TRUE(ArrayNear(g["enc"]["c"].array(), dc, 1e-12, 1e-14));
  EXPECT_TRUE(ArrayNear(g["head"][0].array(), {2 * 1.5 * 1, 2 * 1.5 * -2, 2 * 1.5 * 3}, 1e-12));
  EXPECT_TRUE(ArrayNear(g["head"][1].array(), {1.5, 1.5}, 1e-12));
  // d/ds = sum(b0^2) + sum(b1) = 14 + 0.75
  EXPECT_EQ(g["head"][2]["scale"].array().shape(), Shape{});
  EXPECT_TRUE(ArrayNear(g["head"][2]["scale"].array(), {14.75}, 1e-12));
}

}  // namespace
}  // namespace drx::testing
