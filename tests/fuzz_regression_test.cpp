// Inputs on which the libFuzzer targets in fuzz/ (scripts/fuzz.sh) found a crash or a
// sanitizer report. Each must now end the documented way: a drx::Error, or success.
#include <string>

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

}  // namespace

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
