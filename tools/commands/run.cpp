#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>

#include "drx/drx.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace drx::tool {
namespace {

std::string read_text(const std::string &path, const char *cmd) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path);
  if (!in)
    throw Error(std::string(cmd) + ": cannot open program file '" + path + "'");
  ss << in.rdbuf();
  if (in.bad())
    throw Error(std::string(cmd) + ": cannot read program file '" + path + "'");
  return ss.str();
}

Program load(const std::string &path, const char *cmd) {
  Program p = parse_program(read_text(path, cmd));
  verify(p);
  return p;
}

double parse_number(const std::string &s, const std::string &what) {
  const char *begin = s.c_str();
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(begin, &end);
  if (s.empty() || end != begin + s.size() || errno == ERANGE)
    throw UsageError(what + ": '" + s + "' is not a number");
  return v;
}

// "1,2,3" fills the input's shape in row-major order; a single number fills all
// of it.
Array parse_arg(const std::string &text, const Type &type, size_t index) {
  const std::string what =
      "run: --arg " + std::to_string(index + 1) + " (" + type.str() + ")";
  std::vector<double> values;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    values.push_back(parse_number(text.substr(start, comma - start), what));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (values.size() == 1)
    return full(type.shape, values[0], type.dtype);
  if (static_cast<int64_t>(values.size()) != type.size())
    throw UsageError(what + ": " + std::to_string(values.size()) +
                     " values given, expected 1 or " +
                     std::to_string(type.size()));
  return convert_array(Array::from_vector<double>(values, type.shape),
                       type.dtype);
}

} // namespace

int run_command(const Args &args, std::ostream &out) {
  std::optional<std::string> file;
  std::vector<std::string> arg_texts;
  bool print = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--arg") {
      if (i + 1 == args.size())
        throw UsageError("run: --arg needs a value, e.g. --arg 1,2,3");
      arg_texts.push_back(args[++i]);
    } else if (a.starts_with("--arg=")) {
      arg_texts.push_back(a.substr(6));
    } else if (a == "--print") {
      print = true;
    } else if (a.starts_with("-") && a != "-") {
      throw UsageError("run: unknown flag '" + a + "'");
    } else if (file) {
      throw UsageError("run: one program file expected, got '" + *file +
                       "' and '" + a + "'");
    } else {
      file = a;
    }
  }
  if (!file)
    throw UsageError("run: missing the program FILE");

  Program p = load(*file, "run");
  std::vector<Type> types = p.input_types();
  if (arg_texts.size() != types.size()) {
    std::string expected;
    for (const Type &t : types)
      expected += (expected.empty() ? "" : ", ") + t.str();
    throw UsageError("run: program @" + p.name + " takes " +
                     std::to_string(types.size()) + " inputs (" + expected +
                     "), got " + std::to_string(arg_texts.size()) + " --arg");
  }
  std::vector<Array> inputs;
  for (size_t i = 0; i < types.size(); ++i)
    inputs.push_back(parse_arg(arg_texts[i], types[i], i));

  if (print)
    out << to_string(p);
  std::vector<Array> outputs = drx::run(p, inputs);
  for (const Array &a : outputs)
    out << a.str() << "\n";
  return 0;
}

int check_command(const Args &args, std::ostream &out) {
  if (args.size() != 1 || (args[0].starts_with("-") && args[0] != "-"))
    throw UsageError("check: expects exactly one program FILE");
  out << to_string(load(args[0], "check"));
  return 0;
}

} // namespace drx::tool
