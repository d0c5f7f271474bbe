#pragma once
// Clocks and statistics the C++ benchmarks share.
#include <time.h>

#include <algorithm>
#include <chrono>
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

}  // namespace drx::bench
