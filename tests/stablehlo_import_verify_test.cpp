// The importer checks modules against the StableHLO spec's type constraints:
// each module here breaks one (a declared result type, a function's result
// types, an SSA name defined twice, elementwise operands of different shapes,
// ...) and must be a drx::Error naming the op, the line and the constraint,
// where it used to run and give some answer. The valid modules beside them
// (promotable reduce and scatter bodies, dot_general's free result element
// type) are computed and compared with hand-computed values.
#include <string>

#include "drx/exec/executable.h"
#include "drx/stablehlo/import.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

// A one-function module `main` with these arguments, results and body.
std::string module(const std::string& args, const std::string& results, const std::string& body) {
  return "func.func @main(" + args + ") -> " + results + " {\n" + body + "\n}";
}

TEST(StablehloImportVerify, DeclaredResultShapeOfElementwiseOps) {
  // Line 2: the add's operands give tensor<2xf32>.
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>, %b: tensor<2xf32>", "tensor<3xf32>",
                              "  %0 = \"stablehlo.add\"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) "
                              "-> tensor<3xf32>\n  return %0 : tensor<3xf32>"));
      },
      {"line 2", "stablehlo.add", "declares result tensor<3xf32>", "operands give tensor<2xf32>",
       "C1"});
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>", "tensor<2x1xf32>",
                              "  %0 = \"stablehlo.exponential\"(%a) : (tensor<2xf32>) -> "
                              "tensor<2x1xf32>\n  return %0 : tensor<2x1xf32>"));
      },
      {"line 2", "stablehlo.exponential", "tensor<2x1xf32>", "C1"});
}

TEST(StablehloImportVerify, DeclaredResultElementTypeWhereTheSpecFixesIt) {
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>", "tensor<2xf64>",
                              "  %0 = \"stablehlo.negate\"(%a) : (tensor<2xf32>) -> tensor<2xf64>\n"
                              "  return %0 : tensor<2xf64>"));
      },
      {"line 2", "stablehlo.negate", "tensor<2xf64>", "tensor<2xf32>", "C1"});
  // compare's result is i1.
  expect_error(
      [] {
        from_stablehlo(
            module("%a: tensor<2xf32>", "tensor<2xf32>",
                   "  %0 = \"stablehlo.compare\"(%a, %a) {comparison_direction = "
                   "#stablehlo<comparison_direction LT>} : (tensor<2xf32>, tensor<2xf32>) -> "
                   "tensor<2xf32>\n  return %0 : tensor<2xf32>"));
      },
      {"line 2", "stablehlo.compare", "tensor<2xi1>", "C2"});
  // reshape keeps the element type.
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2x3xf32>", "tensor<6xi32>",
                              "  %0 = stablehlo.reshape %a : (tensor<2x3xf32>) -> tensor<6xi32>\n"
                              "  return %0 : tensor<6xi32>"));
      },
      {"line 2", "stablehlo.reshape", "tensor<6xi32>", "tensor<6xf32>", "C1"});
}

TEST(StablehloImportVerify, DeclaredResultShapeOfShapeOps) {
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2x3xf32>", "tensor<2x3xf32>",
                              "  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> "
                              "tensor<2x3xf32>\n  return %0 : tensor<2x3xf32>"));
      },
      {"line 2", "stablehlo.transpose", "tensor<2x3xf32>", "tensor<3x2xf32>", "permuted"});
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<5xf32>", "tensor<3xf32>",
                              "  %0 = stablehlo.slice %a [1:3] : (tensor<5xf32>) -> tensor<3xf32>\n"
                              "  return %0 : tensor<3xf32>"));
      },
      {"line 2", "stablehlo.slice", "tensor<3xf32>", "tensor<2xf32>"});
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2x3xf32>, %b: tensor<3x4xf32>", "tensor<2x3xf32>",
                              "  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
                              "(tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>\n  return %0 "
                              ": tensor<2x3xf32>"));
      },
      {"line 2", "stablehlo.dot_general", "tensor<2x3xf32>", "tensor<2x4xf32>"});
}

