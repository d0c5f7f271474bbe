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
#include "drx/exec/roofline.h"
#include "drx/exec/thread_pool.h"

namespace drx::exec::profile {
namespace {

struct Totals {
  double seconds = 0;
  long long calls = 0;
  long long faults = 0;

  void add(const Totals& t) {
    seconds += t.seconds;
    calls += t.calls;
    faults += t.faults;
  }
};

double flops(const ProductShape& p) {
  return 2.0 * static_cast<double>(p.batch) * static_cast<double>(p.m) * static_cast<double>(p.n) *
         static_cast<double>(p.k);
}

std::string shape_text(const ProductShape& p) {
  std::string type(dtype_name(p.dtype));
  if (p.out != p.dtype) type += "->" + std::string(dtype_name(p.out));
  std::string s = type + " " + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" +
                  std::to_string(p.k) + (p.trans_a ? " A'" : "") + (p.trans_b ? " B'" : "");
  if (p.batch != 1) s = std::to_string(p.batch) + " x " + s + (p.one_call ? " (one call)" : "");
  return s;
}

bool memory_bound(const std::string& kind) {
  return kind == "elementwise" || kind == "reduction" || kind == "copy";
}

struct State {
  std::mutex mu;
  std::atomic<bool> on{false};
  std::string path;
  std::map<std::string, Totals> by_eqn;
  std::map<std::string, std::string> kind_of;  // label -> its kernel's kind
  std::map<std::string, Cost> cost_of;         // label -> what one run does (describe)
  // num_threads() when the last described program was compiled: the bound's thread count
  // (read then, since the pools may be gone when the report is written at exit).
  int threads = 1;

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

