// The one compile seam: compile(program, options) for any registered backend.
#include <atomic>

#include "tests/test_util.h"

namespace drx::testing {
namespace {

Program small_round() {
  return trace(program({{"clients", 4}},
                       [](Value w, Value xs) -> Value {
                         Value g = map_fn([](Value wi, Value xi) { return sum(tanh(xi * wi)); },
                                          broadcast(w), xs);
                         return w * reduce_mean(g);
                       },
                       {"", "clients"}),
               {Type(f64, {3}), Type(f64, {4, 3})});
}

TEST(CompileSeam, TheInterpreterBackendRunsTheReferenceSemantics) {
  const Program p = small_round();
  const std::vector<Array> args = {random_array({3}, f64, 1), random_array({4, 3}, f64, 2)};
  CompileOptions options;
  options.backend = "interpreter";
  const Executable e = compile(p, options);
  EXPECT_TRUE(BitwiseEqual(e.run(args), interpret(p, args)));
  EXPECT_EQ(e.stats().kernels, 0u);
  expect_error([&] { e.run({args[0]}); }, {"run", "1", "2"});
  const void* ins[2] = {args[0].raw(), args[1].raw()};
  void* outs[1] = {nullptr};
  expect_error([&] { e.run_raw(ins, outs); }, {"run_raw", "cpu backend"});
}

TEST(CompileSeam, OptionsSimplifyAndMeshAreThoseOfTheCpuBackend) {
  const Program p = small_round();
  const std::vector<Array> args = {random_array({3}, f64, 3), random_array({4, 3}, f64, 4)};
  CompileOptions options;
  options.simplify = true;
  options.mesh = Mesh({{"clients", 2}});
  const Executable e = compile(p, options);
  EXPECT_TRUE(BitwiseEqual(e.run(args), compile(simplify(p), Mesh({{"clients", 2}})).run(args)));
  EXPECT_EQ(to_string(e.program()), to_string(simplify(p)));
  EXPECT_GT(e.stats().kernels, 0u);
}

TEST(CompileSeam, UnknownBackendsAndTakenNamesAreErrors) {
  CompileOptions options;
  options.backend = "tpu";
  expect_error([&] { compile(small_round(), options); },
               {"compile", "'tpu'", "cpu", "interpreter"});
  expect_error([] { register_backend("cpu", exec::compile_cpu); }, {"register_backend", "'cpu'"});
  expect_error([] { register_backend("", exec::compile_cpu); }, {"register_backend", "empty name"});
}

TEST(CompileSeam, ASecondBackendPlugsInAndJitUsesIt) {
  // A backend of the test's own: counts its compiles, runs on the cpu backend.
  static std::atomic<int> compiles{0};
  static const bool registered = [] {
    register_backend("counting", [](const Program& p, const CompileOptions& o) {
      ++compiles;
      return exec::compile_cpu(p, o);
    });
    return true;
  }();
  ASSERT_TRUE(registered);
  const std::vector<std::string> names = backend_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "counting"), names.end());
  const int before = compiles.load();
  JitOptions options;
  options.backend = "counting";
  auto f = jit([](Value x) { return sum(x * x); }, options);
  const Array a = f64_array({1, 2, 3}, {3});
  EXPECT_EQ(f(a).item<double>(), 14.0);
  EXPECT_EQ(f(a).item<double>(), 14.0);
  EXPECT_EQ(compiles.load() - before, 1);  // once per signature
  options.backend = "interpreter";
  EXPECT_EQ(jit([](Value x) { return sum(x * x); }, options)(a).item<double>(), 14.0);
  EXPECT_STREQ(precision_name(Precision::highest), "highest");
}

}  // namespace
}  // namespace drx::testing
