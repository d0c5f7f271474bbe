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

}  // namespace
}  // namespace drx::testing
