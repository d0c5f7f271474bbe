#include "tools/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

namespace drx::tool::flags {
namespace {

[[noreturn]] void bad(const std::string& command, const std::string& flag, const std::string& value,
                      const std::string& want) {
  throw UsageError(command + ": " + flag + " expects " + want + ", got '" + value + "'");
}

// Decimal digits, a sign, a point and an exponent only: strtod would also take leading
// blanks and hexadecimal ("0x10" is 16), which on a command line are typos, not numbers.
bool plain_number(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789+-.eE") == std::string::npos;
}

}  // namespace

std::set<std::string> parse(const std::string& command, const std::vector<std::string>& args,
                            const std::map<std::string, Setter>& valued,
                            const std::map<std::string, std::function<void()>>& switches) {
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool inline_value = false;
    if (size_t eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      inline_value = true;
    }
    // Which of two values was meant is a guess: refuse it rather than take the last.
    if ((switches.count(flag) || valued.count(flag)) && !given.insert(flag).second)
      throw UsageError(command + ": " + flag + " is given twice");
    if (auto s = switches.find(flag); s != switches.end()) {
      if (inline_value)
        throw UsageError(command + ": " + flag + " takes no value, got '" + args[i] + "'");
      s->second();
    } else if (auto v = valued.find(flag); v != valued.end()) {
      if (!inline_value) {
        if (i + 1 == args.size()) throw UsageError(command + ": " + flag + " needs a value");
        value = args[++i];
      }
      v->second(flag, value);
    } else if (flag.starts_with("-")) {
      throw UsageError(command + ": unknown flag '" + flag + "'");
    } else {
      throw UsageError(command + ": unexpected argument '" + args[i] +
                       "' (every option is a --flag)");
    }
  }
  return given;
}

bool take_value(const std::string& command, const std::vector<std::string>& args, size_t& i,
                const std::string& flag, std::optional<std::string>& into) {
  const std::string& a = args[i];
  std::optional<std::string> value;
  if (a == flag) {
    if (i + 1 == args.size()) throw UsageError(command + ": " + flag + " needs a value");
    value = args[++i];
  } else if (a.starts_with(flag + "=")) {
    value = a.substr(flag.size() + 1);
  } else {
    return false;
  }
  // Which of two values was meant is a guess: refuse it rather than take the last.
  if (into) throw UsageError(command + ": " + flag + " is given twice");
  into = std::move(value);
  return true;
}

void refuse_unused(const std::string& command, const std::set<std::string>& given,
                   const std::vector<std::string>& flags, bool used, const std::string& when) {
  for (const std::string& flag : flags)
    if (!used && given.count(flag))
      throw UsageError(command + ": " + flag + " does nothing here: it applies only " + when);
}

int64_t parse_int(const std::string& command, const std::string& flag, const std::string& text,
                  int64_t min, int64_t max) {
  const std::string want =
      max == INT64_MAX ? "an integer >= " + std::to_string(min)
                       : "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (!plain_number(text) || *end != '\0' || errno == ERANGE || v < min || v > max)
    bad(command, flag, text, want);
  return v;
}

double parse_real(const std::string& command, const std::string& flag, const std::string& text,
                  double min, bool min_open, double max, bool max_open) {
  std::ostringstream want;
  want << "a number " << (min_open ? "> " : ">= ") << min;
  if (std::isfinite(max)) want << " and " << (max_open ? "< " : "<= ") << max;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (!plain_number(text) || *end != '\0' || errno == ERANGE || !std::isfinite(v) ||
      (min_open ? v <= min : v < min) || (max_open ? v >= max : v > max))
    bad(command, flag, text, want.str());
  return v;
}

std::string parse_choice(const std::string& command, const std::string& flag,
                         const std::string& text, const std::vector<std::string>& choices) {
  std::string want = "one of";
  for (size_t i = 0; i < choices.size(); ++i) want += (i ? "|" : " ") + choices[i];
  for (const std::string& c : choices)
    if (text == c) return text;
  bad(command, flag, text, want);
}

uint64_t parse_seed(const std::string& command, const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  unsigned long long s = std::strtoull(text.c_str(), &end, 10);
  if (!plain_number(text) || text[0] == '-' || *end != '\0' || errno == ERANGE)
    bad(command, flag, text, "an integer in [0, 2^64)");
  return s;
}

std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string brief(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace drx::tool::flags
