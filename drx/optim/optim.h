#pragma once
// Optimisers for federated training and the federated round as one drx program.
//
// Client: SGD with optional momentum, PyTorch convention (dampening 0, no Nesterov):
//   m = momentum * m + g;  p = p - lr * m      (momentum 0: p = p - lr * g, no buffer)
// A step whose batch is fully masked (sum(mask) == 0) is skipped exactly: p and m unchanged.
//
// Server: the pseudo-gradient is -delta, delta = weighted mean over clients of
// (client params - server params), weights = the clients' example counts.
//   fedavg:  x = x + lr * delta                         (lr 1: the weighted mean of the clients)
//   fedavgm: v = momentum * v + delta; x = x + lr * v   (Hsu et al. 2019)
//   fedadam: m = b1 m + (1 - b1) delta; v = b2 v + (1 - b2) delta^2;
//            x = x + lr * m / (sqrt(v) + eps)           (Reddi et al. 2021, no bias correction)
// A round whose clients hold no data (total weight 0) changes neither params nor server state.
#include <string>
#include <utility>

#include "drx/trace/function.h"
#include "drx/trace/tree.h"

namespace drx::optim {

struct ClientSgd {
  double lr = 0.05;
  double momentum = 0.0;  // 0 = plain SGD
};

enum class ServerKind { fedavg, fedavgm, fedadam };

struct ServerOptimizer {
  ServerKind kind = ServerKind::fedavg;
  double lr = 1.0;                               // server learning rate
  double momentum = 0.9;                         // fedavgm
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-3;  // fedadam (Reddi et al. 2021, tau = eps)

  // Initial state for params (a Tree of Arrays or of Values; the state has the same leaf kind):
  // fedavg: the empty list; fedavgm: {"momentum": zeros like params};
  // fedadam: {"m": zeros, "v": zeros}.
  Tree init(const Tree& params) const;
  // One server step on Values. Returns {new params, new state}.
  std::pair<Tree, Tree> apply(const Tree& params, const Tree& delta, const Tree& state) const;
};

// "fedavg" | "fedavgm" | "fedadam"; anything else throws drx::Error listing the choices.
ServerKind parse_server_kind(const std::string& name);
std::string server_kind_name(ServerKind kind);

struct RoundSpec {
  ClientSgd client;
  ServerOptimizer server;
  int64_t cohort = 10;  // clients per round (size of the "clients" placement)
  int64_t steps = 1;    // local steps (grid rows)
  int64_t batch = 32;
  // Leading steps in which every client of the cohort has at least one example: they run
  // without the check that skips empty steps (a cond), which costs a little per step. A
  // promise about the data: an empty step among them would still move client momentum.
  int64_t full_steps = 0;
};

// One federated round as a drx::program over the placement "clients":
//   (params Tree, state Tree, x_all [N, ...], y_all i32/i64[N],
//    idx i32[cohort, steps, batch] @clients, mask [cohort, steps, batch] @clients,
//    weights [cohort] @clients)
//   -> dict {"params": ..., "state": ..., "loss": []}
// Computation is in the params' dtype (x_all, mask and weights are converted). Clients gather their
// examples from the unplaced dataset with drx::take inside the map_fn body, run `steps` local SGD
// steps (a scan: the program does not grow with the steps), and return weight * (client params -
// server params) and weight * mean training loss, so every map_fn output feeds only a reduce_sum.
// The server divides by max(sum of weights, tiny). "loss" is the weighted mean over clients of each
// client's mean cross-entropy over the (example, step) visits of the round, taken before each
// step's update.
using RoundFn = Function<Tree(Tree, Tree, Value, Value, Value, Value, Value)>;
RoundFn fedavg_round(const RoundSpec& spec);

// Evaluation over shards (placement "clients", one shard per slot):
//   (params, x_all, y_all, idx i32[shards, steps, batch] @clients, mask @clients)
//   -> dict {"loss": [] mean cross-entropy over real examples, "accuracy": []}
// in the params' dtype (0 and 0 when there are no real examples).
using EvalFn = Function<Tree(Tree, Value, Value, Value, Value)>;
EvalFn evaluate_fn(int64_t shards);

}  // namespace drx::optim
