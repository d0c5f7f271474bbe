#include "drx/exec/blas_calls.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <semaphore>

// Weak, as in blas_threads.cpp: drx links against any CBLAS, and asks OpenBLAS only when it is
// the one linked. (This file must not include cblas.h, which declares it strong.)
extern "C" {
char* openblas_get_config(void) __attribute__((weak));
}

namespace drx::exec {
namespace {

int limit_from_config() {
  if (openblas_get_config == nullptr) return INT_MAX;
  const char* config = openblas_get_config();
  const char* at = config ? std::strstr(config, "MAX_THREADS=") : nullptr;
  // Half of OpenBLAS's smallest table (50 entries) where the build does not say its size.
  if (at == nullptr) return 25;
  const long n = std::strtol(at + std::strlen("MAX_THREADS="), nullptr, 10);
  return n >= 1 && n <= 1 << 20 ? static_cast<int>(n) : 25;
}

std::atomic<int> in_flight{0}, peak{0};
std::atomic<int64_t> made{0};

std::counting_semaphore<>& slots() {
  static std::counting_semaphore<> s(blas_call_limit() == INT_MAX ? 0 : blas_call_limit());
  return s;
}

bool bounded() { return blas_call_limit() != INT_MAX; }

}  // namespace

int blas_call_limit() {
  static const int limit = limit_from_config();
  return limit;
}

BlasCallSlot::BlasCallSlot() {
  if (bounded()) slots().acquire();
  made.fetch_add(1, std::memory_order_relaxed);
  const int now = in_flight.fetch_add(1, std::memory_order_relaxed) + 1;
  int seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

BlasCallSlot::~BlasCallSlot() {
  in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (bounded()) slots().release();
}

int blas_calls_peak() { return peak.load(std::memory_order_relaxed); }

int64_t blas_calls_made() { return made.load(std::memory_order_relaxed); }

}  // namespace drx::exec
