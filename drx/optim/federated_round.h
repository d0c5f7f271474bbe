#pragma once
// The federated round over any model and data Tree: clients start from the server params,
// run local steps of a client optimizer on their own batches, and the server applies its
// optimizer to the weighted mean of their updates (FedAvg and the FedOpt family, McMahan et al.
// 2017, Reddi et al. 2021). The MLP round (optim.h) and the transformer rounds (lm.h) are
// configurations of it.
//
// One round, for a cohort of K clients with weights w_k and client data D_k:
//   client k: p = params, s = client_tx.init(params) (or its carried state); for each local
//     step t: (loss_t, g) = value_and_grad(loss_fn)(p, batch_t);  (u, s) = client_tx.update(g,
//     s, p);  p = p + u.  delta_k = p - params.
//   server: delta = sum_k w_k delta_k / sum_k w_k; (params, state) = server step on delta
//     (a GradientTransformation applied to the pseudo-gradient -delta, or a ServerOptimizer).
//   A round of total weight 0 changes neither params nor server state.
// Extension points (FederatedRoundSpec): a per-step weight that skips empty steps exactly, a
// per-client preparation of the batches from shared (broadcast) inputs, carried client
// optimizer state, per-client metrics, DP-FedAvg, and the aggregation that secure summation
// will replace.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "drx/optim/optim.h"
#include "drx/optim/transform.h"
#include "drx/trace/function.h"
#include "drx/trace/tree.h"

namespace drx::optim {

// A model's mean loss on one local step's batch: (params, batch) -> [].
using LossFn = std::function<Value(const Tree& params, const Tree& batch)>;
// The weight of one local step's batch, its number of real examples: batch -> [].
using StepWeightFn = std::function<Value(const Tree& batch)>;

// The server's step on the round's mean client update delta: a GradientTransformation of the
// pseudo-gradient -delta (its state is tx.init(params)), or a ServerOptimizer (its apply()
// and state layout, which drx fedavg checkpoints).
struct ServerUpdate {
  ServerUpdate(const GradientTransformation& tx);  // NOLINT: implicit, fedavg_round(.., sgd(1))
  ServerUpdate(const ServerOptimizer& opt);        // NOLINT
  std::function<Tree(const Tree& params)> init;
  // (params, delta, state) -> {new params, new state}.
  std::function<std::pair<Tree, Tree>(const Tree&, const Tree&, const Tree&)> apply;
  std::string name;
};

struct FederatedRoundSpec {
  // Names the round in error messages ("fedavg_round", "lm_fedavg_round").
  std::string name = "fedavg_round";
  // Unset: every local step counts 1 and runs; a client's loss is the mean of its steps'
  // losses. Set: step t counts n_t = step_weight(batch_t) (its real examples); a step with
  // n_t == 0 is skipped exactly (params and client optimizer state, momentum included, are
  // unchanged: a cond), and a client's loss is sum_t loss_t max(n_t, 1) / max(sum_t n_t, 1),
  // the mean over its examples when loss_fn is a masked mean.
  StepWeightFn step_weight;
  // With step_weight: the leading steps in which every client has data run without the
  // check (a promise about the data; an empty step among them would still move momentum).
  int64_t full_steps = 0;
  // Per client, on its slices: (shared inputs broadcast to it, its data) -> its batches, a
  // Tree whose leaves have a leading [steps] axis (the local steps scan over it). Unset: the
  // client data are the batches. The MLP round gathers its rows from the shared dataset here.
  std::function<Tree(const Tree& shared, const Tree& data)> prepare;
  // The clients continue from the client optimizer states given as clients["state"] (leaves
  // [cohort, ...]), instead of client_tx.init(params), and the round returns theirs, placed,
  // as "client_state" (DiLoCo's inner states).
  bool client_state = false;
  // Per-client metrics: (client's params after its steps, start params, its batches, its
  // loss) -> a Tree of Values, returned placed as "metrics".
  std::function<Tree(const Tree& params, const Tree& start, const Tree& batches, const Value& loss)>
      metrics;
  // DP-FedAvg (DpSpec, optim.h): the weights are then 0/1 participation and the state is
  // dp_round_state(server state, ...).
  std::optional<DpSpec> dp;
  // The aggregation of the clients' weighted updates, losses and weights (a dict of Trees
  // placed at clients) to the server. Unset: reduce_sum. Secure summation replaces it here:
  // it must return the sum of every leaf over the clients.
  std::function<Tree(const Tree& placed)> aggregate;
};

// One round as a program over the placement "clients" of `cohort` clients:
//   (params Tree, state Tree (server.init(params), or dp_round_state(...) with DP),
//    clients: dict @clients {"data": Tree (leaves [cohort, ...]), "weights": floating
//      [cohort], and "state": the client optimizer states with spec.client_state},
//    shared: an unplaced Tree given to spec.prepare, broadcast (Tree() when none))
//   -> dict {"loss": [] weighted mean of the clients' losses, "params", "state",
//            "client_state" @clients (spec.client_state), "metrics" @clients (spec.metrics)}
// Computation is in the params' dtype (weights are converted). Throws drx::Error for a bad
// configuration now, and for inputs of the wrong structure, type or placement when traced.
using FederatedRoundFn = Function<Tree(Tree, Tree, Tree, Tree)>;
FederatedRoundFn fedavg_round(LossFn loss, GradientTransformation client_tx, ServerUpdate server,
                              int64_t cohort, FederatedRoundSpec spec = {});

// The same round on traced Values inside a program that declares the placement "clients"
// (callers with their own program signature, as the MLP and transformer rounds): clients
// holds the placed "data", "weights" (and "state") Values, shared the unplaced inputs.
Tree fedavg_round_body(const LossFn& loss, const GradientTransformation& client_tx,
                       const ServerUpdate& server, int64_t cohort, const FederatedRoundSpec& spec,
                       const Tree& params, const Tree& state, const Tree& clients,
                       const Tree& shared);

// One client's local steps from `start` with client optimizer state `opt_state` over its
// batches (leaves [steps, ...]; a scan, so the program does not grow with the steps), with
// step weights as in FederatedRoundSpec. Returns the final params and state and the client's
// loss (see FederatedRoundSpec::step_weight).
struct LocalSteps {
  Tree params, opt_state;
  Value loss;
};
LocalSteps local_steps(const LossFn& loss, const GradientTransformation& client_tx,
                       const Tree& start, const Tree& opt_state, const Tree& batches,
                       const StepWeightFn& step_weight = {}, int64_t full_steps = 0);

namespace detail {
// Throws drx::Error naming `op` unless the DP configuration is usable (finite noise multiplier
// >= 0, positive expected cohort, and for adaptive clipping a quantile in (0, 1] with a count
// noise that leaves the update some of the privacy budget).
void check_dp(const DpSpec& dp, const std::string& op);
}  // namespace detail

}  // namespace drx::optim
