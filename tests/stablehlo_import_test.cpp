// StableHLO in, on modules written here: control flow (a counted while is
// raised to a fori_loop and reverse-differentiated; a data-dependent while,
// case and if), the generic form, sharding annotations, errors; and a
// JAX-exported corpus module differentiated with drx::grad against central
// differences.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "drx/core/program_text.h"
#include "drx/core/trace.h"
#include "drx/exec/executable.h"
#include "drx/stablehlo/import.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace shlo = drx::stablehlo;

// The program's first output as a function of its inputs, inside a trace.
Value call(const Program& p, const std::vector<Value>& args) { return inline_program(p, args)[0]; }

const char* kCountedWhile = R"(module @m {
  func.func public @main(%x: tensor<3xf64>) -> tensor<3xf64> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%i = %c0, %acc = %x) : tensor<i32>, tensor<3xf64>
     cond {
      %n = stablehlo.constant dense<4> : tensor<i32>
      %p = stablehlo.compare  LT, %i, %n,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      %s = stablehlo.sine %acc : tensor<3xf64>
      %t = stablehlo.add %s, %acc : tensor<3xf64>
      stablehlo.return %j, %t : tensor<i32>, tensor<3xf64>
    }
    return %0#1 : tensor<3xf64>
  }
})";

TEST(StablehloImport, CountedWhileIsAForiLoopAndReverseDifferentiates) {
  Program p = from_stablehlo(kCountedWhile);
  const std::string text = to_string(p);
  EXPECT_NE(text.find("scan"), std::string::npos) << text;
  EXPECT_EQ(text.find("while_loop"), std::string::npos) << text;
  Array x = f64_array({0.3, -1.2, 2.0}, {3});
  Array got = compile(p).run({x})[0];
  for (int64_t k = 0; k < 3; ++k) {
    double v = x.data<double>()[k];
    for (int i = 0; i < 4; ++i) v = std::sin(v) + v;
    EXPECT_NEAR(got.data<double>()[k], v, 1e-14);
  }
  // d/dx of sum(loop(x)) by drx::grad against central differences.
  auto f = [p](Value v) { return sum(call(p, {v})); };
  Array g = jit(grad(f))(x);
  auto fj = jit(f);
  for (int64_t k = 0; k < 3; ++k) {
    Array lo = f64_array(to_doubles(x), {3}), hi = f64_array(to_doubles(x), {3});
    lo.data<double>()[k] -= 1e-6;
    hi.data<double>()[k] += 1e-6;
    const double fd = (fj(hi).item<double>() - fj(lo).item<double>()) / 2e-6;
    EXPECT_NEAR(g.data<double>()[k], fd, 1e-7 * std::max(1.0, std::abs(fd)));
  }
}

