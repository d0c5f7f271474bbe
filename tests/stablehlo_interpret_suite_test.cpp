// StableHLO's own interpreter tests (../shared/stablehlo-interpret-tests, read
// in place): every test function of every file is imported, run and its check
// ops applied (drx::stablehlo::run_test_file). Prints, per op (file stem),
// cases passed / unsupported / failed, and the unsupported ones by reason; a
// case that fails by a wrong value fails the test. Also: the file format
// (modules split at `// -----`, the check dialect's forms) on hand-written
// files, the narrow integer dtypes (i2, i4, u2, u4) against hand-computed
// values, and `drx run` on such a file.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "drx/drx.h"
#include "drx/stablehlo/test_suite.h"
#include "tests/cli_util.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace fs = std::filesystem;
using stablehlo::TestCase;
using Outcome = TestCase::Outcome;

fs::path suite_dir() {
  return fs::path(DRX_SOURCE_DIR) / ".." / "shared" / "stablehlo-interpret-tests";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<Array> run_compiled(const Program& p) { return compile(p).run({}); }

// Why a case is unsupported, as a short class for the table: the feature drx
// does not hold, named by the words of the importer's message.
std::string reason_class(const std::string& message) {
  static const std::vector<std::pair<std::regex, std::string>> classes = {
      {std::regex("complex"), "complex element type"},
      {std::regex("'f[468]E[0-9A-Z]+'"), "f4/f6/f8 element type"},
      {std::regex("uniform_quantize|uniform_dequantize|!quant"), "quantized type"},
      {std::regex("interpreter\\.run_parallel|replica_id|partition_id|all_gather|all_reduce|"
                  "all_to_all|collective|reduce_scatter"),
       "collective (run_parallel, replica/partition id)"},
      {std::regex("!stablehlo\\.token|type '!'|after_all|infeed|outfeed|send|recv"),
       "token (infeed/outfeed/send/recv/after_all)"},
      {std::regex("interpreter\\.(probe|print)|probe_id"), "interpreter.probe/print"},
      {std::regex("FileCheck"), "no check op (FileCheck expectations)"},
      {std::regex("type 'tuple'|tuple"), "tuple type"},
      {std::regex("dynamic_"), "dynamic shape op"},
      {std::regex("get_dimension_size"), "dynamic shape op"},
  };
  for (const auto& [re, name] : classes)
    if (std::regex_search(message, re)) return name;
  // Otherwise the op and what the importer says of it, without line numbers.
  static const std::regex line("line [0-9]+: ");
  std::string m = std::regex_replace(message, line, "");
  if (m.rfind("stablehlo: ", 0) == 0) m = m.substr(11);
  return m.substr(0, std::min<size_t>(m.size(), 72));
}

struct OpCounts {
  int passed = 0, unsupported = 0, failed = 0;
};

// Cases known to fail by a wrong value, with the reason (none today; the lead
// decides what goes here, see the README).
const std::map<std::string, std::string>& known_failures() {
  static const std::map<std::string, std::string> known;
  return known;
}

TEST(StablehloInterpretSuite, EveryCaseDrxSupportsPassesItsChecks) {
  const fs::path dir = suite_dir();
  if (!fs::is_directory(dir))
    GTEST_SKIP() << "no StableHLO interpreter tests at " << dir << " (../shared is absent)";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".mlir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, OpCounts> ops;
  std::map<std::string, int> reasons;
  std::vector<std::string> wrong;  // "file @case: first failed check"
  OpCounts total;
  int checks = 0, differ = 0;
  for (const fs::path& f : files) {
    const std::string op = f.stem().string(), text = slurp(f);
    OpCounts& counts = ops[op];
    const std::vector<TestCase> compiled = stablehlo::run_test_file(text, run_compiled);
    // The reference interpreter gives every case the same outcome.
    const std::vector<TestCase> interpreted = stablehlo::run_test_file(text);
    EXPECT_EQ(compiled.size(), interpreted.size()) << f;
    for (size_t k = 0; k < compiled.size() && k < interpreted.size(); ++k)
      if (compiled[k].outcome != interpreted[k].outcome) {
        ++differ;
        ADD_FAILURE() << f.filename() << " @" << compiled[k].name
                      << ": compiled and interpreted differ: " << compiled[k].message << " | "
                      << interpreted[k].message;
      }
    for (const TestCase& c : compiled) {
      checks += c.checks;
      if (c.outcome == Outcome::passed) {
        ++counts.passed, ++total.passed;
      } else if (c.outcome == Outcome::unsupported) {
        ++counts.unsupported, ++total.unsupported;
        ++reasons[reason_class(c.message)];
      } else {
        ++counts.failed, ++total.failed;
        if (!known_failures().count(op + "@" + c.name))
          wrong.push_back(f.filename().string() + " @" + c.name + ": " + c.message);
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int cases = total.passed + total.unsupported + total.failed;
  std::cout << "StableHLO interpreter suite: " << files.size() << " files, " << cases
            << " test functions: " << total.passed << " passed (" << checks << " checks), "
            << total.unsupported << " unsupported, " << total.failed << " failed (" << std::fixed
            << std::setprecision(2) << seconds << " s)\n"
            << "  per op: passed/unsupported/failed";
  int column = 0;
  for (const auto& [name, n] : ops)
    std::cout << (column++ % 5 == 0 ? "\n    " : "  ") << name << " " << n.passed << "/"
              << n.unsupported << "/" << n.failed;
  std::cout << "\n  unsupported by reason:\n";
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [r, n] : reasons) by_count.emplace_back(n, r);
  std::sort(by_count.rbegin(), by_count.rend());
  for (const auto& [n, r] : by_count) std::cout << "    " << n << "  " << r << "\n";
  for (const std::string& w : wrong) std::cout << "  WRONG VALUE: " << w << "\n";

  EXPECT_TRUE(wrong.empty()) << wrong.size() << " cases fail by a wrong value (listed above)";
  EXPECT_EQ(differ, 0);
  ASSERT_EQ(files.size(), 101u);
  EXPECT_EQ(cases, 513);
  // A floor at what this revision reaches: a regression (a case that used to
  // pass and is now unsupported) fails here.
  EXPECT_GE(total.passed, 322);  // +8: convolution (5), reduce_window (2), select_and_scatter (1)
}

// ---- the file format, on hand-written files ---------------------------------

// Three modules: a passing case, a failing one (i4 wraps: 7 + 1 = -8, not 8,
// which i4 cannot hold, so the expected -7 is wrong) and one drx cannot parse.
const char* const kFile = R"(// RUN: stablehlo-translate --interpret -split-input-file %s

func.func @adds_wrap() {
  %0 = stablehlo.constant dense<[7, -8, 3]> : tensor<3xi4>
  %1 = stablehlo.constant dense<[1, -1, 2]> : tensor<3xi4>
  %2 = stablehlo.add %0, %1 : tensor<3xi4>
  check.expect_eq_const %2, dense<[-8, 7, 5]> : tensor<3xi4>
  %3 = stablehlo.constant dense<[15, 0]> : tensor<2xui4>
  %4 = stablehlo.constant dense<[1, 1]> : tensor<2xui4>
  %5 = stablehlo.subtract %4, %3 : tensor<2xui4>
  check.expect_eq_const %5, dense<[2, 1]> : tensor<2xui4>
  func.return
}

// -----

func.func @wrong_expectation() {
  %0 = stablehlo.constant dense<7> : tensor<i4>
  %1 = stablehlo.constant dense<1> : tensor<i4>
  %2 = stablehlo.add %0, %1 : tensor<i4>
  check.expect_eq_const %2, dense<-7> : tensor<i4>
  check.expect_eq_const %1, dense<1> : tensor<i4>
  func.return
}

// -----

func.func @complex_case() {
  %0 = stablehlo.constant dense<(1.0, 2.0)> : tensor<complex<f32>>
  func.return
}
)";

TEST(StablehloInterpretSuite, SplitsModulesKeepingTheFileLines) {
  const std::vector<std::string> modules = stablehlo::split_modules(kFile);
  ASSERT_EQ(modules.size(), 3u);
  // The second module's func.func is on line 17 of the file, and stays there.
  const std::string& second = modules[1];
  const size_t at = second.find("func.func @wrong_expectation");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(std::count(second.begin(), second.begin() + static_cast<long>(at), '\n'), 16);
  EXPECT_EQ(modules[0].find("wrong_expectation"), std::string::npos);
}

TEST(StablehloInterpretSuite, RunsEveryTestFunctionAndReportsEachOnesChecks) {
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "interpreted");
    const std::vector<TestCase> cases = stablehlo::run_test_file(
        kFile, compiled ? stablehlo::ProgramRunner(run_compiled) : stablehlo::ProgramRunner());
    ASSERT_EQ(cases.size(), 3u);
    EXPECT_EQ(cases[0].name, "adds_wrap");
    EXPECT_EQ(cases[0].line, 3);
    EXPECT_EQ(cases[0].outcome, Outcome::passed) << cases[0].message;
    EXPECT_EQ(cases[0].checks, 2);
    EXPECT_EQ(cases[1].name, "wrong_expectation");
    EXPECT_EQ(cases[1].line, 17);
    EXPECT_EQ(cases[1].outcome, Outcome::failed);
    EXPECT_EQ(cases[1].checks, 2);
    EXPECT_EQ(cases[1].checks_failed, 1);
    EXPECT_NE(cases[1].message.find("line 21"), std::string::npos) << cases[1].message;
    EXPECT_NE(cases[1].message.find("is -8.0"), std::string::npos) << cases[1].message;
    EXPECT_EQ(cases[2].name, "complex_case");
    EXPECT_EQ(cases[2].line, 28);
    EXPECT_EQ(cases[2].outcome, Outcome::unsupported);
    EXPECT_NE(cases[2].message.find("line 29"), std::string::npos) << cases[2].message;
    EXPECT_NE(cases[2].message.find("complex"), std::string::npos) << cases[2].message;
  }
}

