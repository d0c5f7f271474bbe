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

}  // namespace drx::testing
