// Inputs on which the libFuzzer targets in fuzz/ (scripts/fuzz.sh) found a crash or a
// sanitizer report. Each must now end the documented way: a drx::Error, or success.
#include <string>

#include "drx/exec/executable.h"
#include "drx/stablehlo/import.h"
#include "drx/stablehlo/mlir_ast.h"
#include "tests/test_util.h"

namespace drx::testing {

namespace {

::testing::AssertionResult ParseThrows(const std::string& text, const std::string& part) {
  try {
    parse_program(text);
    return ::testing::AssertionFailure() << "parsed without error:\n" << text;
  } catch (const Error& e) {
    if (std::string(e.what()).find(part) == std::string::npos)
      return ::testing::AssertionFailure()
             << "message \"" << e.what() << "\" lacks \"" << part << "\"";
    return ::testing::AssertionSuccess();
  }
}

// A StableHLO module (fuzz/stablehlo_fuzz.cpp) that must be rejected with a drx::Error whose
// message holds `part`, by the importer or, for a module it takes, by compile or run.
::testing::AssertionResult ImportThrows(const std::string& text, const std::string& part) {
  try {
    stablehlo::ImportedModule m = stablehlo::import_module(stablehlo::parse_mlir(text));
    compile(m.program).run({});
    return ::testing::AssertionFailure() << "imported and ran without error:\n" << text;
  } catch (const Error& e) {
    if (std::string(e.what()).find(part) == std::string::npos)
      return ::testing::AssertionFailure()
             << "message \"" << e.what() << "\" lacks \"" << part << "\"";
    return ::testing::AssertionSuccess();
  }
}

// A @main of one gather of a 5x3 operand by 2x1 indices, with the given attributes.
std::string gather_module(const std::string& attributes, const std::string& result) {
  return "func.func @main() -> " + result +
         " {\n"
         "  %a = stablehlo.constant dense<1.0> : tensor<5x3xf32>\n"
         "  %i = stablehlo.constant dense<[[4], [1]]> : tensor<2x1xi64>\n"
         "  %0 = \"stablehlo.gather\"(%a, %i) <{" +
         attributes + "}> : (tensor<5x3xf32>, tensor<2x1xi64>) -> " + result +
         "\n"
         "  return %0 : " +
         result + "\n}\n";
}

// A @main of one and-reduce of a 2x3 i1 operand along `dimensions`.
std::string reduce_module(const std::string& dimensions) {
  return "func.func @main() -> tensor<3xi1> {\n"
         "  %x = stablehlo.constant dense<true> : tensor<2x3xi1>\n"
         "  %c = stablehlo.constant dense<true> : tensor<i1>\n"
         "  %0 = \"stablehlo.reduce\"(%x, %c) <{dimensions = " +
         dimensions +
         "}> ({\n"
         "  ^bb0(%a: tensor<i1>, %b: tensor<i1>):\n"
         "    %r = \"stablehlo.and\"(%a, %b) : (tensor<i1>, tensor<i1>) -> tensor<i1>\n"
         "    \"stablehlo.return\"(%r) : (tensor<i1>) -> ()\n"
         "  }) : (tensor<2x3xi1>, tensor<i1>) -> tensor<3xi1>\n"
         "  return %0 : tensor<3xi1>\n}\n";
}

}  // namespace

// std::out_of_range (from vector::at) and out-of-bounds reads in the StableHLO importer's
// gather, which trusted its dimension_numbers: the fuzzer's inputs were JAX gather modules
// with a field name mutated (so the parser filled that field in as empty), or with more
// offset_dims than the result has axes. Now every spec constraint the import relies on is
// checked, the declared result shape included.
TEST(FuzzRegression, StablehloGatherWithInconsistentDimensionNumbers) {
  const std::string dn = "dimension_numbers = #stablehlo.gather<";
  const std::string ok =
      "offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], "
      "index_vector_dim = 1>, slice_sizes = array<i64: 1, 3>";
  const std::string r23 = "tensor<2x3xf32>";
  // The consistent form imports and runs.
  stablehlo::ImportedModule m =
      stablehlo::import_module(stablehlo::parse_mlir(gather_module(dn + ok, r23)));
  EXPECT_EQ(compile(m.program).run({}).at(0).shape(), (Shape{2, 3}));
  // collapsed_slice_dims misspelled (so empty): one offset dim for two windowed axes.
  EXPECT_TRUE(ImportThrows(
      gather_module(dn + "offset_dims = [1], collapsed_slice_0dims = [0], start_index_map = [0], "
                         "index_vector_dim = 1>, slice_sizes = array<i64: 1, 3>",
                    r23),
      "the result's rank does not follow"));
  // No offset_dims at all.
  EXPECT_TRUE(ImportThrows(
      gather_module(dn + "collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = "
                         "1>, slice_sizes = array<i64: 1, 3>",
                    r23),
      "stablehlo.gather"));
  // An offset dim past the result's rank, slice_sizes too short, a start_index_map of two
  // components for index vectors of one, an index_vector_dim past the indices' rank.
  EXPECT_TRUE(ImportThrows(gather_module(dn + "offset_dims = [2], collapsed_slice_dims = [0], "
                                              "start_index_map = [0], index_vector_dim = 1>, "
                                              "slice_sizes = array<i64: 1, 3>",
                                         r23),
                           "invalid dimension_numbers"));
  EXPECT_TRUE(ImportThrows(gather_module(dn + "offset_dims = [1], collapsed_slice_dims = [0], "
                                              "start_index_map = [0], index_vector_dim = 1>, "
                                              "slice_sizes = array<i64: 1>",
                                         r23),
                           "slice_sizes needs one size per operand axis"));
  EXPECT_TRUE(ImportThrows(gather_module(dn + "offset_dims = [1], collapsed_slice_dims = [0], "
                                              "start_index_map = [0, 1], index_vector_dim = 1>, "
                                              "slice_sizes = array<i64: 1, 3>",
                                         r23),
                           "invalid dimension_numbers"));
  EXPECT_TRUE(ImportThrows(gather_module(dn + "offset_dims = [1], collapsed_slice_dims = [0], "
                                              "start_index_map = [0], index_vector_dim = 3>, "
                                              "slice_sizes = array<i64: 1, 3>",
                                         r23),
                           "index_vector_dim"));
  // Consistent dimension numbers, but a declared result shape they do not give.
  EXPECT_TRUE(ImportThrows(gather_module(dn + ok, "tensor<2x2xf32>"), "declares result shape"));
}

// std::out_of_range in the importer's reduce (shape.at(d)): `dimensions = [5]` on a rank-2
// operand. Its dimensions were never checked; a repeated one could also overflow the element
// count. And std::invalid_argument from std::stoll on dimensions written as a dense<> of
// non-integers.
TEST(FuzzRegression, StablehloReduceAlongAxesTheOperandLacks) {
  EXPECT_TRUE(ImportThrows(reduce_module("array<i64: 5>"), "dimensions must be distinct axes"));
  EXPECT_TRUE(ImportThrows(reduce_module("array<i64: -1>"), "dimensions must be distinct axes"));
  EXPECT_TRUE(ImportThrows(reduce_module("array<i64: 0, 0>"), "dimensions must be distinct axes"));
  EXPECT_TRUE(ImportThrows(reduce_module("dense<[true]> : tensor<1xi1>"),
                           "dimensions must hold integers, not true"));
  EXPECT_TRUE(ImportThrows(reduce_module("dense<[1.5]> : tensor<1xf64>"),
                           "dimensions must hold integers, not 1.5"));
  stablehlo::ImportedModule m =
      stablehlo::import_module(stablehlo::parse_mlir(reduce_module("array<i64: 0>")));
  EXPECT_EQ(compile(m.program).run({}).at(0).shape(), (Shape{3}));
}

// Out of memory (std::bad_alloc, or the sanitizer's allocator report) importing a splat
// constant: dense<1.0> of 10^11 elements is a few bytes of text. The importer now refuses
// constants of more than 2^28 elements.
TEST(FuzzRegression, StablehloSplatConstantTooLargeToHold) {
  EXPECT_TRUE(
      ImportThrows("func.func @main() -> tensor<100000000000xf32> {\n"
                   "  %c = stablehlo.constant dense<1.0> : tensor<100000000000xf32>\n"
                   "  return %c : tensor<100000000000xf32>\n}\n",
                   "of more than 2^28 elements is not supported"));
}

// UBSan: signed overflow in num_elements(), called by reshape's type rule on its `shape`
// attribute, which (unlike a declared type) nothing bounds.
TEST(FuzzRegression, ReshapeToAShapeWhoseElementCountOverflows) {
  const std::string text =
      "program @m (%0: f32[2]) -> (f32[2]) {\n"
      "  %1 = reshape[shape=[4294967296,4294967296,2]] %0 : f32[2]\n"
      "  return %1\n"
      "}\n";
  EXPECT_TRUE(ParseThrows(text, "more than 2^63 elements"));
}

// UBSan: signed overflow in strides_of() (slice, iota) and in concatenate's kernel. The
// parser bounded a type's element count, which is 0 here, so [0, 2^62, 2^62] got through and
// the kernels multiplied the dims after the zero one.
TEST(FuzzRegression, ZeroSizeTypeWhoseOtherDimsOverflow) {
  EXPECT_TRUE(
      ParseThrows("program @m (%0: f32[0,4611686018427387904,4611686018427387904]) -> "
                  "(f32[0,4611686018427387904,1]) {\n"
                  "  %1 = slice[limits=[0,4611686018427387904,1], starts=[0,0,0]] %0 : "
                  "f32[0,4611686018427387904,1]\n"
                  "  return %1\n"
                  "}\n",
                  "too many elements"));
  EXPECT_TRUE(ParseThrows(
      "program @m () -> (f32[0,4611686018427387904,4611686018427387904]) {\n"
      "  %1 = iota[dimension=2, dtype=f32, shape=[0,4611686018427387904,4611686018427387904]] "
      ": f32[0,4611686018427387904,4611686018427387904]\n"
      "  return %1\n"
      "}\n",
      "too many elements"));
}

// The tighter bound still takes empty types with large dims, and the reshape check counts
// a shape with a zero dim as empty.
TEST(FuzzRegression, ZeroSizeTypesWithLargeDimsStillWork) {
  const std::string text =
      "program @m (%0: f32[0,4294967296]) -> (f32[4294967296,0,1024]) {\n"
      "  %1 = reshape[shape=[4294967296,0,1024]] %0 : f32[4294967296,0,1024]\n"
      "  return %1\n"
      "}\n";
  Program p = parse_program(text);
  EXPECT_EQ(to_string(p), text);
  std::vector<Array> out = run(p, {Array(DType::f32, {0, 4294967296})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{4294967296, 0, 1024}));
}

// UBSan: signed overflow summing the operands' sizes along the axis in concatenate's type
// rule. Each operand has the largest size a type may have (2^53), so it takes 1025 of them;
// the fuzzer's input was this text with the operand list written out.
TEST(FuzzRegression, ConcatenateWhoseAxisSizeOverflows) {
  std::string operands = "%0";
  for (int i = 1; i < 1025; ++i) operands += ", %0";
  const std::string text = "program @m (%0: f32[9007199254740992]) -> (f32[2]) {\n" +
                           ("  %1 = concatenate[axis=0] " + operands) +
                           " : f32[2]\n"
                           "  return %1\n"
                           "}\n";
  EXPECT_TRUE(ParseThrows(text, "concatenate: 1025 operands like f32[9007199254740992]"));
}

}  // namespace drx::testing
