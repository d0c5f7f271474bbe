#include "drx/stablehlo/test_suite.h"

#include <algorithm>
#include <regex>

#include "drx/array/error.h"
#include "drx/core/interpret.h"
#include "drx/stablehlo/import.h"

namespace drx::stablehlo {
namespace {

bool is_separator(const std::string& line) {
  static const std::regex sep(R"(^\s*// -----\s*$)");
  return std::regex_match(line, sep);
}

// The test functions of a module read from its text alone, for a module that
// does not parse: the cases it would have held.
std::vector<TestCase> cases_in_text(const std::string& text, const std::string& why) {
  static const std::regex func(
      R"(func\.func\s+(?:public\s+|private\s+)?@([A-Za-z0-9_$.]+)\s*\(\s*\))");
  std::vector<TestCase> out;
  for (std::sregex_iterator it(text.begin(), text.end(), func), end; it != end; ++it) {
    TestCase c;
    c.name = (*it)[1];
    c.line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + it->position(), '\n'));
    c.message = why;
    out.push_back(std::move(c));
  }
  return out;
}

TestCase run_case(const Module& m, const Function& f, const ProgramRunner& run) {
  TestCase c;
  c.name = f.name;
  c.line = f.line;
  try {
    const ImportedModule im = import_module(m, f.name);
    const std::vector<Array> out = run ? run(im.program) : drx::run(im.program, {});
    for (const Check& check : im.checks) {
      const std::string why = apply_check(check, out.at(im.num_results + check.actual),
                                          out.at(im.num_results + check.expected));
      ++c.checks;
      if (why.empty()) continue;
      if (c.checks_failed++ == 0) c.message = why;
    }
    c.outcome = c.checks_failed ? TestCase::Outcome::failed : TestCase::Outcome::passed;
    if (c.checks == 0) {  // e.g. printing.mlir's, whose expectations are FileCheck comments
      c.outcome = TestCase::Outcome::unsupported;
      c.message = "no check op to apply (drx does not read FileCheck expectations)";
    }
  } catch (const Error& e) {
    c.outcome = TestCase::Outcome::unsupported;
    c.message = e.what();
  }
  return c;
}

}  // namespace

std::vector<std::string> split_modules(const std::string& text) {
  std::vector<std::string> modules(1);
  size_t start = 0;
  int lines_before = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (is_separator(line))
      modules.emplace_back(static_cast<size_t>(lines_before + 1), '\n');
    else
      modules.back() += line + "\n";
    ++lines_before;
    start = end + 1;
  }
  return modules;
}

std::vector<TestCase> run_test_file(const std::string& text, const ProgramRunner& run) {
  std::vector<TestCase> out;
  for (const std::string& module_text : split_modules(text)) {
    Module m;
    try {
      m = parse_mlir(module_text);
    } catch (const Error& e) {
      for (TestCase& c : cases_in_text(module_text, e.what())) out.push_back(std::move(c));
      continue;
    }
    for (const Function& f : m.functions)
      if (f.arguments.empty()) out.push_back(run_case(m, f, run));
  }
  return out;
}

}  // namespace drx::stablehlo
