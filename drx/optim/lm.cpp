// The language-model rounds and evaluation as drx programs over the placement "clients".
#include "drx/optim/lm.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "drx/mapreduce/mapreduce.h"
#include "drx/nn/nn.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/federated_round.h"
#include "drx/optim/tx_support.h"
#include "drx/trace/tree_math.h"

DRX_PUBLIC_OPS_FILE(optim_lm);

namespace drx::optim {

using detail::param_values;

namespace {

void check_spec(const LmRoundSpec& spec, const char* op) {
  spec.model.check();
  if (spec.cohort < 1 || spec.steps < 1 || spec.batch < 1)
    throw Error(std::string(op) + ": cohort, steps and batch must be >= 1, got " +
                std::to_string(spec.cohort) + ", " + std::to_string(spec.steps) + ", " +
                std::to_string(spec.batch));
  try {
    spec.client.transformation();
  } catch (const Error& e) {
    throw Error(std::string(op) + ": the local optimizer: " + e.what());
  }
}

void check_windows(const LmRoundSpec& spec, const Value& windows, const char* op) {
  const Type& t = windows.type();
  const Shape want = {spec.cohort, spec.steps, spec.batch, spec.model.context + 1};
  if (t.shape != want || t.placement != "clients" || !is_integer(t.dtype))
    throw Error(std::string(op) + ": windows must be integer " + shape_str(want) +
                " (clients, steps, batch, context + 1) placed at clients, got " + t.str());
}

// The model's mean next-token loss on one step's windows.
LossFn window_loss(const nn::TransformerConfig& model) {
  return
      [model](const Tree& p, const Tree& w) { return nn::transformer_loss(model, p, w.value()); };
}

}  // namespace

GradientTransformation LocalOptimizer::transformation() const {
  if (kind == "adamw") return adamw(lr, b1, b2, eps, weight_decay);
  if (kind == "sgd") return sgd(lr, momentum);
  throw Error("local optimizer: unknown kind '" + kind + "' (adamw or sgd)");
}

GradientTransformation OuterNesterov::transformation() const {
  if (!(lr >= 0) || !std::isfinite(lr) || !(momentum >= 0) || !(momentum < 1))
    throw Error("DiLoCo outer optimizer: lr must be finite and >= 0 and momentum in [0, 1), got " +
                std::to_string(lr) + " and " + std::to_string(momentum));
  return sgd(lr, momentum, /*nesterov=*/true);
}

DRX_PUBLIC_OP("optim::lm_fedavg_round", "(spec: LmRoundSpec) -> LmRoundFn",
              "One federated-averaging round of the transformer language model.");
LmRoundFn lm_fedavg_round(const LmRoundSpec& spec) {
  check_spec(spec, "lm_fedavg_round");
  spec.server.transformation();
  auto round = [spec](Tree params, Tree state, Value windows, Value weights) -> Tree {
    DType dt;
    param_values(params, "lm_fedavg_round", &dt);
    check_windows(spec, windows, "lm_fedavg_round");
    FederatedRoundSpec f;
    f.name = "lm_fedavg_round";
    return fedavg_round_body(
        window_loss(spec.model), spec.client.transformation(), spec.server, spec.cohort, f, params,
        state, Tree::dict({{"data", Tree(windows)}, {"weights", Tree(weights)}}), Tree());
  };
  return program({{"clients", spec.cohort}}, round, {"", "", "clients", "clients"});
}

DRX_PUBLIC_OP("optim::diloco_round", "(spec: LmRoundSpec, outer: OuterNesterov) -> DilocoRoundFn",
              "One DiLoCo round: inner steps per worker, then an outer Nesterov step.");
DilocoRoundFn diloco_round(const LmRoundSpec& spec, const OuterNesterov& outer) {
  check_spec(spec, "diloco_round");
  const GradientTransformation outer_opt = outer.transformation();
  auto round = [spec, outer_opt](Tree params, Tree state, Tree inner, Value windows) -> Tree {
    DType dt;
    Tree p = param_values(params, "diloco_round", &dt);
    check_windows(spec, windows, "diloco_round");
    for (const Tree& leaf : tree_leaves(inner))
      if (leaf.value().type().placement != "clients")
        throw Error(
            "diloco_round: the inner states must be placed at clients (one per worker, "
            "diloco_inner_init), got a leaf " +
            leaf.value().type().str());
    const GradientTransformation opt = spec.client.transformation();
    const nn::TransformerConfig model = spec.model;
    Tree per_worker = map_fn(
        [model, opt](Tree p0, Tree inner_k, Value windows_k) -> Tree {
          LocalSteps r = local_steps(window_loss(model), opt, p0, inner_k, windows_k);
          return Tree::dict(
              {{"inner", r.opt_state},
               {"loss", Tree(r.loss)},
               {"outer_grad", tree_map([](const Value& p0k, const Value& pk) { return p0k - pk; },
                                       p0, r.params)}});
        },
        broadcast(p), inner, windows);
    Tree mean = reduce_mean(
        Tree::dict({{"loss", per_worker["loss"]}, {"outer_grad", per_worker["outer_grad"]}}));
    auto [updates, next] = outer_opt.update(mean["outer_grad"], tree_values(state), p);
    return Tree::dict({{"inner", per_worker["inner"]},
                       {"loss", mean["loss"]},
                       {"params", apply_updates(p, updates)},
                       {"state", next}});
  };
  return program({{"clients", spec.cohort}}, round, {"", "", "clients", "clients"});
}

DRX_PUBLIC_OP("optim::diloco_inner_init", "(spec: LmRoundSpec, params: Tree) -> Tree",
              "The workers' first inner optimizer states.");
Tree diloco_inner_init(const LmRoundSpec& spec, const Tree& params) {
  const Tree one = spec.client.transformation().init(params);
  return tree_map(
      [&](const Array& a) {
        Shape s = a.shape();
        s.insert(s.begin(), spec.cohort);
        Array out(a.dtype(), s);
        for (int64_t k = 0; k < spec.cohort; ++k)
          std::memcpy(static_cast<char*>(out.raw()) + static_cast<size_t>(k) * a.nbytes(), a.raw(),
                      a.nbytes());
        return out;
      },
      one);
}

DRX_PUBLIC_OP("optim::lm_evaluate_fn", "(model: TransformerConfig, shards: int64) -> LmEvalFn",
              "Summed next-token cross-entropy of the language model over sharded windows.");
LmEvalFn lm_evaluate_fn(const nn::TransformerConfig& model, int64_t shards) {
  model.check();
  if (shards < 1) throw Error("lm_evaluate_fn: shards must be >= 1, got " + std::to_string(shards));
  auto eval = [model, shards](Tree params, Value windows, Value mask) -> Tree {
    DType dt;
    Tree p = param_values(params, "lm_evaluate_fn", &dt);
    const Type& t = windows.type();
    if (t.ndim() != 3 || t.shape[0] != shards || t.shape[2] != model.context + 1 ||
        t.placement != "clients" || !is_integer(t.dtype))
      throw Error("lm_evaluate_fn: windows must be integer [" + std::to_string(shards) + ", n, " +
                  std::to_string(model.context + 1) + "] placed at clients, got " + t.str());
    if (mask.type().shape != Shape{shards, t.shape[1]} || mask.type().placement != "clients")
      throw Error("lm_evaluate_fn: mask must be [" + std::to_string(shards) + ", " +
                  std::to_string(t.shape[1]) + "] placed at clients, got " + mask.type().str());
    Tree per_shard = map_fn(
        [model, dt](Tree pk, Value w, Value m) -> Tree {
          const int64_t n = w.shape()[0], T = model.context;
          Value logits = nn::transformer_logits(model, pk, slice(w, {0, 0}, {n, T}));
          Value ce = nn::softmax_cross_entropy(reshape(logits, {n * T, model.vocab}),
                                               reshape(slice(w, {0, 1}, {n, T + 1}), {n * T}));
          const Value mk = astype(m, dt);
          return Tree::dict({{"count", Tree(sum(mk) * static_cast<double>(T))},
                             {"loss_sum", Tree(sum(sum(reshape(ce, {n, T}), {1}) * mk))}});
        },
        broadcast(p), windows, mask);
    return reduce_sum(per_shard);
  };
  return program({{"clients", shards}}, eval, {"", "clients", "clients"});
}

}  // namespace drx::optim