// One module holding `body` as the test function @t.
std::vector<TestCase> run_one(const std::string& body) {
  return stablehlo::run_test_file("func.func @t() {\n" + body + "  func.return\n}\n");
}

TEST(StablehloInterpretSuite, CheckDialectFormsAndTheirRules) {
  struct Case {
    const char* body;
    Outcome want;
  };
  const Case cases[] = {
      // expect_eq: exact, NaN equal to NaN.
      {"  %0 = stablehlo.constant dense<[1.5, 0x7FC00000]> : tensor<2xf32>\n"
       "  check.expect_eq_const %0, dense<[1.5, 0x7FC00000]> : tensor<2xf32>\n",
       Outcome::passed},
      {"  %0 = stablehlo.constant dense<1.5> : tensor<f32>\n"
       "  check.expect_eq_const %0, dense<1.50000012> : tensor<f32>\n",
       Outcome::failed},
      {"  %0 = stablehlo.constant dense<[-2, 2]> : tensor<2xi64>\n"
       "  %1 = stablehlo.constant dense<[-2, 2]> : tensor<2xi64>\n"
       "  check.expect_eq %0, %1 : tensor<2xi64>\n",
       Outcome::passed},
      // expect_almost_eq: default tolerance 1e-4; an explicit one either way.
      {"  %0 = stablehlo.constant dense<0.5> : tensor<f64>\n"
       "  check.expect_almost_eq_const %0, dense<0.50005> : tensor<f64>\n",
       Outcome::passed},
      {"  %0 = stablehlo.constant dense<0.5> : tensor<f64>\n"
       "  check.expect_almost_eq_const %0, dense<0.5002> : tensor<f64>\n",
       Outcome::failed},
      {"  %0 = stablehlo.constant dense<0.5> : tensor<f64>\n"
       "  check.expect_almost_eq_const %0, dense<0.55> : tensor<f64> {tolerance = 0.1 : f64}\n",
       Outcome::passed},
      {"  %0 = stablehlo.constant dense<0.5> : tensor<f64>\n"
       "  %1 = stablehlo.constant dense<0.55> : tensor<f64>\n"
       "  check.expect_almost_eq %0, %1, tolerance = 0.01 : tensor<f64>\n",
       Outcome::failed},
      // Of opposite signs, never almost equal (as the interpreter says).
      {"  %0 = stablehlo.constant dense<-0.00001> : tensor<f64>\n"
       "  check.expect_almost_eq_const %0, dense<0.00001> : tensor<f64>\n",
       Outcome::failed},
      // expect_close: within max_ulp_difference values of the type. f16 1.0
      // is 0x3C00; 0x3C03 is 3 ULP above it, 0x3C04 four.
      {"  %0 = stablehlo.constant dense<0x3C00> : tensor<f16>\n"
       "  %1 = stablehlo.constant dense<0x3C03> : tensor<f16>\n"
       "  check.expect_close %0, %1, max_ulp_difference = 3 : tensor<f16>, tensor<f16>\n",
       Outcome::passed},
      {"  %0 = stablehlo.constant dense<0x3C00> : tensor<f16>\n"
       "  %1 = stablehlo.constant dense<0x3C04> : tensor<f16>\n"
       "  check.expect_close %0, %1, max_ulp_difference = 3 : tensor<f16>, tensor<f16>\n",
       Outcome::failed},
      // Across zero: -0x0001 and 0x0001 are two values apart.
      {"  %0 = stablehlo.constant dense<0x8001> : tensor<f16>\n"
       "  %1 = stablehlo.constant dense<0x0001> : tensor<f16>\n"
       "  check.expect_close %0, %1, max_ulp_difference = 2 : tensor<f16>, tensor<f16>\n",
       Outcome::passed},
      // A check drx does not apply is unsupported, not passed.
      {"  %0 = stablehlo.constant dense<1> : tensor<i64>\n"
       "  check.expect_serialized_eq %0, probe_id = \"p\" : tensor<i64>\n",
       Outcome::unsupported},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const std::vector<TestCase> r = run_one(c.body);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].outcome, c.want) << r[0].message;
  }
}

