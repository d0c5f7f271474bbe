#pragma once
// The `drx` command-line program as a function, so tests can drive it with
// string streams instead of spawning processes.
#include <iosfwd>
#include <string>
#include <vector>

#include "drx/array/error.h"

namespace drx::tool {

// Exit codes of the drx program.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // a drx::Error while running a command
inline constexpr int kExitUsage = 2;  // unknown command, bad flag or missing argument

// A command line the program does not understand (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

// Runs `drx args...` (args excludes the program name); returns the exit code.
// Never throws: errors are printed to `err` as "drx: error: ...".
int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace drx::tool
