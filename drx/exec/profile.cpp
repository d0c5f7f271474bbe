#include "drx/exec/profile.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "drx/array/error.h"

namespace drx::exec::profile {
namespace {

struct Totals {
  double seconds = 0;
  long long calls = 0;
};

struct State {
  std::mutex mu;
  std::atomic<bool> on{false};
  std::string path;
  std::map<std::string, Totals> by_eqn;
  std::map<std::string, std::string> kind_of;  // label -> its kernel's kind

  State() {
    if (const char* p = std::getenv("DRX_PROFILE"); p && *p) on = true, path = p;
  }
  ~State() {
    if (path.empty() || by_eqn.empty()) return;
    try {
      write_locked();
    } catch (const Error& e) {
      std::fprintf(stderr, "drx: %s\n", e.what());
    }
  }

  void write_locked() {
    double total = 0;
    std::map<std::string, Totals> by_prim, by_kind;
    for (const auto& [label, t] : by_eqn) {
      total += t.seconds;
      Totals& k = by_kind[kind_of[label]];
      k.seconds += t.seconds;
      k.calls += t.calls;
      Totals& p = by_prim[label.substr(0, label.find_first_of("[ "))];
      p.seconds += t.seconds;
      p.calls += t.calls;
    }
    auto sorted = [](const std::map<std::string, Totals>& m) {
      std::vector<std::pair<std::string, Totals>> v(m.begin(), m.end());
      std::sort(v.begin(), v.end(),
                [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
      return v;
    };
    const std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f)
      throw Error("profile: cannot write " + tmp + ": " + std::strerror(errno) +
                  " (DRX_PROFILE names the report file)");
    auto table = [&](const char* title, const std::map<std::string, Totals>& m) {
      std::fprintf(f, "%s\n%10s %7s %10s %10s  %s\n", title, "seconds", "share", "calls", "us/call",
                   "what");
      for (const auto& [label, t] : sorted(m))
        std::fprintf(f, "%10.4f %6.2f%% %10lld %10.2f  %s\n", t.seconds,
                     total > 0 ? 100 * t.seconds / total : 0.0, t.calls,
                     t.calls ? 1e6 * t.seconds / static_cast<double>(t.calls) : 0.0, label.c_str());
      std::fprintf(f, "\n");
    };
    std::fprintf(f, "drx profile: %.4f s in timed kernels (all threads)\n\n", total);
    table("by kind", by_kind);
    table("by primitive", by_prim);
    std::map<std::string, Totals> labelled;  // "[kind] equation"
    for (const auto& [label, t] : by_eqn) labelled["[" + kind_of[label] + "] " + label] = t;
    table("by equation", labelled);
    const bool ok = std::fclose(f) == 0;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error("profile: cannot write " + path + ": " + std::strerror(errno));
  }
};

State& state() {
  static State s;
  return s;
}

}  // namespace

bool enabled() { return state().on.load(std::memory_order_relaxed); }

void enable(const std::string& path) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.on = true;
  s.path = path;
}

void disable() { state().on = false; }

void record(const std::string& label, const char* kind, double seconds) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.kind_of.try_emplace(label, kind);
  Totals& t = s.by_eqn[label];
  t.seconds += seconds;
  ++t.calls;
}

void write() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.path.empty()) throw Error("profile: write() without a report path (set DRX_PROFILE=PATH)");
  s.write_locked();
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.by_eqn.clear();
  s.kind_of.clear();
}

}  // namespace drx::exec::profile
