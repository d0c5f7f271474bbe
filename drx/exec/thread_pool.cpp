#include "drx/exec/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <map>
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

ThreadPool::Counters ThreadPool::counters() const {
  Counters c;
  c.calls = calls_.load();
  c.inline_calls = inline_calls_.load();
  std::lock_guard<std::mutex> lock(mu_);
  c.worker_joins = worker_joins_;
  return c;
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

// The call with tasks left that has the fewest workers, so that concurrent callers share them.
ThreadPool::Job* ThreadPool::open_job() const {
  Job* best = nullptr;
  for (Job* j : jobs_)
    if (j->next.load() < j->n && (!best || j->active < best->active)) best = j;
  return best;
}

void ThreadPool::worker() {
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || (job = open_job()) != nullptr; });
      if (stop_) return;
      ++job->active;
      ++worker_joins_;
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
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (workers_.empty() || n == 1 || in_task) {
    inline_calls_.fetch_add(1, std::memory_order_relaxed);
    InTask mark;
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(&job);
  }
  wake_.notify_all();
  work(job);
  {
    // No worker may join once the job is gone from the list; wait for those that did.
    std::unique_lock<std::mutex> lock(mu_);
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
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

// A pool is never destroyed before exit, so a call running on it when the thread count changes
// keeps its threads; a product asks for the pool with one atomic load, no lock.
std::mutex pools_mu;
std::atomic<ThreadPool*> current{nullptr};

ThreadPool& pool_of_size(int n) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> lock(pools_mu);
  std::unique_ptr<ThreadPool>& p = pools[n];
  if (!p) p = std::make_unique<ThreadPool>(n);
  return *p;
}

thread_local ThreadPool* pinned = nullptr;  // this thread's PoolScope's pool

}  // namespace

ThreadPool& device_pool(int devices) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<ThreadPool>& p = pools[devices];
  if (!p) p = std::make_unique<ThreadPool>(devices);
  return *p;
}

ThreadPool& global_pool() {
  if (pinned) return *pinned;
  if (ThreadPool* p = current.load(std::memory_order_acquire)) return *p;
  ThreadPool* expected = nullptr;
  // A set_num_threads that got here first wins.
  current.compare_exchange_strong(expected, &pool_of_size(default_threads()),
                                  std::memory_order_acq_rel);
  return *current.load(std::memory_order_acquire);
}

PoolScope::PoolScope() : outermost_(pinned == nullptr) {
  if (outermost_) pinned = &global_pool();
}

PoolScope::~PoolScope() {
  if (outermost_) pinned = nullptr;
}

}  // namespace exec

int num_threads() { return exec::global_pool().size(); }

void set_num_threads(int n) {
  if (n < 1 || n > 1024)
    throw Error("set_num_threads: " + std::to_string(n) +
                " threads requested (expected 1 to 1024)");
  exec::current.store(&exec::pool_of_size(n), std::memory_order_release);
}

}  // namespace drx