TEST(StablehloImportVerify, DotGeneralResultElementTypeIsFree) {
  // JAX's preferred_element_type: f32 operands, an f64 result computed in f64.
  Program p = from_stablehlo(module(
      "%a: tensor<1x2xf32>, %b: tensor<2x1xf32>", "tensor<1x1xf64>",
      "  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
      "(tensor<1x2xf32>, tensor<2x1xf32>) -> tensor<1x1xf64>\n  return %0 : tensor<1x1xf64>"));
  Array r = compile(p).run({f32_array({16777216.0f, 1.0f}, {1, 2}), f32_array({1, 1}, {2, 1})})[0];
  ASSERT_EQ(r.dtype(), DType::f64);
  EXPECT_EQ(r.data<double>()[0], 16777217.0);  // 2^24 + 1, which f32 cannot hold
}

const char* kPromotingReduce = R"(func.func @main(%x: tensor<5xf32>) -> tensor<f64> {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce"(%x, %init) ({
  ^bb0(%acc: tensor<f64>, %e: tensor<f64>):
    %s = stablehlo.add %acc, %e : tensor<f64>
    stablehlo.return %s : tensor<f64>
  }) {dimensions = array<i64: 0>} : (tensor<5xf32>, tensor<f32>) -> tensor<f64>
  return %0 : tensor<f64>
})";

TEST(StablehloImportVerify, ReduceAccumulatesInAPromotedElementType) {
  // The spec's example of promotion: f32 inputs summed by an f64 body (C6, C8).
  Program p = from_stablehlo(kPromotingReduce);
  Array r = compile(p).run({f32_array({16777216.0f, 1, 1, 1, 1}, {5})})[0];
  ASSERT_EQ(r.dtype(), DType::f64);
  EXPECT_EQ(r.item<double>(), 16777220.0);  // in f32 each + 1 would round away
  // f64 inputs do not promote to an f32 body.
  const std::string bad = R"(func.func @main(%x: tensor<5xf64>) -> tensor<f32> {
  %init = stablehlo.constant dense<0.0> : tensor<f64>
  %0 = "stablehlo.reduce"(%x, %init) ({
  ^bb0(%acc: tensor<f32>, %e: tensor<f32>):
    %s = stablehlo.add %acc, %e : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<5xf64>, tensor<f64>) -> tensor<f32>
  return %0 : tensor<f32>
})";
  expect_error([&] { from_stablehlo(bad); },
               {"line 3", "stablehlo.reduce", "declares result tensor<f32>", "tensor<f64>",
                "f64 does not promote to f32", "C8"});
}

TEST(StablehloImportVerify, ScatterUpdatesInAPromotedElementType) {
  const std::string text =
      R"(func.func @main(%x: tensor<3xf32>, %i: tensor<2x1xi32>, %u: tensor<2xf32>) -> tensor<3xf64> {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    %s = stablehlo.add %a, %b : tensor<f64>
    stablehlo.return %s : tensor<f64>
  }) : (tensor<3xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
})";
  Program p = from_stablehlo(text);
  Array r =
      compile(p).run({f32_array({16777216.0f, 0, 5}, {3}),
                      Array::from_vector<int32_t>({0, 0}, {2, 1}), f32_array({1, 1}, {2})})[0];
  ASSERT_EQ(r.dtype(), DType::f64);
  EXPECT_EQ(r.data<double>()[0], 16777218.0);  // 2^24 + 1 + 1 in f64
  EXPECT_EQ(r.data<double>()[2], 5.0);
  std::string narrowing = text;
  for (size_t at; (at = narrowing.find("f64")) != std::string::npos;)
    narrowing.replace(at, 3, "i32");
  expect_error([&] { from_stablehlo(narrowing); },
               {"line 2", "stablehlo.scatter", "f32 does not promote to i32", "C25"});
}