TEST(StablehloInterpretSuite, ACheckComparingTwoTypesIsAnErrorNamingBoth) {
  const std::vector<TestCase> r = run_one(
      "  %0 = stablehlo.constant dense<1.0> : tensor<f32>\n"
      "  %1 = stablehlo.constant dense<1.0> : tensor<f64>\n"
      "  check.expect_eq %0, %1 : tensor<f32>, tensor<f64>\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::unsupported);
  EXPECT_NE(r[0].message.find("f32[]"), std::string::npos) << r[0].message;
  EXPECT_NE(r[0].message.find("f64[]"), std::string::npos) << r[0].message;
}

// ---- narrow integers ---------------------------------------------------------

// The narrow integers' values after each op, against hand-computed ones:
// arithmetic wraps modulo 2^bits, conversions from floats saturate.
TEST(NarrowIntegers, ArithmeticWrapsToTheirWidthInterpretedAndCompiled) {
  struct Case {
    DType dtype;
    std::vector<double> x, y, sum, product, difference;
  };
  const Case cases[] = {
      // i4: [-8, 7]. 7 + 1 = 8 -> -8; -8 * -1 = 8 -> -8; -8 - 1 = -9 -> 7.
      {i4, {7, -8, 3, -8}, {1, -1, 4, 1}, {-8, 7, 7, -7}, {7, -8, -4, -8}, {6, -7, -1, 7}},
      // u4: [0, 15]. 15 + 1 = 0; 0 - 1 = 15; 5 * 4 = 20 -> 4.
      {u4, {15, 0, 5, 9}, {1, 1, 4, 9}, {0, 1, 9, 2}, {15, 0, 4, 1}, {14, 15, 1, 0}},
      // i2: [-2, 1]. 1 + 1 = -2; -2 - 1 = 1.
      {i2, {1, -2, 1, 0}, {1, 1, -1, -2}, {-2, -1, 0, -2}, {1, -2, -1, 0}, {0, 1, -2, -2}},
      // u2: [0, 3]. 3 + 1 = 0; 0 - 1 = 3; 3 * 3 = 9 -> 1.
      {u2, {3, 0, 2, 3}, {1, 1, 2, 3}, {0, 1, 0, 2}, {3, 0, 0, 1}, {2, 3, 0, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)));
    const Array x = convert_array(Array::from_vector<double>(c.x, {4}), c.dtype);
    const Array y = convert_array(Array::from_vector<double>(c.y, {4}), c.dtype);
    ASSERT_EQ(x.dtype(), c.dtype);
    auto f = [](std::vector<Value> v) -> Tree {
      return Tree::list({Tree(v[0] + v[1]), Tree(v[0] * v[1]), Tree(v[0] - v[1])});
    };
    const Program p = trace(f, {Type(c.dtype, {4}), Type(c.dtype, {4})});
    for (bool compiled : {false, true}) {
      const std::vector<Array> out = compiled ? compile(p).run({x, y}) : drx::run(p, {x, y});
      ASSERT_EQ(out.size(), 3u);
      const std::vector<double>* want[] = {&c.sum, &c.product, &c.difference};
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(out[k].dtype(), c.dtype);
        for (int64_t i = 0; i < 4; ++i)
          EXPECT_EQ(out[k].element_as_double(i), (*want[k])[static_cast<size_t>(i)])
              << (compiled ? "compiled" : "interpreted") << " output " << k << " element " << i;
      }
    }
  }
}