TEST(StablehloImport, DataDependentWhileCaseAndIf) {
  const char* text = R"(module {
  func.func public @main(%x: tensor<f32>, %k: tensor<i32>, %b: tensor<i1>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
    %0 = stablehlo.while(%v = %x) : tensor<f32>
     cond {
      %lim = stablehlo.constant dense<100.0> : tensor<f32>
      %p = stablehlo.compare  LT, %v, %lim,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %two = stablehlo.constant dense<2.0> : tensor<f32>
      %w = stablehlo.multiply %v, %two : tensor<f32>
      stablehlo.return %w : tensor<f32>
    }
    %1 = "stablehlo.case"(%k) ({
      %a = stablehlo.negate %x : tensor<f32>
      stablehlo.return %a : tensor<f32>
    }, {
      %a = stablehlo.exponential %x : tensor<f32>
      stablehlo.return %a : tensor<f32>
    }, {
      %a = stablehlo.add %x, %x : tensor<f32>
      stablehlo.return %a : tensor<f32>
    }) : (tensor<i32>) -> tensor<f32>
    %2 = "stablehlo.if"(%b) ({
      stablehlo.return %x : tensor<f32>
    }, {
      %a = stablehlo.sqrt %x : tensor<f32>
      stablehlo.return %a : tensor<f32>
    }) : (tensor<i1>) -> tensor<f32>
    return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
  }
})";
  Program p = from_stablehlo(text);
  EXPECT_NE(to_string(p).find("while_loop"), std::string::npos);
  Executable e = compile(p);
  auto run = [&](float x, int32_t k, bool b) {
    return e.run({Array::scalar(x), Array::scalar(k), Array::from_vector<bool>({b}, {})});
  };
  std::vector<Array> r = run(3.0f, 1, true);
  EXPECT_EQ(r[0].item<float>(), 192.0f);  // 3 * 2^6, the first value >= 100
  EXPECT_FLOAT_EQ(r[1].item<float>(), std::exp(3.0f));
  EXPECT_EQ(r[2].item<float>(), 3.0f);
  EXPECT_EQ(run(4.0f, 0, false)[1].item<float>(), -4.0f);
  EXPECT_FLOAT_EQ(run(4.0f, 0, false)[2].item<float>(), 2.0f);
  // An index out of range takes the last branch (the spec's rule).
  EXPECT_EQ(run(4.0f, 7, true)[1].item<float>(), 8.0f);
  EXPECT_EQ(run(4.0f, -1, true)[1].item<float>(), 8.0f);
  EXPECT_TRUE(BitwiseEqual(e.run({Array::scalar(3.0f), Array::scalar(int32_t{2}),
                                  Array::from_vector<bool>({false}, {})}),
                           interpret(p, {Array::scalar(3.0f), Array::scalar(int32_t{2}),
                                         Array::from_vector<bool>({false}, {})})));
}

TEST(StablehloImport, GenericFormShardingNotesAndErrors) {
  const char* text = R"(module @jit_f attributes {mhlo.num_partitions = 2 : i32} {
  func.func public @main(%a: tensor<2xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}, %b: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "stablehlo.add"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{replicated}"} : (tensor<2xf32>) -> tensor<2xf32>
    %2 = "stablehlo.multiply"(%1, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %2 : tensor<2xf32>
  }
})";
  shlo::ImportedModule m = shlo::import_module(shlo::parse_mlir(text));
  EXPECT_GE(m.sharding_notes.size(), 2u);
  Array got = compile(m.program).run({f32_array({1, 2}, {2}), f32_array({3, -4}, {2})})[0];
  EXPECT_TRUE(ArrayNear(got, {16, 4}, 0, 0));
  const std::string unsupported = R"(func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.tanh %a : tensor<4xf32>
    %1 = "stablehlo.fft"(%0) {fft_type = #stablehlo<fft_type FFT>, fft_length = array<i64: 4>} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  })";
  expect_error([&] { from_stablehlo(unsupported); }, {"line 3", "stablehlo.fft", "not supported"});
  const std::string bad_type = R"(func.func @main(%a: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
    return %a : tensor<4xf8E4M3FN>
  })";
  expect_error([&] { from_stablehlo(bad_type); },
               {"line 1", "f8E4M3FN", "unsupported element type"});
  const std::string undefined = R"(func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %zz : tensor<4xf32>
    return %0 : tensor<4xf32>
  })";
  expect_error([&] { from_stablehlo(undefined); }, {"line 2", "%zz"});
}

// ---- sort and scatter: their regions matched against known forms ----------------

