// drx::trace: how input types are handed to the function's arguments.
#include <string>

#include "test_util.h"

namespace drx::testing {
namespace {

Type f64t(Shape s) { return Type(f64, std::move(s)); }

TEST(Trace, OneTypePerValueArgument) {
  Program p = trace([](Value a, Value b) { return a * b; }, {f64t({2}), f64t({2})});
  ASSERT_EQ(p.inputs.size(), 2u);
  std::vector<Array> out = run(p, {f64_array({1, 2}, {2}), f64_array({3, 4}, {2})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(ArrayNear(out[0], {3, 8}));
}

TEST(Trace, AVectorOfValuesArgumentTakesAllTheTypes) {
  auto f = [](std::vector<Value> xs) {
    Value s = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) s = s * 10.0 + xs[i];
    return s;
  };
  Program p = trace(f, {f64t({2}), f64t({2}), f64t({2})}, "poly");
  EXPECT_EQ(p.name, "poly");
  ASSERT_EQ(p.inputs.size(), 3u);
  for (int v : p.inputs) EXPECT_EQ(p.type_of(v), f64t({2}));
  std::vector<Array> out =
      run(p, {f64_array({1, 2}, {2}), f64_array({3, 4}, {2}), f64_array({5, 6}, {2})});
  EXPECT_TRUE(ArrayNear(out[0], {135, 246}));

  // One type is a list of one; the list may also be empty.
  Program one = trace(f, {f64t({})});
  EXPECT_EQ(one.inputs.size(), 1u);
  Program none = trace([](const std::vector<Value>& xs) { return std::vector<Value>(xs); }, {});
  EXPECT_TRUE(none.inputs.empty());
  EXPECT_TRUE(none.outputs.empty());
}

TEST(Trace, ListArgumentAfterFixedArgumentsTakesTheRest) {
  auto f = [](Value scale, std::vector<Value> xs) -> std::vector<Value> {
    std::vector<Value> out;
    for (const Value& x : xs) out.push_back(x * scale);
    return out;
  };
  Program p = trace(f, {f64t({}), f64t({2}), f64t({3})});
  ASSERT_EQ(p.inputs.size(), 3u);
  std::vector<Array> out =
      run(p, {Array::scalar(2.0), f64_array({1, 2}, {2}), f64_array({3, 4, 5}, {3})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(ArrayNear(out[0], {2, 4}));
  EXPECT_TRUE(ArrayNear(out[1], {6, 8, 10}));
  // The fixed argument with no list is allowed; no type for it is an error.
  EXPECT_EQ(trace(f, {f64t({})}).outputs.size(), 0u);
  try {
    trace(f, {});
    FAIL() << "missing type for a fixed argument must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0 input types given"), std::string::npos) << e.what();
  }
}

TEST(Trace, TransformedListFunctionsTraceToo) {
  // grad of a list function keeps the list signature.
  auto loss = [](std::vector<Value> xs) { return sum(xs[0] * xs[1]); };
  Program p = trace(grad(loss), {f64t({2}), f64t({2})});
  ASSERT_EQ(p.inputs.size(), 2u);
  std::vector<Array> g = run(p, {f64_array({1, 2}, {2}), f64_array({3, 4}, {2})});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(ArrayNear(g[0], {3, 4}));
  EXPECT_TRUE(ArrayNear(g[1], {1, 2}));
}

TEST(Trace, ArityErrorsForValueArguments) {
  try {
    trace([](Value a, Value b) { return a + b; }, {f64t({2})});
    FAIL() << "one type for two arguments must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected 2"), std::string::npos) << e.what();
  }
}

// ---- trace(f, examples...): types from example arrays, as jax.make_jaxpr ----

TEST(TraceExamples, ArraysGiveTheInputTypes) {
  auto f = [](Value x, Value w) { return sum(tanh(matmul(x, w))); };
  Array x = f32_array({1, 2, 3, 4, 5, 6}, {2, 3});
  Array w = full({3, 2}, 0.1);
  Program by_example = trace(f, x, w);
  Program by_type = trace(f, {Type(f32, {2, 3}), Type(f32, {3, 2})});
  EXPECT_EQ(to_string(by_example), to_string(by_type));
  EXPECT_EQ(by_example.name, "main");
  // Only the types count: other values give the same program, and it runs as jit does.
  EXPECT_EQ(to_string(trace(f, zeros({2, 3}), ones({3, 2}))), to_string(by_type));
  EXPECT_TRUE(run(by_example, {x, w})[0].bitwise_equal(jit(f)(x, w)));
  // Integer and bool examples, and a function of no arguments.
  Program mixed =
      trace([](Value i, Value b) { return where(b, i, i + i); },
            Array::from_vector<int32_t>({1, 2}, {2}), Array::from_vector<bool>({true, false}, {2}));
  EXPECT_EQ(mixed.input_types(), (std::vector<Type>{Type(i32, {2}), Type(bool_, {2})}));
  EXPECT_TRUE(trace([] { return std::vector<Value>{}; }).inputs.empty());
}

TEST(TraceExamples, TreesGiveOneInputPerLeafInLeafOrder) {
  Tree params = Tree::dict({{"w", Tree(zeros({3, 2}))}, {"b", Tree(zeros({2}))}});
  auto f = [](Tree p, Value x) { return sum(matmul(x, p["w"].value())) + sum(p["b"].value()); };
  Program p = trace(f, params, zeros({4, 3}));
  // Dict leaves in key order (b, then w), then x.
  EXPECT_EQ(p.input_types(),
            (std::vector<Type>{Type(f32, {2}), Type(f32, {3, 2}), Type(f32, {4, 3})}));
  Array x = f32_array({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, {4, 3});
  Array w = f32_array({1, 2, 3, 4, 5, 6}, {3, 2});
  Array b = f32_array({0.5f, 0.25f}, {2});
  // sum(x @ w) = 3 + 7 + 11 + 21 = 42, sum(b) = 0.75.
  EXPECT_TRUE(ArrayNear(run(p, {b, w, x})[0], {42.75}));

  // A list of arrays for a std::vector<Value> argument, and the grad of a tree function.
  Program lst = trace([](std::vector<Value> xs) { return xs[0] + xs[1]; },
                      std::vector<Array>{zeros({2}), ones({2})});
  EXPECT_EQ(lst.input_types(), (std::vector<Type>{Type(f32, {2}), Type(f32, {2})}));
  auto loss = [](Tree p, Value x) { return sum(matmul(x, p["w"].value()) * 2.0); };
  Program g = trace(grad(loss), Tree::dict({{"w", Tree(zeros({3, 2}))}}), zeros({4, 3}));
  EXPECT_EQ(g.output_types(), (std::vector<Type>{Type(f32, {3, 2})}));
}

TEST(TraceExamples, AnExampleOfTheWrongStructureIsADrxError) {
  auto f = [](Value x) { return x * 2.0; };
  EXPECT_THROW(trace(f, Tree::list({Tree(zeros({2})), Tree(zeros({2}))})), Error);
  auto g = [](Tree p) { return p["w"].value(); };
  EXPECT_THROW(trace(g, Tree::dict({{"v", Tree(zeros({2}))}})), Error);
}

}  // namespace
}  // namespace drx::testing