// A chain of ops (which the executor could fuse) wraps after every op, as
// StableHLO's i4 does: w(v) = ((v + 8) mod 16) - 8 applied to each result.
TEST(NarrowIntegers, ChainsWrapAfterEveryOpInterpretedAndCompiled) {
  const Program p = parse_program(R"(program @main (%0: i4[4], %1: i4[4]) -> (i4[4]) {
  %2 = add %0, %1 : i4[4]
  %3 = mul %2, %0 : i4[4]
  %4 = sub %3, %1 : i4[4]
  %5 = neg %4 : i4[4]
  return %5
}
)");
  const Array x = convert_array(Array::from_vector<double>({7, -8, 3, 5}, {4}), i4);
  const Array y = convert_array(Array::from_vector<double>({1, -1, 4, -6}, {4}), i4);
  // 7+1=8->-8, *7=-56->8->-8, -1=-9->7, neg=-7; -8-1=-9->7, *-8=-56->-8, +1=-7, neg 7;
  // 3+4=7, *3=21->5, -4=1, neg -1; 5-6=-1, *5=-5, +6=1, neg -1.
  const double want[] = {-7, 7, -1, -1};
  for (bool compiled : {false, true}) {
    const Array r = compiled ? compile(p).run({x, y})[0] : drx::run(p, {x, y})[0];
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(r.element_as_double(i), want[i]) << (compiled ? "compiled " : "interpreted ") << i;
  }
}

