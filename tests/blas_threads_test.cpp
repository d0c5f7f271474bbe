// Who owns OpenBLAS's thread count: drx only with set_blas_thread_control (which the tests'
// environment switches on), and then its products' bits do not depend on the count the host
// started with. Not run under ThreadSanitizer: OpenBLAS's own threads run here.
#include "tests/test_util.h"

extern "C" {
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
}

namespace drx::testing {
namespace {

bool have_openblas() { return openblas_set_num_threads && openblas_get_num_threads; }

// Puts the tests' environment back (control on) however a test ends.
class HostCount {
 public:
  explicit HostCount(int n) {
    set_blas_thread_control(false);
    openblas_set_num_threads(n);
  }
  ~HostCount() {
    set_blas_thread_control(false);
    openblas_set_num_threads(1);
    set_blas_thread_control(true);
  }
  HostCount(const HostCount&) = delete;
  HostCount& operator=(const HostCount&) = delete;
};

// A top-level product and products in a map_fn body, at shapes where OpenBLAS 0.3.21 rounds
// differently on 1 and 2 threads.
auto products(int64_t clients) {
  return program({{"clients", clients}},
                 [](Value x, Value w, Value xs) -> std::vector<Value> {
                   Value each =
                       map_fn([](Value wi, Value xi) { return matmul(xi, wi); }, broadcast(w), xs);
                   return {matmul(x, w), reduce_sum(each)};
                 },
                 {"", "", "clients"});
}

std::vector<Array> run_products() {
  const Array x = random_array({1000, 784}, DType::f32, 81);
  const Array w = random_array({784, 200}, DType::f32, 82);
  const Array xs = random_array({3, 300, 784}, DType::f32, 83);
  return jit(products(3))(x, w, xs);
}

TEST(BlasThreads, ProductsAreBitwiseTheSameWhateverCountTheHostStartedOpenBlasWith) {
  if (!have_openblas()) GTEST_SKIP() << "not OpenBLAS";
  std::vector<Array> want;
  for (int host : {1, 2}) {
    SCOPED_TRACE("OPENBLAS_NUM_THREADS=" + std::to_string(host));
    HostCount started(host);
    set_blas_thread_control(true);
    EXPECT_EQ(openblas_get_num_threads(), 1);
    const std::vector<Array> got = run_products();
    if (want.empty()) want = got;
    EXPECT_TRUE(BitwiseEqual(got, want));
    // Switching control off hands the host its count back.
    set_blas_thread_control(false);
    EXPECT_EQ(openblas_get_num_threads(), host);
  }
}

TEST(BlasThreads, WithoutControlDrxLeavesTheCountAloneAndSaysWhatThatCosts) {
  if (!have_openblas()) GTEST_SKIP() << "not OpenBLAS";
  HostCount started(2);
  EXPECT_FALSE(blas_thread_control());
  const std::string note = exec::blas_threads_note();
  EXPECT_NE(note.find("OpenBLAS runs 2 threads"), std::string::npos) << note;
  EXPECT_NE(note.find("serialise"), std::string::npos) << note;
  EXPECT_NE(note.find("OPENBLAS_NUM_THREADS=1"), std::string::npos) << note;
  const std::vector<Array> got = run_products();
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(openblas_get_num_threads(), 2);
  // With control, or on one OpenBLAS thread, there is nothing to say.
  openblas_set_num_threads(1);
  EXPECT_EQ(exec::blas_threads_note(), "");
  set_blas_thread_control(true);
  openblas_set_num_threads(2);
  EXPECT_EQ(exec::blas_threads_note(), "");
}

}  // namespace
}  // namespace drx::testing
