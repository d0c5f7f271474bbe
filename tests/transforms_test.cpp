// Every differentiable primitive, through the public ops: gradients against
// finite differences, vjp against jvp, vmap against a loop (float64).
#include "transform_checks.h"

namespace drx::testing {
namespace {

using V = std::vector<Value>;

std::vector<OpCase> unary_cases() {
  std::vector<OpCase> cs;
  auto add = [&](std::string n, Value (*fn)(const Value&), double lo, double hi) {
    cs.push_back({n, [fn](const V& x) { return fn(x[0]); }, {{2, 3}}, lo, hi});
  };
  add("exp", exp, -1, 1);
  add("log", log, 0.5, 2);
  add("log1p", log1p, -0.5, 1);
  add("tanh", tanh, -2, 2);
  add("logistic", logistic, -3, 3);
  add("sqrt", sqrt, 0.5, 2);
  add("rsqrt", rsqrt, 0.5, 2);
  add("abs", abs, 0.2, 1);
  add("sin", sin, -3, 3);
  add("cos", cos, -3, 3);
  add("neg", neg, -1, 1);
  add("square", square, -1, 1);
  add("relu", relu, 0.1, 1);
  add("sign", sign, 0.1, 1);
  cs.push_back({"relu_negative", [](const V& x) { return relu(x[0]); }, {{4}}, -1, -0.1});
  cs.push_back({"scalar_exp", [](const V& x) { return exp(x[0]) * 2.0; }, {{}}, -1, 1});
  return cs;
}

std::vector<OpCase> binary_cases() {
  return {
      {"add", [](const V& x) { return x[0] + x[1]; }, {{2, 3}, {2, 3}}},
      {"sub_broadcast", [](const V& x) { return x[0] - x[1]; }, {{2, 3}, {3}}},
      {"mul_broadcast", [](const V& x) { return x[0] * x[1]; }, {{2, 1}, {1, 3}}},
      {"div", [](const V& x) { return x[0] / x[1]; }, {{2, 3}, {2, 3}}, 0.5, 2},
      {"pow", [](const V& x) { return pow(x[0], x[1]); }, {{2, 3}, {2, 3}}, 0.5, 2},
      {"maximum", [](const V& x) { return maximum(x[0], x[1] + 3.0); }, {{5}, {5}}},
      {"minimum", [](const V& x) { return minimum(x[0], x[1] + 3.0); }, {{5}, {5}}},
      {"where",
       [](const V& x) { return where(greater(x[0], x[1]), x[0] * x[1], x[0] - x[1]); },
       {{2, 3}, {2, 3}}},
      {"scalar_ops",
       [](const V& x) { return (1.0 - x[0]) / 2.0 + 3.0 * x[0] - x[0] / (x[0] + 2.0); },
       {{3}}},
  };
}

std::vector<OpCase> reduction_and_linalg_cases() {
  return {
      {"sum_all", [](const V& x) { return sum(x[0]); }, {{2, 3}}},
      {"sum_axes",
       [](const V& x) {
         return sum(x[0], {0, 2});
       },
       {{2, 3, 2}}},
      {"sum_keepdims", [](const V& x) { return sum(x[0], {-1}, true) * x[0]; }, {{2, 3}}},
      {"mean", [](const V& x) { return mean(x[0], {1}); }, {{2, 3}}},
      {"max", [](const V& x) { return max(x[0], {1}); }, {{2, 3}}},
      {"min", [](const V& x) { return min(x[0], {0}); }, {{2, 3}}},
      {"matmul", [](const V& x) { return matmul(x[0], x[1]); }, {{2, 3}, {3, 4}}},
      {"matmul_batched", [](const V& x) { return matmul(x[0], x[1]); }, {{2, 2, 3}, {2, 3, 2}}},
      {"dot_general",
       [](const V& x) {
         return dot_general(x[0], x[1], {{1}, {0}, {2}, {2}});
       },
       {{2, 3, 2}, {3, 4, 2}}},
      {"logsumexp", [](const V& x) { return logsumexp(x[0], {1}); }, {{2, 3}}},
      {"softmax", [](const V& x) { return softmax(x[0], -1); }, {{2, 3}}},
      {"log_softmax", [](const V& x) { return log_softmax(x[0], 0); }, {{2, 3}}},
  };
}

std::vector<OpCase> shape_cases() {
  Array idx = Array::from_vector<int32_t>({2, 0, 2, 1}, {2, 2});
  return {
      {"reshape",
       [](const V& x) {
         return reshape(x[0], {3, 2}) * 2.0;
       },
       {{2, 3}}},
      {"transpose",
       [](const V& x) {
         return transpose(x[0], {2, 0, 1});
       },
       {{2, 3, 2}}},
      {"broadcast_to",
       [](const V& x) {
         return broadcast_to(x[0], {2, 3, 2});
       },
       {{3, 1}}},
      {"expand_squeeze", [](const V& x) { return squeeze(expand_dims(x[0], 1), 1) * x[0]; }, {{3}}},
      {"concatenate",
       [](const V& x) {
         return concatenate({x[0], x[1], x[0]}, 1);
       },
       {{2, 1}, {2, 3}}},
      {"slice",
       [](const V& x) {
         return slice(x[0], {1, 0}, {3, 2});
       },
       {{3, 3}}},
      {"take", [idx](const V& x) { return take(x[0], constant(idx), 1); }, {{2, 3}}},
      {"scatter_add",
       [idx](const V& x) { return scatter_add(x[0], constant(idx), x[1], 0); },
       {{3, 2}, {2, 2, 2}}},
  };
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> all;
  for (auto fam : {unary_cases, binary_cases, reduction_and_linalg_cases, shape_cases})
    for (OpCase& c : fam()) all.push_back(std::move(c));
  return all;
}

TEST(Transforms, GradMatchesFiniteDifferences) {
  for (const OpCase& c : all_cases())
    for (uint64_t seed : {1, 2}) EXPECT_TRUE(GradMatchesFiniteDifferences(c, seed)) << c.name;
}

TEST(Transforms, VjpAgreesWithJvp) {
  for (const OpCase& c : all_cases())
    for (uint64_t seed : {3, 4}) EXPECT_TRUE(VjpMatchesJvp(c, seed)) << c.name;
}

TEST(Transforms, VmapMatchesLoopLeadingAxis) {
  for (const OpCase& c : all_cases()) EXPECT_TRUE(VmapMatchesLoop(c, 5, 0)) << c.name;
}

TEST(Transforms, VmapMatchesLoopTrailingAxis) {
  for (const OpCase& c : all_cases()) EXPECT_TRUE(VmapMatchesLoop(c, 6, -1)) << c.name;
}

}  // namespace
}  // namespace drx::testing
