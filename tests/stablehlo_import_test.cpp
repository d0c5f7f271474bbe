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
