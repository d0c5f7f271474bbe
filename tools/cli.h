#pragma once
// The `drx` command-line program as a function, so tests can drive it with
// string streams instead of spawning processes.
#include <iosfwd>
#include <string>
#include <vector>

#include "tools/flags.h"

namespace drx::tool {

// Exit codes of the drx program (README, "Exit codes").
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // a drx::Error while running a command
inline constexpr int kExitUsage = 2;     // unknown command, bad flag or missing argument
inline constexpr int kExitDiverged = 3;  // training stopped at a round that was not finite

// Runs `drx args...` (args excludes the program name); returns the exit code.
// Never throws: errors are printed to `err` as "drx: error: ...".
int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace drx::tool
