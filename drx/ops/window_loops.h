#pragma once
// reduce_window and select_and_scatter_add (drx/ops/windows.cpp): their typed
// parameters and the plain loops over output windows that both the reference
// (Primitive::eval) and the compiled kernel (drx/exec/kernels_window.cpp) run,
// so the two give the same bits. Private to drx.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "drx/array/array.h"
#include "drx/array/wrapping.h"
#include "drx/core/reduction.h"
#include "drx/ir/params.h"
#include "drx/ir/type.h"

namespace drx {
class Primitive;
namespace prims {
const Primitive& reduce_window();
const Primitive& select_and_scatter_add();
}  // namespace prims
}  // namespace drx

namespace drx::windows {

// The parameters of reduce_window (`body`: sum, max or min) and of
// select_and_scatter_add (`body`: the select direction GE, GT, LE or LT; no
// dilations), one entry per operand axis. Read only through of().
struct WindowParams {
  std::string body;
  std::vector<int64_t> window, strides, low, high, base_dilation, window_dilation;

  // Reads and checks every key (a missing, mistyped or unknown key is a
  // TypeError naming `op` and the key); `scatter`: select_and_scatter_add's keys.
  static WindowParams of(const Params& p, const std::string& op, bool scatter);
  Params to_params(bool scatter) const;
  // The result shape of windows over x (checked: one entry per axis, sizes,
  // strides and dilations >= 1); a TypeError naming `op`, the attribute and x.
  Shape output_shape(const std::string& op, const Type& x) const;
  ReduceKind kind() const;  // reduce_window's body
};

// reduce_window's bodies by name ("sum", "max", "min"), and back.
std::optional<ReduceKind> body_kind(const std::string& body);
std::string body_name(ReduceKind kind);

inline int64_t dilated(int64_t n, int64_t d) { return n == 0 ? 0 : 1 + d * (n - 1); }

// Where each window element of each output lies in the operand.
struct Geometry {
  Shape in, out;
  std::vector<int64_t> window;
  // table[d][o * window[d] + k]: the operand index along axis d of window
  // element k of output index o, or -1 where it is padding (or a hole of the
  // base dilation).
  std::vector<std::vector<int64_t>> table;
  int64_t window_count = 1;

  Geometry(const Shape& in_shape, const WindowParams& w);

