// The federated round and evaluation as drx programs over the placement "clients".
#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "drx/mapreduce/mapreduce.h"
#include "drx/nn/nn.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/federated_round.h"
#include "drx/optim/optim.h"
#include "drx/optim/tx_support.h"
#include "drx/trace/tree_math.h"

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

// A step's real examples: its mask's sum.
Value step_examples(const Tree& b) { return sum(b[2].value()); }

// A client's [steps, batch] grid of examples as the round's batches [x, y, mask] (x_rows and
// y_rows hold the grid's examples, step by step).
Tree grid_batches(const Value& x_rows, const Value& y_rows, const Value& mask) {
  const int64_t steps = mask.shape()[0], batch = mask.shape()[1];
  Shape x_shape = x_rows.shape();
  x_shape[0] = batch;
  x_shape.insert(x_shape.begin(), steps);
  return Tree::list(
      {Tree(reshape(x_rows, x_shape)), Tree(reshape(y_rows, {steps, batch})), Tree(mask)});
}

void check_sgd(const RoundSpec& spec) {
  auto bad = [](double v) { return !std::isfinite(v); };
  if (spec.cohort < 1)
    throw Error("fedavg_round: cohort must be >= 1, got " + std::to_string(spec.cohort));
  if (spec.steps < 0)
    throw Error("fedavg_round: steps must be >= 0, got " + std::to_string(spec.steps));
  if (spec.batch < 1)
    throw Error("fedavg_round: batch must be >= 1, got " + std::to_string(spec.batch));
  if (!spec.model.apply)
    throw Error("fedavg_round: the RoundSpec's model '" + spec.model.name +
                "' has no apply function (use nn::Model::mlp() or nn::Model::cnn())");
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
  if (spec.dp) detail::check_dp(*spec.dp, "fedavg_round");
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

// The policy the model runs under in a round or evaluation of params of dtype dt: the spec's
// where it computes in another dtype than its parameters' (bf16), else dt throughout (the model
// as written, in the params' dtype).
nn::Policy model_policy(const nn::Policy& policy, DType dt) {
  return policy.compute != policy.param ? policy : nn::Policy{dt, dt, dt};
}

// The round once its inputs are checked, as a configuration of the generic round: each client
// trains on batches that `prepare` makes from the shared inputs (broadcast) and its data, with
// the model's masked mean cross-entropy on each step's batch [x, y, mask].
Tree round_core(const RoundSpec& spec, DType dt, const Tree& params, const Tree& state,
                const Tree& shared, const Tree& data, const Value& weights,
                std::function<Tree(const Tree&, const Tree&)> prepare) {
  FederatedRoundSpec f;
  f.name = "fedavg_round";
  f.step_weight = step_examples;
  f.full_steps = spec.full_steps;
  f.prepare = std::move(prepare);
  f.dp = spec.dp;
  LossFn loss = [model = spec.model, policy = model_policy(spec.policy, dt)](const Tree& p,
                                                                             const Tree& b) {
    return nn::masked_mean_loss(model.apply(p, b[0].value(), policy), b[1].value(), b[2].value());
  };
  return fedavg_round_body(loss, spec.client.transformation(), spec.server, spec.cohort, f, params,
                           state, Tree::dict({{"data", data}, {"weights", Tree(weights)}}), shared);
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

// Registered with the generic overload, in federated_round.cpp.
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
    // Each client gathers its examples from the (large, shared) dataset: one gather per client
    // for all its steps.
    auto gather = [dt](const Tree& xy, const Tree& data) {
      const Value m = astype(data[1].value(), dt);
      const Value& ids = data[0].value();
      Value flat_idx = reshape(ids, {ids.shape()[0] * ids.shape()[1]});
      return grid_batches(take(xy[0].value(), flat_idx, 0), take(xy[1].value(), flat_idx, 0), m);
    };
    return round_core(spec, dt, params, state, Tree::list({Tree(astype(x_all, dt)), Tree(y_all)}),
                      Tree::list({Tree(idx), Tree(mask)}), weights, gather);
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
    DType dt;
    param_values(params, "fedavg_round", &dt);
    auto own_rows = [dt](const Tree&, const Tree& data) {
      const Value m = astype(data[2].value(), dt);
      return grid_batches(astype(data[0].value(), dt), data[1].value(), m);
    };
    return round_core(spec, dt, params, state, Tree(), Tree::list({Tree(x), Tree(y), Tree(mask)}),
                      weights, own_rows);
  };
  return program({{"clients", spec.cohort}}, round,
                 {"", "", "clients", "clients", "clients", "clients"});
}

DRX_PUBLIC_OP("optim::evaluate_fn", "(shards: int64, model: Model = Model::mlp()) -> EvalFn",
              "Loss and accuracy of a classifier (the MLP by default) over sharded data.");
EvalFn evaluate_fn(int64_t shards, const nn::Model& model) {
  if (shards < 1) throw Error("evaluate_fn: shards must be >= 1, got " + std::to_string(shards));
  if (!model.apply)
    throw Error("evaluate_fn: the model '" + model.name + "' has no apply function");
  auto eval = [shards, model](Tree params, Value x_all, Value y_all, Value idx,
                              Value mask) -> Tree {
    DType dt;
    Tree p = param_values(params, "evaluate_fn", &dt);
    check_data("evaluate_fn", shards, x_all, y_all, idx, mask);
    Tree per_shard = map_fn(
        [dt, model](Tree pk, Value xs, Value ys, Value idx_k, Value mask_k) -> Tree {
          const int64_t n = idx_k.shape()[0] * idx_k.shape()[1];
          Value ids = reshape(idx_k, {n});
          Value m = reshape(astype(mask_k, dt), {n});
          Value logits = model.apply(pk, take(xs, ids, 0), nn::Policy{dt, dt, dt});
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
