#include "drx/exec/thread_pool.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "drx/array/error.h"

namespace drx {
namespace exec {
namespace {

thread_local bool in_task = false;

// Marks the current thread as running pool tasks for a scope.
class InTask {
 public:
  InTask() : was_(in_task) { in_task = true; }
  ~InTask() { in_task = was_; }
  InTask(const InTask&) = delete;
  InTask& operator=(const InTask&) = delete;

 private:
  bool was_;
};

}  // namespace

struct ThreadPool::Job {
  const std::function<void(int64_t)>* fn = nullptr;
  int64_t n = 0;
  std::atomic<int64_t> next{0};
  int active = 0;  // workers inside work(); guarded by the pool's mutex
  std::mutex error_mu;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::work(Job& job) {
  InTask mark;
  for (;;) {
    const int64_t i = job.next.fetch_add(1);
    if (i >= job.n) return;
    try {
      (*job.fn)(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.error_mu);
      if (!job.error) job.error = std::current_exception();
      job.next.store(job.n);  // the remaining tasks are skipped
    }
  }
}

void ThreadPool::worker() {
  uint64_t seen = 0;
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
      if (stop_) return;
      seen = generation_;
      job = job_;
      ++job->active;
    }
    work(*job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--job->active == 0) done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
  if (workers_.empty() || n == 1 || in_task || !busy.owns_lock()) {
    InTask mark;
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    ++generation_;
  }
  wake_.notify_all();
  work(job);
  {
    // No worker may join once job_ is cleared; wait for those that did.
    std::unique_lock<std::mutex> lock(mu_);
    job_ = nullptr;
    done_.wait(lock, [&] { return job.active == 0; });
  }
  if (job.error) std::rethrow_exception(job.error);
}

namespace {

int default_threads() {
  if (const char* env = std::getenv("DRX_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1 && v <= 1024) return static_cast<int>(v);
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

std::mutex global_mu;
std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}

}  // namespace

ThreadPool& global_pool() {
  std::lock_guard<std::mutex> lock(global_mu);
  std::unique_ptr<ThreadPool>& pool = global_slot();
  if (!pool) pool = std::make_unique<ThreadPool>(default_threads());
  return *pool;
}

}  // namespace exec

int num_threads() { return exec::global_pool().size(); }

void set_num_threads(int n) {
  if (n < 1 || n > 1024)
    throw Error("set_num_threads: " + std::to_string(n) +
                " threads requested (expected 1 to 1024)");
  std::lock_guard<std::mutex> lock(exec::global_mu);
  std::unique_ptr<exec::ThreadPool>& pool = exec::global_slot();
  if (pool && pool->size() == n) return;
  pool.reset();
  pool = std::make_unique<exec::ThreadPool>(n);
}

}  // namespace drx
