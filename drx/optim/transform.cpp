// The GradientTransformation building blocks: scaling, momentum, weight decay, clipping,
// chain and apply_updates.
#include "drx/optim/transform.h"

#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/tx_support.h"
#include "drx/trace/tree_math.h"

DRX_PUBLIC_OPS_FILE(optim_transform);

namespace drx::optim {

namespace {

Tree no_state(const Tree&) { return Tree(); }

// A transformation without state whose updates are fn(grads, params) (Values).
GradientTransformation stateless(std::string name,
                                 std::function<Tree(const Tree& grads, const Tree& params)> fn) {
  GradientTransformation t;
  t.name = name;
  t.init = no_state;
  t.update = [name, fn = std::move(fn)](const Tree& grads, const Tree& state,
                                        const Tree& params) -> std::pair<Tree, Tree> {
    detail::check_empty_state(name, state);
    detail::check_grads(name, grads);
    return {fn(tree_values(grads), params), Tree()};
  };
  return t;
}

}  // namespace

DRX_PUBLIC_OP("optim::identity", "() -> GradientTransformation", "Updates = grads; no state.");
GradientTransformation identity() {
  return stateless("identity", [](const Tree& g, const Tree&) { return g; });
}

DRX_PUBLIC_OP("optim::scale", "(factor: double) -> GradientTransformation",
              "Updates = factor * grads; no state.");
GradientTransformation scale(double factor) {
  detail::check_finite("scale", "factor", factor);
  return stateless("scale", [factor](const Tree& g, const Tree&) { return tree_scale(g, factor); });
}

DRX_PUBLIC_OP("optim::scale_by_schedule", "(schedule: Schedule) -> GradientTransformation",
              "Updates = schedule(count) * grads; state {count}.");
GradientTransformation scale_by_schedule(Schedule schedule) {
  if (!schedule) throw Error("scale_by_schedule: an empty Schedule was given");
  GradientTransformation t;
  t.name = "scale_by_schedule";
  t.init = [](const Tree& params) { return Tree::dict({{"count", detail::zero_count(params)}}); };
  t.update = [schedule = std::move(schedule)](const Tree& grads, const Tree& state,
                                              const Tree&) -> std::pair<Tree, Tree> {
    const std::string op = "scale_by_schedule";
    detail::check_state_keys(op, state, {"count"});
    detail::check_grads(op, grads);
    Value count = detail::count_of(op, state);
    Value step_size = detail::scheduled(op, schedule, count);
    Tree updates =
        tree_map([&](const Value& g) { return detail::in_dtype(step_size, g.dtype()) * g; },
                 tree_values(grads));
    return {updates, Tree::dict({{"count", Tree(detail::increment(count))}})};
  };
  return t;
}

DRX_PUBLIC_OP("optim::scale_by_learning_rate", "(lr: LearningRate) -> GradientTransformation",
              "Updates = -lr * grads (a schedule: -lr(count) * grads).");
GradientTransformation scale_by_learning_rate(const LearningRate& lr) {
  if (!lr.is_schedule()) {
    detail::check_non_negative("scale_by_learning_rate", "the learning rate", lr.value());
    GradientTransformation t = scale(-lr.value());
    t.name = "scale_by_learning_rate";
    return t;
  }
  Schedule s = lr.schedule();
  GradientTransformation t = scale_by_schedule([s](const Value& count) { return -s(count); });
  t.name = "scale_by_learning_rate";
  return t;
}

DRX_PUBLIC_OP("optim::trace", "(decay: double, nesterov: bool = false) -> GradientTransformation",
              "Momentum: t = grads + decay * t; state {trace}.");
GradientTransformation trace(double decay, bool nesterov) {
  detail::check_non_negative("trace", "decay", decay);
  GradientTransformation t;
  t.name = "trace";
  t.init = [](const Tree& params) { return Tree::dict({{"trace", tree_zeros_like(params)}}); };
  t.update = [decay, nesterov](const Tree& grads, const Tree& state,
                               const Tree&) -> std::pair<Tree, Tree> {
    const std::string op = "trace";
    detail::check_state_keys(op, state, {"trace"});
    detail::check_grads(op, grads);
    detail::check_matches(op, "state[\"trace\"]", state["trace"], "grads", grads);
    Tree g = tree_values(grads);
    auto step = [decay](const Value& gi, const Value& ti) { return gi + decay * ti; };
    Tree t_new = tree_map(step, g, tree_values(state["trace"]));
    return {nesterov ? tree_map(step, g, t_new) : t_new, Tree::dict({{"trace", t_new}})};
  };
  return t;
}

DRX_PUBLIC_OP("optim::add_decayed_weights", "(weight_decay: double) -> GradientTransformation",
              "Updates = grads + weight_decay * params (decoupled weight decay).");
GradientTransformation add_decayed_weights(double weight_decay) {
  detail::check_non_negative("add_decayed_weights", "weight_decay", weight_decay);
  return stateless("add_decayed_weights", [weight_decay](const Tree& g, const Tree& params) {
    detail::check_matches("add_decayed_weights", "params", params, "grads", g);
    return tree_map([&](const Value& gi, const Value& pi) { return gi + weight_decay * pi; }, g,
                    tree_values(params));
  });
}

DRX_PUBLIC_OP("optim::clip_by_global_norm", "(max_norm: double) -> GradientTransformation",
              "Rescales grads to global L2 norm max_norm when their norm is larger.");
GradientTransformation clip_by_global_norm(double max_norm) {
  const std::string op = "clip_by_global_norm";
  detail::check_positive(op, "max_norm", max_norm);
  return stateless(op, [op, max_norm](const Tree& g, const Tree&) {
    std::vector<Tree> leaves = tree_leaves(g);
    if (leaves.empty()) return g;
    for (const Tree& l : leaves)
      if (l.value().dtype() != leaves[0].value().dtype())
        throw Error(op + ": the grads' leaves differ in dtype (" + leaves[0].value().type().str() +
                    " and " + l.value().type().str() + "); one global norm needs one dtype");
    Value norm = tree_l2_norm(g).value();
    Value keep = less(norm, scalar_like(norm, max_norm));
    return tree_map([&](const Value& x) { return where(keep, x, x / norm * max_norm); }, g);
  });
}

DRX_PUBLIC_OP("optim::chain",
              "(parts: vector<GradientTransformation>) -> GradientTransformation | (first: "
              "GradientTransformation, rest...) -> GradientTransformation",
              "The transformations applied in order; the state is the list of their states.");
GradientTransformation chain(std::vector<GradientTransformation> parts) {
  std::string name = "chain(";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].init || !parts[i].update)
      throw Error("chain: part " + std::to_string(i) + " (" + parts[i].name +
                  ") has no init or update function");
    name += (i ? ", " : "") + parts[i].name;
  }
  name += ")";
  GradientTransformation t;
  t.name = name;
  t.init = [parts](const Tree& params) {
    std::vector<Tree> states;
    for (const GradientTransformation& p : parts) states.push_back(p.init(params));
    return Tree::list(std::move(states));
  };
  t.update = [parts, name](const Tree& grads, const Tree& state,
                           const Tree& params) -> std::pair<Tree, Tree> {
    if (state.kind() != Tree::Kind::list || state.size() != parts.size())
      throw Error(name + ": expected a list of " + std::to_string(parts.size()) +
                  " states (one per transformation), got a state of structure " +
                  state.structure() + " (make it with init(params))");
    Tree updates = grads;
    std::vector<Tree> states;
    for (size_t i = 0; i < parts.size(); ++i) {
      auto [u, s] = parts[i].update(updates, state[i], params);
      updates = u;
      states.push_back(s);
    }
    return {updates, Tree::list(std::move(states))};
  };
  return t;
}

DRX_PUBLIC_OP("optim::apply_updates", "(params: Tree, updates: Tree) -> Tree",
              "params + updates, on Values or on host Arrays.");
Tree apply_updates(const Tree& params, const Tree& updates) {
  detail::check_matches("apply_updates", "updates", updates, "params", params);
  return tree_add(params, updates);
}

}  // namespace drx::optim
