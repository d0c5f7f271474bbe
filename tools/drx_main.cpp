// The `drx` command-line program; see tools/cli.cpp for the commands.
#include <iostream>
#include <string>
#include <vector>

#include "drx/exec/blas_threads.h"
#include "tools/cli.h"

int main(int argc, char** argv) {
  // The drx program owns its process: OpenBLAS on one thread, drx's own threads split products.
  drx::set_blas_thread_control(true);
  std::vector<std::string> args(argv + 1, argv + argc);
  int code = drx::tool::main(args, std::cout, std::cerr);
  std::cout.flush();
  return code;
}
