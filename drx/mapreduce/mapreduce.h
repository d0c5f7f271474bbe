#pragma once
// The DrJAX programming model: placements, and the building blocks broadcast,
// map_fn and reduce_* over them. See DESIGN.md §1.
#include <optional>
#include <string>
#include <vector>

#include "drx/mapreduce/placements.h"
#include "drx/trace/function.h"

namespace drx {

// ---- type-erased cores ----------------------------------------------------
// in_placements: one entry per argument ("" = server); empty = infer (an
// argument whose leading dimension equals exactly one declared placement's
// size is placed there; one matching several stays on the server). An error
// escaping f then ends with notes saying what inference did to each such
// argument and the equivalent in_placements.
TreeFn program_fn(Placements placements, TreeFn f, std::vector<std::string> in_placements);
Tree map_fn_trees(const TreeFn& f, const std::vector<Tree>& args);

// ---- public API -------------------------------------------------------------
// Declares `placements` for f; the result is an ordinary function to jit,
// grad, jvp and vmap.
template <class F>
auto program(Placements placements, F f, std::vector<std::string> in_placements = {}) {
  using Fn = typename Signature<F>::template apply<detail::SameOf>::type;
  return Fn(program_fn(std::move(placements), erase(std::move(f)), std::move(in_placements)));
}

// Server value -> one copy per client ([n, ...] placed at the placement).
Value broadcast(const Value& x);
Value broadcast(const Value& x, const std::string& placement);
Tree broadcast(const Tree& x);
Tree broadcast(const Tree& x, const std::string& placement);

// Placed -> server. Over a placement of size 0 (a cohort in which every client dropped
// out) reduce_sum and reduce_mean give 0 (the mean is not 0/0).
Value reduce_sum(const Value& x);
Value reduce_mean(const Value& x);
Value reduce_max(const Value& x);
Value reduce_min(const Value& x);
Tree reduce_sum(const Tree& x);
Tree reduce_mean(const Tree& x);
Tree reduce_max(const Tree& x);
Tree reduce_min(const Tree& x);
// sum_i w_i x_i / sum_i w_i with w placed of shape [n]; differentiable in w. When the
// weights sum to exactly 0 (all weights 0: every client dropped out, or no clients) the result
// is 0, with derivative 0 in x and w, rather than NaN; otherwise its bits are those of the
// division.
Value reduce_weighted_mean(const Value& x, const Value& w);
Tree reduce_weighted_mean(const Tree& x, const Value& w);

// Over the clients of x's placement, per element: exp(x_i) / sum_j exp(x_j)
// (shifted by the max for stability), e.g. learned aggregation weights; and
// w_i / sum_j w_j. Both stay placed at x's placement.
Value placement_softmax(const Value& x);
Value placement_normalize(const Value& w);

// Applies f to each client's slices of the placed arguments (Values or Trees).
template <class F, class... X>
auto map_fn(F f, const X&... xs) {
  using R = typename Signature<F>::result;
  return from_tree<R>(map_fn_trees(erase(std::move(f)), {to_tree(xs)...}));
}

// Inside a map_fn body: the index of the client (the element of the mapped
// placement) the body is running for, an i32 scalar, global to the program:
// the same on any mesh, however the placement is split across devices. With
// random keys, fold_in(key, client_index()) gives each client its own stream.
// In a map_fn over groups it is the group's index; in a map_fn over clients
// inside a group's body, the client's index within its group.
Value client_index();

// ---- for primitive rules: emit without the program-scope checks -----------
Value emit_broadcast(const Value& x, const std::string& placement, int64_t size);
Value emit_reduce_sum(const Value& x);

}  // namespace drx
