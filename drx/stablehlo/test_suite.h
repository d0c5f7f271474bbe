#pragma once
// StableHLO's reference-interpreter test files (stablehlo/tests/interpret/*.mlir):
// several modules separated by `// -----` lines, each with test functions
// that take no arguments and compare what they compute with the check
// dialect (check.expect_eq_const, check.expect_almost_eq, ...). This runs
// every test function of such a file and says, per function, whether its
// checks held, failed, or whether drx cannot express it (an unsupported op,
// element type or feature: the drx::Error that said so).
#include <functional>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/ir/program.h"

namespace drx::stablehlo {

// The modules of a file, split at its `// -----` lines. Each keeps its place in
// the file (its text starts with the newlines of the lines before it), so the
// errors of the parser and the importer name the file's lines.
std::vector<std::string> split_modules(const std::string& text);

struct TestCase {
  enum class Outcome { passed, failed, unsupported };
  std::string name;  // the test function, without '@'
  int line = 0;      // of its func.func
  Outcome outcome = Outcome::unsupported;
  int checks = 0;         // applied
  int checks_failed = 0;  // of those, the ones that did not hold
  // failed: the first failed check; unsupported: the drx::Error's message.
  std::string message;
};

// Runs a program without inputs; drx::run (the reference interpreter) when empty.
using ProgramRunner = std::function<std::vector<Array>(const Program&)>;

// Every test function (a func.func without arguments) of every module of the
// file's text, in order. A module drx cannot parse makes each of its
// functions unsupported, and so does a function without check ops (nothing
// says what it should compute).
std::vector<TestCase> run_test_file(const std::string& text, const ProgramRunner& run = {});

}  // namespace drx::stablehlo
