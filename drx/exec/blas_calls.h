#pragma once
// How many BLAS calls drx lets run at once, and why there is a bound.
//
// OpenBLAS hands each call a work buffer from a table of 2 x MAX_THREADS (at least 50) entries,
// MAX_THREADS fixed when OpenBLAS was built (64 in Debian's). A call made while every entry is
// taken gets an "auxiliary" buffer instead ("OpenBLAS warning: precompiled NUM_THREADS exceeded"),
// and OpenBLAS 0.3.21 hands those out with a race that crashes the process: 1000 threads calling
// cblas_sgemm at once segfault now and then, and so did `drx lm --devices 1000`, whose device
// threads each run a product. drx's threads (one per device, --threads up to 1024) therefore take
// a slot for each call, so no more calls are in flight than half the table.
#include <cstdint>

namespace drx::exec {

// The most BLAS calls drx makes at once: OpenBLAS's MAX_THREADS as its build states it
// (openblas_get_config), 25 where it does not say, no bound for another BLAS.
int blas_call_limit();

// One of blas_call_limit() slots, held for the duration of one BLAS call; waits for a free one.
class BlasCallSlot {
 public:
  BlasCallSlot();
  ~BlasCallSlot();
  BlasCallSlot(const BlasCallSlot&) = delete;
  BlasCallSlot& operator=(const BlasCallSlot&) = delete;
};

// The most slots held at once since the process started: what the tests check the bound on.
int blas_calls_peak();
// Slots taken since the process started: that every BLAS call of drx takes one.
int64_t blas_calls_made();

}  // namespace drx::exec
