// What every test of drx_tests runs under, as the drx tool and the benchmarks run: drx owns
// OpenBLAS's thread count (one thread; drx's own threads split the products), so results do
// not depend on the OPENBLAS_NUM_THREADS the tests were started with.
#include <gtest/gtest.h>

#include "drx/exec/blas_threads.h"

namespace {

class BlasThreadControl : public ::testing::Environment {
 public:
  void SetUp() override { drx::set_blas_thread_control(true); }
};

[[maybe_unused]] ::testing::Environment* const blas_thread_control =
    ::testing::AddGlobalTestEnvironment(new BlasThreadControl);

}  // namespace
