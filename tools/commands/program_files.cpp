#include "tools/commands/program_files.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <ostream>
#include <sstream>

namespace drx::tool {

std::string read_text(const std::string& path, const char* cmd) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  // An ifstream opens a folder and reads it as empty, which the parser then calls a program
  // without 'program'.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(std::string(cmd) + ": '" + path + "' is a folder, not a program file");
  std::ifstream in(path);
  if (!in) throw Error(std::string(cmd) + ": cannot open program file '" + path + "'");
  ss << in.rdbuf();
  if (in.bad()) throw Error(std::string(cmd) + ": cannot read program file '" + path + "'");
  return ss.str();
}

Program load_program(const std::string& path, const char* cmd) {
  const std::string text = read_text(path, cmd);
  if (text.starts_with("\x93NUMPY"))
    throw Error(std::string(cmd) + ": '" + path +
                "' is a NumPy array (.npy), not a program; arrays are a program's arguments "
                "(drx run PROGRAM --arg " +
                path + ")");
  try {
    Program p = parse_program(text);
    verify(p);
    return p;
  } catch (const Error& e) {
    throw Error(std::string(cmd) + ": '" + path + "': " + e.what());
  }
}

bool names_mlir_file(const std::string& path) { return path.ends_with(".mlir"); }

stablehlo::ImportedModule load_mlir(const std::string& path, const char* cmd) {
  const std::string text = read_text(path, cmd);
  try {
    return stablehlo::import_module(stablehlo::parse_mlir(text));
  } catch (const Error& e) {
    throw Error(std::string(cmd) + ": '" + path + "': " + e.what());
  }
}

Program results_only(const stablehlo::ImportedModule& m) {
  Program p = stablehlo::results_program(m);
  verify(p);
  return p;
}

namespace {

// apply_check's "line N: KIND: what differs" as "check.KIND at line N: what
// differs".
std::string describe_failure(const stablehlo::Check& c, const std::string& why) {
  const std::string prefix = "line " + std::to_string(c.line) + ": " + c.kind + ": ";
  const std::string what = why.starts_with(prefix) ? why.substr(prefix.size()) : why;
  return "check." + c.kind + " at line " + std::to_string(c.line) + ": " + what;
}

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

std::string first_failed_check(const stablehlo::ImportedModule& m,
                               const std::vector<Array>& outputs) {
  // A check's indices count from the first output after @main's results.
  for (const stablehlo::Check& c : m.checks) {
    const std::string why = stablehlo::apply_check(c, outputs.at(m.num_results + c.actual),
                                                   outputs.at(m.num_results + c.expected));
    if (!why.empty()) return describe_failure(c, why);
  }
  return "";
}

std::string import_text(const stablehlo::ImportedModule& m, const std::string& path,
                        const char* cmd, std::ostream& err) {
  const std::string text = to_string(results_only(m));
  if (!m.checks.empty())
    err << cmd << ": '" << path << "': " << plural(m.checks.size(), "check")
        << " dropped (`drx run` on the .mlir file applies them)\n";
  if (!m.sharding_notes.empty())
    err << cmd << ": '" << path << "': " << plural(m.sharding_notes.size(), "sharding annotation")
        << " ignored (they change no value)\n";
  return text;
}

}  // namespace drx::tool