// jnp.argsort's comparator (keys canonicalised, compared in total order), an
// integer sort descending along axis 1, and a raw total-order sort.
const char* kSorts = R"(module @jit_sorts {
  func.func public @main(%x: tensor<6xf32>, %y: tensor<2x3xi32>, %z: tensor<5xf32>) -> (tensor<6xf32>, tensor<6xi32>, tensor<2x3xi32>, tensor<5xf32>) {
    %0 = stablehlo.iota dim = 0 : tensor<6xi32>
    %1:2 = "stablehlo.sort"(%x, %0) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>, %arg3: tensor<i32>, %arg4: tensor<i32>):
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %2 = stablehlo.compare  EQ, %arg1, %cst,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %3 = stablehlo.select %2, %cst_0, %arg1 : tensor<i1>, tensor<f32>
      %4 = stablehlo.compare  NE, %arg1, %arg1,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %cst_1 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
      %5 = stablehlo.select %4, %cst_1, %3 : tensor<i1>, tensor<f32>
      %6 = stablehlo.compare  EQ, %arg2, %cst,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %7 = stablehlo.select %6, %cst_0, %arg2 : tensor<i1>, tensor<f32>
      %8 = stablehlo.compare  NE, %arg2, %arg2,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %9 = stablehlo.select %8, %cst_1, %7 : tensor<i1>, tensor<f32>
      %10 = stablehlo.compare  LT, %5, %9,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %10 : tensor<i1>
    }) : (tensor<6xf32>, tensor<6xi32>) -> (tensor<6xf32>, tensor<6xi32>)
    %11 = "stablehlo.sort"(%y) <{dimension = -1 : i64}> ({
    ^bb0(%a: tensor<i32>, %b: tensor<i32>):
      %c = stablehlo.compare  LT, %b, %a,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    %12 = "stablehlo.sort"(%z) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.compare  LT, %a, %b,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) : (tensor<5xf32>) -> tensor<5xf32>
    return %1#0, %1#1, %11, %12 : tensor<6xf32>, tensor<6xi32>, tensor<2x3xi32>, tensor<5xf32>
  }
})";

TEST(StablehloImport, SortComparatorsOfJaxAndOthersMatchHandComputed) {
  Program p = from_stablehlo(kSorts);
  const float nan = std::nanf(""), minus_nan = -std::nanf("");
  Array x = f32_array({1.0f, nan, -0.0f, 0.0f, -INFINITY, 1.0f}, {6});
  Array y = Array::from_vector<int32_t>({3, -1, 3, 0, 7, 0}, {2, 3});
  Array z = f32_array({0.0f, -0.0f, nan, minus_nan, 1.0f}, {5});
  std::vector<Array> r = compile(p).run({x, y, z});
  ASSERT_EQ(r.size(), 4u);
  // NaN last, -0.0 tied with 0.0 (so they keep their order), equal values stable.
  const float* v = r[0].data<float>();
  EXPECT_EQ(v[0], -INFINITY);
  EXPECT_TRUE(v[1] == 0.0f && std::signbit(v[1]));
  EXPECT_TRUE(v[2] == 0.0f && !std::signbit(v[2]));
  EXPECT_TRUE(v[3] == 1.0f && v[4] == 1.0f && std::isnan(v[5]));
  EXPECT_TRUE(ArrayNear(r[1], {4, 2, 3, 0, 5, 1}, 0, 0));
  EXPECT_TRUE(ArrayNear(r[2], {3, 3, -1, 7, 0, 0}, 0, 0));  // lhs after rhs: descending
  // Total order as written: -NaN < -0.0 < 0.0 < 1 < NaN.
  const float* t = r[3].data<float>();
  EXPECT_TRUE(std::isnan(t[0]) && std::signbit(t[0]));
  EXPECT_TRUE(t[1] == 0.0f && std::signbit(t[1]));
  EXPECT_TRUE(t[2] == 0.0f && !std::signbit(t[2]));
  EXPECT_EQ(t[3], 1.0f);
  EXPECT_TRUE(std::isnan(t[4]) && !std::signbit(t[4]));
  // The interpreter agrees with the compiled program.
  EXPECT_TRUE(BitwiseEqual(interpret(p, {x, y, z}), r));
}

