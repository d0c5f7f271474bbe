#pragma once
// Function-level transformations: grad, value_and_grad, jvp, vjp, vmap.
// Each traces its function into a Program, applies the Program transform and
// replays the result into the current trace, so they nest to any order and
// compose with jit.
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "drx/trace/function.h"

namespace drx {

// Options of grad and value_and_grad, e.g.
// drx::grad(f, 1, drx::GradOptions{.allow_int = true}).
struct GradOptions {
  // Differentiating with respect to an integer or bool argument (or Tree leaf)
  // is an error, since such a gradient is meaningless and usually a mistaken
  // argnum; with allow_int it is zeros of the argument's dtype (JAX's
  // allow_int=True, which gives float0 zeros).
  bool allow_int = false;
};

// ---- type-erased cores ----------------------------------------------------
struct GradSpec {
  std::vector<int> argnums{0};
  bool with_value = false;  // result is [value, grads]
  bool as_list = false;     // grads as a list even for one argnum
  GradOptions options;
};
TreeFn grad_fn(TreeFn f, GradSpec spec);
// Returns [outputs, output tangents].
Tree jvp_call(const TreeFn& f, const std::vector<Tree>& primals, const std::vector<Tree>& tangents);
struct VjpResult {
  Tree outputs;
  std::function<std::vector<Tree>(const Tree& cotangent)> pullback;
};
VjpResult vjp_call(const TreeFn& f, const std::vector<Tree>& primals);
using Axes = std::vector<std::optional<int64_t>>;
TreeFn vmap_fn(TreeFn f, Axes in_axes, Axes out_axes);

namespace detail {
// Runs `trace`, the tracing of a user's function by a public operation (a
// map_fn body, a cond branch, the function grad differentiates). A drx::Error
// it throws is rethrown as the same type with the line "\n  in <where>"
// appended, so the message says which body failed; nested bodies add one line
// each, innermost first, like a traceback.
void with_trace_context(const std::string& where, const std::function<void()>& trace);

template <class... A>
struct GradType {
  using first = std::tuple_element_t<0, std::tuple<A...>>;
  // The gradient has the argument's type when all arguments share one type,
  // otherwise it is a Tree (which converts to a Value when it is a leaf).
  using type = std::conditional_t<(std::is_same_v<first, A> && ...), first, Tree>;
};
template <class R, class... A>
struct GradOf {
  using type = Function<typename GradType<A...>::type(A...)>;
};
template <class R, class... A>
struct GradsOf {
  using type = Function<std::vector<typename GradType<A...>::type>(A...)>;
};
template <class R, class... A>
struct ValueAndGradOf {
  using type = Function<std::pair<R, typename GradType<A...>::type>(A...)>;
};
}  // namespace detail

// d f / d (argument argnum); f must return a floating-point scalar.
template <class F>
auto grad(F f, int argnum = 0, GradOptions options = {}) {
  using Fn = typename Signature<F>::template apply<detail::GradOf>::type;
  return Fn(grad_fn(erase(std::move(f)), {{argnum}, false, false, options}));
}
// Gradients with respect to several arguments, as a list.
template <class F>
auto grad(F f, std::vector<int> argnums, GradOptions options = {}) {
  using Fn = typename Signature<F>::template apply<detail::GradsOf>::type;
  return Fn(grad_fn(erase(std::move(f)), {std::move(argnums), false, true, options}));
}
template <class F>
auto value_and_grad(F f, int argnum = 0, GradOptions options = {}) {
  using Fn = typename Signature<F>::template apply<detail::ValueAndGradOf>::type;
  return Fn(grad_fn(erase(std::move(f)), {{argnum}, true, false, options}));
}

// Forward mode on Values inside a trace: returns (f(primals), J tangents).
template <class F>
auto jvp(F f, const std::vector<Tree>& primals, const std::vector<Tree>& tangents) {
  using R = typename Signature<F>::result;
  Tree r = jvp_call(erase(std::move(f)), primals, tangents);
  return std::pair<R, R>(from_tree<R>(r[0]), from_tree<R>(r[1]));
}

// Reverse mode on Values inside a trace: returns (f(primals), pullback), where
// pullback(cotangent of the output) gives the cotangent of each primal.
template <class F>
auto vjp(F f, const std::vector<Tree>& primals) {
  using R = typename Signature<F>::result;
  VjpResult v = vjp_call(erase(std::move(f)), primals);
  return std::make_pair(from_tree<R>(v.outputs), std::move(v.pullback));
}

// Maps f over an axis of its arguments. in_axes: one entry per argument
// (std::nullopt = not batched; a single entry applies to all arguments);
// out_axes: one per output leaf, or a single entry for all.
template <class F>
auto vmap(F f, Axes in_axes = {0}, Axes out_axes = {0}) {
  using Fn = typename Signature<F>::template apply<detail::SameOf>::type;
  return Fn(vmap_fn(erase(std::move(f)), std::move(in_axes), std::move(out_axes)));
}

}  // namespace drx
