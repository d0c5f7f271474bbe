#include <cmath>
#include <string>

#include "drx/ops/ops.h"
#include "drx/optim/optim.h"

namespace drx::optim {

namespace {

Value as_value(const Tree& leaf) {
  return leaf.kind() == Tree::Kind::array ? constant(leaf.array()) : leaf.value();
}

// Zeros shaped like params, keeping the leaf kind (Arrays stay Arrays).
Tree zeros_tree(const Tree& params) {
  std::vector<Tree> leaves;
  for (const Tree& l : tree_leaves(params)) {
    if (l.kind() == Tree::Kind::array)
      leaves.emplace_back(zeros(l.array().shape(), l.array().dtype()));
    else
      leaves.emplace_back(zeros_like(l.value()));
  }
  return tree_unflatten(params, leaves);
}

// fn over matching leaves of several trees of params' structure (Array leaves become constants).
Tree map_leaves(const std::function<Value(const std::vector<Value>&)>& fn, const Tree& params,
                const std::vector<const Tree*>& others, const char* what) {
  std::vector<std::vector<Tree>> leaves;
  for (const Tree* t : others) {
    if (t->structure() != params.structure())
      throw Error(std::string("ServerOptimizer::apply: ") + what + " has structure " +
                  t->structure() + ", params have " + params.structure());
    leaves.push_back(tree_leaves(*t));
  }
  std::vector<Tree> p = tree_leaves(params), out;
  for (size_t i = 0; i < p.size(); ++i) {
    std::vector<Value> args{as_value(p[i])};
    for (const auto& l : leaves) args.push_back(as_value(l[i]));
    out.emplace_back(fn(args));
  }
  return tree_unflatten(params, out);
}

void check_state(const Tree& state, const std::vector<std::string>& keys, ServerKind kind) {
  bool ok = state.kind() == Tree::Kind::dict && state.keys() == keys;
  if (keys.empty()) ok = state.kind() == Tree::Kind::list && state.size() == 0;
  if (!ok)
    throw Error("ServerOptimizer::apply: state of structure " + state.structure() +
                " does not belong to " + server_kind_name(kind) + " (make it with init(params))");
}

}  // namespace

ServerKind parse_server_kind(const std::string& name) {
  if (name == "fedavg") return ServerKind::fedavg;
  if (name == "fedavgm") return ServerKind::fedavgm;
  if (name == "fedadam") return ServerKind::fedadam;
  throw Error("unknown server optimizer '" + name + "'; choose one of: fedavg, fedavgm, fedadam");
}

std::string server_kind_name(ServerKind kind) {
  switch (kind) {
    case ServerKind::fedavg:
      return "fedavg";
    case ServerKind::fedavgm:
      return "fedavgm";
    case ServerKind::fedadam:
      return "fedadam";
  }
  return "?";
}

Tree ServerOptimizer::init(const Tree& params) const {
  switch (kind) {
    case ServerKind::fedavg:
      return Tree();
    case ServerKind::fedavgm:
      return Tree::dict({{"momentum", zeros_tree(params)}});
    case ServerKind::fedadam:
      return Tree::dict({{"m", zeros_tree(params)}, {"v", zeros_tree(params)}});
  }
  throw Error("ServerOptimizer::init: unknown kind");
}

std::pair<Tree, Tree> ServerOptimizer::apply(const Tree& params, const Tree& delta,
                                             const Tree& state) const {
  const double lr_ = lr;
  switch (kind) {
    case ServerKind::fedavg: {
      check_state(state, {}, kind);
      Tree p = map_leaves([&](const std::vector<Value>& a) { return a[0] + lr_ * a[1]; }, params,
                          {&delta}, "delta");
      return {p, Tree()};
    }
    case ServerKind::fedavgm: {
      check_state(state, {"momentum"}, kind);
      const double mu = momentum;
      Tree v = map_leaves([&](const std::vector<Value>& a) { return mu * a[2] + a[1]; }, params,
                          {&delta, &state["momentum"]}, "delta or state.momentum");
      Tree p = map_leaves([&](const std::vector<Value>& a) { return a[0] + lr_ * a[1]; }, params,
                          {&v}, "momentum");
      return {p, Tree::dict({{"momentum", v}})};
    }
    case ServerKind::fedadam: {
      check_state(state, {"m", "v"}, kind);
      const double b1 = beta1, b2 = beta2, e = eps;
      Tree m =
          map_leaves([&](const std::vector<Value>& a) { return b1 * a[2] + (1.0 - b1) * a[1]; },
                     params, {&delta, &state["m"]}, "delta or state.m");
      Tree v = map_leaves(
          [&](const std::vector<Value>& a) { return b2 * a[2] + (1.0 - b2) * square(a[1]); },
          params, {&delta, &state["v"]}, "delta or state.v");
      Tree p = map_leaves(
          [&](const std::vector<Value>& a) { return a[0] + lr_ * a[1] / (sqrt(a[2]) + e); }, params,
          {&m, &v}, "m or v");
      return {p, Tree::dict({{"m", m}, {"v", v}})};
    }
  }
  throw Error("ServerOptimizer::apply: unknown kind");
}

}  // namespace drx::optim
