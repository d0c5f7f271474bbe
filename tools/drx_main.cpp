// The `drx` command-line program; see tools/cli.cpp for the commands.
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int code = drx::tool::main(args, std::cout, std::cerr);
  std::cout.flush();
  return code;
}
