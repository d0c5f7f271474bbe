#pragma once
// The federated round as one drx program, and the client and server optimizers it uses.
// The optimizers themselves are GradientTransformations (drx/optim/transform.h,
// optimizers.h, schedules.h); ClientSgd and ServerOptimizer are the round's configuration of
// them, with the state layouts `drx fedavg` checkpoints.
//
// Client: optim::sgd(lr, momentum) (PyTorch's SGD with dampening 0, no Nesterov):
//   m = momentum * m + g;  p = p - lr * m      (momentum 0: p = p - lr * g, no buffer)
// A step whose batch is fully masked (sum(mask) == 0) is skipped exactly: p and m unchanged.
//
// Server: the pseudo-gradient is g = -delta, delta = weighted mean over clients of
// (client params - server params), weights = the clients' example counts, and the server
// optimizer is a GradientTransformation of g (ServerOptimizer::transformation()):
//   fedavg:     sgd(lr):           x = x + lr * delta   (lr 1: the weighted mean of the clients)
//   fedavgm:    sgd(lr, momentum): v = momentum * v + delta; x = x + lr * v   (Hsu et al. 2019)
//   fedadam, fedyogi, fedadagrad (Reddi et al. 2021, Algorithm 2; no bias correction,
//   eps = tau, the adaptivity):
//     m = b1 m + (1 - b1) delta
//     fedadam: v = b2 v + (1 - b2) delta^2;  fedyogi: v = v - (1 - b2) sign(v - delta^2) delta^2;
//     fedadagrad: v = v + delta^2
//     x = x + lr * m / (sqrt(v) + eps)
// with m and v starting at 0. The state keeps the paper's m, a moment of delta: the
// transformation's first moment is of g = -delta, its negative, and apply converts.
// A round whose clients hold no data (total weight 0) changes neither params nor server state.
#include <optional>
#include <string>
#include <utility>

#include "drx/nn/nn.h"
#include "drx/nn/precision.h"
#include "drx/optim/optimizers.h"
#include "drx/optim/schedules.h"
#include "drx/optim/transform.h"
#include "drx/trace/function.h"
#include "drx/trace/tree.h"

namespace drx::optim {

struct ClientSgd {
  double lr = 0.05;
  double momentum = 0.0;  // 0 = plain SGD
  // sgd(lr, momentum); its state is [] without momentum, else [{"trace"}, []].
  GradientTransformation transformation() const { return sgd(lr, momentum); }
};

enum class ServerKind { fedavg, fedavgm, fedadam, fedyogi, fedadagrad };

struct ServerOptimizer {
  ServerKind kind = ServerKind::fedavg;
  double lr = 1.0;                               // server learning rate
  double momentum = 0.9;                         // fedavgm
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-3;  // fedadam, fedyogi (beta2), fedadagrad
                                                 // (Reddi et al. 2021, tau = eps)

