#pragma once
// Command-line flags shared by the training commands (drx fedavg, drx lm): `--flag VALUE`,
// `--flag=VALUE` and switches, with UsageErrors that name the command, the flag and what it
// expects.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "drx/array/error.h"

namespace drx::tool {

// A command line the program does not understand (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace drx::tool

namespace drx::tool::flags {

using Setter = std::function<void(const std::string& flag, const std::string& value)>;

// Runs each flag's setter (or switch) in order. Throws UsageError ("COMMAND: ...") for an
// unknown flag, a flag given twice, a missing value, a value given to a switch or a positional
// argument.
// Returns the flags given.
std::set<std::string> parse(const std::string& command, const std::vector<std::string>& args,
                            const std::map<std::string, Setter>& valued,
                            const std::map<std::string, std::function<void()>>& switches);

// For commands that parse their arguments one by one: when args[i] is `flag` ("--flag VALUE",
// i advanced past the value, or "--flag=VALUE"), stores the value in `into` and returns true.
// UsageError "COMMAND: FLAG needs a value" when it has none, "COMMAND: FLAG is given twice"
// when `into` holds one already.
bool take_value(const std::string& command, const std::vector<std::string>& args, size_t& i,
                const std::string& flag, std::optional<std::string>& into);

// A flag that would change nothing is a mistake to point out, not to ignore: throws UsageError
// "COMMAND: FLAG does nothing here: it applies only WHEN" when one of `flags` was given and
// `used` is false.
void refuse_unused(const std::string& command, const std::set<std::string>& given,
                   const std::vector<std::string>& flags, bool used, const std::string& when);

// The value parsers; each throws UsageError "COMMAND: FLAG expects ..., got 'TEXT'".
int64_t parse_int(const std::string& command, const std::string& flag, const std::string& text,
                  int64_t min, int64_t max);
// min_open: the value must be > min; else >= min. max_open: < max; else <= max.
double parse_real(const std::string& command, const std::string& flag, const std::string& text,
                  double min, bool min_open, double max, bool max_open);
std::string parse_choice(const std::string& command, const std::string& flag,
                         const std::string& text, const std::vector<std::string>& choices);
uint64_t parse_seed(const std::string& command, const std::string& flag, const std::string& text);

// Round-trip text of a number (checkpoint fields); the shortest text (help output).
std::string exact(double v);
std::string brief(double v);

}  // namespace drx::tool::flags