TEST(StablehloImportVerify, FunctionReturnsItsDeclaredResultTypes) {
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>", "tensor<3xf32>", "  return %a : tensor<2xf32>"));
      },
      {"line 2", "@main declares results (tensor<3xf32>)", "returns (tensor<2xf32>)"});
  // A called function too, and its results' count.
  const char* called = R"(module {
  func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
    %0 = func.call @f(%a) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @f(%a: tensor<2xf32>) -> tensor<2xi32> {
    return %a : tensor<2xf32>
  }
})";
  expect_error([&] { from_stablehlo(called); },
               {"line 7", "@f declares results (tensor<2xi32>)", "returns (tensor<2xf32>)"});
  // The call passes arguments of the callee's types.
  const char* arguments = R"(module {
  func.func @main(%a: tensor<2xf32>) -> tensor<3xf32> {
    %0 = func.call @f(%a) : (tensor<2xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
  func.func private @f(%a: tensor<3xf32>) -> tensor<3xf32> {
    return %a : tensor<3xf32>
  }
})";
  expect_error(
      [&] { from_stablehlo(arguments); },
      {"line 3", "func.call", "passes tensor<2xf32> as argument 0 of @f", "takes tensor<3xf32>"});
}

TEST(StablehloImportVerify, AnSsaNameIsDefinedOnce) {
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>", "tensor<2xf32>",
                              "  %0 = stablehlo.add %a, %a : tensor<2xf32>\n"
                              "  %0 = stablehlo.multiply %a, %a : tensor<2xf32>\n"
                              "  return %0 : tensor<2xf32>"));
      },
      {"line 3", "stablehlo.multiply defines %0, which line 2 already defines"});
  // An argument, and a name of the enclosing region redefined in a nested one.
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>", "tensor<2xf32>",
                              "  %a = stablehlo.negate %a : tensor<2xf32>\n"
                              "  return %a : tensor<2xf32>"));
      },
      {"line 2", "defines %a, which line 1 already defines"});
  const char* nested = R"(func.func @main(%x: tensor<f32>, %b: tensor<i1>) -> tensor<f32> {
  %0 = stablehlo.negate %x : tensor<f32>
  %1 = "stablehlo.if"(%b) ({
    %0 = stablehlo.sqrt %x : tensor<f32>
    stablehlo.return %0 : tensor<f32>
  }, {
    stablehlo.return %x : tensor<f32>
  }) : (tensor<i1>) -> tensor<f32>
  return %1 : tensor<f32>
})";
  expect_error([&] { from_stablehlo(nested); },
               {"line 4", "stablehlo.sqrt defines %0, which line 2 already defines"});
}