TEST(NarrowIntegers, ConversionsSaturateFromFloatsAndWrapFromIntegers) {
  const Array f = Array::from_vector<double>({100.0, -100.0, 3.9, -3.9, NAN}, {5});
  const Array i4f = convert_array(f, i4), u4f = convert_array(f, u4);
  const double want_i4[] = {7, -8, 3, -3, 0}, want_u4[] = {15, 0, 3, 0, 0};
  for (int64_t k = 0; k < 5; ++k) {
    EXPECT_EQ(i4f.element_as_double(k), want_i4[k]) << k;
    EXPECT_EQ(u4f.element_as_double(k), want_u4[k]) << k;
  }
  // From integers, modulo 2^bits: 20 = 0b10100 -> i4 4, i2 0; -1 -> u4 15, u2 3.
  const Array n = Array::from_vector<int32_t>({20, -1, 6}, {3});
  const double want_i4n[] = {4, -1, 6}, want_i2n[] = {0, -1, -2}, want_u4n[] = {4, 15, 6},
               want_u2n[] = {0, 3, 2};
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(convert_array(n, i4).element_as_double(k), want_i4n[k]) << k;
    EXPECT_EQ(convert_array(n, i2).element_as_double(k), want_i2n[k]) << k;
    EXPECT_EQ(convert_array(n, u4).element_as_double(k), want_u4n[k]) << k;
    EXPECT_EQ(convert_array(n, u2).element_as_double(k), want_u2n[k]) << k;
  }
  // And back out: i4 -3 is -3 in every wider type, u4 15 is 15.
  EXPECT_EQ(convert_array(convert_array(n, i4), f32).element_as_double(1), -1.0);
  EXPECT_EQ(convert_array(full({}, 15, u4), i64).data<int64_t>()[0], 15);
  EXPECT_EQ(full({}, 1000, i4).element_as_double(0), 7.0);  // full saturates as convert does
}