  // f(output flat index, window flat index, operand flat index or -1), outputs
  // in row-major order, each output's window elements in row-major order.
  template <class F>
  void for_each(F&& f) const {
    const size_t r = in.size();
    std::vector<int64_t> in_stride(r, 1);
    for (size_t d = r; d-- > 1;) in_stride[d - 1] = in_stride[d] * in[d];
    int64_t n_out = 1;
    for (int64_t s : out) n_out *= s;
    if (n_out == 0 || window_count == 0) return;
    std::vector<int64_t> o(r, 0), k(r, 0);
    for (int64_t oi = 0; oi < n_out; ++oi) {
      std::fill(k.begin(), k.end(), 0);
      for (int64_t wi = 0; wi < window_count; ++wi) {
        int64_t at = 0;
        for (size_t d = 0; d < r && at >= 0; ++d) {
          const int64_t i = table[d][static_cast<size_t>(o[d] * window[d] + k[d])];
          at = i < 0 ? -1 : at + i * in_stride[d];
        }
        f(oi, wi, at);
        for (size_t d = r; d-- > 0;)
          if (++k[d] < window[d])
            break;
          else
            k[d] = 0;
      }
      for (size_t d = r; d-- > 0;)
        if (++o[d] < out[d])
          break;
        else
          o[d] = 0;
    }
  }
};

// Whether the last axis passes straight through (window 1, stride 1, no padding or
// dilation): outputs then come in runs along it, every window element of a run reading
// consecutive operand elements, which the loops below fold a run at a time (in the same
// order as for_each, so the bits are the same).
inline bool inner_runs(const Geometry& g) {
  if (g.in.empty() || g.window.back() != 1 || g.in.back() != g.out.back()) return false;
  const std::vector<int64_t>& t = g.table.back();
  for (int64_t o = 0; o < g.out.back(); ++o)
    if (t[static_cast<size_t>(o)] != o) return false;
  return true;
}

// f(first output flat index of the run, window flat index, operand flat index of the run's
// first element or -1) over runs of g.out.back() outputs; requires inner_runs(g).
template <class F>
void for_each_run(const Geometry& g, F&& f) {
  const size_t r = g.in.size() - 1;  // the axes outside the run
  std::vector<int64_t> in_stride(r + 1, 1);
  for (size_t d = r + 1; d-- > 1;) in_stride[d - 1] = in_stride[d] * g.in[d];
  const int64_t inner = g.out.back();
  int64_t runs = 1;
  for (size_t d = 0; d < r; ++d) runs *= g.out[d];
  if (runs == 0 || inner == 0 || g.window_count == 0) return;
  std::vector<int64_t> o(r, 0), k(r, 0);
  for (int64_t run = 0; run < runs; ++run) {
    std::fill(k.begin(), k.end(), 0);
    for (int64_t wi = 0; wi < g.window_count; ++wi) {
      int64_t at = 0;
      for (size_t d = 0; d < r && at >= 0; ++d) {
        const int64_t i = g.table[d][static_cast<size_t>(o[d] * g.window[d] + k[d])];
        at = i < 0 ? -1 : at + i * in_stride[d];
      }
      f(run * inner, wi, at);
      for (size_t d = r; d-- > 0;)
        if (++k[d] < g.window[d])
          break;
        else
          k[d] = 0;
    }
    for (size_t d = r; d-- > 0;)
      if (++o[d] < g.out[d])
        break;
      else
        o[d] = 0;
  }
}

// r[c] = fold(r[c], from[c]) over a run, max and min written as selects so that the loop
// vectorises (reduce_fold's results: a NaN wins, a tie keeps r[c]).
template <ReduceKind K, class A, class T>
void fold_run(A* r, const T* from, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const A v = static_cast<A>(from[c]);
    if constexpr (K == ReduceKind::max)
      r[c] = (v > r[c] || v != v) ? v : r[c];
    else if constexpr (K == ReduceKind::min)
      r[c] = (v < r[c] || v != v) ? v : r[c];
    else
      reduce_fold<K>(r[c], v);
  }
}

// y[o] = the fold of x over output o's window, padding being the identity.
// Sums accumulate as drx's sum does (double for floats, 64-bit integers).
template <class T, ReduceKind K>
void reduce_window_loop(const T* x, T* y, const Geometry& g) {
  using Wide = std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>;
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double,
                                 std::conditional_t<std::is_same_v<T, uint8_t>, T, Wide>>;
  if (inner_runs(g)) {
    // max and min are exact in T: the run folds in it, which vectorises.
    using RunAcc = std::conditional_t<K == ReduceKind::sum, Acc, T>;
    const int64_t inner = g.out.back();
    std::vector<RunAcc> run(static_cast<size_t>(inner));
    RunAcc* r = run.data();
    for_each_run(g, [&](int64_t o0, int64_t wi, int64_t at) {
      if (wi == 0) std::fill(run.begin(), run.end(), reduce_identity<T, RunAcc>(K));
      if (at >= 0) fold_run<K>(r, x + at, inner);
      if (wi == g.window_count - 1)
        for (int64_t c = 0; c < inner; ++c) y[o0 + c] = static_cast<T>(r[c]);
    });
    if (g.window_count != 0) return;
  }
  Acc acc = reduce_identity<T, Acc>(K);
  g.for_each([&](int64_t oi, int64_t wi, int64_t at) {
    if (wi == 0) acc = reduce_identity<T, Acc>(K);
    if (at >= 0) reduce_fold<K>(acc, static_cast<Acc>(x[at]));
    if (wi == g.window_count - 1) y[oi] = static_cast<T>(acc);
  });
  if (g.window_count == 0) {
    int64_t n = 1;
    for (int64_t s : g.out) n *= s;
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(reduce_identity<T, Acc>(K));
  }
}

