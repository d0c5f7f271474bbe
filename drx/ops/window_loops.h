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

// y[o] = the fold of x over output o's window, padding being the identity.
// Sums accumulate as drx's sum does (double for floats, 64-bit integers).
template <class T, ReduceKind K>
void reduce_window_loop(const T* x, T* y, const Geometry& g) {
  using Wide = std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>;
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double,
                                 std::conditional_t<std::is_same_v<T, uint8_t>, T, Wide>>;
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

// out (operand's shape) = 0, then source[o] added at the element each window o
// selects: the first non-padding element, replaced by each later one c while
// !select(current, c) (StableHLO's select_and_scatter with an add scatter).
template <class T>
void select_and_scatter_loop(const T* operand, const T* source, T* out, int64_t n_operand,
                             const Geometry& g, Select s) {
  for (int64_t i = 0; i < n_operand; ++i) out[i] = T{0};
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
