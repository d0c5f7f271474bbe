#pragma once
// Running the drx program in-process, for the tests of its commands.
#include <sstream>
#include <string>
#include <vector>

#include "tools/cli.h"

namespace drx::testing {

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = drx::tool::main(args, out, err);
  return {code, out.str(), err.str()};
}

// `args` followed by `more`, where a flag of `more` (or of `drop`) takes the place of the same
// flag in `args`: the training commands refuse a flag given twice. A "--flag" followed by a word
// that is not a flag is a flag with its value.
inline std::vector<std::string> with_flags(const std::vector<std::string>& args,
                                           const std::vector<std::string>& more,
                                           const std::vector<std::string>& drop = {}) {
  auto is_flag = [](const std::string& a) { return a.size() > 2 && a.rfind("--", 0) == 0; };
  auto name = [](const std::string& a) { return a.substr(0, a.find('=')); };
  std::vector<std::string> replaced = drop;
  for (const std::string& a : more)
    if (is_flag(a)) replaced.push_back(name(a));
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool has_value = is_flag(args[i]) && args[i].find('=') == std::string::npos &&
                           i + 1 < args.size() && !is_flag(args[i + 1]);
    bool gone = false;
    for (const std::string& r : replaced) gone = gone || (is_flag(args[i]) && name(args[i]) == r);
    if (!gone) {
      out.push_back(args[i]);
      if (has_value) out.push_back(args[i + 1]);
    }
    if (has_value) ++i;
  }
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

}  // namespace drx::testing
