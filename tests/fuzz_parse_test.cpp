// Seeded fuzzing of the program parser: every mutation of valid program text
// either parses (and then verifies and round-trips) or throws drx::Error.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>

#include "drx/core/primitive.h"
#include "tests/test_util.h"

namespace drx::testing {

std::vector<Program> ir_text_coverage_programs();  // tests/ir_text_test.cpp

namespace {

// Fragments that push the parser into its error paths: huge numbers, broken
// brackets and names, references, a whole extra program.
const std::vector<std::string> kFragments = {"%",          "%99999999999",
                                             "%7",         "@",
                                             "@x",         "@constants",
                                             "[",          "]",
                                             "{",          "}",
                                             "(",          ")",
                                             ",",          ":",
                                             "=",          "->",
                                             "-",          "1e999",
                                             "-1",         "0",
                                             "2147483648", "99999999999999999999",
                                             "\"",         "\"\\",
                                             "f33",        "bool",
                                             "nan",        "-inf",
                                             "1.",         "1.5",
                                             "//",         "\n",
                                             " ",          "return",
                                             "program",    "\xff",
                                             "\\x",        "neg",
                                             "i32[2]",     "f32[]{1}",
                                             "[0,1]",      "program @q () -> () {\n  return\n}\n"};

std::string mutate(const std::string& text, std::mt19937_64& rng) {
  std::string s = text;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  int rounds = 1 + static_cast<int>(rng() % 3);
  for (int r = 0; r < rounds; ++r) {
    size_t at = pick(s.size() + 1);
    switch (rng() % 6) {
      case 0:  // truncate
        s.resize(at);
        break;
      case 1:  // overwrite one byte
        if (at < s.size()) s[at] = static_cast<char>(rng() % 256);
        break;
      case 2:  // delete a short range
        s.erase(at, 1 + pick(8));
        break;
      case 3:  // insert a fragment
        s.insert(at, kFragments[pick(kFragments.size())]);
        break;
      case 4: {  // change a number in place (var ids, dims, axes, literals)
        size_t d = s.find_first_of("0123456789", at);
        if (d == std::string::npos) break;
        size_t e = s.find_first_not_of("0123456789", d);
        static const char* const kNumbers[] = {"0", "1", "2", "3", "5", "64", "1000000"};
        s.replace(d, (e == std::string::npos ? s.size() : e) - d, kNumbers[pick(7)]);
        break;
      }
      default: {  // move a line elsewhere
        size_t b = s.rfind('\n', at == 0 ? 0 : at - 1);
        b = b == std::string::npos ? 0 : b + 1;
        size_t e = s.find('\n', b);
        if (e == std::string::npos) break;
        std::string line = s.substr(b, e - b + 1);
        s.erase(b, line.size());
        s.insert(pick(s.size() + 1), line);
        break;
      }
    }
  }
  return s;
}

}  // namespace

TEST(IrTextFuzz, MutatedProgramsParseOrThrowDrxError) {
  std::vector<std::string> seeds;
  for (const Program& p : ir_text_coverage_programs()) seeds.push_back(to_string(p));
  // Sub-programs, placements and quoted names in one seed.
  seeds.push_back(
      "program @main [clients=8] (%0: f32[8,2]@clients) -> (f32[]) {\n"
      "  %1 = constant[body=@\"sub 1\", value=f32[]{3}] : f32[]\n"
      "  return %1\n"
      "}\n\n"
      "program @\"sub 1\" (%0: f32[2]) -> (f32[2]) {\n"
      "  %1 = constant[other=@leaf, s=\"a\\\"b\", value=f32[2]{1.5, -inf}] : f32[2]\n"
      "  %2 = add %0, %1 : f32[2]\n"
      "  return %2\n"
      "}\n\n"
      "program @leaf () -> () {\n  return\n}\n");
  for (const std::string& s : seeds) ASSERT_NO_THROW(parse_program(s)) << s;

  // DRX_FUZZ_SCALE=N runs N times as many mutations, from a seed that varies with N.
  const char* scale_env = std::getenv("DRX_FUZZ_SCALE");
  const int scale = scale_env ? std::max(1, std::atoi(scale_env)) : 1;
  std::mt19937_64 rng(20240601 + static_cast<uint64_t>(scale) - 1);
  int parsed = 0, rejected = 0;
  const int per_seed = 700 * scale;
  auto start = std::chrono::steady_clock::now();
  for (const std::string& seed : seeds) {
    for (int i = 0; i < per_seed; ++i) {
      std::string text = mutate(seed, rng);
      try {
        Program p = parse_program(text);
        // Whatever parses is well formed and prints stably.
        verify(p);
        std::string printed = to_string(p);
        ASSERT_EQ(to_string(parse_program(printed)), printed) << "mutant:\n" << text;
        ++parsed;
      } catch (const Error&) {
        ++rejected;
      } catch (const std::exception& e) {
        FAIL() << "non-drx exception " << typeid(e).name() << ": " << e.what() << "\nmutant:\n"
               << text;
      }
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The mutations reach both outcomes (a fuzzer that only ever fails is not exploring).
  EXPECT_GT(parsed, 50);
  EXPECT_GT(rejected, 1000);
  RecordProperty("parsed", parsed);
  RecordProperty("rejected", rejected);
  RecordProperty("seconds", std::to_string(seconds));
}

}  // namespace drx::testing
