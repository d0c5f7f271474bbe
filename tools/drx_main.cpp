#include <iostream>

#include "drx/drx.h"

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  std::cout << "drx\n";
  return 0;
}
