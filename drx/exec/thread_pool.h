#pragma once
// A small fixed thread pool for running independent tasks (map_fn clients).
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace drx {

// Threads that compiled programs use for independent work, the calling thread
// included (1 = everything runs on the caller). Defaults to the DRX_NUM_THREADS
// environment variable, else the number of hardware threads. Call
// set_num_threads only while no compiled program is running.
int num_threads();
void set_num_threads(int n);

namespace exec {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads - 1 workers plus the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(i) for every i in [0, n) and returns when all have run; the first
  // exception thrown by fn is rethrown here. A call made while the pool is
  // busy (from a task, or from another thread) runs its tasks inline.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  struct Job;
  void worker();
  static void work(Job& job);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  Job* job_ = nullptr;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::mutex busy_;
};

// The pool behind num_threads().
ThreadPool& global_pool();

}  // namespace exec
}  // namespace drx