  // The roofline of the totals so far (see profile.h), measuring the machine now.
  Roofline roofline_locked() {
    Roofline r;
    r.threads = threads;
    std::map<std::string, Roofline::Shape> by_shape;
    for (const auto& [label, t] : by_eqn) {
      r.total_s += t.seconds;
      const std::string& kind = kind_of[label];
      const auto c = cost_of.find(label);
      if (kind == "gemm" && c != cost_of.end() && c->second.has_product) {
        Roofline::Shape& st = by_shape[shape_text(c->second.product)];
        st.shape = c->second.product;
        st.seconds += t.seconds;
        st.calls += t.calls;
        r.gemm_s += t.seconds;
      } else if (memory_bound(kind) && c != cost_of.end()) {
        r.memory_s += t.seconds;
        r.bytes += c->second.bytes * static_cast<double>(t.calls);
      } else if (kind == "gemm" || memory_bound(kind)) {
        r.undescribed_s += t.seconds;
      }
    }
    r.threaded_measured = threads > 1 && roofline::can_measure_threaded_blas();
    for (auto& [text, st] : by_shape) {
      const double calls = static_cast<double>(st.calls);
      st.text = text;
      st.sgemm1_s = roofline::product_seconds(st.shape, 1) * calls;
      st.flops = flops(st.shape) * calls;
      r.sgemm1_s += st.sgemm1_s;
      r.product_flops += st.flops;
      if (r.threaded_measured) r.sgemmn_s += roofline::product_seconds(st.shape, threads) * calls;
      r.shapes.push_back(st);
    }
    std::sort(r.shapes.begin(), r.shapes.end(),
              [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
    r.bandwidth1 = roofline::stream_bandwidth(1);
    r.bandwidth = threads > 1 ? roofline::stream_bandwidth(threads) : r.bandwidth1;
    // Every product at the better of the same shape through threaded sgemm and `threads`
    // one-thread calls side by side (how drx spreads products), every byte at the
    // `threads`-thread bandwidth, nothing else.
    const double side_by_side = r.sgemm1_s / threads;
    r.product_bound_s = r.threaded_measured ? std::min(r.sgemmn_s, side_by_side) : side_by_side;
    r.bound_s = r.product_bound_s + r.bytes / r.bandwidth;
    return r;
  }

  void write_roofline(FILE* f) {
    const Roofline r = roofline_locked();
    std::fprintf(f,
                 "products by shape (drx's gemm kernels against the same calls through one "
                 "BLAS thread, measured now)\n%10s %10s %10s %9s %9s %7s  %s\n",
                 "seconds", "calls", "sgemm s", "GFLOP/s", "sgemm", "of it", "shape");
    for (const Roofline::Shape& st : r.shapes)
      std::fprintf(f, "%10.4f %10lld %10.4f %9.2f %9.2f %6.1f%%  %s\n", st.seconds, st.calls,
                   st.sgemm1_s, st.seconds > 0 ? st.flops / st.seconds / 1e9 : 0.0,
                   st.sgemm1_s > 0 ? st.flops / st.sgemm1_s / 1e9 : 0.0,
                   st.seconds > 0 ? 100 * st.sgemm1_s / st.seconds : 0.0, st.text.c_str());
    std::fprintf(f, "\nroofline (thread-seconds, as the tables above)\n");
    std::fprintf(
        f,
        "  products      %10.4f s in gemm kernels (%.2f GFLOP); %.4f s as one-thread sgemm "
        "calls of the same shapes: %.1f%% of that rate\n",
        r.gemm_s, r.product_flops / 1e9, r.sgemm1_s,
        r.gemm_s > 0 ? 100 * r.sgemm1_s / r.gemm_s : 0.0);
    std::fprintf(
        f,
        "  memory-bound  %10.4f s in elementwise, reduction and copy kernels moving %.3f GB; "
        "%.4f s at one thread's %.2f GB/s\n",
        r.memory_s, r.bytes / 1e9, r.bytes / r.bandwidth1, r.bandwidth1 / 1e9);
    std::fprintf(f, "  the rest      %10.4f s (non-product share of all: %.1f%%)\n",
                 std::max(0.0, r.total_s - r.gemm_s - r.memory_s),
                 r.total_s > 0 ? 100 * (r.total_s - r.gemm_s) / r.total_s : 0.0);
    if (r.undescribed_s > 0)
      std::fprintf(f, "  (%.4f s of gemm or memory-bound kernels had no stated cost)\n",
                   r.undescribed_s);
    std::string how = "one-thread sgemm";
    if (r.threads > 1)
      how = "the better of " +
            (r.threaded_measured ? "threaded sgemm (" + std::to_string(r.sgemmn_s) + " s)"
                                 : std::string("threaded sgemm (not measured: drx does not set "
                                               "OpenBLAS's threads here)")) +
            " and " + std::to_string(r.threads) + " one-thread calls side by side (" +
            std::to_string(r.sgemm1_s / r.threads) + " s)";
    std::fprintf(f,
                 "bound on %d thread(s) (wall seconds): products %.4f s (%s) + bytes %.4f s (at "
                 "%.2f GB/s) = %.4f s\n",
                 r.threads, r.product_bound_s, how.c_str(), r.bytes / r.bandwidth,
                 r.bandwidth / 1e9, r.bound_s);
    std::fprintf(f,
                 "roofline_numbers threads=%d gemm_s=%.6f sgemm1_s=%.6f product_flops=%.6e "
                 "memory_s=%.6f bytes=%.6e bandwidth1=%.6e bandwidth=%.6e total_s=%.6f "
                 "product_bound_s=%.6f bound_s=%.6f\n",
                 r.threads, r.gemm_s, r.sgemm1_s, r.product_flops, r.memory_s, r.bytes,
                 r.bandwidth1, r.bandwidth, r.total_s, r.product_bound_s, r.bound_s);
  }

  void write_locked() {
    double total = 0;
    std::map<std::string, Totals> by_prim, by_kind;
    for (const auto& [label, t] : by_eqn) {
      total += t.seconds;
      by_kind[kind_of[label]].add(t);
      by_prim[label.substr(0, label.find_first_of("[ "))].add(t);
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
      std::fprintf(f, "%s\n%10s %7s %10s %10s %10s  %s\n", title, "seconds", "share", "calls",
                   "us/call", "faults", "what");
      for (const auto& [label, t] : sorted(m))
        std::fprintf(f, "%10.4f %6.2f%% %10lld %10.2f %10lld  %s\n", t.seconds,
                     total > 0 ? 100 * t.seconds / total : 0.0, t.calls,
                     t.calls ? 1e6 * t.seconds / static_cast<double>(t.calls) : 0.0, t.faults,
                     label.c_str());
      std::fprintf(f, "\n");
    };
    std::fprintf(f, "drx profile: %.4f s in timed kernels (all threads)\n\n", total);
    table("by kind", by_kind);
    table("by primitive", by_prim);
    std::map<std::string, Totals> labelled;  // "[kind] equation"
    for (const auto& [label, t] : by_eqn) labelled["[" + kind_of[label] + "] " + label] = t;
    table("by equation", labelled);
    write_roofline(f);
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

void describe(const std::string& label, const Cost& cost) {
  const int threads = num_threads();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.cost_of.try_emplace(label, cost);
  s.threads = threads;
}

void record(const std::string& label, const char* kind, double seconds, long minor_faults) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.kind_of.try_emplace(label, kind);
  Totals& t = s.by_eqn[label];
  t.seconds += seconds;
  ++t.calls;
  t.faults += minor_faults;
}

Roofline roofline() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.roofline_locked();
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
