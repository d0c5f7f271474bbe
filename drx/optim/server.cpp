// ServerOptimizer: the round's server step as a GradientTransformation of the pseudo-gradient,
// with the state layout drx fedavg's checkpoints hold.
#include <string>

#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/optim.h"
#include "drx/optim/tx_support.h"
#include "drx/trace/tree_math.h"

DRX_PUBLIC_OPS_FILE(optim_server);

namespace drx::optim {

namespace {

bool is_adaptive(ServerKind kind) {
  return kind == ServerKind::fedadam || kind == ServerKind::fedyogi ||
         kind == ServerKind::fedadagrad;
}

Tree negated(const Tree& t) {
  return tree_map([](const Value& v) { return -v; }, tree_values(t));
}

void check_state(const Tree& state, const std::vector<std::string>& keys, ServerKind kind) {
  bool ok = state.kind() == Tree::Kind::dict && state.keys() == keys;
  if (keys.empty()) ok = state.kind() == Tree::Kind::list && state.size() == 0;
  if (!ok)
    throw Error("ServerOptimizer::apply: state of structure " + state.structure() +
                " does not belong to " + server_kind_name(kind) + " (make it with init(params))");
}

// The server state keeps the quantities of the papers, moments of delta; the transformations
// keep moments of the pseudo-gradient -delta. First moments therefore change sign between the
// two layouts (exactly: negation rounds nothing). `negate` is off for init, whose zeros are
// their own negatives (and stay +0).
Tree server_layout(ServerKind kind, const Tree& tx_state, bool negate) {
  auto flip = [negate](const Tree& t) { return negate ? negated(t) : t; };
  if (kind == ServerKind::fedavgm) return Tree::dict({{"momentum", flip(tx_state[0]["trace"])}});
  if (is_adaptive(kind)) return Tree::dict({{"m", flip(tx_state["m"])}, {"v", tx_state["v"]}});
  return tx_state;
}

Tree transformation_layout(ServerKind kind, const Tree& state) {
  if (kind == ServerKind::fedavgm) {
    check_state(state, {"momentum"}, kind);
    return Tree::list({Tree::dict({{"trace", negated(state["momentum"])}}), Tree()});
  }
  if (is_adaptive(kind)) {
    check_state(state, {"m", "v"}, kind);
    return Tree::dict({{"m", negated(state["m"])}, {"v", tree_values(state["v"])}});
  }
  check_state(state, {}, kind);
  return state;
}

}  // namespace

DRX_PUBLIC_OP("optim::parse_server_kind", "(name: string) -> ServerKind",
              "fedavg, fedavgm, fedadam, fedyogi or fedadagrad by name.");
ServerKind parse_server_kind(const std::string& name) {
  for (ServerKind k : {ServerKind::fedavg, ServerKind::fedavgm, ServerKind::fedadam,
                       ServerKind::fedyogi, ServerKind::fedadagrad})
    if (name == server_kind_name(k)) return k;
  throw Error("unknown server optimizer '" + name +
              "'; choose one of: fedavg, fedavgm, fedadam, fedyogi, fedadagrad");
}

DRX_PUBLIC_OP("optim::server_kind_name", "(kind: ServerKind) -> string",
              "The name of a server optimizer kind.");
std::string server_kind_name(ServerKind kind) {
  switch (kind) {
    case ServerKind::fedavg:
      return "fedavg";
    case ServerKind::fedavgm:
      return "fedavgm";
    case ServerKind::fedadam:
      return "fedadam";
    case ServerKind::fedyogi:
      return "fedyogi";
    case ServerKind::fedadagrad:
      return "fedadagrad";
  }
  return "?";
}

namespace {
GradientTransformation server_transformation(const ServerOptimizer& s) {
  switch (s.kind) {
    case ServerKind::fedavg:
      return sgd(s.lr);
    case ServerKind::fedavgm:
      return sgd(s.lr, s.momentum);
    case ServerKind::fedadam:
      return fedadam(s.lr, s.beta1, s.beta2, s.eps);
    case ServerKind::fedyogi:
      return fedyogi(s.lr, s.beta1, s.beta2, s.eps);
    case ServerKind::fedadagrad:
      return fedadagrad(s.lr, s.beta1, s.eps);
  }
  throw Error("ServerOptimizer: unknown kind " + std::to_string(static_cast<int>(s.kind)));
}
}  // namespace

GradientTransformation ServerOptimizer::transformation() const {
  try {
    return server_transformation(*this);
  } catch (const Error& e) {
    throw Error("ServerOptimizer (" + server_kind_name(kind) + "): " + e.what());
  }
}

Tree ServerOptimizer::init(const Tree& params) const {
  return server_layout(kind, transformation().init(params), /*negate=*/false);
}

std::pair<Tree, Tree> ServerOptimizer::apply(const Tree& params, const Tree& delta,
                                             const Tree& state) const {
  const GradientTransformation tx = transformation();
  Tree tx_state = transformation_layout(kind, state);
  detail::check_matches("ServerOptimizer::apply", "delta", delta, "params", params);
  Tree p = tree_values(params);
  auto [updates, next] = tx.update(negated(delta), tx_state, p);
  return {apply_updates(p, updates), server_layout(kind, next, /*negate=*/true)};
}

}  // namespace drx::optim
