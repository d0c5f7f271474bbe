#pragma once
// Control over the BLAS library's own threads.

namespace drx::exec {

// While at least one is alive, BLAS calls run on one thread each. map_fn runs
// clients in parallel on drx's pool; a multithreaded BLAS inside each client
// would only add synchronisation (and oversubscribe the cores). Works with
// OpenBLAS; with a BLAS that has no thread control it does nothing.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;
  // Whether one is alive (in any thread): BLAS calls are single-threaded now.
  static bool active();
};

}  // namespace drx::exec
