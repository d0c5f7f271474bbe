#pragma once
// What the C++ benchmarks share: clocks, statistics, and command-line errors.
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace drx::bench {

// This process's CPU time (all threads): on a shared, loaded machine it is
// less disturbed by other processes than the wall clock.
inline double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A benchmark's command line: its name and usage text, for the errors its flags cause.
struct CommandLine {
  const char* program;
  const char* usage;

  // "<program>: <msg>" and the usage text on stderr; exit status 2.
  [[noreturn]] void error(const std::string& msg) const {
    std::fprintf(stderr, "%s: %s\n%s", program, msg.c_str(), usage);
    std::exit(2);
  }
  // `text` as a count for `flag`: an integer in [min, 2^30], else error().
  int64_t count(const std::string& flag, const std::string& text, int64_t min) const {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0 || v < min || v > (int64_t{1} << 30))
      error(flag + " needs an integer >= " + std::to_string(min) + ", got '" + text + "'");
    return v;
  }
};

}  // namespace drx::bench
