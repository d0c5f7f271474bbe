#pragma once
// A small fixed thread pool for running independent tasks (map_fn clients, row blocks of
// products), shared by every thread that calls compiled programs.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace drx {

// Threads that compiled programs use for independent work, the calling thread
// included (1 = everything runs on the caller). Defaults to the DRX_NUM_THREADS
// environment variable, else the number of hardware threads. set_num_threads may be
// called while programs run: a call that started keeps the pool it started on.
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
  // exception thrown by fn is rethrown here. Calls from several threads at once
  // share the workers (each caller works on its own tasks too); a call made from
  // inside a task runs its tasks inline, as its caller already holds a thread.
  void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

  // What the pool did since it was made, for tests.
  struct Counters {
    uint64_t calls = 0;         // parallel_for calls with at least one task
    uint64_t inline_calls = 0;  // of those, run wholly on their caller
    uint64_t worker_joins = 0;  // times a worker took tasks of a call
  };
  Counters counters() const;

 private:
  struct Job;
  void worker();
  static void work(Job& job);
  Job* open_job() const;  // under mu_

  std::vector<std::thread> workers_;
  mutable std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<Job*> jobs_;  // calls in progress, oldest first; guarded by mu_
  bool stop_ = false;
  std::atomic<uint64_t> calls_{0}, inline_calls_{0};
  uint64_t worker_joins_ = 0;  // guarded by mu_
};

// The pool behind num_threads(): on a thread inside a PoolScope, the pool of the scope's start.
// Pools are kept, one per size asked for, so a reference stays valid after set_num_threads.
ThreadPool& global_pool();

// The worker threads of a mesh axis of `devices` devices. The CPU executor keeps one pool per
// size, never destroyed before exit; meshes of one size share it (concurrent calls share a
// pool's workers, each caller working on its own tasks too), so the logical Mesh holds no
// threads.
ThreadPool& device_pool(int devices);

// One compiled program's call: global_pool() on this thread stays what it was at the call's
// start, so that what a kernel sized by the thread count (shards, their accumulators) matches
// the pool that runs it, whatever set_num_threads does meanwhile. Nested scopes keep the
// outermost's pool.
class PoolScope {
 public:
  PoolScope();
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  bool outermost_;
};

}  // namespace exec
}  // namespace drx