  // The optimizer of the pseudo-gradient -delta for this kind (see above).
  GradientTransformation transformation() const;
  // Initial state for params (a Tree of Arrays or of Values; the state has the same leaf kind):
  // fedavg: the empty list; fedavgm: {"momentum": zeros like params};
  // fedadam, fedyogi, fedadagrad: {"m": zeros, "v": zeros}.
  Tree init(const Tree& params) const;
  // One server step on Values (Array leaves become constants). Returns {new params, new state}.
  std::pair<Tree, Tree> apply(const Tree& params, const Tree& delta, const Tree& state) const;
};

// "fedavg" | "fedavgm" | "fedadam" | "fedyogi" | "fedadagrad"; anything else throws
// drx::Error listing the choices.
ServerKind parse_server_kind(const std::string& name);
std::string server_kind_name(ServerKind kind);

// DP-FedAvg in the round (McMahan et al. 2018; drx/privacy/dp_fedavg.h): each client's
// update is clipped to L2 norm `clip` and weighted uniformly by its participation weight (1
// for a sampled client, 0 for padding); the server adds N(0, (z clip)^2) to the sum and divides
// by expected_cohort, then applies the server optimizer as usual (always: a round with no
// participant still releases noise). With adaptive clipping (target_quantile > 0) the clip
// follows Andrew et al. 2021 and the update's noise multiplier is
// update_noise_multiplier(z, count_noise), so that the round as a whole has multiplier z.
// The round's state is then {"dp": {"clip": [] params dtype, "key": u32[2]}, "server": the
// server optimizer's state} (dp_round_state); the key is split every round.
struct DpSpec {
  double noise_multiplier = 0;  // z; 0: no noise
  double expected_cohort = 10;  // the fixed denominator: qN (Poisson) or the cohort size
  double target_quantile = 0;   // adaptive clipping off at 0
  double clip_lr = 0.2;         // eta
  double count_noise = 0;       // sigma_b (Andrew et al. suggest expected cohort / 20)
  bool adaptive() const { return target_quantile > 0; }
};

// The state a DP round starts from: the server optimizer's state with the initial clip and
// the noise key (random::key(seed), say). clip may be +inf (no clipping).
Tree dp_round_state(const Tree& server_state, double clip, const Array& key, DType dtype);
// The same, checked against the round's DpSpec as well: an infinite clip with noise
// (noise_multiplier > 0) is an error, since the noise's std z * clip would be infinite; with
// noise_multiplier 0 it keeps its meaning, no clipping. Build the state of a DP round with
// this one: the round itself reads the clip only when it runs.
Tree dp_round_state(const Tree& server_state, double clip, const Array& key, DType dtype,
                    const DpSpec& dp);

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
  std::optional<DpSpec> dp;  // DP-FedAvg (see DpSpec); weights are then 0/1 participation
  // The clients' products under a mixed-precision policy (nn::Policy::bf16(): bf16 operands,
  // f32 accumulation); parameters, updates and optimizer state stay in the params' dtype. A
  // policy that computes in its parameters' dtype (the default) leaves the round as written.
  nn::Policy policy;
  // The classifier the clients train: its logits for a step's batch rows (x_all's rows,
  // [batch, ...]) under `policy` (nn::Model). The MLP by default (params as nn::mlp_init);
  // nn::Model::cnn() trains McMahan et al.'s CNN (params as nn::cnn_init).
  nn::Model model = nn::Model::mlp();
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
// It is the generic round of drx/optim/federated_round.h with the model's (spec.model, the MLP
// by default) masked loss, the mask's sum as step weight and the gather as its per-client
// preparation.
using RoundFn = Function<Tree(Tree, Tree, Value, Value, Value, Value, Value)>;
RoundFn fedavg_round(const RoundSpec& spec);

// The same round with the clients holding their examples, as a federated runtime or a batch
// system runs it (each client's rows where they live):
//   (params, state, x [cohort, steps * batch, ...] @clients, y integer [cohort, steps * batch]
//    @clients, mask [cohort, steps, batch] @clients, weights [cohort] @clients) -> as above.
// Client k's x rows are x_all[idx[k]] flattened over (step, example), which fedavg_round
// gathers itself: the two give the same results bitwise.
using ClientDataRoundFn = Function<Tree(Tree, Tree, Value, Value, Value, Value)>;
ClientDataRoundFn fedavg_round_on_client_data(const RoundSpec& spec);

// Evaluation over shards (placement "clients", one shard per slot):
//   (params, x_all, y_all, idx i32[shards, steps, batch] @clients, mask @clients)
//   -> dict {"loss": [] mean cross-entropy over real examples, "accuracy": []}
// in the params' dtype (0 and 0 when there are no real examples), of `model`'s logits (the MLP
// by default; computed in the params' dtype throughout).
using EvalFn = Function<Tree(Tree, Value, Value, Value, Value)>;
EvalFn evaluate_fn(int64_t shards, const nn::Model& model = nn::Model::mlp());

}  // namespace drx::optim
