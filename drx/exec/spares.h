#pragma once
// What kernels keep between calls instead of allocating it anew: a fresh buffer of megabytes
// first-touches every page at every call (a page fault each), where a kept one is already
// mapped. Calls may run on several threads at once (a kernel inside a map_fn body), so each
// takes a spare of its own, or a new one when none is free, and gives it back after.
#include <memory>
#include <mutex>
#include <vector>

namespace drx::exec {

template <class T>  // T may be an array type (std::byte[])
class Spares {
 public:
  using Ptr = std::unique_ptr<T>;

  // A spare, or make()'s new one.
  template <class Make>
  Ptr take(Make&& make) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        Ptr p = std::move(free_.back());
        free_.pop_back();
        return p;
      }
    }
    return make();
  }
  void give_back(Ptr p) const {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(p));
  }
  // Calls f on each spare not in use (Executable::release_idle_memory).
  template <class F>
  void for_each_free(F&& f) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Ptr& p : free_) f(p.get());
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<Ptr> free_;
};

}  // namespace drx::exec
