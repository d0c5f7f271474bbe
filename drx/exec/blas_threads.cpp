#include "drx/exec/blas_threads.h"

#include <mutex>

// Weak, so that drx links against any CBLAS; the OpenBLAS calls are used when
// the library provides them. (This file must not include cblas.h, which
// declares them strong.)
extern "C" {
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
}

namespace drx::exec {
namespace {

std::mutex mu;
int depth = 0;
int saved = 1;

bool available() {
  return openblas_set_num_threads != nullptr && openblas_get_num_threads != nullptr;
}

}  // namespace

SingleThreadedBlas::SingleThreadedBlas() {
  if (!available()) return;
  std::lock_guard<std::mutex> lock(mu);
  if (depth++ == 0) {
    saved = openblas_get_num_threads();
    if (saved != 1) openblas_set_num_threads(1);
  }
}

bool SingleThreadedBlas::active() {
  std::lock_guard<std::mutex> lock(mu);
  return depth > 0;
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (!available()) return;
  std::lock_guard<std::mutex> lock(mu);
  if (--depth == 0 && saved != 1) openblas_set_num_threads(saved);
}

}  // namespace drx::exec