TEST(NarrowIntegers, NamesTextAndStableHloTypes) {
  EXPECT_EQ(dtype_from_name("i4"), i4);
  EXPECT_EQ(dtype_from_name("u2"), u2);
  EXPECT_TRUE(is_integer(i2) && !is_unsigned(i2) && is_unsigned(u4) && is_narrow_integer(u4));
  EXPECT_EQ(dtype_size(i4), 1u);
  // Program text: an i4 constant prints and reads back, and out-of-range
  // elements are refused naming the type.
  const Program p = trace(
      [](Value x) {
        return x + constant(convert_array(Array::from_vector<double>({-8, 7}, {2}), i4));
      },
      {Type(i4, {2})});
  const std::string text = to_string(p);
  EXPECT_NE(text.find("i4[2]{-8, 7}"), std::string::npos) << text;
  EXPECT_EQ(to_string(parse_program(text)), text);
  std::string bad = text;
  bad.replace(bad.find("{-8, 7}"), 7, "{-9, 7}");
  try {
    parse_program(bad);
    ADD_FAILURE() << "an i4 element -9 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range for i4"), std::string::npos) << e.what();
  }
  // StableHLO: a constant out of range is malformed.
  const std::vector<TestCase> r = run_one(
      "  %0 = stablehlo.constant dense<8> : tensor<i4>\n"
      "  check.expect_eq_const %0, dense<8> : tensor<i4>\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].outcome, Outcome::unsupported);
  EXPECT_NE(r[0].message.find("out of range for i4"), std::string::npos) << r[0].message;
}

// A logical right shift of i4, computed in i8, would shift the sign
// extension's ones in: refused rather than wrong (u4 is exact).
TEST(NarrowIntegers, LogicalShiftOfSignedNarrowIntegersIsRefused) {
  try {
    trace([](Value a, Value b) { return shift_right_logical(a, b); },
          {Type(i4, {2}), Type(i4, {2})});
    ADD_FAILURE() << "shift_right_logical on i4 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not i2 or i4"), std::string::npos) << e.what();
  }
  const Array x = convert_array(Array::from_vector<double>({8, 15}, {2}), u4);
  const Array s = convert_array(Array::from_vector<double>({1, 2}, {2}), u4);
  const Program p = trace([](Value a, Value b) { return shift_right_logical(a, b); },
                          {Type(u4, {2}), Type(u4, {2})});
  const Array r = drx::run(p, {x, s})[0];
  EXPECT_EQ(r.element_as_double(0), 4.0);
  EXPECT_EQ(r.element_as_double(1), 3.0);
}

// ---- drx run ------------------------------------------------------------------

TEST(StablehloInterpretSuite, DrxRunReportsEachTestFunctionAndFailsOnAFailedCheck) {
  const fs::path path = fs::path(::testing::TempDir()) / "drx_interpret_suite_test.mlir";
  std::ofstream(path) << kFile;
  for (const char* mode : {"--interpret", ""}) {
    std::vector<std::string> args = {"run", path.string()};
    if (*mode) args.push_back(mode);
    const CliResult r = cli(args);
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("@adds_wrap (line 3): 2 checks passed\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("@wrong_expectation (line 17): FAILED 1 of 2 checks: line 21"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("@complex_case (line 28): unsupported: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("3 test functions: 1 passed, 1 failed, 1 unsupported\n"),
              std::string::npos)
        << r.out;
  }
  // Without the failing module: exit code 0.
  std::string ok = kFile;
  const size_t from = ok.find("// -----"), to = ok.find("// -----", from + 1);
  ok.erase(from, to - from);
  std::ofstream(path) << ok;
  const CliResult r = cli({"run", path.string()});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 test functions: 1 passed, 0 failed, 1 unsupported\n"), std::string::npos)
      << r.out;
  // --arg does not apply to test functions without arguments.
  const CliResult usage = cli({"run", path.string(), "--arg", "1"});
  EXPECT_EQ(usage.code, 2) << usage.out << usage.err;
  EXPECT_NE(usage.err.find("--arg, --out and --print do not apply"), std::string::npos)
      << usage.err;
  fs::remove(path);
}

}  // namespace
}  // namespace drx::testing
