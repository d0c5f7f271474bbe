// The generic federated round: client local steps in a map_fn, an aggregation, a server step.
#include "drx/optim/federated_round.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "drx/mapreduce/mapreduce.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/tx_support.h"
#include "drx/privacy/dp_fedavg.h"
#include "drx/random/random.h"
#include "drx/trace/tree_math.h"
#include "drx/transforms/api.h"
#include "drx/transforms/cond.h"
#include "drx/transforms/loops.h"

DRX_PUBLIC_OPS_FILE(optim_federated_round);

namespace drx::optim {

using detail::param_values;

ServerUpdate::ServerUpdate(const GradientTransformation& tx)
    : init(tx.init),
      apply([tx](const Tree& params, const Tree& delta, const Tree& state) {
        Tree p = tree_values(params);
        Tree g = tree_map([](const Value& d) { return -d; }, tree_values(delta));
        auto [updates, next] = tx.update(g, state, p);
        return std::pair<Tree, Tree>(apply_updates(p, updates), next);
      }),
      name(tx.name) {}

ServerUpdate::ServerUpdate(const ServerOptimizer& opt)
    : init([opt](const Tree& params) { return opt.init(params); }),
      apply([opt](const Tree& params, const Tree& delta, const Tree& state) {
        return opt.apply(params, delta, state);
      }),
      name(server_kind_name(opt.kind)) {}

namespace detail {

void check_dp(const DpSpec& d, const std::string& op) {
  if (!(d.noise_multiplier >= 0) || !std::isfinite(d.noise_multiplier))
    throw Error(op + ": DP noise multiplier must be finite and >= 0, got " +
                std::to_string(d.noise_multiplier));
  if (!(d.expected_cohort > 0) || !std::isfinite(d.expected_cohort))
    throw Error(op + ": DP expected cohort must be positive, got " +
                std::to_string(d.expected_cohort));
  if (d.adaptive()) {
    if (d.target_quantile > 1 || !(d.clip_lr >= 0) || !(d.count_noise >= 0))
      throw Error(op +
                  ": adaptive clipping needs a target quantile in (0, 1] and non-negative clip "
                  "learning rate and count noise");
    if (d.noise_multiplier > 0) privacy::update_noise_multiplier(d.noise_multiplier, d.count_noise);
  }
}

}  // namespace detail

namespace {

// Divides by the total weight, guarded so that an empty cohort gives 0, not NaN.
Value safe_div(const Value& x, const Value& total) {
  return x / maximum(total, x.dtype() == DType::f64 ? 1e-300 : 1e-30);
}

// Rows [lo, hi) of each leaf.
Tree step_range(const Tree& t, int64_t lo, int64_t hi) {
  return tree_map(
      [&](const Value& v) {
        std::vector<int64_t> starts(v.ndim(), 0), stops = v.shape();
        starts[0] = lo, stops[0] = hi;
        return slice(v, starts, stops);
      },
      t);
}

// The batches' common number of steps (their leaves' leading axis).
int64_t steps_of(const Tree& batches, const std::string& op) {
  std::vector<Tree> leaves = tree_leaves(batches);
  if (leaves.empty()) throw Error(op + ": a client's batches have no leaves");
  int64_t steps = -1;
  for (const Tree& l : leaves) {
    const Type& t = l.value().type();
    if (t.shape.empty() || (steps >= 0 && t.shape[0] != steps))
      throw Error(op +
                  ": every leaf of a client's batches must have the leading [steps] axis of the "
                  "first, got " +
                  t.str() + (steps >= 0 ? " beside steps " + std::to_string(steps) : ""));
    steps = t.shape[0];
  }
  return steps;
}

// The DP-FedAvg server side: noisy mean of the clipped updates, next clip and key.
struct DpAggregate {
  Tree delta;
  Value clip, key;
};
DpAggregate dp_aggregate(const DpSpec& d, const Tree& sums, const Tree& dp_state) {
  const Value clip = dp_state["clip"].value();
  std::vector<Value> keys = random::split(dp_state["key"].value(), 3);
  const double z = d.adaptive() && d.noise_multiplier > 0
                       ? privacy::update_noise_multiplier(d.noise_multiplier, d.count_noise)
                       : d.noise_multiplier;
  Tree delta = privacy::noisy_mean(sums["delta"], keys[1], z, clip, d.expected_cohort);
  Value next_clip =
      d.adaptive()
          ? privacy::adapted_clip(clip, sums["unclipped"].value(), keys[2],
                                  {d.target_quantile, d.clip_lr, d.count_noise}, d.expected_cohort)
          : clip;
  return {delta, next_clip, keys[0]};
}

void check_config(const LossFn& loss, const GradientTransformation& client_tx,
                  const ServerUpdate& server, int64_t cohort, const FederatedRoundSpec& spec) {
  const std::string& op = spec.name;
  if (!loss) throw Error(op + ": the loss function is empty");
  if (!client_tx.init || !client_tx.update)
    throw Error(op + ": the client optimizer (a GradientTransformation) has no init or update");
  if (!server.init || !server.apply) throw Error(op + ": the server update is empty");
  if (cohort < 1) throw Error(op + ": cohort must be >= 1, got " + std::to_string(cohort));
  if (spec.full_steps < 0)
    throw Error(op + ": full_steps must be >= 0, got " + std::to_string(spec.full_steps));
  if (spec.full_steps > 0 && !spec.step_weight)
    throw Error(op + ": full_steps " + std::to_string(spec.full_steps) +
                " without a step_weight: every step runs anyway, so it would do nothing");
  if (spec.dp) detail::check_dp(*spec.dp, op);
}

void check_placed(const std::string& op, const std::string& what, const Tree& t, int64_t cohort) {
  for (const Tree& leaf : tree_leaves(t)) {
    const Type& lt = leaf.value().type();
    if (lt.placement != "clients" || lt.shape.empty() || lt.shape[0] != cohort)
      throw Error(op + ": " + what + " must be placed at clients with leading axis " +
                  std::to_string(cohort) + " (the cohort), got a leaf " + lt.str());
  }
}

}  // namespace

DRX_PUBLIC_OP("optim::local_steps",
              "(loss: LossFn, client_tx: GradientTransformation, start: Tree, opt_state: Tree, "
              "batches: Tree, step_weight: StepWeightFn = {}, full_steps: int64 = 0) -> LocalSteps",
              "One client's local optimizer steps over its batches, as a scan.");
LocalSteps local_steps(const LossFn& loss, const GradientTransformation& client_tx,
                       const Tree& start, const Tree& opt_state, const Tree& batches,
                       const StepWeightFn& step_weight, int64_t full_steps) {
  const std::string op = "local_steps";
  const int64_t steps = steps_of(batches, op);
  if (full_steps < 0 || full_steps > steps)
    throw Error(op + ": full_steps must be in [0, steps = " + std::to_string(steps) + "], got " +
                std::to_string(full_steps));
  auto step_grad = value_and_grad([loss](Tree p, Tree batch) {
    Value l = loss(p, batch);
    if (!l.type().shape.empty() || !is_floating(l.dtype()))
      throw Error("local_steps: the loss function must return a floating scalar [], got " +
                  l.type().str());
    return l;
  });
  const DType dt = tree_leaves(start)[0].value().dtype();
  const Value zero = fill({}, 0.0, dt);
  if (!step_weight) {
    auto step = [&](const Tree& c, const Tree& batch) -> std::pair<Tree, Tree> {
      auto [l, g] = step_grad(c["p"], batch);
      auto [updates, next] = client_tx.update(g, c["opt"], c["p"]);
      return {Tree::dict({{"loss_sum", Tree(c["loss_sum"].value() + l)},
                          {"opt", next},
                          {"p", apply_updates(c["p"], updates)}}),
              Tree()};
    };
    Tree carry = Tree::dict({{"loss_sum", Tree(zero)}, {"opt", opt_state}, {"p", start}});
    carry = scan(step, carry, batches).first;
    return {carry["p"], carry["opt"],
            carry["loss_sum"].value() / static_cast<double>(std::max<int64_t>(steps, 1))};
  }
  // o = [state, batch]; the running loss sum weighs each step's mean by its examples.
  auto update = [&](const Tree& o) {
    Tree pv = o[0]["p"];
    const Tree& batch = o[1];
    auto [l, g] = step_grad(pv, batch);
    Value sum_b = o[0]["loss_sum"].value() + l * maximum(step_weight(batch), 1.0);
    auto [updates, next] = client_tx.update(g, o[0]["opt"], pv);
    return Tree::dict({{"count", o[0]["count"]},
                       {"loss_sum", Tree(sum_b)},
                       {"opt", next},
                       {"p", apply_updates(pv, updates)}});
  };
  auto skip = [](const Tree& o) { return o[0]; };
  // The leading steps every client has data in run the update directly; in the others a step
  // without real examples is skipped, momentum included (a cond), so padded steps of uneven
  // clients cost nothing.
  auto scan_steps = [&](bool may_be_empty) {
    return [&, may_be_empty](const Tree& c, const Tree& batch) -> std::pair<Tree, Tree> {
      Value n = step_weight(batch);
      Tree state = Tree::dict({{"count", Tree(c["count"].value() + n)},
                               {"loss_sum", c["loss_sum"]},
                               {"opt", c["opt"]},
                               {"p", c["p"]}});
      Tree operands = Tree::list({state, batch});
      return {may_be_empty ? cond(greater(n, scalar_like(n, 0.0)), update, skip, operands)
                           : update(operands),
              Tree()};
    };
  };
  Tree carry = Tree::dict(
      {{"count", Tree(zero)}, {"loss_sum", Tree(zero)}, {"opt", opt_state}, {"p", start}});
  if (full_steps > 0)
    carry = scan(scan_steps(false), carry, step_range(batches, 0, full_steps)).first;
  if (full_steps < steps)
    carry = scan(scan_steps(true), carry, step_range(batches, full_steps, steps)).first;
  return {carry["p"], carry["opt"],
          carry["loss_sum"].value() / maximum(carry["count"].value(), 1.0)};
}

DRX_PUBLIC_OP("optim::fedavg_round_body",
              "(loss: LossFn, client_tx: GradientTransformation, server: ServerUpdate, cohort: "
              "int64, spec: FederatedRoundSpec, params: Tree, state: Tree, clients: Tree, "
              "shared: Tree) -> Tree",
              "The generic federated round on traced Values, inside a program over clients.");
Tree fedavg_round_body(const LossFn& loss, const GradientTransformation& client_tx,
                       const ServerUpdate& server, int64_t cohort, const FederatedRoundSpec& spec,
                       const Tree& params, const Tree& state, const Tree& clients,
                       const Tree& shared) {
  check_config(loss, client_tx, server, cohort, spec);
  const std::string& op = spec.name;
  DType dt;
  Tree p = param_values(params, op.c_str(), &dt);
  const bool carried = spec.client_state;
  if (clients.kind() != Tree::Kind::dict || !clients.contains("data") ||
      !clients.contains("weights") || clients.contains("state") != carried ||
      clients.size() != (carried ? 3u : 2u))
    throw Error(op + ": clients must be the dict {\"data\", \"weights\"" +
                (carried ? ", \"state\"" : "") + "}" +
                (carried ? " (spec.client_state is set)" : "") + ", got " + clients.structure());
  const Tree& weights_tree = clients["weights"];
  const Type wt = weights_tree.is_leaf() ? weights_tree.value().type() : Type{};
  if (!weights_tree.is_leaf() || wt.shape != Shape{cohort} || wt.placement != "clients" ||
      !is_floating(wt.dtype))
    throw Error(op + ": weights must be floating [" + std::to_string(cohort) +
                "] placed at clients, got " +
                (weights_tree.is_leaf() ? wt.str() : weights_tree.structure()));
  const Value weights = weights_tree.value();
  check_placed(op, "the client data", clients["data"], cohort);
  if (carried) check_placed(op, "the client states", clients["state"], cohort);
  for (const Tree& leaf : tree_leaves(shared))
    if (!leaf.value().type().placement.empty())
      throw Error(op + ": the shared inputs must be unplaced (they are broadcast), got a leaf " +
                  leaf.value().type().str());
  const bool dp = spec.dp.has_value();
  if (dp &&
      (state.kind() != Tree::Kind::dict || !state.contains("dp") || !state.contains("server")))
    throw Error(op +
                ": with DP the state must be {\"dp\": {\"clip\", \"key\"}, \"server\": ...} "
                "(optim::dp_round_state), got " +
                state.structure());
  Tree server_state = dp ? state["server"] : state;
  // The clients read the clip only under DP (an empty tree otherwise: no operand).
  Tree client_clip = dp ? Tree(broadcast(tree_values(state["dp"])["clip"].value())) : Tree();
  Tree client_states = carried ? clients["state"] : Tree();
  Tree per_client = map_fn(
      [loss, client_tx, spec, dt, carried, dp](Tree p0, Tree shared_k, Tree data_k, Value w_k,
                                               Tree clip_k, Tree state_k) -> Tree {
        Value w = astype(w_k, dt);
        Tree batches = spec.prepare ? spec.prepare(shared_k, data_k) : data_k;
        LocalSteps r = local_steps(loss, client_tx, p0, carried ? state_k : client_tx.init(p0),
                                   batches, spec.step_weight, spec.full_steps);
        std::vector<std::pair<std::string, Tree>> out = {{"loss", Tree(w * r.loss)},
                                                         {"weight", Tree(w)}};
        if (carried) out.emplace_back("client_state", r.opt_state);
        if (spec.metrics) out.emplace_back("metrics", spec.metrics(r.params, p0, batches, r.loss));
        if (!dp) {
          out.emplace_back(
              "delta", tree_map([&](const Value& pk, const Value& p0k) { return w * (pk - p0k); },
                                r.params, p0));
          return Tree::dict(std::move(out));
        }
        // DP-FedAvg: the participation weight (0 or 1) times the clipped update.
        const Value clip = clip_k.value();
        privacy::Clipped c = privacy::clip_by_l2_norm(tree_sub(r.params, p0), clip);
        out.emplace_back("delta", tree_map([&](const Value& d) { return w * d; }, c.update));
        out.emplace_back("unclipped", Tree(w * astype(less_equal(c.norm, astype(clip, dt)), dt)));
        return Tree::dict(std::move(out));
      },
      broadcast(p), broadcast(tree_values(shared)), clients["data"], weights, client_clip,
      client_states);
  std::vector<std::pair<std::string, Tree>> summed = {{"delta", per_client["delta"]},
                                                      {"loss", per_client["loss"]},
                                                      {"weight", per_client["weight"]}};
  if (dp) summed.emplace_back("unclipped", per_client["unclipped"]);
  // The one aggregation of the round: secure summation plugs in here (spec.aggregate).
  Tree sums = spec.aggregate ? spec.aggregate(Tree::dict(std::move(summed)))
                             : reduce_sum(Tree::dict(std::move(summed)));
  Value total = sums["weight"];
  Value mean_loss = safe_div(sums["loss"].value(), total);
  std::vector<std::pair<std::string, Tree>> result;
  if (carried) result.emplace_back("client_state", per_client["client_state"]);
  if (spec.metrics) result.emplace_back("metrics", per_client["metrics"]);
  result.emplace_back("loss", Tree(mean_loss));
  if (dp) {
    DpAggregate agg = dp_aggregate(*spec.dp, sums, tree_values(state["dp"]));
    auto [new_params, new_server] = server.apply(p, agg.delta, server_state);
    result.emplace_back("params", new_params);
    result.emplace_back(
        "state", Tree::dict({{"dp", Tree::dict({{"clip", Tree(agg.clip)}, {"key", Tree(agg.key)}})},
                             {"server", new_server}}));
    return Tree::dict(std::move(result));
  }
  Tree delta = tree_map([&](const Value& d) { return safe_div(d, total); }, sums["delta"]);
  auto [new_params, new_state] = server.apply(p, delta, server_state);
  // A round without data leaves the server untouched (momentum and Adam moments included).
  Value has = greater(total, scalar_like(total, 0.0));
  auto keep = [&](const Value& updated, const Value& old) { return where(has, updated, old); };
  Tree old_state = tree_values(server_state);
  result.emplace_back("params", tree_map(keep, new_params, p));
  result.emplace_back("state", tree_map(keep, new_state, old_state));
  return Tree::dict(std::move(result));
}

DRX_PUBLIC_OP("optim::fedavg_round",
              "(spec: RoundSpec) -> RoundFn | (loss: LossFn, client_tx: GradientTransformation, "
              "server: ServerUpdate, cohort: int64, spec: FederatedRoundSpec = {}) -> "
              "FederatedRoundFn",
              "One federated-averaging round as a traced function: the MLP's, or any model's.");
FederatedRoundFn fedavg_round(LossFn loss, GradientTransformation client_tx, ServerUpdate server,
                              int64_t cohort, FederatedRoundSpec spec) {
  check_config(loss, client_tx, server, cohort, spec);
  auto round = [=](Tree params, Tree state, Tree clients, Tree shared) -> Tree {
    return fedavg_round_body(loss, client_tx, server, cohort, spec, params, state, clients, shared);
  };
  TreeFn placed =
      program_fn({{"clients", cohort}}, erase(std::move(round)), {"", "", "clients", ""});
  // The clients' leaves are checked before program() places them, so that a wrong shape is
  // reported by this round rather than by the placement.
  const std::string op = spec.name;
  return FederatedRoundFn([placed, cohort, op](const std::vector<Tree>& args) -> Tree {
    if (args.size() == 4)
      for (const Tree& leaf : tree_leaves(args[2])) {
        const Type t = leaf.kind() == Tree::Kind::value
                           ? leaf.value().type()
                           : Type{leaf.array().dtype(), leaf.array().shape(), ""};
        if (t.shape.empty() || t.shape[0] != cohort ||
            (!t.placement.empty() && t.placement != "clients"))
          throw Error(op +
                      ": every leaf of clients (data, weights, state) must have the leading "
                      "axis " +
                      std::to_string(cohort) + " (the cohort) and be placed at clients, got " +
                      t.str());
      }
    return placed(args);
  });
}

}  // namespace drx::optim
