#include "drx/exec/blas_threads.h"

#include <atomic>
#include <iostream>
#include <mutex>

// Weak, so that drx links against any CBLAS; the OpenBLAS calls are used when
// the library provides them. (This file must not include cblas.h, which
// declares them strong.)
extern "C" {
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
}

namespace drx {
namespace {

bool available() {
  return openblas_set_num_threads != nullptr && openblas_get_num_threads != nullptr;
}

std::atomic<bool> control{false};
// Serialises drx's writes of the count: OpenBLAS's setter is not safe to call from two threads
// at once. Only switching control and putting the count back take it, never a product that
// finds the count at 1.
std::mutex write_mu;
int host_count = 1;  // what control found when switched on; guarded by write_mu

}  // namespace

void set_blas_thread_control(bool on) {
  std::lock_guard<std::mutex> lock(write_mu);
  if (on == control.load()) return;
  control.store(on);
  if (!available()) return;
  if (on) {
    host_count = openblas_get_num_threads();
    if (host_count != 1) openblas_set_num_threads(1);
  } else if (host_count != 1) {
    openblas_set_num_threads(host_count);
  }
}

bool blas_thread_control() { return control.load(std::memory_order_relaxed); }

namespace exec {

std::string blas_threads_note() {
  if (!available() || blas_thread_control()) return "";
  const int n = openblas_get_num_threads();
  if (n <= 1) return "";
  return "drx: OpenBLAS runs " + std::to_string(n) +
         " threads and drx may not change that (set_blas_thread_control is off): concurrent "
         "products will serialise (OpenBLAS 0.3.21 makes concurrent multithreaded calls wait on "
         "one lock) and round as OpenBLAS's thread count decides; set OPENBLAS_NUM_THREADS=1 to "
         "let drx's own threads split them";
}

void note_blas_threads_once() {
  static std::atomic<bool> said{false};
  if (said.load(std::memory_order_relaxed)) return;
  const std::string note = blas_threads_note();
  if (note.empty() || said.exchange(true)) return;
  std::cerr << note << "\n";
}

void keep_blas_single_threaded() {
  if (!available() || !control.load(std::memory_order_relaxed)) return;
  if (openblas_get_num_threads() == 1) return;
  std::lock_guard<std::mutex> lock(write_mu);
  if (control.load() && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

bool blas_threads_settable() { return available() && control.load(); }

bool run_with_blas_threads(int n, const std::function<void()>& fn) {
  if (!blas_threads_settable()) return false;
  struct BackToOne {
    ~BackToOne() {
      std::lock_guard<std::mutex> lock(write_mu);
      openblas_set_num_threads(1);
    }
  } back_to_one;
  {
    std::lock_guard<std::mutex> lock(write_mu);
    openblas_set_num_threads(n);
  }
  fn();
  return true;
}

}  // namespace exec
}  // namespace drx