// x.at[i].set(u) as JAX writes it (index vectors of one element; a repeated
// index keeps the last update, out-of-range ones are skipped), and a
// scatter-add whose window dim follows the scatter dim in the updates.
const char* kScatters = R"(module @jit_scatters {
  func.func public @main(%x: tensor<5xf32>, %i: tensor<5x1xi32>, %u: tensor<5xf32>, %y: tensor<2x3xf32>, %j: tensor<2xi64>, %v: tensor<2x2xf32>) -> (tensor<5xf32>, tensor<2x3xf32>) {
    %0 = "stablehlo.scatter"(%x, %i, %u) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg0: tensor<f32>, %arg1: tensor<f32>):
      stablehlo.return %arg1 : tensor<f32>
    }) : (tensor<5xf32>, tensor<5x1xi32>, tensor<5xf32>) -> tensor<5xf32>
    %1 = "stablehlo.scatter"(%y, %j, %v) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1], index_vector_dim = 1>}> ({
    ^bb0(%arg0: tensor<f32>, %arg1: tensor<f32>):
      %s = stablehlo.add %arg0, %arg1 : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2x3xf32>, tensor<2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
    return %0, %1 : tensor<5xf32>, tensor<2x3xf32>
  }
})";

TEST(StablehloImport, ScatterSetAndAddMatchHandComputed) {
  Program p = from_stablehlo(kScatters);
  std::vector<Array> args = {f32_array({0, 1, 2, 3, 4}, {5}),
                             Array::from_vector<int32_t>({1, 3, 1, 7, -1}, {5, 1}),
                             f32_array({10, 20, 30, 40, 50}, {5}),
                             f32_array({1, 2, 3, 4, 5, 6}, {2, 3}),
                             Array::from_vector<int64_t>({2, 2}, {2}),
                             f32_array({10, 20, 100, 200}, {2, 2})};
  std::vector<Array> r = compile(p).run(args);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(ArrayNear(r[0], {0, 30, 2, 20, 4}, 0, 0));
  // updates[k, r] adds to y[r, j[k]].
  EXPECT_TRUE(ArrayNear(r[1], {1, 2, 113, 4, 5, 226}, 0, 0));
  EXPECT_TRUE(BitwiseEqual(interpret(p, args), r));
}

TEST(StablehloImport, UnsupportedScatterAndSortFormsAreErrorsNamingTheLine) {
  const std::string multiply =
      R"(func.func @main(%x: tensor<4xf32>, %i: tensor<2xi32>, %u: tensor<2xf32>) -> tensor<4xf32> {
    %0 = stablehlo.tanh %x : tensor<4xf32>
    %1 = "stablehlo.scatter"(%0, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = stablehlo.multiply %a, %b : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) : (tensor<4xf32>, tensor<2xi32>, tensor<2xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  })";
  expect_error([&] { from_stablehlo(multiply); },
               {"line 3", "stablehlo.scatter", "update computation is not supported"});
  const std::string two_dims =
      R"(func.func @main(%x: tensor<4x4xf32>, %i: tensor<3x2xi32>, %u: tensor<3xf32>) -> tensor<4x4xf32> {
    %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      stablehlo.return %b : tensor<f32>
    }) : (tensor<4x4xf32>, tensor<3x2xi32>, tensor<3xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  })";
  expect_error([&] { from_stablehlo(two_dims); },
               {"line 2", "stablehlo.scatter", "inserted_window_dims [0,1]", "not supported"});
  const std::string lexicographic =
      R"(func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
    %0:2 = "stablehlo.sort"(%x, %y) <{dimension = 0 : i64}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: tensor<f32>):
      %l = stablehlo.compare  LT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %e = stablehlo.compare  EQ, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %m = stablehlo.compare  LT, %c, %d,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %n = stablehlo.and %e, %m : tensor<i1>
      %o = stablehlo.or %l, %n : tensor<i1>
      stablehlo.return %o : tensor<i1>
    }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    return %0#1 : tensor<4xf32>
  })";
  expect_error([&] { from_stablehlo(lexicographic); },
               {"line 2", "stablehlo.sort", "comparator is not supported"});
}

// ---- a JAX-exported module, differentiated -------------------------------------

