// The federated round and evaluation as drx programs over the placement "clients".
#include <cmath>
#include <string>

#include "drx/mapreduce/mapreduce.h"
#include "drx/nn/nn.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/optim.h"
#include "drx/optim/tx_support.h"
#include "drx/privacy/dp_fedavg.h"
#include "drx/random/random.h"
#include "drx/trace/tree_math.h"
#include "drx/transforms/api.h"
#include "drx/transforms/cond.h"
#include "drx/transforms/loops.h"

DRX_PUBLIC_OPS_FILE(optim_round);

namespace drx::optim {

using detail::param_values;

namespace {

// Checks the dataset and the per-client batch grids; returns the grid's [steps, batch].
std::pair<int64_t, int64_t> check_data(const char* op, int64_t clients, const Value& x,
                                       const Value& y, const Value& idx, const Value& mask) {
  const Type& xt = x.type();
  const Type& yt = y.type();
  const Type& it = idx.type();
  const Type& mt = mask.type();
  if (xt.shape.empty() || !is_floating(xt.dtype) || !xt.placement.empty())
    throw Error(std::string(op) + ": x_all must be an unplaced floating array [N, ...], got " +
                xt.str());
  if (yt.shape.size() != 1 || !is_integer(yt.dtype) || yt.shape[0] != xt.shape[0] ||
      !yt.placement.empty())
    throw Error(std::string(op) + ": y_all must be unplaced integer labels [" +
                std::to_string(xt.shape[0]) + "] (one per row of x_all " + xt.str() + "), got " +
                yt.str());
  if (it.shape.size() != 3 || it.shape[0] != clients || !is_integer(it.dtype) ||
      it.placement != "clients")
    throw Error(std::string(op) + ": idx must be integer [" + std::to_string(clients) +
                ", steps, batch] placed at clients, got " + it.str());
  if (mt.shape != it.shape || mt.placement != "clients" || mt.dtype == DType::bool_)
    throw Error(std::string(op) + ": mask must be numeric with idx's shape " + it.str() +
                ", placed at clients, got " + mt.str());
  return {it.shape[1], it.shape[2]};
}

Value batch_loss(Tree p, Value x, Value y, Value mask) {
  return nn::masked_mean_loss(nn::mlp_apply(p, x), y, mask);
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

// One client's local training on its [steps, batch] grid of examples (x_rows and y_rows hold
// the grid's examples, step by step); returns its params and the sum and count of its
// per-example training losses.
struct LocalResult {
  Tree params;
  Value loss_sum, count;
};
LocalResult local_train_rows(const GradientTransformation& opt, int64_t full_steps,
                             const Tree& start, const Value& x_rows, const Value& y_rows,
                             const Value& mask) {
  auto step_grad = value_and_grad(batch_loss);
  Value zero = fill({}, 0.0, mask.dtype());
  const int64_t steps = mask.shape()[0], batch = mask.shape()[1];
  Shape x_shape = x_rows.shape();
  x_shape[0] = batch;
  x_shape.insert(x_shape.begin(), steps);
  Tree per_step = Tree::list(
      {Tree(reshape(x_rows, x_shape)), Tree(reshape(y_rows, {steps, batch})), Tree(mask)});
  auto update = [&](const Tree& o) {
    Tree pv = o[0]["p"];
    const Value& mask_b = o[3].value();
    auto [loss, g] = step_grad(pv, o[1].value(), o[2].value(), mask_b);
    // The masked mean loss divides by max(n, 1); undo that for the client's running sum.
    Value sum_b = o[0]["loss_sum"].value() + loss * maximum(sum(mask_b), 1.0);
    auto [updates, opt_state] = opt.update(g, o[0]["opt"], pv);
    return Tree::dict({{"count", o[0]["count"]},
                       {"loss_sum", Tree(sum_b)},
                       {"opt", opt_state},
                       {"p", apply_updates(pv, updates)}});
  };
  auto skip = [](const Tree& o) { return o[0]; };
  // The local steps as scans (one step traced once, whatever the step count): the leading
  // steps every client has data in run the update directly; in the others a step without
  // real examples is skipped, momentum included (a cond), so padded steps of uneven clients
  // cost nothing.
  auto local_steps = [&](bool may_be_empty) {
    return [&, may_be_empty](const Tree& c, const Tree& x) -> std::pair<Tree, Tree> {
      const Value& mb = x[2].value();
      Value n = sum(mb);
      Tree state = Tree::dict({{"count", Tree(c["count"].value() + n)},
                               {"loss_sum", c["loss_sum"]},
                               {"opt", c["opt"]},
                               {"p", c["p"]}});
      Tree operands = Tree::list({state, x[0], x[1], x[2]});
      return {may_be_empty ? cond(greater(n, scalar_like(n, 0.0)), update, skip, operands)
                           : update(operands),
              Tree()};
    };
  };
  Tree carry = Tree::dict(
      {{"count", Tree(zero)}, {"loss_sum", Tree(zero)}, {"opt", opt.init(start)}, {"p", start}});
  if (full_steps > 0)
    carry = scan(local_steps(false), carry, step_range(per_step, 0, full_steps)).first;
  if (full_steps < steps)
    carry = scan(local_steps(true), carry, step_range(per_step, full_steps, steps)).first;
  return {carry["p"], carry["loss_sum"].value(), carry["count"].value()};
}

// The same, gathering the client's examples from the (large, shared) dataset first: one gather
// per client for all its steps.
LocalResult local_train(const GradientTransformation& opt, int64_t full_steps, const Tree& start,
                        const Value& xs, const Value& ys, const Value& idx, const Value& mask) {
  const int64_t steps = idx.shape()[0], batch = idx.shape()[1];
  Value flat_idx = reshape(idx, {steps * batch});
  return local_train_rows(opt, full_steps, start, take(xs, flat_idx, 0), take(ys, flat_idx, 0),
                          mask);
}

// Divides by the total weight, guarded so that an empty cohort gives 0, not NaN.
Value safe_div(const Value& x, const Value& total) {
  return x / maximum(total, x.dtype() == DType::f64 ? 1e-300 : 1e-30);
}

void check_sgd(const RoundSpec& spec) {
  auto bad = [](double v) { return !std::isfinite(v); };
  if (spec.cohort < 1)
    throw Error("fedavg_round: cohort must be >= 1, got " + std::to_string(spec.cohort));
  if (spec.steps < 0)
    throw Error("fedavg_round: steps must be >= 0, got " + std::to_string(spec.steps));
  if (spec.batch < 1)
    throw Error("fedavg_round: batch must be >= 1, got " + std::to_string(spec.batch));
  if (spec.full_steps < 0 || spec.full_steps > spec.steps)
    throw Error("fedavg_round: full_steps must be in [0, steps = " + std::to_string(spec.steps) +
                "], got " + std::to_string(spec.full_steps));
  const ClientSgd& c = spec.client;
  const ServerOptimizer& s = spec.server;
  if (bad(c.lr) || bad(c.momentum) || c.momentum < 0 || bad(s.lr) || bad(s.momentum) ||
      bad(s.beta1) || bad(s.beta2) || bad(s.eps) || s.eps < 0)
    throw Error(
        "fedavg_round: learning rates, momenta and betas must be finite, momentum and eps "
        "non-negative");
  // Building the optimizers checks their hyperparameters now, not when the round is traced.
  try {
    c.transformation();
  } catch (const Error& e) {
    throw Error(std::string("fedavg_round: the client optimizer: ") + e.what());
  }
  try {
    s.transformation();
  } catch (const Error& e) {
    throw Error(std::string("fedavg_round: the server optimizer: ") + e.what());
  }
}

void check_dp(const RoundSpec& spec) {
  if (!spec.dp) return;
  const DpSpec& d = spec.dp.value();
  if (!(d.noise_multiplier >= 0) || !std::isfinite(d.noise_multiplier))
    throw Error("fedavg_round: DP noise multiplier must be finite and >= 0, got " +
                std::to_string(d.noise_multiplier));
  if (!(d.expected_cohort > 0) || !std::isfinite(d.expected_cohort))
    throw Error("fedavg_round: DP expected cohort must be positive, got " +
                std::to_string(d.expected_cohort));
  if (d.adaptive()) {
    if (d.target_quantile > 1 || !(d.clip_lr >= 0) || !(d.count_noise >= 0))
      throw Error(
          "fedavg_round: adaptive clipping needs a target quantile in (0, 1] and "
          "non-negative clip learning rate and count noise");
    if (d.noise_multiplier > 0) privacy::update_noise_multiplier(d.noise_multiplier, d.count_noise);
  }
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

}  // namespace

DRX_PUBLIC_OP("optim::dp_round_state",
              "(server_state: Tree, clip: double, key: Array, dtype: DType) -> Tree | "
              "(server_state: Tree, clip: double, key: Array, dtype: DType, dp: DpSpec) -> Tree",
              "The state a DP-FedAvg round starts from.");
Tree dp_round_state(const Tree& server_state, double clip, const Array& key, DType dtype) {
  if (!(clip > 0))
    throw Error("dp_round_state: clip must be > 0 (or +inf for none), got " + std::to_string(clip));
  if (key.dtype() != DType::u32 || key.shape() != Shape{2})
    throw Error("dp_round_state: the key must be u32[2] (drx::random::key), got " +
                std::string(dtype_name(key.dtype())) + shape_str(key.shape()));
  return Tree::dict(
      {{"dp", Tree::dict({{"clip", Tree(full({}, clip, dtype))}, {"key", Tree(key)}})},
       {"server", server_state}});
}

Tree dp_round_state(const Tree& server_state, double clip, const Array& key, DType dtype,
                    const DpSpec& dp) {
  RoundSpec spec;
  spec.dp = dp;
  check_dp(spec);
  if (std::isinf(clip) && dp.noise_multiplier > 0)
    throw Error("dp_round_state: clip inf with noise multiplier " +
                std::to_string(dp.noise_multiplier) +
                ": the noise std z * clip is infinite; an infinite clip (no clipping) has "
                "unbounded sensitivity, so it goes only with noise multiplier 0");
  return dp_round_state(server_state, clip, key, dtype);
}

namespace {

// The round once its inputs are checked: `data` is what each client trains on, a list of
// placed leaves: [x_all, y_all, idx] (the shared dataset, broadcast, and the client's example
// ids) or [x rows, y rows] (the client's own examples).
Tree round_core(const RoundSpec& spec, const Tree& params, const Tree& state, const Tree& data,
                const Value& mask, const Value& weights) {
  DType dt;
  Tree p = param_values(params, "fedavg_round", &dt);
  const Type& wt = weights.type();
  if (wt.shape != Shape{spec.cohort} || wt.placement != "clients" || !is_floating(wt.dtype))
    throw Error("fedavg_round: weights must be floating [" + std::to_string(spec.cohort) +
                "] placed at clients, got " + wt.str());
  const GradientTransformation client_opt = spec.client.transformation();
  const int64_t full_steps = spec.full_steps;
  const bool dp = spec.dp.has_value();
  if (dp &&
      (state.kind() != Tree::Kind::dict || !state.contains("dp") || !state.contains("server")))
    throw Error(
        "fedavg_round: with DP the state must be {\"dp\": {\"clip\", \"key\"}, "
        "\"server\": ...} (optim::dp_round_state), got " +
        state.structure());
  Tree server_state = dp ? state["server"] : state;
  // The clients read the clip only under DP (an empty tree otherwise: no operand).
  Tree client_clip = dp ? Tree(broadcast(tree_values(state["dp"])["clip"].value())) : Tree();
  Tree per_client = map_fn(
      [client_opt, dt, full_steps, dp](Tree p0, Tree data_k, Value mask_k, Value w_k,
                                       Tree clip_k) -> Tree {
        Value w = astype(w_k, dt);
        const Value m = astype(mask_k, dt);
        LocalResult r = data_k.size() == 3
                            ? local_train(client_opt, full_steps, p0, data_k[0].value(),
                                          data_k[1].value(), data_k[2].value(), m)
                            : local_train_rows(client_opt, full_steps, p0,
                                               astype(data_k[0].value(), dt), data_k[1].value(), m);
        std::vector<std::pair<std::string, Tree>> out = {
            {"loss", Tree(w * (r.loss_sum / maximum(r.count, 1.0)))}, {"weight", Tree(w)}};
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
      broadcast(p), data, mask, weights, client_clip);
  Tree sums = reduce_sum(per_client);
  Value total = sums["weight"];
  Value loss = safe_div(sums["loss"].value(), total);
  if (dp) {
    DpAggregate agg = dp_aggregate(*spec.dp, sums, tree_values(state["dp"]));
    auto [new_params, new_server] = spec.server.apply(p, agg.delta, server_state);
    return Tree::dict(
        {{"loss", loss},
         {"params", new_params},
         {"state",
          Tree::dict({{"dp", Tree::dict({{"clip", Tree(agg.clip)}, {"key", Tree(agg.key)}})},
                      {"server", new_server}})}});
  }
  Tree delta = tree_map([&](const Value& d) { return safe_div(d, total); }, sums["delta"]);
  auto [new_params, new_state] = spec.server.apply(p, delta, server_state);
  // A round without data leaves the server untouched (momentum and Adam moments included).
  Value has = greater(total, scalar_like(total, 0.0));
  auto keep = [&](const Value& updated, const Value& old) { return where(has, updated, old); };
  Tree old_state = tree_values(server_state);
  return Tree::dict({{"loss", loss},
                     {"params", tree_map(keep, new_params, p)},
                     {"state", tree_map(keep, new_state, old_state)}});
}

void check_grid(const RoundSpec& spec, const Value& mask) {
  const Type& mt = mask.type();
  if (mt.shape != Shape{spec.cohort, spec.steps, spec.batch} || mt.placement != "clients" ||
      mt.dtype == DType::bool_)
    throw Error("fedavg_round: mask must be numeric [" + std::to_string(spec.cohort) + ", " +
                std::to_string(spec.steps) + ", " + std::to_string(spec.batch) +
                "] (cohort, the RoundSpec's steps and batch) placed at clients, got " + mt.str());
}

}  // namespace

DRX_PUBLIC_OP("optim::fedavg_round", "(spec: RoundSpec) -> RoundFn",
              "One federated-averaging round as a traced function.");
RoundFn fedavg_round(const RoundSpec& spec) {
  check_sgd(spec);
  check_dp(spec);
  auto round = [spec](Tree params, Tree state, Value x_all, Value y_all, Value idx, Value mask,
                      Value weights) -> Tree {
    DType dt;
    param_values(params, "fedavg_round", &dt);
    auto [steps, batch] = check_data("fedavg_round", spec.cohort, x_all, y_all, idx, mask);
    if (steps != spec.steps || batch != spec.batch)
      throw Error("fedavg_round: idx " + idx.type().str() +
                  " does not match the RoundSpec's steps " + std::to_string(spec.steps) +
                  " and batch " + std::to_string(spec.batch));
    Tree data = Tree::list({Tree(broadcast(astype(x_all, dt))), Tree(broadcast(y_all)), Tree(idx)});
    return round_core(spec, params, state, data, mask, weights);
  };
  return program({{"clients", spec.cohort}}, round,
                 {"", "", "", "", "clients", "clients", "clients"});
}

DRX_PUBLIC_OP("optim::fedavg_round_on_client_data", "(spec: RoundSpec) -> ClientDataRoundFn",
              "A federated-averaging round on data already split per client.");
ClientDataRoundFn fedavg_round_on_client_data(const RoundSpec& spec) {
  check_sgd(spec);
  check_dp(spec);
  auto round = [spec](Tree params, Tree state, Value x, Value y, Value mask,
                      Value weights) -> Tree {
    check_grid(spec, mask);
    const int64_t rows = spec.steps * spec.batch;
    const Type& xt = x.type();
    const Type& yt = y.type();
    if (xt.ndim() < 2 || xt.shape[0] != spec.cohort || xt.shape[1] != rows ||
        xt.placement != "clients" || !is_floating(xt.dtype))
      throw Error("fedavg_round_on_client_data: x must be floating [" +
                  std::to_string(spec.cohort) + ", " + std::to_string(rows) +
                  ", ...] (each client's steps * batch examples) placed at clients, got " +
                  xt.str());
    if (yt.shape != Shape{spec.cohort, rows} || yt.placement != "clients" || !is_integer(yt.dtype))
      throw Error("fedavg_round_on_client_data: y must be integer labels [" +
                  std::to_string(spec.cohort) + ", " + std::to_string(rows) +
                  "] placed at clients, got " + yt.str());
    return round_core(spec, params, state, Tree::list({Tree(x), Tree(y)}), mask, weights);
  };
  return program({{"clients", spec.cohort}}, round,
                 {"", "", "clients", "clients", "clients", "clients"});
}

DRX_PUBLIC_OP("optim::evaluate_fn", "(shards: int64) -> EvalFn",
              "Loss and accuracy of an MLP over sharded data.");
EvalFn evaluate_fn(int64_t shards) {
  if (shards < 1) throw Error("evaluate_fn: shards must be >= 1, got " + std::to_string(shards));
  auto eval = [shards](Tree params, Value x_all, Value y_all, Value idx, Value mask) -> Tree {
    DType dt;
    Tree p = param_values(params, "evaluate_fn", &dt);
    check_data("evaluate_fn", shards, x_all, y_all, idx, mask);
    Tree per_shard = map_fn(
        [dt](Tree pk, Value xs, Value ys, Value idx_k, Value mask_k) -> Tree {
          const int64_t n = idx_k.shape()[0] * idx_k.shape()[1];
          Value ids = reshape(idx_k, {n});
          Value m = reshape(astype(mask_k, dt), {n});
          Value logits = nn::mlp_apply(pk, take(xs, ids, 0));
          Value labels = take(ys, ids, 0);
          return Tree::dict({{"ce", sum(m * nn::softmax_cross_entropy(logits, labels))},
                             {"correct", sum(m * nn::correct(logits, labels))},
                             {"count", sum(m)}});
        },
        broadcast(p), broadcast(astype(x_all, dt)), broadcast(y_all), idx, mask);
    Tree s = reduce_sum(per_shard);
    Value n = maximum(s["count"].value(), 1.0);
    return Tree::dict({{"accuracy", s["correct"].value() / n}, {"loss", s["ce"].value() / n}});
  };
  return program({{"clients", shards}}, eval, {"", "", "", "clients", "clients"});
}

}  // namespace drx::optim