TEST(StablehloImportVerify, ElementwiseOperandsHaveOneShape) {
  // No implicit broadcasting: drx's add would broadcast these.
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2x3xf32>, %b: tensor<3xf32>", "tensor<2x3xf32>",
                              "  %0 = \"stablehlo.add\"(%a, %b) : (tensor<2x3xf32>, "
                              "tensor<3xf32>) -> tensor<2x3xf32>\n  return %0 : tensor<2x3xf32>"));
      },
      {"line 2", "stablehlo.add", "operand 0 is tensor<2x3xf32>", "operand 1 is tensor<3xf32>",
       "no implicit broadcasting", "C1"});
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>, %b: tensor<2xf64>", "tensor<2xf64>",
                              "  %0 = \"stablehlo.multiply\"(%a, %b) : (tensor<2xf32>, "
                              "tensor<2xf64>) -> tensor<2xf64>\n  return %0 : tensor<2xf64>"));
      },
      {"line 2", "stablehlo.multiply", "tensor<2xf64>", "C1"});
  expect_error(
      [] {
        from_stablehlo(
            module("%p: tensor<2xi1>, %a: tensor<2x2xf32>", "tensor<2x2xf32>",
                   "  %0 = \"stablehlo.select\"(%p, %a, %a) : (tensor<2xi1>, tensor<2x2xf32>, "
                   "tensor<2x2xf32>) -> tensor<2x2xf32>\n  return %0 : tensor<2x2xf32>"));
      },
      {"line 2", "stablehlo.select", "tensor<2xi1>", "C1"});
  expect_error(
      [] {
        from_stablehlo(
            module("%lo: tensor<3xf32>, %a: tensor<2x3xf32>", "tensor<2x3xf32>",
                   "  %0 = \"stablehlo.clamp\"(%lo, %a, %lo) : (tensor<3xf32>, tensor<2x3xf32>, "
                   "tensor<3xf32>) -> tensor<2x3xf32>\n  return %0 : tensor<2x3xf32>"));
      },
      {"line 2", "stablehlo.clamp", "tensor<3xf32>", "C1"});
  // Scalar bounds of clamp and a scalar predicate of select are the spec's.
  Program p = from_stablehlo(
      module("%p: tensor<i1>, %lo: tensor<f32>, %a: tensor<3xf32>", "tensor<3xf32>",
             "  %0 = stablehlo.clamp %lo, %a, %lo : (tensor<f32>, tensor<3xf32>, tensor<f32>) -> "
             "tensor<3xf32>\n  %1 = \"stablehlo.select\"(%p, %0, %a) : (tensor<i1>, "
             "tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n  return %1 : tensor<3xf32>"));
  Array r = compile(p).run(
      {Array::from_vector<bool>({true}, {}), Array::scalar(1.0f), f32_array({0, 1, 2}, {3})})[0];
  EXPECT_TRUE(ArrayNear(r, {1, 1, 1}, 0, 0));
}

TEST(StablehloImportVerify, OperandsHaveTheTypesTheOpDeclares) {
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>, %b: tensor<3xf32>", "tensor<3xf32>",
                              "  %0 = stablehlo.add %a, %b : tensor<3xf32>\n"
                              "  return %0 : tensor<3xf32>"));
      },
      {"line 2", "stablehlo.add", "operand 0 (%a) is tensor<2xf32>", "declares it tensor<3xf32>"});
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2xf32>", "tensor<2xf64>", "  return %a : tensor<2xf64>"));
      },
      {"line 2", "func.return", "operand 0 (%a) is tensor<2xf32>"});
}

TEST(StablehloImportVerify, ConstantHasItsValuesType) {
  expect_error(
      [] {
        from_stablehlo(module("", "tensor<3xf32>",
                              "  %0 = \"stablehlo.constant\"() {value = dense<1.0> : "
                              "tensor<2xf32>} : () -> tensor<3xf32>\n  return %0 : tensor<3xf32>"));
      },
      {"line 2", "stablehlo.constant", "tensor<2xf32>", "C1"});
}

TEST(StablehloImportVerify, DrxTypeErrorsInsideAFunctionReportTheLine) {
  // drx's own check (a reshape that changes the element count), given the op and line.
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<2x3xf32>", "tensor<5xf32>",
                              "  %0 = stablehlo.negate %a : tensor<2x3xf32>\n"
                              "  %1 = stablehlo.reshape %0 : (tensor<2x3xf32>) -> tensor<5xf32>\n"
                              "  return %1 : tensor<5xf32>"));
      },
      {"line 3", "stablehlo.reshape"});
}

TEST(StablehloImportVerify, FftInThePrettyFormIsNotSupported) {
  expect_error(
      [] {
        from_stablehlo(module("%a: tensor<4xf32>", "tensor<4xf32>",
                              "  %0 = stablehlo.fft %a, type = FFT, length = [4] : "
                              "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>"));
      },
      {"line 2", "stablehlo.fft", "is not supported"});
}

}  // namespace
}  // namespace drx::testing
