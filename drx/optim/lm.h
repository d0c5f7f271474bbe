#pragma once
// Federated training of a transformer language model (drx/nn/transformer.h) as drx programs
// over the placement "clients": the FedAvg family's round (every client starts from the server
// params with a fresh client optimizer) and DiLoCo's outer step (Douillard et al. 2023: a fixed
// set of workers, each continuing its own inner optimizer state), and the held-out evaluation.
// The local steps are a scan, so a round's program does not grow with them.
//
// A client's data are token windows i32[steps, batch, T + 1]: step s trains on windows[s] (the
// loss is nn::transformer_loss, the mean next-token cross-entropy in nats), and the client's
// training loss is the mean over its steps of each step's loss before its update.
#include <cstdint>
#include <string>

#include "drx/nn/transformer.h"
#include "drx/optim/optim.h"
#include "drx/trace/function.h"
#include "drx/trace/tree.h"

namespace drx::optim {

// The optimizer of the local (inner) steps.
struct LocalOptimizer {
  std::string kind = "adamw";  // adamw | sgd
  double lr = 3e-3;
  double momentum = 0.0;                    // sgd
  double b1 = 0.9, b2 = 0.999, eps = 1e-8;  // adamw (torch.optim.AdamW's defaults)
  double weight_decay = 0.01;               // adamw, on every parameter (PyTorch's default)
  // adamw(lr, b1, b2, eps, weight_decay) or sgd(lr, momentum). Throws drx::Error for another
  // kind or a bad hyperparameter.
  GradientTransformation transformation() const;
};

struct LmRoundSpec {
  nn::TransformerConfig model;
  LocalOptimizer client;
  ServerOptimizer server;  // FedAvg family: fedavg, fedavgm, fedadam, fedyogi, fedadagrad
  int64_t cohort = 8;      // clients (FedAvg) or workers (DiLoCo)
  int64_t steps = 8;       // local steps per round
  int64_t batch = 8;       // windows per step
};

// One FedAvg-family round:
//   (params, server state, windows i32[cohort, steps, batch, T + 1] @clients,
//    weights [cohort] @clients) -> {"loss": [], "params", "state"}
// delta = sum_k w_k (params_k - params) / sum_k w_k; the server optimizer applies it
// (ServerOptimizer, drx/optim/optim.h). "loss" is the weighted mean of the clients' training
// losses (nats). A round of total weight 0 changes nothing.
// It is the generic round of drx/optim/federated_round.h with nn::transformer_loss.
using LmRoundFn = Function<Tree(Tree, Tree, Value, Value)>;
LmRoundFn lm_fedavg_round(const LmRoundSpec& spec);

// DiLoCo's outer optimizer: SGD with Nesterov momentum (PyTorch's SGD(nesterov=True),
// dampening 0) on the outer gradient g = params - mean_k params_k:
//   buf = momentum buf + g;  params = params - lr (g + momentum buf)   (buf starts at 0).
struct OuterNesterov {
  double lr = 0.7, momentum = 0.9;  // the paper's
  GradientTransformation transformation() const;
};

// One DiLoCo outer step over the `cohort` workers:
//   (params, outer state, inner states @clients (each leaf [workers, ...]),
//    windows i32[workers, steps, batch, T + 1] @clients)
//   -> {"inner": the workers' inner states after the step @clients, "loss": [], "params", "state"}
// Worker k starts from params with ITS inner state and runs `steps` inner steps; the workers
// count equally. "loss" is the mean of the workers' training losses (nats).
// The workers' inner steps are optim::local_steps (federated_round.h); the outer step stays
// its own: an unweighted reduce_mean of params - params_k, whose bits differ from FedAvg's
// weighted sum.
using DilocoRoundFn = Function<Tree(Tree, Tree, Tree, Value)>;
DilocoRoundFn diloco_round(const LmRoundSpec& spec, const OuterNesterov& outer);
// The workers' first inner states: the local optimizer's init, stacked `workers` times (Arrays).
Tree diloco_inner_init(const LmRoundSpec& spec, const Tree& params);

// Held-out evaluation over shards (placement "clients"):
//   (params, windows i32[shards, n, T + 1] @clients, mask [shards, n] @clients)
//   -> {"loss_sum": [] summed next-token cross-entropy (nats) over the unmasked windows'
//       positions, "count": [] their number of positions}
using LmEvalFn = Function<Tree(Tree, Value, Value)>;
LmEvalFn lm_evaluate_fn(const nn::TransformerConfig& model, int64_t shards);

}  // namespace drx::optim
