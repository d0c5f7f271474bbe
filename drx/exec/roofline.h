#pragma once
// The machine's own limits, measured when asked: how long one BLAS product of a given shape
// takes, and how fast threads stream memory. exec::profile's roofline holds compiled programs'
// kernels against them.
#include "drx/exec/profile.h"

namespace drx::exec::roofline {

// Seconds one product of `shape` (all its batch calls) takes through BLAS on `blas_threads`
// OpenBLAS threads: the best of several runs with its operands in cache, as in a training loop.
// More than one thread needs drx's control of OpenBLAS's thread count
// (can_measure_threaded_blas); without it this throws drx::Error. A bf16 product is timed as
// drx runs it, one oneDNN call per batch index on one thread (sgemm where oneDNN has no native
// kernel), and on n threads as n such calls side by side (the one-thread time / n).
double product_seconds(const profile::ProductShape& shape, int blas_threads);
bool can_measure_threaded_blas();

// Bytes per second that `threads` threads together move through c[i] = a[i] + b[i] over
// arrays far larger than the caches (the reads and the write counted, as a fused elementwise
// kernel's bytes are).
double stream_bandwidth(int threads);

}  // namespace drx::exec::roofline
