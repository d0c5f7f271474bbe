// User-facing error messages: each names the public operation, the types or
// values involved and the fix, and keeps its exception type.
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace drx::testing {
namespace {

::testing::AssertionResult HasAll(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    if (text.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << p << "' not found in: " << text;
  return ::testing::AssertionSuccess();
}

// The message of the exception of type E that `fn` throws (a failure if none).
template <class E, class F>
std::string message_of(F fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

// ---- map_fn: wrong client count under inferred placements --------------------

Value scale_clients(Value w, Value xs) {
  return reduce_sum(map_fn([](Value wi, Value xi) { return sum(wi * xi); }, broadcast(w), xs));
}

TEST(Errors, MapFnNamesLeadingDimensionAgainstPlacementSize) {
  auto round = program({{"clients", 8}}, scale_clients);
  std::string m = message_of<Error>([&] {
    jit(round)(full({3}, 1.0, f32), full({7, 4, 3}, 1.0, f32));
  });
  EXPECT_TRUE(
      HasAll(m, {"map_fn", "f32[7,4,3]", "program argument 1", "leading dimension 7",
                 "size 8 of placement 'clients'", "in_placements",
                 "drx::program({{\"clients\", 8}}, f, /*in_placements=*/{\"\", \"clients\"})"}));
  EXPECT_EQ(m.find("broadcast server values"), std::string::npos) << m;
}

TEST(Errors, MapFnNamesAmbiguousPlacements) {
  auto f = program({{"clients", 4}, {"groups", 4}}, [](Value xs) {
    return reduce_sum(map_fn([](Value xi) { return sum(xi); }, xs));
  });
  std::string m = message_of<Error>([&] { jit(f)(full({4, 2}, 1.0, f32)); });
  EXPECT_TRUE(HasAll(
      m, {"map_fn", "f32[4,2]", "leading dimension 4", "several placements ('clients', 'groups')",
          "in_placements", "/*in_placements=*/{\"clients\"}"}));
}

TEST(Errors, MapFnUnplacedServerValueStillSuggestsBroadcast) {
  // A value computed on the server (not a program argument) is a plain mistake.
  auto f = program({{"clients", 8}}, [](Value w, Value xs) {
    return reduce_sum(map_fn([](Value wi, Value xi) { return sum(wi * xi); }, w * 2.0, xs));
  });
  std::string m = message_of<Error>([&] { jit(f)(full({3}, 1.0, f32), full({8, 3}, 1.0, f32)); });
  EXPECT_TRUE(HasAll(m, {"map_fn", "argument leaf 0 (f32[3])", "is not placed",
                         "broadcast server values with drx::broadcast"}));
  EXPECT_EQ(m.find("in_placements"), std::string::npos) << m;
}

TEST(Errors, MapFnWithRightClientCountStillRuns) {
  auto round = program({{"clients", 8}}, scale_clients);
  Array y = jit(round)(full({3}, 1.0, f32), full({8, 4, 3}, 2.0, f32));
  EXPECT_TRUE(ArrayNear(y, {8 * 4 * 3 * 2.0}));
  // The same with placements given explicitly.
  auto explicit_round = program({{"clients", 8}}, scale_clients, {"", "clients"});
  EXPECT_TRUE(
      ArrayNear(jit(explicit_round)(full({3}, 1.0, f32), full({8, 4, 3}, 2.0, f32)), {192.0}));
}

// ---- grad with respect to integer arguments ----------------------------------

Value int_scaled(Value x, Value n) { return sum(x * astype(n, x.dtype())); }

TEST(Errors, GradOfIntegerArgumentNamesArgumentAndAllowInt) {
  Array x = full({3}, 2.0, f32), n = full({3}, 3.0, i32);
  std::string m = message_of<TypeError>([&] { jit(grad(int_scaled, 1))(x, n); });
  EXPECT_TRUE(HasAll(m, {"grad", "argument 1", "integer", "i32[3]", "floating-point",
                         "drx::grad(f, 1, drx::GradOptions{.allow_int = true})"}));

  m = message_of<TypeError>([&] { jit(value_and_grad(int_scaled, 1))(x, n); });
  EXPECT_TRUE(HasAll(m, {"value_and_grad", "argument 1", "i32[3]",
                         "drx::value_and_grad(f, 1, drx::GradOptions{.allow_int = true})"}));

  m = message_of<TypeError>([&] { jit(grad(int_scaled, {0, 1}))(x, n); });
  EXPECT_TRUE(HasAll(m, {"grad", "argument 1", "i32[3]",
                         "drx::grad(f, {0, 1}, drx::GradOptions{.allow_int = true})"}));

  auto masked = [](Value x, Value keep) { return sum(where(keep, x, zeros_like(x))); };
  m = message_of<TypeError>([&] { jit(grad(masked, 1))(x, Array(bool_, {3})); });
  EXPECT_TRUE(HasAll(m, {"grad", "argument 1", "bool", "bool[3]", "allow_int"}));
}

TEST(Errors, GradOfIntegerTreeLeafNamesTheLeaf) {
  auto f = [](Tree p) { return sum(p["w"].value() * astype(p["n"].value(), f32)); };
  Tree p = Tree::dict({{"n", full({2}, 1.0, i64)}, {"w", full({2}, 1.0, f32)}});
  std::string m = message_of<TypeError>([&] { jit(grad(f))(p); });
  EXPECT_TRUE(HasAll(m, {"grad", "argument 0", "leaf ['n']", "i64[2]", "allow_int"}));
}

TEST(Errors, GradAllowIntGivesZerosOfTheArgumentDtype) {
  Array x = full({3}, 2.0, f32), n = full({3}, 3.0, i32);
  Array g = jit(grad(int_scaled, 1, GradOptions{.allow_int = true}))(x, n);
  EXPECT_EQ(g.dtype(), i32);
  EXPECT_EQ(g.shape(), Shape({3}));
  EXPECT_TRUE(ArrayNear(g, {0, 0, 0}));

  std::vector<Array> gs = jit(grad(int_scaled, {0, 1}, GradOptions{.allow_int = true}))(x, n);
  ASSERT_EQ(gs.size(), 2u);
  EXPECT_TRUE(ArrayNear(gs[0], {3, 3, 3}));
  EXPECT_EQ(gs[1].dtype(), i32);
  EXPECT_TRUE(ArrayNear(gs[1], {0, 0, 0}));

  auto [v, gv] = jit(value_and_grad(int_scaled, 1, GradOptions{.allow_int = true}))(x, n);
  EXPECT_TRUE(ArrayNear(v, {18}));
  EXPECT_TRUE(ArrayNear(gv, {0, 0, 0}));
}

TEST(Errors, GradOfFloatArgumentsUnchanged) {
  Array x = full({3}, 2.0, f32), n = full({3}, 3.0, i32);
  // Only the differentiated argument is checked: an integer argument beside it is fine.
  EXPECT_TRUE(ArrayNear(jit(grad(int_scaled))(x, n), {3, 3, 3}));
  EXPECT_TRUE(ArrayNear(jit(grad(int_scaled, 0, GradOptions{}))(x, n), {3, 3, 3}));
  auto f = [](Value a) { return sum(a * a); };
  EXPECT_TRUE(ArrayNear(jit(grad(f))(f64_array({1, 2}, {2})), {2, 4}));
}

// ---- matmul / dot_general dtype mismatch -------------------------------------

TEST(Errors, MatmulDtypeMismatchNamesMatmulAndSuggestsAstype) {
  auto f = [](Value a, Value b) { return matmul(a, b); };
  std::string m = message_of<TypeError>([&] { jit(f)(Array(f32, {4, 3}), Array(f64, {3})); });
  EXPECT_TRUE(
      HasAll(m, {"matmul", "different dtypes", "f32[4,3]", "f64[3]", "drx::astype(b, drx::f32)"}));
  EXPECT_EQ(m.find("dot_general"), std::string::npos) << m;

  m = message_of<TypeError>([&] { jit(f)(Array(bool_, {2, 2}), Array(bool_, {2, 2})); });
  EXPECT_TRUE(HasAll(m, {"matmul", "bool[2,2]", "drx::astype"}));
}

TEST(Errors, DotGeneralDtypeMismatchSuggestsAstype) {
  auto f = [](Value a, Value b) { return dot_general(a, b, {{1}, {0}, {}, {}}); };
  std::string m = message_of<TypeError>([&] { jit(f)(Array(f64, {4, 3}), Array(f32, {3, 2})); });
  EXPECT_TRUE(HasAll(m, {"dot_general", "different dtypes", "f64[4,3]", "f32[3,2]",
                         "drx::astype(rhs, drx::f64)"}));
}

TEST(Errors, MatmulOfMatchingDtypesStillRuns) {
  auto f = [](Value a, Value b) { return matmul(a, b); };
  Array y = jit(f)(f64_array({1, 2, 3, 4}, {2, 2}), f64_array({1, 1}, {2}));
  EXPECT_TRUE(ArrayNear(y, {3, 7}));
}

// ---- errors while tracing a body say where -----------------------------------

Value mismatched_matmul(Value x) { return sum(matmul(x, astype(x, f64))); }

TEST(Errors, MapFnBodyErrorSaysWhereAndKeepsType) {
  auto f = program({{"clients", 2}}, [](Value xs) {
    return reduce_sum(map_fn([](Value xi) { return mismatched_matmul(xi); }, xs));
  });
  std::string m = message_of<TypeError>([&] { jit(f)(Array(f32, {2, 3, 3})); });
  EXPECT_TRUE(HasAll(m, {"matmul: operands have different dtypes", "f32[3,3]",
                         "\n  in the map_fn body (placement 'clients')"}));
}

TEST(Errors, CondBranchErrorSaysWhichBranch) {
  auto branch_error = [](bool fail_in_true) {
    auto f = [fail_in_true](Value p, Value x) {
      BranchFn bad = [](const Tree& s) { return Tree(mismatched_matmul(s.value())); };
      BranchFn good = [](const Tree& s) { return Tree(sum(s.value())); };
      return cond(p, fail_in_true ? bad : good, fail_in_true ? good : bad, Tree(x)).value();
    };
    Array pred(bool_, {});
    return message_of<TypeError>([&] { jit(f)(pred, Array(f32, {2, 2})); });
  };
  std::string m = branch_error(true);
  EXPECT_TRUE(HasAll(m, {"matmul", "\n  in the true branch of cond"}));
  EXPECT_EQ(m.find("false branch"), std::string::npos) << m;
  m = branch_error(false);
  EXPECT_TRUE(HasAll(m, {"matmul", "\n  in the false branch of cond"}));
}

TEST(Errors, GradFunctionErrorSaysWhere) {
  std::string m = message_of<TypeError>([&] { jit(grad(mismatched_matmul))(Array(f32, {2, 2})); });
  EXPECT_TRUE(HasAll(m, {"matmul", "\n  in the function differentiated by grad"}));
  m = message_of<TypeError>([&] { jit(value_and_grad(mismatched_matmul))(Array(f32, {2, 2})); });
  EXPECT_TRUE(HasAll(m, {"matmul", "\n  in the function differentiated by value_and_grad"}));
}

TEST(Errors, NestedBodiesGiveOneLineEachInnermostFirst) {
  // grad of a program whose map_fn body takes a grad that fails.
  auto round = program({{"clients", 2}}, [](Value w, Value xs) {
    return reduce_sum(
        map_fn([](Value wi, Value xi) { return sum(grad(mismatched_matmul)(wi) * xi); },
               broadcast(w), xs));
  });
  std::string m = message_of<TypeError>([&] {
    jit(grad(round))(Array(f32, {3, 3}), Array(f32, {2, 3, 3}));
  });
  const std::string want =
      "\n  in the function differentiated by grad"
      "\n  in the map_fn body (placement 'clients')"
      "\n  in the function differentiated by grad";
  EXPECT_TRUE(HasAll(m, {"matmul: operands have different dtypes", want}));
  // The original message comes first, then exactly those three context lines.
  EXPECT_EQ(m.substr(m.size() - want.size()), want) << m;
}

TEST(Errors, ErrorsOutsideBodiesGetNoContext) {
  auto f = [](Value a, Value b) { return matmul(a, b); };
  std::string m = message_of<TypeError>([&] { jit(f)(Array(f32, {4, 3}), Array(f64, {3})); });
  EXPECT_EQ(m.find("\n  in "), std::string::npos) << m;
}

}  // namespace
}  // namespace drx::testing