std::filesystem::path corpus() {
  return std::filesystem::path(DRX_SOURCE_DIR) / ".." / "shared" / "stablehlo-testdata" / "modules";
}

// @main of a self-checking module with its @inputs() call replaced by
// arguments, its @expected() call and checks dropped: the computation as a
// function of the inputs.
shlo::Module as_function_of_inputs(shlo::Module m) {
  for (shlo::Function& f : m.functions) {
    if (f.name != "main") continue;
    shlo::Block& b = f.body.blocks[0];
    std::vector<shlo::Operation> ops;
    for (const shlo::Operation& op : b.ops) {
      const shlo::Attribute* callee = shlo::find_attribute(op.attributes, "callee");
      if (op.name == "func.call" && callee && callee->text == "inputs") {
        for (size_t i = 0; i < op.results.size(); ++i) {
          b.arguments.emplace_back(op.results[i], op.result_types[i]);
          f.arguments.emplace_back(op.results[i], op.result_types[i]);
          f.argument_attributes.emplace_back();
        }
        continue;
      }
      if (op.name == "func.call" && callee && callee->text == "expected") continue;
      if (op.name == "stablehlo.custom_call") continue;
      ops.push_back(op);
    }
    b.ops = ops;
  }
  return m;
}

TEST(StablehloImport, JaxDotGeneralModuleDifferentiatesLikeCentralDifferences) {
  const auto path = corpus() / "dot_general_float32_4_3_float64_3_6.mlir";
  if (!std::filesystem::exists(path)) {
    std::cout << "[ skipped ] no corpus module " << path << " (../shared is absent)\n";
    GTEST_SKIP();
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  // The module passes its own check as written ...
  shlo::ImportedModule self = shlo::import_module(shlo::parse_mlir(ss.str()));
  std::vector<Array> out = compile(self.program).run({});
  ASSERT_EQ(self.checks.size(), 1u);
  EXPECT_EQ(shlo::apply_check(self.checks[0], out[self.num_results + self.checks[0].actual],
                              out[self.num_results + self.checks[0].expected]),
            "");
  // ... and, as a function of its inputs (f32[4,3] x f64[3,6] -> f64[4,6]), has the
  // gradient of central differences.
  Program p = shlo::import_module(as_function_of_inputs(shlo::parse_mlir(ss.str()))).program;
  ASSERT_EQ(p.input_types().size(), 2u);
  std::vector<Array> args = {random_array(p.input_types()[0].shape, p.input_types()[0].dtype, 3),
                             random_array(p.input_types()[1].shape, p.input_types()[1].dtype, 4)};
  auto f = [p](Value a, Value b) { return sum(sin(call(p, {a, b}))); };
  std::vector<Array> g = jit(grad(f, {0, 1}))(args[0], args[1]);
  auto fj = jit(f);
  for (size_t which = 0; which < 2; ++which)
    for (int64_t k = 0; k < args[which].size(); k += 4) {
      std::vector<Array> lo = {convert_array(args[0], args[0].dtype()),
                               convert_array(args[1], args[1].dtype())};
      std::vector<Array> hi = {convert_array(args[0], args[0].dtype()),
                               convert_array(args[1], args[1].dtype())};
      const double h = 1e-3;
      auto shift = [&](Array& a, double d) {
        if (a.dtype() == f32)
          a.data<float>()[k] += static_cast<float>(d);
        else
          a.data<double>()[k] += d;
      };
      shift(lo[which], -h);
      shift(hi[which], h);
      const double fd = (fj(hi[0], hi[1]).item<double>() - fj(lo[0], lo[1]).item<double>()) /
                        (hi[which].element_as_double(k) - lo[which].element_as_double(k));
      EXPECT_NEAR(g[which].element_as_double(k), fd, 1e-3 * std::max(1.0, std::abs(fd)))
          << "input " << which << " element " << k;
    }
}

}  // namespace
}  // namespace drx::testing