enum class Select { ge, gt, le, lt };
Select select_of(const std::string& dir);

template <class T>
bool selects(Select s, T a, T b) {
  switch (s) {
    case Select::ge:
      return a >= b;
    case Select::gt:
      return a > b;
    case Select::le:
      return a <= b;
    case Select::lt:
      break;
  }
  return a < b;
}

// select_and_scatter_loop a run at a time (inner_runs(g); out already zero): each run keeps
// its selected values beside the window each came from, and adds in the same order as the
// plain loop. Window numbers (int32, as wide as a float) and selects rather than branches,
// so that the selection vectorises.
template <Select S, class T>
void select_and_scatter_runs(const T* operand, const T* source, T* out, const Geometry& g) {
  const int64_t inner = g.out.back();
  std::vector<int32_t> window(static_cast<size_t>(inner));
  std::vector<T> value(static_cast<size_t>(inner));
  std::vector<int64_t> start(static_cast<size_t>(g.window_count));  // each window's `at`
  int32_t* bw = window.data();
  T* bv = value.data();
  for_each_run(g, [&](int64_t o0, int64_t wi, int64_t at) {
    if (wi == 0) std::fill(window.begin(), window.end(), int32_t{-1});
    start[static_cast<size_t>(wi)] = at;
    if (at >= 0) {
      const T* from = operand + at;
      const auto w = static_cast<int32_t>(wi);
      for (int64_t c = 0; c < inner; ++c) {
        const T v = from[c], kept = bv[c];
        const int32_t kept_window = bw[c];
        const bool keep = (kept_window >= 0) & selects(S, kept, v);
        bv[c] = keep ? kept : v;
        bw[c] = keep ? kept_window : w;
      }
    }
    if (wi == g.window_count - 1)
      for (int64_t c = 0; c < inner; ++c) {
        if (bw[c] < 0) continue;
        T& o = out[start[static_cast<size_t>(bw[c])] + c];
        if constexpr (std::is_integral_v<T>)
          o = wrapping::add(o, source[o0 + c]);
        else
          o = static_cast<T>(o + source[o0 + c]);
      }
  });
}

// out (operand's shape) = 0, then source[o] added at the element each window o
// selects: the first non-padding element, replaced by each later one c while
// !select(current, c) (StableHLO's select_and_scatter with an add scatter).
template <class T>
void select_and_scatter_loop(const T* operand, const T* source, T* out, int64_t n_operand,
                             const Geometry& g, Select s) {
  for (int64_t i = 0; i < n_operand; ++i) out[i] = T{0};
  if (inner_runs(g)) {
    switch (s) {
      case Select::ge:
        return select_and_scatter_runs<Select::ge>(operand, source, out, g);
      case Select::gt:
        return select_and_scatter_runs<Select::gt>(operand, source, out, g);
      case Select::le:
        return select_and_scatter_runs<Select::le>(operand, source, out, g);
      case Select::lt:
        return select_and_scatter_runs<Select::lt>(operand, source, out, g);
    }
  }
  int64_t best = -1;
  g.for_each([&](int64_t oi, int64_t wi, int64_t at) {
    if (wi == 0) best = -1;
    if (at >= 0 && (best < 0 || !selects(s, operand[best], operand[at]))) best = at;
    if (wi == g.window_count - 1 && best >= 0) {
      if constexpr (std::is_integral_v<T>)
        out[best] = wrapping::add(out[best], source[oi]);
      else
        out[best] = static_cast<T>(out[best] + source[oi]);
    }
  });
}

}  // namespace drx::windows
